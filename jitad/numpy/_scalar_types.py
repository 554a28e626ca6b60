"""NumPy's scalar types under `jitad.numpy` (`jnp.int64`, `jnp.float32`, ...), callable on
staged values too, as JAX's and autograd's are: `jnp.int64(x)` of a traced array is the
array converted (`x.astype(jnp.int64)`); of anything else, NumPy's scalar or array. Each is
a subclass of NumPy's type, so it names the same dtype everywhere a dtype is taken
(`np.zeros(3, jnp.int64)`, `x.dtype == jnp.int64`, `np.issubdtype`)."""
import numpy as np

from ..staging import Staged
from ..staging.complex import Complex

NAMES = ("bool_", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint32", "uint64")


def _converting(base):
    def __new__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and isinstance(args[0], (Staged, Complex)):
            from ._common import jnp
            return jnp().asarray(args[0]).astype(base)
        return base(*args, **kwargs)
    return type(base.__name__, (base,), {"__new__": __new__, "__module__": "jitad.numpy", "__doc__": (
        f"NumPy's `{base.__name__}` (the same dtype); called on a staged value it converts it: "
        f"`jnp.{base.__name__}(x)` is `x.astype(jnp.{base.__name__})`.")})


def types():
    """{name: the converting subclass of NumPy's type}."""
    return {name: _converting(getattr(np, name)) for name in NAMES}
