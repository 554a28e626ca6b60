"""`ravel_pytree` with JAX's name (`jax.flatten_util`): a pytree of arrays as one flat
vector, and the function that gives the pytree back. Eager or staged.

Eagerly (no staged leaf), the layout of a pytree (each leaf's shape, dtype and place in
the vector, the vector's dtype) is worked out once per structure and kept: raveling is
one NumPy concatenate and unraveling slices views of the vector, so an optimizer that
ravels a gradient every step pays no per-leaf dispatch.

>>> from jitad.flatten_util import ravel_pytree
>>> flat, unravel = ravel_pytree({"w": np.ones((2, 2)), "b": np.zeros(2)})
>>> flat.shape
(6,)
>>> unravel(flat)["w"].shape
(2, 2)
"""
import numpy as np

from . import numeric as N
from .config import x64_enabled
from .errors import ArgumentError
from .pytree import flatten, unflatten
from .staging import is_staged
from .staging.values import numpy_dtype

__all__ = ["ravel_pytree"]

_LAYOUTS = {}   # (x64, treedef, each leaf's (type, shape, dtype)) -> _Layout of an eager pytree
_MAX_LAYOUTS = 256


def _dtype(x):
    """A leaf's jitad dtype (float64 is float32 where x64 is off, without a warning: the
    user asked for no dtype)."""
    if is_staged(x):
        return x.ir_dtype
    dtype = np.result_type(x)
    return N._dtype_name("f64" if dtype == np.float64 else dtype, "ravel_pytree")


def _common(dtypes):
    """The vector's dtype, as JAX promotes the leaves' own dtypes (none weak): the widest
    float where there is one (an int and a float32 give float32), else int, else bool."""
    for kind in (("f64", "f32"), ("i64",), ("bool",)):
        if any(d in kind for d in dtypes):
            return next(d for d in kind if d in dtypes)
    return "f64"


class _Layout:
    """Where each leaf lies in the flat vector: shapes, sizes, offsets, the leaves' own
    dtypes and the vector's (jitad dtype names)."""

    def __init__(self, leaves):
        self.shapes = [tuple(np.shape(x)) if not is_staged(x) else x.shape for x in leaves]
        self.dtypes = [_dtype(x) for x in leaves]
        self.sizes = [int(np.prod(s, dtype=np.int64)) for s in self.shapes]
        self.offsets = np.cumsum([0] + self.sizes).tolist()
        self.dtype = _common(self.dtypes)

    def check(self, flat_vector):
        shape = flat_vector.shape if is_staged(flat_vector) else np.shape(flat_vector)
        if tuple(shape) != (self.offsets[-1],):
            raise ArgumentError(f"unravel: expected a flat vector of shape ({self.offsets[-1]},), got {shape}")

    def unravel_numpy(self, flat_vector):
        """The leaves, as views of the host vector where the dtype allows."""
        flat = np.asarray(flat_vector)
        return [flat[o:o + n].reshape(shape).astype(numpy_dtype(dt), copy=False)[()]
                for o, n, shape, dt in zip(self.offsets, self.sizes, self.shapes, self.dtypes)]

    def unravel_staged(self, flat_vector):
        return [N.convert(N.reshape(flat_vector[o:o + n], shape), dt)
                for o, n, shape, dt in zip(self.offsets, self.sizes, self.shapes, self.dtypes)]


def _eager_layout(leaves, treedef):
    """The kept layout of host leaves of this structure (made on the first meeting)."""
    key = (x64_enabled(), treedef, tuple([(type(x), np.shape(x), getattr(x, "dtype", None)) for x in leaves]))
    try:
        layout = _LAYOUTS.get(key)
    except TypeError:   # an unhashable part (a custom node's aux data): not kept
        return _Layout(leaves)
    if layout is None:
        if len(_LAYOUTS) >= _MAX_LAYOUTS:
            _LAYOUTS.pop(next(iter(_LAYOUTS)))
        layout = _LAYOUTS[key] = _Layout(leaves)
    return layout


def _ravel_complex(leaves, treedef):
    """`ravel_pytree` of host leaves of which some are complex: a complex vector (the widest
    complex dtype of the leaves, as NumPy promotes them), each leaf given back in its dtype."""
    arrays = [np.asarray(x) for x in leaves]
    dtype = np.result_type(*arrays, np.complex64)
    flat = np.concatenate([np.ravel(a).astype(dtype) for a in arrays])
    offsets = np.cumsum([0] + [a.size for a in arrays]).tolist()

    def unravel(flat_vector):
        flat_vector = np.asarray(flat_vector)
        if flat_vector.shape != (offsets[-1],):
            raise ArgumentError(f"unravel: expected a flat vector of shape ({offsets[-1]},), got {flat_vector.shape}")
        parts = [flat_vector[o:o + a.size].reshape(a.shape) for o, a in zip(offsets, arrays)]
        return unflatten(treedef, [(p if a.dtype.kind == "c" else np.real(p)).astype(a.dtype)[()]
                                   for p, a in zip(parts, arrays)])
    return flat, unravel


def ravel_pytree(tree):
    """`(flat, unravel)`: the leaves raveled and concatenated (in `tree_leaves` order, at
    their common dtype as JAX's: float64 for a float32 array and a Python float), and `unravel(flat)` rebuilding the pytree with each leaf's
    shape and dtype."""
    leaves, treedef = flatten(tree)
    if not any(map(is_staged, leaves)) and any(np.iscomplexobj(x) for x in leaves):
        return _ravel_complex(leaves, treedef)
    if any(map(is_staged, leaves)):
        layout = _Layout(leaves)
        parts = [N.reshape(N.convert(x, layout.dtype), (n,)) for x, n in zip(leaves, layout.sizes)]
        flat = N.concatenate(parts) if len(parts) > 1 else parts[0]
    else:
        layout = _eager_layout(leaves, treedef)
        flat = np.concatenate([np.ravel(x) for x in leaves], dtype=numpy_dtype(layout.dtype), casting="unsafe") \
            if leaves else np.zeros(0)

    def unravel(flat_vector):
        layout.check(flat_vector)
        staged = is_staged(flat_vector)
        return unflatten(treedef, layout.unravel_staged(flat_vector) if staged else layout.unravel_numpy(flat_vector))
    return flat, unravel
