"""Random numbers from keys, as `jax.random`: counter-based (Threefry-2x32, JAX's
default generator), usable eagerly and inside staged code (jit, grad, vmap, loops).

A key is one int64 word holding JAX's two uint32 key words (high, low). `key(seed)`
and `PRNGKey(seed)` give the key [0, seed] of `jax.random.PRNGKey(seed)`; `split(key, n)`
gives an int64 array of shape (n,) of new keys (as JAX's typed keys: one array element
per key, where JAX's raw uint32 keys add an axis of 2). An int given as a key is a seed;
a JAX uint32 key array is accepted and packed. Every sampler follows JAX's algorithm on
the same bits, so the draws are JAX's for the same key (with x64 for float64 and int64):
bit for bit where the arithmetic is exact, within an ulp or two where a libm function
(log, erfinv's polynomial, pow) rounds differently. The default float dtype is float64.

>>> key = jitad.random.key(0)
>>> k1, k2 = jitad.random.split(key)
>>> u = jitad.random.uniform(k1, (3,))
"""
from .continuous import (ball, beta, cauchy, chisquare, dirichlet, double_sided_maxwell, dropout, exponential, f,
                         gamma, generalized_normal, laplace, loggamma, logistic, lognormal, maxwell,
                         multivariate_normal, orthogonal, pareto, rayleigh, t, triangular, wald, weibull_min)
from .core import (PRNGKey, bits, clone, fold_in, gumbel, key, key_data, key_dtype, key_impl, normal, split,
                   truncated_normal, uniform, wrap_key_data)
from .counts import binomial, geometric, multinomial, poisson
from .discrete import bernoulli, categorical, choice, permutation, rademacher, randint

__all__ = ["PRNGKey", "ball", "bernoulli", "beta", "binomial", "bits", "categorical", "cauchy", "chisquare", "choice",
           "clone", "dirichlet", "double_sided_maxwell", "dropout", "exponential", "f", "fold_in", "gamma",
           "generalized_normal", "geometric", "gumbel", "key", "key_data", "key_dtype", "key_impl", "laplace",
           "loggamma", "logistic", "lognormal", "maxwell", "multinomial", "multivariate_normal", "normal",
           "orthogonal", "pareto", "permutation", "poisson", "rademacher", "randint", "rayleigh", "split", "t",
           "triangular", "truncated_normal", "uniform", "wald", "weibull_min", "wrap_key_data"]

import functools as _functools  # noqa: E402
import inspect as _inspect  # noqa: E402

from ..config import config as _config, own_arithmetic as _own_arithmetic  # noqa: E402
from ..dtypes import requested_dtype as _requested_dtype  # noqa: E402


def _keeps_own_arithmetic(fn):
    """`fn` by 64-bit staging rules (the PRNG's keys are int64 words and its bit arithmetic
    counts in int64), with a 64-bit `dtype` asked for made 32-bit where jax_enable_x64 is
    off (its draws take JAX's 32-bit dtypes)."""
    names = list(_inspect.signature(fn).parameters)
    at = names.index("dtype") if "dtype" in names else None

    @_functools.wraps(fn)
    def run(*args, **kwargs):
        if at is not None and not _config._values["jax_enable_x64"]:
            if len(args) > at:
                args = args[:at] + (_requested_dtype(args[at], fn.__name__, warn=False),) + args[at + 1:]
            elif "dtype" in kwargs:
                kwargs["dtype"] = _requested_dtype(kwargs["dtype"], fn.__name__, warn=False)
        with _own_arithmetic():
            return fn(*args, **kwargs)
    return run


for _name in __all__:
    globals()[_name] = _keeps_own_arithmetic(globals()[_name])
del _name
