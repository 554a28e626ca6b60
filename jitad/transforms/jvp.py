"""Forward mode: a staging interpreter that carries a tangent beside each value.

`jvp_graph(graph, pairs)` runs a traced graph on (primal, tangent) pairs — tangent None
means zero — and emits code computing both. Elementwise ops take their tangent rule
from their VJP (their Jacobian is diagonal, so the VJP applied to a tangent is the
JVP); linear ops apply themselves to tangents; control flow carries tangents through
its state. Programs made by reverse mode work too (slots get tangent slots, closures
take tangent arguments), which gives second order as forward-over-reverse.

Activity: a value whose tangent is structurally zero carries none (None) and makes no
tangent code. `analyze` tells from which params carry tangents which results of a graph
do (a fixed point over loop state; a summary per function and set of tangent-carrying
arguments, recursion included; a slot only where a write can store a tangent), so IF
branches, FOR/WHILE/TREE state, FUN calls and adjoint slots carry tangents only where
one can be nonzero. `linearize_graph` emits the primal once and the tangent code apart
from it, for several directions at the price of one primal (`jacfwd`).
"""
import numpy as np

from ..ir.graph import loop_state_flags, split_operands
from ..ir.ops import CALLS, JVP, VJP, Op
from ..ir.types import FLOATS, RefType, TableType, Type
from ..staging import (FOR, FUN, IF, TREE, WHILE, ShapeDtype, Staged, apply, emit, make_closure,
                       new_slot, trace_memo, wrap)
from .base import restage_node, run_graph


def has_tangent(t):
    """Types whose values carry a tangent: floats, float slots and float tables."""
    return isinstance(t, (Type, RefType, TableType)) and t.dtype in FLOATS


def zeros(t):
    return Staged(emit(Op.CONST, [], {"value": np.zeros(t.shape, {"f64": np.float64, "f32": np.float32}[t.dtype])
                                      if t.shape else 0.0, "type": t})[0])


def _flags(types, flags):
    return [has_tangent(t) for t in types] if flags is None else [f and has_tangent(t) for t, f in zip(types, flags)]


def dual_types(types, flags=None):
    """Each type, followed by its tangent's where `flags` (default: every float) says."""
    return [x for t, f in zip(types, _flags(types, flags)) for x in ((t, t) if f else (t,))]


def pack(pairs, types, flags=None):
    """(primal, tangent) pairs as a flat tuple: a tangent where `flags` says (a zero one
    for None), none elsewhere (there the tangent must be None)."""
    flat = []
    for (p, t), ty, f in zip(pairs, types, _flags(types, flags)):
        flat.append(p)
        if f:
            flat.append(t if t is not None else (new_slot(ty.value_type) if isinstance(ty, RefType) else zeros(ty)))
        else:
            assert t is None, "forward mode: the activity analysis missed a tangent"
    return flat


def unpack(flat, types, flags=None):
    it = iter(flat)
    return [(next(it), next(it)) if f else (next(it), None) for f in _flags(types, flags)]


def active(pairs):
    return [t is not None for _, t in pairs]


# -- activity analysis ---------------------------------------------------------------

def analyze(graph, flags):
    """Which outputs of `graph` carry a tangent, given which params do: a float result
    of a node with a tangent-carrying input, or of a table or slot (a slot of this graph
    used only by reads and writes here carries one when some write stores a value that
    does; any other slot always does). Conservative: a tangent it allows may still come
    out zero."""
    return _analysis(graph, tuple(flags))[0]


def _analysis(graph, flags):
    """(output flags, the slots of `graph` that carry no tangent)."""
    memo = trace_memo().setdefault("jvp_activity", {})
    key = (graph, flags)
    if key not in memo:
        local = _local_slots(graph)
        idle = set(local)
        changed = True
        while changed:   # again when a write made a slot active after reads of it were seen
            changed, env = False, dict(zip(graph.params, flags))
            for node in graph.nodes:
                if node.op == Op.SLOT and node.outputs[0] in local:
                    env[node.outputs[0]] = node.outputs[0] not in idle
                    continue
                ins = [env[v] for v in node.inputs]
                env.update(zip(node.outputs, node_flags(node, ins)))
                if node.op in SLOT_WRITES and ins[-1] and node.inputs[0] in idle:
                    idle.discard(node.inputs[0])
                    changed = True
        memo[key] = [bool(env[v]) for v in graph.outputs], idle
    return memo[key]


def _local_slots(graph):
    """The float slots made in `graph` that only its own reads and writes use (as their
    first operand), so the analysis sees every write."""
    local = {n.outputs[0] for n in graph.nodes if n.op == Op.SLOT and n.attrs["type"].dtype in FLOATS}
    for node in graph.nodes:
        for k, v in enumerate(node.inputs):
            if v in local and not (k == 0 and (node.op in SLOT_WRITES or node.op == Op.SLOT_GET)):
                local.discard(v)
    return local - set(graph.outputs)


def node_flags(node, flags):
    types = [v.type for v in node.outputs]
    op = node.op
    if op in (Op.SLOT, Op.TABLE):
        return _flags(types, None)
    if not any(flags):
        return [False] * len(types)
    if op == Op.IF:
        then_body, else_body = node.bodies
        return [a or b for a, b in zip(analyze(then_body, flags[1:]), analyze(else_body, flags[1:]))]
    if op in (Op.WHILE, Op.FOR, Op.TREE):
        return _state_flags(node, flags)
    if op in CALLS and "custom_jvp" not in node.attrs:
        return _call_flags(node.attrs["fun"], tuple(flags))
    return _flags(types, None)


def _state_flags(node, flags):
    """The loop state entries carrying a tangent: where the init does, or where the body
    makes one (a fixed point)."""
    _, state, caps = split_operands(node, flags)
    return loop_state_flags(node, _flags([v.type for v in node.outputs], state), caps, analyze)


def _call_flags(fundef, flags):
    """A function's active results for these active arguments. A recursive call meets
    the summary being computed (first: none active); it is recomputed until it holds,
    forgetting the summaries of other calls made against the older one."""
    memo = trace_memo().setdefault("jvp_calls", {})
    key = (fundef, flags)
    if key in memo:
        return memo[key]
    memo[key] = [False] * len(fundef.out_types)
    while True:
        before = set(memo)
        acts = trace_memo().setdefault("jvp_activity", {})
        acts_before = set(acts)
        new = [a or b for a, b in zip(memo[key], analyze(fundef.body, list(flags)))]
        if new == memo[key]:
            return new
        memo[key] = new
        for k in set(memo) - before:
            del memo[k]
        for k in set(acts) - acts_before:
            del acts[k]


def jvp_graph(graph, pairs):
    idle = _analysis(graph, tuple(active(pairs)))[1]

    def node_rule(node, ins):
        if node.op == Op.SLOT and node.outputs[0] in idle:   # no write gives it a tangent
            return [(restage_node(node, [])[0], None)]
        return jvp_node(node, ins)
    return run_graph(graph, pairs, node_rule)


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
    """The output tangent, by the op's rule in the table `JVP`: its declaration's, else
    derived (an elementwise op's from its VJP, a linear op applied to the tangent)."""
    return JVP.lookup(node.op)(node, [t for _, t in ins], primals, out)


@JVP.derive
def _from_vjp(op):
    """An elementwise op's tangent: its VJP applied to each input's tangent, summed."""
    vjp = VJP.find(op)
    if not op.elementwise or vjp is None:
        return None

    def rule(node, tangents, primals, out):
        total = None
        for k, t in enumerate(tangents):
            if t is None:
                continue
            term = vjp(t, *primals, out, **node.attrs)[k]
            if term is not None:
                total = term if total is None else total + term
        if total is None:
            return None
        from .. import numeric as N
        if total.ir_dtype != out.ir_dtype:   # a conversion's tangent is in its output's dtype
            total = N.convert(total, out.ir_dtype)
        return total if total.shape == out.shape else N.broadcast_to(total, out.shape)
    return rule


@JVP.derive
def _linear(op):
    """A linear op's tangent: the op applied to the tangent of its first operand."""
    if not op.linear:
        return None
    return lambda node, tangents, primals, out: wrap(
        emit(op, [tangents[0]._var] + [p._var for p in primals[1:]], node.attrs)[0])


# -- effects and control flow ------------------------------------------------------

def _slot(node, ins):
    t = node.attrs["type"]
    primal = restage_node(node, [])[0]
    return [(primal, new_slot(t) if t.dtype in FLOATS else None)]


def _slot_update(node, ins):
    (_, tref), (v, tv) = ins[0], ins[-1]
    assert tref is not None or tv is None, "forward mode: the activity analysis missed a slot's tangent"
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
    flags, out_flags = active(ins[1:]), node_flags(node, active(ins))

    def branch(body):
        return lambda *flat: tuple(pack(jvp_graph(body, unpack(flat, in_types, flags)), types, out_flags))
    out = IF(ins[0][0], branch(node.bodies[0]), branch(node.bodies[1]), *pack(ins[1:], in_types, flags))
    return unpack(list(out), types, out_flags)


def _while(node, ins):
    _, init, caps = split_operands(node, ins)
    types = [v.type for v in node.outputs]
    flags = _state_flags(node, active(ins))
    cond, body = node.bodies
    out = WHILE(lambda s: jvp_graph(cond, unpack(list(s), types, flags) + caps)[0][0],
                lambda s: tuple(pack(jvp_graph(body, unpack(list(s), types, flags) + caps), types, flags)),
                tuple(pack(init, types, flags)), checkpoints=node.attrs.get("checkpoints"))
    return unpack(list(out), types, flags)


def _for(node, ins):
    (lower, upper), init, caps = split_operands(node, ins)
    types = [v.type for v in node.outputs]
    flags = _state_flags(node, active(ins))
    (body,) = node.bodies

    def step(i, s):
        return tuple(pack(jvp_graph(body, [(i, None)] + unpack(list(s), types, flags) + caps), types, flags))
    out = FOR(lower[0], upper[0], step, tuple(pack(init, types, flags)), checkpoints=node.attrs.get("checkpoints"))
    return unpack(list(out), types, flags)


def _call(node, ins):
    if "custom_jvp" in node.attrs and any(t is not None for _, t in ins):   # the user's rule
        return node.attrs["custom_jvp"].forward(node, ins)
    tangent_rule = getattr(node.attrs.get("custom"), "tangent_rule", None)   # a custom_vjp's own (fixed_point)
    if tangent_rule is not None and any(t is not None for _, t in ins):
        pairs = tangent_rule(node, ins)   # (None: the rule declines, the body's derivative is taken)
        if pairs is not None:
            return pairs
    fundef = node.attrs["fun"]
    in_types, out_types = fundef.body.in_types, list(fundef.out_types)
    flags = tuple(active(ins))
    out_flags = _call_flags(fundef, flags)
    memo = trace_memo()
    fun = memo.get(("jvp", fundef, flags))
    if fun is None:
        spec = tuple(ShapeDtype(t.shape, t.dtype) for t in dual_types(out_types, out_flags))
        fun = FUN(lambda *flat: tuple(pack(jvp_graph(fundef.body, unpack(flat, in_types, flags)), out_types,
                                           out_flags)), out=spec)
        fun.__name__ = fundef.name + "_jvp"
        memo[("jvp", fundef, flags)] = fun
    return unpack(list(fun(*pack(ins, in_types, flags))), out_types, out_flags)


def _tree(node, ins):
    (tree,), init, caps = split_operands(node, ins)
    types = [v.type for v in node.outputs]
    flags = _state_flags(node, active(ins))
    (combine,) = node.bodies

    def combine_jvp(nd, left, right):
        pairs = ([(nd.index, None)] + unpack(list(left), types, flags) + unpack(list(right), types, flags)
                 + caps)
        return tuple(pack(jvp_graph(combine, pairs), types, flags))
    out = TREE(tree[0], tuple(pack(init, types, flags)), combine_jvp)
    return unpack(list(out), types, flags)


RULES = {Op.SLOT: _slot, Op.SLOT_SET: _slot_update, Op.SLOT_ADD: _slot_update,
         Op.SLOT_ADD_AT: _slot_update, Op.SLOT_SCATTER_ADD: _slot_update, Op.SLOT_SET_AT: _slot_update,
         Op.SLOT_ADD_SLICE: _slot_update,
         Op.SLOT_GET: _read,
         Op.CLOSURE: _closure, Op.APPLY: _apply, Op.IF: _if, Op.WHILE: _while, Op.FOR: _for,
         **{op: _call for op in CALLS}, Op.TREE: _tree, Op.TABLE: _table, Op.TABLE_GET: _read,
         Op.TABLE_SET: _table_update, Op.TABLE_ADD: _table_update,
         Op.TABLE_GATHER: _read, Op.TABLE_SCATTER: _table_update, Op.TABLE_GEMM_ADD: _table_gemm}


SLOT_WRITES = (Op.SLOT_SET, Op.SLOT_ADD, Op.SLOT_ADD_AT, Op.SLOT_SCATTER_ADD, Op.SLOT_SET_AT, Op.SLOT_ADD_SLICE)


def contains_effects(program):
    """True when the program holds slots or closures (it was made by reverse mode)."""
    from ..ir.graph import walk
    graphs = [program.main] + [f.body for f in program.funs]
    return any(n.op in (Op.SLOT, Op.CLOSURE) for g in graphs for n in walk(g))


def linearize_graph(graph, args):
    """Emit `graph`'s primal computation on staged `args` once; return its outputs and
    `tangents(ts) -> output tangents` (None: zero), which emits tangent code only, reading
    the primal values computed here: called once per direction (inside a loop over
    them, say), the primal is not recomputed. A control-flow node with a tangent runs
    whole (its primal inside it again). For programs without effects."""
    env = dict(zip(graph.params, args))

    def primal(node, ins):
        outs = restage_node(node, ins)
        env.update(zip(node.outputs, outs))
        return outs
    outs = run_graph(graph, args, primal)

    def tangents(ts):
        tenv = {v: t for v, t in zip(graph.params, ts) if t is not None}
        for node in graph.nodes:
            ins = [(env[v], tenv.get(v)) for v in node.inputs]
            if all(t is None for _, t in ins):
                continue
            if node.op in RULES:
                pairs = jvp_node(node, ins)
            elif node.outputs and has_tangent(node.outputs[0].type):
                out = env[node.outputs[0]]
                pairs = [(out, _tangent(node, ins, [p for p, _ in ins], out))]
            else:
                continue
            tenv.update((v, t) for v, (_, t) in zip(node.outputs, pairs) if t is not None)
        return [tenv.get(v) for v in graph.outputs]
    return outs, tangents
