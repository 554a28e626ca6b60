"""Scalar slots become SSA values (`scalar_slots` in jitad.ir.passes) and scalar float
arithmetic on constants folds (`fold_constants`): an unrolled scalar gradient keeps no
slot and no memory traffic, a constant gradient is one constant, and every value stays
bit for bit what the unoptimized program computes."""
import math
import re

import numpy as np
import pytest

import jitad
from jitad import FOR
from jitad.ir.cse import fold_constants
from jitad.ir.graph import Graph, Node, Program, Var
from jitad.ir.interpret import interpret, run_graph
from jitad.ir.ops import Op
from jitad.ir.passes import run_passes
from jitad.ir.slots import promote_scalar_slots
from jitad.ir.types import RefType, Type
from jitad.ir.verify import verify
from jitad.pytree import flatten
from jitad.testing import check_grads

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

F64 = Type("f64")


def chain(x, n):
    for _ in range(n):
        x = 0.5 * x + 0.5 * x
    return x


def test_unrolled_chain_gradient_keeps_no_slot_and_is_one_constant():
    n = 50
    vg = jitad.jit(jitad.value_and_grad(lambda x: chain(x, n)))
    assert vg(1.5) == (1.5, 1.0)
    text = vg.ir
    assert "slot" not in text                      # every cotangent is an SSA value
    assert text.count("\n") <= 2 * n + 6           # the forward chain and a constant: no adjoint code
    gradient = re.search(r"return %\d+ (%\d+)", text).group(1)
    assert re.search(gradient + r":f64 = const 1\.0\n", text)
    assert "segment" not in vg.llvm_ir             # short enough to stay one function


def test_unrolled_gradient_matches_jax_and_the_unoptimized_program():
    def f(x, y):
        for _ in range(20):
            x, y = jitad.sin(x) * y + 0.25 * x, x * x - 0.5 * y
        return x * y
    args = (0.3, 0.7)
    g = jitad.value_and_grad(f, argnums=(0, 1))
    value, grads = g(*args)
    want_v, want_g = jax.value_and_grad(_jax_f, argnums=(0, 1))(*args)
    assert value == pytest.approx(float(want_v), rel=1e-12)
    np.testing.assert_allclose(grads, [float(w) for w in want_g], rtol=1e-11)
    traced = jitad.trace(g, *args)
    before = interpret(traced, list(args))
    optimized = run_passes(jitad.trace(g, *args), check=True)
    assert not any(n.op == Op.SLOT for n in optimized.main.nodes)
    after = interpret(optimized, list(args))
    assert [float(a).hex() for a in flatten(after)[0]] == [float(b).hex() for b in flatten(before)[0]]
    check_grads(f, args, order=2, modes=("rev",))


def _jax_f(x, y):
    for _ in range(20):
        x, y = jnp.sin(x) * y + 0.25 * x, x * x - 0.5 * y
    return x * y


def test_a_slot_a_loop_body_receives_stays_a_slot():
    def f(x, n):
        return FOR(0, n, lambda i, s: s * jitad.sin(x) + x, x)
    program = run_passes(jitad.trace(jitad.grad(f), 0.7, 5), check=True)
    loops = [n for n in program.main.nodes if n.op == Op.FOR]
    slots = {n.outputs[0] for n in program.main.nodes if n.op == Op.SLOT}
    assert loops and slots & {v for n in loops for v in n.inputs}
    want = jax.grad(lambda x: jax.lax.fori_loop(0, 5, lambda i, s: s * jnp.sin(x) + x, x))(0.7)
    assert jitad.grad(f)(0.7, 5) == pytest.approx(float(want), rel=1e-12)


def _slot_graph(*steps):
    """A graph of one scalar slot, then `steps` of ("add" | "set" | "get", value or None)."""
    x, y = Var(F64), Var(F64)
    slot = Var(RefType("f64", ()))
    nodes, outs = [Node(Op.SLOT, (), (slot,), {"type": F64})], []
    for op, value in steps:
        arg = {"x": x, "y": y}.get(value)
        if op == "get":
            outs.append(Var(F64))
            nodes.append(Node(Op.SLOT_GET, (slot,), (outs[-1],), {}))
        else:
            nodes.append(Node(Op.SLOT_ADD if op == "add" else Op.SLOT_SET, (slot, arg), (), {}))
    return Graph([x, y], nodes, outs)


@pytest.mark.parametrize("steps", [
    [("get", None)],
    [("add", "x"), ("get", None), ("add", "y"), ("add", "x"), ("get", None)],
    [("get", None), ("set", "y"), ("get", None), ("add", "x"), ("get", None), ("set", "x"), ("get", None)],
])
def test_promoted_reads_are_the_slot_values_bit_for_bit(steps):
    for args in ([np.float64(-0.0), np.float64(-0.0)], [np.float64(0.1), np.float64(0.2)],
                 [np.float64(np.inf), np.float64(-np.inf)]):
        graph = _slot_graph(*steps)
        with np.errstate(all="ignore"):
            want = run_graph(graph, list(args))
            promote_scalar_slots(graph)
            verify(Program(graph, []))
            got = run_graph(graph, list(args))
        assert not any(n.op in (Op.SLOT, Op.SLOT_GET, Op.SLOT_ADD, Op.SLOT_SET) for n in graph.nodes)
        assert [float(a).hex() for a in got] == [float(b).hex() for b in want]   # -0.0 stays -0.0
    assert math.copysign(1.0, run_graph(_slot_graph(("get", None)), [0.0, 0.0])[0]) == -1.0


def test_a_slot_that_is_an_output_or_an_operand_stays():
    graph = _slot_graph(("add", "x"))
    graph.outputs = [graph.nodes[0].outputs[0]]
    promote_scalar_slots(graph)
    assert [n.op for n in graph.nodes] == [Op.SLOT, Op.SLOT_ADD]


def _const(value, dtype="f64"):
    return Node(Op.CONST, (), (Var(Type(dtype)),), {"value": value, "type": Type(dtype)})


@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_folded_constants_round_as_the_code_does(dtype):
    a, b, z = _const(0.1, dtype), _const(3.0, dtype), _const(0.0, dtype)
    mul = Node(Op.MUL, (a.outputs[0], b.outputs[0]), (Var(Type(dtype)),), {})
    div = Node(Op.DIV, (mul.outputs[0], z.outputs[0]), (Var(Type(dtype)),), {})
    neg = Node(Op.NEG, (div.outputs[0],), (Var(Type(dtype)),), {})
    graph = Graph([], [a, b, z, mul, div, neg], [mul.outputs[0], div.outputs[0], neg.outputs[0]])
    with np.errstate(all="ignore"):
        want = run_graph(graph, [])
    assert fold_constants(graph) == 3
    assert all(n.op == Op.CONST for n in graph.nodes)
    scalar = np.float32 if dtype == "f32" else np.float64
    assert run_graph(graph, []) == want
    assert graph.nodes[3].attrs["value"] == float(scalar(0.1) * scalar(3.0)) and math.isinf(graph.nodes[5].attrs["value"])


def test_integer_and_tensor_arithmetic_is_not_folded():
    i = _const(2, "i64")
    add = Node(Op.ADD, (i.outputs[0], i.outputs[0]), (Var(Type("i64")),), {})
    graph = Graph([], [i, add], [add.outputs[0]])
    assert fold_constants(graph) == 0 and graph.nodes[1].op == Op.ADD


def test_zero_gradients_still_leave_as_positive_zero():
    assert math.copysign(1.0, jitad.grad(lambda x, y: x, argnums=1)(2.0, 3.0)) == 1.0   # no path
    assert math.copysign(1.0, jitad.grad(lambda x: -0.0 * x)(2.0)) == 1.0               # a -0.0 sum
