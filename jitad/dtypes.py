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
from .staging.values import NARROW, narrowed

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


def requested_dtype(dtype, where, warn=True):
    """An explicitly requested `dtype` as JAX gives it: unchanged with `jax_enable_x64`,
    else its 32-bit counterpart, with JAX's warning that the 64-bit one is not available
    (not with `warn=False`: a library default, as `nn.initializers`' float64).

    >>> jitad.dtypes.requested_dtype("float64", "zeros")   # x64 on: as asked
    'float64'
    """
    if dtype is None or x64_enabled():
        return dtype
    try:
        dt = np.dtype(dtype)
    except TypeError:
        return dtype
    narrow = NARROW.get(dt)
    if narrow is None:
        return dtype
    if warn and dtype not in (float, int, complex):   # Python's types ask for the default: no warning
        warn_truncated(dt, narrow, where)
    return narrow
