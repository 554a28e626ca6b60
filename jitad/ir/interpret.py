"""A reference interpreter of the IR in plain NumPy: the semantics the compiled code
must reproduce. The tests check lowering against it, traces with values compute with it
(`jitad.staging.concrete`), and the dispatcher runs a path's first calls through it before
compiling (`jitad.dispatch`: tiered execution).

An `Interpreter` turns each graph it meets into a plan once (per node: its NumPy function,
where its operands sit in a flat list of values, the dtype of its result), so a run costs
one Python call per node and vectorized NumPy inside it, never Python per element.

>>> import jitad
>>> from jitad.ir.interpret import interpret
>>> program = jitad.trace(lambda x: x * 2.0 + 1.0, 3.0)
>>> [float(v) for v in interpret(program, [3.0])]
[7.0]
"""
import functools

import numpy as np

from . import float_checks
from .graph import split_operands, walk
from .ops import CALLS, IMPL, IMPLS, Op, clip_index, impl_of, registrar
from .types import FLOATS, NUMPY, ContType, RefType, TableType, TreeType

_CONTROL = {}   # op -> fn(node, ins, interpreter) -> outputs (`interpreter.run(graph, args)` runs a body)
_OPAQUE = (TreeType, RefType, ContType, TableType)   # values kept as they are (no dtype)
_DTYPES = {name: np.dtype(t) for name, t in NUMPY.items()}


def interpret(program, args, interpreter=None):
    """Run `program` on flat arguments (numbers, `jitad.Tree`s); return the flat outputs.
    `interpreter`: an `Interpreter` whose plans are reused (one per program)."""
    vals = [a if isinstance(p.type, TreeType) else _cast(a, _DTYPES[p.type.dtype])
            for p, a in zip(program.main.params, args)]
    token = ERRORS.set(IGNORED)   # (NumPy's floating-point warnings off: an overflow is an inf)
    try:
        return (interpreter or Interpreter()).run(program.main, vals)
    finally:
        ERRORS.reset(token)


def run_graph(graph, args):
    """`graph`'s outputs for its params' values `args`."""
    return Interpreter().run(graph, args)


def run_node(node, ins):
    """The values of `node`'s outputs, given its inputs' values (NumPy scalars and arrays of
    the outputs' dtypes; trees, slots, continuations and tables as they are)."""
    rule = _CONTROL.get(node.op)
    if rule is not None:
        outs = rule(node, ins, Interpreter())
    elif node.op in _EFFECTS:
        outs = _EFFECTS[node.op](node, *ins)
    else:
        outs = [impl_of(node.op)(*ins, **node.attrs)]
    return [value if isinstance(var.type, _OPAQUE) else np.asarray(value, NUMPY[var.type.dtype])[()]
            for var, value in zip(node.outputs, outs)]


class _SetErr:
    """`np.seterr` with a context variable's `set` and `reset` (where NumPy has none)."""
    @staticmethod
    def set(state):
        return np.seterr(**state)

    @staticmethod
    def reset(token):
        np.seterr(**token)


def _quiet_state():
    """NumPy's floating-point error state as a context variable (`set`, `reset`) and the value
    that ignores everything: NumPy's own (a tenth of `np.errstate`'s cost a call) where it
    has one."""
    try:
        from numpy._core import _ufunc_config
        return _ufunc_config._extobj_contextvar, _ufunc_config._make_extobj(all="ignore")
    except (ImportError, AttributeError, TypeError):
        return _SetErr, {"all": "ignore"}


ERRORS, IGNORED = _quiet_state()   # (`token = ERRORS.set(IGNORED)` ... `ERRORS.reset(token)`: `np.errstate(all="ignore")`)


def _cast(value, dt):
    """`value` as a NumPy scalar or array of dtype `dt` (no copy where it is one)."""
    if type(value) is np.ndarray:
        if value.dtype == dt:
            return value if value.ndim else value[()]
    elif type(value) is dt.type:
        return value
    return np.asarray(value, dt)[()]


class Interpreter:
    """Runs the graphs of a program, each through a plan made on its first run (kept while
    the interpreter lives: make one per program). `failed(message)` is called for a failed
    `check` (by default it raises the check's error)."""

    def __init__(self, failed=None):
        self.plans = {}   # id(graph) -> (graph, steps, slots of the outputs, slots to add)
        self.failed = failed or _failed

    def run(self, graph, args):
        plan = self.plans.get(id(graph))
        if plan is None:
            plan = self.plans[id(graph)] = self._plan(graph)
        _, steps, outs, blank = plan
        env = list(args)
        env += blank
        for step in steps:
            step(env)
        return [env[i] for i in outs]

    def _plan(self, graph):
        """(graph, steps, slots of the outputs, the values after the params'): constants, and
        small values of pure primitives of constants (a gradient's seed broadcast), are
        computed here (no step changes a value it did not copy), an arena's mark and release
        are no steps (an arena is no memory here), and each step drops the values it read
        last (the memory of the values no longer read is reused while the rest still run)."""
        slot = {v: k for k, v in enumerate(graph.params)}
        work, fixed = [], {}   # (node, its operands' slots, its first output's slot) per step
        held = _held_slots(graph)
        for node in graph.nodes:
            ins = tuple([slot[v] for v in node.inputs])
            at = len(slot)
            for v in node.outputs:
                slot[v] = len(slot)
            op = node.op
            if op == Op.ARENA_MARK or op == Op.ARENA_RELEASE:
                if node.outputs:   # (a release has none: nothing to hold)
                    fixed[at] = _MARK
            elif op == Op.SLOT and node.outputs[0] in held:
                fixed[at] = _slot_start(node.attrs["type"])
            elif node.inputs and node.inputs[0] in held and op in _HELD_STEPS:
                work.append((node, ins, at, _HELD_STEPS[op]))
            elif op == Op.CONST:
                fixed[at] = _cast(impl_of(op)(**node.attrs), _DTYPES[node.outputs[0].type.dtype])
            elif not (_foldable(node) and all(i in fixed for i in ins) and _fold(node, ins, fixed, at)):
                work.append((node, ins, at, None))
        outs = [slot[v] for v in graph.outputs]
        blank = [None] * (len(slot) - len(graph.params))
        for at, value in fixed.items():
            blank[at - len(graph.params)] = value
        return graph, self._steps(work, outs), outs, blank

    def _steps(self, work, outs):
        last = {}   # slot -> the step reading it last
        for k, (_, ins, _, _) in enumerate(work):
            for i in ins:
                last[i] = k
        dead = [[] for _ in work]
        kept = set(outs)
        for i, k in last.items():
            if i not in kept:
                dead[k].append(i)
        steps, impls = [], {}
        for (node, ins, at, held), gone in zip(work, dead):
            outputs, op = node.outputs, node.op
            if held is not None:
                steps.append(held(node, ins, at, tuple(gone)))
            elif len(outputs) == 1 and op not in _CONTROL and op not in _EFFECTS \
                    and not isinstance(outputs[0].type, _OPAQUE):   # (a primitive: most nodes)
                fn = impls.get(op)
                if fn is None:
                    fn = impls[op] = impl_of(op)
                steps.append(_pure_step(fn, node.attrs, ins, at, _DTYPES[outputs[0].type.dtype],
                                        bool(outputs[0].type.shape), tuple(gone)))
            else:
                steps.append(self._step(node, ins, at, tuple(gone)))
        return steps

    def _step(self, node, ins, at, dead):
        slot_step = _SLOT_STEPS.get(node.op)
        if slot_step is not None:
            return slot_step(node, ins, at, dead)
        dts = [None if isinstance(v.type, _OPAQUE) else _DTYPES[v.type.dtype] for v in node.outputs]
        rule, effect = _CONTROL.get(node.op), _EFFECTS.get(node.op)
        if rule is None and effect is None:
            return _pure_step(impl_of(node.op), node.attrs, ins, at, dts[0], True, dead)
        n = len(dts)

        def step(env):
            vals = [env[i] for i in ins]
            outs = rule(node, vals, self) if rule is not None else effect(node, *vals)
            for k in range(n):
                dt = dts[k]
                env[at + k] = outs[k] if dt is None else _cast(outs[k], dt)
            for i in dead:
                env[i] = None
        return step


_MARK = np.int64(0)   # an arena mark's value (nothing reads it but its release)
_FOLDED_SIZE = 4096   # the most elements of a value computed when the plan is made


def _foldable(node):
    """Whether `node` may be computed when the plan is made, its operands being constants:
    a pure primitive with one small result (not a host callback, which runs at each call)."""
    op, outs = node.op, node.outputs
    if len(outs) != 1 or not getattr(op, "pure", False) or op in _CONTROL or op in _EFFECTS or op in _SLOT_STEPS \
            or op == Op.HOST_CALL or isinstance(outs[0].type, _OPAQUE) or IMPL.find(op) is None:
        return False
    return int(np.prod(outs[0].type.shape)) <= _FOLDED_SIZE


def _fold(node, ins, fixed, at):
    """Compute `node` of the constant operands `fixed[i]` into `fixed[at]`: whether it could
    (NumPy raising leaves it to its step, at each call)."""
    values = [fixed[i] for i in ins]
    if any(v is _MARK for v in values):
        return False
    try:
        fixed[at] = _cast(impl_of(node.op)(*values, **node.attrs), _DTYPES[node.outputs[0].type.dtype])
    except Exception:
        return False
    return True


def _pure_step(fn, attrs, ins, at, dt, tensor, dead):
    """The step of a primitive: its NumPy function on the operands' slots, into slot `at`
    (`_cast` to `dt` where the result is not a value of `dt` already: an array of a `tensor`
    type, a NumPy scalar of a scalar one); then the slots `dead` are emptied."""
    if attrs:
        fn = functools.partial(fn, **attrs)
    scalar = None if tensor else dt.type
    if len(ins) == 1:
        (a,) = ins

        def step(env):
            v = fn(env[a])
            env[at] = v if type(v) is scalar or type(v) is _ND and v.dtype is dt and v.ndim else _cast(v, dt)
            for i in dead:
                env[i] = None
    elif len(ins) == 2:
        a, b = ins

        def step(env):
            v = fn(env[a], env[b])
            env[at] = v if type(v) is scalar or type(v) is _ND and v.dtype is dt and v.ndim else _cast(v, dt)
            for i in dead:
                env[i] = None
    else:
        def step(env):
            env[at] = _cast(fn(*[env[i] for i in ins]), dt)
            for i in dead:
                env[i] = None
    return step


_ND = np.ndarray


def interpretable(program):
    """Whether every node of `program` (its functions and bodies too) has a meaning here
    (a NumPy function, or a rule of the interpreter's own).

    >>> import jitad
    >>> interpretable(jitad.trace(lambda x: jitad.sin(x) * x, 1.0))
    True
    """
    graphs, seen = [program.main] + [f.body for f in program.funs], set()
    while graphs:
        g = graphs.pop()
        if id(g) in seen:
            continue
        seen.add(id(g))
        for node in walk(g):
            if node.op not in _CONTROL and node.op not in _EFFECTS and IMPL.find(node.op) is None:
                return False
            fun = node.attrs.get("fun") if node.op == Op.CLOSURE or node.op in CALLS else None
            if fun is not None:
                graphs.append(fun.body)
    return True


def _slot_start(t):
    """A slot's first value, as compiled code gives it: a scalar float starts at -0.0."""
    if not t.shape and t.dtype in FLOATS:
        return NUMPY[t.dtype](-0.0)
    return np.zeros(t.shape, NUMPY[t.dtype])[()]


def _new_slot(t):
    """A slot at its start: a tensor's zeros are its own (owned: the first update needs no copy)."""
    start = _slot_start(t)
    return [start, True] if t.shape else [start]


def _scatter_rows(table, idx, v, add):
    if add:
        np.add.at(table, idx, v)
    else:
        table[idx] = v
    return []


def _owned(slot):
    """The slot's array to update in place: copied first where it may share memory with a
    value (one it was set to, or one a read returned), so that no argument or earlier read
    changes; then owned until the next read or set (copy on write)."""
    if len(slot) == 1:
        slot[0] = np.array(slot[0])
        slot.append(True)   # (owned from now on)
    return slot[0]


def _slot_add(slot, v):
    if np.ndim(slot[0]):   # (a tensor: added in place, copy on write)
        np.add(_owned(slot), v, out=slot[0], casting="unsafe")
        return []
    return _slot_set(slot, slot[0] + v)


def _read(slot):
    del slot[1:]   # (the value read is shared: the next update copies)
    return [slot[0]]


def _slot_set(slot, v):
    del slot[1:]
    slot[0] = v
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
    Op.SLOT: lambda node: [_new_slot(node.attrs["type"])],
    Op.SLOT_GET: lambda node, slot: _read(slot),
    Op.SLOT_SET: lambda node, slot, v: _slot_set(slot, v),
    Op.SLOT_ADD: lambda node, slot, v: _slot_add(slot, v),
    Op.SLOT_ADD_AT: lambda node, slot, i, v: _add_at(slot, i, v),
    Op.SLOT_SCATTER_ADD: lambda node, slot, i, v: _add_at(slot, i, v, node.attrs.get("skip_outside", False)),
    Op.SLOT_SET_AT: lambda node, slot, i, v: _owned(slot).__setitem__(clip_index(i, slot[0].shape[0]), v) or [],
    Op.SLOT_ADD_SLICE: lambda node, slot, v: _add_region(slot, v, **node.attrs),
    Op.TABLE_GEMM_ADD: lambda node, slot, x, y, count: _table_gemm_add(slot, x, y, int(count), node.attrs["rows"]),
    Op.MATMUL_ADD: lambda node, slot, a, b: _slot_set(slot, IMPLS[Op.MATMUL](a, b, node.attrs["ta"], node.attrs["tb"])
                                                      + (0 if node.attrs.get("store") else slot[0])),
    Op.APPLY: lambda node, cont, *args: cont(*args) or [],
}


# the steps of the slot operations reverse mode is made of (a third to a half of the nodes of
# a gradient as the interpreter meets it), written out: `_EFFECTS`'s meaning without the
# general step's lists of operands and outputs

def _new_slot_step(node, ins, at, dead):
    t = node.attrs["type"]

    def step(env):
        env[at] = _new_slot(t)
    return step


def _slot_get_step(node, ins, at, dead):
    (s,), dt = ins, _DTYPES[node.outputs[0].type.dtype]
    scalar = None if node.outputs[0].type.shape else dt.type

    def step(env):
        slot = env[s]
        del slot[1:]   # (the value read is shared: the next update copies)
        v = slot[0]
        env[at] = v if type(v) is scalar or type(v) is _ND and v.dtype is dt and v.ndim else _cast(v, dt)
        for i in dead:
            env[i] = None
    return step


def _slot_update_step(update):
    def make(node, ins, at, dead):
        s, x = ins

        def step(env):
            update(env[s], env[x])
            for i in dead:
                env[i] = None
        return step
    return make


# a slot that only its own graph's reads, sets and additions take (no call, closure, body or
# output gets it: `_held_slots`) is held as a plain value in the plan: its start is a
# constant, an addition makes a new value (no copy on write, no list), a read is the value

def _held_slots(graph):
    """The slots of `graph` that only `slot_get`, `slot_set` and `slot_add` nodes of `graph`
    take (as their slot operand)."""
    held = {node.outputs[0] for node in graph.nodes if node.op == Op.SLOT}
    if held:
        for node in graph.nodes:
            for v in node.inputs[1:] if node.op in _HELD_STEPS else node.inputs:
                held.discard(v)
        held.difference_update(graph.outputs)
    return held


def _held_get_step(node, ins, at, dead):
    (s,), dt = ins, _DTYPES[node.outputs[0].type.dtype]
    scalar = None if node.outputs[0].type.shape else dt.type

    def step(env):
        v = env[s]
        env[at] = v if type(v) is scalar or type(v) is _ND and v.dtype is dt and v.ndim else _cast(v, dt)
        for i in dead:
            env[i] = None
    return step


def _held_update_step(add):
    def make(node, ins, at, dead):
        (s, x), t = ins, node.inputs[0].type
        dt, tensor = _DTYPES[t.dtype], bool(t.shape)

        def step(env):
            if not add:
                env[s] = env[x]
            elif tensor:   # (the slot's dtype and shape, as the addition in place gives them)
                v = np.add(env[s], env[x])
                env[s] = v if v.dtype is dt else v.astype(dt)
            else:
                env[s] = env[s] + env[x]
            for i in dead:
                env[i] = None
        return step
    return make


_HELD_STEPS = {Op.SLOT_GET: _held_get_step, Op.SLOT_ADD: _held_update_step(True),
               Op.SLOT_SET: _held_update_step(False)}


_SLOT_STEPS = {Op.SLOT: _new_slot_step, Op.SLOT_GET: _slot_get_step, Op.SLOT_ADD: _slot_update_step(_slot_add),
               Op.SLOT_SET: _slot_update_step(_slot_set)}


def _failed(message):
    raise float_checks.error_class(message)(message)


def _table_gemm_add(slot, x, y, count, rows):
    xs, ys = x[:count].reshape(count * rows, -1), y[:count].reshape(count * rows, -1)
    return _slot_set(slot, slot[0] + xs.T @ ys)


def _add_region(slot, value, starts, stops, steps):
    owned = _owned(slot)
    index = tuple(map(slice, starts, stops, steps))
    region = owned[index]
    if type(region) is np.ndarray:   # (a view: added in place, as `+=` does, without its store back)
        np.add(region, value, out=region)
    else:
        owned[index] += value
    return []


def _add_at(slot, index, value, skip_outside=False):
    if skip_outside:   # no row for an index outside the slot's rows
        keep = (np.asarray(index) >= 0) & (np.asarray(index) < slot[0].shape[0])
        index, value = np.asarray(index)[keep], np.asarray(value)[keep]
    np.add.at(_owned(slot), clip_index(index, slot[0].shape[0]), value)
    return []


control = registrar(_CONTROL)


@control(Op.CHECK)
def _check(node, ins, it):
    if ins[0]:
        it.failed(node.attrs["message"])
    return []


@control(Op.CLOSURE)
def _closure(node, caps, it):
    body = node.attrs["fun"].body
    return [lambda *args: it.run(body, list(args) + caps)]


@control(Op.IF)
def _if(node, ins, it):
    return it.run(node.bodies[0] if ins[0] else node.bodies[1], ins[1:])


@control(Op.WHILE)
def _while(node, ins, it):
    _, state, caps = split_operands(node, ins)
    cond, body = node.bodies
    while it.run(cond, state + caps)[0]:
        state = it.run(body, state + caps)
    return state


@control(Op.FOR)
def _for(node, ins, it):
    (lower, upper), state, caps = split_operands(node, ins)
    for i in range(int(lower), int(upper)):
        state = it.run(node.bodies[0], [np.int64(i)] + state + caps)
    return state


@control(*CALLS)
def _call(node, ins, it):
    return it.run(node.attrs["fun"].body, ins)


@control(Op.TREE)
def _tree(node, ins, it):
    (tree,), init, caps = split_operands(node, ins)

    def rec(k):
        if k < 0:
            return init
        return it.run(node.bodies[0], [np.int64(k)] + rec(tree.left[k]) + rec(tree.right[k]) + caps)
    return rec(tree.root)
