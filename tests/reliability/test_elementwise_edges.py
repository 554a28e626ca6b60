"""fmod, cbrt and searchsorted at their edges (huge and tiny quotients, infinities, NaN,
signed zeros, ints), staged and eager, against NumPy and JAX (x64)."""
import jax
import jax.numpy as xnp
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.testing import check_grads

jax.config.update("jax_enable_x64", True)

INF, NAN = np.inf, np.nan
FMOD_X = np.array([5.0, 1e17, 1e300, -7.0, 7.5, -0.0, 0.0, INF, NAN, 3.0, -5.5, 1e-300, 2.0])
FMOD_Y = np.array([INF, 3.0, 1e-300, 0.1, -2.0, 3.0, -3.0, 2.0, 1.0, NAN, 0.0, 1e300, 2.0])


def _same(got, want):
    """Equal values, NaNs where `want` has them and the sign of every zero."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_fmod_is_c_fmod():
    with np.errstate(invalid="ignore"):
        want = np.fmod(FMOD_X, FMOD_Y)
    _same(jitad.jit(jnp.fmod)(FMOD_X, FMOD_Y), want)
    _same(jnp.fmod(FMOD_X, FMOD_Y), want)
    _same(jitad.jit(jnp.fmod)(FMOD_X.astype(np.float32), FMOD_Y.astype(np.float32)),
          np.fmod(FMOD_X.astype(np.float32), FMOD_Y.astype(np.float32)))
    assert jitad.jit(jnp.fmod)(1e17, 3.0) == 1.0 == float(xnp.fmod(1e17, 3.0))


def test_fmod_of_ints_stays_int():
    x, y = np.array([7, -7, 7, -7, 5, 0]), np.array([3, 3, -3, -3, 0, 2])
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.fmod(x, y)
    _same(jitad.jit(jnp.fmod)(x, y), want)
    np.testing.assert_array_equal(xnp.fmod(x, y), want)
    assert jitad.jit(jnp.fmod)(True, 3) == 1


def test_fmod_gradient_matches_jax():
    x, y = np.array([5.0, -7.2, 7.5, 0.3]), np.array([3.0, 0.7, -2.0, 0.7])   # away from the jumps
    loss = lambda m: lambda x, y: (m.fmod(x, y) * np.arange(1.0, 5.0)).sum()
    for got, want in zip(jitad.grad(loss(jnp), (0, 1))(x, y), jax.grad(loss(xnp), (0, 1))(x, y)):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    check_grads(lambda x, y: jnp.fmod(x, y), (x, y), order=2)


def test_cbrt_values():
    special = np.array([0.0, -0.0, INF, -INF, NAN, -8.0, 1.0])
    _same(jitad.jit(jnp.cbrt)(special), np.cbrt(special))
    _same(jnp.cbrt(special), np.cbrt(special))
    x = np.concatenate([np.random.default_rng(0).uniform(-1e3, 1e3, 500), [27.0, 1e-310, -1e300, 3.0]])
    for dtype in (np.float64, np.float32):
        got = jitad.jit(jnp.cbrt)(x.astype(dtype))
        assert got.dtype == dtype
        np.testing.assert_array_max_ulp(got, np.cbrt(x.astype(dtype)), 3)   # libm's, as JAX's (27 -> 3 + 1 ulp)
        normal = np.abs(x) > 1e-300   # (XLA flushes subnormals to zero)
        np.testing.assert_array_max_ulp(got[normal], np.asarray(xnp.cbrt(x[normal].astype(dtype))), 3)
    np.testing.assert_array_max_ulp(jitad.jit(jnp.cbrt)(np.array([27, -8])), np.array([3.0, -2.0]), 1)


def test_cbrt_derivatives():
    assert jitad.grad(jnp.cbrt)(0.0) == float(jax.grad(xnp.cbrt)(0.0)) == INF
    x = np.array([27.0, -8.0, 0.5, -3.0])
    np.testing.assert_allclose(jitad.vmap(jitad.grad(jnp.cbrt))(x), jax.vmap(jax.grad(xnp.cbrt))(x), rtol=1e-14)
    np.testing.assert_allclose(jitad.grad(jitad.grad(jnp.cbrt))(-8.0), jax.grad(jax.grad(xnp.cbrt))(-8.0), rtol=1e-14)
    check_grads(jnp.cbrt, (x,), order=2)


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_puts_nan_last(side):
    a = np.array([1.0, 2.0, 2.0, 3.0, NAN, NAN])
    q = np.array([NAN, 2.0, INF, -INF, 0.0, 3.0, -0.0])
    want = np.searchsorted(a, q, side)
    got = jitad.jit(lambda a, q: jnp.searchsorted(a, q, side=side))(a, q)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(xnp.searchsorted(a, q, side=side), want)
    b = a[:4]   # no NaN in `a`: a NaN query goes after everything
    assert jitad.jit(lambda b, v: jnp.searchsorted(b, v, side=side))(b, NAN) == 4 == np.searchsorted(b, NAN, side)
