"""Scalar slots as SSA values: reverse mode accumulates every scalar cotangent in a slot
(`slot`, `slot_add`, `slot_get`); where a slot never leaves its graph's node list, its
value at each read is known in order, so the reads become that value and the slot goes.
An unrolled scalar gradient then has a few nodes a step, not a dozen: less work for the
later passes and LLVM, and a long program splits into fewer functions (`lower.llvm`'s
segments), with no slot living in memory between them.
"""
from .graph import Node, Var, uses
from .ops import Op
from .types import FLOATS, Type

ACCESS = (Op.SLOT_GET, Op.SLOT_SET, Op.SLOT_ADD)


def promote_scalar_slots(graph):
    """Rewrite `graph` and its bodies in place (see `promote_nodes`)."""
    for node in graph.nodes:
        for body in node.bodies:
            promote_scalar_slots(body)
    graph.nodes, graph.outputs = promote_nodes(graph.nodes, graph.outputs)


def promote_nodes(nodes, outputs):
    """(nodes, outputs) without the scalar slots that only `slot_get`, `slot_set` and
    `slot_add` of this node list touch (no sub-graph, closure or output receives them):
    a read is the value last set, plus the additions since. A slot starts at -0.0 (for
    floats the exact additive identity, so a first addition is its operand) or 0; a read
    of an untouched slot reads that constant."""
    users = uses(nodes, outputs)
    promoted = set()
    for n in nodes:
        if n.op != Op.SLOT or n.attrs["type"].shape or n.attrs["type"].dtype not in FLOATS + ("i64",):
            continue
        slot = n.outputs[0]
        if all(k < len(nodes) and nodes[k].op in ACCESS and nodes[k].inputs[0] is slot
               and slot not in nodes[k].inputs[1:] for k in users.get(slot, ())):
            promoted.add(slot)
    if not promoted:
        return nodes, outputs
    value, rename, out = {}, {}, []   # slot -> the var it holds now (None: its initial zero)
    for n in nodes:
        if rename:
            n = Node(n.op, tuple(rename.get(v, v) for v in n.inputs), n.outputs, n.attrs, n.bodies)
        slot = n.inputs[0] if n.op in ACCESS else n.outputs[0] if n.op == Op.SLOT else None
        if slot not in promoted:
            out.append(n)
        elif n.op == Op.SLOT:
            value[slot] = None
        elif n.op == Op.SLOT_SET:
            value[slot] = n.inputs[1]
        elif n.op == Op.SLOT_ADD and value[slot] is not None:
            total = Var(n.inputs[1].type)
            out.append(Node(Op.ADD, (value[slot], n.inputs[1]), (total,), {}))
            value[slot] = total
        elif n.op == Op.SLOT_ADD:
            value[slot] = n.inputs[1]
        else:   # slot_get
            if value[slot] is None:
                t = n.outputs[0].type
                value[slot] = Var(t)
                out.append(Node(Op.CONST, (), (value[slot],),
                                {"value": -0.0 if t.dtype in FLOATS else 0, "type": Type(t.dtype)}))
            rename[n.outputs[0]] = value[slot]
    return out, [rename.get(v, v) for v in outputs]
