"""Concatenations written in place: the fused loops making the pieces of a `concat`
(through reshapes and nested concatenations, say `reshape(stack(columns))` joined to
more values) store each element straight into the result, so neither the pieces nor
the intermediate concatenations are materialized and copied.

Each piece's place in the result is an affine map of its index (`_expand`); a piece made
by a fused loop gets a store in that loop's body (a `slot_add_slice` with `store`: in a
fused body it writes the element at `starts` + `steps` · index of a slot param), any
other piece a small copy loop. The result is a slot made `uninit` (every element is
stored once), read where the concatenation was; a returned one lives in the result array.
"""
import math

from .graph import Graph, Node, Var, uses
from .ops import Op
from .types import RefType, Type


def concat_in_place(nodes, outputs):
    """Each concatenation (not one inside another's chain), outermost first, whose
    pieces include a fused loop's result read nowhere else: a slot, stored into."""
    users = uses(nodes, outputs)
    made = {v: k for k, n in enumerate(nodes) for v in n.outputs}
    nodes = list(nodes)
    done = set()
    new_slots = []
    for k in range(len(nodes) - 1, -1, -1):
        n = nodes[k]
        if k in done or n.op != Op.CONCAT or not n.outputs[0].type.shape:
            continue
        out = n.outputs[0]
        pieces, inner = [], set()
        _expand(out, 0, _row_major(out.type.shape), nodes, made, users, pieces, inner, top=k)
        placed = _placements(pieces, math.prod(out.type.shape))
        if placed is None:
            continue
        chain = inner | {k}
        stored = {}   # piece -> the fused loop that makes it and reads it nowhere else
        for v, _ in placed:
            j = made.get(v)
            if j is not None and nodes[j].op == Op.FUSED and _storable(nodes[j], v) \
                    and all(u in chain for u in users.get(v, [])):
                stored[v] = j
        if not stored:
            continue
        slot = Var(RefType(out.type.dtype, out.type.shape))
        new_slots.append(Node(Op.SLOT, (), (slot,), {"type": Type(out.type.dtype, out.type.shape), "uninit": True}))
        copies = []
        for v, place in placed:
            if v in stored:
                nodes[stored[v]] = _with_store(nodes[stored[v]], v, slot, place)
            else:
                copies.append(_copy_loop(v, slot, place))
        for j in set(stored.values()):
            nodes[j] = _drop_outputs(nodes[j], set(stored))
        nodes[k] = copies + [Node(Op.SLOT_GET, (slot,), (out,))]
        done |= chain
        for i in inner:
            nodes[i] = []
    flat = []
    for n in nodes:
        flat.extend(n if isinstance(n, list) else [n])
    return new_slots + flat


def _row_major(shape):
    strides, s = [], 1
    for d in reversed(shape):
        strides.append(s)
        s *= d
    return tuple(reversed(strides))


def _expand(v, base, strides, nodes, made, users, pieces, inner, top):
    """Add (value, base, strides) for the leaves of `v` (placed at flat base + strides ·
    index) to `pieces`, and the positions of the concatenations and reshapes passed
    through to `inner`."""
    j = made.get(v)
    n = nodes[j] if j is not None else None
    single = j == top or (j is not None and len(users.get(v, [])) == 1)
    if single and n.op == Op.CONCAT:
        axis, offset = n.attrs["axis"], 0
        if j != top:
            inner.add(j)
        for p in n.inputs:
            _expand(p, base + strides[axis] * offset, strides, nodes, made, users, pieces, inner, top)
            offset += p.type.shape[axis]
        return
    if single and n.op == Op.RESHAPE and j != top:
        inner_strides = _through_reshape(n.inputs[0].type.shape, v.type.shape, strides)
        if inner_strides is not None:
            inner.add(j)
            _expand(n.inputs[0], base, inner_strides, nodes, made, users, pieces, inner, top)
            return
    pieces.append((v, base, strides))


def _through_reshape(src, dst, strides):
    """The strides of the reshape's operand (shape `src`) given those of its result
    (shape `dst`), where they are affine: only unit dimensions change, or the result is
    placed contiguously (then any reshape keeps element order)."""
    big_src = [d for d in src if d != 1]
    big_dst = [(d, s) for d, s in zip(dst, strides) if d != 1]
    if big_src == [d for d, _ in big_dst]:
        it = iter(s for _, s in big_dst)
        return tuple(next(it) if d != 1 else 0 for d in src)
    unit = _row_major(dst)
    scale = strides[-1] if dst else 1
    if all(d == 1 or s == scale * u for d, s, u in zip(dst, strides, unit)):
        return tuple(scale * u for u in _row_major(src))
    return None


def _placements(pieces, size):
    """Each nonempty piece's (base, strides) with its unit dimensions' strides zeroed
    (they index nothing), or None where an element would fall outside the result."""
    placed = []
    for v, base, strides in pieces:
        ps = v.type.shape
        if not ps or math.prod(ps) == 0:
            if ps and math.prod(ps) == 0:
                continue
            return None
        strides = tuple(s if d > 1 else 0 for d, s in zip(ps, strides))
        last = base + sum(s * (d - 1) for d, s in zip(ps, strides))
        if base < 0 or last >= size or any(s < 0 for s in strides):
            return None
        placed.append((v, (base, strides)))
    return placed


def _storable(f, v):
    """Whether fused loop `f` makes `v` element by element (not a reduction) over its
    own shape, with no other writes through index maps."""
    if tuple(f.attrs["shape"]) != v.type.shape:
        return False
    (body,) = f.bodies
    made = {o: b for b in body.nodes for o in b.outputs}
    inner = body.outputs[f.outputs.index(v)]
    return inner not in body.params and (inner not in made or made[inner].op != Op.SUM)


def _store(q, element, shape, place):
    """The fused-body store of `element` into slot param `q` at flat index base +
    strides · index."""
    return Node(Op.SLOT_ADD_SLICE, (q, element), (), {"src_starts": (0,) * len(shape), "src_stops": tuple(shape),
                                                      "flat": place, "store": True})


def _with_store(f, v, slot, place):
    (body,) = f.bodies
    params, inputs = list(body.params), list(f.inputs)
    if slot in inputs:
        q = params[inputs.index(slot)]
    else:
        q = Var(slot.type)
        params.append(q)
        inputs.append(slot)
    element = body.outputs[f.outputs.index(v)]
    store = _store(q, element, f.attrs["shape"], place)
    return Node(Op.FUSED, tuple(inputs), f.outputs, f.attrs, (Graph(params, body.nodes + [store], body.outputs),))


def _drop_outputs(f, drop):
    (body,) = f.bodies
    keep = [k for k, o in enumerate(f.outputs) if o not in drop]
    return Node(Op.FUSED, f.inputs, tuple(f.outputs[k] for k in keep), f.attrs,
                (Graph(body.params, body.nodes, [body.outputs[k] for k in keep]),))


def _copy_loop(v, slot, place):
    p, q = Var(v.type), Var(slot.type)
    store = _store(q, p, v.type.shape, place)
    return Node(Op.FUSED, (v, slot), (), {"shape": v.type.shape}, (Graph([p, q], [store], []),))
