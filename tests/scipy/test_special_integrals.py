"""The exponential, sine/cosine, Fresnel and Dawson integrals, Spence's function and Owen's T
against SciPy (values, edge values included) and JAX (x64; values where JAX is accurate,
gradients), staged values against eager ones, and gradients with `check_grads`."""
import numpy as np
import pytest
import scipy.special as ss

import jitad
from jitad.scipy import special as S
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
js = jax.scipy.special

# the seams of each function's branches are in these: 1 (series / fraction of E_n), 4 (Si, Ci),
# 1.5 (Fresnel), 6 (Dawson), 40 (Ei), 0.5 and 1.5 and 2 (Spence)
X = np.array([0.0, -0.0, 1e-300, 1e-10, 0.1, 0.5, 1.0, 1.0000001, 1.4999, 1.5001, 2.0, 3.999, 4.001, 5.9, 6.1,
              10.0, 39.9, 40.1, 100.0, 700.0, np.inf, -0.5, -3.0, -50.0, -np.inf, np.nan])
H = np.array([0.0, 0.1, 0.5, 1.0, 2.0, 5.0, 8.0, -1.0, np.inf, np.nan])
A = np.array([0.0, 0.3, 1.0, 1.5, 10.0, -2.0, np.inf])

# name: (arguments, SciPy's values, rtol)
TABLE = {
    "exp1": ((X,), ss.exp1, 1e-13),
    "expi": ((X,), ss.expi, 1e-13),
    "expn": ((np.array([[0.0], [1.0], [2.0], [5.0], [30.0], [-1.0]]), X), ss.expn, 1e-13),
    "dawsn": ((X,), ss.dawsn, 1e-13),
    "spence": ((X,), ss.spence, 1e-13),
    "owens_t": ((H[:, None], A), ss.owens_t, 1e-13),
}
PAIRS = {"sici": ss.sici, "fresnel": ss.fresnel}


def _close(got, want, rtol, msg):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=msg)
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=rtol, atol=1e-300, err_msg=msg)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_values_against_scipy(name):
    args, ref, rtol = TABLE[name]
    _close(getattr(S, name)(*args), ref(*args), rtol, name)


def test_expn_of_a_fractional_order_is_nan():
    assert np.isnan(S.expn(1.5, 1.0))   # SciPy truncates the order (with a warning)


@pytest.mark.parametrize("name", sorted(PAIRS))
def test_pairs_against_scipy(name):
    finite = X[np.abs(X) < 500]   # cos(pi x**2 / 2) of a large x keeps few digits in either
    for k, (got, want) in enumerate(zip(getattr(S, name)(finite), PAIRS[name](finite))):
        _close(got, want, 1e-13, f"{name}[{k}]")
    edges = np.array([np.inf, -np.inf, np.nan])
    for got, want in zip(getattr(S, name)(edges), PAIRS[name](edges)):
        _close(got, want, 0, f"{name} at inf, nan")


@pytest.mark.slow   # JAX compiles each of its functions (seconds)
def test_values_against_jax_inside_the_domain():
    x = np.array([0.1, 0.5, 1.0, 2.0, 3.9, 4.1, 10.0, 39.0, 41.0])
    for name in ("exp1", "expi", "dawsn", "spence"):
        _close(getattr(S, name)(x), getattr(js, name)(x), 1e-13, name)
    _close(S.expn(3, x), js.expn(3, x), 1e-13, "expn")
    for name in ("sici", "fresnel"):
        for got, want in zip(getattr(S, name)(x), getattr(js, name)(x)):
            _close(got, want, 1e-13, name)
    h, a = np.array([0.3, 1.0, 2.0, 4.0]), np.array([0.5, 2.0, 1.2, 0.9])
    _close(S.owens_t(h, a), js.owens_t(h, a), 1e-13, "owens_t")


def test_staged_values_are_the_eager_ones():
    x = np.array([0.0, 0.3, 1.2, 3.0, 4.5, 7.0, 45.0, -2.0])
    fns = [S.exp1, S.expi, S.dawsn, S.spence, lambda v: S.expn(2.0, v), lambda v: S.sici(v)[1],
           lambda v: S.fresnel(v)[0], lambda v: S.owens_t(v, 1.7)]
    staged = jitad.jit(lambda v: [f(v) for f in fns])(x)
    for k, (f, got) in enumerate(zip(fns, staged)):
        _close(got, f(x), 1e-14, f"function {k}")


@pytest.mark.slow
def test_gradients_against_jax_and_derivatives():
    x = np.array([0.3, 0.9, 1.2, 3.0, 4.5, 7.0, 45.0])
    grad = lambda f: jitad.vmap(jitad.grad(f))(x)
    jgrad = lambda f: jax.vmap(jax.grad(f))(x)
    for name in ("exp1", "expi", "dawsn"):
        np.testing.assert_allclose(grad(getattr(S, name)), jgrad(getattr(js, name)), rtol=1e-11, err_msg=name)
    np.testing.assert_allclose(grad(lambda v: S.expn(3.0, v)), jgrad(lambda v: js.expn(3, v)), rtol=1e-11)
    # JAX's gradients of spence (at 1 and 2) and fresnel (large x) are off: the derivatives themselves
    np.testing.assert_allclose(grad(S.spence), np.log(x) / (1 - x), rtol=1e-11)
    np.testing.assert_allclose(grad(lambda v: S.fresnel(v)[0]), np.sin(np.pi * x * x / 2), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grad(lambda v: S.fresnel(v)[1]), np.cos(np.pi * x * x / 2), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grad(lambda v: S.sici(v)[0]), jgrad(lambda v: js.sici(v)[0]), rtol=1e-11)
    np.testing.assert_allclose(grad(lambda v: S.sici(v)[1]), np.cos(x) / x, rtol=1e-11)
    for h, a in ((1.2, 0.7), (1.2, 2.7), (0.4, -3.0)):
        mine = jitad.grad(S.owens_t, argnums=(0, 1))(h, a)
        theirs = jax.grad(js.owens_t, argnums=(0, 1))(h, a)
        np.testing.assert_allclose(mine, theirs, rtol=1e-11)


@pytest.mark.slow
@pytest.mark.parametrize("name,point", [("exp1", 0.7), ("expi", -2.5), ("dawsn", 6.5), ("spence", 2.5)])
def test_check_grads(name, point):
    check_grads(getattr(S, name), (point,), order=2, modes=("rev",), rtol=1e-5)
