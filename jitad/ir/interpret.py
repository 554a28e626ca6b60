"""A reference interpreter of the IR in plain NumPy: the semantics the compiled code
must reproduce, used by the tests to check lowering (and, later, derivatives)."""
import numpy as np

from . import float_checks
from .graph import split_operands
from .ops import CALLS, IMPLS, Op, clip_index, impl_of, registrar
from .types import FLOATS, NUMPY, ContType, RefType, TableType, TreeType

_CONTROL = {}


def interpret(program, args):
    """Run `program` on flat arguments (numbers, `jitad.Tree`s); return the flat outputs."""
    vals = [a if isinstance(p.type, TreeType) else np.asarray(a, NUMPY[p.type.dtype])[()]
            for p, a in zip(program.main.params, args)]
    with np.errstate(all="ignore"):
        return run_graph(program.main, vals)


def run_graph(graph, args):
    env = dict(zip(graph.params, args))
    for node in graph.nodes:
        env.update(zip(node.outputs, run_node(node, [env[v] for v in node.inputs])))
    return [env[v] for v in graph.outputs]


def run_node(node, ins):
    """The values of `node`'s outputs, given its inputs' values (NumPy scalars and arrays of
    the outputs' dtypes; trees, slots, continuations and tables as they are)."""
    if node.op in _CONTROL:
        outs = _CONTROL[node.op](node, ins)
    elif node.op in _EFFECTS:
        outs = _EFFECTS[node.op](node, *ins)
    else:
        outs = [impl_of(node.op)(*ins, **node.attrs)]
    return [value if isinstance(var.type, (TreeType, RefType, ContType, TableType))
            else np.asarray(value, NUMPY[var.type.dtype])[()] for var, value in zip(node.outputs, outs)]


def _slot_start(t):
    """A slot's first value, as compiled code gives it: a scalar float starts at -0.0."""
    if not t.shape and t.dtype in FLOATS:
        return NUMPY[t.dtype](-0.0)
    return np.zeros(t.shape, NUMPY[t.dtype])[()]


def _scatter_rows(table, idx, v, add):
    if add:
        np.add.at(table, idx, v)
    else:
        table[idx] = v
    return []


_EFFECTS = {
    Op.TABLE: lambda node, n: [np.zeros((max(int(n), 0),) + node.attrs["type"].shape, NUMPY[node.attrs["type"].dtype])],
    Op.TABLE_GET: lambda node, table, i: [table[i].copy()[()]],
    Op.TABLE_SET: lambda node, table, i, v: table.__setitem__(i, v) or [],
    Op.TABLE_ADD: lambda node, table, i, v: table.__setitem__(i, table[i] + v) or [],
    Op.TABLE_GATHER: lambda node, table, idx: [table[idx].copy()],
    Op.TABLE_SCATTER: lambda node, table, idx, v: _scatter_rows(table, idx, v, node.attrs.get("add")),
    Op.ARENA_MARK: lambda node: [np.int64(0)],
    Op.ARENA_RELEASE: lambda node, mark: [],
    Op.SLOT: lambda node: [[_slot_start(node.attrs["type"])]],
    Op.SLOT_GET: lambda node, slot: [slot[0]],
    Op.SLOT_SET: lambda node, slot, v: slot.__setitem__(0, v) or [],
    Op.SLOT_ADD: lambda node, slot, v: slot.__setitem__(0, slot[0] + v) or [],
    Op.SLOT_ADD_AT: lambda node, slot, i, v: _add_at(slot, i, v),
    Op.SLOT_SCATTER_ADD: lambda node, slot, i, v: _add_at(slot, i, v, node.attrs.get("skip_outside", False)),
    Op.SLOT_SET_AT: lambda node, slot, i, v: slot[0].__setitem__(clip_index(i, slot[0].shape[0]), v) or [],
    Op.SLOT_ADD_SLICE: lambda node, slot, v: _add_region(slot, v, **node.attrs),
    Op.TABLE_GEMM_ADD: lambda node, slot, x, y, count: _table_gemm_add(slot, x, y, int(count), node.attrs["rows"]),
    Op.MATMUL_ADD: lambda node, slot, a, b: slot.__setitem__(0, IMPLS[Op.MATMUL](a, b, node.attrs["ta"], node.attrs["tb"])
                                                             + (0 if node.attrs.get("store") else slot[0])) or [],
    Op.CLOSURE: lambda node, *caps: [lambda *args: run_graph(node.attrs["fun"].body, list(args) + list(caps))],
    Op.APPLY: lambda node, cont, *args: cont(*args) or [],
    Op.CHECK: lambda node, fail: _check(fail, node.attrs["message"]),
}


def _check(fail, message):
    if fail:
        raise float_checks.error_class(message)(message)
    return []


def _table_gemm_add(slot, x, y, count, rows):
    xs, ys = x[:count].reshape(count * rows, -1), y[:count].reshape(count * rows, -1)
    slot[0] = slot[0] + xs.T @ ys
    return []


def _add_region(slot, value, starts, stops, steps):
    new = slot[0].copy()
    new[tuple(slice(a, b, c) for a, b, c in zip(starts, stops, steps))] += value
    slot[0] = new
    return []


def _add_at(slot, index, value, skip_outside=False):
    if skip_outside:   # no row for an index outside the slot's rows
        keep = (np.asarray(index) >= 0) & (np.asarray(index) < slot[0].shape[0])
        index, value = np.asarray(index)[keep], np.asarray(value)[keep]
    np.add.at(slot[0], clip_index(index, slot[0].shape[0]), value)
    return []


control = registrar(_CONTROL)


@control(Op.IF)
def _if(node, ins):
    return run_graph(node.bodies[0] if ins[0] else node.bodies[1], ins[1:])


@control(Op.WHILE)
def _while(node, ins):
    _, state, caps = split_operands(node, ins)
    cond, body = node.bodies
    while run_graph(cond, state + caps)[0]:
        state = run_graph(body, state + caps)
    return state


@control(Op.FOR)
def _for(node, ins):
    (lower, upper), state, caps = split_operands(node, ins)
    for i in range(int(lower), int(upper)):
        state = run_graph(node.bodies[0], [np.int64(i)] + state + caps)
    return state


@control(*CALLS)
def _call(node, ins):
    return run_graph(node.attrs["fun"].body, ins)


@control(Op.TREE)
def _tree(node, ins):
    (tree,), init, caps = split_operands(node, ins)

    def rec(k):
        if k < 0:
            return init
        return run_graph(node.bodies[0], [np.int64(k)] + rec(tree.left[k]) + rec(tree.right[k]) + caps)
    return rec(tree.root)
