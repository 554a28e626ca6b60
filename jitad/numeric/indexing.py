"""Indexing: `getitem` (NumPy's basic and advanced indexing), `take`, static slices, the
index clamp (a negative index counts from the end, then out of range clamps, as JAX),
and the window gathers of `conv2d` and the pools."""
import builtins
import math

import numpy as np

from ..errors import ArgumentError, IndexError_, ShapeError
from ..ir.ops import Op, clip_index as clip_index_values
from ..ir.types import check_int64_range
from ..staging import Staged, as_var, is_staged, result_dtype
from .math import (NUMPY_OF, _axis, _int_arg, _promoted, _shape, bind, broadcast_to, clip, conv2d_valid,
                   data_dependent_shape, matmul, max, mean, reshape, transpose, where)


__all__ = ["take", "conv2d", "max_pool2d", "avg_pool2d"]


def clip_index(i, n):
    """Index `i` along an axis of `n` as `index`/`gather` read it: a negative one counts
    from the end, then out of range clamps (`jitad.ir.ops.clip_index` on plain values)."""
    if not is_staged(i):
        return clip_index_values(i, n)
    return clip(where(i < 0, i + n, i), 0, builtins.max(n - 1, 0))


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
    if not shape:   # a 0-d array: itself (nothing around it)
        return g
    return bind(Op.UNSLICE, g, shape=tuple(shape), starts=tuple(starts), stops=tuple(stops),
                 steps=tuple(steps))


def getitem(x, key):
    """`x[key]` as NumPy indexes: static ints, slices (negative steps too), `None`, `...`,
    and index arrays, lists and staged ints on any axes (NumPy's advanced indexing; the
    indexed axes broadcast together). Negative indices count from the end; any index out of
    range after that (a static int too) clamps, as JAX."""
    shape = _shape(x)
    key = tuple(np.asarray(k) if isinstance(k, (list, tuple)) else k   # (a tuple inside the index: an index array)
                for k in (key if isinstance(key, tuple) else (key,)))
    if len(key) == 1 and isinstance(key[0], (np.ndarray, np.bool_)) and key[0].dtype == np.bool_ and not key[0].ndim:
        grown = getitem(x, None)   # x[True]: a new axis of 1, x[False]: of 0 (NumPy, JAX)
        return grown if key[0] else getitem(grown, slice(0, 0))
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
    expanded, axis = [], 0   # the axis of `shape` the next entry indexes
    for k in key:
        if is_staged(k) and k.ir_dtype == "bool":
            raise data_dependent_shape("x[mask] (boolean-mask indexing)")
        if isinstance(k, np.ndarray) and k.dtype == np.bool_:   # a constant mask: its entries are known now
            if not k.ndim:
                raise IndexError_("a 0-d boolean index among other indices: index with it alone, or use `None` "
                                 "for an axis of 1")
            _check_mask(k.shape, shape, axis)
            expanded += list(np.nonzero(k))
            axis += k.ndim
            continue
        axis += k is not None
        if _is_array_index(k) and ((k.ir_dtype != "i64") if is_staged(k) else k.dtype.kind not in "iu"):
            raise ArgumentError(f"index arrays must be ints, got {k.dtype}")
        if isinstance(k, np.ndarray):
            check_int64_range(k, "an index array")
            k = k.astype(np.int64)
        expanded.append(k)
    return expanded


def _check_mask(mask_shape, shape, axis):
    """IndexError_ unless a boolean mask of `mask_shape` covers the axes of `shape` from
    `axis` on exactly (NumPy's rule: a mask never broadcasts; a mask axis of length 0 selects
    nothing from an axis of any length, as in NumPy and JAX)."""
    covered = tuple(shape[axis:axis + len(mask_shape)])
    if len(covered) != len(mask_shape) or builtins.any(m not in (0, n) for m, n in zip(mask_shape, covered)):
        raise IndexError_(f"a boolean mask of shape {tuple(mask_shape)} indexes the axes from {axis} on of an array of "
                          f"shape {tuple(shape)}, which have sizes {covered}; the mask needs exactly those "
                          "sizes (index with an int array for other positions)")


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
    adjacent = places == list(range(places[0], places[0] + len(places)))
    moved = adjacent and axes[0] > 0 and batch   # NumPy keeps adjacent indexed axes where they were
    if not math.prod(out_shape):   # nothing to read; staged code keeps it staged (its indexing clamps)
        placed = out_shape[len(batch):len(batch) + axes[0]] + batch + out_shape[len(batch) + axes[0]:]
        empty = np.zeros(placed if moved else out_shape, NUMPY_OF[result_dtype(x)])
        return Staged(as_var(empty)) if is_staged(x) or builtins.any(map(is_staged, arrays)) else empty
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
    if moved:
        nb = len(batch)
        perm = list(range(nb, nb + axes[0])) + list(range(nb)) + list(range(nb + axes[0], len(out_shape)))
        out = transpose(out, tuple(perm))
    return out


def _take_axis(x, index, axis):
    """Entries at int `index` along `axis` (its axes replace `axis`): a gather of rows."""
    ndim = len(_shape(x))
    if axis == 0:
        return getitem(x, index)
    rows = getitem(transpose(x, (axis,) + tuple(d for d in range(ndim) if d != axis)), index)
    k = len(_shape(index))   # rows: index axes, then the other axes of x in order
    return transpose(rows, tuple(range(k, k + axis)) + tuple(range(k)) + tuple(range(k + axis, k + ndim - 1)))


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
