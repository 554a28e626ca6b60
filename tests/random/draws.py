"""The table of `jax.random` draws the tests compare: name -> fn(r, key, dtype) with `r`
either module (jitad.random or jax.random), the same arguments for both."""
import numpy as np


def _f(dtype, *values):
    return [np.asarray(v, dtype) for v in values]


def table(dtype):
    """{name: fn(r, key)} for float dtype `dtype` (ints follow it: int32 with float32)."""
    ints = np.int32 if dtype == np.float32 else np.int64
    a = np.array([0.3, 1.0, 2.5, 7.0], dtype)
    logits = np.log(np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]], dtype))
    p = np.array([0.1, 0.2, 0.3, 0.4], dtype)
    return {
        "uniform": lambda r, k: r.uniform(k, (5, 3), dtype),
        "uniform_ab": lambda r, k: r.uniform(k, (7,), dtype, -2.0, 5.0),
        "normal": lambda r, k: r.normal(k, (40,), dtype),
        "truncated_normal": lambda r, k: r.truncated_normal(k, -1.0, 2.0, (20,), dtype),
        "randint": lambda r, k: r.randint(k, (20,), 3, 17, ints),
        "randint_wide": lambda r, k: r.randint(k, (20,), -5, 1000003, ints),
        "randint_u8": lambda r, k: r.randint(k, (10,), 0, 256, np.uint8),
        "bits8": lambda r, k: r.bits(k, (6,), np.uint8),
        "bits16": lambda r, k: r.bits(k, (6,), np.uint16),
        "permutation": lambda r, k: r.permutation(k, 12),
        "permutation_2d": lambda r, k: r.permutation(k, np.arange(15.0).reshape(5, 3), axis=1),
        "permutation_indep": lambda r, k: r.permutation(k, np.arange(15.0).reshape(5, 3), independent=True),
        "choice": lambda r, k: r.choice(k, 10, (4,), replace=False),
        "choice_p": lambda r, k: r.choice(k, 4, (30,), p=p),
        "choice_p_noreplace": lambda r, k: r.choice(k, 4, (3,), replace=False, p=p),
        "bernoulli": lambda r, k: r.bernoulli(k, dtype(0.3), (50,)),
        "bernoulli_high": lambda r, k: r.bernoulli(k, dtype(0.3), (20,), mode="high"),
        "categorical": lambda r, k: r.categorical(k, logits, shape=(4, 2)),
        "categorical_noreplace": lambda r, k: r.categorical(k, logits, axis=-1, shape=(2, 2), replace=False),
        "gumbel": lambda r, k: r.gumbel(k, (6,), dtype),
        "gumbel_high": lambda r, k: r.gumbel(k, (6,), dtype, mode="high"),
        "exponential": lambda r, k: r.exponential(k, (6,), dtype),
        "laplace": lambda r, k: r.laplace(k, (6,), dtype),
        "logistic": lambda r, k: r.logistic(k, (6,), dtype),
        "cauchy": lambda r, k: r.cauchy(k, (6,), dtype),
        "lognormal": lambda r, k: r.lognormal(k, dtype(0.5), (6,), dtype),
        "pareto": lambda r, k: r.pareto(k, dtype(3.0), (6,), dtype),
        "rayleigh": lambda r, k: r.rayleigh(k, dtype(2.0), (6,), dtype),
        "weibull_min": lambda r, k: r.weibull_min(k, dtype(2.0), dtype(1.5), (6,), dtype),
        "maxwell": lambda r, k: r.maxwell(k, (6,), dtype),
        "double_sided_maxwell": lambda r, k: r.double_sided_maxwell(k, dtype(1.0), dtype(2.0), (6,), dtype),
        "wald": lambda r, k: r.wald(k, dtype(1.5), (6,), dtype),
        "triangular": lambda r, k: r.triangular(k, dtype(-1.0), dtype(0.5), dtype(2.0), (6,), dtype),
        "rademacher": lambda r, k: r.rademacher(k, (8,), ints),
        "geometric": lambda r, k: r.geometric(k, dtype(0.3), (8,), ints),
        "gamma": lambda r, k: r.gamma(k, a, (3, 4), dtype),
        "loggamma": lambda r, k: r.loggamma(k, a, (4,), dtype),
        "beta": lambda r, k: r.beta(k, dtype(2.0), dtype(0.7), (6,), dtype),
        "dirichlet": lambda r, k: r.dirichlet(k, a, (2,), dtype),
        "chisquare": lambda r, k: r.chisquare(k, dtype(3.0), (6,), dtype),
        "f": lambda r, k: r.f(k, dtype(3.0), dtype(5.0), (6,), dtype),
        "t": lambda r, k: r.t(k, dtype(4.0), (6,), dtype),
        "generalized_normal": lambda r, k: r.generalized_normal(k, 1.5, (6,), dtype),
        "ball": lambda r, k: r.ball(k, 3, 2, (4,), dtype),
        "orthogonal": lambda r, k: r.orthogonal(k, 3, (2,), dtype),
        "multivariate_normal": lambda r, k: r.multivariate_normal(
            k, np.zeros(2, dtype), np.array([[2.0, 0.5], [0.5, 1.0]], dtype), (5,), dtype),
        "poisson": lambda r, k: r.poisson(k, np.array([0.0, 0.5, 3.0, 9.5, 12.0, 100.0], dtype), dtype=ints),
        "binomial": lambda r, k: r.binomial(k, np.array([5.0, 20.0, 100.0, 100.0], dtype),
                                            np.array([0.3, 0.4, 0.2, 0.9], dtype), dtype=dtype),
        "multinomial": lambda r, k: r.multinomial(k, dtype(20.0), p, shape=(3, 4), dtype=dtype),
    }
