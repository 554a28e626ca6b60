"""JAX's `jax.dlpack`: arrays from other libraries through the DLPack protocol.

>>> jitad.dlpack.from_dlpack(np.arange(3.0))
Array([0., 1., 2.])
"""
import numpy as np

from .errors import ArgumentError
from .ir.types import dtype_of_numpy

__all__ = ["from_dlpack", "is_supported_dtype"]


def from_dlpack(external_array, device=None, copy=None):
    """A `jitad.numpy.Array` sharing (or, with `copy=True`, copying) the memory of an
    object with `__dlpack__` (a NumPy array, a CPU torch tensor, ...)."""
    from .numpy import Array
    if not hasattr(external_array, "__dlpack__"):
        raise ArgumentError(f"from_dlpack takes an object with __dlpack__ (a NumPy array, a CPU tensor), "
                            f"got {type(external_array).__name__}")
    out = np.from_dlpack(external_array, copy=copy)
    if not is_supported_dtype(out.dtype):
        raise ArgumentError(f"from_dlpack: dtype {out.dtype} is not one jitad computes in; convert to a "
                            "float, int or bool dtype first")
    return out.view(Array)


def is_supported_dtype(dtype):
    """Whether arrays of `dtype` can come through DLPack into jitad."""
    return dtype_of_numpy(dtype) is not None
