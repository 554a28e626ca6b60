"""NumPy's reductions with their full signatures, as `jax.numpy` has them: `dtype=`,
`out=None` (anything else refused), `keepdims=`, `initial=`, `where=` (the entries
taken part), `ddof=`/`correction=`. Plain inputs compute with NumPy; staged ones
through jitad's reductions (masked entries replaced by the reduction's identity)."""
import numpy as np

from .. import numeric as N
from .. import numpy_api as A
from ..errors import ArgumentError, ShapeError
from ..staging import is_staged, result_dtype
from ._common import jnp as _jnp, any_staged, no_out, wrap

__all__ = ["sum", "mean", "max", "min", "amax", "amin", "prod", "product", "var", "std", "any", "all",
           "argmax", "argmin", "cumsum", "cumprod", "cumulative_sum", "cumulative_prod", "nansum",
           "nanmean", "count_nonzero", "ptp"]


def _plain(name, a, **kw):
    kw = {k: v for k, v in kw.items() if v is not None or k in ("axis",)}
    with np.errstate(all="ignore"):
        return wrap(np.asarray(getattr(np, name)(np.asarray(a), **kw)))


def _prepare(a, dtype, who):
    a = _jnp().asarray(a)
    if dtype is not None:
        a = N.convert(a, N._dtype_name(np.dtype(dtype).name, who)) if is_staged(a) else np.asarray(a, dtype)
    return a


def _masked(a, where, fill):
    return a if where is None else N.where(_jnp().asarray(where, bool), a, fill)


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None, promote_integers=True):
    """The sum over `axis` (None: all), of the entries where `where` is true, plus
    `initial`; bools count as ints: `jnp.sum(jnp.array([[1, 2], [3, 4]]), axis=0)` is `[4, 6]`."""
    no_out("sum", out)
    if not any_staged(a, initial, where):
        return _plain("sum", a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)
    a = _prepare(a, dtype, "sum")
    if a.dtype == np.bool_:
        a = N.convert(a, "i64")
    s = N.sum(_masked(a, where, N.zeros((), a.dtype)), axis, keepdims)
    return s if initial is None else s + initial


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """The mean over `axis` of the entries where `where` is true: `jnp.mean(jnp.array([1.0, 3.0])) == 2.0`."""
    no_out("mean", out)
    if dtype is not None and np.dtype(dtype).kind == "b":
        raise ArgumentError("`jnp.mean` with dtype=bool is not supported (as in JAX); pass an int or float dtype")
    if dtype is not None and np.dtype(dtype).kind in "iu":
        return _int_mean(a, axis, dtype, keepdims, where)
    if not any_staged(a, where):
        return _plain("mean", a, axis=axis, dtype=dtype, keepdims=keepdims, where=where)
    a = A._float(_prepare(a, dtype, "mean"))
    if where is None:
        return N.mean(a, axis, keepdims)
    w = N.broadcast_to(_jnp().asarray(where, bool), tuple(a.shape))
    return N.sum(N.where(w, a, 0.0), axis, keepdims) / N.sum(N.convert(w, a.ir_dtype), axis, keepdims)


def _int_mean(a, axis, dtype, keepdims, where):
    """`mean` with an integer `dtype=`, as JAX computes it: the sum in that dtype divided by
    the count, rounded toward zero (-1 where nothing is counted, XLA's integer x / 0)."""
    s = sum(a, axis, dtype, keepdims=keepdims, where=where)
    taken = N.broadcast_to(_jnp().asarray(True if where is None else where, bool), tuple(np.shape(a)))
    n = N.convert(sum(taken, axis, keepdims=keepdims), result_dtype(s))
    safe = N.where(n == 0, 1, n)
    q = s // safe
    q = N.where((q * safe != s) & (s < 0), q + 1, q)
    out = N.where(n == 0, -1, q)
    return out if is_staged(out) else wrap(np.asarray(out, dtype))


def _extreme(name, largest, a, axis, out, keepdims, initial, where):
    no_out(name, out)
    if not any_staged(a, initial, where):
        return _plain(name, a, axis=axis, keepdims=keepdims, initial=initial, where=where)
    a = _jnp().asarray(a)
    if where is not None and initial is None:
        raise ArgumentError(f"`jnp.{name}` with where= needs initial= (the value of a line with no entry)")
    axes = N._axes(a, axis, name)
    if initial is not None and not N.math._nonempty(a, axes):
        return A._of_nothing(a, axes, keepdims, initial)
    red = N.max if largest else N.min
    got = red(_masked(a, where, np.asarray(A._lowest(a.dtype, largest), a.dtype)), axis, keepdims)
    if initial is None:
        return got
    return N.maximum(got, initial) if largest else N.minimum(got, initial)


def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """The maximum over `axis`, at least `initial`, of the entries where `where` is true:
    `jnp.max(jnp.array([1.0, 3.0])) == 3.0`."""
    return _extreme("max", True, a, axis, out, keepdims, initial, where)


def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """The minimum over `axis`, at most `initial`, of the entries where `where` is true:
    `jnp.min(jnp.array([1.0, 3.0])) == 1.0`."""
    return _extreme("min", False, a, axis, out, keepdims, initial, where)


amax, amin = max, min


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None, promote_integers=True):
    """The product over `axis` of the entries where `where` is true, times `initial`:
    `jnp.prod((2, 3)) == 6`."""
    no_out("prod", out)
    if not any_staged(a, initial, where):
        return _plain("prod", a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial, where=where)
    a = _prepare(a, dtype, "prod")
    if a.dtype == np.bool_:
        a = N.convert(a, "i64")
    return A._product(_masked(a, where, np.ones((), a.dtype)), N._axes(a, axis, "prod"), keepdims, initial)


product = prod


def _var(name, a, axis, dtype, out, ddof, keepdims, where, mean, correction):
    no_out(name, out)
    if mean is not None:
        raise ArgumentError(f"`jnp.{name}`: mean= is not supported; leave it out (the mean is computed)")
    if correction is not None:
        ddof = correction
    if not any_staged(a, where):
        return _plain("var", a, axis=axis, dtype=dtype, ddof=ddof, keepdims=keepdims, where=where)
    a = A._float(_prepare(a, dtype, name))
    if where is None:
        return A.var(a, axis, None, ddof, keepdims)
    w = N.broadcast_to(_jnp().asarray(where, bool), tuple(a.shape))
    count = N.sum(N.convert(w, a.ir_dtype), axis, True)
    centre = N.sum(N.where(w, a, 0.0), axis, True) / count
    sq = N.sum(N.where(w, N.square(a - centre), 0.0), axis, keepdims)
    return sq / N.maximum(N.sum(N.convert(w, a.ir_dtype), axis, keepdims) - ddof, 0.0)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None, correction=None):
    """The variance over `axis`, dividing by n - ddof (`correction` is ddof's newer name):
    `jnp.var(jnp.array([1.0, 3.0])) == 1.0`."""
    return _var("var", a, axis, dtype, out, ddof, keepdims, where, mean, correction)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None, correction=None):
    """The standard deviation over `axis`: `jnp.std(jnp.array([1.0, 3.0])) == 1.0`."""
    if not any_staged(a, where):
        return wrap(np.sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean, correction=correction)))
    return N.sqrt(_var("std", a, axis, dtype, out, ddof, keepdims, where, mean, correction))


def _logical(name, a, axis, out, keepdims, where):
    no_out(name, out)
    if not any_staged(a, where):
        return _plain(name, a, axis=axis, keepdims=keepdims, where=where)
    a = _jnp().asarray(a)
    if where is not None:
        a = N.where(_jnp().asarray(where, bool), a != 0, name == "all")
    return getattr(A, name)(a, axis, keepdims)


def any(a, axis=None, out=None, keepdims=False, *, where=None):
    """True where some entry over `axis` is non-zero: `jnp.any(jnp.array([0, 2]))`."""
    return _logical("any", a, axis, out, keepdims, where)


def all(a, axis=None, out=None, keepdims=False, *, where=None):
    """True where every entry over `axis` is non-zero: `jnp.all(jnp.array([1, 2]))`."""
    return _logical("all", a, axis, out, keepdims, where)


def argmax(a, axis=None, out=None, keepdims=False):
    """The position of the first maximum along `axis` (of the flattened array by default):
    `jnp.argmax(jnp.array([1.0, 3.0, 2.0])) == 1`."""
    no_out("argmax", out)
    if not any_staged(a):
        return _plain("argmax", a, axis=axis, keepdims=keepdims)
    return A.argmax(a, axis, keepdims)


def argmin(a, axis=None, out=None, keepdims=False):
    """The position of the first minimum along `axis`: `jnp.argmin(jnp.array([1.0, 0.0])) == 1`."""
    no_out("argmin", out)
    if not any_staged(a):
        return _plain("argmin", a, axis=axis, keepdims=keepdims)
    return A.argmin(a, axis, keepdims)


def _running_dtype(a, dtype):
    """The dtype a running sum or product of plain `a` computes in: `dtype`, else `a`'s own
    (as JAX: an int32 array's running sums wrap in int32, where NumPy's widen to int64);
    bools count as int64."""
    if dtype is not None:
        return dtype
    kind = np.asarray(a).dtype
    return np.int64 if kind == np.bool_ else kind


def cumsum(a, axis=None, dtype=None, out=None):
    """Running sums along `axis` (of the flattened array by default), in `a`'s dtype:
    `jnp.cumsum(jnp.array([1, 2, 3]))`."""
    no_out("cumsum", out)
    if not any_staged(a):
        return _plain("cumsum", a, axis=axis, dtype=_running_dtype(a, dtype))
    return A.cumsum(a, axis, dtype)


def cumprod(a, axis=None, dtype=None, out=None):
    """Running products along `axis`, in `a`'s dtype: `jnp.cumprod(jnp.array([1, 2, 3]))`."""
    no_out("cumprod", out)
    if not any_staged(a):
        return _plain("cumprod", a, axis=axis, dtype=_running_dtype(a, dtype))
    return A.cumprod(a, axis, dtype)


def _cumulative(name, scan, unit, x, axis, dtype, include_initial):
    jnp = _jnp()
    x = jnp.asarray(x)
    if axis is None:
        if jnp.ndim(x) > 1:
            raise ShapeError(f"`jnp.{name}` of a {jnp.ndim(x)}-D array needs axis=")
        axis = 0
    if jnp.ndim(x) == 0:
        raise ShapeError(f"`jnp.{name}` of a 0-d value; pass an array of at least one axis")
    out = scan(x, axis, dtype)
    if include_initial:
        shape = list(jnp.shape(out))
        shape[axis] = 1
        out = jnp.concatenate([jnp.full(tuple(shape), unit, jnp.result_type(out)), out], axis)
    return out


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running sums along `axis` (array API; `include_initial` puts a 0 first):
    `jnp.cumulative_sum(jnp.array([1, 2]), include_initial=True)` is `[0, 1, 3]`."""
    if dtype is None and not any_staged(x) and np.asarray(x).dtype.kind in "biu":   # (as JAX: ints widen)
        dtype = np.uint64 if np.asarray(x).dtype.kind == "u" else np.int64
    return _cumulative("cumulative_sum", cumsum, 0, x, axis, dtype, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running products along `axis` (array API; `include_initial` puts a 1 first):
    `jnp.cumulative_prod(jnp.array([2, 3]))` is `[2, 6]`."""
    return _cumulative("cumulative_prod", cumprod, 1, x, axis, dtype, include_initial)


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """The sum with NaNs counted as zero: `jnp.nansum(jnp.array([1.0, jnp.nan])) == 1.0`."""
    a = _jnp().asarray(a)
    if a.dtype.kind == "f":
        a = N.where(_jnp().isnan(a), 0.0, a) if any_staged(a) else np.where(np.isnan(a), 0.0, a).astype(a.dtype)
    return sum(a, axis, dtype, out, keepdims, initial, where)


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """The mean of the entries that are not NaN: `jnp.nanmean(jnp.array([1.0, jnp.nan, 3.0])) == 2.0`."""
    no_out("nanmean", out)
    if not any_staged(a, where):
        return _plain("nanmean", a, axis=axis, dtype=dtype, keepdims=keepdims, where=where)
    a = A._float(_prepare(a, dtype, "nanmean"))
    keep = ~_jnp().isnan(a)
    if where is not None:
        keep = keep & _jnp().asarray(where, bool)
    return N.sum(N.where(keep, a, 0.0), axis, keepdims) / N.sum(N.convert(keep, a.ir_dtype), axis, keepdims)


def count_nonzero(a, axis=None, keepdims=False):
    """The number of non-zero entries over `axis`: `jnp.count_nonzero(jnp.array([0, 1, 2])) == 2`."""
    if not any_staged(a):
        return _plain("count_nonzero", a, axis=axis, keepdims=keepdims)
    return A.count_nonzero(a, axis, keepdims)


def ptp(a, axis=None, out=None, keepdims=False):
    """max - min over `axis`: `jnp.ptp(jnp.array([1.0, 4.0])) == 3.0`."""
    return max(a, axis, out, keepdims) - min(a, axis, out, keepdims)
