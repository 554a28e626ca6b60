"""Functions whose result's length depends on the values: `unique` and its array-API
forms, set operations, `nonzero` and its kin. As in JAX, staged code gives them a static
length, `size=` (the result padded with `fill_value` or cut to it); plain values need
none. Staged, each is a sort, a running count and a scatter into `size` slots."""
import collections
import math

import numpy as np

from .. import numeric as N
from ..errors import ArgumentError
from ..staging import is_staged
from ._common import jnp as _jnp, any_staged, wrap

__all__ = ["unique", "unique_values", "unique_counts", "unique_inverse", "unique_all", "union1d",
           "intersect1d", "setdiff1d", "setxor1d", "isin", "in1d", "nonzero", "flatnonzero", "argwhere",
           "extract", "compress", "where"]


def _need_size(who, size):
    if size is None:
        raise N.data_dependent_shape(f"`jnp.{who}` without size=")
    if int(size) != size or size < 0:
        raise ArgumentError(f"`jnp.{who}`: size={size!r}; use a non-negative int")


def _compact(values, keep, size, fill):
    """The entries of 1-D `values` where `keep`, in order, in `size` slots (then `fill`)."""
    jnp = _jnp()
    slot = jnp.cumsum(keep) - 1
    target = N.where(keep, slot, np.int64(size))
    base = jnp.full((size,), fill, jnp.result_type(values)) if not is_staged(fill) \
        else N.broadcast_to(N.convert(fill, jnp.result_type(values).name), (size,))
    return base.at[target].set(values, mode="drop")


def _distinct_first(s, equal_nan=True):
    """True at the first of each run of equal entries of the sorted 1-D `s`."""
    jnp = _jnp()
    if jnp.shape(s)[0] == 0:
        return jnp.zeros((0,), bool)
    differ = s[1:] != s[:-1]
    if equal_nan and jnp.result_type(s).kind == "f":
        differ = differ & ~(jnp.isnan(s[1:]) & jnp.isnan(s[:-1]))
    return jnp.concatenate([jnp.ones((1,), bool), differ])


def _staged_unique(ar, return_index, return_inverse, return_counts, equal_nan, size, fill_value):
    jnp = _jnp()
    ar = jnp.asarray(ar)
    x = jnp.ravel(ar)
    n = jnp.shape(x)[0]
    perm = jnp.argsort(x)
    s = x[perm]
    first = _distinct_first(s, equal_nan)
    group = jnp.cumsum(first) - 1
    fill = (s[0] if n else 0) if fill_value is None else fill_value
    values = _compact(s, first, size, fill)
    out = [values]
    if return_index:
        idx = _compact(perm, first, size, 0)
        out.append(N.where(np.arange(size) < jnp.sum(first), idx, idx[0] if size else idx))
    if return_inverse:
        out.append(jnp.reshape(jnp.zeros((n,), np.int64).at[perm].set(group), jnp.shape(ar)))
    if return_counts:
        out.append(jnp.zeros((size,), np.int64).at[group].add(np.int64(1), mode="drop"))
    return out[0] if len(out) == 1 else tuple(out)


def _pad_plain(out, size, fill_value):
    """NumPy's `unique` results padded (or cut) to `size`, as JAX's with `size=`."""
    values = out[0]
    fill = (values[0] if len(values) else 0) if fill_value is None else fill_value
    k = len(values)

    def fit(a, pad):
        a = a[:size]
        return np.concatenate([a, np.full(size - len(a), pad, a.dtype)]) if len(a) < size else a
    res = [fit(values, fill)]
    return res, k, fit


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *, equal_nan=True,
           size=None, fill_value=None, sorted=True):
    """The sorted distinct entries of `ar` (optionally the first positions, the inverse
    map and the counts). Staged, `size=` is required: the result has `size` entries,
    padded with `fill_value` (the smallest entry by default): `jnp.unique(x, size=3)`."""
    if not any_staged(ar, fill_value) and size is None:
        return wrap(np.unique(np.asarray(ar), return_index, return_inverse, return_counts, axis, equal_nan=equal_nan))
    if axis is not None:
        raise ArgumentError("`jnp.unique` with axis= works on plain values only; flatten, or drop axis=")
    _need_size("unique", size)
    out = _staged_unique(ar, return_index, return_inverse, return_counts, equal_nan, size, fill_value)
    return out if any_staged(ar, fill_value) else wrap(_plain(out))


def _plain(out):
    if isinstance(out, tuple):
        return tuple(np.asarray(o) for o in out)
    return np.asarray(out)


_UniqueAll = collections.namedtuple("UniqueAllResult", "values indices inverse_indices counts")
_UniqueCounts = collections.namedtuple("UniqueCountsResult", "values counts")
_UniqueInverse = collections.namedtuple("UniqueInverseResult", "values inverse_indices")


def unique_values(x, /, *, size=None, fill_value=None):
    """The sorted distinct entries (array API): `jnp.unique_values(x)`."""
    return unique(x, size=size, fill_value=fill_value)


def unique_counts(x, /, *, size=None, fill_value=None):
    """`(values, counts)` of the distinct entries: `jnp.unique_counts(x).counts`."""
    return _UniqueCounts(*unique(x, return_counts=True, size=size, fill_value=fill_value))


def unique_inverse(x, /, *, size=None, fill_value=None):
    """`(values, inverse_indices)` (`values[inverse_indices]` is `x`): `jnp.unique_inverse(x)`."""
    return _UniqueInverse(*unique(x, return_inverse=True, size=size, fill_value=fill_value))


def unique_all(x, /, *, size=None, fill_value=None):
    """`(values, indices, inverse_indices, counts)` of the distinct entries: `jnp.unique_all(x)`."""
    return _UniqueAll(*unique(x, return_index=True, return_inverse=True, return_counts=True, size=size,
                              fill_value=fill_value))


def isin(element, test_elements, assume_unique=False, invert=False, *, method="auto"):
    """True where an entry of `element` occurs in `test_elements` (False with `invert`):
    `jnp.isin(jnp.array([1, 2]), jnp.array([2, 3]))` is `[False, True]`."""
    jnp = _jnp()
    if not any_staged(element, test_elements):
        return wrap(np.asarray(np.isin(element, test_elements, invert=invert)))
    element = jnp.asarray(element)
    tests = jnp.ravel(jnp.asarray(test_elements))
    hit = jnp.any(jnp.expand_dims(element, -1) == tests, -1) if jnp.shape(tests)[0] \
        else jnp.zeros(jnp.shape(element), bool)
    return ~hit if invert else hit


def in1d(ar1, ar2, assume_unique=False, invert=False):
    """`isin` of the flattened `ar1`: `jnp.in1d(x, y)`."""
    return isin(_jnp().ravel(_jnp().asarray(ar1)), ar2, assume_unique, invert)


def _set_result(who, vals, keep, size, fill_value, plain):
    jnp = _jnp()
    if size is None:
        raise N.data_dependent_shape(f"`jnp.{who}` without size=")
    order = jnp.lexsort((vals, ~keep))   # kept entries first, each part sorted
    vals, keep = vals[order], keep[order]
    fill = (vals[0] if who == "intersect1d" and jnp.shape(vals)[0] else 0) if fill_value is None else fill_value
    out = N.where(np.arange(jnp.shape(vals)[0]) < jnp.sum(keep), vals, fill) if jnp.shape(vals)[0] else vals
    out = jnp.concatenate([out, jnp.full((max(size - jnp.shape(vals)[0], 0),), fill, jnp.result_type(vals))])
    out = out[:size]
    return wrap(np.asarray(out)) if plain else out


def _sorted_distinct(a):
    jnp = _jnp()
    s = jnp.sort(jnp.ravel(jnp.asarray(a)))
    return s, _distinct_first(s)


def union1d(ar1, ar2, *, size=None, fill_value=None):
    """The sorted distinct entries of both arrays: `jnp.union1d(a, b)` (staged: `size=`)."""
    plain = not any_staged(ar1, ar2, fill_value)
    if plain and size is None:
        return wrap(np.union1d(ar1, ar2))
    jnp = _jnp()
    both = jnp.concatenate([jnp.ravel(jnp.asarray(ar1)), jnp.ravel(jnp.asarray(ar2))])
    if size is None:
        raise N.data_dependent_shape("`jnp.union1d` without size=")
    return unique(both, size=size, fill_value=fill_value)


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None, fill_value=None):
    """The sorted distinct entries found in both arrays: `jnp.intersect1d(a, b)` (staged: `size=`)."""
    plain = not any_staged(ar1, ar2, fill_value)
    if plain and size is None:
        return wrap(np.intersect1d(ar1, ar2, assume_unique, return_indices))
    if return_indices:
        raise ArgumentError("`jnp.intersect1d`: return_indices=True works on plain values without size= only")
    s, first = _sorted_distinct(ar1)
    return _set_result("intersect1d", s, first & isin(s, ar2), size, fill_value, plain)


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted distinct entries of `ar1` not in `ar2`: `jnp.setdiff1d(a, b)` (staged: `size=`)."""
    plain = not any_staged(ar1, ar2, fill_value)
    if plain and size is None:
        return wrap(np.setdiff1d(ar1, ar2, assume_unique))
    s, first = _sorted_distinct(ar1)
    return _set_result("setdiff1d", s, first & ~isin(s, ar2), size, fill_value, plain)


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """The sorted distinct entries in exactly one of the arrays: `jnp.setxor1d(a, b)` (staged: `size=`)."""
    jnp = _jnp()
    plain = not any_staged(ar1, ar2, fill_value)
    if plain and size is None:
        return wrap(np.setxor1d(ar1, ar2, assume_unique))
    s1, f1 = _sorted_distinct(ar1)
    s2, f2 = _sorted_distinct(ar2)
    vals = jnp.concatenate([s1, s2.astype(jnp.result_type(s1, s2))])
    keep = jnp.concatenate([f1 & ~isin(s1, s2), f2 & ~isin(s2, s1)])
    return _set_result("setxor1d", vals, keep, size, fill_value, plain)


def nonzero(a, *, size=None, fill_value=None):
    """The indices of the non-zero entries, one array per axis. Staged, `size=` is required
    (padded with `fill_value`, 0 by default): `jnp.nonzero(x > 0, size=4)`."""
    jnp = _jnp()
    if not any_staged(a, fill_value) and size is None:
        return wrap(np.nonzero(np.asarray(a)))
    _need_size("nonzero", size)
    a = jnp.asarray(a)
    shape = tuple(jnp.shape(a)) or (1,)
    mask = jnp.ravel(a) != 0
    n = math.prod(shape)
    found = jnp.sum(mask)
    pos = _compact(np.arange(n, dtype=np.int64), mask, size, 0)
    fills = fill_value if isinstance(fill_value, (tuple, list)) else [fill_value] * len(shape)
    strides = np.cumprod((1,) + shape[::-1])[:-1][::-1]
    out = []
    for d, (st, m) in enumerate(zip(strides, shape)):
        coord = (pos // int(st)) % m
        if fills[d] is not None:
            coord = N.where(np.arange(size) < found, coord, fills[d])
        out.append(coord)
    out = tuple(out)
    return out if any_staged(a, fill_value) else wrap(_plain(out))


def flatnonzero(a, *, size=None, fill_value=None):
    """The flat indices of the non-zero entries (staged: `size=`): `jnp.flatnonzero(x, size=2)`."""
    return nonzero(_jnp().ravel(_jnp().asarray(a)), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    """The indices of the non-zero entries, one row each (staged: `size=`): `jnp.argwhere(x, size=2)`."""
    jnp = _jnp()
    a = jnp.asarray(a)
    if jnp.ndim(a) == 0:
        a = jnp.reshape(a, (1,))[:1] if jnp.ndim(a) == 0 else a
        idx = nonzero(a, size=size, fill_value=fill_value)
        return jnp.zeros((jnp.shape(idx[0])[0], 0), np.int64)
    return jnp.stack(nonzero(a, size=size, fill_value=fill_value), -1)


def extract(condition, arr, *, size=None, fill_value=0):
    """The entries of `arr` where `condition` holds, flattened (staged: `size=`):
    `jnp.extract(x > 0, x, size=3)`."""
    jnp = _jnp()
    if not any_staged(condition, arr) and size is None:
        return wrap(np.extract(condition, arr))
    _need_size("extract", size)
    cond = jnp.ravel(jnp.asarray(condition)) != 0
    vals = jnp.ravel(jnp.asarray(arr))
    return _compact(vals, cond, size, fill_value)


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of `a` along `axis` where the 1-D `condition` holds (staged: `size=`):
    `jnp.compress(jnp.array([True, False]), x, axis=0)`."""
    jnp = _jnp()
    if out is not None:
        raise ArgumentError("`jnp.compress`: out= is not supported; use the returned array")
    if not any_staged(condition, a) and size is None:
        return wrap(np.compress(condition, a, axis))
    _need_size("compress", size)
    a = jnp.asarray(a)
    if axis is None:
        a, axis = jnp.ravel(a), 0
    cond = jnp.ravel(jnp.asarray(condition)) != 0
    n = jnp.shape(a)[axis]
    cond = cond[:n]
    if jnp.shape(cond)[0] < n:
        cond = jnp.concatenate([cond, jnp.zeros((n - jnp.shape(cond)[0],), bool)])
    rows = _compact(np.arange(n, dtype=np.int64), cond, size, n)
    padded = jnp.concatenate([a, jnp.full_like(jnp.take(a, np.array([0]), axis=axis) if n else
                                               jnp.zeros([1 if d == axis else s for d, s in enumerate(jnp.shape(a))]),
                                               fill_value)], axis)
    return jnp.take(padded, rows, axis=axis)


def where(condition, x=None, y=None, *, size=None, fill_value=None):
    """`x` where `condition` else `y` (broadcast); with `condition` alone, `nonzero(condition)`
    (staged: `size=`, as JAX's): `jnp.where(x > 0, x, 0.0)`. The three may be given by name
    (`where(condition=c, x=a, y=b)`, as autograd takes them); on three Python numbers the
    result is a Python number of NumPy's promoted type, as jitad's scalar results are, and on
    lists of them a list (autograd's meaning; JAX refuses lists)."""
    if x is None and y is None:
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ArgumentError("`jnp.where` takes condition alone or condition, x and y: `jnp.where(c, x, y)`")
    if all(type(v) in (bool, int, float) for v in (condition, x, y)):
        return np.where(condition, x, y).item()
    if all(_plain_python(v) for v in (condition, x, y)):   # lists of numbers: a list, as autograd's
        return np.where(condition, x, y).tolist()          # (JAX refuses lists)
    return N.where(condition, x, y)


def _plain_python(v):
    """A Python number, or a list or tuple of plain Python values (no array in it)."""
    if isinstance(v, (list, tuple)):
        return all(_plain_python(item) for item in v)
    return type(v) in (bool, int, float)
