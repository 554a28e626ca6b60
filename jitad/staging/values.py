"""The staged value type: `Staged` holds a `Var`, and every operation on it records a node
(`StagedTree` for a tree); how Python numbers, NumPy arrays and staged values combine
(NumPy's promotion, bools as NumPy treats them) and convert."""
from functools import reduce
from typing import Any

import numpy as np

from ..config import x64_enabled
from ..errors import ArgumentError, StagingError, UnsupportedError
from ..ir import float_checks
from ..ir.ops import Op, impl_of
# N: jitad.numeric, a layer above, which Staged's methods call (x.sum(), x.T, x[i]): see rules.N
from ..primitives.rules import N
from ..ir.types import FLOATS, NUMPY, Type, TreeType, check_int64_range, clean_bools, dtype_of_numpy, promote
from . import concrete
from .frames import emit


def _staging_error(what, fix):
    return StagingError(f"{what} on a staged value cannot be traced: its value is only "
                        f"known when the compiled code runs. {fix}")


_BOOL_FIX = ("For `if`, use `jitad.IF(pred, then_fn, else_fn, *operands)`; for `while`, "
             "`jitad.WHILE(cond_fn, body_fn, init)`; `and`/`or`/`not` become `&`, `|`, `~`.")
_JIT_RULE = (" (The rule: under `jit` and `vmap`, and inside IF/WHILE/FOR/scan/FUN bodies, Python cannot "
             "decide on a staged value; `grad`, `jacobian`, `vjp`, `jvp` called from Python trace with the "
             "call's values and may decide, or mark the argument static with `static_argnums`.)")


_NP_DTYPES = {k: np.dtype(v) for k, v in NUMPY.items()}
# without `jax_enable_x64` an int is JAX's int32: i64 in the IR, wrapped to 32 bits
_NP_DTYPES_32 = {**_NP_DTYPES, "i64": np.dtype(np.int32)}


def numpy_dtype(ir_dtype):
    """NumPy's dtype of an IR dtype ('f64': float64), ints JAX's int32 where
    `jax_enable_x64` is off (they are i64 in the IR, wrapped to 32 bits).

    >>> numpy_dtype("f32")
    dtype('float32')
    """
    return (_NP_DTYPES if x64_enabled() else _NP_DTYPES_32)[ir_dtype]


# the 32-bit dtype JAX holds each 64-bit one in without `jax_enable_x64`
NARROW = {np.dtype(wide): np.dtype(narrow) for wide, narrow in (
    (np.float64, np.float32), (np.int64, np.int32), (np.uint64, np.uint32), (np.complex128, np.complex64))}


def narrowed(x: Any, ints: bool = True, wrap: bool = False) -> Any:
    """`x` as JAX holds it where `jax_enable_x64` is off: a 64-bit float array or NumPy
    scalar as float32, a Python float as `np.float32`, and (unless `ints` is false) a
    64-bit int array or NumPy scalar, or a Python int, as int32 where all its values fit
    (a larger one, such as one of jitad's PRNG keys, an int64 word, keeps its dtype: never
    silently wrapped), or with `wrap` (a result computed from int32 values) its low 32 bits
    as JAX's int32 arithmetic gives. Anything else, and everything where the setting is on
    (jitad's default), unchanged.

    >>> jitad.dtypes.narrowed(np.arange(3)).dtype   # x64 on: as it was
    dtype('int64')
    """
    if x64_enabled():
        return x
    if isinstance(x, (np.ndarray, np.generic)):
        narrow = NARROW.get(x.dtype)
        if narrow is None or (narrow.kind != "f" and not (ints and (wrap or _fits(x, narrow)))):
            return x
        return x.astype(narrow)
    if type(x) is float:
        return np.float32(x)
    if type(x) is int and ints and -2**31 <= x < 2**31:
        return np.int32(x)
    return x


def _fits(x, narrow):
    info = np.iinfo(narrow)
    return x.size == 0 or (info.min <= x.min() and x.max() <= info.max)


def narrowed_result(out: Any, inputs) -> Any:
    """An eager result `out` as JAX's where `jax_enable_x64` is off: floats 32-bit, and ints
    wrapped to int32 unless an input is a 64-bit int (jitad's own host code counts in
    int64: then they stay)."""
    if x64_enabled():
        return out
    wide = any(getattr(x, "dtype", None) in (np.int64, np.uint64) for x in inputs)
    return narrowed(out, ints=not wide, wrap=True)


def default_float():
    """The IR dtype of a Python float and of float math on ints: f64, or f32 where
    `jax_enable_x64` is off (JAX's 32-bit defaults).

    >>> default_float()
    'f64'
    """
    return "f64" if x64_enabled() else "f32"


def _operators(op):
    """A staged value's operator `op` and its reflected form (`__add__`, `__radd__`), each
    giving way to another library's array-like (`foreign_array`)."""
    return (lambda a, b: NotImplemented if foreign_array(b) else binary(op, a, b),
            lambda a, b: NotImplemented if foreign_array(b) else binary(op, b, a))


class Staged:
    """A staged scalar: arithmetic on it records graph nodes. `weak`: its dtype is weak, as
    JAX's Python scalars are (it came from Python numbers, or an argument passed as one):
    combined with a strong value of the same kind it takes that value's dtype, so
    `0.9 ** step * w` keeps a float32 `w` float32."""
    __slots__ = ("_var", "weak")
    __hash__ = object.__hash__
    type_mappings = {}   # a user's value type -> its box class (autograd's `Box.register`)

    @classmethod
    def register(cls, value_type):
        """autograd's `Box.register`: `cls` boxes values of `value_type`. jitad stages arrays
        only; such a value is differentiated through its vector space (`VSpace.register`)."""
        Staged.type_mappings[value_type] = Staged.type_mappings[cls] = cls

    # NumPy functions on staged values run the jitad function of the same name, or raise
    # a StagingError naming what to call (`np.ones(3) + x` comes here too)
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if any(foreign_array(x) for x in inputs):
            return NotImplemented   # the other library's container applies the ufunc to its contents
        return N.numpy_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return N.numpy_function(func, args, kwargs)

    def __array__(self, dtype=None, copy=None):   # (to an integer dtype with values: see `concrete`)
        return concrete.to_array(self, dtype, lambda: _staging_error(
            "Converting it to a NumPy array (`np.asarray`, `np.array`, NumPy's scalar types such as "
            "`np.int64(x)`, or indexing a NumPy array with it)",
            "Stay with jitad functions: convert with `x.astype(np.int64)`; index a NumPy constant `table` as "
            "`jitad.numpy.asarray(table)[i]` or `jitad.take(table, i)`; `jitad.stack([...])` builds an "
            "array from staged values."))

    def __init__(self, var, weak=False):
        self._var = var
        self.weak = weak

    @property
    def dtype(self):
        """NumPy's dtype: `x.dtype == np.float64` (the IR's name, 'f64', is `x.ir_dtype`)."""
        return numpy_dtype(self._var.type.dtype)

    @property
    def ir_dtype(self):
        return self._var.type.dtype

    @property
    def shape(self):
        return self._var.type.shape

    def __repr__(self):
        return f"Staged({self._var.type})"

    # under `grad` called from Python these decide on the call's values (guarded, see
    # `concrete`); under `jit`, `vmap` and inside combinator bodies they raise
    def __bool__(self):
        self._scalar_decision("bool()")
        return concrete.decision(self, "bool", lambda: _staging_error(
            "Python `if`, `while`, `and`, `or`, `not` or `bool()`", _BOOL_FIX + _JIT_RULE))

    def __int__(self):
        self._scalar_decision("int()")
        return concrete.decision(self, "int", lambda: _staging_error(
            "`int()`", "Use `jitad.convert(x, 'i64')` to stay staged." + _JIT_RULE))

    def __float__(self):
        self._scalar_decision("float()")
        return concrete.to_float(self, lambda: _staging_error(
            "`float()`", "Use `jitad.convert(x, 'f64')` to stay staged." + _JIT_RULE))

    def __index__(self):
        def refuse():
            return _staging_error(
                "Using it as a Python index or `range()` bound",
                "Use `jitad.FOR(lower, upper, body_fn, init)` for a staged loop bound; index a NumPy constant "
                "`table` as `jitad.numpy.asarray(table)[i]` or `jitad.take(table, i)`." + _JIT_RULE)
        if self.ir_dtype not in ("i64", "bool") and concrete.frame_values() is not None:
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        self._scalar_decision("an index")
        return concrete.decision(self, "int", refuse)

    def _scalar_decision(self, what):
        if self.shape and int(np.prod(self.shape)) != 1 and concrete.frame_values() is not None:
            raise TypeError(f"{what} of an array with {int(np.prod(self.shape))} elements is ambiguous "
                            "(as in NumPy); use .any() or .all(), or index one element")

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
    real = property(lambda self: self)   # a real value's parts, as NumPy's arrays have them
    imag = property(lambda self: N.zeros_like(self))
    conj = conjugate = lambda self: self

    sum = lambda self, axis=None, keepdims=False: N.sum(self, axis, keepdims)
    mean = lambda self, axis=None, keepdims=False: N.mean(self, axis, keepdims)
    max = lambda self, axis=None, keepdims=False: N.max(self, axis, keepdims)
    min = lambda self, axis=None, keepdims=False: N.min(self, axis, keepdims)

    def item(self):
        if concrete.frame_values() is not None:
            self._scalar_decision("item()")
            return float(self) if self.ir_dtype in FLOATS else int(self) if self.ir_dtype == "i64" else bool(self)
        raise _staging_error("`item()`", "Return the value from the jitted function to get a Python number.")

    tolist = item

    def astype(self, dtype):
        if _complex_dtype(dtype):   # a complex value of zero imaginary part, then its precision
            return binary(Op.ADD, self, 0j).astype(dtype)
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

    # an operand that is another library's array-like (xarray's DataArray)
    # handles the operator itself: it meets this value again through `__array_ufunc__`
    __add__, __radd__ = _operators(Op.ADD)
    __sub__, __rsub__ = _operators(Op.SUB)
    __mul__, __rmul__ = _operators(Op.MUL)
    __truediv__, __rtruediv__ = _operators(Op.DIV)
    __pow__ = lambda a, b: NotImplemented if foreign_array(b) else power(a, b)
    __rpow__ = _operators(Op.POW)[1]
    __mod__, __rmod__ = _operators(Op.MOD)
    __floordiv__, __rfloordiv__ = _operators(Op.FLOORDIV)
    __lt__ = _operators(Op.LT)[0]
    __le__ = _operators(Op.LE)[0]
    __gt__ = _operators(Op.GT)[0]
    __ge__ = _operators(Op.GE)[0]
    __eq__ = _operators(Op.EQ)[0]
    __ne__ = _operators(Op.NE)[0]
    __and__ = lambda a, b: logical(Op.AND, a, b)
    __rand__ = lambda a, b: logical(Op.AND, b, a)
    __or__ = lambda a, b: logical(Op.OR, a, b)
    __ror__ = lambda a, b: logical(Op.OR, b, a)
    __invert__ = lambda a: unary(Op.NOT, a) if a.ir_dtype in ("bool", "i64") else _bad_logical("~", a)
    __neg__ = lambda a: unary(Op.NEG, a)
    __pos__ = lambda a: a
    __abs__ = lambda a: unary(Op.ABS, a)


concrete.STAGED[0] = Staged   # (a slice at a symbolic int is a staged value: see `concrete.SourceView`)


class StagedTree:
    """A staged `jitad.Tree` input; use it with `TREE`."""
    __slots__ = ("_var",)

    def __init__(self, var):
        self._var = var

    def __repr__(self):
        return f"StagedTree({self._var.type})"


def is_staged(x):
    return isinstance(x, Staged)


_OWN_OPERANDS = frozenset((Staged, bool, int, float, np.ndarray, np.float64, np.float32, np.int64, np.bool_, tuple, list))


def foreign_array(x):
    """Whether `x` is another library's array-like that takes part in NumPy's ufunc protocol
    (xarray's `DataArray`): operators and ufuncs given one defer to it, as NumPy's own do,
    and it hands its contents back through `Staged.__array_ufunc__`. (pandas' `Series`
    takes part too, but makes a NumPy array of what it holds: a staged value in one stops
    there with a `StagingError`, as autograd's boxes stop with an error.)

    >>> import numpy as np
    >>> foreign_array(np.ones(2)), foreign_array(3.0)
    (False, False)
    """
    t = type(x)
    if t in _OWN_OPERANDS:
        return False
    return (hasattr(t, "__array_ufunc__") and not isinstance(x, (np.ndarray, np.generic, Staged))
            and not t.__module__.startswith("jitad"))


def wrap(var):
    """The proxy of a var: `StagedTree` for trees, else `Staged`."""
    return StagedTree(var) if isinstance(var.type, TreeType) else Staged(var)


def is_weak(x):
    """Whether `x` is weakly typed: a Python number, or a weak staged value."""
    if isinstance(x, Staged):
        return x.weak
    # Python's numbers; NumPy's 64-bit scalars too, which select the same compiled code
    return isinstance(x, (bool, int, float)) or type(x) in (np.float64, np.int64, np.bool_)


def _refuse_masked(x, where):
    if isinstance(x, np.ma.MaskedArray):
        raise ArgumentError(f"a masked array (numpy.ma) {where}: jitad would ignore its mask; "
                            "pass `x.filled(value)` (masked entries replaced) or `x.data`")


_ARRAY_DTYPES = {}   # NumPy dtype -> jitad's dtype name (None: not one of jitad's)


def _array_dtype(dt):
    found = _ARRAY_DTYPES.get(dt, False)
    if found is False:
        found = _ARRAY_DTYPES[dt] = dtype_of_numpy(dt)
    return found


def _array_kind(x):
    """(dtype, weak) of an array of one of jitad's dtypes: a 0-d array is weakly typed."""
    dtype = _array_dtype(x.dtype)
    return ("f32" if dtype == "f64" and not x64_enabled() else dtype), x.ndim == 0


def _kind(x):
    """(dtype, weak): Python and NumPy scalars are weakly typed, as in JAX."""
    if type(x) is np.ndarray and _array_dtype(x.dtype):   # (the eager calls' usual operand first)
        return _array_kind(x)
    if isinstance(x, Staged):
        return x.ir_dtype, x.weak
    if type(x) is concrete.SymInt:
        return "i64", True
    _refuse_masked(x, "in staged code")
    if isinstance(x, (bool, np.bool_)):
        return "bool", True
    if isinstance(x, (int, np.integer)):
        return "i64", True
    if isinstance(x, np.float32):
        return "f32", True
    if isinstance(x, (float, np.floating)):
        return default_float(), True
    if isinstance(x, np.ndarray) and _array_dtype(x.dtype):
        return _array_kind(x)
    if _complex_operand(x):
        raise UnsupportedError("a complex value reached an operation that takes real values only: jitad's complex "
                               "support covers NumPy's arithmetic, elementwise math, reductions, products, fft "
                               "and linear solves (docs/complex.md); take `z.real` and `z.imag` for the rest")
    raise ArgumentError(f"cannot use a value of type {type(x).__name__} in staged arithmetic; "
                        "use numbers or staged values")


_CATEGORY = {"bool": 0, "i64": 1, "f32": 2, "f64": 2}


def result_kind(*xs):
    """(dtype, weak) of an operation on `xs`, by JAX's rules: the strong operands'
    promotion, lifted to a weak operand's kind where that is higher (an int and a Python
    float give a float); weak when every operand is, or when a weak operand lifted it."""
    kinds = [_kind(x) for x in xs]
    strong = [d for d, weak in kinds if not weak]
    dtype = reduce(promote, strong or [d for d, _ in kinds])
    weak = not strong
    for d, w in kinds:
        if w and _CATEGORY[d] > _CATEGORY[dtype]:
            dtype, weak = d, True
    if dtype == "f64" and "f64" not in strong and not x64_enabled():   # an int and a float32 (JAX's)
        dtype = "f32"
    return dtype, weak


def result_dtype(*xs):
    return result_kind(*xs)[0]


def as_var(x, dtype=None):
    """The var of `x` (a staged value or a Python number) converted to `dtype`."""
    if type(x) is concrete.SymInt:   # an int argument traced as a symbol: an argument of the program
        x = Staged(x.staged_var(), True)
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
        c = concrete.current()
        if c is not None and c.root is not None:   # an argument of the program, not a constant
            return c.array_param(x, Type(dtype, x.shape))
        value = np.array(clean_bools(x), dtype=NUMPY[dtype], order="C")
        value.flags.writeable = False
        return emit(Op.CONST, [], {"value": value, "type": Type(dtype, value.shape)})[0]
    value = {"bool": bool, "i64": int, "f32": float, "f64": float}[dtype](x)
    return emit(Op.CONST, [], {"value": value, "type": Type(dtype)})[0]


_F32 = np.dtype(np.float32)


def _eager(op, *xs):
    for x in xs:
        _kind(x if isinstance(x, np.ndarray) or np.ndim(x) == 0 else np.asarray(x))   # numbers only
    with np.errstate(all="ignore"):
        values = [np.asarray(x)[()] for x in xs]
        if len(xs) > 1 and any(_is_f32(v) for v in values):
            # Python numbers are weakly typed: float32 and a Python float give float32, as NumPy
            values = [np.float32(x) if type(x) in (float, int) else v for x, v in zip(xs, values)]
        if op.float_only:   # as when staged: ints and bools compute in f64
            values = [v if np.asarray(v).dtype.kind == "f" else np.float64(v) for v in values]
        return narrowed_result(float_checks.check_eager(op, impl_of(op)(*values)), xs)


def _is_f32(v):
    dt = getattr(v, "dtype", None)
    return dt is not None and (dt is _F32 or dt == _F32)


_BOOL_ARITH = {Op.ADD: Op.OR, Op.MUL: Op.AND, Op.MAXIMUM: Op.OR, Op.MINIMUM: Op.AND}


def _complex_dtype(dtype):
    try:
        return np.dtype(dtype).kind == "c"
    except TypeError:   # (an IR dtype name: 'f64')
        return False


def _complex_operand(x):
    return type(x) is complex or getattr(getattr(x, "dtype", None), "kind", None) == "c"


# staging/complex.py's `binary_op(op, a, b)`, which it puts here when imported (it builds on
# this module): an operation with a complex operand, on the real and imaginary parts
COMPLEX_BINARY = []


def binary(op, a, b):
    if (type(a) is not Staged or type(b) is not Staged) and (_complex_operand(a) or _complex_operand(b)):
        return COMPLEX_BINARY[0](op, a, b)
    if not (is_staged(a) or is_staged(b)):
        return _eager(op, a, b)
    dtype, weak = result_kind(a, b)
    if op.float_only and dtype not in FLOATS:
        dtype = default_float()
    if dtype == "bool" and op.arith:   # as NumPy: + is or, * is and, the rest on ints
        if op == Op.SUB:
            raise ArgumentError("`-` on two bools is not supported (as in NumPy); use `^`-like "
                                "logic with `&`, `|`, `~`, or convert to int first")
        if op in _BOOL_ARITH:
            op = _BOOL_ARITH[op]
        else:
            dtype = "i64"
    return Staged(_wrapped(op, emit(op, [as_var(a, dtype), as_var(b, dtype)])[0]), weak)


_WRAPPING = frozenset((Op.ADD, Op.SUB, Op.MUL, Op.NEG, Op.ABS, Op.POW, Op.SQUARE))


def _wrapped(op, var):
    """`var`, or where `jax_enable_x64` is off and `op` on ints can leave the int32 range,
    its low 32 bits sign-extended (ints are i64 in the IR): JAX's int32 wraparound
    (`2**31 - 1 + 1` is `-2**31`)."""
    if var.type.dtype != "i64" or op not in _WRAPPING or x64_enabled():
        return var
    high = emit(Op.SHIFT_LEFT, [var, as_var(32, "i64")])[0]
    return emit(Op.SHIFT_RIGHT_ARITHMETIC, [high, as_var(32, "i64")])[0]


def power(x, n):
    """`x ** n`. A float `x` to a constant integer power (a Python or NumPy int, or a float
    with an integer value, |n| <= 64) is squarings and products, as JAX's `integer_pow`:
    no `pow` call (x ** 3 over 10^6 elements: 21 -> 0.27 ms) and no log(x) in its
    derivatives (a `pow` node's exponent derivative, NaN at x < 0)."""
    if type(n) is concrete.SymInt:   # (an integer power unrolls: its value is part of the program)
        n = n.concrete()
    if _complex_operand(n):
        return binary(Op.POW, x, n)
    dtype = result_dtype(x, n) if is_staged(x) else None
    if dtype not in FLOATS or is_staged(n) or isinstance(n, (bool, np.bool_)) \
            or not isinstance(n, (int, float, np.integer, np.floating)) or n != np.trunc(n) or abs(n) > 64:
        return binary(Op.POW, x, n)
    if n == 0:   # 1, as NumPy's x ** 0 for every x (inf and NaN too), with derivatives 0
        return N.broadcast_to(Staged(as_var(1.0, dtype)), x.shape)
    x, k = Staged(as_var(x, dtype), x.weak), int(abs(n))
    if n < 0:   # (1/x)**k, not 1/x**k: at x = 0 or inf its derivative is k x**(n-1) (±inf, -0), not NaN
        x = 1.0 / x
    return by_squaring(x, k, lambda a, b: a * b, lambda a: unary(Op.SQUARE, a))


def by_squaring(base, k, times, square=None):
    """`base` to the power `k` (an int >= 1) from `k`'s bits: squarings (`square`, by default
    `times(b, b)`) and products (`times`), about 2 log2(k) of them.

    >>> by_squaring(3, 5, lambda a, b: a * b)
    243
    """
    square = square or (lambda b: times(b, b))
    result = None
    while k:
        if k & 1:
            result = base if result is None else times(result, base)
        k >>= 1
        if k:
            base = square(base)
    return result


def unary(op, x):
    if not is_staged(x):
        if op in (Op.SQUARE, Op.RELU) and np.asarray(x).dtype == np.bool_:   # ints, as staged
            x = np.asarray(x, np.int64)
        return _eager(op, x)
    dtype = x.ir_dtype
    if op.float_only and dtype not in FLOATS:
        dtype = default_float()
    if dtype == "bool" and op == Op.ABS:   # |b| is b, a bool (NumPy, JAX)
        return x
    if dtype == "bool" and op == Op.NEG:
        raise ArgumentError("`-` on a bool is not supported (as in NumPy and JAX); use `~x` or "
                            "`jitad.logical_not(x)`, or convert to int first")
    if op in (Op.SQUARE, Op.RELU) and dtype == "bool":
        dtype = "i64"
    return Staged(_wrapped(op, emit(op, [as_var(x, dtype)])[0]), x.weak)


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
