"""`lax`'s special functions: the regularized incomplete gamma and beta functions, their
derivatives a gamma sampler needs, Hurwitz's zeta and the exponentially scaled Bessel
functions of order 0 and 1. Each is plain staged math (series and continued fractions
run for a fixed number of steps in a `FOR` loop), so jitad differentiates it like any
other code; NaN and infinity at the edges follow XLA's choices."""
import math

import numpy as np

from .. import numeric as N
from ..staging import FOR
from .elementwise import _float

STEPS = 200        # series and continued-fraction steps: enough for arguments up to a few hundred
TINY = 1e-300


def _safe(cond, x, fallback):
    """x where cond, else a harmless fallback (keeps the unused branch free of NaN)."""
    return N.where(cond, x, fallback)


def _lower_series(a, x):
    """P(a, x) by its power series (accurate for x < a + 1)."""
    def step(i, state):
        term, total = state
        term = term * x / (a + i)
        return term, total + term
    _, total = FOR(1, STEPS, step, (N.ones_like(x), N.ones_like(x)))
    return N.exp(a * N.log(x) - x - N.lgamma(a + 1.0)) * total


def _upper_fraction(a, x):
    """Q(a, x) by its continued fraction, evaluated with Lentz's method (x >= a + 1)."""
    b0 = x + 1.0 - a
    d0 = 1.0 / b0

    def step(i, state):
        b, c, d, h = state
        an = -i * (i - a)
        b = b + 2.0
        d = an * d + b
        d = N.where(N.abs(d) < TINY, TINY, d)
        c = b + an / c
        c = N.where(N.abs(c) < TINY, TINY, c)
        d = 1.0 / d
        return b, c, d, h * d * c
    _, _, _, h = FOR(1, STEPS, step, (b0, N.ones_like(x) / TINY, d0, d0))
    return N.exp(a * N.log(x) - x - N.lgamma(a)) * h


def _gamma_parts(a, x):
    """(P, Q) away from the edges, each from the form that converges there."""
    use_series = x < a + 1.0
    xs, as_ = _safe(use_series, x, 0.5), _safe(use_series, a, 1.0)
    xf, af = _safe(use_series, 2.0, x), _safe(use_series, 1.0, a)
    p_series = _lower_series(as_, xs)
    q_fraction = _upper_fraction(af, xf)
    return use_series, p_series, q_fraction


def _gamma_edges(a, x, value, at_zero_x, at_inf_x, at_zero_a):
    inside = (a > 0) & (x > 0) & (x < np.inf)
    out = N.where(inside, value, np.nan)
    out = N.where((a > 0) & (x == 0), at_zero_x, out)
    out = N.where((a > 0) & (x == np.inf), at_inf_x, out)
    out = N.where((a == 0) & (x >= 0), at_zero_a, out)
    return N.where((x != x) | (a != a) | (a < 0) | (x < 0), np.nan, out)


def igamma(a, x):
    """The regularized lower incomplete gamma function P(a, x): `lax.igamma(1.0, 1.0) == 1 - exp(-1)`."""
    a, x = _float(a), _float(x)
    series, p, q = _gamma_parts(N.where((a > 0) & (x > 0) & (x < np.inf), a, 1.0),
                                N.where((a > 0) & (x > 0) & (x < np.inf), x, 1.0))
    return _gamma_edges(a, x, N.where(series, p, 1.0 - q), 0.0, 1.0, 1.0)


def igammac(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x)."""
    a, x = _float(a), _float(x)
    series, p, q = _gamma_parts(N.where((a > 0) & (x > 0) & (x < np.inf), a, 1.0),
                                N.where((a > 0) & (x > 0) & (x < np.inf), x, 1.0))
    return _gamma_edges(a, x, N.where(series, 1.0 - p, q), 1.0, 0.0, 0.0)


def igamma_grad_a(a, x):
    """dP(a, x)/da: `lax.igamma_grad_a(2.0, 1.0)`."""
    from ..api import jvp
    a, x = _float(a), _float(x)
    d = jvp(lambda a: igamma(a, x), (a,), (N.ones_like(a) if hasattr(a, "ir_dtype") else np.ones_like(a),))[1]
    return N.where((a > 0) & (x > 0) & (x < np.inf), d, N.where((a > 0) & (x == 0), 0.0, np.nan))


def random_gamma_grad(a, x):
    """dx/da of a gamma(a) sample x at fixed uniform draw: -(dP/da) / (dP/dx)."""
    a, x = _float(a), _float(x)
    density = N.exp((a - 1.0) * N.log(N.where(x > 0, x, 1.0)) - x - N.lgamma(a))
    out = -igamma_grad_a(a, x) / density
    return N.where((a > 0) & (x == 0), 0.0, out)


# -- the regularized incomplete beta function --------------------------------------

def _beta_fraction(a, b, x):
    """I_x(a, b) for x < (a + 1) / (a + b + 2) by its continued fraction (Lentz)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    d0 = 1.0 - qab * x / qap
    d0 = 1.0 / N.where(N.abs(d0) < TINY, TINY, d0)

    def step(m, state):
        c, d, h = state
        m2 = 2.0 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / N.where(N.abs(d) < TINY, TINY, d)
            c = 1.0 + aa / c
            c = N.where(N.abs(c) < TINY, TINY, c)
            h = h * d * c
        return c, d, h
    _, _, h = FOR(1, STEPS, step, (N.ones_like(x), d0, d0))
    front = N.exp(a * N.log(x) + b * N.log1p(-x) - (N.lgamma(a) + N.lgamma(b) - N.lgamma(a + b)))
    return front * h / a


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b): `lax.betainc(1.0, 1.0, 0.3) == 0.3`."""
    a, b, x = _float(a), _float(b), _float(x)
    inside = (a > 0) & (b > 0) & (x > 0) & (x < 1)
    flip = x > (a + 1.0) / (a + b + 2.0)
    aa, bb, xx = N.where(flip, b, a), N.where(flip, a, b), N.where(flip, 1.0 - x, x)
    aa, bb, xx = N.where(inside, aa, 1.0), N.where(inside, bb, 1.0), N.where(inside, xx, 0.5)
    value = _beta_fraction(aa, bb, xx)
    out = N.where(inside, N.where(flip, 1.0 - value, value), np.nan)
    edge = (a > 0) & (b > 0)
    out = N.where(edge & (x == 0), 0.0, N.where(edge & (x == 1), 1.0, out))
    out = N.where((a == 0) & (b > 0) & (x >= 0) & (x <= 1), 1.0, out)
    return N.where((b == 0) & (a > 0) & (x >= 0) & (x < 1), 0.0, out)


# -- Hurwitz zeta ---------------------------------------------------------------------

# (2k)! / B_2k: the Euler-Maclaurin correction terms' denominators
_EM = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
       -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
       1.8152105401943546773e17, -7.1661652561756670113e18)
_DIRECT = 9


def zeta(x, q):
    """Hurwitz's zeta function sum over k >= 0 of (k + q)**-x, for x > 1 (inf at x = 1 and
    for q a non-positive integer, NaN below x = 1): `lax.zeta(2.0, 1.0) == pi**2 / 6`."""
    x, q = _float(x), _float(q)
    ok = (x > 1) & (q > 0)
    xs, qs = N.where(ok, x, 2.0), N.where(ok, q, 1.0)
    total = 0.0
    for k in range(_DIRECT):
        total = total + N.exp(-xs * N.log(qs + k))
    w = qs + _DIRECT
    total = total + N.exp((1.0 - xs) * N.log(w)) / (xs - 1.0) + 0.5 * N.exp(-xs * N.log(w))
    rising, power = xs, N.exp(-(xs + 1.0) * N.log(w))   # x (x+1) ... and w**-(x + 2k - 1)
    for j, denominator in enumerate(_EM):
        total = total + rising * power / denominator
        rising = rising * (xs + 2 * j + 1) * (xs + 2 * j + 2)
        power = power / (w * w)
    out = N.where(ok, total, np.nan)
    pole = (q <= 0) & (q == N.NUMPY_API["floor"](q))
    out = N.where((x == 1) | ((x > 1) & pole), np.inf, out)
    return N.where((x != x) | (q != q), np.nan, out)


# -- exponentially scaled modified Bessel functions -----------------------------------

_SWITCH = 30.0
_SERIES_STEPS = 90
_ASYMPTOTIC_STEPS = 30


def _bessel_series(x, order):
    """sum over k of (x/2)**(2k + order) / (k! (k + order)!) for |x| <= 30."""
    half = x * 0.5
    sq = half * half
    first = half if order else N.ones_like(x)

    def step(k, state):
        term, total = state
        term = term * sq / (k * (k + order))
        return term, total + term
    _, total = FOR(1, _SERIES_STEPS, step, (first, first))
    return total


def _bessel_asymptotic(x, order):
    """exp(-x) I_order(x) for x >= 30: Hankel's expansion in 1/x."""
    mu = 4.0 * order * order
    term, total = N.ones_like(x), N.ones_like(x)
    for k in range(1, _ASYMPTOTIC_STEPS):
        term = term * -(mu - (2 * k - 1) ** 2) / (8.0 * k * x)
        total = total + term
    return total / N.sqrt(2.0 * math.pi * x)


def _scaled_bessel(x, order):
    x = _float(x)
    ax = N.abs(x)
    near = ax <= _SWITCH
    series = _bessel_series(N.where(near, ax, 1.0), order) * N.exp(-N.where(near, ax, 1.0))
    far = _bessel_asymptotic(N.where(near, _SWITCH + 1.0, ax), order)
    out = N.where(near, series, far)
    out = N.where(ax == np.inf, 0.0, out)
    return (N.where(x < 0, -out, out) if order else out)


def bessel_i0e(x):
    """exp(-|x|) I0(x): `lax.bessel_i0e(0.0) == 1.0`."""
    return _scaled_bessel(x, 0)


def bessel_i1e(x):
    """exp(-|x|) I1(x) (odd in x): `lax.bessel_i1e(0.0) == 0.0`."""
    return _scaled_bessel(x, 1)
