"""Bessel functions J_n, Y_n (integer order) and I_v (real order) against SciPy (values and
edge values), JAX's `bessel_jn`, autograd's gradients, and `check_grads`."""
import numpy as np
import pytest
import scipy.special as ss

import jitad
from jitad.errors import JitadError
from jitad.scipy import special as S
from jitad.testing import check_grads

# 25 is where Miller's recurrence hands over to Hankel's series
X = np.array([0.0, 1e-300, 1e-10, 1e-3, 0.1, 0.5, 1.0, 2.4048255576957728, 3.0, 10.0, 24.9, 25.1, 40.0, 100.0,
              1e4, -0.5, -3.0, -30.0, np.nan])


def _close(got, want, rtol, msg):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=msg)
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=rtol, atol=1e-15, err_msg=msg)


@pytest.mark.parametrize("name", ["j0", "j1", "y0", "y1"])
def test_orders_zero_and_one(name):
    _close(getattr(S, name)(X), getattr(ss, name)(X), 1e-12, name)


@pytest.mark.parametrize("n", [2, 5, -3, 30])
def test_integer_orders(n):
    _close(S.jn(n, X), ss.jn(n, X), 1e-12, f"jn({n})")
    _close(S.yn(n, X), ss.yn(n, X), 1e-12, f"yn({n})")


def test_at_infinity_the_limit():
    # SciPy gives NaN at ±inf; the functions tend to 0 there
    inf = np.array([np.inf, -np.inf])
    np.testing.assert_array_equal(S.j0(inf), [0.0, 0.0])
    np.testing.assert_array_equal(S.y1(inf), [0.0, np.nan])


@pytest.mark.parametrize("v", [0.0, 0.5, 1.0, 2.0, 7.3, 30.0, 49.5])
def test_modified_of_real_order(v):
    x = np.concatenate([X[np.abs(X) < 700], [600.0]])
    _close(S.iv(v, x), ss.iv(v, x), 1e-12, f"iv({v})")
    _close(S.ive(v, x), ss.ive(v, x), 1e-12, f"ive({v})")


def test_order_must_be_a_concrete_integer():
    with pytest.raises(JitadError, match="integer"):
        S.jn(1.5, 1.0)
    with pytest.raises(JitadError, match="concrete"):
        jitad.jit(lambda n, x: S.yn(n, x))(2, 1.0)


def test_bessel_jn_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    z = np.array([0.1, 1.0, 3.5, 12.0])
    got = S.bessel_jn(z, v=4)
    assert got.shape == (5, 4)
    _close(got, np.stack([ss.jv(k, z) for k in range(5)]), 1e-12, "bessel_jn vs SciPy")
    _close(got, jax.scipy.special.bessel_jn(z, v=4), 1e-10, "bessel_jn vs JAX")


def test_staged_values_are_the_eager_ones():
    x = np.array([0.2, 3.0, 24.0, 26.0, 80.0])
    fns = [S.j0, S.y1, lambda v: S.jn(3, v), lambda v: S.iv(2.5, v)]
    staged = jitad.jit(lambda v: [fn(v) for fn in fns])(x)
    for k, (f, got) in enumerate(zip(fns, staged)):
        _close(got, f(x), 1e-14, f"function {k}")


@pytest.mark.slow
def test_gradients_against_autograd():
    ag = pytest.importorskip("autograd")
    agS = pytest.importorskip("autograd.scipy.special")
    x = np.array([0.3, 2.0, 7.5, 30.0])
    for mine, theirs in ((S.j0, agS.j0), (S.y1, agS.y1), (lambda v: S.jn(2, v), lambda v: agS.jn(2, v)),
                         (lambda v: S.yn(3, v), lambda v: agS.yn(3, v)), (lambda v: S.iv(1.5, v), lambda v: agS.iv(1.5, v)),
                         (lambda v: S.ive(4.0, v), lambda v: agS.ive(4.0, v))):
        want = [ag.grad(theirs)(v) for v in x]
        np.testing.assert_allclose(jitad.vmap(jitad.grad(mine))(x), want, rtol=1e-10)
    check_grads(lambda v: S.y0(v), (2.5,), order=2, modes=("rev",), rtol=1e-5)
