"""`jitad.lax`: JAX's `lax` control flow and slicing, with JAX's argument conventions, on
jitad's staged combinators (`FOR`, `WHILE`, `IF`, `scan`). Reverse mode goes through all of
them, `while_loop` included (JAX refuses that one):

>>> from jitad import grad, lax
>>> grad(lambda x: lax.while_loop(lambda c: c < 10.0, lambda c: c * x, 1.0))(3.0)   # d/dx x**3
27.0

Outside staged code they run in Python, as the combinators do.
"""
import enum

import numpy as np

from . import numeric as N
from .transforms.control import scan as _scan, switch
from .errors import ArgumentError
from .numeric import exp, log, log1p, expm1, sin, cos, tanh, sqrt, abs, erf, square, stop_gradient  # noqa: F401
from .numeric import maximum as max, minimum as min, sigmoid as logistic, reshape, transpose  # noqa: F401
from .numpy_api import sign, floor, ceil  # noqa: F401
from .staging import FOR, IF, WHILE, is_staged

__all__ = ["fori_loop", "while_loop", "scan", "cond", "switch", "map", "select", "stop_gradient",
           "dynamic_slice", "dynamic_slice_in_dim", "dynamic_index_in_dim", "dynamic_update_slice",
           "dynamic_update_slice_in_dim", "dynamic_update_index_in_dim", "Precision", "dot", "batch_matmul",
           "add", "sub", "mul", "div", "neg", "pow", "integer_pow", "rsqrt", "concatenate",
           "convert_element_type", "exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "sqrt", "abs", "erf",
           "square", "max", "min", "logistic", "reshape", "transpose", "sign", "floor", "ceil"]


def fori_loop(lower, upper, body_fun, init_val, unroll=None):
    """`val = body_fun(i, val)` for `i` in `range(lower, upper)`; returns `val` (a `FOR`).

    >>> lax.fori_loop(0, 4, lambda i, s: s + i, 0)
    6
    """
    return FOR(lower, upper, body_fun, init_val)


def while_loop(cond_fun, body_fun, init_val):
    """`val = body_fun(val)` while `cond_fun(val)`; returns `val` (a `WHILE`, reverse
    differentiable). `lax.while_loop(lambda x: x < 5, lambda x: x + 2, 0) == 6`."""
    return WHILE(cond_fun, body_fun, init_val)


def scan(f, init, xs=None, length=None, reverse=False, unroll=1):
    """`f(carry, x) -> (carry, y)` over `xs`' leading axis; returns `(carry, ys)` (`jitad.scan`;
    `unroll` is accepted and ignored)."""
    return _scan(f, init, xs, length, reverse)


def _pred(pred, who):
    if is_staged(pred):
        if pred.shape:
            raise ArgumentError(f"`lax.{who}`: the predicate must be a scalar, got shape {pred.shape}")
        return pred if pred.ir_dtype == "bool" else pred != 0
    if np.ndim(pred):
        raise ArgumentError(f"`lax.{who}`: the predicate must be a scalar, got shape {np.shape(pred)}")
    return bool(pred)


def cond(pred, true_fun, false_fun, *operands):
    """`true_fun(*operands)` if `pred` else `false_fun(*operands)` (an `IF`; `pred` a
    scalar bool or number): `lax.cond(x > 0, lambda x: x, lambda x: -x, x)`."""
    return IF(_pred(pred, "cond"), true_fun, false_fun, *operands)


def map(f, xs):
    """`f` applied to each slice of `xs` along its leading axis, the results stacked
    (a `scan` without carry): `lax.map(jnp.sum, xs)`."""
    return _scan(lambda carry, x: (carry, f(x)), (), xs)[1]


def select(pred, on_true, on_false):
    """`on_true` where `pred` else `on_false`, elementwise (`jitad.where`)."""
    return N.where(pred, on_true, on_false)


def _starts(who, shape, start_indices, sizes, allow_negative):
    if len(start_indices) != len(shape) or len(sizes) != len(shape):
        raise ArgumentError(f"`lax.{who}`: an operand of shape {tuple(shape)} needs {len(shape)} start "
                            f"indices and sizes, got {len(start_indices)} and {len(sizes)}")
    starts = []
    for d, (s, size) in enumerate(zip(start_indices, sizes)):
        if not 0 <= size <= shape[d]:
            raise ArgumentError(f"`lax.{who}`: size {size} on axis {d} does not fit its length {shape[d]}")
        if allow_negative:   # -1 is the last position, as JAX
            s = N.where(s < 0, s + shape[d], s)
        starts.append(N.clip(s, 0, shape[d] - size))   # JAX's clamp: the slice stays inside
    return starts


def _index(starts, sizes):
    """Index arrays selecting the block at `starts` of `sizes` (NumPy's `ix_`, staged starts)."""
    n = len(sizes)
    return tuple(s + np.arange(size, dtype=np.int64).reshape((-1,) + (1,) * (n - 1 - d))
                 for d, (s, size) in enumerate(zip(starts, sizes)))


def dynamic_slice(operand, start_indices, slice_sizes, allow_negative_indices=True):
    """`operand[s0:s0+n0, s1:s1+n1, ...]` with staged starts, negative ones counted from
    the end, clamped so the block lies inside (as JAX): `lax.dynamic_slice(x, (i, 0), (2, 3))`."""
    shape = _shape(operand)
    sizes = tuple(int(k) for k in slice_sizes)
    starts = _starts("dynamic_slice", shape, tuple(start_indices), sizes, allow_negative_indices)
    if not any(is_staged(s) for s in starts):
        return operand[tuple(slice(int(s), int(s) + k) for s, k in zip(starts, sizes))]
    return N.getitem(operand, _index(starts, sizes))


def dynamic_update_slice(operand, update, start_indices, allow_negative_indices=True):
    """`operand` with the block at `start_indices` replaced by `update` (starts clamped so
    the block lies inside, negative ones counted from the end, as JAX): `lax.dynamic_update_slice(x, u, (i, 0))`."""
    sizes, shape = _shape(update), _shape(operand)
    starts = _starts("dynamic_update_slice", shape, tuple(start_indices), sizes, allow_negative_indices)
    return N.NUMPY_API["ndarray.at"](operand)[_index(starts, sizes)].set(update)


def _in_dim(operand, index, axis, size):
    shape = _shape(operand)
    axis = axis % len(shape)
    starts = [0] * len(shape)
    starts[axis] = index
    sizes = list(shape)
    sizes[axis] = size
    return starts, sizes, axis


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0):
    """`dynamic_slice` along one `axis`: `lax.dynamic_slice_in_dim(x, i, 3)`."""
    starts, sizes, _ = _in_dim(operand, start_index, axis, slice_size)
    return dynamic_slice(operand, starts, sizes)


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True):
    """The slice at `index` along `axis` (kept as a length-1 axis unless `keepdims=False`)."""
    starts, sizes, axis = _in_dim(operand, index, axis, 1)
    out = dynamic_slice(operand, starts, sizes)
    return out if keepdims else N.NUMPY_API["squeeze"](out, axis)


def dynamic_update_slice_in_dim(operand, update, start_index, axis):
    """`dynamic_update_slice` along one `axis`."""
    starts, _, _ = _in_dim(operand, start_index, axis, 1)
    return dynamic_update_slice(operand, update, starts)


def dynamic_update_index_in_dim(operand, update, index, axis):
    """`operand` with the slice at `index` along `axis` replaced by `update`."""
    if len(_shape(update)) < len(_shape(operand)):
        update = N.NUMPY_API["expand_dims"](update, axis)
    return dynamic_update_slice_in_dim(operand, update, index, axis)


def _shape(x):
    return tuple(x.shape) if is_staged(x) else np.shape(x)


class Precision(enum.Enum):
    """Accepted for JAX's `precision=` arguments and ignored: jitad computes in the
    operands' own precision."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2


def dot(lhs, rhs, precision=None, preferred_element_type=None):
    """`jnp.dot(lhs, rhs)` (`precision` ignored)."""
    return N.dot(lhs, rhs)


def batch_matmul(lhs, rhs, precision=None):
    """`lhs @ rhs` over a shared leading batch axis (`precision` ignored)."""
    return N.matmul(lhs, rhs)


def add(x, y):
    return x + y


def sub(x, y):
    return x - y


def mul(x, y):
    return x * y


def div(x, y):
    return x / y


def neg(x):
    return -x


def pow(x, y):
    return x ** y


def integer_pow(x, y):
    return x ** int(y)


def rsqrt(x):
    return 1.0 / N.sqrt(x)


def concatenate(operands, dimension):
    return N.concatenate(operands, dimension)


def convert_element_type(operand, new_dtype):
    return N.convert(operand, np.dtype(new_dtype))
