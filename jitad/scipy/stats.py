"""`jitad.scipy.stats`: log-densities of SciPy's distributions, staged and differentiable
in their arguments, with SciPy's signatures (`from jitad.scipy.stats import norm`):

>>> norm.logpdf(0.0)
-0.9189385332046727

The shape parameters of `gamma`, `beta`, `poisson` and `dirichlet` (`a`, `b`, `k`,
`alpha`) must be plain numbers (data or constants), not staged values; their other
arguments, and all of `t`'s, may be staged.
"""
import math
import sys
import types

import numpy as np

from .. import linalg as L
from .. import numeric as N
from . import special as S

__all__ = ["norm", "multivariate_normal", "t", "gamma", "beta", "poisson", "bernoulli", "dirichlet",
           "expon", "laplace", "uniform"]

_LOG_2PI = math.log(2 * math.pi)


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def _np(name):
    return N.NUMPY_API[name]


def _with_exp(cls):
    """Add `pdf`/`pmf` = exp(`logpdf`/`logpmf`) to a distribution namespace."""
    for log_name in ("logpdf", "logpmf"):
        if hasattr(cls, log_name):
            log_fn = getattr(cls, log_name)
            setattr(cls, log_name[3:], staticmethod(lambda *a, _f=log_fn, **k: N.exp(_f(*a, **k))))
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


@_with_exp
class multivariate_normal:
    """The multivariate normal N(mean, cov) over the last axis of `x`."""

    @staticmethod
    def logpdf(x, mean=None, cov=1.0, allow_singular=False):
        shape = _shape(x) or (1,)
        x, d = N.reshape(x, shape), shape[-1]
        diff = x - (0.0 if mean is None else mean)
        if len(_shape(cov)) < 2:   # a variance or the diagonal of cov, as SciPy
            cov = N.broadcast_to(cov, (d,)) * _np("eye")(d)
        chol = L.cholesky(cov)
        rows = N.reshape(diff, (-1, d))
        z = L.solve_triangular(chol, N.transpose(rows), lower=True)
        maha = N.sum(z * z, 0)
        log_det = 2.0 * N.sum(N.log(_np("diagonal")(chol)))
        out = -0.5 * (d * _LOG_2PI + log_det + maha)
        return N.reshape(out, shape[:-1])


@_with_exp
class t:
    """Student's t with `df` degrees of freedom (a plain number)."""

    @staticmethod
    def logpdf(x, df, loc=0.0, scale=1.0):
        z = (x - loc) / scale
        const = S.gammaln((df + 1) / 2.0) - S.gammaln(df / 2.0) - 0.5 * np.log(df * np.pi)
        return const - N.log(scale) - (df + 1) / 2.0 * N.log1p(z * z / df)


@_with_exp
class gamma:
    """The gamma distribution with shape `a` (a plain number)."""

    @staticmethod
    def logpdf(x, a, loc=0.0, scale=1.0):
        y = (x - loc) / scale
        out = S.xlogy(np.asarray(a, float) - 1.0, y) - y - S.gammaln(a) - N.log(scale)
        return N.where(y < 0, -np.inf, out)


@_with_exp
class beta:
    """The beta distribution on [0, 1] with shapes `a`, `b` (plain numbers)."""

    @staticmethod
    def logpdf(x, a, b, loc=0.0, scale=1.0):
        y = (x - loc) / scale
        out = (S.xlogy(np.asarray(a, float) - 1.0, y) + S.xlog1py(np.asarray(b, float) - 1.0, -y)
               - S.betaln(a, b) - N.log(scale))
        return N.where((y < 0) | (y > 1), -np.inf, out)


@_with_exp
class poisson:
    """The Poisson distribution of counts `k` (plain numbers) with mean `mu`."""

    @staticmethod
    def logpmf(k, mu, loc=0):
        k = np.asarray(k, float) - loc
        out = S.xlogy(k, mu) - mu - S.gammaln(k + 1.0)
        return N.where(k < 0, -np.inf, out)


@_with_exp
class bernoulli:
    """The Bernoulli distribution of `k` in {0, 1} with P(k = 1) = `p`."""

    @staticmethod
    def logpmf(k, p, loc=0):
        k = k - loc
        out = S.xlogy(k, p) + S.xlog1py(1 - k, -p)
        return N.where((k == 0) | (k == 1), out, -np.inf)


@_with_exp
class dirichlet:
    """The Dirichlet distribution over the simplex, concentrations `alpha` (plain)."""

    @staticmethod
    def logpdf(x, alpha):
        alpha = np.asarray(alpha, float)
        norm_const = S.gammaln(np.sum(alpha)) - np.sum(S.gammaln(alpha))
        a = alpha.reshape((-1,) + (1,) * (len(_shape(x)) - 1))   # x: (K,) or (K, N), as SciPy
        return N.sum(S.xlogy(a - 1.0, x), 0) + norm_const


@_with_exp
class expon:
    """The exponential distribution with rate 1 / `scale`."""

    @staticmethod
    def logpdf(x, loc=0.0, scale=1.0):
        y = (x - loc) / scale
        return N.where(y < 0, -np.inf, -y - N.log(scale))


@_with_exp
class laplace:
    """The Laplace distribution."""

    @staticmethod
    def logpdf(x, loc=0.0, scale=1.0):
        return -N.abs(x - loc) / scale - N.log(2.0 * scale)


@_with_exp
class uniform:
    """The uniform distribution on [loc, loc + scale]."""

    @staticmethod
    def logpdf(x, loc=0.0, scale=1.0):
        y = (x - loc) / scale
        return N.where((y < 0) | (y > 1), -np.inf, -N.log(scale))


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


_as_modules()
