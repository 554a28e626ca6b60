"""Shapes without values and the stages of compilation, with JAX's names:
`ShapeDtypeStruct`, abstract values (`ShapedArray`, what `jitad.typeof` gives), the
staged program (`ClosedJaxpr`, what `make_jaxpr` gives), and ahead-of-time compiling,
`jitad.jit(f).trace(x)` -> `Traced`, `.lower()` -> `Lowered`, `.compile()` -> `Compiled`.

>>> lowered = jitad.jit(lambda x: x * 2.0).lower(np.ones(3))
>>> compiled = lowered.compile()
>>> compiled(np.arange(3.0))
Array([0., 2., 4.])
"""
import numpy as np

from .errors import ArgumentError, check_argnums
from .ir.types import Type, dtype_of_numpy
from .ir.verify import verify
from .pytree import flatten, unflatten
from .staging import is_staged, trace_program
from .staging.tracer import arg_type
from .staging.values import numpy_dtype

__all__ = ["ClosedJaxpr", "Compiled", "Lowered", "ShapeDtypeStruct", "ShapedArray", "Traced", "Wrapped"]

FLOAT0 = np.dtype([("float0", np.void, 0)])   # JAX's dtype of the gradient of an int
NUMPY_DTYPES = {"f64": np.dtype(np.float64), "f32": np.dtype(np.float32), "i64": np.dtype(np.int64),
                "bool": np.dtype(np.bool_)}


def _numpy_dtype(dtype):
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise ArgumentError(f"{dtype!r} is not a dtype; give np.float64, np.float32, np.int64, np.bool_ "
                            "or their names") from None
    if dtype_of_numpy(dt) is None and dt != FLOAT0:
        raise ArgumentError(f"dtype {dt} is not one jitad computes in; use float64, float32, an int or bool")
    return dt


class ShapeDtypeStruct:
    """A shape and dtype standing for an array (JAX's): what `eval_shape` takes and gives.

    >>> jitad.ShapeDtypeStruct((2, 3), np.float32).size
    6
    """
    __slots__ = ("shape", "dtype", "sharding", "weak_type")

    def __init__(self, shape, dtype, sharding=None, weak_type=False):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = _numpy_dtype(dtype)
        self.sharding, self.weak_type = sharding, bool(weak_type)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self):
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"

    def __eq__(self, other):
        return isinstance(other, ShapeDtypeStruct) and (self.shape, self.dtype, self.weak_type) == \
            (other.shape, other.dtype, other.weak_type)

    def __hash__(self):
        return hash((self.shape, self.dtype, self.weak_type))


class ShapedArray:
    """The abstract value of an array (`jitad.typeof`): prints as `float64[3]`, with `~`
    in front for a Python scalar's weak type."""
    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape, dtype, weak_type=False):
        self.shape, self.dtype, self.weak_type = tuple(shape), np.dtype(dtype), weak_type

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))

    def __str__(self):
        return f"{'~' if self.weak_type else ''}{self.dtype.name}[{','.join(map(str, self.shape))}]"

    __repr__ = __str__

    def __eq__(self, other):
        return isinstance(other, ShapedArray) and str(self) == str(other)

    def __hash__(self):
        return hash(str(self))


def leaf_type(x):
    """The IR type of an argument leaf (a ShapeDtypeStruct or a value)."""
    if isinstance(x, (ShapeDtypeStruct, ShapedArray)):
        return Type(dtype_of_numpy(x.dtype), x.shape)
    if is_staged(x):
        return x._var.type
    return arg_type(x)


def trace_at(fun, args, kwargs, static_argnums=()):
    """(program, out treedef) of `fun(*args, **kwargs)` traced at the leaves' types."""
    nums = {i % len(args) for i in check_argnums(static_argnums, "make_jaxpr", "static_argnums",
                                                  allow_empty=True)} if args else set()
    dynamic = tuple(a for i, a in enumerate(args) if i not in nums)

    def staged(*dyn, **kw):
        it = iter(dyn)
        return fun(*[args[i] if i in nums else next(it) for i in range(len(args))], **kw)
    leaves, td = flatten((dynamic, kwargs))
    program, out_td, _ = trace_program(lambda a, k: staged(*a, **k), (dynamic, kwargs), td,
                                       [leaf_type(x) for x in leaves])
    return program, out_td


def structs(program, out_td):
    return unflatten(out_td, [ShapeDtypeStruct(t.shape, numpy_dtype(t.dtype)) for t in program.main.out_types])


class ClosedJaxpr:
    """A staged program (what `make_jaxpr` gives): `str()` prints jitad's IR; `in_avals`
    and `out_avals` are the abstract values of its inputs and outputs."""

    def __init__(self, program):
        self.program = program
        self.jaxpr, self.consts = self, []
        self.in_avals = [ShapedArray(t.shape, numpy_dtype(t.dtype)) for t in program.main.in_types]
        self.out_avals = [ShapedArray(t.shape, numpy_dtype(t.dtype)) for t in program.main.out_types]

    @property
    def eqns(self):
        """The program's top-level nodes."""
        return list(self.program.main.nodes)

    def __str__(self):
        return str(self.program)

    __repr__ = __str__

    def pretty_print(self, **_):
        return str(self)


# -- ahead-of-time compiling ---------------------------------------------------------

class Traced:
    """`jitted.trace(*args)`: the program traced at the arguments' shapes and dtypes
    (`jaxpr`, `in_avals`, `out_avals`, `out_info`); `lower()` goes on."""

    def __init__(self, jitted, args, kwargs):
        self._jitted, self._args, self._kwargs = jitted, args, kwargs
        program, out_td = trace_at(jitted.fn, args, kwargs, getattr(jitted, "static_argnums", ()))
        self.jaxpr = ClosedJaxpr(verify(program))
        self.in_avals, self.out_avals = self.jaxpr.in_avals, self.jaxpr.out_avals
        self.out_info = structs(program, out_td)
        self.fun_name = getattr(jitted.fn, "__name__", "fun")
        self._signature = [leaf_type(x) for x in flatten((args, kwargs))[0]]
        self._in_td = flatten((args, kwargs))[1]

    def lower(self):
        """The `Lowered` stage."""
        return Lowered(self)


class Lowered:
    """A traced function ready to compile: `as_text()` prints its staged program;
    `compile()` gives the callable `Compiled`."""

    def __init__(self, traced):
        self._traced = traced
        self.in_avals, self.out_info = traced.in_avals, traced.out_info

    def as_text(self, dialect=None, **_):
        """The staged program (jitad's IR)."""
        return str(self._traced.jaxpr)

    def compile(self, compiler_options=None):
        """The `Compiled` stage: calls run the compiled code for this signature."""
        return Compiled(self._traced)


class Compiled:
    """A function compiled for one signature: calls with arguments of other shapes,
    dtypes or structure raise ArgumentError (as JAX's raise TypeError)."""

    def __init__(self, traced):
        self._traced = traced
        self.in_avals, self.out_info = traced.in_avals, traced.out_info

    def as_text(self):
        """The staged program (jitad's IR); the LLVM IR is `jitted.llvm_ir` after a call."""
        return str(self._traced.jaxpr)

    def __call__(self, *args, **kwargs):
        leaves, td = flatten((args, kwargs))
        got = [leaf_type(x) for x in leaves]
        if td != self._traced._in_td or got != self._traced._signature:
            raise ArgumentError(f"a Compiled function was called with {', '.join(map(str, got))} in the structure "
                                f"{td}; it was compiled for {', '.join(map(str, self._traced._signature))} in "
                                f"{self._traced._in_td}: lower and compile again for these arguments")
        return self._traced._jitted(*args, **kwargs)

    call = __call__


Wrapped = object   # what jit returns is a `jitad.api.Jitted`: it has `trace` and `lower`
