"""`jitad.nn.initializers`: JAX's parameter initializers. Each builder returns
`init(key, shape, dtype=None)` (None: JAX's default float, float64, or float32 where
`jax_enable_x64` is off), drawing with `jitad.random`, which gives JAX's numbers for the
same key, so an initializer here equals JAX's:

>>> init = jitad.nn.initializers.glorot_uniform()
>>> init(jitad.random.PRNGKey(0), (3, 4)).shape
(3, 4)
"""
import math

import numpy as np

from .. import linalg as L
from .. import numeric as N
from .. import numpy as jnp
from .. import random
from ..config import config
from ..errors import ArgumentError, ShapeError

__all__ = ["Initializer", "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform", "he_normal",
           "he_uniform", "kaiming_normal", "kaiming_uniform", "lecun_normal", "lecun_uniform", "normal", "ones",
           "orthogonal", "truncated_normal", "uniform", "variance_scaling", "xavier_normal", "xavier_uniform",
           "zeros"]

TRUNCATED_STD = 0.87962566103423978   # the standard deviation of a standard normal cut at ±2


class Initializer:
    """What an initializer is: a callable `init(key, shape, dtype) -> array`."""

    def __call__(self, key, shape, dtype=None):
        raise NotImplementedError


def _dtype(dtype):
    if dtype is None:
        dtype = np.float64 if config.read("jax_enable_x64") else np.float32
    d = np.dtype(dtype)
    if d.kind == "c":
        raise ArgumentError("jitad.nn.initializers: complex dtypes are not supported; give a float dtype")
    return d


def zeros(key, shape, dtype=None):
    """Zeros of `shape`: `initializers.zeros(key, (2, 3))`."""
    return np.zeros(shape, _dtype(dtype))


def ones(key, shape, dtype=None):
    """Ones of `shape`: `initializers.ones(key, (2, 3))`."""
    return np.ones(shape, _dtype(dtype))


def constant(value, dtype=None):
    """An initializer filling every entry with `value`: `initializers.constant(0.1)`."""
    def init(key, shape, dtype=dtype):
        return np.full(shape, value, _dtype(dtype))
    return init


def normal(stddev=1e-2, dtype=None):
    """Normal entries of standard deviation `stddev`: `initializers.normal(0.02)`."""
    def init(key, shape, dtype=dtype):
        return random.normal(key, shape, _dtype(dtype)) * _dtype(dtype).type(stddev)
    return init


def uniform(scale=1e-2, dtype=None):
    """Uniform entries on [0, scale): `initializers.uniform(0.1)`."""
    def init(key, shape, dtype=dtype):
        return random.uniform(key, shape, _dtype(dtype)) * _dtype(dtype).type(scale)
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    """Normal entries cut to [lower, upper] standard deviations, times `stddev`."""
    def init(key, shape, dtype=dtype):
        return random.truncated_normal(key, lower, upper, shape, _dtype(dtype)) * _dtype(dtype).type(stddev)
    return init


def _size(shape, axes):
    return shape[axes] if isinstance(axes, (int, np.integer)) else math.prod(shape[a] for a in axes)


def _fans(shape, in_axis, out_axis, batch_axis):
    """The numbers of inputs and outputs of a weight of `shape`: the in and out axes'
    lengths times the receptive field (every axis that is neither, nor a batch axis)."""
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ShapeError(f"initializer for shape {tuple(shape)}: a weight with the default in_axis needs at "
                         "least two axes; give in_axis (and out_axis) explicitly")
    fan_in, fan_out, batch = _size(shape, in_axis), _size(shape, out_axis), _size(shape, batch_axis)
    receptive = math.prod(shape) / fan_in / fan_out / batch
    return fan_in * receptive, fan_out * receptive


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
    """Entries of variance `scale / n`, n the fan by `mode` ('fan_in', 'fan_out',
    'fan_avg', 'fan_geo_avg'), drawn by `distribution` ('truncated_normal', 'normal',
    'uniform'): `initializers.variance_scaling(2.0, 'fan_in', 'normal')` is He's."""
    modes = {"fan_in": lambda i, o: i, "fan_out": lambda i, o: o, "fan_avg": lambda i, o: (i + o) / 2,
             "fan_geo_avg": lambda i, o: (i * o) ** 0.5}
    if mode not in modes:
        raise ArgumentError(f"variance_scaling: mode={mode!r}; give one of {sorted(modes)}")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise ArgumentError(f"variance_scaling: distribution={distribution!r}; give 'truncated_normal', "
                            "'normal' or 'uniform'")

    def init(key, shape, dtype=dtype):
        d = _dtype(dtype)
        fan_in, fan_out = _fans(tuple(shape), in_axis, out_axis, batch_axis)
        variance = d.type(scale / modes[mode](fan_in, fan_out))
        if distribution == "truncated_normal":
            return random.truncated_normal(key, -2, 2, shape, d) * (np.sqrt(variance) / d.type(TRUNCATED_STD))
        if distribution == "normal":
            return random.normal(key, shape, d) * np.sqrt(variance)
        return random.uniform(key, shape, d, -1) * np.sqrt(d.type(3) * variance)
    return init


def _family(scale, mode, distribution, doc):
    def builder(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
        return variance_scaling(scale, mode, distribution, in_axis, out_axis, batch_axis, dtype)
    builder.__doc__ = doc
    return builder


glorot_uniform = _family(1.0, "fan_avg", "uniform", "Glorot (Xavier) uniform: variance 1 / fan_avg.")
glorot_normal = _family(1.0, "fan_avg", "truncated_normal", "Glorot (Xavier) normal (truncated): variance 1 / fan_avg.")
lecun_uniform = _family(1.0, "fan_in", "uniform", "LeCun uniform: variance 1 / fan_in.")
lecun_normal = _family(1.0, "fan_in", "truncated_normal", "LeCun normal (truncated): variance 1 / fan_in.")
he_uniform = _family(2.0, "fan_in", "uniform", "He (Kaiming) uniform: variance 2 / fan_in.")
he_normal = _family(2.0, "fan_in", "truncated_normal", "He (Kaiming) normal (truncated): variance 2 / fan_in.")
xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


def _orthogonal_matrix(key, n, m, dtype):
    """An n x m matrix with orthonormal rows or columns, Haar distributed: the Q of a normal
    matrix's QR with the signs of R's diagonal moved into it (as `jax.random.orthogonal`)."""
    q, r = L.qr(random.normal(key, (max(n, m), min(n, m)), dtype))
    q = q * N.reshape(jnp.sign(jnp.diagonal(r)), (1, min(n, m)))
    return N.transpose(q) if n < m else q


def orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """Entries forming an orthogonal matrix (rows or columns orthonormal) between
    `column_axis` and the other axes flattened, times `scale`: `initializers.orthogonal()`."""
    def init(key, shape, dtype=dtype):
        d = _dtype(dtype)
        shape = tuple(shape)
        if len(shape) < 2:
            raise ShapeError(f"orthogonal initializer for shape {shape}: it needs at least two axes")
        if 0 in shape:
            return np.zeros(shape, d)
        n_cols = shape[column_axis]
        q = _orthogonal_matrix(key, math.prod(shape) // n_cols, n_cols, d)
        q = N.reshape(q, tuple(np.delete(shape, column_axis % len(shape))) + (n_cols,))
        return jnp.moveaxis(q, -1, column_axis) * d.type(scale)
    return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None):
    """A convolution kernel (3 to 5 axes, spatial first) that is an orthogonal matrix at
    its centre tap and zero elsewhere: `initializers.delta_orthogonal()(key, (3, 3, 4, 4))`."""
    def init(key, shape, dtype=dtype):
        d = _dtype(dtype)
        shape = tuple(shape)
        if len(shape) not in (3, 4, 5):
            raise ShapeError(f"delta_orthogonal for shape {shape}: it needs 3, 4 or 5 axes")
        if shape[-1] < shape[-2]:
            raise ShapeError(f"delta_orthogonal for shape {shape}: fan_in {shape[-2]} must not exceed "
                             f"fan_out {shape[-1]}")
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        return N.NUMPY_API["ndarray.at"](np.zeros(shape, d))[centre].set(
            orthogonal(scale, column_axis, d)(key, shape[-2:]))
    return init
