"""Batched products that read their operands, and write their result, through strided views:
the heads of attention (`x.reshape(B, T, H, hs).transpose(0, 2, 1, 3)`, a slice of a fused
QKV product) are matrices at a fixed row stride inside the untransposed buffer, one per
(batch, head), so the product reads them there instead of from a transposed copy.

A view is described by its dimensions, each a tuple of `(size, stride)` parts in row-major
order (a dimension that merged others which were not adjacent in memory has several parts;
one of size 1 has none), and an element offset into the base's buffer."""
from .graph import Node, uses
from .ops import Op

VIEW_OPS = (Op.RESHAPE, Op.TRANSPOSE, Op.SLICE)
IN_PLACE = True   # False: every product reads and writes copies, as before (for A/Bs: `bench.gpt --ab`)


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
    bases, views = [], []
    for v in n.inputs:
        found = _operand(v, producer)
        view = matrices(*found[1], v.type.shape[2]) if found and _live_at(found[0], j, nodes, where) else None
        bases.append(found[0] if view else v)
        views.append(view or matrices(contiguous(v.type.shape), 0, v.type.shape[2]))
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
    writes those arrays in place (`strided_bmm`); the copies go if nothing else reads them."""
    producer = {v: n for n in nodes for v in n.outputs}
    where = {v: k for k, n in enumerate(nodes) for v in n.outputs}
    users, out = uses(nodes, outputs), list(nodes)
    for j, n in enumerate(nodes):
        made = _rewrite(j, n, nodes, producer, users, where) if n.op == Op.BMM and IN_PLACE else None
        if made is not None:
            out[j] = made[0]
            for c in made[1]:
                out[where[c.outputs[0]]] = None
    return _drop_unread_views([n for n in out if n is not None], outputs)
