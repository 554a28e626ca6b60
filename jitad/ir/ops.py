"""Every primitive, declared once: its opcode, its type rule and its NumPy meaning.

The NumPy meaning (`impl`) defines the semantics the LLVM lowering must match; the
reference interpreter (`jitad.ir.interpret`) runs it. Differentiation and lowering
rules live in their own tables keyed by the same `Op` (jitad/ad, jitad/lower).
"""
import enum

import numpy as np

from ..errors import ShapeError
from .types import BOOL, FLOATS, I64, Type


class Op(enum.Enum):
    # elementwise arithmetic
    ADD = "add"; SUB = "sub"; MUL = "mul"; DIV = "div"; POW = "pow"
    MOD = "mod"; FLOORDIV = "floordiv"; MAXIMUM = "maximum"; MINIMUM = "minimum"
    NEG = "neg"; ABS = "abs"; SQUARE = "square"; RELU = "relu"
    EXP = "exp"; LOG = "log"; LOG1P = "log1p"; EXPM1 = "expm1"; SQRT = "sqrt"
    SIN = "sin"; COS = "cos"; TANH = "tanh"; SIGMOID = "sigmoid"
    # comparisons and logic
    LT = "lt"; LE = "le"; GT = "gt"; GE = "ge"; EQ = "eq"; NE = "ne"
    AND = "and"; OR = "or"; NOT = "not"
    SELECT = "select"; CONVERT = "convert"; CONST = "const"
    # trees
    TREE_GET = "tree_get"
    # control flow
    IF = "if"; WHILE = "while"; FOR = "for"; CALL = "call"; TREE = "tree"


TYPE_RULES = {}   # op -> rule(in_types, attrs, bodies) -> list of out types
IMPLS = {}        # op -> numpy function of the input values (attrs as keywords)
FLOAT_ONLY = set()  # ops whose integer inputs staging converts to f64 first


def declare(op, rule, impl=None, float_only=False):
    TYPE_RULES[op] = rule
    if impl is not None:
        IMPLS[op] = impl
    if float_only:
        FLOAT_ONLY.add(op)


def broadcast_shapes(op, *shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShapeError(f"`{op.value}`: shapes {' and '.join(map(str, shapes))} do not broadcast") from None


def _same_dtype(op, types):
    dtypes = {t.dtype for t in types}
    assert len(dtypes) == 1, f"{op.value}: mixed dtypes {dtypes} (staging promotes first)"
    return types[0].dtype


def elementwise(op, types, attrs, bodies):
    return [Type(_same_dtype(op, types), broadcast_shapes(op, *(t.shape for t in types)))]


def comparison(op, types, attrs, bodies):
    _same_dtype(op, types)
    return [Type("bool", broadcast_shapes(op, *(t.shape for t in types)))]


def logical(op, types, attrs, bodies):
    assert _same_dtype(op, types) in ("bool", "i64")
    return elementwise(op, types, attrs, bodies)


def floating(op, types, attrs, bodies):
    assert types[0].dtype in FLOATS, f"{op.value} takes floats"
    return elementwise(op, types, attrs, bodies)


# -- integer semantics shared with the LLVM lowering: no traps, NumPy's results ----

def _int_floordiv(a, b):
    a, b = np.int64(a), np.int64(b)
    if b == 0:
        return np.int64(0)
    if b == -1:
        return np.int64(0) - a   # wraps for INT_MIN, never traps
    return np.floor_divide(a, b)


def _int_mod(a, b):
    a, b = np.int64(a), np.int64(b)
    if b == 0 or b == -1:
        return np.int64(0)
    return np.mod(a, b)


def _int_pow(a, b):
    a, b = np.int64(a), int(b)
    if b < 0:
        return np.int64(0)
    result = np.int64(1)
    while b:
        if b & 1:
            result = result * a
        a = a * a
        b >>= 1
    return result


def _pick(int_fn, float_fn):
    def impl(a, b):
        if isinstance(a, (np.integer, int)) and not isinstance(a, (bool, np.bool_)):
            return int_fn(a, b)
        return float_fn(a, b)
    return impl


def _convert(x, dtype):
    if dtype == "i64" and isinstance(x, (float, np.floating)):
        if np.isnan(x):
            return np.int64(0)     # like llvm.fptosi.sat
        return np.int64(np.clip(np.trunc(x), -2.0**63, 2.0**63 - 1024))
    return np.dtype({"bool": np.bool_, "i64": np.int64, "f32": np.float32, "f64": np.float64}[dtype]).type(x)


def _sigmoid(x):
    return x.dtype.type(1) / (x.dtype.type(1) + np.exp(-x))


def _relu(x):
    return np.where(x < 0, x.dtype.type(0), x)[()]


for _op, _impl in [(Op.ADD, np.add), (Op.SUB, np.subtract), (Op.MUL, np.multiply),
                   (Op.MAXIMUM, np.maximum), (Op.MINIMUM, np.minimum)]:
    declare(_op, elementwise, _impl)
declare(Op.DIV, floating, np.true_divide, float_only=True)
declare(Op.POW, elementwise, _pick(_int_pow, np.power))
declare(Op.MOD, elementwise, _pick(_int_mod, np.mod))
declare(Op.FLOORDIV, elementwise, _pick(_int_floordiv, np.floor_divide))
declare(Op.NEG, elementwise, np.negative)
declare(Op.ABS, elementwise, np.abs)
declare(Op.SQUARE, elementwise, lambda x: x * x)
declare(Op.RELU, elementwise, _relu)
for _op, _impl in [(Op.EXP, np.exp), (Op.LOG, np.log), (Op.LOG1P, np.log1p),
                   (Op.EXPM1, np.expm1), (Op.SQRT, np.sqrt), (Op.SIN, np.sin),
                   (Op.COS, np.cos), (Op.TANH, np.tanh), (Op.SIGMOID, _sigmoid)]:
    declare(_op, floating, _impl, float_only=True)
for _op, _impl in [(Op.LT, np.less), (Op.LE, np.less_equal), (Op.GT, np.greater),
                   (Op.GE, np.greater_equal), (Op.EQ, np.equal), (Op.NE, np.not_equal)]:
    declare(_op, comparison, _impl)
declare(Op.AND, logical, np.bitwise_and)
declare(Op.OR, logical, np.bitwise_or)
declare(Op.NOT, logical, np.invert)


def _select_rule(op, types, attrs, bodies):
    cond, a, b = types
    assert cond.dtype == "bool" and a.dtype == b.dtype
    return [Type(a.dtype, broadcast_shapes(op, cond.shape, a.shape, b.shape))]


declare(Op.SELECT, _select_rule, lambda c, a, b: np.where(c, a, b)[()])
declare(Op.CONVERT, lambda op, types, attrs, bodies: [Type(attrs["dtype"], types[0].shape)],
        _convert)
declare(Op.CONST, lambda op, types, attrs, bodies: [attrs["type"]],
        lambda value, type: _convert(value, type.dtype))


def _tree_get_rule(op, types, attrs, bodies):
    tree, index = types
    assert index == I64
    dtype = "i64" if attrs["field"] in ("left", "right") else tree.field_dtype(attrs["field"])
    assert dtype is not None, attrs["field"]
    return [Type(dtype)]


declare(Op.TREE_GET, _tree_get_rule)


# -- control flow: the types come from the bodies --------------------------------

def _if_rule(op, types, attrs, bodies):
    then_body, else_body = bodies
    assert types[0] == BOOL
    assert then_body.in_types == else_body.in_types == types[1:]
    assert then_body.out_types == else_body.out_types
    return then_body.out_types


def _while_rule(op, types, attrs, bodies):
    cond, body = bodies
    n = attrs["n_state"]
    assert cond.in_types == body.in_types == types
    assert cond.out_types == [BOOL] and body.out_types == types[:n]
    return types[:n]


def _for_rule(op, types, attrs, bodies):
    (body,) = bodies
    n = attrs["n_state"]
    assert types[0] == types[1] == I64
    assert body.in_types == [I64] + types[2:]
    assert body.out_types == types[2:2 + n]
    return types[2:2 + n]


def _call_rule(op, types, attrs, bodies):
    fun = attrs["fun"]
    assert fun.body is None or fun.body.in_types == types
    return list(fun.out_types)


def _tree_rule(op, types, attrs, bodies):
    (combine,) = bodies
    n = attrs["n_state"]
    state = types[1:1 + n]
    assert combine.in_types == [I64] + state + state + types[1 + n:]
    assert combine.out_types == state
    return state


declare(Op.IF, _if_rule)
declare(Op.WHILE, _while_rule)
declare(Op.FOR, _for_rule)
declare(Op.CALL, _call_rule)
declare(Op.TREE, _tree_rule)


def infer_types(op, in_types, attrs, bodies=()):
    return TYPE_RULES[op](op, list(in_types), attrs, bodies)
