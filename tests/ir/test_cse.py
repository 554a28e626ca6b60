"""The common-subexpression pass: repeated pure nodes merge; effects, slot reads,
nodes with other attributes, nodes in other bodies and values of closed arena scopes
do not."""
import numpy as np
import pytest

import jitad
from jitad.ir.cse import eliminate_common_subexpressions
from jitad.ir.graph import Graph, Node, Var, walk
from jitad.ir.ops import Op
from jitad.ir.types import RefType, Type
from jitad.ir.verify import verify
from jitad.testing import check_grads

F = Type("f64", (3,))


def node(op, inputs, out_type=F, **attrs):
    return Node(op, tuple(inputs), (Var(out_type),) if out_type else (), attrs)


def ops(graph):
    return [n.op for n in graph.nodes]


def test_repeated_pure_nodes_merge_and_users_follow():
    x = Var(F)
    a, b = node(Op.MUL, [x, x]), node(Op.MUL, [x, x])
    c = node(Op.ADD, [a.outputs[0], b.outputs[0]])
    graph = Graph([x], [a, b, c], [b.outputs[0], c.outputs[0]])
    assert eliminate_common_subexpressions(graph) == 1
    assert ops(graph) == [Op.MUL, Op.ADD]
    assert graph.nodes[1].inputs == (a.outputs[0], a.outputs[0]) and graph.outputs[0] is a.outputs[0]


def test_other_attributes_and_constants_stay_apart():
    x = Var(Type("f64", (3, 4)))
    s0 = node(Op.SUM, [x], Type("f64", (4,)), axes=(0,), keepdims=False)
    s0b = node(Op.SUM, [x], Type("f64", (4,)), axes=(0,), keepdims=False)
    s1 = node(Op.SUM, [x], Type("f64", (3,)), axes=(1,), keepdims=False)
    zeros = [node(Op.CONST, [], Type("f64"), value=v, type=Type("f64")) for v in (0.0, -0.0, 0.0)]
    graph = Graph([x], [s0, s0b, s1] + zeros, [n.outputs[0] for n in (s0b, s1, *zeros)])
    assert eliminate_common_subexpressions(graph) == 2   # s0b into s0, the second 0.0 into the first
    assert ops(graph) == [Op.SUM, Op.SUM, Op.CONST, Op.CONST]
    assert [n.attrs["value"] for n in graph.nodes[2:]] == [0.0, -0.0] and np.signbit(graph.nodes[3].attrs["value"])


def test_effects_and_slot_reads_do_not_merge():
    x = Var(F)
    slot = node(Op.SLOT, [], RefType("f64", (3,)), type=F)
    s = slot.outputs[0]
    get1 = node(Op.SLOT_GET, [s])
    add = node(Op.SLOT_ADD, [s, x], None)
    get2 = node(Op.SLOT_GET, [s])
    add2 = node(Op.SLOT_ADD, [s, x], None)
    graph = Graph([x], [slot, get1, add, get2, add2], [get1.outputs[0], get2.outputs[0]])
    assert eliminate_common_subexpressions(graph) == 0
    assert ops(graph) == [Op.SLOT, Op.SLOT_GET, Op.SLOT_ADD, Op.SLOT_GET, Op.SLOT_ADD]


def test_a_value_of_a_closed_arena_scope_is_not_reused():
    x = Var(F)
    mark = node(Op.ARENA_MARK, [], Type("i64"))
    a = node(Op.EXP, [x])
    release = node(Op.ARENA_RELEASE, [mark.outputs[0]], None)
    b = node(Op.EXP, [x])
    graph = Graph([x], [mark, a, release, b], [b.outputs[0]])
    assert eliminate_common_subexpressions(graph) == 0


def test_branches_keep_their_own_nodes():
    def f(x, p):
        a = jitad.sin(x) * jitad.sin(x)
        return a + jitad.IF(p > 0, lambda: jitad.sin(x) + jitad.sin(x), lambda: jitad.sin(x) * 3.0)
    program = jitad.trace(f, np.ones(3), 1.0)
    (branch,) = [n for n in program.main.nodes if n.op == Op.IF]
    before = [sum(n.op == Op.SIN for n in walk(g)) for g in (program.main,) + branch.bodies]
    eliminate_common_subexpressions(program.main)
    verify(program)
    then_sins = sum(n.op == Op.SIN for n in walk(branch.bodies[0]))
    main_sins = sum(n.op == Op.SIN for n in program.main.nodes)
    assert before[0] > 3 and main_sins == 1 and then_sins == 1
    for p in (1.0, -1.0):
        expected = np.sin(1.0) ** 2 + (2 * np.sin(1.0) if p > 0 else 3 * np.sin(1.0))
        np.testing.assert_allclose(jitad.jit(f)(np.ones(3), p), expected, rtol=1e-15)


def test_kmeans_tie_mask_is_computed_once():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    jax.config.update("jax_enable_x64", True)

    def cost(np_, p, c):
        d2 = np_.sum(p * p, axis=1, keepdims=True) + np_.reshape(np_.sum(c * c, axis=1), (1, -1)) \
            - 2.0 * np_.matmul(p, np_.transpose(c))
        return np_.sum(np_.min(d2, axis=1))

    def direction(np_, ad):
        def run(p, c):
            g = ad.grad(lambda p, c: cost(np_, p, c), argnums=1)
            j, h = ad.jvp(lambda c: g(p, c), (c,), (np_.ones_like(c),))
            return j / h
        return run
    rng = np.random.default_rng(0)
    p, c = rng.random((30, 3)), rng.random((4, 3))
    program = jitad.trace(direction(jitad, jitad), p, c)   # as differentiated, before the passes
    assert sum(n.op == Op.EQ for n in walk(program.main)) == 2
    eliminate_common_subexpressions(program.main)
    verify(program)
    assert sum(n.op == Op.EQ for n in walk(program.main)) == 1   # the VJP and its tangent share the mask
    np.testing.assert_allclose(jitad.jit(direction(jitad, jitad))(p, c), direction(jnp, jax)(p, c), rtol=1e-10)
    check_grads(lambda c: cost(jitad, p[:10], c), (c[:3],), order=1, modes=("rev",))
