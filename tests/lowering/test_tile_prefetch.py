"""The register tiles prefetch ahead (`tensor.PREFETCH`): each step along k hints the next
block's line of a (a transposed a's columns, or the next rows where a's rows are adjacent)
and, where b is read in place, b's row `PREFETCH_STEPS` on. The hints reach past the last
block, the last chunk of a long contraction and the last batch entry (a prefetch never
faults); the values must not change. A product whose a is under `PREFETCH_MIN_BYTES` (a small
model's, in the caches) has none. Against JAX (x64) in float64 and float32, under grad
and vmap, at sizes that leave remainders everywhere."""
import math

import numpy as np
import pytest

import jitad
from jitad.lower import tensor
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

TOL = {np.float64: 1e-10, np.float32: 2e-4}


def _attention(m, qkv, w, heads=3):
    """Causal attention over a (B, T, 3C) projection, read in place by strided products."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    q, k, v = m.numpy.split(qkv, 3, axis=-1)
    split = lambda a: a.reshape(B, T, heads, C // heads).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = split(q), split(k), split(v)
    att = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(C // heads))
    att = m.nn.softmax(m.numpy.where(m.numpy.tril(m.numpy.ones((T, T), dtype=bool)), att, -m.numpy.inf), axis=-1)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
    return m.numpy.sum(m.numpy.tanh(y) * w)


def _weights(m, x, w1, w2):
    """A weight gradient `xᵀ @ g` whose b (g) is past the tiles' budget: a long contraction
    in chunks, a transposed a, b read in place; then a product with adjacent rows of a."""
    h = m.numpy.tanh(x @ w1)
    return m.numpy.sum(m.numpy.sin(h @ w2) ** 2)


@pytest.mark.slow
def test_the_tiles_prefetch_and_agree_with_jax():
    rng = np.random.default_rng(0)
    x, w1, w2 = rng.standard_normal((1100, 60)) * 0.1, rng.standard_normal((60, 56)) * 0.1, \
        rng.standard_normal((56, 45)) * 0.1
    assert tensor.PREFETCH and tensor._k_chunk(60, 56, 1100, "f64") < 1100   # in chunks of b's rows
    assert tensor._tiled(60, 56, 1100, "f64", ta=True) and tensor._tiled(56, 45, 1100, "f64", ta=True)
    qkv, w = rng.standard_normal((2, 70, 3 * 48)), rng.standard_normal((2, 70, 48))
    mine = jitad.jit(jitad.value_and_grad(lambda *a: _weights(jitad, *a[:3]) + _attention(jitad, *a[3:]),
                                          argnums=(0, 1, 2, 3, 4)))
    ref = jax.jit(jax.value_and_grad(lambda *a: _weights(jax, *a[:3]) + _attention(jax, *a[3:]),
                                     argnums=(0, 1, 2, 3, 4)))
    args = (x, w1, w2, qkv, w)
    want_v, want_g = ref(*args)
    for dtype in (np.float64, np.float32):
        value, grads = mine(*(a.astype(dtype) for a in args))
        assert "llvm.prefetch" in mine.llvm_ir and "gemm" not in mine.llvm_ir
        np.testing.assert_allclose(value, want_v, rtol=TOL[dtype])
        for g, want in zip(grads, want_g):
            assert g.dtype == dtype
            np.testing.assert_allclose(g, np.asarray(want), rtol=TOL[dtype], atol=TOL[dtype] * np.abs(want).max())


def test_batched_products_under_vmap_agree_with_jax():
    """`vmap` of a product over a batch of a: one product of adjacent rows (the next block's
    rows prefetched as one run of a), and its transposed form `aᵀ @ b` per lane."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 130, 40)), rng.standard_normal((40, 77))
    f = lambda m: m.vmap(lambda a: (a @ b, m.numpy.swapaxes(a[None], 1, 2)[0] @ a))  # noqa: E731
    want = jax.jit(f(jax))(a)
    mine = jitad.jit(f(jitad))
    for dtype in (np.float64, np.float32):
        got = mine(a.astype(dtype))
        assert "llvm.prefetch" in mine.llvm_ir
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, np.asarray(w), rtol=TOL[dtype], atol=TOL[dtype] * 10)


@pytest.mark.slow
def test_gradients_through_the_prefetching_tiles():
    """check_grads on compiled code (the tiles, not the interpreter), and JAX's gradient."""
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((70, 33)) * 0.3, rng.standard_normal((33, 40)) * 0.3
    assert tensor._tiled(70, 40, 33, "f64") and 70 * 33 * 8 >= tensor.PREFETCH_MIN_BYTES
    f = lambda m: lambda x, w: m.numpy.sum(m.numpy.tanh(x @ w) * x[:, :1])  # noqa: E731
    before = jitad.config.read("jitad_tiering")
    jitad.config.update("jitad_tiering", "compile")
    try:
        check_grads(f(jitad), (x, w), order=1)
    finally:
        jitad.config.update("jitad_tiering", before)
    got = jitad.jit(jitad.grad(f(jitad), argnums=(0, 1)))(x, w)
    for g, want in zip(got, jax.grad(f(jax), argnums=(0, 1))(x, w)):
        np.testing.assert_allclose(g, np.asarray(want), rtol=1e-10, atol=1e-12)


def test_small_products_do_not_prefetch():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((20, 50)), rng.standard_normal((50, 50))
    assert tensor._tiled(20, 50, 50, "f64") and 20 * 50 * 8 < tensor.PREFETCH_MIN_BYTES
    f = jitad.jit(lambda x, w: x @ w)
    np.testing.assert_allclose(f(x, w), x @ w, rtol=1e-12)
    assert "llvm.prefetch" not in f.llvm_ir
