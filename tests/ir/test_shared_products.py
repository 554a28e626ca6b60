"""A short product several fused loops read is computed in each of them
(`shared_small_products` in jitad.ir.passes): k-means' Newton direction (the row minimum,
the tie count and the cotangent loop read the distances) and a plain program whose two
loops read one product give the values they give with the product stored; a product that
something besides fused loops reads stays stored."""
import numpy as np
import pytest

import jitad
from jitad.ir import passes
from jitad.testing import check_grads

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

N, K, D = 40, 64, 3   # K: a row long enough (fuse.PRODUCT_ROW) for a fused loop to compute the product


def _products(ir):
    return sum(" = matmul[" in line for line in ir.splitlines())


def _without_pass(monkeypatch):
    monkeypatch.setattr(passes, "PIPELINE", [s for s in passes.PIPELINE if s[0] != "shared_small_products"])


def _direction(m, grad, jvp):
    def cost(p, c):
        d2 = m.sum(p * p, axis=1, keepdims=True) + m.sum(c * c, axis=1)[None, :] - 2.0 * p @ c.T
        return m.sum(m.min(d2, axis=1))

    def direction(p, c):
        j, h = jvp(lambda c: grad(cost, argnums=1)(p, c), (c,), (m.ones_like(c),))
        return j / h
    return direction


def test_kmeans_direction_recomputes_the_distances(monkeypatch):
    rng = np.random.default_rng(1)
    p = rng.random((N, D))
    c = np.concatenate([p[-K // 2:], rng.random((K - K // 2, D))])   # half the centroids on points: zero distances
    shared = jitad.jit(_direction(jitad, jitad.grad, jitad.jvp))
    got = shared(p, c)
    np.testing.assert_allclose(got, _direction(jnp, jax.grad, jax.jvp)(p, c), rtol=1e-12)
    _without_pass(monkeypatch)
    stored = jitad.jit(_direction(jitad, jitad.grad, jitad.jvp))
    np.testing.assert_allclose(stored(p, c), got, rtol=1e-12)
    assert _products(shared.ir) == 0 and _products(stored.ir) == 1


def _two_readers(a, b, w):
    """Two fused loops read a @ b: a row maximum of y + w and the sum of tanh(y) w."""
    y = a @ b
    return jitad.sum(jitad.max(y + w, axis=1)) + jitad.sum(jitad.tanh(y) * w)


def test_two_loops_read_one_product(monkeypatch):
    rng = np.random.default_rng(2)
    a, b, w = rng.standard_normal((N, 4)), rng.standard_normal((4, K)), rng.standard_normal((N, K))
    ref = lambda a, b, w: jnp.sum(jnp.max(a @ b + w, axis=1)) + jnp.sum(jnp.tanh(a @ b) * w)
    shared = jitad.jit(_two_readers)
    np.testing.assert_allclose(shared(a, b, w), ref(a, b, w), rtol=1e-12)
    assert _products(shared.ir) == 0
    check_grads(_two_readers, (a, b, w), order=1, modes=("rev",))
    _without_pass(monkeypatch)
    stored = jitad.jit(_two_readers)
    np.testing.assert_allclose(stored(a, b, w), shared(a, b, w), rtol=1e-13)   # sums in another order
    assert _products(stored.ir) == 1


def test_a_product_also_returned_stays_stored():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((N, 4)), rng.standard_normal((4, K))
    f = jitad.jit(lambda a, b: (a @ b, jitad.max(a @ b, axis=1), jitad.sum(jitad.exp(a @ b), axis=1)))
    y, top, total = f(a, b)
    np.testing.assert_allclose(y, a @ b, rtol=1e-13)
    np.testing.assert_allclose(top, np.max(a @ b, axis=1), rtol=1e-13)
    np.testing.assert_allclose(total, np.sum(np.exp(a @ b), axis=1), rtol=1e-13)
    assert _products(f.ir) == 1
