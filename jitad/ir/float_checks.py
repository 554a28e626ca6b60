"""NaN and inf debugging (`jax_debug_nans`, `jax_debug_infs`): with a setting on, the pass
`insert_checks` follows every float result of a primitive with a `check` that stops the
call at the first NaN (or inf) it holds, forward or backward, and eager calls check their
results. The message names the primitive and the user's line, which tracing records per
result while a setting is on (`note`, from `emit`); what a transformation emits for a
traced node records that node's line (`derived`: `vmap`, forward mode, restaging; reverse
mode's VJPs say "in the gradient of" it, `gradient_of`). With both settings off nothing is recorded
and the pass changes nothing: the program is the one compiled without them."""
import threading
from contextlib import contextmanager, nullcontext

import numpy as np

from ..errors import NonFiniteError, RuntimeCheckError, user_location
from .graph import Node, Var
from .ops import CALLS, Op, infer_types
from .types import FLOATS, Type

NANS = False
INFS = False
ACTIVE = False   # NANS or INFS: what `emit` looks at

PREFIX = {"nan": "jax_debug_nans: ", "inf": "jax_debug_infs: "}
_WHAT = {"nan": "a NaN", "inf": "an infinity"}
# results that hold values made elsewhere (a constant, a slot or table read, a call's
# results, checked in the callee): no check of their own
_MOVES = {"const", "slot_get", "table_get", "table_gather", "tree_get", "arena_mark"}

_origins = {}   # result var -> ("`op`", "file:line: source"), recorded while ACTIVE
_local = threading.local()   # .context: (source node's op, its description, its line, role) while a
                             # transformation emits what a node of the traced program becomes


def configure(nans, infs):
    """Set the modes (from `jitad.config`); True when that changes them."""
    global NANS, INFS, ACTIVE
    changed = (NANS, INFS) != (bool(nans), bool(infs))
    NANS, INFS = bool(nans), bool(infs)
    ACTIVE = NANS or INFS
    if not ACTIVE:
        _origins.clear()
    return changed


def note(node):
    """Record where `node`'s results were made: the user's line, or, while a transformation
    emits what a traced node becomes, that node's."""
    context = getattr(_local, "context", None)
    if context is None:
        what, line = f"`{node.op.name}`", user_location()
    else:
        op, source, line, role = context
        what = f"`{node.op.name}` in {role} {source}" if role else \
            source if node.op is op else f"`{node.op.name}` (from {source})"
    for v in node.outputs:
        _origins[v] = (what, line)


def inherit(old_vars, new_vars):
    """Results re-emitted by a transformation keep their original's place."""
    for old, new in zip(old_vars, new_vars):
        where = _origins.get(old)
        if where is not None:
            _origins[getattr(new, "_var", new)] = where


def derived(node, role=""):
    """While a transformation emits what `node` becomes (`role`: "the gradient of" while
    reverse mode emits its VJP), the results made name `node` and its line."""
    if not ACTIVE or not node.outputs:
        return nullcontext()
    what, line = _origins.get(node.outputs[0], (f"`{node.op.name}`", ""))
    return _context((node.op, what, line, role))


def gradient_of(node):
    return derived(node, "the gradient of")


@contextmanager
def _context(text):
    saved = getattr(_local, "context", None)
    _local.context = text
    try:
        yield
    finally:
        _local.context = saved


def error_class(message):
    """The exception a failed `check` with `message` raises."""
    return NonFiniteError if message.startswith(tuple(PREFIX.values())) else RuntimeCheckError


def check_eager(op, value):
    """An eager (NumPy-level) primitive's result: raise where a mode finds it bad."""
    if not ACTIVE or np.asarray(value).dtype.kind != "f":
        return value
    for kind in _kinds():
        if _bad(kind, np.asarray(value)).any():
            raise NonFiniteError(_message(kind, f"`{op.name}`"))
    return value


def _message(kind, what):
    return (f"{PREFIX[kind]}{what} produced {_WHAT[kind]} "
            f"(jitad.config.update('{PREFIX[kind][:-2]}', False) lets it through)")


def _kinds():
    return [k for k, on in (("nan", NANS), ("inf", INFS)) if on]


def _bad(kind, x):
    return np.isnan(x) if kind == "nan" else np.isinf(x)


# -- the pass --------------------------------------------------------------------------

def insert_checks(program):
    """After every float result of a primitive, a `check` per mode (nothing with both off)."""
    if not ACTIVE:
        return
    for graph in [program.main] + [f.body for f in program.funs]:
        _insert(graph)
    _origins.clear()


def _checked(node):
    return not (node.bodies or node.op in CALLS or node.op.name in _MOVES or node.op.name.startswith("slot"))


def _insert(graph):
    nodes = []
    for node in graph.nodes:
        for body in node.bodies:
            _insert(body)
        nodes.append(node)
        if _checked(node):
            for v in node.outputs:
                if isinstance(v.type, Type) and v.type.dtype in FLOATS:
                    for kind in _kinds():
                        nodes += _check_nodes(v, kind, node)
    graph.nodes = nodes


def _check_nodes(x, kind, node):
    """Nodes computing `any(isnan(x))` (or isinf) and checking it."""
    made = []

    def add(op, ins, **attrs):
        outs = tuple(Var(t) for t in infer_types(op, [v.type for v in ins], attrs))
        made.append(Node(op, tuple(ins), outs, attrs))
        return outs[0] if outs else None

    def const(value, dtype):
        return add(Op.CONST, [], value=value, type=Type(dtype))
    if kind == "nan":
        bad = add(Op.NE, [x, x])
    else:
        bad = add(Op.EQ, [add(Op.ABS, [x]), const(float("inf"), x.type.dtype)])
    if x.type.shape:
        count = add(Op.SUM, [add(Op.CONVERT, [bad], dtype="i64")], axes=tuple(range(len(x.type.shape))),
                    keepdims=False)
        bad = add(Op.GT, [count, const(0, "i64")])
    what, line = _origins.get(x, (f"`{node.op.name}`", ""))
    add(Op.CHECK, [bad], message=_message(kind, what) + (f"\n  made at {line}" if line else ""))
    return made
