"""Fusion: contiguous runs of elementwise work on tensors of one shape become one
`fused` node whose body is a scalar graph, lowered as a single loop nest.

A run may hold elementwise ops (inputs of any broadcastable shape), reads of tensor
slots (`slot_get`) used only inside the run, accumulations into tensor slots
(`slot_add`) and full `sum` reductions of values in the run (accumulated in a
register). Values defined in the run and used after it are materialized as outputs.
Runs keep their position in the node list, so effects on slots stay in order.
"""
from .graph import Graph, Node, Var, uses
from .ops import CALLS, Op
from .regions import column_reduction, node_facts, reduces_rows, row_reduction, unchanged_between
from .types import RefType, Type


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


def _place_slots(nodes):
    """New slots depend on nothing: creating them first keeps runs together. A tensor slot
    first used after the graph's last call is made just after that call instead (outside
    any arena scope), so a recursion (reverse mode's frame per WHILE iteration) does not
    keep it allocated in every frame while the deeper ones run."""
    slots = [n for n in nodes if n.op == Op.SLOT]
    rest = [n for n in nodes if n.op != Op.SLOT]
    calls = [k for k, n in enumerate(rest) if n.op in CALLS or n.op in (Op.APPLY, Op.TREE)]
    if not calls:
        return slots + rest
    after = calls[-1] + 1
    marks = {n.outputs[0]: k for k, n in enumerate(rest) if n.op == Op.ARENA_MARK}
    if any(n.op == Op.ARENA_RELEASE and marks.get(n.inputs[0], after) < after <= k for k, n in enumerate(rest)):
        return slots + rest   # `after` is inside a scope, whose end would free them
    used = {v for n in rest[:after] for v in n.inputs}
    late = [n for n in slots if n.outputs[0].type.shape and n.outputs[0] not in used]
    early = [n for n in slots if all(n is not m for m in late)]
    return early + rest[:after] + late + rest[after:]


def fuse_graph(graph):
    for node in graph.nodes:
        for body in node.bodies:
            fuse_graph(body)
    graph.nodes = _place_slots(graph.nodes)
    graph.nodes = _drop_idle_scopes(graph.nodes)
    users = uses(graph.nodes, graph.outputs)
    out, run, shape, sums = [], [], None, set()

    def flush():
        nonlocal run, shape
        out.extend(_fuse(run, users, shape) if shape is not None else [n for _, n in run])
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
        if s is None and _passes_run(node, run):   # computed first: the run goes on past it
            out.append(node)
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
    graph.nodes = out


def _passes_run(node, run):
    """Whether `node` (not a member) may run before the open `run`: pure, with no body,
    reading nothing the run makes, and the run touches no slot (whose views `node`
    might read)."""
    if not run or not node.op.pure or node.bodies or any(isinstance(v.type, RefType) for v in node.inputs):
        return False
    made = {v for _, n in run for v in n.outputs}
    return not any(v in made for v in node.inputs) and \
        not any(isinstance(v.type, RefType) for _, n in run for v in n.inputs)


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
    if len(inside) < 2 and not (RECIPROCAL_DIVISIONS and inside and _divides_rows(inside[0][1], shape)):
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
    body.nodes = reciprocal_divisions(body, inputs, shape)
    return keep_out + [Node(Op.FUSED, tuple(inputs), tuple(results), {"shape": shape}, (body,))]


RECIPROCAL_DIVISIONS = True   # False: every division stays one (for A/Bs: `bench.gpt --ab`)


def reciprocal_divisions(body, inputs, shape):
    """The nodes of fused loop `body` (over `shape`, its params made from `inputs`) with each
    float division by a value constant along the loop's last axis (a row's sum: softmax's
    `e / sum(e)`; a scalar: AdamW's `m / (1 - b1**t)`) a product with that value's
    reciprocal, which LLVM computes once per row or loop: a vector division costs several
    multiplications. XLA does the same on CPU (JAX's `x / s` with `s` broadcast is
    `x * (1 / s)`, bit for bit): the result may differ from the division by an ulp, and
    where 1 / s overflows (|s| below ~1e-38 in f32) it is ±inf."""
    if not RECIPROCAL_DIVISIONS or not shape or shape[-1] < 2:
        return body.nodes
    fixed = {p for p, v in zip(body.params, inputs) if _row_constant(v)}   # constant along the last axis
    out = []
    for n in body.nodes:
        if (n.op == Op.CONST or (n.op.pure and not n.bodies and n.inputs and (n.op.elementwise or n.op == Op.BROADCAST)
                                 and all(v in fixed for v in n.inputs))):
            fixed.update(n.outputs)
        if n.op == Op.DIV and n.inputs[1] in fixed and n.inputs[0] not in fixed \
                and {v.type.dtype for v in n.inputs + n.outputs} in ({"f32"}, {"f64"}):
            t = n.outputs[0].type
            one, inverse = Var(t), Var(t)
            out += [Node(Op.CONST, (), (one,), {"value": 1.0, "type": t}), Node(Op.DIV, (one, n.inputs[1]), (inverse,)),
                    Node(Op.MUL, (n.inputs[0], inverse), n.outputs)]
        else:
            out.append(n)
    return out


def _divides_rows(node, shape):
    """Whether `node` is a float division by a value constant along the last axis of `shape`."""
    return node.op == Op.DIV and bool(shape) and shape[-1] > 1 and _row_constant(node.inputs[1]) \
        and not _row_constant(node.inputs[0]) and node.outputs[0].type.dtype in ("f32", "f64")


def _row_constant(v):
    """Whether loop input `v` is the same along the loop's last axis (a scalar, or its last length 1)."""
    return isinstance(v.type, Type) and (not v.type.shape or v.type.shape[-1] == 1)


def row_reductions(nodes, outputs):
    """A float `sum` or `max` over the last axis of a fused loop's result is computed in that
    loop (a register per row, the rows' NaN kept apart for the max): the result, often the
    largest array of the program, is not read again, and is not stored at all where
    nothing else reads it (LLVM only). In the body the reduction keeps its op and attrs;
    loops with slices or concatenations are left alone."""
    return _reductions_into_loops(nodes, outputs, row_reduction, lone_ops=True)


COLUMN_SUMS = True   # False: column sums stay passes of their own (for A/Bs: `bench.gpt --ab`)
# the shortest last axis a loop takes a column sum for: the loop then runs row by row (not as one
# merged loop), which costs about what the sum's own pass saves on short rows (alone, against the
# sum apart, f32: rows of 64 1.04, 128 0.91, 256 0.87, 512 0.83)
COLUMN_SUM_ROW = 128


def column_sums(nodes, outputs):
    """A float `sum` over every axis but the last of a fused loop's result (a bias's or a
    LayerNorm gain's gradient) is added up in that loop, a row of accumulators the size of
    the last axis (LLVM only): the result is not read again, nor stored where nothing else
    reads it. Loops taking row reductions or products, or reading through index maps, are
    left alone."""
    if not COLUMN_SUMS:
        return nodes
    nodes = _reductions_into_loops(nodes, outputs, lambda r, shape: r.op == Op.SUM and _long_columns(r, shape),
                                   lone_ops=False)
    return _stored_column_sums(nodes)


def _long_columns(node, shape):
    return column_reduction(node, shape) and shape[-1] >= COLUMN_SUM_ROW


def _stored_column_sums(nodes):
    """A column sum of a slot's value that a fused loop stored whole (a bias's gradient after
    the loop making the cotangent: `slot_get`, then `sum`) is added up in that loop, from the
    values it stores, when nothing writes the slot in between and no arena scope around the
    loop closes before the sum."""
    made = {v: k for k, n in enumerate(nodes) for v in n.outputs}
    nodes, drop = list(nodes), set()
    for j, r in enumerate(nodes):
        get = nodes[made[r.inputs[0]]] if r.op == Op.SUM and r.inputs[0] in made else None
        if get is None or get.op != Op.SLOT_GET or not _long_columns(r, r.inputs[0].type.shape) \
                or r.inputs[0].type.dtype not in ("f64", "f32"):
            continue
        slot = get.inputs[0]
        k = next((i for i in range(made[r.inputs[0]] - 1, -1, -1)
                  if slot in nodes[i].inputs and nodes[i].op != Op.SLOT_GET), None)
        store = _whole_store(nodes[k], slot) if k is not None else None
        if store is None or any(n.op == Op.ARENA_RELEASE and made.get(n.inputs[0], -1) < k for n in nodes[k + 1:j]):
            continue
        f, (body,) = nodes[k], nodes[k].bodies
        final, total = Var(Type(r.outputs[0].type.dtype)), Var(Type(r.outputs[0].type.dtype))
        new_body = Graph(body.params, body.nodes + [Node(Op.SLOT_GET, (store,), (final,)),
                                                    Node(Op.SUM, (final,), (total,), dict(r.attrs))],
                         body.outputs + [total])
        nodes[k] = Node(Op.FUSED, f.inputs, f.outputs + r.outputs, f.attrs, (new_body,))
        drop.add(j)
    return [n for i, n in enumerate(nodes) if i not in drop]


def _whole_store(node, slot):
    """The body's param of `slot` where fused loop `node` sets every element of it (a store,
    then additions: each element's final value is read back after them), or None."""
    if node.op != Op.FUSED or node.inputs.count(slot) != 1 or tuple(node.attrs["shape"]) != slot.type.shape \
            or reduces_rows(node) or any(b.op in (Op.MATMUL, Op.SLICE, Op.CONCAT, Op.SLOT_ADD_SLICE)
                                         for b in node.bodies[0].nodes):
        return None
    (body,) = node.bodies
    param = body.params[node.inputs.index(slot)]
    writes = [b for b in body.nodes if param in b.inputs and b.op != Op.SLOT_GET]
    if not writes or any(b.op != Op.SLOT_ADD for b in writes) or not writes[0].attrs.get("store"):
        return None
    return param


def _reductions_into_loops(nodes, outputs, reduces, lone_ops):
    """Each reduction `reduces(node, shape)` accepts of a fused loop's result, moved into
    that loop's body (a lone elementwise op too, as a loop of one, with `lone_ops`)."""
    users = uses(nodes, outputs)
    made = {v: k for k, n in enumerate(nodes) for v in n.outputs}
    nodes, drop = list(nodes), set()
    for j, r in enumerate(nodes):
        v = r.inputs[0] if r.op in (Op.SUM, Op.MAX) else None
        f = nodes[made[v]] if v in made else None
        if lone_ops and f is not None and f.op.elementwise and f.op.pure and not f.bodies and f.outputs == (v,) \
                and not any(isinstance(u.type, RefType) for u in f.inputs):
            f = one_node_loop(f)   # a lone elementwise op (a bias added to a product) is a loop of one
        if f is None or f.op != Op.FUSED or not reduces(r, v.type.shape) \
                or tuple(f.attrs["shape"]) != v.type.shape or v.type.dtype not in ("f64", "f32") \
                or any(b.op in (Op.SLICE, Op.CONCAT, Op.SLOT_ADD_SLICE) for b in f.bodies[0].nodes) \
                or (not lone_ops and (reduces_rows(f) or any(b.op == Op.MATMUL for b in f.bodies[0].nodes))):
            continue
        (body,) = f.bodies
        at = f.outputs.index(v)
        total = Var(Type(v.type.dtype))
        alone = users.get(v) == [j]   # else the result stays an output too
        kept, outs = body.outputs[:at + 1 - alone], f.outputs[:at + 1 - alone]
        new_body = Graph(body.params, body.nodes + [Node(r.op, (body.outputs[at],), (total,), dict(r.attrs))],
                         kept + [total] + body.outputs[at + 1:])
        nodes[made[v]] = Node(Op.FUSED, f.inputs, outs + r.outputs + f.outputs[at + 1:], f.attrs, (new_body,))
        for u in r.outputs:
            made[u] = made[v]
        drop.add(j)
    return [n for k, n in enumerate(nodes) if k not in drop]


def one_node_loop(node):
    """`node`, elementwise, as a fused loop over its result's shape."""
    inputs = tuple(dict.fromkeys(node.inputs))   # one param per operand, as fusion makes them (x * x)
    params = {v: Var(v.type) for v in inputs}
    out = Var(Type(node.outputs[0].type.dtype))
    body = Graph(list(params.values()), [Node(node.op, tuple(params[v] for v in node.inputs), (out,), node.attrs)], [out])
    body.nodes = reciprocal_divisions(body, inputs, node.outputs[0].type.shape)
    return Node(Op.FUSED, inputs, node.outputs, {"shape": node.outputs[0].type.shape}, (body,))


SMALL_PRODUCT = 8    # the longest contraction a fused loop computes itself (unrolled; at 16 BLAS wins) ...
LARGE_PRODUCT = (16, 1 << 22)   # ... but for a product past a last-level cache (32 MiB of f64), up to 16 terms
PRODUCT_ROW = 64     # the shortest row it does so for (a shorter one does not vectorize well: BLAS is faster)


def small_products(nodes, outputs):
    """A matrix product over a short contraction (at most SMALL_PRODUCT terms, or
    LARGE_PRODUCT's for a large product; as k-means' points against centroids) with rows
    of at least PRODUCT_ROW elements that one fused loop of its shape reads is computed in
    that loop: each element a few multiply-adds along the contiguous rows of the right
    operand (rows of the loop run JAM at a time where it takes a row sum or max, sharing
    those loads), the product never stored (LLVM only). In the body the node keeps its op
    and attrs, its operands the tensors as params."""
    nodes = list(nodes)
    users, made, spans = node_facts(nodes, outputs)
    drop = set()
    for k, m in enumerate(nodes):
        if not short_product(m):
            continue
        (v,), (a, b) = m.outputs, m.inputs
        readers = users.get(v, [])
        if len(readers) != 1 or readers[0] == len(nodes):
            continue
        j = readers[0]
        f = nodes[j]
        if f.op != Op.FUSED or tuple(f.attrs["shape"]) != v.type.shape or f.inputs.count(v) != 1 \
                or any(n.op in (Op.SLICE, Op.CONCAT, Op.SLOT_ADD_SLICE) for n in f.bodies[0].nodes) \
                or not all(unchanged_between(x, k, j, spans) for x in (a, b)):
            continue
        nodes[j] = with_product(f, m)
        spans.note(j, nodes[j])
        drop.add(k)
    return [n for k, n in enumerate(nodes) if k not in drop]


def short_product(m):
    """Whether `m` is a product over a contraction short enough to compute per element
    (at most SMALL_PRODUCT terms, LARGE_PRODUCT's for a large product; rows of at least
    PRODUCT_ROW elements; floats)."""
    if m.op != Op.MATMUL or m.attrs["ta"] or m.attrs["tb"]:
        return False
    (v,), (a, b) = m.outputs, m.inputs
    if len(a.type.shape) != 2 or len(b.type.shape) != 2 or v.type.dtype not in ("f64", "f32"):
        return False
    large = a.type.shape[0] * b.type.shape[1] >= LARGE_PRODUCT[1]
    return a.type.shape[1] <= (LARGE_PRODUCT[0] if large else SMALL_PRODUCT) and b.type.shape[1] >= PRODUCT_ROW


def with_product(f, m):
    """Fused loop `f`, which reads product `m`'s result, computing it in its body (the node
    keeps its op and attrs, its operands the tensors as params)."""
    (v,), (a, b) = m.outputs, m.inputs
    (body,) = f.bodies
    at = f.inputs.index(v)
    pa, pb = Var(a.type), Var(b.type)
    inputs = f.inputs[:at] + f.inputs[at + 1:] + (a, b)
    params = body.params[:at] + body.params[at + 1:] + [pa, pb]
    product = Node(Op.MATMUL, (pa, pb), (body.params[at],), dict(m.attrs))
    return Node(Op.FUSED, inputs, f.outputs, f.attrs, (Graph(params, [product] + body.nodes, body.outputs),))
