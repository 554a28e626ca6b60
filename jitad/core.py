"""The core names of autograd (`autograd.core`) and JAX (`jax.core`) that user code
imports: vector spaces and primitives, `make_vjp`/`make_jvp`, and the abstract value
of an array.

>>> from jitad.core import vspace, ShapedArray
>>> vspace(np.ones(3)).size
3
"""
from . import differential_operators as _ops
from .extend import (Box, JVPNode, SparseObject, VJPNode, VSpace, def_linear, defjvp, defjvp_argnum,  # noqa: F401
                     defjvp_argnums, defvjp, defvjp_argnum, defvjp_argnums, primitive, primitive_jvps,
                     primitive_vjps, vspace)
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


def make_vjp(fun, *x):
    """autograd's core `make_vjp(fun, x) -> (vjp, fun(x))`, `vjp(g)` the cotangent of `x`;
    without `x`, the operator form `make_vjp(fun, argnum=0)(*args)`:

    >>> vjp, ans = make_vjp(jitad.sin, 0.5)
    >>> float(vjp(1.0)) == float(np.cos(0.5))
    True
    """
    if len(x) != 1:
        return _ops.make_vjp(fun, *x)
    return _ops.make_vjp(fun)(x[0])


def make_jvp(fun, *x):
    """autograd's core `make_jvp(fun, x) -> jvp`, `jvp(v) == (fun(x), J v)`; without `x`, the
    operator form `make_jvp(fun, argnum=0)(*args)(v)`:

    >>> make_jvp(jitad.sin, 0.0)(2.0)
    (0.0, 2.0)
    """
    if len(x) != 1:
        return _ops.make_jvp(fun, *x)
    return _ops.make_jvp(fun)(x[0])
