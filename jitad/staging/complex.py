"""A complex value in staged code: `Complex`, a pair of real parts.

The IR, the transformations and the backends know real dtypes only. A complex value is
therefore carried as two real values of one shape and dtype, its real and imaginary parts,
and every complex operation is written with real jitad operations on the parts, so reverse
and forward mode, `vmap`, control flow and `jit` go through it unchanged. `Complex` is a
pytree node whose children are the two parts: a transformation sees two real leaves, and
where the parts come back as NumPy arrays (a compiled function's results) the node is
rebuilt as one complex NumPy array.

A part is a staged value or a real NumPy constant (a complex NumPy array met in staged
code); an operation whose operands have no staged part gives a complex NumPy array.
"""
from typing import Any

import numpy as np

from ..errors import ArgumentError, UnsupportedError
from ..ir.ops import Op
from ..primitives.rules import N
from ..pytree import register_pytree_node
from . import values
from .values import Staged, default_float

# jitad.numpy's complex functions by name (`sum`, `prod`, `var`, ...), filled in by the
# layer above when it is imported; Complex's methods call them
FUNCTIONS = {}

_COMPLEX_OF = {np.dtype(np.float64): np.dtype(np.complex128), np.dtype(np.float32): np.dtype(np.complex64)}


def is_complex(x):
    """Whether `x` is complex: a `Complex`, a Python complex, or a complex NumPy array or scalar.

    >>> is_complex(1j), is_complex(np.ones(2))
    (True, False)
    """
    return type(x) is Complex or type(x) is complex or getattr(getattr(x, "dtype", None), "kind", None) == "c"


def _is_staged_part(x):
    return isinstance(x, Staged)


def _float_part(x):
    """A real operand as a float part: staged ints and bools converted, NumPy values as arrays."""
    if isinstance(x, Staged):
        return x if x.ir_dtype in ("f64", "f32") else N.convert(x, default_float())
    if isinstance(x, (int, float, bool, np.integer, np.floating, np.bool_)):
        return x if isinstance(x, (float, np.floating)) else float(x)
    x = np.asarray(x)
    return x if x.dtype.kind == "f" else x.astype(np.float64)


def parts(x):
    """`(real part, imaginary part)` of any operand; a real one's imaginary part is None
    (zero, never materialized, so `2.0 * z` costs two products, not four)."""
    if type(x) is Complex:
        return x.re, x.im
    if type(x) is complex:   # (weakly typed, as Python's numbers are: f32 parts stay f32)
        return x.real, x.imag
    if is_complex(x):
        x = np.asarray(x)
        return np.real(x), np.imag(x)   # (views: the call path copies them where it must, and refuses what cannot fit)
    return _float_part(x), None


def make(re, im):
    """The complex value of two real parts (`im` None: zero), broadcast to one shape and dtype;
    a complex NumPy array (`jnp.Array`) where neither part is staged."""
    if im is None:
        im = 0.0
    if not (_is_staged_part(re) or _is_staged_part(im)):
        return _numpy_complex(re, im)
    shape = np.broadcast_shapes(np.shape(re), np.shape(im))
    dtype = np.result_type(*[p.dtype if isinstance(p, Staged) else
                             (np.float64 if isinstance(p, (float, int)) else np.asarray(p).dtype) for p in (re, im)])
    return Complex(_fitted(re, shape, dtype), _fitted(im, shape, dtype))


def _fitted(p, shape, dtype):
    if isinstance(p, Staged):
        if p.dtype != dtype:
            p = N.convert(p, "f64" if dtype == np.float64 else "f32")
        return p if p.shape == shape else N.broadcast_to(p, shape)
    return np.broadcast_to(np.asarray(p, dtype), shape).copy()


def _numpy_complex(re, im):
    re, im = np.asarray(re), np.asarray(im)
    dtype = np.result_type(re.dtype, im.dtype, np.complex64)
    out = np.empty(np.broadcast_shapes(re.shape, im.shape), dtype)
    out.real, out.imag = re, im
    return FUNCTIONS["asarray"](out) if "asarray" in FUNCTIONS else out


def _add(a, b):
    return b if a is None else a if b is None else a + b


def _sub(a, b):
    return (None if b is None else -b) if a is None else a if b is None else a - b


def _mul_parts(ar, ai, br, bi):
    if ai is None and bi is None:
        return ar * br, None
    if bi is None:
        return ar * br, ai * br
    if ai is None:
        return ar * br, ar * bi
    return ar * br - ai * bi, ar * bi + ai * br


def _div_parts(ar, ai, br, bi):
    if bi is None:
        return ar / br, None if ai is None else ai / br
    d = br * br + bi * bi
    re, im = _mul_parts(ar, ai, br, -bi)
    return re / d, im / d


def _power(z, w):
    """`z ** w`: a constant integer power |w| <= 64 by squarings and products (exact, no log
    in its derivatives, as JAX's integer_pow); else exp(w log z)."""
    if isinstance(w, (int, np.integer)) and not isinstance(w, (bool, np.bool_)) and abs(w) <= 64 \
            or isinstance(w, (float, np.floating)) and float(w).is_integer() and abs(w) <= 64:
        k = int(abs(w))
        if k == 0:
            return make(N.ones_like(parts(z)[0]) if _is_staged_part(parts(z)[0]) else np.ones(np.shape(z)), None)
        result = values.by_squaring(make(*parts(z)), k, lambda a, b: a * b)
        return 1.0 / result if w < 0 else result
    return FUNCTIONS["exp"](w * FUNCTIONS["log"](z))


def binary_op(op, a, b):
    """`a <op> b` where an operand is complex (`staging.binary` hands such operations here)."""
    (ar, ai), (br, bi) = parts(a), parts(b)
    if op == Op.ADD:
        return make(_add(ar, br), _add(ai, bi))
    if op == Op.SUB:
        return make(_sub(ar, br), _sub(ai, bi))
    if op == Op.MUL:
        return make(*_mul_parts(ar, ai, br, bi))
    if op == Op.DIV:
        return make(*_div_parts(ar, ai, br, bi))
    if op == Op.POW:
        return _power(a, b) if bi is None else FUNCTIONS["exp"](b * FUNCTIONS["log"](a))
    if op in (Op.EQ, Op.NE):
        same = (ar == br) & ((0.0 if ai is None else ai) == (0.0 if bi is None else bi))
        return same if op == Op.EQ else ~same
    raise UnsupportedError(f"`{op.name.lower()}` of complex values: complex numbers have no order (and no "
                           "floor, remainder, maximum or bitwise operation); compare `jnp.abs(z)` or `jnp.real(z)`")


values.COMPLEX_BINARY.append(binary_op)


def _unsupported(what):
    def refuse(self, *args, **kwargs):
        raise UnsupportedError(f"{what} of a complex value in staged code is not provided; "
                               "use its real and imaginary parts (`z.real`, `z.imag`)")
    return refuse


class Complex:
    """A complex staged value: `re` and `im`, real values of one shape and dtype (at least
    one of them staged). NumPy's operators and methods; `dtype` is complex128 (or complex64
    for float32 parts).

    >>> jitad.jit(lambda x: (x * 1j).imag)(2.0)
    2.0
    """
    __slots__ = ("re", "im")
    __hash__ = object.__hash__
    __array_priority__ = 100

    def __init__(self, re, im):
        self.re, self.im = re, im

    dtype = property(lambda self: _COMPLEX_OF[np.dtype(self.re.dtype)])
    shape = property(lambda self: tuple(np.shape(self.re)) if not isinstance(self.re, Staged) else self.re.shape)
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    real = property(lambda self: self.re)
    imag = property(lambda self: self.im)
    T = property(lambda self: Complex(N.transpose(self.re), N.transpose(self.im)))
    weak = False

    def __repr__(self):
        return f"Complex({self.dtype}{list(self.shape)})"

    def conj(self):
        return make(self.re, -self.im)

    conjugate = conj

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        fn = FUNCTIONS.get(ufunc.__name__)
        if method != "__call__" or kwargs or fn is None:
            raise UnsupportedError(f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}") +
                                   " on a complex staged value is not provided; call jitad.numpy's function")
        return fn(*inputs)

    def __array_function__(self, func, types, args, kwargs):
        fn = FUNCTIONS.get(func.__name__)
        if fn is None:
            raise UnsupportedError(f"np.{func.__name__} of a complex staged value is not provided")
        return fn(*args, **kwargs)

    def __array__(self, dtype=None, copy=None):
        raise ArgumentError("a complex staged value cannot become a NumPy array: its value is only known when "
                            "the compiled code runs; stay with jitad.numpy's functions")

    def __len__(self):
        if not self.shape:
            raise ArgumentError("len() of a staged scalar")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __getitem__(self, key):
        return Complex(self.re[key], self.im[key])

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return Complex(N.reshape(self.re, shape), N.reshape(self.im, shape))

    def transpose(self, *axes):
        axes = axes[0] if len(axes) == 1 and not isinstance(axes[0], int) else axes or None
        return Complex(N.transpose(self.re, axes), N.transpose(self.im, axes))

    ravel = flatten = lambda self: self.reshape(-1)
    sum = lambda self, *a, **k: FUNCTIONS["sum"](self, *a, **k)
    mean = lambda self, *a, **k: FUNCTIONS["mean"](self, *a, **k)
    prod = lambda self, *a, **k: FUNCTIONS["prod"](self, *a, **k)
    var = lambda self, *a, **k: FUNCTIONS["var"](self, *a, **k)
    std = lambda self, *a, **k: FUNCTIONS["std"](self, *a, **k)
    dot = lambda self, other: FUNCTIONS["dot"](self, other)
    squeeze = lambda self, axis=None: FUNCTIONS["squeeze"](self, axis)
    astype = lambda self, dtype: FUNCTIONS["astype"](self, dtype)
    item = tolist = __bool__ = __float__ = __int__ = __index__ = _unsupported("A Python decision or conversion")
    __lt__ = __le__ = __gt__ = __ge__ = lambda a, b: binary_op(Op.LT, a, b)

    __add__ = lambda a, b: binary_op(Op.ADD, a, b)
    __radd__ = lambda a, b: binary_op(Op.ADD, b, a)
    __sub__ = lambda a, b: binary_op(Op.SUB, a, b)
    __rsub__ = lambda a, b: binary_op(Op.SUB, b, a)
    __mul__ = lambda a, b: binary_op(Op.MUL, a, b)
    __rmul__ = lambda a, b: binary_op(Op.MUL, b, a)
    __truediv__ = lambda a, b: binary_op(Op.DIV, a, b)
    __rtruediv__ = lambda a, b: binary_op(Op.DIV, b, a)
    __pow__ = lambda a, b: binary_op(Op.POW, a, b)
    __rpow__ = lambda a, b: binary_op(Op.POW, b, a)
    __eq__ = lambda a, b: binary_op(Op.EQ, a, b)
    __ne__ = lambda a, b: binary_op(Op.NE, a, b)
    __matmul__ = lambda a, b: FUNCTIONS["matmul"](a, b)
    __rmatmul__ = lambda a, b: FUNCTIONS["matmul"](b, a)
    __neg__ = lambda a: Complex(-a.re, -a.im)
    __pos__ = lambda a: a
    __abs__ = lambda a: FUNCTIONS["abs"](a)


def _unflatten(_, children):
    """A node rebuilt: staged parts (or anything not a real number or array, such as the
    placeholders a transformation unflattens) as a `Complex`, real NumPy parts (a compiled
    function's results) as a complex NumPy array."""
    re, im = children
    if not all(type(p) is float or isinstance(p, (np.ndarray, np.floating)) for p in children):
        return Complex(re, im)
    out = np.empty(np.shape(re), np.result_type(np.asarray(re).dtype, np.complex64))
    out.real, out.imag = re, im
    return out.view(FUNCTIONS["Array"]) if out.shape and "Array" in FUNCTIONS else out if out.shape else out[()]


register_pytree_node(Complex, lambda z: ((z.re, z.im), None), _unflatten)


def _complex_leaves_mapped(fn, x):
    """`x` with `fn` applied to its complex leaves (a `Complex` node counts as one), through
    tuples, lists and dicts; other leaves and containers as they are. (Not `tree_map`: that
    would rebuild a node of NumPy parts as a complex array.)"""
    if is_complex(x):
        return fn(x)
    if isinstance(x, dict):
        mapped = {k: _complex_leaves_mapped(fn, v) for k, v in x.items()}
        if all(mapped[k] is v for k, v in x.items()):
            return x   # nothing complex inside: the caller's container itself
        out = x.copy()   # (keeps an OrderedDict's order, a defaultdict's factory)
        out.update(mapped)
        return out
    if isinstance(x, (list, tuple)):
        items = [_complex_leaves_mapped(fn, v) for v in x]
        if all(a is b for a, b in zip(items, x)):
            return x
        return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
    return x


def _pair(v):
    return v if type(v) is Complex else Complex(*(np.asarray(p) for p in parts(v)))


def split(x) -> Any:
    """`x` with its complex NumPy leaves (arrays, NumPy and Python scalars) made `Complex`
    nodes of their real parts: the form in which complex arguments enter a trace."""
    return _complex_leaves_mapped(_pair, x)


def _conj(v):
    return Complex(v.re, -v.im) if type(v) is Complex else np.conj(v)


def conj_leaves(x) -> Any:
    """`x` with its complex leaves conjugated: a gradient of real parts `(df/dx, df/dy)` read
    as JAX's and autograd's complex cotangent `df/dx - i df/dy`, and back."""
    return _complex_leaves_mapped(_conj, x)
