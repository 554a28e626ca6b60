"""Bessel functions of `jitad.scipy.special`: J_n and Y_n of integer order (`jn`, `yn`, `j0`,
`j1`, `y0`, `y1`, JAX's `bessel_jn`) and the modified I_v of real order (`iv`, `ive`).

J_n comes from Miller's backward recurrence (normalized by J_0 + 2 (J_2 + J_4 + ...) = 1),
Y_0 and Y_1 from Neumann's series over the same J_k, higher Y_n from the upward recurrence;
past |x| = 25 (or the largest order) Hankel's asymptotic series gives J_0, J_1, Y_0, Y_1.

>>> from jitad.scipy import special
>>> round(float(special.j0(1.0)), 12)
0.765197686558
"""
import math

import numpy as np

from .. import numeric as N
from ..errors import ArgumentError
from ._common import _float, _loop
from ._special_integrals import EULER as EULER_GAMMA

_SWITCH = 25.0   # Miller's recurrence below, Hankel's series above (for orders below it)


def _orders(n, who):
    """The integer orders `n` as a float array and the largest |n|; `n` must be concrete."""
    if N.is_staged(n):
        raise ArgumentError(f"{who}: the order n must be a concrete int or int array, not a traced value")
    n = np.asarray(n)
    if n.size and np.any(n != np.round(n)):
        raise ArgumentError(f"{who}: the order n must be an integer (got {n}); use iv/jv-style real orders elsewhere")
    return n.astype(np.float64), int(np.max(np.abs(n))) if n.size else 0


def _miller(x, top, keep):
    """J_0 .. J_keep(x) (a list) and the Neumann sums for Y_0, Y_1, for 0 < x, by the
    backward recurrence from order `top` (values rescaled as they grow)."""
    j_up, j = N.zeros_like(x), 1e-30 + N.zeros_like(x)
    outs = [None] * (keep + 1)
    even = y0_sum = y1_sum = N.zeros_like(x)
    for k in range(top, 0, -1):
        j_up, j = j, (2.0 * k / x) * j - j_up   # j is now J_{k-1}
        m = k - 1
        if m >= 1 and m % 2 == 0:
            even = even + j
            y0_sum = y0_sum + (-1) ** (m // 2) * j / (m // 2)
        if m % 2 == 1:   # J_m's coefficient in the sum over k of (-1)**k (J_{2k-1} - J_{2k+1}) / k
            c = (-1) ** ((m + 1) // 2) / ((m + 1) // 2) - ((-1) ** ((m - 1) // 2) / ((m - 1) // 2) if m >= 3 else 0)
            y1_sum = y1_sum + c * j
        if m <= keep:
            outs[m] = j
        scale = N.where(N.abs(j) > 1e100, 1e-100, 1.0)
        j_up, j, even, y0_sum, y1_sum = (v * scale for v in (j_up, j, even, y0_sum, y1_sum))
        outs = [o if o is None else o * scale for o in outs]
    norm = outs[0] + 2.0 * even
    return [o / norm for o in outs], y0_sum / norm, y1_sum / norm


def _neumann_y(x, js, y0_sum, y1_sum):
    """Y_0 and Y_1 from J_0, J_1 and the Neumann sums."""
    lg = N.log(0.5 * x) + EULER_GAMMA
    y0 = (2.0 / math.pi) * (lg * js[0] - 2.0 * y0_sum)
    y1 = (2.0 / math.pi) * (lg * js[1] - js[0] / x + y1_sum)
    return y0, y1


def _hankel(order, x):
    """(J_order, Y_order) for large x by Hankel's asymptotic series."""
    mu = 4.0 * order * order
    p, q, term = 1.0, 0.0, 1.0
    for k in range(1, 24):
        term = term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * x)
        if k % 2:
            q = q + (-1) ** (k // 2) * term
        else:
            p = p + (-1) ** (k // 2) * term
    chi = x - (0.5 * order + 0.25) * math.pi
    amp = N.sqrt(2.0 / (math.pi * x))
    return amp * (p * N.cos(chi) - q * N.sin(chi)), amp * (p * N.sin(chi) + q * N.cos(chi))


def _bessel_table(x, nmax):
    """([J_0 .. J_nmax], [Y_0 .. Y_nmax]) at |x| (x > 0 lanes valid)."""
    switch = max(_SWITCH, float(nmax))
    nmax1 = max(nmax, 1)
    near = x <= switch
    xs, xf = N.where(near, x, 1.0), N.where(near, switch + 1.0, x)
    tiny = xs < 1e-8   # the leading terms of the series: (x / 2)**k / k!, and Y_0, Y_1 from them
    xm = N.where(tiny, 1.0, xs)
    js, y0_sum, y1_sum = _miller(xm, int(switch) + nmax1 + 40, nmax1)
    ys = list(_neumann_y(xm, js, y0_sum, y1_sum))
    js = [N.where(tiny, (0.5 * xs) ** k / math.factorial(k), j) for k, j in enumerate(js)]
    ys[0] = N.where(tiny, (2.0 / math.pi) * (N.log(0.5 * xs) + EULER_GAMMA), ys[0])
    ys[1] = N.where(tiny, -2.0 / (math.pi * xs), ys[1])
    far = [_hankel(order, xf) for order in (0, 1)]
    jf, yf = [far[0][0], far[1][0]], [far[0][1], far[1][1]]
    for k in range(1, nmax1):
        jf.append((2.0 * k / xf) * jf[k] - jf[k - 1])
    for k in range(1, nmax1):   # Y_n grows without bound as x -> 0: an infinite Y_k stays so
        ys.append(N.where(N.abs(ys[k]) == np.inf, ys[k], (2.0 * k / xs) * ys[k] - ys[k - 1]))
        yf.append((2.0 * k / xf) * yf[k] - yf[k - 1])
    return [N.where(near, a, b) for a, b in zip(js, jf)], [N.where(near, a, b) for a, b in zip(ys, yf)]


def _select(n, values):
    """values[|n|] per element, for the integer orders n (a float array)."""
    out = values[0]
    for k in range(1, len(values)):
        out = N.where(np.abs(n) == k, values[k], out)
    return out


def _integer_order(n, x, who, kind):
    n, nmax = _orders(n, who)
    x = _float(x)
    shape = np.broadcast_shapes(n.shape, N._shape(x))
    ax = N.abs(x)
    inside = (ax > 0) & (ax < np.inf)
    js, ys = _bessel_table(N.where(inside, ax, 1.0), nmax)
    odd = np.abs(n) % 2 == 1
    sign_neg = np.where(odd & (n < 0), -1.0, 1.0)   # J_{-n} = (-1)**n J_n, the same for Y
    if kind == "j":
        out = _select(n, js) * sign_neg
        out = N.where(x < 0, out * np.where(odd, -1.0, 1.0), out)   # J_n(-x) = (-1)**n J_n(x)
        out = N.where(ax == 0, np.where(n == 0, 1.0, 0.0), N.where(ax == np.inf, 0.0, out))
    else:
        out = _select(n, ys) * sign_neg
        out = N.where(x == 0, -np.inf * sign_neg, N.where(x == np.inf, 0.0, out))
        out = N.where(x < 0, np.nan, out)
    return N.broadcast_to(N.where(N.NUMPY_API["isnan"](x), np.nan, out), shape)


def jn(n, x):
    """The Bessel function of the first kind of integer order n (concrete ints):
    `special.jn(2, 1.0)` is about 0.1149."""
    return _integer_order(n, x, "jn", "j")


def yn(n, x):
    """The Bessel function of the second kind of integer order n, for x >= 0 (NaN below):
    `special.yn(0, 1.0)` is about 0.0883."""
    return _integer_order(n, x, "yn", "y")


def j0(x):
    """The Bessel function of the first kind of order 0: `special.j0(0.0) == 1.0`."""
    return jn(0, x)


def j1(x):
    """The Bessel function of the first kind of order 1 (odd): `special.j1(0.0) == 0.0`."""
    return jn(1, x)


def y0(x):
    """The Bessel function of the second kind of order 0 (x > 0; -inf at 0)."""
    return yn(0, x)


def y1(x):
    """The Bessel function of the second kind of order 1 (x > 0; -inf at 0)."""
    return yn(1, x)


def bessel_jn(z, *, v, n_iter=50):
    """J_0(z) .. J_v(z) stacked on a new first axis (JAX's signature; `n_iter` is accepted
    and not needed: the recurrence starts high enough for |z| and v):
    `special.bessel_jn(1.0, v=2)[2]` is `jn(2, 1.0)`."""
    if int(v) != v or v < 0:
        raise ArgumentError(f"bessel_jn: v={v!r}; give a non-negative int")
    return N.stack([jn(k, z) for k in range(int(v) + 1)], axis=0)


# -- modified Bessel functions of real order -------------------------------------------------------

def _iv_series_e(v, x):
    """exp(-x) I_v(x) for 0 < x <= 500 by the power series (positive terms)."""
    q = 0.25 * x * x

    def body(k, st):
        term, total = st
        term = term * q / (k * (k + v))
        return term, total + term
    first = N.ones_like(x)
    _, total = _loop(450, body, (first, first))
    return total * N.exp(v * N.log(0.5 * x) - N.lgamma(v + 1.0) - x)


def _iv_hankel_e(v, x):
    """exp(-x) I_v(x) for x > 500 by Hankel's series (orders well below sqrt(x))."""
    mu, term, total = 4.0 * v * v, 1.0, 1.0
    for k in range(1, 24):
        term = term * -(mu - (2 * k - 1) ** 2) / (k * 8.0 * x)
        total = total + term
    return total / N.sqrt(2.0 * math.pi * x)


def ive(v, x):
    """The exponentially scaled modified Bessel function exp(-|x|) I_v(x) of real order
    v >= 0 (x < 0 for integer v only; NaN otherwise): `special.ive(0.5, 1.0)`."""
    v, x = _float(v), _float(x)
    shape = np.broadcast_shapes(N._shape(v), N._shape(x))
    v, x = N.broadcast_to(v, shape), N.broadcast_to(x, shape)
    ax = N.abs(x)
    integer = v == N.NUMPY_API["floor"](v)
    valid = (v >= 0) & ((x >= 0) | integer)
    big = ax > 500.0
    vv = N.where(valid, v, 0.0)
    out = N.where(big, _iv_hankel_e(vv, N.where(big & (ax < np.inf), ax, 501.0)),
                  _iv_series_e(vv, N.where(big | (ax == 0), 1.0, ax)))
    out = N.where(ax == 0, N.where(v == 0, 1.0, 0.0), N.where(ax == np.inf, 0.0, out))
    odd = integer & (N.NUMPY_API["floor"](0.5 * vv) * 2.0 != vv)
    out = N.where((x < 0) & odd, -out, out)
    return N.where(valid & ~N.NUMPY_API["isnan"](x), out, np.nan)


def iv(v, x):
    """The modified Bessel function of the first kind I_v(x) of real order v >= 0:
    `special.iv(0, 0.0) == 1.0`."""
    x = _float(x)
    return ive(v, x) * N.exp(N.abs(x))
