"""Printing from compiled code: `jitad.debug.print` (JAX's `jax.debug.print`)."""
import builtins
import json

import numpy as np

from . import numeric as N
from .errors import ArgumentError
from .ir.ops import Op
from .lower import debug as _lowering  # noqa: F401  (registers the callback and the lowering)
from .staging import as_var, current_frame, emit, is_staged


def print(fmt, *args, **kwargs):   # noqa: A001  (JAX's name)
    """Print `fmt.format(*args, **kwargs)` when the code runs: staged values show their
    run-time values, every iteration of a loop, in order; under `grad` the forward pass
    prints (the backward pass does not print again). Outside staged code it prints at once.

    >>> f = jitad.jit(lambda xs: jitad.FOR(0, 3, lambda i, s: (jitad.debug.print("i={} s={}", i, s), s + xs[i])[1], 0.0))
    >>> f(np.ones(3))
    i=0 s=0.0
    i=1 s=1.0
    i=2 s=2.0
    3.0
    """
    if not isinstance(fmt, str):
        raise ArgumentError(f"jitad.debug.print takes a format string first, got {type(fmt).__name__}")
    values = list(args) + list(kwargs.values())
    names = [None] * len(args) + list(kwargs)
    for k, v in enumerate(values):
        if not (is_staged(v) or isinstance(v, (bool, int, float, np.number, np.bool_, np.ndarray))):
            raise ArgumentError(f"jitad.debug.print: argument {k} is a {type(v).__name__}; pass floats, ints, "
                                "bools or arrays (format a pytree's leaves one by one)")
    if current_frame() is None:
        builtins.print(fmt.format(*args, **kwargs), flush=True)
        return None
    # stop_gradient: printing is no use of a value to differentiate
    staged = [N.stop_gradient(v) if is_staged(v) else v for v in values]
    vars_ = [v._var if is_staged(v) else as_var(np.asarray(v) if np.ndim(v) else v) for v in staged]
    spec = json.dumps({"fmt": fmt, "names": names,
                       "types": [[v.type.dtype, list(v.type.shape)] for v in vars_]})
    emit(Op.DEBUG_PRINT, vars_, {"spec": spec})
    return None
