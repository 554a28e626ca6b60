"""jitad.random against jax.random: the same key gives JAX's draws, for every sampler in
the table of `draws.py`, with x64 (float64, int64) and without (float32, int32), eagerly
and staged; and the cases that once drew other numbers than JAX's."""
import numpy as np
import pytest
from .draws import table

import jitad
from jitad import random as R
from jitad.errors import JitadError

jax = pytest.importorskip("jax")
jr = jax.random

# Draws that pass through several libm calls (log, pow, sqrt, erf, erfinv, lgamma) or a QR
# may differ from XLA's by a few ulp; every other float draw is within 1 ulp.
ULPS = {"beta": 16, "wald": 24, "t": 12, "double_sided_maxwell": 8, "orthogonal": 64, "gamma": 8,
        "loggamma": 8, "dirichlet": 8, "f": 8, "chisquare": 6, "generalized_normal": 6, "ball": 6,
        "gumbel": 6, "gumbel_high": 6, "logistic": 6, "multivariate_normal": 4, "normal": 4,
        "truncated_normal": 16, "exponential": 3, "pareto": 3, "maxwell": 3, "lognormal": 3, "cauchy": 3,
        "laplace": 3, "rayleigh": 3, "weibull_min": 3}
SEEDS = (0, 1, 2024)


def _ulps(mine, theirs):
    info = np.finfo(theirs.dtype)
    scale = np.maximum(np.abs(theirs.astype(np.float64)), 1.0) * info.eps   # an ulp of 1 at least
    return np.max(np.abs(mine.astype(np.float64) - theirs) / scale, initial=0.0)


def _agree(name, mine, theirs):
    mine, theirs = np.asarray(mine), np.asarray(theirs)
    assert mine.shape == theirs.shape, (name, mine.shape, theirs.shape)
    if theirs.dtype.kind != "f":
        np.testing.assert_array_equal(mine, theirs, err_msg=name)
        return
    assert mine.dtype == theirs.dtype, (name, mine.dtype, theirs.dtype)
    np.testing.assert_array_equal(np.isnan(mine), np.isnan(theirs), err_msg=name)
    ok = ~np.isnan(theirs)
    assert _ulps(mine[ok], theirs[ok]) <= ULPS.get(name, 1), (name, _ulps(mine[ok], theirs[ok]), mine, theirs)


@pytest.fixture(params=[np.float64, np.float32], ids=["x64", "x32"])
def mode(request):
    """JAX's and jitad's x64 setting for the dtype; restored after."""
    dtype = request.param
    before = jitad.config.read("jax_enable_x64")
    jitad.config.update("jax_enable_x64", dtype == np.float64)
    with jax.enable_x64(dtype == np.float64):
        yield dtype
    jitad.config.update("jax_enable_x64", before)


# The default run compiles JAX's side of these (XLA takes seconds per rejection loop); the
# slow run, every sampler of the table in both modes.
QUICK = ("uniform", "uniform_ab", "normal", "truncated_normal", "randint", "randint_wide", "randint_u8", "bits16",
         "permutation", "permutation_indep", "choice", "choice_p", "bernoulli_high", "categorical_noreplace",
         "gumbel_high", "laplace", "logistic", "cauchy", "wald", "triangular", "rademacher", "geometric",
         "gamma", "poisson", "binomial", "orthogonal")


def test_samplers_give_jaxs_draws():
    with jax.enable_x64(True):
        _compare({n: fn for n, fn in table(np.float64).items() if n in QUICK}, np.float64)


@pytest.mark.slow
def test_every_sampler_gives_jaxs_draws(mode):
    _compare(table(mode), mode)


def _compare(draws, mode):
    theirs = jax.jit(lambda k: {n: fn(jr, k) for n, fn in draws.items()})
    for seed in SEEDS:
        expected = theirs(jr.PRNGKey(seed))
        for name, fn in draws.items():
            if mode == np.float32 and name.startswith("permutation_"):
                continue   # JAX's 32-bit mode turns a float64 array into float32; jitad keeps its dtype
            _agree(name, fn(R, R.key(seed)), expected[name])


STAGED = ("uniform_ab", "normal", "randint_wide", "permutation", "choice_p_noreplace", "categorical", "gamma",
          "beta", "poisson", "binomial", "multinomial", "bits8")


def test_staged_draws_are_the_eager_ones():
    draws = {n: fn for n, fn in table(np.float64).items() if n in STAGED}
    staged = jitad.jit(lambda k: [draws[n](R, k) for n in STAGED])(R.key(7))
    for name, got in zip(STAGED, staged):
        want = np.asarray(draws[name](R, R.key(7)))
        if want.dtype.kind == "f":
            assert _ulps(np.asarray(got), want) <= 2 * ULPS.get(name, 1), name
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


# -- the draws that once differed from JAX's ---------------------------------------------------

@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


def test_randint_spans_of_2_32_and_more(x64):
    for lo, hi in ((0, 2 ** 33), (-2 ** 40, 2 ** 40), (-2 ** 63, 2 ** 63 - 1), (5, 2 ** 32 + 5), (0, 2 ** 62 + 3)):
        mine = R.randint(R.key(3), (64,), lo, hi)
        np.testing.assert_array_equal(mine, jr.randint(jr.PRNGKey(3), (64,), lo, hi))
        assert len(np.unique(mine)) > 60


def test_bits_of_every_width(x64):
    for dtype in (np.uint8, np.uint16, np.uint32, np.uint64):
        mine = R.bits(R.key(5), (9,), dtype)
        assert mine.dtype == dtype
        np.testing.assert_array_equal(mine, jr.bits(jr.PRNGKey(5), (9,), dtype))
    with pytest.raises(JitadError, match="unsigned"):
        R.bits(R.key(5), (2,), np.int32)


def test_gamma_outside_its_domain_is_nan_as_jaxs(x64):
    a = np.array([-1.0, -0.5, 0.0, np.nan, np.inf, 1e-3, 1.0, 1e6])
    mine, theirs = R.gamma(R.key(1), a), np.asarray(jr.gamma(jr.PRNGKey(1), a))
    np.testing.assert_array_equal(np.isnan(mine), np.isnan(theirs))
    assert np.isnan(mine[0])
    ok = np.isfinite(theirs) & (theirs > 0)
    np.testing.assert_allclose(mine[ok], theirs[ok], rtol=1e-14)
    np.testing.assert_array_equal(mine[~ok & ~np.isnan(theirs)], theirs[~ok & ~np.isnan(theirs)])


def test_uniform_on_an_interval_rounds_once_as_jaxs(x64):
    for dtype in (np.float64, np.float32):
        for lo, hi in ((-2.0, 5.0), (1e-3, 1e3), (-7.5, -7.25)):
            mine = R.uniform(R.key(0), (200,), dtype, lo, hi)
            np.testing.assert_array_equal(mine, jr.uniform(jr.PRNGKey(0), (200,), dtype, lo, hi))
    staged = jitad.jit(lambda k: R.uniform(k, (7,), np.float64, -2.0, 5.0))(R.key(0))
    np.testing.assert_array_equal(staged, jr.uniform(jr.PRNGKey(0), (7,), np.float64, -2.0, 5.0))


def test_choice_without_replacement_weighted_in_float32(x64):
    p = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    for seed in SEEDS:
        np.testing.assert_array_equal(R.choice(R.key(seed), 4, (3,), replace=False, p=p),
                                      jr.choice(jr.PRNGKey(seed), 4, (3,), replace=False, p=p))


def test_beta_draws_are_jaxs(x64):
    mine = R.beta(R.key(0), np.array([2.0, 0.5, 30.0]), 3.0, (50, 3))
    np.testing.assert_allclose(mine, jr.beta(jr.PRNGKey(0), np.array([2.0, 0.5, 30.0]), 3.0, (50, 3)), rtol=1e-13)


def test_permutation_of_a_0d_float_names_the_fix():
    with pytest.raises(JitadError, match="int n"):
        R.permutation(R.key(0), np.array(5.0))
    np.testing.assert_array_equal(R.permutation(R.key(0), np.array(5)), R.permutation(R.key(0), 5))


def test_key_helpers():
    key = R.key(4)
    assert R.clone(key) == key and R.key_impl(key) == "threefry2x32" and R.key_dtype() == np.int64
    np.testing.assert_array_equal(R.wrap_key_data(R.key_data(R.split(key, 3))), R.split(key, 3))
    with pytest.raises(JitadError, match="threefry2x32"):
        R.key(0, impl="rbg")
