"""Batched products whose results only move into a slot (reverse mode's cotangents: stored,
read back, transposed, reshaped, then stored or added into a region of the slot that keeps
them) write into that slot themselves (`strided_bmm_add`, `jitad/ir/strided.py`): values and
gradients against JAX's in float64 and float32, under `grad` and `vmap`, at odd sizes;
`check_grads` on a small case."""
import numpy as np
import pytest

import jitad
from jitad.ir import strided
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)


def _heads(m, x, w, heads):
    """Attention over the heads of a fused projection (softmax-free, with a sine between)."""
    jnp = m.numpy
    B, T, C = x.shape[0], x.shape[1], w.shape[1] // 3
    q, k, v = jnp.split(x @ w, 3, axis=-1)
    split = lambda a: a.reshape(B, T, heads, C // heads).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = split(q), split(k), split(v)
    s = jnp.sin(q @ jnp.swapaxes(k, -1, -2)) * 0.5
    return jnp.sum(jnp.cos((s @ v).transpose(0, 2, 1, 3).reshape(B, T, C)))


def _two_products(m, x, a, b):
    """x's cotangent gets two batched products' contributions: the second adds into the first."""
    jnp = m.numpy
    return jnp.sum(jnp.sin(jnp.matmul(a, x))) + jnp.sum(jnp.cos(jnp.matmul(x, b)))


def _against_jax(f, args, argnums, tol):
    got = jitad.jit(jitad.grad(lambda *a: f(jitad, *a), argnums=argnums))
    want = jax.jit(jax.grad(lambda *a: f(jax, *a), argnums=argnums))(*args)
    for g, w in zip(got(*args), want):
        assert g.dtype == args[0].dtype
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    return str(got.ir)


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-11), (np.float32, 2e-4)])
def test_head_cotangents_are_written_into_the_projections_cotangent(dtype, tol):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 19, 21)).astype(dtype), (rng.standard_normal((21, 45)) * 0.3).astype(dtype)
    ir = _against_jax(lambda m, x, w: _heads(m, x, w, 3), (x, w), (0, 1), tol)
    assert ir.count("strided_bmm_add") >= 3 and "slot_add_slice" not in ir   # (v, k and q: the thirds)


# x, a, b: products in the register tiles; through BLAS (float64, b past the tiles' budget);
# below BLAS's size, through contiguous copies
SIZES = {"tiles": ((3, 33, 17), (3, 29, 33), (3, 17, 40)), "blas": ((2, 200, 210), (2, 190, 200), (2, 210, 205)),
         "copies": ((2, 5, 3), (2, 4, 5), (2, 3, 6))}


@pytest.mark.parametrize("path", list(SIZES))
def test_a_second_contribution_adds_into_the_slot(path):
    rng = np.random.default_rng(1)
    for dtype, tol in ((np.float64, 1e-10), (np.float32, 2e-4)) if path != "blas" else ((np.float64, 1e-10),):
        x, a, b = (rng.standard_normal(s).astype(dtype) * 0.2 for s in SIZES[path])
        ir = _against_jax(_two_products, (x, a, b), (0, 1, 2), tol)
        assert "store=False" in ir and "store=True" in ir and "strided_bmm_add" in ir


def test_under_vmap_and_check_grads():
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((4, 7, 12)), rng.standard_normal((12, 36)) * 0.3
    per = lambda m: lambda x, w: _heads(m, x[None], w, 2)  # noqa: E731
    got = jitad.jit(jitad.vmap(jitad.grad(per(jitad), argnums=1), in_axes=(0, None)))(x, w)
    want = jax.vmap(jax.grad(per(jax), argnums=1), in_axes=(0, None))(x, w)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11)
    check_grads(lambda x, w: _heads(jitad, x, w, 2), (x[:1, :4, :4], w[:4, :12]), order=1, modes=("rev",))


def test_the_switch_gives_the_same_values():
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 9, 8)), rng.standard_normal((8, 24)) * 0.3
    f = lambda x, w: _heads(jitad, x, w, 2)  # noqa: E731
    want = jitad.jit(jitad.grad(f, argnums=(0, 1)))(x, w)
    strided.INTO_SLOTS = False
    try:
        off = jitad.jit(jitad.grad(lambda x, w: f(x, w) * 1.0, argnums=(0, 1)))
        got = off(x, w)
        assert "strided_bmm_add" not in str(off.ir)
    finally:
        strided.INTO_SLOTS = True
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g, w_, rtol=1e-12, atol=1e-12)
