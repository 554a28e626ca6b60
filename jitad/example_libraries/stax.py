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

__all__ = ["serial", "parallel", "Dense", "Conv", "GeneralConv", "Flatten", "Identity", "Dropout", "FanOut",
           "FanInSum", "FanInConcat", "Relu", "Tanh", "Sigmoid", "Softplus", "LogSoftmax", "Softmax", "Exp", "Gelu",
           "Elu", "LeakyRelu", "Selu", "MaxPool", "SumPool", "AvgPool", "BatchNorm", "shape_dependent",
           "elementwise", "glorot", "glorot_normal", "normal", "randn", "zeros", "ones", "relu", "log_softmax",
           "logsoftmax", "softmax", "softplus", "sigmoid", "elu", "leaky_relu", "gelu", "selu", "standardize"]


# -- initializers (jax.nn.initializers' names): init(key, shape, dtype) -> array ---------

normal = nn.initializers.normal
glorot_normal = nn.initializers.glorot_normal
zeros = nn.initializers.zeros
ones = nn.initializers.ones


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


def _spatial(spec, skip):
    return [c for c in spec if c not in skip]


def GeneralConv(dimension_numbers, out_chan, filter_shape, strides=None, padding="VALID", W_init=None,
                b_init=normal(1e-6)):
    """A 2-D convolution with its layouts named by `dimension_numbers = (lhs, rhs, out)`
    (e.g. `('NHWC', 'HWIO', 'NHWC')`: N batch, C channels, I/O kernel in/out channels,
    other letters the spatial axes, matched by letter); equal strides in both axes,
    padding 'VALID', or 'SAME' for a square odd kernel at stride 1."""
    lhs, rhs, out = dimension_numbers
    if len(filter_shape) != 2 or len(_spatial(lhs, "NC")) != 2 or sorted(_spatial(lhs, "NC")) != \
            sorted(_spatial(rhs, "IO")) or sorted(_spatial(lhs, "NC")) != sorted(_spatial(out, "NC")):
        raise ArgumentError(f"stax.GeneralConv: dimension_numbers {dimension_numbers} with filter {filter_shape}; "
                            "jitad convolves two spatial axes, named by the same letters in all three layouts")
    strides = tuple(strides or (1, 1))
    if len(set(strides)) != 1:
        raise ArgumentError(f"stax.GeneralConv: strides {strides}; jitad's conv2d takes the same stride on both axes")
    pad = _pads(padding, tuple(filter_shape), strides)
    spatial = _spatial(lhs, "NC")   # the order the filter shape gives the spatial axes in
    W_init = W_init or glorot_normal(in_axis=rhs.index("I"), out_axis=rhs.index("O"))

    def init_fun(key, input_shape):
        sizes = dict(zip(lhs, input_shape))
        window = dict(zip(spatial, filter_shape))
        kernel_shape = tuple(out_chan if c == "O" else sizes["C"] if c == "I" else window[c] for c in rhs)
        out_sizes = {"N": sizes["N"], "C": out_chan,
                     **{c: (sizes[c] + 2 * pad - window[c]) // strides[0] + 1 for c in spatial}}
        k1, k2 = random.split(key)
        bias_shape = tuple(out_chan if c == "C" else 1 for c in out)
        return tuple(out_sizes[c] for c in out), (W_init(k1, kernel_shape), b_init(k2, bias_shape))

    def apply_fun(params, inputs, **kwargs):
        W, b = params
        x = N.transpose(inputs, tuple(lhs.index(c) for c in "NC" + "".join(spatial)))
        w = N.transpose(W, tuple(rhs.index(c) for c in "OI" + "".join(spatial)))
        y = N.conv2d(x, w, stride=strides[0], padding=pad)   # N, C, spatial
        return N.transpose(y, tuple(("NC" + "".join(spatial)).index(c) for c in out)) + b
    return init_fun, apply_fun


def Conv(out_chan, filter_shape, strides=None, padding="VALID", W_init=None, b_init=normal(1e-6)):
    """A 2-D convolution of NHWC images with an HWIO kernel (`GeneralConv` with those layouts)."""
    return GeneralConv(("NHWC", "HWIO", "NHWC"), out_chan, filter_shape, strides, padding, W_init, b_init)


# -- pooling, composed of strided slices (one per window offset) -------------------------

def _pool_pads(size, window, stride, padding):
    """`(low, high)` padding of one axis: none for 'VALID'; for 'SAME', what makes
    ceil(size / stride) windows, split as JAX splits it (the extra one high)."""
    if padding == "VALID":
        return 0, 0
    if padding != "SAME":
        raise ArgumentError(f"stax pooling: padding={padding!r}; give 'VALID' or 'SAME'")
    total = max((-(-size // stride) - 1) * stride + window - size, 0)
    return total // 2, total - total // 2


def _pool(x, window, strides, padding, combine, init, spec):
    """Combine each window of the spatial axes of `x` (N and C at `spec`'s places, else
    first and last) with `combine`, the padding holding `init`."""
    shape = tuple(x.shape) if hasattr(x, "shape") else np.shape(x)
    nc = (0, len(shape) - 1) if spec is None else (spec.index("N"), spec.index("C"))
    axes = [d for d in range(len(shape)) if d not in nc]
    pads = [(0, 0)] * len(shape)
    for d, w, s in zip(axes, window, strides):
        pads[d] = _pool_pads(shape[d], w, s, padding)
    if any(p != (0, 0) for p in pads):
        from .. import numpy as jnp
        x = jnp.pad(x, pads, constant_values=init)
        shape = tuple(a + lo + hi for a, (lo, hi) in zip(shape, pads))
    counts = [(shape[d] - w) // s + 1 for d, w, s in zip(axes, window, strides)]
    out = None
    for offset in np.ndindex(*window):
        index = [slice(None)] * len(shape)
        for d, o, s, n in zip(axes, offset, strides, counts):
            index[d] = slice(o, o + (n - 1) * s + 1, s)
        part = x[tuple(index)]
        out = part if out is None else combine(out, part)
    return out


def _pooling(name, combine, init, average=False):
    def PoolingLayer(window_shape, strides=None, padding="VALID", spec=None):
        window_shape = tuple(window_shape)
        strides = tuple(strides or (1,) * len(window_shape))

        def init_fun(key, input_shape):
            nc = (0, len(input_shape) - 1) if spec is None else (spec.index("N"), spec.index("C"))
            axes = [d for d in range(len(input_shape)) if d not in nc]
            out = list(input_shape)
            for d, w, s in zip(axes, window_shape, strides):
                lo, hi = _pool_pads(input_shape[d], w, s, padding)
                out[d] = (input_shape[d] + lo + hi - w) // s + 1
            return tuple(out), ()

        def apply_fun(params, inputs, **kwargs):
            out = _pool(inputs, window_shape, strides, padding, combine, init, spec)
            if not average:
                return out
            if padding == "VALID":
                return out / math.prod(window_shape)
            shape = tuple(inputs.shape) if hasattr(inputs, "shape") else np.shape(inputs)
            count = _pool(np.ones(shape), window_shape, strides, padding, np.add, 0.0, spec)   # windows' sizes
            return out / count
        PoolingLayer.__name__ = name
        return init_fun, apply_fun
    PoolingLayer.__name__ = PoolingLayer.__qualname__ = name
    PoolingLayer.__doc__ = (f"A {name} layer: `window_shape` over the spatial axes (images NHWC, or as `spec` "
                            "names them), `strides`, padding 'VALID' or 'SAME'.")
    return PoolingLayer


MaxPool = _pooling("MaxPool", N.maximum, -np.inf)
SumPool = _pooling("SumPool", lambda a, b: a + b, 0.0)
AvgPool = _pooling("AvgPool", lambda a, b: a + b, 0.0, average=True)


# -- jax.nn's functions, as stax re-exports them ----------------------------------------

relu, log_softmax, softmax, softplus, sigmoid, elu, leaky_relu, gelu = \
    N.relu, N.log_softmax, N.softmax, nn.softplus, N.sigmoid, nn.elu, nn.leaky_relu, nn.gelu
logsoftmax = log_softmax
_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def selu(x):
    """The scaled exponential linear unit: `scale * (x if x > 0 else alpha * expm1(x))`."""
    positive = x > 0
    return _SELU_SCALE * N.where(positive, x, _SELU_ALPHA * N.expm1(N.where(positive, 0.0, x)))


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None):
    """`(x - mean) / sqrt(variance + epsilon)`, the moments over `axis` unless given."""
    if where is not None:
        raise ArgumentError("standardize: where= is not supported; select the entries first")
    if mean is None:
        mean = N.mean(x, axis=axis, keepdims=True)
    if variance is None:
        variance = N.mean(x * x, axis=axis, keepdims=True) - mean * mean
    return (x - mean) / N.sqrt(variance + epsilon)


def BatchNorm(axis=(0, 1, 2), epsilon=1e-5, center=True, scale=True, beta_init=None, gamma_init=None):
    """Normalize over `axis` (by default batch and spatial axes of NHWC images), then scale
    by `gamma` and shift by `beta` (one per remaining entry)."""
    axis = (axis,) if isinstance(axis, int) else tuple(axis)
    beta_init, gamma_init = beta_init or zeros, gamma_init or ones

    def init_fun(key, input_shape):
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axis)
        k1, k2 = random.split(key)
        return input_shape, (beta_init(k1, shape) if center else (), gamma_init(k2, shape) if scale else ())

    def apply_fun(params, x, **kwargs):
        beta, gamma = params
        ndim = len(x.shape) if hasattr(x, "shape") else np.ndim(x)
        expand = tuple(None if i in axis else slice(None) for i in range(ndim))
        z = standardize(x, axis, epsilon=epsilon)
        if scale:
            z = gamma[expand] * z
        return z + beta[expand] if center else z
    return init_fun, apply_fun


def shape_dependent(make_layer):
    """A layer made by `make_layer(input_shape)` once the input shape is known."""
    def init_fun(key, input_shape):
        return make_layer(input_shape)[0](key, input_shape)

    def apply_fun(params, inputs, **kwargs):
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)
    return init_fun, apply_fun


glorot = glorot_normal
randn = normal


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
Selu = elementwise(selu)
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
