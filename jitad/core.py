"""The core names of autograd (`autograd.core`) and JAX (`jax.core`) that user code
imports: vector spaces and primitives, `make_vjp`/`make_jvp`, and the abstract value
of an array.

>>> from jitad.core import vspace, ShapedArray
>>> vspace(np.ones(3)).size
3
"""
from .differential_operators import make_jvp, make_vjp  # noqa: F401
from .extend import (Box, JVPNode, SparseObject, VJPNode, VSpace, def_linear, defjvp, defjvp_argnum,  # noqa: F401
                     defjvp_argnums, defvjp, defvjp_argnum, defvjp_argnums, primitive, vspace)
from .staging import Staged as Tracer  # noqa: F401  (what JAX calls a traced value)
from .toplevel import ShapedArray  # noqa: F401


def getval(x):
    """autograd's `getval`: the value of a box. jitad's staged values have no value while
    tracing, so a staged value is returned as it is; anything else is itself."""
    return x


def isbox(x):
    """Whether `x` is a staged (traced) value."""
    from .staging import is_staged
    return is_staged(x)
