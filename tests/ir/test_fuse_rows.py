"""A sum or max over the last axis of a fused loop's result, read by nothing else, is
taken inside that loop (a register per row): the full array is never stored."""
import numpy as np
import pytest

import jitad
from jitad.ir.ops import Op
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)


def pairwise_min(np_, p, c):   # k-means' cost: each point's squared distance to its nearest centre
    d2 = (np_.sum(p * p, axis=1, keepdims=True) + np_.reshape(np_.sum(c * c, axis=1), (1, -1))
          - 2.0 * np_.matmul(p, np_.transpose(c)))
    return np_.sum(np_.min(d2, axis=1))



def compiled(f, *args):
    out = f(*args)
    return out, f._latest("ir").program


def test_row_min_of_a_fused_result_is_taken_in_its_loop():
    rng = np.random.default_rng(0)
    p, c = rng.random((37, 5)), rng.random((11, 5))
    got, program = compiled(jitad.jit(lambda p, c: pairwise_min(jitad, p, c)), p, c)
    np.testing.assert_allclose(got, pairwise_min(jnp, p, c), rtol=1e-12)
    ops = [n.op for n in program.main.nodes]
    assert Op.MAX not in ops, ops   # min is -max(-x): taken in the fused loop
    rows = [n for n in program.main.nodes if n.op == Op.FUSED and n.outputs[0].type.shape == (37,)]
    assert len(rows) == 1 and rows[0].attrs["shape"] == (37, 11)
    g = jitad.jit(jitad.grad(lambda c: pairwise_min(jitad, p, c)))
    np.testing.assert_allclose(g(c), jax.grad(lambda c: pairwise_min(jnp, p, c))(c), rtol=1e-12)
    check_grads(lambda c: pairwise_min(jitad, p, c), (c,), order=1, modes=("rev",))


@pytest.mark.parametrize("keepdims", [False, True])
def test_row_sums_and_maxima_keep_numpy_meaning(keepdims):
    def f(np_, x, y):
        z = np_.sin(x) * y + 1.0
        return np_.max(z * y + x, axis=2, keepdims=keepdims), np_.sum((z - y) * x, axis=2, keepdims=keepdims)

    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((3, 4, 9)), rng.standard_normal((4, 9))
    x[1, 2, 5] = np.nan   # a row's NaN is its maximum, as NumPy
    x[2, 0, :] = -1e300
    got, program = compiled(jitad.jit(lambda x, y: f(jitad, x, y)), x, y)
    want = f(np, x, y)
    for a, b in zip(got, want):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-13)
    assert not {Op.MAX, Op.SUM} & {n.op for n in program.main.nodes}
    assert np.isnan(got[0][1, 2]).all() and np.isfinite(got[0][0]).all() and np.isfinite(got[0][2, 1]).all()


def test_a_result_read_again_is_stored_with_its_row_maxima():
    def f(x):
        z = jitad.exp(x) * 2.0
        return jitad.max(z, axis=1), z

    x = np.random.default_rng(2).random((4, 6))
    (m, z), program = compiled(jitad.jit(f), x)
    np.testing.assert_allclose(m, np.max(np.exp(x) * 2.0, axis=1), rtol=1e-13)
    np.testing.assert_allclose(z, np.exp(x) * 2.0, rtol=1e-13)
    (loop,) = [n for n in program.main.nodes if n.op == Op.FUSED]
    assert [v.type.shape for v in loop.outputs] == [(4, 6), (4,)]


@pytest.mark.parametrize("k, m", [(1, 64), (8, 70), (9, 64), (8, 63)])
def test_a_product_over_a_short_contraction_is_computed_in_its_loop(k, m):
    def f(np_, a, b):
        return np_.tanh(np_.matmul(a, b) * 0.5 + a[:, :1])

    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((9, k)), rng.standard_normal((k, m))
    got, program = compiled(jitad.jit(lambda a, b: f(jitad, a, b)), a, b)
    np.testing.assert_allclose(got, f(np, a, b), rtol=1e-13)
    # at most 8 terms, along rows of at least 64 (shorter ones do not vectorize well)
    assert (Op.MATMUL in [n.op for n in program.main.nodes]) == (k > 8 or m < 64)
    g = jitad.jit(jitad.grad(lambda a, b: jitad.sum(f(jitad, a, b)), argnums=(0, 1)))
    want = jax.grad(lambda a, b: jnp.sum(f(jnp, a, b)), argnums=(0, 1))(a, b)
    for x, y in zip(g(a, b), want):
        np.testing.assert_allclose(x, y, rtol=1e-12)


def test_a_product_read_twice_is_stored_once():
    def f(a, b):
        p = jitad.matmul(a, b)
        return jitad.exp(p) * 2.0, jitad.sum(p, axis=0)

    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((6, 3)), rng.standard_normal((3, 64))
    (e, m), program = compiled(jitad.jit(f), a, b)
    p = a @ b
    np.testing.assert_allclose(e, np.exp(p) * 2.0, rtol=1e-13)
    np.testing.assert_allclose(m, np.sum(p, axis=0), rtol=1e-13)
    assert [n.op for n in program.main.nodes].count(Op.MATMUL) == 1


@pytest.mark.parametrize("n", [8, 11])
def test_row_minima_of_a_product_several_rows_at_a_time(n, monkeypatch):
    """Rows of a loop with a product and a row min run four at a time (then the rest one
    by one); a long product over 16 terms is computed in the loop only past a size."""
    from jitad.ir import fuse
    monkeypatch.setattr(fuse, "LARGE_PRODUCT", (16, 1))   # any product counts as large
    rng = np.random.default_rng(5)
    p, c = rng.random((n, 16)), rng.random((64, 16))
    p[1, 3] = np.nan   # in a block of four rows
    p[n - 1, 0] = np.nan   # in the last block, or a row after the blocks
    f = jitad.jit(lambda p, c: jitad.min(jitad.sum(p * p, axis=1, keepdims=True)
                                         - 2.0 * jitad.matmul(p, jitad.transpose(c)), axis=1))
    got, program = compiled(f, p, c)
    want = np.min(np.sum(p * p, axis=1, keepdims=True) - 2.0 * p @ c.T, axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert np.isnan(got[[1, n - 1]]).all() and np.isfinite(np.delete(got, [1, n - 1])).all()
    assert Op.MATMUL not in [m.op for m in program.main.nodes]
