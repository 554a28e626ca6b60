"""Divisions by a value constant along a loop's last axis (a row's sum) are products with its
reciprocal (`jitad/ir/fuse.py: reciprocal_divisions`), as XLA computes them on CPU: the
results equal JAX's (bit for bit where XLA rewrites alike), edge values included, in float32 and float64, with odd
sizes, in whole loops and row loops, under `grad` and `vmap`; other divisions stay."""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.ir import fuse
from jitad.ir.graph import walk
from jitad.ir.ops import Op
from jitad.ir.passes import run_passes

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)


def divisions(fn, *args):
    """(divisions, products) in the fused loops' bodies of `fn`'s program after the passes."""
    loops = [n for n in walk(run_passes(jitad.trace(fn, *args)).main) if n.op == Op.FUSED]
    body_ops = [b.op for n in loops for b in n.bodies[0].nodes]
    return body_ops.count(Op.DIV), body_ops.count(Op.MUL)


def rows_and_sums(dtype, shape=(37, 29)):
    r = np.random.default_rng(0)
    x, s = r.standard_normal(shape).astype(dtype), r.uniform(0.5, 3.0, shape[:-1] + (1,)).astype(dtype)
    s[:7, 0] = [0.0, -0.0, np.inf, -np.inf, np.nan, np.finfo(dtype).tiny / 4, 1e30]
    x[8, :3] = [np.inf, np.nan, 0.0]
    return x, s


def program(m):
    """A division by a row value in a loop of its own, one inside a longer loop, one whose
    divisor is computed from the row value, by scalars (AdamW's bias corrections), and one by
    a tensor that varies along rows (which stays a division)."""
    return lambda x, s, t: (x / s, m.maximum(x, 0.5) / s - 1.0, x / (s * 2.0 + 1.0), x / t,
                            m.abs(x) / (1.0 - 0.9 ** t) + 1.0, x / (x * x + 1.0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_equal_to_jax(dtype):
    x, s = rows_and_sums(dtype)
    got = jitad.jit(program(jnp))(x, s, dtype(3.0))
    want = jax.jit(program(jax.numpy))(x, s, dtype(3.0))
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))
    # elsewhere XLA's choices depend on the program around them: `x * (1 / s) - 1` contracted
    # into one multiply-add, `x / t` by a scalar kept a division here (alone it is `x * (1 / t)`)
    eps = np.finfo(dtype).eps
    for k, (a, b) in enumerate(zip(got, want)):
        assert np.asarray(a).dtype == dtype
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2 * eps, atol=4 * eps, err_msg=f"result {k}")


def test_divisions_by_row_values_become_products(monkeypatch):
    x, s = rows_and_sums(np.float32, (9, 16))
    div, mul = divisions(program(jnp), x, s, np.float32(3.0))
    assert div == 6   # five reciprocals (once per row or loop) and x / (x * x + 1), which varies along rows
    monkeypatch.setattr(fuse, "RECIPROCAL_DIVISIONS", False)
    assert divisions(program(jnp), x, s, np.float32(3.0)) == (6, mul - 5)
    with np.errstate(all="ignore"):   # the switch off: NumPy's correctly rounded division
        np.testing.assert_array_equal(jitad.jit(lambda x, s: (x / s, x / 3.0))(x, s), (x / s, x / np.float32(3.0)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_in_row_loops_gradient_and_vmap_agree_with_jax(dtype):
    """Attention's causal softmax (row loops: 64 KiB and more), its gradient, and under vmap."""
    r = np.random.default_rng(1)
    x, w = r.standard_normal((4, 2, 63, 63)).astype(dtype), r.standard_normal((4, 2, 63, 63)).astype(dtype)

    def loss(m, nn):
        def f(x):
            causal = m.tril(m.ones((63, 63), dtype=bool))
            return m.sum(nn.softmax(m.where(causal, x, -m.inf), axis=-1) * w) + m.sum(x / m.sum(x * x, -1, keepdims=True))
        return lambda x: (f(x), m.sum(jax.vmap(f)(x) if m is jax.numpy else jitad.vmap(f)(x)))
    ours = jitad.jit(jitad.value_and_grad(lambda x: loss(jnp, jitad.nn)(x)[0]))(x)
    theirs = jax.jit(jax.value_and_grad(lambda x: loss(jax.numpy, jax.nn)(x)[0]))(x)
    tol = dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, **tol)
    np.testing.assert_allclose(jitad.jit(lambda x: loss(jnp, jitad.nn)(x)[1])(x),
                               jax.jit(lambda x: loss(jax.numpy, jax.nn)(x)[1])(x), **tol)
    jitad.testing.check_grads(lambda s: jnp.sum(jnp.sin(x[0, 0, :5, :7]) / s), (np.full((5, 1), 1.5),), order=2)
