"""`ravel_pytree` with JAX's name (`jax.flatten_util`): a pytree of arrays as one flat
vector, and the function that gives the pytree back. Eager or staged.

>>> from jitad.flatten_util import ravel_pytree
>>> flat, unravel = ravel_pytree({"w": np.ones((2, 2)), "b": np.zeros(2)})
>>> flat.shape
(6,)
>>> unravel(flat)["w"].shape
(2, 2)
"""
import numpy as np

from . import numeric as N
from .errors import ArgumentError
from .pytree import flatten, unflatten
from .staging import is_staged, result_dtype

__all__ = ["ravel_pytree"]


def _dtype(x):
    return x.ir_dtype if is_staged(x) else N._dtype_name(np.result_type(x), "ravel_pytree")


def ravel_pytree(tree):
    """`(flat, unravel)`: the leaves raveled and concatenated (in `tree_leaves` order, at
    their common dtype), and `unravel(flat)` rebuilding the pytree with each leaf's
    shape and dtype."""
    leaves, treedef = flatten(tree)
    shapes = [tuple(np.shape(x)) if not is_staged(x) else x.shape for x in leaves]
    dtypes = [_dtype(x) for x in leaves]
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    dtype = result_dtype(*leaves) if leaves else "f64"
    parts = [N.reshape(N.convert(x, dtype), (n,)) for x, n in zip(leaves, sizes)]
    if not any(map(is_staged, parts)):
        flat = np.concatenate([np.asarray(p) for p in parts]) if parts else np.zeros(0)
    else:
        flat = N.concatenate(parts) if len(parts) > 1 else parts[0]

    def unravel(flat_vector):
        if tuple(np.shape(flat_vector) if not is_staged(flat_vector) else flat_vector.shape) != (sum(sizes),):
            raise ArgumentError(f"unravel: expected a flat vector of shape ({sum(sizes)},), got "
                                f"{np.shape(flat_vector) if not is_staged(flat_vector) else flat_vector.shape}")
        out, start = [], 0
        for shape, n, dt in zip(shapes, sizes, dtypes):
            out.append(N.convert(N.reshape(flat_vector[start:start + n], shape), dt))
            start += n
        return unflatten(treedef, out)
    return flat, unravel
