"""Staging: run the user's Python on proxies that record an SSA graph.

A `Staged` value holds a `Var`; every operation on it appends a node to the graph of
the current `Frame`. Control-flow combinators trace their bodies in child frames;
a body that uses a value of an enclosing frame *captures* it, which makes the value
an explicit param of the body and an explicit operand of the control-flow node.
"""
import operator
import math
import threading
from collections import ChainMap
from contextlib import contextmanager, nullcontext
from functools import reduce

import numpy as np

from . import hostrng
from .errors import ArgumentError, ResourceError, StagingError
from .ir.graph import FunDef, Graph, Node, Program, Var
from .ir.ops import Op, impl_of, infer_types
# N: jitad.numeric, a layer above, which Staged's methods call (x.sum(), x.T, x[i]): see rules.N
from .primitives.rules import N
from .ir.types import FLOATS, I64, NUMPY, is_device_array, Type, TreeType, check_int64_range, clean_bools, dtype_of_numpy, promote
from .pytree import LEAF, flatten, unflatten, with_built_order
from .tree import Tree, plain_tree

_local = threading.local()


class Frame:
    """A graph under construction and the values in scope in it."""

    def __init__(self, parent, param_types):
        self.parent = parent
        self.graph = Graph(params=[Var(t) for t in param_types])
        self.n_explicit = len(param_types)
        self.scope = set(self.graph.params)
        self.captures = {}   # var of an enclosing frame -> param of this frame

    def resolve(self, var):
        if var in self.scope:
            return var
        param = self.captures.get(var)
        if param is None:
            if self.parent is None:
                raise StagingError(
                    "a staged value is used outside the function or combinator body that "
                    "created it (was it stored in a Python variable and used later?); return "
                    "it from the body instead")
            self.parent.resolve(var)
            param = Var(var.type)
            self.graph.params.append(param)
            self.scope.add(param)
            self.captures[var] = param
        return param

    def align_captures(self, order):
        """Make the capture params of this body follow `order` (vars of the parent)."""
        explicit = self.graph.params[:self.n_explicit]
        self.graph.params = explicit + [self.captures.get(v) or Var(v.type) for v in order]


class _Trace:
    def __init__(self):
        self.funs = {}      # (FUN object, signature) -> FunDef
        self.fun_list = []
        self.memo = {}      # per-trace caches of transformations (e.g. a FunDef's CPS version)


def trace_memo():
    """A dict living as long as the current trace."""
    return _local.trace.memo


@contextmanager
def transforming(t):
    """While transformation `t` (reverse mode's state) emits a program, let Python code
    that still holds staged values of the original program (a custom rule's closure) use
    their transformed counterparts: `t.subst` (old var -> new var, filled by `t`) is
    consulted by `emit`, and `transformation()` returns `t`."""
    saved = getattr(_local, "subst", None), getattr(_local, "transformation", None)
    _local.subst, _local.transformation = t.subst, t
    try:
        yield t
    finally:
        _local.subst, _local.transformation = saved


@contextmanager
def substituted(mapping):
    """Inside, Python code that holds the staged values `mapping`'s keys (a closure
    traced elsewhere) emits with their counterparts, the mapping's values, instead."""
    saved = getattr(_local, "subst", None)
    _local.subst = ChainMap(mapping, saved) if saved else mapping   # (a live view of the outer one)
    try:
        yield
    finally:
        _local.subst = saved


def transformation():
    """The transformation being emitted on this thread (see `transforming`), or None."""
    return getattr(_local, "transformation", None)


def _frames():
    if not hasattr(_local, "frames"):
        _local.frames = []
    return _local.frames


def current_frame():
    frames = _frames()
    return frames[-1] if frames else None


@contextmanager
def _entered(frame):
    _frames().append(frame)
    try:
        yield frame
    finally:
        _frames().pop()


ESCAPED = ("a staged value escaped the function that traced it (it was stored in a Python variable, "
           "list or attribute during a jit/grad/vmap trace) and is used after that trace ended, where it "
           "has no value; return it from the traced function instead, and use the returned result")


def emit(op, inputs, attrs=None, bodies=()):
    """Append a node to the current graph; return its output vars."""
    frame = current_frame()
    if frame is None:
        raise StagingError(ESCAPED)
    attrs = attrs or {}
    subst = getattr(_local, "subst", None)
    if subst:   # values of a program being transformed, used by Python code run meanwhile
        inputs = [subst.get(v, v) for v in inputs]
    ins = tuple(frame.resolve(v) for v in inputs)
    outs = tuple(Var(t) for t in infer_types(op, [v.type for v in ins], attrs, bodies))
    for v in outs:
        _check_size(op, v.type)
    frame.graph.nodes.append(Node(op, ins, outs, attrs, tuple(bodies)))
    frame.scope.update(outs)
    return outs


def _check_size(op, t):
    """Byte counts of values (and of a table's entries) must fit in 63 bits: compiled code
    computes sizes and offsets in int64."""
    shape = getattr(t, "shape", ())
    if shape and math.prod(shape) * np.dtype(NUMPY[t.dtype]).itemsize >= 2 ** 63:
        raise ResourceError(f"`{op.value}` would make a {t.dtype} value of shape {tuple(shape)}: "
                            f"{math.prod(shape)} elements, more bytes than 64-bit sizes hold; "
                            "use smaller shapes")


# -- staged values --------------------------------------------------------------

def _staging_error(what, fix):
    return StagingError(f"{what} on a staged value cannot be traced: its value is only "
                        f"known when the compiled code runs. {fix}")


_BOOL_FIX = ("For `if`, use `jitad.IF(pred, then_fn, else_fn, *operands)`; for `while`, "
             "`jitad.WHILE(cond_fn, body_fn, init)`; `and`/`or`/`not` become `&`, `|`, `~`.")


_NP_DTYPES = {k: np.dtype(v) for k, v in NUMPY.items()}


class Staged:
    """A staged scalar: arithmetic on it records graph nodes."""
    __slots__ = ("_var",)
    __hash__ = object.__hash__

    # NumPy functions on staged values run the jitad function of the same name, or raise
    # a StagingError naming what to call (`np.ones(3) + x` comes here too)
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return N.numpy_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return N.numpy_function(func, args, kwargs)

    def __array__(self, dtype=None, copy=None):
        raise _staging_error("Converting it to a NumPy array (`np.asarray`, `np.array`, or indexing "
                             "a NumPy array with it)",
                             "Stay with jitad functions: index a NumPy constant `table` as "
                             "`jitad.numpy.asarray(table)[i]` or `jitad.take(table, i)`; "
                             "`jitad.stack([...])` builds an array from staged values.")

    def __init__(self, var):
        self._var = var

    @property
    def dtype(self):
        """NumPy's dtype: `x.dtype == np.float64` (the IR's name, 'f64', is `x.ir_dtype`)."""
        return _NP_DTYPES[self._var.type.dtype]

    @property
    def ir_dtype(self):
        return self._var.type.dtype

    @property
    def shape(self):
        return self._var.type.shape

    def __repr__(self):
        return f"Staged({self._var.type})"

    def __bool__(self):
        raise _staging_error("Python `if`, `while`, `and`, `or`, `not` or `bool()`", _BOOL_FIX)

    def __int__(self):
        raise _staging_error("`int()`", "Use `jitad.convert(x, 'i64')` to stay staged.")

    def __float__(self):
        raise _staging_error("`float()`", "Use `jitad.convert(x, 'f64')` to stay staged.")

    def __index__(self):
        raise _staging_error("Using it as a Python index or `range()` bound",
                             "Use `jitad.FOR(lower, upper, body_fn, init)` for a staged loop bound; index a "
                             "NumPy constant `table` as `jitad.numpy.asarray(table)[i]` or `jitad.take(table, i)`.")

    def __iter__(self):
        if not self.shape:
            raise _staging_error("Iterating", "Scalars cannot be iterated.")
        return (self[i] for i in range(self.shape[0]))

    def __len__(self):
        if not self.shape:
            raise ArgumentError("len() of a staged scalar")
        return self.shape[0]

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    T = property(lambda self: N.transpose(self))

    sum = lambda self, axis=None, keepdims=False: N.sum(self, axis, keepdims)
    mean = lambda self, axis=None, keepdims=False: N.mean(self, axis, keepdims)
    max = lambda self, axis=None, keepdims=False: N.max(self, axis, keepdims)
    min = lambda self, axis=None, keepdims=False: N.min(self, axis, keepdims)

    def item(self):
        raise _staging_error("`item()`", "Return the value from the jitted function to get a Python number.")

    tolist = item

    def astype(self, dtype):
        return N.convert(self, dtype)

    def reshape(self, *shape):
        return N.reshape(self, shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape)

    def transpose(self, *axes):
        return N.transpose(self, axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes or None)

    def clip(self, min=None, max=None):
        return N.clip(self, min, max)

    # NumPy's methods that are functions of jitad.numpy_api (a layer above: numeric.NUMPY_API)
    prod = lambda self, axis=None, dtype=None, keepdims=False: N.NUMPY_API["prod"](self, axis, dtype, keepdims)
    var = lambda self, axis=None, dtype=None, ddof=0, keepdims=False: N.NUMPY_API["var"](
        self, axis, dtype, ddof, keepdims)
    std = lambda self, axis=None, dtype=None, ddof=0, keepdims=False: N.NUMPY_API["std"](
        self, axis, dtype, ddof, keepdims)
    argmax = lambda self, axis=None, keepdims=False: N.NUMPY_API["argmax"](self, axis, keepdims)
    argmin = lambda self, axis=None, keepdims=False: N.NUMPY_API["argmin"](self, axis, keepdims)
    squeeze = lambda self, axis=None: N.NUMPY_API["squeeze"](self, axis)
    sort = lambda self, axis=-1: N.NUMPY_API["sort"](self, axis)   # a new array, as jax.numpy's
    argsort = lambda self, axis=-1: N.NUMPY_API["argsort"](self, axis)
    ravel = flatten = lambda self: N.reshape(self, (-1,))
    at = property(lambda self: N.NUMPY_API["ndarray.at"](self))
    cumsum = lambda self, axis=None, dtype=None: N.NUMPY_API["cumsum"](self, axis, dtype)
    cumprod = lambda self, axis=None, dtype=None: N.NUMPY_API["cumprod"](self, axis, dtype)
    any = lambda self, axis=None, keepdims=False: N.NUMPY_API["any"](self, axis, keepdims)
    all = lambda self, axis=None, keepdims=False: N.NUMPY_API["all"](self, axis, keepdims)
    round = __round__ = lambda self, decimals=None: N.NUMPY_API["round"](self, decimals or 0)   # stays staged
    __divmod__ = lambda a, b: (a // b, a % b)
    __rdivmod__ = lambda a, b: (b // a, b % a)

    def __getitem__(self, key):
        return N.getitem(self, key)

    __matmul__ = lambda a, b: N.matmul(a, b)
    __rmatmul__ = lambda a, b: N.matmul(b, a)

    __add__ = lambda a, b: binary(Op.ADD, a, b)
    __radd__ = lambda a, b: binary(Op.ADD, b, a)
    __sub__ = lambda a, b: binary(Op.SUB, a, b)
    __rsub__ = lambda a, b: binary(Op.SUB, b, a)
    __mul__ = lambda a, b: binary(Op.MUL, a, b)
    __rmul__ = lambda a, b: binary(Op.MUL, b, a)
    __truediv__ = lambda a, b: binary(Op.DIV, a, b)
    __rtruediv__ = lambda a, b: binary(Op.DIV, b, a)
    __pow__ = lambda a, b: power(a, b)
    __rpow__ = lambda a, b: binary(Op.POW, b, a)
    __mod__ = lambda a, b: binary(Op.MOD, a, b)
    __rmod__ = lambda a, b: binary(Op.MOD, b, a)
    __floordiv__ = lambda a, b: binary(Op.FLOORDIV, a, b)
    __rfloordiv__ = lambda a, b: binary(Op.FLOORDIV, b, a)
    __lt__ = lambda a, b: binary(Op.LT, a, b)
    __le__ = lambda a, b: binary(Op.LE, a, b)
    __gt__ = lambda a, b: binary(Op.GT, a, b)
    __ge__ = lambda a, b: binary(Op.GE, a, b)
    __eq__ = lambda a, b: binary(Op.EQ, a, b)
    __ne__ = lambda a, b: binary(Op.NE, a, b)
    __and__ = lambda a, b: logical(Op.AND, a, b)
    __rand__ = lambda a, b: logical(Op.AND, b, a)
    __or__ = lambda a, b: logical(Op.OR, a, b)
    __ror__ = lambda a, b: logical(Op.OR, b, a)
    __invert__ = lambda a: unary(Op.NOT, a) if a.ir_dtype in ("bool", "i64") else _bad_logical("~", a)
    __neg__ = lambda a: unary(Op.NEG, a)
    __pos__ = lambda a: a
    __abs__ = lambda a: unary(Op.ABS, a)


class StagedTree:
    """A staged `jitad.Tree` input; use it with `TREE`."""
    __slots__ = ("_var",)

    def __init__(self, var):
        self._var = var

    def __repr__(self):
        return f"StagedTree({self._var.type})"


def is_staged(x):
    return isinstance(x, Staged)


def wrap(var):
    """The proxy of a var: `StagedTree` for trees, else `Staged`."""
    return StagedTree(var) if isinstance(var.type, TreeType) else Staged(var)


# -- slots and continuations (emitted by reverse mode) -------------------------

def new_slot(type):
    """A mutable zero-initialized slot for a value of `type`."""
    return Staged(emit(Op.SLOT, [], {"type": type})[0])


def slot_get(slot):
    return Staged(emit(Op.SLOT_GET, [slot._var])[0])


def slot_set(slot, value):
    emit(Op.SLOT_SET, [slot._var, as_var(value, slot._var.type.dtype)])


def slot_add(slot, value):
    emit(Op.SLOT_ADD, [slot._var, as_var(value, slot._var.type.dtype)])


def make_closure(fn, param_types, name="k"):
    """Trace `fn(*params)` (returning nothing) as a continuation closing over the
    values it uses from the current scope; return the staged continuation."""
    fundef = FunDef(name=name, in_types=list(param_types), out_types=[])
    frame = Frame(current_frame(), param_types)
    with _entered(frame):
        fn(*[wrap(v) for v in frame.graph.params])
    order = list(frame.captures)
    frame.align_captures(order)
    fundef.body, fundef.n_captures = frame.graph, len(order)
    _local.trace.fun_list.append(fundef)
    return Staged(emit(Op.CLOSURE, order, {"fun": fundef})[0])


def apply(cont, args):
    emit(Op.APPLY, [cont._var] + [a._var for a in args])


def _refuse_masked(x, where):
    if isinstance(x, np.ma.MaskedArray):
        raise ArgumentError(f"a masked array (numpy.ma) {where}: jitad would ignore its mask; "
                            "pass `x.filled(value)` (masked entries replaced) or `x.data`")


def _kind(x):
    """(dtype, weak): Python and NumPy scalars are weakly typed, as in JAX."""
    if isinstance(x, Staged):
        return x.ir_dtype, False
    _refuse_masked(x, "in staged code")
    if isinstance(x, (bool, np.bool_)):
        return "bool", True
    if isinstance(x, (int, np.integer)):
        return "i64", True
    if isinstance(x, np.float32):
        return "f32", True
    if isinstance(x, (float, np.floating)):
        return "f64", True
    if isinstance(x, np.ndarray) and dtype_of_numpy(x.dtype):
        return dtype_of_numpy(x.dtype), x.ndim == 0
    raise ArgumentError(f"cannot use a value of type {type(x).__name__} in staged arithmetic; "
                        "use numbers or staged values")


_CATEGORY = {"bool": 0, "i64": 1, "f32": 2, "f64": 2}


def result_dtype(*xs):
    kinds = [_kind(x) for x in xs]
    strong = [d for d, weak in kinds if not weak]
    dtype = reduce(promote, strong or [d for d, _ in kinds])
    for d, weak in kinds:
        if weak and _CATEGORY[d] > _CATEGORY[dtype]:
            dtype = d
    return dtype


def as_var(x, dtype=None):
    """The var of `x` (a staged value or a Python number) converted to `dtype`."""
    if isinstance(x, Staged):
        if dtype is None or x.ir_dtype == dtype:
            return x._var
        return emit(Op.CONVERT, [x._var], {"dtype": dtype})[0]
    dtype = dtype or _kind(x)[0]
    if dtype == "i64" and isinstance(x, int) and not -2**63 <= x < 2**63:
        raise ArgumentError(f"the int constant {x} does not fit in 64 bits (staged ints are int64); "
                            "use a float constant or a smaller int")
    if isinstance(x, np.ndarray) and x.ndim:
        check_int64_range(x)
        value = np.array(clean_bools(x), dtype=NUMPY[dtype], order="C")
        value.flags.writeable = False
        return emit(Op.CONST, [], {"value": value, "type": Type(dtype, value.shape)})[0]
    value = {"bool": bool, "i64": int, "f32": float, "f64": float}[dtype](x)
    return emit(Op.CONST, [], {"value": value, "type": Type(dtype)})[0]


def _eager(op, *xs):
    for x in xs:
        _kind(x if isinstance(x, np.ndarray) or np.ndim(x) == 0 else np.asarray(x))   # numbers only
    with np.errstate(all="ignore"):
        values = [np.asarray(x)[()] for x in xs]
        if len(xs) > 1 and any(getattr(v, "dtype", None) == np.float32 for v in values):
            # Python numbers are weakly typed: float32 and a Python float give float32, as NumPy
            values = [np.float32(x) if type(x) in (float, int) else v for x, v in zip(xs, values)]
        if op.float_only:   # as when staged: ints and bools compute in f64
            values = [v if np.asarray(v).dtype.kind == "f" else np.float64(v) for v in values]
        return impl_of(op)(*values)


_BOOL_ARITH = {Op.ADD: Op.OR, Op.MUL: Op.AND, Op.MAXIMUM: Op.OR, Op.MINIMUM: Op.AND}


def binary(op, a, b):
    if not (is_staged(a) or is_staged(b)):
        return _eager(op, a, b)
    dtype = result_dtype(a, b)
    if op.float_only and dtype not in FLOATS:
        dtype = "f64"
    if dtype == "bool" and op.arith:   # as NumPy: + is or, * is and, the rest on ints
        if op == Op.SUB:
            raise ArgumentError("`-` on two bools is not supported (as in NumPy); use `^`-like "
                                "logic with `&`, `|`, `~`, or convert to int first")
        if op in _BOOL_ARITH:
            op = _BOOL_ARITH[op]
        else:
            dtype = "i64"
    return Staged(emit(op, [as_var(a, dtype), as_var(b, dtype)])[0])


def power(x, n):
    """`x ** n`. A float `x` to a constant integer power (a Python or NumPy int, or a float
    with an integer value, |n| <= 64) is squarings and products, as JAX's `integer_pow`:
    no `pow` call (x ** 3 over 10^6 elements: 21 -> 0.27 ms) and no log(x) in its
    derivatives (a `pow` node's exponent derivative, NaN at x < 0)."""
    dtype = result_dtype(x, n) if is_staged(x) else None
    if dtype not in FLOATS or is_staged(n) or isinstance(n, (bool, np.bool_)) \
            or not isinstance(n, (int, float, np.integer, np.floating)) or n != np.trunc(n) or abs(n) > 64:
        return binary(Op.POW, x, n)
    if n == 0:   # 1, as NumPy's x ** 0 for every x (inf and NaN too), with derivatives 0
        return N.broadcast_to(Staged(as_var(1.0, dtype)), x.shape)
    x, k = Staged(as_var(x, dtype)), int(abs(n))
    result = None
    while k:
        if k & 1:
            result = x if result is None else result * x
        k >>= 1
        if k:
            x = unary(Op.SQUARE, x)
    return result if n > 0 else 1.0 / result


def unary(op, x):
    if not is_staged(x):
        return _eager(op, x)
    dtype = x.ir_dtype
    if op.float_only and dtype not in FLOATS:
        dtype = "f64"
    if op in (Op.NEG, Op.ABS, Op.SQUARE, Op.RELU) and dtype == "bool":
        dtype = "i64"
    return Staged(emit(op, [as_var(x, dtype)])[0])


def _bad_logical(name, *xs):
    raise ArgumentError(f"`{name}` takes bool or int operands, got "
                        f"{', '.join(_kind(x)[0] for x in xs)}; compare first (e.g. `x > 0`)")


def logical(op, a, b):
    if not (is_staged(a) or is_staged(b)):
        return _eager(op, a, b)
    dtype = result_dtype(a, b)
    if dtype not in ("bool", "i64"):
        _bad_logical({Op.AND: "&", Op.OR: "|"}[op], a, b)
    return Staged(emit(op, [as_var(a, dtype), as_var(b, dtype)])[0])


def to_bool(x, what):
    """A staged bool var from a staged value (non-zero is true) or a Python value."""
    if not is_staged(x):
        if isinstance(x, np.ndarray) and x.ndim:
            return as_var(x.astype(bool), "bool")
        return as_var(bool(x), "bool")
    if x.ir_dtype == "bool":
        return x._var
    return binary(Op.NE, x, 0)._var


def _check_callables(who, **fns):
    for name, fn in fns.items():
        if not callable(fn):
            raise ArgumentError(f"{who}: {name} must be a function, got {type(fn).__name__}"
                                + (" (write `lambda: value`)" if who == "IF" else ""))


def _check_predicate(x, what):
    """`x`, a control-flow predicate, which must be a scalar."""
    shape = tuple(x.shape if is_staged(x) else np.shape(x))
    if shape:
        raise StagingError(f"{what}: the predicate has shape {shape}; it must be a scalar bool. "
                           "Reduce it to one bool first (any: `jitad.sum(p) > 0`, all: "
                           "`jitad.sum(~p) == 0`), or choose elementwise with `jitad.where(p, a, b)`")
    return x


# -- bodies ------------------------------------------------------------------

def _leaf_type(x, what, allow_tree=False):
    if isinstance(x, Staged) or (allow_tree and isinstance(x, StagedTree)):
        return x._var.type
    if isinstance(x, StagedTree):
        raise StagingError(f"{what}: a Tree cannot be a loop state or result; use it with TREE")
    return Type(_kind(x)[0], np.shape(x) if isinstance(x, np.ndarray) else ())


def _literal(x):
    return not isinstance(x, (Staged, StagedTree))


def coerce(x, type, what):
    """`x` as a var of `type` in the current frame: Python numbers become constants."""
    if isinstance(x, (Staged, StagedTree)):
        if x._var.type != type:
            raise StagingError(f"{what} is {x._var.type} where {type} is expected; "
                               f"convert it (e.g. `jitad.convert(x, '{type.dtype}')`) or change the "
                               "initial value's type (e.g. `0.0` instead of `0`)")
        return x._var
    kind = _kind(x)[0]
    if _CATEGORY[kind] > _CATEGORY[type.dtype] or np.shape(x) != type.shape:
        raise StagingError(f"{what} is the constant {x!r} where {type} is expected")
    return as_var(x, type.dtype)


def trace_body(fn, args_treedef, param_types, make_args=None):
    """Trace `fn` on fresh params in a child frame; return (frame, raw Python result)."""
    frame = Frame(current_frame(), param_types)
    with _entered(frame):
        params = [wrap(v) for v in frame.graph.params]
        args = make_args(params) if make_args else unflatten(args_treedef, params)
        out = fn(*args)
    return frame, out


def finish_body(frame, leaves, types, what):
    with _entered(frame):
        frame.graph.outputs = [frame.resolve(coerce(x, t, f"{what} output {k}")) for k, (x, t) in
                               enumerate(zip(leaves, types))]


def _control_node(op, operands, frames, attrs):
    """Emit a control-flow node whose bodies (in `frames`) share one capture list."""
    order = []
    for fr in frames:
        order += [v for v in fr.captures if v not in order]
    for fr in frames:
        fr.align_captures(order)
    return emit(op, list(operands) + order, attrs, [fr.graph for fr in frames])


def _check_structure(td_a, td_b, what):
    if td_a != td_b:
        raise StagingError(f"{what} return different structures: {_describe(td_a)} vs "
                           f"{_describe(td_b)}; both must return the same pytree")


def _describe(td):
    if td.kind == "leaf":
        return "a value"
    if td.kind == "none":
        return "None"
    return f"a {td.kind} of {len(td.children)}"


# -- the combinators -------------------------------------------------

def IF(pred, then_fn, else_fn, *operands):
    """`then_fn(*operands)` if `pred` else `else_fn(*operands)`, staged.

    >>> jitad.jit(lambda x: IF(x > 0, lambda: x * x, lambda: -x))(3.0)
    9.0
    """
    _check_callables("IF", then_fn=then_fn, else_fn=else_fn)
    if not is_staged(pred):
        _check_predicate(pred, "IF")
        return then_fn(*operands) if pred else else_fn(*operands)
    pred_var = to_bool(_check_predicate(pred, "IF"), "IF")
    leaves, td = flatten(operands)
    in_types = [_leaf_type(x, "IF operand", allow_tree=True) for x in leaves]
    in_vars = [coerce(x, t, "IF operand") for x, t in zip(leaves, in_types)]
    then_fr, then_out = trace_body(then_fn, td, in_types)
    else_fr, else_out = trace_body(else_fn, td, in_types)
    t_leaves, t_td = flatten(then_out)
    e_leaves, e_td = flatten(else_out)
    _check_structure(t_td, e_td, "the IF branches")
    out_types = []
    for k, (a, b) in enumerate(zip(t_leaves, e_leaves)):
        ta = None if _literal(a) else _leaf_type(a, "IF branch")
        tb = None if _literal(b) else _leaf_type(b, "IF branch")
        if ta is not None and tb is not None and ta != tb:
            raise StagingError(f"the IF branches return different types for output {k}: "
                               f"{ta} (then) vs {tb} (else); convert one so both match")
        out_types.append(ta or tb or Type(result_dtype(a, b)))
    finish_body(then_fr, t_leaves, out_types, "the IF then-branch")
    finish_body(else_fr, e_leaves, out_types, "the IF else-branch")
    outs = _control_node(Op.IF, [pred_var] + in_vars, [then_fr, else_fr], {})
    return unflatten(t_td, [Staged(v) for v in outs])


def _state(init, what):
    leaves, td = flatten(init)
    types = [_leaf_type(x, what) for x in leaves]
    return [coerce(x, t, what) for x, t in zip(leaves, types)], types, td


def checkpoint_count(checkpoints, where):
    """`checkpoints=` of a loop, checked: None (reverse mode keeps every step) or an int >= 1."""
    if checkpoints is None:
        return None
    if isinstance(checkpoints, (bool, np.bool_)) or not isinstance(checkpoints, (int, np.integer)) \
            or checkpoints < 1:
        raise ArgumentError(f"{where}: checkpoints={checkpoints!r}; give None (reverse mode keeps every "
                            "step) or an int >= 1 (the number of loop states it keeps at once)")
    return int(checkpoints)


def _loop_node(op, operands, frames, out, td, types, part, checkpoints=None):
    """Finish a loop's last body (in `frames`; `out`: what it returned, the new state)
    and emit the loop; return its results as the state's pytree."""
    leaves, out_td = flatten(out)
    _check_structure(td, out_td, f"{op.value.upper()}'s init and {part}")
    finish_body(frames[-1], leaves, types, f"the {op.value.upper()} {part}")
    attrs = {"n_state": len(types)}
    if checkpoints is not None:
        attrs["checkpoints"] = checkpoints
    outs = _control_node(op, operands, frames, attrs)
    return unflatten(td, [Staged(v) for v in outs])


def WHILE(cond_fn, body_fn, init, *, checkpoints=None):
    """`state = init; while cond_fn(state): state = body_fn(state)`, staged.

    >>> jitad.jit(lambda x: WHILE(lambda t: t > 1.0, lambda t: t * 0.5, x))(10.0)
    0.625

    Reverse mode keeps every iteration's values; `checkpoints=c` keeps at most `c` loop
    states at once and recomputes the rest (see `FOR`): the first `c // 4` iterations are
    kept as with `checkpoints=None`, the remaining ones (counted by one more forward run)
    are reversed on the binomial schedule with the other states.
    """
    _check_callables("WHILE", cond_fn=cond_fn, body_fn=body_fn)
    checkpoints = checkpoint_count(checkpoints, "WHILE")
    if current_frame() is None:   # not staging: run in Python
        state = init
        while cond_fn(state):
            state = body_fn(state)
        return state
    init_vars, types, td = _state(init, "WHILE init")
    state_arg = lambda ps: (unflatten(td, ps),)
    cond_fr, cond_out = trace_body(cond_fn, td, types, state_arg)
    with _entered(cond_fr):
        cond_fr.graph.outputs = [cond_fr.resolve(to_bool(_check_predicate(cond_out, "WHILE's cond_fn"), "WHILE"))]
    body_fr, body_out = trace_body(body_fn, td, types, state_arg)
    return _loop_node(Op.WHILE, init_vars, [cond_fr, body_fr], body_out, td, types, "body", checkpoints)


def FOR(lower, upper, body_fn, init, *, checkpoints=None):
    """`for i in range(lower, upper): state = body_fn(i, state)`, staged.

    >>> jitad.jit(lambda n: FOR(0, n, lambda i, s: s + i, 0))(5)
    10

    Reverse mode keeps every iteration's state (memory grows with the trip count).
    `checkpoints=c` bounds it: at most `c` states besides the initial one are kept at
    once, and the backward pass recomputes the others from the nearest kept state on a
    binomial schedule (Griewank's Revolve): with `n` steps each step runs forward at most
    `r + 1` times, `r` the least with `C(c + r + 1, r + 1) >= n`. Values and gradients
    are those of `checkpoints=None`; forward mode and `vmap` ignore it.

    >>> jitad.grad(lambda x: FOR(0, 1000, lambda i, s: s * 0.999 + 0.001, x, checkpoints=8))(1.0)
    0.3676954247709635
    """
    _check_callables("FOR", body_fn=body_fn)
    checkpoints = checkpoint_count(checkpoints, "FOR")
    if current_frame() is None:   # not staging: run in Python
        state = init
        for i in range(lower, upper):
            state = body_fn(i, state)
        return state
    for b in (lower, upper):
        if (b.ir_dtype != "i64") if is_staged(b) else (
                isinstance(b, (bool, np.bool_)) or not isinstance(b, (int, np.integer))):
            raise StagingError(f"FOR bounds must be ints (Python ints or staged i64 values), "
                               f"got {b!r}")
    bounds = [as_var(b, "i64") for b in (lower, upper)]
    init_vars, types, td = _state(init, "FOR init")
    body_fr, body_out = trace_body(
        body_fn, None, [I64] + types, lambda ps: (ps[0], unflatten(td, ps[1:])))
    return _loop_node(Op.FOR, bounds + init_vars, [body_fr], body_out, td, types, "body", checkpoints)


class ShapeDtype:
    """The type of a value, for `FUN(out=...)`: `ShapeDtype((), 'f64')`."""

    def __init__(self, shape, dtype):
        try:
            self.shape = tuple(operator.index(n) for n in shape)
        except TypeError:
            raise ArgumentError(f"ShapeDtype: shape {shape!r} must be a tuple of ints") from None
        self.dtype = dtype if dtype in ("bool", "i64", "f32", "f64") else dtype_of_numpy(dtype)
        if self.dtype is None:
            raise ArgumentError(f"ShapeDtype: unsupported dtype {dtype!r}")

    def __repr__(self):
        return f"ShapeDtype({self.shape}, {self.dtype!r})"


def _spec_types(spec):
    leaves, td = flatten(spec)
    types = []
    for x in leaves:
        if isinstance(x, ShapeDtype):
            types.append(Type(x.dtype, x.shape))
        elif isinstance(x, np.ndarray):
            types.append(Type(dtype_of_numpy(x.dtype), x.shape))
        else:
            types.append(Type(_kind(x)[0]))
    return types, td


class FUN:
    """A staged function: calls emit a `call` node, so it may recurse.

    >>> @FUN(out=0)
    ... def fact(n):
    ...     return IF(n <= 1, lambda: 1, lambda: n * fact(n - 1))
    """

    def __new__(cls, fn=None, out=None):
        if fn is None:
            return lambda f: FUN(f, out=out)
        return super().__new__(cls)

    def __init__(self, fn=None, out=None):
        _check_callables(type(self).__name__, fn=fn)
        self.fn = fn
        self.out = _spec_types(out) if out is not None else None
        self.__name__ = getattr(fn, "__name__", "fun")
        self.__doc__ = getattr(fn, "__doc__", None)

    call_op = Op.CALL   # the opcode of this function's calls (with `call_attrs`: see jitad/custom.py)

    def call_attrs(self, in_td):
        """Extra static attributes of this function's call nodes (for custom rules)."""
        return {}

    def __call__(self, *args):
        if current_frame() is None:
            return self.fn(*args)
        leaves, td = flatten(args)
        types = [_leaf_type(x, f"argument of FUN {self.__name__}", allow_tree=True) for x in leaves]
        in_vars = [coerce(x, t, "FUN argument") for x, t in zip(leaves, types)]
        trace = _local.trace
        key = (self, td, tuple(types))
        fun = trace.funs.get(key)
        if fun is None:
            fun = self._define(trace, key, td, types)
        elif fun.out_types is None:
            raise StagingError(
                f"FUN `{self.__name__}` calls itself, so its output type must be given before "
                f"its body is traced: write `@FUN(out=...)` with a `jitad.ShapeDtype`, an example "
                f"value like `0.0`, or a pytree of them")
        frame = current_frame()
        captures = [frame.resolve(v) for v in fun.captures]
        outs = emit(self.call_op, in_vars + captures, {"fun": fun.fundef, **self.call_attrs(td)})
        return unflatten(fun.out_td, [Staged(v) for v in outs])

    def _define(self, trace, key, td, types):
        fun = _FunState(FunDef(name=self.__name__, in_types=types), td)
        if self.out is not None:
            fun.fundef.out_types, fun.out_td = self.out
        trace.funs[key] = fun
        while True:   # retrace until the set of captured outer values is stable
            seen = list(fun.captures)
            frame = Frame(current_frame(), types)
            for v in seen:
                frame.resolve(v)
            with _entered(frame):
                out = self.fn(*unflatten(td, [wrap(v) for v in frame.graph.params[:len(types)]]))
                for x in flatten(out)[0]:   # a result may itself be a captured value
                    if isinstance(x, (Staged, StagedTree)):
                        frame.resolve(x._var)
            new = [v for v in frame.captures if v not in seen]
            if not new:
                break
            fun.captures = seen + new
        leaves, out_td = flatten(out)
        if self.out is not None:
            _check_structure(fun.out_td, out_td, f"FUN `{self.__name__}`'s out= and its body")
            out_types = fun.fundef.out_types
        else:
            out_types = [_leaf_type(x, f"FUN {self.__name__} result") for x in leaves]
            fun.fundef.out_types, fun.out_td = out_types, out_td
        finish_body(frame, leaves, out_types, f"FUN `{self.__name__}`")
        frame.align_captures(fun.captures)
        fun.fundef.body = frame.graph
        fun.fundef.n_captures, fun.fundef.captured = len(fun.captures), list(fun.captures)
        trace.fun_list.append(fun.fundef)
        return fun


class checkpoint(FUN):
    """`jitad.checkpoint(f)`: during reverse mode, run `f` without keeping its
    intermediate values, and recompute them when the backward pass reaches `f`
    (less memory, one more forward pass of `f`).

    >>> block = jitad.checkpoint(lambda h, W: jitad.tanh(W @ h))
    """
    call_op = Op.CHECKPOINT

    def __repr__(self):
        return f"checkpoint({self.__name__})"


class _FunState:
    def __init__(self, fundef, in_td):
        self.fundef, self.in_td = fundef, in_td
        self.captures = []
        self.out_td = None

    @property
    def out_types(self):
        return self.fundef.out_types


class NodeView:
    """The staged fields of one tree node inside a `TREE` combine function."""

    def __init__(self, tree, k):
        self._tree, self._k = tree, k

    @property
    def is_leaf(self):
        return (self.left == -1) & (self.right == -1)

    def __getattr__(self, name):
        ttype = self._tree._var.type
        if name not in ("left", "right", "index") and (ttype.field_dtype(name) is None or name.startswith("_")):
            raise StagingError(f"tree nodes have no field `{name}`; they have index, is_leaf, left, right"
                               f"{''.join(', ' + n for n, _ in ttype.fields if not n.startswith('_'))}")
        return Staged(emit(Op.TREE_GET, [self._tree._var, self._k._var], {"field": name})[0])


def TREE(tree, init, combine):
    """Recursion over a binary tree: `f(n) = init if n is empty else combine(node, f(n.left), f(n.right))`.

    >>> tree = jitad.Tree.from_nested((5.0, (3.0, None, None), (4.0, None, None)))
    >>> jitad.jit(lambda t: TREE(t, 1.0, lambda node, l, r: l * r * node.value))(tree)
    60.0
    """
    _check_callables("TREE", combine=combine)
    if callable(init):
        init = init()
    if not isinstance(tree, (StagedTree, Tree)):
        raise ArgumentError(f"TREE takes a jitad.Tree, got {type(tree).__name__}")
    tree = tree if isinstance(tree, StagedTree) else plain_tree(tree)
    if (tree._var.type if isinstance(tree, StagedTree) else tree.type).forest:
        raise StagingError("TREE got a jitad.Forest, a batch of trees: map over it with "
                           "jitad.vmap(f, in_axes=...) (the forest's axis 0), so that each lane folds one tree")
    if isinstance(tree, Tree):
        return _tree_eager(tree, init, combine)
    init_vars, types, td = _state(init, "TREE init")
    n = len(types)
    frame, out = trace_body(
        combine, None, [I64] + types + types,
        lambda ps: (NodeView(tree, ps[0]), unflatten(td, ps[1:1 + n]), unflatten(td, ps[1 + n:])))
    return _loop_node(Op.TREE, [tree._var] + init_vars, [frame], out, td, types, "combine function")


class _EagerNode:
    def __init__(self, tree, k):
        self.index, self.left, self.right = k, int(tree.left[k]), int(tree.right[k])
        self.is_leaf = self.left == -1 and self.right == -1
        for name, arr in tree.fields.items():
            setattr(self, name, arr[k])


def _tree_eager(tree, init, combine):
    done = {-1: init}
    for k in tree.order.tolist():   # children first, as a recursion would: no depth limit
        node = _EagerNode(tree, k)
        done[k] = combine(node, done[node.left] if node.left < 0 else done.pop(node.left),
                          done[node.right] if node.right < 0 else done.pop(node.right))
    return done[tree.root]


# -- tracing a whole function ----------------------------------------------------

def arg_type(x):
    """The IR type of one flattened argument, or raise `ArgumentError`."""
    if isinstance(x, Tree):
        return plain_tree(x).type   # Tree's own slot, even if a subclass shadows `type`
    if isinstance(x, (bool, int, float, np.number, np.bool_)):
        if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) \
                and not -2**63 <= int(x) < 2**63:
            raise ArgumentError(f"the int {x} does not fit in 64 bits")
        return Type(_kind(x)[0])
    _refuse_masked(x, "as an argument")
    if isinstance(x, np.ndarray):
        dtype = dtype_of_numpy(x.dtype)
        if dtype is None:
            raise ArgumentError(f"unsupported array dtype {x.dtype}: jitad takes float64, float32, "
                                "integer (as int64) and bool arrays")
        return Type(dtype, x.shape)
    if is_device_array(x):
        dtype = dtype_of_numpy(x.dtype)
        if dtype is None:
            raise ArgumentError(f"unsupported device array dtype {x.dtype}: jitad takes float64, float32, "
                                "int64 and bool arrays")
        return Type(dtype, tuple(x.shape))
    raise ArgumentError(f"unsupported argument of type {type(x).__name__}: jitad takes floats, "
                        "ints, bools, numpy arrays, jitad.Tree and tuples/lists/dicts of them")


def trace_program(fn, args, in_td, types):
    """Trace `fn(*args)` where the flat leaves of `args` have `types` into a program of
    its own; return (Program, out treedef, captured). Traced inside another trace, `fn`
    may use staged values of the enclosing code: they become extra params at the end
    of the program's main graph, and `captured` lists those enclosing values in order."""
    root = Frame(current_frame(), types)
    outer_trace, outer_frames = getattr(_local, "trace", None), _frames()
    _local.trace, _local.frames = _Trace(), []
    try:
        with _entered(root), (hostrng.watch(fn) if outer_trace is None else nullcontext()):
            proxies = [wrap(v) for v in root.graph.params]
            out = fn(*unflatten(in_td, proxies))
            leaves, out_td = flatten(out)
            out_td = with_built_order(out, out_td)
            root.graph.outputs = [root.resolve(coerce(x, _leaf_type(x, "the function's result"), "result"))
                                  for x in leaves]
        return Program(root.graph, _local.trace.fun_list), out_td, list(root.captures)
    finally:
        _local.trace, _local.frames = outer_trace, outer_frames
