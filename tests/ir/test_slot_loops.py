"""Fused loops of one shape handing a tensor on run as one loop (`merge_slot_loops` in
jitad.ir.passes): a loop storing a tensor slot and the next loop reading it (the slot
becomes a register), and a loop whose result only a later loop reads (it runs there); the
results stay those of the separate loops. Slots of another shape (row totals), loops
working across elements, values made above a release, a release between and a slot read
as a value (a view) that is written on the way keep the loops apart."""
import numpy as np
import pytest

import jitad
from jitad.ir import passes, peephole
from jitad.ir.graph import Graph, Node, Var
from jitad.ir.ops import Op
from jitad.ir.types import RefType, Type

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

N, K = 12, 5
SHAPE = (N, K)


def _newton_direction(m):
    """k-means' direction: the gradient of Σ_i min_j |p_i − c_j|² and its Hessian's diagonal
    (forward over reverse): the cotangent of the distances is stored by one loop and split
    by the next."""
    def cost(p, c):
        d2 = m.sum(p * p, axis=1, keepdims=True) + m.sum(c * c, axis=1)[None, :] - 2.0 * p @ c.T
        return m.sum(m.min(d2, axis=1))

    def direction(p, c):
        grad = (jitad if m is jitad else jax).grad(cost, argnums=1)
        j, h = (jitad if m is jitad else jax).jvp(lambda c: grad(p, c), (c,), (m.ones_like(c),))
        return j / h
    return direction


def test_the_cotangent_loops_run_as_one(monkeypatch):
    rng = np.random.default_rng(0)
    p = rng.random((N, 3))
    c = p[-K:] + 0.01 * rng.random((K, 3))
    merged = jitad.jit(_newton_direction(jitad))
    got = merged(p, c)
    np.testing.assert_allclose(got, _newton_direction(jnp)(p, c), rtol=1e-12)
    monkeypatch.setattr(passes, "PIPELINE", [s for s in passes.PIPELINE if s[0] != "merge_slot_loops"])
    apart = jitad.jit(_newton_direction(jitad))
    np.testing.assert_array_equal(apart(p, c), got)
    loops = lambda ir: sum(line.count(f"fused[shape=({N}, {K})]") for line in ir.splitlines())
    slots = lambda ir: ir.count(f"ref<f64[{N},{K}]> = slot")
    assert loops(merged.ir) == loops(apart.ir) - 2 and slots(merged.ir) == slots(apart.ir) - 1


def _slot(shape):
    return Node(Op.SLOT, (), (Var(RefType("f64", shape)),), {"type": Type("f64", shape), "uninit": True})


def _loop(inputs, build, outputs=()):
    """A fused loop over SHAPE: `build(params)` gives its body's nodes and outputs."""
    params = [Var(v.type) for v in inputs]
    body_nodes, body_outputs = build(params)
    return Node(Op.FUSED, tuple(inputs), tuple(outputs), {"shape": SHAPE}, (Graph(params, body_nodes, body_outputs),))


def _store(slot_shape):
    """x (SHAPE) and two loops: the first adds x into a slot of `slot_shape`, the second reads
    it into a value."""
    x = Var(Type("f64", SHAPE))
    slot = _slot(slot_shape)
    ref = slot.outputs[0]
    first = _loop([x, ref], lambda ps: ([Node(Op.SLOT_ADD, (ps[1], ps[0]), (), {"store": True})], []))
    out = Var(Type("f64", SHAPE))

    def read(ps):
        got, twice = Var(Type("f64")), Var(Type("f64"))
        return [Node(Op.SLOT_GET, (ps[0],), (got,)), Node(Op.ADD, (got, got), (twice,))], [twice]
    second = _loop([ref], read, [out])
    return x, slot, first, second, out


def test_per_element_loops_merge_and_keep_their_order():
    x, slot, first, second, out = _store(SHAPE)
    nodes = peephole.merge_slot_loops([slot, first, second], [out])
    assert [n.op for n in nodes] == [Op.SLOT, Op.FUSED]
    (body,) = nodes[1].bodies
    assert [n.op for n in body.nodes] == [Op.SLOT_ADD, Op.SLOT_GET, Op.ADD]   # the store, then its read
    assert nodes[1].outputs == (out,) and set(nodes[1].inputs) == {x, slot.outputs[0]}


def test_a_row_total_or_a_value_above_a_release_keeps_them_apart():
    row = _store((N, 1))   # the first loop's row sums: complete only after its loop
    assert len(peephole.merge_slot_loops(list(row[1:4]), [row[4]])) == 3
    x, slot, first, second, out = _store(SHAPE)
    mark = Node(Op.ARENA_MARK, (), (Var(Type("i64")),))
    release = Node(Op.ARENA_RELEASE, (mark.outputs[0],), ())
    nodes = [slot, mark, first, release, second]   # `out` would be made inside the scope and freed
    assert len(peephole.merge_slot_loops(nodes, [out])) == 5
    reduce_body = lambda ps: ([Node(Op.SLOT_GET, (ps[0],), (v := Var(Type("f64")),)),
                               Node(Op.SUM, (v,), (t := Var(Type("f64")),), {"axes": (0, 1), "keepdims": False})], [t])
    total = Var(Type("f64"))
    across = _loop([slot.outputs[0]], reduce_body, [total])   # a loop working across elements
    assert len(peephole.merge_slot_loops([slot, first, across], [total])) == 3
    view = Node(Op.SLOT_GET, (slot.outputs[0],), (Var(Type("f64", SHAPE)),))   # the slot's memory as a value
    viewed = Node(Op.RESHAPE, view.outputs, (Var(Type("f64", SHAPE)),), {"shape": SHAPE})
    reads = _loop([viewed.outputs[0], slot.outputs[0]], lambda ps: ([], []))
    assert len(peephole.merge_slot_loops([slot, view, viewed, first, reads], [])) == 5


def _value_then_reader():
    """x, a loop making 2x, and a loop reading it (with y)."""
    x, y = Var(Type("f64", SHAPE)), Var(Type("f64", SHAPE))
    doubled, out = Var(Type("f64", SHAPE)), Var(Type("f64", SHAPE))

    def double(ps):
        v = Var(Type("f64"))
        return [Node(Op.ADD, (ps[0], ps[0]), (v,))], [v]

    def times(ps):
        v = Var(Type("f64"))
        return [Node(Op.MUL, (ps[0], ps[1]), (v,))], [v]
    return x, y, _loop([x], double, [doubled]), _loop([doubled, y], times, [out]), out


def test_a_loop_whose_result_one_later_loop_reads_runs_in_it():
    x, y, first, second, out = _value_then_reader()
    fill = _slot(SHAPE)   # unrelated work between the two
    nodes = peephole.merge_slot_loops([first, fill, second], [out])
    assert [n.op for n in nodes] == [Op.SLOT, Op.FUSED]
    assert nodes[1].outputs == (out,) and set(nodes[1].inputs) == {x, y}
    assert [n.op for n in nodes[1].bodies[0].nodes] == [Op.ADD, Op.MUL]
    mark = Node(Op.ARENA_MARK, (), (Var(Type("i64")),))
    release = Node(Op.ARENA_RELEASE, (mark.outputs[0],), ())
    assert len(peephole.merge_slot_loops([first, mark, release, second], [out])) == 4   # a release between


def test_a_loop_reading_a_slot_written_on_the_way_stays():
    x, y, first, second, out = _value_then_reader()
    slot = _slot(SHAPE)
    view = Node(Op.SLOT_GET, (slot.outputs[0],), (x,))   # the first loop reads the slot's memory
    write = Node(Op.SLOT_SET, (slot.outputs[0], y), ())   # ... which is written before the second loop
    assert len(peephole.merge_slot_loops([slot, view, first, write, second], [out])) == 5
    assert len(peephole.merge_slot_loops([slot, view, first, second], [out])) == 3
