"""The confluent (1F1) and Gauss (2F1) hypergeometric functions of `jitad.scipy.special`, for
real arguments: power series where they converge fast, Kummer's, Pfaff's and the 1 - x
transformations and an asymptotic series to bring the argument there.

>>> from jitad.scipy import special
>>> round(float(special.hyp1f1(1.0, 1.0, 1.0)), 12)   # exp(1)
2.718281828459
"""
import numpy as np

from .. import numeric as N
from ._common import _float, _loop, gamma

_M_SWITCH = 60.0   # 1F1: the series up to x = 60, the asymptotic series above


def _broadcast(*xs):
    xs = [_float(x) for x in xs]
    shape = np.broadcast_shapes(*(N._shape(x) for x in xs))
    return [N.broadcast_to(x, shape) for x in xs]


def _series(a_params, b_params, x, iterations):
    """The sum over k of prod (a)_k / prod (b)_k x**k / k!."""
    def body(k, st):
        term, total = st
        for a in a_params:
            term = term * (a + k - 1.0)
        for b in b_params:
            term = term / (b + k - 1.0)
        term = term * x / k
        return term, total + term
    one = N.ones_like(x)
    _, total = _loop(iterations, body, (one, one))
    return total


def _m_asymptotic(a, b, x):
    """1F1(a; b; x) for large x > 0: Γ(b) / Γ(a) exp(x) x**(a - b) times the sum of
    (b - a)_k (1 - a)_k / (k! x**k)."""
    term, total = 1.0, 1.0
    for k in range(20):
        term = term * (b - a + k) * (1.0 - a + k) / ((k + 1.0) * x)
        total = total + term
    return gamma(b) / gamma(a) * N.exp(x + (a - b) * N.log(x)) * total


def _m_positive(a, b, x):
    """1F1(a; b; x) for x >= 0."""
    polynomial = (a <= 0) & (a == N.NUMPY_API["floor"](a))   # the series ends: no asymptotics needed
    far = (x > _M_SWITCH) & ~polynomial
    near = _series((a,), (b,), N.where(far, 1.0, x), 500)
    return N.where(far, _m_asymptotic(a, b, N.where(far, x, _M_SWITCH + 1.0)), near)


def hyp1f1(a, b, x):
    """Kummer's confluent hypergeometric function 1F1(a; b; x), the sum over k of
    (a)_k / (b)_k x**k / k!, for real a, b > 0 and x (Kummer's transformation for x < 0;
    1 at a = 0, as JAX): `special.hyp1f1(1.0, 1.0, x)` is exp(x)."""
    a, b, x = _broadcast(a, b, x)
    neg = x < 0
    kummer = N.exp(x) * _m_positive(b - a, b, N.where(neg, -x, 0.0))
    out = N.where(neg, kummer, _m_positive(a, b, N.where(neg, 0.0, x)))
    out = N.where(a == b, N.exp(x), out)
    return N.where(a == 0, 1.0, N.where(b == 0, np.inf, out))


def _f21_unit(a, b, c, z):
    """2F1(a, b; c; z) for 0 <= z < 1: the series up to z = 1/2, above it the transformation
    to 1 - z (where c - a - b is not an integer; there the series itself, slower)."""
    s = c - a - b
    integer = N.abs(s - N.NUMPY_API["round"](s)) < 1e-9
    flip = (z > 0.5) & ~integer
    w = N.where(flip, 1.0 - z, 0.0)
    first = gamma(c) * gamma(s) / (gamma(c - a) * gamma(c - b)) * _series((a, b), (a + b - c + 1.0,), w, 120)
    second = gamma(c) * gamma(-s) / (gamma(a) * gamma(b)) * N.exp(s * N.log(N.where(flip, w, 1.0))) \
        * _series((c - a, c - b), (s + 1.0,), w, 120)
    direct = _series((a, b), (c,), N.where(flip, 0.0, z), 1000)
    return N.where(flip, first + second, direct)


def hyp2f1(a, b, c, x):
    """The Gauss hypergeometric function 2F1(a, b; c; x), the sum over k of
    (a)_k (b)_k / (c)_k x**k / k!, for real arguments and x < 1 (Pfaff's transformation
    below 0; at x = 1 Gauss's sum where c > a + b; NaN above 1):
    `special.hyp2f1(1.0, 1.0, 2.0, 0.5)` is 2 log 2."""
    a, b, c, x = _broadcast(a, b, c, x)
    neg = x < 0
    xn = N.where(neg, x, -1.0)
    pfaff = N.exp(-a * N.log1p(-xn)) * _f21_unit(a, c - b, c, xn / (xn - 1.0))
    inside = (x >= 0) & (x < 1)
    out = N.where(neg, pfaff, _f21_unit(a, b, c, N.where(inside, x, 0.0)))
    gauss = gamma(c) * gamma(c - a - b) / (gamma(c - a) * gamma(c - b))
    out = N.where(x == 1, N.where(c - a - b > 0, gauss, np.inf), out)
    return N.where((x > 1) | N.NUMPY_API["isnan"](x), np.nan, out)
