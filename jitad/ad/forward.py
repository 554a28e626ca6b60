"""Forward mode: a staging interpreter that carries a tangent beside each value.

`jvp_graph(graph, pairs)` runs a traced graph on (primal, tangent) pairs — tangent None
means zero — and emits code computing both. Elementwise ops take their tangent rule
from their VJP (their Jacobian is diagonal, so the VJP applied to a tangent is the
JVP); linear ops apply themselves to tangents; control flow carries tangents through
its state. Programs made by reverse mode work too (slots get tangent slots, closures
take tangent arguments), which gives second order as forward-over-reverse.
"""
import numpy as np

from ..ir.graph import split_operands
from ..ir.ops import CALLS, Op
from ..ir.types import FLOATS, ContType, RefType, TableType, Type
from ..staging import (FOR, FUN, IF, TREE, WHILE, ShapeDtype, Staged, apply, emit, make_closure,
                       new_slot, trace_memo, wrap)
from .restage import pack_pairs, restage_node, run_graph, unpack_pairs


def has_tangent(t):
    """Types whose values carry a tangent: floats, float slots and float tables."""
    return isinstance(t, (Type, RefType, TableType)) and t.dtype in FLOATS


def zeros(t):
    return Staged(emit(Op.CONST, [], {"value": np.zeros(t.shape, {"f64": np.float64, "f32": np.float32}[t.dtype])
                                      if t.shape else 0.0, "type": t})[0])


def dual_types(types):
    return [x for t in types for x in ((t, t) if has_tangent(t) else (t,))]


def pack(pairs, types):
    return pack_pairs(pairs, types, has_tangent, lambda t: new_slot(t.value_type) if isinstance(t, RefType) else zeros(t))


def unpack(flat, types):
    return unpack_pairs(flat, types, has_tangent)[0]


def jvp_graph(graph, pairs):
    return run_graph(graph, pairs, jvp_node)


def jvp_node(node, ins):
    rule = RULES.get(node.op)
    if rule is not None:
        return rule(node, ins)
    if all(t is None for _, t in ins):
        return [(o, None) for o in restage_node(node, [p for p, _ in ins])]
    primals = [p for p, _ in ins]
    outs = restage_node(node, primals)
    if not outs or not has_tangent(node.outputs[0].type):
        return [(o, None) for o in outs]
    return [(outs[0], _tangent(node, ins, primals, outs[0]))]


def _tangent(node, ins, primals, out):
    """The output tangent: the op's own forward rule, else derived (elementwise ops from
    their VJP, linear ops applied to the tangent)."""
    op, attrs = node.op, node.attrs
    tangents = [t for _, t in ins]
    if op.jvp is not None:
        return op.jvp(node, tangents, primals, out)
    if op.elementwise:
        total = None
        for k, t in enumerate(tangents):
            if t is None:
                continue
            term = op.vjp(t, *primals, out, **attrs)[k]
            if term is not None:
                total = term if total is None else total + term
        if total is None or total.shape == out.shape:
            return total
        from .. import numeric as N
        return N.broadcast_to(total, out.shape)
    if op.linear:
        return wrap(emit(op, [tangents[0]._var] + [p._var for p in primals[1:]], attrs)[0])
    raise NotImplementedError(f"forward mode: no rule for {op.value}")


# -- effects and control flow ------------------------------------------------------

def _slot(node, ins):
    t = node.attrs["type"]
    primal = restage_node(node, [])[0]
    return [(primal, new_slot(t) if t.dtype in FLOATS else None)]


def _slot_update(node, ins):
    (ref, tref), (v, tv) = ins[0], ins[-1]
    restage_node(node, [p for p, _ in ins])
    if tref is not None:
        if node.op in (Op.SLOT_SET, Op.SLOT_SET_AT):
            emit(node.op, [tref._var] + [p._var for p, _ in ins[1:-1]]
                 + [(tv if tv is not None else zeros(v._var.type))._var])
        elif tv is not None:
            emit(node.op, [tref._var] + [p._var for p, _ in ins[1:-1]] + [tv._var], node.attrs)
    return []


def _table_gemm(node, ins):
    (ref, tref), (x, tx), (y, ty), (count, _) = ins
    restage_node(node, [ref, x, y, count])
    if tref is not None:   # d(sum X^T Y) = sum dX^T Y + X^T dY
        for a, b in ((tx, y), (x, ty)):
            if a is not None and b is not None:
                emit(node.op, [tref._var, a._var, b._var, count._var], node.attrs)
    return []


def _table(node, ins):
    t = node.attrs["type"]
    primal = restage_node(node, [p for p, _ in ins])[0]
    tangent = wrap(emit(Op.TABLE, [ins[0][0]._var], node.attrs)[0]) if t.dtype in FLOATS else None   # same size
    return [(primal, tangent)]


def _read(node, ins):
    """slot_get, table_get: the tangent is read from the tangent slot or table."""
    primal = restage_node(node, [p for p, _ in ins])[0]
    tref = ins[0][1]
    return [(primal, wrap(emit(node.op, [tref._var] + [p._var for p, _ in ins[1:]])[0]) if tref is not None else None)]


def _table_update(node, ins):
    (tab, ttab), (i, _), (v, tv) = ins
    restage_node(node, [tab, i, v])
    sets = node.op == Op.TABLE_SET or node.op == Op.TABLE_SCATTER and not node.attrs.get("add")
    if ttab is not None and (tv is not None or sets):
        emit(node.op, [ttab._var, i._var, (tv if tv is not None else zeros(v._var.type))._var], node.attrs)
    return []


def _closure(node, ins):
    fun = node.attrs["fun"]
    params = list(fun.in_types)

    def body(*flat):
        jvp_graph(fun.body, unpack(flat, params) + list(ins))
    return [(make_closure(body, dual_types(params), fun.name + "_jvp"), None)]


def _apply(node, ins):
    (cont, _), args = ins[0], ins[1:]
    apply(cont, pack(args, list(node.inputs[0].type.params)))
    return []


def _if(node, ins):
    types = [v.type for v in node.outputs]
    in_types = [v.type for v in node.inputs[1:]]

    def branch(body):
        return lambda *flat: tuple(pack(jvp_graph(body, unpack(flat, in_types)), types))
    out = IF(ins[0][0], branch(node.bodies[0]), branch(node.bodies[1]), *pack(ins[1:], in_types))
    return unpack(list(out), types)


def _while(node, ins):
    _, init, caps = split_operands(node, ins)
    types = [v.type for v in node.outputs]
    cond, body = node.bodies
    out = WHILE(lambda s: jvp_graph(cond, unpack(list(s), types) + caps)[0][0],
                lambda s: tuple(pack(jvp_graph(body, unpack(list(s), types) + caps), types)),
                tuple(pack(init, types)), checkpoints=node.attrs.get("checkpoints"))
    return unpack(list(out), types)


def _for(node, ins):
    (lower, upper), init, caps = split_operands(node, ins)
    types = [v.type for v in node.outputs]
    (body,) = node.bodies
    out = FOR(lower[0], upper[0],
              lambda i, s: tuple(pack(jvp_graph(body, [(i, None)] + unpack(list(s), types) + caps), types)),
              tuple(pack(init, types)), checkpoints=node.attrs.get("checkpoints"))
    return unpack(list(out), types)


def _call(node, ins):
    if "custom_jvp" in node.attrs and any(t is not None for _, t in ins):   # the user's rule
        return node.attrs["custom_jvp"].forward(node, ins)
    fundef = node.attrs["fun"]
    in_types, out_types = fundef.body.in_types, list(fundef.out_types)
    memo = trace_memo()
    fun = memo.get(("jvp", fundef))
    if fun is None:
        spec = tuple(ShapeDtype(t.shape, t.dtype) for t in dual_types(out_types))
        fun = FUN(lambda *flat: tuple(pack(jvp_graph(fundef.body, unpack(flat, in_types)), out_types)), out=spec)
        fun.__name__ = fundef.name + "_jvp"
        memo[("jvp", fundef)] = fun
    return unpack(list(fun(*pack(ins, in_types))), out_types)


def _tree(node, ins):
    (tree,), init, caps = split_operands(node, ins)
    types = [v.type for v in node.outputs]
    (combine,) = node.bodies

    def combine_jvp(nd, left, right):
        pairs = [(nd.index, None)] + unpack(list(left), types) + unpack(list(right), types) + caps
        return tuple(pack(jvp_graph(combine, pairs), types))
    out = TREE(tree[0], tuple(pack(init, types)), combine_jvp)
    return unpack(list(out), types)


RULES = {Op.SLOT: _slot, Op.SLOT_SET: _slot_update, Op.SLOT_ADD: _slot_update,
         Op.SLOT_ADD_AT: _slot_update, Op.SLOT_SCATTER_ADD: _slot_update, Op.SLOT_SET_AT: _slot_update,
         Op.SLOT_ADD_SLICE: _slot_update,
         Op.SLOT_GET: _read,
         Op.CLOSURE: _closure, Op.APPLY: _apply, Op.IF: _if, Op.WHILE: _while, Op.FOR: _for,
         **{op: _call for op in CALLS}, Op.TREE: _tree, Op.TABLE: _table, Op.TABLE_GET: _read,
         Op.TABLE_SET: _table_update, Op.TABLE_ADD: _table_update,
         Op.TABLE_GATHER: _read, Op.TABLE_SCATTER: _table_update, Op.TABLE_GEMM_ADD: _table_gemm}


def contains_effects(program):
    """True when the program holds slots or closures (it was made by reverse mode)."""
    from ..ir.graph import walk
    graphs = [program.main] + [f.body for f in program.funs]
    return any(n.op in (Op.SLOT, Op.CLOSURE) for g in graphs for n in walk(g))
