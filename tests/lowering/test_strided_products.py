"""Batched products reading their operands, and writing their result, in place through
reshapes, transposes and slices (`jitad/ir/strided.py`, lowered in `jitad/lower/tensor.py`):
attention's heads in the register tiles, through BLAS and, for products too small for
either, through contiguous copies; values against NumPy, gradients against JAX's and
`check_grads`."""
import numpy as np
import pytest

import jitad
from jitad.ir import strided
from jitad.testing import check_grads


def _attention(m, qkv, heads):
    """Causal-free multi-head attention over a fused QKV array (nanoGPT's layout)."""
    jnp = m.numpy if hasattr(m, "numpy") else m
    B, T, C = qkv.shape[0], qkv.shape[1], qkv.shape[2] // 3
    q, k, v = jnp.split(qkv, 3, axis=-1)
    split = lambda a: a.reshape(B, T, heads, C // heads).transpose(0, 2, 1, 3)  # noqa: E731
    q, k, v = split(q), split(k), split(v)
    s = (q @ jnp.swapaxes(k, -1, -2)) * 0.3
    p = jnp.exp(s - s.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    return (p @ v).transpose(0, 2, 1, 3).reshape(B, T, C)


# (B, T, C, heads): products in the register tiles; through BLAS (f64 `b` past the tiles'
# byte budget); below BLAS's size, through copies
SHAPES = {"tiles": (2, 24, 32, 4), "blas": (1, 320, 256, 2), "copies": (1, 3, 8, 2)}


@pytest.mark.parametrize("path", list(SHAPES))
def test_attention_reads_its_heads_in_place(path):
    B, T, C, H = SHAPES[path]
    x = np.random.default_rng(0).standard_normal((B, T, 3 * C))
    f = jitad.jit(lambda x: _attention(jitad, x, H))
    want = _attention(np, x, H)
    np.testing.assert_allclose(f(x), want, rtol=1e-11, atol=1e-11)
    ir = str(f.ir) if path == "tiles" else ""
    got32 = f(x.astype(np.float32))
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, want, rtol=2e-4, atol=2e-4)
    if ir:   # no copy of the heads either way: both products read and write them in place
        assert ir.count("strided_bmm") == 2 and "transpose" not in ir and "slice" not in ir


def test_gradients_through_the_views_agree_with_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    B, T, C, H = SHAPES["tiles"]
    x = np.random.default_rng(1).standard_normal((B, T, 3 * C))
    loss = lambda m: lambda x: m.numpy.sum(m.numpy.sin(_attention(m, x, H)))  # noqa: E731
    grad = jitad.jit(jitad.grad(loss(jitad)))
    np.testing.assert_allclose(grad(x), jax.jit(jax.grad(loss(jax)))(x), rtol=1e-10, atol=1e-10)
    assert "strided_bmm" in str(grad.ir)
    B, T, C, H = SHAPES["copies"]
    check_grads(lambda x: _attention(jitad, x, H), (np.random.default_rng(2).standard_normal((B, T, 3 * C)),),
                order=1, modes=("rev",))


def test_sliced_rows_and_a_view_the_tiles_cannot_read():
    """Every other row (a slice with a step: rows twice as far apart) is read in place; every
    other column is not contiguous, so that operand stays a copy. Values as NumPy's."""
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((3, 40, 20)), rng.standard_normal((3, 20, 40))
    f = jitad.jit(lambda x, y: (jitad.numpy.matmul(x[:, 1::2, :], y), jitad.numpy.matmul(x, y[:, :, ::2])))
    got = f(x, y)
    np.testing.assert_allclose(got[0], x[:, 1::2, :] @ y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[1], x @ y[:, :, ::2], rtol=1e-12, atol=1e-12)
    assert str(f.ir).count("strided_bmm") == 1 and str(f.ir).count("slice") == 1


def test_views_of_reshapes_transposes_and_slices():
    dims = strided.contiguous((2, 3))
    assert strided.reshaped(dims, (6,)) == [((3, 1),)] or strided.reshaped(dims, (6,)) == [((2, 3), (3, 1))]
    swapped = [dims[1], dims[0]]   # a transpose: reshaping it back to (2, 3) is no view
    assert strided.reshaped(swapped, (6,)) == [((3, 1), (2, 3))]
    assert strided.reshaped(strided.reshaped(swapped, (6,)), (2, 3)) is None
    # rows 4 elements apart hold 3 contiguous columns: a view; a row stride below the row's
    # length (overlapping rows) or a column stride other than 1 is not
    assert strided.matrices([((2, 12),), ((3, 4),), ((3, 1),)], 1, 3) == (1, ((2, 12),), 4)
    assert strided.matrices([(), ((3, 2),), ((3, 1),)], 0, 3) is None
    assert strided.matrices([(), ((3, 4),), ((3, 2),)], 0, 3) is None



def test_a_product_reading_a_view_of_another_product_s_transposed_result():
    """The first product writes its result through the heads' transpose (one head); the
    second reads a reshape of that result, and must read it from there (it had followed the
    dropped transpose back to the first product's own result, no longer made: an undefined
    value, a KeyError in the lowering)."""
    def f(m, a, b, c):
        y = (a @ b).reshape(2, 1, 5, 4).transpose(0, 2, 1, 3)
        return y.reshape(2, 5, 4) @ c
    r = np.random.default_rng(0)
    a, b, c = r.normal(size=(2, 5, 3)), r.normal(size=(2, 3, 4)), r.normal(size=(2, 4, 3))
    np.testing.assert_allclose(jitad.jit(lambda a, b, c: f(jitad, a, b, c))(a, b, c), f(np, a, b, c), rtol=1e-12)
    check_grads(lambda a, b, c: f(jitad, a, b, c), (a, b, c), order=1, modes=("rev",))
