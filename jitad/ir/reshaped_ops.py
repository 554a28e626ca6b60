"""Scalar work on a reshaped value runs before the reshape.

A reshape is a view: an elementwise op that reads one, with scalars for its other
operands (a sign, a scale), gives the same elements on either side of it. Done before the
reshape, the op joins the fused loop that makes the value (fusion merges work over one
shape), instead of running as a loop of its own that reads and writes the whole array
once more. A Jacobian's tangent code meets this once per direction: `reshape(points -
hand)` of a residual leaves the sign of `hand`'s tangent behind the reshape.
"""
from .graph import Node, Var, uses
from .ops import Op
from .types import RefType, Type


def scalar_ops_before_reshapes(nodes, outputs):
    """`op(reshape(x), s, ...)`, elementwise with scalar `s`, the reshape read by that op
    alone, becomes `reshape(op(x, s, ...))`, the op where the reshape was (next to the work
    that makes `x`) when its scalars are made by then or are constants (moved with it)."""
    nodes = list(nodes)
    users, made = uses(nodes, outputs), {v: k for k, n in enumerate(nodes) for v in n.outputs}
    hoisted = {}   # position -> the constants moved to just before it
    for k, n in enumerate(nodes):
        y = _reshaped_operand(n, k, nodes, made, users)
        if y is None:
            continue
        at, x = made[y], nodes[made[y]].inputs[0]
        late = [made[v] for v in n.inputs if v is not y and made.get(v, -1) >= at]
        if any(isinstance(j, float) or nodes[j].op != Op.CONST for j in late):
            continue
        for j in late:
            hoisted.setdefault(at, []).append(nodes[j])
            made[nodes[j].outputs[0]], nodes[j] = at - 0.5, None
        inner = Var(Type(n.outputs[0].type.dtype, x.type.shape))
        nodes[at] = Node(n.op, tuple(x if v is y else v for v in n.inputs), (inner,), n.attrs)
        nodes[k] = Node(Op.RESHAPE, (inner,), n.outputs, {"shape": n.outputs[0].type.shape})
        made[inner] = at
    return [m for k, n in enumerate(nodes) for m in hoisted.get(k, []) + [n] if m is not None]


def _reshaped_operand(n, k, nodes, made, users):
    """The one tensor operand of elementwise node `n` (at `k`), when a reshape that only
    `n` reads made it from a tensor an elementwise op makes and every other operand is a
    scalar; else None."""
    if not (n.op.elementwise and n.op.pure) or n.bodies or len(n.outputs) != 1:
        return None
    shaped = [v for v in n.inputs if v.type.shape]
    if len(shaped) != 1 or shaped[0] not in made or n.inputs.count(shaped[0]) != 1:
        return None
    y = shaped[0]
    r = nodes[made[y]]
    if r.op != Op.RESHAPE or users.get(y) != [k] or isinstance(r.inputs[0].type, RefType) \
            or not r.inputs[0].type.shape or n.outputs[0].type.shape != y.type.shape:
        return None
    x = r.inputs[0]
    if x not in made or not nodes[made[x]].op.elementwise:
        return None   # no loop makes x (a product, an argument): the op stays with the loops reading it
    return y
