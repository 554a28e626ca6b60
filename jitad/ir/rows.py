"""Row loops: fused loops over one shape (..., n) whose later loops read the earlier ones'
row sums and maxima (softmax: the max, then exp and its sum, then the division;
LayerNorm: the mean, the variance, then the normalization; their backward passes) run as
one `row_loops` node: for each row, every loop's pass over that row in turn, so the rows
they read again are still in L1 (LLVM only).

Its members, in order, are fused loops of the shape (..., n) or of the row shape
(..., 1) (per-row scalar work: a max's guard, a mean's division), sums and maxima over
the last axis (a loop of one reduction), lone elementwise ops of those shapes (a loop of
one), reshapes between (...) and (..., 1), and stores of row values into a slot (reverse
mode's row cotangents). Each runs as it ran alone, one row at a time: every element still
goes through the same operations in the same order, so the results are the same bits
(but for a total over the whole array, a loss's sum, whose additions LLVM reorders). A
member reads a value another member makes, or a slot one writes, only at its own row;
totals over rows (a column sum) are read after the node. Pure nodes on other values that
it passes (constants, reshapes of scalars, views of slots) run first; a small arena scope
around a row cotangent is dropped (`_drop_light_scopes`). A slot of the row shape that only
the members use, each row stored whole before it is read, is one row of scratch made in the
node's body (`_row_local`).
"""
import math


from .fuse import one_node_loop
from .graph import Graph, Node, Var, uses
from .ops import CALLS, Op
from .regions import indexed, row_reduction
from .types import ITEMSIZE, RefType, Type

ROW_LOOPS = True   # False: the loops run whole, one after another (for A/Bs: `bench.gpt --ab`)
MIN_ROW = 16       # the shortest row run this way (a shorter one has too little work per pass)
# the smallest array of the row shape (bytes) run this way: below it each pass's setup per row
# outweighs what L1 saves (alone, f32, row loops over whole loops, value and gradient: 2 KiB 1.13,
# 33 KiB 0.93, 64 KiB 0.89, 256 KiB 0.81, 1 MiB 0.65; a forward pass alone below 1 MiB about 1.0)
MIN_BYTES = 1 << 15


def row_loops(nodes, outputs):
    """`nodes` with each run of member loops of one row shape as a `row_loops` node."""
    if not ROW_LOOPS:
        return nodes
    nodes = _drop_light_scopes(nodes)
    users = uses(nodes, outputs)
    slots = {n.outputs[0] for n in nodes if n.op == Op.SLOT}   # made here: not a body's capture
    views = _slot_views(nodes)
    out, group = [], _Group()
    for k, node in enumerate(nodes):
        member = _member(node)
        if member is not None and group.admits(member, views):
            group.add(k, member)
        elif group.members and _passes(node, group, views):
            group.before.append(node)
        else:
            out += group.close(users, slots)
            group = _Group()
            if member is not None and group.admits(member, views):
                group.add(k, member)
            else:
                out.append(node)
    return out + group.close(users, slots)


def _member(node):
    """(row prefix, row length or None, the node as a loop) for a node that can join a
    row loop, else None; the row length is None for per-row work."""
    op = node.op
    shape = node.outputs[0].type.shape if node.outputs and isinstance(node.outputs[0].type, Type) else None
    if op == Op.FUSED:
        shape = tuple(node.attrs["shape"])
        if len(shape) < 2 or indexed(node) or any(b.op == Op.MATMUL for b in node.bodies[0].nodes):
            return None
        return _kind(shape, node)
    if op in (Op.SUM, Op.MAX) and node.inputs[0].type.dtype in ("f32", "f64") \
            and row_reduction(node, node.inputs[0].type.shape):
        x = node.inputs[0]
        p, out = Var(x.type), Var(Type(x.type.dtype))
        body = Graph([p], [Node(op, (p,), (out,), dict(node.attrs))], [out])
        return _kind(x.type.shape, Node(Op.FUSED, (x,), node.outputs, {"shape": x.type.shape}, (body,)))
    if op in (Op.RESHAPE, Op.SLOT_SET):   # a row value copied: reshaped, or into a slot of row values
        (a, b), dtype = _row_value_shapes(node), node.inputs[-1].type.dtype
        if a and b and dtype in ("f32", "f64", "i64") and (a == b + (1,) or b == a + (1,) or
                                                          (op == Op.SLOT_SET and a == b and a[-1] == 1)):
            return min(a, b, key=len) if a != b else a[:-1], None, node
        return None
    if op.elementwise and op.pure and shape and len(node.outputs) == 1 and not node.bodies \
            and not any(isinstance(v.type, RefType) for v in node.inputs):
        return _kind(shape, one_node_loop(node)) if len(shape) >= 2 else None
    return None


SCOPE_BYTES = 1 << 16   # the most a dropped arena scope allocates (views aside) ...
SCOPES_BYTES = 1 << 22  # ... and all those a graph drops


def _drop_light_scopes(nodes):
    """Arena scopes around a loop of a large row shape that allocate little else (reverse
    mode's scope around a row cotangent, stored into a slot before the scope's end) are
    dropped: their few KiB live until the enclosing scope ends, and the loops on either
    side of the scope's end may share a row loop. Not before a call: a recursion (reverse
    mode's frame per WHILE iteration) would keep them in every frame."""
    drop, start, budget = set(), {}, SCOPES_BYTES
    last_call = max((k for k, n in enumerate(nodes) if _calls(n)), default=-1)
    for k, n in enumerate(nodes):
        if k < last_call:
            continue
        if n.op == Op.ARENA_MARK:
            start[n.outputs[0]] = k
        elif n.op == Op.ARENA_RELEASE and n.inputs[0] in start:
            i = start[n.inputs[0]]
            inside = nodes[i + 1:k]
            held = [_allocated(m) for m in inside]
            if None not in held and max(held, default=0) <= SCOPE_BYTES and sum(held) <= budget \
                    and any(_bytes(_member(m)) >= MIN_BYTES for m in inside):
                drop.update((i, k))
                budget -= sum(held)
    return [n for k, n in enumerate(nodes) if k not in drop]


def _calls(node):
    """Whether `node` calls a function or a continuation (in a body too)."""
    return node.op in CALLS or node.op in (Op.APPLY, Op.TREE) or any(_calls(n) for b in node.bodies for n in b.nodes)


def _allocated(node):
    """The bytes `node` takes from the arena (None: a scope's own node, or a body)."""
    if node.op.view:
        return 0
    if node.op in (Op.ARENA_MARK, Op.ARENA_RELEASE) or (node.bodies and node.op != Op.FUSED):
        return None
    if any(not isinstance(v.type, (Type, RefType)) for v in node.outputs):
        return None
    return sum(math.prod(v.type.shape) * ITEMSIZE[v.type.dtype] for v in node.outputs)


def _bytes(member):
    """The size of a member loop's row shape, in bytes of its widest values (0 for per-row work)."""
    if member is None or member[1] is None:
        return 0
    prefix, n, loop = member
    return math.prod(prefix + (n,)) * max(ITEMSIZE[v.type.dtype] for v in loop.inputs + loop.outputs)


def _row_value_shapes(node):
    """The shapes a reshape or a `slot_set` copies between (None where not a tensor)."""
    if node.op == Op.RESHAPE:
        return node.inputs[0].type.shape, node.outputs[0].type.shape
    ref, value = node.inputs
    return (ref.type.value_type.shape if isinstance(ref.type, RefType) else None), \
        (value.type.shape if isinstance(value.type, Type) else None)


def _kind(shape, loop):
    return (shape[:-1], None, loop) if shape[-1] == 1 else (shape[:-1], shape[-1], loop)


def _tensor(v):
    return isinstance(v.type, Type) and bool(v.type.shape)


def _slot_views(nodes):
    """value -> the slot it reads in place (`slot_get`, through reshapes)."""
    views = {}
    for n in nodes:
        if n.op == Op.SLOT_GET and _tensor(n.outputs[0]):
            views[n.outputs[0]] = n.inputs[0]
        elif n.op == Op.RESHAPE and n.inputs[0] in views:
            views[n.outputs[0]] = views[n.inputs[0]]
    return views


def _totals(loop):
    """The results of fused `loop` that add up over rows (a total, a column sum)."""
    if loop.op != Op.FUSED:
        return []
    (body,) = loop.bodies
    made = {v: n for n in body.nodes for v in n.outputs}
    shape = tuple(loop.attrs["shape"])
    return [v for v, b in zip(loop.outputs, body.outputs) if made.get(b) is not None
            and made[b].op in (Op.SUM, Op.MAX) and not row_reduction(made[b], shape)]


def _passes(node, group, views):
    """Whether `node`, not a member, may run before the open group: pure, with no body,
    reading nothing the group makes, and no slot (nor a view of one) unless it only
    makes a view (a tensor slot's buffer, reshaped: the same pointer wherever it is made)."""
    if not node.op.pure or node.bodies or any(v in group.made for v in node.inputs):
        return False
    if node.op.view and node.outputs and _tensor(node.outputs[0]):
        return True
    return not any(isinstance(v.type, RefType) or v in views for v in node.inputs)


class _Group:
    """The open run of member loops: their row prefix and length, and what they make."""

    def __init__(self):
        self.members, self.before, self.made, self.prefix, self.n = [], [], set(), None, None
        self.written, self.whole, self.bytes = set(), set(), 0

    def admits(self, member, views):
        prefix, n, loop = member
        if self.prefix is not None and (prefix != self.prefix or (n and self.n and n != self.n)):
            return False
        if n is not None and n < MIN_ROW:
            return False
        if any(v in self.whole for v in loop.inputs):
            return False   # a total over rows is complete only after the last row
        refs = {v for v in loop.inputs if isinstance(v.type, RefType)}
        if loop.op == Op.FUSED:
            shape = tuple(loop.attrs["shape"])
            local = lambda s: len(s) == len(shape) and s[:-1] == prefix and s[-1] in (1, shape[-1])  # noqa: E731
        else:   # a copy of row values: element i of each is row i's
            local = lambda s: s in (prefix, prefix + (1,))  # noqa: E731
        if any(not local(r.type.value_type.shape) for r in refs):
            return False   # a slot of another shape: its rows are not apart
        # a value the group makes, or a view of a slot it writes, read broadcast over rows
        # would be read before its later rows are made
        return all(local(v.type.shape) for v in loop.inputs if isinstance(v.type, Type)
                   and (v in self.made or views.get(v) in self.written | refs))

    def add(self, k, member):
        prefix, n, loop = member
        self.prefix, self.n = prefix, self.n or n
        self.bytes = max(self.bytes, _bytes(member))
        self.members.append((k, loop))
        self.made.update(loop.outputs)
        self.whole.update(_totals(loop))
        self.written.update(v for v in loop.inputs if isinstance(v.type, RefType))

    def close(self, users, slots):
        """The nodes the group becomes: one `row_loops` node, or its nodes unchanged where
        fewer than two passes over rows would share it."""
        loops = [n for _, n in self.members]
        passes = sum(n.op == Op.FUSED and n.attrs["shape"][-1] != 1 for n in loops)
        if passes < 2 or not self.n or self.bytes < MIN_BYTES:
            return self.before + loops
        positions = {k for k, _ in self.members}
        made = [v for n in loops for v in n.outputs]
        results = [v for v in made if any(u not in positions for u in users.get(v, ()))]
        inputs = list(dict.fromkeys(v for n in loops for v in n.inputs if v not in self.made))
        scratch = [v for v in inputs if ROW_SCRATCH and v in slots
                   and _row_local(v, loops, users, positions, self.prefix + (self.n,))]
        inputs = [v for v in inputs if v not in scratch]
        rename = {v: Var(v.type) for v in inputs + made}
        rows = [_scratch(v, rename) for v in scratch]
        body = Graph([rename[v] for v in inputs],
                     rows + [_renamed(n, rename) for n in loops],
                     [rename[v] for v in results])
        return self.before + [Node(Op.ROW_LOOPS, tuple(inputs), tuple(results), {"shape": self.prefix + (self.n,)},
                                   (body,))]


ROW_SCRATCH = True   # False: a slot only a row loop uses keeps its whole buffer (for A/Bs: `bench.gpt --ab`)


def _row_local(ref, loops, users, positions, shape):
    """Whether tensor slot `ref` (of the row loop's `shape`; the caller checks that this graph
    makes it: a body's capture may be read after the body) is used by the row loop's members
    alone and each row's first use stores that row whole (a fused loop over `shape` whose
    first touch of it is a storing `slot_add`): one row of scratch then holds it (softmax's
    backward: the exp's cotangent, made and read back per row)."""
    if not isinstance(ref.type, RefType) or ref.type.value_type.shape != shape \
            or any(u not in positions for u in users.get(ref, ())):
        return False
    first = next(n for n in loops if ref in n.inputs)
    if first.op != Op.FUSED or tuple(first.attrs["shape"]) != shape or first.inputs.count(ref) != 1:
        return False
    (body,) = first.bodies
    param = body.params[first.inputs.index(ref)]
    touch = next((b for b in body.nodes if param in b.inputs), None)
    return touch is not None and touch.op == Op.SLOT_ADD and touch.inputs[0] is param and bool(touch.attrs.get("store"))


def _scratch(ref, rename):
    """The `slot` node making one row of slot `ref` in the row loop's body (`rename[ref]`)."""
    row = _row_of(ref)
    rename[ref] = Var(RefType(row.dtype, row.shape))
    return Node(Op.SLOT, (), (rename[ref],), {"type": row, "uninit": True})


def _row_of(ref):
    """The type of one row of slot `ref`'s value, its other axes kept as length 1."""
    t = ref.type.value_type
    return Type(t.dtype, (1,) * (len(t.shape) - 1) + t.shape[-1:])


def _renamed(node, rename):
    """Member `node` reading and making `rename`'s values; a fused body's param of a slot
    that became a row's scratch takes the scratch's type."""
    inputs = tuple(rename[v] for v in node.inputs)
    bodies = node.bodies
    if node.op == Op.FUSED and any(a.type != b.type for a, b in zip(node.inputs, inputs)):
        (body,) = node.bodies
        params = {p: Var(v.type) if v.type != u.type else p for p, u, v in zip(body.params, node.inputs, inputs)}
        bodies = (Graph(list(params.values()), [Node(b.op, tuple(params.get(v, v) for v in b.inputs), b.outputs,
                                                     b.attrs, b.bodies) for b in body.nodes], body.outputs),)
    return Node(node.op, inputs, tuple(rename[v] for v in node.outputs), node.attrs, bodies)
