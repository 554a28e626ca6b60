"""Building, reshaping and editing arrays in `jitad.numpy`: inserts, deletes, blocks,
windows, index grids, functional `put`/`place`, per-axis application, vectorizing.
Each composes gathers, concatenations and `where` (positions computed by NumPy from the
static shapes), so each works on plain values, in staged code and under `grad`."""
import builtins
import math

import numpy as np

from .. import numeric as N
from ..errors import ArgumentError, ShapeError
from ..numpy_api import _float
from ..staging import is_staged
from ._common import jnp as _jnp, any_staged, no_out, wrap

__all__ = ["insert", "delete", "fill_diagonal", "block", "dstack", "apply_along_axis", "apply_over_axes",
           "argpartition", "array_equiv", "bartlett", "blackman", "hamming", "hanning", "kaiser", "i0",
           "choose", "diag_indices_from", "tril_indices_from", "triu_indices_from", "ediff1d", "einsum_path",
           "fromfunction", "geomspace", "mgrid", "ogrid", "s_", "index_exp", "lexsort", "mask_indices",
           "matrix_transpose", "matvec", "vecmat", "vecdot", "piecewise", "place", "put", "put_along_axis",
           "resize", "tri", "trim_zeros", "unstack", "unwrap", "vander", "vectorize", "isneginf", "isposinf",
           "isreal", "isrealobj", "packbits", "unpackbits", "take", "isclose", "allclose", "array_equal",
           "copyto", "putmask", "fix", "asarray_chkfinite", "ascontiguousarray", "asfortranarray",
           "asanyarray", "require"]


def _axis_of(arr, axis, who):
    jnp = _jnp()
    if axis is None:
        return jnp.ravel(arr), 0
    return arr, N._axis(who, axis, jnp.ndim(arr), jnp.shape(arr))


def insert(arr, obj, values, axis=None):
    """`arr` with `values` inserted before the positions `obj` (an int, a slice or a list
    of ints, static) along `axis` (None: the flattened array):
    `jnp.insert(jnp.array([1, 2]), 1, 9)` is `[1, 9, 2]`."""
    jnp = _jnp()
    if not any_staged(arr, obj, values):
        return wrap(np.insert(np.asarray(arr), obj, values, axis))
    if any_staged(obj):
        raise ArgumentError("`jnp.insert`: the positions `obj` must be static (Python ints or a NumPy array)")
    arr, axis = _axis_of(jnp.asarray(arr), axis, "insert")
    values = jnp.asarray(values)
    shape = list(jnp.shape(arr))
    n = shape[axis]
    if isinstance(obj, slice):
        obj = np.arange(n + 1)[obj] if obj.stop is None or obj.stop > n else np.arange(n)[obj]
    scalar = np.ndim(obj) == 0
    if scalar:   # all of `values` goes in before one position
        v = jnp.array(values, ndmin=len(shape))
        v = jnp.moveaxis(v, 0, axis) if jnp.ndim(values) == len(shape) or jnp.ndim(values) == 0 else v
        numnew = jnp.shape(v)[axis] if jnp.ndim(values) else 1
    else:
        numnew = len(np.asarray(obj).reshape(-1))
        v = values
    shape[axis] = numnew
    block_ = N.broadcast_to(N.convert(v, jnp.result_type(arr).name) if is_staged(v)
                            else np.asarray(v, jnp.result_type(arr)), tuple(shape))
    order = np.insert(np.arange(n), obj, n + np.arange(numnew))
    return jnp.take(jnp.concatenate([arr, block_], axis), order, axis=axis)


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    """`arr` without the entries at positions `obj` (static) along `axis` (None: flattened):
    `jnp.delete(jnp.array([1, 2, 3]), 1)` is `[1, 3]`."""
    jnp = _jnp()
    if not any_staged(arr, obj):
        return wrap(np.delete(np.asarray(arr), obj, axis))
    if any_staged(obj):
        raise N.data_dependent_shape("`jnp.delete` at staged positions")
    arr, axis = _axis_of(jnp.asarray(arr), axis, "delete")
    return jnp.take(arr, np.delete(np.arange(jnp.shape(arr)[axis]), obj), axis=axis)


def _diagonal_positions(shape, wrap_):
    mark = np.zeros(shape, bool)
    np.fill_diagonal(mark, True, wrap_)
    return np.flatnonzero(mark)


def fill_diagonal(a, val, wrap=False, *, inplace=True):
    """`a` with `val` (repeated as needed) on its main diagonal. As NumPy, a plain array is
    written in place (and None returned); with `inplace=False`, as JAX requires, a new
    array comes back (staged values always need it):
    `jnp.fill_diagonal(jnp.zeros((2, 2)), 1.0, inplace=False)`."""
    jnp = _jnp()
    if inplace:
        if any_staged(a, val):
            raise ArgumentError("`jnp.fill_diagonal` of a staged array cannot write in place; "
                                "pass inplace=False and use the returned array")
        np.fill_diagonal(a, val, wrap)
        return None
    if jnp.ndim(a) < 2:
        raise ShapeError(f"`jnp.fill_diagonal`: the array needs at least 2 axes, got shape {jnp.shape(a)}")
    a = jnp.asarray(a)
    pos = _diagonal_positions(jnp.shape(a), wrap)
    v = jnp.ravel(jnp.asarray(val))
    k = jnp.size(v)
    if k == 0:
        return a
    v = jnp.take(v, np.arange(len(pos)) % k)
    out = jnp.ravel(a).at[pos].set(v)
    return jnp.reshape(out, jnp.shape(a))


def _depth(obj):
    return 1 + _depth(obj[0]) if isinstance(obj, list) and obj else (1 if isinstance(obj, list) else 0)


def _max_ndim(obj):
    jnp = _jnp()
    return builtins.max(_max_ndim(o) for o in obj) if isinstance(obj, list) else jnp.ndim(obj)


def block(arrays):
    """An array assembled from nested lists of blocks (the innermost list joins along the
    last axis): `jnp.block([[a, b], [c, d]])`."""
    jnp = _jnp()
    if not any_staged(arrays):
        return wrap(np.block(arrays))
    depth = _depth(arrays)
    ndim = builtins.max(depth, _max_ndim(arrays))

    def join(obj, level):
        if not isinstance(obj, list):
            return jnp.array(obj, ndmin=ndim)
        if not obj:
            raise ShapeError("`jnp.block`: an empty list of blocks")
        return jnp.concatenate([join(o, level + 1) for o in obj], axis=level - depth)
    return join(arrays, 0)


def dstack(tup, dtype=None):
    """The arrays joined along the third axis (after `atleast_3d`): `jnp.dstack([a, b])`."""
    jnp = _jnp()
    if not any_staged(tup):
        return wrap(np.asarray(np.dstack(tup), dtype))
    out = jnp.concatenate([jnp.atleast_3d(t) for t in tup], axis=2)
    return out if dtype is None else out.astype(dtype)


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """`func1d` on each 1-D slice of `arr` along `axis`, the results stacked where the axis
    was: `jnp.apply_along_axis(jnp.sum, 1, x)`."""
    jnp = _jnp()
    arr = jnp.asarray(arr)
    shape = tuple(jnp.shape(arr))
    axis = N._axis("apply_along_axis", axis, len(shape), shape)
    moved = jnp.moveaxis(arr, axis, -1)
    outer = shape[:axis] + shape[axis + 1:]
    results = [jnp.asarray(func1d(moved[idx], *args, **kwargs)) for idx in np.ndindex(*outer)]
    if not results:
        raise ShapeError("`jnp.apply_along_axis` over an empty outer shape; there is no slice to call func1d on")
    out = jnp.stack(results) if any_staged(results) else wrap(np.stack([np.asarray(r) for r in results]))
    core = tuple(jnp.shape(results[0]))
    out = jnp.reshape(out, outer + core)
    k = len(core)
    return jnp.moveaxis(out, tuple(range(len(outer), len(outer) + k)), tuple(range(axis, axis + k))) if k else out


def apply_over_axes(func, a, axes):
    """`func(a, axis)` applied for each axis in turn, keeping the reduced axes:
    `jnp.apply_over_axes(jnp.sum, x, [0, 2])`."""
    jnp = _jnp()
    a = jnp.asarray(a)
    for ax in ([axes] if np.ndim(axes) == 0 else axes):
        ax = ax % jnp.ndim(a)
        res = func(a, ax)
        if jnp.ndim(res) == jnp.ndim(a):
            a = res
        elif jnp.ndim(res) == jnp.ndim(a) - 1:
            a = jnp.expand_dims(res, ax)
        else:
            raise ShapeError("`jnp.apply_over_axes`: func must keep the number of axes or remove one")
    return a


def argpartition(a, kth, axis=-1):
    """Positions that partition `a` along `axis` around its `kth` smallest entry (before it
    the smaller entries, after it the larger ones); here a stable full sort:
    `jnp.argpartition(x, 2)`."""
    jnp = _jnp()
    a = jnp.asarray(a)
    n = jnp.shape(a)[axis if axis is not None else 0] if axis is not None else jnp.size(a)
    if not -n <= kth < n:
        raise ArgumentError(f"`jnp.argpartition`: kth={kth} out of range for an axis of {n}")
    return jnp.argsort(a, axis=axis)


def array_equiv(a1, a2):
    """True when `a1` and `a2` broadcast to one shape and are equal there:
    `jnp.array_equiv(jnp.ones(3), 1.0)`."""
    jnp = _jnp()
    try:
        np.broadcast_shapes(jnp.shape(a1), jnp.shape(a2))
    except ValueError:
        return np.bool_(False)
    return jnp.all(jnp.asarray(a1) == jnp.asarray(a2))


def _window(name):
    def fn(M):
        return wrap(np.asarray(getattr(np, name)(int(M)), np.float64))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"NumPy's {name} window of `M` points: `jnp.{name}(5)`."
    return fn


bartlett, blackman, hamming, hanning = (_window(n) for n in ("bartlett", "blackman", "hamming", "hanning"))

_I0_SERIES = 80
_I0_ASYMPTOTIC = 30


def i0(x):
    """The modified Bessel function of the first kind, order 0 (a power series, the
    asymptotic expansion beyond |x| = 20); differentiable: `jnp.i0(0.0) == 1.0`."""
    jnp = _jnp()
    x = _float(jnp.asarray(x))
    ax = abs(x)
    small = ax <= 20.0
    y = N.where(small, ax, 0.0)
    y = y * y / 4.0
    acc = 0.0
    for k in range(_I0_SERIES, 0, -1):   # sum of y**k / (k!)**2, nested
        acc = (acc + 1.0) * y / float(k * k)
    series = acc + 1.0
    big = N.where(small, 21.0, ax)
    term, tail = 1.0, 1.0
    for k in range(1, _I0_ASYMPTOTIC):
        term = term * (2 * k - 1) ** 2 / (8.0 * k) / big
        tail = tail + term
    asym = jnp.exp(big) / jnp.sqrt(2.0 * np.pi * big) * tail
    return N.where(small, series, asym)


def kaiser(M, beta):
    """The Kaiser window of `M` points and shape `beta`: `jnp.kaiser(5, 3.0)`."""
    jnp = _jnp()
    if not any_staged(beta):
        return wrap(np.kaiser(int(M), beta))
    n = np.arange(M, dtype=np.float64)
    alpha = (M - 1) / 2.0
    r = (n - alpha) / alpha if M > 1 else np.zeros(M)
    return i0(beta * jnp.sqrt(1.0 - r * r)) / i0(beta)


def choose(a, choices, out=None, mode="raise"):
    """`choices[a[i]][i]` for each position (all broadcast together); `mode` 'clip' or
    'wrap' for indices out of range ('raise', the default, checks plain indices only):
    `jnp.choose(jnp.array([0, 1]), [x, y])`."""
    jnp = _jnp()
    no_out("choose", out)
    if not any_staged(a, choices):
        return wrap(np.asarray(np.choose(a, choices, mode=mode)))
    if mode not in ("raise", "clip", "wrap"):
        raise ArgumentError(f"`jnp.choose`: mode={mode!r}; use 'raise', 'clip' or 'wrap'")
    a = jnp.asarray(a)
    cs = [jnp.asarray(c) for c in choices]
    n = len(cs)
    shape = np.broadcast_shapes(jnp.shape(a), *(jnp.shape(c) for c in cs))
    if mode == "raise" and not is_staged(a) and (np.any(a < 0) or np.any(a >= n)):
        raise ArgumentError(f"`jnp.choose`: an index outside [0, {n}); use mode='clip' or 'wrap'")
    a = a % n if mode == "wrap" else N.clip(a, 0, n - 1)
    stacked = jnp.stack([jnp.broadcast_to(c, shape) for c in cs])
    return jnp.take_along_axis(stacked, jnp.broadcast_to(a, shape)[None], 0)[0]


def diag_indices_from(arr):
    """The indices of the main diagonal of the square array `arr`: `jnp.diag_indices_from(x)`."""
    shape = _jnp().shape(arr)
    if len(shape) < 2 or len(set(shape)) != 1:
        raise ShapeError(f"`jnp.diag_indices_from` needs a square array of at least 2 axes, got shape {shape}")
    return wrap(np.diag_indices(shape[0], len(shape)))


def tril_indices_from(arr, k=0):
    """The indices of the lower triangle of the 2-D `arr`: `jnp.tril_indices_from(x)`."""
    shape = _jnp().shape(arr)
    if len(shape) != 2:
        raise ShapeError(f"`jnp.tril_indices_from` needs a 2-D array, got shape {shape}")
    return wrap(np.tril_indices(shape[0], k, shape[1]))


def triu_indices_from(arr, k=0):
    """The indices of the upper triangle of the 2-D `arr`: `jnp.triu_indices_from(x)`."""
    shape = _jnp().shape(arr)
    if len(shape) != 2:
        raise ShapeError(f"`jnp.triu_indices_from` needs a 2-D array, got shape {shape}")
    return wrap(np.triu_indices(shape[0], k, shape[1]))


def ediff1d(ary, to_end=None, to_begin=None):
    """The differences of the flattened array, with `to_begin`/`to_end` around them:
    `jnp.ediff1d(jnp.array([1, 4, 9]))` is `[3, 5]`."""
    jnp = _jnp()
    if not any_staged(ary, to_end, to_begin):
        return wrap(np.ediff1d(ary, to_end, to_begin))
    flat = jnp.ravel(jnp.asarray(ary))
    parts = [flat[1:] - flat[:-1]]
    if to_begin is not None:
        parts.insert(0, jnp.ravel(jnp.asarray(to_begin)).astype(jnp.result_type(parts[0])))
    if to_end is not None:
        parts.append(jnp.ravel(jnp.asarray(to_end)).astype(jnp.result_type(parts[0])))
    return jnp.concatenate(parts)


def einsum_path(subscripts, *operands, optimize="greedy"):
    """NumPy's contraction order for `einsum` (the shapes are all it reads):
    `jnp.einsum_path('ij,jk->ik', a, b)`."""
    jnp = _jnp()
    dummies = [np.zeros(jnp.shape(o)) if hasattr(o, "shape") or any_staged(o) else o for o in operands]
    return np.einsum_path(subscripts, *dummies, optimize=optimize)


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """`function` called on the index grids of `shape`: `jnp.fromfunction(lambda i, j: i + j, (2, 2))`."""
    return function(*(wrap(g) for g in np.indices(shape, dtype=dtype)), **kwargs)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    """`num` numbers spaced evenly on a log scale from `start` to `stop` (same sign):
    `jnp.geomspace(1.0, 100.0, 3)` is `[1, 10, 100]`."""
    jnp = _jnp()
    if not any_staged(start, stop):
        return wrap(np.geomspace(start, stop, num, endpoint, dtype, axis))
    start, stop = _float(jnp.asarray(start)), _float(jnp.asarray(stop))
    sign = jnp.sign(start)
    logs = jnp.linspace(jnp.log(abs(start)), jnp.log(abs(stop)), num, endpoint, axis=axis)
    out = sign * jnp.exp(logs)
    if num:
        idx = [slice(None)] * jnp.ndim(out)
        idx[axis] = np.arange(num) == 0
        first = np.zeros(num, bool)
        first[0] = True
        last = np.zeros(num, bool)
        if endpoint:
            last[-1] = True
        shape = [1] * jnp.ndim(out)
        shape[axis % jnp.ndim(out)] = num
        out = N.where(first.reshape(shape), jnp.expand_dims(start, axis), out)
        out = N.where(last.reshape(shape), jnp.expand_dims(stop, axis), out)
    return out if dtype is None else out.astype(dtype)


class _Grid:
    def __init__(self, grid, name):
        self._grid, self.__name__ = grid, name
        self.__doc__ = f"NumPy's `{name}` index grids as arrays: `jnp.{name}[0:2, 0:3]`."

    def __getitem__(self, key):
        return wrap(self._grid[key])


mgrid = _Grid(np.mgrid, "mgrid")
ogrid = _Grid(np.ogrid, "ogrid")
s_, index_exp = np.s_, np.index_exp


def lexsort(keys, axis=-1):
    """The stable order that sorts by the last key, ties by the one before, and so on:
    `jnp.lexsort((first_names, surnames))`."""
    jnp = _jnp()
    if not any_staged(keys):
        return wrap(np.lexsort(np.asarray(keys) if not isinstance(keys, (list, tuple)) else keys, axis))
    keys = [jnp.asarray(k) for k in keys] if isinstance(keys, (list, tuple)) else list(keys)
    if not keys:
        raise ArgumentError("`jnp.lexsort` needs at least one key")
    order = jnp.argsort(keys[0], axis=axis)
    for k in keys[1:]:
        sub = jnp.argsort(jnp.take_along_axis(k, order, axis), axis=axis)
        order = jnp.take_along_axis(order, sub, axis)
    return order


def mask_indices(n, mask_func, k=0, *, size=None):
    """The indices where `mask_func(ones((n, n)), k)` is non-zero: `jnp.mask_indices(3, jnp.triu)`."""
    mask = np.asarray(mask_func(np.ones((n, n), np.int64), k))
    rows, cols = np.nonzero(mask)
    if size is not None:
        rows, cols = np.resize(np.pad(rows, (0, builtins.max(size - len(rows), 0))), size), \
            np.resize(np.pad(cols, (0, builtins.max(size - len(cols), 0))), size)
    return wrap(rows), wrap(cols)


def matrix_transpose(x, /):
    """The last two axes swapped: `jnp.matrix_transpose(x)`."""
    jnp = _jnp()
    if jnp.ndim(x) < 2:
        raise ShapeError(f"`jnp.matrix_transpose` needs at least 2 axes, got shape {jnp.shape(x)}")
    return jnp.swapaxes(jnp.asarray(x), -1, -2)


def matvec(x1, x2, /):
    """Matrix-vector products over broadcast batches: `jnp.matvec(A, v)` is `A @ v`."""
    jnp = _jnp()
    x1, x2 = jnp.asarray(x1), jnp.asarray(x2)
    return jnp.sum(x1 * jnp.expand_dims(x2, -2), -1)


def vecmat(x1, x2, /):
    """Vector-matrix products over broadcast batches: `jnp.vecmat(v, A)` is `v @ A`."""
    jnp = _jnp()
    x1, x2 = jnp.asarray(x1), jnp.asarray(x2)
    return jnp.sum(jnp.expand_dims(x1, -1) * x2, -2)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """Dot products along `axis` over broadcast batches: `jnp.vecdot(a, b)`."""
    jnp = _jnp()
    x1, x2 = jnp.asarray(x1), jnp.asarray(x2)
    if jnp.shape(x1)[axis] != jnp.shape(x2)[axis]:
        raise ShapeError(f"`jnp.vecdot`: axis {axis} has {jnp.shape(x1)[axis]} and {jnp.shape(x2)[axis]} entries")
    return jnp.sum(x1 * x2, axis)


def piecewise(x, condlist, funclist, *args, **kw):
    """Each function (or value) of `funclist` where its condition holds (a later condition
    wins; one extra function is the default): `jnp.piecewise(x, [x < 0], [lambda x: -x, lambda x: x])`."""
    jnp = _jnp()
    x = jnp.asarray(x)
    if not isinstance(condlist, (list, tuple)) or (jnp.ndim(condlist[0]) == 0 and jnp.ndim(x) > 0
                                                   and len(condlist) == jnp.size(x)):
        condlist = [condlist]
    conds = [jnp.asarray(c, bool) for c in condlist]
    if len(funclist) not in (len(conds), len(conds) + 1):
        raise ArgumentError(f"`jnp.piecewise`: {len(conds)} conditions need {len(conds)} or "
                            f"{len(conds) + 1} functions, got {len(funclist)}")

    def value(f):
        v = f(x, *args, **kw) if callable(f) else f
        return jnp.broadcast_to(jnp.asarray(v, jnp.result_type(x)), jnp.shape(x))
    out = jnp.zeros_like(x)
    if len(funclist) == len(conds) + 1:
        anyc = conds[0]
        for c in conds[1:]:
            anyc = anyc | c
        out = N.where(anyc, out, value(funclist[-1]))
    for c, f in zip(conds, funclist):
        out = N.where(c, value(f), out)
    return wrap(out) if not any_staged(out) else out


def place(arr, mask, vals, *, inplace=True):
    """`vals` (repeated as needed) written, in order, where `mask` is true. A plain array is
    written in place (None returned) as NumPy; `inplace=False` returns a new array, as JAX
    requires (staged values always): `jnp.place(x, x < 0, 0.0, inplace=False)`."""
    jnp = _jnp()
    if inplace:
        if any_staged(arr, mask, vals):
            raise ArgumentError("`jnp.place` on a staged array cannot write in place; pass inplace=False")
        np.place(arr, mask, vals)
        return None
    arr = jnp.asarray(arr)
    mask = jnp.ravel(jnp.asarray(mask, bool))
    vals = jnp.ravel(jnp.asarray(vals))
    if jnp.size(vals) == 0:
        return arr
    k = jnp.cumsum(mask) - 1
    pick = jnp.take(vals, N.maximum(k, 0) % jnp.size(vals)).astype(jnp.result_type(arr))
    return jnp.reshape(N.where(mask, pick, jnp.ravel(arr)), jnp.shape(arr))


def put(a, ind, v, mode=None, *, inplace=True):
    """`a` with the flat positions `ind` set to `v` (repeated as needed); `mode` 'clip'
    (JAX's default) or 'wrap' for positions out of range. In place with None returned on
    a plain array, as NumPy; `inplace=False`, as JAX, returns a new array:
    `jnp.put(x, [0, 2], 1.0, inplace=False)`."""
    jnp = _jnp()
    if inplace:
        if any_staged(a, ind, v):
            raise ArgumentError("`jnp.put` on a staged array cannot write in place; pass inplace=False")
        np.put(a, ind, v, mode or "raise")
        return None
    if mode not in (None, "clip", "wrap"):
        raise ArgumentError(f"`jnp.put`: mode={mode!r}; use 'clip' or 'wrap'")
    a = jnp.asarray(a)
    ind = jnp.ravel(jnp.asarray(ind))
    n = jnp.size(a)
    ind = ind % n if mode == "wrap" else N.clip(ind, 0, n - 1)
    v = jnp.ravel(jnp.asarray(v))
    if jnp.size(ind) == 0 or jnp.size(v) == 0:
        return a
    v = jnp.take(v, np.arange(jnp.size(ind)) % jnp.size(v))
    return jnp.reshape(jnp.ravel(a).at[ind].set(v), jnp.shape(a))


def put_along_axis(arr, indices, values, axis, inplace=True, *, mode=None):
    """`arr` with `values` written at `indices` along `axis` (the inverse of
    `take_along_axis`). In place on a plain array as NumPy; `inplace=False` returns a new
    array as JAX: `jnp.put_along_axis(x, i, 0.0, axis=1, inplace=False)`."""
    jnp = _jnp()
    if inplace:
        if any_staged(arr, indices, values):
            raise ArgumentError("`jnp.put_along_axis` on a staged array cannot write in place; pass inplace=False")
        np.put_along_axis(arr, np.asarray(indices), values, axis)
        return None
    arr = jnp.asarray(arr)
    if axis is None:
        return jnp.reshape(put_along_axis(jnp.ravel(arr), jnp.ravel(jnp.asarray(indices)), values, 0, False,
                                          mode=mode), jnp.shape(arr))
    shape = tuple(jnp.shape(arr))
    axis = N._axis("put_along_axis", axis, len(shape), shape)
    indices = jnp.asarray(indices)
    ishape = np.broadcast_shapes(shape[:axis] + (1,) + shape[axis + 1:], tuple(jnp.shape(indices)))
    grids = list(np.indices(ishape, sparse=True))
    grids[axis] = jnp.broadcast_to(indices, ishape)
    return arr.at[tuple(grids)].set(values, mode=mode)


def resize(a, new_shape):
    """`a` flattened, repeated cyclically to fill `new_shape`: `jnp.resize(jnp.array([1, 2]), 3)` is `[1, 2, 1]`."""
    jnp = _jnp()
    if not any_staged(a):
        return wrap(np.resize(np.asarray(a), new_shape))
    shape = (new_shape,) if np.ndim(new_shape) == 0 else tuple(new_shape)
    flat = jnp.ravel(jnp.asarray(a))
    total = math.prod(shape)
    if jnp.size(flat) == 0:
        return jnp.zeros(shape, jnp.result_type(flat))
    return jnp.reshape(jnp.take(flat, np.arange(total) % jnp.size(flat)), shape)


def tri(N_, M=None, k=0, dtype=None):
    """Ones at and below diagonal `k`, zeros above: `jnp.tri(3)`."""
    return wrap(np.tri(N_, M, k, dtype or np.float64))


def trim_zeros(filt, trim="fb", axis=None):
    """`filt` without its leading ('f') and trailing ('b') zeros (plain values only: the
    length depends on the values): `jnp.trim_zeros(jnp.array([0, 1, 0]))` is `[1]`."""
    if any_staged(filt):
        raise N.data_dependent_shape("`jnp.trim_zeros`")
    return wrap(np.trim_zeros(np.asarray(filt), trim, axis=axis) if axis is not None
                else np.trim_zeros(np.asarray(filt), trim))


def unstack(x, /, *, axis=0):
    """The slices of `x` along `axis`, as a tuple: `jnp.unstack(jnp.eye(2))`."""
    jnp = _jnp()
    x = jnp.asarray(x)
    axis = N._axis("unstack", axis, jnp.ndim(x), jnp.shape(x))
    moved = jnp.moveaxis(x, axis, 0)
    return tuple(moved[i] for i in range(jnp.shape(x)[axis]))


def unwrap(p, discont=None, axis=-1, period=2 * np.pi):
    """`p` with jumps larger than `discont` (half the period by default) along `axis`
    replaced by their complements modulo `period`: `jnp.unwrap(angles)`."""
    jnp = _jnp()
    if not any_staged(p, discont, period):
        return wrap(np.unwrap(np.asarray(p), discont, axis, period=period))
    p = _float(jnp.asarray(p))
    discont = period / 2 if discont is None else discont
    d = jnp.diff(p, axis=axis)
    half = period / 2
    dd = (d + half) % period - half
    dd = N.where((dd == -half) & (d > 0), half, dd)
    correction = N.where(abs(d) < discont, 0.0, dd - d)
    first = jnp.take(p, np.array([0]), axis=axis)
    zero = jnp.zeros_like(first)
    return p + jnp.concatenate([zero, jnp.cumsum(correction, axis=axis)], axis=axis) \
        if jnp.shape(p)[axis] else p


def vander(x, N_=None, increasing=False):
    """The Vandermonde matrix of the 1-D `x` (powers decreasing left to right unless
    `increasing`): `jnp.vander(jnp.array([1.0, 2.0]), 3)`."""
    jnp = _jnp()
    x = jnp.asarray(x)
    if jnp.ndim(x) != 1:
        raise ShapeError(f"`jnp.vander` needs a 1-D array, got shape {jnp.shape(x)}")
    n = jnp.shape(x)[0] if N_ is None else N_
    if n == 0:
        return jnp.zeros((jnp.shape(x)[0], 0), jnp.result_type(x))
    cols = jnp.concatenate([jnp.ones_like(x)[:, None], jnp.broadcast_to(x[:, None], (jnp.shape(x)[0], n - 1))], 1)
    out = jnp.cumprod(cols, axis=1)
    return out if increasing else out[:, ::-1]


def _gufunc_signature(signature):
    if signature is None:
        return None
    from numpy.lib._function_base_impl import _parse_gufunc_signature
    return _parse_gufunc_signature(signature.replace(" ", ""))


class vectorize:
    """`pyfunc` mapped over the broadcast entries of its arguments (over the loop axes
    when a gufunc `signature` such as '(n),(n)->()' names core axes); `excluded`
    positions or names pass through: `jnp.vectorize(lambda a, b: a * b + 1)(x, y)`."""

    def __init__(self, pyfunc, otypes=None, doc=None, excluded=None, cache=False, signature=None):
        self.pyfunc, self.excluded, self.signature = pyfunc, set(excluded or ()), signature
        self.__doc__ = doc or getattr(pyfunc, "__doc__", None)
        self._core = _gufunc_signature(signature)

    def __call__(self, *args, **kwargs):
        jnp = _jnp()
        fixed = {i for i in range(len(args)) if i in self.excluded}
        kw_fixed = {k: v for k, v in kwargs.items() if k in self.excluded}
        mapped_kw = {k: v for k, v in kwargs.items() if k not in self.excluded}
        names = list(mapped_kw)
        ins = [jnp.asarray(a) for i, a in enumerate(args) if i not in fixed] + [jnp.asarray(mapped_kw[k]) for k in names]
        core_in = self._core[0] if self._core else [()] * len(ins)
        if len(core_in) != len(ins):
            raise ArgumentError(f"`jnp.vectorize`: signature {self.signature!r} names {len(core_in)} inputs, "
                                f"got {len(ins)}")
        loops = [tuple(jnp.shape(a))[:jnp.ndim(a) - len(c)] for a, c in zip(ins, core_in)]
        loop = np.broadcast_shapes(*loops) if loops else ()
        ins = [jnp.broadcast_to(a, loop + tuple(jnp.shape(a))[len(s):]) for a, s in zip(ins, loops)]

        def call(idx):
            vals = [a[idx] for a in ins]
            it = iter(vals[:len(vals) - len(names)])
            pos = [args[i] if i in fixed else next(it) for i in range(len(args))]
            return self.pyfunc(*pos, **kw_fixed, **dict(zip(names, vals[len(vals) - len(names):])))
        results = [call(idx) for idx in np.ndindex(*loop)]
        if not results:
            raise ShapeError("`jnp.vectorize` over an empty loop shape: there is no call to infer results from")
        if isinstance(results[0], tuple):
            return tuple(self._stack([r[k] for r in results], loop) for k in range(len(results[0])))
        return self._stack(results, loop)

    @staticmethod
    def _stack(results, loop):
        jnp = _jnp()
        out = jnp.stack([jnp.asarray(r) for r in results])
        return jnp.reshape(out, loop + tuple(jnp.shape(results[0])))


def isneginf(x, /, out=None):
    """True where `x` is -inf: `jnp.isneginf(-jnp.inf)`."""
    no_out("isneginf", out)
    x = _jnp().asarray(x)
    return (x == -np.inf) if x.dtype.kind == "f" else _jnp().zeros(_jnp().shape(x), bool)


def isposinf(x, /, out=None):
    """True where `x` is +inf: `jnp.isposinf(jnp.inf)`."""
    no_out("isposinf", out)
    x = _jnp().asarray(x)
    return (x == np.inf) if x.dtype.kind == "f" else _jnp().zeros(_jnp().shape(x), bool)


def isreal(x):
    """True everywhere for jitad's real values (no imaginary part): `jnp.isreal(1.0)`."""
    return _jnp().ones(_jnp().shape(x), bool)


def isrealobj(x):
    """True: jitad's values have no complex dtype: `jnp.isrealobj(1.0)`."""
    return np.asarray(x).dtype.kind != "c" if not any_staged(x) else True


def _bits_axis(a, axis):
    jnp = _jnp()
    a = jnp.asarray(a)
    if axis is None:
        return jnp.ravel(a), 0
    return a, N._axis("packbits", axis, jnp.ndim(a), jnp.shape(a))


def packbits(a, axis=None, bitorder="big"):
    """The bits (non-zero entries) of `a` along `axis` packed eight to a byte (0 to 255):
    `jnp.packbits(jnp.array([1, 0, 1]))` is `[160]`."""
    jnp = _jnp()
    if not any_staged(a):
        return wrap(np.packbits(np.asarray(a), axis, bitorder))
    a, axis = _bits_axis(a, axis)
    bits = N.convert(a != 0, "i64")
    n = jnp.shape(bits)[axis]
    pad = (-n) % 8
    if pad:
        widths = [(0, 0)] * jnp.ndim(bits)
        widths[axis] = (0, pad)
        bits = jnp.pad(bits, widths)
    shape = list(jnp.shape(bits))
    shape[axis:axis + 1] = [shape[axis] // 8, 8]
    weights = np.array([128, 64, 32, 16, 8, 4, 2, 1] if bitorder == "big" else [1, 2, 4, 8, 16, 32, 64, 128])
    weights = weights.reshape([8 if d == axis + 1 else 1 for d in range(len(shape))])
    return jnp.sum(jnp.reshape(bits, tuple(shape)) * weights, axis + 1)


def unpackbits(a, axis=None, count=None, bitorder="big"):
    """The bits of the bytes `a` along `axis`, eight per byte (`count` of them):
    `jnp.unpackbits(jnp.array([160], jnp.uint8))`."""
    jnp = _jnp()
    if not any_staged(a):
        return wrap(np.unpackbits(np.asarray(a), axis, count, bitorder))
    a, axis = _bits_axis(a, axis)
    shifts = np.array([7, 6, 5, 4, 3, 2, 1, 0] if bitorder == "big" else [0, 1, 2, 3, 4, 5, 6, 7])
    x = jnp.expand_dims(N.convert(a, "i64"), axis + 1)
    shifts = shifts.reshape([8 if d == axis + 1 else 1 for d in range(jnp.ndim(x))])
    bits = (x // (2 ** shifts)) % 2
    shape = list(jnp.shape(a))
    shape[axis] *= 8
    out = jnp.reshape(bits, tuple(shape))
    if count is not None:
        out = jnp.take(out, np.arange(builtins.min(count, shape[axis])) if count >= 0
                       else np.arange(shape[axis] + count), axis=axis)
    return out


def take(a, indices, axis=None, out=None, mode=None, unique_indices=False, indices_are_sorted=False,
         fill_value=None):
    """`a`'s entries at `indices` along `axis` (None: the flattened array); out of range,
    `mode` 'fill' (JAX's default: NaN, or `fill_value`), 'clip' or 'wrap' (plain indices
    also 'raise'): `jnp.take(x, jnp.array([0, 2]))`."""
    jnp = _jnp()
    no_out("take", out)
    a = jnp.asarray(a)
    if axis is None:
        a, axis = jnp.ravel(a), 0
    axis = N._axis("take", axis, jnp.ndim(a), jnp.shape(a))
    indices = jnp.asarray(indices)
    n = jnp.shape(a)[axis]
    if mode == "raise":
        if is_staged(indices):
            raise ArgumentError("`jnp.take`: mode='raise' needs plain indices; use 'fill', 'clip' or 'wrap'")
        if np.any((indices < -n) | (indices >= n)):
            raise ArgumentError(f"`jnp.take`: an index outside [-{n}, {n})")
        mode = "clip"
    if mode == "wrap":
        return N.take(a, indices % n if n else indices, axis)
    if mode == "clip":
        return N.take(a, N.clip(indices, 0, builtins.max(n - 1, 0)), axis)
    if mode not in (None, "fill", "promise_in_bounds"):
        raise ArgumentError(f"`jnp.take`: mode={mode!r}; use 'fill', 'clip', 'wrap' or 'raise'")
    key = [slice(None)] * jnp.ndim(a)
    key[axis] = indices
    got = a.at[tuple(key)].get(mode="fill", fill_value=fill_value)
    return got


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """`|a - b| <= atol + rtol * |b|` elementwise; infinities close to themselves, NaN only
    with `equal_nan`: `jnp.isclose(1.0, 1.0 + 1e-9)`."""
    jnp = _jnp()
    if not any_staged(a, b, rtol, atol):
        return wrap(np.asarray(np.isclose(a, b, rtol, atol, equal_nan)))
    a, b = jnp.asarray(a), jnp.asarray(b)
    if jnp.result_type(a, b).kind != "f":
        return a == b
    a, b = _float(a), _float(b)
    finite = jnp.isfinite(a) & jnp.isfinite(b)
    close = N.where(finite, abs(a - b) <= atol + rtol * abs(b), a == b)
    if equal_nan:
        close = close | (jnp.isnan(a) & jnp.isnan(b))
    return close


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True when every pair is `isclose`: `jnp.allclose(x, y)`."""
    return _jnp().all(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1, a2, equal_nan=False):
    """True when `a1` and `a2` have one shape and equal entries (NaNs equal with
    `equal_nan`): `jnp.array_equal(x, x)`."""
    jnp = _jnp()
    if not any_staged(a1, a2):
        return np.bool_(np.array_equal(a1, a2, equal_nan=equal_nan))
    if tuple(jnp.shape(a1)) != tuple(jnp.shape(a2)):
        return np.bool_(False)
    a1, a2 = jnp.asarray(a1), jnp.asarray(a2)
    eq = a1 == a2
    if equal_nan and jnp.result_type(a1, a2).kind == "f":
        eq = eq | (jnp.isnan(a1) & jnp.isnan(a2))
    return jnp.all(eq)


def copyto(dst, src, casting="same_kind", where=True):
    """NumPy's in-place copy into the plain array `dst` (staged arrays are values: use
    `jnp.where(mask, src, dst)`): `jnp.copyto(buf, x)`."""
    if any_staged(dst):
        raise ArgumentError("`jnp.copyto` cannot write into a staged array (it is a value); "
                            "use `dst = jnp.where(where, src, dst)`")
    if any_staged(src, where):
        raise ArgumentError("`jnp.copyto` of a staged value into a NumPy array; return the value instead")
    np.copyto(dst, src, casting, where)


def putmask(a, mask, values):
    """NumPy's in-place `a[mask] = values` (repeated) on a plain array (staged arrays are
    values: use `jnp.place(a, mask, values, inplace=False)`)."""
    if any_staged(a, mask, values):
        raise ArgumentError("`jnp.putmask` cannot write into a staged array; use "
                            "`jnp.place(a, mask, values, inplace=False)` or `jnp.where`")
    np.putmask(a, mask, values)


def fix(x, out=None):
    """Rounding toward zero (as `trunc`): `jnp.fix(-1.5) == -1.0`."""
    no_out("fix", out)
    return _jnp().trunc(x)


def asarray_chkfinite(a, dtype=None, order=None):
    """`asarray`, refusing NaN and infinities in plain values: `jnp.asarray_chkfinite([1.0, 2.0])`."""
    if not any_staged(a):
        return wrap(np.asarray_chkfinite(a, dtype))
    return _jnp().asarray(a, dtype)


def ascontiguousarray(a, dtype=None):
    """`asarray` (jitad's arrays are contiguous): `jnp.ascontiguousarray(x)`."""
    return _jnp().asarray(a, dtype)


asfortranarray = asanyarray = ascontiguousarray


def require(a, dtype=None, requirements=None):
    """`asarray` with `dtype` (memory-layout requirements hold for jitad's arrays): `jnp.require(x, float)`."""
    return _jnp().asarray(a, dtype)
