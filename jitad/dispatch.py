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
- draws the host's random numbers at each call (`jitad.hostrng.Recorder`);
- runs a new path's program through the NumPy interpreter first and compiles it once that
  has cost about what the compile will (`Code`: tiered execution; `jitad_tiering` forces a tier).
Called inside a trace (`jit`, `vmap`, another transformation), it is the staged
transformation: JAX's rule, a Python decision on a staged value is a StagingError.
See docs/grad-semantics.md.
"""
import builtins
import contextlib
import dis
import functools
import gc
import operator
import threading
import time
import types
import warnings
import weakref
from collections import OrderedDict

import numpy as np

from . import config, hostrng, timing
from .errors import ArgumentError, JitadError, JitadWarning, env_int
from .ir.float_checks import error_class
from .ir.interpret import Interpreter, interpret
from .ir.types import NUMPY, TreeType, is_device_array
from .ir.graph import walk
from .ir.ops import Op
from .ir.printer import program_key_text
from .lower import debug as debug_output
from .lower.compile import GuardFailed, clean_up, compile_budget, compile_program, count_nodes, first_tier, \
    note_compile, result_array_class
from .dtypes import narrowed
from .pytree import LEAF, TreeDef, check_hashable, flatten, register_pytree_node, tree_map, unflatten
from .forest import Forest, Tree
from .staging import Staged, arg_type, current_frame, trace_program, concrete
from .staging.complex import is_complex, split as split_complex
from .staging.concrete import GUARD_PREFIX, ConcreteTrace, SymInt, print_hold, source_view

MAX_PATHS_PER_SITE = env_int("JITAD_MAX_PATHS_PER_SITE", 16, 1)
MAX_KEYS = env_int("JITAD_MAX_PATH_KEYS", 256, 1)   # (each key's paths hold the array constants they met)
PIN_COPY_SIZE = 1 << 16   # a path pins a read array up to this many elements by its values, a larger one by identity
# (transformation, function, arguments) -> its paths, most recently run first; shared by
# every `grad(f)` object, so that a fresh one of the same function finds the compiled code
_ENTRIES = OrderedDict()
_OVER = set()   # (transformation, decision site) past MAX_PATHS_PER_SITE (warned once)
# the program of the function alone (and the transformation's signature) -> a path traced
# from it: another static value that traces to the same program reuses its compiled code
_BY_PRIMAL = OrderedDict()
_SIGS = OrderedDict()   # the signatures traced so far (see `Concrete._trace`)
# keys (ints masked) whose function used a symbolic int as a plain int: their ints are keyed by value
_CONCRETE_INTS = OrderedDict()
_SYMBOL = ("symbolic int",)   # the key part of an int traced as a symbol
# a function's signature (`_Call.sig`) -> what its traces noted for the next ones (`ConcreteTrace.memo`:
# a function deciding on an inner gradient's value is traced as it is, without the deferred trace first)
_MEMOS = OrderedDict()


def _forget(name, value):
    """After `jitad_tiering`, `jax_debug_nans` or `jax_debug_infs` changes: every path is traced
    again, so that it runs as the setting says (the float checks are compiled into the code)."""
    if name in ("jitad_tiering", "jax_debug_nans", "jax_debug_infs"):
        for paths in _ENTRIES.values():
            paths.clear()   # (a gradient object's remembered list too)
        for table in (_ENTRIES, _BY_PRIMAL, _SIGS, _CONCRETE_INTS, _OVER, _MEMOS):
            table.clear()


config.config.on_update(_forget)
_PKG = __file__.rsplit("/", 1)[0] + "/"
# (concrete, args, kwargs) -> the call's result, or NotImplemented: `jitad.extend` installs it once a
# user registers a vector space (autograd's `VSpace.register`), for `grad` of such values
USER_SPACE_CALL = [None]


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
_EXACT_PLAIN = frozenset((bool, int, float, str, bytes, type(None)))
_global_names_cache = {}


def _global_names(code):
    """The global names `code` and the functions nested in it load (by their instructions,
    not `co_names`, which also holds attribute names), cached by code."""
    names = _global_names_cache.get(code)
    if names is None:
        names, stack = [], [code]
        while stack:
            c = stack.pop()
            names += [i.argval for i in dis.get_instructions(c) if i.opname in _LOADS_GLOBAL]
            stack += [k for k in c.co_consts if isinstance(k, types.CodeType)]
        names = _global_names_cache[code] = tuple(dict.fromkeys(names))
    return names


_LOADS_GLOBAL = frozenset(("LOAD_GLOBAL", "LOAD_NAME"))


JIT: list = [None]   # `jitad.jit`, set by jitad.api (which imports this module)


_NOT_ARRAYS = (np.ma.MaskedArray, np.matrix)


def _is_array(v):
    """A NumPy array or `jitad.numpy.Array` (what compiled code returns), not a masked
    array or matrix (their meaning is not an array's)."""
    return type(v) is np.ndarray or isinstance(v, np.ndarray) and not isinstance(v, _NOT_ARRAYS)


_GENERATORS = (np.random.RandomState, np.random.Generator)
_DATA_DEPTH = 4       # how deep the walk goes into containers (a function's reads start again)
_MAX_FUNCTIONS = 128   # the Python functions one walk keys by what they read; more are keyed by identity


class _Reads:
    """Walks a function and what it reads; `parts` becomes the key, `arrays` the arrays read
    (cells, defaults, globals), in a fixed order. `checks` records what the walk read (see
    `_checks_hold`): while they hold, a walk again would give the same key and arrays."""

    def __init__(self, record=False):
        self.parts, self.arrays, self.seen, self.held = [], [], {}, []
        self.placed = []   # where in `parts` a place is (a function met again, a generator): see `_merge`
        self.generators = []   # the host generators read (`RandomState`, `Generator`), keyed by their place
        self.checks, self.cacheable, self.record = [], record, record
        self.functions_left = _MAX_FUNCTIONS
        self.first = None   # the walk of the walk's first function (`_walk_of`), if it began with one

    def value(self, v, depth, by_identity=False):
        t = type(v)
        if t is types.FunctionType:   # (the kinds met most, by their exact type first)
            if self.functions_left > 0:
                self.function(v, _DATA_DEPTH)
            else:
                self.parts.append(_Id(v))
            return
        if t in _EXACT_PLAIN:
            self.parts.append((t, repr(v)) if t is float else (t, v))
            return
        if t is tuple or t is list:   # (the containers and arrays met most, by their exact type: see below)
            self._sequence(v, t, depth, by_identity)
            return
        if t is np.ndarray:
            self._array(v, by_identity)
            return
        if t is dict and len(v) <= 64 and depth > 0:
            self._dict(v, depth, by_identity)
            return
        if t is SymInt:   # (kept past its trace in something the function reads: its value)
            v, t = v.value, int
        if t is types.ModuleType:
            self.parts.append(_Id(v))
        elif t in _PLAIN or isinstance(v, _PLAIN):
            self.parts.append((t, repr(v)) if t is float or isinstance(v, np.floating) else (t, v))
        elif _is_array(v):
            self._array(v, by_identity)
        elif isinstance(v, _GENERATORS) and not by_identity:
            # its draws are made again at each call on the generator read then (`Path.drawing`):
            # a fresh generator of the same code (a program run again) finds the same paths
            self.placed.append(len(self.parts))
            self.parts.append(("generator", t, len(self.generators)))
            self.generators.append(v)
        elif t is range:   # (immutable: by value, a program run again passes a fresh one)
            self.parts.append((range, v.start, v.stop, v.step))
        elif callable(v) and self.functions_left > 0:
            self.function(v, _DATA_DEPTH)
        elif isinstance(v, TreeDef) and _hashable(v):   # (a pytree's structure, `flatten_func`'s: by value)
            self.parts.append(v)
        else:
            self.parts.append(_Id(v))

    def _array(self, v, by_identity):
        """An array: a boolean mask up to 4096 elements by its value (it decides shapes,
        `x[mask]`: a constant of the trace), else an argument of the program, keyed by dtype
        and shape (by identity in a static argument)."""
        if v.dtype == np.bool_ and v.size <= 4096:
            self.parts.append(("mask", v.shape, v.tobytes()))
            self.cacheable = False
            return
        self.arrays.append(v)
        self.parts.append(_Id(v) if by_identity else ("array", v.dtype.str, v.shape))
        if self.record:
            self.checks.append((_ARRAY, v, v.dtype, v.shape))

    def _dict(self, v, depth, by_identity):
        """A dict (exact type, up to 64 items): by its keys and its values."""
        self.parts.append((dict, tuple(map(repr, v))))
        if self.record:
            self.checks.append((_DICT, v, tuple(v.items())))
        for x in v.values():
            self.value(x, depth - 1, by_identity)

    def _sequence(self, v, t, depth, by_identity):
        """A tuple or list (exact types): by its items, up to 64 of them, else by identity."""
        if len(v) > 64 or depth <= 0:
            self.parts.append(_Id(v))
            return
        self.parts.append((t, len(v)))
        if t is list and self.record:
            self.checks.append((_LIST, v, tuple(v)))
        for x in v:
            self.value(x, depth - 1, by_identity)

    def function(self, fn, depth):
        if not self.seen and type(fn) is types.FunctionType and not _own_plain(fn):   # (a walk's first)
            self.seen[id(fn)] = 0
            self.first = _walk_of(fn, depth)
            self._merge(fn, self.first)
            return
        seen = self.seen.get(id(fn))
        if seen is not None:   # (met before in this walk: by its place in it, a fresh copy keys alike)
            self.placed.append(len(self.parts))
            self.parts.append(("seen", seen))
            return
        self.seen[id(fn)] = len(self.seen)
        self.held.append(fn)   # (its id stays its own while the walk runs)
        if type(fn) is types.FunctionType:   # (the kind met most: none of the wrappers below)
            if _own_plain(fn):
                self.parts.append(_Id(fn))
            else:
                self._nested_function(fn, depth)
            return
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
        if isinstance(getattr(type(fn), "key_parts", None), property):   # (`jitad.extend.primitive`)
            parts = fn.key_parts
            self.parts.append(type(fn))
            if self.record:
                self.checks.append((_PARTS, fn, parts))
            self.value(parts, depth + 1)
            return
        if not isinstance(fn, types.FunctionType) or _own_plain(fn):
            self.parts.append(_Id(fn))
        elif id(fn) in self.seen:
            self._nested_function(fn, depth)
        else:   # (a method's function, its place the method's)
            self.functions_left -= 1
            self._python_function(fn, depth)

    def _nested_function(self, fn, depth):
        """A function met inside the walk: the walk kept from a walk that began with it
        (`_walk_of`), where walking it here would give the same (it meets none of the
        functions this walk met before, and the bound on functions is not reached in it);
        else walked here."""
        walk = _kept_walk(fn, depth)
        if walk is not None and walk.used < self.functions_left - 1 and not _meets(walk, self.seen, fn):
            self._merge(fn, walk)
        else:
            self.functions_left -= 1
            self._python_function(fn, depth)

    def _merge(self, fn, walk):
        """`fn`'s own walk added as walking it here would add it: the places of the functions
        it met and of the generators it read counted on from this walk's."""
        base, first, at = self.seen[id(fn)], len(self.generators), len(self.parts)
        parts = walk.parts
        if walk.placed and (base or first):
            parts = list(parts)
            for k in walk.placed:
                p = parts[k]
                parts[k] = ("seen", p[1] + base) if p[0] == "seen" else ("generator", p[1], p[2] + first)
        if walk.placed:
            self.placed += [at + k for k in walk.placed]
        for key, place in walk.seen.items():
            self.seen[key] = place + base
        self.held.append(fn)
        self.parts += parts
        self.arrays += walk.arrays
        self.generators += walk.generators
        if self.record:
            self.checks += walk.checks
            self.checks.append((_FUNCTION, fn, walk.own))
        self.cacheable = self.cacheable and walk.cacheable
        self.functions_left -= walk.used + 1

    def _python_function(self, fn, depth):
        code, cells, contents = fn.__code__, fn.__closure__ or (), []
        canon = _canonical(code)
        self.parts.append(canon)
        for cell in cells:
            try:
                v = cell.cell_contents
            except ValueError:
                v = cell
            contents.append(v)
            self.value(v, depth)
        self.value(fn.__defaults__, depth)
        if fn.__kwdefaults__:
            self.value(fn.__kwdefaults__, depth)
        g = fn.__globals__
        names = _global_names(canon)
        values = tuple([g.get(name, _Id) for name in names])   # (`_Id` itself: a name `g` lacks, a builtin)
        for v in values:
            if v is _Id or isinstance(v, (types.ModuleType, type)):
                self.parts.append(_Id(v))
            else:
                self.value(v, depth)
        if self.record:
            self.checks.append((_FUNCTION, fn, (code, fn.__defaults__, fn.__kwdefaults__, cells, contents, g,
                                                names, values)))


_ARRAY, _LIST, _DICT, _FUNCTION, _PARTS = range(5)
_WALKED = OrderedDict()   # id(fn) -> its last own walk (`_Walk`)
_MAX_WALKED = 256


class _Walk:
    """A function's own walk (as the first function of a walk: at place 0, the bound on
    functions not reached in it), kept for the next walks that meet the function while
    what it read holds: its parts, arrays, generators and checks, the functions it met
    (id -> place), how many of them count against the bound (`used`, the function's own
    not counted), where in `parts` a place is (`placed`: a function met again, a generator),
    and the function's own reads (`own`, its check)."""
    __slots__ = ("fn", "depth", "parts", "arrays", "generators", "checks", "cacheable", "used", "seen", "placed",
                 "own")


def _walk_of(fn, depth):
    """`fn`'s own walk: kept from the last walk that began with it while what that read
    holds, else made now and kept (`check_grads`' helpers, `grad(f)(x)` in a loop: fresh
    transformations of one function, or fresh closures over it, walk it once)."""
    walk = _kept_walk(fn, depth)
    if walk is None:
        walk = _new_walk(fn, depth)
        if walk.cacheable and walk.used < _MAX_FUNCTIONS - 1:   # (the bound reached in it: not kept)
            _WALKED[id(fn)] = walk
            while len(_WALKED) > _MAX_WALKED:
                _WALKED.popitem(last=False)
    return walk


def _kept_walk(fn, depth):
    """`fn`'s kept walk, while what it read holds (else None)."""
    walk = _WALKED.get(id(fn))
    if walk is None or walk.fn() is not fn or walk.depth != depth or not _same_function(fn, walk.own) \
            or not _checks_hold(walk.checks):
        return None
    _WALKED.move_to_end(id(fn))
    return walk


def _meets(walk, seen, fn):
    """Whether `walk` (of `fn`) met a function of `seen` other than `fn`."""
    common = walk.seen.keys() & seen.keys()
    return len(common) > 1 or bool(common) and id(fn) not in common


def _new_walk(fn, depth):
    inner = _Reads(record=True)
    inner.functions_left = _MAX_FUNCTIONS - 1
    inner.seen[id(fn)] = 0
    inner.held.append(fn)
    inner._python_function(fn, depth)
    walk = _Walk()
    own = inner.checks.pop()   # (fn's own check, last: kept without fn, which the walk must not hold)
    walk.fn, walk.depth, walk.own = _forgotten_with(fn), depth, own[2]
    walk.parts, walk.arrays, walk.generators, walk.checks = inner.parts, inner.arrays, inner.generators, inner.checks
    walk.cacheable, walk.used, walk.seen = inner.cacheable, _MAX_FUNCTIONS - 1 - inner.functions_left, inner.seen
    walk.placed = inner.placed
    return walk


def _forgotten_with(fn):
    """A weak reference to `fn` whose end drops its walk (which holds what `fn` read)."""
    key = id(fn)

    def forget(ref):
        walk = _WALKED.get(key)
        if walk is not None and walk.fn is ref:
            del _WALKED[key]
    return weakref.ref(fn, forget)


def _hashable(v):
    try:
        hash(v)
    except TypeError:
        return False
    return True


def _own_plain(fn):
    """A function of jitad's own without a closure: the same object means the same thing.
    (One with a closure, `elementwise_grad`'s wrapper of the user's function, is walked:
    a fresh one over the same values finds the same code.)"""
    return fn.__code__.co_filename.startswith(_PKG) and not fn.__closure__


def _checks_hold(checks):
    """Whether every value a walk read (`_Reads.checks`) is still there, the same object
    (an array of the same dtype and shape, a list or dict with the same items)."""
    for c in checks:
        kind, obj = c[0], c[1]
        if kind == _FUNCTION:
            if not _same_function(obj, c[2]):
                return False
        elif kind == _ARRAY:
            if obj.dtype is not c[2] or obj.shape != c[3]:
                return False
        elif kind == _PARTS:
            if not all(a is b for a, b in zip(obj.key_parts, c[2])):
                return False
        elif not _same_items(obj, c[2], kind == _DICT):
            return False
    return True


def _same_function(fn, read):
    """`fn` has the code, defaults, cells' contents and globals' values `read` recorded."""
    code, defaults, kwdefaults, cells, contents, g, names, values = read
    if fn.__code__ is not code or fn.__defaults__ is not defaults or fn.__kwdefaults__ is not kwdefaults:
        return False
    try:
        for cell, v in zip(cells, contents):
            if cell.cell_contents is not v:
                return False
    except ValueError:   # (an emptied cell)
        return False
    for name, v in zip(names, values):
        if g.get(name, _Id) is not v:
            return False
    return True


def _same_items(container, items, is_dict):
    if len(container) != len(items):
        return False
    if is_dict:
        return all(k == k2 and v is v2 for (k, v), (k2, v2) in zip(container.items(), items))
    return all(v is v2 for v, v2 in zip(container, items))


_CODES = {}   # a code object -> the first one met equal to it (`_canonical`)
_MAX_CODES = 4096


def _canonical(code):
    """The first code object met equal to `code`, which keys stand for it: a program run
    again (its text compiled afresh) has code objects equal to the last run's but not the
    same, and a comparison by value walks their bytecode and constants (microseconds, at each
    look-up of a key holding them); the same object compares by identity. The oldest go
    first past `_MAX_CODES` (a key holding one still compares by value)."""
    found = _CODES.get(code)
    if found is None:
        if len(_CODES) >= _MAX_CODES:
            del _CODES[next(iter(_CODES))]
        found = _CODES[code] = code
    return found


def function_key(fn):
    """`(key, arrays)`: what `fn` is (its code and every Python value it reads, to a small
    depth: a fresh closure of the same code over the same values has the same key; arrays
    by dtype and shape) and the arrays it reads, in a fixed order."""
    reads = _Reads()
    reads.function(fn, 4)
    return tuple(reads.parts), reads.arrays


class _Known:
    """What a `Concrete` object found on its last call: its function's key and arrays (valid
    while `_checks_hold(checks)`), and the paths for the arguments' signature `sig`."""
    __slots__ = ("checks", "fkey", "arrays", "generators", "sig", "argkey", "key", "paths", "diff", "static", "sym",
                 "td", "call_sig", "x64")

    def __init__(self, reads, x64):
        self.x64 = x64   # the jax_enable_x64 setting it was made under
        self.checks = reads.checks if reads.cacheable else None
        self.fkey, self.arrays, self.generators = tuple(reads.parts), reads.arrays, reads.generators
        self.sig = self.argkey = self.paths = None

    def remember(self, key, diff, call, paths, argkey):
        """Keep the paths of this call for the next calls with arguments like these: `argkey`
        (the arguments' part of the key), and `sig` where they are arrays and Python scalars
        only (no pytree to flatten)."""
        args = call.args
        self.argkey, self.key, self.paths = argkey, key, paths
        self.sig = None if call.kwargs else _signature(args, diff, call.sym, call.walks)
        if self.sig is not None and len(call.leaves) == len(args) - len(call.static):
            self.diff, self.static, self.sym, self.td, self.call_sig = diff, call.static, call.sym, call.td, call.sig
        else:
            self.sig = None


def _argument_key(args, static, sym, kwargs, td, leaves, walks=None):
    """The arguments' part of the cache key: how many, which are static and their keys (a
    symbolic int by its kind alone), the keyword arguments, the tree and the leaves' types.
    `walks` (a dict), if given, gets the walk that keyed each static Python function, by position."""
    return (len(args), tuple(static), tuple(_SYMBOL if i in sym else static_key(args[i], walks, i) for i in static),
            static_key(kwargs) if kwargs else None, td,
            tuple([(x.dtype, x.shape) if _is_array(x) else type(x) for x in leaves]))


def _signature(args, diff, sym, walks=None):
    """What the cache key holds of `args` when each is an array, a Python scalar or a Python
    function passed as itself (None otherwise): dtypes and shapes, types of the
    differentiated scalars, the values of the static ones (the type alone of an int traced as
    a symbol), a function's kept walk (`vjp(f, x)` again: while what `f` reads holds).
    `walks`: the walks that keyed the functions (`_argument_key`), taken as they are where the
    signature is remembered after the call (the next call's signature checks what they read)."""
    out = []
    for i, a in enumerate(args):
        t = type(a)
        if t is np.ndarray or _is_array(a):
            out.append((a.dtype, a.shape))
        elif t is types.FunctionType and i not in diff:
            walk = _kept_walk(a, _DATA_DEPTH) if walks is None else walks.get(i)
            if walk is None:
                return None
            out.append(walk)
        elif t is not float and t is not int and t is not bool and t is not str and a is not None:
            return None
        elif i in diff:
            out.append(t)
        elif i in sym:
            if t is not int:
                return None
            out.append(int)
        else:
            out.append((t, repr(a) if t is float else a))
    return tuple(out)


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


def static_key(x, walks=None, at=None):
    """The cache key of an argument passed as itself: type and value, identity for objects
    (`walks[at]`: the walk that keyed a Python function, where `walks` is given)."""
    reads = _Reads()
    reads.value(x, 3, by_identity=True)   # (an array in a keyword argument is a constant of the trace)
    if walks is not None and type(x) is types.FunctionType and reads.first is not None:
        walks[at] = reads.first
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

    def __init__(self, program, out_td, guards, hidden, draws, owners, pins, int_guards=()):
        self.program, self.out_td, self.guards = program, out_td, guards
        self.decisions = [g.key() for g in guards]
        self.hidden, self.draws, self.owners, self.pins = hidden, draws, owners, pins
        self.int_guards = int_guards   # (expression of the symbolic ints, value it must have)
        self.int_exact = False   # whether one of them is a plain int use (a value, not a comparison)
        self.slices = [source for _, source in hidden if source[0] == "slice"]
        self.simple = not (pins or int_guards or draws or any(source[0] in ("slice", "int") for _, source in hidden))
        self.code = None   # how the program runs (`Code`); None until the trace is kept
        self.prints = None   # whether the program holds a debug.print (found on the first run)
        self.places = {}   # id of a generator drawn from -> its place among those the function reads
        self.generator_pins = ()   # (place, generator): drawn from where jitad could not record (by identity)

    def find_generators(self, generators, unrecorded):
        """Note where the generators the trace drew from sit among those the function reads
        (`generators`), so that a later call draws from the ones it reads then; a generator
        whose draws were not all recorded, or that sits at two places, pins the path to itself."""
        places = {id(g): k for k, g in reversed(list(enumerate(generators)))}
        twice = {id(g) for k, g in enumerate(generators) if places[id(g)] != k}   # (which name drew is unknown)
        self.places = {id(o): places[id(o)] for o in self.owners if id(o) in places and id(o) not in twice}
        self.generator_pins = tuple((k, g) for k, g in enumerate(generators)
                                    if any(g is o for o in unrecorded) or id(g) in twice and
                                    any(g is o for o in self.owners))
        self.simple = self.simple and not self.generator_pins

    def drawing(self, generators):
        """`(owners, draws)` for a call whose function reads `generators`: the trace's own
        generators replaced by those at their places now."""
        if not self.places:
            return self.owners, self.draws
        places = self.places

        def now(owner):
            k = places.get(id(owner))
            return owner if k is None else generators[k]
        return [now(o) for o in self.owners], [(now(o), *rest) for o, *rest in self.draws]

    @property
    def compiled(self):
        """The compiled code, once the path's `Code` has it (None while interpreted)."""
        return None if self.code is None else self.code.compiled

    def serves(self, arrays, env, generators=()):
        """The values of the path's slices of read arrays on this call (a list), or None where
        the path does not serve the call: an array it pinned changed, a generator it pinned is
        another, a guard on the symbolic ints fails, or a slice has another shape."""
        if self.pins and not all(k < len(arrays) and _pinned(arrays[k], a, copy) for k, a, copy in self.pins):
            return None
        if self.generator_pins and not all(k < len(generators) and generators[k] is g
                                           for k, g in self.generator_pins):
            return None
        if not self.int_guards and not self.slices:
            return ()
        try:
            if not all(expr(env) == value for expr, value in self.int_guards):
                return None
            sliced = [np.asarray(arrays[k][template(env)]) for _, k, template, _ in self.slices]
        except Exception:   # (an index out of range, a division by zero: trace it, and raise there)
            return None
        if any(v.shape != source[3] for v, source in zip(sliced, self.slices)):
            return None
        return sliced

    def arguments(self, dyn, arrays, drawn, sliced=(), env=()):
        if not self.hidden:
            return dyn
        out, sliced = list(dyn), iter(sliced)
        for _, source in self.hidden:
            kind, what = source[:2]
            out.append(arrays[what] if kind == "read" else what if kind == "const" else
                       next(sliced) if kind == "slice" else drawn[what] if kind == "draw" else what(env))
        return out

    def run(self, leaves):
        """The path's result on the flat arguments; GuardFailed where a guard fails (its
        `debug.print` output is then dropped: the path that succeeds prints)."""
        if self.prints is None:
            self.prints = any(n.op == Op.DEBUG_PRINT for g in [self.program.main] + [f.body for f in self.program.funs]
                              for n in walk(g))
        if not self.prints:
            return self.code.run(leaves)
        with debug_output.held() as lines:
            out = self.code.run(leaves)
        debug_output.print_lines(lines)
        return out

    @property
    def compile_report(self):
        """The seconds of the trace, with those of the compile where it came later."""
        return self.trace_report if self.code is None else self.code.report(self.trace_report)


_TIER_LOCK = threading.RLock()   # a program's cleanup and compile change it: one thread at a time


class Code:
    """How one traced program runs (paths with the same program share it). Tiered: its
    first calls run the program through the NumPy interpreter, with nothing to wait for;
    once interpreting has cost about what compiling would (`compile.compile_budget`), it is
    compiled by LLVM and the compiled code runs from then on. `tier`: "auto" (that
    schedule), "compile" (compiled before the first call), "interpret" (never compiled: the
    `jitad_tiering` setting) or "bound" (never compiled: a path past the bound of paths)."""

    def __init__(self, program, out_td, in_types, name, tier):
        self.program, self.out_td, self.in_types, self.tier = program, out_td, in_types, tier
        self.name = name.replace(".", "_")
        self.compiled = self.compile_seconds = None
        self.interpreter = Interpreter(_failed_check) if tier != "compile" else None
        self.budget = compile_budget(program) if tier == "auto" else None
        self.spent, self.calls = 0.0, 0   # interpreted seconds and calls so far
        self.cleaned = False   # whether the cleanup passes ran (`compile.clean_up`)
        self.boxes = None   # per output of the cleaned program, what makes it a result (`_boxer`)
        self.one = out_td == LEAF   # (one result, no tree to build)
        if tier == "compile":
            self.compile()

    def compile(self):
        """The compiled code (compiled now if it is not yet)."""
        with _TIER_LOCK:   # (two threads at the threshold compile once)
            return self._compile()

    def _compile(self):
        if self.compiled is None:
            nodes = count_nodes(self.program) if self.tier == "auto" else 0
            with timing.recording() as report:
                self.compiled = compile_program(self.program, self.out_td, self.in_types, self.name, _no_fallback)
            self.compile_seconds, self.interpreter = report, None
            note_compile(nodes, report.total)
        return self.compiled

    def report(self, trace_report):
        """`trace_report` with the seconds of a compile that came after the trace added."""
        if self.compile_seconds is None:
            return trace_report
        merged = _merged(trace_report, self.compile_seconds)
        if self.tier == "compile":   # compiled within the trace's recording: its total has the compile
            merged.total = trace_report.total
        return merged

    def run(self, leaves):
        """The result pytree of one call (GuardFailed where a guard of the path fails)."""
        if self.compiled is not None:
            return self.compiled.run(leaves)
        if self.budget is not None and self.calls and self.spent >= self.budget:
            return self.compile().run(leaves)
        start = time.perf_counter()
        if not self.cleaned and (self.calls or self.tier != "bound"):
            # (about one call's cost, each call after a half to four fifths less; a path past the
            # bound, one outcome of many, pays it when called again)
            with _TIER_LOCK:
                if not self.cleaned:
                    clean_up(self.program)
                    self.cleaned, self.interpreter = True, Interpreter(_failed_check)
        collecting = gc.isenabled()   # (held off: its values die with the call, a collection would
        gc.disable()                   # only walk the live heap)
        try:
            flat = interpret(self.program, leaves, self.interpreter)
        except _CheckFailed as e:
            if self.tier in ("interpret", "bound"):
                raise error_class(e.message)(e.message) from None
            return self.compile().run(leaves)   # (the compiled code's own error, with its line)
        except (GuardFailed, JitadError):
            raise
        except Exception:   # (NumPy's error where compiled code has a meaning: the compiled code's)
            if self.tier != "auto":
                raise
            return self.compile().run(leaves)
        finally:
            if collecting:
                gc.enable()
        self.spent += time.perf_counter() - start
        self.calls += 1
        boxes = self.boxes
        if boxes is None:
            boxes = self.boxes = [_boxer(var.type) for var in self.program.main.outputs]
        if self.one:
            return boxes[0](flat[0])
        return unflatten(self.out_td, [box(v) for box, v in zip(boxes, flat)])


class _CheckFailed(Exception):
    """A runtime check (not a guard) failed in an interpreted run."""

    def __init__(self, message):
        super().__init__(message)
        self.message = message


def _failed_check(message):
    """What a failed `check` raises in an interpreted run: GuardFailed for a guard."""
    if message.startswith(GUARD_PREFIX):
        raise GuardFailed(int(message[len(GUARD_PREFIX):]))
    raise _CheckFailed(message)


def _merged(first, then):
    """One CompileReport of two recordings' seconds, stage by stage."""
    out = timing.CompileReport()
    for name in out:
        out[name] = first.get(name, 0.0) + then.get(name, 0.0)
    out.total, out.cpu, out.cache = first.total + then.total, first.cpu + then.cpu, then.cache
    return out


def _boxer(t):
    """The function making an interpreted result of type `t` what the compiled entry returns:
    a Python bool, int or float (an np.float32 for f32), or a fresh array of the results'
    ndarray class (found once per output of a program)."""
    if isinstance(t, TreeType) or not hasattr(t, "dtype"):
        return _same
    if t.shape:
        dtype, cls = NUMPY[t.dtype], result_array_class()
        return lambda value: np.array(value, dtype=dtype, copy=True).view(cls)
    return np.float32 if t.dtype == "f32" else {"f64": float, "i64": int, "bool": bool}[t.dtype]


def _same(value):
    return value


class Concrete:
    """A transformation of `fn` with autograd's meaning when called from Python; see the module."""

    def __init__(self, fn, name, body, make_inline, diff_args, spec):
        self.fn, self.name, self.body, self.make_inline = fn, name, body, make_inline
        self._last = None   # the path last run
        self._diff = {}   # n_args -> diff_args(n_args)
        self._inline = None   # the jit of the transformation, inlined where called inside a trace
        self._known = None   # what the last call found (see `_Known`)
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
        if USER_SPACE_CALL[0] is not None:
            out = USER_SPACE_CALL[0](self, args, kwargs)
            if out is not NotImplemented:
                return out
        if config.config._values["jax_enable_x64"]:
            out = self._run(args, kwargs, True)
        else:
            out = tree_map(narrowed, self._run(args, kwargs, False))   # JAX's 32-bit results
        return tree_map(_as_half, out) if _half_precision(args) else out

    def _run(self, args, kwargs, x64):
        known = self._known
        if known is None or known.x64 is not x64 or known.checks is None or not _checks_hold(known.checks):
            reads = _Reads(record=known is not None)   # (from the second call on: a fresh closure's
            reads.function(self.fn, 4)                 # first and only call records nothing)
            known = self._known = _Known(reads, x64)   # (code traced under the other x64 setting never serves)
        elif known.sig is not None and not kwargs and _signature(args, known.diff, known.sym) == known.sig:
            # the same function object, reading the same values, with arguments like the last call's
            leaves = [a for i, a in enumerate(args) if i not in known.static] if known.static else args
            paths, failed = known.paths, None
            if paths and paths[0].simple:   # (no guard on ints, no slice, pin or draw to prepare)
                path = paths[0]
                try:
                    out = path.run(path.arguments(leaves, known.arrays, ()))
                except GuardFailed as e:
                    failed = (path, e.index)
                else:
                    self._last = path
                    return out
            call = _Call(args, known.static, known.sym, leaves, known.td, known.arrays, kwargs, known.call_sig,
                         known.generators)
            return self._finish(known.key, paths, call, known.diff, failed=failed)
        return self._call(known, args, kwargs)

    def _call(self, known, args, kwargs):
        """A call keyed in full: the function (`known`), the arguments' types, static values."""
        diff = self._diff.get(len(args))
        if diff is None:
            diff = self._diff[len(args)] = self.diff_args(len(args))
        static = [i for i, a in enumerate(args) if i not in diff and not _is_array(a) and not _has_arrays(a)]
        dynamic = tuple(a for i, a in enumerate(args) if i not in static) if static else args
        leaves, td = flatten(dynamic)
        if any(map(is_complex, leaves)):   # complex arguments enter as pairs of real parts
            return self._call(known, split_complex(args), kwargs)
        if any(isinstance(x, Forest) for x in leaves):   # forests: compiled by jit's rule
            return self._by_jit(args, kwargs, static)
        sym = [i for i in static if type(args[i]) is int]   # ints traced as symbols (see `SymInt`)
        walks = {}   # (the walks that keyed the static functions: see `_signature`)
        argkey = _argument_key(args, static, sym, kwargs, td, leaves, walks)
        if known.argkey == argkey:   # (the arguments of the last call, but pytrees: its paths)
            key, paths = known.key, known.paths
        else:
            key = (self.spec, known.x64, known.fkey) + argkey
            if sym and key in _CONCRETE_INTS:   # this function uses them as plain ints: keyed by value
                sym = []
                argkey = _argument_key(args, static, sym, kwargs, td, leaves, walks)
                key = (self.spec, known.x64, known.fkey) + argkey
            paths = self._paths(key, args, static, leaves)
        call = _Call(args, static, sym, leaves, td, known.arrays, kwargs,
                     (self.spec, known.x64, known.fkey, len(args), tuple(static), td), known.generators)
        call.walks = walks
        return self._finish(key, paths, call, diff, argkey)

    def _finish(self, key, paths, call, diff, argkey=None, failed=None):
        """Dispatch the call (`failed`: the first path's guard that failed already); remember
        what it found for the next call of this object."""
        try:
            out = self._dispatch(paths, call, failed)
        except _SymbolsFailed:   # (the ints are keyed by value from now on)
            _remember(_CONCRETE_INTS, key)
            self._known = None
            return self._run(call.args, call.kwargs, config.config._values["jax_enable_x64"])
        known = self._known
        if known is None:
            return out
        if call.exact and sum(1 for p in paths if p.int_exact) > MAX_PATHS_PER_SITE:
            _remember(_CONCRETE_INTS, key)   # (too many plain-int values seen: keyed by value)
            known.sig = known.argkey = None
        elif argkey is not None and known.checks is not None:
            known.remember(key, diff, call, paths, argkey)
        return out

    def _paths(self, key, args, static, leaves):
        """The paths under `key` (a new, empty list for a new key)."""
        try:
            paths = _ENTRIES.get(key)
        except TypeError:
            check_hashable(key[6])   # (the treedef) a registered class's unhashable aux_data: named by its class
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
        return paths

    def _latest(self, what):
        if self._last is None:
            raise AttributeError(f"`{what}` is available after the first compiled call")
        return self._last

    @property
    def ir(self):
        """The staged graph of the path last run, as text, after the compiler's passes
        (compiled now if it is interpreted still, as `llvm_ir`)."""
        path = self._latest("ir")
        path.code.compile()
        return str(path.program)

    @property
    def llvm_ir(self):
        """The optimized LLVM IR of the path last run (compiled now if it is interpreted still)."""
        return self._latest("llvm_ir").code.compile().llvm_ir

    @property
    def compile_seconds(self):
        """Seconds spent tracing and compiling the path last run."""
        return self._latest("compile_seconds").compile_report.total

    def compile_report(self):
        """The compile time of the path last run, by stage (see `jitad.timing`)."""
        return self._latest("compile_report").compile_report

    def _dispatch(self, paths, call, failed=None):
        tried = [failed[0]] if failed else []
        while True:
            if not tried and paths and paths[0].simple:   # (the usual case: no search)
                path, sliced = paths[0], ()
            else:
                path, sliced = _next_path(paths, tried, failed, call)
            if path is None:
                return self._trace(paths, call, failed)
            tried.append(path)
            saved = drawn = ()
            if path.draws:
                owners, draws = path.drawing(call.generators)
                saved = hostrng.save_states(owners)
                drawn = [hostrng.draw(*d) for d in draws]
            try:
                out = path.run(path.arguments(call.leaves, call.arrays, drawn, sliced, call.env))
            except GuardFailed as e:
                hostrng.restore_states(saved)
                failed = (path, e.index)
                continue
            if paths[0] is not path:
                paths.remove(path)
                paths.insert(0, path)
            self._last = path
            return out

    def _trace(self, paths, call, failed):
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
        trace = _Tracer(self, call)
        # the function alone only where this signature was traced before (a first trace
        # runs the function once)
        seen = call.sig in _SIGS
        reads_before = self._reads_of(call) if seen else None   # (what a run alone might rebind)
        primal = trace.primal(call.sig) if seen else None
        _remember(_SIGS, call.sig)
        if primal is not None and primal.template is not None:
            path, drawn = primal.path()
            sliced = path.serves(call.arrays, call.env, call.generators)
            try:
                out = path.run(path.arguments(call.leaves, call.arrays, drawn, sliced, call.env))
            except GuardFailed:
                pass   # (an ulp at a threshold: trace in full below)
            else:
                if self._over_bound(paths, path) is None:
                    paths.insert(0, path)
                self._last = path
                return out
        hostrng.restore_states(saved)   # the full trace draws the same numbers again
        if primal is not None and self._reads_of(call) != reads_before:
            # the function, run alone, rebound what it reads (a global, a closure cell): the
            # full trace sees the new values, so its path is kept neither under this call's key
            # nor as the program of what the function traced alone
            paths, primal = [], None
        return self._trace_full(paths, call, trace, primal, saved, failed)

    def _reads_of(self, call):
        """What the function and the functions passed to it as static arguments read (their keys)."""
        fns = [self.fn] + [call.args[i] for i in call.static if isinstance(call.args[i], types.FunctionType)]
        return [function_key(fn)[0] for fn in fns]

    def _trace_full(self, paths, call, trace, primal, saved, failed=None):
        overrides = {}
        for attempt in range(4):
            path, drawn = trace.full(paths, overrides, saved)
            sliced = path.serves(call.arrays, call.env, call.generators)
            try:
                if attempt == 0 and _same_decisions_compiled(path, failed):
                    raise GuardFailed(failed[1])   # (the interpreter agrees with the trace; the compiled code did not)
                out = path.run(path.arguments(call.leaves, call.arrays, drawn, sliced, call.env))
            except GuardFailed as e:   # the compiled code's value is on the other side of a threshold
                g = path.guards[e.index]
                hostrng.restore_states(saved)
                if path in paths:
                    paths.remove(path)
                if g.kind != "bool" or e.index in overrides:   # the trace's own decisions, interpreted
                    path, drawn = trace.full(paths, overrides, saved, compile=False)
                    return path.run(path.arguments(call.leaves, call.arrays, drawn, path.serves(call.arrays, call.env, call.generators), call.env))
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
            programs = {id(p.code) for p in same}   # (outcomes may share one)
            if len(programs) >= MAX_PATHS_PER_SITE and path.decisions[k] not in outcomes \
                    and (path.code is None or id(path.code) not in programs):
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


class _Call:
    """One call's arguments as the dispatcher sees them: the flat array arguments (`leaves`,
    `td`), the static ones (positions `static`; `sym` of them ints traced as symbols, whose
    values are `env`), the arrays and host generators the function reads and the signature
    of the call."""
    __slots__ = ("args", "static", "sym", "leaves", "td", "arrays", "kwargs", "sig", "env", "exact", "generators",
                 "walks")

    def __init__(self, args, static, sym, leaves, td, arrays, kwargs, sig, generators=()):
        self.args, self.static, self.sym, self.leaves, self.td = args, static, sym, leaves, td
        self.arrays, self.kwargs, self.sig, self.generators = arrays, kwargs, sig, generators
        self.env = tuple(args[i] for i in sym) if sym else ()
        self.exact = False   # a trace used a symbolic int as a plain int
        self.walks = None   # the walks that keyed the static functions (see `_signature`)

    def rebuild(self, dyn):
        """The function's positional arguments, the static ones wrapped in `Static`."""
        it, args, static = iter(dyn), self.args, self.static
        return tuple(Static(args[i]) if i in static else next(it) for i in range(len(args)))


class _SymbolsFailed(Exception):
    """A trace with symbolic ints raised: the call is traced again with plain ints."""


class _Tracer:
    """The traces of one call: the function alone (`primal`), or the whole transformation
    (`full`), each with the call's values."""

    def __init__(self, owner, call):
        self.owner, self.call, self.leaves, self.td = owner, call, call.leaves, call.td
        self.rebuild, self.arrays, self.kwargs = call.rebuild, call.arrays, call.kwargs
        self.types = [arg_type(x) for x in self.leaves]
        self.calls = []   # (hidden arguments, guards) when the function returned, per call of it

    def _values(self, overrides):
        c = ConcreteTrace(overrides)
        c.memo = _MEMOS.get(self.call.sig)
        if c.memo is None:
            _remember(_MEMOS, self.call.sig, {})
            c.memo = _MEMOS[self.call.sig]
        for k, a in enumerate(self.arrays):
            c.sources.setdefault(id(a), (k, a))
        return c

    def _function(self, c):
        fn, kwargs, calls = self.owner.fn, self.kwargs, self.calls
        symbols = {i: SymInt(self.call.args[i], operator.itemgetter(j), c) for j, i in enumerate(self.call.sym)}

        def unwrapped(*a, **k):   # the static arguments reach `fn` as themselves (ints as symbols)
            out = fn(*[symbols.get(i, x.value) if type(x) is Static else x for i, x in enumerate(a)], **kwargs, **k)
            calls.append((len(c.hidden), len(c.guards)))
            return out
        return unwrapped

    def _run(self, c, staged):
        recorder = hostrng.Recorder(self.owner.fn, lambda value, k: _draw_argument(c, value, k))
        with concrete.active(c), recorder.recording(), _print_at_trace(self.owner.name), timing.stage("trace"), \
                _sources_seen(self.owner.fn, self.arrays if self.call.sym else ()):
            try:
                program, out_td, _ = trace_program(staged, tuple(self.leaves), self.td, self.types)
            finally:
                c.closed = True
        pins = [(k, a, _kept_copy(a) if a.size <= PIN_COPY_SIZE else None) for k, a in enumerate(self.arrays)] \
            if c.unmatched else []
        self.call.exact = self.call.exact or c.int_exact
        path = Path(program, out_td, c.guards, c.hidden, recorder.draws, recorder.owners, pins, c.int_guards)
        path.find_generators(self.call.generators, recorder.unrecorded)
        path.int_exact = c.int_exact
        return path

    def full(self, paths, overrides, saved, compile=True):
        """The transformation traced and compiled (or, past the bound, left to the
        interpreter): `(path, the host draws made while tracing)`."""
        c = self._values(overrides)
        fn, body, rebuild = self._function(c), self.owner.body, self.rebuild
        del self.calls[:]
        with timing.recording() as report:
            try:
                path = self._run(c, lambda *dyn: body(fn, *rebuild(dyn)))
            except Exception as e:
                if not self.call.sym:
                    raise
                hostrng.restore_states(saved)
                raise _SymbolsFailed() from e
            site = self.owner._over_bound(paths, path)
            kept = compile and site is None
            in_types = self.types + [var.type for var, _ in c.hidden]
            # (a decision flipped to the compiled code's side: the interpreter would not take it)
            tier = "bound" if not kept else "compile" if overrides else first_tier(path.program)
            path.code = Code(path.program, path.out_td, in_types, self.owner.name, tier)
        path.trace_report = report
        if kept:
            paths.insert(0, path)
            if path.generator_pins:
                _keep_pinned(paths)
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
        path = Path(t.program, t.out_td, p.guards, p.hidden + t.hidden[n:], p.draws, p.owners, p.pins,
                    p.int_guards)
        path.code, path.trace_report, path.int_exact = t.code, t.trace_report, p.int_exact
        path.places, path.generator_pins = p.places, p.generator_pins
        return path, [self.values.values[var] for var, source in p.hidden if source[0] == "draw"]

    def remember(self, path):
        """Keep `path` for later calls whose function traces to the same program: where the
        function ran once in it, with the same hidden arguments and guards as alone."""
        p = self.primal
        if path.code.tier == "bound" or path.primal_counts != [(len(p.hidden), len(p.guards))] \
                or any(source[0] != "const" for _, source in path.hidden[len(p.hidden):]):
            return
        _remember(_BY_PRIMAL, self.key, path)


@contextlib.contextmanager
def _print_at_trace(name):
    """While tracing: `print` prints, and warns (once per trace) that it runs when the
    function is traced, not at every call."""
    original, warned = builtins.print, []

    def traced_print(*args, **kwargs):
        held = print_hold()
        if held is not None:   # (a trace that may be dropped: printed if it is kept)
            held.append((args, kwargs))
            return None
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


def _kept_copy(array):
    """What a path keeps of a read array it pins by its values: a copy, and its bytes."""
    copy = array.copy()
    return copy, copy.tobytes()


def _pinned(array, traced, kept):
    """Whether an array the function reads is as the trace met it: equal to the copy the
    path keeps (a fresh array of the same values, as a program run again makes, serves; one
    changed in place does not), or, for a large one, the same object. (The same bytes
    answer at once; equal values of other bytes, -0.0 for 0.0, are compared as values.)"""
    if kept is None:
        return array is traced
    copy, raw = kept
    return array.shape == copy.shape and array.dtype == copy.dtype and (
        array.tobytes() == raw or np.array_equal(array, copy, equal_nan=copy.dtype.kind in "fc"))


def _same_decisions_compiled(path, failed):
    """Whether `failed` (a path and its guard that failed on this call) is compiled code that
    took the decisions of `path`, a new trace of this call: the trace's NumPy values and the
    compiled code's are on two sides of a threshold (an ulp apart)."""
    return failed is not None and failed[0].compiled is not None and failed[0].decisions == path.decisions


def _next_path(paths, tried, failed, call):
    """`(path, its slices' values)`: the path to try next (None: none is left). After `failed`
    (a path and the index of its failed guard), one that took the same decisions before it
    and another there; most recently run first; only paths that serve the call."""
    for p in paths:
        if tried and any(p is t for t in tried):
            continue
        if failed is not None:
            f, k = failed
            if not (p.decisions[:k] == f.decisions[:k] and len(p.decisions) > k and p.decisions[k] != f.decisions[k]):
                continue
        sliced = p.serves(call.arrays, call.env, call.generators)
        if sliced is not None:
            return p, sliced
    return None, None


def _keep_pinned(paths):
    """Drop the least recently run of the paths pinned to a generator past MAX_PATHS_PER_SITE
    (each fresh generator with draws jitad cannot record makes one; the old ones are gone)."""
    pinned = [p for p in paths if p.generator_pins]
    for p in pinned[MAX_PATHS_PER_SITE:]:
        paths.remove(p)


def _remember(table, key, value=True):
    """`table[key] = value`, the table kept to MAX_KEYS entries (least recently set out first)."""
    table[key] = value
    table.move_to_end(key)
    while len(table) > MAX_KEYS:
        table.popitem(last=False)


@contextlib.contextmanager
def _sources_seen(fn, arrays):
    """While a trace with symbolic ints runs: each of `arrays` that `fn` reads directly from a
    closure cell, a global or a bound method's object (and so do the functions it names, to
    depth 4) is put there as a `SourceView`, so that slicing it with a symbolic int gives an
    argument of the program; put back after."""
    undo = []
    try:
        if arrays:
            _swap_sources(fn, {id(a) for a in arrays}, undo, set(), 4)
        yield
    finally:
        for put_back in reversed(undo):
            put_back()


def _swap_sources(fn, ids, undo, seen, depth):
    if depth < 0 or id(fn) in seen:
        return
    seen.add(id(fn))
    if isinstance(fn, functools.partial):
        return _swap_sources(fn.func, ids, undo, seen, depth)
    if isinstance(fn, Concrete):
        return _swap_sources(fn.fn, ids, undo, seen, depth)
    if isinstance(fn, types.MethodType):
        attrs = getattr(fn.__self__, "__dict__", None)
        if type(attrs) is dict:
            _swap_in(attrs, list(attrs), ids, undo)
        fn = fn.__func__
    if not isinstance(fn, types.FunctionType) or _own_plain(fn):
        return
    for cell in fn.__closure__ or ():
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        if id(v) in ids and _is_array(v):
            cell.cell_contents = view = source_view(v)
            undo.append(lambda cell=cell, v=v, view=view: _put_back(cell, v, view))
        elif callable(v):
            _swap_sources(v, ids, undo, seen, depth - 1)
    g = fn.__globals__
    names = _global_names(_canonical(fn.__code__))
    _swap_in(g, names, ids, undo)
    for name in names:
        v = g.get(name)
        if isinstance(v, (types.FunctionType, functools.partial, Concrete)):
            _swap_sources(v, ids, undo, seen, depth - 1)


def _put_back(cell, array, view):
    """The array back in its cell, unless the function put something else there."""
    try:
        if cell.cell_contents is view:
            cell.cell_contents = array
    except ValueError:
        pass


def _swap_in(table, names, ids, undo):
    """Put a `SourceView` of each array of `ids` found under `names` in the dict `table`."""
    for name in names:
        v = table.get(name)
        if id(v) in ids and _is_array(v):
            table[name] = view = source_view(v)
            undo.append(lambda name=name, v=v, view=view: table.get(name) is view and table.__setitem__(name, v))


def _half_precision(args):
    """Whether every float array or NumPy float among `args` is float16 (at least one): jitad
    computes those in a wider float, and gives the results back as float16, as JAX and autograd
    keep float16 values (and gradients) float16."""
    if not any(map(_holds_half, args)):   # (the common case, cheaply: no float16 anywhere)
        return False
    floats = [x.dtype for x in flatten(args)[0] if getattr(x, "dtype", None) is not None and x.dtype.kind == "f"]
    return all(d == _HALF for d in floats)


_HALF = np.dtype(np.float16)


def _holds_half(x):
    """Whether a float16 array or scalar is in `x` (through lists, tuples and dicts)."""
    if isinstance(x, (list, tuple)):
        return any(map(_holds_half, x))
    if isinstance(x, dict):
        return any(map(_holds_half, x.values()))
    return getattr(x, "dtype", None) is _HALF


def _as_half(x):
    """A wider float result as float16 (others as they are)."""
    if isinstance(x, (np.ndarray, np.floating)) and x.dtype.kind == "f" and x.dtype != np.float16:
        return x.astype(np.float16)
    return np.float16(x) if type(x) is float else x
