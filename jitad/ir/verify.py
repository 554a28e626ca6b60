"""The IR verifier: SSA, scoping (bodies see only their params), types, and the one way
a `row_loops` node's members are lowered (a row at a time)."""
import math

from .ops import Op, infer_types
from .printer import _Namer, _format_nodes


class VerifyError(AssertionError):
    """The IR is malformed: a bug in jitad, not in the user's program."""


def verify(program):
    """Check `program` (a `Program`); raise `VerifyError` showing the bad node."""
    seen = set()
    for fun in program.funs:
        if fun.body is None:
            raise VerifyError(f"fun @{fun.name} has no body")
        _verify_graph(fun.body, seen, f"fun @{fun.name}")
        if fun.body.out_types != list(fun.out_types):
            raise VerifyError(f"fun @{fun.name} returns {fun.body.out_types}, declared {fun.out_types}")
    _verify_graph(program.main, seen, "main")
    return program


def _verify_graph(graph, seen, where, check_types=True):
    scope = set()
    for v in graph.params:
        _define(v, scope, seen, where)
    for k, node in enumerate(graph.nodes):
        try:
            for v in node.inputs:
                if v not in scope:
                    raise AssertionError(f"uses a value not defined in this body ({v})")
            arity = node.op.arity
            if arity is not None and len(node.inputs) != arity:
                raise AssertionError(f"takes {arity} operands, got {len(node.inputs)}")
            for i, body in enumerate(node.bodies):   # a fused body holds per-element scalars
                _verify_graph(body, seen, f"{where} / {node.op.name} body {i}", node.op != Op.FUSED)
            got = [v.type for v in node.outputs]
            expected = infer_types(node.op, [v.type for v in node.inputs], node.attrs, node.bodies) \
                if check_types else got
            if expected != got:
                raise AssertionError(f"result types {got}, the type rule gives {expected}")
            if node.op == Op.ROW_LOOPS:
                _verify_row_loops(node)
        except VerifyError:
            raise
        except (AssertionError, KeyError) as e:
            raise VerifyError(f"in {where}, node {k} ({node.op.name}): {e}\n{_context(graph, k)}") from None
        for v in node.outputs:
            _define(v, scope, seen, where)
    for v in graph.outputs:
        if v not in scope:
            raise VerifyError(f"in {where}: returns a value not defined in this body")


def _verify_row_loops(node):
    """Each member of a `row_loops` node runs one row at a time, so it is a copy of row values
    or a fused loop of the node's row shape (or its per-row shape) that reads through no index
    map and takes no product (those run whole-loop modes: boxes between cuts, jammed rows),
    and no member reads a total over rows (a column sum) another member makes: it is
    complete only after the last row."""
    shape = tuple(node.attrs["shape"])
    totals = set()
    for member in node.bodies[0].nodes:
        if member.op in (Op.RESHAPE, Op.SLOT_SET):
            continue
        what = f"row_loops member {member.op.name}"
        if member.op == Op.SLOT:   # a row of scratch (a slot only the members use, a row at a time)
            row = tuple(member.attrs["type"].shape)
            assert row[-1:] == shape[-1:] and math.prod(row) == shape[-1], f"{what} of {row} is not one row of {shape}"
            continue
        assert member.op == Op.FUSED, f"{what}: only fused loops and copies of row values run a row at a time"
        assert tuple(member.attrs["shape"]) in (shape, shape[:-1] + (1,)), \
            f"{what} of shape {tuple(member.attrs['shape'])} in row loops of {shape}"
        ops = {n.op for n in member.bodies[0].nodes}
        assert not ops & {Op.SLICE, Op.CONCAT, Op.SLOT_ADD_SLICE, Op.GATHER, Op.MATMUL}, \
            f"{what} reads through an index map or takes a product: it cannot run a row at a time"
        assert not totals & set(member.inputs), f"{what} reads a total over rows before its last row is made"
        totals.update(_totals_over_rows(member))


def _totals_over_rows(loop):
    """The results of fused `loop` reduced over more than its last axis (a total, a column sum)."""
    (body,) = loop.bodies
    made = {v: n for n in body.nodes for v in n.outputs}
    ndim = len(loop.attrs["shape"])
    return {out for out, v in zip(loop.outputs, body.outputs) if v in made and made[v].op in (Op.SUM, Op.MAX)
            and tuple(made[v].attrs["axes"]) != (ndim - 1,)}


def _define(var, scope, seen, where):
    if var in seen:
        raise VerifyError(f"in {where}: value {var} defined twice (not SSA)")
    seen.add(var)
    scope.add(var)


def _context(graph, k, radius=2):
    from .graph import Graph
    lo = max(0, k - radius)
    window = Graph(params=[], nodes=graph.nodes[lo:k + radius + 1])
    return "\n".join(_format_nodes(window, _Namer([]), "    "))
