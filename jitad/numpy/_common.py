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


_F64 = np.dtype(np.float64)


def plain_f64(x):
    """Whether `x` is a plain float64 array (NumPy's or a `jitad.numpy.Array`, of NumPy's byte
    order), nothing staged or foreign."""
    return type(x) in _plain_arrays() and x.dtype == _F64 and x.dtype.isnative


@functools.cache
def _plain_arrays():
    from ._array import Array   # (imported once it exists: this module is imported before it)
    return frozenset((np.ndarray, Array))


def reference_first(reference, fn, accepts):
    """`fn` with `reference` (NumPy's or SciPy's function of the same meaning on plain float64
    arrays) in front: an eager call that `accepts(*args, **kwargs)` (plain float64 arrays, in
    the shapes where the two meanings are one), with `jax_enable_x64` on and no NaN checks,
    runs `reference` and gives its result as `Array`s (a microsecond or so of checks, against
    jitad's checks of the shapes and kinds written for staged values); where `reference`
    raises (a singular matrix), `fn` runs, with jitad's meaning (NaN) or its own error."""
    from ..config import config
    from ..ir import float_checks

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if config._values["jax_enable_x64"] and not float_checks.ACTIVE:
            try:
                if accepts(*args, **kwargs):
                    with np.errstate(all="ignore"):
                        return wrap(reference(*args, **kwargs))
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
