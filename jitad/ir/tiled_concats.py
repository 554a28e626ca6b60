"""A concatenation that puts a tensor's slices back together is that tensor.

Code that cuts a tensor into blocks and joins them again (a Jacobian's blocks per
argument, `jnp.concatenate([d_shift, d_theta], axis=1)`) copies every element twice: into
the slices, then into the concatenation. When the pieces are slices of one tensor, in
order, adjacent along the concatenation's axis, covering it from start to end and whole
along every other axis (reshapes that give a slice its own shape back are looked
through), the result is a view of the tensor itself, and the slices go unused.
"""
from .graph import Node
from .ops import Op


def tiled_concats(nodes, outputs):
    """Each `concat` of slices tiling one tensor becomes a reshape of it (a view)."""
    made = {v: n for n in nodes for v in n.outputs}
    out = []
    for n in nodes:
        source = _tiled_source(n, made) if n.op == Op.CONCAT else None
        if source is None:
            out.append(n)
        else:
            out.append(Node(Op.RESHAPE, (source,), n.outputs, {"shape": n.outputs[0].type.shape}))
    return out


def _tiled_source(n, made):
    """The tensor whose slices concatenation `n` joins back whole, in order, or None."""
    axis, at, source = n.attrs["axis"], 0, None
    for piece in n.inputs:
        s = made.get(_unreshaped(piece, made))
        if s is None or s.op != Op.SLICE or any(step != 1 for step in s.attrs["steps"]):
            return None
        x, starts, stops = s.inputs[0], s.attrs["starts"], s.attrs["stops"]
        if source is None:
            source = x
        whole = all(d == axis or (starts[d], stops[d]) == (0, size) for d, size in enumerate(x.type.shape))
        if x is not source or starts[axis] != at or not whole:
            return None
        at = stops[axis]
    if source is None or at != source.type.shape[axis] or source.type != n.outputs[0].type:
        return None
    return source


def _unreshaped(v, made):
    """`v`, or the value a chain of reshapes that ends in `v`'s own shape starts from."""
    start, n = v, made.get(v)
    while n is not None and n.op == Op.RESHAPE:
        start, n = n.inputs[0], made.get(n.inputs[0])
        if start.type.shape == v.type.shape:
            v = start
    return v
