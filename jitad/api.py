"""The user-facing transformations and the per-signature compile cache."""
import functools
import gc
import inspect
import re
import weakref
from collections import OrderedDict

import numpy as np

from . import numpy_api, timing
from .config import config
from .errors import ArgumentError, check_argnums, env_int
from .ir.types import FLOATS, TreeType, is_device_array
from .ir import float_checks
from .ir.verify import verify
from .lower.compile import SCALAR_KEYS, compile_program
from .pytree import check_hashable, flatten, unflatten
from .ad.forward import contains_effects
from .batching import value_and_grad as _reverse_or_defer, vmap_staged
from .staging import Staged, StagedTree, arg_type, current_frame, trace_program, wrap
from .tree import SLOT_OFFSETS, Tree, plain_tree
from .pullback import grad_by_forward_mode, leaf_type, positive_zero, pullback_staged, staged_arg

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
    if type(x) is np.ndarray:
        return x.dtype.char, x.shape
    if type(x) in _NUMPY_SCALAR_KEYS:   # the same code as for the Python number
        return _NUMPY_SCALAR_KEYS[type(x)]
    if isinstance(x, Tree):   # a subclass runs the same code, given its plain Tree part
        return plain_tree(x)._type_code
    if is_device_array(x):   # a numba device array: same code, results stay on the device
        return "device", arg_type(x)
    return arg_type(x)


class Jitted:
    """A function compiled per input signature; see `jitad.jit`."""

    def __init__(self, fn, static_argnums=(), device="cpu"):
        self.fn = fn
        self.device = check_device(device)
        self.static_argnums = tuple(sorted(set(check_argnums(static_argnums, "jit", "static_argnums",
                                                             allow_empty=True))))
        self._signature = _signature(fn)
        self._compiled = OrderedDict()   # signature key -> Compiled, least recently called first
        self.max_signatures = MAX_SIGNATURES
        self._static_by_count = {}   # positional argument count -> static_argnums, normalized
        self._keyword_jits = {}   # static_argnums -> the jit of calls with keyword arguments
        self._last = None
        self._fallback = functools.partial(Jitted.__call__, self)
        functools.update_wrapper(self, fn, updated=())
        _JITS.add(self)

    def _forget(self):
        """Drop every compiled signature (the float-check settings changed)."""
        self._compiled.clear()
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
        if kwargs:
            args, kwargs = self._bind(args, kwargs)
            if kwargs:
                return self._call_with_keywords(args, kwargs)
        if current_frame() is not None:
            return self.fn(*args)   # called inside a trace: inline, as a nested jit in JAX
        nums = (self._static_by_count.get(len(args)) or self._static_nums(len(args))) if self.static_argnums else ()
        if nums:
            static = tuple(args[i] for i in nums)
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
                                f"{', '.join(type(s).__name__ for s in static)}; pass tuples instead of "
                                "lists, or leave it out of static_argnums") from None
        if compiled is not self._last and compiled is not None:   # the last called is the newest
            _lru_touch(self._compiled, key)
        if compiled is None:
            self._bind(args, {})   # a wrong argument count is an ArgumentError
            compiled = self._compile(args, dynamic, leaves, key, nums, td)
        self._last = compiled
        fast = not kwargs and compiled.direct and not self.static_argnums \
            and (len(leaves) == len(args) or compiled.takes_pytree) \
            and (SLOT_OFFSETS is not None or not any(isinstance(t, TreeType) for t in compiled.in_types))
        wanted = compiled.entry if fast else Jitted.__call__
        if type(self).__dict__.get("__call__", Jitted.__call__) is not wanted:
            type(self).__call__ = wanted   # assigning invalidates type caches: only on change
        return compiled.run(leaves)

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
        with timing.recording() as report:
            compiled = self._compile_recorded(args, dynamic, leaves, nums, in_td)
        compiled.compile_seconds, compiled.compile_report = report.total, report
        for old in _lru_put(self._compiled, key, compiled, self.max_signatures):
            if type(self).__dict__.get("__call__") is getattr(old, "entry", None):   # never call evicted code
                type(self).__call__ = Jitted.__call__
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
            compiled = compile_program(program, out_td, types, _fn_name(self.fn),
                                       self._fallback, in_td if not nums else None,
                                       self.device)
            compiled.in_td = in_td
        finally:
            if gc_was_enabled:
                gc.enable()
        return compiled

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


_JITS = weakref.WeakSet()   # every Jitted, to forget code compiled under other float checks


def _float_checks_changed(name, value):
    if name in ("jax_debug_nans", "jax_debug_infs") and \
            float_checks.configure(config.jax_debug_nans, config.jax_debug_infs):
        for jitted in list(_JITS):
            jitted._forget()


float_checks.configure(config.jax_debug_nans, config.jax_debug_infs)   # (their environment variables)
config.on_update(_float_checks_changed)


def jit(fn=None, static_argnums=(), device="cpu"):
    """Compile `fn` per input signature; `device="cuda"` runs its tensor work as
    numba-cuda kernels (inputs: numpy arrays, copied per call, or numba device arrays;
    results come back as numpy arrays unless the inputs were device arrays).

    >>> f = jitad.jit(lambda x, y: x * y + 1.0)
    >>> f(3.0, 4.0)
    13.0
    """
    if fn is None:
        return lambda f: jit(f, static_argnums, device)
    check_callable(fn, "jit")
    cls = type(f"jit_{_fn_name(fn)}", (Jitted,), {})   # its own __call__ slot
    return cls(fn, static_argnums, device)


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


def trace(fn, *args, **kwargs):
    """The staged program of `fn` at `args`; `str()` prints it. Given an array instead of a
    function, NumPy's `trace` (the sum of a diagonal, `jitad.numpy_api.trace`).

    >>> print(jitad.trace(lambda x: x * 2.0, 1.0))
    """
    if not callable(fn):
        return numpy_api.trace(fn, *args, **kwargs)
    leaves, td = flatten(args)
    program, _, _ = trace_program(fn, args, td, [arg_type(x) for x in leaves])
    return verify(program)


# -- reverse mode ---------------------------------------------------------------

def _value_and_grad_staged(fn, args, argnums, has_aux, who):
    """Trace `fn(*args)` and emit its value and reverse-mode gradient into the current trace."""
    nums = check_argnums(argnums, who)
    for i in nums:
        if not 0 <= i < len(args):
            raise ArgumentError(f"{who}: argnums={argnums!r} but the function got {len(args)} "
                                "positional arguments")
    flat, wrt, wrt_tds = [], [], {}
    for i, a in enumerate(args):
        leaves, td = flatten(a)
        if i in nums:
            wrt_tds[i] = (len(wrt), len(leaves), td)
            wrt += range(len(flat), len(flat) + len(leaves))
        flat += leaves
    types = [leaf_type(x) for x in flat]
    for k in wrt:
        if isinstance(types[k], TreeType) or types[k].dtype not in FLOATS:
            raise ArgumentError(f"{who}: cannot differentiate with respect to a value of type "
                                f"{types[k]} (argument leaf {k}); only float arguments have gradients. "
                                "Pass it as a float, or leave it out of argnums")
    program, out_td, captured = trace_program(fn, args, flatten(args)[1], types)
    value_td = out_td.children[0] if has_aux and out_td.kind == "tuple" and len(out_td.children) == 2 else out_td
    if has_aux and value_td is out_td:
        raise ArgumentError(f"{who}: with has_aux=True the function must return a pair (value, aux)")
    out_types = program.main.out_types
    if value_td.kind != "leaf" or out_types[0].shape != () or out_types[0].dtype not in FLOATS:
        got = out_types[0] if value_td.kind == "leaf" else "a pytree"
        raise ArgumentError(f"{who}: the function must return a float scalar to differentiate, got "
                            f"{got}; reduce it first (e.g. with a sum) or use jitad.vjp")
    staged = [staged_arg(x, t) for x, t in zip(flat, types)] + [wrap(v) for v in captured]
    if contains_effects(program):   # the function itself takes a gradient: go forward
        with timing.stage("ad"):
            outs, grads = grad_by_forward_mode(program, staged, wrt, who)
    else:
        with timing.stage("ad"):
            outs, grads = _reverse_or_defer(program, staged, wrt)
        grads = [positive_zero(g) for g in grads]
    value = outs[0]
    if has_aux:
        value = (value, unflatten(out_td.children[1], outs[1:]))
    per_arg = [unflatten(td, grads[start:start + n]) for start, n, td in map(wrt_tds.get, nums)]   # in the order asked
    return value, (per_arg[0] if isinstance(argnums, (int, np.integer)) else tuple(per_arg))


def _transformation(fn, name, body, device="cpu"):
    """The jit of `body(f, *args)`, where `f` is `fn` with the call's keyword arguments
    bound: they pass through to `fn` and are not differentiated (as in JAX)."""
    check_callable(fn, name)

    @functools.wraps(fn)
    def staged(*args, **kwargs):
        return body(functools.partial(fn, **kwargs) if kwargs else fn, *args)
    staged.__name__ = f"{name}_{getattr(fn, '__name__', 'f')}"
    staged.__signature__ = _signature(fn)
    return jit(staged, device=device)


def value_and_grad(fn, argnums=0, has_aux=False, device="cpu"):
    """`(value, gradient)` of a float-scalar `fn`, compiled; with `has_aux`,
    `((value, aux), gradient)`.

    >>> jitad.value_and_grad(lambda x, y: x * y, argnums=(0, 1))(3.0, 4.0)
    (12.0, (4.0, 3.0))
    """
    check_argnums(argnums, "value_and_grad")
    return _transformation(fn, "value_and_grad", lambda f, *args: _value_and_grad_staged(
        f, args, argnums, has_aux, "value_and_grad"), device)


def grad(fn, argnums=0, has_aux=False, device="cpu"):
    """The gradient of a float-scalar `fn` w.r.t. `argnums`, compiled; `(gradient, aux)`
    with `has_aux`. Works through IF/WHILE/FOR/FUN/TREE, and inside staged code.

    >>> jitad.grad(lambda x: x ** 3)(2.0)
    12.0
    """
    check_argnums(argnums, "grad")

    def body(f, *args):
        value, g = _value_and_grad_staged(f, args, argnums, has_aux, "grad")
        return (g, value[1]) if has_aux else g
    return _transformation(fn, "grad", body, device)


def jit_grad(fn=None, *, argnums=0, has_aux=False, device="cpu"):
    """Decorator: a compiled `value_and_grad`, the entry point for training steps.

    >>> @jitad.jit_grad
    ... def loss(w, x):
    ...     return (w * x - 1.0) ** 2
    >>> loss(0.5, 3.0)
    (0.25, 3.0)
    """
    if fn is None:
        return lambda f: value_and_grad(f, argnums, has_aux, device)
    return value_and_grad(fn, argnums, has_aux, device)


# -- batching -----------------------------------------------------------------------

def vmap(fn, in_axes=0, out_axes=0):
    """Vectorize `fn` over a batch axis of its arguments, as an IR transformation (each
    primitive's batching rule; IF/WHILE/FOR/FUN batched as JAX does), compiled.
    `in_axes`/`out_axes`: an int, None (not batched), or pytrees of them.

    >>> jitad.vmap(lambda w, x: jitad.dot(w, x), in_axes=(None, 0))(np.ones(3), np.eye(3))
    array([1., 1., 1.])
    """
    check_callable(fn, "vmap")

    def staged(*args):
        return vmap_staged(fn, args, in_axes, out_axes)
    staged.__name__ = f"vmap_{getattr(fn, '__name__', 'f')}"
    compiled = jit(staged)
    with_keywords = []

    @functools.wraps(fn)
    def batched(*args, **kwargs):
        if kwargs:   # keyword arguments are batched along their axis 0, as in JAX
            if not with_keywords:
                axes = tuple(in_axes) if isinstance(in_axes, list) else in_axes   # one per positional
                with_keywords.append(vmap(lambda a, k: fn(*a, **k), (axes, 0), out_axes))
            return with_keywords[0](args, kwargs)
        if current_frame() is not None:
            return vmap_staged(fn, args, in_axes, out_axes)
        return compiled(*args)
    return batched


# -- forward mode and second order ----------------------------------------------

def _jvp_staged(fn, primals, tangents):
    from .ad.forward import jvp_graph, zeros
    flat, td = flatten(primals)
    flat_t, td_t = flatten(tangents)
    if td != td_t:
        raise ArgumentError("jvp: primals and tangents must have the same structure")
    types = [leaf_type(x) for x in flat]
    program, out_td, captured = trace_program(fn, primals, td, types)
    pairs = []
    for x, t, ty in zip(flat, flat_t, types):
        if isinstance(ty, TreeType) or ty.dtype not in FLOATS:
            pairs.append((staged_arg(x, ty), None))
        else:
            if np.shape(t) != ty.shape:
                raise ArgumentError(f"jvp: a tangent of shape {np.shape(t)} for a primal of shape {ty.shape}")
            pairs.append((staged_arg(x, ty), staged_arg(t, ty)))
    with timing.stage("ad"):
        result = jvp_graph(program.main, pairs + [(wrap(v), None) for v in captured])
    outs = [p for p, _ in result]
    tans = [t if t is not None else zeros(v.type) for (_, t), v in zip(result, program.main.outputs)]
    return unflatten(out_td, outs), unflatten(out_td, tans)


def linearize_staged(fn, primals):
    """`(fn(*primals), tangent_fn)`: the primal emitted once; each `tangent_fn(*tangents)`
    call emits only the tangent computation (None or a constant zero for a tangent: no
    code for it). None when the program holds reverse-mode code (effects)."""
    from .ad.forward import linearize_graph, zeros
    flat, td = flatten(primals)
    types = [leaf_type(x) for x in flat]
    program, out_td, captured = trace_program(fn, primals, td, types)
    if contains_effects(program):
        return None
    with timing.stage("ad"):
        outs, tangents = linearize_graph(program.main, [staged_arg(x, t) for x, t in zip(flat, types)]
                                         + [wrap(v) for v in captured])

    def tangent_fn(*tans):
        flat_t, td_t = flatten(tans)
        if td_t != td:
            raise ArgumentError("linearize: the tangents must have the primals' structure")
        ts = []
        for t, ty in zip(flat_t, types):
            if isinstance(ty, TreeType) or ty.dtype not in FLOATS or _is_constant_zero(t):
                ts.append(None)
            elif np.shape(t) != ty.shape:
                raise ArgumentError(f"linearize: a tangent of shape {np.shape(t)} for a primal of shape {ty.shape}")
            else:
                ts.append(staged_arg(t, ty))
        with timing.stage("ad"):
            out_t = tangents(ts + [None] * len(captured))
        return unflatten(out_td, [t if t is not None else zeros(v.type) for t, v in zip(out_t, program.main.outputs)])
    return unflatten(out_td, outs), tangent_fn


def _is_constant_zero(t):
    """A tangent known zero when staged (a NumPy or Python zero): it makes no code."""
    return not isinstance(t, (Staged, StagedTree)) and not np.any(np.asarray(t))


def linearize(fn, *primals):
    """JAX's `linearize`: `(fn(*primals), f_jvp)` where `f_jvp(*tangents)` is the `jvp`'s
    tangent. Inside a staged function the primal is computed once and each `f_jvp` call
    adds only tangent code (a zero NumPy or Python tangent adds none): several directions
    for the price of one primal.

    >>> y, f_jvp = jitad.linearize(jitad.sin, 0.0)
    >>> f_jvp(2.0)
    2.0
    """
    check_callable(fn, "linearize")
    primals = tuple(primals)
    if current_frame() is None:
        out = jit(fn)(*primals)
        return out, lambda *tangents: jvp(fn, primals, tangents)[1]
    res = linearize_staged(fn, primals)
    if res is None:   # reverse-mode code inside: a whole jvp per call
        return fn(*primals), lambda *tangents: _jvp_staged(fn, primals, tangents)[1]
    return res


def jvp(fn, primals, tangents):
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
        return _jvp_staged(fn, primals, tangents)
    # traced at every call, as JAX's jvp is (a global `fn` reads may have changed since the
    # last call); compiling the same program again is a lookup in the compiled-code cache
    return jit(lambda p, t: _jvp_staged(fn, p, t))(primals, tangents)


def hvp(fn, argnums=0):
    """Hessian-vector product by forward-over-reverse: `hvp(f)(x, v) == H(x) @ v`.

    >>> jitad.hvp(lambda x: x ** 3)(2.0, 1.0)
    12.0
    """
    nums = check_argnums(argnums, "hvp")
    check_callable(fn, "hvp")

    def staged(*args):
        *xs, v = args
        g = grad(fn, argnums=argnums)
        vs = (v,) if isinstance(argnums, (int, np.integer)) else tuple(v)
        tangents = [vs[nums.index(i)] if i in nums else tree_zeros(x) for i, x in enumerate(xs)]
        return _jvp_staged(g, tuple(xs), tuple(tangents))[1]
    staged.__name__ = f"hvp_{getattr(fn, '__name__', 'f')}"
    return jit(staged)


def tree_zeros(x):
    from .pytree import tree_map
    return tree_map(lambda leaf: np.zeros(np.shape(leaf)) if np.shape(leaf) else 0.0, x)


def vjp(fn, *primals):
    """`(fn(*primals), pullback)`; `pullback(cotangent)` returns one cotangent per primal.

    >>> out, pullback = jitad.vjp(lambda x, y: x * y, 3.0, 4.0)
    >>> pullback(1.0)
    (4.0, 3.0)
    """
    check_callable(fn, "vjp")

    def staged_pullback(primals, ct):
        return pullback_staged(fn, primals, ct)
    if current_frame() is not None:
        out = fn(*primals)
        return out, lambda ct: pullback_staged(fn, primals, ct)
    out = jit(fn)(*primals)
    compiled = jit(staged_pullback)
    from .pytree import tree_map   # the pullback uses the primals as they are now, not as later changed
    kept = tree_map(lambda x: x.copy() if isinstance(x, np.ndarray) else x, primals)
    return out, lambda ct: compiled(kept, ct)

