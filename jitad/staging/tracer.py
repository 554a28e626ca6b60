"""Tracing Python into graphs: a whole program (`trace_program`), the body of a control-flow
node in a child frame (`trace_body`, `finish_body`), and the slots and closures the
transformations emit."""
import gc
from contextlib import contextmanager, nullcontext

import numpy as np

from .. import hostrng
from ..config import x64_enabled
from ..errors import ArgumentError
from ..ir.graph import FunDef, Program
from ..ir.ops import Op
from ..ir.types import NUMPY, TreeType, is_device_array, Type, dtype_of_numpy
from ..pytree import flatten, unflatten, with_built_order
from ..forest import Tree, plain_tree
from .frames import Frame, _Trace, _entered, _frames, _local, current_frame, emit
from . import concrete
from .values import Staged, StagedTree, _kind, _leaf_type, _refuse_masked, as_var, coerce, is_weak, wrap


def new_slot(type):
    """A mutable zero-initialized slot for a value of `type`."""
    return Staged(emit(Op.SLOT, [], {"type": type})[0])


def slot_get(slot):
    return Staged(emit(Op.SLOT_GET, [slot._var])[0])


def slot_set(slot, value):
    emit(Op.SLOT_SET, [slot._var, as_var(value, slot._var.type.dtype)])


def slot_add(slot, value):
    emit(Op.SLOT_ADD, [slot._var, as_var(value, slot._var.type.dtype)])


def make_closure(fn, param_types, name="k"):
    """Trace `fn(*params)` (returning nothing) as a continuation closing over the
    values it uses from the current scope; return the staged continuation."""
    fundef = FunDef(name=name, in_types=list(param_types), out_types=[])
    frame = Frame(current_frame(), param_types)
    with _entered(frame):
        fn(*[wrap(v) for v in frame.graph.params])
    order = list(frame.captures)
    frame.align_captures(order)
    fundef.body, fundef.n_captures = frame.graph, len(order)
    _local.trace.fun_list.append(fundef)
    return Staged(emit(Op.CLOSURE, order, {"fun": fundef})[0])


def trace_body(fn, args_treedef, param_types, make_args=None):
    """Trace `fn` on fresh params in a child frame; return (frame, raw Python result)."""
    frame = Frame(current_frame(), param_types)
    with _entered(frame):
        params = [wrap(v) for v in frame.graph.params]
        args = make_args(params) if make_args else unflatten(args_treedef, params)
        out = fn(*args)
    return frame, out


def finish_body(frame, leaves, types, what):
    with _entered(frame):
        frame.graph.outputs = [frame.resolve(coerce(x, t, f"{what} output {k}")) for k, (x, t) in
                               enumerate(zip(leaves, types))]


def arg_type(x):
    """The IR type of one flattened argument, or raise `ArgumentError`."""
    if isinstance(x, Tree):
        return plain_tree(x).type   # Tree's own slot, even if a subclass shadows `type`
    if isinstance(x, (bool, int, float, np.number, np.bool_)):
        if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) \
                and not -2**63 <= int(x) < 2**63:
            raise ArgumentError(f"the int {x} does not fit in 64 bits")
        return Type(_kind(x)[0])
    _refuse_masked(x, "as an argument")
    if isinstance(x, np.ndarray):
        dtype = dtype_of_numpy(x.dtype)
        if dtype is None:
            raise ArgumentError(f"unsupported array dtype {x.dtype}: jitad takes float64, float32, "
                                "integer (as int64) and bool arrays")
        if dtype == "f64" and not x64_enabled():   # as jax.jit takes it: float32
            dtype = "f32"
        return Type(dtype, x.shape)
    if is_device_array(x):
        dtype = dtype_of_numpy(x.dtype)
        if dtype is None:
            raise ArgumentError(f"unsupported device array dtype {x.dtype}: jitad takes float64, float32, "
                                "int64 and bool arrays")
        return Type(dtype, tuple(x.shape))
    raise ArgumentError(f"unsupported argument of type {type(x).__name__}: jitad takes floats, "
                        "ints, bools, numpy arrays, jitad.Tree and tuples/lists/dicts of them")


def _with_values(root, args):
    """Give `root` the values of the trace being recorded with values (see `concrete`), if
    its parent has them and `args` are values of the same types (not a batched `vmap`
    trace): its params stand for `args`. Returns the ConcreteTrace, or None."""
    c = concrete.current()
    if c is None or (root.parent is not None and root.parent.concrete is not c and not c.detached):
        return None
    leaves = flatten(args)[0]
    if len(leaves) != len(root.graph.params):
        return None
    for p, x in zip(root.graph.params, leaves):
        if isinstance(x, Staged):
            if x._var.type != p.type:
                return None
        elif isinstance(x, StagedTree) or isinstance(p.type, TreeType) or _leaf_type(x, "") != p.type:
            return None
    for p, x in zip(root.graph.params, leaves):
        if isinstance(x, Staged):
            c.alias[p] = x._var
        else:
            c.values[p] = np.asarray(x, NUMPY[p.type.dtype])[()]
    root.concrete = c
    if root.parent is None:
        c.root = root
    return c


@contextmanager
def paused_gc():
    """The cyclic garbage collector held off inside (as it was outside after): tracing and
    the passes build many small objects that live as long as the graph, and a collection
    started by their allocations walks every one of them again, so on a large trace the
    collector's passes grow with its size (a third of a trace's time, measured)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def trace_program(fn, args, in_td, types):
    """Trace `fn(*args)` where the flat leaves of `args` have `types` into a program of
    its own; return (Program, out treedef, captured). Traced inside another trace, `fn`
    may use staged values of the enclosing code: they become extra params at the end
    of the program's main graph, and `captured` lists those enclosing values in order."""
    root = Frame(current_frame(), types)
    outer_trace, outer_frames = getattr(_local, "trace", None), _frames()
    values = _with_values(root, args)
    _local.trace, _local.frames = _Trace(), []
    try:
        with paused_gc(), _entered(root), (hostrng.watch(fn) if outer_trace is None and values is None else nullcontext()):
            proxies = [wrap(v) for v in root.graph.params]
            for proxy, leaf in zip(proxies, flatten(args)[0]):   # scalars passed as numbers are weak
                if isinstance(proxy, Staged):
                    proxy.weak = is_weak(leaf)
            out = fn(*unflatten(in_td, proxies))
            leaves, out_td = flatten(out)
            out_td = with_built_order(out, out_td)
            root.graph.outputs = [root.resolve(coerce(x, _leaf_type(x, "the function's result"), "result"))
                                  for x in leaves]
        return Program(root.graph, _local.trace.fun_list), out_td, list(root.captures)
    finally:
        _local.trace, _local.frames = outer_trace, outer_frames
