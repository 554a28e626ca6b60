"""Helpers the topic modules of `jitad.numpy` share: the namespace, finding staged values
in nested arguments, plain results as `Array`s, and refusing `out=`."""
import functools

import numpy as np

from ..config import config
from ..errors import ArgumentError, UnsupportedError
from ..ir import float_checks
from ..ir.interpret import ERRORS, IGNORED
from ..staging import is_staged
from ._array import Array

PLAIN_ARRAYS = (np.ndarray, Array)   # the classes of plain arrays: nothing staged or foreign


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
    if type(x) is np.ndarray:
        return x.view(Array)
    if isinstance(x, np.generic) and x.dtype.kind in "biuf":
        return np.asarray(x).view(Array)
    if isinstance(x, tuple):
        return type(x)(*(wrap(v) for v in x)) if hasattr(x, "_fields") else tuple(wrap(v) for v in x)
    if type(x) is list:
        return [wrap(v) for v in x]
    return x


_F64 = np.dtype(np.float64)


def plain_f64(x):
    """Whether `x` is a plain float64 array (NumPy's or a `jitad.numpy.Array`, of NumPy's byte
    order), nothing staged or foreign."""
    return (type(x) is np.ndarray or type(x) is Array) and x.dtype == _F64


def quietly(fn, *args, **kwargs):
    """`fn(*args, **kwargs)` without NumPy's floating-point warnings (JAX's meaning: an
    overflow is an inf, not a warning): `quietly(np.exp, 1000.0) == np.inf`."""
    token = ERRORS.set(IGNORED)
    try:
        return fn(*args, **kwargs)
    finally:
        ERRORS.reset(token)


def reference_first(reference, fn, accepts):
    """`fn` with `reference` in front: NumPy's or SciPy's function of `fn`'s meaning on the
    plain values `accepts(*args, **kwargs)` holds for. An eager call so accepted, with
    `jax_enable_x64` on and no NaN checks, runs `reference` (without NumPy's warnings, as
    `quietly`) and gives its result as `Array`s, after a check of well under a microsecond
    (jitad's own path checks shapes and kinds as it would for staged values). Anything else,
    and a call where `accepts` or `reference` raises (a singular matrix NumPy refuses), runs
    `fn`: jitad's meaning (NaN) or its own error. jitad's eager fast paths are all this one.

    >>> solve = reference_first(np.linalg.solve, jnp.linalg.solve, lambda a, b: plain_f64(a))
    >>> solve(np.eye(2), np.ones(2))
    Array([1., 1.])
    """
    @functools.wraps(fn)
    def call(*args, **kwargs):   # (it closes over functions only: `vmap` of it is kept per process)
        if config._values["jax_enable_x64"] and not float_checks.ACTIVE:
            try:
                if accepts(*args, **kwargs):
                    token = ERRORS.set(IGNORED)
                    try:
                        out = reference(*args, **kwargs)
                    finally:
                        ERRORS.reset(token)
                    t = type(out)
                    if t is np.ndarray:
                        return out.view(Array)
                    return np.asarray(out).view(Array) if t is np.float64 else wrap(out)
            except Exception:   # (other arguments, or the reference refused: jitad's meaning, or its error)
                pass
        return fn(*args, **kwargs)
    return call


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
