"""Along-axis ops: a scan (running values along one axis, as `cumsum`) or a reduction
(over some axes, as `sum`) of one array, each described once by its combine function and
its identity. Every backend builds its loop nest from the description:

- `combine(acc, x) -> acc` is plain Python over scalars: the operators `+ - * /`, the
  comparisons and the functions below (`maximum`, `where`, `exp`, ...). Each one applies
  an elementwise primitive, so each backend runs it with that primitive's own scalar
  rule (NumPy's meaning, the LLVM scalar rule, the CUDA element expression).
- `identity` (a number, or fn(dtype) -> number) starts every accumulator: a scan's first
  element is combine(identity, x[0]), so nothing else ever initializes one.

The index arithmetic is written once per backend, on the array seen as (outer, n, inner)
(`lines`): the scan runs along n; a reduction's axes come sorted and non-negative (the
public wrappers, `jitad.numeric.scan` for the scans, normalize them). A declaration's
LLVM and CUDA rules run the backend's loop nest for the description: the lowerer's and
the runner's `scan` and `reduction`.

    declare_scan("cummax", maximum, -np.inf)

A scan that gives no `vjp` or `jvp` gets both derived from its combine function: the
combine run on staged arrays gives its partial derivatives at every step (`Partials`),
and the derivative of the whole scan is a linear recurrence in them, solved in log2(n)
doubling steps of products and sums (`linear_recurrence`).
"""
import functools

import numpy as np

from ..ir.ops import IMPLS, VJP, Op, declare, infer_types, shape_rule
from ..ir.types import FLOATS, NUMPY, Type, dtype_of_numpy
from .rules import N, reduced_shape

SCANS = {}        # op -> AlongAxis, for ops with attrs (axis, reverse)
REDUCTIONS = {}   # op -> AlongAxis, for ops with attrs (axes, keepdims)


class AlongAxis:
    """How one along-axis op combines: `combine(acc, x)` in the scalar language of this
    module, `identity(dtype)`, and `reassociate` (the backend may reorder the combines:
    vectorized reductions; a scan keeps NumPy's order)."""

    def __init__(self, combine, identity, reassociate=False):
        self.combine, self.reassociate = combine, reassociate
        self._identity = identity

    def identity(self, dtype):
        value = self._identity(dtype) if callable(self._identity) else self._identity
        return bool(value) if dtype == "bool" else value

    def run(self, backend, dtype, acc, x):
        """combine(acc, x) on a backend's values of `dtype` (see `Scalar`)."""
        out = self.combine(Scalar(backend, acc, dtype), Scalar(backend, x, dtype))
        return out.value


# -- the scalar language of combine functions --------------------------------------

class Scalar:
    """A value inside a combine function: `backend.apply(op, values, dtypes)` computes
    an elementwise primitive on the backend's values, `backend.constant(number, dtype)`
    makes a constant (of the loop's dtype)."""
    __slots__ = ("backend", "value", "dtype")

    def __init__(self, backend, value, dtype):
        self.backend, self.value, self.dtype = backend, value, dtype

    def _op(op, swap=False):
        return lambda self, other: apply(op, (other, self) if swap else (self, other))

    __add__, __radd__ = _op(Op.ADD), _op(Op.ADD, True)
    __sub__, __rsub__ = _op(Op.SUB), _op(Op.SUB, True)
    __mul__, __rmul__ = _op(Op.MUL), _op(Op.MUL, True)
    __truediv__, __rtruediv__ = _op(Op.DIV), _op(Op.DIV, True)
    __lt__, __le__, __gt__, __ge__ = _op(Op.LT), _op(Op.LE), _op(Op.GT), _op(Op.GE)
    __eq__, __ne__ = _op(Op.EQ), _op(Op.NE)
    __hash__ = None

    def __neg__(self):
        return apply(Op.NEG, (self,))

    def __abs__(self):
        return apply(Op.ABS, (self,))


def apply(op, args):
    """`op` on Scalars and Python numbers (constants of the Scalars' dtype)."""
    first = next(a for a in args if isinstance(a, Scalar))
    backend, loop_dtype = first.backend, next((a.dtype for a in args if isinstance(a, Scalar) and a.dtype != "bool"),
                                              first.dtype)
    args = [a if isinstance(a, Scalar) else Scalar(backend, backend.constant(a, loop_dtype), loop_dtype) for a in args]
    dtypes = [a.dtype for a in args]
    (out,) = infer_types(op, [Type(d) for d in dtypes], {})
    return Scalar(backend, backend.apply(op, [a.value for a in args], dtypes, out.dtype), out.dtype)


def maximum(a, b):
    """NaN propagates, as NumPy's."""
    return apply(Op.MAXIMUM, (a, b))


def minimum(a, b):
    return apply(Op.MINIMUM, (a, b))


def where(c, a, b):
    return apply(Op.SELECT, (c, a, b))


def exp(a):
    return apply(Op.EXP, (a,))


def log1p(a):
    return apply(Op.LOG1P, (a,))


class NumPyBackend:
    """The NumPy meaning: the primitives' own NumPy functions on arrays."""

    @staticmethod
    def apply(op, values, dtypes, out_dtype):
        return IMPLS[op](*values)

    @staticmethod
    def constant(value, dtype):
        return NUMPY[dtype](value)


def scan_impl(desc):
    """The NumPy meaning of a scan from its description: one sequential pass."""
    def impl(x, axis, reverse):
        x = np.moveaxis(np.asarray(x), axis, 0)
        out = np.empty_like(x)
        dtype = dtype_of_numpy(x.dtype)
        acc = np.full(x.shape[1:], desc.identity(dtype), x.dtype)
        with np.errstate(all="ignore"):
            for j in (range(len(x) - 1, -1, -1) if reverse else range(len(x))):
                acc = out[j] = desc.run(NumPyBackend, dtype, acc, x[j])
        return np.moveaxis(out, 0, axis)
    return impl


# -- derivatives from the combine function --------------------------------------------

class Partials:
    """A backend running a combine function on staged arrays: each value is a triple
    (value, d/d acc, d/d x), the derivatives None where they are zero. An op's partial
    derivatives are its VJP applied to ones (its inputs here all have the output's shape,
    or are constants, whose derivatives are not needed)."""

    @staticmethod
    def constant(value, dtype):
        return NUMPY[dtype](value), None, None

    @staticmethod
    def apply(op, values, dtypes, out_dtype):
        primals = [v[0] for v in values]
        out = N.bind(op, *primals)
        if out_dtype not in FLOATS or all(d is None for v in values for d in v[1:]):
            return out, None, None
        partials = VJP.lookup(op)(N.ones_like(out), *primals, out)
        chained = []
        for which in (1, 2):   # the chain rule, for acc and for x
            terms = [p * v[which] for p, v in zip(partials, values) if p is not None and v[which] is not None]
            chained.append(functools.reduce(lambda a, b: a + b, terms) if terms else None)
        return (out, *chained)


def shifted(v, axis, reverse, k, fill):
    """`v` moved k places along the scan (`fill` where nothing arrives): element i holds
    v[i - k] (v[i + k] for a reverse scan)."""
    n = v.shape[axis]
    k = min(k, n)
    pad = np.full([k if d == axis else m for d, m in enumerate(v.shape)], fill, NUMPY[v.ir_dtype])
    if reverse:
        return N.concatenate([N.take_slice(v, axis, k, n), pad], axis)
    return N.concatenate([pad, N.take_slice(v, axis, 0, n - k)], axis)


def linear_recurrence(b, c, axis, reverse):
    """z with z_i = b_i + c_i z_(i-1) along the scan (z_(-1) = 0), in log2(n) doubling
    steps: each composes every affine map with the one k places before it. The first k
    maps have none before them and stay as they are (not multiplied by a 0 that arrives:
    their c may be infinite once products of large values overflow)."""
    n, k = b.shape[axis], 1
    while k < n:
        b = _compose(b, c, axis, reverse, k)
        if 2 * k < n:
            c = c * shifted(c, axis, reverse, k, 1)
        k *= 2
    return b


def _compose(b, c, axis, reverse, k):
    """b_i + c_i b_(i-k) where element i - k exists (i + k for a reverse scan), else b_i."""
    n = b.shape[axis]
    part = lambda v, lo, hi: N.take_slice(v, axis, lo, hi)
    if reverse:
        return N.concatenate([part(b, 0, n - k) + part(c, 0, n - k) * part(b, k, n), part(b, n - k, n)], axis)
    return N.concatenate([part(b, 0, k), part(b, k, n) + part(c, k, n) * part(b, 0, n - k)], axis)


def _step_partials(desc, x, out, axis, reverse):
    """d y_i / d y_(i-1) and d y_i / d x_i at every step of the scan (y = out), as arrays
    of x's shape (zeros where the combine does not depend on one)."""
    dtype = x.ir_dtype
    before = shifted(out, axis, reverse, 1, desc.identity(dtype))
    _, d_acc, d_x = desc.combine(Scalar(Partials, (before, 1.0, None), dtype), Scalar(Partials, (x, None, 1.0), dtype)).value
    full = lambda d: N.zeros_like(x) if d is None else N.broadcast_to(d * N.ones_like(x), x.shape)
    return full(d_acc), full(d_x)


def derived_scan_vjp(desc):
    """A scan's VJP from its combine: x_i's cotangent is d y_i/d x_i t_i, where
    t_i = g_i + d y_(i+1)/d y_i t_(i+1), a linear recurrence against the scan."""
    def vjp(g, x, out, axis, reverse):
        if x.shape[axis] == 0:
            return (g,)
        d_acc, d_x = _step_partials(desc, x, out, axis, reverse)
        t = linear_recurrence(g, shifted(d_acc, axis, not reverse, 1, 0), axis, not reverse)
        return (d_x * t,)
    return vjp


def derived_scan_jvp(desc):
    """A scan's JVP from its combine: the tangent z_i = d y_i/d x_i t_i + d y_i/d y_(i-1)
    z_(i-1), a linear recurrence along the scan."""
    def jvp(node, tangents, primals, out):
        (t,), (x,), attrs = tangents, primals, node.attrs
        if x.shape[attrs["axis"]] == 0:
            return t
        d_acc, d_x = _step_partials(desc, x, out, attrs["axis"], attrs["reverse"])
        return linear_recurrence(d_x * t, d_acc, attrs["axis"], attrs["reverse"])
    return jvp


# -- declaring one ------------------------------------------------------------------

def batch_scan(node, ins, size, mask):
    """vmap: the lanes are a new leading axis, the scan's axis moves up by one."""
    return [(N.bind(node.op, ins[0][0], axis=node.attrs["axis"] + 1, reverse=node.attrs["reverse"]), True)]


def batch_reduction(node, ins, size, mask):
    return [(N.bind(node.op, ins[0][0], axes=tuple(a + 1 for a in node.attrs["axes"]),
                    keepdims=node.attrs["keepdims"]), True)]


def _scan_llvm(lo, node, ins):
    return lo.scan(node, ins)


def _scan_cuda(rt, node, ins):
    return rt.scan(node, ins)


def _reduction_llvm(lo, node, ins):
    return lo.reduction(node, ins)


def _reduction_cuda(rt, node, ins):
    return rt.reduction(node, ins)


def declare_scan(name, combine, identity, impl=None, *, flags="pure kernel", **fields):
    """Declare a scan along `axis` (from the end with `reverse`), output shaped as its
    input: the other fields as `declare`'s; `impl` defaults to the description's own
    sequential NumPy loop, `vjp` and `jvp` to the rules derived from `combine`."""
    desc = AlongAxis(combine, identity)
    if "linear" not in flags.split():
        fields.setdefault("vjp", derived_scan_vjp(desc))
        fields.setdefault("jvp", derived_scan_jvp(desc))
    op = declare(name, shape_rule(lambda types, axis, reverse: types[0].shape), impl or scan_impl(desc),
                 arity=1, flags=flags, batch=fields.pop("batch", batch_scan), llvm=_scan_llvm, cuda=_scan_cuda,
                 **fields)
    SCANS[op] = desc
    return op


_reduced = shape_rule(lambda types, axes, keepdims: reduced_shape(types[0].shape, axes, keepdims))


def declare_reduction(name, combine, identity, impl, *, reassociate=True, flags="pure kernel", **fields):
    """Declare a reduction over `axes` (with `keepdims`): the other fields as `declare`'s."""
    op = declare(name, _reduced, impl, arity=1, flags=flags, batch=fields.pop("batch", batch_reduction),
                 llvm=_reduction_llvm, cuda=_reduction_cuda, **fields)
    REDUCTIONS[op] = AlongAxis(combine, identity, reassociate)
    return op


def lines(shape, axis):
    """(outer, n, inner): an array of `shape` as lines of n along `axis`."""
    size = functools.partial(np.prod, dtype=np.int64)
    return int(size(shape[:axis])), shape[axis], int(size(shape[axis + 1:]))
