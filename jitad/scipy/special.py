"""`jitad.scipy.special`: SciPy's special functions that jitad computes (staged and
differentiable), with SciPy's signatures: `special.logsumexp(a, axis=None, b=None)`.
`gammaln`, `digamma` and `polygamma` are jitad's `lgamma`, `digamma` and `polygamma`."""
import math

import numpy as np

from .. import numeric as N
from ..errors import StagingError
from ..numeric import digamma, erf, erfc, polygamma, sigmoid as expit  # noqa: F401
from ._common import _float, _is_f32, _loop, _staged, gamma, gammasgn  # noqa: F401

__all__ = ["logsumexp", "expit", "logit", "erf", "erfc", "ndtr", "log_ndtr", "xlogy", "xlog1py",
           "softmax", "log_softmax", "gammaln", "betaln", "digamma", "psi", "polygamma", "entr", "gamma",
           "gammasgn", "loggamma", "beta", "poch", "factorial", "comb", "multigammaln", "bernoulli", "rel_entr",
           "kl_div", "boxcox", "boxcox1p", "erfinv", "ndtri", "erfcx", "gammainc", "gammaincc", "betainc", "zeta", "rgamma", "erfcinv", "root_pi",
           "inv_root_pi",
           "i0", "i0e", "i1", "i1e", "exp1", "expi", "expn", "dawsn", "sici", "fresnel", "spence", "owens_t",
           "hyp1f1", "hyp2f1", "bessel_jn", "jn", "yn", "j0", "j1", "y0", "y1", "iv", "ive"]
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
    """x - logsumexp(x) over `axis` (None: all axes, as SciPy); a line holding +inf is NaN,
    as JAX's."""
    return N.log_softmax(x, axis)


def gammaln(x):
    """log|Γ(x)| (jitad.lgamma): `special.gammaln(5.0) == log(24)`."""
    return N.lgamma(x)


def betaln(a, b):
    """log B(a, b) = gammaln(a) + gammaln(b) - gammaln(a + b)."""
    return N.lgamma(a) + N.lgamma(b) - N.lgamma(np.add(a, b))


# -- gamma and beta functions -----------------------------------------------------------




def loggamma(x):
    """log Γ(x) for real x > 0 (NaN at and below 0, as JAX's real `loggamma`)."""
    x = _float(x)
    return N.where(x > 0, N.lgamma(N.where(x > 0, x, 1.0)), np.nan)


def beta(a, b):
    """B(a, b) = Γ(a) Γ(b) / Γ(a + b), through log-gammas and signs."""
    return gammasgn(a) * gammasgn(b) * gammasgn(np.add(a, b) if not _staged(a, b) else a + b) * N.exp(betaln(a, b))


def poch(z, m):
    """The rising factorial Γ(z + m) / Γ(z): `special.poch(2.0, 3.0) == 24.0`."""
    return gamma(z + m) / gamma(z) if _staged(z, m) else gamma(np.add(z, m)) / gamma(z)


def factorial(n, exact=False):
    """n! as Γ(n + 1) (0 for n < 0, as SciPy); `exact=True` is for Python ints only."""
    if exact:
        raise StagingError("`factorial(..., exact=True)` gives Python ints; use math.factorial, or exact=False")
    n = _float(n)
    return N.where(n < 0, 0.0, N.exp(N.lgamma(N.where(n < 0, 0.0, n) + 1.0)))


def comb(N_, k, *, exact=False, repetition=False):
    """The number of ways to choose `k` of `N_` (with `repetition`, of N_ + k - 1), as
    Γ-ratios; 0 outside 0 <= k <= N_."""
    if exact:
        raise StagingError("`comb(..., exact=True)` gives Python ints; use math.comb, or exact=False")
    n, k = _float(N_), _float(k)
    if repetition:
        n = n + k - 1.0
    ok = (k >= 0) & (n >= k)
    n1, k1 = N.where(ok, n, 1.0), N.where(ok, k, 0.0)
    return N.where(ok, N.exp(N.lgamma(n1 + 1.0) - N.lgamma(k1 + 1.0) - N.lgamma(n1 - k1 + 1.0)), 0.0)


def multigammaln(a, d):
    """The log of the multivariate gamma function of dimension `d` (a plain int)."""
    d = int(d)
    total = d * (d - 1) / 4.0 * math.log(math.pi)
    for j in range(d):
        total = total + N.lgamma(a - j / 2.0)
    return total


def bernoulli(n):
    """The Bernoulli numbers B_0 .. B_n (B_1 = -1/2, SciPy's convention), as a float array."""
    from fractions import Fraction
    n = int(n)
    if n < 0:
        raise StagingError(f"`bernoulli({n})`: n must be a non-negative int")
    b = [Fraction(1)]
    for m in range(1, n + 1):
        b.append(-sum(math.comb(m + 1, k) * b[k] for k in range(m)) / (m + 1))
    return np.array([float(v) for v in b])


# -- entropies, transforms ------------------------------------------------------------------

def rel_entr(p, q):
    """p log(p / q) for p, q > 0; 0 at p = 0 <= q; inf otherwise."""
    p, q = _float(p), _float(q)
    both = (p > 0) & (q > 0)
    val = p * (N.log(N.where(both, p, 1.0)) - N.log(N.where(both, q, 1.0)))
    return N.where(both, val, N.where((p == 0) & (q >= 0), 0.0, np.inf))


def kl_div(p, q):
    """p log(p / q) - p + q for p, q > 0; q at p = 0 <= q; inf otherwise."""
    p, q = _float(p), _float(q)
    return N.where((p == 0) & (q >= 0), q, rel_entr(p, q) - p + q)


def boxcox(x, lmbda):
    """The Box-Cox transform (x**lmbda - 1) / lmbda (log x at lmbda = 0)."""
    return boxcox1p(x - 1.0, lmbda) if _staged(x, lmbda) else boxcox1p(np.subtract(x, 1.0), lmbda)


def boxcox1p(x, lmbda):
    """The Box-Cox transform of 1 + x, accurate for small x and lmbda."""
    x, lmbda = _float(x), _float(lmbda)
    lx = N.log1p(x)
    zero = lmbda == 0
    safe = N.where(zero, 1.0, lmbda)
    return N.where(zero, lx, N.expm1(safe * lx) / safe)


def erfinv(x):
    """The inverse error function on [-1, 1] (±inf at ±1), as JAX's."""
    from ..random.core import _erfinv
    x = _float(x)
    name = "f32" if _is_f32(x) else "f64"
    inside = N.abs(x) < 1
    out = _erfinv(N.where(inside, x, 0.0), name)
    return N.where(inside, out, N.where(x == 1, np.inf, N.where(x == -1, -np.inf, np.nan)))


def ndtri(p):
    """The inverse of the standard normal CDF: `special.ndtri(0.5) == 0.0` (tiny p keep
    their precision: the inverse error function is fed -log(4 p (1 - p)) directly)."""
    from ..random.core import _erfinv
    p = _float(p)
    inside = (p > 0) & (p < 1)
    q = N.where(inside, p, 0.5)
    out = math.sqrt(2.0) * _erfinv(2.0 * q - 1.0, "f32" if _is_f32(p) else "f64", -N.log(4.0 * q * (1.0 - q)))
    tiny = q < 1e-15   # past the polynomials' range: the tail's asymptote, then Newton on log_ndtr
    lq = N.log(N.where(tiny, q, 1e-20))
    x = -N.sqrt(-2.0 * lq - N.log(-2.0 * lq) - math.log(2 * math.pi))
    for _ in range(3):
        ln = log_ndtr(x)
        x = x - (ln - lq) / N.exp(-0.5 * x * x - 0.5 * math.log(2 * math.pi) - ln)
    out = N.where(tiny, x, out)
    return N.where(inside, out, N.where(p == 0, -np.inf, N.where(p == 1, np.inf, np.nan)))


def erfcx(x):
    """exp(x**2) erfc(x), without overflow: its asymptotic series above x = 25."""
    x = _float(x)
    big = x > 25.0
    xb = N.where(big, x, 26.0)
    z = 1.0 / (2.0 * xb * xb)
    series = 1.0 + z * (-1.0 + z * (3.0 + z * (-15.0 + z * (105.0 + z * (-945.0 + z * 10395.0)))))
    xs = N.where(big, 0.0, x)
    return N.where(big, series / (xb * math.sqrt(math.pi)), N.exp(xs * xs) * N.erfc(xs))





# -- incomplete gamma and beta, zeta ---------------------------------------------------------

_ITERATIONS = 200   # series terms / continued-fraction steps: enough below a, b ~ 1e4





def _gamma_series(a, x):
    """P(a, x) by its power series (x < a + 1)."""
    def body(i, st):
        term, total = st
        term = term * x / (a + i)
        return term, total + term
    first = N.ones_like(x) / a
    _, total = _loop(_ITERATIONS, body, (first, first))
    return N.exp(a * N.log(x) - x - N.lgamma(a)) * total


def _gamma_fraction(a, x):
    """Q(a, x) by its continued fraction (x >= a + 1; Lentz's method)."""
    tiny = 1e-300 if not _is_f32(x) else 1e-30
    b0 = x + 1.0 - a

    def body(i, st):
        b, c, d, h = st
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = 1.0 / N.where(N.abs(d) < tiny, tiny, d)
        c = b + an / c
        c = N.where(N.abs(c) < tiny, tiny, c)
        return b, c, d, h * d * c
    _, _, _, h = _loop(_ITERATIONS, body, (b0, N.ones_like(x) / tiny, 1.0 / b0, 1.0 / b0))
    return N.exp(a * N.log(x) - x - N.lgamma(a)) * h


def _gamma_pq(a, x, upper):
    a, x = _float(a), _float(x)
    a, x = N.broadcast_to(a, np.broadcast_shapes(N._shape(a), N._shape(x))), x + N.zeros_like(a)
    valid = (a > 0) & (x >= 0)
    series = x < a + 1.0
    xs = N.where(valid & series & (x > 0), x, N.where(valid, a, 1.0) * 0.5)   # each branch its own inputs
    xf = N.where(valid & ~series, x, N.where(valid, a, 1.0) + 1.0)
    aa = N.where(valid, a, 1.0)
    p = _gamma_series(aa, xs)
    q = _gamma_fraction(aa, xf)
    low = N.where(x == 0, 0.0, N.where(series, p, 1.0 - q))
    high = N.where(x == 0, 1.0, N.where(series, 1.0 - p, q))
    out = high if upper else low
    out = N.where(x == np.inf, 1.0 - upper, out)
    return N.where(valid, out, np.nan)


def gammainc(a, x):
    """The regularized lower incomplete gamma function P(a, x) (a > 0, x >= 0):
    `special.gammainc(1.0, 1.0) == 1 - exp(-1)`."""
    return _gamma_pq(a, x, False)


def gammaincc(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    return _gamma_pq(a, x, True)


def _beta_fraction(a, b, x):
    """The continued fraction of I_x(a, b) (Lentz's method)."""
    tiny = 1e-300 if not _is_f32(x) else 1e-30
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    d0 = 1.0 - qab * x / qap
    d0 = 1.0 / N.where(N.abs(d0) < tiny, tiny, d0)

    def step(d, c, num):
        d = 1.0 + num * d
        d = 1.0 / N.where(N.abs(d) < tiny, tiny, d)
        c = 1.0 + num / c
        return d, N.where(N.abs(c) < tiny, tiny, c)

    def body(m, st):
        c, d, h = st
        m2 = 2.0 * m
        d, c = step(d, c, m * (b - m) * x / ((qam + m2) * (a + m2)))
        h = h * d * c
        d, c = step(d, c, -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)))
        return c, d, h * d * c
    _, _, h = _loop(_ITERATIONS, body, (N.ones_like(x), d0, d0))
    return h


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b) (a, b > 0, 0 <= x <= 1), by its
    continued fraction on the side of (a + 1) / (a + b + 2) where it converges fast."""
    a, b, x = _float(a), _float(b), _float(x)
    shape = np.broadcast_shapes(N._shape(a), N._shape(b), N._shape(x))
    a, b, x = (N.broadcast_to(v, shape) for v in (a, b, x))
    valid = (a > 0) & (b > 0) & (x >= 0) & (x <= 1)
    flip = x > (a + 1.0) / (a + b + 2.0)
    aa, bb = N.where(flip, b, a), N.where(flip, a, b)
    xx = N.where(flip, 1.0 - x, x)
    inner = valid & (xx > 0)
    aa, bb, xx = N.where(inner, aa, 1.0), N.where(inner, bb, 1.0), N.where(inner, xx, 0.5)
    front = N.exp(aa * N.log(xx) + bb * N.log1p(-xx) - betaln(aa, bb)) / aa
    part = front * _beta_fraction(aa, bb, xx)
    out = N.where(flip, 1.0 - part, part)
    out = N.where(x == 0, 0.0, N.where(x == 1, 1.0, out))
    return N.where(valid, out, np.nan)


# Bernoulli numbers B_2k / (2k)! for the Euler-Maclaurin tail of the Hurwitz zeta function
_ZETA_TAIL = [float(b) / math.factorial(2 * k) for k, b in ((k, bernoulli(2 * 12)[2 * k]) for k in range(1, 13))]
_ZETA_TERMS = 9


def zeta(x, q=None):
    """The Hurwitz zeta function sum over k >= 0 of (k + q)**-x (q = 1: Riemann's), for
    x > 1, q > 0: `special.zeta(2.0, 1.0) == pi**2 / 6`. Euler-Maclaurin summation: nine
    terms, then the integral and twelve Bernoulli corrections."""
    if q is None:
        q = 1.0
    x, q = _float(x), _float(q)
    valid = (x > 1) & (q > 0)
    xv, qv = N.where(valid, x, 2.0), N.where(valid, q, 1.0)
    total = 0.0
    for k in range(_ZETA_TERMS):
        total = total + (qv + k) ** -xv
    w = qv + _ZETA_TERMS
    total = total + w ** (1.0 - xv) / (xv - 1.0) + 0.5 * w ** -xv
    rising, power = xv, w ** (-xv - 1.0)
    for j, coef in enumerate(_ZETA_TAIL):
        total = total + coef * rising * power
        rising = rising * (xv + 2 * j + 1) * (xv + 2 * j + 2)
        power = power / (w * w)
    return N.where(x == 1, np.inf, N.where(valid, total, np.nan))


root_pi = math.sqrt(math.pi)
inv_root_pi = 1.0 / root_pi


def rgamma(x):
    """1 / Γ(x) (0 at the poles): `special.rgamma(3.0) == 0.5`."""
    x = _float(x)
    pole = ((x <= 0) & (x == N.NUMPY_API["floor"](N.where(N.abs(x) < np.inf, x, 0.0)))) | (x == -np.inf)
    return N.where(pole, 0.0, gammasgn(N.where(pole, 1.0, x)) * N.exp(-N.lgamma(N.where(pole, 1.0, x))))


def erfcinv(y):
    """The inverse of erfc on [0, 2]: erfinv(1 - y), accurate for small y (through ndtri)."""
    y = _float(y)
    return -ndtri(0.5 * y) / math.sqrt(2.0)


# -- modified Bessel functions of order 0 and 1 -----------------------------------------------

_BESSEL_SWITCH = 30.0   # the power series below |x| = 30, the asymptotic series above


def _bessel_series(order, x):
    """exp(-x) I_order(x) for 0 <= x <= 30 by the power series (positive terms)."""
    q = 0.25 * x * x

    def body(k, st):
        term, total = st
        term = term * q / (k * (k + order))
        return term, total + term
    first = (0.5 * x) ** order + N.zeros_like(x)
    _, total = _loop(100, body, (first, first))
    return total * N.exp(-x)


def _bessel_asymptotic(order, x):
    """exp(-x) I_order(x) for x >= 30: Hankel's expansion, 25 terms."""
    mu, term, total = 4.0 * order * order, 1.0 + N.zeros_like(x), 1.0 + N.zeros_like(x)
    for k in range(1, 25):
        term = term * -(mu - (2 * k - 1) ** 2) / (k * 8.0 * x)
        total = total + term
    return total / N.sqrt(2.0 * math.pi * x)


def _bessel_e(order, x):
    x = _float(x)
    ax = N.abs(x)
    small = ax <= _BESSEL_SWITCH
    out = N.where(small, _bessel_series(order, N.where(small, ax, 1.0)),
                  _bessel_asymptotic(order, N.where(small, 2 * _BESSEL_SWITCH, ax)))
    out = N.where(ax == np.inf, 0.0, out)
    return out if order == 0 else N.where(x < 0, -out, out)


def i0e(x):
    """The exponentially scaled modified Bessel function exp(-|x|) I0(x): `special.i0e(0.0) == 1.0`."""
    return _bessel_e(0, x)


def i1e(x):
    """exp(-|x|) I1(x) (odd in x)."""
    return _bessel_e(1, x)


def i0(x):
    """The modified Bessel function of the first kind of order 0."""
    x = _float(x)
    return i0e(x) * N.exp(N.abs(x))


def i1(x):
    """The modified Bessel function of the first kind of order 1 (odd in x)."""
    x = _float(x)
    return i1e(x) * N.exp(N.abs(x))


# the families in their own modules (they use the helpers above)
from ._special_bessel import bessel_jn, iv, ive, j0, j1, jn, y0, y1, yn  # noqa: E402,F401
from ._special_hypergeometric import hyp1f1, hyp2f1  # noqa: E402,F401
from ._special_integrals import dawsn, exp1, expi, expn, fresnel, owens_t, sici, spence  # noqa: E402,F401
from ._special_rules import (defjvp, defvjp, fwd_grad_logsumexp, make_gammainc_vjp_arg1,  # noqa: E402,F401
                            make_grad_logsumexp, primitive, repeat_to_match_shape, unbroadcast_f)
