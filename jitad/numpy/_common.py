"""Helpers the topic modules of `jitad.numpy` share: finding staged values in nested
arguments, NumPy's function on plain inputs, and refusing `out=`."""
import builtins
import functools

import numpy as np

from ..errors import ArgumentError
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


def no_out(who, out):
    if out is not None:
        raise ArgumentError(f"`jnp.{who}`: out= is not supported (jitad's arrays are values, as JAX's); "
                            f"use the returned array: `y = jnp.{who}(...)`")


def plain_numpy(np_fn, jax_only=()):
    """Decorate a staged composition: without a staged argument (and without the JAX-only
    keywords in `jax_only` set), NumPy's `np_fn` computes it and the result is an `Array`."""
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            no_out(fn.__name__, kwargs.pop("out", None))
            if not any_staged(args, kwargs) and not builtins.any(kwargs.get(k) is not None for k in jax_only):
                kwargs = {k: v for k, v in kwargs.items() if k not in jax_only}
                return wrap(np_fn(*args, **kwargs))
            return fn(*args, **kwargs)
        return wrapper
    return decorate


def returns_arrays(fn):
    """Decorate: plain results come back as `jitad.numpy.Array`s."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return wrap(fn(*args, **kwargs))
    return wrapper


def asarray_args(fn):
    """Decorate: list and tuple positional arguments become arrays (staged values inside
    stacked) before `fn` runs, as `jnp.f([1, 2])`."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        asarray = jnp().asarray
        args = tuple(asarray(a) if isinstance(a, (list, tuple)) else a for a in args)
        return fn(*args, **kwargs)
    return wrapper


def as_np(x):
    """A plain value as a NumPy array; staged values pass through."""
    return x if is_staged(x) else np.asarray(x)
