"""The trace being recorded: the frames of the graphs being built (a body that reads a value
of an enclosing frame captures it as a param) and `emit`, which appends a node to the
current one."""
import math
import threading
from collections import ChainMap
from contextlib import contextmanager

import numpy as np

from ..errors import ResourceError, StagingError
from ..ir import float_checks
from ..ir.graph import Graph, Node, Var
from ..ir.ops import Op, infer_types
from ..ir.types import NUMPY, RefType


_local = threading.local()


class Frame:
    """A graph under construction and the values in scope in it."""

    def __init__(self, parent, param_types):
        self.parent = parent
        self.graph = Graph(params=[Var(t) for t in param_types])
        self.n_explicit = len(param_types)
        self.scope = set(self.graph.params)
        self.captures = {}   # var of an enclosing frame -> param of this frame
        self.concrete = None   # the ConcreteTrace giving this frame's values, if it has them

    def resolve(self, var):
        if var in self.scope:
            return var
        param = self.captures.get(var)
        if param is None:
            if self.parent is None:
                raise StagingError(
                    "a staged value is used outside the function or combinator body that "
                    "created it (was it stored in a Python variable and used later?); return "
                    "it from the body instead")
            self.parent.resolve(var)
            param = Var(var.type)
            self.graph.params.append(param)
            self.scope.add(param)
            self.captures[var] = param
            if self.concrete is not None:
                self.concrete.alias[param] = var
        return param

    def align_captures(self, order):
        """Make the capture params of this body follow `order` (vars of the parent)."""
        explicit = self.graph.params[:self.n_explicit]
        self.graph.params = explicit + [self.captures.get(v) or Var(v.type) for v in order]


class _Trace:
    def __init__(self):
        self.funs = {}      # (FUN object, signature) -> FunDef
        self.fun_list = []
        self.memo = {}      # per-trace caches of transformations (e.g. a FunDef's CPS version)
        self.touched = set()   # slots some node other than a read has taken (see `slot_touched`)


def slot_touched(var):
    """Whether a node other than `slot_get` has taken the slot `var` so far in this trace
    (a write, or a call, closure or body that may write it): an untouched slot still holds
    its zeros, which reverse mode treats as a symbolic zero."""
    return var in _local.trace.touched


def trace_memo():
    """A dict living as long as the current trace."""
    return _local.trace.memo


@contextmanager
def transforming(t):
    """While transformation `t` (reverse mode's state) emits a program, let Python code
    that still holds staged values of the original program (a custom rule's closure) use
    their transformed counterparts: `t.subst` (old var -> new var, filled by `t`) is
    consulted by `emit`, and `transformation()` returns `t`."""
    saved = getattr(_local, "subst", None), getattr(_local, "transformation", None)
    _local.subst, _local.transformation = t.subst, t
    try:
        yield t
    finally:
        _local.subst, _local.transformation = saved


@contextmanager
def substituted(mapping):
    """Inside, Python code that holds the staged values `mapping`'s keys (a closure
    traced elsewhere) emits with their counterparts, the mapping's values, instead."""
    saved = getattr(_local, "subst", None)
    _local.subst = ChainMap(mapping, saved) if saved else mapping   # (a live view of the outer one)
    try:
        yield
    finally:
        _local.subst = saved


def transformation():
    """The transformation being emitted on this thread (see `transforming`), or None."""
    return getattr(_local, "transformation", None)


def _frames():
    if not hasattr(_local, "frames"):
        _local.frames = []
    return _local.frames


def current_frame():
    frames = _frames()
    return frames[-1] if frames else None


@contextmanager
def _entered(frame):
    _frames().append(frame)
    try:
        yield frame
    finally:
        _frames().pop()


ESCAPED = ("a staged value escaped the function that traced it (it was stored in a Python variable, "
           "list or attribute during a jit/grad/vmap trace) and is used after that trace ended, where it "
           "has no value; return it from the traced function instead, and use the returned result")


def emit(op, inputs, attrs=None, bodies=()):
    """Append a node to the current graph; return its output vars."""
    frame = current_frame()
    if frame is None:
        raise StagingError(ESCAPED)
    attrs = attrs or {}
    subst = getattr(_local, "subst", None)
    if subst:   # values of a program being transformed, used by Python code run meanwhile
        inputs = [subst.get(v, v) for v in inputs]
    scope = frame.scope
    ins = tuple([v if v in scope else frame.resolve(v) for v in inputs])
    if op is not Op.SLOT_GET:
        _touch(inputs, ins)
    outs = tuple([Var(t) for t in infer_types(op, [v.type for v in ins], attrs, bodies)])
    for v in outs:
        if getattr(v.type, "shape", ()):
            _check_size(op, v.type)
    node = Node(op, ins, outs, attrs, tuple(bodies))
    frame.graph.nodes.append(node)
    if float_checks.ACTIVE:   # jax_debug_nans: remember the user's line
        float_checks.note(node)
    frame.scope.update(outs)
    if frame.concrete is not None:   # values on demand: see `concrete`
        where = (frame, len(frame.graph.nodes) - 1)
        for v in outs:
            frame.concrete.producer[v] = where
    return outs


_ITEMSIZE = {name: np.dtype(t).itemsize for name, t in NUMPY.items()}


def _touch(inputs, resolved):
    refs = [v for v in inputs if isinstance(v.type, RefType)]
    if refs:   # (the var as given, and its capture param in a body)
        _local.trace.touched.update(refs + [v for v in resolved if isinstance(v.type, RefType)])


def _check_size(op, t):
    """Byte counts of values (and of a table's entries) must fit in 63 bits: compiled code
    computes sizes and offsets in int64."""
    shape = getattr(t, "shape", ())
    if shape and math.prod(shape) * _ITEMSIZE[t.dtype] >= 2 ** 63:
        raise ResourceError(f"`{op.name}` would make a {t.dtype} value of shape {tuple(shape)}: "
                            f"{math.prod(shape)} elements, more bytes than 64-bit sizes hold; "
                            "use smaller shapes")


def apply(cont, args):
    emit(Op.APPLY, [cont._var] + [a._var for a in args])


def _control_node(op, operands, frames, attrs):
    """Emit a control-flow node whose bodies (in `frames`) share one capture list."""
    order = []
    for fr in frames:
        order += [v for v in fr.captures if v not in order]
    for fr in frames:
        fr.align_captures(order)
    return emit(op, list(operands) + order, attrs, [fr.graph for fr in frames])
