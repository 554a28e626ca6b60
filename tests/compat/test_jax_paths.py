"""jitad.numpy, jitad.lax and jitad.scipy: JAX's and SciPy's module paths, compared with
JAX and SciPy on the same calls; derivatives with check_grads."""
import inspect
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad import grad, jit, lax
from jitad.scipy import linalg as jsl, signal as jsignal, special as jspecial, stats as jstats
from jitad.scipy.stats import norm
from jitad.testing import check_grads

jax = pytest.importorskip("jax", reason="JAX is the reference (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
import jax.numpy as xnp  # noqa: E402
scipy = pytest.importorskip("scipy")
import scipy.linalg as sla  # noqa: E402
import scipy.signal as ssignal  # noqa: E402
import scipy.special as sspecial  # noqa: E402
import scipy.stats as sstats  # noqa: E402

rng = np.random.default_rng(0)
X = rng.standard_normal((4, 5))


# -- jitad.numpy ---------------------------------------------------------------

def test_names_dtypes_constants():
    assert jnp.pi == np.pi and jnp.inf == np.inf and np.isnan(jnp.nan) and jnp.newaxis is None
    assert jnp.float32 is np.float32 and jnp.int32 is np.int32 and jnp.bool_ is np.bool_
    assert inspect.unwrap(jnp.linalg.solve) is jitad.linalg.solve   # the same function (its plain results `Array`s; complex values dispatched)
    for name in ["sin", "exp", "sum", "dot", "einsum", "where", "cumsum", "sort", "tril", "logaddexp",
                 "concatenate", "stack", "maximum", "argmax", "linspace", "absolute", "logical_and"]:
        assert callable(getattr(jnp, name)), name
    assert jnp.trace(np.eye(3)) == 3.0   # NumPy's trace, not jitad.trace
    from jitad.numpy.linalg import cholesky  # noqa: F401
    import jitad.numpy.random as npr
    assert npr.RandomState(0).randn(2).shape == (2,)


def test_zeros_have_at_outside_staging():
    z = jnp.zeros(3).at[0].set(1.0)
    np.testing.assert_array_equal(z, [1.0, 0.0, 0.0])
    assert isinstance(z, np.ndarray) and z.at[1].add(2.0)[1] == 2.0
    assert jnp.arange(4.0).at[jnp.array([1, 1])].add(1.0)[1] == 3.0
    assert jnp.asarray(np.ones(2)).at[1].get() == 1.0
    x = jnp.ones((2, 2))
    x[0, 0] = 5.0   # a NumPy array: in-place writes as autograd code does them
    assert (x + 1).at[0, 0].get() == 6.0
    assert isinstance(x, jnp.ndarray) and not isinstance(1.0, jnp.ndarray)
    kept = [x]
    x += 1.0   # a new array, as in JAX: the one kept is unchanged
    assert kept[0][0, 0] == 5.0 and x[0, 0] == 6.0 and type(x) is jnp.Array


def test_array_in_staged_code():
    table = np.arange(5.0) ** 2

    def f(x, i):   # a NumPy constant read at a staged index, an array of staged values
        return jnp.asarray(table)[i] * x + jnp.sum(jnp.array([[x, 1.0], [2.0, x * x]]) ** 2) \
            + jnp.zeros(3).at[i].set(x).sum()

    def fx(x, i):
        return xnp.asarray(table)[i] * x + xnp.sum(xnp.array([[x, 1.0], [2.0, x * x]]) ** 2) \
            + xnp.zeros(3).at[i].set(x).sum()
    fj, gj = jit(f), grad(f)
    for i in (0, 2):
        assert fj(1.5, i) == pytest.approx(float(fx(1.5, i)), rel=1e-14)
        assert gj(1.5, i) == pytest.approx(float(jax.jit(jax.grad(fx))(1.5, i)), rel=1e-14)
    assert jit(lambda x: jnp.array(x, dtype=jnp.float32))(np.ones(2)).dtype == np.float32
    assert jit(lambda x: jnp.ones_like(x, dtype=jnp.float32))(np.ones(2)).dtype == np.float32
    assert jit(lambda x: x.astype(jnp.int32) + 1)(np.array([1.7, 2.2])).tolist() == [2, 3]


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "greater", "less_equal",
                                  "logical_and", "logical_or", "logical_xor", "isclose"])
def test_binary_aliases_match_numpy(name):
    a, b = np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.0, 2.0, 2.0, 1.0])
    want = getattr(np, name)(a, b)
    np.testing.assert_array_equal(getattr(jnp, name)(a, b), want)
    np.testing.assert_array_equal(jit(getattr(jnp, name))(a, b), want)


def test_shape_helpers_and_allclose():
    f = jit(lambda x: jnp.ones(jnp.shape(x)[0]) * jnp.ndim(x) * jnp.size(x) + jnp.vdot(x, x) + jnp.cbrt(-8.0))
    np.testing.assert_allclose(f(X), np.full(4, 2 * 20 + np.vdot(X, X) - 2.0))
    assert jnp.allclose(X, X + 1e-9) and not jnp.allclose(X, X + 1e-3)
    assert jnp.result_type(np.float32(1), np.ones(2)) == np.float64
    np.testing.assert_allclose(jit(lambda x: jnp.dot(x, x.T, precision=lax.Precision.HIGH))(X), X @ X.T)
    np.testing.assert_allclose(jnp.einsum("ij,kj->ik", X, X, optimize=True), X @ X.T)


_A, _V = rng.standard_normal(6), rng.standard_normal(3)
_W = rng.random(5)
_NAN = X.copy()
_NAN[0, 0] = np.nan
NUMPY_CASES = [   # (name, call on a module, arguments): jnp's result, staged and plain, equals NumPy's
    ("convolve", lambda m, a, v: m.convolve(a, v, "same"), (_A, _V)),
    ("convolve", lambda m, a, v: m.convolve(a, v), (_V, _A)),
    ("correlate", lambda m, a, v: m.correlate(a, v, "full"), (_A, _V)),
    ("correlate", lambda m, a, v: m.correlate(a, v), (_V, _A)),
    ("searchsorted", lambda m, s, q: m.searchsorted(s, q, "right"), (np.sort(_A), np.append(_V, np.sort(_A)[2]))),
    ("average", lambda m, x, w: m.average(x, 1, w), (X, _W)),
    ("trapezoid", lambda m, y, x: m.trapezoid(y, np.cumsum(x)), (X, _W)),
    ("nanmean", lambda m, x: m.nanmean(x, 0), (_NAN,)),
    ("ptp", lambda m, x: m.ptp(x, 1), (X,)),
    ("fmod", lambda m, x: m.fmod(x, 0.3), (X,)),
    ("clip", lambda m, x: m.clip(x, min=-0.5), (X,)),
    ("logspace", lambda m, x: m.logspace(0.0, x, 4), (2.0,)),
]


@pytest.mark.parametrize("name,call,args", NUMPY_CASES, ids=[f"{c[0]}{i}" for i, c in enumerate(NUMPY_CASES)])
def test_more_numpy_names(name, call, args):
    want = call(np, *args)
    np.testing.assert_allclose(call(jnp, *args), want, rtol=1e-12)
    np.testing.assert_allclose(jit(lambda *a: call(jnp, *a))(*args), want, rtol=1e-12)


# -- jitad.lax -----------------------------------------------------------------

def test_while_loop_is_reverse_differentiable():
    def f(x):   # the number of steps depends on x; JAX's reverse mode refuses this loop
        return lax.while_loop(lambda c: c[0] < 10.0, lambda c: (c[0] * x, c[1] + 1), (1.0, 0))[0]
    assert grad(f)(3.0) == 27.0 and grad(f)(1.5) == pytest.approx(6 * 1.5 ** 5)
    assert jit(f)(3.0) == float(jax.lax.while_loop(lambda c: c[0] < 10.0, lambda c: (c[0] * 3.0, c[1] + 1),
                                                   (1.0, 0))[0])


def test_fori_loop_scan_cond_switch_map_match_jax():
    def program(lib, x, i):
        l = lib.lax
        s = l.fori_loop(0, 3, lambda k, s: s * 0.5 + x[k, k], x[0, 1])
        c, ys = l.scan(lambda c, r: (c + r.sum(), c * r), 0.0, x)
        b = l.cond(i > 1, lambda a, b: a * b, lambda a, b: a - b, s, c)
        w = l.switch(i, [lambda v: v.sum(), lambda v: (v * v).sum(), lambda v: v.max()], ys)
        m = l.map(lambda r: r @ r, x)
        return b + w + m.sum() + l.select(x > 0, x, -x).sum() + l.stop_gradient(s) * s
    f, g = jit(lambda x, i: program(jitad, x, i)), grad(lambda x, i: program(jitad, x, i))
    fx = jax.jit(jax.value_and_grad(lambda x, i: program(jax, x, i)))
    for i in (0, 1, 2, 7):   # a staged i: one compiled program
        want, want_grad = fx(xnp.asarray(X), i)
        assert f(X, i) == pytest.approx(float(want), rel=1e-13)
        np.testing.assert_allclose(g(X, i), want_grad, rtol=1e-12, atol=1e-12)
    assert lax.fori_loop(0, 4, lambda k, s: s + k, 0) == 6 and lax.cond(0, lambda: 1.0, lambda: 2.0) == 2.0


@pytest.mark.parametrize("start", [(0, 0), (1, 2), (3, 4), (-2, 9)])
def test_dynamic_slices_clamp_as_jax(start):
    u = -np.arange(6.0).reshape(2, 3)
    f = jit(lambda x, i, j: (lax.dynamic_slice(x, (i, j), (2, 3)), lax.dynamic_update_slice(x, u, (i, j)),
                             lax.dynamic_slice_in_dim(x, j, 2, axis=1), lax.dynamic_index_in_dim(x, i, 0, False),
                             lax.dynamic_update_index_in_dim(x, u[0, :2] @ np.ones((2, 5)), i, 0)))
    got = f(X, *start)
    i, j = start
    want = (jax.lax.dynamic_slice(X, (i, j), (2, 3)), jax.lax.dynamic_update_slice(X, u, (i, j)),
            jax.lax.dynamic_slice_in_dim(X, j, 2, axis=1), jax.lax.dynamic_index_in_dim(X, i, 0, False),
            jax.lax.dynamic_update_index_in_dim(X, u[0, :2] @ np.ones((2, 5)), i, 0))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(lax.dynamic_slice(X, (i, j), (2, 3)), want[0])   # eager


def test_dynamic_slice_gradients():
    check_grads(lambda x, u: (lax.dynamic_update_slice(x, u * u, (1, 2)) ** 2).sum()
                + lax.dynamic_slice(x, (2, 1), (2, 2)).sum() ** 2, (X, np.ones((2, 2))))
    check_grads(lambda x: jit(lambda x, i: lax.dynamic_slice_in_dim(x, i, 3) ** 3)(x, 1).sum(), (X[0],))


def test_check_grads_in_both_forms():
    from jitad.test_util import check_grads
    loss = lambda w, b: jnp.sum(jnp.tanh(X[:, :3] @ w + b) ** 2)
    check_grads(loss, (np.ones(3), 0.5), order=2)   # JAX's form
    check_grads(loss, 1, modes=["rev"])(np.ones(3), 0.5)   # autograd's, in argument 1
    with pytest.raises(AssertionError):   # a wrong derivative rule is caught
        check_grads(_wrong_grad, (0.7,), order=1, modes=["rev"])


@jitad.custom_vjp
def _wrong_grad(x):
    return jnp.sin(x)


_wrong_grad.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (g * 2.0,))


def test_precision_accepted():
    a = X[:2, :2]
    np.testing.assert_allclose(lax.dot(a, a, precision=lax.Precision.HIGHEST), a @ a)
    np.testing.assert_allclose(jit(lambda a: lax.batch_matmul(a, a))(np.stack([a, a])), np.stack([a @ a] * 2))


# -- jitad.scipy ---------------------------------------------------------------

def test_norm_and_special_match_scipy():
    x = np.array([-50.0, -21.0, -19.0, -3.0, 0.2, 4.0, 6.0, 30.0])
    np.testing.assert_allclose(norm.logpdf(x, 1.0, 2.0), sstats.norm.logpdf(x, 1.0, 2.0), rtol=1e-14)
    np.testing.assert_allclose(norm.pdf(x), sstats.norm.pdf(x), rtol=1e-13)
    np.testing.assert_allclose(norm.cdf(x), sstats.norm.cdf(x), rtol=1e-12)
    np.testing.assert_allclose(jit(norm.logcdf)(x), sstats.norm.logcdf(x), rtol=1e-12)
    np.testing.assert_allclose(norm.logsf(x), sstats.norm.logsf(x), rtol=1e-12)
    np.testing.assert_allclose(jspecial.log_ndtr(x), sspecial.log_ndtr(x), rtol=1e-12)
    np.testing.assert_allclose(jit(jspecial.logsumexp)(X), sspecial.logsumexp(X), rtol=1e-14)
    b = np.abs(X)
    np.testing.assert_allclose(jit(lambda x, b: jspecial.logsumexp(x, 0, b=b))(X, b),
                               sspecial.logsumexp(X, 0, b=b), rtol=1e-14)
    np.testing.assert_allclose(jspecial.logit(jspecial.expit(X)), X, rtol=1e-12)
    np.testing.assert_allclose(jit(jspecial.xlogy)(np.array([0.0, 2.0]), np.array([0.0, 3.0])), [0, 2 * np.log(3)])
    from jitad.scipy.misc import logsumexp
    assert logsumexp is jspecial.logsumexp
    check_grads(lambda x: norm.logcdf(x).sum() + norm.logpdf(x, 0.5, 1.5).sum(), (np.array([-30.0, -2.0, 1.0]),))
    mills = np.exp(sstats.norm.logpdf(x) - sstats.norm.logcdf(x))   # d/dx log cdf (JAX's is 3e-9 off at -21)
    np.testing.assert_allclose(grad(lambda x: norm.logcdf(x).sum())(x), mills, rtol=1e-11)


def test_distributions_match_scipy():
    x, u = rng.standard_normal(6), rng.uniform(size=6)
    a = X[:3, :3] @ X[:3, :3].T + np.eye(3)
    pts, mean = rng.standard_normal((5, 3)), rng.standard_normal(3)
    mvn = jstats.multivariate_normal
    np.testing.assert_allclose(jit(mvn.logpdf)(pts, mean, a), sstats.multivariate_normal.logpdf(pts, mean, a))
    np.testing.assert_allclose(mvn.pdf(pts[0], mean, a), sstats.multivariate_normal.pdf(pts[0], mean, a))
    np.testing.assert_allclose(mvn.logpdf(pts, mean, 2.0), sstats.multivariate_normal.logpdf(pts, mean, 2.0))
    check_grads(lambda m, c: mvn.logpdf(pts, m, c @ c.T + np.eye(3)).sum(), (mean, X[:3, :3]))
    pairs = [(jstats.t.logpdf(x, 3.0, 1.0, 2.0), sstats.t.logpdf(x, 3.0, 1.0, 2.0)),
             (jstats.gamma.logpdf(np.abs(x), 2.5, 0.0, 2.0), sstats.gamma.logpdf(np.abs(x), 2.5, 0.0, 2.0)),
             (jstats.beta.logpdf(u, 2.0, 3.0), sstats.beta.logpdf(u, 2.0, 3.0)),
             (jstats.poisson.logpmf(np.arange(6), 2.0), sstats.poisson.logpmf(np.arange(6), 2.0)),
             (jstats.bernoulli.pmf(np.array([0, 1, 1]), 0.3), sstats.bernoulli.pmf(np.array([0, 1, 1]), 0.3)),
             (jstats.dirichlet.logpdf(u[:3] / u[:3].sum(), [1.5, 2.0, 3.0]),
              sstats.dirichlet.logpdf(u[:3] / u[:3].sum(), [1.5, 2.0, 3.0])),
             (jstats.expon.logpdf(x), sstats.expon.logpdf(x)), (jstats.laplace.pdf(x), sstats.laplace.pdf(x)),
             (jstats.uniform.logpdf(u * 2, 0.5), sstats.uniform.logpdf(u * 2, 0.5))]
    for got, want in pairs:
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert jit(lambda mu: jstats.poisson.logpmf(np.arange(3), mu).sum())(2.0) == pytest.approx(
        sstats.poisson.logpmf(np.arange(3), 2.0).sum())
    h = 1e-6   # t's shape parameter may be staged (log-gamma is jitad.lgamma): its derivative
    want = (sstats.t.logpdf(0.5, 3.0 + h) - sstats.t.logpdf(0.5, 3.0 - h)) / (2 * h)
    assert jit(jitad.grad(lambda df: jstats.t.logpdf(0.5, df)))(3.0) == pytest.approx(want, rel=1e-7)


def test_scipy_linalg_conventions():
    a = X[:3, :3] @ X[:3, :3].T + np.eye(3)
    b = X[:3, :2]
    np.testing.assert_allclose(jsl.cholesky(a), sla.cholesky(a), rtol=1e-12)
    np.testing.assert_allclose(jit(lambda a: jsl.cholesky(a, lower=True))(a), sla.cholesky(a, lower=True))
    for lower in (False, True):
        np.testing.assert_allclose(jit(lambda a, b: jsl.cho_solve(jsl.cho_factor(a, lower), b))(a, b),
                                   sla.cho_solve(sla.cho_factor(a, lower), b), rtol=1e-12)
    np.testing.assert_allclose(jsl.solve(a, b, assume_a="pos"), sla.solve(a, b, assume_a="pos"), rtol=1e-12)
    np.testing.assert_allclose(jsl.solve_triangular(a, b, lower=True, unit_diagonal=True),
                               sla.solve_triangular(a, b, lower=True, unit_diagonal=True), rtol=1e-12)
    np.testing.assert_allclose(jsl.eigh(a, eigvals_only=True), sla.eigh(a, eigvals_only=True), rtol=1e-12)
    check_grads(lambda a, b: jsl.cho_solve(jsl.cho_factor(a @ a.T + np.eye(3)), b).sum(), (X[:3, :3], b))


@pytest.mark.parametrize("shapes", [((7,), (4,)), ((3,), (5,)), ((5, 6), (2, 3)), ((2, 3), (4, 5))])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_convolve_matches_scipy(shapes, mode):
    a, b = (rng.standard_normal(s) for s in shapes)
    want = ssignal.convolve(a, b, mode)
    np.testing.assert_allclose(jsignal.convolve(a, b, mode), want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(jit(lambda a, b: jsignal.convolve(a, b, mode))(a, b), want, rtol=1e-12, atol=1e-14)
    if mode == "full" and len(shapes[0]) == 2:
        check_grads(lambda a, b: (jsignal.convolve(a, b, mode) ** 2).sum(), (a, b))
