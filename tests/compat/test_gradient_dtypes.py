"""The gradient of a float16 or float32 argument has the argument's dtype, as JAX's and
autograd's: jitad computes float16 in a wider float and gives float16 results back."""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

X = np.array([[0.5, -1.25], [2.0, 0.75]])


def loss(n):
    return lambda x: n.sum(n.sin(x) * x)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_grad_value_and_grad_jacobian_keep_the_argument_dtype(dtype):
    x = X.astype(dtype)
    tol = 2e-3 if dtype == np.float16 else 1e-6
    ours = [jitad.grad(loss(jnp))(x), jitad.value_and_grad(loss(jnp))(x)[1],
            jitad.jacobian(lambda v: jnp.sin(v) * v)(x[0])]
    theirs = [jax.grad(loss(jax.numpy))(x), jax.value_and_grad(loss(jax.numpy))(x)[1],
              jax.jacobian(lambda v: jax.numpy.sin(v) * v)(x[0])]
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype == dtype
        np.testing.assert_allclose(a.astype(np.float64), np.asarray(b, np.float64), rtol=tol, atol=tol)
    value = jitad.value_and_grad(loss(jnp))(x)[0]
    assert value.dtype == jax.value_and_grad(loss(jax.numpy))(x)[0].dtype


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_elementwise_grad_and_a_scalar_keep_the_dtype(dtype):
    x = X.astype(dtype)
    g = jitad.elementwise_grad(jnp.tanh)(x)
    assert g.dtype == dtype
    np.testing.assert_allclose(g.astype(np.float64), 1 - np.tanh(X) ** 2, rtol=2e-3, atol=2e-3)
    s = jitad.grad(lambda v: v ** 3)(dtype(1.5))
    assert s.dtype == dtype and float(s) == pytest.approx(6.75, rel=1e-3)


def test_mixed_precisions_and_longdouble_stay_wide():
    half, wide = X.astype(np.float16), X.astype(np.float64)
    g = jitad.grad(lambda a, b: jnp.sum(a * b), (0, 1))(half, wide)
    assert g[1].dtype == np.float64   # (g[0] is float64 too, where JAX's is float16: not every argument is)
    np.testing.assert_allclose(g[0], wide, rtol=1e-12)
    np.testing.assert_allclose(jitad.grad(loss(jnp))(X.astype(np.longdouble)), jax.grad(loss(jax.numpy))(X),
                               rtol=1e-12)


def test_clongdouble_is_numpys_and_differentiates():
    assert jnp.clongdouble is np.clongdouble
    z = (X + 1j * X[::-1]).astype(np.clongdouble)
    np.testing.assert_allclose(jitad.grad(lambda v: jnp.real(jnp.sum(v ** 2)))(z),
                               jax.grad(lambda v: jax.numpy.real(jax.numpy.sum(v ** 2)))(z.astype(complex)),
                               rtol=1e-12)
