"""The exponential, sine and cosine, Fresnel and Dawson integrals, Spence's function and
Owen's T function of `jitad.scipy.special`.

Each is a power series where that converges without cancellation and a continued fraction
or an asymptotic series beyond; every branch is fed only the inputs it handles (a `where`
on its argument), so values and gradients stay finite at the seams.

>>> from jitad.scipy import special
>>> round(float(special.exp1(1.0)), 12)
0.219383934396
"""
import math

import numpy as np

from .. import numeric as N
from ..numeric import digamma
from ._common import _float, _is_f32, _loop

EULER = 0.5772156649015329


def ndtr(x):
    """The standard normal CDF."""
    return 0.5 * N.erfc(-x * math.sqrt(0.5))


def _guard(v, tiny):
    """v, kept away from 0 (Lentz's method divides by it)."""
    return N.where(N.abs(v) < tiny, tiny, v)


def _tiny(x):
    return 1e-30 if _is_f32(x) else 1e-150   # its square stays finite (complex fractions)


# -- exponential integrals ----------------------------------------------------------------------

def _expn_series(n, x):
    """E_n(x) for 0 < x <= 1 and integer n >= 1 by its power series (the k = n - 1 term apart)."""
    def body(i, st):
        term, total, odd = st   # term = (-x)**k / k!, k = i - 1
        k = i - 1.0
        hit = k == n - 1.0
        total = total - N.where(hit, 0.0, term / N.where(hit, 1.0, k - n + 1.0))
        return term * -x / i, total, N.where(hit, term, odd)
    _, total, odd = _loop(40, body, (N.ones_like(x), N.zeros_like(x), N.zeros_like(x)))
    return total + odd * (digamma(n) - N.log(x))


def _expn_fraction(n, x):
    """E_n(x) for x > 1 by its continued fraction (Lentz's method)."""
    tiny = _tiny(x)
    b0 = x + n

    def body(i, st):
        b, c, d, h = st
        an = -i * (n - 1.0 + i)
        b = b + 2.0
        d = 1.0 / _guard(an * d + b, tiny)
        c = _guard(b + an / c, tiny)
        return b, c, d, h * d * c
    _, _, _, h = _loop(120, body, (b0, N.ones_like(x) / tiny, 1.0 / b0, 1.0 / b0))
    return h * N.exp(-x)


def expn(n, x):
    """The generalized exponential integral E_n(x), the integral over t >= 1 of
    exp(-x t) / t**n, for integer n >= 0 and x >= 0: `special.expn(1, 1.0)` is `exp1(1.0)`."""
    n, x = _float(n), _float(x)
    shape = np.broadcast_shapes(N._shape(n), N._shape(x))
    n, x = N.broadcast_to(n, shape), N.broadcast_to(x, shape)
    valid = (n >= 0) & (n == N.NUMPY_API["floor"](n)) & (x >= 0)
    pos = valid & (x > 0) & (x < np.inf) & (n >= 1)
    nn = N.where(pos, n, 1.0)
    small = x <= 1.0
    out = N.where(small, _expn_series(nn, N.where(pos & small, x, 0.5)),
                  _expn_fraction(nn, N.where(pos & ~small, x, 2.0)))
    xe = N.where(x > 0, x, 1.0)
    out = N.where(n == 0, N.exp(-xe) / xe, out)
    at_zero = N.where(n <= 1, np.inf, 1.0 / N.where(n <= 1, 1.0, n - 1.0))
    out = N.where(x == 0, at_zero, N.where(x == np.inf, 0.0, out))
    return N.where(valid, out, np.nan)


def exp1(x):
    """The exponential integral E_1(x), the integral over t >= x of exp(-t) / t, for x >= 0
    (NaN below): `special.exp1(1.0)` is about 0.2194."""
    return expn(1.0, x)


def _ei_series(x):
    """Ei(x) for 0 < x <= 40: Euler's constant + log x + the sum of x**k / (k k!) (positive terms)."""
    def body(k, st):
        term, total = st   # term = x**k / k!
        term = term * x / k
        return term, total + term / k
    _, total = _loop(170, body, (N.ones_like(x), N.zeros_like(x)))
    return EULER + N.log(x) + total


def _ei_asymptotic(x):
    """Ei(x) for x > 40: exp(x) / x times the sum of k! / x**k."""
    term, total = 1.0, 1.0
    for k in range(1, 40):
        term = term * k / x
        total = total + term
    return N.exp(x) / x * total


def expi(x):
    """The exponential integral Ei(x), the principal value of the integral up to x of
    exp(t) / t (-E_1(-x) for x < 0): `special.expi(1.0)` is about 1.8951."""
    x = _float(x)
    pos, big = x > 0, x > 40.0
    right = N.where(big, _ei_asymptotic(N.where(big & (x < np.inf), x, 41.0)), _ei_series(N.where(pos & ~big, x, 1.0)))
    left = -exp1(N.where(pos, 1.0, -x))
    return N.where(x == 0, -np.inf, N.where(x == np.inf, np.inf, N.where(pos, right, left)))


# -- Dawson's integral ----------------------------------------------------------------------------

def _dawsn_series(x):
    """exp(-x**2) times the integral of exp(t**2) from 0 to x, by its series of positive
    terms x**(2k + 1) / (k! (2k + 1)) (|x| <= 6)."""
    x2 = x * x

    def body(k, st):
        term, total = st   # term = x**(2k + 1) / k!
        term = term * x2 / k
        return term, total + term / (2.0 * k + 1.0)
    _, total = _loop(160, body, (x, x))
    return N.exp(-x2) * total


def _dawsn_asymptotic(x):
    """Dawson's integral for |x| > 6: (1 / 2x) times the sum of (2k - 1)!! / (2 x**2)**k."""
    z = 1.0 / (2.0 * x * x)
    term, total = 1.0, 1.0
    for k in range(1, 36):
        term = term * (2 * k - 1) * z
        total = total + term
    return total / (2.0 * x)


def dawsn(x):
    """Dawson's integral exp(-x**2) times the integral of exp(t**2) from 0 to x (odd in x):
    `special.dawsn(1.0)` is about 0.5381."""
    x = _float(x)
    big = N.abs(x) > 6.0
    out = N.where(big, _dawsn_asymptotic(N.where(big, x, 7.0)), _dawsn_series(N.where(big, 1.0, x)))
    return N.where(N.abs(x) == np.inf, 0.0, out)


# -- complex continued fractions on pairs of reals ------------------------------------------------

def _cmul(a, b):
    return a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]


def _cinv(a):
    d = a[0] * a[0] + a[1] * a[1]
    return a[0] / d, -a[1] / d


def _lentz(b0, step, a_of, iterations, tiny):
    """The complex continued fraction 1 / (b0 + a_1 / (b_1 + a_2 / (b_2 + ...))) with
    b_k = b_{k-1} + step (real step) and real a_k = a_of(k), by Lentz's method."""
    def body(k, st):
        br, bi, cr, ci, dr, di, hr, hi = st
        a = a_of(k)
        br = br + step
        dr, di = _cinv((_guard(a * dr + br, tiny), a * di + bi))
        inv_c = _cinv((cr, ci))
        cr, ci = _guard(br + a * inv_c[0], tiny), bi + a * inv_c[1]
        hr, hi = _cmul((hr, hi), _cmul((cr, ci), (dr, di)))
        return br, bi, cr, ci, dr, di, hr, hi
    d = _cinv(b0)
    one = N.ones_like(b0[0])
    out = _loop(iterations, body, (b0[0], b0[1], one / tiny, 0.0 * one, d[0], d[1], d[0], d[1]))
    return out[6], out[7]


# -- sine and cosine integrals ----------------------------------------------------------------------

def _sici_series(x):
    """(Si, Ci - Euler's constant - log x) for 0 < x <= 4 by their power series."""
    def body(k, st):
        t, si, ci = st   # t = (-1)**(k - 1) x**(2k - 2) / (2k - 2)!
        s = t * x / (2.0 * k - 1.0)
        t = -s * x / (2.0 * k)
        return t, si + s / (2.0 * k - 1.0), ci + t / (2.0 * k)
    _, si, ci = _loop(30, body, (N.ones_like(x), N.zeros_like(x), N.zeros_like(x)))
    return si, ci


def _sici_fraction(x, tiny):
    """(Si, Ci) for x > 4 from the continued fraction of E_1(i x) = -Ci(x) + i (Si(x) - pi / 2)."""
    hr, hi = _lentz((N.ones_like(x), x), 2.0, lambda k: -(k * k), 100, tiny)
    hr, hi = _cmul((N.cos(x), -N.sin(x)), (hr, hi))
    return 0.5 * math.pi + hi, -hr


def sici(x):
    """The sine and cosine integrals (Si(x), Ci(x)): Si the integral of sin(t) / t from 0 to x
    (odd), Ci Euler's constant + log|x| + the integral of (cos t - 1) / t (even: the real
    part below 0, as SciPy and JAX): `si, ci = special.sici(1.0)`."""
    x = _float(x)
    ax = N.abs(x)
    big = ax > 4.0
    inner = (ax > 0) & ~big
    si_s, ci_s = _sici_series(N.where(inner, ax, 1.0))
    si_f, ci_f = _sici_fraction(N.where(big & (ax < np.inf), ax, 5.0), _tiny(x))
    si = N.where(big, si_f, si_s)
    ci = N.where(big, ci_f, ci_s + EULER + N.log(N.where(inner, ax, 1.0)))
    si = N.where(ax == np.inf, 0.5 * math.pi, N.where(ax == 0, 0.0, si))
    ci = N.where(ax == np.inf, 0.0, N.where(ax == 0, -np.inf, ci))
    nan = N.NUMPY_API["isnan"](x)
    return N.where(nan, np.nan, N.where(x < 0, -si, si)), N.where(nan | (x == -np.inf), np.nan, ci)


# -- Fresnel integrals -------------------------------------------------------------------------------

def _fresnel_series(x):
    """(S, C) for |x| <= 1.5 by their power series in p = pi x**2 / 2."""
    p = 0.5 * math.pi * x * x

    def body(k, st):
        t, s, c = st   # t = (-1)**(k - 1) p**(2k - 2) x / (2k - 2)!
        c = c + t / (4.0 * k - 3.0)
        t = t * p / (2.0 * k - 1.0)
        s = s + t / (4.0 * k - 1.0)
        return -t * p / (2.0 * k), s, c
    _, s, c = _loop(30, body, (x, N.zeros_like(x), N.zeros_like(x)))
    return s, c


def _fresnel_fraction(x, tiny):
    """(S, C) for x > 1.5 from the continued fraction of erfc on the diagonal of the complex plane."""
    hr, hi = _lentz((N.ones_like(x), -math.pi * x * x), 4.0, lambda k: -(2.0 * k - 1.0) * (2.0 * k), 100, tiny)
    hr, hi = _cmul((x, -x), (hr, hi))
    half = 0.5 * math.pi * x * x
    er, ei = _cmul((N.cos(half), N.sin(half)), (hr, hi))
    er, ei = 1.0 - er, -ei   # (1 - e h), times (1 + i) / 2 below
    return 0.5 * (er + ei), 0.5 * (er - ei)


def fresnel(x):
    """The Fresnel integrals (S(x), C(x)): the integrals of sin(pi t**2 / 2) and
    cos(pi t**2 / 2) from 0 to x (both odd): `s, c = special.fresnel(1.0)`."""
    x = _float(x)
    ax = N.abs(x)
    big = ax > 1.5
    s_s, c_s = _fresnel_series(N.where(big, 1.0, ax))
    s_f, c_f = _fresnel_fraction(N.where(big & (ax < np.inf), ax, 2.0), _tiny(x))
    s, c = N.where(big, s_f, s_s), N.where(big, c_f, c_s)
    s, c = N.where(ax == np.inf, 0.5, s), N.where(ax == np.inf, 0.5, c)
    nan = N.NUMPY_API["isnan"](x)
    return tuple(N.where(nan, np.nan, N.where(x < 0, -v, v)) for v in (s, c))


# -- Spence's function ----------------------------------------------------------------------------

def _dilog_series(z):
    """The dilogarithm Li2(z) = the sum of z**k / k**2, for |z| <= 1/2."""
    def body(k, st):
        power, total = st
        power = power * z
        return power, total + power / (k * k)
    _, total = _loop(60, body, (N.ones_like(z), N.zeros_like(z)))
    return total


def spence(x):
    """Spence's function, the integral from 1 to x of log(t) / (1 - t) (Li2(1 - x)), for
    finite x >= 0 (NaN elsewhere, as SciPy): `special.spence(1.0) == 0.0`."""
    x = _float(x)
    zeta2 = math.pi ** 2 / 6.0
    low, mid, high = x < 0.5, (x >= 0.5) & (x <= 1.5), x > 1.5
    xl = N.where(low & (x > 0), x, 0.25)   # Li2(1 - x) by the reflection to Li2(x)
    out_low = zeta2 - N.log(xl) * N.log1p(-xl) - _dilog_series(xl)
    out_mid = _dilog_series(1.0 - N.where(mid, x, 1.0))
    xh = N.where(high & (x < np.inf), x, 4.0)   # Landen's identity to w = (x - 1) / x, reflected above 1/2
    w, lx = (xh - 1.0) / xh, N.log(xh)
    near = w <= 0.5
    li_w = N.where(near, _dilog_series(N.where(near, w, 0.25)),
                   zeta2 + N.log(N.where(near, 0.5, w)) * lx - _dilog_series(N.where(near, 0.25, 1.0 / xh)))
    out_high = -li_w - 0.5 * lx * lx
    out = N.where(low, out_low, N.where(mid, out_mid, out_high))
    out = N.where(x == 0, zeta2, out)
    return N.where((x >= 0) & (x < np.inf), out, np.nan)


# -- Owen's T function ----------------------------------------------------------------------------

_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(48)


def _owens_t_inner(h, a):
    """T(h, a) for h >= 0, 0 <= a <= 1: Gauss-Legendre on the integral over [0, a] of
    exp(-h**2 (1 + t**2) / 2) / (1 + t**2) / (2 pi)."""
    t = a[..., None] * (0.5 * (_GL_NODES + 1.0))
    f = N.exp(-0.5 * (h * h)[..., None] * (1.0 + t * t)) / (1.0 + t * t)
    return 0.5 * a * N.sum(f * _GL_WEIGHTS, axis=-1) / (2.0 * math.pi)


def owens_t(h, a):
    """Owen's T function, the integral over [0, a] of exp(-h**2 (1 + t**2) / 2) /
    (2 pi (1 + t**2)) (even in h, odd in a): `special.owens_t(0.0, 1.0) == 0.125`."""
    h, a = _float(h), _float(a)
    shape = np.broadcast_shapes(N._shape(h), N._shape(a))
    h, a = N.broadcast_to(N.abs(h), shape), N.broadcast_to(a, shape)
    aa = N.abs(a)
    wide = aa > 1.0
    finite = aa < np.inf
    inner = _owens_t_inner(N.where(h < np.inf, h, 0.0), N.where(wide, 0.5, aa))
    ai = N.where(wide & finite, aa, 2.0)   # T(h, a) = (Q(h) + Q(a h)) / 2 - Q(h) Q(a h) - T(a h, 1 / a)
    qh, qa = ndtr(-h), ndtr(-ai * h)
    hi = N.where(h < np.inf, ai * h, 0.0)
    outer = 0.5 * (qh + qa) - qh * qa - _owens_t_inner(hi, 1.0 / ai)
    out = N.where(wide, N.where(finite, outer, 0.5 * qh), inner)
    out = N.where(h == np.inf, 0.0, out)
    nan = N.NUMPY_API["isnan"](h) | N.NUMPY_API["isnan"](a)
    return N.where(nan, np.nan, N.where(a < 0, -out, out))
