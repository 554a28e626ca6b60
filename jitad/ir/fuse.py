"""Fusion: contiguous runs of elementwise work on tensors of one shape become one
`fused` node whose body is a scalar graph, lowered as a single loop nest.

A run may hold elementwise ops (inputs of any broadcastable shape), reads of tensor
slots (`slot_get`) used only inside the run, accumulations into tensor slots
(`slot_add`) and full `sum` reductions of values in the run (accumulated in a
register). Values defined in the run and used after it are materialized as outputs.
Runs keep their position in the node list, so effects on slots stay in order.
"""
from dataclasses import replace

from .graph import Graph, Node, Var
from .ops import Op
from .types import RefType, Type


def _shape(v):
    return getattr(v.type, "shape", None)


def _member_shape(node):
    """The loop shape a node can join a run with, or None."""
    op = node.op
    if op.elementwise or op == Op.BROADCAST:
        return node.outputs[0].type.shape   # () for scalar work, which joins any run
    if op == Op.RESHAPE and not node.inputs[0].type.shape:
        return node.outputs[0].type.shape   # a scalar as a tensor of size 1: broadcasts
    if op == Op.SLOT_GET and not node.outputs[0].type.shape:
        return ()
    if op == Op.SLOT_ADD and node.inputs[1].type.shape:
        return node.inputs[1].type.shape
    if op == Op.SLOT_GET and node.outputs[0].type.shape:
        return node.outputs[0].type.shape
    if op == Op.CONST and not node.outputs[0].type.shape:
        return ()   # scalar constants join any run
    if op == Op.SUM and len(node.attrs["axes"]) == len(node.inputs[0].type.shape) and not node.attrs["keepdims"]:
        return ("sum", node.inputs[0].type.shape)
    return None


def fuse_graph(graph):
    for node in graph.nodes:
        for body in node.bodies:
            fuse_graph(body)
    # new slots do not depend on anything: creating them first keeps runs together
    graph.nodes = [n for n in graph.nodes if n.op == Op.SLOT] + [n for n in graph.nodes if n.op != Op.SLOT]
    graph.nodes = _drop_idle_scopes(graph.nodes)
    uses = {}
    for k, node in enumerate(graph.nodes):
        for v in node.inputs:
            uses.setdefault(v, []).append(k)
    for v in graph.outputs:
        uses.setdefault(v, []).append(len(graph.nodes))
    out, run, shape, sums = [], [], None, set()

    def flush():
        nonlocal run, shape
        out.extend(_fuse(run, uses, shape) if shape is not None else [n for _, n in run])
        run, shape = [], None
        sums.clear()

    for k, node in enumerate(graph.nodes):
        if sums.intersection(node.inputs):   # a total is complete only after the loop
            flush()
        s = _member_shape(node)
        if node.op == Op.SUM and s is not None:
            sums.update(node.outputs)
        if isinstance(s, tuple) and s and s[0] == "sum":
            ok = shape == s[1] and node.inputs[0] in {v for _, n in run for v in n.outputs}
            if ok:
                run.append((k, node))
                continue
            flush()
            out.append(node)
            sums.clear()
            continue
        if s is None or (s and shape is not None and s != shape):
            flush()
            if s is None:
                out.append(node)
                continue
        if s:
            shape = s
        run.append((k, node))
    flush()
    nodes = _first_adds_store(_localize_slots(_recompute_cheap(out, graph.outputs), graph.outputs))
    graph.nodes = _accumulate_products(_forward_single_stores(nodes, graph.outputs))




def _forward_single_stores(nodes, outputs):
    """A tensor slot set once (`slot_set`, an adjoint's only contribution) and then only
    read: its reads are the stored value, no copy. The value's buffer must outlive the
    reads (no arena scope around where it was made closes before them) and stay unchanged
    (when it is a view of another slot, that slot is not written after the store)."""
    users, made_at = {}, {}
    for k, n in enumerate(nodes):
        for v in n.inputs:
            users.setdefault(v, []).append(k)
        for v in n.outputs:
            made_at[v] = (k, n)
    scopes = [(made_at[n.inputs[0]][0], k) for k, n in enumerate(nodes)
              if n.op == Op.ARENA_RELEASE and n.inputs[0] in made_at]
    candidates = []
    for k, n in enumerate(nodes):
        where = users.get(n.outputs[0], []) if n.op == Op.SLOT and n.outputs[0].type.shape else []
        sets = [j for j in where if nodes[j].op == Op.SLOT_SET]
        if len(sets) == 1 and all(nodes[g].op == Op.SLOT_GET and g > sets[0] for g in where if g != sets[0]):
            candidates.append((sets[0], k, [g for g in where if g != sets[0]]))
    rename, drop = {}, set()
    for j, k, gets in sorted(candidates):   # in store order: a value may be an earlier one's read
        value = rename.get(nodes[j].inputs[1], nodes[j].inputs[1])
        root, born = value, -1
        while root in made_at:
            born, producer = made_at[root]
            if not producer.op.view or not producer.inputs[0].type.shape:
                break
            if producer.op == Op.SLOT_GET:   # a view of another slot: unchanged after the store?
                slot = producer.inputs[0]
                born = made_at[slot][0] if slot in made_at else -1
                if any(nodes[u].op != Op.SLOT_GET for u in users.get(slot, []) if u > j):
                    born = None
                break
            root = rename.get(producer.inputs[0], producer.inputs[0])
        last = max((u for g in gets for u in users.get(nodes[g].outputs[0], [])), default=j)
        if born is None or any(m < born < r <= last for m, r in scopes) \
                or any(nodes[g].outputs[0] in outputs for g in gets):
            continue
        drop.update([k, j] + gets)
        rename.update((nodes[g].outputs[0], value) for g in gets)
    return [replace(n, inputs=tuple(rename.get(v, v) for v in n.inputs))
            for k, n in enumerate(nodes) if k not in drop]


def _accumulate_products(nodes):
    """A matrix product used only to update a tensor slot (a weight's adjoint) becomes
    `matmul_add`: BLAS adds into the slot (beta = 1), no temporary, one pass over it."""
    users, position = {}, {}
    for k, n in enumerate(nodes):
        for v in n.inputs:
            users.setdefault(v, []).append(k)
        for v in n.outputs:
            position[v] = k
    out = list(nodes)
    for j, n in enumerate(nodes):
        if n.op not in (Op.SLOT_ADD, Op.SLOT_SET) or len(users.get(n.inputs[1], ())) != 1:
            continue
        k = position.get(n.inputs[1])
        if k is None or nodes[k].op != Op.MATMUL or any(m.op == Op.ARENA_RELEASE for m in nodes[k + 1:j]):
            continue   # (the product's operands must still be live where the update is)
        product = nodes[k]
        out[k] = None
        out[j] = Node(Op.MATMUL_ADD, (n.inputs[0],) + product.inputs, (),
                      {**product.attrs, "store": n.op == Op.SLOT_SET})
    return [n for n in out if n is not None]


def _localize_slots(nodes, outputs):
    """A tensor slot used by a single fused loop and nowhere else becomes a per-element
    scalar slot inside it (a register): no buffer, no zero fill, no memory traffic."""
    users = {}
    for n in nodes:
        for v in n.inputs:
            users.setdefault(v, []).append(n)
    local = {}
    for n in nodes:
        if n.op == Op.SLOT and n.outputs[0].type.shape:
            u = users.get(n.outputs[0], [])
            if len(u) == 1 and u[0].op == Op.FUSED and n.outputs[0] not in outputs \
                    and u[0].inputs.count(n.outputs[0]) == 1:
                local[n.outputs[0]] = u[0]
    if not local:
        return nodes
    result = []
    for n in nodes:
        if n.op == Op.SLOT and n.outputs[0] in local:
            continue
        if n.op == Op.FUSED and any(v in local for v in n.inputs):
            (body,) = n.bodies
            keep = [k for k, v in enumerate(n.inputs) if v not in local]
            slots = [Node(Op.SLOT, (), (Var(RefType(v.type.dtype)),), {"type": Type(v.type.dtype)})
                     for v in n.inputs if v in local]
            moved = [body.params[k] for k, v in enumerate(n.inputs) if v in local]
            rename = {old: s.outputs[0] for old, s in zip(moved, slots)}
            body_nodes = slots + [Node(b.op, tuple(rename.get(v, v) for v in b.inputs), b.outputs, b.attrs)
                                  for b in body.nodes]
            new_body = Graph(params=[body.params[k] for k in keep], nodes=body_nodes, outputs=body.outputs)
            n = Node(Op.FUSED, tuple(n.inputs[k] for k in keep), n.outputs, n.attrs, (new_body,))
        result.append(n)
    return result


def _drop_idle_scopes(nodes):
    """An arena scope (mark ... release) around work that fusion keeps in registers frees
    nothing; dropping it lets the work join one loop with its neighbours."""
    drop, start = set(), {}
    for k, n in enumerate(nodes):
        if n.op == Op.ARENA_MARK:
            start[n.outputs[0]] = k
        elif n.op == Op.ARENA_RELEASE and n.inputs[0] in start:
            i = start[n.inputs[0]]
            if all(_member_shape(m) is not None for m in nodes[i + 1:k]):
                drop.update((i, k))
    return [n for k, n in enumerate(nodes) if k not in drop]


def _fuse(run, uses, shape):
    """One `fused` node for `run` (a list of (position, node)), or the nodes unchanged."""
    last = run[-1][0]
    # Scalar work (it only depends on scalars) runs before the loop, and slot reads used
    # after the run stay outside it (they are pointers and have no inputs).
    keep_out = [n for _, n in run if (n.op != Op.SUM and n.outputs and not n.outputs[0].type.shape)
                or (n.op == Op.SLOT_GET and any(u > last for u in uses.get(n.outputs[0], ())))]
    inside = [(k, n) for k, n in run if n not in keep_out]
    if len(inside) < 2:
        return [n for _, n in run]
    defined = {v: n for _, n in inside for v in n.outputs}
    inputs, params = [], {}

    def param(v):
        if v not in params:
            params[v] = Var(v.type)
            inputs.append(v)
        return params[v]

    body_nodes, local = [], {}
    for _, n in inside:
        ins = tuple(local[v] if v in local else param(v) for v in n.inputs)
        outs = tuple(Var(Type(v.type.dtype)) for v in n.outputs)   # one element per iteration
        body_nodes.append(Node(n.op, ins, outs, n.attrs))
        local.update(zip(n.outputs, outs))
    results = [v for v in defined if any(u > last for u in uses.get(v, []))]
    body = Graph(params=[params[v] for v in inputs], nodes=body_nodes, outputs=[local[v] for v in results])
    return keep_out + [Node(Op.FUSED, tuple(inputs), tuple(results), {"shape": shape}, (body,))]


def _first_adds_store(nodes):
    """A tensor slot first touched by an addition inside a fused loop (which covers every
    element) needs no zero fill: that addition becomes a store."""
    users = {}
    for k, n in enumerate(nodes):
        for v in n.inputs:
            users.setdefault(v, []).append(k)
    changed = {}
    for k, n in enumerate(nodes):
        if n.op != Op.SLOT or not n.outputs[0].type.shape:
            continue
        slot = n.outputs[0]
        where = users.get(slot, [])
        first = next((j for j in where if nodes[j].op != Op.SLOT_GET), None)
        if first is not None and nodes[first].op == Op.SLOT_ADD and _only_late_reads(nodes, users, where, first):
            changed[k] = Node(Op.SLOT, n.inputs, n.outputs, {**n.attrs, "uninit": True})
            changed[first] = Node(Op.SLOT_SET, nodes[first].inputs, (), {})   # a whole-slot first add
            continue
        fused_at = next((j for j in where if nodes[j].op == Op.FUSED), None)
        if fused_at is None:
            continue
        fused = nodes[fused_at]
        # earlier uses may only be pointer reads whose values are used after the loop
        if not _only_late_reads(nodes, users, where, fused_at) or fused.inputs.count(slot) != 1 \
                or tuple(fused.attrs["shape"]) != slot.type.shape:
            continue
        (body,) = fused.bodies
        param = body.params[fused.inputs.index(slot)]
        first = next((i for i, b in enumerate(body.nodes) if param in b.inputs), None)
        if first is None or body.nodes[first].op != Op.SLOT_ADD:
            continue
        changed[k] = Node(Op.SLOT, n.inputs, n.outputs, {**n.attrs, "uninit": True})
        j = fused_at
        fused = changed.get(j, fused)
        (body,) = fused.bodies
        b = body.nodes[first]
        new_nodes = list(body.nodes)
        new_nodes[first] = Node(b.op, b.inputs, b.outputs, {**b.attrs, "store": True})
        changed[j] = Node(Op.FUSED, fused.inputs, fused.outputs, fused.attrs,
                          (Graph(body.params, new_nodes, body.outputs),))
    return [changed.get(k, n) for k, n in enumerate(nodes)]


def _only_late_reads(nodes, users, where, at):
    """Every use of a slot before node `at` is a pointer read whose value is used only after it."""
    return all(nodes[j].op == Op.SLOT_GET and all(u > at for u in users.get(nodes[j].outputs[0], ()))
               for j in where if j < at)


def _cone(body, var):
    """The body nodes computing `var`, if all are cheap and read only params; else None."""
    producer = {v: n for n in body.nodes for v in n.outputs}
    needed, stack = [], [var]
    while stack:
        v = stack.pop()
        n = producer.get(v)
        if n is None:
            continue   # a param
        if not n.op.cheap:
            return None
        if n not in needed:
            needed.append(n)
            stack.extend(n.inputs)
    return [n for n in body.nodes if n in needed]


def _recompute_cheap(nodes, outputs):
    """A fused loop's tensor result that only later fused loops read, and that costs a few
    arithmetic operations, is recomputed there instead of written to memory and read back."""
    users = {}
    for k, n in enumerate(nodes):
        for v in n.inputs:
            users.setdefault(v, []).append(k)
    nodes = list(nodes)
    for k, producer in enumerate(nodes):
        if producer.op != Op.FUSED:
            continue
        (body,) = producer.bodies
        keep = []
        for out, inner in zip(producer.outputs, body.outputs):
            readers = users.get(out, [])
            cone = _cone(body, inner) if out.type.shape and out not in outputs and readers \
                and all(nodes[j].op == Op.FUSED and nodes[j].attrs["shape"] == producer.attrs["shape"]
                        for j in readers) else None
            if cone is None:
                keep.append((out, inner))
                continue
            for j in readers:
                nodes[j] = _inline_cone(nodes[j], out, cone, body, producer)
        if len(keep) < len(producer.outputs):
            new_body = Graph(body.params, body.nodes, [inner for _, inner in keep])
            nodes[k] = Node(Op.FUSED, producer.inputs, tuple(out for out, _ in keep), producer.attrs, (new_body,))
    return nodes


def _inline_cone(consumer, var, cone, source, producer):
    """`consumer` with its param for `var` computed in its own body by a copy of `cone`."""
    (body,) = consumer.bodies
    inputs, params = list(consumer.inputs), list(body.params)
    param_of = dict(zip(inputs, params))
    rename = {}
    for outer, p in zip(producer.inputs, source.params):   # the cone's reads of the producer's inputs
        if outer not in param_of:
            param_of[outer] = Var(p.type)
            inputs.append(outer)
            params.append(param_of[outer])
        rename[p] = param_of[outer]
    copies = []
    for n in cone:
        outs = tuple(Var(v.type) for v in n.outputs)
        copies.append(Node(n.op, tuple(rename.get(v, v) for v in n.inputs), outs, n.attrs))
        rename.update(zip(n.outputs, outs))
    target = param_of[var]
    k = inputs.index(var)
    del inputs[k], params[k]
    result = rename[next(inner for out, inner in zip(producer.outputs, source.outputs) if out is var)]
    nodes = copies + [Node(n.op, tuple(result if v is target else v for v in n.inputs), n.outputs, n.attrs)
                      for n in body.nodes]
    outputs = [result if v is target else v for v in body.outputs]
    return Node(Op.FUSED, tuple(inputs), consumer.outputs, consumer.attrs, (Graph(params, nodes, outputs),))
