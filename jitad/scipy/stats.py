"""`jitad.scipy.stats`: log-densities of SciPy's distributions, staged and differentiable
in their arguments, with SciPy's signatures (`from jitad.scipy.stats import norm`):

>>> norm.logpdf(0.0)
-0.9189385332046727

Every argument may be staged (and differentiated).
"""
import collections
import functools
import math
import sys
import types

import numpy as np

from .. import linalg as L
from .. import numeric as N
from .. import numpy_api as A
from ..errors import ArgumentError
from ..numpy._common import plain_f64, reference_first
from . import special as S

__all__ = ["norm", "multivariate_normal", "t", "gamma", "beta", "poisson", "bernoulli", "dirichlet",
           "expon", "laplace", "uniform", "logistic", "cauchy", "chi2", "pareto", "gumbel_r", "gumbel_l", "geom",
           "binom", "nbinom", "betabinom", "multinomial", "wrapcauchy", "truncnorm", "gennorm", "vonmises"]

_LOG_2PI = math.log(2 * math.pi)


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _np(name):
    return N.NUMPY_API[name]


def _with_exp(cls):
    """Add `pdf`/`pmf` = exp(`logpdf`/`logpmf`) to a distribution namespace, and
    `logcdf`/`logsf` = log(`cdf`/`sf`) where it has no more accurate one."""
    for log_name in ("logpdf", "logpmf"):
        if hasattr(cls, log_name):
            log_fn = getattr(cls, log_name)
            setattr(cls, log_name[3:], staticmethod(lambda *a, _f=log_fn, **k: N.exp(_f(*a, **k))))
    for name in ("cdf", "sf"):
        if hasattr(cls, name) and not hasattr(cls, "log" + name):
            setattr(cls, "log" + name, staticmethod(lambda *a, _f=getattr(cls, name), **k: N.log(_f(*a, **k))))   # noqa: B008 (bound now: the method it wraps)
    return cls


@_with_exp
class norm:
    """The normal distribution N(loc, scale²)."""

    @staticmethod
    def logpdf(x, loc=0.0, scale=1.0):
        z = (x - loc) / scale
        return -0.5 * z * z - N.log(scale) - 0.5 * _LOG_2PI

    @staticmethod
    def cdf(x, loc=0.0, scale=1.0):
        return S.ndtr((x - loc) / scale)

    @staticmethod
    def logcdf(x, loc=0.0, scale=1.0):
        return S.log_ndtr((x - loc) / scale)

    @staticmethod
    def sf(x, loc=0.0, scale=1.0):
        return S.ndtr((loc - x) / scale)

    @staticmethod
    def logsf(x, loc=0.0, scale=1.0):
        return S.log_ndtr((loc - x) / scale)

    @staticmethod
    def ppf(q, loc=0.0, scale=1.0):
        return loc + scale * S.ndtri(q)

    @staticmethod
    def isf(q, loc=0.0, scale=1.0):
        return loc - scale * S.ndtri(q)


def _mvn_plain(x, mean=None, cov=1.0, allow_singular=False):
    """Whether SciPy's `multivariate_normal.logpdf` of these arguments means jitad's: plain
    float64 arrays, `cov` a (d, d) matrix, `x` of last axis d, `mean` None or of shape (d,)
    (SciPy reads others otherwise: a vector `x` of a scalar `cov`, or a scalar `mean`, makes
    a variable of one dimension to it; to jitad, `x`'s last axis is the variable's)."""
    return plain_f64(cov) and cov.ndim == 2 and plain_f64(x) and x.ndim >= 1 and \
        x.shape[-1] == cov.shape[0] == cov.shape[1] and type(allow_singular) is bool and \
        (mean is None or plain_f64(mean) and mean.shape == cov.shape[:1])


def _scipy_mvn_logpdf(x, mean=None, cov=1.0, allow_singular=False):
    """SciPy's log-density, shaped as jitad's (SciPy squeezes a single row's axis)."""
    return np.reshape(_scipy_mvn().logpdf(x, mean, cov, allow_singular), x.shape[:-1])


@functools.cache
def _scipy_mvn():
    from scipy.stats import multivariate_normal   # (SciPy's stats are imported at the first call)
    return multivariate_normal


@_with_exp
class multivariate_normal:
    """The multivariate normal N(mean, cov) over the last axis of `x`."""

    @staticmethod
    @functools.partial(reference_first, _scipy_mvn_logpdf, accepts=_mvn_plain)
    def logpdf(x, mean=None, cov=1.0, allow_singular=False):
        shape = _shape(x) or (1,)
        x, d = N.reshape(x, shape), shape[-1]
        diff = x - (0.0 if mean is None else mean)
        if len(_shape(cov)) < 2:   # a variance or the diagonal of cov, as SciPy
            cov = N.broadcast_to(cov, (d,)) * _np("eye")(d)
        rows = N.reshape(diff, (-1, d))
        if allow_singular:
            return N.reshape(_singular_logpdf(rows, cov, d), shape[:-1])
        chol = L.cholesky(cov)
        z = L.solve_triangular(chol, N.transpose(rows), lower=True)
        maha = N.sum(z * z, 0)
        log_det = 2.0 * N.sum(N.log(_np("diagonal")(chol)))
        out = -0.5 * (d * _LOG_2PI + log_det + maha)
        return N.reshape(out, shape[:-1])

    @staticmethod
    def entropy(mean, cov):
        """The differential entropy 0.5 log det(2 pi e cov) (`mean` does not enter)."""
        d = _shape(cov)[-1]
        return 0.5 * d * (1.0 + _LOG_2PI) + N.sum(N.log(_np("diagonal")(L.cholesky(cov))))


def _singular_logpdf(rows, cov, d):
    """The normal log-density of each row of `rows` (x - mean) with a covariance that may be
    singular, as SciPy's `allow_singular=True`: on the span of the eigenvectors whose
    eigenvalues pass SciPy's cutoff (1e6 machine epsilons of the largest), through the
    pseudo-inverse and pseudo-determinant; -inf off that support."""
    w, v = L.eigh(cov)
    cutoff = 1e6 * np.finfo(np.float64).eps * N.max(N.abs(w))
    kept = w > cutoff
    safe = N.where(kept, w, 1.0)
    proj = rows @ v   # the coordinates along the eigenvectors
    maha = N.sum(proj * proj * N.where(kept, 1.0 / safe, 0.0), -1)
    off_support = N.sqrt(N.sum(proj * proj * N.where(kept, 0.0, 1.0), -1)) >= cutoff
    rank = N.sum(N.where(kept, 1.0, 0.0))
    out = -0.5 * (rank * _LOG_2PI + N.sum(N.where(kept, N.log(safe), 0.0)) + maha)
    return N.where(off_support, -np.inf, out)


@_with_exp
class t:
    """Student's t with `df` degrees of freedom (a plain number)."""

    @staticmethod
    def logpdf(x, df, loc=0.0, scale=1.0):
        z = (x - loc) / scale
        const = S.gammaln((df + 1) / 2.0) - S.gammaln(df / 2.0) - 0.5 * np.log(df * np.pi)
        return const - N.log(scale) - (df + 1) / 2.0 * N.log1p(z * z / df)

    @staticmethod
    def cdf(x, df, loc=0.0, scale=1.0):
        """P(X <= x): each tail is half the regularized incomplete beta function at
        df / (df + z²) (autograd's and SciPy's `t.cdf`; JAX's `t` has none)."""
        z = (x - loc) / scale
        tail = 0.5 * S.betainc(0.5 * df, 0.5, df / (df + z * z))
        return N.where(z > 0, 1.0 - tail, tail)


@_with_exp
class gamma:
    """The gamma distribution with shape `a`."""

    @staticmethod
    def logpdf(x, a, loc=0.0, scale=1.0):
        y = (x - loc) / scale
        out = S.xlogy(S._float(a) - 1.0, y) - y - S.gammaln(a) - N.log(scale)
        return N.where(y < 0, -np.inf, out)

    @staticmethod
    def cdf(x, a, loc=0.0, scale=1.0):
        return S.gammainc(a, N.maximum((x - loc) / scale, 0.0))

    @staticmethod
    def sf(x, a, loc=0.0, scale=1.0):
        return S.gammaincc(a, N.maximum((x - loc) / scale, 0.0))


@_with_exp
class beta:
    """The beta distribution on [0, 1] with shapes `a`, `b`."""

    @staticmethod
    def logpdf(x, a, b, loc=0.0, scale=1.0):
        y = (x - loc) / scale
        out = (S.xlogy(S._float(a) - 1.0, y) + S.xlog1py(S._float(b) - 1.0, -y)
               - S.betaln(a, b) - N.log(scale))
        return N.where((y < 0) | (y > 1), -np.inf, out)

    @staticmethod
    def cdf(x, a, b, loc=0.0, scale=1.0):
        return S.betainc(a, b, N.clip((x - loc) / scale, 0.0, 1.0))

    @staticmethod
    def sf(x, a, b, loc=0.0, scale=1.0):
        return S.betainc(b, a, N.clip(1.0 - (x - loc) / scale, 0.0, 1.0))


@_with_exp
class poisson:
    """The Poisson distribution of counts `k` with mean `mu`."""

    @staticmethod
    def logpmf(k, mu, loc=0):
        k = S._float(k) - loc
        out = S.xlogy(k, mu) - mu - S.gammaln(N.maximum(k, 0.0) + 1.0)
        return N.where((k < 0) | (k != A.floor(k)), -np.inf, out)

    @staticmethod
    def cdf(k, mu, loc=0):
        k = A.floor(S._float(k) - loc)
        return N.where(k < 0, 0.0, S.gammaincc(N.maximum(k, 0.0) + 1.0, mu))

    @staticmethod
    def entropy(mu, loc=0):
        """-sum_k p(k) log p(k): summed over k < 220 for mu < 100 (the tail past there is
        below 1e-16), else the asymptotic series in 1/mu; NaN for mu <= 0. `loc` only
        broadcasts (a shift leaves the entropy as it is)."""
        mu = S._float(mu) + 0.0 * S._float(loc)
        small = N.where((mu > 0) & (mu < 100.0), mu, 1.0)
        k = np.arange(220.0)
        log_p = k * N.log(small[..., None]) - small[..., None] - S.gammaln(k + 1.0)
        summed = -N.sum(N.exp(log_p) * log_p, -1)
        large = N.where(mu >= 100.0, mu, 100.0)
        series = 0.5 * N.log(2 * math.pi * math.e * large) - 1 / (12 * large) - 1 / (24 * large ** 2) \
            - 19 / (360 * large ** 3)
        return N.where(mu <= 0, np.nan, N.where(mu < 100.0, summed, series))


@_with_exp
class bernoulli:
    """The Bernoulli distribution of `k` in {0, 1} with P(k = 1) = `p`."""

    @staticmethod
    def logpmf(k, p, loc=0):
        k = k - loc
        out = S.xlogy(k, p) + S.xlog1py(1 - k, -p)
        return N.where((k == 0) | (k == 1), out, -np.inf)

    @staticmethod
    def cdf(k, p):
        k = S._float(k)
        return N.where(k < 0, 0.0, N.where(k < 1, 1.0 - p, 1.0)) + 0.0 * p

    @staticmethod
    def ppf(q, p):
        q = S._float(q)
        out = N.where(q <= 1.0 - p, 0.0, 1.0)
        return N.where((q < 0) | (q > 1) | (p < 0) | (p > 1), np.nan, out)


@_with_exp
class dirichlet:
    """The Dirichlet distribution over the simplex, concentrations `alpha`."""

    @staticmethod
    def logpdf(x, alpha):
        alpha = S._float(alpha)
        norm_const = S.gammaln(N.sum(alpha)) - N.sum(S.gammaln(alpha))
        a = N.reshape(alpha, (-1,) + (1,) * (len(_shape(x)) - 1))   # x: (K,) or (K, N), as SciPy
        return N.sum(S.xlogy(a - 1.0, x), 0) + norm_const

    @staticmethod
    def rvs(alpha, size=None, random_state=None):
        """Draws, as SciPy's: plain arrays from `random_state` (a seed or a NumPy generator) or
        NumPy's global generator, shape `size + (K,)`."""
        rng = np.random.RandomState(random_state) if isinstance(random_state, (int, np.integer)) \
            else (random_state if random_state is not None else np.random)
        return rng.dirichlet(np.asarray(alpha, float), size)


@_with_exp
class expon:
    """The exponential distribution with rate 1 / `scale`."""

    @staticmethod
    def logpdf(x, loc=0.0, scale=1.0):
        y = (x - loc) / scale
        return N.where(y < 0, -np.inf, -y - N.log(scale))

    @staticmethod
    def cdf(x, loc=0.0, scale=1.0):
        return -N.expm1(-N.maximum((x - loc) / scale, 0.0))

    @staticmethod
    def logcdf(x, loc=0.0, scale=1.0):
        y = (x - loc) / scale
        return N.where(y <= 0, -np.inf, N.log(-N.expm1(-N.where(y > 0, y, 1.0))))

    @staticmethod
    def sf(x, loc=0.0, scale=1.0):
        return N.exp(-N.maximum((x - loc) / scale, 0.0))

    @staticmethod
    def logsf(x, loc=0.0, scale=1.0):
        return -N.maximum((x - loc) / scale, 0.0)

    @staticmethod
    def ppf(q, loc=0.0, scale=1.0):
        return N.where((q < 0) | (q > 1), np.nan, loc - scale * N.log1p(-q))


@_with_exp
class laplace:
    """The Laplace distribution."""

    @staticmethod
    def logpdf(x, loc=0.0, scale=1.0):
        return -N.abs(x - loc) / scale - N.log(2.0 * scale)

    @staticmethod
    def cdf(x, loc=0.0, scale=1.0):
        y = (x - loc) / scale
        return N.where(y < 0, 0.5 * N.exp(N.minimum(y, 0.0)), 1.0 - 0.5 * N.exp(-N.maximum(y, 0.0)))


@_with_exp
class uniform:
    """The uniform distribution on [loc, loc + scale]."""

    @staticmethod
    def logpdf(x, loc=0.0, scale=1.0):
        y = (x - loc) / scale
        return N.where((y < 0) | (y > 1), -np.inf, -N.log(scale))

    @staticmethod
    def cdf(x, loc=0.0, scale=1.0):
        return N.clip((x - loc) / scale, 0.0, 1.0)

    @staticmethod
    def ppf(q, loc=0.0, scale=1.0):
        return N.where((q < 0) | (q > 1), np.nan, loc + q * scale)


@_with_exp
class logistic:
    """The logistic distribution."""

    @staticmethod
    def logpdf(x, loc=0.0, scale=1.0):
        y = N.abs((x - loc) / scale)   # symmetric: exp(-|y|) never overflows
        return -y - 2.0 * N.log1p(N.exp(-y)) - N.log(scale)

    @staticmethod
    def cdf(x, loc=0.0, scale=1.0):
        return N.sigmoid((x - loc) / scale)

    @staticmethod
    def sf(x, loc=0.0, scale=1.0):
        return N.sigmoid((loc - x) / scale)

    @staticmethod
    def ppf(q, loc=0.0, scale=1.0):
        return loc + scale * S.logit(q)

    @staticmethod
    def isf(q, loc=0.0, scale=1.0):
        return loc - scale * S.logit(q)


def _cauchy_quantile(q):
    """The standard Cauchy quantile tan(pi (q - 1/2)), as -cot(pi q) on the side whose
    product pi q keeps its digits."""
    low = q < 0.5
    v = N.where(low, -1.0 / A.tan(math.pi * N.where(low, q, 0.25)), 1.0 / A.tan(math.pi * (1.0 - N.where(low, 0.75, q))))
    v = N.where(q == 0.5, 0.0, N.where(q == 0, -np.inf, N.where(q == 1, np.inf, v)))
    return N.where((q < 0) | (q > 1), np.nan, v)


@_with_exp
class cauchy:
    """The Cauchy distribution."""

    @staticmethod
    def logpdf(x, loc=0.0, scale=1.0):
        y = (x - loc) / scale
        return -math.log(math.pi) - N.log(scale) - N.log1p(y * y)

    @staticmethod
    def cdf(x, loc=0.0, scale=1.0):
        return 0.5 + N.arctan((x - loc) / scale) / math.pi

    @staticmethod
    def sf(x, loc=0.0, scale=1.0):
        return 0.5 - N.arctan((x - loc) / scale) / math.pi

    @staticmethod
    def ppf(q, loc=0.0, scale=1.0):
        return loc + scale * _cauchy_quantile(q)

    @staticmethod
    def isf(q, loc=0.0, scale=1.0):
        return loc - scale * _cauchy_quantile(q)


@_with_exp
class chi2:
    """The chi-square distribution with `df` degrees of freedom (a gamma with shape df / 2,
    scale 2)."""

    @staticmethod
    def logpdf(x, df, loc=0.0, scale=1.0):
        return gamma.logpdf(x, S._float(df) / 2.0, loc, 2.0 * scale)

    @staticmethod
    def cdf(x, df, loc=0.0, scale=1.0):
        return gamma.cdf(x, S._float(df) / 2.0, loc, 2.0 * scale)

    @staticmethod
    def sf(x, df, loc=0.0, scale=1.0):
        return gamma.sf(x, S._float(df) / 2.0, loc, 2.0 * scale)


@_with_exp
class pareto:
    """The Pareto distribution with shape `b`, on [loc + scale, inf)."""

    @staticmethod
    def logpdf(x, b, loc=0.0, scale=1.0):
        y = (x - loc) / scale
        return N.where(y < 1, -np.inf, N.log(b) - (b + 1.0) * N.log(N.maximum(y, 1.0)) - N.log(scale))

    @staticmethod
    def logsf(x, b, loc=0.0, scale=1.0):
        return -b * N.log(N.maximum((x - loc) / scale, 1.0))

    @staticmethod
    def sf(x, b, loc=0.0, scale=1.0):
        return N.exp(pareto.logsf(x, b, loc, scale))

    @staticmethod
    def cdf(x, b, loc=0.0, scale=1.0):
        return -N.expm1(pareto.logsf(x, b, loc, scale))

    @staticmethod
    def ppf(q, b, loc=0.0, scale=1.0):
        return N.where((q < 0) | (q > 1), np.nan, loc + scale * (1.0 - q) ** (-1.0 / b))


def _log1mexp(w):
    """log(1 - exp(-w)) for w >= 0, accurate for small and large w."""
    small = w < math.log(2.0)
    return N.where(small, N.log(-N.expm1(-N.where(small, w, 1.0))), N.log1p(-N.exp(-N.where(small, 1.0, w))))


def _gumbel(sign):
    """gumbel_r (sign 1: the maximum's law) or gumbel_l (sign -1: the minimum's)."""
    class dist:
        @staticmethod
        def logpdf(x, loc=0.0, scale=1.0):
            z = sign * (x - loc) / scale
            return -(z + N.exp(-z)) - N.log(scale)

        @staticmethod
        def logcdf(x, loc=0.0, scale=1.0):
            z = sign * (x - loc) / scale
            return -N.exp(-z) if sign > 0 else _log1mexp(N.exp(-z))

        @staticmethod
        def logsf(x, loc=0.0, scale=1.0):
            z = sign * (x - loc) / scale
            return _log1mexp(N.exp(-z)) if sign > 0 else -N.exp(-z)

        @staticmethod
        def cdf(x, loc=0.0, scale=1.0):
            return N.exp(dist.logcdf(x, loc, scale))

        @staticmethod
        def sf(x, loc=0.0, scale=1.0):
            return N.exp(dist.logsf(x, loc, scale))

        @staticmethod
        def ppf(q, loc=0.0, scale=1.0):
            v = -N.log(-N.log(q)) if sign > 0 else N.log(-N.log1p(-q))
            return N.where((q < 0) | (q > 1), np.nan, loc + scale * v)
    dist.__doc__ = f"The Gumbel distribution of the {'maximum' if sign > 0 else 'minimum'}."
    return _with_exp(dist)


gumbel_r, gumbel_l = _gumbel(1.0), _gumbel(-1.0)


@_with_exp
class geom:
    """The geometric distribution: trials k >= 1 up to the first success of probability p."""

    @staticmethod
    def logpmf(k, p, loc=0):
        k = S._float(k) - loc
        out = S.xlog1py(k - 1.0, -p) + N.log(p)
        return N.where((k < 1) | (k != A.floor(k)), -np.inf, out)


@_with_exp
class binom:
    """The binomial distribution of k successes in n trials."""

    @staticmethod
    def logpmf(k, n, p, loc=0):
        k, n = S._float(k) - loc, S._float(n)
        ok = (k >= 0) & (k <= n)
        kk = N.where(ok, k, 0.0)
        comb = S.gammaln(n + 1.0) - S.gammaln(kk + 1.0) - S.gammaln(n - kk + 1.0)
        return N.where(ok, comb + S.xlogy(kk, p) + S.xlog1py(n - kk, -p), -np.inf)


@_with_exp
class nbinom:
    """The negative binomial distribution: k failures before the n-th success."""

    @staticmethod
    def logpmf(k, n, p, loc=0):
        k, n = S._float(k) - loc, S._float(n)
        ok = k >= 0
        kk = N.where(ok, k, 0.0)
        comb = S.gammaln(n + kk) - S.gammaln(kk + 1.0) - S.gammaln(n)
        return N.where(ok, comb + n * N.log(p) + S.xlog1py(kk, -p), -np.inf)


@_with_exp
class betabinom:
    """The beta-binomial distribution: binomial with a Beta(a, b) probability."""

    @staticmethod
    def logpmf(k, n, a, b, loc=0):
        k, n = S._float(k) - loc, S._float(n)
        ok = (k >= 0) & (k <= n)
        kk = N.where(ok, k, 0.0)
        comb = S.gammaln(n + 1.0) - S.gammaln(kk + 1.0) - S.gammaln(n - kk + 1.0)
        return N.where(ok, comb + S.betaln(kk + a, n - kk + b) - S.betaln(a, b), -np.inf)


@_with_exp
class multinomial:
    """The multinomial distribution of counts `x` (last axis) of `n` draws."""

    @staticmethod
    def logpmf(x, n, p):
        x = S._float(x)
        out = S.gammaln(S._float(n) + 1.0) + N.sum(S.xlogy(x, p) - S.gammaln(x + 1.0), axis=-1)
        return N.where(N.sum(x, axis=-1) == n, out, -np.inf)


@_with_exp
class wrapcauchy:
    """The wrapped Cauchy distribution on [0, 2 pi) with shape 0 < c < 1."""

    @staticmethod
    def logpdf(x, c):
        out = N.log(1.0 - c * c) - math.log(2 * math.pi) - N.log(1.0 + c * c - 2.0 * c * N.cos(x))
        return N.where((x < 0) | (x > 2 * math.pi) | (c <= 0) | (c >= 1), -np.inf, out)


def _log_mass(a, b):
    """log(ndtr(b) - ndtr(a)), on the tail side where it keeps precision."""
    upper = a > 0   # both in the right tail: flip to the left one
    lo, hi = N.where(upper, -b, a), N.where(upper, -a, b)
    return S.log_ndtr(hi) + N.log1p(-N.exp(S.log_ndtr(lo) - S.log_ndtr(hi)))


@_with_exp
class truncnorm:
    """The standard normal on [a, b] (then shifted by `loc` and scaled by `scale`)."""

    @staticmethod
    def logpdf(x, a, b, loc=0.0, scale=1.0):
        y = (x - loc) / scale
        out = -0.5 * y * y - 0.5 * _LOG_2PI - N.log(scale) - _log_mass(a, b)
        return N.where((y < a) | (y > b), -np.inf, out)

    @staticmethod
    def logcdf(x, a, b, loc=0.0, scale=1.0):
        y = N.clip((x - loc) / scale, a, b)
        return N.where(y <= a, -np.inf, _log_mass(a, y) - _log_mass(a, b))

    @staticmethod
    def logsf(x, a, b, loc=0.0, scale=1.0):
        y = N.clip((x - loc) / scale, a, b)
        return N.where(y >= b, -np.inf, _log_mass(y, b) - _log_mass(a, b))

    @staticmethod
    def cdf(x, a, b, loc=0.0, scale=1.0):
        return N.exp(truncnorm.logcdf(x, a, b, loc, scale))

    @staticmethod
    def sf(x, a, b, loc=0.0, scale=1.0):
        return N.exp(truncnorm.logsf(x, a, b, loc, scale))


@_with_exp
class gennorm:
    """The generalized normal distribution with density beta / (2 Γ(1 / beta)) exp(-|x|**beta)
    (beta = 2: a normal of variance 1/2; beta = 1: Laplace's)."""

    @staticmethod
    def logpdf(x, beta):
        return N.log(0.5 * beta) - N.lgamma(1.0 / beta) - N.abs(x) ** beta

    @staticmethod
    def cdf(x, beta):
        half = 0.5 * S.gammainc(1.0 / beta, N.abs(x) ** beta)
        return 0.5 + N.where(x < 0, -half, half)


@_with_exp
class vonmises:
    """The von Mises distribution on the circle with concentration kappa > 0, density
    exp(kappa cos x) / (2 pi I0(kappa)) (NaN for kappa <= 0, as JAX)."""

    @staticmethod
    def logpdf(x, kappa):
        kappa = S._float(kappa)
        pos = kappa > 0
        k = N.where(pos, kappa, 1.0)
        return N.where(pos, k * (N.cos(x) - 1.0) - N.log(2 * math.pi * S.i0e(k)), np.nan)


ModeResult = collections.namedtuple("ModeResult", ["mode", "count"])


def mode(a, axis=0, nan_policy="propagate", keepdims=False):
    """The most frequent value along `axis` (None: of the flattened array) and how often it
    occurs; among equally frequent values the smallest, as SciPy: `stats.mode([1, 2, 2]).mode == 2`."""
    if nan_policy != "propagate":
        raise ArgumentError(f"stats.mode: nan_policy={nan_policy!r}; only 'propagate' is supported")
    a = a if N.is_staged(a) else np.asarray(a)
    if axis is None:
        a, axis = N.reshape(a, (-1,)), 0
    if not _shape(a):
        a, axis = N.reshape(a, (1,)), 0
    a = A.moveaxis(a, axis, -1)
    counts = N.sum(N.where(a[..., :, None] == a[..., None, :], 1, 0), -1)
    best = N.max(counts, -1, keepdims=True)
    top = N.max(a, -1, keepdims=True)
    value = N.min(N.where(counts == best, a, top), -1)
    count = best[..., 0]
    if keepdims:
        value, count = A.expand_dims(value, axis), A.expand_dims(count, axis)
    return ModeResult(value, count)


def sem(a, axis=0, ddof=1, nan_policy="propagate", *, keepdims=False):
    """The standard error of the mean: std(a, ddof) / sqrt(n) along `axis`."""
    if nan_policy != "propagate":
        raise ArgumentError(f"stats.sem: nan_policy={nan_policy!r}; only 'propagate' is supported")
    a = S._float(a)
    if axis is None:
        a, axis = N.reshape(a, (-1,)), 0
    n = _shape(a)[axis]
    return A.std(a, axis=axis, ddof=ddof, keepdims=keepdims) / math.sqrt(n)


def rankdata(a, method="average", *, axis=None, nan_policy="propagate"):
    """Ranks from 1 of the values of `a` (flattened, or along `axis`), ties by `method`:
    'average', 'min', 'max', 'dense' or 'ordinal'. O(n²) comparisons, staged and exact."""
    if method not in ("average", "min", "max", "dense", "ordinal"):
        raise ArgumentError(f"stats.rankdata: method={method!r}; use average, min, max, dense or ordinal")
    if nan_policy != "propagate":
        raise ArgumentError(f"stats.rankdata: nan_policy={nan_policy!r}; only 'propagate' is supported")
    if axis is None:
        a, axis = N.reshape(a, (-1,)), 0
    a = A.moveaxis(a, axis, -1)
    x, y = a[..., :, None], a[..., None, :]
    less, equal = N.sum(N.where(y < x, 1.0, 0.0), -1), N.sum(N.where(y == x, 1.0, 0.0), -1)
    if method == "average":
        r = less + (equal + 1.0) / 2.0
    elif method == "min":
        r = less + 1.0
    elif method == "max":
        r = less + equal
    elif method == "ordinal":
        n = _shape(a)[-1]
        before = np.tril(np.ones((n, n)), -1)   # j < i
        r = less + N.sum(N.where(y == x, before, 0.0), -1) + 1.0
    else:   # dense: the distinct values below, each counted once (1 / its multiplicity)
        r = N.sum(N.where(y < x, 1.0, 0.0) / equal[..., None, :], -1) + 1.0
    return A.moveaxis(r, -1, axis)


def _as_modules():
    """Each distribution is a module, as in SciPy's and JAX's paths:
    `import jitad.scipy.stats.multivariate_normal as mvn` works like `from ... import`."""
    for name in __all__:
        cls = globals()[name]
        module = types.ModuleType(f"{__name__}.{name}", cls.__doc__)
        for key in dir(cls):
            if not key.startswith("_"):
                setattr(module, key, getattr(cls, key))
        sys.modules[module.__name__] = globals()[name] = module


def _generalized_outer_product(x):
    """`x x^T` of a vector, or of each matrix of a stack: `x @ swapaxes(x, -1, -2)`."""
    return x[:, None] * x[None, :] if len(_shape(x)) == 1 else x @ _np("swapaxes")(x, -1, -2)


def _covgrad(x, mean, cov, allow_singular=False):
    """The gradient of `multivariate_normal.logpdf(x, mean, cov)` w.r.t. `cov`:
    (C^-1 (x - m) (x - m)^T C^-1 - C^-1) / 2, per row of `x` (autograd's helper)."""
    if allow_singular:
        raise ArgumentError("covgrad: the density is not differentiable in a singular covariance; "
                            "give allow_singular=False")
    inv = L.inv(cov)
    return 0.5 * (_generalized_outer_product(inv @ _np("expand_dims")(x - mean, -1)) - inv)


def _solve(allow_singular):
    """The solver of `cov z = b` the densities' gradients use: `pinv(cov) @ b` where
    `allow_singular`, else `linalg.solve`."""
    return (lambda a, b: L.pinv(a) @ b) if allow_singular else L.solve


def _autograd_helpers():
    """The helpers autograd's `norm` and `multivariate_normal` modules define or import,
    on jitad's modules of those names."""
    from ._special_rules import defvjp, primitive, unbroadcast_f
    common = {"defvjp": defvjp, "primitive": primitive, "unbroadcast_f": unbroadcast_f}
    vars(sys.modules[f"{__name__}.norm"]).update(common)
    vars(sys.modules[f"{__name__}.multivariate_normal"]).update(
        common, covgrad=_covgrad, generalized_outer_product=_generalized_outer_product, solve=_solve)


_as_modules()
_autograd_helpers()
