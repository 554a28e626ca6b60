"""The math functions users call, for staged values and plain numbers alike.

On Python or NumPy numbers they compute eagerly with NumPy; on staged values they
record a node. `jitad.exp(x)` is to jitad what `jnp.exp(x)` is to JAX.
"""
import builtins
import functools
import inspect
import math
import operator
import sys

import numpy as np

from .errors import ArgumentError, IndexError_, ShapeError, StagingError
from .ir.ops import IMPLS, PRIMITIVES, Op, clip_index as clip_index_values, impl_of
from .primitives import rules
from .primitives.along_axis import SCANS
from .ir.types import FLOATS, check_int64_range
from .staging import (Staged, as_var, binary, emit, is_staged, logical, result_dtype, to_bool, trace_memo,
                      unary)

__all__ = ["where", "clip", "convert",
           "sum", "mean", "max", "min", "dot", "matmul", "outer", "transpose", "reshape",
           "broadcast_to", "concatenate", "stack", "zeros", "zeros_like", "ones", "ones_like",
           "full", "softmax", "log_softmax", "logsumexp", "one_hot", "take", "cross_entropy",
           "nll_loss", "conv2d", "max_pool2d", "avg_pool2d"]


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
    fn.__name__ = fn.__qualname__ = op.value
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
    return bind(op, x, axis=_axis(op.value, axis, len(_shape(x)), _shape(x)), reverse=bool(reverse))


for _op in PRIMITIVES.values():
    if _op.doc is not None:
        globals()[_op.value] = _wrapper(_op)
        __all__.append(_op.value)


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
        return np.where(cond, a, b)[()]
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
    return name


def clip_index(i, n):
    """Index `i` along an axis of `n` as `index`/`gather` read it: a negative one counts
    from the end, then out of range clamps (`jitad.ir.ops.clip_index` on plain values)."""
    if not is_staged(i):
        return clip_index_values(i, n)
    return clip(where(i < 0, i + n, i), 0, builtins.max(n - 1, 0))


def convert(x, dtype):
    """`x` as `dtype` ('f64', 'f32', 'i64', 'bool'); float to int truncates toward zero,
    saturates at the int64 range and sends NaN to 0: `jitad.convert(2.7, 'i64') == 2`."""
    name = _dtype_name(dtype, "convert")
    if not is_staged(x):
        return IMPLS[Op.CONVERT](x, dtype=name)
    return Staged(as_var(x, name))


# -- tensors ---------------------------------------------------------------------

def _shape(x):
    """The shape of an operand; an operand that is no number or array is an ArgumentError."""
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
        return impl_of(op)(*[np.asarray(x) for x in xs], **attrs)
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
    return -max(-x, axis, keepdims)


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
    return bind(Op.TRANSPOSE, x, perm=perm)


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
                 # methods on staged values (`np.var(x)`, `x.var()`) find them here; jitad.linalg's
                 # as "linalg.solve", ... (for `np.linalg.solve(x, b)`)


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


def take_slice(x, axis, start, stop):
    """`x[..., start:stop, ...]` along `axis` (static bounds)."""
    shape = _shape(x)
    starts = tuple(start if d == axis else 0 for d in range(len(shape)))
    stops = tuple(stop if d == axis else n for d, n in enumerate(shape))
    return slice_static(x, starts, stops, (1,) * len(shape))


def slice_static(x, starts, stops, steps):
    return bind(Op.SLICE, x, starts=tuple(starts), stops=tuple(stops), steps=tuple(steps))


def unslice(g, shape, starts, stops, steps):
    """Zeros of `shape` with `g` placed at the static slice (the adjoint of slicing)."""
    return bind(Op.UNSLICE, g, shape=tuple(shape), starts=tuple(starts), stops=tuple(stops),
                 steps=tuple(steps))


def getitem(x, key):
    """`x[key]` as NumPy indexes: static ints, slices (negative steps too), `None`, `...`,
    and index arrays, lists and staged ints on any axes (NumPy's advanced indexing; the
    indexed axes broadcast together). Negative indices count from the end; any index out of
    range after that (a static int too) clamps, as JAX."""
    shape = _shape(x)
    key = tuple(np.asarray(k) if isinstance(k, list) else k for k in (key if isinstance(key, tuple) else (key,)))
    if builtins.any(_is_array_index(k) for k in key):
        return _advanced(x, key)
    if Ellipsis in key:
        k = key.index(Ellipsis)
        n_fill = len(shape) - (len(key) - 1 - key.count(None))
        key = key[:k] + (slice(None),) * n_fill + key[k + 1:]
    starts, stops, steps, out_shape, reversed_axes = [], [], [], [], []
    d = 0
    for k in key:
        if k is None:
            out_shape.append(("new",))
            continue
        if d >= len(shape):
            raise IndexError_(f"too many indices for shape {shape}")
        n = shape[d]
        if isinstance(k, (int, np.integer)):
            if n == 0:
                raise IndexError_(f"index {k} into axis {d} of size 0: there is nothing to index")
            k = builtins.min(builtins.max(int(k) + n if k < 0 else int(k), 0), n - 1)   # clamped, as JAX
            starts.append(k), stops.append(k + 1), steps.append(1)
        elif isinstance(k, slice):
            a, b, c = k.indices(n)
            if c < 0:   # the same entries with a positive step, then reversed
                picked = range(a, b, c)
                a, b, c = (picked[-1], picked[0] + 1, -c) if picked else (0, 0, 1)
                reversed_axes.append(len(out_shape))
            starts.append(a), stops.append(builtins.max(a, b)), steps.append(c)
            out_shape.append(("axis", d))
        else:
            raise ArgumentError(f"unsupported index {k!r}")
        d += 1
    for n in shape[d:]:
        starts.append(0), stops.append(n), steps.append(1)
        out_shape.append(("axis", len(starts) - 1))
    full = (starts == [0] * len(shape) and stops == list(shape) and steps == [1] * len(shape))
    out = x if full else slice_static(x, starts, stops, steps)
    sliced = _shape(out)
    final = tuple(1 if o == ("new",) else sliced[o[1]] for o in out_shape)
    out = reshape(out, final)
    for axis in reversed_axes:
        if final[axis] > 1:
            out = _take_axis(out, np.arange(final[axis] - 1, -1, -1), axis)
    return out


def _is_array_index(k):
    return is_staged(k) or isinstance(k, np.ndarray)


def _expand_key(key, shape):
    """`key` with `...` spelled out, constant masks as their index arrays (NumPy's
    `nonzero`) and index arrays as int64, checked."""
    dots = [e for e, k in enumerate(key) if k is Ellipsis]   # (`in` would compare the arrays)
    if dots:
        e = dots[0]
        used = builtins.sum(k.ndim if isinstance(k, np.ndarray) and k.dtype == np.bool_ else k is not None
                            for k in key[:e] + key[e + 1:])
        key = key[:e] + (slice(None),) * (len(shape) - used) + key[e + 1:]
    expanded = []
    for k in key:
        if is_staged(k) and k.ir_dtype == "bool":
            raise data_dependent_shape("x[mask] (boolean-mask indexing)")
        if isinstance(k, np.ndarray) and k.dtype == np.bool_:   # a constant mask: its entries are known now
            if not k.ndim:
                raise IndexError_("a 0-d boolean index: use `None` to add an axis")
            expanded += list(np.nonzero(k))
            continue
        if _is_array_index(k) and ((k.ir_dtype != "i64") if is_staged(k) else k.dtype.kind not in "iu"):
            raise ArgumentError(f"index arrays must be ints, got {k.dtype}")
        if isinstance(k, np.ndarray):
            check_int64_range(k, "an index array")
            k = k.astype(np.int64)
        expanded.append(k)
    return expanded


def _advanced(x, key):
    """`x[key]` with index arrays or staged ints in `key`: the other entries first (a basic
    index, the indexed axes kept whole), then one gather of rows of a reshaped view over the
    indexed axes (moved to the front), its result's axes placed where NumPy puts them."""
    shape = _shape(x)
    if not shape:
        raise IndexError_("cannot index a scalar with an array or a staged int")
    expanded = _expand_key(key, shape)
    arrays = [k for k in expanded if _is_array_index(k)]
    try:
        batch = tuple(np.broadcast_shapes(*[_shape(k) for k in arrays]))
    except ValueError:
        raise IndexError_("index arrays of shapes " + ", ".join(str(_shape(k)) for k in arrays) +
                          " do not broadcast together") from None
    # static ints join the advanced indices when the arrays add axes (NumPy's rule)
    advanced = lambda k: _is_array_index(k) or (batch != () and isinstance(k, (int, np.integer)))
    basic, axes, places, pos = [], [], [], 0
    for place, k in enumerate(expanded):
        if advanced(k):
            basic.append(slice(None))
            axes.append(pos)
            places.append(place)
        else:
            basic.append(k)
        pos += k is None or isinstance(k, slice) or advanced(k)
    y = getitem(x, tuple(basic))
    y_shape = _shape(y)
    if builtins.any(y_shape[a] == 0 for a in axes) and math.prod(batch):
        raise IndexError_(f"cannot index axes of size 0 (shape {tuple(shape)}) with index arrays")
    rest = [d for d in range(len(y_shape)) if d not in axes]
    if axes != list(range(len(axes))):
        y = transpose(y, tuple(axes + rest))
    sizes = [y_shape[a] for a in axes]
    out_shape = batch + tuple(y_shape[d] for d in rest)
    if not math.prod(out_shape):
        return np.zeros(out_shape, NUMPY_OF[result_dtype(x)])
    if len(axes) == 1:   # index/gather clamp the index themselves
        axes_index = expanded[places[0]]
    else:
        flat = 0
        for k, n, stride in zip([expanded[p] for p in places], sizes, np.cumprod([1] + sizes[:0:-1])[::-1]):
            flat = flat + clip_index(k, n) * int(stride)
        axes_index = flat
    rows = reshape(y, (math.prod(sizes),) + tuple(y_shape[d] for d in rest))
    if not is_staged(axes_index):
        axes_index = np.broadcast_to(np.asarray(axes_index, np.int64), batch)
    elif _shape(axes_index) != batch:
        axes_index = broadcast_to(axes_index, batch)
    out = bind(Op.INDEX if batch == () else Op.GATHER, rows, axes_index)
    adjacent = places == list(range(places[0], places[0] + len(places)))
    if adjacent and axes[0] > 0 and batch:   # NumPy keeps adjacent indexed axes where they were
        nb = len(batch)
        perm = list(range(nb, nb + axes[0])) + list(range(nb)) + list(range(nb + axes[0], len(out_shape)))
        out = transpose(out, tuple(perm))
    return out


def data_dependent_shape(what):
    """The error for NumPy functions whose result's shape depends on the values."""
    return StagingError(f"{what} on a staged value: the result's shape would depend on the values, and "
                        "compiled shapes are static. Keep the shape: `jitad.where(mask, x, 0.0)` (or "
                        "`jitad.sum(jitad.where(mask, x, 0.0))` to reduce), or give a fixed `size=` as "
                        "jax.numpy does (`jnp.nonzero(x, size=k)`)")


def _take_axis(x, index, axis):
    """Entries at int `index` along `axis` (its axes replace `axis`): a gather of rows."""
    ndim = len(_shape(x))
    if axis == 0:
        return getitem(x, index)
    rows = getitem(transpose(x, (axis,) + tuple(d for d in range(ndim) if d != axis)), index)
    k = len(_shape(index))   # rows: index axes, then the other axes of x in order
    return transpose(rows, tuple(range(k, k + axis)) + tuple(range(k)) + tuple(range(k + axis, k + ndim - 1)))


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
    if is_staged(xs) or isinstance(xs, np.ndarray) or not isinstance(xs, (list, tuple)) or not xs:
        raise ArgumentError(f"`{who}` takes a non-empty list or tuple of arrays, got {type(xs).__name__}")
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
    """x - logsumexp(x) along `axis`: `jitad.log_softmax(logits)`."""
    _axes(x, axis, "log_softmax")
    return x - logsumexp(x, axis, keepdims=True)


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


def take(a, indices, axis=0):
    """Entries of `a` at integer `indices` along `axis` (None: of `a` flattened); a negative
    index counts from the end, out of range after that clamps (as JAX): `jitad.take(E, words)`."""
    indices = indices if is_staged(indices) else np.asarray(indices)
    if axis is None:
        a, axis = reshape(a, (-1,)), 0
    axis = _axis("take", axis, len(_shape(a)), _shape(a))
    if not is_staged(a) and not is_staged(indices):
        return np.take(a, clip_index(indices, np.shape(a)[axis]), axis)
    return _take_axis(a, indices, axis)


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


def _im2col_indices(c, h, w, kh, kw, stride, padding):
    """For each output pixel and patch element, the flat index into the padded (c, h, w) image."""
    hp, wp = h + 2 * padding, w + 2 * padding
    oh, ow = (hp - kh) // stride + 1, (wp - kw) // stride + 1
    ci, ki, kj = np.meshgrid(np.arange(c), np.arange(kh), np.arange(kw), indexing="ij")
    oi, oj = np.meshgrid(np.arange(oh), np.arange(ow), indexing="ij")
    rows = (oi.reshape(-1, 1) * stride + ki.reshape(1, -1))
    cols = (oj.reshape(-1, 1) * stride + kj.reshape(1, -1))
    return (ci.reshape(1, -1) * hp * wp + rows * wp + cols).astype(np.int64), oh, ow


def _pad(x, padding):
    if not padding:
        return x
    n, c, h, w = _shape(x)
    return unslice(x, (n, c, h + 2 * padding, w + 2 * padding), (0, 0, padding, padding),
                   (n, c, h + padding, w + padding), (1, 1, 1, 1))


def conv2d(x, w, b=None, stride=1, padding=0):
    """2-D convolution, NCHW input (N, C, H, W) and OIHW weights (O, C, kh, kw): stride 1 as a
    direct loop nest (the `conv2d` primitive), other strides as im2col + GEMM."""
    if len(_shape(x)) != 4 or len(_shape(w)) != 4:
        raise ShapeError(f"`conv2d`: input {tuple(_shape(x))} and weights {tuple(_shape(w))}: need "
                         "(n, c, h, w) and (o, c, kh, kw); add a batch axis with x[None]")
    stride = _int_arg("conv2d", "stride", stride, 1)
    padding = _int_arg("conv2d", "padding", padding, 0)
    n, c, h, wd = _shape(x)
    o, c2, kh, kw = _shape(w)
    if c != c2:
        raise ShapeError(f"`conv2d`: input of shape {tuple(_shape(x))} has {c} channels but weights of "
                         f"shape {tuple(_shape(w))} expect {c2}")
    _check_window("conv2d", (kh, kw), (h + 2 * padding, wd + 2 * padding), _shape(x), padding)
    if b is not None and tuple(_shape(b)) != (o,):
        raise ShapeError(f"`conv2d`: bias of shape {tuple(_shape(b))} for {o} output channels; "
                         f"it needs shape ({o},)")
    if stride == 1:
        x, w = _promoted(x, w)
        if result_dtype(x) == "bool":
            raise ArgumentError("`conv2d` of booleans: convert them to numbers first (x.astype('f64'))")
        out = conv2d_valid(_pad(x, padding), w)
        return out if b is None else out + reshape(b, (o, 1, 1))
    idx, oh, ow = _im2col_indices(c, h, wd, kh, kw, stride, padding)
    xp = _pad(x, padding)
    flat = reshape(xp, (n * c * (h + 2 * padding) * (wd + 2 * padding), 1))
    offsets = (np.arange(n) * c * (h + 2 * padding) * (wd + 2 * padding)).reshape(n, 1, 1)
    cols = reshape(getitem(flat, (offsets + idx[None]).reshape(-1)), (n * oh * ow, c * kh * kw))
    out = matmul(cols, transpose(reshape(w, (o, c * kh * kw))))          # (n*oh*ow, o)
    if b is not None:
        out = out + b
    return transpose(reshape(out, (n, oh, ow, o)), (0, 3, 1, 2))


def conv2d_valid(x, w):
    """The `conv2d` primitive: stride 1, no padding (a direct loop nest, no im2col)."""
    return bind(Op.CONV2D, x, w)


def _check_window(who, window, image, shape, padding=0):
    if window[0] > image[0] or window[1] > image[1]:
        padded = f" (with padding {padding})" if padding else ""
        raise ShapeError(f"`{who}`: a {window[0]}x{window[1]} window does not fit in the "
                         f"{image[0]}x{image[1]} image{padded} of input shape {tuple(shape)}; "
                         "use a smaller window or a larger input")


def _pool_windows(x, k, stride, who):
    """The k×k windows of x (n, c, h, w) and the axes that run over a window. Windows that
    tile the image (stride k) are a reshape of it, (n, c, oh, k, ow, k): no gather, and
    the gradient is elementwise; otherwise (overlapping windows) a gather of patches."""
    if len(_shape(x)) != 4:
        raise ShapeError(f"`{who}`: input of shape {tuple(_shape(x))}: need (n, c, h, w); "
                         "add a batch axis with x[None]")
    k = _int_arg(who, "k", k, 1)
    stride = k if stride is None else _int_arg(who, "stride", stride, 1)
    n, c, h, w = _shape(x)
    _check_window(who, (k, k), (h, w), _shape(x))
    if stride == k:
        oh, ow = h // k, w // k
        if (oh * k, ow * k) != (h, w):   # rows and columns past the last whole window drop
            x = slice_static(x, (0, 0, 0, 0), (n, c, oh * k, ow * k), (1, 1, 1, 1))
        return reshape(x, (n, c, oh, k, ow, k)), (3, 5)
    idx, oh, ow = _im2col_indices(1, h, w, k, k, stride, 0)
    flat = reshape(x, (n * c * h * w, 1))
    offsets = (np.arange(n * c) * h * w).reshape(n * c, 1, 1)
    return reshape(getitem(flat, (offsets + idx[None]).reshape(-1)), (n, c, oh, ow, k * k)), (4,)


def max_pool2d(x, k, stride=None):
    """Max over k×k windows (stride defaults to k), NCHW."""
    windows, axes = _pool_windows(x, k, stride, "max_pool2d")
    return max(windows, axes)


def avg_pool2d(x, k, stride=None):
    """Mean over k×k windows (stride defaults to k), NCHW."""
    windows, axes = _pool_windows(x, k, stride, "avg_pool2d")
    return mean(windows, axes)


# -- NumPy functions on staged values (`np.sin(x)`, `np.ones(3) + x`, `np.sum(x)`) ------------

_NUMPY_UFUNCS = {
    **{name: functools.partial(binary, op) for name, op in (
        ("add", Op.ADD), ("subtract", Op.SUB), ("multiply", Op.MUL), ("divide", Op.DIV), ("power", Op.POW),
        ("remainder", Op.MOD), ("floor_divide", Op.FLOORDIV), ("less", Op.LT), ("less_equal", Op.LE),
        ("greater", Op.GT), ("greater_equal", Op.GE), ("equal", Op.EQ), ("not_equal", Op.NE))},
    "bitwise_and": functools.partial(logical, Op.AND), "bitwise_or": functools.partial(logical, Op.OR),
    "invert": lambda a: ~a, "negative": lambda a: -a, "positive": lambda a: a, "absolute": abs, "matmul": matmul,
    **{name: globals()[name] for name in ("exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tanh",
                                          "maximum", "minimum", "square")}}
_NUMPY_ALIASES = {"amax": "max", "amin": "min", "absolute": "abs", "fabs": "abs"}
_NUMPY_REDUCTIONS = {"add": "sum", "maximum": "max", "minimum": "min"}


def numpy_ufunc(ufunc, method, inputs, kwargs):
    """`np.<ufunc>(...)` with a staged input: the jitad operation, or a StagingError."""
    name = ufunc.__name__
    fn = _NUMPY_UFUNCS.get(name) or (globals()[name] if name in __all__ else NUMPY_API.get(name))
    if "out" in kwargs:
        raise _numpy_error(f"np.{name}(..., out=...) or an in-place operator (`a += x`) writing a staged "
                           "value into a NumPy array", "Write `a = a + x` to make a new value")
    if method != "__call__" or kwargs or fn is None:
        call = f"np.{name}" + (f".{method}" if method != "__call__" else "") + \
            (f"(..., {', '.join(kwargs)}=...)" if kwargs else "")
        jitad_name = _NUMPY_REDUCTIONS.get(name) if method == "reduce" else _NUMPY_ALIASES.get(name, name)
        return _no_numpy(call, jitad_name)
    return fn(*inputs)


def numpy_function(func, args, kwargs):
    """`np.<function>(...)` with a staged argument: the jitad function of the same name when its
    signature takes the arguments, or a StagingError naming the one to call."""
    name = _NUMPY_ALIASES.get(func.__name__, func.__name__)
    if name in ("shape", "ndim", "size"):   # NumPy's own code reads the attribute
        return func._implementation(*args, **kwargs)
    call = f"{func.__module__.replace('numpy', 'np', 1)}.{func.__name__}"
    if func.__module__ == "numpy.linalg":   # np.linalg.solve runs jitad.linalg.solve
        name = f"linalg.{name}"
    fn = globals().get(name) if name in __all__ else NUMPY_API.get(name)
    if fn is None:
        return _no_numpy(call, None)
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return _no_numpy(f"{call}({', '.join(kwargs)}{'=...' if kwargs else ''})", name, fn)
    return fn(*args, **kwargs)


def _numpy_error(what, fix):
    return StagingError(f"{what}: NumPy cannot compute on a staged value, whose value is only "
                        f"known when the compiled code runs. {fix}")


def _no_numpy(call, jitad_name, fn=None):
    fn = fn or (globals()[jitad_name] if jitad_name in __all__ else None)
    if fn is not None:
        fix = f"Call `jitad.{jitad_name}{inspect.signature(fn)}` instead"
    else:
        fix = "jitad has no function of that name: write it with jitad's functions (jitad.exp, jitad.sum, ...)"
    raise _numpy_error(f"{call} on a staged value", fix)


rules.N.module = sys.modules[__name__]   # the staged math of the derivative rules
