"""The user-facing transformations and the per-signature compile cache."""
import functools
import inspect
import time

import numpy as np

from .errors import ArgumentError
from .ir.types import NUMPY, TreeType
from .ir.fuse import fuse_program
from .ir.verify import verify
from .lower import runtime
from .lower.entry import add_entry
from .lower.llvm import lower_program
from .pytree import flatten, unflatten
from .staging import Staged, StagedTree, arg_type, as_var, current_frame, trace_program, wrap
from .tree import Tree

PLACEHOLDER = "JITAD_PREFIX_"


class Compiled:
    """One signature's compiled code."""

    def __init__(self, program, out_td, in_types, direct):
        self.program, self.out_td, self.direct = program, out_td, direct
        self.in_types = in_types
        self.ir = str(program)

    def run(self, leaves):
        """Call the entry on flat argument leaves; return the result pytree."""
        result = self.entry(*[_canonical(x, t) for x, t in zip(leaves, self.in_types)])
        return result if self.direct else unflatten(self.out_td, result)


def _canonical(x, t):
    """A flat argument as the exact Python object the entry expects: arrays become
    contiguous arrays of the right dtype (copied when they are not)."""
    if isinstance(x, Tree):
        return x.address
    if t.shape:
        return np.ascontiguousarray(x, dtype=NUMPY[t.dtype])
    if isinstance(x, np.ndarray):
        x = x.item()
    if t.dtype == "bool":
        return bool(x)
    if t.dtype == "i64":
        return int(x)
    return float(x)


def _layout(td, counter):
    if td.kind == "leaf":
        return next(counter)
    return [_layout(c, counter) for c in td.children]


def compile_program(program, out_td, in_types, name, fallback):
    """The pipeline after tracing (and the transformations staged with it):
    verify -> fuse elementwise loops -> verify -> lower to LLVM -> optimize (O3) -> load."""
    verify(program)
    fuse_program(program)
    verify(program)
    out_types = program.main.out_types
    direct = out_td.is_tuple_nest
    layout = _layout(out_td, iter(range(len(out_types)))) if direct else list(range(len(out_types)))
    module = runtime.new_module(name)
    main, constants = lower_program(module, program, PLACEHOLDER)
    runtime.register_constants(constants)
    for suffix, budget in (("shallow", runtime.SHALLOW_STACK), ("deep", runtime.DEEP_STACK - (1 << 20))):
        add_entry(module, main, in_types, out_types, layout, f"{PLACEHOLDER}{suffix}", budget)
    prefix, llvm_ir, loaded = runtime.compile_module(str(module), PLACEHOLDER)
    c = Compiled(program, out_td, in_types, direct)
    c.out_types = out_types
    c.llvm_ir, c.loaded_from_cache = llvm_ir, loaded
    deep = runtime.python_function(runtime.address(prefix + "deep"), name, fallback, runtime.stack_exhausted)
    on_exhausted = functools.partial(runtime.run_with_deep_stack, deep)
    c.entry = runtime.python_function(runtime.address(prefix + "shallow"), name, fallback, on_exhausted)
    return c


class Jitted:
    """A function compiled per input signature; see `jitad.jit`."""

    def __init__(self, fn, static_argnums=()):
        self.fn = fn
        self.static_argnums = tuple(sorted({static_argnums} if isinstance(static_argnums, int)
                                           else set(static_argnums)))
        self._signature = inspect.signature(fn) if callable(fn) else None
        self._compiled = {}
        self._last = None
        self._fallback = functools.partial(Jitted.__call__, self)
        functools.update_wrapper(self, fn, updated=())

    def _bind(self, args, kwargs):
        if self._signature is None:
            return args
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentError(f"{getattr(self.fn, '__name__', 'function')}: {e}") from None
        if bound.kwargs:
            raise ArgumentError(f"{self.fn.__name__}: keyword-only arguments are not supported; "
                                "pass them positionally")
        return bound.args

    def __call__(self, *args, **kwargs):
        """The dispatcher: find or compile this signature's code and run it.

        Once a signature of plain scalars is compiled, its native entry is installed as
        this object's `__call__`, so later calls skip this method altogether.
        """
        args = self._bind(args, kwargs)
        if current_frame() is not None and any(isinstance(x, (Staged, StagedTree))
                                               for x in flatten(args)[0]):
            return self.fn(*args)   # called inside a trace: inline
        key, dynamic, leaves = self._key(args)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compile(args, dynamic, leaves, key)
        self._last = compiled
        simple_args = not kwargs and len(leaves) == len(args) and not any(
            isinstance(t, TreeType) for t in compiled.in_types)
        if compiled.direct and simple_args:
            type(self).__call__ = compiled.entry
        else:
            type(self).__call__ = Jitted.__call__
        return compiled.run(leaves)

    def _key(self, args):
        static = tuple(args[i] for i in self.static_argnums if i < len(args))
        dynamic = tuple(a for i, a in enumerate(args) if i not in self.static_argnums)
        leaves, td = flatten(dynamic)
        try:
            hash(static)
        except TypeError:
            raise ArgumentError("static arguments must be hashable") from None
        return (len(args), static, td, tuple(map(arg_type, leaves))), dynamic, leaves

    def _compile(self, args, dynamic, leaves, key):
        start = time.perf_counter()
        _, static, in_td, types = key

        def staged_fn(*dyn):
            it = iter(dyn)
            full = [args[i] if i in self.static_argnums else next(it) for i in range(len(args))]
            return self.fn(*full)

        program, out_td, _ = trace_program(staged_fn, dynamic, in_td, list(types))
        compiled = compile_program(program, out_td, list(types), getattr(self.fn, "__name__", "f"),
                                   self._fallback)
        compiled.compile_seconds = time.perf_counter() - start
        self._compiled[key] = compiled
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


def jit(fn=None, static_argnums=()):
    """Compile `fn` per input signature.

    >>> f = jitad.jit(lambda x, y: x * y + 1.0)
    >>> f(3.0, 4.0)
    13.0
    """
    if fn is None:
        return lambda f: jit(f, static_argnums)
    cls = type(f"jit_{getattr(fn, '__name__', 'f')}", (Jitted,), {})   # its own __call__ slot
    return cls(fn, static_argnums)


def trace(fn, *args):
    """The staged program of `fn` at `args`; `str()` prints it.

    >>> print(jitad.trace(lambda x: x * 2.0, 1.0))
    """
    leaves, td = flatten(args)
    program, _, _ = trace_program(fn, args, td, [arg_type(x) for x in leaves])
    return verify(program)


# -- reverse mode ---------------------------------------------------------------

def _leaf_type(x):
    return x.var.type if isinstance(x, (Staged, StagedTree)) else arg_type(x)


def _value_and_grad_staged(fn, args, argnums, has_aux, who):
    """Trace `fn(*args)` and emit its value and reverse-mode gradient into the current trace."""
    from .ad.reverse import value_and_grad_staged
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for i in nums:
        if not isinstance(i, int) or not 0 <= i < len(args):
            raise ArgumentError(f"{who}: argnums={argnums!r} but the function got {len(args)} "
                                "positional arguments")
    flat, wrt, wrt_tds = [], [], []
    for i, a in enumerate(args):
        leaves, td = flatten(a)
        if i in nums:
            wrt_tds.append((len(wrt), len(leaves), td))
            wrt += range(len(flat), len(flat) + len(leaves))
        flat += leaves
    types = [_leaf_type(x) for x in flat]
    for k in wrt:
        if isinstance(types[k], TreeType) or types[k].dtype not in ("f64", "f32"):
            raise ArgumentError(f"{who}: cannot differentiate with respect to a value of type "
                                f"{types[k]} (argument leaf {k}); only float arguments have gradients. "
                                "Pass it as a float, or leave it out of argnums")
    program, out_td, captured = trace_program(fn, args, flatten(args)[1], types)
    value_td = out_td.children[0] if has_aux and out_td.kind == "tuple" and len(out_td.children) == 2 else out_td
    if has_aux and value_td is out_td:
        raise ArgumentError(f"{who}: with has_aux=True the function must return a pair (value, aux)")
    out_types = program.main.out_types
    if value_td.kind != "leaf" or out_types[0].shape != () or out_types[0].dtype not in ("f64", "f32"):
        got = out_types[0] if value_td.kind == "leaf" else "a pytree"
        raise ArgumentError(f"{who}: the function must return a float scalar to differentiate, got "
                            f"{got}; reduce it first (e.g. with a sum) or use jitad.vjp")
    staged = [x if isinstance(x, (Staged, StagedTree)) else Staged(as_var(x, t.dtype))
              for x, t in zip(flat, types)] + [wrap(v) for v in captured]
    outs, grads = value_and_grad_staged(program, staged, wrt)
    value = outs[0]
    if has_aux:
        value = (value, unflatten(out_td.children[1], outs[1:]))
    per_arg = [unflatten(td, grads[start:start + n]) for start, n, td in wrt_tds]
    return value, (per_arg[0] if isinstance(argnums, int) else tuple(per_arg))


def _transformation(fn, name, body):
    staged = functools.wraps(fn)(body)
    staged.__name__ = f"{name}_{getattr(fn, '__name__', 'f')}"
    staged.__signature__ = inspect.signature(fn)
    return jit(staged)


def value_and_grad(fn, argnums=0, has_aux=False):
    """`(value, gradient)` of a float-scalar `fn`, compiled; with `has_aux`,
    `((value, aux), gradient)`.

    >>> jitad.value_and_grad(lambda x, y: x * y, argnums=(0, 1))(3.0, 4.0)
    (12.0, (4.0, 3.0))
    """
    return _transformation(fn, "value_and_grad", lambda *args: _value_and_grad_staged(
        fn, args, argnums, has_aux, "value_and_grad"))


def grad(fn, argnums=0, has_aux=False):
    """The gradient of a float-scalar `fn` w.r.t. `argnums`, compiled; `(gradient, aux)`
    with `has_aux`. Works through IF/WHILE/FOR/FUN/TREE, and inside staged code.

    >>> jitad.grad(lambda x: x ** 3)(2.0)
    12.0
    """
    def body(*args):
        value, g = _value_and_grad_staged(fn, args, argnums, has_aux, "grad")
        return (g, value[1]) if has_aux else g
    return _transformation(fn, "grad", body)


def jit_grad(fn=None, *, argnums=0, has_aux=False):
    """Decorator: a compiled `value_and_grad`, the entry point for training steps.

    >>> @jitad.jit_grad
    ... def loss(w, x):
    ...     return (w * x - 1.0) ** 2
    >>> loss(0.5, 3.0)
    (0.25, 3.0)
    """
    if fn is None:
        return lambda f: value_and_grad(f, argnums, has_aux)
    return value_and_grad(fn, argnums, has_aux)
