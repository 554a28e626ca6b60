"""Calls of small straight-line functions are inlined after differentiation.

A function with a custom derivative stays a call node once reverse or forward mode has
used its rule (`lax.rsqrt` in every LayerNorm, `custom_jvp` activations): the call cuts
the elementwise work around it into separate loops. Its primal body, a few pure nodes,
is the same work inline, where fusion merges it with its neighbours.
"""
from .float_checks import inherit
from .graph import Node, Var
from .ops import CALLS, Op

MAX_NODES = 16   # the largest body inlined (more is rarely elementwise glue)
INLINED = (Op.CALL, Op.CUSTOM_VJP, Op.CHECKPOINT)   # (after differentiation each is a plain call)


def inline_small_calls(program):
    """Each call of a function of at most MAX_NODES pure nodes without bodies, in every
    graph of `program`, becomes that body; functions no longer called are dropped."""
    small = {f for f in program.funs if _small(f.body)}
    if not small:
        return
    for graph in [f.body for f in program.funs] + [program.main]:
        _inline_in(graph, small)
    called = set()
    for graph in [f.body for f in program.funs] + [program.main]:
        called.update(_called(graph))
    program.funs = [f for f in program.funs if f in called]


def _small(body):
    """Few pure nodes without bodies, each result made by one of them (and once)."""
    made = {v for n in body.nodes for v in n.outputs}
    return len(body.nodes) <= MAX_NODES and all(n.op.pure and not n.bodies and n.op not in CALLS
                                                for n in body.nodes) \
        and all(v in made for v in body.outputs) and len(set(body.outputs)) == len(body.outputs)


def _inline_in(graph, small):
    for node in graph.nodes:
        for body in node.bodies:
            _inline_in(body, small)
    out = []
    for node in graph.nodes:
        fun = node.attrs.get("fun") if node.op in INLINED else None
        if fun in small and len(node.inputs) == len(fun.body.params):
            out += _body_at(fun.body, node)
        else:
            out.append(node)
    graph.nodes = out


def _body_at(body, call):
    """`body`'s nodes with its params read as the call's operands, its results made under
    the call's result names and its other values fresh."""
    env = dict(zip(body.params, call.inputs))
    named = dict(zip(body.outputs, call.outputs))
    nodes = []
    for n in body.nodes:
        outs = tuple(named.get(v) or Var(v.type) for v in n.outputs)
        inherit(n.outputs, outs)   # (a NaN check names the line that made the value)
        env.update(zip(n.outputs, outs))
        nodes.append(Node(n.op, tuple(env[v] for v in n.inputs), outs, dict(n.attrs)))
    return nodes


def _called(graph):
    for node in graph.nodes:
        if "fun" in node.attrs:
            yield node.attrs["fun"]
        for body in node.bodies:
            yield from _called(body)
