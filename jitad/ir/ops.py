"""What a primitive is, the opcode namespace `Op`, and the IR's own primitives.

A primitive is one `Primitive` object holding everything about it: its name, arity,
type rule, NumPy meaning (`IMPLS`, run by the reference interpreter and the eager
path), derivative rules, lowerings and flags. `declare` makes one and names it
`Op.<NAME>`. This module declares the operations of the IR itself (constants, slots,
continuations, tables, trees, control flow and what the passes make); the math
primitives are declared in `jitad/primitives` (the random bits' cipher in `bits.py`)
and the collectives in `collectives.py`, each beside its rules.
"""
import numpy as np

from ..errors import MissingRuleError, ShapeError
from .types import BOOL, FLOATS, I64, ContType, RefType, TableType, Type

FLAGS = frozenset({
    "elementwise",  # one output element from the same element of each (broadcast) input
    "float_only",   # integer and bool inputs compute in f64 (staging converts them)
    "arith",        # bool operands follow NumPy's arithmetic (+ is or, * is and, the rest on ints)
    "pure",         # no effect: dead-code elimination may drop it
    "cheap",        # cheaper to recompute than to keep: fusion duplicates it into each user
    "view",         # a tensor result shares its input's buffer
    "stored",       # reverse mode keeps its loop results rather than recompute them
    "linear",       # linear in its first operand: forward mode applies it to the tangent
    "kernel",       # on tensors, the LLVM lowering outlines it into a kernel function
})


class Primitive:
    """One operation: `Op.EXP.name == "exp"`. Compared by identity. Its rules live in the
    rule tables (`RuleTable`), one per transformation and backend, keyed by the primitive."""
    __slots__ = ("name", "arity", "type_rule", "doc") + tuple(FLAGS)

    def __repr__(self):
        return f"Op.{self.name.upper()}"


class Op:
    """The opcode namespace: `Op.ADD` is the primitive named "add" (see `declare`)."""


class RuleTable:
    """The rules of one transformation or backend, keyed by primitive.

    `lookup(op)` finds a rule in one order everywhere: the rule the primitive's
    declaration gave (`declare(..., <slot>=rule)`), then one registered here under the op
    (`@table.register(Op.IF)`: the IR's own ops), then one derived from the op's other
    rules (`table.derive`: an elementwise op's loop from its scalar rule, its JVP from its
    VJP); with none, `MissingRuleError` names the op and the slot to give. A table reads
    the rules when asked, so a primitive declared after import works everywhere.

    >>> from jitad.ir.ops import JVP, Op
    >>> JVP.find(Op.EXP) is not None   # derived from exp's VJP
    True
    """

    def __init__(self, slot, what, accept=None):
        self.slot, self.what = slot, what
        self.declared = {}     # op -> what its declaration gave for this slot
        self.registered = {}   # op -> rule registered under the op
        self.derivers = []     # fn(op) -> rule or None, tried in order
        # accept(op, declared) -> the rule a declaration's value is, or None where the
        # declared value is the raw material of a derived rule (a scalar rule, say)
        self._accept = accept
        TABLES[slot] = self

    def register(self, *ops):
        """Decorator: `@table.register(Op.A, Op.B)` enters the function under each op."""
        def register(fn):
            self.registered.update(dict.fromkeys(ops, fn))
            return fn
        return register

    def derive(self, fn):
        """Decorator: `fn(op)` makes a rule for ops that neither declare nor register one."""
        self.derivers.append(fn)
        return fn

    def find(self, op):
        """`op`'s rule, or None."""
        given = self.declared.get(op)
        if given is not None:
            rule = given if self._accept is None else self._accept(op, given)
            if rule is not None:
                return rule
        rule = self.registered.get(op)
        for derive in self.derivers:
            if rule is not None:
                break
            rule = derive(op)
        return rule

    def lookup(self, op):
        """`op`'s rule; `MissingRuleError` naming the declaration's slot if it has none."""
        rule = self.find(op)
        if rule is None:
            raise missing_rule(op, self.what, self.slot)
        return rule


TABLES = {}       # slot -> RuleTable
PRIMITIVES = {}   # name -> Primitive, in declaration order
IMPL = RuleTable("impl", "NumPy (interpreter)")          # NumPy meaning of the inputs' values
VJP = RuleTable("vjp", "VJP (reverse-mode)")              # cotangents of the inputs
JVP = RuleTable("jvp", "JVP (forward-mode)")              # the output's tangent
BATCH = RuleTable("batch", "batching (vmap)")             # the batched node
LLVM = RuleTable("llvm", "LLVM lowering", accept=lambda op, rule: None if op.elementwise else rule)
CUDA = RuleTable("cuda", "CUDA", accept=lambda op, rule: rule if callable(rule) and not op.elementwise else None)
IMPLS = IMPL.declared   # op -> NumPy function of the input values (attrs as keywords)


def declare(name, rule, impl=None, *, arity=None, flags="", vjp=None, jvp=None, batch=None, llvm=None,
            cuda=None, doc=None):
    """Declare primitive `name` as `Op.<NAME>`.

    rule(op, in_types, attrs, bodies) -> out types; impl: the NumPy meaning;
    arity: the operand count where fixed; flags: words of `FLAGS`;
    vjp(g, *inputs, out, **attrs) -> one cotangent per input (None: none flows);
    jvp(node, tangents, primals, out) -> the output tangent, where not derived from the VJP;
    batch: the batching rule batch(node, ins, size, mask) -> [(value, batched)] for `(value, batched)`
    operands, or None to run the node per lane (derived for an elementwise op);
    llvm: for an elementwise op a libm symbol ("log1p": "log1pf" for f32) or a scalar rule
    fn(lowerer, node, ins) -> [value]; for another op its rule fn(lowerer, node, ins) -> [values];
    cuda: for an elementwise op the element expression, a format string ("log1p({0})") or
    fn(args, dtype) -> str; for another op its host rule fn(runner, node, ins) -> [values];
    doc: the docstring of the public wrapper `jitad.<name>` (with an example), if it has one.
    Each rule goes into its slot's `RuleTable`, where the transformations and backends
    look it up when they meet the op; a rule a program needs and nobody gives is a
    `MissingRuleError` naming the op and the slot.
    """
    assert name not in PRIMITIVES, f"{name} declared twice"
    flags = set(flags.split())
    assert flags <= FLAGS, flags - FLAGS
    op = Primitive()
    op.name, op.arity, op.type_rule, op.doc = name, arity, rule, doc
    for flag in FLAGS:
        setattr(op, flag, flag in flags or (flag == "pure" and "elementwise" in flags))
    for slot, given in (("impl", impl), ("vjp", vjp), ("jvp", jvp), ("batch", batch), ("llvm", llvm),
                        ("cuda", cuda)):
        if given is not None:
            TABLES[slot].declared[op] = given
    PRIMITIVES[name] = op
    setattr(Op, name.upper(), op)
    return op


def registrar(table):
    """`rule = registrar(table)`: `@rule(Op.A, Op.B)` enters the function into `table`
    (a dict, or a `RuleTable`'s registered rules) under each op."""
    table = table.registered if isinstance(table, RuleTable) else table

    def rule(*ops):
        def register(fn):
            table.update(dict.fromkeys(ops, fn))
            return fn
        return register
    return rule


def missing_rule(op, what, slot):
    """The error for primitive `op` lacking its `what` rule (its declaration's `slot`)."""
    return MissingRuleError(f"primitive `{op.name}` has no {what} rule: give its declaration `{slot}=`")


def impl_of(op):
    """The NumPy meaning of `op` (the interpreter and the eager path run it)."""
    return IMPL.lookup(op)


def infer_types(op, in_types, attrs, bodies=()):
    return op.type_rule(op, list(in_types), attrs, bodies)


# -- type rules shared by the declarations -----------------------------------------

USER_NAMES = {"select": "where"}   # primitives users know by another name


def broadcast_shapes(op, *shapes):
    distinct = {tuple(s) for s in shapes if len(s)}
    if len(distinct) <= 1:   # equal shapes and scalars (most operations): NumPy's rule costs more than the op
        return distinct.pop() if distinct else ()
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        name = USER_NAMES.get(op.name, op.name)
        raise ShapeError(f"`{name}`: shapes {' and '.join(map(str, shapes))} do not broadcast") from None


def same_dtype(op, types):
    dtypes = {t.dtype for t in types}
    assert len(dtypes) == 1, f"{op.name}: mixed dtypes {dtypes} (staging promotes first)"
    return types[0].dtype


def elementwise_type(op, types, attrs, bodies):
    return [Type(same_dtype(op, types), broadcast_shapes(op, *(t.shape for t in types)))]


def comparison(op, types, attrs, bodies):
    same_dtype(op, types)
    return [Type("bool", broadcast_shapes(op, *(t.shape for t in types)))]


def logical(op, types, attrs, bodies):
    assert same_dtype(op, types) in ("bool", "i64")
    return elementwise_type(op, types, attrs, bodies)


def floating(op, types, attrs, bodies):
    assert types[0].dtype in FLOATS, f"{op.name} takes floats"
    return elementwise_type(op, types, attrs, bodies)


def shape_rule(fn):
    """A type rule: the first input's dtype, the shape `fn(in_types, **attrs)`."""
    return lambda op, types, attrs, bodies: [Type(types[0].dtype, tuple(fn(types, **attrs)))]


def fixed(*out_types):
    return lambda op, types, attrs, bodies: list(out_types)


def clip_index(i, n):
    """Row `i` of `n` as a staged index reads it: a negative `i` counts from the end (NumPy),
    out of range after that clamps (JAX). (`i + n * (i < 0)`: no overflow for large `i`.)"""
    i = np.asarray(i)
    return np.clip(i + n * (i < 0), 0, max(n - 1, 0))


def clip_index_code(i, n):
    """`clip_index` of one index in generated code, branch free: each backend runs it with
    its own `where` (`primitives.special.backend`): an LLVM select (lower/tensor.py) or a
    CUDA device function (`h_clip`, lower/cuda_kernels.py); `n` is a Python int."""
    i = where(i < 0, i + n, i)  # noqa: F821  (`where`: the backend's)
    i = where(i < 0, 0, i)  # noqa: F821
    return where(i > n - 1, max(n - 1, 0), i)  # noqa: F821


def convert_value(x, dtype):
    """`x` as `dtype`, as the compiled code converts: float to int like llvm.fptosi.sat."""
    if dtype == "i64" and np.asarray(x).dtype.kind == "f":
        x = np.asarray(x, np.float64)
        big = 2.0 ** 63
        inside = np.trunc(np.where(np.isnan(x) | (x >= big) | (x < -big), 0.0, x)).astype(np.int64)
        info = np.iinfo(np.int64)
        return np.where(x >= big, info.max, np.where(x < -big, info.min, inside))[()]
    return np.dtype({"bool": np.bool_, "i64": np.int64, "f32": np.float32, "f64": np.float64}[dtype]).type(x)


# -- the IR's own operations -----------------------------------------------------

declare("const", lambda op, types, attrs, bodies: [attrs["type"]],
        lambda value, type: convert_value(value, type.dtype), arity=0, flags="pure cheap")


def _tree_get_rule(op, types, attrs, bodies):
    tree, index = types
    assert index.dtype == "i64" and (not index.shape or tree.forest), "one index, or a forest's vector of them"
    dtype = "i64" if attrs["field"] in ("left", "right", "order", "index") else tree.field_dtype(attrs["field"])
    assert dtype is not None, attrs["field"]
    return [Type(dtype, index.shape)]


def _tree_get(tree, k, field):
    """Field `field` of node(s) `k`; "index" is the node's index in its own tree (a
    forest keeps it in `_local`: its nodes are renumbered)."""
    if field == "index":
        return tree.fields["_local"][k] if "_local" in tree.fields else np.int64(k)
    return (getattr(tree, field) if field in ("left", "right", "order") else tree.fields[field])[k]


declare("tree_get", _tree_get_rule, _tree_get, arity=2, flags="pure")
declare("tree_root", fixed(I64), lambda tree: np.int64(tree.root), arity=1, flags="pure")
declare("tree_size", fixed(I64), lambda tree, word: np.int64(len(tree.order) if word == "reachable" else tree.size),
        arity=1, flags="pure")   # word: "size" or "reachable"


def _table_update_rule(op, types, attrs, bodies):
    table, index, value = types
    assert isinstance(table, TableType) and index == I64 and value == table.value_type, f"{table} <- {value}"
    return []


def _table_rule(op, types, attrs, bodies):
    assert types == [I64], "a table is sized by an entry count"
    return [TableType(attrs["type"].dtype, attrs["type"].shape)]


declare("table", _table_rule, arity=1)
declare("table_get", lambda op, types, attrs, bodies: [types[0].value_type], arity=2, flags="pure")
declare("table_set", _table_update_rule, arity=3)
declare("table_add", _table_update_rule, arity=3)


def _table_gather_rule(op, types, attrs, bodies):
    table, index = types
    assert isinstance(table, TableType) and index.dtype == "i64" and len(index.shape) == 1
    return [Type(table.dtype, index.shape + table.shape)]


def _table_scatter_rule(op, types, attrs, bodies):
    table, index, value = types
    assert isinstance(table, TableType) and index.dtype == "i64" and len(index.shape) == 1
    assert value == Type(table.dtype, index.shape + table.shape), f"{table} <- {value}"
    return []


# a forest's rows of node states (`ad.tape.ForestTape`): entries index[i] as one stacked
# value; set (or, with attrs add=True, add to) entries index[i] from value[i], in order
declare("table_gather", _table_gather_rule, arity=2, flags="pure")
declare("table_scatter", _table_scatter_rule, arity=3)


# `spec`: the format string and argument names, as JSON (see jitad.debug); an effect
# with no results, so dead-code elimination keeps it
declare("debug_print", lambda op, types, attrs, bodies: [])


def _check_rule(op, types, attrs, bodies):
    assert types == [BOOL] and isinstance(attrs["message"], str), types
    return []


# operand `fail` (a bool): when true as the code runs, the call raises RuntimeCheckError
# with the static `message` (interpreter: jitad/ir/interpret.py; lowering: jitad/lower);
# an effect like debug_print: dead-code elimination keeps it, reverse mode runs it once
declare("check", _check_rule, arity=1)


# slots and continuations (what reverse mode emits)

def _slot_update_rule(op, types, attrs, bodies):
    ref, value = types
    assert isinstance(ref, RefType) and value == ref.value_type, f"{ref} <- {value}"
    return []


def _slot_sparse_rule(op, types, attrs, bodies):
    ref, index, value = types
    assert isinstance(ref, RefType) and index.dtype == "i64"
    assert value == Type(ref.dtype, index.shape + ref.shape[1:]), f"{ref}[{index}] += {value}"
    return []


def _slot_region_rule(op, types, attrs, bodies):
    ref, value = types
    region = tuple(len(range(a, b, c)) for a, b, c in zip(attrs["starts"], attrs["stops"], attrs["steps"]))
    assert isinstance(ref, RefType) and value == Type(ref.dtype, region), f"{ref}[{region}] += {value}"
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


declare("slot", lambda op, types, attrs, bodies: [RefType(attrs["type"].dtype, attrs["type"].shape)], arity=0)
declare("slot_get", lambda op, types, attrs, bodies: [types[0].value_type], arity=1, flags="pure view")
declare("slot_set", _slot_update_rule, arity=2)
declare("slot_add", _slot_update_rule, arity=2, flags="kernel")
declare("slot_add_at", _slot_sparse_rule, arity=3, flags="kernel")
declare("slot_scatter_add", _slot_sparse_rule, arity=3, flags="kernel")
declare("slot_set_at", _slot_sparse_rule, arity=3, flags="kernel")   # slot[i] = value (one row)
declare("slot_add_slice", _slot_region_rule, arity=2, flags="kernel")   # slot[starts:stops:steps] += value
declare("closure", _closure_rule)
declare("apply", _apply_rule)
declare("arena_mark", fixed(I64), lambda: np.int64(0), arity=0)   # free temporaries early
declare("arena_release", fixed(), lambda mark: None, arity=1)


# made by the passes (jitad/ir/fuse.py, jitad/ir/peephole.py)

def _fused_rule(op, types, attrs, bodies):
    (body,) = bodies
    shape = tuple(attrs["shape"])
    made = {v: n for n in body.nodes for v in n.outputs if n.op in (Op.SUM, Op.MAX)}

    def result(v):   # a reduction in the body: over the whole loop, its last axis, or all others
        n = made.get(v)
        if n is None:
            return shape
        if len(n.attrs["axes"]) == len(shape):
            return ()
        if tuple(n.attrs["axes"]) == tuple(range(len(shape) - 1)) and len(shape) >= 2:
            return shape[-1:]
        return shape[:-1] + (1,) * bool(n.attrs["keepdims"])
    return [Type(v.type.dtype, result(v)) for v in body.outputs]


def _matmul_add_rule(op, types, attrs, bodies):
    ref, a, b = types
    (product,) = Op.MATMUL.type_rule(Op.MATMUL, [a, b], attrs, bodies)
    assert isinstance(ref, RefType) and ref.value_type == product, f"{ref} += {product}"
    return []


def _table_gemm_rule(op, types, attrs, bodies):
    ref, x, y, count = types
    rows = attrs["rows"]
    k, n = ref.shape
    assert isinstance(ref, RefType) and isinstance(x, TableType) and isinstance(y, TableType) and count == I64
    xs, ys = x.value_type, y.value_type
    assert int(np.prod(xs.shape, dtype=np.int64)) == rows * k and int(np.prod(ys.shape, dtype=np.int64)) == rows * n
    assert ref.dtype == x.dtype == y.dtype, f"{ref} += {x}^T {y}"
    return []


def _strided_bmm_rule(op, types, attrs, bodies):
    a, b = types[-2:]
    (product,) = Op.BMM.type_rule(Op.BMM, [Type(a.dtype, attrs["shapes"][0]), Type(b.dtype, attrs["shapes"][1])],
                                  attrs, bodies)
    out = attrs["out"]
    assert a.dtype == b.dtype and int(np.prod([n for n, _ in out[1]], dtype=np.int64)) == product.shape[0]
    if op == Op.STRIDED_BMM_ADD:
        assert isinstance(types[0], RefType) and types[0].dtype == a.dtype, f"{types[0]} += bmm of {a.dtype}"
        return []
    return [Type(a.dtype, attrs["out_shape"])]


def _matmul_bias_rule(op, types, attrs, bodies):
    a, b, bias = types
    (product,) = Op.MATMUL.type_rule(Op.MATMUL, [a, b], attrs, bodies)
    shape = tuple(attrs["shape"])
    assert int(np.prod(shape, dtype=np.int64)) == int(np.prod(product.shape, dtype=np.int64)) and \
        shape[-1] == product.shape[1] == bias.shape[-1] and all(d == 1 for d in bias.shape[:-1]), f"{product} + {bias}"
    assert a.dtype == b.dtype == bias.dtype
    return [Type(a.dtype, shape)]


def _row_loops_rule(op, types, attrs, bodies):
    (body,) = bodies
    assert body.in_types == list(types)
    return body.out_types


declare("fused", _fused_rule, flags="kernel")   # a loop over elementwise work
# fused loops of one row shape, run row by row (each row's passes while it is in L1: jitad/ir/rows.py)
declare("row_loops", _row_loops_rule, flags="kernel")
declare("matmul_bias", _matmul_bias_rule, flags="pure kernel")   # op(a) @ op(b) + a row (in `shape`)
# bmm with its operands read, and its result written, through strided views (jitad/ir/strided.py)
declare("strided_bmm", _strided_bmm_rule, flags="pure kernel")
declare("strided_bmm_add", _strided_bmm_rule, flags="kernel")   # the same into a slot's region (+=, or = with `store`)
declare("matmul_add", _matmul_add_rule)   # slot += op(a) @ op(b) (set with `store`)
declare("table_gemm_add", _table_gemm_rule)   # slot += sum_i X_i^T @ Y_i over the first `count` entries


# control flow: the types come from the bodies

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


declare("if", _if_rule)
declare("while", _while_rule)
declare("for", _for_rule)
declare("call", _call_rule)
declare("checkpoint", _call_rule)   # a call reverse mode recomputes instead of keeping (jitad.checkpoint)
declare("custom_vjp", _call_rule)   # a call with the user's VJP (attrs custom, in_td; jitad.custom_vjp)
declare("tree", _tree_rule)
declare("forest", _call_rule)   # a call (of the forest's loop) with its own reverse rule (attrs combine, ...)
CALLS = (Op.CALL, Op.CHECKPOINT, Op.CUSTOM_VJP, Op.FOREST)   # what does not differentiate them treats them as `call`
