"""`jitad.numpy`: NumPy's namespace over jitad's functions, for code written against
`jax.numpy` or `autograd.numpy` (`import jitad.numpy as jnp`, `import jitad.numpy as np`).

In staged code every function here is jitad's (differentiable, compiled, JAX's semantics);
on plain arrays each computes eagerly with NumPy's results.

Arrays made here outside staged code (`array`, `asarray`, `zeros`, `ones`, `full`, `eye`,
`arange`, `linspace`, the `*_like`) are `jitad.numpy.Array`s: NumPy arrays (NumPy's
functions and printing, `x[i] = v` writes as autograd code does them) that also have JAX's
`.at[...]` updates, accept a staged index (`table[i]` with `i` staged lifts the table to a
staged constant), and make a new array on `x += y` as JAX does (a reference kept elsewhere
keeps its values). NumPy hands the subclass on through its own arithmetic; other results
are plain NumPy arrays (`jnp.asarray(y).at[...]` gives `.at` back, without a copy). A
compiled function takes plain NumPy arrays through its fastest path: pass those in
a hot loop (`np.asarray(x)`, no copy).

>>> import jitad.numpy as jnp
>>> jnp.zeros(3).at[0].set(1.0)
Array([1., 0., 0.])
"""
import builtins as _builtins
import math as _math
import operator as _op

import numpy as _np

from .. import numeric as _N
from ..staging import (Staged as _Staged, binary as _binary, foreign_array as _foreign_array, is_staged as _is_staged,
                       result_dtype as _result_dtype, unary as _unary)

# NumPy's dtypes and dtype helpers, as NumPy has them (jitad computes in float64, float32,
# int64 and bool; an int32 in staged code is an int64)
from numpy import (bool_, dtype, finfo, float32, float64, iinfo, int8, int16, int32, int64, integer,  # noqa: F401
                   floating, inexact, number, signedinteger, issubdtype, promote_types, uint8, uint32,
                   uint64, can_cast, e, inf, nan, newaxis, pi, euler_gamma)

__version__ = _np.__version__   # the NumPy whose namespace this mirrors (autograd.numpy says the same)
float_ = float64
int_ = int64

from ..numeric import *  # noqa: E402,F401,F403
from ..numpy_api import *  # noqa: E402,F401,F403
from ..numpy_api import trace  # noqa: E402,F401  (NumPy's trace; `jitad.trace` stages a function)
from . import fft, linalg, random  # noqa: E402,F401


def _staged_any(xs):
    return _builtins.any(_is_staged(x) for x in xs)


def _either(name, staged_fn, np_fn=None):
    """NumPy's `name`: `staged_fn` when an argument is staged, else NumPy's function."""
    np_fn = np_fn or getattr(_np, name)

    def fn(*xs):
        return staged_fn(*xs) if _staged_any(xs) else np_fn(*xs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"NumPy's `{name}`, staged where an argument is: `jnp.{name}(a, b)`."
    return fn


def _bool(x):
    return _N.convert(x, "bool") if _is_staged(x) else _np.asarray(x, bool)


add = _either("add", _op.add)
subtract = _either("subtract", _op.sub)
multiply = _either("multiply", _op.mul)
divide = true_divide = _either("divide", _op.truediv)
floor_divide = _either("floor_divide", _op.floordiv)
negative = _either("negative", _op.neg)
positive = _either("positive", _op.pos)
greater = _either("greater", _op.gt)
greater_equal = _either("greater_equal", _op.ge)
less = _either("less", _op.lt)
less_equal = _either("less_equal", _op.le)
equal = _either("equal", _op.eq)
not_equal = _either("not_equal", _op.ne)
logical_and = _either("logical_and", lambda a, b: _bool(a) & _bool(b))
logical_or = _either("logical_or", lambda a, b: _bool(a) | _bool(b))
logical_xor = _either("logical_xor", lambda a, b: _bool(a) != _bool(b))
logical_not = _either("logical_not", lambda a: ~_bool(a))
absolute = abs  # noqa: F405
amax, amin = max, min  # noqa: F405
float_power = power  # noqa: F405


def cbrt(x):
    """The real cube root: `jnp.cbrt(-8.0) == -2.0`."""
    return _unary(_N.Op.CBRT, x)


def shape(x):
    """`x.shape` of a staged value or anything NumPy takes: `jnp.shape(x)`."""
    return tuple(x.shape) if _is_staged(x) else _np.shape(x)


def ndim(x):
    """The number of axes: `jnp.ndim(x)`."""
    return len(shape(x))


def size(x, axis=None):
    """The number of elements (along `axis`): `jnp.size(x)`."""
    s = shape(x)
    return _math.prod(s) if axis is None else s[axis]


def result_type(*xs):
    """NumPy's `result_type` of values and dtypes, staged values included."""
    return _np.result_type(*[x.dtype if _is_staged(x) else x for x in xs])


def vdot(a, b):
    """The dot product of the flattened arrays: `jnp.vdot(a, b)`."""
    return sum(ravel(a) * ravel(b))  # noqa: F405


def isclose(a, b, rtol=1e-05, atol=1e-08):
    """`|a - b| <= atol + rtol * |b|` elementwise (NaN is never close): `jnp.isclose(a, b)`."""
    if not _staged_any((a, b)):
        return _np.isclose(a, b, rtol=rtol, atol=atol)
    return abs(a - b) <= atol + rtol * abs(b)  # noqa: F405


def allclose(a, b, rtol=1e-05, atol=1e-08):
    """All of `isclose(a, b)`: `jnp.allclose(a, b)`."""
    return all(isclose(a, b, rtol, atol))  # noqa: F405


def astype(x, dtype):
    """`x` converted to `dtype`: `jnp.astype(x, jnp.float32)`."""
    return x.astype(dtype) if _is_staged(x) else asarray(x, dtype)


def copy(x):
    """A copy of `x` (a staged value is immutable: itself)."""
    return x if _is_staged(x) else array(x)


# NumPy 2's names for the same functions, and NumPy's static index helpers
acos, asin, atan, atan2, acosh, asinh, atanh = arccos, arcsin, arctan, arctan2, arccosh, arcsinh, arctanh  # noqa: F405
pow = power  # noqa: F405
around = round  # noqa: F405
fabs = abs  # noqa: F405
concat = concatenate  # noqa: F405
permute_dims = transpose  # noqa: F405
double, single = float64, float32
from numpy import (broadcast_shapes, diag_indices, indices, ix_, tril_indices, triu_indices,  # noqa: E402,F401
                   unravel_index, ravel_multi_index, errstate, geterr, seterr, get_printoptions,
                   set_printoptions, printoptions)


def _drop_precision(fn):
    """`fn` that also takes (and ignores) JAX's `precision=` and `preferred_element_type=`."""
    def wrapped(*args, precision=None, preferred_element_type=None, **kwargs):
        return fn(*args, **kwargs)
    wrapped.__name__ = wrapped.__qualname__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


dot, matmul, tensordot, inner, outer = (_drop_precision(f) for f in (dot, matmul, tensordot, inner, outer))  # noqa: F405
_einsum = einsum  # noqa: F405


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _sublist_subscripts(args):
    """NumPy's other form, `einsum(a, [0, 1], b, [1, 2], [0, 2])`, as (subscripts, operands)."""
    def letters(sub):
        return "".join("..." if k is Ellipsis else _LETTERS[k] for k in sub)
    pairs = args[:-1] if len(args) % 2 else args   # an odd count: the last sublist names the output
    spec = ",".join(letters(sub) for sub in pairs[1::2])
    if len(args) % 2:
        spec += "->" + letters(args[-1])
    return spec, list(pairs[0::2])


def einsum(*operands, out=None, optimize=None, precision=None, preferred_element_type=None, _dot_general=None):
    """Einstein summation over the operands (`jnp.einsum('ij,jk->ik', a, b)`, or NumPy's
    sublist form `jnp.einsum(a, [0, 1], b, [1, 2])`, as autograd takes it); JAX's
    `optimize=` and `precision=` change no value here."""
    _common.no_out("einsum", out)
    if operands and isinstance(operands[0], str):
        subscripts, ops = operands[0], operands[1:]
    else:
        subscripts, ops = _sublist_subscripts(operands)
    ops = [array(o) if isinstance(o, (list, tuple)) else o for o in ops]
    return _einsum(subscripts, *ops)


def clip(a, a_min=None, a_max=None, *, min=None, max=None):
    """`a` limited to [a_min, a_max] (NumPy's and JAX's names for the bounds): `jnp.clip(x, 0.0, 1.0)`."""
    return _N.clip(a, a_min if min is None else min, a_max if max is None else max)


def isscalar(x):
    """True for numbers and 0-d values, staged ones included."""
    return _np.isscalar(x) or (_is_staged(x) and not x.shape)


def ptp(a, axis=None, keepdims=False):
    """max - min along `axis`."""
    return _N.max(a, axis, keepdims) - _N.min(a, axis, keepdims)


def average(a, axis=None, weights=None):
    """The mean, or the `weights`-weighted mean, along `axis`."""
    if weights is None:
        return _N.mean(a, axis)
    if ndim(weights) != ndim(a):   # 1-D weights along `axis`, as NumPy
        weights = _N.reshape(weights, tuple(-1 if d == axis % ndim(a) else 1 for d in range(ndim(a))))
    return _N.sum(a * weights, axis) / _N.sum(weights * _N.ones_like(a), axis)


def nansum(a, axis=None, keepdims=False):
    """The sum with NaNs counted as zero."""
    return _N.sum(_N.where(isnan(a), 0.0, a), axis, keepdims)  # noqa: F405


def nanmean(a, axis=None, keepdims=False):
    """The mean of the entries that are not NaN."""
    return nansum(a, axis, keepdims) / _N.sum(_N.where(isnan(a), 0.0, 1.0), axis, keepdims)  # noqa: F405


def fmod(x, y):
    """The remainder of `x / y` with the sign of `x` (C's fmod): `jnp.fmod(-7.0, 3.0) == -1.0`."""
    if _result_dtype(x, y) in ("f32", "f64"):
        return _binary(_N.Op.FMOD, x, y)
    r = mod(x, y)  # noqa: F405  (ints: the sign of y, 0 for y == 0; moved to the sign of x)
    return where((r != 0) & ((x < 0) != (y < 0)), r - y, r)  # noqa: F405


def divmod(x, y):
    """`(x // y, x % y)`."""
    return floor_divide(x, y), mod(x, y)  # noqa: F405


def diagflat(v, k=0):
    """A 2-D array with the flattened `v` on diagonal `k`."""
    return diag(ravel(v), k)  # noqa: F405


def broadcast_arrays(*args):
    """The arguments broadcast to their common shape."""
    target = _np.broadcast_shapes(*(shape(a) for a in args))
    return [broadcast_to(a, target) for a in args]  # noqa: F405


def array_equal(a1, a2):
    """True if `a1` and `a2` have the same shape and entries."""
    if not _staged_any((a1, a2)):
        return _np.array_equal(a1, a2)
    return shape(a1) == shape(a2) and all(a1 == a2)  # noqa: F405


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    """`base ** linspace(start, stop, num)`."""
    out = power(base, linspace(start, stop, num, endpoint, dtype=None, axis=axis))  # noqa: F405
    return out if dtype is None else astype(out, dtype)


def searchsorted(a, v, side="left", sorter=None):
    """Where `v` would go in the sorted 1-D `a` to keep it sorted (`side` 'left' or 'right');
    staged, a comparison of every `v` with every `a` (O(len(a) * size(v)))."""
    if not _staged_any((a, v)):
        return _np.searchsorted(a, v, side, sorter)
    if sorter is not None:
        a = take(a, sorter)  # noqa: F405
    v_col = expand_dims(v, -1)  # noqa: F405
    # NaN sorts last, as NumPy: after every number, and (side 'right') after the NaNs of `a`
    last = isnan(v_col)  # noqa: F405
    before = ((a < v_col) | (last & ~isnan(a))) if side == "left" else ((a <= v_col) | last)  # noqa: F405
    return _N.sum(_N.convert(before, "i64"), -1)


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of `y` along `axis` by the trapezoidal rule."""
    y = moveaxis(y, axis, -1)  # noqa: F405
    mid = (y[..., 1:] + y[..., :-1]) / 2.0
    return _N.sum(mid * (dx if x is None else x[1:] - x[:-1]), -1)


def convolve(a, v, mode="full"):
    """NumPy's 1-D `convolve` (`mode` 'full', 'same', 'valid'), staged and differentiable."""
    from ..scipy.signal import convolve as conv
    if shape(v)[0] > shape(a)[0]:
        a, v = v, a
    return conv(a, v, mode)


def correlate(a, v, mode="valid"):
    """NumPy's 1-D `correlate` of real arrays: `convolve(a, v[::-1], mode)`."""
    if shape(v)[0] > shape(a)[0]:
        return convolve(v, a[::-1], mode)[::-1]
    return convolve(a, v[::-1], mode)


from ._array import Array, _AtArray, _wrap  # noqa: E402,F401


def _nested_staged(obj):
    if isinstance(obj, (list, tuple)):
        return _builtins.any(_nested_staged(o) for o in obj)
    return _is_staged(obj)


def _stack_nested(obj, dtype):
    if isinstance(obj, (list, tuple)):
        return stack([_stack_nested(o, dtype) for o in obj])  # noqa: F405
    if dtype is not None:
        return _N.convert(obj, dtype) if _is_staged(obj) else _np.asarray(obj, dtype)
    return obj


def array(obj, dtype=None, copy=True, ndmin=0):
    """An array of `obj`: a staged value passes through (converted to `dtype`), nested
    lists holding staged values are stacked, anything else is a NumPy array (an `Array`,
    with `.at`): `jnp.array([[1.0, 2.0], [x, 3.0]])`."""
    if _nested_staged(obj):
        out = _stack_nested(obj, dtype)
        if _is_staged(out) and dtype is not None:
            out = _N.convert(out, dtype)
        while ndim(out) < ndmin:
            out = expand_dims(out, 0)  # noqa: F405
        return out
    return _wrap(_np.array(obj, dtype=dtype, copy=copy, ndmin=ndmin))


def asarray(a, dtype=None):
    """`a` as an array without a copy where possible: a staged value passes through
    (converted to `dtype`); plain data gives an `Array` (a NumPy array with `.at`)."""
    return array(a, dtype=dtype, copy=None)


def _plain_or(name, staged_fn, args, kwargs):
    """NumPy's `name` as an `Array`, or `staged_fn` when an argument is staged."""
    if _staged_any(args + tuple(kwargs.values())):
        if staged_fn is None:
            raise _N.data_dependent_shape(f"`jnp.{name}` with a staged size")
        return staged_fn(*args, **kwargs)
    return _wrap(getattr(_np, name)(*args, **kwargs))


def zeros(shape, dtype=None):
    """NumPy's `zeros`, as an `Array` (with `.at`): `jnp.zeros(3).at[0].set(1.0)`."""
    return _plain_or("zeros", None, (shape,), {"dtype": dtype})


def ones(shape, dtype=None):
    """NumPy's `ones`, as an `Array` (with `.at`)."""
    return _plain_or("ones", None, (shape,), {"dtype": dtype})


empty = zeros


def full(shape, fill_value, dtype=None):
    """NumPy's `full`, as an `Array`; a staged `fill_value` gives a staged array."""
    if _is_staged(fill_value):
        return _N.full(shape, fill_value, "f64" if dtype is None else dtype)   # (f32 without x64)
    return _plain_or("full", None, (shape, fill_value), {"dtype": dtype})


def eye(N, M=None, k=0, dtype=None):
    """NumPy's `eye`, as an `Array`."""
    return _plain_or("eye", None, (N, M, k), {"dtype": dtype})


def identity(n, dtype=None):
    """NumPy's `identity`, as an `Array`."""
    return _plain_or("identity", None, (n,), {"dtype": dtype})


def arange(start, stop=None, step=None, dtype=None):
    """NumPy's `arange`, as an `Array` (staged bounds: jitad's)."""
    args = (start,) if stop is None else (start, stop) if step is None else (start, stop, step)
    return _plain_or("arange", _N.NUMPY_API["arange"], args, {"dtype": dtype} if dtype is not None else {})


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """NumPy's `linspace`, as an `Array` (staged ends: jitad's)."""
    return _plain_or("linspace", _N.NUMPY_API["linspace"], (start, stop, num, endpoint, retstep, dtype, axis), {})


def _like(x, value, dtype):
    if _is_staged(x):   # constant contents of a staged value's shape
        return full(shape(x), value, dtype=x.dtype if dtype is None else dtype)
    return _wrap(_np.full_like(x, value, dtype=dtype))


def zeros_like(a, dtype=None):
    """Zeros of `a`'s shape and dtype (or `dtype`), as an `Array`."""
    return _like(a, 0, dtype)


def ones_like(a, dtype=None):
    """Ones of `a`'s shape and dtype (or `dtype`), as an `Array`."""
    return _like(a, 1, dtype)


empty_like = zeros_like


def full_like(a, fill_value, dtype=None):
    """`fill_value` in `a`'s shape and dtype (or `dtype`)."""
    if _is_staged(fill_value):
        return _N.broadcast_to(_N.convert(fill_value, _np.dtype(dtype or a.dtype)), shape(a))
    return _like(a, fill_value, dtype)


class _NDArrayMeta(type):
    def __instancecheck__(cls, x):
        return isinstance(x, (_np.ndarray, _Staged))


class ndarray(metaclass=_NDArrayMeta):
    """For `isinstance(x, jnp.ndarray)`: true of NumPy arrays and staged values."""



# -- the topic modules: full signatures, new names, plain inputs as jax.numpy's ------------
from . import _common  # noqa: E402
import sys as _sys  # noqa: E402
_common.NAMESPACE.append(_sys.modules[__name__])
from .numpy_names import *  # noqa: E402,F401,F403
from .reductions import *  # noqa: E402,F401,F403
from .statistics import *  # noqa: E402,F401,F403
from .arrays import *  # noqa: E402,F401,F403
from .bits import *  # noqa: E402,F401,F403
from .setops import *  # noqa: E402,F401,F403
from . import setops as _setops  # noqa: E402
from .polynomial import *  # noqa: E402,F401,F403
from . import statistics as _statistics  # noqa: E402
_statistics._late()


# -- plain inputs as jax.numpy takes them, plain results as `Array`s ------------------------
# Every function here takes lists and tuples where NumPy takes an array (staged values
# inside are stacked, as autograd's boxes are: `jnp.mean([a, b])`), and returns plain
# results as `Array`s (0-d for scalars, as JAX's), readable by a staged index.
import functools as _functools  # noqa: E402
from ..ir.ops import impl_of as _impl_of  # noqa: E402
import inspect as _inspect  # noqa: E402
import types as _types  # noqa: E402
from ..config import config as _config  # noqa: E402
from ..dtypes import narrowed as _narrowed, requested_dtype as _requested_dtype  # noqa: E402

_SEQUENCE_FIRST = {"concatenate", "concat", "stack", "hstack", "vstack", "row_stack", "column_stack", "dstack",
                   "select", "lexsort", "choose", "piecewise"}
_NO_INPUTS = {"block", "array", "asarray", "zeros", "ones", "empty", "full", "eye", "identity", "arange", "linspace",
              "logspace", "geomspace", "einsum", "einsum_path", "apply_along_axis", "apply_over_axes", "fromfunction",
              "tri", "mask_indices", "shape", "ndim", "size", "result_type", "isscalar", "copyto", "putmask",
              "fill_diagonal", "place", "put", "put_along_axis", "copy", "iterable", "metadata", "vectorize",
              "one_hot", "bartlett", "blackman", "hamming", "hanning", "kaiser", "isdtype", "issubdtype",
              "broadcast_shapes", "indices", "diag_indices", "tril_indices", "triu_indices"}
_ALL_POSITIONS = {"where", "add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "power", "pow",
                  "float_power", "maximum", "minimum", "fmax", "fmin", "mod", "remainder", "fmod", "divmod",
                  "arctan2", "atan2", "hypot", "logaddexp", "logaddexp2", "equal", "not_equal", "less", "less_equal",
                  "greater", "greater_equal", "logical_and", "logical_or", "logical_xor", "dot", "vdot", "matmul",
                  "inner", "outer", "kron", "cross", "convolve", "correlate", "allclose", "isclose", "array_equal",
                  "array_equiv", "meshgrid", "broadcast_arrays", "atleast_1d", "atleast_2d", "atleast_3d", "append",
                  "interp", "polyadd", "polysub", "polymul", "polydiv", "polyval", "polyfit", "isin", "in1d",
                  "union1d", "intersect1d", "setdiff1d", "setxor1d", "digitize", "searchsorted", "copysign",
                  "nextafter", "ldexp", "heaviside", "gcd", "lcm", "bitwise_and", "bitwise_or", "bitwise_xor",
                  "left_shift", "right_shift", "bitwise_left_shift", "bitwise_right_shift", "cov", "corrcoef",
                  "histogram2d", "vecdot", "matvec", "vecmat", "tensordot", "extract", "compress", "trapezoid",
                  "average", "take_along_axis", "take", "clip"}


# functions whose Python results are answers about their inputs, as in JAX (not 0-d arrays),
# and `where` of three Python numbers, which gives a Python number as autograd's does
_PYTHON_RESULTS = {"where", "ndim", "size", "shape", "isscalar", "iterable", "isrealobj", "iscomplexobj", "isfortran",
                   "may_share_memory", "shares_memory", "result_type", "issubdtype", "isdtype", "can_cast",
                   "broadcast_shapes", "promote_types"}
_PYTHON_NUMBERS = (_builtins.float, _builtins.int, _builtins.bool)


def _as_input(x):
    return array(x) if isinstance(x, (list, tuple)) else x


def _wrap_out(out, wrap=False, scalars=False):
    """`out` with plain arrays as `Array`s (narrowed: JAX's 32-bit dtypes where
    jax_enable_x64 is off, ints wrapped with `wrap`, see `jitad.dtypes.narrowed`), and with
    `scalars` a Python number `out` as a 0-d `Array`."""
    if scalars and type(out) in _PYTHON_NUMBERS:
        out = _np.asarray(out)
    if type(out) is _np.ndarray:
        return _narrowed(out, wrap=wrap).view(Array)
    if type(out) is Array:
        return _narrowed(out, wrap=wrap)
    if isinstance(out, _np.generic) and out.dtype.kind in "biuf":
        return _np.asarray(_narrowed(out, wrap=wrap)).view(Array)
    if type(out) is tuple:
        return tuple(_wrap_out(o, wrap) for o in out)
    if type(out) is list:
        return [_wrap_out(o, wrap) for o in out]
    return out


def _int64_among(args, kwargs):
    """Whether an argument is an int64 array (a PRNG key is one: results keep large values)."""
    return _builtins.any(getattr(a, "dtype", None) in (_np.int64, _np.uint64) for a in args + tuple(kwargs.values()))


def _dtype_position(fn):
    """The position of `fn`'s `dtype` parameter, or None."""
    try:
        names = list(_inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None
    return names.index("dtype") if "dtype" in names else None


def _requested(name, at, args, kwargs):
    """`args`, `kwargs` with a 64-bit `dtype` asked for made 32-bit (and JAX's warning)
    where `jax_enable_x64` is off."""
    if kwargs.get("dtype") is not None:
        kwargs = {**kwargs, "dtype": _requested_dtype(kwargs["dtype"], name)}
    elif at is not None and len(args) > at and args[at] is not None:
        args = args[:at] + (_requested_dtype(args[at], name),) + args[at + 1:]
    return args, kwargs


# functions whose meaning on plain real arrays, with plain int arguments, is NumPy's function of
# the same name exactly (the same values, dtype and shape): an eager call runs NumPy's at once
# (a microsecond or two, against ten or more through jitad's checks of the shapes and its
# complex dispatch), its result made an `Array` as jitad's; where NumPy raises, jitad's
# function runs and raises its own error. The keyword arguments each takes this way.
_AXES = ("axis", "keepdims")
_NUMPY_SAME = {
    "reshape": (), "expand_dims": (), "ravel": (), "transpose": ("axes",), "swapaxes": (), "moveaxis": (),
    "squeeze": ("axis",), "diag": ("k",), "diagonal": ("offset", "axis1", "axis2"), "tril": ("k",), "triu": ("k",),
    "dot": (), "matmul": (), "inner": (), "outer": (),
    "sum": _AXES, "mean": _AXES, "prod": _AXES, "max": _AXES, "min": _AXES, "amax": _AXES, "amin": _AXES,
    "var": _AXES + ("ddof",), "std": _AXES + ("ddof",), "cumsum": ("axis",), "cumprod": ("axis",),
}
# those that only move elements take any real dtype; the others the dtypes of jitad's arrays
_MOVING = {"reshape", "expand_dims", "ravel", "transpose", "swapaxes", "moveaxis", "squeeze", "diagonal"}
# (by their classes: a dtype's class is found faster than its name)
_PLAIN_DTYPES = frozenset(type(_np.dtype(k)) for k in ("float64", "float32", "int64", "bool"))
_REAL_DTYPES = frozenset(type(_np.dtype(k)) for k in _np.typecodes["AllInteger"] + _np.typecodes["Float"] + "?")


def _plain_item(a):
    """A Python int, bool or None, or a tuple or list of ints (an axis, a shape, an offset)."""
    t = type(a)
    if t is int or t is bool or a is None:
        return True
    if t is not tuple and t is not list:
        return False
    for n in a:
        if type(n) is not int:
            return False
    return True


def _plain_call(names, dtypes):
    """Whether a call's arguments are plain arrays of one dtype among `dtypes` (native byte
    order), the first among them, then plain items (`_plain_item`), keywords among `names`."""
    def accepts(*args, **kwargs):
        t = type(args[0]) if args else None
        if t is not _np.ndarray and t is not Array:
            return False
        dtype = args[0].dtype
        if type(dtype) not in dtypes or not dtype.isnative:
            return False
        for a in args[1:]:
            t = type(a)
            if t is _np.ndarray or t is Array:
                if a.dtype is not dtype:
                    return False
            elif not (t is int or _plain_item(a)):
                return False
        if kwargs:
            for k, v in kwargs.items():
                if k not in names or not _plain_item(v):
                    return False
        return True
    return accepts


# elementwise math: the primitives' NumPy meanings (what the staging layer's eager path
# computes, without its checks of the operands' kinds) on float arrays of one dtype and
# Python numbers, where the result's dtype is the array's (NumPy's weak Python numbers are
# JAX's) or float64; and the operators, whose meaning on plain real values is NumPy's already
_FLOATS = frozenset(_np.dtype(k) for k in ("float64", "float32"))
_OPERATORS = ("add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "negative", "positive",
              "greater", "greater_equal", "less", "less_equal", "equal", "not_equal")


def _float_operands(float_only):
    """Whether the operands (no keywords) are float arrays of one dtype and numbers (Python's
    floats and ints, NumPy's float64 and int64), with a float among them (an int counting as
    one for a primitive taking floats only)."""
    def accepts(*xs):
        dtype, floating = None, False
        for x in xs:
            t = type(x)
            if t is _np.ndarray or t is Array:
                if x.dtype not in _FLOATS or dtype is not None and x.dtype is not dtype and x.dtype != dtype:
                    return False
                dtype = x.dtype
            elif t is float or t is _np.float64:
                floating = True
            elif t is int or t is _np.int64:
                floating = floating or float_only
            else:
                return False
        return dtype is not None or floating
    return accepts


def _impl_reference(primitive):
    """A primitive's NumPy meaning on plain operands: arrays as NumPy's; a unary one's number
    as float64 (`_float_operands` lets ints through for a primitive taking floats only)."""
    impl = _impl_of(primitive)

    if primitive.arity == 1:
        def reference(x):
            t = type(x)
            return impl(x if t is _np.ndarray else x.view(_np.ndarray) if t is Array else _np.float64(x))
    else:   # (Python numbers stay weak: a float32 array's dtype holds)
        def reference(a, b):
            return impl(a.view(_np.ndarray) if type(a) is Array else a, b.view(_np.ndarray) if type(b) is Array else b)
    return reference


def _real_operands(*xs):
    """Whether the operands (no keywords) are plain real arrays (native byte order) and Python
    numbers."""
    for x in xs:
        t = type(x)
        if t is _np.ndarray or t is Array:
            if x.dtype.kind not in "biuf" or not x.dtype.isnative:
                return False
        elif not (t is float or t is int or t is _builtins.bool):
            return False
    return True


# the reductions among them that are one ufunc's `reduce` (what NumPy's function calls, after
# its own checks in Python: a fifth of the time on a small array)
_REDUCING = {"sum": _np.add, "prod": _np.multiply, "max": _np.maximum, "min": _np.minimum, "amax": _np.maximum,
             "amin": _np.minimum}


def _reduced(ufunc):
    """NumPy's `sum` (`prod`, `max`, ...) of a plain array, axis and keepdims given: `ufunc.reduce`."""
    reduce = ufunc.reduce

    def reference(a, axis=None, keepdims=False):
        return reduce(a.view(_np.ndarray) if type(a) is Array else a, axis, None, None, keepdims)
    return reference


def _fast_paths(namespace, primitives):
    """Put NumPy's function in front of the namespace's functions where its meaning on plain
    values is jitad's (`_common.reference_first`): the `_NUMPY_SAME` functions, the elementwise
    `primitives` ({name: primitive}) and the operators."""
    for name, keywords in _NUMPY_SAME.items():
        dtypes = _REAL_DTYPES if name in _MOVING else _PLAIN_DTYPES
        reference = _reduced(_REDUCING[name]) if name in _REDUCING else getattr(_np, name)
        namespace[name] = _common.reference_first(reference, namespace[name], _plain_call(keywords, dtypes))
    for name, primitive in primitives.items():
        namespace[name] = _common.reference_first(_impl_reference(primitive), namespace[name],
                                                  _float_operands(primitive.float_only))
    for name in _OPERATORS:
        namespace[name] = _common.reference_first(getattr(_np, name), namespace[name], _real_operands)


def _takes_plain_inputs(name, fn):
    at = _dtype_position(fn)
    if name in _SEQUENCE_FIRST:
        def convert(args):
            if not args or not isinstance(args[0], (list, tuple)):
                return args
            return ([_as_input(a) for a in args[0]],) + args[1:]
    elif name in _NO_INPUTS:
        def convert(args):
            return args
    else:
        def convert(args):
            if name == "where" and _builtins.all(_setops._plain_python(a) for a in args):
                return args   # lists of numbers stay lists: `where` gives a list (autograd's meaning)
            if name in _ALL_POSITIONS:
                return tuple(_as_input(a) for a in args)
            return (_as_input(args[0]),) + args[1:] if args else args

    scalars = name not in _PYTHON_RESULTS   # a Python number result becomes a 0-d `Array`, as JAX's
    ufunc = getattr(_np, name, None)
    ufunc = ufunc if isinstance(ufunc, _np.ufunc) else None   # (handed to another library's array-like)

    @_functools.wraps(fn)
    def wrapper(*args, **kwargs):
        x64 = _config._values["jax_enable_x64"]
        if ufunc is not None and _builtins.any(_foreign_array(a) for a in args):
            return ufunc(*args, **kwargs)   # xarray's DataArray: it applies the ufunc to its contents
        if x64:
            return _wrap_out(fn(*convert(args), **kwargs), scalars=scalars)
        args, kwargs = _requested(name, at, args, kwargs)   # int32 operands: int32 arithmetic's results
        return _wrap_out(fn(*convert(args), **kwargs), not _int64_among(args, kwargs), scalars)
    wrapper.__wrapped_plain__ = True
    return wrapper


_primitives = {}   # the elementwise primitives' functions: {name: primitive}
for _name, _fn in list(globals().items()):
    if not _name.startswith("_") and isinstance(_fn, _types.FunctionType) and \
            (_fn.__module__ or "").startswith("jitad") and not getattr(_fn, "__wrapped_plain__", False):
        if getattr(_fn, "primitive", None) is not None and _fn.primitive.elementwise:
            _primitives[_name] = _fn.primitive
        globals()[_name] = _takes_plain_inputs(_name, _fn)
del _name, _fn
random.wrap_namespace = globals()["wrap_namespace"]   # autograd.numpy.random carries it too

# -- complex values: the functions that take them dispatch to jitad.numpy._complex ------------
from . import _complex  # noqa: E402
_complex.install(globals())
_fast_paths(globals(), _primitives)
