"""Global settings with JAX's names (`jax.config`).

>>> import jitad
>>> jitad.config.update("jax_debug_nans", True)
>>> jitad.config.jax_debug_nans
True
>>> jitad.config.update("jax_debug_nans", False)

Each setting starts from its environment variable where one is set (the name in
capitals, `JAX_ENABLE_X64=0`, or with jitad's prefix, `JITAD_ENABLE_X64=0`), else from
its default. An unknown name raises `ConfigError`, as JAX raises for a name it lacks.
"""
import contextlib
import functools
import os
import sys
import threading
import warnings

from .errors import ConfigError

# name: (default, what it means). Settings that mean nothing on one CPU process are
# accepted and kept, as JAX keeps them on a CPU-only install.
_SETTINGS = {
    "jax_enable_x64": (True, "64-bit floats and ints by default (False: JAX's 32-bit defaults)"),
    "jax_debug_nans": (False, "raise at the first NaN a compiled function produces"),
    "jax_debug_infs": (False, "raise at the first inf a compiled function produces"),
    "jax_disable_jit": (False, "run functions given to jit on the call's values, uncompiled"),
    "jax_explain_cache_misses": (False, "warn, for each new trace, why the cache missed"),
    "jax_log_compiles": (False, "warn each time a function is compiled"),
    "jax_numpy_rank_promotion": ("allow", "'allow', 'warn' or 'raise' on implicit rank promotion"),
    "jax_default_matmul_precision": (None, "ignored on CPU: products run in the operands' dtype"),
    "jax_platform_name": ("", "ignored: jitad runs on the CPU unless device='cuda' is given"),
    "jax_platforms": ("", "ignored: jitad runs on the CPU unless device='cuda' is given"),
    "jax_default_prng_impl": ("threefry2x32", "the only PRNG jitad implements"),
    "jax_traceback_filtering": ("auto", "accepted; jitad's errors point at the user's line"),
    "jax_compilation_cache_dir": (None, "accepted; jitad keeps its own disk cache"),
    "jitad_tiering": ("auto", "how `grad` and its kin called from Python run a new path: 'auto' (the NumPy "
                      "interpreter first, LLVM once that has cost about a compile), 'interpret' (never "
                      "compiled) or 'compile' (compiled before its first call); `jit` always compiles"),
}
_CHOICES = {"jitad_tiering": ("auto", "interpret", "compile")}


def _parse(name, text, default):
    if isinstance(default, bool):
        low = text.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"environment variable for {name} holds {text!r}: use 0 or 1")
    return text


class Config:
    """The settings object: `update(name, value)`, `read(name)`, or `config.name`."""

    def __init__(self):
        self._values = {}
        self._listeners = []
        for name, (default, _) in _SETTINGS.items():
            suffix = name.split("_", 1)[1].upper()
            text = os.environ.get("JAX_" + suffix, os.environ.get("JITAD_" + suffix))
            value = default if text is None else _parse(name, text, default)
            if name in _CHOICES and value not in _CHOICES[name]:
                raise ConfigError(f"environment variable for {name} holds {value!r}: use one of "
                                  f"{', '.join(_CHOICES[name])}")
            self._values[name] = value

    def update(self, name, value):
        """Set a setting: `jitad.config.update("jax_enable_x64", False)`."""
        if name not in _SETTINGS:
            known = ", ".join(sorted(_SETTINGS))
            raise ConfigError(f"unknown setting {name!r}: jitad knows {known}")
        default = _SETTINGS[name][0]
        if isinstance(default, bool):
            value = bool(value)
        elif name in _CHOICES and value not in _CHOICES[name]:
            raise ConfigError(f"{name} takes one of {', '.join(map(repr, _CHOICES[name]))}, not {value!r}")
        self._values[name] = value
        for listener in self._listeners:
            listener(name, value)

    def read(self, name):
        """The current value of a setting."""
        if name not in _SETTINGS:
            raise ConfigError(f"unknown setting {name!r}")
        return self._values[name]

    def on_update(self, listener):
        """Call `listener(name, value)` after every update (for caches keyed by settings)."""
        self._listeners.append(listener)

    def __getattr__(self, name):
        values = self.__dict__.get("_values", {})
        if name in values:
            return values[name]
        raise AttributeError(f"jitad.config has no setting {name!r}")

    @property
    def values(self):
        """A copy of every setting's current value."""
        return dict(self._values)


config = Config()
update = config.update
read = config.read


class _Own(threading.local):
    depth = 0


_own = _Own()


def x64_enabled():
    """Whether staging follows 64-bit rules: `jax_enable_x64` (jitad's default True), or
    jitad's own code running (`own_arithmetic`). Without them values, arguments and
    results are JAX's 32-bit ones.

    >>> from jitad.config import x64_enabled
    >>> x64_enabled()
    True
    """
    return config._values["jax_enable_x64"] or _own.depth > 0


@contextlib.contextmanager
def own_arithmetic():
    """Run jitad's own code (the PRNG, whose keys are int64 words and whose bit arithmetic
    counts in int64) by 64-bit staging rules whatever `jax_enable_x64` says; the dtypes it
    chooses for its results still follow the setting.

    >>> from jitad.config import own_arithmetic, x64_enabled
    >>> with own_arithmetic():
    ...     x64_enabled()
    True
    """
    _own.depth += 1
    try:
        yield
    finally:
        _own.depth -= 1


def keeps_own_arithmetic(fn):
    """`fn` run under `own_arithmetic` (a decorator for jitad's own functions).

    >>> from jitad.config import keeps_own_arithmetic, x64_enabled
    >>> keeps_own_arithmetic(x64_enabled)()
    True
    """
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with own_arithmetic():
            return fn(*args, **kwargs)
    return run


def warn_truncated(dtype, narrow, where):
    """JAX's warning for a 64-bit `dtype` asked for where `jax_enable_x64` is off (`narrow`,
    its 32-bit counterpart, is given instead), at the user's line.

    >>> from jitad.config import warn_truncated
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_truncated(np.dtype("float64"), np.dtype("float32"), "zeros")
    >>> str(caught[0].message).startswith("Explicitly requested dtype float64 requested in zeros")
    True
    """
    warnings.warn(f"Explicitly requested dtype {dtype} requested in {where} is not available: jitad gives "
                  f"{narrow}, as JAX does where jax_enable_x64 is off (for 64-bit dtypes: "
                  "jitad.config.update('jax_enable_x64', True), or JAX_ENABLE_X64=1 in the environment)",
                  UserWarning, stacklevel=_outside_jitad())


def _outside_jitad():
    """The stack level of the first caller outside the jitad package."""
    package, frame, level = os.path.dirname(__file__) + os.sep, sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level
