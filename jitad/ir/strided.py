"""Batched products that read their operands, and write their result, through strided views:
the heads of attention (`x.reshape(B, T, H, hs).transpose(0, 2, 1, 3)`, a slice of a fused
QKV product) are matrices at a fixed row stride inside the untransposed buffer, one per
(batch, head), so the product reads them there instead of from a transposed copy.

A view is described by its dimensions, each a tuple of `(size, stride)` parts in row-major
order (a dimension that merged others which were not adjacent in memory has several parts;
one of size 1 has none), and an element offset into the base's buffer.

A product whose result only moves into a slot (reverse mode's cotangents: stored into a slot,
read back, transposed and reshaped, stored into another, and so on, then stored or added into
a region of the slot that keeps it, as attention's head cotangents go into the QKV
cotangent's thirds) writes there itself (`strided_bmm_add`): the moves and the slots between
go."""
from .graph import Graph, Node, uses
from .ops import Op

VIEW_OPS = (Op.RESHAPE, Op.TRANSPOSE, Op.SLICE)
IN_PLACE = True   # False: every product reads and writes copies, as before (for A/Bs: `bench.gpt --ab`)
INTO_SLOTS = True   # False: a product's result moves into its slot through copies, as before


def contiguous(shape):
    """The dimensions of a row-major array of `shape`.

    >>> contiguous((2, 1, 3))
    [((2, 3),), (), ((3, 1),)]
    """
    dims, stride = [], 1
    for n in reversed(shape):
        dims.append(((n, stride),) if n != 1 else ())
        stride *= n
    return dims[::-1]


def reshaped(dims, shape):
    """`dims` regrouped into dimensions of `shape` (parts split where a new dimension ends
    inside one), or None where a new dimension would cut a part unevenly.

    >>> reshaped(contiguous((4, 6)), (2, 12))
    [((2, 12),), ((2, 6), (6, 1))]
    """
    parts, out = [p for d in dims for p in d], []
    for n in shape:
        taken = []
        while n > 1:
            if not parts:
                return None
            size, stride = parts[0]
            if n % size == 0:
                taken.append(parts.pop(0))
                n //= size
            elif size % n == 0:
                taken.append((n, stride * (size // n)))
                parts[0], n = (size // n, stride), 1
            else:
                return None
        out.append(tuple(taken))
    return None if parts else out


def _sliced(dims, offset, shape, attrs):
    """(dims, offset) of a slice, or None where it cuts a merged dimension."""
    out = []
    for d, n, start, stop, step in zip(dims, shape, attrs["starts"], attrs["stops"], attrs["steps"]):
        size = len(range(start, stop, step))
        if (start, size, step) == (0, n, 1) or not d:
            out.append(d)
        elif len(d) == 1:
            offset += start * d[0][1]
            out.append(((size, d[0][1] * step),) if size > 1 else ())
        else:
            return None
    return out, offset


def _apply(dims, offset, node):
    """The view after one view op, from the view of its operand."""
    if node.op == Op.TRANSPOSE:
        return [dims[p] for p in node.attrs["perm"]], offset
    if node.op == Op.RESHAPE:
        dims = reshaped(dims, node.outputs[0].type.shape)
        return None if dims is None else (dims, offset)
    return _sliced(dims, offset, node.inputs[0].type.shape, node.attrs)


def matrices(dims, offset, cols):
    """A bmm operand's view as `(offset, batch parts, row stride)`: rows of contiguous
    elements (`cols` of them) at a fixed stride, or None."""
    if dims is None or len(dims[1]) > 1 or len(dims[2]) > 1 or (dims[2] and dims[2][0][1] != 1):
        return None
    ld = dims[1][0][1] if dims[1] else cols
    return (offset, dims[0], ld) if ld >= cols else None


def _operand(v, producer):
    """`(base, view)` of a bmm operand made from `base` by reshapes, transposes and slices
    (at least one that is not a reshape), or None."""
    chain = []
    while v in producer and producer[v].op in VIEW_OPS:
        chain.append(producer[v])
        v = producer[v].inputs[0]
    if all(n.op == Op.RESHAPE for n in chain):
        return None
    view = contiguous(v.type.shape), 0
    for n in reversed(chain):
        view = _apply(*view, n)
        if view is None:
            return None
    return v, view


def _result(v, users, nodes):
    """`(final value, its chain of nodes, view)`: the reshapes and transposes that a bmm's
    result alone goes through, up to the last transpose, and the result's view in the final
    value's buffer; or None."""
    chain = []
    while len(users.get(v, ())) == 1 and users[v][0] < len(nodes):
        n = nodes[users[v][0]]
        if n.op not in (Op.RESHAPE, Op.TRANSPOSE):
            break
        chain.append(n)
        v = n.outputs[0]
    while chain and chain[-1].op != Op.TRANSPOSE:
        chain.pop()
    if not chain:
        return None
    dims = contiguous(chain[-1].outputs[0].type.shape)
    for n in reversed(chain):   # the inverse ops, from the final value back to the product
        if n.op == Op.TRANSPOSE:
            perm = n.attrs["perm"]
            dims = [dims[perm.index(d)] for d in range(len(perm))]
        else:
            dims = reshaped(dims, n.inputs[0].type.shape)
            if dims is None:
                return None
    return chain[-1].outputs[0], chain, (dims, 0)


def _live_at(base, j, nodes, where):
    """Whether `base` is still in the arena at position `j` (no release of a scope it was
    made in lies between)."""
    start = where.get(base, -1)
    return not any(n.op == Op.ARENA_RELEASE and where.get(n.inputs[0], -1) < start for n in nodes[start + 1:j])


def _rewrite(j, n, nodes, producer, users, where):
    """The `strided_bmm` replacing bmm `n` at position `j` and the result chain it takes
    over, or None where nothing is read or written through a view."""
    bases, views = _operands(j, n, nodes, producer, where)
    res = _result(n.outputs[0], users, nodes)
    out_view = matrices(*res[2], n.outputs[0].type.shape[2]) if res else None
    if out_view is None and all(b is v for b, v in zip(bases, n.inputs)):
        return None
    final, chain = (res[0], res[1]) if out_view else (n.outputs[0], [])
    out_view = out_view or matrices(contiguous(final.type.shape), 0, final.type.shape[2])
    attrs = dict(n.attrs, shapes=tuple(v.type.shape for v in n.inputs), a=views[0], b=views[1], out=out_view,
                 out_shape=final.type.shape)
    return Node(Op.STRIDED_BMM, tuple(bases), (final,), attrs), chain


def _drop_unread_views(nodes, outputs):
    while True:
        read = uses(nodes, outputs)
        kept = [n for n in nodes if n.op not in VIEW_OPS or n.outputs[0] in read]
        if len(kept) == len(nodes):
            return nodes
        nodes = kept


def strided_products(nodes, outputs):
    """A batched product whose operands are reshaped, transposed or sliced copies of other
    arrays (attention's heads), or whose result is only transposed and reshaped, reads and
    writes those arrays in place (`strided_bmm`); one whose result only moves into a slot
    writes into that slot (`strided_bmm_add`, see `products_into_slots`); the copies go if
    nothing else reads them."""
    nodes = products_into_slots(nodes, outputs) if IN_PLACE and INTO_SLOTS else nodes
    producer = {v: n for n in nodes for v in n.outputs}
    where = {v: k for k, n in enumerate(nodes) for v in n.outputs}
    users, out = uses(nodes, outputs), list(nodes)
    for j, n in enumerate(nodes):
        made = _rewrite(j, n, nodes, producer, users, where) if n.op == Op.BMM and IN_PLACE else None
        if made is not None:
            out[j] = made[0]
            for c in made[1]:
                out[where[c.outputs[0]]] = None
            # the final value is now made here: a later product reading a view of it starts from it,
            # not from the chain just dropped (which reads the product's own result, gone)
            producer[made[0].outputs[0]], where[made[0].outputs[0]] = made[0], j
    return _drop_unread_views([n for n in out if n is not None], outputs)


# -- products written into the slots their results move to ----------------------------

def products_into_slots(nodes, outputs):
    """Each batched product whose result only moves into a slot (`_moves`) becomes a
    `strided_bmm_add` into that slot, its operands read in place as `strided_products`
    reads them; the moves, and the slots they passed through, go. One at a time: a fused
    loop storing two products into two slots is edited by each."""
    done = set()
    while True:
        made = _next_into_slot(nodes, outputs, done)
        if made is None:
            return nodes
        nodes = made


def _next_into_slot(nodes, outputs, done):
    producer = {v: n for n in nodes for v in n.outputs}
    where = {v: k for k, n in enumerate(nodes) for v in n.outputs}
    users = uses(nodes, outputs)
    for j, n in enumerate(nodes):
        if n.op != Op.BMM or n.outputs[0] in done:
            continue
        done.add(n.outputs[0])
        moves = _moves(n.outputs[0], nodes, users)
        if moves is None:
            continue
        final, view, drop, edits, end = moves
        out_view = matrices(*view, n.outputs[0].type.shape[2]) if view else None
        if out_view is None or not _live_at(final, j, nodes, where) \
                or not _free_between(final, j, end, nodes, users, producer, n):
            continue
        bases, views = _operands(j, n, nodes, producer, where)
        attrs = dict(n.attrs, shapes=tuple(v.type.shape for v in n.inputs), a=views[0], b=views[1], out=out_view,
                     store=nodes[end].op == Op.SLOT_SET or bool(nodes[end].attrs.get("store")))
        out = list(nodes)
        out[j] = Node(Op.STRIDED_BMM_ADD, (final, *bases), (), attrs)
        for k, node in edits.items():
            out[k] = node
        return [node for k, node in enumerate(out) if k not in drop and node is not None]
    return None


def _operands(j, n, nodes, producer, where):
    """The bases and views a product at `j` reads its operands through (contiguous where
    no view of another array is live there)."""
    bases, views = [], []
    for v in n.inputs:
        found = _operand(v, producer)
        view = matrices(*found[1], v.type.shape[2]) if found and _live_at(found[0], j, nodes, where) else None
        bases.append(found[0] if view else v)
        views.append(view or matrices(contiguous(v.type.shape), 0, v.type.shape[2]))
    return bases, views


def _moves(v, nodes, users):
    """`(slot, view of v in it, positions to drop, edited fused loops, position of the last
    move)` where `v` only goes through reshapes, transposes and slots it alone passes
    through (set once, read once) into a slot it is stored or added into (whole or a
    region); else None."""
    chain, drop, edits = [], set(), {}
    while True:
        us = users.get(v, ())
        if len(us) != 1 or us[0] >= len(nodes):
            return None
        k = us[0]
        n = edits.get(k, nodes[k])
        if n.op in (Op.RESHAPE, Op.TRANSPOSE):
            chain.append(n)
            drop.add(k)
            v = n.outputs[0]
            continue
        stored = _stored(n, v)
        if stored is None:
            return _into(n, v, k, chain, drop, edits)
        slot, rest = stored
        got = _passed_through(slot, k, nodes, users)
        if got is None:
            return _into(n, v, k, chain, drop, edits)
        if rest is None:
            drop.add(k)
        else:
            edits[k] = rest
        drop.update((got, *(p for p, m in enumerate(nodes) if slot in m.outputs)))
        v = nodes[got].outputs[0]


def _into(n, v, k, chain, drop, edits):
    """The end of `_moves`: `n` (at `k`) stores or adds `v` into a slot, whole or a region."""
    if n.op == Op.SLOT_ADD_SLICE and n.inputs[1] is v and n.inputs[0] is not v:
        region = n.attrs
    elif n.op in (Op.SLOT_SET, Op.SLOT_ADD) and n.inputs[1] is v and n.inputs[0] is not v:
        region = None
    else:
        return None
    slot = n.inputs[0]
    view = contiguous(slot.type.value_type.shape), 0
    if region is not None:
        view = _sliced(*view, slot.type.value_type.shape, region)
    for m in reversed(chain):   # the inverse ops, from the slot back to the product
        if view is None:
            return None
        dims, offset = view
        if m.op == Op.TRANSPOSE:
            perm = m.attrs["perm"]
            view = [dims[perm.index(d)] for d in range(len(perm))], offset
        else:
            dims = reshaped(dims, m.inputs[0].type.shape)
            view = None if dims is None else (dims, offset)
    return slot, view, drop | {k}, edits, k


def _stored(n, v):
    """`(slot, the node without that store)` where `n` stores `v` whole into a slot and does
    nothing else with it: `slot_set` (then None), or a fused loop of stores only."""
    if n.op == Op.SLOT_SET and n.inputs[1] is v and n.inputs[0] is not v:
        return n.inputs[0], None
    if n.op != Op.FUSED or n.inputs.count(v) != 1 or tuple(n.attrs["shape"]) != v.type.shape:
        return None
    (body,) = n.bodies
    param = body.params[n.inputs.index(v)]
    if body.outputs or not all(b.op == Op.SLOT_ADD and b.attrs.get("store") and b.inputs[1] in body.params
                               and b.inputs[0] in body.params for b in body.nodes):
        return None
    stores = [b for b in body.nodes if b.inputs[1] is param]
    if len(stores) != 1 or n.inputs.count(n.inputs[body.params.index(stores[0].inputs[0])]) != 1:
        return None
    slot = n.inputs[body.params.index(stores[0].inputs[0])]
    if slot.type.value_type != v.type:
        return None
    keep = [i for i, p in enumerate(body.params) if p not in (param, stores[0].inputs[0])]
    rest = [b for b in body.nodes if b is not stores[0]]
    return slot, Node(Op.FUSED, tuple(n.inputs[i] for i in keep), n.outputs, n.attrs,
                      (Graph([body.params[i] for i in keep], rest, []),)) if rest else None


def _passed_through(slot, k, nodes, users):
    """The position of the one `slot_get` of `slot` after its one store at `k`, where
    nothing else touches the slot (no output, no body, no other read or write); else None."""
    where = users.get(slot, ())
    if len(where) != 2 or where[0] != k or where[1] >= len(nodes) or nodes[where[1]].op != Op.SLOT_GET:
        return None
    return where[1]


def _free_between(slot, j, end, nodes, users, producer, product):
    """Whether the product at `j` may write `slot` there instead of at `end`: between them
    only additions to other regions of it, and reads of it used only after `end`; neither
    operand is a view of it."""
    for v in product.inputs:
        while v in producer and producer[v].op in VIEW_OPS + (Op.SLOT_GET,):
            if producer[v].op == Op.SLOT_GET and producer[v].inputs[0] is slot:
                return False
            v = producer[v].inputs[0]
    mine = _box(nodes[end], slot)
    for k in users.get(slot, ()):
        n = nodes[k] if k < len(nodes) else None
        if n is not None and n.op == Op.SLOT_GET and k < end:
            if any(j <= u <= end for u in users.get(n.outputs[0], ())):
                return False
        elif j < k < end and not (n.op == Op.SLOT_ADD_SLICE and _disjoint(_box(n, slot), mine)):
            return False
    return True


def _box(n, slot):
    """The (start, stop) per axis a write `n` touches of `slot` (None: not a unit-step box)."""
    if n.op != Op.SLOT_ADD_SLICE:
        return tuple((0, d) for d in slot.type.value_type.shape)
    if any(step != 1 for step in n.attrs["steps"]):
        return None
    return tuple(zip(n.attrs["starts"], n.attrs["stops"]))


def _disjoint(a, b):
    return a is not None and b is not None and any(a_hi <= b_lo or b_hi <= a_lo for (a_lo, a_hi), (b_lo, b_hi) in zip(a, b))
