"""A matrix product only read by a bias add is one `matmul_bias` (`peephole.bias_epilogues`):
the register tiles start each row from the bias, other products add into rows filled with
it. Values against NumPy in float64 and float32 on each path, a layer's gradient against
JAX's and `check_grads`."""
import numpy as np
import pytest

import jitad
from jitad.lower import tensor
from jitad.testing import check_grads


def _layer(x, w, b):   # nanoGPT's linear layer on (batch, time, features)
    B, T, C = x.shape
    return (x.reshape(B * T, C) @ w).reshape(B, T, w.shape[1]) + b


# (B, T, C, out): in the tiles (a remainder of rows, a stripe in several vector widths); b past
# the tiles' byte budget (BLAS, beta = 1); below BLAS's size (a loop nest)
SHAPES = {"tiles": (2, 25, 30, 53), "blas": (1, 300, 400, 200), "loops": (1, 3, 4, 5)}


@pytest.mark.parametrize("path", list(SHAPES))
def test_the_product_starts_from_the_bias(path):
    B, T, C, N = SHAPES[path]
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((B, T, C)), rng.standard_normal((C, N)), rng.standard_normal(N)
    f = jitad.jit(_layer)
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-4)):
        got = f(x.astype(dtype), w.astype(dtype), b.astype(dtype))
        assert got.dtype == dtype
        np.testing.assert_allclose(got, _layer(x, w, b), rtol=tol, atol=tol)
    ir = str(f.ir)
    assert "matmul_bias" in ir and " add " not in ir and "matmul[" not in ir
    if path == "tiles":
        assert tensor._tiled(B * T, N, C, "f32") and "gemm" not in f.llvm_ir


def test_a_bias_added_first_as_a_row_with_ones():
    rng = np.random.default_rng(1)
    a, w, b = rng.standard_normal((40, 30)), rng.standard_normal((30, 50)), rng.standard_normal((1, 50))
    f = jitad.jit(lambda a, w, b: b + a @ w)
    np.testing.assert_allclose(f(a, w, b), b + a @ w, rtol=1e-12, atol=1e-12)
    assert "matmul_bias" in str(f.ir)


def test_a_column_reshaped_to_a_vector_keeps_its_addition():
    """`(A @ x).reshape(m) + b`: the bias runs along the product's rows, not its one column."""
    rng = np.random.default_rng(3)
    a, x, b = rng.standard_normal((25, 14)), rng.standard_normal((14, 1)), rng.standard_normal(25)
    f = jitad.jit(lambda a, x, b: (a @ x).reshape(25) + b)
    np.testing.assert_allclose(f(a, x, b), (a @ x).reshape(25) + b, rtol=1e-12, atol=1e-12)
    assert "matmul_bias" not in str(f.ir)


def test_a_layer_s_gradient_agrees_with_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(2)
    args = rng.standard_normal((2, 5, 16)), rng.standard_normal((16, 24)) * 0.3, rng.standard_normal(24)
    # the sum of squares of a product with the layer: the bias add is not fused into an elementwise loop
    loss = lambda m: lambda *a: m.numpy.sum((_layer(*a) @ a[1].T) ** 2)  # noqa: E731
    grad = jitad.jit(jitad.grad(loss(jitad), argnums=(0, 1, 2)))
    for g, want in zip(grad(*args), jax.jit(jax.grad(loss(jax), argnums=(0, 1, 2)))(*args)):
        np.testing.assert_allclose(g, want, rtol=1e-11, atol=1e-11)
    assert "matmul_bias" in str(grad.ir)
    check_grads(_layer, args, order=1, modes=("rev",))


def test_products_that_are_not_matrices_keep_their_addition():
    # a dot of vectors (0-d) or a matrix-vector product (1-d) plus another: no rows to start from
    x, y, a = np.arange(3.0), np.ones(3), np.arange(12.0).reshape(4, 3)
    assert jitad.jit(lambda x, y: x @ x + y @ y)(x, y) == 8.0
    np.testing.assert_allclose(jitad.jit(lambda a, x, y: a @ x + a @ y)(a, x, y), a @ x + a @ y)
    np.testing.assert_allclose(jitad.grad(lambda x, y: x @ x + y @ y, argnums=(0, 1))(x, y)[0], 2 * x)
