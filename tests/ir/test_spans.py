"""`regions.Spans`, the index that answers `unchanged_between` without walking the span:
on random node lists (slots and views of them, arena scopes, writes through slots made
in the list and through a param's ref) every answer is the walk's, also after a rewrite
replaces a node (`note`)."""
import random

import pytest

from jitad.ir.graph import Node, Var
from jitad.ir.ops import Op
from jitad.ir.regions import node_facts, unchanged_between
from jitad.ir.types import RefType, TableType, Type

T = Type("f64", (4,))
GETS = (Op.SLOT_GET, Op.TABLE_GET)


def walked(x, start, end, nodes):
    """The answer by walking the nodes in (start, end] (the definition)."""
    made = {v: k for k, n in enumerate(nodes) for v in n.outputs}
    marks = {m.outputs[0]: k for k, m in enumerate(nodes) if m.op == Op.ARENA_MARK}
    local = {v for m in nodes if m.op in (Op.SLOT, Op.TABLE) for v in m.outputs}
    root = x
    while root in made and nodes[made[root]].op.view and nodes[made[root]].op != Op.SLOT_GET:
        root = nodes[made[root]].inputs[0]
    between, born = nodes[start + 1:end + 1], made.get(root, -1)
    if any(m.op == Op.ARENA_RELEASE and marks.get(m.inputs[0], -1) < born for m in between):
        return False
    producer = nodes[made[root]] if root in made else None
    if producer is not None and producer.op in GETS:
        return not any(producer.inputs[0] in m.inputs and m.op not in GETS for m in between)
    if producer is not None:
        return True
    return all(m.op.pure or all(v in local for v in m.inputs if isinstance(v.type, (RefType, TableType)))
               for m in between)


def random_nodes(rng, n):
    """A node list over a tensor param and a param ref: slots, gets and views, sets, adds,
    fused loops taking refs, arena marks and releases."""
    param, param_ref = Var(T), Var(RefType("f64", (4,)))
    tensors, refs, marks, nodes = [param], [param_ref], [], []
    for _ in range(n):
        kind = rng.choice(["slot", "get", "view", "set", "add", "fused", "mark", "release"])
        if kind == "slot":
            node = Node(Op.SLOT, (), (Var(RefType("f64", (4,))),), {"type": T})
            refs.append(node.outputs[0])
        elif kind == "get":
            node = Node(Op.SLOT_GET, (rng.choice(refs),), (Var(T),))
        elif kind == "view":
            node = Node(Op.RESHAPE, (rng.choice(tensors),), (Var(T),), {"shape": (4,)})
        elif kind == "set":
            node = Node(Op.SLOT_SET, (rng.choice(refs), rng.choice(tensors)), ())
        elif kind == "add":
            node = Node(Op.ADD, (rng.choice(tensors), rng.choice(tensors)), (Var(T),))
        elif kind == "fused":
            node = Node(Op.FUSED, (rng.choice(tensors), rng.choice(refs)), (Var(T),), {"shape": (4,)})
        elif kind == "mark":
            node = Node(Op.ARENA_MARK, (), (Var(Type("i64")),))
            marks.append(node.outputs[0])
        elif marks:
            node = Node(Op.ARENA_RELEASE, (rng.choice(marks),), ())
        else:
            continue
        nodes.append(node)
        tensors += [v for v in node.outputs if isinstance(v.type, Type) and v.type.shape]
    return nodes, tensors, refs


@pytest.mark.parametrize("seed", range(6))
def test_spans_answer_as_the_walk(seed):
    rng = random.Random(seed)
    nodes, tensors, refs = random_nodes(rng, 120)
    _, _, spans = node_facts(nodes, [])
    for step in range(400):
        if step % 50 == 49:   # a rewrite: a fused loop takes one more ref (as inlining a cone does)
            k = rng.randrange(len(nodes))
            if nodes[k].op == Op.FUSED:
                nodes[k] = Node(Op.FUSED, nodes[k].inputs + (rng.choice(refs),), nodes[k].outputs, nodes[k].attrs)
                spans.note(k, nodes[k])
        start = rng.randrange(len(nodes))
        end = rng.randrange(start, len(nodes))
        x = rng.choice(tensors)
        assert unchanged_between(x, start, end, spans) == walked(x, start, end, nodes), (seed, step, start, end)
