"""`lax`'s dynamic slices: blocks at staged start indices, clamped inside the operand as JAX."""
import numpy as np

from .. import numeric as N
from ..errors import ArgumentError
from ..staging import is_staged
from .shapes import _shape


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
