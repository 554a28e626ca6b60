"""Every primitive, declared once: its opcode, its type rule and its NumPy meaning.

The NumPy meaning (`impl`) defines the semantics the LLVM lowering must match; the
reference interpreter (`jitad.ir.interpret`) runs it. Differentiation and lowering
rules live in their own tables keyed by the same `Op` (jitad/ad, jitad/lower).
"""
import enum

import numpy as np

from ..errors import ShapeError
from .types import BOOL, FLOATS, I64, ContType, RefType, Type


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
    TREE_GET = "tree_get"; TREE_ROOT = "tree_root"
    # mutable slots and continuations (what reverse mode emits)
    SLOT = "slot"; SLOT_GET = "slot_get"; SLOT_SET = "slot_set"; SLOT_ADD = "slot_add"
    CLOSURE = "closure"; APPLY = "apply"
    # control flow
    IF = "if"; WHILE = "while"; FOR = "for"; CALL = "call"; TREE = "tree"


TYPE_RULES = {}   # op -> rule(in_types, attrs, bodies) -> list of out types
VJPS = {}         # op -> vjp(g, *inputs, out) -> cotangent per input (staged)
IMPLS = {}        # op -> numpy function of the input values (attrs as keywords)
FLOAT_ONLY = set()  # ops whose integer inputs staging converts to f64 first


def declare(op, rule, impl=None, float_only=False, vjp=None):
    TYPE_RULES[op] = rule
    if impl is not None:
        IMPLS[op] = impl
    if vjp is not None:
        VJPS[op] = vjp
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


def _n():
    """Staged math for the derivative rules (imported late: staging imports this module)."""
    from .. import numeric
    return numeric


# Each declaration: op, type rule, NumPy meaning, and the VJP `vjp(g, *inputs, out)`
# giving one cotangent per input (None: no gradient flows to that input).
declare(Op.ADD, elementwise, np.add, vjp=lambda g, x, y, out: (g, g))
declare(Op.SUB, elementwise, np.subtract, vjp=lambda g, x, y, out: (g, -g))
declare(Op.MUL, elementwise, np.multiply, vjp=lambda g, x, y, out: (g * y, g * x))
declare(Op.DIV, floating, np.true_divide, float_only=True,
        vjp=lambda g, x, y, out: (g / y, -g * out / y))
declare(Op.MAXIMUM, elementwise, np.maximum,
        vjp=lambda g, x, y, out: (_n().where(x >= y, g, 0.0), _n().where(x >= y, 0.0, g)))
declare(Op.MINIMUM, elementwise, np.minimum,
        vjp=lambda g, x, y, out: (_n().where(x <= y, g, 0.0), _n().where(x <= y, 0.0, g)))
declare(Op.POW, elementwise, _pick(_int_pow, np.power),
        vjp=lambda g, x, y, out: (g * y * x ** (y - 1.0), g * out * _n().log(x)))
declare(Op.MOD, elementwise, _pick(_int_mod, np.mod),
        vjp=lambda g, x, y, out: (g, -g * (x // y)))
declare(Op.FLOORDIV, elementwise, _pick(_int_floordiv, np.floor_divide),
        vjp=lambda g, x, y, out: (None, None))
declare(Op.NEG, elementwise, np.negative, vjp=lambda g, x, out: (-g,))
declare(Op.ABS, elementwise, np.abs, vjp=lambda g, x, out: (_n().where(x >= 0.0, g, -g),))
declare(Op.SQUARE, elementwise, lambda x: x * x, vjp=lambda g, x, out: (2.0 * g * x,))
declare(Op.RELU, elementwise, _relu, vjp=lambda g, x, out: (_n().where(x > 0.0, g, 0.0),))
declare(Op.EXP, floating, np.exp, float_only=True, vjp=lambda g, x, out: (g * out,))
declare(Op.LOG, floating, np.log, float_only=True, vjp=lambda g, x, out: (g / x,))
declare(Op.LOG1P, floating, np.log1p, float_only=True, vjp=lambda g, x, out: (g / (1.0 + x),))
declare(Op.EXPM1, floating, np.expm1, float_only=True, vjp=lambda g, x, out: (g * (out + 1.0),))
declare(Op.SQRT, floating, np.sqrt, float_only=True, vjp=lambda g, x, out: (g * 0.5 / out,))
declare(Op.SIN, floating, np.sin, float_only=True, vjp=lambda g, x, out: (g * _n().cos(x),))
declare(Op.COS, floating, np.cos, float_only=True, vjp=lambda g, x, out: (-g * _n().sin(x),))
declare(Op.TANH, floating, np.tanh, float_only=True, vjp=lambda g, x, out: (g * (1.0 - out * out),))
declare(Op.SIGMOID, floating, _sigmoid, float_only=True,
        vjp=lambda g, x, out: (g * out * (1.0 - out),))
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


declare(Op.SELECT, _select_rule, lambda c, a, b: np.where(c, a, b)[()],
        vjp=lambda g, c, x, y, out: (None, _n().where(c, g, 0.0), _n().where(c, 0.0, g)))
declare(Op.CONVERT, lambda op, types, attrs, bodies: [Type(attrs["dtype"], types[0].shape)],
        _convert, vjp=lambda g, x, out: (_n().convert(g, x.dtype) if x.dtype in FLOATS else None,))
declare(Op.CONST, lambda op, types, attrs, bodies: [attrs["type"]],
        lambda value, type: _convert(value, type.dtype))


def _tree_get_rule(op, types, attrs, bodies):
    tree, index = types
    assert index == I64
    dtype = "i64" if attrs["field"] in ("left", "right") else tree.field_dtype(attrs["field"])
    assert dtype is not None, attrs["field"]
    return [Type(dtype)]


declare(Op.TREE_GET, _tree_get_rule)
declare(Op.TREE_ROOT, lambda op, types, attrs, bodies: [I64])


# -- slots and continuations -----------------------------------------------------

def _slot_update_rule(op, types, attrs, bodies):
    ref, value = types
    assert isinstance(ref, RefType) and value == Type(ref.dtype), f"{ref} <- {value}"
    return []


def _closure_rule(op, types, attrs, bodies):
    fun = attrs["fun"]
    assert fun.out_types == [] and fun.n_captures == len(types)
    params = fun.in_types
    assert fun.body is None or fun.body.in_types == list(params) + list(types)
    return [ContType(tuple(params))]


def _apply_rule(op, types, attrs, bodies):
    cont, *args = types
    assert isinstance(cont, ContType) and list(cont.params) == args, f"{cont} applied to {args}"
    return []


declare(Op.SLOT, lambda op, types, attrs, bodies: [RefType(attrs["dtype"])])
declare(Op.SLOT_GET, lambda op, types, attrs, bodies: [Type(types[0].dtype)])
declare(Op.SLOT_SET, _slot_update_rule)
declare(Op.SLOT_ADD, _slot_update_rule)
declare(Op.CLOSURE, _closure_rule)
declare(Op.APPLY, _apply_rule)


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
