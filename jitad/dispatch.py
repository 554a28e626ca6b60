"""`grad` and its kin called from Python, with autograd's meaning at compiled speed.

`Concrete(fn, name, body)` is what `jitad.grad(fn)` returns (and `value_and_grad`, the
Jacobians, `hessian`, `elementwise_grad`, `hvp`, ...). Called from Python, it
- passes the arguments that are not differentiated and hold no array (functions, objects,
  strings, numbers, None) to `fn` as themselves, keyed by type and value (identity for
  objects): `True` and `1` select different code;
- traces with the call's values (`jitad.staging.concrete`): Python decides on them, each
  decision a guard in the compiled code; a path whose guard fails hands over to another
  path with the same decisions before it, or to a new trace; past `MAX_PATHS_PER_SITE`
  paths at one decision the calls there run without compiling (the traced program through
  the NumPy interpreter) and a JitadWarning names the line;
- finds its compiled code by what `fn` is (`function_key`: its code, and the Python values
  it reads: closure cells, defaults, globals, the functions it calls), so a fresh closure
  of the same code reuses it; the arrays it reads, and the arrays a trace meets, are
  arguments of the program (read at each call), not constants;
- draws the host's random numbers at each call (`jitad.hostrng.Recorder`).
Called inside a trace (`jit`, `vmap`, another transformation), it is the staged
transformation: JAX's rule, a Python decision on a staged value is a StagingError.
See docs/grad-semantics.md.
"""
import builtins
import contextlib
import functools
import types
import warnings
from collections import OrderedDict

import numpy as np

from . import config, hostrng, timing
from .errors import ArgumentError, JitadWarning, env_int
from .ir.interpret import interpret
from .ir.types import is_device_array
from .ir.graph import walk
from .ir.ops import Op
from .ir.printer import program_key_text
from .lower import debug as debug_output
from .lower.compile import GuardFailed, compile_program
from .dtypes import narrowed
from .pytree import check_hashable, flatten, register_pytree_node, tree_map, unflatten
from .forest import Forest, Tree
from .staging import Staged, arg_type, current_frame, trace_program, concrete
from .staging.concrete import ConcreteTrace

MAX_PATHS_PER_SITE = env_int("JITAD_MAX_PATHS_PER_SITE", 16, 1)
MAX_KEYS = env_int("JITAD_MAX_PATH_KEYS", 256, 1)   # (each key's paths hold the array constants they met)
# (transformation, function, arguments) -> its paths, most recently run first; shared by
# every `grad(f)` object, so that a fresh one of the same function finds the compiled code
_ENTRIES = OrderedDict()
_OVER = set()
# the program of the function alone (and the transformation's signature) -> a path traced
# from it: another static value that traces to the same program reuses its compiled code
_BY_PRIMAL = OrderedDict()
_SIGS = OrderedDict()   # the signatures traced so far (see `Concrete._trace`)   # (transformation, decision site) past MAX_PATHS_PER_SITE (warned once)
_PKG = __file__.rsplit("/", 1)[0] + "/"


# -- what the function is ---------------------------------------------------------------

class _Id:
    """A key part equal only to the same object."""
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other):
        return type(other) is _Id and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)


_PLAIN = (bool, int, float, complex, str, bytes, type(None), np.bool_, np.integer, np.floating)
_global_names_cache = {}


def _global_names(code):
    names = _global_names_cache.get(code)
    if names is None:
        names, stack = [], [code]
        while stack:
            c = stack.pop()
            names += c.co_names
            stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
        names = _global_names_cache[code] = tuple(dict.fromkeys(names))
    return names


JIT: list = [None]   # `jitad.jit`, set by jitad.api (which imports this module)


def _is_array(v):
    """A NumPy array or `jitad.numpy.Array` (what compiled code returns), not a masked
    array or matrix (their meaning is not an array's)."""
    return isinstance(v, np.ndarray) and not isinstance(v, (np.ma.MaskedArray, np.matrix))


class _Reads:
    """Walks a function and what it reads; `parts` becomes the key, `arrays` the arrays read
    (cells, defaults, globals), in a fixed order."""

    def __init__(self):
        self.parts, self.arrays, self.seen = [], [], set()

    def value(self, v, depth, by_identity=False):
        t = type(v)
        if t in _PLAIN or isinstance(v, _PLAIN):
            self.parts.append((t, repr(v)) if t is float or isinstance(v, np.floating) else (t, v))
        elif _is_array(v) and v.dtype == np.bool_ and v.size <= 4096:
            # a boolean mask decides shapes (x[mask]): keyed by its value, a constant of the trace
            self.parts.append(("mask", v.shape, v.tobytes()))
        elif _is_array(v):
            self.arrays.append(v)
            self.parts.append(_Id(v) if by_identity else ("array", v.dtype.str, v.shape))
        elif t in (tuple, list) and len(v) <= 64 and depth > 0:
            self.parts.append((t, len(v)))
            for x in v:
                self.value(x, depth - 1, by_identity)
        elif t is dict and len(v) <= 64 and depth > 0:
            self.parts.append((dict, tuple(map(repr, v))))
            for x in v.values():
                self.value(x, depth - 1, by_identity)
        elif callable(v) and depth > 0:
            self.function(v, depth - 1)
        else:
            self.parts.append(_Id(v))

    def function(self, fn, depth):
        if id(fn) in self.seen:
            self.parts.append(("seen", _Id(fn)))
            return
        self.seen.add(id(fn))
        if isinstance(fn, functools.partial):
            self.parts.append(functools.partial)
            self.function(fn.func, depth)
            self.value(fn.args, depth)
            self.value(fn.keywords, depth)
            return
        if isinstance(fn, types.MethodType):   # its object's attributes are read like a closure
            self.parts.append(("method", _Id(fn.__self__)))
            attrs = getattr(fn.__self__, "__dict__", None)
            if type(attrs) is dict:
                self.value(attrs, depth)
            fn = fn.__func__
        inner = getattr(fn, "fn", None) if isinstance(fn, Concrete) else None
        if inner is not None:
            self.parts.append(fn.spec)
            self.function(inner, depth)
            return
        if not isinstance(fn, types.FunctionType) or fn.__code__.co_filename.startswith(_PKG):
            self.parts.append(_Id(fn))
            return
        code = fn.__code__
        self.parts.append(code)
        for cell in fn.__closure__ or ():
            try:
                contents = cell.cell_contents
            except ValueError:
                contents = cell
            self.value(contents, depth)
        self.value(fn.__defaults__, depth)
        if fn.__kwdefaults__:
            self.value(fn.__kwdefaults__, depth)
        g = fn.__globals__
        for name in _present_globals(code, g):
            v = g.get(name, _Id)
            if isinstance(v, (types.ModuleType, type)):
                self.parts.append(_Id(v))
            else:
                self.value(v, depth)


_present_cache = {}


def _present_globals(code, g):
    """The names `code` reads that are globals of `g` (cached while `g` keeps its size)."""
    found = _present_cache.get((code, id(g)))
    if found is None or found[0] != len(g):
        found = _present_cache[(code, id(g))] = (len(g), tuple(n for n in _global_names(code) if n in g))
    return found[1]


def function_key(fn):
    """`(key, arrays)`: what `fn` is (its code and every Python value it reads, to a small
    depth: a fresh closure of the same code over the same values has the same key; arrays
    by dtype and shape) and the arrays it reads, in a fixed order."""
    reads = _Reads()
    reads.function(fn, 4)
    return tuple(reads.parts), reads.arrays


# -- the arguments --------------------------------------------------------------------------

def _has_arrays(x):
    leaves = _leaves_or_none(x)
    return leaves is not None and any(isinstance(v, (np.ndarray, Tree, Staged)) or is_device_array(v)
                                      for v in leaves)


def _leaves_or_none(x):
    try:
        return flatten(x)[0]
    except Exception:   # not a pytree of jitad's: a static argument
        return None


def static_key(x):
    """The cache key of an argument passed as itself: type and value, identity for objects."""
    reads = _Reads()
    reads.value(x, 3, by_identity=True)   # (an array in a keyword argument is a constant of the trace)
    return tuple(reads.parts)


class Static:
    """An argument passed as itself through the staged transformations: a pytree node with
    no leaves (the transformation sees no value), unwrapped before the function sees it."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


register_pytree_node(Static, lambda s: ((), s.value), lambda value, children: Static(value))


# -- paths -----------------------------------------------------------------------------------

class Path:
    """One trace's compiled code (or, past the bound of paths, its program for the NumPy
    interpreter), the decisions it took and where its hidden arguments come from."""

    def __init__(self, program, out_td, guards, hidden, draws, owners, pins):
        self.program, self.out_td, self.guards = program, out_td, guards
        self.decisions = [g.key() for g in guards]
        self.hidden, self.draws, self.owners, self.pins = hidden, draws, owners, pins
        self.compiled = None
        self.prints = None   # whether the program holds a debug.print (found on the first run)

    def pins_hold(self, arrays):
        return all(k < len(arrays) and arrays[k] is a for k, a in self.pins)

    def arguments(self, dyn, arrays, drawn):
        out = list(dyn)
        for _, source in self.hidden:
            kind, what = source
            out.append(arrays[what] if kind == "read" else what if kind == "const" else drawn[what])
        return out

    def run(self, leaves):
        """The path's result on the flat arguments; GuardFailed where a guard fails (its
        `debug.print` output is then dropped: the path that succeeds prints)."""
        if self.compiled is None:
            return unflatten(self.out_td, interpret(self.program, leaves))
        if self.prints is None:
            self.prints = any(n.op == Op.DEBUG_PRINT for g in [self.program.main] + [f.body for f in self.program.funs]
                              for n in walk(g))
        if not self.prints:
            return self.compiled.run(leaves)
        with debug_output.held() as lines:
            out = self.compiled.run(leaves)
        debug_output.print_lines(lines)
        return out


class Concrete:
    """A transformation of `fn` with autograd's meaning when called from Python; see the module."""

    def __init__(self, fn, name, body, make_inline, diff_args, spec):
        self.fn, self.name, self.body, self.make_inline = fn, name, body, make_inline
        self._last = None   # the path last run
        self._diff = {}   # n_args -> diff_args(n_args)
        self._inline = None   # the jit of the transformation, inlined where called inside a trace
        self.diff_args = diff_args   # n_args -> the positions differentiated (never static)
        self.spec = spec   # what the transformation is (name and options): part of the cache key
        functools.update_wrapper(self, fn, updated=())

    def _by_jit(self, args, kwargs, static):
        """The call compiled by jit's rule (no values in the trace), the arguments that are
        not arrays bound as constants of the traced function."""
        if self._inline is None:
            self._inline = self.make_inline()
        if not static:
            return self._inline(*args, **kwargs)
        inline, fixed = self._inline, {i: args[i] for i in static}

        def bound(*dynamic):
            rest = iter(dynamic)
            return inline(*[fixed[i] if i in fixed else next(rest) for i in range(len(args))], **kwargs)
        return JIT[0](bound)(*[a for i, a in enumerate(args) if i not in fixed])

    def __get__(self, obj, objtype=None):   # a method: bind like a function
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        if current_frame() is not None:
            if self._inline is None:
                self._inline = self.make_inline()
            return self._inline(*args, **kwargs)
        fkey, arrays = function_key(self.fn)
        diff = self._diff.get(len(args))
        if diff is None:
            diff = self._diff[len(args)] = self.diff_args(len(args))
        static = [i for i, a in enumerate(args) if i not in diff and not _is_array(a) and not _has_arrays(a)]
        dynamic = tuple(a for i, a in enumerate(args) if i not in static) if static else args
        leaves, td = flatten(dynamic)
        if any(isinstance(x, Forest) for x in leaves):   # forests: compiled by jit's rule
            return self._by_jit(args, kwargs, static)
        x64 = config.config._values["jax_enable_x64"]   # (code traced under the other setting never serves)
        key = (self.spec, x64, fkey, len(args), tuple(static), tuple(static_key(args[i]) for i in static),
               static_key(kwargs) if kwargs else None, td,
               tuple([(x.dtype, x.shape) if _is_array(x) else type(x) for x in leaves]))
        try:
            paths = _ENTRIES.get(key)
        except TypeError:
            check_hashable(td)   # a registered class's unhashable aux_data: named by its class
            raise ArgumentError(f"{self.name}: an argument could not be keyed; pass numbers, strings, "
                                "arrays, tuples or hashable objects") from None
        if paths is None:
            if config.config.jax_explain_cache_misses:
                _explain_new_key(self.name, args, static, leaves)
            paths = _ENTRIES[key] = []
            while len(_ENTRIES) > max(MAX_KEYS, 1):
                _ENTRIES.popitem(last=False)
        else:
            _ENTRIES.move_to_end(key)

        def rebuild(dyn):
            it = iter(dyn)
            return tuple(Static(args[i]) if i in static else next(it) for i in range(len(args)))
        out = self._dispatch(paths, leaves, td, rebuild, arrays, kwargs,
                             (self.spec, x64, fkey, len(args), tuple(static), td))
        return out if x64 else tree_map(narrowed, out)   # JAX's 32-bit results where x64 is off

    def _latest(self, what):
        if self._last is None:
            raise AttributeError(f"`{what}` is available after the first compiled call")
        return self._last

    @property
    def ir(self):
        """The staged graph of the path last run, as text."""
        return str(self._latest("ir").program)

    @property
    def llvm_ir(self):
        """The optimized LLVM IR of the path last run."""
        return self._latest("llvm_ir").compiled.llvm_ir

    @property
    def compile_seconds(self):
        """Seconds spent tracing and compiling the path last run."""
        return self._latest("compile_seconds").compile_report.total

    def compile_report(self):
        """The compile time of the path last run, by stage (see `jitad.timing`)."""
        return self._latest("compile_report").compile_report

    def _dispatch(self, paths, leaves, td, rebuild, arrays, kwargs, sig):
        tried, failed = set(), None
        while True:
            path = _next_path(paths, tried, failed, arrays)
            if path is None:
                return self._trace(paths, leaves, td, rebuild, arrays, kwargs, failed, sig)
            tried.add(id(path))
            saved = hostrng.save_states(path.owners) if path.draws else ()
            drawn = [hostrng.draw(*d) for d in path.draws]
            try:
                out = path.run(path.arguments(leaves, arrays, drawn))
            except GuardFailed as e:
                hostrng.restore_states(saved)
                failed = (path, e.index)
                continue
            if paths[0] is not path:
                paths.remove(path)
                paths.insert(0, path)
            self._last = path
            return out

    def _trace(self, paths, leaves, td, rebuild, arrays, kwargs, failed, sig):
        """A new path: trace with the call's values (retracing with a decision flipped where
        compiled code disagrees with the trace's NumPy values by an ulp at a threshold).
        First the function alone: when its program is one traced before (another static
        value, the same program), the compiled code of that one serves."""
        if failed is not None and config.config.jax_explain_cache_misses:
            path, k = failed
            g = path.guards[k]
            warnings.warn(f"{self.name}: tracing again: the decision at {g.site} ({g.kind} came out "
                          f"{g.value!r} when traced) goes otherwise on this call", JitadWarning, stacklevel=3)
        saved = hostrng.save_states(hostrng.owners_of(self.fn))
        trace = _Tracer(self, leaves, td, rebuild, arrays, kwargs)
        # the function alone only where this signature was traced before (a first trace
        # runs the function once)
        primal = trace.primal(sig) if sig in _SIGS else None
        _SIGS[sig] = True
        while len(_SIGS) > MAX_KEYS:
            _SIGS.popitem(last=False)
        if primal is not None and primal.template is not None:
            path, drawn = primal.path()
            try:
                out = path.run(path.arguments(leaves, arrays, drawn))
            except GuardFailed:
                pass   # (an ulp at a threshold: trace in full below)
            else:
                if self._over_bound(paths, path) is None:
                    paths.insert(0, path)
                self._last = path
                return out
        hostrng.restore_states(saved)   # the full trace draws the same numbers again
        overrides = {}
        for attempt in range(4):
            path, drawn = trace.full(paths, overrides)
            try:
                out = path.run(path.arguments(leaves, arrays, drawn))
            except GuardFailed as e:   # the compiled code's value is on the other side of a threshold
                g = path.guards[e.index]
                hostrng.restore_states(saved)
                if path in paths:
                    paths.remove(path)
                if g.kind != "bool" or e.index in overrides:   # the trace's own decisions, interpreted
                    path, drawn = trace.full(paths, overrides, compile=False)
                    return path.run(path.arguments(leaves, arrays, drawn))
                overrides[e.index] = not g.value
                continue
            if primal is not None and not overrides:
                primal.remember(path)
            self._last = path
            return out
        raise AssertionError("unreachable")

    def _over_bound(self, paths, path):
        """The site of the first decision of `path` with MAX_PATHS_PER_SITE other outcomes
        already compiled (warned once per site), or None."""
        for k, g in enumerate(path.guards):
            same = [p for p in paths if p.decisions[:k] == path.decisions[:k] and len(p.decisions) > k]
            outcomes = {p.decisions[k] for p in same}
            programs = {id(p.compiled) for p in same if p.compiled is not None}   # (outcomes may share one)
            if len(programs) >= MAX_PATHS_PER_SITE and path.decisions[k] not in outcomes \
                    and (path.compiled is None or id(path.compiled) not in programs):
                if (self.spec, g.site) not in _OVER:
                    _OVER.add((self.spec, g.site))
                    warnings.warn(
                        f"{self.name}: the Python decision at {g.site} has taken {len(outcomes)} different "
                        f"outcomes, {len(programs)} compiled programs; new outcomes now run without compiling (the NumPy "
                        "interpreter, autograd's speed). To stay compiled, stage the decision "
                        "(`jitad.IF`/`jitad.WHILE`, `jitad.lax.cond`) or pass that value as a static "
                        "argument (`jitad.jit(..., static_argnums=...)`).", JitadWarning, stacklevel=4)
                return g.site
        return None


class _Tracer:
    """The traces of one call: the function alone (`primal`), or the whole transformation
    (`full`), each with the call's values."""

    def __init__(self, owner, leaves, td, rebuild, arrays, kwargs):
        self.owner, self.leaves, self.td, self.rebuild = owner, leaves, td, rebuild
        self.arrays, self.kwargs = arrays, kwargs
        self.types = [arg_type(x) for x in leaves]
        self.calls = []   # (hidden arguments, guards) when the function returned, per call of it

    def _values(self, overrides):
        c = ConcreteTrace(overrides)
        for k, a in enumerate(self.arrays):
            c.sources.setdefault(id(a), (k, a))
        return c

    def _function(self, c):
        fn, kwargs, calls = self.owner.fn, self.kwargs, self.calls

        def unwrapped(*a, **k):   # the static arguments reach `fn` as themselves
            out = fn(*[x.value if type(x) is Static else x for x in a], **kwargs, **k)
            calls.append((len(c.hidden), len(c.guards)))
            return out
        return unwrapped

    def _run(self, c, staged):
        recorder = hostrng.Recorder(self.owner.fn, lambda value, k: _draw_argument(c, value, k))
        with concrete.active(c), recorder.recording(), _print_at_trace(self.owner.name), timing.stage("trace"):
            program, out_td, _ = trace_program(staged, tuple(self.leaves), self.td, self.types)
        pins = [(k, a) for k, a in enumerate(self.arrays)] if c.unmatched else []
        return Path(program, out_td, c.guards, c.hidden, recorder.draws, recorder.owners, pins)

    def full(self, paths, overrides, compile=True):
        """The transformation traced and compiled (or, past the bound, left to the
        interpreter): `(path, the host draws made while tracing)`."""
        c = self._values(overrides)
        fn, body, rebuild = self._function(c), self.owner.body, self.rebuild
        del self.calls[:]
        with timing.recording() as report:
            path = self._run(c, lambda *dyn: body(fn, *rebuild(dyn)))
            site = self.owner._over_bound(paths, path)
            if compile and site is None:
                in_types = self.types + [var.type for var, _ in c.hidden]
                path.compiled = compile_program(path.program, path.out_td, in_types,
                                                self.owner.name.replace(".", "_"), _no_fallback)
        path.compile_report = report
        if compile and site is None:
            paths.insert(0, path)
        path.primal_counts = list(self.calls)
        return path, [c.values[var] for var, source in c.hidden if source[0] == "draw"]

    def primal(self, sig):
        """The function alone traced (no transformation, no compile), and the path traced
        before whose function traced to the same program, if any; None where the function
        alone does not trace (a result that is not arrays)."""
        c = self._values({})
        fn, rebuild = self._function(c), self.rebuild
        try:
            path = self._run(c, lambda *dyn: fn(*rebuild(dyn)))
        except Exception:
            return None
        text = program_key_text(path.program)
        key = (sig, text, tuple(var.type for var, _ in c.hidden), repr(path.out_td))
        return _Primal(key, path, c, _BY_PRIMAL.get(key))


class _Primal:
    """The function's own trace, the key of its program, and the path it led to before."""

    def __init__(self, key, path, values, template):
        self.key, self.primal, self.values, self.template = key, path, values, template

    def path(self):
        """A path running the template's compiled code with this trace's hidden arguments."""
        t, p = self.template, self.primal
        n = len(p.hidden)
        path = Path(t.program, t.out_td, p.guards, p.hidden + t.hidden[n:], p.draws, p.owners, p.pins)
        path.compiled, path.compile_report = t.compiled, t.compile_report
        return path, [self.values.values[var] for var, source in p.hidden if source[0] == "draw"]

    def remember(self, path):
        """Keep `path` for later calls whose function traces to the same program: where the
        function ran once in it, with the same hidden arguments and guards as alone."""
        p = self.primal
        if path.compiled is None or path.primal_counts != [(len(p.hidden), len(p.guards))] \
                or any(source[0] != "const" for _, source in path.hidden[len(p.hidden):]):
            return
        _BY_PRIMAL[self.key] = path
        while len(_BY_PRIMAL) > MAX_KEYS:
            _BY_PRIMAL.popitem(last=False)


@contextlib.contextmanager
def _print_at_trace(name):
    """While tracing: `print` prints, and warns (once per trace) that it runs when the
    function is traced, not at every call."""
    original, warned = builtins.print, []

    def traced_print(*args, **kwargs):
        if not warned:
            warned.append(True)
            warnings.warn(f"{name}: print() runs when jitad traces the function (its first call, and each "
                          "new path), not at every call as under autograd; the compiled code reuses the "
                          "trace. Use jitad.debug.print(fmt, *values) to print at every call.",
                          JitadWarning, stacklevel=2)
        return original(*args, **kwargs)
    builtins.print = traced_print
    try:
        yield
    finally:
        builtins.print = original


def _explain_new_key(name, args, static, leaves):
    statics = ", ".join(f"argument {i} = {args[i]!r}" for i in static) or "none"
    shapes = ", ".join(f"{getattr(x, 'dtype', type(x).__name__)}{list(np.shape(x))}" for x in leaves)
    warnings.warn(f"{name}: tracing for a new key: the function's code or a value it reads (closure, "
                  f"globals, defaults), the static arguments ({statics}) or the argument types ({shapes}) "
                  "are new", JitadWarning, stacklevel=3)


def _no_fallback(*args):
    raise AssertionError("jitad internal error: a path's entry refused its arguments")


def _draw_argument(c, value, index):
    """A host draw made while tracing, as a hidden argument (None: it stays a constant)."""
    if concrete.frame_values() is not c:
        return None
    if isinstance(value, (float, int, np.floating, np.integer, np.bool_)) and not isinstance(value, bool):
        value = np.asarray(value)
    if not isinstance(value, np.ndarray):
        return None
    try:
        t = arg_type(value if value.ndim else value[()])
    except ArgumentError:
        return None
    return Staged(c.hidden_param(value, ("draw", index), t))


def _next_path(paths, tried, failed, arrays):
    """The path to try next: after `failed` (a path and the index of its failed guard), one
    that took the same decisions before it and another there; most recently run first."""
    for p in paths:
        if id(p) in tried or not p.pins_hold(arrays):
            continue
        if failed is None:
            return p
        f, k = failed
        if p.decisions[:k] == f.decisions[:k] and len(p.decisions) > k and p.decisions[k] != f.decisions[k]:
            return p
    return None

