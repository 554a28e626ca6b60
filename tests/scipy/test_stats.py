"""jitad.scipy.stats against SciPy and JAX (x64): every method JAX's distribution modules
have, on a grid of points with its edges (outside the support, 0 and 1 for quantiles),
gradients of the log-densities against JAX's, and the summary functions."""
import numpy as np
import pytest
import scipy.stats as ss

import jitad
from jitad.scipy import stats as S

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jst = jax.scipy.stats

X = np.array([-3.0, -0.5, 0.0, 0.2, 0.7, 1.0, 2.5, 9.0])
Q = np.array([0.0, 1e-8, 0.1, 0.5, 0.9, 1.0])
K = np.array([-1.0, 0.0, 1.0, 2.0, 5.0, 12.0])
UNIT_X = np.array([-0.1, 0.0, 0.1, 0.4, 0.9, 1.0, 1.1])

# name: (arguments after x, the points x, the quantile arguments or None)
TABLE = {
    "norm": ((0.3, 1.5), X, (0.3, 1.5)), "expon": ((0.5, 2.0), X, (0.5, 2.0)), "laplace": ((0.3, 1.5), X, (0.3, 1.5)),
    "logistic": ((0.3, 1.5), X, (0.3, 1.5)), "uniform": ((-1.0, 3.0), X, (-1.0, 3.0)),
    "cauchy": ((0.3, 1.5), X, (0.3, 1.5)), "gamma": ((2.5, 0.1, 1.3), X, None), "beta": ((2.5, 0.7), UNIT_X, None),
    "chi2": ((3.0,), X, None), "pareto": ((2.0, 0.5), X + 2.0, (2.0, 0.5)), "truncnorm": ((-1.0, 2.0), X, None),
    "t": ((4.0, 0.2, 1.5), X, None), "bernoulli": ((0.3,), K, (0.3,)), "poisson": ((2.5,), K, None),
    "geom": ((0.3,), K, None), "binom": ((10.0, 0.3), K, None), "nbinom": ((3.0, 0.4), K, None),
    "betabinom": ((10.0, 2.0, 3.0), K, None), "wrapcauchy": ((0.4,), np.abs(X), None),
    "gumbel_r": ((0.3, 1.5), X, (0.3, 1.5)), "gumbel_l": ((0.3, 1.5), X, (0.3, 1.5)),
    "gennorm": ((1.5,), np.append(X, [-np.inf, np.inf]), None), "vonmises": ((2.0,), X, None),
}
QUANTILES = ("ppf", "isf")
# JAX strays from SciPy by this much in some of its methods (betabinom's betaln, isf's
# ndtri, t's lgamma); jitad agrees with SciPy to 1e-12 and with JAX to this.
JAX_RTOL = 1e-6


def _methods(name):
    """The methods JAX's module has (SciPy's where JAX lacks the distribution)."""
    module = getattr(jst, name, None)
    source = module if module is not None else getattr(ss, name)
    return [m for m in ("pdf", "logpdf", "pmf", "logpmf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf")
            if hasattr(source, m)]


def _close(got, want, rtol, msg, atol=1e-300):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=msg)
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=rtol, atol=atol, err_msg=msg)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_every_method_against_scipy_and_jax(name):
    params, points, qparams = TABLE[name]
    for method in _methods(name):
        quantile = method in QUANTILES
        args = (Q,) + qparams if quantile else (points,) + params
        mine = getattr(getattr(S, name), method)(*args)
        scipy_dist = getattr(ss, name)
        with np.errstate(all="ignore"):
            want = getattr(scipy_dist, method)(*args)
        if not (name == "bernoulli" and method == "ppf"):   # SciPy's ppf(0) is -1, JAX's (followed) 0
            _close(mine, want, 1e-12, f"{name}.{method} vs SciPy")
        if hasattr(jst, name):   # (JAX's quantiles at 0 and 1 are NaN for some; SciPy's ±inf, followed)
            inner = slice(1, -1) if quantile else slice(None)
            theirs = np.asarray(getattr(getattr(jst, name), method)(*args))
            _close(np.asarray(mine)[inner], theirs[inner], JAX_RTOL, f"{name}.{method} vs JAX", atol=1e-100)


def test_staged_methods_are_the_eager_ones():
    cases = [(name, m) for name in sorted(TABLE) for m in _methods(name)]

    def run():
        out = []
        for name, m in cases:
            params, points, qparams = TABLE[name]
            args = (Q,) + qparams if m in QUANTILES else (points,) + params
            out.append(getattr(getattr(S, name), m)(*args))
        return out
    for (name, m), got, want in zip(cases, jitad.jit(run)(), run()):
        _close(got, want, 1e-12, f"{name}.{m}")


GRADS = [("norm", "logcdf", (0.7, 0.3, 1.5)), ("norm", "logpdf", (0.7, 0.3, 1.5)), ("norm", "ppf", (0.2, 0.3, 1.5)),
         ("expon", "logsf", (0.7, 0.5, 2.0)), ("logistic", "logpdf", (0.7, 0.3, 1.5)),
         ("cauchy", "logcdf", (0.7, 0.3, 1.5)), ("gamma", "logpdf", (1.7, 2.5, 0.1, 1.3)),
         ("gamma", "cdf", (1.7, 2.5, 0.1, 1.3)), ("beta", "logpdf", (0.3, 2.5, 0.7)), ("beta", "cdf", (0.3, 2.5, 0.7)),
         ("chi2", "logpdf", (1.7, 3.0)), ("pareto", "logpdf", (3.1, 2.0, 0.5)), ("t", "logpdf", (0.7, 4.0, 0.2, 1.5)),
         ("truncnorm", "logpdf", (0.7, -1.0, 2.0)), ("truncnorm", "logcdf", (0.7, -1.0, 2.0)),
         ("poisson", "logpmf", (3.0, 2.5)), ("binom", "logpmf", (3.0, 10.0, 0.3)), ("nbinom", "logpmf", (3.0, 3.0, 0.4)),
         ("gumbel_r", "logcdf", (0.7, 0.3, 1.5)), ("gumbel_l", "logcdf", (0.7, 0.3, 1.5)),
         ("gennorm", "logpdf", (-0.7, 1.5)), ("gennorm", "cdf", (-0.7, 1.5)), ("vonmises", "logpdf", (0.7, 2.0))]


@pytest.mark.parametrize("name,method,point", GRADS, ids=[f"{n}.{m}" for n, m, _ in GRADS])
def test_gradients_against_jax(name, method, point):
    wrt = tuple(i for i, v in enumerate(point) if not (name in ("poisson", "binom", "nbinom") and i == 0))
    if method == "cdf" and name in ("gamma", "beta"):
        wrt = (0,)   # JAX differentiates its incomplete functions in x only
    mine = jitad.grad(getattr(getattr(S, name), method), argnums=wrt)(*point)
    theirs = jax.grad(getattr(getattr(jst, name), method), argnums=wrt)(*point)
    np.testing.assert_allclose(mine, theirs, rtol=1e-7, err_msg=f"{name}.{method}")


def test_summaries():
    a = np.array([[3.0, 1.0, 4.0, 1.0, 5.0], [9.0, 2.0, 6.0, 5.0, 3.0]])
    for axis in (0, 1, None):
        np.testing.assert_allclose(S.sem(a, axis=axis), ss.sem(a, axis=axis), rtol=1e-14)
        np.testing.assert_allclose(S.sem(a, axis=axis), jst.sem(a, axis=axis), rtol=1e-14)
    for method in ("average", "min", "max", "dense", "ordinal"):
        np.testing.assert_array_equal(S.rankdata(a, method), ss.rankdata(a, method), err_msg=method)
        np.testing.assert_array_equal(S.rankdata(a, method, axis=1), ss.rankdata(a, method, axis=1), err_msg=method)
        np.testing.assert_array_equal(S.rankdata(a, method), jst.rankdata(a, method), err_msg=method)
    staged = jitad.jit(lambda v: S.rankdata(v, "average"))(a)
    np.testing.assert_array_equal(staged, ss.rankdata(a))


def test_multinomial_pmf():
    x, p = np.array([[2.0, 1.0, 1.0], [0.0, 4.0, 0.0], [1.0, 1.0, 1.0]]), np.array([0.2, 0.5, 0.3])
    np.testing.assert_allclose(S.multinomial.logpmf(x, 4.0, p), ss.multinomial.logpmf(x, 4, p), rtol=1e-13)
    np.testing.assert_allclose(S.multinomial.pmf(x, 4.0, p), ss.multinomial.pmf(x, 4, p), rtol=1e-13)


def test_multivariate_normal_entropy():
    cov = np.array([[2.0, 0.3], [0.3, 0.5]])
    np.testing.assert_allclose(S.multivariate_normal.entropy(np.zeros(2), cov),
                               ss.multivariate_normal(np.zeros(2), cov).entropy(), rtol=1e-14)
    ag = pytest.importorskip("autograd.scipy.stats.multivariate_normal")
    np.testing.assert_allclose(S.multivariate_normal.entropy(np.zeros(2), cov), ag.entropy(np.zeros(2), cov), rtol=1e-14)


def test_vonmises_needs_a_positive_concentration():
    assert np.isnan(S.vonmises.logpdf(1.0, -1.0)) and np.isnan(jst.vonmises.logpdf(1.0, -1.0))


@pytest.mark.parametrize("axis,keepdims", [(0, False), (1, True), (None, False)])
def test_mode_against_scipy_and_jax(axis, keepdims):
    a = np.array([[1, 2, 1, 3, 2, 1], [3, 1, 3, 2, 1, 3], [1, 2, 2, 3, 1, 2]])
    for x in (a, a * 0.5 - 1.0):
        mine = S.mode(x, axis=axis, keepdims=keepdims)
        want = ss.mode(x, axis=axis, keepdims=keepdims)
        theirs = jst.mode(x, axis=axis, keepdims=keepdims)
        for got in (mine, jitad.jit(lambda v: S.mode(v, axis=axis, keepdims=keepdims))(x)):
            np.testing.assert_array_equal(got.mode, want.mode)
            np.testing.assert_array_equal(got.count, want.count)
        np.testing.assert_array_equal(mine.mode, theirs.mode)


def test_dirichlet_rvs_draws_as_scipy():
    alpha = np.array([1.5, 2.0, 3.0])
    np.random.seed(3)
    mine = S.dirichlet.rvs(alpha, size=2)
    np.random.seed(3)
    np.testing.assert_array_equal(mine, ss.dirichlet.rvs(alpha, size=2))
    np.testing.assert_array_equal(S.dirichlet.rvs(alpha, size=1, random_state=5), ss.dirichlet.rvs(alpha, size=1, random_state=5))
    assert S.dirichlet.rvs(alpha, size=(4, 2)).shape == (4, 2, 3)


@pytest.mark.slow
def test_t_cdf_against_scipy_with_gradients():   # autograd's and SciPy's `t.cdf` (JAX's t has none)
    from jitad.testing import check_grads
    x, df = np.array([-3.0, -0.5, 0.1, 0.7, 2.0, 10.0]), np.array([2.5, 3.0, 4.0, 7.0, 30.0, 3.3])
    np.testing.assert_allclose(S.t.cdf(x, df, 0.2, 1.5), ss.t.cdf(x, df, 0.2, 1.5), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(S.t.logcdf(x, df), ss.t.logcdf(x, df), rtol=1e-12)
    check_grads(lambda x, loc: S.t.cdf(x, df, loc, 1.5), (x, 0.3), order=2, modes=("fwd", "rev"))


@pytest.mark.slow
def test_dirichlet_differentiable_in_alpha_against_jax():
    jax = pytest.importorskip("jax")
    import jax.scipy.stats as jss
    x, alpha = np.array([0.2, 0.3, 0.5]), np.array([1.5, 2.0, 0.7])
    np.testing.assert_allclose(S.dirichlet.logpdf(x, alpha), ss.dirichlet.logpdf(x, alpha), rtol=1e-12)
    np.testing.assert_allclose(jitad.grad(S.dirichlet.logpdf, argnums=1)(x, alpha),
                               jax.grad(jss.dirichlet.logpdf, argnums=1)(x, alpha), rtol=1e-10)


def test_multivariate_normal_singular_covariance_against_scipy():
    cov = np.zeros((4, 4))
    cov[:2, :2] = [[1.0, 0.3], [0.3, 1.0]]
    x, mean = np.array([[0.3, -0.2, 0.0, 0.0], [1.0, 2.0, 0.0, 0.0], [0.1, 0.1, 0.5, 0.0]]), np.zeros(4)
    np.testing.assert_allclose(S.multivariate_normal.logpdf(x, mean, cov, allow_singular=True),
                               ss.multivariate_normal.logpdf(x, mean, cov, allow_singular=True), rtol=1e-12)
    full = RNG_SINGULAR.normal(size=(3, 3))
    full = full @ full.T + np.eye(3)   # (a regular covariance: the same as without allow_singular)
    np.testing.assert_allclose(S.multivariate_normal.logpdf(x[:, :3], 1.0, full, allow_singular=True),
                               S.multivariate_normal.logpdf(x[:, :3], 1.0, full), rtol=1e-12)
    np.testing.assert_allclose(jitad.grad(lambda v: S.multivariate_normal.logpdf(v, mean, cov, allow_singular=True))(x[0]),
                               -np.linalg.pinv(cov) @ x[0], rtol=1e-12, atol=1e-15)


RNG_SINGULAR = np.random.default_rng(7)


def test_multivariate_normal_logpdf_of_plain_arrays_is_scipys_shaped_as_jitads():
    """An eager call on plain float64 arrays runs SciPy's function (its values to the bit),
    shaped as jitad's (a single row keeps its axis), agreeing with the staged density; where
    SciPy reads the arguments otherwise (a vector against a scalar covariance: samples to
    SciPy, one point to jitad) or refuses (a singular covariance), jitad's own path runs."""
    a = RNG_SINGULAR.normal(size=(3, 3))
    cov, mean = a @ a.T + np.eye(3), np.array([0.1, -0.4, 0.3])
    x = RNG_SINGULAR.normal(size=(2, 4, 3))
    for point, m in ((x[0, 0], None), (x[0, :1], mean), (x[0], mean), (x, None)):
        got = S.multivariate_normal.logpdf(point, m, cov)
        assert type(got) is jitad.numpy.Array and got.shape == point.shape[:-1]
        want = ss.multivariate_normal.logpdf(point, m, cov)
        np.testing.assert_array_equal(got, np.reshape(want, point.shape[:-1]))
        staged = jitad.jit(lambda p, c, m=m: S.multivariate_normal.logpdf(p, m, c))(point, cov)
        np.testing.assert_allclose(got, staged, rtol=1e-12)
    one_point = S.multivariate_normal.logpdf(np.array([0.3, -0.2]), None, 2.0)
    np.testing.assert_allclose(one_point, ss.multivariate_normal.logpdf([0.3, -0.2], None, 2.0 * np.eye(2)), rtol=1e-14)
    scalar_mean = S.multivariate_normal.logpdf(x[0], 0.5, cov)   # (to SciPy, a 1-d variable)
    np.testing.assert_allclose(scalar_mean, ss.multivariate_normal.logpdf(x[0], np.full(3, 0.5), cov), rtol=1e-12)
    singular = np.ones((2, 2))   # (SciPy raises; jitad's own eager path is the staged code's meaning)
    np.testing.assert_array_equal(S.multivariate_normal.logpdf(np.array([0.3, 0.3]), None, singular),
                                  jitad.jit(S.multivariate_normal.logpdf)(np.array([0.3, 0.3]), None, singular))
