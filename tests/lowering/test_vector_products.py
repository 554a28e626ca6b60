"""Matrix products with a vector side (outer products, A.T @ c, c.T @ A): their
transposes are read as the same memory untransposed; values and gradients against JAX."""
import jax
import numpy as np
import pytest

import jitad

jax.config.update("jax_enable_x64", True)
R = np.random.default_rng(3)


@pytest.mark.parametrize("m,k", [(100, 100)])
def test_sum_mat_vec_gradients_match_jax(m, k):
    A, v = R.standard_normal((m, k)), R.standard_normal(k)
    f = lambda N: (lambda A, v: N.sum(N.tanh(A @ v)) + N.sum(v @ A.T))
    got = jitad.value_and_grad(f(jitad), argnums=(0, 1))(A, v)
    want = jax.value_and_grad(f(jax.numpy), argnums=(0, 1))(A, v)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("shape", [(100, 1, 100), (1, 50, 1), (80, 80, 1)])
def test_transposed_vector_operands(shape):
    m, k, n = shape
    a, b, c = R.standard_normal((k, m)), R.standard_normal((n, k)), R.standard_normal((m, n))
    f = jitad.jit(lambda a, b, c: (a.T @ b.T, a.T @ b.T + c, jitad.matmul(c.T, a.T)))
    got = f(a, b, c)
    np.testing.assert_allclose(got[0], a.T @ b.T, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(got[1], a.T @ b.T + c, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(got[2], c.T @ a.T, rtol=1e-12, atol=1e-13)


def test_accumulated_outer_products():
    u, v, w = R.standard_normal(90), R.standard_normal(70), R.standard_normal((90, 70))
    f = lambda N: (lambda w, u, v: N.sum(N.sin(w * (u[:, None] * v[None, :]))) + N.sum((w @ v) * u))
    got = jitad.grad(f(jitad), argnums=(0, 1, 2))(w, u, v)
    want = jax.grad(f(jax.numpy), argnums=(0, 1, 2))(w, u, v)
    for g, x in zip(got, want):
        np.testing.assert_allclose(g, x, rtol=1e-11, atol=1e-12)


def test_matrix_times_vector_adds_into_a_gradient():
    W, x, y = R.standard_normal((67, 101)), R.standard_normal(101), R.standard_normal(67)
    f = lambda N: (lambda W, x, y: N.sum(N.tanh(W @ x) * y) + N.sum((W @ (x * x)) ** 2))
    got = jitad.value_and_grad(f(jitad), argnums=(0, 1, 2))(W, x, y)
    want = jax.value_and_grad(f(jax.numpy), argnums=(0, 1, 2))(W, x, y)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    for g, w in zip(got[1], want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(jitad.jit(lambda W, x: W @ x)(W, x), W @ x, rtol=1e-13, atol=1e-13)


def test_a_weight_read_transposed_in_an_unrolled_loop_is_transposed_once():
    W, h0 = R.standard_normal((30, 30)) * 0.3, R.standard_normal((20, 30))

    def f(N):
        def loss(W, h):
            for _ in range(4):
                h = N.tanh(h @ W + 0.1)   # its gradient reads W.T at every step
            return N.sum(h * h)
        return loss
    g = jitad.value_and_grad(f(jitad), argnums=(0, 1))
    got, want = g(W, h0), jax.value_and_grad(f(jax.numpy), argnums=(0, 1))(W, h0)
    assert g.ir.count("transpose") == 1 and "tb=True" not in g.ir
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    for a, b in zip(got[1], want[1]):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)
