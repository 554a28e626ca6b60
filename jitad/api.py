"""The user-facing transformations and the per-signature compile cache."""
import functools
import gc
import inspect
import os
import re
import threading
import types
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import monitoring, numeric as N, numpy_api, timing
from .config import config
from .dtypes import narrowed
from .errors import ArgumentError, check_argnums, env_int
from .ir import float_checks
from .ir.types import TreeType, is_device_array
from .ir.verify import verify
from .lower.compile import SCALAR_KEYS, compile_program
from .lower.runtime import taken_as_ndarray
from .pytree import check_hashable, flatten, tree_map
from .transforms.vmap import vmap_staged
from .stages import FLOAT0
from .staging import arg_type, concrete, current_frame, trace_program
from .staging.complex import Complex, conj_leaves, is_complex, split as split_complex
from .forest import SLOT_OFFSETS, Tree, plain_tree
from .transforms.jacobians import jacobian_staged
from .transforms.pullback import pullback_staged
from .transforms.staged import jvp_staged, linearize_staged, value_and_grad_staged
from .dispatch import JIT as _DISPATCH_JIT, Concrete

Fn = Callable[..., Any]                # a function the transformations take and return
Argnums = int | Sequence[int]          # which positional arguments: one index or several

# signatures a jitted function keeps compiled (least recently called dropped first);
# `f.max_signatures` changes it for one function
MAX_SIGNATURES = env_int("JITAD_MAX_SIGNATURES", 128, 0)


def _lru_touch(cache, key):
    try:
        cache.move_to_end(key)
    except KeyError:   # another thread evicted it meanwhile
        pass


def _lru_put(cache, key, value, size):
    """Insert and return the entries evicted to keep `size`."""
    cache[key] = value
    evicted = []
    while len(cache) > max(size, 1):
        try:
            evicted.append(cache.popitem(last=False)[1])
        except KeyError:
            break
    return evicted


_NUMPY_SCALAR_KEYS = {np.float64: "f64", np.int64: "i64", np.bool_: "bool", np.float32: "f32"}


def _leaf_key(x):
    """What of a flat argument selects the compiled code (cheaper than its IR type)."""
    kind = SCALAR_KEYS.get(type(x))
    if kind is not None:
        if kind == "i64" and not -(1 << 63) <= x < (1 << 63):
            raise ArgumentError(f"the int {x} does not fit in 64 bits")
        return kind
    if taken_as_ndarray(x):   # (also the Arrays compiled code returns)
        return x.dtype.char, x.shape
    if type(x) in _NUMPY_SCALAR_KEYS:   # the same code as for the Python number
        return _NUMPY_SCALAR_KEYS[type(x)]
    if isinstance(x, Tree):   # a subclass runs the same code, given its plain Tree part
        return plain_tree(x)._type_code
    if is_device_array(x):   # a numba device array: same code, results stay on the device
        return "device", arg_type(x)
    if is_complex(x):   # (it runs as its real parts: `_call_complex`)
        return "complex", np.shape(x)
    return arg_type(x)


def _static_key(x):
    """A static argument as it selects the compiled code: by type and value, inside tuples
    too, so `True` and `1` (or `2.0` and `2`), equal in Python, compile apart."""
    if isinstance(x, tuple):
        return type(x), tuple(map(_static_key, x))
    return type(x), x


_PLAIN_STATICS = (int, float, bool, str, type(None))   # static arguments the fast entry compares itself


def _static_entry(jitted, compiled, nums, args):
    """The `__call__` of a jit with static arguments once this signature is compiled (as
    `compiled.entry` is without them): if the call passes as many arguments and the same
    static ones, the native entry runs on the others; else the dispatcher. The same: of
    the same type and equal for a plain value; the very object for a tuple of plain values
    (equal tuples differ in key by their items' types, `_static_key`); other static values
    always take the dispatcher. Where the entry refuses the others (a new shape), it hands
    them to `_refused_with_statics`. Made once per signature (`compiled.static_entry`)."""
    made = compiled.__dict__.get("static_entry")
    if made is not None:
        return made
    statics = [(i, type(args[i]), args[i]) for i in nums]
    if not all(_plain_static(v) for _, _, v in statics):
        return Jitted.__call__
    n, entry, keep = len(args), compiled.entry, [i for i in range(len(args)) if i not in nums]
    if len(statics) == 1 and statics[0][1] is not tuple:
        (at, kind, value), = statics

        def call(*a, **kw):
            if len(a) == n and not kw and type(a[at]) is kind and a[at] == value:
                return entry(*a[:at], *a[at + 1:])
            return Jitted.__call__(jitted, *a, **kw)
    else:
        def call(*a, **kw):
            if len(a) == n and not kw and all(a[i] is v or t is not tuple and type(a[i]) is t and a[i] == v
                                              for i, t, v in statics):
                return entry(*[a[i] for i in keep])
            return Jitted.__call__(jitted, *a, **kw)
    compiled.static_entry = staticmethod(call)   # (a class attribute called without the jit)
    return compiled.static_entry


def _plain_static(x):
    return type(x) in _PLAIN_STATICS or type(x) is tuple and all(map(_plain_static, x))


def _refused_with_statics(jitted, nums, statics, n, *dynamic):
    """The fallback of a signature with static arguments: its entry got only the others
    (`_static_entry`) and refused them; the dispatcher gets the whole call back."""
    it, fixed = iter(dynamic), iter(statics)
    return Jitted.__call__(jitted, *[next(fixed) if i in nums else next(it) for i in range(n)])


_compile_lock = threading.RLock()   # one compile at a time, in any thread (compiled code runs in parallel)


def _new_compile_lock():
    """A forked child has only the forking thread: no compile is under way in it."""
    global _compile_lock
    _compile_lock = threading.RLock()


os.register_at_fork(after_in_child=_new_compile_lock)


class Jitted:
    """A function compiled per input signature; see `jitad.jit`."""

    def __init__(self, fn, static_argnums=(), device="cpu"):
        self.fn = fn
        self.eager_when_disabled = False   # `jitad.disable_jit()` runs it uncompiled (the user's jit)
        self.device = check_device(device)
        self.static_argnums = tuple(sorted(set(check_argnums(static_argnums, "jit", "static_argnums",
                                                             allow_empty=True))))
        self._signature = _signature(fn)
        self._compiled = OrderedDict()   # signature key -> Compiled, least recently called first
        self._set_aside = {}   # jax_enable_x64 -> the signatures compiled under it, while it is not set
        self.max_signatures = MAX_SIGNATURES
        self._static_by_count = {}   # positional argument count -> static_argnums, normalized
        self._keyword_jits = {}   # static_argnums -> the jit of calls with keyword arguments
        self._last = None
        self._fallback = functools.partial(Jitted.__call__, self)
        self.keeps_values = False   # inlined in a trace with values (`grad` from Python), it keeps them
        functools.update_wrapper(self, fn, updated=())
        _JITS.add(self)

    def __get__(self, obj, objtype=None):   # `@jit` on a method: bound to its instance, as a function is
        return self if obj is None else functools.partial(self, obj)

    def _forget(self, x64=None):
        """Drop every compiled signature (the float-check settings changed, the caches were
        cleared); `x64`: `jax_enable_x64` changed to it: the signatures are set aside for the
        setting they were compiled under and those compiled under the new one taken up, so a
        program that switches back and forth compiles each signature once per setting."""
        if x64 is None:
            self._compiled.clear()
            self._set_aside.clear()
        else:
            self._set_aside[not x64] = self._compiled
            self._compiled = self._set_aside.pop(x64, OrderedDict())
        self._last = None
        type(self).__call__ = Jitted.__call__

    def _bind(self, args, kwargs):
        """`(positional, keyword)` arguments: those a parameter before `*` can take become
        positional; the rest (keyword-only and `**kwargs` ones) stay keywords."""
        if self._signature is None:
            return args, kwargs
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentError(f"{getattr(self.fn, '__name__', 'function')}: {e}") from None
        return bound.args, bound.kwargs

    def _call_with_keywords(self, args, kwargs):
        """Keyword arguments are dynamic, as in JAX's jit: they travel as a dict after the
        positional ones, through a jit of their own (its signatures kept apart)."""
        if current_frame() is not None:
            if self.keeps_values:
                return self.fn(*args, **kwargs)
            with concrete.without_values():
                return self.fn(*args, **kwargs)
        nums = self._static_nums(len(args)) if self.static_argnums else ()
        inner = self._keyword_jits.get(nums)
        if inner is None:
            fn = self.fn

            def with_keywords(*a):
                return fn(*a[:-1], **a[-1])
            with_keywords.__name__ = _fn_name(fn)
            inner = self._keyword_jits[nums] = jit(with_keywords, nums, self.device)
        return inner(*args, kwargs)

    def __call__(self, *args, **kwargs):
        """The dispatcher: find or compile this signature's code and run it.

        Once a signature of plain scalars and arrays is compiled, its native entry is
        installed as this object's `__call__`, so later calls skip this method.
        """
        if self.eager_when_disabled and config._values["jax_disable_jit"] and current_frame() is None:
            return self.fn(*args, **kwargs)
        if kwargs:
            args, kwargs = self._bind(args, kwargs)
            if kwargs:
                return self._call_with_keywords(args, kwargs)
        if current_frame() is not None:   # called inside a trace: inline, as a nested jit in JAX
            if self.keeps_values:
                return self.fn(*args)
            with concrete.without_values():   # jit's rule: no Python decisions on values
                return self.fn(*args)
        nums = (self._static_by_count.get(len(args)) or self._static_nums(len(args))) if self.static_argnums else ()
        if nums:
            static = tuple(_static_key(args[i]) for i in nums)
            dynamic = tuple(a for i, a in enumerate(args) if i not in nums)
        else:
            static, dynamic = (), args
        leaves, td = flatten(dynamic)
        key = (len(args), static, td, tuple(map(_leaf_key, leaves)))
        try:
            compiled = self._compiled.get(key)
        except TypeError:
            check_hashable(td)
            raise ArgumentError(f"{_fn_name(self.fn)}: static arguments must be hashable, got "
                                f"{', '.join(type(args[i]).__name__ for i in nums)}; pass tuples instead of "
                                "lists, or leave it out of static_argnums") from None
        if compiled is not self._last and compiled is not None:   # the last called is the newest
            _lru_touch(self._compiled, key)
        if compiled is None:
            if any(map(is_complex, leaves)):   # complex arguments enter as pairs of real parts
                return self(*split_complex(args))
            self._bind(args, {})   # a wrong argument count is an ArgumentError
            compiled = self._compile(args, dynamic, leaves, key, nums, td)
        self._last = compiled
        if _narrows(compiled):   # a 64-bit result, JAX's 32-bit one where jax_enable_x64 is off
            type(self).__call__ = Jitted.__call__
            return tree_map(narrowed, compiled.run(leaves))
        fast = not kwargs and compiled.direct \
            and (len(leaves) == len(dynamic) or compiled.takes_pytree and not nums) \
            and (SLOT_OFFSETS is not None or not any(isinstance(t, TreeType) for t in compiled.in_types))
        wanted = Jitted.__call__ if not fast else _static_entry(self, compiled, nums, args) if nums else compiled.entry
        if type(self).__dict__.get("__call__", Jitted.__call__) is not wanted:
            type(self).__call__ = wanted   # assigning invalidates type caches: only on change
        return compiled.run(leaves, dynamic)

    def _static_nums(self, n_args):
        """static_argnums for a call with `n_args` positional arguments (negative ones count
        from the end, as in JAX)."""
        for i in self.static_argnums:
            if not -n_args <= i < n_args:
                raise ArgumentError(f"{getattr(self.fn, '__name__', 'function')}: static_argnums includes {i}, "
                                    f"but the call passes {n_args} positional arguments; pass that "
                                    "argument or fix static_argnums")
        nums = self._static_by_count[n_args] = tuple(sorted(i % n_args for i in self.static_argnums))
        return nums

    def _compile(self, args, dynamic, leaves, key, nums, in_td):
        with _compile_lock:   # a signature another thread compiled meanwhile is not compiled again
            compiled = self._compiled.get(key)
            return compiled if compiled is not None else self._compile_new(args, dynamic, leaves, key, nums, in_td)

    def _compile_new(self, args, dynamic, leaves, key, nums, in_td):
        with timing.recording() as report:
            compiled = self._compile_recorded(args, dynamic, leaves, nums, in_td)
        compiled.compile_seconds, compiled.compile_report = report.total, report
        monitoring.record_event_duration_secs("/jitad/compile_duration_secs", report.total, fun_name=_fn_name(self.fn))
        for old in _lru_put(self._compiled, key, compiled, self.max_signatures):
            installed = type(self).__dict__.get("__call__")
            if installed is not None and installed in (getattr(old, "entry", None), old.__dict__.get("static_entry")):
                type(self).__call__ = Jitted.__call__   # never call evicted code
        return compiled

    def _compile_recorded(self, args, dynamic, leaves, nums, in_td):
        types = [arg_type(x) for x in leaves]
        if self.device == "cpu" and any(map(is_device_array, leaves)):
            raise ArgumentError(f"{getattr(self.fn, '__name__', 'function')}: a CUDA device array was passed "
                                "to code compiled for the CPU; compile with device='cuda', or pass "
                                "array.copy_to_host()")

        def staged_fn(*dyn):
            it = iter(dyn)
            full = [args[i] if i in nums else next(it) for i in range(len(args))]
            return self.fn(*full)

        gc_was_enabled = gc.isenabled()
        gc.disable()   # tracing builds many small objects that live as long as the graph
        try:
            with timing.stage("trace"):
                program, out_td, _ = trace_program(staged_fn, dynamic, in_td, types)
            fallback = self._fallback if not nums else \
                functools.partial(_refused_with_statics, self, nums, tuple(args[i] for i in nums), len(args))
            compiled = compile_program(program, out_td, types, _fn_name(self.fn), fallback,
                                       in_td if not nums else None, self.device)
            compiled.in_td = in_td
        finally:
            if gc_was_enabled:
                gc.enable()
        return compiled

    def trace(self, *args, **kwargs):
        """The function traced at these arguments (`jitad.stages.Traced`: its program,
        abstract values; `.lower().compile()` compiles ahead of the first call)."""
        from .stages import Traced
        return Traced(self, args, kwargs)

    def lower(self, *args, **kwargs):
        """`trace(*args, **kwargs).lower()`: JAX's ahead-of-time API,
        `jitad.jit(f).lower(x).compile()(x)`."""
        return self.trace(*args, **kwargs).lower()

    def _latest(self, what):
        if self._last is None:
            raise AttributeError(f"`{what}` is available after the first call")
        return self._last

    @property
    def ir(self):
        """The staged graph of the signature last called, as text."""
        return self._latest("ir").ir

    @property
    def llvm_ir(self):
        """The optimized LLVM IR of the signature last called."""
        return self._latest("llvm_ir").llvm_ir

    @property
    def compile_seconds(self):
        """Seconds spent tracing and compiling (or loading) the signature last called."""
        return self._latest("compile_seconds").compile_seconds

    def compile_report(self):
        """`compile_seconds` of the signature last called, split by stage (a dict of
        seconds, see `jitad.timing.STAGES`; `.total`, and `.cache`: "miss", "disk",
        "process" or "off"); `print()` shows a table.

        >>> step = jitad.jit_grad(lambda w, x: jitad.sum((w * x) ** 2))
        >>> _ = step(np.ones(3), np.arange(3.0))
        >>> print(step.compile_report())   # doctest: +SKIP
        trace              2.1 ms    3.0%
        ad                 1.0 ms    1.4%
        ...
        total             70.3 ms  (cache: miss)
        """
        return self._latest("compile_report").compile_report


_JITS = weakref.WeakSet()   # every Jitted, to forget code compiled under other float checks or x64


def _narrows(compiled):
    """Whether `compiled` has a 64-bit result where `jax_enable_x64` is off (its results then
    go through Python: floats as float32, ints as int32 where they fit, see `narrowed`)."""
    if config._values["jax_enable_x64"]:
        return False
    return any(v.type.dtype in ("f64", "i64") for v in compiled.program.main.outputs)


_X64 = [config.jax_enable_x64]   # the setting the jitted functions' current signatures were compiled under


def _settings_changed(name, value):
    """No code compiled under another 64-bit or float-check setting is called (an update to
    the value already set changes nothing)."""
    if name == "jax_enable_x64" and value != _X64[0]:
        _X64[0] = value
        for jitted in list(_JITS):
            jitted._forget(x64=value)
    elif name in ("jax_debug_nans", "jax_debug_infs") and \
            float_checks.configure(config.jax_debug_nans, config.jax_debug_infs):
        for jitted in list(_JITS):
            jitted._forget()


float_checks.configure(config.jax_debug_nans, config.jax_debug_infs)   # (their environment variables)
config.on_update(_settings_changed)


def jit(fn: Fn | None = None, static_argnums: Argnums = (), device: Any = "cpu", *,
        static_argnames: str | Sequence[str] | None = None, donate_argnums: Any = None, donate_argnames: Any = None,
        keep_unused: bool = False, in_shardings: Any = None, out_shardings: Any = None, backend: str | None = None,
        inline: bool = False, compiler_options: Any = None) -> Any:
    """Compile `fn` per input signature; `device="cuda"` runs its tensor work as
    numba-cuda kernels (inputs: numpy arrays, copied per call, or numba device arrays;
    results come back as numpy arrays unless the inputs were device arrays).

    `static_argnames` names static parameters (as `static_argnums` numbers them; a
    keyword-only one selects a compiled version per value). JAX's other keywords are
    accepted for what they mean on one CPU: donation, shardings, `backend="cpu"`, a
    `jitad.devices()` entry as `device`, `inline` and `keep_unused` change nothing.

    >>> f = jitad.jit(lambda x, y: x * y + 1.0)
    >>> f(3.0, 4.0)
    13.0
    >>> jitad.jit(lambda x, n: x ** n, static_argnames="n")(2.0, n=3)
    8.0
    """
    options: dict[str, Any] = dict(static_argnames=static_argnames, backend=backend)
    if fn is None:
        return lambda f: jit(f, static_argnums, device, **options)
    check_callable(fn, "jit")
    device = _device_name(device, backend)
    static_argnums = () if static_argnums is None else static_argnums
    if static_argnames is not None:
        return _jit_with_static_names(fn, static_argnums, device, static_argnames)
    cls = type(f"jit_{_fn_name(fn)}", (Jitted,), {})   # its own __call__ slot
    jitted = cls(fn, static_argnums, device)
    jitted.eager_when_disabled = True
    return jitted


_DISPATCH_JIT[0] = jit   # (a Tree argument of grad compiles by jit's rule: dispatch's `_by_jit`)


def staged_jit(fn, device="cpu"):
    """The jit of a transformation's staged body (compiled even under `disable_jit`)."""
    jitted = jit(fn, device=device)
    jitted.eager_when_disabled = False
    return jitted


def _device_name(device, backend):
    """jit's `device`: 'cpu', 'cuda', or a device object of `jitad.devices()`; `backend`
    (JAX's platform name) only 'cpu' or 'cuda'."""
    if backend is not None:
        device = check_device(backend)
    platform = getattr(device, "platform", None)
    return check_device(platform if isinstance(platform, str) else device)


def _jit_with_static_names(fn, static_argnums, device, static_argnames):
    """jit with static parameters named: those a position can take join `static_argnums`;
    keyword-only ones select a jit of `fn` with them bound, one per value."""
    names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    signature = _signature(fn)
    params = list(signature.parameters.values()) if signature is not None else []
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    unknown = [n for n in names if not isinstance(n, str)]
    if unknown:
        raise ArgumentError(f"jit: static_argnames={static_argnames!r}; give parameter names (strings)")
    nums = tuple(check_argnums(static_argnums, "jit", "static_argnums", allow_empty=True)) + \
        tuple(positional.index(n) for n in names if n in positional)
    keyword_only = tuple(n for n in names if n not in positional)
    if not keyword_only:
        return jit(fn, tuple(sorted(set(nums))), device)
    per_value = {}

    @functools.wraps(fn)
    def dispatch(*args, **kwargs):
        static = tuple((n, kwargs.pop(n)) for n in keyword_only if n in kwargs)
        try:
            compiled = per_value.get(static)
        except TypeError:
            raise ArgumentError(f"{_fn_name(fn)}: static arguments must be hashable, got "
                                f"{', '.join(type(v).__name__ for _, v in static)}") from None
        if compiled is None:
            compiled = per_value[static] = jit(functools.partial(fn, **dict(static)), nums, device)
        return compiled(*args, **kwargs)
    return dispatch


DEVICES = ("cpu", "cuda")


def _fn_name(fn):
    """`fn.__name__` made safe as a type, LLVM module and C method name (no NUL, quote or newline)."""
    return re.sub(r"[^A-Za-z0-9_<>.]", "_", str(getattr(fn, "__name__", "f")))


def _signature(fn):
    """`fn`'s signature, or None where Python has none (some builtins): then any call binds."""
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def check_callable(fn, who):
    if not callable(fn):
        raise ArgumentError(f"{who} takes a function, got {type(fn).__name__}")


def check_device(device):
    if device not in DEVICES:
        raise ArgumentError(f"device={device!r}: jitad runs on 'cpu' (LLVM) or 'cuda' (numba-cuda kernels)")
    return device


def trace(fn: Fn, *args: Any, **kwargs: Any) -> Any:
    """The staged program of `fn` at `args`; `str()` prints it. Given an array instead of a
    function, NumPy's `trace` (the sum of a diagonal, `jitad.numpy_api.trace`).

    >>> print(jitad.trace(lambda x: x * 2.0, 1.0))
    """
    if not callable(fn):
        return numpy_api.trace(fn, *args, **kwargs)
    args = split_complex(args)   # (complex arguments enter as pairs of real parts, as under jit)
    leaves, td = flatten(args)
    program, _, _ = trace_program(fn, args, td, [arg_type(x) for x in leaves])
    return verify(program)


# -- reverse mode ---------------------------------------------------------------

def _transformation(fn: Fn, name: str, body: Fn, device: str = "cpu", argnums: Argnums = 0, spec: tuple = ()) -> Any:
    """`body(f, *args)`, where `f` is `fn` with the call's keyword arguments bound: they
    pass through to `fn` and are not differentiated (as in JAX). Called from Python it has
    autograd's meaning (`jitad.dispatch.Concrete`: the call's values, guarded decisions);
    inside a trace it is the jit of it, inlined."""
    check_callable(fn, name)
    full_name = f"{name}_{getattr(fn, '__name__', 'f')}"

    def compiled():   # (made when first needed: a fresh `grad(f)` called from Python never needs it)
        @functools.wraps(fn)
        def staged(*args, **kwargs):
            return body(functools.partial(fn, **kwargs) if kwargs else fn, *split_complex(args))
        staged.__name__ = full_name
        staged.__signature__ = _signature(fn)   # pyright: ignore[reportAttributeAccessIssue]
        return _keeping_values(staged_jit(staged, device=device))
    if device != "cpu":
        return compiled()
    return Concrete(fn, full_name, body, compiled, _differentiated(argnums), (name, argnums) + spec)


def _keeping_values(jitted):
    """A transformation's jit, inlined in a trace with values: it keeps them (a nested
    `grad` of a function that decides on values), where a user's `jit` drops them."""
    jitted.keeps_values = True
    return jitted


def _differentiated(argnums):
    """n_args -> the set of argument positions `argnums` names (negative ones from the end)."""
    nums = (argnums,) if isinstance(argnums, (int, np.integer)) else tuple(argnums)
    return lambda n: {int(i) % n for i in nums if -n <= i < n} if n else set()


def _argnums(argnums, argnum, who):
    """The positions to differentiate: autograd's `argnum=` spelling wins, and a list (as
    autograd takes, `argnum=[3, 1]`) is the tuple of its items."""
    argnums = argnums if argnum is None else argnum
    argnums = tuple(argnums) if isinstance(argnums, list) else argnums
    check_argnums(argnums, who)
    return argnums


def _check_grad_options(who, holomorphic, allow_int, reduce_axes):
    """JAX's `grad` options, as far as they mean something for real floats."""
    if holomorphic and who != "grad" and who != "value_and_grad":
        raise ArgumentError(f"{who}: holomorphic=True is provided for grad and value_and_grad; for a complex "
                            "Jacobian differentiate the real and imaginary parts, or use jitad.vjp/jvp")
    if reduce_axes:
        raise ArgumentError(f"{who}: reduce_axes={reduce_axes!r} is no longer supported (JAX dropped it "
                            "too); sum the gradient over the axis yourself")
    if not isinstance(allow_int, (bool, np.bool_)):
        raise ArgumentError(f"{who}: allow_int={allow_int!r}; give True or False")


def _real_valued(fn, has_aux, holomorphic, who):
    """`fn` with a complex result refused as JAX does, or with `holomorphic` its real part
    differentiated: the gradient of Re f, conjugated as complex gradients are, is f'(z)."""
    @functools.wraps(fn)
    def real_fn(*args, **kwargs):
        out = fn(*args, **kwargs)
        value = out[0] if has_aux and isinstance(out, (tuple, list)) and len(out) == 2 else out
        if not holomorphic:   # (with holomorphic: the real part, and the whole result as an aux)
            if isinstance(value, Complex):
                raise ArgumentError(f"{who} of a function with a complex result needs holomorphic=True (the "
                                    "complex derivative f'(z)), as in JAX; for a real-valued function of complex "
                                    "inputs, leave it out")
            return out
        if not isinstance(value, Complex):
            raise ArgumentError(f"{who}(holomorphic=True) differentiates a function with a complex result; this one "
                                "returns real values")
        return value.re, out
    return real_fn


def _size_one_as_scalar(fn, has_aux, who):
    """`fn` with a float result of one element (shape `(1,)`, `(1, 1)`, ...) made a scalar:
    autograd differentiates such functions (JAX refuses them)."""
    check_callable(fn, who)
    @functools.wraps(fn)
    def scalar_fn(*args, **kwargs):
        out = fn(*args, **kwargs)
        value = out[0] if has_aux and isinstance(out, (tuple, list)) and len(out) == 2 else out
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) > 0 and int(np.prod(shape)) == 1:
            return (N.reshape(value, ()), out[1]) if has_aux else N.reshape(value, ())
        return out
    return scalar_fn


def value_and_grad(fn: Fn, argnums: Argnums = 0, has_aux: bool = False, device: str = "cpu", *,
                   holomorphic: bool = False, allow_int: bool = False, reduce_axes: Sequence[Any] = (),
                   argnum: Argnums | None = None) -> Fn:
    """`(value, gradient)` of a float-scalar `fn`, compiled; with `has_aux`,
    `((value, aux), gradient)`. With `allow_int=True`, an int or bool argument in
    `argnums` gets a gradient of JAX's `float0` zeros (it has no tangent space).
    autograd's spelling `argnum=` is `argnums`; a result of one element (shape `(1,)`)
    is differentiated as that scalar, as autograd does.

    >>> jitad.value_and_grad(lambda x, y: x * y, argnums=(0, 1))(3.0, 4.0)
    (12.0, (4.0, 3.0))
    """
    argnums = _argnums(argnums, argnum, "value_and_grad")
    _check_grad_options("value_and_grad", holomorphic, allow_int, reduce_axes)

    def body(f, *args):
        f = _real_valued(_size_one_as_scalar(f, has_aux, "value_and_grad"), has_aux, holomorphic, "value_and_grad")
        value, g = value_and_grad_staged(f, args, argnums, has_aux or holomorphic, "value_and_grad")
        if holomorphic:   # the complex value comes back (as the aux), the real part is differentiated
            value = value[1]   # pyright: ignore[reportIndexIssue] (a pair)
        return value, conj_leaves(g)
    compiled = _transformation(fn, "value_and_grad", body, device, argnums, (has_aux, holomorphic))
    return _int_arguments_allowed(compiled, fn, argnums, has_aux, device, True) if allow_int else compiled


def grad(fn: Fn, argnums: Argnums = 0, has_aux: bool = False, device: str = "cpu", *, holomorphic: bool = False,
         allow_int: bool = False, reduce_axes: Sequence[Any] = (), argnum: Argnums | None = None) -> Fn:
    """The gradient of a float-scalar `fn` w.r.t. `argnums`, compiled; `(gradient, aux)`
    with `has_aux`. Works through IF/WHILE/FOR/FUN/TREE, and inside staged code.
    `allow_int=True`: int and bool arguments get `float0` zeros, as in JAX. autograd's
    `grad(f, argnum=1)` works too, and so does a result of one element (shape `(1,)`).

    >>> jitad.grad(lambda x: x ** 3)(2.0)
    12.0
    """
    argnums = _argnums(argnums, argnum, "grad")
    _check_grad_options("grad", holomorphic, allow_int, reduce_axes)

    def body(f, *args):   # (the size-one rule inside: the function is keyed as the user gave it)
        f = _real_valued(_size_one_as_scalar(f, has_aux, "grad"), has_aux, holomorphic, "grad")
        value, g = value_and_grad_staged(f, args, argnums, has_aux or holomorphic, "grad")
        if holomorphic:   # (the real part differentiated, the whole result the aux)
            value = value[1]   # pyright: ignore[reportIndexIssue] (a pair)
        g = conj_leaves(g)   # complex gradients: df/dx - i df/dy, as JAX's and autograd's
        return (g, value[1]) if has_aux else g   # pyright: ignore[reportIndexIssue, reportOptionalSubscript] (a pair with has_aux)
    compiled = _transformation(fn, "grad", body, device, argnums, (has_aux, holomorphic))
    return _int_arguments_allowed(compiled, fn, argnums, has_aux, device, False) if allow_int else compiled


def _is_int_leaf(x):
    return isinstance(x, (bool, int, np.integer, np.bool_)) or \
        (isinstance(x, np.ndarray) and x.dtype.kind in "biu")


def _int_arguments_allowed(compiled, fn, argnums, has_aux, device, with_value):
    """`grad`/`value_and_grad` (`compiled`) where the differentiated arguments may hold
    ints: those leaves travel in an extra, undifferentiated argument, and their gradient
    is `float0` zeros. One compiled function per structure of where the ints are."""
    nums = check_argnums(argnums, "grad")
    inners = {}

    @functools.wraps(fn)
    def call(*args, **kwargs):
        split = {i % len(args): flatten(args[i]) for i in nums}
        if not any(_is_int_leaf(x) for leaves, _ in split.values() for x in leaves):
            return compiled(*args, **kwargs)
        masks = {i: tuple(map(_is_int_leaf, leaves)) for i, (leaves, _) in split.items()}
        key = (len(args), tuple((i, split[i][1], masks[i]) for i in sorted(split)))
        inner = inners.get(key)
        if inner is None:
            def on_floats(*a, **kw):
                *a, int_leaves = a
                full = list(a)
                for i, (_, td) in split.items():
                    it = iter(int_leaves[i])
                    full[i] = td.unflatten([next(it) if m else x for x, m in zip(a[i], masks[i])])
                return fn(*full, **kw)
            inner = inners[key] = (value_and_grad if with_value else grad)(on_floats, argnums, has_aux, device)
        floats, int_leaves = list(args), {}
        for i, (leaves, _) in split.items():
            floats[i] = [None if m else x for x, m in zip(leaves, masks[i])]
            int_leaves[i] = [x for x, m in zip(leaves, masks[i]) if m]
        out = inner(*floats, int_leaves, **kwargs)
        grads = out[1] if with_value else (out[0] if has_aux else out)
        per_arg = (grads,) if isinstance(argnums, (int, np.integer)) else grads
        rebuilt = []
        for i, part in zip(nums, per_arg):
            (leaves, td), mask = split[i % len(args)], masks[i % len(args)]
            rebuilt.append(td.unflatten([np.zeros(np.shape(x), FLOAT0) if m else g
                                         for x, g, m in zip(leaves, part, mask)]))
        rebuilt = rebuilt[0] if isinstance(argnums, (int, np.integer)) else tuple(rebuilt)
        if with_value:
            return out[0], rebuilt
        return (rebuilt, out[1]) if has_aux else rebuilt
    return call


def jit_grad(fn: Fn | None = None, *, argnums: Argnums = 0, has_aux: bool = False, device: str = "cpu") -> Any:
    """Decorator: `jit(value_and_grad(fn))`, the entry point for training steps: compiled
    per signature under jit's rule (no Python decisions on values), called natively.

    >>> @jitad.jit_grad
    ... def loss(w, x):
    ...     return (w * x - 1.0) ** 2
    >>> loss(0.5, 3.0)
    (0.25, 3.0)
    """
    if fn is None:
        return lambda f: jit_grad(f, argnums=argnums, has_aux=has_aux, device=device)
    step = value_and_grad(fn, argnums, has_aux, device)   # jit's rule: the native entry, no dispatcher
    return step.make_inline() if isinstance(step, Concrete) else step


# -- batching -----------------------------------------------------------------------

def vmap(fn: Fn, in_axes: Any = 0, out_axes: Any = 0, axis_name: Any = None, axis_size: int | None = None,
         spmd_axis_name: Any = None) -> Fn:
    """Vectorize `fn` over a batch axis of its arguments, as an IR transformation (each
    primitive's batching rule; IF/WHILE/FOR/FUN batched as JAX does), compiled.
    `in_axes`/`out_axes`: an int, None (not batched), or pytrees of them. `axis_name`
    names the batch axis for `lax`'s collectives (`lax.psum(x, axis_name)`); `axis_size`
    gives the batch size where no argument is batched (the result is then repeated);
    `spmd_axis_name` is accepted, as JAX on one device.

    >>> jitad.vmap(lambda w, x: jitad.dot(w, x), in_axes=(None, 0))(np.ones(3), np.eye(3))
    Array([1., 1., 1.])
    """
    check_callable(fn, "vmap")
    key = _library_key(fn, (in_axes, out_axes, axis_name, axis_size))
    found = _LIBRARY_VMAPS.get(key) if key is not None else None
    if found is None:
        found = _vmap(fn, in_axes, out_axes, axis_name, axis_size)
        if key is not None:
            _lru_put(_LIBRARY_VMAPS, key, found, MAX_SIGNATURES)
    return found


_LIBRARY_VMAPS = OrderedDict()   # (one of jitad's own functions, options, settings) -> its vmap
_PKG = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _library_function(fn, depth=8):
    """Whether `fn` is one of jitad's own functions over nothing but others and plain values
    (`jitad.random.normal`, `jitad.numpy.dot`): what it computes is fixed for the process."""
    if not isinstance(fn, types.FunctionType) or not fn.__code__.co_filename.startswith(_PKG):
        return False
    try:
        cells = [c.cell_contents for c in fn.__closure__ or ()]
    except ValueError:   # (an empty cell)
        return False
    return all(_fixed(v, depth) for v in cells)


def _fixed(v, depth):
    """Whether a value a library function closes over is fixed for the process: plain
    values, tuples and frozensets of them, NumPy's functions, and jitad's own functions."""
    if v is None or type(v) in (bool, int, float, str):
        return True
    if type(v) in (tuple, frozenset):
        return all(_fixed(x, depth) for x in v)
    if isinstance(v, (np.ufunc, types.BuiltinFunctionType)) or \
            callable(v) and not isinstance(v, types.FunctionType) and (getattr(v, "__module__", None) or "").startswith("numpy"):
        return True   # NumPy's ufuncs and array functions, builtins
    return depth > 0 and _library_function(v, depth - 1)


def _library_key(fn, options):
    """The key under which a transformation of a library function (`vmap(random.normal)`,
    made again by a program run afresh) is kept, so that it is traced once per process:
    None for any other function (a user's may read what changes between its calls)."""
    if not _library_function(fn):
        return None
    key = (fn, repr(options), tuple(config._values.values()))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _vmap(fn, in_axes, out_axes, axis_name, axis_size):
    if axis_size is not None:
        return _vmap_sized(fn, in_axes, out_axes, axis_size)

    def staged(*args):
        return vmap_staged(fn, args, in_axes, out_axes, axis_name)
    staged.__name__ = f"vmap_{getattr(fn, '__name__', 'f')}"
    compiled = staged_jit(staged)
    with_keywords = []

    @functools.wraps(fn)
    def batched(*args, **kwargs):
        if kwargs:   # keyword arguments are batched along their axis 0, as in JAX
            if not with_keywords:
                axes = tuple(in_axes) if isinstance(in_axes, list) else in_axes   # one per positional
                with_keywords.append(vmap(lambda a, k: fn(*a, **k), (axes, 0), out_axes, axis_name))
            return with_keywords[0](args, kwargs)
        if current_frame() is not None:
            return vmap_staged(fn, args, in_axes, out_axes, axis_name)
        return compiled(*args)
    return batched


def _vmap_sized(fn, in_axes, out_axes, axis_size):
    """vmap with its size given: a batched zero-size placeholder argument carries the
    size, so a function of unbatched arguments only is vmapped too."""
    if isinstance(axis_size, (bool, np.bool_)) or not isinstance(axis_size, (int, np.integer)) or axis_size < 0:
        raise ArgumentError(f"vmap: axis_size={axis_size!r}; give a non-negative int")
    placeholder = np.zeros((int(axis_size), 0))
    per_count = {}   # number of arguments -> the vmap with the placeholder first

    @functools.wraps(fn)
    def batched(*args):
        inner = per_count.get(len(args))
        if inner is None:
            axes = tuple(in_axes) if isinstance(in_axes, (list, tuple)) else (in_axes,) * len(args)
            inner = per_count[len(args)] = vmap(lambda size, *a: fn(*a), (0,) + axes, out_axes)
        return inner(placeholder, *args)
    return batched


# -- forward mode and second order ----------------------------------------------

def linearize(fn: Fn, *primals: Any, has_aux: bool = False) -> Any:
    """JAX's `linearize`: `(fn(*primals), f_jvp)` where `f_jvp(*tangents)` is the `jvp`'s
    tangent. Inside a staged function the primal is computed once and each `f_jvp` call
    adds only tangent code (a zero NumPy or Python tangent adds none): several directions
    for the price of one primal. With `has_aux`, `fn` returns `(out, aux)` and linearize
    returns `(out, f_jvp, aux)`.

    >>> y, f_jvp = jitad.linearize(jitad.sin, 0.0)
    >>> f_jvp(2.0)
    2.0
    """
    check_callable(fn, "linearize")
    primals = tuple(primals)
    if has_aux:   # `(out, f_jvp, aux)`, as JAX's: the function's first result is linearized
        out, f_jvp = linearize(lambda *a: fn(*a)[0], *primals)
        return out, f_jvp, (jit(fn)(*primals) if current_frame() is None else fn(*primals))[1]
    if current_frame() is None:
        out = jit(fn)(*primals)
        return out, lambda *tangents: jvp(fn, primals, tangents)[1]
    res = linearize_staged(fn, primals)
    if res is None:   # reverse-mode code inside: a whole jvp per call
        return fn(*primals), lambda *tangents: jvp_staged(fn, primals, tangents)[1]
    return res


def jvp(fn: Fn, primals: Sequence[Any], tangents: Sequence[Any]) -> Any:
    """Forward mode: `(fn(*primals), directional derivative along tangents)`.

    >>> jitad.jvp(lambda x: x * x, (3.0,), (1.0,))
    (9.0, 6.0)
    """
    check_callable(fn, "jvp")
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise ArgumentError(f"jvp: primals and tangents must be tuples (one entry per argument), got "
                            f"{type(primals).__name__} and {type(tangents).__name__}; write "
                            "jitad.jvp(f, (x,), (v,))")
    primals, tangents = tuple(primals), tuple(tangents)
    if current_frame() is not None:
        return jvp_staged(fn, primals, tangents)
    # `fn` is an argument passed as itself: its code and what it reads find the compiled code
    return _JVP(fn, primals, tangents)


def hvp(fn: Fn, argnums: Argnums = 0) -> Fn:
    """Hessian-vector product by forward-over-reverse: `hvp(f)(x, v) == H(x) @ v`.

    >>> jitad.hvp(lambda x: x ** 3)(2.0, 1.0)
    12.0
    """
    nums = check_argnums(argnums, "hvp")
    check_callable(fn, "hvp")

    def body(f, *args):
        *xs, v = args
        g = grad(f, argnums=argnums)
        vs = (v,) if isinstance(argnums, (int, np.integer)) else tuple(v)
        tangents = [vs[nums.index(i)] if i in nums else tree_zeros(x) for i, x in enumerate(xs)]
        return jvp_staged(g, tuple(xs), tuple(tangents))[1]

    def staged(*args):
        return body(fn, *args)
    staged.__name__ = f"hvp_{getattr(fn, '__name__', 'f')}"
    diff = _differentiated(argnums)   # and the vector, the last argument
    return Concrete(fn, staged.__name__, body, lambda: _keeping_values(staged_jit(staged)), lambda n: diff(n - 1) | {n - 1},
                    ("hvp", argnums))


def tree_zeros(x):
    from .pytree import tree_map
    return tree_map(lambda leaf: np.zeros(np.shape(leaf)) if np.shape(leaf) else 0.0, x)


def vjp(fn: Fn, *primals: Any) -> tuple[Any, Fn]:
    """`(fn(*primals), pullback)`; `pullback(cotangent)` returns one cotangent per primal.

    >>> out, pullback = jitad.vjp(lambda x, y: x * y, 3.0, 4.0)
    >>> pullback(1.0)
    (4.0, 3.0)
    """
    check_callable(fn, "vjp")

    def staged_pullback(primals, ct):
        return pullback_staged(fn, primals, ct)
    if current_frame() is not None:
        pairs = split_complex(primals)
        out = fn(*pairs)   # a complex cotangent is conjugated in and out (JAX's convention: see `grad`)
        return out, lambda ct: conj_leaves(pullback_staged(fn, pairs, conj_leaves(split_complex(ct))))
    out = _CALL(fn, *primals)
    from .pytree import tree_map   # the pullback uses the primals as they are now, not as later changed
    kept = tree_map(lambda x: x.copy() if isinstance(x, np.ndarray) else x, primals)

    def pullback(ct):
        if current_frame() is None:
            return pullback_at(fn, kept, ct)
        with concrete.constant_values():   # staged into a trace (`jit(pullback)`): decide on the primals' values
            return conj_leaves(pullback_staged(fn, split_complex(kept), conj_leaves(split_complex(ct))))
    return out, pullback


def pullback_at(fn: Fn, primals: Any, ct: Any) -> tuple[Any, ...]:
    """`vjp(fn, *primals)[1](ct)` (`primals` a tuple) in one call: from Python, one dispatched program (the
    pullback's, which runs the forward pass it needs) instead of `vjp`'s forward call and
    then the pullback's; inside a trace, `vjp`'s staged pullback.

    >>> pullback_at(lambda x, y: x * y, (3.0, 4.0), 1.0)
    (4.0, 3.0)
    """
    if current_frame() is not None:
        return vjp(fn, *primals)[1](ct)
    return conj_leaves(_PULLBACK(fn, conj_leaves(ct), *primals))


# -- Jacobians and Hessians ---------------------------------------------------------

def jacfwd(fun: Fn, argnums: Argnums = 0, has_aux: bool = False, holomorphic: bool = False) -> Fn:
    """The Jacobian of `fun` by forward mode (the function once, then its tangent code
    per input element), compiled:
    shaped `out.shape + in.shape` per output and input leaf.

    >>> jitad.jacfwd(lambda x: x ** 2)(np.array([1.0, 2.0]))
    Array([[2., 0.],
           [0., 4.]])
    """
    check_argnums(argnums, "jacfwd")
    _check_grad_options("jacfwd", holomorphic, False, ())
    return _transformation(fun, "jacfwd", lambda f, *args: jacobian_staged(f, args, argnums, has_aux, True, "jacfwd"),
                           argnums=argnums, spec=(has_aux,))


def jacrev(fun: Fn, argnums: Argnums = 0, has_aux: bool = False, holomorphic: bool = False,
           allow_int: bool = False) -> Fn:
    """The Jacobian of `fun` by reverse mode (one `vjp` per output element), compiled;
    same result as `jacfwd`, cheaper when there are fewer outputs than inputs.

    >>> jitad.jacrev(lambda x, y: x * y, argnums=(0, 1))(2.0, 3.0)
    (3.0, 2.0)
    """
    check_argnums(argnums, "jacrev")
    _check_grad_options("jacrev", holomorphic, False, ())
    if allow_int:
        raise ArgumentError("jacrev: allow_int=True (float0 rows for int arguments) is not supported; leave the "
                            "int arguments out of argnums")
    return _transformation(fun, "jacrev", lambda f, *args: jacobian_staged(f, args, argnums, has_aux, False, "jacrev"),
                           argnums=argnums, spec=(has_aux,))


def hessian(fun: Fn, argnums: Argnums = 0, has_aux: bool = False, holomorphic: bool = False, *,
            argnum: Argnums | None = None) -> Fn:
    """`jacfwd(jacrev(fun, argnums), argnums)`: forward-over-reverse second derivatives,
    shaped `x.shape + x.shape`; a tuple `argnums` gives nested tuples of blocks
    `H[i][j]` (as JAX).

    >>> jitad.hessian(lambda x, y: x * x * y, argnums=(0, 1))(3.0, 2.0)
    ((4.0, 6.0), (6.0, 0.0))
    """
    argnums = _argnums(argnums, argnum, "hessian")
    _check_grad_options("hessian", holomorphic, False, ())
    return jacfwd(jacrev(fun, argnums, has_aux), argnums, has_aux)


def jacobian(fun: Fn, argnums: Argnums = 0, has_aux: bool = False, holomorphic: bool = False, allow_int: bool = False,
             *, argnum: Argnums | None = None) -> Fn:
    """`jacrev` under the name JAX (`argnums=`) and autograd (`argnum=`) give it:
    `jitad.jacobian(f)(x)`, `jitad.jacobian(f, argnum=1)(x, y)`."""
    return jacrev(fun, argnums if argnum is None else argnum, has_aux, holomorphic, allow_int)


def elementwise_grad(fn: Fn, argnum: Argnums = 0) -> Fn:
    """autograd's `elementwise_grad`: the gradient of the sum of `fn`'s outputs with respect
    to argument `argnum` (the Jacobian's diagonal when it is diagonal).

    >>> jitad.elementwise_grad(jitad.tanh)(np.array([0.0, 1.0]))   # 1 - tanh(x)**2
    """
    from .pytree import tree_leaves

    def total(*args, **kwargs):
        return sum(N.sum(leaf) for leaf in tree_leaves(fn(*args, **kwargs)))
    return grad(total, argnums=argnum)


def _applied(name, body, diff):
    """A module-level `Concrete` whose first argument is the function (passed as itself:
    its code and what it reads select the compiled code); `diff`: the positions that are
    values (None: all but the function)."""
    def apply(fn, *args):
        return body(fn, *args)
    return Concrete(apply, name, lambda f, *args: f(*args), lambda: _keeping_values(jit(apply)),
                    lambda n: set(range(1, n)) if diff is None else diff, (name,))


_JVP = _applied("jvp", lambda fn, p, t: jvp_staged(fn, p, t), {1, 2})
_CALL = _applied("vjp", lambda fn, *p: fn(*p), None)
# (the cotangent first, then the primals as arguments of their own: arrays and numbers passed
# as themselves take the dispatcher's fast path of a call like the last)
_PULLBACK = _applied("vjp_pullback", lambda fn, ct, *p: pullback_staged(fn, p, ct), None)
