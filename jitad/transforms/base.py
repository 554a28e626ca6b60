"""Re-emit a traced graph through staging, node by node, into the current trace.

This is the identity transformation; reverse mode uses it for the parts of a program
that carry no gradient, and the other transformations follow its shape.
"""
from ..ir import float_checks
from ..ir.graph import split_operands
from ..ir.ops import CALLS, Op
from ..pytree import flatten, unflatten
from ..staging import FOR, FUN, IF, TREE, WHILE, ShapeDtype, emit, trace_memo, wrap


def pack_pairs(pairs, types, paired, missing):
    """Flat values for (value, companion) `pairs` of `types`: each value, followed by its
    companion where `paired(type)` (`missing(type)` when the companion is None). Forward
    mode pairs a value with its tangent, reverse mode with its adjoint slot: how both pass
    such pairs through closures, loop states and function calls."""
    flat = []
    for (value, companion), t in zip(pairs, types):
        flat.append(value)
        if paired(t):
            flat.append(companion if companion is not None else missing(t))
    return flat


def unpack_pairs(flat, types, paired):
    """(value, companion or None) pairs of `types` from the start of `flat` (see
    `pack_pairs`), and the rest of `flat`."""
    it = iter(flat)
    return [(next(it), next(it)) if paired(t) else (next(it), None) for t in types], list(it)


def run_graph(graph, args, node_rule):
    """Walk `graph` with `args` bound to its params: `node_rule(node, inputs) -> outputs`
    gives each node's values; return the graph's output values."""
    env = dict(zip(graph.params, args))
    for node in graph.nodes:
        with float_checks.derived(node):   # (jax_debug_nans: what it emits names `node`'s line)
            env.update(zip(node.outputs, node_rule(node, [env[v] for v in node.inputs])))
    return [env[v] for v in graph.outputs]


def restage(graph, args):
    """Run `graph` on staged `args`, emitting its nodes; return the staged outputs."""
    return run_graph(graph, args, restage_node)


def restage_node(node, ins):
    rule = CONTROL.get(node.op)
    if rule is not None:
        return list(rule(node, ins))
    outs = emit(node.op, [x._var for x in ins], node.attrs)
    float_checks.inherit(node.outputs, outs)
    return [wrap(v) for v in outs]


def _if(node, ins):
    then_body, else_body = node.bodies
    return IF(ins[0], lambda *a: tuple(restage(then_body, list(a))),
              lambda *a: tuple(restage(else_body, list(a))), *ins[1:])


def _while(node, ins):
    _, init, caps = split_operands(node, ins)
    cond, body = node.bodies
    return WHILE(lambda s: restage(cond, list(s) + caps)[0],
                 lambda s: tuple(restage(body, list(s) + caps)), tuple(init),
                 checkpoints=node.attrs.get("checkpoints"))


def _for(node, ins):
    (lower, upper), init, caps = split_operands(node, ins)
    (body,) = node.bodies
    return FOR(lower, upper, lambda i, s: tuple(restage(body, [i] + list(s) + caps)), tuple(init),
               checkpoints=node.attrs.get("checkpoints"))


def _custom_function(node):
    """The custom_jvp or custom_vjp function a call node stages (one without captured
    values, which a call elsewhere could not see), or None."""
    if node.op != Op.CUSTOM_VJP or node.attrs["fun"].n_captures:
        return None
    rule = node.attrs.get("custom_jvp", node.attrs.get("custom"))
    return rule if isinstance(rule, FUN) and "in_td" in node.attrs else None


def _call(node, ins):
    rule = _custom_function(node)
    if rule is not None:   # called again, so a later derivative (a higher order) still takes its rule
        return flatten(rule(*unflatten(node.attrs["in_td"], list(ins))))[0]
    fundef = node.attrs["fun"]
    memo = trace_memo()
    fun = memo.get(("restage", fundef))
    if fun is None:
        out = tuple(ShapeDtype(t.shape, t.dtype) for t in fundef.out_types)
        fun = FUN(lambda *a: tuple(restage(fundef.body, list(a))), out=out)
        fun.__name__ = fundef.name
        memo[("restage", fundef)] = fun
    return fun(*ins)


def _tree(node, ins):
    (tree,), init, caps = split_operands(node, ins)
    (combine,) = node.bodies
    return TREE(tree, tuple(init),
                lambda nd, l, r: tuple(restage(combine, [nd.index] + list(l) + list(r) + caps)))


CONTROL = {Op.IF: _if, Op.WHILE: _while, Op.FOR: _for, Op.TREE: _tree, **{op: _call for op in CALLS}}
