"""Concrete values during a trace: when `grad` (and its kin) is called from Python, the
function is traced with the call's values beside the staged proxies, so that Python can
decide on them (`if x > 0`, `int(n)`, `range(k)`, `float(loss)`), as it does under
autograd. Each decision is recorded as a *guard*: a `check` node emitted into the program
that fails when the running code's value would have decided otherwise; the dispatcher
(`jitad.dispatch`) then takes another compiled path or traces again.

Values are computed on demand with the reference interpreter (`jitad.ir.interpret`): a
frame's nodes run in order up to the one whose output is asked for, so effects (slots,
closures of reverse mode) see what they would at run time. Only the frames of the traced
program and of the transformations it calls have values; the bodies of IF, WHILE, FOR,
FUN, TREE, scan and checkpointed loops do not (a decision there stays a StagingError
naming the combinator), nor does anything under `jit` or `vmap`.
"""
import operator
import sys
import threading

import numpy as np

from ..errors import StagingError, user_location
from ..ir.interpret import run_node
from ..ir.ops import Op
from ..ir.types import NUMPY, Type, dtype_of_numpy
from .frames import current_frame, emit

GUARD_PREFIX = "jitad guard "   # a check whose message starts so is a guard: `GUARD_PREFIX + index`

_local = threading.local()
_NO_VALUES = (Op.DEBUG_PRINT, Op.CHECK)
_I64 = Type("i64")
STAGED: list = [None]   # `jitad.staging.values.Staged`, set by that module (which imports this one)


# ops whose values a layer above computes while tracing (op -> fn(node, its inputs' values) ->
# its outputs' values): a deferred reverse pass, whose meaning is a program reverse mode makes
VALUE_RULES = {}


class NoValue(Exception):
    """The value is not known while tracing (a body of a combinator, a batched value)."""


class Guard:
    """One Python decision: at `site` (file:line: source), `kind` ("bool" or "int") came out `value`."""
    __slots__ = ("site", "kind", "value")

    def __init__(self, site, kind, value):
        self.site, self.kind, self.value = site, kind, value

    def key(self):
        return self.site, self.kind, self.value


class ConcreteTrace:
    """The values of one trace: of params (the call's arguments), of capture params (their
    outer values) and, on demand, of node outputs in the frames that have values."""

    def __init__(self, overrides=None):
        self.values = {}      # var -> NumPy value
        self.alias = {}       # capture param -> the var of the enclosing frame it stands for
        self.producer = {}    # var -> (frame, index of its node in the frame's graph)
        self.done = {}        # frame -> how many of its nodes have run
        self.guards = []
        self.overrides = overrides or {}   # guard index -> the decision to take there
        self.root = None      # the outermost frame: hidden arguments become its params
        self.hidden = []      # (param var, source) in order; see `hidden_param`
        self.hidden_ids = {}  # id(array) -> its hidden param (an array met twice is one argument)
        self.sources = {}     # id(array) -> ("read", index): arrays the function reads, re-read per call
        self.unmatched = False   # an array constant met that is none of `sources`
        self.int_guards = []     # (expression of the call's symbolic ints, value): see `SymInt`
        self.int_exact = False   # a symbolic int was used as a plain int (a guard on its value)
        self.closed = False      # the trace is over: its paths' guards are fixed
        self.detached = False    # values for the constant arguments of traces begun under no values
        # what the dispatcher keeps across the traces of one function (a dict it owns, None
        # elsewhere): a layer below the dispatcher notes there what a later trace can skip
        self.memo = None

    # -- values -------------------------------------------------------------------

    def value_of(self, var):
        """The NumPy value of `var`, or raise NoValue."""
        stack = [var]
        while stack:
            v = stack[-1]
            if v in self.values:
                stack.pop()
                continue
            outer = self.alias.get(v)
            if outer is not None:
                if outer in self.values:
                    self.values[v] = self.values[outer]
                    stack.pop()
                else:
                    stack.append(outer)
                continue
            where = self.producer.get(v)
            if where is None:
                raise NoValue(v)
            missing = self._run_frame(*where)
            if missing is not None:
                stack.append(missing)
        return self.values[var]

    def _run_frame(self, frame, upto):
        """Run `frame`'s nodes in order through index `upto`; return an input var whose value
        must come first (from an enclosing frame), or None when done."""
        nodes = frame.graph.nodes
        k = self.done.get(frame, 0)
        with np.errstate(all="ignore"):
            while k <= upto:
                node = nodes[k]
                if node.op in _NO_VALUES:   # prints and checks happen when the code runs
                    k += 1
                    continue
                for v in node.inputs:
                    if v not in self.values:
                        if v in self.alias or self.producer.get(v, (frame,))[0] is not frame:
                            self.done[frame] = k
                            return v
                        raise NoValue(v)
                rule = VALUE_RULES.get(node.op, run_node)
                self.values.update(zip(node.outputs, rule(node, [self.values[v] for v in node.inputs])))
                k += 1
        self.done[frame] = k
        return None

    # -- guards ---------------------------------------------------------------------

    def decide(self, staged, kind):
        """The Python value of a decision on `staged` (kind "bool", "int" or "float"), with its guard."""
        value = self.value_of(staged._var)
        index = len(self.guards)
        value = self.overrides.get(index, {"bool": bool, "int": int, "float": float}[kind](value))
        x = staged.reshape(()) if staged.shape else staged   # (one element: the staged operators compare)
        if kind == "bool" and x.ir_dtype != "bool":
            x = x != 0
        elif kind != "bool" and x.ir_dtype != {"int": "i64", "float": x.ir_dtype if x.ir_dtype in ("f32", "f64")
                                                  else "f64"}[kind]:
            x = type(x)(emit(Op.CONVERT, [x._var], {"dtype": "i64" if kind == "int" else "f64"})[0])
        fail = _float_differs(x, value) if kind == "float" else x != value
        emit(Op.CHECK, [fail._var], {"message": f"{GUARD_PREFIX}{index}"})
        self.guards.append(Guard(user_location(), kind, value))
        return value

    def convert(self, staged, dtype):
        """NumPy's conversion of `staged` to the integer or bool `dtype`: its value, with a
        guard that the staged value converts to the same array at later calls."""
        value = np.asarray(self.value_of(staged._var)).astype(dtype)
        index = len(self.guards)
        differs = staged.astype(dtype) != value
        emit(Op.CHECK, [(differs.any() if differs.shape else differs)._var], {"message": f"{GUARD_PREFIX}{index}"})
        self.guards.append(Guard(user_location(), "array", (value.shape, value.tobytes())))
        return value

    # -- hidden arguments ---------------------------------------------------------------

    def array_param(self, x, type_):
        """The param standing for the NumPy array `x` met by the trace: an array the function
        reads (a closure cell, default or global: re-read at each call), else the value met
        (a constant of this path, passed as an argument so that another value costs no compile)."""
        if type(x) is SourceView:
            x = x.__dict__.get("source", x)
        read = self.sources.get(id(x))
        key = (id(x), type_.dtype)
        if (read is None or read[1] is not x) and np.size(x) <= 4096:
            # a constant the code makes anew each time it runs (a table built inside a FUN's
            # body, retraced until its captures settle): one param per value, not per object
            key = ("const", type_.dtype, np.shape(x), np.asarray(x, NUMPY[type_.dtype]).tobytes())
        found = self.hidden_ids.get(key)
        if found is not None:
            return found[1]
        if read is not None and read[1] is x:
            source = ("read", read[0])
        else:
            self.unmatched = True
            source = ("const", np.array(x, dtype=NUMPY[type_.dtype], order="C"))
        var = self.hidden_param(x, source, type_)
        self.hidden_ids[key] = (x, var)   # (holds `x`: its id stays its own)
        return var

    def hidden_param(self, value, source, type_):
        """A new param of the outermost frame standing for `value` (an argument the caller
        passes at each call: `source` says where it comes from)."""
        from ..ir.graph import Var
        var = Var(type_)
        self.root.graph.params.append(var)
        self.root.scope.add(var)
        self.values[var] = np.asarray(value, NUMPY[type_.dtype])[()]
        self.hidden.append((var, source))
        return var


    def int_guard(self, expr, value, exact=False):
        """Record that the path serves only calls whose symbolic ints give `expr(ints) == value`."""
        if self.closed:   # (a symbol kept past its trace, in a list the function appended to)
            return
        self.int_guards.append((expr, value))
        self.int_exact = self.int_exact or exact


ULPS = 4   # a float guard holds within this many units in the last place of the traced value


def _float_differs(x, value):
    """Staged: `x` is not the float `value` (NaN only equals NaN; within ULPS ulps otherwise)."""
    if value != value:
        return x == x
    if value in (np.inf, -np.inf):
        return x != value
    tol = ULPS * float(np.spacing(np.abs(np.asarray(value, NUMPY[x.ir_dtype]))))
    return ~(abs(x - value) <= tol)


class held_prints:
    """Context: what the traced function prints inside it is kept, not printed (`lines`: the
    arguments of each `print`), for a trace that may be dropped and made again; `release()`
    prints them. (The dispatcher's `print` while tracing looks at `print_hold()`.)"""

    def __enter__(self):
        self.lines = []
        _local.__dict__.setdefault("held", []).append(self.lines)
        return self

    def __exit__(self, *exc):
        _local.held.pop()

    def release(self):
        import builtins
        for args, kwargs in self.lines:
            builtins.print(*args, **kwargs)


def print_hold():
    """The list the innermost `held_prints` keeps prints in, or None."""
    held = getattr(_local, "held", None)
    return held[-1] if held else None


def current():
    """The ConcreteTrace of the trace being recorded on this thread, or None."""
    return getattr(_local, "trace", None)


class active:
    """Context: trace with concrete values (`trace`, a ConcreteTrace)."""

    def __init__(self, trace):
        self.trace = trace

    def __enter__(self):
        self.saved = current()
        _local.trace = self.trace
        return self.trace

    def __exit__(self, *exc):
        _local.trace = self.saved


def frame_values():
    """The ConcreteTrace if the current frame has values, else None."""
    frame = current_frame()
    c = current()
    return c if c is not None and frame is not None and frame.concrete is c \
        and not getattr(_local, "blocked", 0) else None


class without_values:
    """Context: no values while a user's `jit` is inlined in a trace with them (jit's rule)."""

    def __enter__(self):
        self.saved = getattr(_local, "blocked", 0)
        _local.blocked = self.saved + 1

    def __exit__(self, *exc):
        _local.blocked = self.saved


class constant_values:
    """Context: a program traced inside it whose arguments are constants (NumPy values, not
    staged) has their values, though the enclosing trace has none; no guard or hidden
    argument reaches the enclosing program (the constants are its own). What lets the
    pullback of `vjp`, called under `jit` or `vmap`, run Python's decisions on the primals
    as the forward call did."""

    def __enter__(self):
        self.saved = current(), getattr(_local, "blocked", 0)
        _local.trace, _local.blocked = ConcreteTrace(), 0
        _local.trace.detached = True
        return _local.trace

    def __exit__(self, *exc):
        _local.trace, _local.blocked = self.saved


_COMBINATORS = {"IF": "IF", "WHILE": "WHILE", "FOR": "FOR", "TREE": "TREE", "scan": "scan", "fori_loop": "fori_loop",
                "while_loop": "while_loop", "cond": "cond", "switch": "switch", "checkpoint": "checkpoint",
                "remat": "checkpoint", "vmap_staged": "vmap", "map": "lax.map"}


def enclosing_combinator():
    """The name of the jitad combinator the Python stack is inside (the one the user called,
    where jitad's own combinators are built on others), or None."""
    f, innermost = sys._getframe(1), None
    while f is not None:
        name, where = f.f_code.co_name, None
        if name in _COMBINATORS and f.f_code.co_filename.startswith(_PKG):
            where = _COMBINATORS[name]
        elif name == "__call__" and type(f.f_locals.get("self")).__name__ in ("FUN", "checkpoint"):
            where = type(f.f_locals["self"]).__name__
        if where is not None:
            innermost = innermost or where
            if f.f_back is not None and not f.f_back.f_code.co_filename.startswith(_PKG):
                return where
        f = f.f_back
    return innermost


_PKG = __file__.rsplit("/", 2)[0] + "/"


def decision(staged, kind, refuse):
    """A Python decision (`bool`, `int`, an index) on a staged value: the concrete value
    where the trace has one (guarded), else `refuse()`, the StagingError to raise."""
    c = frame_values()
    if c is None:
        c = current()
        if c is not None:
            where = enclosing_combinator()
            if where is not None:
                why = ("its lanes may decide differently, and one lane's branch must not apply to all"
                       if where == "vmap" else "the body is traced once for every value it will see, so it "
                       "has no single value to decide on")
                raise StagingError(f"a Python decision (`if`, `while`, `int()`, an index) on a staged value "
                                   f"inside the body of `{where}`: {why}. Decide outside the `{where}` "
                                   "body, or stage the decision in it (`jitad.IF`, `jitad.numpy.where`).")
        raise refuse()
    try:
        return c.decide(staged, kind)
    except NoValue:
        raise refuse() from None


def to_array(staged, dtype, refuse):
    """NumPy's conversion of a staged value to an integer or bool dtype (`np.int64(x)`, what
    NumPy's scalar types do) while tracing with values: the value, a NumPy array (data: an
    integer carries no derivative), guarded; else (no values, or a float dtype, which would
    drop the derivative) `refuse()`."""
    c = frame_values()
    if c is None or dtype is None or np.dtype(dtype).kind not in "biu":
        raise refuse()
    try:
        return c.convert(staged, np.dtype(dtype))
    except NoValue:
        raise refuse() from None


def to_float(staged, refuse):
    """`float(staged)` while tracing with values: the value, guarded (to a few ulps: the
    trace's NumPy value and the compiled code's may differ in the last bits), else `refuse()`.
    A Python float carries no derivative: where it feeds the computation it is a constant."""
    return float(decision(staged, "float", refuse))


# -- symbolic ints --------------------------------------------------------------------------

def _expression(x):
    """`env -> value` for a symbolic int or a plain int, else None."""
    if type(x) is SymInt:
        return x.expr
    if type(x) is int or isinstance(x, np.integer):
        v = int(x)
        return lambda env: v
    return None


def _value(x):
    return x.value if type(x) is SymInt else int(x)


class SymInt:
    """An int argument of the call traced as a symbol (`grad(objective)(params, i)`): one
    trace serves every value. `expr(env)` is its value for a call whose symbolic ints are
    `env`. Arithmetic with ints gives another SymInt; a comparison, `bool` or
    `expr != 0` is a guard of the path on the expression; any other use (an index of an
    array it does not read through a `SourceView`, `range`, `float`, a hash, a string) takes
    the plain int, guarded equal to this call's value (the path then serves it only).

    >>> c = ConcreteTrace()
    >>> i = SymInt(7, operator.itemgetter(0), c)
    >>> j = (i % 4) * 10
    >>> j.value, j.expr((9,)), (i < 10), c.int_guards[0][1]
    (30, 10, True, True)
    """
    __slots__ = ("value", "expr", "trace")

    def __init__(self, value, expr, trace):
        self.value, self.expr, self.trace = value, expr, trace

    @property
    def __class__(self):   # (`isinstance(i, int)` holds, as it does for the int it stands for)
        return int

    def concrete(self):
        """The plain int, guarded: the path serves calls where this expression has this value."""
        self.trace.int_guard(self.expr, self.value, exact=True)
        return self.value

    def staged_var(self):
        """The var standing for this int in the program being traced: an i64 argument the
        dispatcher computes at each call (a constant where the frame has no values)."""
        c = frame_values()
        if c is not self.trace:
            return emit(Op.CONST, [], {"value": self.concrete(), "type": _I64})[0]
        return c.hidden_param(self.value, ("int", self.expr), _I64)

    def __index__(self):
        return self.concrete()

    __int__ = __trunc__ = __index__

    def __float__(self):
        return float(self.concrete())

    def __complex__(self):
        return complex(self.concrete())

    def __hash__(self):
        return hash(self.concrete())

    def __repr__(self):
        return repr(self.concrete())

    def __format__(self, spec):
        return format(self.concrete(), spec)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.concrete(), dtype=dtype)

    def __getattr__(self, name):   # (`i.bit_length()`, `i.real`: the plain int's; a probe for
        if not hasattr(int, name):   # another attribute is no use of the value)
            raise AttributeError(name)
        return getattr(self.concrete(), name)

    def __bool__(self):
        e, value = self.expr, self.value != 0
        self.trace.int_guard(lambda env: e(env) != 0, value)
        return value

    def __neg__(self):
        e = self.expr
        return SymInt(-self.value, lambda env: -e(env), self.trace)

    def __abs__(self):
        e = self.expr
        return SymInt(abs(self.value), lambda env: abs(e(env)), self.trace)

    def __pos__(self):
        return self

    def __round__(self, ndigits=None):
        return self if ndigits is None else round(self.concrete(), ndigits)


def _arithmetic(op):
    def forward(self, other):
        e, a = _expression(other), self.expr
        if e is None:
            return op(self.concrete(), other)
        return SymInt(op(self.value, _value(other)), lambda env: op(a(env), e(env)), self.trace)

    def reflected(self, other):
        e, a = _expression(other), self.expr
        if e is None:
            return op(other, self.concrete())
        return SymInt(op(_value(other), self.value), lambda env: op(e(env), a(env)), self.trace)
    return forward, reflected


def _comparison(op):
    def compare(self, other):
        e, a = _expression(other), self.expr
        if e is None:
            return op(self.concrete(), other)
        value = op(self.value, _value(other))
        self.trace.int_guard(lambda env: op(a(env), e(env)), value)
        return value
    return compare


for _name in ("add", "sub", "mul", "floordiv", "mod", "lshift", "rshift", "and", "or", "xor"):
    _op = getattr(operator, _name + "_" if _name in ("and", "or") else _name)
    setattr(SymInt, f"__{_name}__", _arithmetic(_op)[0])
    setattr(SymInt, f"__r{_name}__", _arithmetic(_op)[1])
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(SymInt, f"__{_name}__", _comparison(getattr(operator, _name)))


def _pow(self, other, mod=None):
    if mod is None and type(other) is int and other >= 0:
        e = self.expr
        return SymInt(self.value ** other, lambda env: e(env) ** other, self.trace)
    return pow(self.concrete(), other, mod) if mod is not None else self.concrete() ** other


SymInt.__pow__ = _pow
SymInt.__truediv__ = lambda self, other: self.concrete() / other
SymInt.__rtruediv__ = lambda self, other: other / self.concrete()
SymInt.__rpow__ = lambda self, other: other ** self.concrete()


def _has_symbol(key):
    if type(key) is SymInt:
        return True
    if type(key) is slice:
        return any(type(k) is SymInt for k in (key.start, key.stop, key.step))
    return type(key) is tuple and any(_has_symbol(k) for k in key)


def _template(key):
    """`env -> key` for an index made of symbolic ints, ints, slices, None and Ellipsis (a
    tuple of them), else None."""
    if type(key) is slice:
        parts = [_template(k) for k in (key.start, key.stop, key.step)]
        if None in parts:
            return None
        a, b, s = parts
        return lambda env: slice(a(env), b(env), s(env))
    if type(key) is tuple:
        parts = [_template(k) for k in key]
        return None if None in parts else lambda env: tuple(p(env) for p in parts)
    if key is None or key is Ellipsis:
        return lambda env: key
    return _expression(key)


def _plain(key):
    """The index with each symbolic int replaced by its value (no guard: the caller guards)."""
    if type(key) is SymInt:
        return key.value
    if type(key) is slice:
        return slice(_plain(key.start), _plain(key.stop), _plain(key.step))
    return tuple(_plain(k) for k in key) if type(key) is tuple else key


class SourceView(np.ndarray):
    """An array the traced function reads (a global, a closure cell, an attribute of a bound
    method's object), as the function sees it while a trace with symbolic ints runs:
    indexing it with a symbolic int (`train_images[i * 50:(i + 1) * 50]`) gives a staged
    argument of the program that the dispatcher computes from the source at each call (its
    shape guarded), not a constant; everything else is the array's own behaviour."""

    def __getitem__(self, key):
        source = self.__dict__.get("source")
        if source is None or not _has_symbol(key):
            return (source if source is not None else self.view(np.ndarray))[key]
        c, template = frame_values(), _template(key)
        read = c.sources.get(id(source)) if c is not None else None
        if template is None or read is None or read[1] is not source or not _same_trace(key, c):
            return source[key]   # (each symbolic int's value taken, guarded)
        value = np.asarray(source[_plain(key)])
        dtype = dtype_of_numpy(value.dtype)
        if dtype is None:
            return source[key]
        var = c.hidden_param(value, ("slice", read[0], template, value.shape), Type(dtype, value.shape))
        return STAGED[0](var)

    def __iter__(self):   # rows by position: the default would index on until IndexError, and a
        if self.ndim == 0:   # jitad array source clamps indexes past its end, so it never stops
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))


def _same_trace(key, c):
    if type(key) is SymInt:
        return key.trace is c
    if type(key) is slice:
        return all(_same_trace(k, c) for k in (key.start, key.stop, key.step))
    return all(_same_trace(k, c) for k in key) if type(key) is tuple else True


def source_view(array):
    """`array` seen through a `SourceView` (see there)."""
    v = array.view(SourceView)
    v.source = array
    return v
