"""JAX's `jax.dtypes`: the dtypes jitad computes in and their rules.

>>> jitad.dtypes.canonicalize_dtype(np.int32)
dtype('int32')
>>> jitad.dtypes.issubdtype(np.float32, np.floating)
True
"""
import numpy as np

from .config import config, warn_truncated, x64_enabled
from .errors import ArgumentError, JitadError
from .stages import FLOAT0
from .staging import is_staged

__all__ = ["TypePromotionError", "canonicalize_dtype", "finfo", "float0", "iinfo", "issubdtype",
           "itemsize_bits", "narrowed", "requested_dtype", "result_type", "scalar_type_of"]

float0 = FLOAT0   # the dtype of an int's gradient
finfo, iinfo = np.finfo, np.iinfo
issubdtype = np.issubdtype


class TypePromotionError(JitadError, TypeError):
    """Two dtypes with no common dtype to compute in."""


def canonicalize_dtype(dtype, allow_extended_dtype=False):
    """`dtype` as JAX canonicalizes it: unchanged with `jax_enable_x64` (jitad's default),
    64-bit ones made 32-bit without it."""
    dt = np.dtype(dtype)
    if dt == float0 or dt == np.bool_:
        return dt
    if dt.kind not in "iuf":
        raise ArgumentError(f"dtype {dt} is not one jitad computes in: use a float, int or bool dtype")
    if config.jax_enable_x64 or dt.itemsize <= 4:
        return dt
    return np.dtype({"i": np.int32, "u": np.uint32, "f": np.float32}[dt.kind])


def result_type(*args, return_weak_type_flag=False):
    """The dtype operations on `args` compute in (NumPy's promotion, Python numbers weak)."""
    dt = canonicalize_dtype(np.result_type(*[x.dtype if is_staged(x) else x for x in args]))
    if return_weak_type_flag:
        return dt, all(isinstance(a, (bool, int, float)) for a in args)
    return dt


def scalar_type_of(x):
    """The Python type of a scalar of `x`'s dtype: `float`, `int` or `bool`."""
    dt = np.result_type(x)
    if dt == np.bool_:
        return bool
    return int if dt.kind in "iu" else float


def itemsize_bits(dtype):
    """The bits one element of `dtype` takes: `itemsize_bits(np.float32) == 32`."""
    return 8 * np.dtype(dtype).itemsize


# the 32-bit dtype JAX holds each 64-bit one in without `jax_enable_x64`
_NARROW = {np.dtype(wide): np.dtype(narrow) for wide, narrow in (
    (np.float64, np.float32), (np.int64, np.int32), (np.uint64, np.uint32), (np.complex128, np.complex64))}


def narrowed(x):
    """`x` as JAX holds it where `jax_enable_x64` is off: a 64-bit array or NumPy scalar cast
    to 32 bits (ints wrap), a Python float or int made a float32 or int32 NumPy scalar;
    anything else, and everything where the setting is on (jitad's default), unchanged.

    >>> jitad.dtypes.narrowed(np.arange(3)).dtype   # x64 on: as it was
    dtype('int64')
    """
    if config._values["jax_enable_x64"]:
        return x
    if isinstance(x, (np.ndarray, np.generic)):
        narrow = _NARROW.get(x.dtype)
        return x if narrow is None else x.astype(narrow)
    if type(x) is float:
        return np.float32(x)
    if type(x) is int:
        return np.array(x & 0xFFFFFFFF, np.uint32).view(np.int32)[()]   # its low 32 bits, as a cast
    return x


def requested_dtype(dtype, where):
    """An explicitly requested `dtype` as JAX gives it: unchanged with `jax_enable_x64`,
    else its 32-bit counterpart, with JAX's warning that the 64-bit one is not available.

    >>> jitad.dtypes.requested_dtype(np.float64, "zeros")
    dtype('float64')
    """
    if dtype is None or x64_enabled():
        return dtype
    try:
        dt = np.dtype(dtype)
    except TypeError:
        return dtype
    narrow = _NARROW.get(dt)
    if narrow is None:
        return dtype
    warn_truncated(dt, narrow, where)
    return narrow
