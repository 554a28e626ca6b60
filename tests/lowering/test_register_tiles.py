"""Matrix products past `REGISTER_GEMM_MAX` whose right operand fits `REGISTER_GEMM_B_BYTES`
run in jitad's register tiles, not BLAS (a transposed right operand copied untransposed
first; a cotangent's second product accumulating in place): values against NumPy in
float64 and float32, gradients (which take these paths, not new math) against their
formulas in NumPy. The shapes leave a
remainder of rows and a stripe of columns split in several vector widths."""
import numpy as np

import jitad
from jitad.lower import tensor

M, K, N = 300, 70, 53   # m·k·n above REGISTER_GEMM_MAX; b (k, n) well inside the byte budget


def _products(m):
    return lambda a, b, c: (a @ b, a @ c.T)


def _loss(m):   # x read by two products: its cotangent's second product adds into the first's
    return lambda x, w1, w2: m.numpy.sum(m.numpy.tanh(x @ w1)) + m.numpy.sum(m.numpy.sin(x @ w2.T) ** 2)


def test_the_shapes_run_in_the_tiles():
    assert M * K * N > tensor.REGISTER_GEMM_MAX and K * N * 8 <= tensor.REGISTER_GEMM_B_BYTES
    assert tensor._tiled(M, N, K, "f64") and tensor._tiled(M, N, K, "f32")
    assert not tensor._tiled(512, 512, 512, "f32")   # b of 1 MiB: BLAS
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((M, K)), rng.standard_normal((K, N)), rng.standard_normal((N, K))
    f = jitad.jit(_products(jitad))
    got = f(a, b, c)
    assert "sgemm" not in f.llvm_ir and "dgemm" not in f.llvm_ir
    for g, want in zip(got, (a @ b, a @ c.T)):
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)
    got32 = f(a.astype(np.float32), b.astype(np.float32), c.astype(np.float32))
    assert all(g.dtype == np.float32 for g in got32)
    for g, want in zip(got32, (a @ b, a @ c.T)):
        np.testing.assert_allclose(g, want, rtol=1e-4, atol=1e-4)


def test_gradients_through_the_tiles_agree_with_their_formulas():
    rng = np.random.default_rng(1)
    x, w1, w2 = (rng.standard_normal(s).astype(np.float32) * 0.3 for s in ((M, K), (K, N), (N, K)))
    grad = jitad.jit(jitad.grad(_loss(jitad), argnums=(0, 1, 2)))
    got = grad(x, w1, w2)
    assert "matmul_add" in str(grad.ir)
    x, w1, w2 = (v.astype(np.float64) for v in (x, w1, w2))
    g1, g2 = 1 - np.tanh(x @ w1) ** 2, np.sin(2 * (x @ w2.T))   # d/du tanh u, d/du sin(u)^2
    want = (g1 @ w1.T + g2 @ w2, x.T @ g1, g2.T @ x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_a_transposed_left_operand_is_read_in_place_by_the_tiles():
    """`aᵀ @ b` per batch entry and as one matrix (a batched product's cotangent), a block of
    rows taking adjacent elements of a's rows: no BLAS call, values as NumPy's. The rows (70)
    leave a remainder block; the columns (53) a stripe split in several vector widths."""
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((3, 40, 70)), rng.standard_normal((3, 40, 53))
    assert tensor.TILES_READ_A_TRANSPOSED and tensor._tiled(70, 53, 40, "f32")
    f = jitad.jit(lambda a, b: (jitad.numpy.matmul(jitad.numpy.swapaxes(a, 1, 2), b), a[0].T @ b[1]))
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-4)):
        got = f(a.astype(dtype), b.astype(dtype))
        assert "gemm" not in f.llvm_ir
        for g, want in zip(got, (np.swapaxes(a, 1, 2) @ b, a[0].T @ b[1])):
            assert g.dtype == dtype
            np.testing.assert_allclose(g, want, rtol=tol, atol=tol)


def test_b_copied_stripe_by_stripe_first():
    """A right operand past L1 (`tensor._packs`) is copied stripe by stripe before the tiles
    read it (transposed on the way when it is stored transposed, in place from a strided
    view): plain, transposed, with a bias, batched, and accumulated by a gradient's second
    product; 75 columns leave a last stripe of 11 (8 + 2 + 1 lanes), 130 rows a remainder."""
    m, k, n = 130, 150, 75
    assert all(tensor._packs(m, n, k, d) and tensor._tiled(m, n, k, d) for d in ("f32", "f64"))
    rng = np.random.default_rng(3)
    a, b, c, bias = (rng.standard_normal(s) * 0.3 for s in ((m, k), (k, n), (n, k), (n,)))
    xs = rng.standard_normal((2, m, 3 * k)) * 0.3

    def f(m_, a, b, c, bias, xs):
        heads = xs.reshape(2, m, 3, k).transpose(0, 2, 1, 3).reshape(6, m, k)   # strided views
        return a @ b, a @ c.T, a @ b + bias, m_.numpy.matmul(heads, m_.numpy.swapaxes(heads[:, :n], 1, 2))
    heads = xs.reshape(2, m, 3, k).transpose(0, 2, 1, 3).reshape(6, m, k)
    want = (a @ b, a @ c.T, a @ b + bias, heads @ np.swapaxes(heads[:, :n], 1, 2))
    jf = jitad.jit(lambda *args: f(jitad, *args))
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-4)):
        got = jf(*(v.astype(dtype) for v in (a, b, c, bias, xs)))
        assert "gemm" not in jf.llvm_ir
        for g, w in zip(got, want):
            assert g.dtype == dtype
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    grad = jitad.jit(jitad.grad(_loss(jitad), argnums=(0, 1, 2)))
    x, w1, w2 = a, b, c
    g1, g2 = 1 - np.tanh(x @ w1) ** 2, np.sin(2 * (x @ w2.T))
    for g, w in zip(grad(x, w1, w2), (g1 @ w1.T + g2 @ w2, x.T @ g1, g2.T @ x)):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-10)


def test_a_long_contraction_runs_in_chunks_of_b():
    """b past the tiles' byte budget while the result fits `REGISTER_GEMM_C_BYTES`: the
    tiles take b's rows a chunk at a time (in float64 3 chunks of 992 rows and one of 23: 2999
    has no divisor from 993 down to 497),
    adding into the result: plain, transposed on either side, with a bias, and the weight
    gradient `xᵀ @ g` of a loss, against NumPy."""
    m, k, n = 40, 2999, 33
    assert tensor._tiled(m, n, k, "f64", ta=True) and tensor._k_chunk(m, n, k, "f64") == 992
    assert tensor._k_chunk(128, 384, 2048, "f32") == 128   # a divisor: no shorter last chunk
    assert not tensor._tiled(512, 128, 2048, "f32", ta=True)   # a's rows 2 KiB apart: BLAS
    rng = np.random.default_rng(4)
    a, b, c, bias = (rng.standard_normal(s) * 0.1 for s in ((m, k), (k, n), (n, k), (n,)))
    at = lambda x: jitad.numpy.swapaxes(x[None], 1, 2)  # noqa: E731   (a transposed batch of one: `ta`)
    jf = jitad.jit(lambda a, b, c, bias: (a @ b, a @ c.T + bias, jitad.numpy.matmul(at(a.T), b[None])[0]))
    want = (a @ b, a @ c.T + bias, a @ b)
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-4)):
        got = jf(*(v.astype(dtype) for v in (a, b, c, bias)))
        assert "gemm" not in jf.llvm_ir
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    x, w = rng.standard_normal((k, m)), rng.standard_normal((m, n))
    grad = jitad.jit(jitad.grad(lambda w, x: jitad.numpy.sum(jitad.numpy.tanh(x @ w))))
    np.testing.assert_allclose(grad(w, x), x.T @ (1 - np.tanh(x @ w) ** 2), rtol=1e-10, atol=1e-10)
