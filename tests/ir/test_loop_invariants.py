"""Work in a FOR body reading only captured values runs once, before the loop
(`loop_invariants` in jitad.ir.passes): an LSTM-like step slicing its weights out of a
captured vector gives NumPy's values and JAX's gradients with the slices outside the
loop; a loop of no iterations returns its initial state; values read through the
loop index or state stay inside."""
import numpy as np
import pytest

import jitad
from jitad.ir import passes
from jitad.testing import check_grads

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

B, T = 5, 9


def _step(m, fori):
    """A gated recurrence: each step slices the gates' weights out of `w` (invariant) and
    reads row t of `xs` (not)."""
    def run(w, h, xs, n=T):
        xs = m.asarray(xs)

        def body(t, h):
            forget = 1.0 / (1.0 + m.exp(-(xs[t] * w[:B] + w[B:2 * B])))
            change = m.tanh(h * w[2 * B:3 * B] + m.log(1.0 + w[3 * B:] ** 2))
            return h * forget + change
        return m.sum(fori(0, n, body, h) ** 2)
    return run


def _captures(ir):
    """How many operands the first loop of printed IR takes."""
    line = next(x for x in ir.splitlines() if " = for[" in x)
    return len(line.split(" = for[", 1)[1].split("]", 1)[1].split())


def test_invariant_slices_leave_the_loop():
    rng = np.random.default_rng(0)
    w, h, xs = rng.standard_normal(4 * B), rng.standard_normal(B), rng.standard_normal((T, B))
    f = jitad.jit(_step(jitad.numpy, jitad.lax.fori_loop))
    np.testing.assert_allclose(f(w, h, xs), _step(jnp, jax.lax.fori_loop)(w, h, xs), rtol=1e-13)
    assert _captures(f.ir) == 2 + 1 + 2 + 4   # bounds, state, xs and w, the four hoisted pieces of w
    grads = jitad.jit(jitad.grad(_step(jitad.numpy, jitad.lax.fori_loop), argnums=(0, 1, 2)))
    for got, want in zip(grads(w, h, xs), jax.grad(_step(jnp, jax.lax.fori_loop), argnums=(0, 1, 2))(w, h, xs)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    check_grads(_step(jitad.numpy, jitad.lax.fori_loop), (w, h, xs), order=1, modes=("rev",))


def test_same_values_without_the_pass(monkeypatch):
    rng = np.random.default_rng(1)
    w, h, xs = rng.standard_normal(4 * B), rng.standard_normal(B), rng.standard_normal((T, B))
    hoisted = jitad.jit(_step(jitad.numpy, jitad.lax.fori_loop))(w, h, xs)
    monkeypatch.setattr(passes, "PIPELINE", [s for s in passes.PIPELINE if s[0] != "loop_invariants"])
    f = jitad.jit(_step(jitad.numpy, jitad.lax.fori_loop))
    assert f(w, h, xs) == hoisted and _captures(f.ir) == 2 + 1 + 2


def test_a_loop_of_no_iterations():
    """The hoisted log of a negative weight is NaN, computed for nothing: the state comes back."""
    w, h, xs = -np.ones(4 * B), np.arange(B, dtype=float), np.ones((T, B))
    f = jitad.jit(lambda w, h, xs: jitad.lax.fori_loop(0, 0, lambda t, h: h + jitad.numpy.log(w[:B]), h))
    np.testing.assert_array_equal(f(w, h, xs), h)


def test_a_table_the_loop_writes_is_read_in_it():
    """`table_get` is pure, but its table changes in the loop: a read at a constant entry stays."""
    from jitad.ir.graph import Graph, Node, Var
    from jitad.ir.loop_invariants import hoist_loop_invariants
    from jitad.ir.ops import Op
    from jitad.ir.types import TableType, Type
    i64, f64 = Type("i64"), Type("f64", (3,))
    n, start, table, x = Var(i64), Var(i64), Var(TableType("f64", (3,))), Var(f64)
    i, acc, t, xs, zero, got, total, scaled = (Var(i64), Var(f64), Var(TableType("f64", (3,))), Var(f64), Var(i64),
                                               Var(f64), Var(f64), Var(f64))
    body = Graph([i, acc, t, xs], [Node(Op.TABLE_SET, (t, i, xs), ()),
                                  Node(Op.CONST, (), (zero,), {"value": 0, "type": i64}),
                                  Node(Op.TABLE_GET, (t, zero), (got,)),
                                  Node(Op.MUL, (xs, xs), (scaled,)),
                                  Node(Op.ADD, (acc, got), (total,))], [total])
    loop = Node(Op.FOR, (start, n, x, table, x), (Var(f64),), {"n_state": 1}, (body,))
    before, = [hoist_loop_invariants([loop], [])]
    moved = [m.op for m in before[:-1]]
    assert moved == [Op.MUL] and Op.TABLE_GET in [m.op for m in before[-1].bodies[0].nodes]
