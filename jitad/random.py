"""Counter-based random numbers usable inside staged code.

A key is an int; element k of `uniform(key, shape)` is a hash of (key, k), so the
numbers do not depend on how the computation is ordered or compiled.

>>> key = jitad.random.key(0)
>>> k1, k2 = jitad.random.split(key)
>>> u = jitad.random.uniform(k1, (3,))
"""
import numpy as np

from . import numeric as N
from .errors import ArgumentError
from .ir.types import Type
from .ir.ops import Op, declare
from .staging import Staged, as_var, emit, is_staged

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(z):
    """splitmix64's finalizer on uint64 arrays (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def uniform_numpy(key, shape):
    """The reference values of `uniform(key, shape)`."""
    with np.errstate(over="ignore"):
        counter = np.arange(1, int(np.prod(shape, dtype=np.int64)) + 1, dtype=np.uint64)
        bits = _mix(np.uint64(np.int64(key).view(np.uint64)) * _GOLDEN + counter * _GOLDEN)
    return ((bits >> np.uint64(11)).astype(np.float64) * 2.0 ** -53).reshape(shape)


# the primitive: uniform floats of `shape` from an i64 key (lowered in jitad/lower/tensor.py and cuda.py)
declare("random", lambda op, types, attrs, bodies: [Type("f64", attrs["shape"])], uniform_numpy, arity=1,
        flags="pure kernel")


def key(seed):
    """A key from an int seed."""
    return int(seed)


def uniform(key, shape):
    """Uniform floats in [0, 1) of `shape` (float64)."""
    shape = N._static_shape("random.uniform", shape)
    if (key.ir_dtype != "i64") if is_staged(key) else (
            isinstance(key, (bool, np.bool_)) or not isinstance(key, (int, np.integer))):
        raise ArgumentError(f"random: a key is an int (jitad.random.key(seed) or from split), got {key!r}")
    if not is_staged(key):
        return uniform_numpy(key, shape)
    return Staged(emit(Op.RANDOM, [as_var(key, "i64")], {"shape": shape})[0])


def normal(key, shape):
    """Standard normal floats of `shape` (Box–Muller on two uniform streams)."""
    k1, k2 = split(key)
    u1, u2 = uniform(k1, shape), uniform(k2, shape)
    return N.sqrt(-2.0 * N.log1p(-u1)) * N.cos(2 * np.pi * u2)


def split(key, num=2):
    """`num` new independent keys from `key`."""
    u = uniform(key, (num,))
    ints = N.convert(u * 2.0 ** 62, "i64")
    return tuple(ints[i] for i in range(num))


def dropout(x, rate, key):
    """Zero each element with probability `rate` and scale the rest by 1/(1-rate)."""
    if isinstance(rate, (bool, np.bool_)) or not isinstance(rate, (int, float, np.integer, np.floating)) \
            or not 0.0 <= rate < 1.0:
        raise ArgumentError(f"`dropout`: rate={rate!r}; it must be a number in [0, 1)")
    if rate == 0.0:
        return x
    keep = uniform(key, N._shape(x)) >= rate
    return N.where(keep, x / (1.0 - rate), 0.0)
