"""Reverse mode by continuation-passing style (the Lantern design).

`cps(graph, duals, k)` runs a traced graph on *duals* — a staged primal and, when
the value carries a gradient, a staged adjoint slot — and emits, into the current
trace, code that computes the graph forward, calls the continuation `k` on the
outputs, and then propagates adjoints backwards through the graph's nodes:

- straight-line nodes: forward in order, `k`, then each node's VJP in reverse order,
  accumulating into adjoint slots (allocas, promoted to registers by LLVM);
- `IF`: the rest of the graph is reified once as a closure, applied from both branches;
- `WHILE`/`FOR`: a recursive function; each iteration's values live in its frame and
  its adjoints are propagated when the recursive call has returned;
- `FUN` (`call`): a CPS version of the function taking its continuation as a closure;
- `TREE`: a recursive CPS function over node indices with nested continuations.

Nodes without any gradient-carrying input are re-staged unchanged.
"""
import sys
import threading
from contextlib import contextmanager

import numpy as np

from ..ir.dce import live_nodes
from ..ir.graph import split_operands
from ..ir.ops import Op
from ..primitives.rules import Region, Sparse, unbroadcast
from ..ir.types import FLOATS, RefType, Type
from ..errors import ArgumentError, ShapeError
from ..pytree import flatten, unflatten
from ..staging import (FUN, IF, Staged, StagedTree, apply, as_var, coerce, current_frame, emit, is_staged,
                       make_closure, new_slot, slot_add, slot_get, substitution, trace_memo)
from .restage import restage, restage_node, run_graph


class Dual:
    """A staged primal value and its adjoint slot (None when no gradient flows)."""
    __slots__ = ("primal", "adj")

    def __init__(self, primal, adj=None):
        self.primal, self.adj = primal, adj


def differentiable(t):
    return isinstance(t, Type) and t.dtype in FLOATS


def new_duals(primals, types):
    """Duals of `primals` with fresh adjoint slots (none where `types` carry no gradient)."""
    return [Dual(x, new_slot(t) if differentiable(t) else None) for x, t in zip(primals, types)]


# -- flattening duals for closures and recursive functions ------------------------

def dual_types(types):
    out = []
    for t in types:
        out.append(t)
        if differentiable(t):
            out.append(RefType(t.dtype, t.shape))
    return out


def pack(duals, types):
    """Flat staged values for `duals` of `types`; a missing adjoint becomes a fresh slot."""
    flat = []
    for d, t in zip(duals, types):
        flat.append(d.primal)
        if differentiable(t):
            flat.append(d.adj if d.adj is not None else new_slot(t))
    return flat


def unpack(flat, types):
    duals, k = [], 0
    for t in types:
        if differentiable(t):
            duals.append(Dual(flat[k], flat[k + 1]))
            k += 2
        else:
            duals.append(Dual(flat[k]))
            k += 1
    return duals, list(flat[k:])


def closure(k, types, name):
    """Reify the continuation `k` (a Python function of duals) as a staged closure."""
    return make_closure(lambda *flat: k(unpack(flat, types)[0]), dual_types(types), name)


def resume(cont, types):
    """A Python continuation that applies the staged continuation `cont`."""
    return lambda outs: apply(cont, pack(outs, types))


# -- the CPS interpreter ---------------------------------------------------------

_state = threading.local()   # per transformation: old var -> new var, new var -> adjoint slot


def _bind(env, old_vars, duals):
    for v, d in zip(old_vars, duals):
        env[v] = d
        if isinstance(d.primal, (Staged, StagedTree)):
            _state.subst[v] = d.primal.var
            if d.adj is not None:
                _state.adjoints[d.primal.var] = d.adj


def adjoint_of(var):
    """The adjoint slot of a staged value in the reverse pass being emitted, or None."""
    adjoints = getattr(_state, "adjoints", None)
    return adjoints.get(var) if adjoints else None


def cps(graph, duals, k):
    env = {}
    _bind(env, graph.params, duals)
    # dead nodes stay out of the backward pass: a zero adjoint times an infinite or NaN
    # partial (the unused log(x) term forward mode emits for x ** 2 at x < 0) is NaN
    _run(live_nodes(graph), env, graph.outputs, k)


def _primal(node, ins):
    """A node's staged values: replayed from a loop's table when the forward loop stored
    them (see `stored_values`), else emitted again."""
    replay = getattr(_state, "replay", None)
    if replay and id(node) in replay:
        return replay[id(node)]
    return restage_node(node, [d.primal for d in ins])


def _run(nodes, env, outputs, k):
    tape = []
    for i, node in enumerate(nodes):
        ins = [env[v] for v in node.inputs]
        if all(d.adj is None for d in ins) or node.op == Op.STOP_GRADIENT:   # no adjoints to carry
            outs = _primal(node, ins)
            _bind(env, node.outputs, [Dual(o) for o in outs])
            continue
        if node.op == Op.CALL and "custom" in node.attrs:
            tape.append(_custom_forward(node, ins, env))
            continue
        if node.op in CONTROL:
            rest = nodes[i + 1:]

            def k_rest(outs, node=node):
                env_rest = dict(env)
                _bind(env_rest, node.outputs, outs)
                _run(rest, env_rest, outputs, k)
            CONTROL[node.op](node, ins, k_rest)
            break
        outs = _primal(node, ins)
        duals = new_duals(outs, [v.type for v in node.outputs])
        _bind(env, node.outputs, duals)
        tape.append((node, ins, duals, None))
    else:
        k([env[v] for v in outputs])
    for node, ins, outs, residuals in reversed(tape):
        if residuals is None:
            _backprop(node, ins, outs)
        else:
            _custom_backward(node, ins, outs, residuals)


def _custom_forward(node, ins, env):
    """A `custom_vjp` call: the user's fwd rule, staged here, replaces the body."""
    rule, in_td = node.attrs["custom"], node.attrs["in_td"]
    args = unflatten(in_td, [d.primal for d in ins[:in_td.num_leaves]])
    out, residuals = rule.fwd(*args)
    leaves, out_td = flatten(out)
    if len(leaves) != len(node.outputs):
        raise ArgumentError(f"custom_vjp `{rule.__name__}`: fwd returned {len(leaves)} outputs "
                            f"where the function returns {len(node.outputs)}")
    outs = [Staged(coerce(x, v.type, f"custom_vjp `{rule.__name__}` fwd output")) for x, v in zip(leaves, node.outputs)]
    duals = new_duals(outs, [v.type for v in node.outputs])
    _bind(env, node.outputs, duals)
    return node, ins, duals, (out_td, residuals)


def _custom_backward(node, ins, outs, residuals):
    from ..ad.forward import zeros
    rule, in_td = node.attrs["custom"], node.attrs["in_td"]
    out_td, res = residuals
    g = unflatten(out_td, [slot_get(d.adj) if d.adj is not None else zeros(v.type)
                           for d, v in zip(outs, node.outputs)])
    cts = rule.bwd(res, g)
    cts = tuple(cts) if isinstance(cts, (tuple, list)) else (cts,)
    leaves = flatten(cts)[0]
    if len(leaves) != in_td.num_leaves:
        raise ArgumentError(f"custom_vjp `{rule.__name__}`: bwd returned {len(leaves)} cotangents "
                            f"for {in_td.num_leaves} argument leaves; return one per argument, as a tuple")
    for k, (d, ct) in enumerate(zip(ins, leaves)):
        if d.adj is not None and ct is not None:
            shape, ct_shape = d.primal.shape, tuple(ct.shape if is_staged(ct) else np.shape(ct))
            if ct_shape != shape and not (is_staged(ct) and _broadcasts_to(shape, ct_shape)):
                raise ShapeError(f"custom_vjp `{rule.__name__}`: bwd returned a cotangent of shape "
                                 f"{ct_shape} for argument leaf {k} of shape {shape}; each cotangent "
                                 "must have its argument's shape")
            slot_add(d.adj, unbroadcast(ct, shape) if is_staged(ct) else ct)


def _broadcasts_to(shape, big):
    try:
        return np.broadcast_shapes(shape, big) == big
    except ValueError:
        return False


@contextmanager
def arena_scope(enabled=True):
    """Tensors allocated inside are freed at its end (only adjoints in older slots survive)."""
    mark = Staged(emit(Op.ARENA_MARK, [])[0]) if enabled else None
    yield
    if enabled:
        emit(Op.ARENA_RELEASE, [mark.var])


def _backprop(node, ins, outs):
    (out,) = outs
    if out.adj is None:
        return
    # the cotangents computed here are dead once added into their slots
    with arena_scope(any(getattr(v.type, "shape", ()) for v in list(node.inputs) + list(node.outputs))):
        _backprop_node(node, ins, out)


def _backprop_node(node, ins, out):
    rule = node.op.vjp
    assert rule is not None, f"no VJP rule for {node.op.value}"
    g = slot_get(out.adj)
    deferred = getattr(_state, "deferred", None)
    handled = deferred.take(node, ins, g) if deferred is not None and node.op == Op.MATMUL else ()
    transposed = getattr(_state, "transposed", None)
    if transposed and node.op == Op.MATMUL and 0 not in handled and ins[0].adj is not None \
            and not node.attrs["ta"] and not node.attrs["tb"] and ins[1].primal.var in transposed:
        from ..numeric import matmul_t   # a @ W's input cotangent g @ W^T, W^T made before the loop
        slot_add(ins[0].adj, matmul_t(g, transposed[ins[1].primal.var]))
        handled = tuple(handled) + (0,)
    cts = rule(g, *[d.primal for d in ins], out.primal, **node.attrs)
    for pos, (d, ct) in enumerate(zip(ins, cts)):
        if d.adj is None or ct is None or pos in handled:
            continue   # (a cotangent left unused here is dead code, removed before lowering)
        if isinstance(ct, Sparse):
            op = Op.SLOT_ADD_AT if ct.index.shape == () else Op.SLOT_SCATTER_ADD
            emit(op, [d.adj.var, ct.index.var, as_var(ct.value, d.adj.var.type.dtype)])
        elif isinstance(ct, Region):
            emit(Op.SLOT_ADD_SLICE, [d.adj.var, ct.value.var], ct.attrs)
        else:
            slot_add(d.adj, unbroadcast(ct, d.primal.shape))


def _types(vars_):
    return [v.type for v in vars_]


def _if(node, ins, k):
    types = _types(node.outputs)
    kc = closure(k, types, "k_if")

    def branch(body):
        return lambda: cps(body, ins[1:], resume(kc, types))
    IF(ins[0].primal, branch(node.bodies[0]), branch(node.bodies[1]))


def _loop(name, types, cap_types, step):
    """A recursive staged function `loop(*extra, *state, *caps, k)`; `step(extra, state,
    caps, k, loop)` emits one iteration (or the exit)."""
    def body(*flat):
        n_extra = len(flat) - len(dual_types(types)) - len(dual_types(cap_types)) - 1
        extra = list(flat[:n_extra])
        state, rest = unpack(flat[n_extra:], types)
        caps, rest = unpack(rest, cap_types)
        step(extra, state, caps, rest[0], loop)
        return ()
    loop = FUN(body, out=())
    loop.__name__ = name
    return loop


def _while(node, ins, k):
    _, state_in, caps_in = split_operands(node, ins)
    types, cap_types = _types(node.outputs), _types(split_operands(node)[2])
    cond, body = node.bodies

    def step(extra, state, caps, kk, loop):
        primals = [d.primal for d in state + caps]
        go_on = restage(cond, primals)[0]
        IF(go_on,
           lambda: cps(body, state + caps,
                       lambda new: loop(*pack(new, types), *pack(caps, cap_types), kk)),
           lambda: apply(kk, pack(state, types)))

    loop = _loop("while_rev", types, cap_types, step)
    loop(*pack(state_in, types), *pack(caps_in, cap_types), closure(k, types, "k_while"))


# Values a loop body's backward pass reads from a table filled by the forward loop
# instead of recomputing them: those of ops flagged "stored" (products and
# transcendental functions) on tensors.


def _body_nodes(graph):
    """The live nodes of a loop body and of its IF branches (a branch runs at most once an
    iteration, and the backward pass runs the same branch)."""
    for n in live_nodes(graph):
        yield n
        if n.op == Op.IF:
            for branch in n.bodies:
                yield from _body_nodes(branch)


class stored_values:
    """The expensive values of a loop body, kept per iteration (or tree node): products
    and transcendental functions of tensors at its top level and inside its IF branches
    (a branch runs at most once an iteration, and its backward pass runs in the same
    branch). `run(args, entry)` restages the body and stores them at `entry`;
    `replaying(entry)` makes the backward pass's restaging of the body read them back."""

    def __init__(self, body, count):
        self.body = body
        self.nodes = [n for n in _body_nodes(body) if n.op.stored and n.outputs[0].type.shape]
        self.tables = [new_table(count, n.outputs[0].type, written_first=True) for n in self.nodes]

    def run(self, args, entry):
        keep = {id(n): tab for n, tab in zip(self.nodes, self.tables)}

        def rule(node, xs):
            if node.op == Op.IF:
                branch = lambda g: lambda *a: tuple(run_graph(g, list(a), rule))
                outs = IF(xs[0], branch(node.bodies[0]), branch(node.bodies[1]), *xs[1:])
                return list(outs) if isinstance(outs, tuple) else [outs]
            outs = restage_node(node, xs)
            if id(node) in keep:
                emit(Op.TABLE_SET, [keep[id(node)].var, entry.var, outs[0].var])
            return outs
        return run_graph(self.body, args, rule)

    @contextmanager
    def replaying(self, entry):
        saved = getattr(_state, "replay", None)
        _state.replay = {**(saved or {}), **{id(n): [at(tab, entry)] for n, tab in zip(self.nodes, self.tables)}}
        try:
            yield
        finally:
            _state.replay = saved


class deferred_weight_grads:
    """The weight gradients of a loop body's matrix products, batched. A product of an
    iteration value with a loop-invariant matrix W (a weight the loop captures) adds an
    outer product (or a thin product) into W's adjoint every iteration: a pass over W per
    iteration. Instead each backward iteration stores the two factors in tables, and one
    `table_gemm_add` after the loop adds them all: one GEMM whose depth is the number of
    iterations times the factors' rows.

    `shared`: tables the backward iteration reads at an entry that runs over all of
    [0, count) exactly once (FOR's state and stored values). A factor read from one of
    them is not copied: its table is used as is, and the other factor is stored at the
    same entry."""

    def __init__(self, body, caps, count, shared=()):
        self.plan = {}
        self.count, self.entry, self.shared = count, None, shared
        self._scan(body, dict(zip(body.params[len(body.params) - len(caps):], caps)), False)

    def _scan(self, graph, params, conditional):
        """Plan the products of `graph` (and of IF branches in it: they run at most once an
        iteration; their tables start zeroed, for the iterations that take the other branch).
        Dead products are left out: the backward pass skips them, so would not fill their tables."""
        for n in live_nodes(graph):
            if n.op == Op.IF:
                for branch in n.bodies:
                    inner = {bp: params[v] for bp, v in zip(branch.params, n.inputs[1:]) if v in params}
                    self._scan(branch, inner, True)
            if n.op != Op.MATMUL:
                continue
            ta, tb = n.attrs["ta"], n.attrs["tb"]
            for pos, v in enumerate(n.inputs):
                d = params.get(v)
                if d is None or d.adj is None or n.inputs[1 - pos] in params:
                    continue
                other, out = n.inputs[1 - pos].type, n.outputs[0].type
                if pos == 1 and not ta:            # z = a @ op(W): dW = a^T g, or g^T a if W is transposed
                    x_t, y_t, rows, first = (other, out, other.shape[0], "other") if not tb \
                        else (out, other, other.shape[0], "g")
                elif pos == 0 and not ta and not tb and other.shape[1] == 1:   # z = W @ b, b a column
                    x_t, y_t, rows, first = out, other, 1, "g"
                else:
                    continue
                self.plan[id(n), pos] = [d.adj, new_table(self.count, x_t, written_first=not conditional),
                                         new_table(self.count, y_t, written_first=not conditional), rows,
                                         first, conditional]

    def _shared_read(self, value):
        """(table, entry) if `value` was read in this iteration from a `shared` table."""
        frame = current_frame()
        node = next((n for n in reversed(frame.graph.nodes) if value.var in n.outputs), None)
        if node is None or node.op != Op.TABLE_GET:
            return None
        for tab in self.shared:
            if node.inputs[0] is frame.captures.get(tab.var, tab.var):
                return tab, Staged(node.inputs[1])
        return None

    def take(self, node, ins, g):
        """Store this iteration's factors for the planned inputs of `node`; their positions.
        A factor read from a `shared` table replaces its planned table (left unused)."""
        handled = []
        for pos in (0, 1):
            planned = self.plan.get((id(node), pos))
            if planned is None:
                continue
            _, tab_x, tab_y, _, first, conditional = planned
            other = ins[1 - pos].primal
            source = None if conditional else self._shared_read(other)
            entry = source[1] if source else self.entry
            tab_g, tab_other = (tab_y, tab_x) if first == "other" else (tab_x, tab_y)
            if source:
                tab_other = source[0]
                planned[1 if first == "other" else 2] = tab_other
            else:
                emit(Op.TABLE_SET, [tab_other.var, entry.var, other.var])
            emit(Op.TABLE_SET, [tab_g.var, entry.var, g.var])
            handled.append(pos)
        return handled

    @contextmanager
    def collecting(self, entry):
        saved, self.entry = getattr(_state, "deferred", None), entry
        _state.deferred = self if self.plan else None
        try:
            yield
        finally:
            _state.deferred = saved

    def flush(self):
        for slot, tab_x, tab_y, rows, _, _ in self.plan.values():
            emit(Op.TABLE_GEMM_ADD, [slot.var, tab_x.var, tab_y.var, self.count.var], {"rows": rows})


class loop_invariant_transposes:
    """The transposes of the matrices a loop body multiplies by on the right (x @ W, W
    captured), made once before the backward loop: each iteration's input cotangent
    g @ W^T is then an untransposed product (register tiles, not BLAS's transposed path:
    ~2x faster at 20×50 @ 50×50). A context for the backward body."""

    def __init__(self, body, caps):
        by_param = dict(zip(body.params[len(body.params) - len(caps):], caps))
        weights = {n.inputs[1] for n in _body_nodes(body)
                   if n.op == Op.MATMUL and not n.attrs["ta"] and not n.attrs["tb"]}
        self.map = {}
        for v in weights:
            d = by_param.get(v)
            if d is not None and len(v.type.shape) == 2 and v.type.dtype in FLOATS:
                from ..numeric import transpose
                self.map[d.primal.var] = transpose(d.primal)

    def __enter__(self):
        self.saved = getattr(_state, "transposed", None)
        _state.transposed = {**(self.saved or {}), **self.map}

    def __exit__(self, *exc):
        _state.transposed = self.saved


def _for(node, ins, k):
    """FOR by two loops instead of recursion (its trip count is known when it starts):
    the forward loop keeps the state entering each iteration, and the body's products
    and transcendental values, in tables; after the continuation, the backward loop runs
    the iterations in reverse, recomputing the rest of each body from its stored state,
    and carries the state's adjoint as loop state."""
    from ..numeric import where
    from ..staging import FOR
    types, (body,) = [v.type for v in node.outputs], node.bodies
    (lower, upper), init, caps = split_operands(node, ins)
    lower, upper = lower.primal, upper.primal
    trips = where(upper > lower, upper - lower, 0)   # < 0 only if it overflowed: its tables fail
    tables = [new_table(trips, t, written_first=True) for t in types]
    stored = stored_values(body, trips)

    def forward(i, state):
        for tab, x in zip(tables, state):
            emit(Op.TABLE_SET, [tab.var, (i - lower).var, x.var])
        return tuple(stored.run([i] + list(state) + [d.primal for d in caps], i - lower))
    final = FOR(lower, upper, forward, tuple(d.primal for d in init))
    result = new_duals(final, types)
    k(result)

    active = [k_ for k_, t in enumerate(types) if differentiable(t)]
    weights = deferred_weight_grads(body, caps, trips, shared=tables + stored.tables)
    transposes = loop_invariant_transposes(body, caps)

    def backward(i_, adjoint):
        j = i_ - lower   # wraps only past 2^63 trips, whose tables (if any) failed already
        i = upper - 1 - j
        state = new_duals([at(tab, i - lower) for tab in tables], types)

        def seed(outs):
            for k_, g in zip(active, adjoint):
                if outs[k_].adj is not None:
                    slot_add(outs[k_].adj, g)
        with stored.replaying(i - lower), weights.collecting(j), transposes:
            cps(body, [Dual(i)] + state + caps, seed)
        return tuple(slot_get(state[k_].adj) for k_ in active)
    adjoint = FOR(lower, upper, backward, tuple(slot_get(result[k_].adj) for k_ in active))
    weights.flush()
    for k_, g in zip(active, adjoint if isinstance(adjoint, tuple) else (adjoint,)):
        if init[k_].adj is not None:
            slot_add(init[k_].adj, g)


def _checkpoint(node, ins, k):
    """Run the function forward keeping nothing but its results, run the rest of the
    program, then recompute the function with reverse mode, seeded by the adjoints of
    its results."""
    fundef = node.attrs["fun"]
    out_types = list(fundef.out_types)
    outs = restage_node(node, [d.primal for d in ins])
    duals = new_duals(outs, out_types)
    k(duals)

    def seed(recomputed):
        for d, first in zip(recomputed, duals):
            if d.adj is not None and first.adj is not None:
                slot_add(d.adj, slot_get(first.adj))
    with arena_scope():   # the recomputed values are dead once the inputs' adjoints are in
        cps(fundef.body, ins, seed)


def _call(node, ins, k):
    if node.attrs.get("checkpoint"):
        return _checkpoint(node, ins, k)
    fundef = node.attrs["fun"]
    in_types, out_types = fundef.body.in_types, list(fundef.out_types)
    memo = trace_memo()
    fun = memo.get(("cps", fundef))
    if fun is None:
        def body(*flat):
            args, rest = unpack(flat, in_types)
            cps(fundef.body, args, resume(rest[0], out_types))
            return ()
        fun = FUN(body, out=())
        fun.__name__ = fundef.name + "_rev"
        memo[("cps", fundef)] = fun
    fun(*pack(ins, in_types), closure(k, out_types, "k_" + fundef.name))


def new_table(count, t, written_first=False):
    """A table of `count` entries of type `t`, zeroed unless every entry is written
    before it is read (`written_first`)."""
    return Staged(emit(Op.TABLE, [count.var], {"type": t, "uninit": True} if written_first else {"type": t})[0])


def at(table, i):
    return Staged(emit(Op.TABLE_GET, [table.var, i.var])[0])


def _tree(node, ins, k):
    """TREE by two loops over the tree's post-order instead of recursion: the forward
    loop keeps each node's state in a table; after the continuation, the backward loop
    visits parents before children, recomputes each node's combine from its children's
    states (products and transcendental values come from tables) and propagates the
    node's adjoint (held in a second table) to its children and to captured values.
    Node v lives at entry v + 1 and entry 0 stands for the empty subtree (child -1): it
    holds the init value, and collects the init's adjoint."""
    from ..staging import FOR
    types, (combine,) = [v.type for v in node.outputs], node.bodies
    (tree,), init, caps = split_operands(node, ins)
    tree = tree.primal
    get = lambda field, i: Staged(emit(Op.TREE_GET, [tree.var, i.var], {"field": field})[0])
    entries = Staged(emit(Op.TREE_SIZE, [tree.var], {"word": "size"})[0]) + 1
    count = Staged(emit(Op.TREE_SIZE, [tree.var], {"word": "reachable"})[0])
    states = [new_table(entries, t, written_first=True) for t in types]
    zero = as_var(0, "i64")
    for tab, d in zip(states, init):
        emit(Op.TABLE_SET, [tab.var, zero, d.primal.var])
    state_of = lambda child: [at(tab, child + 1) for tab in states]
    stored = stored_values(combine, entries)

    def forward(j, _):
        v = get("order", j)
        outs = stored.run([v] + state_of(get("left", v)) + state_of(get("right", v))
                          + [d.primal for d in caps], v + 1)
        for tab, o in zip(states, outs):
            emit(Op.TABLE_SET, [tab.var, (v + 1).var, o.var])
        return ()
    FOR(0, count, forward, ())
    root = Staged(emit(Op.TREE_ROOT, [tree.var])[0])
    result = new_duals(state_of(root), types)
    k(result)

    adjoints = [new_table(entries, t) if differentiable(t) else None for t in types]
    weights = deferred_weight_grads(combine, caps, count)

    def add_to(child, slots):
        for tab, slot in zip(adjoints, slots):
            if tab is not None and slot is not None:
                emit(Op.TABLE_ADD, [tab.var, (child + 1).var, slot_get(slot).var])

    def take(duals, entry):   # add the adjoints' entry to the duals' adjoints
        for d, tab in zip(duals, adjoints):
            if d.adj is not None and tab is not None:
                slot_add(d.adj, at(tab, entry))
    add_to(root, [d.adj for d in result])

    def backward(j, _):
        v = get("order", count - 1 - j)
        kids = [get("left", v), get("right", v)]
        child_duals = [new_duals(state_of(c), types) for c in kids]
        with stored.replaying(v + 1), weights.collecting(j):
            cps(combine, [Dual(v)] + child_duals[0] + child_duals[1] + caps, lambda outs: take(outs, v + 1))
        for c, duals in zip(kids, child_duals):
            add_to(c, [d.adj for d in duals])
        return ()
    FOR(0, count, backward, ())
    weights.flush()
    take(init, Staged(zero))   # what reached the empty subtrees


CONTROL = {Op.IF: _if, Op.WHILE: _while, Op.FOR: _for, Op.CALL: _call, Op.TREE: _tree}


def value_and_grad_staged(program, args, wrt, seeds=((0, 1.0),)):
    """Emit, into the current trace, `program.main` on the staged flat `args` with
    reverse mode w.r.t. the flat indices `wrt`, output k's cotangent being `ct` for each
    `(k, ct)` in `seeds`; return (outputs, gradients) staged."""
    main = program.main
    duals = [Dual(a, new_slot(p.type) if k in wrt else None)
             for k, (a, p) in enumerate(zip(args, main.params))]
    results = [new_slot(v.type) for v in main.outputs]

    def finish(outs):
        for slot, d in zip(results, outs):
            emit(Op.SLOT_SET, [slot.var, d.primal.var])
        for k, ct in seeds:
            if outs[k].adj is not None:
                slot_add(outs[k].adj, ct)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))   # one Python level per sequential control node
    saved = getattr(_state, "subst", None), getattr(_state, "adjoints", None)
    _state.subst, _state.adjoints = {}, dict(saved[1] or {})
    try:
        with substitution(_state.subst):
            cps(main, duals, finish)
    finally:
        sys.setrecursionlimit(limit)
        _state.subst, _state.adjoints = saved
    return [slot_get(s) for s in results], [slot_get(duals[k].adj) for k in wrt]
