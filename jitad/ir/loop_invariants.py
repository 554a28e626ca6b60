"""Work in a `FOR` body that reads only what the loop captures runs once, before the loop.

A staged loop body often takes slices, reshapes or products of values captured from outside
(an LSTM step slicing each gate's weights out of the layer's parameter vector), and each
iteration makes them again: on short vectors a kernel call and a copy each. This pass
moves such nodes (pure, without bodies or references, reading only captured values,
constants and other moved nodes) in front of the loop, whose body then captures their
results instead. (A loop of no iterations then computes them once for nothing: pure
nodes cannot fail.)
"""
from . import float_checks
from .graph import Graph, Node, Var
from .ops import Op
from .types import Type


def hoist_loop_invariants(nodes, outputs):
    """Each `FOR` in `nodes` with the invariant part of its body (see the module) run
    before it; the loop captures those results. Off under jax_debug_nans/infs (a loop of
    no iterations must not report what it never computed)."""
    if float_checks.ACTIVE:
        return nodes
    out = []
    for node in nodes:
        if node.op == Op.FOR:
            before, node = _hoisted(node)
            out += before
        out.append(node)
    return out


def _movable(n):
    """Pure, no bodies, on values alone (no slot, table or tree the loop may change: a
    `table_get` is pure but reads what the loop writes), not a host callback (each
    iteration calls it)."""
    return n.op.pure and n.op != Op.HOST_CALL and not n.bodies and n.outputs and n.inputs and all(
        type(v.type) is Type for v in n.inputs + n.outputs)


def _hoisted(loop):
    """(the nodes to run before `loop`, the loop capturing their results)."""
    (body,) = loop.bodies
    n_state = loop.attrs["n_state"]
    outside = dict(zip(body.params[1 + n_state:], loop.inputs[2 + n_state:]))   # body value -> outer value
    consts = {n.outputs[0]: n for n in body.nodes if n.op == Op.CONST}
    before, kept = [], []
    for n in body.nodes:
        if not _movable(n) or not all(v in outside or v in consts for v in n.inputs):
            kept.append(n)
            continue
        for v in n.inputs:
            if v not in outside:   # a constant it reads: made outside too
                outside[v] = Var(v.type)
                before.append(Node(Op.CONST, (), (outside[v],), dict(consts[v].attrs)))
        made = tuple(Var(v.type) for v in n.outputs)
        before.append(Node(n.op, tuple(outside[v] for v in n.inputs), made, dict(n.attrs)))
        outside.update(zip(n.outputs, made))
    if not before:
        return [], loop
    staying = {id(m) for m in kept}
    moved = [v for m in body.nodes if id(m) not in staying for v in m.outputs]
    read = {v for m in kept for v in m.inputs} | set(body.outputs)
    captured = [v for v in moved if v in read]
    new_body = Graph(body.params + captured, kept, body.outputs)
    return before, Node(Op.FOR, loop.inputs + tuple(outside[v] for v in captured), loop.outputs, loop.attrs,
                        (new_body,))
