"""Dead stores: a slot only written (the value of a function whose gradient alone is
returned) goes with the code that only fed it (`unread_slots` in jitad.ir.passes)."""
import numpy as np
import pytest

import jitad
from jitad import FOR
from jitad.testing import check_grads

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


def test_grad_of_sum_mat_vec_computes_no_product_forward():
    rng = np.random.default_rng(0)
    A, v = rng.standard_normal((30, 20)), rng.standard_normal(20)
    g = jitad.jit(jitad.grad(lambda A, v: jitad.sum(A @ v), argnums=(0, 1)))
    gA, gv = g(A, v)
    assert "matmul[" not in g.ir                 # no forward product: only the backward's two
    assert g.ir.count("matmul_add") == 2
    assert g.ir.count("slot_set") == 0           # v's gradient is its slot read reshaped: no copy, no value
    jA, jv = jax.grad(lambda A, v: jnp.sum(A @ v), argnums=(0, 1))(A, v)
    np.testing.assert_allclose(gA, jA, rtol=1e-13)
    np.testing.assert_allclose(gv, jv, rtol=1e-13)
    vg = jitad.jit(jitad.value_and_grad(lambda A, v: jitad.sum(A @ v), argnums=(0, 1)))
    value, _ = vg(A, v)
    assert "matmul[" in vg.ir and value == pytest.approx(float(np.sum(A @ v)), rel=1e-13)


def test_a_slot_a_loop_body_reads_is_kept():
    def f(x, n):
        return FOR(0, n, lambda i, s: s * jitad.sin(x) + x, x)
    g = jitad.grad(f)
    assert g(0.7, 5) == pytest.approx(float(jax.grad(lambda x: jax.lax.fori_loop(
        0, 5, lambda i, s: s * jnp.sin(x) + x, x))(0.7)), rel=1e-12)
    check_grads(f, (0.7, 5), order=2)


def test_gradients_unchanged_where_the_value_is_dead():
    rng = np.random.default_rng(1)
    W, x = rng.standard_normal((4, 3)), rng.standard_normal(3)

    def loss(W, x):
        h = jitad.tanh(W @ x)
        return jitad.sum(h * h) + jitad.max(h)
    got = jitad.grad(loss, argnums=(0, 1))(W, x)
    want = jax.grad(lambda W, x: jnp.sum(jnp.tanh(W @ x) ** 2) + jnp.max(jnp.tanh(W @ x)), argnums=(0, 1))(W, x)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    check_grads(loss, (W, x), order=2, modes=("fwd", "rev"))


def test_a_branch_only_computing_what_nothing_reads_goes_and_one_printing_stays(capsys):
    """An IF whose branches only compute and whose results nothing reads is dead code (as
    reverse mode leaves one choosing a loop state's entry that the backward pass never
    reads); one whose branch prints is kept and prints."""
    def quiet(x, p):
        jitad.IF(p > 0, lambda: jitad.sin(x) * 2.0, lambda: x + 1.0)
        return x * 3.0

    def loud(x, p):
        jitad.IF(p > 0, lambda: jitad.debug.print("taken {}", p), lambda: None)
        return x * 3.0
    x = np.linspace(0.0, 1.0, 4)
    for f, kept in ((quiet, False), (loud, True)):
        g = jitad.jit(f)
        np.testing.assert_array_equal(g(x, 1.0), x * 3.0)
        assert (" = if " in g.ir or "\n  if " in g.ir) == kept, g.ir
    assert "taken 1.0" in capsys.readouterr().out
