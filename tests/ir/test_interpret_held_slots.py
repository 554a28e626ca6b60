"""The interpreter's plan holds a slot that only its own graph reads, sets and adds to as a
plain value (`_held_slots` in jitad.ir.interpret): the values are bit for bit those of the
slot kept as a list with its copies on write (negative zeros, dtypes, broadcast additions),
a slot a closure or body takes stays a slot, and the held plan runs with fewer steps."""
import numpy as np
import pytest

import jitad
from jitad.ir import interpret as I
from jitad.ir.graph import Graph, Node, Program, Var
from jitad.ir.ops import Op
from jitad.ir.types import RefType, Type


def _program(fn, *args):
    """The program `grad` runs for `fn` (reverse mode's slots), cleaned as the tiers run it."""
    from jitad.lower.compile import clean_up
    program = jitad.trace(jitad.grad(fn), *args)
    clean_up(program)
    return program


def _both(program, args, monkeypatch):
    held = I.interpret(program, args, I.Interpreter())
    with monkeypatch.context() as m:
        m.setattr(I, "_held_slots", lambda graph: set())
        kept = I.interpret(program, args, I.Interpreter())
    return held, kept


def _same(got, want):
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(g, w, strict=True)
        assert np.array_equal(np.signbit(g), np.signbit(w))


def test_a_second_order_program_gives_the_same_bits(monkeypatch):
    def f(x):
        inner = jitad.grad(lambda y: jitad.sum(jitad.exp(y - jitad.max(y)) * y ** 2))
        return jitad.sum(inner(x) * jitad.tanh(x))
    x = np.linspace(-1.0, 1.0, 10)
    program = _program(f, x)
    assert I._held_slots(program.main)   # (reverse mode's tensor slots: held)
    _same(*_both(program, [x], monkeypatch))


def test_negative_zeros_and_dtypes_as_the_slot_gives_them(monkeypatch):
    t, s = Type("f32", (3,)), Type("f64")
    x, y, a, b, r = Var(t), Var(s), Var(RefType("f32", (3,))), Var(RefType("f64")), Var(t)
    g1, g2 = Var(t), Var(s)
    nodes = [Node(Op.SLOT, (), (a,), {"type": t}), Node(Op.SLOT, (), (b,), {"type": s}),
             Node(Op.SLOT_ADD, (a, x), ()), Node(Op.SLOT_ADD, (b, y), ()), Node(Op.SLOT_GET, (a,), (g1,)),
             Node(Op.SLOT_ADD, (a, g1), ()), Node(Op.SLOT_GET, (b,), (g2,)), Node(Op.SLOT_GET, (a,), (r,))]
    program = Program(Graph(params=[x, y], nodes=nodes, outputs=[r, g2]), [])
    args = [np.array([-0.0, 1.5, -2.0], np.float32), -0.0]
    held, kept = _both(program, args, monkeypatch)
    _same(held, kept)
    assert np.signbit(held[1]) and held[0].dtype == np.float32 and not np.signbit(held[0][0])   # 0.0 + -0.0


def test_a_slot_a_closure_takes_stays_a_slot():
    program = jitad.trace(jitad.grad(lambda x: jitad.sum(jitad.FOR(0, 3, lambda i, c: c * x, x))),
                          np.ones(3))
    graph = program.main
    passed = {v for node in graph.nodes if node.op not in (Op.SLOT, Op.SLOT_GET, Op.SLOT_ADD, Op.SLOT_SET)
              for v in node.inputs if isinstance(v.type, RefType)}
    assert passed and not passed & I._held_slots(graph)


def test_held_slots_take_fewer_steps(monkeypatch):
    program = _program(lambda x: jitad.sum(jitad.sin(x) * x ** 2), np.ones(4))
    held = I.Interpreter()
    held.run(program.main, [np.ones(4)])
    with monkeypatch.context() as m:
        m.setattr(I, "_held_slots", lambda graph: set())
        kept = I.Interpreter()
        kept.run(program.main, [np.ones(4)])
    assert len(held.plans[id(program.main)][1]) < len(kept.plans[id(program.main)][1])


@pytest.mark.parametrize("tier", ["interpret"])
def test_a_gradient_interpreted_is_the_compiled_one(tier):
    jitad.config.update("jitad_tiering", tier)
    try:
        x = np.linspace(-1.0, 2.0, 7)
        got = jitad.grad(lambda w: jitad.sum(jitad.exp(w) * w) ** 2)(x)
    finally:
        jitad.config.update("jitad_tiering", "auto")
    want = jitad.jit(jitad.grad(lambda w: jitad.sum(jitad.exp(w) * w) ** 2))(x)
    np.testing.assert_allclose(got, want, rtol=1e-13)
