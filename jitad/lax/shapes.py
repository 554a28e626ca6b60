"""`lax`'s shape operations: broadcasting, reshapes, padding, slicing, gathers and
scatters with XLA's dimension numbers, iota and fills."""
import builtins
import enum
from typing import NamedTuple

import numpy as np

from .. import numeric as N
from .. import numpy as jnp
from ..errors import ArgumentError, ShapeError
from ..staging import is_staged, result_dtype


def _shape(x):
    return tuple(x.shape) if is_staged(x) else np.shape(x)


def _np_dtype(dtype):
    d = np.dtype(dtype)
    return np.int64 if d.kind in "iu" else d.type


def _array(x):
    return x if is_staged(x) else np.asarray(x)


# -- broadcasting and reshapes --------------------------------------------------------

def broadcast(operand, sizes):
    """`operand` with new leading axes of `sizes`: `lax.broadcast(x, (2,))` has shape (2,) + x.shape."""
    return N.broadcast_to(_array(operand), tuple(sizes) + _shape(operand))


def broadcast_in_dim(operand, shape, broadcast_dimensions, out_sharding=None):
    """`operand` broadcast to `shape`, its axis i becoming axis `broadcast_dimensions[i]`:
    `lax.broadcast_in_dim(v, (2, 3), (1,))` repeats the row v."""
    old, dims = _shape(operand), tuple(broadcast_dimensions)
    if len(dims) != len(old) or any(old[i] not in (1, shape[d]) for i, d in enumerate(dims)) \
            or list(dims) != sorted(dims):
        raise ShapeError(f"`lax.broadcast_in_dim`: operand of shape {old} cannot go to shape {tuple(shape)} "
                         f"along dimensions {dims}: give one increasing target axis per operand axis, "
                         "of the same length or from length 1")
    lifted = [1] * len(shape)
    for i, d in enumerate(dims):
        lifted[d] = old[i]
    return N.broadcast_to(N.reshape(_array(operand), tuple(lifted)), tuple(shape))


def broadcast_to_rank(x, rank):
    """`x` with leading length-1 axes up to `rank` axes: `lax.broadcast_to_rank(v, 3)`."""
    missing = rank - len(_shape(x))
    return x if missing <= 0 else N.reshape(_array(x), (1,) * missing + _shape(x))


def broadcast_shapes(*shapes):
    """The shape the `shapes` broadcast to (NumPy's rule): `lax.broadcast_shapes((2, 1), (3,)) == (2, 3)`."""
    return tuple(np.broadcast_shapes(*shapes))


def broadcasted_iota(dtype, shape, dimension, out_sharding=None):
    """An array of `shape` counting 0, 1, ... along `dimension`: `lax.broadcasted_iota(int, (2, 3), 1)`."""
    n = shape[dimension]
    line = np.arange(n, dtype=_np_dtype(dtype)).reshape([n if d == dimension else 1 for d in range(len(shape))])
    return np.broadcast_to(line, tuple(shape)).copy()


def iota(dtype, size, sharding=None):
    """0, 1, ..., size - 1 as `dtype`: `lax.iota(np.int64, 3)`."""
    return np.arange(size, dtype=_np_dtype(dtype))


def reshape(operand, new_sizes, dimensions=None, out_sharding=None):
    """`operand` (its axes first permuted by `dimensions`, if given) read in row-major
    order into `new_sizes`: `lax.reshape(x, (3, 2))`."""
    x = _array(operand)
    if dimensions is not None:
        x = N.transpose(x, tuple(dimensions))
    return N.reshape(x, tuple(new_sizes))


def collapse(operand, start_dimension, stop_dimension=None):
    """Axes start_dimension..stop_dimension-1 merged into one: `lax.collapse(x, 1)` flattens all but the first."""
    shape = _shape(operand)
    stop = len(shape) if stop_dimension is None else stop_dimension
    start, stop = range(len(shape))[builtins.slice(start_dimension, stop)].start, range(len(shape) + 1)[stop]
    size = int(np.prod(shape[start:stop], dtype=np.int64))
    return N.reshape(_array(operand), shape[:start] + (size,) + shape[stop:])


def squeeze(array, dimensions):
    """`array` without the length-1 axes `dimensions`: `lax.squeeze(x, (0,))`."""
    shape = _shape(array)
    dims = {d % len(shape) for d in dimensions}
    if any(shape[d] != 1 for d in dims):
        raise ShapeError(f"`lax.squeeze`: dimensions {tuple(dimensions)} of shape {shape} are not all of length 1")
    return N.reshape(_array(array), tuple(n for d, n in enumerate(shape) if d not in dims))


def expand_dims(array, dimensions):
    """`array` with length-1 axes inserted at `dimensions` (of the result):
    `lax.expand_dims(x, (0,))`."""
    shape = list(_shape(array))
    rank = len(shape) + len(dimensions)
    for d in sorted(d % rank for d in dimensions):
        shape.insert(d, 1)
    return N.reshape(_array(array), tuple(shape))


def rev(operand, dimensions):
    """`operand` reversed along `dimensions`: `lax.rev(x, (0,))`."""
    x = _array(operand)
    for d in dimensions:
        x = jnp.flip(x, d)
    return x


def transpose(operand, permutation):
    """`operand`'s axes permuted: axis i of the result is axis `permutation[i]`."""
    return N.transpose(_array(operand), tuple(permutation))


def concatenate(operands, dimension):
    """The operands joined along `dimension`: `lax.concatenate([x, y], 0)`."""
    return N.concatenate([_array(x) for x in operands], dimension)


def split(operand, sizes, axis=0):
    """`operand` cut along `axis` into pieces of `sizes`: `lax.split(x, (2, 3))`."""
    cuts = np.cumsum(sizes)[:-1].tolist()
    if sum(sizes) != _shape(operand)[axis]:
        raise ShapeError(f"`lax.split`: sizes {tuple(sizes)} do not add up to the length "
                         f"{_shape(operand)[axis]} of axis {axis}")
    return jnp.split(_array(operand), cuts, axis)


def pad(operand, padding_value, padding_config):
    """`operand` with `(low, high, interior)` padding per axis: `interior` values between
    neighbours, negative `low`/`high` cut entries off: `lax.pad(x, 0.0, [(1, 2, 1)])`."""
    x, shape = _array(operand), _shape(operand)
    config = [tuple(int(v) for v in c) for c in padding_config]
    if len(config) != len(shape) or any(len(c) != 3 or c[2] < 0 for c in config):
        raise ShapeError(f"`lax.pad`: padding_config {padding_config} for shape {shape}: give one "
                         "(low, high, interior) triple per axis, interior >= 0")
    grown = [n + max(lo, 0) + max(hi, 0) + max(n - 1, 0) * it for n, (lo, hi, it) in zip(shape, config)]
    if any(g + min(lo, 0) + min(hi, 0) < 0 for g, (lo, hi, _) in zip(grown, config)):
        raise ShapeError(f"`lax.pad`: padding_config {padding_config} cuts more than shape {shape} has")
    starts = [max(lo, 0) for lo, _, _ in config]
    steps = [it + 1 for _, _, it in config]
    stops = [s + max(n - 1, 0) * st + (1 if n else 0) for s, n, st in zip(starts, shape, steps)]
    inside = np.zeros(grown, bool)
    inside[tuple(builtins.slice(a, b, c) for a, b, c in zip(starts, stops, steps))] = True
    placed = N.unslice(x, tuple(grown), tuple(starts), tuple(stops), tuple(steps)) if inside.any() \
        else N.zeros(tuple(grown), result_dtype(x))
    out = N.where(inside, placed, N.convert(padding_value, result_dtype(x)) if is_staged(padding_value)
                  else np.asarray(padding_value).astype(N.NUMPY_OF[result_dtype(x)])[()])
    cut = [(-min(lo, 0), g + min(hi, 0)) for g, (lo, hi, _) in zip(grown, config)]
    if all(a == 0 and b == g for (a, b), g in zip(cut, grown)):
        return out
    return N.slice_static(out, [a for a, _ in cut], [b for _, b in cut], [1] * len(grown))


class PaddingType(enum.Enum):
    VALID = 1
    SAME = 2
    SAME_LOWER = 3


def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """The (low, high) padding pairs a padding string ('SAME', 'SAME_LOWER', 'VALID') means
    for windows over `in_shape`: `lax.padtype_to_pads((5,), (3,), (2,), 'SAME') == [(1, 1)]`."""
    kind = padding.upper() if isinstance(padding, str) else padding.name
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    if kind not in ("SAME", "SAME_LOWER"):
        raise ArgumentError(f"padding {padding!r}: give 'SAME', 'SAME_LOWER', 'VALID' or (low, high) pairs")
    pads = []
    for n, k, s in zip(in_shape, window_shape, window_strides):
        out = -(-n // s)
        total = max((out - 1) * s + k - n, 0)
        lo = total // 2 if kind == "SAME" else total - total // 2
        pads.append((lo, total - lo))
    return pads


# -- slicing --------------------------------------------------------------------------

def slice(operand, start_indices, limit_indices, strides=None):
    """`operand[start:limit:stride]` on every axis, static bounds: `lax.slice(x, (0, 1), (2, 3))`."""
    n = len(_shape(operand))
    strides = (1,) * n if strides is None else tuple(strides)
    if len(start_indices) != n or len(limit_indices) != n or len(strides) != n:
        raise ShapeError(f"`lax.slice`: an operand of shape {_shape(operand)} needs {n} starts, limits and strides")
    return N.slice_static(_array(operand), tuple(start_indices), tuple(limit_indices), strides)


def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0):
    """`lax.slice` along one `axis` (None bounds: the ends, negative ones from the end)."""
    shape = _shape(operand)
    axis = axis % len(shape)
    start, limit = _bounds(start_index, limit_index, shape[axis])
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, limit, stride
    return slice(operand, starts, limits, strides)


def _bounds(start, limit, n):
    start = 0 if start is None else start + n if start < 0 else start
    limit = n if limit is None else limit + n if limit < 0 else limit
    return start, limit


def index_in_dim(operand, index, axis=0, keepdims=True):
    """The slice at static `index` along `axis` (kept as a length-1 axis unless `keepdims=False`)."""
    shape = _shape(operand)
    axis = axis % len(shape)
    index = index + shape[axis] if index < 0 else index
    if not 0 <= index < shape[axis]:
        raise ShapeError(f"`lax.index_in_dim`: index {index} is out of range for axis {axis} of shape {shape}")
    out = slice_in_dim(operand, index, index + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


def index_take(src, idxs, axes):
    """`src` at the integer arrays `idxs` on `axes` (one index array per axis, together
    selecting entries): `lax.index_take(x, (rows,), (0,))`."""
    x = _array(src)
    moved = jnp.moveaxis(x, tuple(axes), tuple(range(len(axes))))
    return N.getitem(moved, tuple(idxs))


# -- gathers and scatters ---------------------------------------------------------------

class GatherScatterMode(enum.Enum):
    """Out-of-bounds windows: `CLIP` moves them inside, `FILL_OR_DROP` (a scatter's
    default) gives the fill value for a gather and drops the update for a scatter,
    `PROMISE_IN_BOUNDS` (a gather's default) trusts the caller (jitad clips)."""
    CLIP = 1
    FILL_OR_DROP = 2
    PROMISE_IN_BOUNDS = 3
    ONE_HOT = 4

    @staticmethod
    def from_any(s):
        if isinstance(s, GatherScatterMode):
            return s
        if isinstance(s, enum.Enum) and s.name in GatherScatterMode.__members__:   # JAX's own enum
            return GatherScatterMode[s.name]
        table = {None: GatherScatterMode.FILL_OR_DROP, "fill": GatherScatterMode.FILL_OR_DROP,
                 "drop": GatherScatterMode.FILL_OR_DROP, "clip": GatherScatterMode.CLIP,
                 "promise_in_bounds": GatherScatterMode.PROMISE_IN_BOUNDS}
        if s not in table:
            raise ArgumentError(f"gather/scatter mode {s!r}: give 'clip', 'fill', 'drop' or 'promise_in_bounds'")
        return table[s]


class GatherDimensionNumbers(NamedTuple):
    """How a gather reads: `offset_dims` (where the slice axes go in the output),
    `collapsed_slice_dims` (length-1 slice axes dropped), `start_index_map` (the operand
    axis each index component starts on), and batching axes shared by operand and indices."""
    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    operand_batching_dims: tuple = ()
    start_indices_batching_dims: tuple = ()


class ScatterDimensionNumbers(NamedTuple):
    """How a scatter writes: `update_window_dims` (the update axes that are window axes),
    `inserted_window_dims` (operand axes of window length 1 with no update axis),
    `scatter_dims_to_operand_dims` (the operand axis each index component starts on), and
    batching axes shared by operand and indices."""
    update_window_dims: tuple
    inserted_window_dims: tuple
    scatter_dims_to_operand_dims: tuple
    operand_batching_dims: tuple = ()
    scatter_indices_batching_dims: tuple = ()


def _window_index(operand_shape, indices, index_map, window, window_axes, op_batch, idx_batch):
    """Integer index arrays into the operand, one per operand axis, of shape
    batch_shape + (window lengths of `window_axes`), and the in-bounds mask of each batch
    position. `indices`: (..., k) starts for the operand axes `index_map`."""
    batch_shape = _shape(indices)[:-1]
    nb, nw = len(batch_shape), len(window_axes)
    grid = lambda n, at: np.arange(n).reshape([n if i == at else 1 for i in range(nb + nw)])
    idx, ok = [], True
    for d, n in enumerate(operand_shape):
        if d in op_batch:
            idx.append(grid(n, idx_batch[op_batch.index(d)]))
            continue
        size = window[d]
        start = 0
        if d in index_map:
            raw = N.convert(N.getitem(indices, (Ellipsis, index_map.index(d))), "i64") if is_staged(indices) \
                else np.asarray(indices)[..., index_map.index(d)].astype(np.int64)
            ok = ok & (raw >= 0) & (raw <= n - size)
            start = N.reshape(N.clip(raw, 0, n - size), batch_shape + (1,) * nw)
        off = grid(size, nb + window_axes.index(d)) if d in window_axes else 0
        idx.append(start + off)
    return idx, ok


def _fill_value(dtype, fill_value):
    if fill_value is not None:
        return fill_value
    return {"bool": True, "i64": np.iinfo(np.int64).min}.get(dtype, np.nan)


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, indices_are_sorted=False,
           unique_indices=False, mode=None, fill_value=None):
    """XLA's gather: for each index vector (the last axis of `start_indices`) the slice of
    `slice_sizes` starting there; see `GatherDimensionNumbers`. Out-of-bounds slices are
    filled with `fill_value` (NaN for floats) by default, moved inside with `mode='clip'`:
    `lax.gather(x, idx[:, None], GatherDimensionNumbers((1,), (0,), (0,)), (1, x.shape[1]))`
    takes rows. Out-of-bounds windows are moved inside by default (JAX's
    `PROMISE_IN_BOUNDS`), filled with `fill_value` (NaN for floats) with `mode='fill'`."""
    dn, x = dimension_numbers, _array(operand)
    shape, sizes = _shape(x), tuple(int(s) for s in slice_sizes)
    if len(sizes) != len(shape):
        raise ShapeError(f"`lax.gather`: slice_sizes {sizes} for an operand of shape {shape}: give one per axis")
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    window_axes = tuple(d for d in range(len(shape)) if d not in dropped)
    idx, ok = _window_index(shape, start_indices, tuple(dn.start_index_map), sizes, window_axes,
                            tuple(dn.operand_batching_dims), tuple(dn.start_indices_batching_dims))
    out = N.getitem(x, tuple(idx))   # batch axes, then the window axes in operand order
    nb = len(_shape(start_indices)) - 1
    rank = nb + len(window_axes)
    batch_pos = [p for p in range(rank) if p not in dn.offset_dims]
    perm = [0] * rank
    for i, p in enumerate(batch_pos):
        perm[p] = i
    for i, p in enumerate(dn.offset_dims):
        perm[p] = nb + i
    out = N.transpose(out, tuple(perm)) if perm != list(range(rank)) else out
    mode = GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else GatherScatterMode.from_any(mode)
    if mode != GatherScatterMode.FILL_OR_DROP or ok is True:
        return out
    mask = broadcast_in_dim(ok, _shape(out), tuple(batch_pos))
    return N.where(mask, out, np.asarray(_fill_value(result_dtype(x), fill_value)).astype(
        N.NUMPY_OF[result_dtype(x)])[()])


def _scatter(kind, operand, scatter_indices, updates, dimension_numbers, mode):
    dn, x, u = dimension_numbers, _array(operand), _array(updates)
    shape, ushape = _shape(x), _shape(u)
    dropped = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    window_axes = tuple(d for d in range(len(shape)) if d not in dropped)
    window = [1] * len(shape)
    for d, ud in zip(window_axes, dn.update_window_dims):
        window[d] = ushape[ud]
    idx, ok = _window_index(shape, scatter_indices, tuple(dn.scatter_dims_to_operand_dims), window,
                            window_axes, tuple(dn.operand_batching_dims), tuple(dn.scatter_indices_batching_dims))
    batch_axes = [a for a in range(len(ushape)) if a not in dn.update_window_dims]
    u = N.transpose(u, tuple(batch_axes) + tuple(dn.update_window_dims))   # batch axes first, as idx
    if GatherScatterMode.from_any(mode) == GatherScatterMode.FILL_OR_DROP and ok is not True:
        # a dropped update goes to one extra entry past the end of axis 0, cut off after
        extra = N.concatenate([x, N.zeros((1,) + shape[1:], result_dtype(x))], 0)
        nw = len(window_axes)
        keep = N.reshape(ok, _shape(ok) + (1,) * nw)
        idx = [N.where(keep, idx[0], shape[0])] + idx[1:]
        out = _apply(kind, extra, idx, u)
        return N.slice_static(out, (0,) * len(shape), shape, (1,) * len(shape))
    return _apply(kind, x, idx, u)


def _apply(kind, x, idx, u):
    at = N.NUMPY_API["ndarray.at"](x)[tuple(idx)]
    return getattr(at, kind)(u)


def _scatter_fn(kind, doc):
    def fn(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
           unique_indices=False, mode=None):
        return _scatter(kind, operand, scatter_indices, updates, dimension_numbers, mode)
    fn.__doc__ = doc
    return fn


scatter = _scatter_fn("set", "XLA's scatter: `operand` with the windows of `updates` written at the "
                             "index vectors of `scatter_indices` (see `ScatterDimensionNumbers`); "
                             "out-of-bounds windows are dropped by default, moved inside with `mode='clip'`.")
scatter_add = _scatter_fn("add", "`lax.scatter` adding the updates to the operand (repeated indices add up).")
scatter_mul = _scatter_fn("multiply", "`lax.scatter` multiplying the operand by the updates.")
scatter_min = _scatter_fn("min", "`lax.scatter` keeping the smaller of the operand and the updates.")
scatter_max = _scatter_fn("max", "`lax.scatter` keeping the larger of the operand and the updates.")


def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *, indices_are_sorted=False,
                unique_indices=False, mode=None):
    """`lax.scatter` subtracting the updates from the operand."""
    return _scatter("add", operand, scatter_indices, -_array(updates), dimension_numbers, mode)


def scatter_apply(operand, scatter_indices, func, dimension_numbers, *, update_shape=(),
                  indices_are_sorted=False, unique_indices=False, mode=None):
    """`operand` with `func` applied to the entries the scatter indices reach, once each
    (JAX applies it once per occurrence of a repeated index)."""
    hit = _scatter("set", N.zeros(_shape(operand), "bool"), scatter_indices,
                   np.ones(update_shape, bool), dimension_numbers, mode)
    return N.where(hit, func(_array(operand)), _array(operand))


# -- selects and fills ----------------------------------------------------------------

def select(pred, on_true, on_false):
    """`on_true` where `pred` else `on_false`, elementwise: `lax.select(x > 0, x, -x)`."""
    return N.where(pred, on_true, on_false)


def select_n(which, *cases):
    """`cases[which]` elementwise: a bool `which` picks between two cases, an int one among
    any number (out of range is undefined in XLA; jitad clamps): `lax.select_n(x > 0, -x, x)`."""
    if not cases:
        raise ArgumentError("`lax.select_n` needs at least one case")
    if len(cases) == 1:
        return cases[0]
    if result_dtype(which) == "bool":
        if len(cases) != 2:
            raise ArgumentError(f"`lax.select_n`: a boolean `which` picks between 2 cases, got {len(cases)}")
        return N.where(which, cases[1], cases[0])
    out = cases[-1]
    for i in range(len(cases) - 2, -1, -1):
        out = N.where(which <= i, cases[i], out)
    return out


def full(shape, fill_value, dtype=None, *, sharding=None):
    """An array of `shape` filled with `fill_value` (of `dtype`, else the value's):
    `lax.full((2, 3), 1.5)`."""
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if is_staged(fill_value):
        value = fill_value if dtype is None else N.convert(fill_value, _ir(dtype))
        return N.broadcast_to(value, shape)
    dtype = np.asarray(fill_value).dtype if dtype is None else dtype
    return np.full(shape, fill_value, _np_dtype(dtype))


def _ir(dtype):
    d = np.dtype(dtype)
    return "bool" if d == np.bool_ else "i64" if d.kind in "iu" else "f32" if d == np.float32 else "f64"


def full_like(x, fill_value, dtype=None, shape=None, sharding=None):
    """An array like `x` (its shape and dtype unless given) filled with `fill_value`."""
    dtype = N.NUMPY_OF[result_dtype(x)] if dtype is None else dtype
    return full(_shape(x) if shape is None else shape, fill_value, dtype)


def zeros_like_array(x):
    """Zeros of `x`'s shape and dtype."""
    return full_like(x, 0)


def empty(dtype):
    """An empty placeholder value of `dtype` (a zero scalar)."""
    return np.zeros((), _np_dtype(dtype))
