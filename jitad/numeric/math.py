"""The math users call, for staged values and plain numbers alike: the wrappers of the
declared primitives, `where`/`clip`/`convert`, reductions, shapes, products, concatenation,
constructors, softmax and the losses."""
import builtins
import math
import operator

import numpy as np

from ..config import warn_truncated, x64_enabled
from ..errors import ArgumentError, ShapeError, StagingError
from ..ir import float_checks
from ..ir.ops import IMPLS, PRIMITIVES, Op, impl_of
from ..primitives.along_axis import SCANS
from ..ir.types import FLOATS
from ..staging import Staged, as_var, binary, emit, is_staged, result_dtype, to_bool, trace_memo, unary
from ..staging.values import narrowed, narrowed_result


__all__ = ["where", "clip", "convert", "sum", "mean", "max", "min", "dot", "matmul", "outer", "transpose", "reshape",
           "broadcast_to", "concatenate", "stack", "zeros", "zeros_like", "ones", "ones_like", "full", "softmax",
           "log_softmax", "logsumexp", "one_hot", "cross_entropy", "nll_loss"]


def _wrapper(op):
    """The public function of a primitive declared with a docstring (jitad/primitives)."""
    if op in SCANS:
        def fn(x, axis=None, reverse=False):
            return scan(op, x, axis, reverse)
    elif op.arity == 1:
        def fn(x):
            return unary(op, x)
    else:
        def fn(a, b):
            return binary(op, a, b)
    if op not in SCANS:
        fn.primitive = op   # (jitad.numpy's eager fast path calls its NumPy meaning directly)
    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = op.doc
    return fn


def scan(op, x, axis=None, reverse=False):
    """The along-axis scan `op` of `x` along `axis` (an int, negative from the end; None: of
    the flattened array), from the end with `reverse`: `jitad.numeric.scan(Op.CUMSUM, x, 0)`."""
    if not is_staged(x):
        x = np.asarray(x)
    if op.float_only and result_dtype(x) not in FLOATS:
        x = convert(x, "f64")
    if axis is None or not _shape(x):
        x, axis = reshape(x, (-1,)), 0
    return bind(op, x, axis=_axis(op.name, axis, len(_shape(x)), _shape(x)), reverse=bool(reverse))


for _op in PRIMITIVES.values():
    if _op.doc is not None:
        globals()[_op.name] = _wrapper(_op)
        __all__.append(_op.name)


def polygamma(n, x):
    """The n-th derivative of digamma, for an int n >= 0 (x < 0 only for n <= 1):
    `jitad.polygamma(1, 1.0) == math.pi ** 2 / 6`."""
    n = _int_arg("polygamma", "n", n, 0)
    x = x if result_dtype(x) in FLOATS else convert(x, "f64")
    return bind(Op.POLYGAMMA, x, n=n)


def digamma(x):
    """The derivative of `lgamma`: `jitad.digamma(1.0)` is -0.57721566490153 (minus Euler's constant)."""
    return polygamma(0, x)


__all__ += ["polygamma", "digamma"]


def where(cond, a=None, b=None):
    """`a` where `cond` else `b`; both are computed: `jitad.where(x > 0, x, 0.0)`. With
    `cond` alone, NumPy's `nonzero(cond)` (plain arrays only: its shape depends on the values)."""
    if a is None and b is None:
        if is_staged(cond):
            raise data_dependent_shape("`where` with one argument (the indices where `cond` holds)")
        return np.nonzero(cond)
    if a is None or b is None:
        raise ArgumentError("`where` takes cond alone or cond, x and y: `jitad.where(cond, x, y)`")
    if not (is_staged(cond) or is_staged(a) or is_staged(b)):
        return narrowed_result(np.where(cond, a, b)[()], (a, b))
    dtype = result_dtype(a, b)
    c = to_bool(cond, "where")
    return Staged(emit(Op.SELECT, [c, as_var(a, dtype), as_var(b, dtype)])[0])


def clip(x, lo=None, hi=None):
    """`minimum(maximum(x, lo), hi)` (None: no bound): `jitad.clip(5.0, 0.0, 1.0) == 1.0`."""
    x = x if lo is None else maximum(x, lo)
    return x if hi is None else minimum(x, hi)


_DTYPE_NAMES = {"f64": "f64", "float64": "f64", "f32": "f32", "float32": "f32", "i64": "i64",
                "int64": "i64", "int32": "i64", "int": "i64", "float": "f64", "bool": "bool"}


def _dtype_name(dtype, who):
    try:
        name = _DTYPE_NAMES.get(dtype.name if isinstance(dtype, np.dtype) else getattr(dtype, "__name__", dtype))
    except TypeError:   # unhashable
        name = None
    if name is None:
        raise ArgumentError(f"`{who}`: unknown dtype {dtype!r}; use 'f64', 'f32', 'i64' or 'bool'")
    if name == "f64" and not x64_enabled():   # JAX's float32 (warned where the user asked for 64 bits)
        if dtype is not float and not (isinstance(dtype, str) and dtype in ("f64", "float")):
            warn_truncated(np.dtype(np.float64), np.dtype(np.float32), who)
        return "f32"
    return name


def convert(x, dtype):
    """`x` as `dtype` ('f64', 'f32', 'i64', 'bool'); float to int truncates toward zero,
    saturates at the int64 range and sends NaN to 0: `jitad.convert(2.7, 'i64') == 2`."""
    name = _dtype_name(dtype, "convert")
    if not is_staged(x):
        # (ints asked for by name, "i64", stay int64: jitad's own host code counts in them)
        return narrowed(IMPLS[Op.CONVERT](x, dtype=name), ints=not (isinstance(dtype, str) and dtype == "i64"))
    return Staged(as_var(x, name))


def _shape(x):
    """The shape of an operand; an operand that is no number or array is an ArgumentError."""
    if type(x) is np.ndarray and x.dtype.kind in "biuf":   # (an eager call's usual operand)
        return x.shape
    if is_staged(x):
        return x.shape
    try:
        a = np.asarray(x)
    except ValueError:   # ragged nesting
        a = None
    if a is None or a.dtype.kind not in "biuf":
        raise ArgumentError(f"a jitad function got {type(x).__name__} {str(x)[:60]}; it takes numbers, "
                            "arrays and staged values (build an array with jitad.stack or np.array first)")
    return a.shape


def bind(op, *xs, **attrs):
    """Apply primitive `op`: eagerly with NumPy on plain values, else staged."""
    if not builtins.any(is_staged(x) for x in xs):
        xs = [np.asarray(x) for x in xs]
        return narrowed_result(float_checks.check_eager(op, impl_of(op)(*xs, **attrs)), xs)
    return Staged(emit(op, [as_var(x) for x in xs], attrs)[0])


def _int_arg(who, name, value, lo):
    """`value` as a Python int >= `lo`, or an ArgumentError naming the argument."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < lo:
        raise ArgumentError(f"`{who}`: {name}={value!r}; it must be an int >= {lo}")
    return int(value)


def _axis(who, a, ndim, shape):
    """Axis `a` of an array of `ndim` axes as 0 <= axis < ndim (negative counts from the end);
    a scalar has one axis, 0, for reductions."""
    if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
        raise ArgumentError(f"`{who}`: axis {a!r} is not an int")
    if not -ndim <= a < builtins.max(ndim, 1):
        raise ShapeError(f"`{who}`: axis {a} is out of range for shape {tuple(shape)} ({ndim} axes)")
    return int(a) % builtins.max(ndim, 1)


def _axes(x, axis, who="sum"):
    shape = _shape(x)
    if axis is None:
        return tuple(range(len(shape)))
    try:
        axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    except TypeError:
        raise ArgumentError(f"`{who}`: axis={axis!r}; use an int, a tuple of ints or None") from None
    axes = [_axis(who, a, len(shape), shape) for a in axes]
    if len(set(axes)) != len(axes):
        raise ShapeError(f"`{who}`: duplicate value in axis={axis!r} for shape {tuple(shape)}")
    return tuple(sorted(axes))


def sum(x, axis=None, keepdims=False):
    """Sum over `axis` (an int, a tuple, or None for all): `jitad.sum(x, 0)`."""
    axes = _axes(x, axis)
    if is_staged(x) and x.ir_dtype == "bool":   # counts, as NumPy
        x = convert(x, "i64")
    if not _shape(x):
        return x
    return bind(Op.SUM, x, axes=axes, keepdims=keepdims)


def mean(x, axis=None, keepdims=False):
    """Mean over `axis`: `jitad.mean(x)`."""
    axes = _axes(x, axis, "mean")
    if not _shape(x):
        return x / 1.0
    count = int(np.prod([_shape(x)[a] for a in axes], dtype=np.int64))
    return sum(x, axes, keepdims) / float(builtins.max(count, 1)) if count else sum(x, axes, keepdims) * np.nan


def max(x, axis=None, keepdims=False):
    """Maximum over `axis`; its gradient is shared among tied maxima: `jitad.max(x, -1)`."""
    axes = _axes(x, axis, "max")
    _check_nonempty(x, axes, "max")
    if not _shape(x):
        return x
    return bind(Op.MAX, x, axes=axes, keepdims=keepdims)


def min(x, axis=None, keepdims=False):
    """Minimum over `axis`: `jitad.min(x)`."""
    _check_nonempty(x, _axes(x, axis, "min"), "min")
    if result_dtype(x) in FLOATS:
        return -max(-x, axis, keepdims)
    return ~max(~x, axis, keepdims)   # ints, bools: -x overflows at the lowest int, ~x (-x - 1) does not


def _nonempty(x, axes):
    return builtins.all(_shape(x)[a] for a in axes if _shape(x))


def _check_nonempty(x, axes, who):
    if not _nonempty(x, axes):
        raise ShapeError(f"`{who}` of an empty axis (shape {tuple(_shape(x))}): there is no element to "
                         "reduce; reduce over non-empty axes only (test the size first)")


def reshape(x, shape):
    """`x` with a new shape of the same size (one entry may be -1): `jitad.reshape(x, (2, -1))`."""
    shape = _dims("reshape", shape)
    size = math.prod(_shape(x))
    if builtins.min(shape, default=0) < -1 or shape.count(-1) > 1:
        raise ShapeError(f"`reshape`: cannot reshape {tuple(_shape(x))} to {shape}: dimensions must "
                         "be >= 0, and at most one may be -1 (inferred from the size)")
    if -1 in shape:
        rest = math.prod(n for n in shape if n != -1)
        if rest and size % rest == 0:
            shape = tuple(size // rest if n == -1 else n for n in shape)
    if math.prod(shape) != size or -1 in shape:
        raise ShapeError(f"`reshape`: cannot reshape {tuple(_shape(x))} (size {size}) to {shape}")
    if tuple(_shape(x)) == shape:
        return x
    return bind(Op.RESHAPE, x, shape=shape)


def _dims(who, shape):
    """A shape argument (an int or a sequence of ints) as a tuple of Python ints."""
    try:
        return (operator.index(shape),) if np.ndim(shape) == 0 else tuple(operator.index(n) for n in shape)
    except TypeError:
        raise ArgumentError(f"`{who}`: shape {shape!r} must be an int or a tuple of ints") from None


def transpose(x, axes=None):
    """Permute axes (reverse them by default): `jitad.transpose(x)`, `x.T`."""
    ndim = len(_shape(x))
    if axes is not None:
        axes = _dims("transpose", axes)
        if builtins.any(not -ndim <= a < ndim for a in axes):
            raise ShapeError(f"`transpose`: axes {axes} are out of range for shape {tuple(_shape(x))}")
    perm = tuple(reversed(range(ndim))) if axes is None else tuple(a % ndim for a in axes)
    if sorted(perm) != list(range(ndim)):
        raise ShapeError(f"`transpose`: axes {tuple(axes)} are not a permutation of the {ndim} axes "
                         f"of shape {tuple(_shape(x))}")
    if perm == tuple(range(len(perm))):
        return x
    out = bind(Op.TRANSPOSE, x, perm=perm)
    if is_staged(out) and ndim >= 2 and perm == tuple(range(ndim - 2)) + (ndim - 1, ndim - 2):
        trace_memo()[("swapped", out._var)] = x   # for `matmul`: read x with BLAS's transpose flag
    return out


def untransposed(x):
    """`(y, True)` where staged `x` is `y` with its last two axes swapped, else `(x, False)`:
    a product reads `y` in place with a transpose flag, and its gradient comes out in `y`'s
    layout (no copy either way)."""
    y = trace_memo().get(("swapped", x._var)) if is_staged(x) else None
    return (x, False) if y is None else (y, True)


def broadcast_to(x, shape):
    """`x` broadcast to `shape` (NumPy rules): `jitad.broadcast_to(b, (4, 3))`."""
    shape = _static_shape("broadcast_to", shape)
    if tuple(_shape(x)) == shape:
        return x
    if not is_staged(x):
        return np.broadcast_to(x, shape)
    try:
        np.broadcast_shapes(_shape(x), shape)
    except ValueError:
        raise ShapeError(f"`broadcast_to`: shape {_shape(x)} does not broadcast to {shape}") from None
    return bind(Op.BROADCAST, x, shape=shape)


def _promoted(*xs):
    dtype = result_dtype(*xs)
    return [convert(x, dtype) if is_staged(x) else np.asarray(x, dtype=NUMPY_OF[dtype]) for x in xs]


NUMPY_OF = {"bool": np.bool_, "i64": np.int64, "f32": np.float32, "f64": np.float64}


N_D = {}   # the N-D `matmul` and `dot`, composites that jitad.numpy_api (a layer above) fills in
NUMPY_API = {}   # jitad.numpy_api's public functions, filled in there: NumPy's functions and the


def matmul(a, b):
    """Matrix product with NumPy's rules for 1-D operands: `a @ b`."""
    sa, sb = _shape(a), _shape(b)
    if len(sa) == 0 or len(sb) == 0 or len(sa) > 2 or len(sb) > 2:   # batch axes, or a scalar's error
        return N_D["matmul"](a, b)
    rows = _one_hot_rows(a, b)
    if rows is not None:
        return rows
    a, b = _promoted(a, b)
    a2 = reshape(a, (1, sa[0])) if len(sa) == 1 else a
    b2 = reshape(b, (sb[0], 1)) if len(sb) == 1 else b
    if _shape(a2)[1] != _shape(b2)[0]:
        raise ShapeError(f"`matmul`: shapes {tuple(sa)} and {tuple(sb)} do not multiply")
    out = matmul_t(a2, b2)
    shape = tuple(sa[:-1]) + tuple(sb[1:])
    return reshape(out, shape)


def _one_hot_rows(a, b):
    """`one_hot(labels, n) @ b` as the rows of `b` at `labels` (a zero row for a label
    outside [0, n), as the one-hot row is zero), or None when `a` is not such a staged
    one-hot matrix of `b`'s dtype. Exact: each row of the product is one row of `b` (the
    dense product differs only by NaNs where `b` holds inf/NaN in rows not picked). Its
    gradient adds rows instead of a product with the one-hot matrix."""
    if not is_staged(a):
        return None
    hot = trace_memo().get(("one_hot", a._var))
    if hot is None or len(_shape(b)) != 2 or _shape(b)[0] != hot[1] or len(_shape(a)) != 2 \
            or not a._var.type.dtype == result_dtype(a, b) == result_dtype(b):
        return None
    labels, n = hot
    rows = bind(Op.GATHER, b, labels)
    inside = reshape((labels >= 0) & (labels < n), (-1, 1))
    return where(inside, rows, NUMPY_OF[rows._var.type.dtype](0))


def matmul_t(a, b, ta=False, tb=False):
    """`op(a) @ op(b)` for 2-D operands, `op` transposing where `ta`/`tb` say (no copy)."""
    return bind(Op.MATMUL, a, b, ta=ta, tb=tb)


def dot(a, b):
    """Inner product of vectors, `matmul` for matrices, NumPy's `dot` otherwise: `jitad.dot(a, b)`."""
    if not _shape(a) or not _shape(b) or len(_shape(a)) > 2 or len(_shape(b)) > 2:
        return N_D["dot"](a, b)
    if len(_shape(a)) == 1 and len(_shape(b)) == 1:
        if _shape(a) != _shape(b):
            raise ShapeError(f"`dot`: shapes {_shape(a)} and {_shape(b)} differ")
        return sum(a * b)
    return matmul(a, b)


def outer(a, b):
    """Outer product of two vectors: `jitad.outer(a, b)[i, j] == a[i] * b[j]`."""
    return reshape(a, (-1, 1)) * reshape(b, (1, -1))


def data_dependent_shape(what):
    """The error for NumPy functions whose result's shape depends on the values."""
    return StagingError(f"{what} on a staged value: the result's shape would depend on the values, and "
                        "compiled shapes are static. Keep the shape: `jitad.where(mask, x, 0.0)` (or "
                        "`jitad.sum(jitad.where(mask, x, 0.0))` to reduce), or give a fixed `size=` as "
                        "jax.numpy does (`jnp.nonzero(x, size=k)`)")


def concatenate(xs, axis=0):
    """Join arrays along `axis`: `jitad.concatenate([a, b], axis=0)`."""
    xs = _array_list("concatenate", xs)
    shape = _shape(xs[0])
    if not shape:
        raise ShapeError("`concatenate` of scalars: they have no axis to join along; use `jitad.stack`")
    axis = _axis("concatenate", axis, len(shape), shape)
    if not builtins.any(is_staged(x) for x in xs):
        return np.concatenate(xs, axis=axis)
    return bind(Op.CONCAT, *_promoted(*xs), axis=axis)


def _array_list(who, xs):
    """The arrays to join: a list or tuple of them, or (as NumPy and JAX) the rows of one array."""
    if (is_staged(xs) or isinstance(xs, np.ndarray)) and _shape(xs):
        return [xs[i] for i in range(_shape(xs)[0])]
    if not isinstance(xs, (list, tuple)) or not xs:
        raise ArgumentError(f"`{who}` takes a non-empty list or tuple of arrays (or one array of at least one "
                            f"axis), got {type(xs).__name__}")
    return list(xs)


def stack(xs, axis=0):
    """Stack arrays along a new `axis`: `jitad.stack([a, b])`."""
    xs = _array_list("stack", xs)
    shape = _shape(xs[0])
    for x in xs[1:]:
        if tuple(_shape(x)) != tuple(shape):
            raise ShapeError(f"`stack`: shapes {tuple(shape)} and {tuple(_shape(x))} differ; "
                             "stacked arrays must have the same shape")
    axis = _axis("stack", axis, len(shape) + 1, shape)
    new = tuple(shape[:axis]) + (1,) + tuple(shape[axis:])
    return concatenate([reshape(x, new) for x in xs], axis)


def _static_shape(who, shape):
    shape = _dims(who, shape)
    if builtins.min(shape, default=0) < 0:
        raise ShapeError(f"`{who}`: shape {shape} has a negative dimension")
    return shape


def zeros(shape, dtype="f64"):
    """An array of zeros (a constant): `jitad.zeros((2, 3))`."""
    return np.zeros(_static_shape("zeros", shape), NUMPY_OF[_dtype_name(dtype, "zeros")])


def ones(shape, dtype="f64"):
    """An array of ones (a constant): `jitad.ones(3)`."""
    return np.ones(_static_shape("ones", shape), NUMPY_OF[_dtype_name(dtype, "ones")])


def full(shape, value, dtype="f64"):
    """An array filled with `value`: `jitad.full((2, 2), 0.5)`."""
    if is_staged(value):
        return broadcast_to(convert(value, dtype), shape)
    return np.full(_static_shape("full", shape), value, NUMPY_OF[_dtype_name(dtype, "full")])


def zeros_like(x):
    """Zeros of `x`'s shape and dtype."""
    return np.zeros(_shape(x), x.dtype if is_staged(x) else np.asarray(x).dtype)


def ones_like(x):
    """Ones of `x`'s shape and dtype."""
    return np.ones(_shape(x), x.dtype if is_staged(x) else np.asarray(x).dtype)


def logsumexp(x, axis=-1, keepdims=False):
    """log(sum(exp(x))) along `axis`, computed stably: `jitad.logsumexp(x)`."""
    axes = _axes(x, axis, "logsumexp")
    if not _shape(x):
        return x
    if not _nonempty(x, axes):   # a sum of no terms: log 0 = -inf, as JAX
        return log(sum(exp(x), axis, keepdims))
    m = max(stop_gradient(x), axis, keepdims=True)   # its gradient cancels exactly: not computed
    m = where(abs(m) < np.inf, m, 0.0)   # an infinite maximum: exp(x - m) must not be inf - inf
    out = log(sum(exp(x - m), axis, keepdims=True)) + m
    return out if keepdims else reshape(out, tuple(n for d, n in enumerate(_shape(x)) if d not in axes))


def log_softmax(x, axis=-1):
    """x - logsumexp(x) along `axis`; a line holding +inf is NaN, as JAX's:
    `jitad.log_softmax(logits)`."""
    if not _shape(x) or not _nonempty(x, _axes(x, axis, "log_softmax")):
        return x - logsumexp(x, axis, keepdims=True)
    m = max(stop_gradient(x), axis, keepdims=True)   # its gradient cancels exactly: not computed
    shifted = x - where(m > -np.inf, m, 0.0)   # an all -inf line shifts by 0; +inf - inf is NaN
    return shifted - log(sum(exp(shifted), axis, keepdims=True))


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along `axis`, computed stably: `jitad.softmax(logits)`."""
    if not _nonempty(x, _axes(x, axis, "softmax")):   # no elements to normalize: empty, as JAX
        return x * 1.0
    e = exp(x - max(stop_gradient(x), axis, keepdims=True))
    return e / sum(e, axis, keepdims=True)


def one_hot(labels, n, dtype="f64"):
    """`one_hot(labels, n)[..., k] == (labels[...] == k)` as floats."""
    n = _int_arg("one_hot", "n", n, 1)
    labels_2 = reshape(labels, tuple(_shape(labels)) + (1,))
    hot = convert(labels_2 == np.arange(n, dtype=np.int64), dtype)
    if is_staged(hot) and is_staged(labels) and len(_shape(labels)) == 1:   # for `matmul`
        trace_memo()[("one_hot", hot._var)] = (labels, n)   # (vars hash by identity)
    return hot


def nll_loss(logp, labels, who="nll_loss"):
    """Mean of `-logp[..., label]`: the loss for log-probabilities `logp` (…, C). A label
    outside [0, C) contributes 0 (as a one-hot row of zeros would)."""
    label_kind = labels.ir_dtype if is_staged(labels) else np.asarray(labels).dtype.kind
    if label_kind not in ("i64", "i", "u"):
        raise ArgumentError(f"`{who}`: labels must be ints, got {label_kind if is_staged(labels) else np.asarray(labels).dtype}")
    if tuple(_shape(labels)) != tuple(_shape(logp))[:-1]:
        raise ShapeError(f"`{who}`: labels of shape {tuple(_shape(labels))} for scores of shape "
                         f"{tuple(_shape(logp))}; labels need the shape of the scores without their last axis")
    n = _shape(logp)[-1]
    labels_2 = reshape(labels, tuple(_shape(labels)) + (1,))
    picked = where(labels_2 == np.arange(n, dtype=np.int64), logp, 0.0)   # no -inf * 0
    return -mean(sum(picked, -1))


def cross_entropy(logits, labels):
    """Mean of `-log_softmax(logits)[..., label]`: `jitad.cross_entropy(logits, labels)`."""
    if tuple(_shape(labels)) != tuple(_shape(logits))[:-1]:
        return nll_loss(logits, labels, "cross_entropy")   # raises the shape error
    return nll_loss(log_softmax(logits), labels)


def conv2d_valid(x, w):
    """The `conv2d` primitive: stride 1, no padding (a direct loop nest, no im2col)."""
    return bind(Op.CONV2D, x, w)
