"""Order statistics, NaN-skipping reductions, covariances, histograms and interpolation of
`jitad.numpy`: compositions of sorts, gathers, scans and `where`, differentiable where
JAX's are (through the gathered values; positions and counts have no derivative)."""
import builtins
import math

import numpy as np

from .. import numeric as N
from ..errors import ArgumentError, ShapeError
from ..numpy_api import _axes_last, _float
from ..staging import is_staged
from ._common import jnp as _jnp, any_staged, no_out, wrap

__all__ = ["quantile", "percentile", "median", "nanquantile", "nanpercentile", "nanmedian",
           "nanmax", "nanmin", "nanargmax", "nanargmin", "nanprod", "nancumsum", "nancumprod",
           "nanvar", "nanstd", "cov", "corrcoef", "digitize", "bincount", "histogram_bin_edges",
           "histogram", "histogram2d", "histogramdd", "interp"]

_METHODS = ("linear", "lower", "higher", "nearest", "midpoint")


def _quantile(a, q, axis, method, keepdims, skip_nan, who):
    jnp = _jnp()
    if method not in _METHODS:
        raise ArgumentError(f"`jnp.{who}`: method={method!r}; use one of {', '.join(_METHODS)}")
    a, q = jnp.asarray(a), jnp.asarray(q)
    a = _float(a)
    q = _float(q) if is_staged(q) else np.asarray(q, a.dtype)
    shape = tuple(jnp.shape(a))
    axes = N._axes(a, axis, who)
    x = _axes_last(a, axes) if shape else N.reshape(a, (1,))
    n = jnp.shape(x)[-1]
    if n == 0:
        raise ShapeError(f"`jnp.{who}` of an empty axis (shape {shape}): there is no element to take")
    if skip_nan:   # NaNs sort last; each line's count of numbers sets its positions
        count = N.sum(N.convert(~jnp.isnan(x), "f64"), -1, keepdims=True)
    else:
        count = float(n)
    qs = N.reshape(q, (-1,))
    pos = (count - 1.0) * qs                      # (..., Q) or (Q,)
    low, high = jnp.floor(pos), jnp.ceil(pos)
    hw = pos - low
    rest = tuple(jnp.shape(x)[:-1])
    full = rest + (math.prod(jnp.shape(qs)),)

    def at(p):
        i = N.convert(N.clip(p, 0.0, float(n - 1)), "i64")
        return jnp.take_along_axis(s, N.broadcast_to(i, full), -1)
    s = jnp.sort(x, axis=-1)
    lo, hi = at(low), at(high)
    out = {"linear": lambda: N.where((hw == 0) | (lo == hi), lo, lo * (1.0 - hw) + hi * hw), "lower": lambda: lo, "higher": lambda: hi,
           "nearest": lambda: N.where(hw <= 0.5, lo, hi), "midpoint": lambda: (lo + hi) * 0.5}[method]()
    bad = (count == 0.0) if skip_nan else jnp.any(jnp.isnan(x), -1, keepdims=True)
    out = N.where(bad, np.nan, out)
    qshape = tuple(jnp.shape(q))
    kept = tuple(1 if d in axes else m for d, m in enumerate(shape)) if keepdims else rest
    out = N.reshape(out, kept + qshape)
    k = len(kept)
    return N.transpose(out, tuple(range(k, k + len(qshape))) + tuple(range(k))) if qshape else out


def _order_stat(np_name, who, scale, skip_nan):
    def fn(a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False, *,
           weights=None, interpolation=None):
        no_out(who, out)
        if weights is not None:
            raise ArgumentError(f"`jnp.{who}`: weights= is not supported; sort and interpolate the "
                                "cumulative weights yourself (`jnp.cumsum`, `jnp.interp`)")
        method = interpolation or method
        if not any_staged(a, q):
            return wrap(np.asarray(_quantile(np.asarray(a), np.asarray(q) / scale, axis, method, keepdims,
                                             skip_nan, who)))
        return _quantile(a, q / scale if scale != 1 else q, axis, method, keepdims, skip_nan, who)
    fn.__name__ = fn.__qualname__ = who
    return fn


quantile = _order_stat("quantile", "quantile", 1, False)
quantile.__doc__ = """The `q`-th quantiles (0 <= q <= 1) along `axis`, as JAX's (`method` 'linear',
'lower', 'higher', 'nearest', 'midpoint'; NaN where a line holds one):
`jnp.quantile(jnp.array([1.0, 2.0, 4.0]), 0.5) == 2.0`."""
percentile = _order_stat("percentile", "percentile", 100, False)
percentile.__doc__ = """`quantile` with `q` in percent: `jnp.percentile(jnp.array([1.0, 3.0]), 50) == 2.0`."""
nanquantile = _order_stat("nanquantile", "nanquantile", 1, True)
nanquantile.__doc__ = """`quantile` of the entries that are not NaN (NaN for an all-NaN line):
`jnp.nanquantile(jnp.array([1.0, jnp.nan, 3.0]), 0.5) == 2.0`."""
nanpercentile = _order_stat("nanpercentile", "nanpercentile", 100, True)
nanpercentile.__doc__ = """`nanquantile` with `q` in percent: `jnp.nanpercentile(jnp.array([1.0, jnp.nan]), 50) == 1.0`."""


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median along `axis` (the mean of the two middle values for an even count):
    `jnp.median(jnp.array([3.0, 1.0, 2.0])) == 2.0`."""
    return quantile(a, 0.5, axis, out, keepdims=keepdims)


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """The median of the entries that are not NaN: `jnp.nanmedian(jnp.array([1.0, jnp.nan, 3.0])) == 2.0`."""
    return nanquantile(a, 0.5, axis, out, keepdims=keepdims)


# -- NaN-skipping reductions ----------------------------------------------------------

def _nan_fill(a, value):
    jnp = _jnp()
    a = jnp.asarray(a)
    if jnp.result_type(a).kind != "f":
        return a
    return N.where(jnp.isnan(a), value, a)


def _nan_extreme(name, value, reduce):
    def fn(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        jnp = _jnp()
        no_out(name, out)
        a = jnp.asarray(a)
        if initial is None and where is None and not any_staged(a):
            with np.errstate(all="ignore"):
                return wrap(getattr(np, name)(np.asarray(a), axis=axis, keepdims=keepdims))
        nan = jnp.isnan(a) if jnp.result_type(a).kind == "f" else np.zeros(jnp.shape(a), bool)
        got = reduce(_nan_fill(a, value), axis=axis, keepdims=keepdims, initial=initial, where=where)
        if jnp.result_type(a).kind != "f":
            return got
        every = jnp.all(nan if where is None else nan | ~jnp.asarray(where, bool), axis=axis, keepdims=keepdims)
        return N.where(every, np.nan, got) if initial is None else got
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"""`{reduce.__name__}` skipping NaNs (NaN where a line has only NaNs):
    `jnp.{name}(jnp.array([1.0, jnp.nan, 3.0]))`."""
    return fn


def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    return _nanmax(a, axis, out, keepdims, initial, where)


def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    return _nanmin(a, axis, out, keepdims, initial, where)


def _nan_arg(name, best, fill):
    def fn(a, axis=None, out=None, keepdims=False):
        jnp = _jnp()
        no_out(name, out)
        a = jnp.asarray(a)
        if not any_staged(a):
            return wrap(np.asarray(getattr(np, name)(np.asarray(a), axis=axis, keepdims=keepdims)))
        if jnp.result_type(a).kind != "f":
            return best(a, axis, keepdims=keepdims)
        nan = jnp.isnan(a)
        got = best(N.where(nan, fill, a), axis, keepdims=keepdims)
        return N.where(jnp.all(nan, axis=axis, keepdims=keepdims), np.int64(-1), got)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"""The position of the {'largest' if fill < 0 else 'smallest'} entry that is not NaN
    (-1 for an all-NaN line, as JAX): `jnp.{name}(jnp.array([jnp.nan, 2.0, 1.0]))`."""
    return fn


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """The product with NaNs counted as one: `jnp.nanprod(jnp.array([2.0, jnp.nan, 3.0])) == 6.0`."""
    return _jnp().prod(_nan_fill(a, 1), axis, dtype, out, keepdims, initial=initial, where=where)


def nancumsum(a, axis=None, dtype=None, out=None):
    """Running sums with NaNs counted as zero: `jnp.nancumsum(jnp.array([1.0, jnp.nan, 2.0]))`."""
    no_out("nancumsum", out)
    return _jnp().cumsum(_nan_fill(a, 0), axis, dtype)


def nancumprod(a, axis=None, dtype=None, out=None):
    """Running products with NaNs counted as one: `jnp.nancumprod(jnp.array([2.0, jnp.nan, 3.0]))`."""
    no_out("nancumprod", out)
    return _jnp().cumprod(_nan_fill(a, 1), axis, dtype)


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
           correction=None):
    """The variance of the entries that are not NaN, dividing by their count - ddof:
    `jnp.nanvar(jnp.array([1.0, jnp.nan, 3.0])) == 1.0`."""
    jnp = _jnp()
    no_out("nanvar", out)
    if mean is not None:
        raise ArgumentError("`jnp.nanvar`: mean= is not supported; leave it out (the mean is computed)")
    ddof = ddof if correction is None else correction
    a = _float(jnp.asarray(a) if dtype is None else jnp.asarray(a, dtype))
    keep = ~jnp.isnan(a)
    if where is not None:
        keep = keep & jnp.asarray(where, bool)
    count = jnp.sum(keep, axis, keepdims=True)
    centre = jnp.sum(N.where(keep, a, 0.0), axis, keepdims=True) / count
    sq = N.where(keep, N.square(a - centre), 0.0)
    n = jnp.sum(keep, axis, keepdims=keepdims) - ddof
    out = jnp.sum(sq, axis, keepdims=keepdims) / N.maximum(n, 0)
    return N.where(n > 0, out, np.nan)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
           correction=None):
    """The standard deviation of the entries that are not NaN: `jnp.nanstd(jnp.array([1.0, jnp.nan, 3.0])) == 1.0`."""
    return N.sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean, correction=correction))


# -- covariance ------------------------------------------------------------------------

def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, dtype=None):
    """The covariance matrix of the variables in the rows of `m` (columns with
    `rowvar=False`), with NumPy's frequency and analytic weights:
    `jnp.cov(jnp.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))[0, 1] == -1.0`."""
    jnp = _jnp()
    x = jnp.atleast_2d(jnp.asarray(m))
    if not rowvar and jnp.shape(x)[0] != 1:
        x = x.T
    if y is not None:
        yy = jnp.atleast_2d(jnp.asarray(y))
        if not rowvar and jnp.shape(yy)[0] != 1:
            yy = yy.T
        x = jnp.concatenate([x, yy], 0)
    x = _float(x) if dtype is None else N.convert(x, dtype)
    n = jnp.shape(x)[1]
    w = None
    for weights in (fweights, aweights):
        if weights is not None:
            weights = _float(jnp.asarray(weights))
            w = weights if w is None else w * weights
    if ddof is None:
        ddof = 0 if bias else 1
    if w is None:
        avg = jnp.mean(x, 1, keepdims=True)
        fact = n - ddof
        xc = x - avg
        c = jnp.dot(xc, xc.T) / float(builtins.max(fact, 0)) if fact > 0 else jnp.dot(xc, xc.T) * np.inf
    else:
        wsum = jnp.sum(w)
        avg = jnp.sum(x * w, 1, keepdims=True) / wsum
        if ddof == 0:
            fact = wsum
        elif aweights is None:
            fact = wsum - ddof
        else:
            fact = wsum - ddof * jnp.sum(w * _float(jnp.asarray(aweights))) / wsum
        xc = x - avg
        c = jnp.dot(xc * w, xc.T) / fact
    return N.reshape(c, ()) if jnp.shape(c) == (1, 1) else c   # one variable: a 0-d result, as NumPy's


def corrcoef(x, y=None, rowvar=True, dtype=None):
    """Pearson correlation coefficients (`cov` scaled by the standard deviations, clipped to
    [-1, 1]): `jnp.corrcoef(jnp.array([1.0, 2.0]), jnp.array([2.0, 4.0]))`."""
    jnp = _jnp()
    c = cov(x, y, rowvar, dtype=dtype)
    if jnp.ndim(c) == 0:
        return c / c
    d = jnp.diagonal(c)
    s = N.sqrt(d)
    return N.clip(c / s[:, None] / s[None, :], -1.0, 1.0)


# -- bins ------------------------------------------------------------------------------

def digitize(x, bins, right=False, *, method=None):
    """The bin of each `x` (`bins` increasing or decreasing), as NumPy's `digitize`:
    `jnp.digitize(jnp.array([0.5, 1.5]), jnp.array([0.0, 1.0, 2.0])) == [1, 2]`."""
    jnp = _jnp()
    if not any_staged(x, bins):
        return wrap(np.asarray(np.digitize(x, bins, right)))
    bins = jnp.asarray(bins)
    if jnp.ndim(bins) != 1:
        raise ShapeError(f"`jnp.digitize`: bins must be 1-D, got shape {jnp.shape(bins)}")
    x = jnp.asarray(x)
    col = N.reshape(x, tuple(jnp.shape(x)) + (1,))
    up = jnp.sum(col >= bins if not right else col > bins, -1)
    down = jnp.sum(col < bins if not right else col <= bins, -1)
    n = jnp.shape(bins)[0]
    if n < 2:
        return up
    increasing = bins[-1] >= bins[0]
    return N.where(increasing, up, down)


def bincount(x, weights=None, minlength=0, *, length=None):
    """How often each non-negative int occurs in the 1-D `x` (summing `weights` instead);
    staged, the output length must be static: `length=` (entries beyond it are dropped,
    as JAX): `jnp.bincount(jnp.array([0, 1, 1]))` is `[1, 2]`."""
    jnp = _jnp()
    if not any_staged(x, weights):
        x = np.asarray(x)
        if length is None:
            return wrap(np.bincount(x, None if weights is None else np.asarray(weights), minlength))
        out = np.zeros(length, np.float64 if weights is not None else np.int64) \
            if weights is None or np.asarray(weights).dtype.kind != "f" else np.zeros(length, np.asarray(weights).dtype)
        if weights is None:
            out = out.astype(np.int64)
        keep = (x >= 0) & (x < length)
        np.add.at(out, x[keep], 1 if weights is None else np.asarray(weights)[keep])
        return wrap(out)
    if length is None:
        raise N.data_dependent_shape("`jnp.bincount` without length=")
    x = jnp.asarray(x)
    if jnp.ndim(x) != 1:
        raise ShapeError(f"`jnp.bincount`: x must be 1-D, got shape {jnp.shape(x)}")
    w = jnp.ones(jnp.shape(x), np.int64) if weights is None else jnp.asarray(weights)
    return jnp.zeros(length, jnp.result_type(w)).at[x].add(w, mode="drop")


def _range_of(a, rng):
    jnp = _jnp()
    if rng is not None:
        lo, hi = rng
    else:
        lo, hi = (jnp.min(a), jnp.max(a)) if jnp.size(a) else (0.0, 1.0)
    lo, hi = _float(jnp.asarray(lo)), _float(jnp.asarray(hi))
    same = hi == lo
    return N.where(same, lo - 0.5, lo), N.where(same, hi + 0.5, hi)


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The edges of `histogram`'s bins: `bins` equal ones over `range` (the data's by
    default), or the given edges: `jnp.histogram_bin_edges(jnp.array([0.0, 1.0]), 2)`."""
    jnp = _jnp()
    if not any_staged(a, bins, range):
        return wrap(np.histogram_bin_edges(np.asarray(a), bins, range))
    if jnp.ndim(bins) == 1:
        return _float(jnp.asarray(bins))
    lo, hi = _range_of(_float(jnp.ravel(jnp.asarray(a))), range)
    return jnp.linspace(lo, hi, int(bins) + 1)


def histogram(a, bins=10, range=None, weights=None, density=None):
    """Counts (or summed `weights`) of `a` in each bin, and the bin edges (the last bin
    closed, as NumPy's): `jnp.histogram(jnp.array([0.0, 0.5, 1.0]), 2)[0]` is `[1, 2]`."""
    jnp = _jnp()
    if not any_staged(a, bins, range, weights):   # float counts, as JAX's
        h, edges = np.histogram(np.asarray(a), bins, range, weights=weights, density=density)
        return wrap(np.asarray(h, np.result_type(h.dtype, np.float64))), wrap(edges)
    a = _float(jnp.ravel(jnp.asarray(a)))
    edges = histogram_bin_edges(a, bins, range)
    nb = jnp.shape(edges)[0] - 1
    i = jnp.searchsorted(edges, a, side="right") - 1
    i = N.where(a == edges[-1], nb - 1, i)
    i = N.where((a < edges[0]) | (a > edges[-1]) | jnp.isnan(a), nb, i)
    w = jnp.ones(jnp.shape(a)) if weights is None else _float(jnp.ravel(jnp.asarray(weights)))
    counts = jnp.zeros(nb + 1, jnp.result_type(w)).at[i].add(w)[:nb]
    if density:
        counts = counts / (jnp.diff(edges) * jnp.sum(counts))
    return counts, edges


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """The D-dimensional histogram of the points (rows) of `sample`, and the edges per
    dimension: `jnp.histogramdd(jnp.array([[0.0, 0.0], [1.0, 1.0]]), 2)[0]`."""
    jnp = _jnp()
    if not any_staged(sample, bins, range, weights):
        h, edges = np.histogramdd(np.asarray(sample), bins, range, weights=weights, density=density)
        if weights is None and not density:   # int counts, as JAX's
            h = h.astype(np.int64)
        return wrap(h), [wrap(e) for e in edges]
    sample = _float(jnp.asarray(sample))
    npts, d = jnp.shape(sample)
    bins_per = bins if isinstance(bins, (list, tuple)) else [bins] * d
    ranges = range if range is not None else [None] * d
    edges, index, sizes, bad = [], 0, [], False
    for k in builtins.range(d):
        e = histogram_bin_edges(sample[:, k], bins_per[k], ranges[k])
        nb = jnp.shape(e)[0] - 1
        col = sample[:, k]
        i = jnp.searchsorted(e, col, side="right") - 1
        i = N.where(col == e[-1], nb - 1, i)
        outside = (col < e[0]) | (col > e[-1]) | jnp.isnan(col)
        index = index * nb + N.clip(i, 0, nb - 1)
        bad = bad | outside
        edges.append(e)
        sizes.append(nb)
    total = math.prod(sizes)
    index = N.where(bad, total, index)
    w = jnp.ones((npts,)) if weights is None else _float(jnp.asarray(weights))
    if weights is None and not density:   # int counts, as JAX's
        w = jnp.ones((npts,), np.int64)
    h = N.reshape(jnp.zeros(total + 1, jnp.result_type(w)).at[index].add(w)[:total], tuple(sizes))
    if density:
        vol = 1.0
        for k, e in enumerate(edges):
            vol = vol * N.reshape(jnp.diff(e), tuple(-1 if j == k else 1 for j in builtins.range(d)))
        h = h / (vol * jnp.sum(h))
    return h, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """The 2-D histogram of points `(x, y)` and the two edge arrays:
    `jnp.histogram2d(jnp.array([0.0, 1.0]), jnp.array([0.0, 1.0]), 2)[0]`."""
    jnp = _jnp()
    if not any_staged(x, y, bins, range, weights):
        h, ex, ey = np.histogram2d(np.asarray(x), np.asarray(y), bins, range, weights=weights, density=density)
        if weights is None and not density:   # int counts, as JAX's
            h = h.astype(np.int64)
        return wrap(h), wrap(ex), wrap(ey)
    if not isinstance(bins, (list, tuple)) and jnp.ndim(bins) == 1:
        bins = [bins, bins]
    h, (ex, ey) = histogramdd(jnp.stack([jnp.ravel(x), jnp.ravel(y)], 1), bins, range, weights, density)
    return h, ex, ey


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of the points `(xp, fp)` (`xp` increasing) at `x`,
    `left`/`right` outside (`fp`'s ends by default), periodic with `period`:
    `jnp.interp(1.5, jnp.array([1.0, 2.0]), jnp.array([10.0, 20.0])) == 15.0`."""
    jnp = _jnp()
    if not any_staged(x, xp, fp, left, right, period):
        return wrap(np.asarray(np.interp(x, xp, fp, left, right, period)))
    x, xp, fp = _float(jnp.asarray(x)), _float(jnp.asarray(xp)), _float(jnp.asarray(fp))
    if jnp.ndim(xp) != 1 or jnp.shape(xp) != jnp.shape(fp) or not jnp.shape(xp)[0]:
        raise ShapeError(f"`jnp.interp`: xp and fp must be non-empty 1-D arrays of one length, got shapes "
                         f"{jnp.shape(xp)} and {jnp.shape(fp)}")
    if period is not None:
        x = x % period
        xp = xp % period
        order = jnp.argsort(xp)
        xp, fp = xp[order], fp[order]
        xp = jnp.concatenate([xp[-1:] - period, xp, xp[:1] + period])
        fp = jnp.concatenate([fp[-1:], fp, fp[:1]])
    n = jnp.shape(xp)[0]
    i = N.clip(jnp.searchsorted(xp, x, side="right"), 1, builtins.max(n - 1, 1))
    x0, x1, f0, f1 = xp[i - 1], xp[i], fp[i - 1], fp[i]
    dx = x1 - x0
    t = N.where(dx == 0, 0.0, (x - x0) / N.where(dx == 0, 1.0, dx))
    out = f0 + t * (f1 - f0)
    out = N.where(dx == 0, f1, out) if n > 1 else N.broadcast_to(fp[0], jnp.shape(x))
    if period is None:
        out = N.where(x < xp[0], fp[0] if left is None else left, out)
        out = N.where(x > xp[-1], fp[-1] if right is None else right, out)
    return out


def _late():
    global _nanmax, _nanmin, _nanargmax, _nanargmin
    jnp = _jnp()
    _nanmax = _nan_extreme("nanmax", -np.inf, jnp.max)
    _nanmin = _nan_extreme("nanmin", np.inf, jnp.min)
    _nanargmax = _nan_arg("nanargmax", jnp.argmax, -np.inf)
    _nanargmin = _nan_arg("nanargmin", jnp.argmin, np.inf)


def nanargmax(a, axis=None, out=None, keepdims=False):
    """The position of the largest entry that is not NaN (-1 for an all-NaN line, as JAX):
    `jnp.nanargmax(jnp.array([jnp.nan, 2.0, 1.0])) == 1`."""
    return _nanargmax(a, axis, out, keepdims)


def nanargmin(a, axis=None, out=None, keepdims=False):
    """The position of the smallest entry that is not NaN (-1 for an all-NaN line, as JAX):
    `jnp.nanargmin(jnp.array([jnp.nan, 2.0, 1.0])) == 2`."""
    return _nanargmin(a, axis, out, keepdims)


nanmax.__doc__ = "The maximum skipping NaNs (NaN for an all-NaN line): `jnp.nanmax(jnp.array([1.0, jnp.nan])) == 1.0`."
nanmin.__doc__ = "The minimum skipping NaNs (NaN for an all-NaN line): `jnp.nanmin(jnp.array([1.0, jnp.nan])) == 1.0`."
