"""The compiler driver: a traced program (differentiation included) -> the passes of
`jitad.ir.passes.PIPELINE` -> the disk cache, keyed by the program -> (on a miss) LLVM IR
-> optimized (O2, on two threads for a large program: `parallel`) and loaded machine code
with CPython entry points (or, for device="cuda", numba-cuda kernels driven from the
host). Every stage is timed (`jitad.timing`). `jitad.api` calls `compile_program` once
per signature and keeps the result."""
import functools
import itertools
import operator
import math
import os
import re
import sys
from typing import Any
import threading

import numpy as np

from .. import config
from ..errors import ResourceError
from ..ir import float_checks
from ..ir.graph import walk
from ..ir.interpret import interpretable
from ..ir.ops import Op
from ..ir.passes import PIPELINE, run_passes
from ..ir.verify import verify
from ..ir.printer import program_key_text
from ..ir.types import NUMPY, check_int64_range, clean_bools
from ..staging.concrete import GUARD_PREFIX
from ..staging.tracer import paused_gc
from ..pytree import _REGISTRY, unflatten
from ..timing import stage
from ..forest import Tree, plain_tree
from . import ir_ops, lapack, mpi, rows, runtime, sort, tensor  # noqa: F401  (they register rules and services)
from .entry import Built, ClassArg, DictArg, ListArg, NoneArg, add_entries, gil_release, key_symbol
from .llvm import CHECK_FAILED, check_messages, lower_program, program_constants

PLACEHOLDER = "JITAD_PREFIX_"
VERIFY = os.environ.get("JITAD_VERIFY", "") not in ("", "0")   # the tests set it
SCALAR_KEYS = {float: "f64", int: "i64", bool: "bool"}
_DESCRS = {k: np.dtype(v) for k, v in NUMPY.items()}   # the builtin descriptors the entry checks for


class _Dispatching(threading.local):
    active = False


_dispatching = _Dispatching()


class Compiled:
    """One signature's compiled code."""
    entry: Any            # the native entry (set when linked)
    takes_pytree: bool
    in_td: Any            # set by the caller that knows the argument structure
    compile_seconds: float
    compile_report: Any

    def __init__(self, program, out_td, in_types, direct):
        self.program, self.out_td, self.direct = program, out_td, direct
        self.in_types = in_types

    @property
    def ir(self):
        return str(self.program)

    @property
    def llvm_ir(self):
        """The optimized LLVM IR text (derived when first asked, for code found compiled)."""
        if callable(self._llvm_ir):
            self._llvm_ir = self._llvm_ir()
        return self._llvm_ir

    @llvm_ir.setter
    def llvm_ir(self, text):
        self._llvm_ir = text

    def run(self, leaves, tree_args=None):
        """Call the entry on flat argument leaves (of `tree_args`, the arguments they were
        flattened from, if given); return the result pytree."""
        args = [_canonical(x, t) for x, t in zip(leaves, self.in_types)]
        if self.takes_pytree:
            args = self._rebuilt(tree_args, leaves, args) if tree_args is not None else \
                list(unflatten(self.in_td, args))
        if _dispatching.active:   # the entry refused what the dispatcher prepared: a bug
            raise RuntimeError("jitad internal error: a compiled entry point refused arguments "
                               "its dispatcher prepared; please report this with the call")
        _dispatching.active = True
        try:
            result = self.entry(*args)
        finally:
            _dispatching.active = False
        return result if self.direct else unflatten(self.out_td, result)

    def _rebuilt(self, tree_args, leaves, args):
        """`tree_args` with the leaves `_canonical` replaced: an argument whose leaves all
        stand as they are is passed itself (the entry reads dicts by key), not rebuilt."""
        spans = self.__dict__.get("_spans")
        if spans is None:
            ends = itertools.accumulate(c.num_leaves for c in self.in_td.children)
            spans = self._spans = [(c, end - c.num_leaves, end) for c, end in zip(self.in_td.children, ends)]
        return [arg if all(map(operator.is_, args[a:b], leaves[a:b])) else unflatten(td, args[a:b])
                for arg, (td, a, b) in zip(tree_args, spans)]


def _canonical(x, t):
    """A flat argument as the exact Python object the entry expects: arrays become
    contiguous arrays of the right dtype (copied when they are not)."""
    if type(x) in SCALAR_KEYS or type(x) is Tree:   # the signature key already matched
        return x
    if isinstance(x, Tree):
        return plain_tree(x)
    if t.shape:
        descr = _DESCRS[t.dtype]
        if isinstance(x, np.ndarray) and x.dtype is descr and x.flags.c_contiguous and x.flags.aligned:
            # (a subclass as a plain view, but the `jitad.Array`s a jitted step returned as they are)
            x = x if runtime.taken_as_ndarray(x) else x.view(np.ndarray)
            return x if t.dtype != "bool" else clean_bools(x)
        _check_copy_fits(x, t, descr)
        check_int64_range(x)
        try:
            return clean_bools(np.array(x, dtype=descr, order="C", copy=True, subok=False))   # what the entry accepts
        except MemoryError:
            raise ResourceError(f"no memory for a contiguous {t} copy of an argument") from None
    if isinstance(x, np.ndarray):
        x = x.item()
    if t.dtype == "bool":
        return bool(x)
    if t.dtype == "i64":
        return int(x)
    return float(x)


def _check_copy_fits(x, t, descr):
    """A strided or broadcast view (`np.broadcast_to(0.0, (2**45,))`) is copied to a
    contiguous array: refuse one larger than the machine's memory before reading it."""
    nbytes = math.prod(t.shape) * descr.itemsize
    if nbytes > _PHYSICAL_MEMORY:
        raise ResourceError(f"an argument of type {t} needs a contiguous copy of {nbytes} bytes, more "
                            f"than this machine's {_PHYSICAL_MEMORY >> 20} MiB of memory; pass a smaller array")


_PHYSICAL_MEMORY = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _layout(td, counter):
    if td.kind == "leaf":
        return next(counter)
    if td.kind == "none":
        return NoneArg()
    children = [_layout(c, counter) for c in td.children]
    if td.kind == "list":
        return ListArg(children)
    if td.kind == "dict":
        return DictArg((tuple(runtime.data_symbol(key_symbol(k), sys.intern(k)) for k in td.keys), children))
    if td.kind == "namedtuple":
        return ClassArg((runtime.data_symbol(_class_symbol(td.keys), td.keys), children))
    return children


def _class_symbol(cls, what="class"):
    return f"jitad_{what}_" + f"{cls.__module__}.{cls.__qualname__}".encode().hex()


def _buildable(td):
    """The entry builds every result but dicts with keys other than strings and instances of
    a class its module does not hold under its name (see `_named`)."""
    if td.kind == "dict" and not all(type(k) is str for k in td.keys):
        return False
    if td.kind in ("namedtuple", "custom") and not _named(td.keys if td.kind == "namedtuple" else td.keys[0]):
        return False
    return all(map(_buildable, td.children))


def _named(cls):
    """Whether `cls` is what its module holds under its qualified name. Code that builds a
    class's instances names it; a class that is not there may be made again (by a script
    run afresh in one process, a function called again), and code naming the first would
    not serve the next: its results are built in Python, so the code stays the same."""
    found = sys.modules.get(cls.__module__)
    for part in cls.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is cls


def _result_layout(td, counter):
    """What the entry builds for a result of structure `td` (see `entry.Built`): leaf
    indices in the flat order, dicts with their keys in the order the function built them."""
    if td.kind == "leaf":
        return next(counter)
    children = [_result_layout(c, counter) for c in td.children]
    if td.kind in ("none", "tuple", "list"):
        return Built((td.kind, (), tuple(children)))
    if td.kind == "dict":
        keys = [runtime.data_symbol(key_symbol(k), sys.intern(k)) for k in td.keys]
        order = getattr(td, "order", None)   # a `pytree.BuiltDict`
        if order is not None:
            at = {k: i for i, k in enumerate(td.keys)}
            keys, children = [keys[at[k]] for k in order], [children[at[k]] for k in order]
        return Built(("dict", tuple(keys), tuple(children)))
    if td.kind == "namedtuple":
        cls = td.keys
        kind = "namedtuple" if _plain_namedtuple(cls) else "call"
        return Built((kind, (runtime.data_symbol(_class_symbol(cls), cls),), tuple(children)))
    cls, aux = td.keys   # a registered class: its unflatten(aux, [children])
    symbols = (runtime.data_symbol(_class_symbol(cls, "unflatten"), _REGISTRY[cls][1]),
               runtime.data_symbol(_class_symbol(cls, "aux"), aux))
    return Built(("custom", symbols, tuple(children)))


def _plain_namedtuple(cls):
    """A class made by `collections.namedtuple` (or `typing.NamedTuple`), not extended:
    its instances are tuples of that class, which the entry allocates itself."""
    new = getattr(cls.__new__, "__globals__", {})
    return new.get("_tuple_new") is tuple.__new__ and cls.__init__ is tuple.__init__ \
        and cls.__basicsize__ == tuple.__basicsize__ and cls.__itemsize__ == tuple.__itemsize__


def _unpackable(td):
    """The entry takes apart leaves, None and (nested) tuples, namedtuples (of a class its
    module holds under its name, see `_named`), lists and dicts with string keys."""
    if td.kind == "dict" and not all(type(k) is str for k in td.keys) or td.kind == "namedtuple" and not _named(td.keys):
        return False
    return td.kind in ("leaf", "none", "tuple", "namedtuple", "list", "dict") and all(map(_unpackable, td.children))


class GuardFailed(Exception):
    """A guard of compiled code failed (see `jitad.staging.concrete`): the Python decision it
    records would come out otherwise on this call. `index`: the guard's number in its trace.
    The dispatcher catches it and takes another path; it never reaches the user."""

    def __init__(self, index):
        super().__init__(index)
        self.index = index


class _GuardHandler:
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

    def __call__(self, *args):
        raise GuardFailed(self.index)


def _check_handler(message, where=True):
    """What a failed `check` raises: a guard's GuardFailed, else RuntimeCheckError."""
    if message.startswith(GUARD_PREFIX):
        return _GuardHandler(int(message[len(GUARD_PREFIX):]))
    return runtime.CheckFailed(message, where)


def compile_program(program, out_td, in_types, name, fallback, in_td=None, device="cpu"):
    """After tracing (and the transformations staged with it): the passes of
    `jitad.ir.passes.PIPELINE` -> the code cached for this program, in this process or
    on disk, else lower to LLVM -> optimize -> code generation -> load (or, for
    device="cuda", to numba-cuda kernels driven from the host). `name` (a function's
    `__name__`) is made safe as an LLVM module and C method name here."""
    name = re.sub(r"[^A-Za-z0-9_<>.]", "_", name)
    with stage("passes"), paused_gc():
        run_passes(program, check=VERIFY, device=device)
    if device == "cuda":
        from .cuda import compile_cuda
        return compile_cuda(program, out_td, in_types)
    out_types = program.main.out_types
    direct = _buildable(out_td)   # else the entry returns the flat leaves, `Compiled.run` the pytree
    leaf_indices = iter(range(len(out_types)))
    layout = _result_layout(out_td, leaf_indices) if direct else Built(("tuple", (), tuple(leaf_indices)))
    # arguments that are (nested) tuples, namedtuples and dicts are taken apart by the entry itself
    arg_layout = _layout(in_td, iter(range(len(in_types)))) if in_td is not None and in_td.kind == "tuple" \
        and _unpackable(in_td) else None   # (registers the data symbols a dict or namedtuple needs)

    def lower():
        with stage("lower"), paused_gc():
            module = runtime.new_module(name)
            main, constants = lower_program(module, program, PLACEHOLDER)
            runtime.register_constants(constants)
            gil = gil_release(program)
            add_entries(module, main, in_types, out_types, layout, PLACEHOLDER, arg_layout, gil=gil)
        with stage("ir_text"):
            return str(module)
    with stage("ir_text"), paused_gc():
        key = "\n".join([program_key_text(program), repr(in_types), repr(out_types), repr(layout),
                         repr(arg_layout)])
    (entry, deep), llvm_ir, loaded, code = runtime.compile_module(key, lower, PLACEHOLDER, ("entry", "deep"),
                                                                  lambda: program_constants(program))
    c = Compiled(program, out_td, in_types, direct)
    c.takes_pytree = arg_layout is not None and any(not isinstance(a, int) for a in arg_layout)
    c.out_types = out_types
    c.llvm_ir, c.loaded_from_cache = llvm_ir, loaded
    messages = check_messages(program)   # status CHECK_FAILED + k: the k-th failed
    assert CHECK_FAILED == 6, "the handlers follow the entry's first six"
    with stage("link"):
        c.deep_entry = runtime.python_function(deep, name, fallback, runtime.deep_stack_exhausted,
                                               [_check_handler(m, where=False) for m in messages], code)
        went_deep = functools.partial(runtime.run_with_deep_stack, c.deep_entry)   # the caller's stack ran out
        c.entry = runtime.python_function(entry, name, fallback, went_deep, map(_check_handler, messages),
                                          code)   # each entry keeps the machine code it runs (and no cycle:
                                                  # evicted code is freed at once, not at a full collection)
    return c


# -- tiers: how a path traced from Python first runs (see jitad.dispatch.Code) ----------------

_LOOPS = (Op.WHILE, Op.FOR, Op.TREE, Op.CALL, Op.FOREST)   # (a staged FUN may recurse)
COMPILE_BASE, COMPILE_PER_NODE = 0.05, 0.0004   # seconds: a compile's estimate (see docs/grad-semantics.md)


def first_tier(program):
    """How a path traced from Python runs its first call: "auto" (the NumPy interpreter
    until `compile_budget` seconds of it, then compiled), "interpret" or "compile" (as the
    `jitad_tiering` setting says). "auto" compiles at once a program the interpreter cannot
    run, one with loops or staged functions (an interpreted iteration costs a Python call
    per node: no bound in the program's size) and one checked for NaNs or infinities (a
    pass inserts the checks).

    >>> import jitad
    >>> first_tier(jitad.trace(lambda x: jitad.sin(x) * x, 1.0))
    'auto'
    """
    setting = config.read("jitad_tiering")
    if setting == "compile" or float_checks.ACTIVE or not interpretable(program):
        return "compile"
    if setting == "interpret":
        return "interpret"
    graphs = [program.main] + [f.body for f in program.funs]
    return "compile" if any(n.op in _LOOPS for g in graphs for n in walk(g)) else "auto"


_per_node = [COMPILE_PER_NODE]   # seconds a node has cost to compile in this process (a running mean)


def count_nodes(program):
    return sum(1 for g in [program.main] + [f.body for f in program.funs] for _ in walk(g))


def compile_budget(program):
    """Seconds of interpreting after which a path compiles: an estimate of its compile
    (passes, lowering, LLVM), linear in its nodes, the cost per node learned from this
    process's compiles (`note_compile`). Paying at most that much before compiling keeps a
    path's total within about twice the best schedule's, whatever its number of calls.

    >>> import jitad
    >>> compile_budget(jitad.trace(lambda x: jitad.sin(x) * x, 1.0)) > COMPILE_BASE
    True
    """
    return COMPILE_BASE + _per_node[0] * count_nodes(program)


def note_compile(nodes, seconds):
    """A compile of `nodes` nodes took `seconds`: the estimate's cost per node follows."""
    if nodes:
        _per_node[0] = 0.7 * _per_node[0] + 0.3 * max(seconds - COMPILE_BASE, 0.0) / nodes


# the passes that only clean the program up (what reverse mode leaves: stop_gradients, scalar
# slots, repeated and dead work, unread slots): they run before a path's first interpreted call
_CLEANUP = ("stop_gradients", "scalar_slots", "fold_constants", "cse", "dead_code", "unread_slots", "unread_tables")


def clean_up(program):
    """Run the cleanup passes of `jitad.ir.passes.PIPELINE` on `program` (in place): about
    the cost of one interpreted call, and the calls after it cost a half to a fifth less
    on the programs reverse mode makes. The compile runs the whole pipeline after them."""
    with paused_gc():
        for name, run, _ in PIPELINE:
            if name in _CLEANUP:
                run(program)
                if VERIFY:
                    verify(program)


def result_array_class():
    """The ndarray subclass compiled entries make their array results of."""
    return runtime._ARRAY_SUBTYPE[0]
