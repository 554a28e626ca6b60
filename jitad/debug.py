"""Printing and calling Python from compiled code: `jitad.debug.print` and
`jitad.debug.callback` (JAX's `jax.debug.print` and `jax.debug.callback`)."""
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
    if current_frame() is None:
        _check_values("jitad.debug.print", list(args) + list(kwargs.values()))
        builtins.print(fmt.format(*args, **kwargs), flush=True)
        return None
    _emit("jitad.debug.print", {"fmt": fmt}, args, kwargs)
    return None


def callback(callback, *args, ordered=False, partitioned=False, **kwargs):   # noqa: A002 (JAX's name)
    """Call the Python function `callback(*args, **kwargs)` when the code runs, with the
    run-time values (NumPy arrays and numbers) of staged arguments: every iteration of a
    loop, in order; under `grad` during the forward pass only. Its result is ignored.
    Outside staged code it is called at once.

    >>> seen = []
    >>> f = jitad.jit(lambda x: (jitad.debug.callback(seen.append, x * 2.0), x)[1])
    >>> f(1.5), seen
    (1.5, [3.0])
    """
    if not callable(callback):
        raise ArgumentError(f"jitad.debug.callback takes a function first, got {type(callback).__name__}")
    if current_frame() is None:
        _check_values("jitad.debug.callback", list(args) + list(kwargs.values()))
        callback(*args, **kwargs)
        return None
    key = f"{getattr(callback, '__qualname__', 'callback')}@{id(callback):x}"
    _lowering.HOST_CALLS[key] = callback   # (kept for the life of the process: compiled code may call it)
    _emit("jitad.debug.callback", {"fmt": "", "call": key}, args, kwargs)
    return None


def _check_values(who, values):
    for k, v in enumerate(values):
        if not (is_staged(v) or isinstance(v, (bool, int, float, np.number, np.bool_, np.ndarray))):
            raise ArgumentError(f"{who}: argument {k} is a {type(v).__name__}; pass floats, ints, "
                                "bools or arrays (pass a pytree's leaves one by one)")


def _emit(who, spec, args, kwargs):
    """The debug_print node calling back with the values of `args` and `kwargs`."""
    values = list(args) + list(kwargs.values())
    names = [None] * len(args) + list(kwargs)
    _check_values(who, values)
    # stop_gradient: printing is no use of a value to differentiate
    staged = [N.stop_gradient(v) if is_staged(v) else v for v in values]
    vars_ = [v._var if is_staged(v) else as_var(np.asarray(v) if np.ndim(v) else v) for v in staged]
    spec = json.dumps({**spec, "names": names, "types": [[v.type.dtype, list(v.type.shape)] for v in vars_]})
    emit(Op.DEBUG_PRINT, vars_, {"spec": spec})
