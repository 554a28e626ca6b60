"""Helpers of `jitad.scipy.special`'s modules: argument conversion, the staged loop, and the
gamma function with its sign (which the special functions and the hypergeometric ones use)."""
import numpy as np

from .. import numeric as N


def _is_f32(x):
    return getattr(x, "ir_dtype", None) == "f32" or getattr(x, "dtype", None) == np.float32


def gamma(x):
    """Γ(x) = gammasgn(x) exp(gammaln(x)): `special.gamma(5.0) == 24.0`."""
    return gammasgn(x) * N.exp(N.lgamma(x))


def gammasgn(x):
    """The sign of Γ(x): 1 for x > 0 (and +0), -1 or 1 between the poles below 0 (-1 at
    -0), NaN at the poles and NaN."""
    x = _float(x)
    fl = N.NUMPY_API["floor"](N.where(N.abs(x) < np.inf, x, 0.0))
    odd = fl % 2 != 0   # floor(x) odd: Γ(x) < 0 on (-2k - 1, -2k)
    pole = (x < 0) & (x == fl) | (x == -np.inf)
    with np.errstate(divide="ignore"):
        neg_zero = (x == 0) & (1.0 / N.where(x == 0, x, 1.0) < 0)
    sign = N.where((x > 0) | ((x == 0) & ~neg_zero), 1.0, N.where(neg_zero | odd, -1.0, 1.0))
    return N.where(pole | N.NUMPY_API["isnan"](x), np.nan, sign)


def _float(x):
    """A staged value as it is; anything else as a float array (ints to float64)."""
    if _staged(x):
        return x if x.ir_dtype in ("f32", "f64") else N.convert(x, "f64")
    x = np.asarray(x)
    return x if x.dtype.kind == "f" else x.astype(np.float64)


def _staged(*xs):
    return any(N.is_staged(x) for x in xs)


def _loop(n, body, init):
    """`body(i, state)` for i in 1 .. n, staged as one FOR node when any state is staged."""
    from ..staging import FOR
    return FOR(1, n + 1, body, init)
