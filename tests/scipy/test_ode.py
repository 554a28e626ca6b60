"""jitad.experimental.ode.odeint against JAX's (x64): the solution for arrays and pytrees,
with hmax and mxstep, eager and staged; gradients with respect to y0, the times and the
arguments (the adjoint) against JAX's; autograd's `scipy.integrate.odeint` signature
against SciPy's and autograd's values; `trapezoid` against SciPy."""
import numpy as np
import pytest
import scipy.integrate as si

import jitad
import jitad.numpy as jnp
from jitad.experimental.ode import odeint
from jitad.scipy import integrate as I

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
from jax.experimental.ode import odeint as jax_odeint  # noqa: E402

TS = np.linspace(0.0, 3.0, 6)
Y0 = np.array([1.0, -0.5])
K = 1.3


def damped(np_):
    """A forced, damped oscillator in the namespace `np_` (jitad.numpy or jax.numpy)."""
    return lambda y, t, k: np_.stack([y[1], -k * y[0] - 0.3 * y[1] + np_.sin(t)])


def test_solution_matches_jaxs():
    mine = odeint(damped(jnp), Y0, TS, K)
    theirs = jax_odeint(damped(jax.numpy), Y0, TS, K)
    np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-13)
    loose = dict(rtol=1e-5, atol=1e-5, hmax=0.1, mxstep=200)
    np.testing.assert_allclose(odeint(damped(jnp), Y0, TS, K, **loose),
                               jax_odeint(damped(jax.numpy), Y0, TS, K, **loose), rtol=1e-12, atol=1e-13)
    staged = jitad.jit(lambda y0, ts, k: odeint(damped(jnp), y0, ts, k))(Y0, TS, K)
    np.testing.assert_allclose(staged, mine, rtol=1e-13, atol=1e-14)


def test_pytree_state():
    f = lambda s, t: {"x": s["v"], "v": -s["x"]}
    mine = odeint(f, {"x": 1.0, "v": 0.0}, TS)
    theirs = jax_odeint(f, {"x": 1.0, "v": 0.0}, TS)
    for name in ("x", "v"):
        np.testing.assert_allclose(mine[name], theirs[name], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(mine["x"], np.cos(TS), atol=1e-7)


def test_adjoint_gradients_match_jaxs():
    loss = lambda m, fn: lambda y0, ts, k: m.sum(fn(damped(m), y0, ts, k) ** 2)
    mine = jitad.grad(loss(jnp, odeint), argnums=(0, 1, 2))(Y0, TS, K)
    theirs = jax.grad(loss(jax.numpy, jax_odeint), argnums=(0, 1, 2))(Y0, TS, K)
    for got, want, name in zip(mine, theirs, ("y0", "t", "args")):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-11, err_msg=name)


def test_gradient_with_respect_to_a_pytree_argument_matches_jaxs():
    # (a network's parameters as a list of (weights, bias) pairs, as autograd's ode_net passes them)
    def field(np_):
        return lambda y, t, params: np_.tanh(np_.dot(y, params[0][0]) + params[0][1]) @ params[1]
    params = [(np.array([[0.3, -0.2], [0.1, 0.4]]), np.array([0.05, -0.1])), np.array([[1.0, 0.2], [-0.3, 0.8]])]

    def loss(odeint_, np_):
        return lambda p: np_.sum(odeint_(field(np_), Y0, TS, p) ** 2)
    mine = jitad.grad(loss(odeint, jnp))(params)
    theirs = jax.grad(loss(jax_odeint, jax.numpy))(params)
    for a, b in zip(jitad.tree_util.tree_leaves(mine), jax.tree_util.tree_leaves(theirs)):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_gradient_by_finite_differences():
    f = lambda k: odeint(lambda y, t, k: -k * y, 2.0, np.array([0.0, 0.5, 1.0]), k)[-1]
    eps = 1e-6
    fd = (f(0.7 + eps) - f(0.7 - eps)) / (2 * eps)
    np.testing.assert_allclose(jitad.grad(f)(0.7), fd, rtol=1e-6)
    np.testing.assert_allclose(jitad.grad(f)(0.7), -2.0 * np.exp(-0.7), rtol=1e-7)


def test_autograd_signature_agrees_with_scipy_and_autograd():
    pytest.importorskip("autograd")
    from autograd.scipy.integrate import odeint as ag_odeint
    f = lambda y, t, k: -k * y + jnp.cos(t)
    mine = I.odeint(f, Y0, TS, args=(K,))
    np.testing.assert_allclose(mine, si.odeint(lambda y, t, k: -k * y + np.cos(t), Y0, TS, args=(K,)), rtol=1e-6)
    import autograd.numpy as anp
    np.testing.assert_allclose(mine, ag_odeint(lambda y, t, k: -k * y + anp.cos(t), Y0, TS, (K,)), rtol=1e-6)
    g = jitad.grad(lambda k: jnp.sum(I.odeint(f, Y0, TS, args=(k,))))(K)   # (autograd's own fails on NumPy 2)
    want = jax.grad(lambda k: jax.numpy.sum(jax_odeint(lambda y, t, k: -k * y + jax.numpy.cos(t), Y0, TS, k,
                                                       rtol=1.49012e-8, atol=1.49012e-8)))(K)
    np.testing.assert_allclose(g, want, rtol=1e-9)


def test_trapezoid_against_scipy_and_jax():
    y = np.array([[1.0, 2.0, 4.0, -1.0], [0.0, 3.0, -1.0, 2.5]])
    x = np.array([0.0, 0.5, 2.0, 2.25])
    for kwargs in ({}, {"x": x}, {"dx": 0.3}, {"axis": 0}):
        np.testing.assert_allclose(I.trapezoid(y, **kwargs), si.trapezoid(y, **kwargs), rtol=1e-15)
        np.testing.assert_allclose(I.trapezoid(y, **kwargs), jax.scipy.integrate.trapezoid(y, **kwargs), rtol=1e-15)
    g = jitad.grad(lambda v: I.trapezoid(v * v, x=x))(y[0])
    np.testing.assert_allclose(g, jax.grad(lambda v: jax.scipy.integrate.trapezoid(v * v, x=x))(y[0]), rtol=1e-14)


def test_bad_times_name_the_fix():
    with pytest.raises(jitad.errors.JitadError, match="1-D"):
        odeint(lambda y, t: -y, 1.0, 1.0)
    with pytest.raises(jitad.errors.JitadError, match="floats"):
        odeint(lambda y, t: -y, 1.0, np.arange(3))


def test_helpers_at_jaxs_signatures():
    import jax.experimental.ode as jode

    from jitad.experimental import ode
    f, fj = (lambda y, t: -1.3 * y + jnp.sin(t)), (lambda y, t: -1.3 * y + jax.numpy.sin(t))
    f0, dt = f(Y0, 0.2), np.float64(0.1)
    mine = ode.runge_kutta_step(f, Y0, f0, 0.2, dt)
    theirs = jode.runge_kutta_step(fj, Y0, f0, 0.2, dt)
    for got, want in zip(mine, theirs):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-16)
    y1, k = mine[0], mine[3]
    np.testing.assert_allclose(ode.interp_fit_dopri(Y0, y1, k, dt), jode.interp_fit_dopri(Y0, y1, k, dt), rtol=1e-13)
    np.testing.assert_allclose(ode.initial_step_size(f, 0.2, Y0, 4, 1e-8, 1e-8, f0),
                               jode.initial_step_size(fj, 0.2, Y0, 4, 1e-8, 1e-8, f0), rtol=1e-14)
    err = mine[2]
    np.testing.assert_allclose(ode.mean_error_ratio(err, 1e-8, 1e-8, Y0, y1),
                               jode.mean_error_ratio(err, 1e-8, 1e-8, Y0, y1), rtol=1e-14)
    for ratio in np.array([0.0, 0.5, 3.0]):
        np.testing.assert_allclose(ode.optimal_step_size(dt, ratio), jode.optimal_step_size(dt, ratio), rtol=1e-14)
    np.testing.assert_allclose(ode.abs2(Y0), jode.abs2(Y0))
    coeffs = ode.fit_4th_order_polynomial(Y0, y1, 0.5 * (Y0 + y1), f0, mine[1], dt)
    for got, want in zip(coeffs, jode.fit_4th_order_polynomial(Y0, y1, 0.5 * (Y0 + y1), f0, mine[1], dt)):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-16)
    flat = ode.ravel_first_arg(lambda s, t: {"x": s["x"] * t}, lambda v: {"x": v})
    np.testing.assert_allclose(flat(Y0, 2.0), 2.0 * Y0)


def test_module_utilities_as_jaxs():
    import jax.experimental.ode as jode

    from jitad.experimental import ode
    assert list(ode.map(abs, [-1, 2])) == list(jode.map(abs, [-1, 2]))
    assert list(ode.zip([1, 2], "ab")) == list(jode.zip([1, 2], "ab"))
    assert ode.safe_map(lambda a, b: a + b, [1, 2], [3, 4]) == list(jode.safe_map(lambda a, b: a + b, [1, 2], [3, 4]))
    assert ode.safe_zip([1, 2], [3, 4]) == list(jode.safe_zip([1, 2], [3, 4]))
    with pytest.raises(jitad.errors.JitadError, match="lengths"):
        ode.safe_zip([1, 2], [3])
    tree = {"a": 1.0, "b": (2.0, 3.0)}
    assert ode.tree_leaves(tree) == jode.tree_leaves(tree)
    assert ode.tree_map(lambda v: 2 * v, tree) == jode.tree_map(lambda v: 2 * v, tree)
    for args in ((1, 2.0), (np.float32(1.0), np.float32(2.0)), (True, 3)):
        mine, theirs = ode.promote_dtypes_inexact(*args), jode.promote_dtypes_inexact(*args)
        assert [m.dtype for m in mine] == [t.dtype for t in theirs], args
        np.testing.assert_array_equal(mine, theirs)
