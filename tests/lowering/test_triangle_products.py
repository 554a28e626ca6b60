"""Batched products that compute only a triangle (`jitad.ir.triangles`, skipped in the register
tiles): under a constant causal mask the scores' product is read only below the diagonal, the
softmax and its masked cotangent are zero above it, and the products reading them skip those
terms. Against JAX (x64) in float64 and float32, under grad and vmap, at sizes that are not
multiples of the tiles' blocks and stripes, with masks of other diagonals; `check_grads` on
compiled code."""
import math

import numpy as np
import pytest

import jitad
from jitad.ir import triangles
from jitad.ir.printer import format_program
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

TOL = {np.float64: 1e-10, np.float32: 3e-4}


def _attention(m, qkv, w, heads=2, diagonal=0, fill=-np.inf):
    """Masked attention over a (B, T, 3C) projection (heads read in place), then a loss."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    jnp = m.numpy
    q, k, v = jnp.split(qkv, 3, axis=-1)
    split = lambda a: a.reshape(B, T, heads, C // heads).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = split(q), split(k), split(v)
    att = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(C // heads))
    att = m.nn.softmax(jnp.where(jnp.tril(jnp.ones((T, T), dtype=bool), diagonal), att, fill), axis=-1)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
    return jnp.sum(jnp.tanh(y) * w)


def _marks(fn):
    """The triangle marks of the products `fn` (a jitted function, called) compiled."""
    text = format_program(next(iter(fn._compiled.values())).program)
    return text.count("zero_a="), text.count("only_out="), text.count("zero_rest=")


def _assert_close(got, want, dtype):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    scale = np.max(np.abs(want[~np.isnan(want)]), initial=1.0)
    np.testing.assert_allclose(got, want, rtol=TOL[dtype], atol=TOL[dtype] * scale)


@pytest.mark.parametrize("T, C, diagonal, fill, marks", [
    (37, 40, 0, -np.inf, (4, 2, 1)),
    pytest.param(70, 48, 3, -np.inf, (4, 2, 1), marks=pytest.mark.slow),
    pytest.param(45, 32, -2, -np.inf, (2, 1, 0), marks=pytest.mark.slow),
    pytest.param(50, 40, 0, -1e9, (2, 1, 0), marks=pytest.mark.slow)])
def test_masked_attention_agrees_with_jax(T, C, diagonal, fill, marks):
    """All six products of attention and its gradient marked (under the plain causal mask);
    a mask above the diagonal, one with empty rows (their softmax is NaN: only the scores and the
    masked cotangent's products are marked, so the NaNs spread as JAX's do) and a finite fill
    (the scores' product, and the masked cotangent's products: the where's own zeros)."""
    rng = np.random.default_rng(T)
    qkv, w = rng.standard_normal((2, T, 3 * C)), rng.standard_normal((2, T, C))
    f = lambda m: lambda qkv, w: _attention(m, qkv, w, diagonal=diagonal, fill=fill)  # noqa: E731
    want_v, want_g = jax.jit(jax.value_and_grad(f(jax)))(qkv, w)
    mine = jitad.jit(jitad.value_and_grad(f(jitad)))
    for dtype in (np.float64, np.float32):
        value, grad = mine(qkv.astype(dtype), w.astype(dtype))
        assert grad.dtype == dtype
        _assert_close(value, want_v, dtype)
        _assert_close(grad, want_g, dtype)
    assert _marks(mine) == marks


def test_causal_products_under_vmap_and_without_heads():
    """`vmap` over a batch of sequences (the lanes' products as one batch): `jnp.tril` of a
    product (zeros, read by a product after it), the product also returned (read whole: not
    marked); a product read through a mask only (marked) and one whose mask is not constant."""
    rng = np.random.default_rng(1)
    x, y, z = rng.standard_normal((3, 33, 20)), rng.standard_normal((3, 20, 33)), rng.standard_normal((3, 33, 19))

    def f(m):
        jnp = m.numpy

        def one(x, y, z):
            s, t, u = x @ y, (x * 2.0) @ y, (x * 3.0) @ y
            mask = jnp.tril(jnp.ones((33, 33), dtype=bool))
            return jnp.tril(s, 1) @ z, s, jnp.where(mask, t, 0.0), jnp.where(u > 0, u, 0.0)
        return m.vmap(one)
    want = jax.jit(f(jax))(x, y, z)
    mine = jitad.jit(f(jitad))
    for dtype in (np.float64, np.float32):
        got = mine(*(a.astype(dtype) for a in (x, y, z)))
        for g, w in zip(got, want):
            _assert_close(g, w, dtype)
    assert _marks(mine) == (1, 1, 0)


@pytest.mark.slow
def test_gradients_through_the_triangle_products():
    """check_grads on compiled code (the tiles, not the interpreter), and JAX's gradient."""
    rng = np.random.default_rng(2)
    qkv, w = rng.standard_normal((1, 24, 96)) * 0.5, rng.standard_normal((1, 24, 32))
    f = lambda m: lambda qkv: _attention(m, qkv, w)  # noqa: E731
    before = jitad.config.read("jitad_tiering")
    jitad.config.update("jitad_tiering", "compile")
    try:
        check_grads(f(jitad), (qkv,), order=1)
    finally:
        jitad.config.update("jitad_tiering", before)
    mine = jitad.jit(jitad.grad(f(jitad)))
    np.testing.assert_allclose(mine(qkv), np.asarray(jax.grad(f(jax))(qkv)), rtol=1e-10, atol=1e-12)
    assert _marks(mine)[0] == 4


def test_the_switch_leaves_products_whole():
    rng = np.random.default_rng(3)
    qkv, w = rng.standard_normal((1, 24, 48)), rng.standard_normal((1, 24, 16))
    triangles.TRIANGLES = False
    try:
        mine = jitad.jit(jitad.grad(lambda qkv: _attention(jitad, qkv, w)))
        got = mine(qkv)
    finally:
        triangles.TRIANGLES = True
    assert _marks(mine) == (0, 0, 0)
    np.testing.assert_allclose(got, np.asarray(jax.jit(jax.grad(lambda qkv: _attention(jax, qkv, w)))(qkv)),
                               rtol=1e-10, atol=1e-12)
