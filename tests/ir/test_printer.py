"""Golden tests of the printed staged IR (`str(jitad.trace(f, *args))`) and of the verifier.

The expected texts were printed once, checked by hand and frozen: a change in them is a
change of the IR's stable text form and should be deliberate.
"""
import dataclasses
import textwrap

import pytest

import jitad
from jitad import FOR, FUN, IF, TREE, WHILE, Tree
from jitad.ir.graph import Node, Var
from jitad.ir.ops import Op
from jitad.ir.types import Type
from jitad.ir.verify import VerifyError, verify


@FUN(out=0)
def fact(n):
    return IF(n <= 1, lambda: 1, lambda: n * fact(n - 1))


SMALL_TREE = Tree.from_nested((5.0, (3.0, None, None), (4.0, None, None)))

GOLDEN = {
    "doc example": (lambda x: x * 2.0, (1.0,), """
        main(%0:f64) {
          %1:f64 = const 2.0
          %2:f64 = mul %0 %1
          return %2
        }
        """),
    # an int argument is converted once; the Python int 2 becomes an f64 constant
    "straight line": (lambda x, n: jitad.exp(x) * n + 1.0 - x / 2, (1.0, 2), """
        main(%0:f64 %1:i64) {
          %2:f64 = exp %0
          %3:f64 = convert[dtype=f64] %1
          %4:f64 = mul %2 %3
          %5:f64 = const 1.0
          %6:f64 = add %4 %5
          %7:f64 = const 2.0
          %8:f64 = div %0 %7
          %9:f64 = sub %6 %8
          return %9
        }
        """),
    "several results": (lambda x: (x, x > 0), (1.0,), """
        main(%0:f64) {
          %1:f64 = const 0.0
          %2:bool = gt %0 %1
          return %0 %2
        }
        """),
    # the branches capture x and y: both become operands and params of both bodies
    "if": (lambda x, y: IF(x > y, lambda: x - y, lambda: y * 2.0), (1.0, 2.0), """
        main(%0:f64 %1:f64) {
          %2:bool = gt %0 %1
          %3:f64 = if %2 %0 %1
            then(%4:f64 %5:f64) {
              %6:f64 = sub %4 %5
              return %6
            }
            else(%7:f64 %8:f64) {
              %9:f64 = const 2.0
              %10:f64 = mul %8 %9
              return %10
            }
          return %3
        }
        """),
    "while": (lambda x: WHILE(lambda t: t > 1.0, lambda t: t * 0.5, x), (10.0,), """
        main(%0:f64) {
          %1:f64 = while[n_state=1] %0
            cond(%2:f64) {
              %3:f64 = const 1.0
              %4:bool = gt %2 %3
              return %4
            }
            body(%5:f64) {
              %6:f64 = const 0.5
              %7:f64 = mul %5 %6
              return %7
            }
          return %1
        }
        """),
    # operands: lower, upper, the two state values, then the captured x
    "for": (lambda n, x: FOR(0, n, lambda i, s: (s[0] + i, s[1] * x), (0, 1.0)), (5, 2.0), """
        main(%0:i64 %1:f64) {
          %2:i64 = const 0
          %3:i64 = const 0
          %4:f64 = const 1.0
          %5:i64 %6:f64 = for[n_state=2] %2 %0 %3 %4 %1
            body(%7:i64 %8:i64 %9:f64 %10:f64) {
              %11:i64 = add %8 %7
              %12:f64 = mul %9 %10
              return %11 %12
            }
          return %5 %6
        }
        """),
    # staged functions print before main; names are unique in the whole program
    "recursive fun": (lambda n: fact(n) + 1, (5,), """
        fun @fact(%0:i64) -> (i64) {
          %1:i64 = const 1
          %2:bool = le %0 %1
          %3:i64 = if %2 %0
            then(%4:i64) {
              %5:i64 = const 1
              return %5
            }
            else(%6:i64) {
              %7:i64 = const 1
              %8:i64 = sub %6 %7
              %9:i64 = call @fact %8
              %10:i64 = mul %6 %9
              return %10
            }
          return %3
        }
        main(%11:i64) {
          %12:i64 = call @fact %11
          %13:i64 = const 1
          %14:i64 = add %12 %13
          return %14
        }
        """),
    # operands: the tree, the init, then the captures (the tree again and x);
    # combine params: node index, left result, right result, captures
    "tree": (lambda t, x: TREE(t, x, lambda node, l, r: IF(node.is_leaf, lambda: node.value,
                                                              lambda: l * r + x)),
             (SMALL_TREE, 2.0), """
        main(%0:tree{value:f64} %1:f64) {
          %2:f64 = tree[n_state=1] %0 %1 %0 %1
            combine(%3:i64 %4:f64 %5:f64 %6:tree{value:f64} %7:f64) {
              %8:i64 = tree_get[field=left] %6 %3
              %9:i64 = const -1
              %10:bool = eq %8 %9
              %11:i64 = tree_get[field=right] %6 %3
              %12:i64 = const -1
              %13:bool = eq %11 %12
              %14:bool = and %10 %13
              %15:f64 = if %14 %6 %3 %4 %5 %7
                then(%16:tree{value:f64} %17:i64 %18:f64 %19:f64 %20:f64) {
                  %21:f64 = tree_get[field=value] %16 %17
                  return %21
                }
                else(%22:tree{value:f64} %23:i64 %24:f64 %25:f64 %26:f64) {
                  %27:f64 = mul %24 %25
                  %28:f64 = add %27 %26
                  return %28
                }
              return %15
            }
          return %2
        }
        """),
}


@pytest.mark.parametrize("name", list(GOLDEN))
def test_printed_ir_is_golden(name):
    fn, args, expected = GOLDEN[name]
    program = jitad.trace(fn, *args)
    assert str(program) == textwrap.dedent(expected).strip()
    assert verify(program) is program


@pytest.mark.parametrize("name", list(GOLDEN))
def test_printing_is_stable(name):
    """Tracing twice prints the same text; printing does not change the graph."""
    fn, args, _ = GOLDEN[name]
    program = jitad.trace(fn, *args)
    assert str(program) == str(program) == str(jitad.trace(fn, *args))


def test_compiled_function_exposes_the_same_ir():
    fn, args, expected = GOLDEN["if"]
    f = jitad.jit(fn)
    assert f(*args) == 4.0
    assert f.ir == textwrap.dedent(expected).strip()


# -- the verifier --------------------------------------------------------------------

def straight_line():
    return jitad.trace(lambda x: x * 2.0 + 1.0, 1.0)


def with_if():
    return jitad.trace(lambda x: IF(x > 0, lambda: x * 2.0, lambda: -x), 1.0)


def test_verify_accepts_every_traced_program():
    for fn, args, _ in GOLDEN.values():
        program = jitad.trace(fn, *args)
        assert verify(program) is program


def replace_node(graph, k, **changes):
    graph.nodes[k] = dataclasses.replace(graph.nodes[k], **changes)


def test_verify_rejects_a_var_from_another_graph():
    program, other = straight_line(), jitad.trace(lambda y: y - 3.0, 1.0)
    mul = program.main.nodes[1]
    replace_node(program.main, 1, inputs=(other.main.params[0], mul.inputs[1]))
    with pytest.raises(VerifyError, match="not defined in this body"):
        verify(program)


def test_verify_rejects_a_wrong_result_type():
    program = straight_line()
    replace_node(program.main, 1, outputs=(Var(Type("i64")),))
    with pytest.raises(VerifyError, match="type rule"):
        verify(program)


def test_verify_rejects_a_value_defined_twice():
    program = straight_line()
    replace_node(program.main, 1, outputs=(program.main.params[0],))
    with pytest.raises(VerifyError, match="defined twice"):
        verify(program)


def test_verify_rejects_returning_an_undefined_value():
    program = straight_line()
    program.main.outputs = [Var(Type("f64"))]
    with pytest.raises(VerifyError, match="returns a value not defined"):
        verify(program)


def test_verify_rejects_a_body_using_an_outer_value_without_capturing_it():
    program = with_if()
    else_body = program.main.nodes[-1].bodies[1]
    neg = else_body.nodes[-1]
    replace_node(else_body, len(else_body.nodes) - 1, inputs=(program.main.params[0],))
    assert neg.op == Op.NEG
    with pytest.raises(VerifyError, match="not defined in this body"):
        verify(program)


def test_verify_rejects_if_branches_of_different_types_and_shows_the_node():
    program = with_if()
    then_body = program.main.nodes[-1].bodies[0]
    flag = Var(Type("bool"))
    then_body.nodes.append(Node(Op.GT, (then_body.params[0], then_body.params[0]), (flag,)))
    then_body.outputs = [flag]
    with pytest.raises(VerifyError) as info:
        verify(program)
    message = str(info.value)
    assert "node 2 (if)" in message and "gt %" in message     # the nodes around the bad one


def test_verify_rejects_a_fun_returning_other_than_declared():
    program = jitad.trace(lambda n: fact(n), 3)
    program.funs[0].out_types = [Type("f64")]
    with pytest.raises(VerifyError):
        verify(program)


def test_verify_rejects_a_fun_without_body():
    program = jitad.trace(lambda n: fact(n), 3)
    program.funs[0].body = None
    with pytest.raises(VerifyError, match="no body"):
        verify(program)


def test_verify_error_is_an_internal_assertion_not_a_user_error():
    assert issubclass(VerifyError, AssertionError)
    assert not issubclass(VerifyError, jitad.JitadError)


def test_verify_rejects_a_wrong_number_of_operands():
    program = straight_line()
    mul = program.main.nodes[1]
    replace_node(program.main, 1, inputs=(mul.inputs[0], mul.inputs[0], mul.inputs[1]))
    with pytest.raises(VerifyError):
        verify(program)


def test_verify_error_for_a_bad_node_says_where():
    program = straight_line()
    replace_node(program.main, 1, outputs=(Var(Type("i64")),))
    with pytest.raises(VerifyError) as info:
        verify(program)
    assert "main" in str(info.value) and "mul" in str(info.value)
