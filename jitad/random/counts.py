"""Counting draws, as `jax.random`'s: Poisson, binomial, multinomial and geometric counts
(JAX's vectorized rejection loops: every element draws from the round's key until it is
accepted)."""
import numpy as np

from .. import numeric as N
from .. import numpy_api as A
from ..staging import WHILE, is_staged
from .core import _as, _cast, _default_int, _one_key, _shape, _threefry, split, uniform
from .discrete import _p_dtype


def _zeros(shape, name, like):
    """Zeros of dtype `name`, staged when `like` is."""
    z = np.zeros(shape, N.NUMPY_OF[name])
    return N.broadcast_to(N.convert(z, name), shape) if is_staged(like) else z


def _int_out(x, dtype):
    return _cast(x, _default_int() if dtype is None else dtype)


def poisson(key, lam, shape=None, dtype=None):
    """Poisson(lam) counts (int64 unless `dtype`), as `jax.random.poisson`: Knuth's product
    of float32 uniforms below lam = 10, Hormann's transformed rejection above.
    `jitad.random.poisson(key, 3.0, (4,))`."""
    key = _one_key(key, "poisson")
    shape = _shape("poisson", N._shape(lam) if shape is None else shape)
    name = "f32"   # JAX draws Poisson counts in float32 whatever lam's dtype
    lam = N.broadcast_to(_as(lam, name), shape)
    knuth = A.isnan(lam) | (lam < 10.0)
    small = _poisson_knuth(key, N.where(knuth, lam, 0.0), shape)
    large = _poisson_rejection(key, N.where(knuth, 1e5, lam), shape, name)
    out = N.where(lam == 0.0, 0, N.where(knuth, small, large))
    return _int_out(out, dtype)


def _poisson_knuth(key, lam, shape):
    """Knuth: count float32 uniforms until their product drops below exp(-lam)."""
    name = _p_dtype(lam)

    def step(carry):
        k, count, log_prod = carry
        k, sub = split(k)
        count = N.where(_as(log_prod, name) > -lam, count + 1, count)
        return k, count, log_prod + N.log(uniform(sub, shape, "f32"))
    init = (key, _zeros(shape, "i64", lam), _zeros(shape, "f32", lam))
    return WHILE(lambda c: A.any(_as(c[2], name) > -lam), step, init)[1] - 1


def _poisson_rejection(key, lam, shape, name):
    """Hormann's transformed rejection (PTRS), lam >= 10."""
    log_lam = N.log(lam)
    b = 0.931 + 2.53 * N.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def step(carry):
        k, out, done = carry
        k, k0, k1 = (_threefry(k, i) for i in range(3))
        u = uniform(k0, shape, name) - 0.5
        v = uniform(k1, shape, name)
        us = 0.5 - N.abs(u)
        kk = A.floor((2 * a / us + b) * u + lam + 0.43)
        s = N.log(v * inv_alpha / (a / (us * us) + b))
        t = -lam + kk * log_lam - N.lgamma(kk + 1)
        accept = ((us >= 0.07) & (v <= v_r)) | (~((kk < 0) | ((us < 0.013) & (v > us))) & (s <= t))
        return k, N.where(accept, kk, out), done | accept
    init = (key, _zeros(shape, name, lam) - 1.0, _zeros(shape, "bool", lam))
    return WHILE(lambda c: A.any(~c[2]), step, init)[1]


def geometric(key, p, shape=None, dtype=None):
    """The number of Bernoulli(p) trials up to the first success (int64 unless `dtype`),
    as `jax.random.geometric`: `jitad.random.geometric(key, 0.3, (4,))`."""
    shape = _shape("geometric", N._shape(p) if shape is None else shape)
    name = _p_dtype(p)
    u = uniform(key, shape, name)
    u = N.where(u == 0.0, 1.0, u)
    return _int_out(A.floor(N.log(u) / N.log1p(-_as(p, name))) + 1, dtype)


def _stirling_tail(k):
    """log k! - (Stirling's approximation): a table below 10, the series above."""
    table = np.array([0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                      0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
                      0.00925546218271273, 0.00833056343336287])
    small = k <= 9
    kc = N.clip(k, 0.0, 9.0)
    kp1sq = (kc + 1) * (kc + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (kc + 1)
    tab = N.take(_as(table, "f32" if getattr(k, "dtype", None) == np.float32 else "f64"), _cast(A.floor(kc), np.int64))
    return N.where(small, tab, approx)


def _binomial_inversion(key, count, prob, shape):
    """Sums of geometric gaps until they pass `count` (n p <= 10)."""
    log_q = N.log1p(-prob)

    def step(carry):
        k, num, total = carry
        sub, k = split(k)
        num = N.where(total <= count, num + 1, num)
        return k, num, total + A.ceil(N.log(uniform(sub, shape, _p_dtype(prob))) / log_q)
    init = (key, N.zeros_like(prob), N.zeros_like(prob))
    return WHILE(lambda c: A.any(c[2] <= count), step, init)[1] - 1


def _btrs(key, count, prob, shape):
    """Hormann's transformed rejection with squeeze (BTRS), n p > 10."""
    name = _p_dtype(prob)
    stddev = N.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = A.floor((count + 1) * prob)

    def step(carry):
        k, out, done = carry
        k, k0, k1 = (_threefry(k, i) for i in range(3))
        u = uniform(k0, shape, name) - 0.5
        v = uniform(k1, shape, name)
        us = 0.5 - N.abs(u)
        kk = A.floor((2 * a / us + b) * u + c)
        reject = (kk < 0) | (kk > count)
        lv = N.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * N.log((m + 1) / (r * (count - m + 1))) + (count + 1) * N.log((count - m + 1) / (count - kk + 1))
              + (kk + 0.5) * N.log(r * (count - kk + 1) / (kk + 1)) + _stirling_tail(m) + _stirling_tail(count - m)
              - _stirling_tail(kk) - _stirling_tail(count - kk))
        accept = ((us >= 0.07) & (v <= v_r)) | (~reject & (lv <= ub))
        return k, N.where(accept, kk, out), done | accept
    init = (key, N.zeros_like(prob) - 1.0, _zeros(shape, "bool", prob))
    return WHILE(lambda s: A.any(~s[2]), step, init)[1]


def binomial(key, n, p, shape=None, dtype=None):
    """Binomial(n, p) counts as floats (float64 unless `dtype`), as `jax.random.binomial`:
    inversion for n p <= 10, BTRS rejection above; NaN for a NaN or negative n or p < 0.
    `jitad.random.binomial(key, 10, 0.3, (4,))`."""
    key = _one_key(key, "binomial")
    shape = _shape("binomial", np.broadcast_shapes(N._shape(n), N._shape(p)) if shape is None else shape)
    name = _p_dtype(p)
    prob = N.broadcast_to(_as(p, name), shape)
    count = N.broadcast_to(_as(n, name), shape)
    low = prob < 0.5
    q = N.where(low, prob, 1.0 - prob)
    bad_count = A.isnan(count) | (count < 0.0)
    inf_count = N.abs(count) == np.inf
    bad_q = A.isnan(q) | (q < 0.0)
    q = N.where(bad_q, 0.01, q)
    inversion = bad_count | (count * q <= 10.0)
    count = A.floor(count)
    small = _binomial_inversion(key, N.where(inversion, count, 0.0), q, shape)
    large = _btrs(key, N.where(inversion, 1e4, count), N.where(inversion, 0.5, q), shape)
    out = N.where(inversion, small, large)
    invalid = bad_q | bad_count
    out = N.where(invalid, np.nan, N.where(inf_count, np.inf, out))
    out = N.where(low | bad_count | bad_q | inf_count, out, count - out)
    return _as(out, name if dtype is None else N._dtype_name(dtype, "random.binomial"))


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1):
    """Counts of `n` draws over the outcomes on `p`'s last axis (floats, float64 unless
    `dtype`), as `jax.random.multinomial`: one binomial per outcome, of what the earlier
    outcomes left. `unroll` is accepted and changes nothing (no loop is unrolled)."""
    key = _one_key(key, "multinomial")
    name = _p_dtype(p)
    shape = N._shape(p) if shape is None else _shape("multinomial", shape)
    left = N.broadcast_to(_as(n, name), shape[:-1])
    p = A.moveaxis(N.broadcast_to(_as(p, name), shape), -1, 0)
    rest = A.flip(A.cumsum(A.flip(p, 0), 0), 0)
    ratios = p / N.where(rest == 0.0, 1.0, rest)
    keys = split(key, shape[-1])
    counts = []
    for i in range(shape[-1]):
        c = binomial(keys[i], left, N.clip(ratios[i], 0.0, 1.0))
        left = left - c
        counts.append(c)
    out = N.stack(counts, axis=-1)
    return _as(out, name if dtype is None else N._dtype_name(dtype, "random.multinomial"))
