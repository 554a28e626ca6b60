"""JAX's `jax.typing`: annotations for what jitad's functions accept.

>>> def scale(x: jitad.typing.ArrayLike, dtype: jitad.typing.DTypeLike = None): ...
"""
from typing import Union

import numpy as np

__all__ = ["ArrayLike", "DTypeLike"]

ArrayLike = Union[np.ndarray, np.bool_, np.number, bool, int, float]
DTypeLike = Union[str, type, np.dtype]
