"""Helpers the topic modules of `jitad.numpy` share: the namespace, finding staged values
in nested arguments, plain results as `Array`s, and refusing `out=`."""
import functools

import numpy as np

from ..errors import ArgumentError, UnsupportedError
from ..staging import is_staged


NAMESPACE = []   # jitad.numpy itself, put here by its __init__ (the topic modules import no module above them)


def jnp():
    """The `jitad.numpy` namespace (the topic modules call each other's functions through it)."""
    return NAMESPACE[0]


def any_staged(*objs):
    """True when a staged value sits anywhere in `objs` (lists, tuples and dicts searched)."""
    for obj in objs:
        if isinstance(obj, (list, tuple)):
            if any_staged(*obj):
                return True
        elif isinstance(obj, dict):
            if any_staged(*obj.values()):
                return True
        elif is_staged(obj):
            return True
    return False


def wrap(x):
    """A plain NumPy result as a `jitad.numpy.Array` (tuples and lists of them too)."""
    from ._array import Array
    if isinstance(x, tuple):
        return type(x)(*(wrap(v) for v in x)) if hasattr(x, "_fields") else tuple(wrap(v) for v in x)
    if type(x) is list:
        return [wrap(v) for v in x]
    if type(x) is np.ndarray:
        return x.view(Array)
    if isinstance(x, np.generic) and x.dtype.kind in "biuf":
        return np.asarray(x).view(Array)
    return x


def plain_only(fn, name, why, doc):
    """`fn` (NumPy's or SciPy's) on plain arrays, named `name`; a staged argument raises
    `UnsupportedError` saying `why`."""
    def call(*args, **kwargs):
        if any_staged(args, kwargs):
            raise UnsupportedError(f"`{name}` of a staged value: {why}")
        return wrap(fn(*args, **kwargs))
    call.__name__ = call.__qualname__ = name.rsplit(".", 1)[-1]
    call.__doc__ = doc
    return call


def no_out(who, out):
    if out is not None:
        raise ArgumentError(f"`jnp.{who}`: out= is not supported (jitad's arrays are values, as JAX's); "
                            f"use the returned array: `y = jnp.{who}(...)`")


def returns_arrays(fn):
    """Decorate: plain results come back as `jitad.numpy.Array`s."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return wrap(fn(*args, **kwargs))
    return wrapper


def as_np(x):
    """A plain value as a NumPy array; staged values pass through."""
    return x if is_staged(x) else np.asarray(x)
