"""JAX's `jax.ops`: reductions of an array's rows by segment id.

>>> jitad.ops.segment_sum(np.array([1.0, 2.0, 3.0]), np.array([0, 0, 1]), num_segments=2)
Array([3., 3.])
"""
import numpy as np

from . import numpy as jnp
from .errors import ArgumentError
from .staging import is_staged

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]


def _identity(dtype, how):
    if how == "add":
        return 0
    if how == "multiply":
        return 1
    if np.dtype(dtype).kind == "f":
        return -np.inf if how == "max" else np.inf
    if np.dtype(dtype) == np.bool_:
        return how == "min"
    info = np.iinfo(np.int64)
    return info.min if how == "max" else info.max


def _segment(who, how, data, segment_ids, num_segments):
    """Rows of `data` combined by `how` into `num_segments` rows, row i of `data` into row
    `segment_ids[i]`; an id out of range is dropped, an empty segment holds the identity."""
    if num_segments is None:
        if is_staged(segment_ids):
            raise ArgumentError(f"{who}: give num_segments inside jit (the ids are not known when tracing)")
        num_segments = int(np.max(segment_ids)) + 1 if np.size(segment_ids) else 0
    dtype = data.dtype if not is_staged(data) else jnp.result_type(data)
    data_shape = tuple(data.shape) if is_staged(data) else np.shape(data)
    identity = _identity(dtype, how)
    valid = (segment_ids >= 0) & (segment_ids < num_segments)
    rows = jnp.where(jnp.reshape(valid, (-1,) + (1,) * (len(data_shape) - 1)), data, identity)
    out = jnp.full((int(num_segments),) + data_shape[1:], identity, dtype)
    return getattr(out.at[jnp.where(valid, segment_ids, 0)], how)(rows)


def segment_sum(data, segment_ids, num_segments=None, indices_are_sorted=False, unique_indices=False,
                bucket_size=None, mode=None):
    """The sum of the rows of each segment."""
    return _segment("segment_sum", "add", data, segment_ids, num_segments)


def segment_prod(data, segment_ids, num_segments=None, indices_are_sorted=False, unique_indices=False,
                 bucket_size=None, mode=None):
    """The product of the rows of each segment (1 where a segment is empty)."""
    return _segment("segment_prod", "multiply", data, segment_ids, num_segments)


def segment_max(data, segment_ids, num_segments=None, indices_are_sorted=False, unique_indices=False,
                bucket_size=None, mode=None):
    """The maximum of the rows of each segment (the dtype's lowest value where empty)."""
    return _segment("segment_max", "max", data, segment_ids, num_segments)


def segment_min(data, segment_ids, num_segments=None, indices_are_sorted=False, unique_indices=False,
                bucket_size=None, mode=None):
    """The minimum of the rows of each segment (the dtype's highest value where empty)."""
    return _segment("segment_min", "min", data, segment_ids, num_segments)
