"""JAX's `jax.example_libraries.stax` on jitad: a layer is a pair `(init_fun, apply_fun)`;
`init_fun(key, input_shape) -> (output_shape, params)` draws its parameters with a
`jitad.random` key, `apply_fun(params, inputs, **kwargs)` runs it (eagerly or staged).

>>> from jitad.example_libraries import stax
>>> init_fun, apply_fun = stax.serial(stax.Dense(16), stax.Relu, stax.Dense(3), stax.LogSoftmax)
>>> out_shape, params = init_fun(jitad.random.key(0), (-1, 8))
>>> apply_fun(params, np.ones((5, 8))).shape
(5, 3)

Images are NHWC and convolution kernels HWIO, as JAX's `Conv`.
"""
import math

import numpy as np

from .. import nn
from .. import numeric as N
from .. import random
from ..errors import ArgumentError

__all__ = ["serial", "parallel", "Dense", "Conv", "Flatten", "Identity", "Dropout", "FanOut", "FanInSum",
           "FanInConcat", "Relu", "Tanh", "Sigmoid", "Softplus", "LogSoftmax", "Softmax", "Exp", "Gelu",
           "Elu", "LeakyRelu", "elementwise", "glorot_normal", "normal", "zeros", "ones"]


# -- initializers (jax.nn.initializers' names): init(key, shape, dtype) -> array ---------

def normal(stddev=1e-2):
    """Normal entries of standard deviation `stddev`."""
    return lambda key, shape, dtype=np.float64: random.normal(key, shape, dtype) * stddev


def glorot_normal(in_axis=-2, out_axis=-1):
    """Glorot (Xavier) normal, truncated at 2 standard deviations, as JAX's."""
    def init(key, shape, dtype=np.float64):
        receptive = math.prod(shape) / shape[in_axis] / shape[out_axis]
        fan_avg = (shape[in_axis] + shape[out_axis]) * receptive / 2
        stddev = math.sqrt(1.0 / fan_avg) / 0.87962566103423978   # the std of a normal truncated to [-2, 2]
        return random.truncated_normal(key, -2.0, 2.0, shape, dtype) * stddev
    return init


def zeros(key, shape, dtype=np.float64):
    return np.zeros(shape, dtype)


def ones(key, shape, dtype=np.float64):
    return np.ones(shape, dtype)


# -- layers -------------------------------------------------------------------------------

def Dense(out_dim, W_init=glorot_normal(), b_init=normal()):
    """An affine layer `inputs @ W + b`."""
    def init_fun(key, input_shape):
        k1, k2 = random.split(key)
        return input_shape[:-1] + (out_dim,), (W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,)))

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        return N.matmul(inputs, W) + b
    return init_fun, apply_fun


def _pads(padding, kernel, strides):
    if padding == "VALID":
        return 0
    if padding == "SAME" and strides == (1, 1) and all(k % 2 for k in kernel) and kernel[0] == kernel[1]:
        return kernel[0] // 2
    raise ArgumentError(f"stax.Conv: padding={padding!r} with kernel {kernel} and strides {strides}; "
                        "jitad's conv2d takes 'VALID', or 'SAME' for a square odd kernel at stride 1")


def Conv(out_chan, filter_shape, strides=None, padding="VALID", W_init=None, b_init=normal(1e-6)):
    """A 2-D convolution of NHWC images with an HWIO kernel (equal strides in both axes)."""
    strides = tuple(strides or (1, 1))
    if len(set(strides)) != 1:
        raise ArgumentError(f"stax.Conv: strides {strides}; jitad's conv2d takes the same stride on both axes")
    pad = _pads(padding, tuple(filter_shape), strides)
    W_init = W_init or glorot_normal(in_axis=2, out_axis=3)

    def init_fun(key, input_shape):
        n, h, w, c = input_shape
        kh, kw = filter_shape
        oh, ow = (h + 2 * pad - kh) // strides[0] + 1, (w + 2 * pad - kw) // strides[0] + 1
        k1, k2 = random.split(key)
        return (n, oh, ow, out_chan), (W_init(k1, (kh, kw, c, out_chan)), b_init(k2, (1, 1, 1, out_chan)))

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        out = N.conv2d(N.transpose(inputs, (0, 3, 1, 2)), N.transpose(W, (3, 2, 0, 1)), stride=strides[0],
                       padding=pad)
        return N.transpose(out, (0, 2, 3, 1)) + b
    return init_fun, apply_fun


def elementwise(fun, **fun_kwargs):
    """A layer applying `fun` to its input."""
    return (lambda key, input_shape: (input_shape, ())), (lambda params, inputs, **kw: fun(inputs, **fun_kwargs))


Tanh = elementwise(N.tanh)
Relu = elementwise(N.relu)
Exp = elementwise(N.exp)
LogSoftmax = elementwise(N.log_softmax, axis=-1)
Softmax = elementwise(N.softmax, axis=-1)
Softplus = elementwise(nn.softplus)
Sigmoid = elementwise(N.sigmoid)
Elu = elementwise(nn.elu)
LeakyRelu = elementwise(nn.leaky_relu)
Gelu = elementwise(nn.gelu)
Identity = (lambda key, input_shape: (input_shape, ())), (lambda params, inputs, **kwargs: inputs)


def _flatten_init(key, input_shape):
    return (input_shape[0], math.prod(input_shape[1:])), ()


Flatten = _flatten_init, (lambda params, inputs, **kwargs: N.reshape(inputs, (N._shape(inputs)[0], -1)))


def Dropout(rate, mode="train"):
    """Keep each input with probability `rate` (JAX's stax meaning) scaled by 1/rate, given
    `rng=key` to `apply_fun` in training mode."""
    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.get("rng")
        if mode != "train":
            return inputs
        if rng is None:
            raise ArgumentError("stax.Dropout: apply_fun needs rng=key in training mode "
                                "(apply_fun(params, inputs, rng=key))")
        keep = random.bernoulli(rng, rate, N._shape(inputs))
        return N.where(keep, inputs / rate, 0.0)
    return (lambda key, input_shape: (input_shape, ())), apply_fun


def FanOut(num):
    """One input to `num` copies."""
    return (lambda key, input_shape: ([input_shape] * num, ())), (lambda params, inputs, **kw: [inputs] * num)


FanInSum = (lambda key, input_shapes: (input_shapes[0], ())), (lambda params, inputs, **kw: sum(inputs))


def FanInConcat(axis=-1):
    """Concatenate a list of inputs along `axis`."""
    def init_fun(key, input_shapes):
        ax = axis % len(input_shapes[0])
        size = sum(s[ax] for s in input_shapes)
        return input_shapes[0][:ax] + (size,) + input_shapes[0][ax + 1:], ()
    return init_fun, lambda params, inputs, **kw: N.concatenate(inputs, axis)


def serial(*layers):
    """Layers one after another; `apply_fun(..., rng=key)` gives each its own key."""
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(key, input_shape):
        params = []
        for init in init_funs:
            key, layer_key = random.split(key)
            input_shape, param = init(layer_key, input_shape)
            params.append(param)
        return input_shape, params

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, len(layers)) if rng is not None else (None,) * len(layers)
        for fun, param, r in zip(apply_funs, params, rngs):
            inputs = fun(param, inputs, rng=r, **kwargs)
        return inputs
    return init_fun, apply_fun


def parallel(*layers):
    """Layers side by side: a list of inputs to a list of outputs."""
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(key, input_shape):
        keys = random.split(key, len(layers))
        shapes_params = [init(k, s) for init, k, s in zip(init_funs, keys, input_shape)]
        return [s for s, _ in shapes_params], [p for _, p in shapes_params]

    def apply_fun(params, inputs, **kwargs):
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, len(layers)) if rng is not None else (None,) * len(layers)
        return [f(p, x, rng=r, **kwargs) for f, p, x, r in zip(apply_funs, params, inputs, rngs)]
    return init_fun, apply_fun
