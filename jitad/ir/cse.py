"""Common subexpressions: a pure node computing what an earlier one already did (same
op, operands, attributes and result types) is dropped, its users read the earlier
result. Differentiation repeats work this way (the tie mask `x == max(x)` of a max's
VJP, once per use; forward over reverse recomputes primal values).

Only pure nodes without bodies merge, and none that reads a slot or a table (their
contents change between reads). A value made inside an arena scope is forgotten when
the scope closes, so no later node reads a freed buffer. Each body is its own scope.
"""
import numpy as np

from .graph import FunDef, Node
from .ops import IMPLS, Op
from .types import RefType, TableType, Type


def eliminate_common_subexpressions(graph):
    """Rewrite `graph` (and its bodies) in place; return the number of nodes dropped
    (two `mul %0 %0` become one; two `slot_get %1` stay)."""
    dropped = 0
    for node in graph.nodes:
        for body in node.bodies:
            dropped += eliminate_common_subexpressions(body)
    same, seen, scopes, kept = {}, {}, [], []
    for node in graph.nodes:
        inputs = tuple(same.get(v, v) for v in node.inputs)
        if inputs != node.inputs:
            node = type(node)(node.op, inputs, node.outputs, node.attrs, node.bodies)
        if node.op == Op.ARENA_MARK:
            scopes.append([])
        elif node.op == Op.ARENA_RELEASE and scopes:
            for key in scopes.pop():
                seen.pop(key, None)
        key = _key(node)
        if key is not None and key in seen:
            same.update(zip(node.outputs, seen[key].outputs))
            dropped += 1
            continue
        if key is not None:
            seen[key] = node
            if scopes:
                scopes[-1].append(key)
        kept.append(node)
    graph.nodes = kept
    graph.outputs = [same.get(v, v) for v in graph.outputs]
    return dropped


def _key(node):
    """What identifies `node`'s results, or None where it must stay."""
    if not node.op.pure or node.bodies or not node.outputs \
            or any(isinstance(v.type, (RefType, TableType)) for v in node.inputs + node.outputs):
        return None
    try:
        attrs = tuple(sorted((k, _frozen(v)) for k, v in node.attrs.items()))
        key = (node.op, tuple(id(v) for v in node.inputs), attrs, tuple(v.type for v in node.outputs))
        hash(key)
    except TypeError:
        return None
    return key


def _frozen(value):
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, FunDef):
        return ("fun", id(value))
    if isinstance(value, float):
        return ("float", float(value).hex())   # -0.0 is not 0.0 (reverse mode's exact zero), NaN is NaN
    return (type(value).__name__, value)   # True is not 1


FOLDED = ("add", "sub", "mul", "div", "neg")   # exact in IEEE arithmetic: NumPy computes what the code would
_SCALAR = {"f64": np.float64, "f32": np.float32}


def fold_constants(graph):
    """Rewrite `graph` (and its bodies) in place: a scalar float `add`, `sub`, `mul`, `div`
    or `neg` of constants becomes the constant it computes, rounded as the compiled code
    rounds it (a gradient's seed times constant factors, summed: LLVM cannot fold it
    across the functions a long program is split into). Return the number folded."""
    folded = 0
    for node in graph.nodes:
        for body in node.bodies:
            folded += fold_constants(body)
    known, kept = {}, []
    for node in graph.nodes:
        if node.op == Op.CONST and not node.outputs[0].type.shape and node.outputs[0].type.dtype in _SCALAR:
            known[node.outputs[0]] = _SCALAR[node.outputs[0].type.dtype](node.attrs["value"])
        elif node.op.name in FOLDED and all(v in known for v in node.inputs) \
                and node.outputs[0].type.dtype in _SCALAR and not node.outputs[0].type.shape:
            (out,) = node.outputs
            with np.errstate(all="ignore"):
                value = _SCALAR[out.type.dtype](IMPLS[node.op](*(known[v] for v in node.inputs)))
            known[out] = value
            node = Node(Op.CONST, (), (out,), {"value": float(value), "type": Type(out.type.dtype)})
            folded += 1
        kept.append(node)
    graph.nodes = kept
    return folded
