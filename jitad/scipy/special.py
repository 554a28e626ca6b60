"""`jitad.scipy.special`: SciPy's special functions that jitad computes (staged and
differentiable), with SciPy's signatures: `special.logsumexp(a, axis=None, b=None)`.
`gammaln`, `digamma` and `polygamma` are jitad's `lgamma`, `digamma` and `polygamma`."""
import math

import numpy as np

from .. import numeric as N
from ..errors import StagingError
from ..numeric import digamma, erf, erfc, polygamma, sigmoid as expit  # noqa: F401

__all__ = ["logsumexp", "expit", "logit", "erf", "erfc", "ndtr", "log_ndtr", "xlogy", "xlog1py",
           "softmax", "log_softmax", "gammaln", "betaln", "digamma", "psi", "polygamma", "entr"]
psi = digamma

_SQRT_HALF = math.sqrt(0.5)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """log(sum(b * exp(a))) over `axis` (None: all axes), computed stably:
    `special.logsumexp(x, axis=0)`."""
    if return_sign:
        raise StagingError("`logsumexp(..., return_sign=True)` is not supported; give positive weights b")
    if b is None:
        return N.logsumexp(a, axis, keepdims)
    m = N.max(N.stop_gradient(a), axis, keepdims=True)
    m = N.where(N.abs(m) < np.inf, m, 0.0)
    s = N.sum(b * N.exp(a - m), axis, keepdims=keepdims)
    return N.log(s) + (m if keepdims else N.NUMPY_API["squeeze"](m, axis))


def logit(p):
    """log(p / (1 - p)): `special.logit(0.5) == 0.0`."""
    return N.log(p) - N.log1p(-p)


def ndtr(x):
    """The standard normal CDF: `special.ndtr(0.0) == 0.5`."""
    return 0.5 * N.erfc(-x * _SQRT_HALF)


# The coefficients (-1)**n (2n - 1)!! of the asymptotic series of ndtr(x) exp(x**2 / 2)
# sqrt(2 pi) (-x), highest first: eight terms reach float64's precision at x = -20.
_MILLS_SERIES = tuple((-1) ** n * math.prod(range(2 * n - 1, 0, -2)) for n in range(8, 0, -1))


def _is_f32(x):
    return getattr(x, "ir_dtype", None) == "f32" or getattr(x, "dtype", None) == np.float32


def log_ndtr(x):
    """log of the standard normal CDF, accurate everywhere: an asymptotic series below
    -20 (-10 in float32), log(ndtr) up to 0, log1p(-ndtr(-x)) above (no cancellation).
    Each formula sees only the inputs it handles (a `where` on its argument, so the
    gradient is whole at the boundaries): `special.log_ndtr(-30.0)`."""
    lower = -10.0 if _is_f32(x) else -20.0
    is_left, is_right = x < lower, x > 0.0
    far = N.where(is_left, x, lower)
    z2, series = 1.0 / (far * far), 0.0
    for c in _MILLS_SERIES:   # sum of (-1)**n (2n - 1)!! / x**2n, n = 1 .. 8 (Horner)
        series = z2 * (c + series)
    left = -0.5 * far * far - N.log(-far) - 0.5 * math.log(2 * math.pi) + N.log1p(series)
    right = N.log1p(-ndtr(-N.where(is_right, x, 0.0)))
    mid = N.log(ndtr(N.where(is_left | is_right, 0.0, x)))
    return N.where(is_left, left, N.where(is_right, right, mid))


def xlogy(x, y):
    """x * log(y), 0 where x == 0: `special.xlogy(0.0, 0.0) == 0.0`."""
    zero = x == 0
    return N.where(zero, 0.0, x * N.log(N.where(zero, 1.0, y)))


def xlog1py(x, y):
    """x * log1p(y), 0 where x == 0."""
    zero = x == 0
    return N.where(zero, 0.0, x * N.log1p(N.where(zero, 0.0, y)))


def entr(x):
    """-x log x for x > 0, 0 at 0, -inf below."""
    return N.where(x < 0, -np.inf, -xlogy(x, x))


def softmax(x, axis=None):
    """exp(x) / sum(exp(x)) over `axis` (None: all axes, as SciPy)."""
    return N.exp(log_softmax(x, axis))


def log_softmax(x, axis=None):
    """x - logsumexp(x) over `axis` (None: all axes, as SciPy)."""
    return x - N.logsumexp(x, axis, keepdims=True)


def gammaln(x):
    """log|Γ(x)| (jitad.lgamma): `special.gammaln(5.0) == log(24)`."""
    return N.lgamma(x)


def betaln(a, b):
    """log B(a, b) = gammaln(a) + gammaln(b) - gammaln(a + b)."""
    return N.lgamma(a) + N.lgamma(b) - N.lgamma(np.add(a, b))
