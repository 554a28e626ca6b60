"""Continuous draws, as `jax.random`'s: transforms of uniform and normal floats, and the
gamma family (Marsaglia and Tsang's rejection, each element with its own key, as JAX)."""
import numpy as np

from .. import linalg
from .. import numeric as N
from .. import numpy_api as A
from ..errors import ArgumentError, ShapeError
from ..staging import WHILE
from .core import (
    _as,
    _finfo,
    _float_dtype,
    _normal_of,
    _one_key,
    _shape,
    _threefry,
    _unit,
    normal,
    split,
    uniform,
)
from .discrete import rademacher


def _param_shape(who, shape, *params):
    """`shape`, or the broadcast shape of the parameters when it is None."""
    if shape is None:
        return np.broadcast_shapes(*(N._shape(p) for p in params))
    return _shape(who, shape)


def exponential(key, shape=(), dtype=None):
    """Standard exponential floats, as `jax.random.exponential`."""
    return -N.log1p(-uniform(key, _shape("exponential", shape), dtype))


def laplace(key, shape=(), dtype=None):
    """Standard Laplace floats, as `jax.random.laplace`."""
    name = _float_dtype(dtype, "laplace")
    u = uniform(key, _shape("laplace", shape), name, -1.0 + _finfo(name).epsneg, 1.0)
    return A.sign(u) * N.log1p(-N.abs(u))


def logistic(key, shape=(), dtype=None):
    """Standard logistic floats, as `jax.random.logistic`."""
    name = _float_dtype(dtype, "logistic")
    x = uniform(key, _shape("logistic", shape), name, _finfo(name).tiny, 1.0)
    return N.log(x) - N.log1p(-x)


def cauchy(key, shape=(), dtype=None):
    """Standard Cauchy floats, as `jax.random.cauchy`."""
    name = _float_dtype(dtype, "cauchy")
    u = uniform(key, _shape("cauchy", shape), name, _finfo(name).eps, 1.0)
    return A.tan(_as(np.pi, name) * (u - 0.5))


def lognormal(key, sigma=1.0, shape=None, dtype=None):
    """exp(sigma * normal), as `jax.random.lognormal`."""
    name = _float_dtype(dtype, "lognormal")
    return N.exp(normal(key, _param_shape("lognormal", shape, sigma), name) * _as(sigma, name))


def pareto(key, b, shape=None, dtype=None):
    """Pareto(b) floats (>= 1), as `jax.random.pareto`."""
    name = _float_dtype(dtype, "pareto")
    return N.exp(exponential(key, _param_shape("pareto", shape, b), name) / _as(b, name))


def rayleigh(key, scale, shape=None, dtype=None):
    """Rayleigh(scale) floats, as `jax.random.rayleigh`."""
    name = _float_dtype(dtype, "rayleigh")
    u = uniform(key, _param_shape("rayleigh", shape, scale), name)
    return _as(scale, name) * N.sqrt(N.log(u) * -2.0)


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    """Weibull floats (the inverse CDF of a uniform), as `jax.random.weibull_min`."""
    name = _float_dtype(dtype, "weibull_min")
    u = uniform(key, _shape("weibull_min", shape), name)
    return (-N.log1p(-u)) ** (1.0 / _as(concentration, name)) * _as(scale, name)


def maxwell(key, shape=(), dtype=None):
    """Maxwell floats (the length of a 3-D standard normal), as `jax.random.maxwell`."""
    z = normal(key, _shape("maxwell", shape) + (3,), dtype)
    return N.sqrt(N.sum(z * z, axis=-1))


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    """Maxwell floats with a random sign, times `scale` plus `loc`, as JAX's."""
    params = np.broadcast_shapes(N._shape(loc), N._shape(scale))
    shape = (_shape("double_sided_maxwell", shape) or params) + params
    k1, k2 = split(_one_key(key, "double_sided_maxwell"))
    name = _float_dtype(dtype, "double_sided_maxwell")
    sign = _as(rademacher(k2, shape), name)
    return sign * maxwell(k1, shape, name) * _as(scale, name) + _as(loc, name)


def wald(key, mean, shape=None, dtype=None):
    """Wald (inverse Gaussian) floats with `mean`, as `jax.random.wald`."""
    name = _float_dtype(dtype, "wald")
    shape = _param_shape("wald", shape, mean)
    k1, k2 = split(_one_key(key, "wald"))
    mean = N.broadcast_to(_as(mean, name), shape)
    y = normal(k1, shape, name) ** 2
    z = uniform(k2, shape, name)
    msq = mean * mean
    x = mean + msq * y / 2 - mean / 2 * N.sqrt(4 * mean * y + msq * (y * y))
    return N.where(z <= mean / (mean + x), x, msq / x)


def triangular(key, left, mode, right, shape=None, dtype=None):
    """Triangular floats on [left, right] peaking at `mode`, as `jax.random.triangular`."""
    name = _float_dtype(dtype, "triangular")
    shape = _param_shape("triangular", shape, left, mode, right)
    left, mode, right = (N.broadcast_to(_as(v, name), shape) for v in (left, mode, right))
    u = uniform(key, shape, name)
    width = right - left
    below = left + N.sqrt(u * width * (mode - left))
    above = right - N.sqrt((1 - u) * width * (right - mode))
    return N.where(u < (mode - left) / width, below, above)


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky"):
    """Normal vectors with `mean` (..., n) and covariance `cov` (..., n, n), as
    `jax.random.multivariate_normal` (`method` 'cholesky', 'eigh' or 'svd')."""
    name = _float_dtype(dtype, "multivariate_normal")
    n = N._shape(mean)[-1:]
    if not n or N._shape(cov)[-2:] != n + n:
        raise ShapeError(f"random.multivariate_normal: mean {N._shape(mean)} and cov {N._shape(cov)}; "
                         "they must be (..., n) and (..., n, n)")
    batch = np.broadcast_shapes(N._shape(mean)[:-1], N._shape(cov)[:-2])
    shape = batch if shape is None else _shape("multivariate_normal", shape)
    cov = _as(cov, name)
    if method == "cholesky":
        factor = linalg.cholesky(cov)
    elif method == "eigh":
        w, v = linalg.eigh(cov)
        factor = v * N.sqrt(w)[..., None, :]
    elif method == "svd":
        u, s, _ = linalg.svd(cov)
        factor = u * N.sqrt(s)[..., None, :]
    else:
        raise ArgumentError(f"random.multivariate_normal: method={method!r}; use 'cholesky', 'eigh' or 'svd'")
    z = normal(key, tuple(shape) + n, name)
    return _as(mean, name) + A.einsum("...ij,...j->...i", factor, z)


# -- the gamma family -----------------------------------------------------------------------

def _gamma_draws(key, a, name, log_space):
    """One Gamma(a) draw per element of `a` (or its log), each from its own key
    split(key, a.size)[i], by Marsaglia and Tsang's rejection as JAX runs it: a < 1 is
    boosted to a + 1 and scaled back by U**(1/a). The per-element loops run together,
    each element keeping its state once it is accepted."""
    shape = N._shape(a)
    keys = _threefry(key, np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape))
    boost = a >= 1.0
    alpha = N.where(boost, a, a + 1.0)
    d = alpha - _as(1.0 / 3.0, name)
    c = _as(1.0 / 3.0, name) / N.sqrt(d)

    def rejected(X, V, U):
        return (U >= 1.0 - _as(0.0331, name) * (X * X)) & (N.log(U) >= X * 0.5 + d * ((1.0 - V) + N.log(V)))

    def proposal(carry):   # JAX's inner loop: normals until 1 + c x > 0
        busy, k, x, v = carry
        k2, sub = _threefry(k, 0), _threefry(k, 1)
        x2 = _normal_of(_threefry(sub, 0), name)
        v2 = 1.0 + x2 * c
        return busy & (v2 <= 0.0), N.where(busy, k2, k), N.where(busy, x2, x), N.where(busy, v2, v)

    def attempt(carry):
        k, X, V, U = carry
        busy = rejected(X, V, U)
        k_next, x_key, u_key = _threefry(k, 0), _threefry(k, 1), _threefry(k, 2)
        init = (busy, x_key, N.zeros_like(d), N.where(busy, N.zeros_like(d) - 1.0, N.zeros_like(d) + 1.0))
        _, _, x, v = WHILE(lambda s: A.any(s[0]), proposal, init)
        U2 = _unit(_threefry(u_key, 0), name)
        return (N.where(busy, k_next, k), N.where(busy, x * x, X), N.where(busy, v * v * v, V),
                N.where(busy, U2, U))

    k, sub = _threefry(keys, 0), _threefry(keys, 1)
    zero = N.zeros_like(d)
    _, _, V, _ = WHILE(lambda s: A.any(rejected(*s[1:])), attempt, (k, zero, zero + 1.0, zero + 2.0))
    u = _unit(_threefry(sub, 0), name)
    if log_space:
        log_u = N.log1p(-u)
        log_boost = N.where(boost | (log_u == 0.0), 0.0, log_u * (1.0 / a))
        return N.log(d) + N.log(V) + log_boost
    return d * V * N.where(boost, 1.0, (1.0 - u) ** (1.0 / a))


def _gamma(key, a, shape, dtype, who, log_space):
    name = _float_dtype(dtype, who)
    shape = _param_shape(who, shape, a)
    a = N.broadcast_to(_as(a, name), shape)
    return _gamma_draws(_one_key(key, who), N.stop_gradient(a), name, log_space)


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) floats, as `jax.random.gamma` (its draws for the same key; a <= 0 or
    NaN gives NaN). No gradient flows to `a`: `jitad.random.gamma(key, 2.0, (3,))`."""
    return _gamma(key, a, shape, dtype, "gamma", False)


def loggamma(key, a, shape=None, dtype=None):
    """log of Gamma(a, 1) floats, computed in log space (accurate for tiny `a`), as
    `jax.random.loggamma`."""
    return _gamma(key, a, shape, dtype, "loggamma", True)


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) floats, as `jax.random.beta` (two log-gamma draws, normalized)."""
    shape = _param_shape("beta", shape, a, b)
    ka, kb = split(_one_key(key, "beta"))
    la, lb = loggamma(ka, a, shape, dtype), loggamma(kb, b, shape, dtype)
    top = N.maximum(la, lb)
    ea, eb = N.exp(la - top), N.exp(lb - top)
    return ea / (ea + eb)


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) vectors (the last axis), as `jax.random.dirichlet` (a softmax of
    log-gamma draws)."""
    alpha_shape = N._shape(alpha)
    if not alpha_shape:
        raise ShapeError("random.dirichlet: alpha must have at least one axis (the categories)")
    shape = _shape("dirichlet", alpha_shape[:-1] if shape is None else shape)
    g = loggamma(key, alpha, tuple(shape) + alpha_shape[-1:], dtype)
    return N.softmax(g, -1)


def chisquare(key, df, shape=None, dtype=None):
    """Chi-square(df) floats, as `jax.random.chisquare` (2 exp(loggamma(df / 2)))."""
    name = _float_dtype(dtype, "chisquare")
    return N.exp(loggamma(key, _as(df, name) / 2.0, shape, name)) * 2.0


def f(key, dfnum, dfden, shape=None, dtype=None):
    """F(dfnum, dfden) floats, as `jax.random.f` (a ratio of scaled chi-squares)."""
    name = _float_dtype(dtype, "f")
    kd, kn = split(_one_key(key, "f"))
    dfnum, dfden = _as(dfnum, name), _as(dfden, name)
    return (chisquare(kn, dfnum, shape, name) / dfnum) / (chisquare(kd, dfden, shape, name) / dfden)


def t(key, df, shape=None, dtype=None):
    """Student's t(df) floats, as `jax.random.t` (a normal over sqrt(gamma(df/2) / (df/2)))."""
    name = _float_dtype(dtype, "t")
    shape = _param_shape("t", shape, df)
    kn, kg = split(_one_key(key, "t"))
    half = _as(df, name) / 2.0
    return normal(kn, shape, name) * N.sqrt(half / gamma(kg, half, shape, name))


def generalized_normal(key, p, shape=(), dtype=None):
    """Generalized normal floats with exponent `p` (2: normal/sqrt(2), 1: Laplace), as JAX's."""
    name = _float_dtype(dtype, "generalized_normal")
    k1, k2 = split(_one_key(key, "generalized_normal"))
    shape = _shape("generalized_normal", shape)
    g = gamma(k1, 1.0 / _as(p, name), shape, name)
    return _as(rademacher(k2, shape), name) * g ** (1.0 / _as(p, name))


def ball(key, d, p=2, shape=(), dtype=None):
    """Points uniform in the d-dimensional unit p-norm ball, as `jax.random.ball`."""
    name = _float_dtype(dtype, "ball")
    if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ArgumentError(f"random.ball: d={d!r}; give the dimension as a positive int")
    shape = _shape("ball", shape)
    k1, k2 = split(_one_key(key, "ball"))
    g = generalized_normal(k1, p, shape + (int(d),), name)
    e = exponential(k2, shape, name)
    return g / ((N.sum(N.abs(g) ** p, axis=-1) + e) ** (1.0 / p))[..., None]


def orthogonal(key, n, shape=(), dtype=None, m=None):
    """Random matrices with orthonormal columns (n x m, m = n unless given) from the QR of
    a normal matrix, signs fixed by R's diagonal, as `jax.random.orthogonal`."""
    m = n if m is None else m
    shape = _shape("orthogonal", shape)
    z = normal(key, shape + (max(n, m), min(n, m)), dtype)
    q, r = linalg.qr(z)
    x = q * A.sign(A.diagonal(r, axis1=-2, axis2=-1))[..., None, :]
    return A.swapaxes(x, -1, -2) if n < m else x


def dropout(x, rate, key):
    """Zero each element with probability `rate` and scale the rest by 1/(1-rate)."""
    if isinstance(rate, (bool, np.bool_)) or not isinstance(rate, (int, float, np.integer, np.floating)) \
            or not 0.0 <= rate < 1.0:
        raise ArgumentError(f"`dropout`: rate={rate!r}; it must be a number in [0, 1)")
    if rate == 0.0:
        return x
    keep = uniform(key, N._shape(x)) >= rate
    return N.where(keep, x / (1.0 - rate), 0.0)
