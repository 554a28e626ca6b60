"""A tangent whose float dtype differs from its primal's (a float64 direction for float32
parameters, as a gradient checker draws) is taken in the primal's dtype; a float32 value
promoted to float64 carries a float64 tangent into what follows (a product with float64 data);
`check_grads` of second order runs on float32 arguments."""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.test_util import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

M = np.linspace(-1.0, 1.0, 12).reshape(4, 3).astype(np.float32)


def loss(w, mod):
    return mod.sum(mod.tanh(mod.dot(M, w)) ** 2)


def test_float64_tangent_of_float32_primal_through_a_product():
    w = np.array([0.3, -0.2, 0.5], np.float32)
    v = np.array([1.0, 2.0, -1.0])
    value, tangent = jitad.jvp(lambda w: loss(w, jnp), (w,), (v,))
    want_value, want_tangent = jax.jvp(lambda w: loss(w, jax.numpy), (w,), (v.astype(np.float32),))
    assert np.asarray(tangent).dtype == np.float32
    np.testing.assert_allclose(value, want_value, rtol=1e-6)
    np.testing.assert_allclose(tangent, want_tangent, rtol=1e-5)


def test_second_order_check_on_float32_arguments():
    check_grads(lambda w: loss(w, jnp), (np.array([0.3, -0.2, 0.5], np.float32),), order=2)


def test_promoted_float32_parameters_meet_float64_data():
    A = np.linspace(0.5, 2.0, 6).reshape(2, 3)
    w, v = np.array([0.1, 0.2, 0.3], np.float32), np.array([1.0, -1.0, 2.0], np.float32)

    def f(w, mod):
        return mod.sum(mod.tanh(mod.dot(A, w)) ** 2)
    mine = jitad.jvp(lambda w: f(w, jnp), (w,), (v,))
    theirs = jax.jvp(lambda w: f(w, jax.numpy), (w,), (v,))
    np.testing.assert_allclose(mine, theirs, rtol=1e-6)
    hess = jitad.hessian(lambda w: f(w, jnp))(w)
    np.testing.assert_allclose(hess, jax.hessian(lambda w: f(w, jax.numpy))(w), rtol=1e-5, atol=1e-7)
