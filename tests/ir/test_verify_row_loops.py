"""The verifier's rule for `row_loops`: each member runs a row at a time, so it is a copy of
row values or a fused loop of the node's row shape, reading through no index map, taking no
product, and reading no total over rows (a column sum) that another member makes."""
import pytest

from jitad.ir.graph import Graph, Node, Program, Var
from jitad.ir.ops import Op
from jitad.ir.types import Type
from jitad.ir.verify import VerifyError, verify

ROWS = Type("f64", (32, 64))


def loop(inputs, make, shape=(32, 64)):
    """A fused loop over `shape` reading `inputs`; `make(params)` -> (body nodes, body outputs)."""
    params = [Var(Type("f64")) for _ in inputs]
    nodes, outs = make(params)
    result = Var(Type("f64", shape[1:] if nodes[-1].op == Op.SUM else shape))
    return Node(Op.FUSED, tuple(inputs), (result,), {"shape": shape}, (Graph(params, nodes, outs),))


def add(params):
    out = Var(Type("f64"))
    return [Node(Op.ADD, tuple(params), (out,))], [out]


def column_sum(params):
    out = Var(Type("f64"))
    return [Node(Op.SUM, (params[0],), (out,), {"axes": (0,), "keepdims": False})], [out]


def row_program(members, shape=(32, 64)):
    """`members(x)` -> fused loops over x's rows, as one `row_loops` node over `shape`."""
    outer, x = Var(ROWS), Var(ROWS)
    nodes = members(x)
    body = Graph([x], nodes, [nodes[-1].outputs[0]])
    result = Var(nodes[-1].outputs[0].type)
    node = Node(Op.ROW_LOOPS, (outer,), (result,), {"shape": shape}, (body,))
    return Program(Graph([outer], [node], [result]), [])


def test_row_loops_of_elementwise_members_and_column_sums_verify():
    def members(x):
        first = loop([x, x], add)
        return [first, loop([first.outputs[0]], column_sum)]
    verify(row_program(members))


def test_a_member_reading_a_column_sum_another_member_makes_is_rejected():
    def members(x):
        total = loop([x], column_sum)
        return [total, loop([x, total.outputs[0]], add)]
    with pytest.raises(VerifyError, match="reads a total over rows"):
        verify(row_program(members))


def test_a_member_of_another_row_shape_is_rejected():
    with pytest.raises(VerifyError, match="in row loops of"):
        verify(row_program(lambda x: [loop([x, x], add)], shape=(32, 16)))
