"""A slot one fused loop stores whole and that only column sums and products `A^T @ it`
with a short A read is reduced in that loop (`column_products` in jitad.ir.passes), and
column sums run a block of columns at a time on the stack (`lower/tensor.py`): k-means'
Newton direction and a dense layer's weight and bias gradients give the values they give
with the slot stored, and JAX's; a slot something else reads stays stored."""
import numpy as np
import pytest

import jitad
from jitad.ir import column_products, passes
from jitad.lower import tensor
from jitad.testing import check_grads

from .test_shared_products import _direction   # k-means' Newton direction

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

N, K, D = 40, 136, 3   # K: rows long enough for both passes (COLUMN_ROW, fuse.COLUMN_SUM_ROW); not a multiple of 8


@pytest.fixture
def small_slots(monkeypatch):
    """The pass on slots of any size (it waits for slots past the caches)."""
    monkeypatch.setattr(column_products, "COLUMN_SLOT_BYTES", 0)


def _without_pass(monkeypatch):
    monkeypatch.setattr(passes, "PIPELINE", [s for s in passes.PIPELINE if s[0] != "column_products"])


def _slots(ir, shape):
    return sum(f"ref<f64[{shape[0]},{shape[1]}]> = slot" in line for line in ir.splitlines())


def test_kmeans_direction_sums_its_columns_in_the_loop(small_slots, monkeypatch):
    rng = np.random.default_rng(1)
    p = rng.random((N, D))
    c = np.concatenate([p[-N // 2:], rng.random((K - N // 2, D))])   # centroids on points: zero distances
    taken = jitad.jit(_direction(jitad, jitad.grad, jitad.jvp))
    got = taken(p, c)
    np.testing.assert_allclose(got, _direction(jnp, jax.grad, jax.jvp)(p, c), rtol=1e-12)
    assert _slots(taken.ir, (N, K)) == 0 and "ta=True" not in taken.ir
    _without_pass(monkeypatch)
    stored = jitad.jit(_direction(jitad, jitad.grad, jitad.jvp))
    np.testing.assert_allclose(stored(p, c), got, rtol=1e-12)
    assert _slots(stored.ir, (N, K)) >= 1


def _dense(x, w, b, t):
    """A dense layer of few inputs and many outputs: its gradient for w is x^T G, for b a column sum of G."""
    return jitad.sum(jitad.tanh(x @ w + b) * t)


def _dense_reference(x, w, b, t):
    return jnp.sum(jnp.tanh(x @ w + b) * t)


@pytest.mark.parametrize("inputs", [3, 16])   # a product the loops compute, and one BLAS makes
def test_dense_layer_gradients(small_slots, monkeypatch, inputs):
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((N, inputs)), rng.standard_normal((inputs, K))
    b, t = rng.standard_normal(K), rng.standard_normal((N, K))
    grads = jitad.jit(jitad.grad(_dense, argnums=(1, 2)))
    got = grads(x, w, b, t)
    for g, want in zip(got, jax.grad(_dense_reference, argnums=(1, 2))(x, w, b, t)):
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-13)
    assert _slots(grads.ir, (N, K)) == 0 and "ta=True" not in grads.ir
    check_grads(_dense, (x, w, b, t), order=1, modes=("rev",))
    _without_pass(monkeypatch)
    stored = jitad.jit(jitad.grad(_dense, argnums=(1, 2)))
    for g, want in zip(stored(x, w, b, t), got):
        np.testing.assert_allclose(g, want, rtol=1e-13, atol=1e-14)


def test_a_slot_read_otherwise_stays_stored(small_slots):
    """x's gradient G w^T reads the cotangent too: the slot stays, its column sums apart."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((N, 3)), rng.standard_normal((3, K))
    b, t = rng.standard_normal(K), rng.standard_normal((N, K))
    grads = jitad.jit(jitad.grad(_dense, argnums=(0, 1, 2)))
    for g, want in zip(grads(x, w, b, t), jax.grad(_dense_reference, argnums=(0, 1, 2))(x, w, b, t)):
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-13)
    assert "ta=True" in grads.ir


def test_small_slots_stay_stored():
    """Below COLUMN_SLOT_BYTES the slot is read back from the caches: the pass leaves it."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((N, 3)), rng.standard_normal((3, K))
    b, t = rng.standard_normal(K), rng.standard_normal((N, K))
    grads = jitad.jit(jitad.grad(_dense, argnums=(1, 2)))
    grads(x, w, b, t)
    assert "ta=True" in grads.ir


@pytest.mark.parametrize("stack", [8 * 8 * 2, 8 * 8 * 2 * 17])   # blocks of 8 columns; of 136 (one block)
def test_column_blocks(monkeypatch, stack):
    """Column sums in blocks of columns (a remainder block too): a bias's and a gain's gradient."""
    monkeypatch.setattr(tensor, "COLUMN_STACK", stack)
    rng = np.random.default_rng(5)
    x, g, b = rng.standard_normal((6, 7, K + 3)), rng.standard_normal(K + 3), rng.standard_normal(K + 3)
    f = jitad.jit(jitad.grad(lambda g, b: jitad.sum(jitad.sin(x * g + b) ** 2), argnums=(0, 1)))
    ref = jax.grad(lambda g, b: jnp.sum(jnp.sin(x * g + b) ** 2), argnums=(0, 1))(g, b)
    for got, want in zip(f(g, b), ref):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
