"""Additions to a tensor slot in the last fused loop that touches it, kept in a register.

Reverse mode sums a cotangent in a slot over several fused loops; the loop that adds the
last contribution and reads the sum (an RK4 stage's cotangent, read by that stage's own
adjoint) stores the sum back although nothing reads the slot after it. When nothing does,
that loop loads each element once into a per-element scalar slot (a register), adds
there, and reads it there: one stream over the slot instead of two.

When the slot's one earlier write is another fused loop of the same shape storing an
elementwise function of values that still hold when the last loop runs (a cotangent's
first contribution, a multiple of the step's incoming cotangent), the last loop computes
that function itself instead of loading it, and the slot is never stored at all.
"""
from .dce import SLOT_WRITES
from .graph import Graph, Node, Var
from .ops import Op
from .regions import node_facts, unchanged_between
from .types import RefType, Type


# in a fused body, one element each: a constant, and a broadcast or reshape of a value
ELEMENT_MOVES = (Op.CONST, Op.BROADCAST, Op.RESHAPE)


def last_adds_program(program):
    """The rewrite below on every graph of `program`. The values that no node can write
    while a graph runs: main's arguments, and a FOR body's state (the loop's own buffers,
    which the lowering lets a slot or scatter take over only where nothing reads them after)."""
    def on(graph, fixed):
        for node in graph.nodes:
            for body in node.bodies if node.op != Op.FUSED else ():
                on(body, set(body.params[1:1 + node.attrs["n_state"]]) if node.op == Op.FOR else set())
        graph.nodes = last_adds_in_registers(graph.nodes, graph.outputs, fixed)
    for fun in program.funs:
        on(fun.body, set())
    on(program.main, set(program.main.params))


def last_adds_in_registers(nodes, outputs, fixed=frozenset()):
    """`nodes` with each fused loop that is the last user of a tensor slot of `nodes`
    (see the module) adding to that slot in a register; `fixed`: values nothing writes."""
    users, _, spans = node_facts(nodes, outputs)
    nodes, drop = list(nodes), set()
    for i, n in enumerate(list(nodes)):
        if n.op != Op.SLOT or not n.outputs[0].type.shape:
            continue
        slot = n.outputs[0]
        where = users.get(slot, [])
        k = where[-1] if where else None
        if k is None or k == len(nodes) or nodes[k].op != Op.FUSED or not _eligible(nodes, where, k, slot):
            continue
        first = _deferrable(nodes, where, slot, spans, fixed)
        if first is None:
            nodes[k] = _in_register(nodes[k], slot)
            continue
        a, cone, value = first
        nodes[a] = _without_param(nodes[a], slot)
        nodes[k] = _without_param(_in_register(nodes[k], slot, (cone, value, nodes[a])), slot)
        drop.add(i)
    return [n for i, n in enumerate(nodes) if i not in drop]


def _eligible(nodes, where, k, slot):
    """The loop at `k` reads `slot` once as a param, only adds to it whole and reads it
    back, and every earlier user only writes the slot (no view of it, no closure or
    loop taking it, can read it after the loop)."""
    f = nodes[k]
    if f.inputs.count(slot) != 1 or tuple(f.attrs["shape"]) != slot.type.shape or k in where[:-1] or not all(
            nodes[j].op in SLOT_WRITES or nodes[j].op == Op.FUSED and not nodes[j].outputs for j in where[:-1]):
        return False   # (a view of it, or a closure or loop taking it, may read it after `f`)
    p = f.bodies[0].params[f.inputs.index(slot)]
    touching = [b for b in f.bodies[0].nodes if p in b.inputs]
    adds = [b for b in touching if b.op == Op.SLOT_ADD]
    return bool(adds) and all((b.op == Op.SLOT_ADD and not b.attrs.get("store") and b.inputs[0] is p)
                              or b.op == Op.SLOT_GET for b in touching)


def _in_register(f, slot, computed=None):
    """Fused loop `f` starting a scalar slot from `slot`'s element, or from the value that
    `computed` (cone, value, the loop it came from) makes, and adding there."""
    (body,) = f.bodies
    inputs, params = list(f.inputs), list(body.params)
    p = params[inputs.index(slot)]
    dtype = slot.type.dtype
    reg, old = Var(RefType(dtype)), Var(Type(dtype))
    start = [Node(Op.SLOT, (), (reg,), {"type": Type(dtype)})]
    if computed is None:
        start.append(Node(Op.SLOT_GET, (p,), (old,)))
    else:
        old = _copy_cone(*computed, inputs, params, start)
    start.append(Node(Op.SLOT_ADD, (reg, old), ()))
    rest = [Node(b.op, tuple(reg if v is p else v for v in b.inputs), b.outputs, b.attrs, b.bodies)
            for b in body.nodes]
    return Node(Op.FUSED, tuple(inputs), f.outputs, f.attrs, (Graph(params, start + rest, body.outputs),))


def _deferrable(nodes, where, slot, spans, fixed):
    """(position of the one earlier writer, the cone of what it stores, that value) when
    `slot`'s only other user is a fused loop of the same shape storing an elementwise
    function of values unchanged until the last user runs; else None."""
    if len(where) != 2 or where[0] == where[1]:
        return None
    a, k = where
    f = nodes[a]
    if f.op != Op.FUSED or f.inputs.count(slot) != 1 or tuple(f.attrs["shape"]) != slot.type.shape \
            or tuple(nodes[k].attrs["shape"]) != slot.type.shape:
        return None
    (body,) = f.bodies
    p = body.params[f.inputs.index(slot)]
    touching = [b for b in body.nodes if p in b.inputs]
    if len(touching) != 1 or touching[0].op != Op.SLOT_ADD or not touching[0].attrs.get("store"):
        return None
    found = _cone(body, touching[0])
    if found is None:
        return None
    cone, value = found
    outer = dict(zip(body.params, f.inputs))
    read = {v for n in cone for v in n.inputs if v in outer}
    if value in outer:
        read.add(value)
    if not all(_still_there(v, outer[v], nodes, a, k, spans) if isinstance(v.type, RefType) else
               not outer[v].type.shape or outer[v] in fixed or unchanged_between(outer[v], a, k, spans)
               for v in read):   # (a scalar is a register)
        return None
    return a, cone, value


def _still_there(param, ref, nodes, a, k, spans):
    """Whether tensor slot `ref`, read element by element as `param` of the loop at `a`,
    holds the same elements when the loop at `k` starts each element: neither loop writes
    it (a shifted write reaches other elements) and no node between them does."""
    if spans.written(ref, a, k - 1):
        return False
    for f in (nodes[a], nodes[k]):
        if ref in f.inputs:
            q = f.bodies[0].params[f.inputs.index(ref)]
            if any(q in n.inputs and n.op != Op.SLOT_GET for n in f.bodies[0].nodes):
                return False
    return True


def _cone(body, store):
    """The elementwise nodes computing what `store` adds, with the body's scalar slots
    read as the sums added to them so far (SSA), and the value; None if it takes anything
    but elementwise work, constants and tensor slots' elements."""
    sums, same, ssa = {}, {}, []
    local = {n.outputs[0] for n in body.nodes if n.op == Op.SLOT and not n.outputs[0].type.shape}
    for n in body.nodes:
        if n is store:
            break
        if n.op == Op.SLOT_ADD and n.inputs[0] in local:
            v = same.get(n.inputs[1], n.inputs[1])
            if n.inputs[0] in sums and not n.attrs.get("store"):
                total = Var(Type(v.type.dtype))
                ssa.append(Node(Op.ADD, (sums[n.inputs[0]], v), (total,)))
                v = total
            sums[n.inputs[0]] = v
        elif n.op == Op.SLOT_GET and n.inputs[0] in local:
            if n.inputs[0] not in sums:
                return None
            same[n.outputs[0]] = sums[n.inputs[0]]
        elif n.op == Op.SLOT_GET and n.inputs[0] in body.params:   # a tensor slot's element (`_still_there`)
            ssa.append(n)
        elif (n.op.elementwise and n.op.pure or n.op in ELEMENT_MOVES) and not n.bodies:
            ssa.append(Node(n.op, tuple(same.get(v, v) for v in n.inputs), n.outputs, n.attrs))
    value = same.get(store.inputs[1], store.inputs[1])
    made = {v: n for n in ssa for v in n.outputs}
    cone, todo, seen = [], [value], set()
    while todo:
        v = todo.pop()
        if v in seen or v in body.params:
            continue
        seen.add(v)
        if v not in made:
            return None
        cone.append(made[v])
        todo.extend(made[v].inputs)
    order = {id(n): j for j, n in enumerate(ssa)}
    return sorted(cone, key=lambda n: order[id(n)]), value


def _copy_cone(cone, value, source, inputs, params, out):
    """Append copies of `cone` (over the params of fused loop `source`) to `out`, reading
    the loop whose operands are `inputs`/`params` (extended as needed); return `value`'s copy."""
    outer = dict(zip(source.bodies[0].params, source.inputs))
    local = {}

    def param(v):
        if v in local:
            return local[v]
        x = outer[v]
        if x not in inputs:
            inputs.append(x)
            params.append(Var(v.type))
        return params[inputs.index(x)]
    for n in cone:
        made = tuple(Var(v.type) for v in n.outputs)
        out.append(Node(n.op, tuple(param(v) for v in n.inputs), made, dict(n.attrs)))
        local.update(zip(n.outputs, made))
    return param(value)


def _without_param(f, slot):
    """Fused loop `f` without its operand `slot` where its body no longer touches it."""
    if slot not in f.inputs:
        return f
    (body,) = f.bodies
    i = f.inputs.index(slot)
    p = body.params[i]
    (body,) = f.bodies
    nodes = [b for b in body.nodes if not (p in b.inputs and b.op == Op.SLOT_ADD and b.attrs.get("store"))]
    if any(p in b.inputs for b in nodes):
        return f
    params = body.params[:i] + body.params[i + 1:]
    return Node(Op.FUSED, f.inputs[:i] + f.inputs[i + 1:], f.outputs, f.attrs, (Graph(params, nodes, body.outputs),))
