"""Every primitive, declared once: its opcode, its type rule and its NumPy meaning.

The NumPy meaning (`impl`) defines the semantics the LLVM lowering must match; the
reference interpreter (`jitad.ir.interpret`) runs it. Differentiation and lowering
rules live in their own tables keyed by the same `Op` (jitad/ad, jitad/lower).
"""
import enum

import numpy as np

from ..errors import ShapeError
from .types import BOOL, FLOATS, I64, ContType, RefType, TableType, Type


class Op(enum.Enum):
    # elementwise arithmetic
    ADD = "add"; SUB = "sub"; MUL = "mul"; DIV = "div"; POW = "pow"
    MOD = "mod"; FLOORDIV = "floordiv"; MAXIMUM = "maximum"; MINIMUM = "minimum"
    NEG = "neg"; ABS = "abs"; SQUARE = "square"; RELU = "relu"; STOP_GRADIENT = "stop_gradient"
    EXP = "exp"; LOG = "log"; LOG1P = "log1p"; EXPM1 = "expm1"; SQRT = "sqrt"
    SIN = "sin"; COS = "cos"; TANH = "tanh"; SIGMOID = "sigmoid"
    # comparisons and logic
    LT = "lt"; LE = "le"; GT = "gt"; GE = "ge"; EQ = "eq"; NE = "ne"
    AND = "and"; OR = "or"; NOT = "not"
    SELECT = "select"; CONVERT = "convert"; CONST = "const"
    # tensors
    BROADCAST = "broadcast"; SUM = "sum"; MAX = "max"; RESHAPE = "reshape"
    TRANSPOSE = "transpose"; MATMUL = "matmul"; CONV2D = "conv2d"; INDEX = "index"; GATHER = "gather"
    SLICE = "slice"; UNSLICE = "unslice"; CONCAT = "concat"; RANDOM = "random"
    # trees
    TREE_GET = "tree_get"; TREE_ROOT = "tree_root"; TREE_SIZE = "tree_size"
    TABLE = "table"; TABLE_GET = "table_get"; TABLE_SET = "table_set"; TABLE_ADD = "table_add"
    # mutable slots and continuations (what reverse mode emits)
    SLOT = "slot"; SLOT_GET = "slot_get"; SLOT_SET = "slot_set"; SLOT_ADD = "slot_add"
    SLOT_ADD_AT = "slot_add_at"; SLOT_SCATTER_ADD = "slot_scatter_add"; SLOT_ADD_SLICE = "slot_add_slice"
    CLOSURE = "closure"; APPLY = "apply"
    FUSED = "fused"   # a loop over elementwise work (see jitad.ir.fuse)
    MATMUL_ADD = "matmul_add"   # slot += op(a) @ op(b) (set with `store`), made by fusion
    TABLE_GEMM_ADD = "table_gemm_add"   # slot += sum_i X_i^T @ Y_i over the first `count` table entries
    ARENA_MARK = "arena_mark"; ARENA_RELEASE = "arena_release"   # free temporaries early
    # collectives across processes (jitad.distributed): effects, never removed or fused
    ALLREDUCE = "allreduce"; BCAST = "bcast"
    DEBUG_PRINT = "debug_print"   # jitad.debug.print: an effect, never removed or fused
    # control flow
    IF = "if"; WHILE = "while"; FOR = "for"; CALL = "call"; TREE = "tree"


TYPE_RULES = {}   # op -> rule(in_types, attrs, bodies) -> list of out types
VJPS = {}         # op -> vjp(g, *inputs, out) -> cotangent per input (staged)
IMPLS = {}        # op -> numpy function of the input values (attrs as keywords)
FLOAT_ONLY = set()  # ops whose integer inputs staging converts to f64 first


ARITY = {}        # op -> number of operands, for ops with a fixed count


def declare(op, rule, impl=None, float_only=False, vjp=None):
    TYPE_RULES[op] = rule
    if impl is not None:
        IMPLS[op] = impl
    if vjp is not None:
        VJPS[op] = vjp
    if float_only:
        FLOAT_ONLY.add(op)


USER_NAMES = {"select": "where"}   # primitives users know by another name


def broadcast_shapes(op, *shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        name = USER_NAMES.get(op.value, op.value)
        raise ShapeError(f"`{name}`: shapes {' and '.join(map(str, shapes))} do not broadcast") from None


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
    if dtype == "i64" and np.asarray(x).dtype.kind == "f":   # like llvm.fptosi.sat
        x = np.asarray(x, np.float64)
        big = 2.0 ** 63
        inside = np.trunc(np.where(np.isnan(x) | (x >= big) | (x < -big), 0.0, x)).astype(np.int64)
        info = np.iinfo(np.int64)
        return np.where(x >= big, info.max, np.where(x < -big, info.min, inside))[()]
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


def _pow_vjp(g, x, y, out):
    """d/dx x**y = y * x**(y-1), 0 at x == y == 0 (there the exponent reads 1: no 0 * inf);
    d/dy x**y = log(x) * x**y, 0 at x == 0 (log reads 1 there). The selects take only
    those points, so the rule's own derivatives stay right elsewhere (a select on y == 0
    alone would cut d/dy y * x**(y-1) = 1/x at y == 0). As JAX: a negative x with a
    differentiated y is NaN (log of a negative), with a constant y it is not."""
    N = _n()
    zero = x == 0.0
    return g * y * x ** N.where(zero & (y == 0.0), 1.0, y - 1.0), g * out * N.log(N.where(zero, 1.0, x))


declare(Op.POW, elementwise, _pick(_int_pow, np.power), vjp=_pow_vjp)
declare(Op.MOD, elementwise, _pick(_int_mod, np.mod),
        vjp=lambda g, x, y, out: (g, -g * (x // y)))
declare(Op.FLOORDIV, elementwise, _pick(_int_floordiv, np.floor_divide),
        vjp=lambda g, x, y, out: (None, None))
declare(Op.NEG, elementwise, np.negative, vjp=lambda g, x, out: (-g,))
declare(Op.ABS, elementwise, np.abs, vjp=lambda g, x, out: (_n().where(x >= 0.0, g, -g),))
declare(Op.SQUARE, elementwise, lambda x: x * x, vjp=lambda g, x, out: (2.0 * g * x,))
declare(Op.STOP_GRADIENT, elementwise, lambda x: x, vjp=lambda g, x, out: (None,))   # no cotangent, no tangent
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
        _convert, vjp=lambda g, x, out, dtype: (_n().convert(g, x.dtype) if x.dtype in FLOATS else None,))
declare(Op.CONST, lambda op, types, attrs, bodies: [attrs["type"]],
        lambda value, type: _convert(value, type.dtype))


# -- tensors ---------------------------------------------------------------------

class Sparse:
    """A cotangent that adds `value` into rows `index` of its input (a VJP result for
    `index`/`gather`): reverse mode turns it into `slot_add_at`/`slot_scatter_add`."""

    def __init__(self, index, value):
        self.index, self.value = index, value


class Region:
    """A cotangent that adds `value` into a strided region of its input (the VJP of
    `slice`): reverse mode adds it in place with `slot_add_slice`, no zero-filled copy."""

    def __init__(self, value, starts, stops, steps):
        self.value, self.attrs = value, {"starts": starts, "stops": stops, "steps": steps}


def _shape_rule(fn):
    return lambda op, types, attrs, bodies: [Type(types[0].dtype, tuple(fn(types, **attrs)))]


def reduced_shape(shape, axes, keepdims):
    return tuple(1 if d in axes else n for d, n in enumerate(shape) if keepdims or d not in axes)


def _unbroadcast(g, shape):
    """Sum `g` down to `shape` (the reverse of NumPy broadcasting)."""
    if g.shape == tuple(shape):
        return g
    lead = len(g.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(shape) if n == 1 and g.shape[lead + d] != 1)
    return _n().reshape(_n().sum(g, axis=axes), shape)


def _broadcast_impl(x, shape):
    return np.broadcast_to(x, shape).copy()


def _max_vjp(g, x, out, axes, keepdims):
    N = _n()
    keep = reduced_shape(x.shape, axes, True)
    hit = N.convert(x == N.broadcast_to(N.reshape(out, keep), x.shape), x.dtype)
    share = hit / N.broadcast_to(N.reshape(N.sum(hit, axis=axes), keep), x.shape)
    return (share * N.broadcast_to(N.reshape(g, keep), x.shape),)


def _slices(shape, starts, stops, steps):
    return tuple(slice(a, b, c) for a, b, c in zip(starts, stops, steps))


def _unslice_impl(g, shape, starts, stops, steps):
    out = np.zeros(shape, dtype=g.dtype)
    out[_slices(shape, starts, stops, steps)] = g
    return out


def _concat_vjp(g, *args, axis):
    cuts, start = [], 0
    for x in args[:-1]:
        n = x.shape[axis]
        cuts.append(_n().take_slice(g, axis, start, start + n))
        start += n
    return tuple(cuts)


def _random_impl(key, shape):
    from ..random import uniform_numpy
    return uniform_numpy(key, shape)


declare(Op.BROADCAST, _shape_rule(lambda types, shape: shape), _broadcast_impl,
        vjp=lambda g, x, out, shape: (_unbroadcast(g, x.shape),))
declare(Op.SUM, _shape_rule(lambda types, axes, keepdims: reduced_shape(types[0].shape, axes, keepdims)),
        lambda x, axes, keepdims: np.sum(x, axis=axes, keepdims=keepdims),
        vjp=lambda g, x, out, axes, keepdims: (_n().broadcast_to(
            _n().reshape(g, reduced_shape(x.shape, axes, True)), x.shape),))
declare(Op.MAX, _shape_rule(lambda types, axes, keepdims: reduced_shape(types[0].shape, axes, keepdims)),
        lambda x, axes, keepdims: np.max(x, axis=axes, keepdims=keepdims), vjp=_max_vjp)
declare(Op.RESHAPE, _shape_rule(lambda types, shape: shape), lambda x, shape: np.reshape(x, shape),
        vjp=lambda g, x, out, shape: (_n().reshape(g, x.shape),))
declare(Op.TRANSPOSE, _shape_rule(lambda types, perm: [types[0].shape[p] for p in perm]),
        lambda x, perm: np.ascontiguousarray(np.transpose(x, perm)),
        vjp=lambda g, x, out, perm: (_n().transpose(g, tuple(np.argsort(perm))),))


def _matmul_rule(op, types, attrs, bodies):
    a, b = types
    _same_dtype(op, types)
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ShapeError(f"`matmul`: shapes {a.shape} and {b.shape}: need 2-D operands")
    (m, k), (k2, n) = a.shape[::-1] if attrs["ta"] else a.shape, b.shape[::-1] if attrs["tb"] else b.shape
    if k != k2:
        raise ShapeError(f"`matmul`: shapes {a.shape} and {b.shape} do not multiply "
                         "(need (m, k) @ (k, n))")
    return [Type(a.dtype, (m, n))]


def _matmul_vjp(g, a, b, out, ta, tb):
    """Cotangents of op(a) @ op(b), op a transpose where the flag says, without transposing."""
    mm = _n().matmul_t
    ga = mm(b, g, ta=tb, tb=True) if ta else mm(g, b, ta=False, tb=not tb)
    gb = mm(g, a, ta=True, tb=ta) if tb else mm(a, g, ta=not ta, tb=False)
    return ga, gb


declare(Op.MATMUL, _matmul_rule, lambda a, b, ta, tb: np.matmul(a.T if ta else a, b.T if tb else b),
        vjp=_matmul_vjp)


def _conv2d_rule(op, types, attrs, bodies):
    x, w = types
    _same_dtype(op, types)
    if len(x.shape) != 4 or len(w.shape) != 4 or x.shape[1] != w.shape[1] \
            or w.shape[2] > x.shape[2] or w.shape[3] > x.shape[3]:
        raise ShapeError(f"`conv2d`: input {x.shape} and weights {w.shape}: need (n, c, h, w) and "
                         "(o, c, kh, kw) with kh <= h and kw <= w")
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    return [Type(x.dtype, (n, o, h - kh + 1, wd - kw + 1))]


def _conv2d_impl(x, w):
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))
    return np.einsum("ncyxij,ocij->noyx", windows, w)


def _conv2d_vjp(g, x, w, out):
    """Both cotangents are valid convolutions too: the input's, of g padded by the kernel
    size less one with the kernel flipped and its channel axes swapped; the weights', of
    the input with g as the kernel, batch and channel axes swapped on both."""
    N = _n()
    kh, kw = w.shape[2:]
    n, o, oh, ow = g.shape
    padded = N.unslice(g, (n, o, oh + 2 * (kh - 1), ow + 2 * (kw - 1)), (0, 0, kh - 1, kw - 1),
                       (n, o, oh + kh - 1, ow + kw - 1), (1, 1, 1, 1))
    taps = N.reshape(N.transpose(w, (2, 3, 1, 0)), (kh * kw, w.shape[1], o))
    flipped = N.getitem(taps, np.arange(kh * kw - 1, -1, -1))         # tap (i, j) <- (kh-1-i, kw-1-j)
    flipped = N.transpose(N.reshape(flipped, (kh, kw, w.shape[1], o)), (2, 3, 0, 1))   # (c, o, kh, kw)
    swap = (1, 0, 2, 3)
    gw = N.transpose(N.conv2d_valid(N.transpose(x, swap), N.transpose(g, swap)), swap)
    return N.conv2d_valid(padded, flipped), gw


declare(Op.CONV2D, _conv2d_rule, _conv2d_impl, vjp=_conv2d_vjp)


def clip_index(i, n):
    """Row `i` of `n` as a staged index reads it: a negative `i` counts from the end (NumPy),
    out of range after that clamps (JAX). (`i + n * (i < 0)`: no overflow for large `i`.)"""
    i = np.asarray(i)
    return np.clip(i + n * (i < 0), 0, max(n - 1, 0))


declare(Op.INDEX, _shape_rule(lambda types: types[0].shape[1:]),
        lambda x, i: x[clip_index(i, x.shape[0])].copy(),
        vjp=lambda g, x, i, out: (Sparse(i, g), None))
declare(Op.GATHER, _shape_rule(lambda types: types[1].shape + types[0].shape[1:]),
        lambda x, idx: x[clip_index(idx, x.shape[0])],
        vjp=lambda g, x, idx, out: (Sparse(idx, g), None))
declare(Op.SLICE, _shape_rule(lambda types, starts, stops, steps: [
            len(range(a, b, c)) for a, b, c in zip(starts, stops, steps)]),
        lambda x, starts, stops, steps: x[_slices(x.shape, starts, stops, steps)].copy(),
        vjp=lambda g, x, out, starts, stops, steps: (Region(g, starts, stops, steps),))
declare(Op.UNSLICE, _shape_rule(lambda types, shape, starts, stops, steps: shape), _unslice_impl,
        vjp=lambda g, x, out, shape, starts, stops, steps: (
            _n().slice_static(g, starts, stops, steps),))


def _concat_rule(op, types, attrs, bodies):
    axis = attrs["axis"]
    _same_dtype(op, types)
    first = types[0].shape
    for t in types[1:]:
        if len(t.shape) != len(first) or any(a != b for d, (a, b) in enumerate(zip(first, t.shape)) if d != axis):
            raise ShapeError(f"`concatenate`: shapes {first} and {t.shape} differ off axis {axis}")
    shape = list(first)
    shape[axis] = sum(t.shape[axis] for t in types)
    return [Type(types[0].dtype, tuple(shape))]


declare(Op.CONCAT, _concat_rule, lambda *xs, axis: np.concatenate(xs, axis=axis), vjp=_concat_vjp)
declare(Op.RANDOM, lambda op, types, attrs, bodies: [Type("f64", attrs["shape"])], _random_impl)


def _tree_get_rule(op, types, attrs, bodies):
    tree, index = types
    assert index == I64
    dtype = "i64" if attrs["field"] in ("left", "right", "order") else tree.field_dtype(attrs["field"])
    assert dtype is not None, attrs["field"]
    return [Type(dtype)]


declare(Op.TREE_GET, _tree_get_rule)
declare(Op.TREE_ROOT, lambda op, types, attrs, bodies: [I64])
declare(Op.TREE_SIZE, lambda op, types, attrs, bodies: [I64])   # attrs word: "size" or "reachable"


def _table_update_rule(op, types, attrs, bodies):
    table, index, value = types
    assert isinstance(table, TableType) and index == I64 and value == table.value_type, f"{table} <- {value}"
    return []


def _table_rule(op, types, attrs, bodies):
    assert types == [I64], "a table is sized by an entry count"
    return [TableType(attrs["type"].dtype, attrs["type"].shape)]


declare(Op.TABLE, _table_rule)
declare(Op.TABLE_GET, lambda op, types, attrs, bodies: [types[0].value_type])
declare(Op.TABLE_SET, _table_update_rule)
declare(Op.TABLE_ADD, _table_update_rule)


def _dist():
    from .. import distributed
    return distributed


# `reduce` is "sum", "max" or "min" (staging makes "mean" a sum and a division)
declare(Op.ALLREDUCE, _shape_rule(lambda types, reduce: types[0].shape),
        lambda x, reduce: _dist().allreduce(x, reduce),
        vjp=lambda g, x, out, reduce: (_dist().allreduce_vjp(g, reduce),))
declare(Op.BCAST, _shape_rule(lambda types, root: types[0].shape), lambda x, root: _dist().broadcast(x, root),
        vjp=lambda g, x, out, root: (_dist().broadcast_vjp(g, root),))


# `spec`: the format string and argument names, as JSON (see jitad.debug); no results
declare(Op.DEBUG_PRINT, lambda op, types, attrs, bodies: [])


# -- slots and continuations -----------------------------------------------------

def _slot_update_rule(op, types, attrs, bodies):
    ref, value = types
    assert isinstance(ref, RefType) and value == ref.value_type, f"{ref} <- {value}"
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


def _slot_sparse_rule(op, types, attrs, bodies):
    ref, index, value = types
    assert isinstance(ref, RefType) and index.dtype == "i64"
    assert value == Type(ref.dtype, index.shape + ref.shape[1:]), f"{ref}[{index}] += {value}"
    return []


declare(Op.SLOT, lambda op, types, attrs, bodies: [RefType(attrs["type"].dtype, attrs["type"].shape)])
declare(Op.SLOT_GET, lambda op, types, attrs, bodies: [types[0].value_type])
declare(Op.SLOT_ADD_AT, _slot_sparse_rule)
declare(Op.SLOT_SCATTER_ADD, _slot_sparse_rule)


def _slot_region_rule(op, types, attrs, bodies):
    ref, value = types
    region = tuple(len(range(a, b, c)) for a, b, c in zip(attrs["starts"], attrs["stops"], attrs["steps"]))
    assert isinstance(ref, RefType) and value == Type(ref.dtype, region), f"{ref}[{region}] += {value}"
    return []


declare(Op.SLOT_ADD_SLICE, _slot_region_rule)   # slot[starts:stops:steps] += value
declare(Op.SLOT_SET, _slot_update_rule)
declare(Op.SLOT_ADD, _slot_update_rule)
declare(Op.CLOSURE, _closure_rule)
declare(Op.ARENA_MARK, lambda op, types, attrs, bodies: [I64], lambda: np.int64(0))
declare(Op.ARENA_RELEASE, lambda op, types, attrs, bodies: [], lambda mark: None)
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


ARITY.update({op: 2 for op in (
    Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.POW, Op.MOD, Op.FLOORDIV, Op.MAXIMUM, Op.MINIMUM, Op.LT,
    Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE, Op.AND, Op.OR, Op.MATMUL, Op.INDEX, Op.GATHER, Op.TREE_GET,
    Op.SLOT_SET, Op.SLOT_ADD, Op.SLOT_ADD_SLICE)})
ARITY.update({op: 1 for op in (
    Op.NEG, Op.ABS, Op.SQUARE, Op.RELU, Op.STOP_GRADIENT, Op.EXP, Op.LOG, Op.LOG1P, Op.EXPM1, Op.SQRT, Op.SIN,
    Op.COS, Op.TANH, Op.SIGMOID, Op.NOT, Op.CONVERT, Op.BROADCAST, Op.SUM, Op.MAX, Op.RESHAPE,
    Op.TRANSPOSE, Op.SLICE, Op.UNSLICE, Op.RANDOM, Op.ALLREDUCE, Op.BCAST, Op.TREE_ROOT, Op.SLOT_GET, Op.TREE_SIZE, Op.TABLE)})
ARITY.update({Op.SELECT: 3, Op.SLOT_ADD_AT: 3, Op.SLOT_SCATTER_ADD: 3, Op.CONST: 0, Op.SLOT: 0,
              Op.TABLE_GET: 2, Op.TABLE_SET: 3, Op.TABLE_ADD: 3,
              Op.ARENA_MARK: 0, Op.ARENA_RELEASE: 1})


ELEMENTWISE_OPS = frozenset(op for op, rule in TYPE_RULES.items()
                            if rule in (elementwise, comparison, logical, floating, _select_rule)) | {Op.CONVERT}


def _fused_rule(op, types, attrs, bodies):
    (body,) = bodies
    reduced = {n.outputs[0] for n in body.nodes if n.op == Op.SUM}
    return [Type(v.type.dtype, () if v in reduced else attrs["shape"]) for v in body.outputs]


declare(Op.FUSED, _fused_rule)


def _matmul_add_rule(op, types, attrs, bodies):
    ref, a, b = types
    (product,) = _matmul_rule(Op.MATMUL, [a, b], attrs, bodies)
    assert isinstance(ref, RefType) and ref.value_type == product, f"{ref} += {product}"
    return []


declare(Op.MATMUL_ADD, _matmul_add_rule)


def _table_gemm_rule(op, types, attrs, bodies):
    ref, x, y, count = types
    rows = attrs["rows"]
    k, n = ref.shape
    assert isinstance(ref, RefType) and isinstance(x, TableType) and isinstance(y, TableType) and count == I64
    xs, ys = x.value_type, y.value_type
    assert int(np.prod(xs.shape, dtype=np.int64)) == rows * k and int(np.prod(ys.shape, dtype=np.int64)) == rows * n
    assert ref.dtype == x.dtype == y.dtype, f"{ref} += {x}^T {y}"
    return []


declare(Op.TABLE_GEMM_ADD, _table_gemm_rule)   # weight gradients of a loop, batched into one product


def infer_types(op, in_types, attrs, bodies=()):
    return TYPE_RULES[op](op, list(in_types), attrs, bodies)
