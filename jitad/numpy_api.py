"""NumPy's functions as compositions of jitad's primitives.

Each has NumPy's name, signature and semantics (as `jax.numpy` has them), works on staged
values and plain numbers alike (plain ones compute eagerly, through the same composition),
and is differentiable wherever its parts are: no function here has its own derivative rule.
"""
import builtins
import math
import string

import numpy as np

from . import numeric as N
from .errors import ArgumentError, IndexError_, ShapeError
from .ir import float_checks
from .ir.ops import Op
from .ir.types import FLOATS
from .staging import binary, is_staged, power as _power, result_dtype, unary

__all__ = [
    # elementwise
    "tan", "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "log2", "log10", "exp2", "power", "sign",
    "floor", "ceil", "trunc", "round", "rint", "reciprocal", "hypot", "logaddexp", "logaddexp2", "sinc",
    "fmax", "fmin", "mod", "remainder", "isnan", "isinf", "isfinite", "nan_to_num", "deg2rad",
    "rad2deg", "degrees", "radians",
    # reductions and scans
    "prod", "var", "std", "argmax", "argmin", "any", "all", "count_nonzero", "cumsum", "cumprod",
    # shapes
    "squeeze", "expand_dims", "ravel", "swapaxes", "moveaxis", "flip", "fliplr", "flipud", "roll",
    "tile", "repeat", "split", "array_split", "hstack", "vstack", "column_stack", "pad", "diag",
    "diagonal", "tril", "triu", "eye", "identity", "arange", "linspace", "meshgrid",
    "atleast_1d", "atleast_2d", "atleast_3d", "kron", "inner", "cross", "tensordot", "einsum",
    # sorting
    "sort", "argsort", "top_k",
    # indexing
    "take_along_axis", "nonzero", "flatnonzero", "argwhere", "unique", "extract", "compress",
    # more of NumPy
    "diff", "gradient", "rollaxis", "partition", "vsplit", "hsplit", "dsplit", "row_stack", "append", "rot90",
    "select", "real", "imag", "conj", "conjugate", "angle", "r_", "c_",
]

_LN2 = math.log(2.0)


def _shape(x):
    return tuple(N._shape(x))


def _float(x):
    """`x` as a float value: ints and bools become float64, as NumPy's float functions do."""
    return x if result_dtype(x) in FLOATS else N.convert(x, "f64")


def _np_dtype(x):
    return N.NUMPY_OF[result_dtype(x)]


# -- elementwise -----------------------------------------------------------------

def tan(x):
    """Tangent: `jitad.tan(0.0) == 0.0`."""
    x = _float(x)
    return N.sin(x) / N.cos(x)


def sinh(x):
    """Hyperbolic sine (libm's): `jitad.sinh(0.0) == 0.0`."""
    return unary(Op.SINH, _float(x))


def cosh(x):
    """Hyperbolic cosine (libm's): `jitad.cosh(0.0) == 1.0`."""
    return unary(Op.COSH, _float(x))


def _odd(x, f):
    """f(|x|) with x's sign: f's derivative at 0 from the right is the derivative at 0."""
    r = f(N.abs(x))
    return N.where(x < 0, -r, r)


def arcsinh(x):
    """Inverse hyperbolic sine, log(x + sqrt(x² + 1)) computed stably: `jitad.arcsinh(0.0) == 0.0`."""
    x = _float(x)

    def f(a):
        big = a > 1e8   # a*a would lose the 1 (and overflow past 1e154): log(2a) there
        small = N.where(big, 1.0, a)   # keeps the unused branch finite, and so its derivatives
        return N.where(big, N.log(N.where(big, a, 1.0)) + _LN2,
                       N.log1p(small + small * small / (1.0 + N.sqrt(1.0 + small * small))))
    return _odd(x, f)


def arccosh(x):
    """Inverse hyperbolic cosine for x >= 1 (NaN below): `jitad.arccosh(1.0) == 0.0`."""
    x = _float(x)
    big = x > 1e8
    t = N.where(big, 1.0, x) - 1.0
    # (sqrt(t) sqrt(t + 2), not sqrt(t (t + 2)): at x = 1 the derivative is inf, where the product
    # rule made inf * 0, and below 1 the value is NaN, where log1p read -inf or a number for x < -1)
    return N.where(big, N.log(N.where(big, x, 2.0)) + _LN2, N.log1p(t + N.sqrt(t) * N.sqrt(t + 2.0)))


def arctanh(x):
    """Inverse hyperbolic tangent on (-1, 1): `jitad.arctanh(0.0) == 0.0`."""
    x = _float(x)
    return 0.5 * (N.log1p(x) - N.log1p(-x))


def log2(x):
    """Base-2 logarithm (libm's: exact on powers of two): `jitad.log2(8.0) == 3.0`."""
    return unary(Op.LOG2, _float(x))


def log10(x):
    """Base-10 logarithm (libm's): `jitad.log10(100.0) == 2.0`."""
    return unary(Op.LOG10, _float(x))


def exp2(x):
    """2**x (libm's): `jitad.exp2(3.0) == 8.0`."""
    return unary(Op.EXP2, _float(x))


def power(x, y):
    """x**y, elementwise with broadcasting (an integer constant power is exact products):
    `jitad.power(2.0, 3) == 8.0`."""
    if not (is_staged(x) or is_staged(y)):
        return np.power(x, y)
    return _power(x, y)


def sign(x):
    """-1, 0 or 1 by the sign of x (NaN stays NaN; derivative 0): `jitad.sign(-2.0) == -1.0`.
    Bools have no sign (a TypeError, as in NumPy and JAX)."""
    if result_dtype(x) == "bool":
        raise ArgumentError("`sign` of bools is not defined (as in NumPy and JAX); convert them first: "
                            "`jnp.sign(x.astype(int))`, or use `x` itself (True is positive)")
    s = N.convert(x > 0, result_dtype(x)) - N.convert(x < 0, result_dtype(x))
    return N.where(x != x, x, s) if result_dtype(x) in FLOATS else s


def floor(x):
    """Largest integer <= x, as a float (derivative 0): `jitad.floor(-1.5) == -2.0`."""
    if result_dtype(x) not in FLOATS:
        return x
    return N.where(N.abs(x) < np.inf, x // 1.0, N.stop_gradient(x))   # inf // 1 is NaN


def ceil(x):
    """Smallest integer >= x, as a float (derivative 0): `jitad.ceil(-1.5) == -1.0`."""
    return -floor(-x) if result_dtype(x) in FLOATS else x


def trunc(x):
    """x rounded toward zero (derivative 0): `jitad.trunc(-1.5) == -1.0`."""
    return N.where(x < 0, ceil(x), floor(x)) if result_dtype(x) in FLOATS else x


def round(x, decimals=0):
    """x rounded to `decimals` digits, halves to even as NumPy: `jitad.round(2.5) == 2.0`."""
    if result_dtype(x) not in FLOATS:
        return x
    scale = 10.0 ** N._int_arg("round", "decimals", decimals, -400) if decimals else None
    y = x * scale if scale else x
    f = floor(y)
    d = y - f   # exact: f and y are within 1 of each other
    up = (d > 0.5) | ((d == 0.5) & (f - 2.0 * floor(f * 0.5) == 1.0))
    r = N.where(up, f + 1.0, f)
    return r / scale if scale else r


def rint(x):
    """x rounded to the nearest integer, halves to even, as a float (ints and bools too, as
    NumPy's and JAX's `rint`): `jitad.rint(2.5) == 2.0`."""
    return round(_float(x))


def reciprocal(x):
    """1 / x: `jitad.reciprocal(4.0) == 0.25`; `inf` at 0, as NumPy's (a Python float too)."""
    return binary(Op.DIV, 1.0, _float(x))


def hypot(x, y):
    """sqrt(x² + y²) without overflow or underflow (libm's; inf if either is inf, NaN or
    not): `jitad.hypot(3.0, 4.0) == 5.0`."""
    return binary(Op.HYPOT, _float(x), _float(y))


def logaddexp(x, y):
    """log(exp(x) + exp(y)) computed stably (ties share the gradient):
    `jitad.logaddexp(0.0, 0.0) == log(2)`."""
    x, y = _float(x), _float(y)
    top = N.maximum(x, y)
    inf = top == np.inf   # there the result is the larger argument, inf (its gradient: JAX's and the limit's)
    zero = N.zeros_like(top)   # (top's dtype: a Python number beside float32 stays float32)
    x, y = N.where(inf, zero, x), N.where(inf, zero, y)   # (no inf - inf in the branch not taken)
    m = N.stop_gradient(N.maximum(x, y))
    m = N.where(N.abs(m) < np.inf, m, 0.0)
    return N.where(inf, top, N.log(N.exp(x - m) + N.exp(y - m)) + m)


def logaddexp2(x, y):
    """log2(2**x + 2**y) computed stably: `jitad.logaddexp2(1.0, 1.0) == 2.0`."""
    return logaddexp(_float(x) * _LN2, _float(y) * _LN2) * (1.0 / _LN2)


def sinc(x):
    """sin(pi x) / (pi x), 1 at 0 (with the right derivatives there): `jitad.sinc(0.0) == 1.0`."""
    t = _float(x) * math.pi
    near = N.abs(t) < 1e-2   # Taylor series to t**6: error below 1e-17 there
    tn, tf = N.where(near, t, 0.0), N.where(near, 1.0, t)
    t2 = tn * tn
    return N.where(near, 1.0 - t2 / 6.0 * (1.0 - t2 / 20.0 * (1.0 - t2 / 42.0)), N.sin(tf) / tf)


def fmax(x, y):
    """Elementwise maximum that ignores NaN (NaN only where both are): `jitad.fmax(nan, 1.0) == 1.0`."""
    return N.where(y != y, x, N.where(x != x, y, N.maximum(x, y)))


def fmin(x, y):
    """Elementwise minimum that ignores NaN (NaN only where both are): `jitad.fmin(nan, 1.0) == 1.0`."""
    return N.where(y != y, x, N.where(x != x, y, N.minimum(x, y)))


def mod(x, y):
    """x - floor(x / y) * y, the sign of y as NumPy's `%`: `jitad.mod(-1.0, 3.0) == 2.0`."""
    if not (is_staged(x) or is_staged(y)):
        return np.mod(x, y)
    return x % y


remainder = mod


def isnan(x):
    """True where x is NaN: `jitad.isnan(float('nan')) == True`."""
    return x != x


def isinf(x):
    """True where x is +inf or -inf: `jitad.isinf(-float('inf')) == True`."""
    return N.abs(x) == np.inf if result_dtype(x) in FLOATS else x != x


def isfinite(x):
    """True where x is neither infinite nor NaN: `jitad.isfinite(1.0) == True`."""
    return N.abs(x) < np.inf if result_dtype(x) in FLOATS else x == x


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """x with NaN, +inf and -inf replaced (by 0 and the largest finite values by default):
    `jitad.nan_to_num(float('inf')) == 1.7976931348623157e308`."""
    if result_dtype(x) not in FLOATS:
        return x
    big = float(np.finfo(_np_dtype(x)).max)
    posinf = big if posinf is None else posinf
    neginf = -big if neginf is None else neginf
    return N.where(x != x, nan, N.where(x == np.inf, posinf, N.where(x == -np.inf, neginf, x)))


def deg2rad(x):
    """Degrees to radians: `jitad.deg2rad(180.0) == pi`."""
    return _float(x) * (math.pi / 180.0)


def rad2deg(x):
    """Radians to degrees: `jitad.rad2deg(pi) == 180.0`."""
    return _float(x) * (180.0 / math.pi)


radians, degrees = deg2rad, rad2deg


# -- reductions and scans ------------------------------------------------------------

def _reduced_shape(shape, axes, keepdims):
    return tuple(1 if d in axes else n for d, n in enumerate(shape) if keepdims or d not in axes)


def _axes_last(x, axes):
    """`x` with `axes` moved to the end and merged into one: (rest..., n)."""
    shape = _shape(x)
    rest = [d for d in range(len(shape)) if d not in axes]
    x = N.transpose(x, tuple(rest) + tuple(axes))
    return N.reshape(x, tuple(shape[d] for d in rest) + (math.prod(shape[d] for d in axes),))


def _with_dtype(x, dtype, who):
    if dtype is not None:
        return N.convert(x, N._dtype_name(dtype, who))
    return N.convert(x, "i64") if result_dtype(x) == "bool" else x


def prod(x, axis=None, dtype=None, keepdims=False):
    """Product over `axis` (exact at zeros and negatives: a tree of products, no logs):
    `jitad.prod(x, axis=0)`."""
    return _product(_with_dtype(x, dtype, "prod"), N._axes(x, axis, "prod"), keepdims)


def _product(x, axes, keepdims=False, initial=None):
    """The product over `axes` of `x` (staged), times `initial` (None: 1): each line halved
    log2(n) times, a product of slices. Its derivatives are exact where a factor is 0 and
    others overflow: each half's derivative is stopped where the other half is not finite
    while a zero factor lies outside it (exactly 0 there, where 0 * inf would make NaN)."""
    shape = _shape(x)
    y = _axes_last(x, axes) if shape else N.reshape(x, (1,))
    n, last = _shape(y)[-1], len(_shape(y)) - 1
    zeros = N.convert(y == 0, "i64") if result_dtype(x) in FLOATS else None
    line = None if zeros is None else N.sum(zeros, last, True) + _is_zero(initial)
    while n > 1:
        h = n // 2
        a, b = N.take_slice(y, last, 0, h), N.take_slice(y, last, h, 2 * h)
        if zeros is not None:
            za, zb = N.take_slice(zeros, last, 0, h), N.take_slice(zeros, last, h, 2 * h)
            a, b = _stopped_beside(a, b, line - za), _stopped_beside(b, a, line - zb)
            zeros = N.concatenate([za + zb, N.take_slice(zeros, last, 2 * h, n)], last) if n % 2 else za + zb
        y = N.concatenate([a * b, N.take_slice(y, last, 2 * h, n)], last) if n % 2 else a * b
        n = h + n % 2
    out_shape = _reduced_shape(shape, axes, keepdims)
    # (the empty product, 1, staged as an empty sum is: a Python branch on it raises under jit)
    p = N.reshape(N.sum(y, last) + 1 if n == 0 else y, out_shape)
    if initial is None:
        return p
    if zeros is not None and is_staged(initial):
        initial = _stopped_beside(initial, p, N.reshape(line, out_shape) - _is_zero(initial))
    return p * initial


def _of_nothing(x, axes, keepdims, value):
    """The result of a reduction over `axes` of `x`, one of them empty: `value` (its identity,
    or `initial=`) in the reduced shape and `x`'s dtype, staged where `x` is, as anything
    computed from a staged value (a Python branch on it raises under jit, as on JAX's)."""
    shape = _reduced_shape(_shape(x), axes, keepdims)
    if not is_staged(x) and not is_staged(value):
        return np.full(shape, value, np.dtype(x.dtype))
    # (all true, there being no entry: a select of `value` staged in `x`'s trace)
    nothing = N.sum(N.convert(x == x, "i64"), axes, keepdims) == 0 if is_staged(x) else np.ones(shape, bool)
    return N.convert(N.where(nothing, value, value), result_dtype(x))


def _is_zero(v):
    """1 where `v` (None: nothing) is 0, else 0, as an int (staged where `v` is)."""
    if v is None:
        return 0
    return N.convert(v == 0, "i64") if is_staged(v) else int(np.all(np.asarray(v) == 0))


def _stopped_beside(a, other, zeros_outside):
    """`a` as a factor beside `other`: its derivative stopped where `other` is not finite
    while `zeros_outside` > 0 (a zero among the other factors makes it exactly 0)."""
    return N.where((N.abs(other) < np.inf) | (zeros_outside == 0), a, N.stop_gradient(a))


def var(x, axis=None, dtype=None, ddof=0, keepdims=False):
    """Variance over `axis`, dividing by n - ddof: `jitad.var(x, axis=0, ddof=1)`."""
    axes = N._axes(x, axis, "var")
    x = _float(_with_dtype(x, dtype, "var"))
    shape = _shape(x)
    n = math.prod(shape[d] for d in axes)
    d = x - N.mean(x, axes, keepdims=True)
    return N.sum(N.square(d), axes, keepdims) / float(builtins.max(n - ddof, 0))


def std(x, axis=None, dtype=None, ddof=0, keepdims=False):
    """Standard deviation over `axis`: `jitad.std(x, ddof=1)`."""
    return N.sqrt(var(x, axis, dtype, ddof, keepdims))


def _arg_best(x, axis, keepdims, best, who):
    shape = _shape(x)
    if axis is None:
        out = _arg_best(ravel(x), 0, False, best, who)
        return N.reshape(out, (1,) * len(shape)) if keepdims else out
    axis = N._axis(who, axis, len(shape), shape)
    if not shape:
        return np.int64(0)
    n = shape[axis]
    if n == 0:
        raise ShapeError(f"`{who}` of an empty axis (shape {shape}): there is no position to return")
    x = N.stop_gradient(x) if is_staged(x) else np.asarray(x)
    if result_dtype(x) == "bool":
        x = N.convert(x, "i64")
    hit = x == best(x, axis, keepdims=True)
    if result_dtype(x) in FLOATS:
        hit = hit | (x != x)   # the first NaN, as NumPy
    iota = np.arange(n, dtype=np.int64).reshape([n if d == axis else 1 for d in range(len(shape))])
    return N.min(N.where(hit, iota, np.int64(n)), axis, keepdims)


def argmax(x, axis=None, keepdims=False):
    """Index of the first maximum along `axis` (of the flattened array by default):
    `jitad.argmax(x, axis=-1)`."""
    return _arg_best(x, axis, keepdims, N.max, "argmax")


def argmin(x, axis=None, keepdims=False):
    """Index of the first minimum along `axis`: `jitad.argmin(x, axis=0)`."""
    return _arg_best(x, axis, keepdims, N.min, "argmin")


def count_nonzero(x, axis=None, keepdims=False):
    """Number of non-zero entries over `axis` (an int): `jitad.count_nonzero(x > 0)`."""
    N._axes(x, axis, "count_nonzero")
    nz = N.convert(x != 0, "i64")
    return N.sum(nz, axis, keepdims) if _shape(x) else nz


def any(x, axis=None, keepdims=False):
    """True where some entry over `axis` is non-zero: `jitad.any(x > 1.0)`."""
    return count_nonzero(x, axis, keepdims) > 0


def all(x, axis=None, keepdims=False):
    """True where every entry over `axis` is non-zero: `jitad.all(x > 0.0, axis=0)`."""
    N._axes(x, axis, "all")
    zeros = N.convert(x == 0, "i64")
    return (N.sum(zeros, axis, keepdims) if _shape(x) else zeros) == 0


def cumsum(x, axis=None, dtype=None):
    """Running sums along `axis` (of the flattened array by default), one sequential pass
    (NumPy's rounding): `jitad.cumsum(x, axis=1)`."""
    return N.scan(N.Op.CUMSUM, _with_dtype(x, dtype, "cumsum"), axis)


def cumprod(x, axis=None, dtype=None):
    """Running products along `axis`, one sequential pass (NumPy's rounding; gradients exact
    at zeros): `jitad.cumprod(x, axis=0)`."""
    return N.scan(N.Op.CUMPROD, _with_dtype(x, dtype, "cumprod"), axis)


# -- shapes ----------------------------------------------------------------------

def squeeze(x, axis=None):
    """`x` without axes of length 1 (those in `axis`, or all): `jitad.squeeze(x, 0)`."""
    shape = _shape(x)
    if axis is None:
        axes = tuple(d for d, n in enumerate(shape) if n == 1)
    else:
        axes = N._axes(x, axis, "squeeze")
        for d in axes:
            if shape[d] != 1:
                raise ShapeError(f"`squeeze`: axis {d} of shape {shape} has length {shape[d]}, not 1")
    return N.reshape(x, tuple(n for d, n in enumerate(shape) if d not in axes))


def expand_dims(x, axis):
    """`x` with new axes of length 1 at the positions `axis`: `jitad.expand_dims(x, 0)`."""
    shape = _shape(x)
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    ndim = len(shape) + len(axes)
    axes = sorted(N._axis("expand_dims", a, ndim, shape) for a in axes)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"`expand_dims`: repeated axis in {axis!r}")
    rest = iter(shape)
    return N.reshape(x, tuple(1 if d in axes else next(rest) for d in range(ndim)))


def ravel(x):
    """`x` as one axis, in row-major order: `jitad.ravel(x)`."""
    return N.reshape(x, (-1,))


def moveaxis(x, source, destination):
    """`x` with axes `source` moved to positions `destination`: `jitad.moveaxis(x, 0, -1)`."""
    shape = _shape(x)
    src = [N._axis("moveaxis", a, len(shape), shape) for a in np.atleast_1d(source).tolist()]
    dst = [N._axis("moveaxis", a, len(shape), shape) for a in np.atleast_1d(destination).tolist()]
    if len(src) != len(dst):
        raise ShapeError(f"`moveaxis`: source {source!r} and destination {destination!r} differ in length")
    order = [d for d in range(len(shape)) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return N.transpose(x, tuple(order))


def swapaxes(x, axis1, axis2):
    """`x` with two axes exchanged: `jitad.swapaxes(x, 0, 1)`."""
    shape = _shape(x)
    a, b = (N._axis("swapaxes", d, len(shape), shape) for d in (axis1, axis2))
    perm = list(range(len(shape)))
    perm[a], perm[b] = b, a
    return N.transpose(x, tuple(perm))


def _take(x, index, axis):
    """Entries at the constant int `index` (1-D) along `axis`: a gather."""
    if not is_staged(x):
        return np.take(np.asarray(x), index, axis)
    index = np.asarray(index, dtype=np.int64)
    if index.size == 0:
        shape = list(_shape(x))
        shape[axis] = 0
        return np.zeros(shape, _np_dtype(x))
    return moveaxis(N.getitem(moveaxis(x, axis, 0), index), 0, axis)


def flip(x, axis=None):
    """`x` with the order of entries along `axis` (all axes by default) reversed: `jitad.flip(x, 0)`."""
    axes = N._axes(x, axis, "flip") if _shape(x) else ()
    for d in axes:
        x = _take(x, np.arange(_shape(x)[d] - 1, -1, -1), d)
    return x


def fliplr(x):
    """`x` with its columns (axis 1) reversed: `jitad.fliplr(m)`."""
    if len(_shape(x)) < 2:
        raise ShapeError(f"`fliplr`: shape {_shape(x)} has no axis 1; it needs 2 or more axes")
    return flip(x, 1)


def flipud(x):
    """`x` with its rows (axis 0) reversed: `jitad.flipud(m)`."""
    if len(_shape(x)) < 1:
        raise ShapeError("`flipud` of a scalar: it needs 1 or more axes")
    return flip(x, 0)


def roll(x, shift, axis=None):
    """`x` shifted by `shift` along `axis` (of the flattened array by default), entries
    wrapping around: `jitad.roll(x, 1)`."""
    if axis is None:
        return N.reshape(roll(ravel(x), shift, 0), _shape(x))
    shifts, axes = np.broadcast_arrays(np.atleast_1d(shift), np.atleast_1d(axis))
    shape = _shape(x)
    for s, a in zip(shifts.tolist(), axes.tolist()):
        a = N._axis("roll", a, len(shape), shape)
        n = shape[a]
        s = s % n if n else 0
        if s:
            x = N.concatenate([N.take_slice(x, a, n - s, n), N.take_slice(x, a, 0, n - s)], a)
    return x


def tile(x, reps):
    """`x` repeated `reps` times along each axis: `jitad.tile(x, (2, 1))`."""
    reps = N._dims("tile", reps)
    shape = _shape(x)
    d = builtins.max(len(reps), len(shape))
    reps, shape = (1,) * (d - len(reps)) + reps, (1,) * (d - len(shape)) + shape
    x = N.reshape(x, tuple(v for n in shape for v in (1, n)))
    x = N.broadcast_to(x, tuple(v for r, n in zip(reps, shape) for v in (r, n)))
    return N.reshape(x, tuple(r * n for r, n in zip(reps, shape)))


def repeat(x, repeats, axis=None):
    """Each entry repeated `repeats` times (a constant int, or one per entry) along `axis`
    (of the flattened array by default): `jitad.repeat(x, 2, axis=0)`."""
    if is_staged(repeats):
        raise ArgumentError("`repeat`: repeats must be a constant (an int or a NumPy array): it sets "
                            "the output's shape, which must be known when tracing")
    if axis is None:
        x, axis = ravel(x), 0
    shape = _shape(x)
    axis = N._axis("repeat", axis, len(shape), shape)
    if not shape:
        x, shape = N.reshape(x, (1,)), (1,)
    repeats = np.asarray(repeats)
    if repeats.dtype.kind not in "iu" or (repeats < 0).any():
        raise ArgumentError(f"`repeat`: repeats={repeats!r}; it must be non-negative ints")
    if repeats.ndim == 0 or repeats.size == 1:
        r = int(repeats.reshape(-1)[0])
        wide = N.broadcast_to(expand_dims(x, axis + 1), shape[:axis + 1] + (r,) + shape[axis + 1:])
        return N.reshape(wide, shape[:axis] + (shape[axis] * r,) + shape[axis + 1:])
    if repeats.shape != (shape[axis],):
        raise ShapeError(f"`repeat`: {repeats.size} repeats for axis {axis} of length {shape[axis]}")
    return _take(x, np.repeat(np.arange(shape[axis]), repeats), axis)


def array_split(x, indices_or_sections, axis=0):
    """`x` cut along `axis` into `n` nearly equal parts, or at the given indices:
    `jitad.array_split(x, 3)`."""
    shape = _shape(x)
    axis = N._axis("array_split", axis, len(shape), shape)
    n = shape[axis]
    if np.ndim(indices_or_sections) == 0:
        k = N._int_arg("array_split", "sections", indices_or_sections, 1)
        sizes = [n // k + 1] * (n % k) + [n // k] * (k - n % k)
        cuts = np.cumsum([0] + sizes).tolist()
    else:
        cuts = [0] + [builtins.min(builtins.max(int(c) + (n if c < 0 else 0), 0), n)
                      for c in indices_or_sections] + [n]
    return [N.take_slice(x, axis, a, builtins.max(a, b)) for a, b in zip(cuts[:-1], cuts[1:])]


def split(x, indices_or_sections, axis=0):
    """`x` cut along `axis` into `n` equal parts, or at the given indices: `jitad.split(x, 2, axis=1)`."""
    if np.ndim(indices_or_sections) == 0:
        shape = _shape(x)
        n = shape[N._axis("split", axis, len(shape), shape)]
        k = N._int_arg("split", "sections", indices_or_sections, 1)
        if n % k:
            raise ShapeError(f"`split`: axis {axis} of length {n} does not split into {k} equal parts; "
                             "use `jitad.array_split`")
    return array_split(x, indices_or_sections, axis)


def atleast_1d(*xs):
    """Each argument with at least one axis: `jitad.atleast_1d(2.0).shape == (1,)`."""
    out = [N.reshape(x, (1,)) if not _shape(x) else x for x in xs]
    return out[0] if len(out) == 1 else out


def atleast_2d(*xs):
    """Each argument with at least two axes (new ones in front): `jitad.atleast_2d(v).shape == (1, n)`."""
    out = [N.reshape(x, (1,) * (2 - len(_shape(x))) + _shape(x)) if len(_shape(x)) < 2 else x for x in xs]
    return out[0] if len(out) == 1 else out


def atleast_3d(*xs):
    """Each argument with at least three axes, as NumPy: (n,) -> (1, n, 1), (m, n) -> (m, n, 1)."""
    def three(x):
        s = _shape(x)
        return N.reshape(x, {0: (1, 1, 1), 1: (1,) + s + (1,), 2: s + (1,)}[len(s)]) if len(s) < 3 else x
    out = [three(x) for x in xs]
    return out[0] if len(out) == 1 else out


def hstack(xs):
    """Join along axis 1 (axis 0 for 1-D arrays): `jitad.hstack([a, b])`."""
    xs = [atleast_1d(x) for x in N._array_list("hstack", xs)]
    return N.concatenate(xs, 0 if len(_shape(xs[0])) == 1 else 1)


def vstack(xs):
    """Join along axis 0, 1-D arrays as rows: `jitad.vstack([a, b])`."""
    return N.concatenate([atleast_2d(x) for x in N._array_list("vstack", xs)], 0)


def column_stack(xs):
    """1-D arrays as columns (2-D ones as they are) joined along axis 1: `jitad.column_stack([a, b])`."""
    xs = N._array_list("column_stack", xs)
    return N.concatenate([N.reshape(x, (-1, 1)) if len(_shape(x)) < 2 else x for x in xs], 1)


def pad(x, pad_width, mode="constant", constant_values=0):
    """`x` padded on each axis by `pad_width` ((before, after) per axis, or one pair or int for
    all); modes 'constant', 'edge', 'reflect', 'symmetric', 'wrap': `jitad.pad(x, 1)`."""
    shape = _shape(x)
    try:
        kind = np.asarray(pad_width).dtype.kind
    except (TypeError, ValueError):
        kind = None
    if kind not in ("i", "u"):
        raise ArgumentError(f"`pad`: pad_width {pad_width!r} is not made of integers; widths count "
                            "elements: give ints, e.g. `pad(x, 2)` or `pad(x, ((1, 2), (0, 0)))`")
    try:
        widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (len(shape), 2))
    except ValueError:
        raise ShapeError(f"`pad`: pad_width {pad_width!r} for shape {shape}: give (before, after) "
                         "per axis, one pair, or one int") from None
    if (np.asarray(pad_width) < 0).any():   # (a 0-d x: widths is empty)
        raise ArgumentError(f"`pad`: pad_width {pad_width!r} has a negative width")
    if not shape:   # a 0-d array has no axis to pad: itself, as NumPy and JAX
        return x if is_staged(x) else np.array(x)
    if mode == "constant":
        new = tuple(int(n + a + b) for n, (a, b) in zip(shape, widths))
        starts = tuple(int(a) for a, _ in widths)
        stops = tuple(s + n for s, n in zip(starts, shape))
        if not is_staged(x):
            return np.pad(np.asarray(x), widths, constant_values=constant_values)
        out = N.unslice(x, new, starts, stops, (1,) * len(shape))
        constant_values = np.asarray(constant_values).astype(_np_dtype(x))   # as NumPy: in x's dtype
        if np.ndim(constant_values) == 0 and constant_values == 0:
            return out
        inside = np.zeros(new, bool)
        inside[tuple(slice(a, b) for a, b in zip(starts, stops))] = True
        if np.ndim(constant_values) == 0:
            return N.where(inside, out, constant_values[()])
        fill = np.pad(np.zeros(shape), widths, constant_values=constant_values)
        return N.where(inside, out, fill.astype(_np_dtype(x)))
    if mode not in ("edge", "reflect", "symmetric", "wrap"):
        raise ArgumentError(f"`pad`: mode {mode!r} is not supported; use 'constant', 'edge', 'reflect', "
                            "'symmetric' or 'wrap'")
    for d, (a, b) in enumerate(widths):   # each padded position reads the entry NumPy's rule names
        if a or b:
            if shape[d] == 0:
                raise ShapeError(f"`pad`: mode {mode!r} cannot pad the empty axis {d} of shape {shape}")
            x = _take(x, np.pad(np.arange(shape[d]), (int(a), int(b)), mode=mode), d)
    return x


def diagonal(x, offset=0, axis1=0, axis2=1):
    """The diagonal at `offset` over two axes, as the last axis: `jitad.diagonal(m)`."""
    shape = _shape(x)
    if len(shape) < 2:
        raise ShapeError(f"`diagonal`: shape {shape} needs 2 or more axes")
    a1, a2 = (N._axis("diagonal", a, len(shape), shape) for a in (axis1, axis2))
    if a1 == a2:
        raise ShapeError(f"`diagonal`: axis1 and axis2 are the same axis ({a1})")
    n1, n2 = shape[a1], shape[a2]
    rows = np.arange(builtins.max(0, -offset), builtins.min(n1, n2 - offset))
    y = _axes_last(x, (a1, a2))   # (rest..., n1 * n2)
    return _take(y, rows * n2 + rows + offset, len(_shape(y)) - 1)


def diag(v, k=0):
    """A 1-D `v` on the k-th diagonal of a square matrix, or the k-th diagonal of a 2-D `v`:
    `jitad.diag(jitad.diag(m)) `."""
    shape = _shape(v)
    if len(shape) == 2:
        return diagonal(v, k)
    if len(shape) != 1:
        raise ShapeError(f"`diag`: shape {shape}; it takes a 1-D or 2-D array")
    n = shape[0]
    m = n + builtins.abs(k)
    i = np.arange(n)
    index = np.full(m * m, n)   # position n of [v, 0] is the zero
    index[(i + builtins.max(-k, 0)) * m + i + builtins.max(k, 0)] = i
    padded = N.concatenate([v, np.zeros(1, _np_dtype(v))], 0)
    return N.reshape(_take(padded, index, 0), (m, m))


def trace(x, offset=0, axis1=0, axis2=1, dtype=None):
    """Sum of the diagonal at `offset`: `jitad.trace(m)` (`jitad.api.trace` takes this branch
    when its first argument is not a function)."""
    return N.sum(_with_dtype(diagonal(x, offset, axis1, axis2), dtype, "trace"), -1)


def _tri_mask(x, k, upper, who):
    shape = _shape(x)
    if len(shape) < 2:
        raise ShapeError(f"`{who}`: shape {shape} needs 2 or more axes")
    n, m = shape[-2:]
    below = np.tri(n, m, k - 1 if upper else k, dtype=bool)
    return ~below if upper else below


def tril(x, k=0):
    """`x` with the entries above the k-th diagonal zeroed: `jitad.tril(m)`."""
    return N.where(_tri_mask(x, k, False, "tril"), x, np.zeros((), _np_dtype(x)))


def triu(x, k=0):
    """`x` with the entries below the k-th diagonal zeroed: `jitad.triu(m, 1)`."""
    return N.where(_tri_mask(x, k, True, "triu"), x, np.zeros((), _np_dtype(x)))


def _dt(dtype, who, default="f64"):
    return N.NUMPY_OF[N._dtype_name(default if dtype is None else dtype, who)]


def eye(N_, M=None, k=0, dtype=None):
    """A matrix with ones on the k-th diagonal (a constant): `jitad.eye(3)`."""
    return np.eye(N_, M, k, dtype=_dt(dtype, "eye"))


def identity(n, dtype=None):
    """The n×n identity matrix (a constant): `jitad.identity(3)`."""
    return np.identity(n, dtype=_dt(dtype, "identity"))


def arange(start, stop=None, step=1, dtype=None):
    """Evenly spaced constant values in [start, stop): `jitad.arange(5)`."""
    if builtins.any(is_staged(a) for a in (start, stop, step)):
        raise ArgumentError("`arange`: start, stop and step must be constants (they set the shape); "
                            "for staged ends use `jitad.linspace` or `start + step * jitad.arange(n)`")
    out = np.arange(start, stop, step) if stop is not None else np.arange(start)
    return out if dtype is None else out.astype(_dt(dtype, "arange"))


def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """`num` evenly spaced values from `start` to `stop` (which may be staged):
    `jitad.linspace(0.0, 1.0, 5)`."""
    num = N._int_arg("linspace", "num", num, 0)
    div = (num - 1) if endpoint else num
    t = np.arange(num, dtype=np.float64) / builtins.max(div, 1)
    if not (is_staged(start) or is_staged(stop)):
        out = np.linspace(start, stop, num, endpoint, dtype=None if dtype is None else _dt(dtype, "linspace"),
                          axis=axis)
        step = (np.asarray(stop) - np.asarray(start)) / div if div else np.nan
        return (out, step) if retstep else out
    start, stop = _float(start), _float(stop)
    t = t.astype(N.NUMPY_OF[result_dtype(start, stop)])
    shape = np.broadcast_shapes(_shape(start), _shape(stop))
    t = t.reshape((num,) + (1,) * len(shape))
    step = stop - start
    out = start + t * step
    if endpoint and num > 1:   # the last value is `stop` exactly, as NumPy's
        out = N.concatenate([N.take_slice(out, 0, 0, num - 1), N.reshape(N.broadcast_to(stop, shape),
                                                                         (1,) + shape)], 0)
    out = moveaxis(out, 0, axis) if shape else out
    out = N.convert(out, N._dtype_name(dtype, "linspace")) if dtype is not None else out
    return (out, step / float(div) if div else step * np.nan) if retstep else out


def meshgrid(*xs, indexing="xy", sparse=False):
    """Coordinate arrays from 1-D coordinate vectors ('xy': Cartesian, 'ij': matrix indexing):
    `X, Y = jitad.meshgrid(x, y)`."""
    if indexing not in ("xy", "ij"):
        raise ArgumentError(f"`meshgrid`: indexing={indexing!r}; use 'xy' or 'ij'")
    xs = [ravel(x) for x in xs]
    shape = [_shape(x)[0] for x in xs]
    if indexing == "xy" and len(xs) > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, x in enumerate(xs):
        d = {0: 1, 1: 0}.get(i, i) if indexing == "xy" and len(xs) > 1 else i
        one = N.reshape(x, tuple(-1 if j == d else 1 for j in range(len(xs))))
        out.append(one if sparse else N.broadcast_to(one, tuple(shape)))
    return out


def kron(a, b):
    """Kronecker product: block (i, j) is a[i, j] * b: `jitad.kron(a, b)`."""
    sa, sb = _shape(a), _shape(b)
    d = builtins.max(len(sa), len(sb))
    sa, sb = (1,) * (d - len(sa)) + sa, (1,) * (d - len(sb)) + sb
    a = N.reshape(a, tuple(v for n in sa for v in (n, 1)))
    b = N.reshape(b, tuple(v for n in sb for v in (1, n)))
    return N.reshape(a * b, tuple(m * n for m, n in zip(sa, sb)))


def _normalize_axes(axes, ndim, shape, who):
    return [N._axis(who, a, ndim, shape) for a in axes]


def tensordot(a, b, axes=2):
    """Sum of products over `axes` of `a` and `b` (an int n: a's last n with b's first n;
    or two lists): `jitad.tensordot(a, b, axes=([1], [0]))`."""
    sa, sb = _shape(a), _shape(b)
    if np.ndim(axes) == 0:
        n = N._int_arg("tensordot", "axes", axes, 0)
        if n > len(sa) or n > len(sb):
            raise ShapeError(f"`tensordot`: axes={n} for shapes {sa} and {sb}")
        ax_a, ax_b = list(range(len(sa) - n, len(sa))), list(range(n))
    else:
        try:
            ax_a, ax_b = ([int(v)] if np.ndim(v) == 0 else [int(u) for u in v] for v in axes)
        except (TypeError, ValueError):
            raise ArgumentError(f"`tensordot`: axes={axes!r}; use an int or two lists of axes") from None
        ax_a = _normalize_axes(ax_a, len(sa), sa, "tensordot")
        ax_b = _normalize_axes(ax_b, len(sb), sb, "tensordot")
    if len(ax_a) != len(ax_b) or builtins.any(sa[i] != sb[j] for i, j in zip(ax_a, ax_b)):
        raise ShapeError(f"`tensordot`: axes {ax_a} of shape {sa} do not match axes {ax_b} of shape {sb}")
    free_a = [d for d in range(len(sa)) if d not in ax_a]
    free_b = [d for d in range(len(sb)) if d not in ax_b]
    k = math.prod(sa[d] for d in ax_a)
    a2 = N.reshape(N.transpose(a, tuple(free_a + ax_a)), (-1, k)) if sa else N.reshape(a, (1, 1))
    b2 = N.reshape(N.transpose(b, tuple(ax_b + free_b)), (k, -1)) if sb else N.reshape(b, (1, 1))
    out = N.matmul(a2, b2)
    return N.reshape(out, tuple(sa[d] for d in free_a) + tuple(sb[d] for d in free_b))


def inner(a, b):
    """Sum of products over the last axes: `jitad.inner(u, v)`."""
    if not _shape(a) or not _shape(b):
        return a * b
    return tensordot(a, b, ([-1], [-1]))


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Cross product of 3-vectors (or the z component for 2-vectors) along the last axis:
    `jitad.cross(u, v)`."""
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = moveaxis(a, axisa, -1), moveaxis(b, axisb, -1)
    na, nb = _shape(a)[-1], _shape(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ShapeError(f"`cross`: vectors of length {na} and {nb}; they must have 2 or 3 components")
    ca = [a[..., i] for i in range(na)] + [0.0] * (3 - na)
    cb = [b[..., i] for i in range(nb)] + [0.0] * (3 - nb)
    z = ca[0] * cb[1] - ca[1] * cb[0]
    if na == nb == 2:
        return z
    x, y = ca[1] * cb[2] - ca[2] * cb[1], ca[2] * cb[0] - ca[0] * cb[2]
    shape = np.broadcast_shapes(*(_shape(c) for c in (x, y, z)))
    out = N.stack([N.broadcast_to(c, shape) for c in (x, y, z)], -1)
    return moveaxis(out, -1, axisc)


# -- batched matrix products and einsum ------------------------------------------------

def bmm(a, b, ta=False, tb=False):
    """(B, m, k) @ (B, k, n) -> (B, m, n), op(a) a transpose of each entry where `ta`
    says (no copy): one `bmm` primitive, a GEMM per batch entry."""
    if _shape(a)[0] == 1:
        m2 = lambda x: N.reshape(x, _shape(x)[1:])
        out = N.matmul_t(m2(a), m2(b), ta=ta, tb=tb)
        return N.reshape(out, (1,) + _shape(out))
    return N.bind(N.Op.BMM, a, b, ta=ta, tb=tb)


def matmul_nd(a, b):
    """NumPy's `matmul` for N-D operands: batch axes (all but the last two) broadcast."""
    sa, sb = _shape(a), _shape(b)
    if not sa or not sb:
        raise ShapeError(f"`matmul`: shapes {sa} and {sb}: operands need at least one axis "
                         "(for a scalar factor use `*`)")
    a2 = N.reshape(a, (1,) + sa) if len(sa) == 1 else a
    b2 = N.reshape(b, sb + (1,)) if len(sb) == 1 else b
    (m, k), (k2, n) = _shape(a2)[-2:], _shape(b2)[-2:]
    if k != k2:
        raise ShapeError(f"`matmul`: shapes {sa} and {sb} do not multiply ({k} against {k2})")
    try:
        batch = np.broadcast_shapes(_shape(a2)[:-2], _shape(b2)[:-2])
    except ValueError:
        raise ShapeError(f"`matmul`: the batch axes of shapes {sa} and {sb} do not broadcast") from None
    nb = math.prod(batch)   # (sizes spelled out: -1 is ambiguous in a reshape of an empty array)
    if len(_shape(b2)) == 2:   # one right matrix: every row of every batch is one GEMM
        out = N.reshape(N.matmul(N.reshape(a2, (nb * m, k)), b2), batch + (m, n))
    elif len(_shape(a2)) == 2:   # one left matrix: A @ [B_1 ... B_nb] side by side
        bt = N.reshape(moveaxis(N.reshape(b2, (nb, k, n)), 1, 0), (k, nb * n))
        out = moveaxis(N.reshape(N.matmul(a2, bt), (m, nb, n)), 0, 1)
        out = N.reshape(out, batch + (m, n))
    else:
        (a2, ta), (b2, tb) = N.untransposed(a2), N.untransposed(b2)   # `q @ k.swapaxes(-1, -2)`: k in place
        a3 = N.reshape(N.broadcast_to(a2, batch + ((k, m) if ta else (m, k))), (nb,) + ((k, m) if ta else (m, k)))
        b3 = N.reshape(N.broadcast_to(b2, batch + ((n, k) if tb else (k, n))), (nb,) + ((n, k) if tb else (k, n)))
        out = N.reshape(bmm(*N._promoted(a3, b3), ta=ta, tb=tb), batch + (m, n))
    shape = batch + ((m,) if len(sa) > 1 else ()) + ((n,) if len(sb) > 1 else ())
    return N.reshape(out, shape)


def dot_nd(a, b):
    """NumPy's `dot` beyond 1-D and 2-D: a product with a scalar, or a sum over a's last
    axis and b's second to last."""
    sa, sb = _shape(a), _shape(b)
    if not sa or not sb:
        return a * b
    return tensordot(a, b, ([-1], [0 if len(sb) == 1 else -2]))


def _parse_einsum(subscripts, shapes):
    if not isinstance(subscripts, str):
        raise ArgumentError(f"`einsum`: subscripts {subscripts!r} must be a string such as 'ij,jk->ik'")
    spec = subscripts.replace(" ", "")
    ins, arrow, out = spec.partition("->")
    terms = ins.split(",")
    if len(terms) != len(shapes):
        raise ShapeError(f"`einsum`: subscripts {subscripts!r} name {len(terms)} operands, "
                         f"{len(shapes)} were given")
    used = set(c for c in spec if c.isalpha())
    spare = [c for c in string.ascii_letters if c not in used]
    n_ell = builtins.max([len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes) if "..." in t],
                         default=0)
    ell = "".join(spare[:n_ell])
    result = []
    for t, s in zip(terms, shapes):
        if "..." in t:
            k = len(s) - len(t.replace("...", ""))
            t = t.replace("...", ell[n_ell - k:] if k > 0 else "")
        if not builtins.all(c.isalpha() for c in t) or len(t) != len(s):
            raise ShapeError(f"`einsum`: subscripts '{t}' do not match an operand of shape {s}")
        result.append(t)
    if arrow:
        out = out.replace("...", ell)
        if not builtins.all(c.isalpha() for c in out) or len(set(out)) != len(out) or \
                builtins.any(c not in "".join(result) for c in out):
            raise ShapeError(f"`einsum`: output subscripts '{out}' must name distinct indices of the inputs")
    else:
        counts = {c: "".join(result).count(c) for c in set("".join(result))}
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    sizes = {}
    for t, s in zip(result, shapes):
        for c, n in zip(t, s):
            if len({m for d, m in zip(t, s) if d == c}) > 1:
                raise ShapeError(f"`einsum`: index '{c}' repeated in operand '{t}' of shape {s} has different lengths")
            if sizes.setdefault(c, n) != n and n != 1:   # a length-1 axis broadcasts, as NumPy
                if sizes[c] != 1:
                    raise ShapeError(f"`einsum`: index '{c}' has lengths {sizes[c]} and {n} in {subscripts!r}")
                sizes[c] = n
    return result, out, sizes


def _einsum_squeeze(x, idx, sizes):
    """`x` without the length-1 axes of indices other operands give more entries (they broadcast)."""
    drop = [d for d, c in enumerate(idx) if _shape(x)[d] == 1 and sizes[c] != 1]
    if not drop:
        return x, idx
    return (N.reshape(x, tuple(n for d, n in enumerate(_shape(x)) if d not in drop)),
            "".join(c for d, c in enumerate(idx) if d not in drop))


def _einsum_prepare(x, idx, keep):
    """Take diagonals of repeated indices, sum indices no one else needs."""
    while len(set(idx)) != len(idx):
        c = next(c for c in idx if idx.count(c) > 1)
        i, j = idx.index(c), idx.index(c, idx.index(c) + 1)
        x = diagonal(x, 0, i, j)
        idx = "".join(ch for d, ch in enumerate(idx) if d not in (i, j)) + c
    drop = tuple(d for d, c in enumerate(idx) if c not in keep)
    if drop:
        x = N.sum(x, drop)
        idx = "".join(c for c in idx if c in keep)
    return x, idx


def _contract(a, ia, b, ib, keep):
    """One pairwise contraction as a (batched) GEMM; an operand already laid out as
    batch + inner + free is read transposed instead of copied."""
    batch = [c for c in ia if c in ib and c in keep]
    inner_ = [c for c in ia if c in ib and c not in keep]
    fa, fb = [c for c in ia if c not in ib], [c for c in ib if c not in ia]
    sa = dict(zip(ia, _shape(a)))
    sb = dict(zip(ib, _shape(b)))
    B = math.prod(sa[c] for c in batch)
    M, K, Nn = math.prod(sa[c] for c in fa), math.prod(sa[c] for c in inner_), math.prod(sb[c] for c in fb)
    ta, tb = list(ia) == batch + inner_ + fa, list(ib) == batch + fb + inner_
    a3 = N.reshape(N.transpose(a, tuple(ia.index(c) for c in batch + fa + inner_)), (B, M, K)) if not ta \
        else N.reshape(a, (B, K, M))
    b3 = N.reshape(N.transpose(b, tuple(ib.index(c) for c in batch + inner_ + fb)), (B, K, Nn)) if not tb \
        else N.reshape(b, (B, Nn, K))
    out = bmm(*N._promoted(a3, b3), ta=ta, tb=tb)
    idx = "".join(batch + fa + fb)
    return N.reshape(out, tuple(sa[c] for c in batch + fa) + tuple(sb[c] for c in fb)), idx


def einsum(subscripts, *operands):
    """Sums of products named by index letters ('...' for leading axes), contracted pairwise
    (smallest result first) as GEMMs: `jitad.einsum('bqd,bkd->bqk', q, k)`."""
    terms, out, sizes = _parse_einsum(subscripts, [_shape(x) for x in operands])
    ops = [_einsum_squeeze(x, t, sizes) for x, t in zip(operands, terms)]
    ops = [_einsum_prepare(x, t, out + "".join(u for j, (_, u) in enumerate(ops) if j != i))
           for i, (x, t) in enumerate(ops)]
    while len(ops) > 1:
        best = None
        for i in range(len(ops)):
            for j in range(i + 1, len(ops)):
                keep = out + "".join(t for k, (_, t) in enumerate(ops) if k not in (i, j))
                size = math.prod(sizes[c] for c in set(ops[i][1] + ops[j][1]) if c in keep)
                if best is None or size < best[0]:
                    best = (size, i, j, keep)
        _, i, j, keep = best
        (a, ia), (b, ib) = ops[i], ops[j]
        a, ia = _einsum_prepare(a, ia, keep + ib)
        b, ib = _einsum_prepare(b, ib, keep + ia)
        ops = [o for k, o in enumerate(ops) if k not in (i, j)] + [_contract(a, ia, b, ib, keep)]
    x, idx = _einsum_prepare(*ops[0], out)
    return N.transpose(x, tuple(idx.index(c) for c in out)) if idx else x


# -- sorting ----------------------------------------------------------------------------

def _sort_along(op, a, axis, kind, order, who):
    """The primitive `op` (it sorts rows along the last axis) applied along `axis`."""
    if order is not None:
        raise ArgumentError(f"`{who}`: order= sorts structured arrays, which jitad does not have; leave it None")
    if axis is None:
        a, axis = ravel(a), 0
    shape = _shape(a)
    if not shape:
        raise ShapeError(f"`{who}`: a 0-d array has no axis to sort; use axis=None or an array with an axis")
    axis = N._axis(who, axis, len(shape), shape)
    x = N.convert(a, "i64") if result_dtype(a) == "bool" else a
    out = moveaxis(N.bind(op, moveaxis(x, axis, -1)), -1, axis)
    return out if result_dtype(a) != "bool" or op == Op.ARGSORT else N.convert(out, "bool")


def sort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """`a` sorted along `axis` (the last by default; None: flattened), NaNs last as NumPy; a
    new array (as jax.numpy). Gradients flow back through the permutation:
    `jitad.sort(x)[..., -1]` is the largest entry of each row, and its gradient is 1 there."""
    out = _sort_along(Op.SORT, a, axis, kind, order, "sort")
    return flip(out, 0 if axis is None else axis) if descending else out


def argsort(a, axis=-1, kind=None, order=None, *, stable=True, descending=False):
    """The int64 indices that sort `a` along `axis` (None: flattened); stable (ties keep their
    order, as NumPy's kind='stable' and jax.numpy), NaNs last:
    `jitad.take_along_axis(x, jitad.argsort(x, 1), 1)` equals `jitad.sort(x, 1)`."""
    if axis is None:
        a, axis = ravel(a), 0
    if not descending or not _shape(a):
        return _sort_along(Op.ARGSORT, a, axis, kind, order, "argsort")
    # stable descending (ties keep their order): the ascending order of the reversed array, reversed
    n = _shape(a)[N._axis("argsort", axis, len(_shape(a)), _shape(a))]
    return (n - 1) - flip(_sort_along(Op.ARGSORT, flip(a, axis), axis, kind, order, "argsort"), axis)


def top_k(operand, k):
    """The `k` largest entries along the last axis, in descending order, and their int64
    indices (as `jax.lax.top_k`; equal entries: the lower index first):
    `values, indices = jitad.top_k(x, 3)`. Differentiable in the values."""
    shape = _shape(operand)
    if not shape:
        raise ShapeError("`top_k`: the operand needs at least one axis")
    k = N._int_arg("top_k", "k", k, 0)
    if k > shape[-1]:
        raise ArgumentError(f"`top_k`: k={k} is more than the last axis has ({shape[-1]})")
    x = N.convert(operand, "i64") if result_dtype(operand) == "bool" else operand
    indices = argsort(x, -1, descending=True)[..., :k]
    return take_along_axis(operand, indices, -1), indices


# -- indexing -------------------------------------------------------------------------

def take_along_axis(arr, indices, axis):
    """`arr`'s entries at `indices` along `axis`, the other axes broadcast as NumPy (a
    negative index counts from the end; out of range after that clamps, as JAX):
    `jitad.take_along_axis(x, jitad.argmax(x, 1, keepdims=True), 1)`."""
    if axis is None:
        arr, axis = ravel(arr), 0
    shape, ishape = _shape(arr), _shape(indices)
    axis = N._axis("take_along_axis", axis, len(shape), shape)
    if len(ishape) != len(shape):
        raise ShapeError(f"`take_along_axis`: indices of shape {ishape} for an array of shape {shape}; "
                         "they need the same number of axes (add axes with `[..., None]`)")
    if result_dtype(indices) != "i64":
        raise ArgumentError(f"`take_along_axis`: indices must be ints, got {result_dtype(indices)}")
    try:
        out_shape = np.broadcast_shapes(shape[:axis] + (1,) + shape[axis + 1:], ishape)
    except ValueError:
        raise ShapeError(f"`take_along_axis`: indices of shape {ishape} do not broadcast against the array's "
                         f"shape {shape} off axis {axis}") from None
    n = shape[axis]
    strides = np.cumprod((shape + (1,))[:0:-1])[::-1]   # row-major, in elements
    rest = sum(np.arange(m).reshape((-1,) + (1,) * (len(shape) - d - 1)) * (strides[d] if shape[d] > 1 else 0)
               for d, m in enumerate(out_shape) if d != axis)
    i = N.broadcast_to(indices, out_shape) if is_staged(indices) else np.broadcast_to(indices, out_shape)
    flat = N.clip_index(i, n) * int(strides[axis]) + rest
    if not is_staged(arr) and not is_staged(flat):
        return np.reshape(arr, -1)[flat]
    return N.getitem(N.reshape(arr, (-1,)), flat)


def _data_dependent(name):
    def fn(x, *args, **kwargs):
        if is_staged(x) or builtins.any(is_staged(a) for a in args):
            raise N.data_dependent_shape(f"`{name}`")
        return getattr(np, name)(x, *args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"NumPy's `{name}` on plain arrays; on a staged value a StagingError (its result's "
                  "shape depends on the values): use `where`, or a fixed size.")
    return fn


nonzero, flatnonzero, argwhere, unique, extract, compress = (
    _data_dependent(n) for n in ("nonzero", "flatnonzero", "argwhere", "unique", "extract", "compress"))


class _At:
    """`x.at[index]`: JAX's functional updates of a staged `x`, each a new array:
    `x.at[idx].set(v)`, `.add(v)`, `.multiply(v)`, `.min(v)`, `.max(v)`; `index` is any
    index `x[index]` takes, `v` broadcasts to `x[index]`'s shape; differentiable in `x`
    and `v`. Repeated positions apply in order (`add` sums them, `set` keeps the last); at a
    tie `min` and `max` share the gradient equally among the old value and the equal updates.
    Static indices cost a gather per repeat; staged ones compare every position with each
    index (O(indices × size)) for `multiply`, `min` and `max`; `set` and `add` are one
    `scatter` (O(size + indices))."""

    def __init__(self, x, index=None):
        self.x, self.index = x, index

    def __getitem__(self, index):
        return _At(self.x, index)

    def get(self, *, mode=None, fill_value=None, indices_are_sorted=False, unique_indices=False):
        """`x[index]`; out-of-range indices clamp (`mode=None` or 'clip'), or read
        `fill_value` (`mode='fill'`: NaN, the lowest int, or True by default)."""
        _check_mode(mode, ("clip", "fill", "promise_in_bounds"))
        if mode == "fill":
            return _same_dtype(self.x, _filled(self.x, self.index, fill_value))
        x, key = self.x, _clipped(self.x, self.index)
        return N.getitem(x, key) if is_staged(x) or _has_staged(key) else np.asarray(x)[key]

    def set(self, v, *, mode=None, indices_are_sorted=False, unique_indices=False):
        return self._apply(v, "set", mode)

    def add(self, v, *, mode=None, indices_are_sorted=False, unique_indices=False):
        return self._apply(v, "add", mode)

    def subtract(self, v, *, mode=None, indices_are_sorted=False, unique_indices=False):
        return self._apply(-v if is_staged(v) else np.negative(v), "add", mode)

    def multiply(self, v, *, mode=None, indices_are_sorted=False, unique_indices=False):
        return self._apply(v, "multiply", mode)

    mul = multiply

    def divide(self, v, *, mode=None, indices_are_sorted=False, unique_indices=False):
        return self._apply(1.0 / v if is_staged(v) else np.divide(1.0, v), "multiply", mode)

    def power(self, v, *, mode=None, indices_are_sorted=False, unique_indices=False):
        base = self.get(mode="clip")
        return self._apply(base ** v, "set", mode)

    def min(self, v, *, mode=None, indices_are_sorted=False, unique_indices=False):
        return self._apply(v, "min", mode)

    def max(self, v, *, mode=None, indices_are_sorted=False, unique_indices=False):
        return self._apply(v, "max", mode)

    def apply(self, func, *, mode=None, indices_are_sorted=False, unique_indices=False):
        return self._apply(func(self.get(mode="clip")), "set", mode)

    def _apply(self, v, how, mode):
        """The update; indices out of range are dropped ('drop', as JAX's; `mode=None` does
        so for plain indices) or clamped ('clip'); 'promise_in_bounds' checks nothing."""
        _check_mode(mode, ("drop", "clip", "promise_in_bounds", "fill"))
        if how in ("add", "multiply") and result_dtype(self.x) == "bool":
            raise ArgumentError(f"`.at[...]`: `{how}` into bools is not "
                                "supported (as in JAX); use `.set`, `.max` (or) or `.min` (and), or convert "
                                "the array to int first")
        return _same_dtype(self.x, self._updated(v, how, mode))

    def _updated(self, v, how, mode):
        if mode == "clip":
            return _At(self.x, _clipped(self.x, self.index))._update(v, how)
        comps = _int_components(self.index, len(_shape(self.x)))
        if mode == "promise_in_bounds" or not comps or (mode is None and (
                _has_staged(self.index) or _static_in_range(self.x, self.index, comps))):
            # the default checks plain indices only: a staged index is taken as in range
            # (the padding below costs copies of `x`; pass mode="drop" for JAX's rule)
            return self._update(v, how)
        x, key, comps = _padded(self.x, self.index, 0)
        out = _At(x, key)._update(v, how)
        shape = _shape(self.x)
        return N.slice_static(out, (0,) * len(shape), shape, (1,) * len(shape)) if is_staged(out) \
            else out[tuple(slice(0, n) for n in shape)]

    def _update(self, v, how):
        x = self.x
        shape, dtype = _shape(x), result_dtype(x)
        iota = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)
        try:
            pos = N.getitem(iota, self.index) if _has_staged(self.index) else iota[self.index]
        except IndexError as e:
            raise IndexError_(f"`.at[...]`: {e}") from None
        v = N.broadcast_to(N.convert(v, dtype) if is_staged(v) else np.asarray(v, N.NUMPY_OF[dtype]), _shape(pos))
        flat, vf = N.reshape(x, (-1,)), N.reshape(v, (-1,))
        combine = {"set": lambda old, new: new, "add": lambda old, new: old + new,
                   "multiply": lambda old, new: old * new}.get(how)
        if how in ("set", "add") and dtype != "bool":   # one pass: rows of the flat array
            pos = N.reshape(pos, (-1,)) if is_staged(pos) else np.reshape(pos, -1)
            out = N.bind(N.Op.SCATTER, flat, pos, N.convert(vf, dtype) if is_staged(vf) else vf, add=how == "add")
        elif how in ("min", "max"):
            pos = N.reshape(pos, (-1,)) if is_staged(pos) else np.reshape(pos, -1)
            out = _extremum_update(flat, *(_hit_rows(flat, pos, vf) if is_staged(pos) else _round_rows(flat, pos, vf)),
                                   how == "max")
        elif is_staged(pos):
            out = _update_staged(flat, N.reshape(pos, (-1,)), vf, how, combine)
        else:
            out = _update_static(flat, np.reshape(pos, -1), vf, how, combine)
        return N.reshape(out, shape)



def _check_mode(mode, allowed):
    if mode is not None and mode not in allowed:
        raise ArgumentError(f"`.at[...]`: mode={mode!r}; use one of {', '.join(allowed)}")


def _default_fill(dtype, plain_dtype=None):
    """JAX's fill value of `.get(mode="fill")`: NaN, True, or the lowest int (of a plain
    array's own int dtype: int32's for int32)."""
    if dtype == "i64" and plain_dtype is not None and np.dtype(plain_dtype).kind in "iu":
        return np.iinfo(plain_dtype).min
    return {"bool": True, "i64": np.iinfo(np.int64).min}.get(dtype, np.nan)


def _same_dtype(x, out):
    """`out`, a plain array, in the plain array `x`'s dtype (int32 stays int32)."""
    dtype = getattr(x, "dtype", None)
    return out.astype(dtype) if not is_staged(out) and dtype is not None and out.dtype != dtype else out


def _is_int_index(k):
    if is_staged(k):
        return result_dtype(k) == "i64"
    if isinstance(k, (bool, np.bool_)):
        return False
    if isinstance(k, (int, np.integer)):
        return True
    if isinstance(k, (list, tuple, np.ndarray)):
        a = np.asarray(k)
        return a.dtype.kind in "iu" or (a.size == 0 and a.dtype.kind == "f" and isinstance(k, list))
    return False


def _int_components(index, ndim):
    """[(position in the key, axis of x)] of the integer (array) parts of `index`."""
    key = index if isinstance(index, tuple) else (index,)
    def used(k):
        if k is None or k is Ellipsis:
            return 0
        if not is_staged(k) and isinstance(k, (list, np.ndarray)) and np.asarray(k).dtype == bool:
            return np.asarray(k).ndim
        if is_staged(k) and result_dtype(k) == "bool":
            return len(k.shape)
        return 1
    consumed = builtins.sum(used(k) for k in key)
    comps, axis = [], 0
    for pos, k in enumerate(key):
        if k is Ellipsis:
            axis += ndim - consumed
        elif _is_int_index(k):
            comps.append((pos, axis))
            axis += 1
        else:
            axis += used(k)
    return comps


def _static_in_range(x, index, comps):
    key = index if isinstance(index, tuple) else (index,)
    shape = _shape(x)
    return builtins.all(bool(np.all((np.asarray(key[pos]) >= -shape[axis]) & (np.asarray(key[pos]) < shape[axis])))
                        for pos, axis in comps)


def _normalized(i, n):
    """(i counted from the end where negative, in range?) for an int index `i` into length n."""
    if is_staged(i):
        j = N.where(i < 0, i + n, i)
        return j, (j >= 0) & (j < n)
    j = np.asarray(i, np.int64)
    j = np.where(j < 0, j + n, j)
    return j, (j >= 0) & (j < n)


def _padded(x, index, value):
    """`x` with one extra entry `value` at the end of each axis an integer index reads, and
    the index with every out-of-range integer pointing there."""
    key = list(index if isinstance(index, tuple) else (index,))
    shape = list(_shape(x))
    comps = _int_components(index, len(shape))
    dtype = result_dtype(x)
    for pos, axis in comps:
        n = shape[axis]
        j, ok = _normalized(key[pos], n)
        key[pos] = N.where(ok, j, np.int64(n)) if is_staged(j) else np.where(ok, j, n)
        if not is_staged(key[pos]) and np.ndim(key[pos]) == 0:
            key[pos] = int(key[pos])
        extra = shape[:axis] + [1] + shape[axis + 1:]
        pad = (N.broadcast_to(N.convert(value, dtype), tuple(extra)) if is_staged(value)
               else np.full(extra, value, N.NUMPY_OF[dtype]))
        x = N.concatenate([x, pad], axis) if is_staged(x) else np.concatenate([np.asarray(x), pad], axis)
        shape[axis] += 1
    return x, tuple(key), comps


def _filled(x, index, fill_value):
    """`x[index]` reading `fill_value` (None: `_default_fill`) out of range. A staged `x`
    with a fill that is not a finite constant is padded with zeros and the fill selected
    after the read, so that no value but the result holds it: `jax_debug_nans` stops
    where a NaN is read, as JAX's gather, not wherever the padding is made."""
    if fill_value is None:
        fill_value = _default_fill(result_dtype(x), getattr(x, "dtype", None))
    if is_staged(x) and (is_staged(fill_value) or not np.isfinite(fill_value)):
        padded, key, _ = _padded(x, index, 0)
        inside = _padded(np.ones(_shape(x), bool), index, False)[0]
        return N.where(N.getitem(inside, key) if _has_staged(key) else inside[key], N.getitem(padded, key),
                       fill_value)
    padded, key, _ = _padded(x, index, fill_value)
    if is_staged(padded) or _has_staged(key):
        return N.getitem(padded, key)
    return float_checks.check_eager(Op.GATHER, padded[key])


def _clipped(x, index):
    key = list(index if isinstance(index, tuple) else (index,))
    shape = _shape(x)
    for pos, axis in _int_components(index, len(shape)):
        n = shape[axis]
        j, _ = _normalized(key[pos], n)
        key[pos] = N.clip(j, 0, builtins.max(n - 1, 0)) if is_staged(j) else np.clip(j, 0, builtins.max(n - 1, 0))
        if not is_staged(key[pos]) and np.ndim(key[pos]) == 0:
            key[pos] = int(key[pos])
    return tuple(key)

def _has_staged(index):
    return builtins.any(is_staged(k) for k in (index if isinstance(index, tuple) else (index,)))


def _update_static(flat, pos, vf, how, combine):
    """Rounds of a gather of `vf` into `flat`'s positions, one round per repeat of a position."""
    if how == "set":   # only the last write to a position counts
        keep, written = np.zeros(len(pos), bool), set()
        for k in range(len(pos) - 1, -1, -1):
            keep[k] = pos[k] not in written
            written.add(pos[k])
        pos, vf = pos[keep], _gather_static(vf, np.flatnonzero(keep))
    rows, hit = _round_rows(flat, pos, vf)
    for r in range(len(hit)):
        flat = N.where(hit[r], combine(flat, rows[r]), flat)
    return flat


def _round_rows(flat, pos, vf):
    """`(rows, hit)` for plain positions: one row per round of repeats (a position's k-th
    update in row k), `hit` (a constant) true where a row holds an update."""
    occurrence, seen = np.zeros(len(pos), np.int64), {}
    for k, p in enumerate(pos):
        occurrence[k] = seen[p] = seen.get(p, -1) + 1
    n, padded = _shape(flat)[0], N.concatenate([N.zeros((1,), _np_dtype(flat)), vf])
    sources = []
    for r in range(int(occurrence.max()) + 1 if len(pos) else 0):
        source = np.zeros(n, np.int64)   # 0: no update; k + 1: update k
        ks = np.flatnonzero(occurrence == r)
        source[pos[ks]] = ks + 1
        sources.append(source)
    source = np.stack(sources) if sources else np.zeros((0, n), np.int64)
    return N.reshape(_gather_static(padded, source.reshape(-1)), source.shape), source > 0


def _hit_rows(flat, pos, vf):
    """`(rows, hit)` for staged positions: update k in row k, `hit[k, j]` where it goes to j."""
    n, m = _shape(flat)[0], _shape(pos)[0]
    return N.reshape(vf, (m, 1)), N.reshape(pos, (m, 1)) == np.arange(n, dtype=np.int64)


def _extremum_update(flat, rows, hit, largest):
    """`flat` combined by max (`largest`) or min with the entries of `rows` where `hit`: one
    reduction over `flat` and the rows, so a tie shares the gradient equally among the old
    value and every update equal to the result, and a NaN result passes none back (as JAX)."""
    if not _shape(hit)[0]:
        return flat
    dtype = np.dtype(_np_dtype(flat))
    if dtype.kind != "f":   # (ints and bools have no gradient to share)
        return N.where(N.max(hit, 0), _reduce_rows(flat, rows, hit, largest, dtype), flat)
    nan = isnan(flat) | N.max(hit & isnan(rows), 0)
    flat_, rows_ = N.where(nan, 0.0, flat), N.where(nan, 0.0, rows)
    best = _reduce_rows(flat_, rows_, hit, largest, dtype)
    # a row without an update holds the reduction's identity (-inf for a max), which never ties
    # with the result but where the result is that identity: there the other reduction gives it
    lowest = np.asarray(_lowest(dtype, largest), dtype)
    best = N.where(N.stop_gradient(best) == lowest, _reduce_rows(flat_, rows_, hit, not largest, dtype), best)
    return N.where(N.max(hit, 0), N.where(nan, np.asarray(np.nan, dtype), best), flat)


def _reduce_rows(flat, rows, hit, largest, dtype):
    """The max (`largest`) or min over `flat` and `rows`' entries where `hit`, per position."""
    fill = np.asarray(_lowest(dtype, largest), dtype)
    stacked = N.concatenate([N.reshape(flat, (1, -1)), N.where(hit, rows, fill)], 0)
    return (N.max if largest else N.min)(stacked, 0)


def _lowest(dtype, largest):
    """The identity of a max (`largest`) or min over `dtype`."""
    if dtype.kind == "f":
        return -np.inf if largest else np.inf
    if dtype.kind == "b":
        return not largest
    info = np.iinfo(dtype)
    return info.min if largest else info.max


def _gather_static(v, index):
    return v[index] if not is_staged(v) else N.getitem(v, index)


def _update_staged(flat, pos, vf, how, combine):
    n, m = _shape(flat)[0], _shape(pos)[0]
    hit = N.reshape(pos, (m, 1)) == np.arange(n, dtype=np.int64)   # (m, n)
    column = N.reshape(vf, (m, 1))
    if not m:
        return flat
    if how == "set":   # the last update of each position
        last = N.max(N.where(hit, np.arange(m, dtype=np.int64).reshape(m, 1), np.int64(-1)), 0)
        return N.where(last >= 0, N.getitem(vf, N.maximum(last, 0)), flat)
    if how == "add":
        return flat + N.sum(N.where(hit, column, N.zeros((), _np_dtype(flat))), 0)
    # (multiply; a position no update hits keeps its value: the product of no updates is 1)
    return N.where(N.max(hit, 0), combine(flat, prod(N.where(hit, column, np.ones((), _np_dtype(flat))), 0)), flat)



# -- more of NumPy: differences, rotations, index tricks, complex parts of real values -----

def diff(a, n=1, axis=-1, prepend=None, append=None):
    """The n-th forward difference along `axis`, as NumPy (`prepend`/`append` values join
    first): `jitad.diff(x)[i] == x[i + 1] - x[i]`."""
    shape = _shape(a)
    if not shape:
        raise ShapeError("`diff` of a 0-d array: it needs an axis; pass an array")
    n = N._int_arg("diff", "n", n, 0)
    axis = N._axis("diff", axis, len(shape), shape)
    parts = []
    for v in (prepend, a, append):
        if v is not None:
            parts.append(v if v is a or _shape(v) else N.broadcast_to(v, shape[:axis] + (1,) + shape[axis + 1:]))
    x = N.concatenate(parts, axis) if len(parts) > 1 else a
    for _ in range(n):
        m = _shape(x)[axis]
        x = N.take_slice(x, axis, 1, builtins.max(m, 1)) - N.take_slice(x, axis, 0, builtins.max(m - 1, 0))
    return x


def gradient(f, *varargs, axis=None, edge_order=1):
    """NumPy's `gradient`: central differences inside, one-sided ones (first or second
    order, `edge_order`) at the ends, for evenly spaced samples (a scalar spacing per axis,
    or one for all): `jitad.gradient(x, 0.5)`. One array per axis (a list for several)."""
    shape = _shape(f)
    axes = list(range(len(shape))) if axis is None else [
        N._axis("gradient", d, len(shape), shape) for d in np.atleast_1d(axis).tolist()]
    if edge_order not in (1, 2):
        raise ArgumentError(f"`gradient`: edge_order={edge_order!r}; use 1 or 2")
    spacing = list(varargs) if len(varargs) != 1 else list(varargs) * len(axes)
    if not spacing:
        spacing = [1.0] * len(axes)
    if len(spacing) != len(axes) or builtins.any(np.ndim(h) != 0 or is_staged(h) for h in spacing):
        raise ArgumentError("`gradient`: give one constant scalar spacing per axis (or one for all); jitad's "
                            "gradient takes evenly spaced samples")
    out = []
    for d, h in zip(axes, spacing):
        n = shape[d]
        if n < edge_order + 1:
            raise ShapeError(f"`gradient`: axis {d} of length {n} needs at least {edge_order + 1} samples")
        s = lambda a, b: N.take_slice(f, d, a, b)   # noqa: E731
        inner = (s(2, n) - s(0, n - 2)) / (2.0 * h)
        if edge_order == 1:
            first, last = (s(1, 2) - s(0, 1)) / h, (s(n - 1, n) - s(n - 2, n - 1)) / h
        else:
            first = (-1.5 * s(0, 1) + 2.0 * s(1, 2) - 0.5 * s(2, 3)) / h
            last = (0.5 * s(n - 3, n - 2) - 2.0 * s(n - 2, n - 1) + 1.5 * s(n - 1, n)) / h
        out.append(N.concatenate([first, inner, last], d))
    return out[0] if len(out) == 1 else out


def rollaxis(a, axis, start=0):
    """`a` with `axis` moved to just before position `start` (NumPy's older `moveaxis`):
    `jitad.rollaxis(x, 2).shape == (x.shape[2], x.shape[0], x.shape[1])`."""
    shape = _shape(a)
    n = len(shape)
    axis = N._axis("rollaxis", axis, n, shape)
    if not -n <= start <= n:
        raise ArgumentError(f"`rollaxis`: start={start} must be in [{-n}, {n}] for {n} axes")
    start = start + n if start < 0 else start
    if axis < start:
        start -= 1
    order = [d for d in range(n) if d != axis]
    order.insert(start, axis)
    return N.transpose(a, tuple(order)) if order != list(range(n)) else a


def partition(a, kth, axis=-1):
    """`a` rearranged along `axis` so that position `kth` holds the value it would hold
    sorted, smaller ones before it and larger after. The order within each side is left
    open by NumPy and JAX; here it is sorted (so it is `jitad.sort`):
    `jitad.partition(x, 2)[..., 2]` is each row's third smallest value."""
    shape = _shape(a)
    if axis is None:
        a, axis, shape = ravel(a), 0, (math.prod(shape),)
    d = N._axis("partition", axis, len(shape), shape)
    for k in np.atleast_1d(kth).tolist():
        if not -shape[d] <= k < shape[d]:
            raise ArgumentError(f"`partition`: kth={k} out of range for axis {d} of length {shape[d]}")
    return sort(a, d)


def _split_along(who, axis, min_ndim):
    def fn(x, indices_or_sections):
        ndim = len(_shape(x))
        if ndim < min_ndim:
            raise ShapeError(f"`{who}` takes an array with at least {min_ndim} axes, got shape {_shape(x)}")
        return split(x, indices_or_sections, axis if ndim > 1 else 0)
    fn.__name__ = fn.__qualname__ = who
    fn.__doc__ = (f"`split` along axis {axis}" + (" (axis 0 for 1-D arrays)" if min_ndim == 1 else "")
                  + f": `jitad.{who}(x, 2)`.")
    return fn


vsplit, hsplit, dsplit = _split_along("vsplit", 0, 2), _split_along("hsplit", 1, 1), _split_along("dsplit", 2, 3)
row_stack = vstack


def append(arr, values, axis=None):
    """`values` joined after `arr` along `axis` (None: both flattened): `jitad.append(x, 0.0)`."""
    if axis is None:
        return N.concatenate([N.reshape(arr, (-1,)), N.reshape(values, (-1,))], 0)
    return N.concatenate([arr, values], axis)


def rot90(m, k=1, axes=(0, 1)):
    """`m` turned by 90 degrees `k` times in the plane of `axes` (from the first axis
    towards the second), as NumPy: `jitad.rot90(m)`."""
    shape = _shape(m)
    if len(axes) != 2 or len(shape) < 2:
        raise ArgumentError(f"`rot90`: needs two axes of an array with at least 2, got axes={axes!r}, shape {shape}")
    a, b = (N._axis("rot90", d, len(shape), shape) for d in axes)
    if a == b:
        raise ArgumentError(f"`rot90`: axes={axes!r} names one axis twice")
    k = int(k) % 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, a), b)
    perm = list(range(len(shape)))
    perm[a], perm[b] = b, a
    return N.transpose(flip(m, b), tuple(perm)) if k == 1 else flip(N.transpose(m, tuple(perm)), b)


def select(condlist, choicelist, default=0):
    """Per position, the entry of the first choice whose condition holds, else `default`:
    `jitad.select([x < 0, x > 1], [-x, x ** 2], x)`."""
    if len(condlist) != len(choicelist):
        raise ArgumentError(f"`select`: {len(condlist)} conditions for {len(choicelist)} choices; give one each")
    if not builtins.any(is_staged(v) for v in list(condlist) + list(choicelist) + [default]):
        return np.select(condlist, choicelist, default)
    out = default
    for cond, choice in reversed(list(zip(condlist, choicelist))):   # the first true wins
        out = N.where(cond, choice, out)
    shape = np.broadcast_shapes(*[_shape(v) for v in list(condlist) + list(choicelist)])
    return N.broadcast_to(out, shape)


def real(x):
    """The real part: `x` itself for real values (staged code has no complex dtype):
    `jitad.real(2.0) == 2.0`."""
    return x if is_staged(x) else np.real(x)


def imag(x):
    """The imaginary part: zeros for real values: `jitad.imag(2.0) == 0.0`."""
    return N.zeros_like(x) if is_staged(x) else np.imag(x)


def conj(x):
    """The complex conjugate: `x` itself for real values: `jitad.conj(2.0) == 2.0`."""
    return x if is_staged(x) else np.conj(x)


conjugate = conj


def angle(z, deg=False):
    """The complex argument: 0 for real values >= 0 (and +0.0), pi for negative ones (and
    -0.0), as NumPy; `deg=True` in degrees. Its derivative is 0: `jitad.angle(-2.0) == math.pi`."""
    if not is_staged(z):
        return np.angle(z, deg)
    z = _float(z)
    out = N.arctan2(N.zeros_like(N.stop_gradient(z)), N.stop_gradient(z))
    return out * (180.0 / math.pi) if deg else out


class _IndexConcat:
    """NumPy's `r_` / `c_`: `jitad.r_[a, 0.0, b]`, `jitad.c_[x, y]`. Slices make ranges
    (`r_[0:1:5j]` a linspace), a leading string "axis[,ndmin[,trans1d]]" sets how items
    join; on plain arrays it is NumPy's own."""

    def __init__(self, name, axis, ndmin, trans1d):
        self.name, self.axis, self.ndmin, self.trans1d = name, axis, ndmin, trans1d

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        if not builtins.any(is_staged(k) for k in items):
            return getattr(np, self.name)[key]
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        if items and isinstance(items[0], str):
            try:
                spec = [int(v) for v in items[0].split(",")]
            except ValueError:
                raise ArgumentError(f"`{self.name}`: directive {items[0]!r}; jitad takes 'axis[,ndmin[,trans1d]]' "
                                    "with staged values ('r' and 'c' matrices are NumPy's only)") from None
            axis, ndmin, trans1d = (spec + [ndmin, trans1d][len(spec) - 1:])[:3]
            items = items[1:]
        staged_dtype = result_dtype(*[k for k in items if is_staged(k)])
        parts = []
        for item in items:
            if isinstance(item, slice):
                item = np.r_[item]
            if isinstance(item, str):
                raise ArgumentError(f"`{self.name}`: a directive string must come first")
            weak = type(item) is int or (type(item) is float and staged_dtype in FLOATS)
            item = item if is_staged(item) else np.asarray(item, N.NUMPY_OF[staged_dtype] if weak else None)
            parts.append(_ndmin(item, ndmin, trans1d))
        return N.concatenate(parts, axis)


def _ndmin(x, ndmin, trans1d):
    """`x` with ones added to `ndmin` axes, its own axes starting at `trans1d` (NumPy's r_ rule)."""
    nd = len(_shape(x))
    if nd >= ndmin:
        return x if nd else N.reshape(x, (1,))
    x = N.reshape(x, (1,) * (ndmin - nd) + _shape(x))
    if trans1d == -1:
        return x
    k1 = trans1d + (ndmin - nd) + 1 if trans1d < 0 else trans1d
    order = list(range(ndmin))
    order = order[:k1] + order[ndmin - nd:] + order[k1:ndmin - nd]
    return N.transpose(x, tuple(order))


r_ = _IndexConcat("r_", 0, 1, -1)
c_ = _IndexConcat("c_", -1, 2, 0)


N.N_D.update(matmul=matmul_nd, dot=dot_nd)
N.NUMPY_API["ndarray.at"] = _At
N.NUMPY_API.update({name: globals()[name] for name in __all__})
