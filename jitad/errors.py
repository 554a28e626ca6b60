"""The errors jitad raises for user mistakes; internal invariants stay plain asserts."""
import linecache
import os
import sys

import numpy as np

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))


def user_location():
    """`file:line: source` of the innermost stack frame outside jitad, or ''."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_PKG_DIR + os.sep):
            line = linecache.getline(filename, frame.f_lineno).strip()
            return f"{filename}:{frame.f_lineno}: {line}" if line else f"{filename}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


def env_int(name, default, minimum):
    """The integer environment variable `name` (`default` when unset); a ConfigError
    naming it and its valid values when it is not an integer >= `minimum`."""
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise ConfigError(f"the environment variable {name}={text!r} must be an integer >= {minimum} "
                          f"(default {default}); fix or unset it before importing jitad", where=False)
    return value


class JitadError(Exception):
    """Base class of every error jitad raises for a user mistake."""

    def __init__(self, message, *, where=True):
        if where:
            loc = user_location()
            if loc:
                message = f"{message}\n  at {loc}"
        super().__init__(message)


class StagingError(JitadError):
    """Python control flow or conversion on a staged value, or a malformed combinator."""


class ShapeError(JitadError, ValueError, TypeError):
    """Shapes that do not broadcast or multiply."""


class ArgumentError(JitadError, TypeError):
    """Wrong number or kind of arguments to a jitted or differentiated function."""


class ResourceError(JitadError):
    """A computation needed more stack or memory than jitad allows."""


class RuntimeCheckError(JitadError):
    """A check in compiled code failed while it ran: a `vmap`ped WHILE loop with a lane
    that can never finish (its condition stays true while its state stops changing)."""


class NonFiniteError(RuntimeCheckError, FloatingPointError):
    """A NaN (under `jax_debug_nans`) or an infinity (under `jax_debug_infs`) where a
    primitive produced it; the message names the primitive and the user's line."""


class IndexError_(JitadError, IndexError):
    """An index outside an array or tree."""


class DeviceError(JitadError):
    """The requested device cannot run the program (no GPU, no numba-cuda)."""


class DistributedError(JitadError):
    """MPI is missing or a collective cannot run (see `jitad.distributed`)."""


class ImmutableError(JitadError, AttributeError):
    """Assigning or deleting an attribute of an immutable object (a `jitad.Tree`)."""


class JitadWarning(UserWarning):
    """A warning about a program that runs but may not mean what it says (random
    numbers drawn from NumPy while tracing: frozen into the compiled code)."""


class ExportError(JitadError):
    """`jitad.export` cannot turn this program into a C library (it calls back into
    Python, uses MPI, ...); the message names the operation."""


class MissingRuleError(JitadError, NotImplementedError):
    """A primitive has no rule for the transformation or backend a program needs: the
    message names the primitive, the transformation and the declaration slot to give."""


class UnsupportedError(JitadError, NotImplementedError):
    """An operation jitad does not stage (complex results, for one); the message says
    what to do instead."""


class ConfigError(JitadError, ValueError):
    """An environment variable that jitad reads holds a value it cannot use."""


def check_argnums(argnums, who, name="argnums", allow_empty=False):
    """`argnums` (an int or a sequence of ints) as a tuple of distinct ints."""
    nums = (argnums,) if isinstance(argnums, (int, np.integer)) else argnums
    try:
        nums = tuple(nums)
    except TypeError:
        nums = None
    if nums is None or not (nums or allow_empty) or any(
            isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)) for i in nums):
        raise ArgumentError(f"{who}: {name}={argnums!r}; it must be an int or a tuple of ints")
    if len(set(nums)) != len(nums):
        raise ArgumentError(f"{who}: {name}={argnums!r} repeats an argument; list each one once")
    return tuple(int(i) for i in nums)


class LinAlgError(JitadError, np.linalg.LinAlgError):
    """A singular matrix or one that is not positive definite, with `check=True`."""
