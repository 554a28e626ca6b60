"""Reverse mode by continuation-passing style (the Lantern design).

`cps(rv, graph, duals, k)` runs a traced graph on *duals* — a staged primal and, when
the value carries a gradient, a staged adjoint slot — and emits, into the current
trace, code that computes the graph forward, calls the continuation `k` on the
outputs, and then propagates adjoints backwards through the graph's nodes:

- straight-line nodes: forward in order, `k`, then each node's VJP in reverse order,
  accumulating into adjoint slots (allocas, promoted to registers by LLVM);
- `IF`: the rest of the graph is reified once as a closure, applied from both branches;
- `WHILE`: a recursive function; each iteration's values live in its frame and its
  adjoints are propagated when the recursive call has returned;
- `FOR` (and `TREE`, over the tree's post-order): a forward loop storing each
  iteration's state in a table, the continuation, then a backward loop; what else the
  forward loop stores for it is the loop tape (`jitad.transforms.tape`);
- `FUN` (`call`): a CPS version of the function taking its continuation as a closure.

Nodes without any gradient-carrying input are re-staged unchanged. A `Reverse` object
holds the transformation's state and is passed to every rule.
"""
import sys
from contextlib import contextmanager
from functools import partial

import numpy as np

from ..ir import float_checks
from ..ir.dce import live_nodes
from ..ir.graph import split_operands, walk
from ..ir.ops import VJP, Op
from ..primitives.rules import Region, Sparse, unbroadcast
from ..ir.types import FLOATS, RefType, Type
from ..errors import ArgumentError, ShapeError
from ..pytree import flatten, unflatten
from ..staging import (FUN, IF, Staged, StagedTree, apply, as_var, coerce, emit, is_staged,
                       make_closure, new_slot, slot_add, slot_get, slot_touched, trace_memo, trace_program,
                       transforming, transformation, wrap)
from .base import pack_pairs, restage, restage_node, run_graph, unpack_pairs
from .tape import ForestTape, at, body_nodes, deferred_weight_grads, loop_invariant_transposes, new_table, output_rows, stored_values


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
    """The flat types of duals of `types`: each differentiable one followed by its slot's."""
    return [x for t in types for x in ((t, RefType(t.dtype, t.shape)) if differentiable(t) else (t,))]


def pack(duals, types):
    """Flat staged values for `duals` of `types`; a missing adjoint becomes a fresh slot."""
    return pack_pairs([(d.primal, d.adj) for d in duals], types, differentiable, new_slot)


def unpack(flat, types):
    """Duals of `types` from the start of `flat` (see `pack`), and the rest of `flat`."""
    pairs, rest = unpack_pairs(flat, types, differentiable)
    return [Dual(p, adj) for p, adj in pairs], rest


def closure(k, types, name):
    """Reify the continuation `k` (a Python function of duals) as a staged closure."""
    return make_closure(lambda *flat: k(unpack(flat, types)[0]), dual_types(types), name)


def resume(cont, types):
    """A Python continuation that applies the staged continuation `cont`."""
    return lambda outs: apply(cont, pack(outs, types))


# -- the CPS interpreter ---------------------------------------------------------

class Reverse:
    """One reverse-mode transformation being emitted, passed to every rule: `subst` (old
    var -> new var; `emit` reads it too, for custom rules' closures) and `adjoints` (new
    var -> adjoint slot, inherited from an enclosing transformation); inside a loop's
    backward body, the loop tape in effect (`jitad.transforms.tape`): `replay` (node id -> the
    values the forward loop stored), `deferred` (weight gradients to batch, or None),
    `transposed` (W's var -> W^T made before the loop) and `rows` (node id -> the
    `output_rows` of the loop whose output row that scatter writes)."""
    __slots__ = ("subst", "adjoints", "replay", "deferred", "transposed", "rows", "in_backward_loop")

    def __init__(self, adjoints, subst=None, replay=None, deferred=None, transposed=None, rows=None):
        self.subst, self.adjoints = {} if subst is None else subst, adjoints
        self.replay, self.deferred, self.transposed = replay or {}, deferred, transposed or {}
        self.rows, self.in_backward_loop = rows or {}, False

    def in_loop(self, replay=None, deferred=None, transposed=None, rows=None):
        """The transformation of a loop's backward body, with that loop's tape."""
        rv = Reverse(self.adjoints, self.subst, {**self.replay, **(replay or {})}, deferred,
                     {**self.transposed, **(transposed or {})}, {**self.rows, **(rows or {})})
        rv.in_backward_loop = True
        return rv

    def bind(self, env, old_vars, duals):
        for v, d in zip(old_vars, duals):
            env[v] = d
            if isinstance(d.primal, (Staged, StagedTree)):
                self.subst[v] = d.primal._var
                if d.adj is not None:
                    self.adjoints[d.primal._var] = d.adj


def adjoint_of(var):
    """The adjoint slot of a staged value in the reverse pass being emitted, or None."""
    rv = transformation()
    return rv.adjoints.get(var) if isinstance(rv, Reverse) else None


def cps(rv, graph, duals, k):
    env = {}
    rv.bind(env, graph.params, duals)
    # dead nodes stay out of the backward pass: a zero adjoint times an infinite or NaN
    # partial (the unused log(x) term forward mode emits for x ** 2 at x < 0) is NaN
    _run(rv, live_nodes(graph), env, graph.outputs, k)


def _primal(rv, node, ins):
    """A node's staged values: replayed from a loop's table when the forward loop stored
    them (see `stored_values`), else emitted again."""
    if node.op in (Op.DEBUG_PRINT, Op.CHECK) and rv.in_backward_loop:   # the forward pass ran it already
        return []
    if id(node) in rv.replay:
        return rv.replay[id(node)]
    return restage_node(node, [d.primal for d in ins])


def _run(rv, nodes, env, outputs, k):
    backward_steps = []   # run in reverse order, after the forward pass
    for i, node in enumerate(nodes):
        ins = [env[v] for v in node.inputs]
        if node.op == Op.DEFERRED_VJP:
            backward_steps.append(_deferred_forward(rv, node, ins, env))
            continue
        if id(node) in rv.rows:   # a loop's output row (tape.output_rows): its own backward step
            rv.bind(env, node.outputs, [Dual(o) for o in _primal(rv, node, ins)])
            backward_steps.append(partial(rv.rows[id(node)].backprop, node, ins))
            continue
        if all(d.adj is None for d in ins) or node.op == Op.STOP_GRADIENT or \
                _unused_and_pure(node, nodes[i + 1:], outputs):   # no adjoints to carry
            outs = _primal(rv, node, ins)
            rv.bind(env, node.outputs, [Dual(o) for o in outs])
            continue
        if node.op == Op.CUSTOM_VJP:
            backward_steps.append(_custom_forward(rv, node, ins, env))
            continue
        if node.op in CONTROL:
            rest = nodes[i + 1:]

            def k_rest(outs, node=node):
                env_rest = dict(env)
                rv.bind(env_rest, node.outputs, outs)
                _run(rv, rest, env_rest, outputs, k)
            CONTROL[node.op](rv, node, ins, k_rest)
            break
        outs = _primal(rv, node, ins)
        duals = new_duals(outs, [v.type for v in node.outputs])
        rv.bind(env, node.outputs, duals)
        backward_steps.append(partial(_backprop, rv, node, ins, duals))
    else:
        k([env[v] for v in outputs])
    for step in reversed(backward_steps):
        step()


_LOOPS_AND_BRANCHES = (Op.IF, Op.WHILE, Op.FOR)


def _unused_and_pure(node, later, outputs):
    """Whether `node` is a loop or branch of pure operations whose outputs nothing after it (nor
    the result) reads: they get no cotangent, so its body is not differentiated (0 times a NaN
    or infinite partial there would be NaN). (One with effects, a slot written by a reverse pass
    that is differentiated again, say, is differentiated as before.)"""
    if node.op not in _LOOPS_AND_BRANCHES:
        return False
    outs = set(node.outputs)
    if outs & set(outputs) or any(outs & set(n.inputs) for n in later):
        return False
    return all(n.op.pure or n.op in _LOOPS_AND_BRANCHES for body in node.bodies for n in walk(body))


def _deferred_forward(rv, node, ins, env):
    """A `deferred_vjp` node (a gradient the differentiated function takes): its reverse
    pass emitted here; its backward step is `_deferred_backward` (or nothing without adjoints)."""
    program, wrt, seed_ks = node.attrs["program"], node.attrs["wrt"], node.attrs["seeds"]
    n = len(program.main.params)
    primals = [d.primal for d in ins]
    outs, grads = value_and_grad_staged(program, primals[:n], list(wrt), list(zip(seed_ks, primals[n:])))
    types = [v.type for v in node.outputs]
    if all(d.adj is None for d in ins):
        rv.bind(env, node.outputs, [Dual(o) for o in outs + grads])
        return lambda: None
    duals = new_duals(outs + grads, types)
    rv.bind(env, node.outputs, duals)
    return partial(_deferred_backward, node, ins, duals)


def _deferred_backward(node, ins, outs):
    """The cotangents of a deferred reverse pass `(P(a), J(a)^T c)` for adjoints `(u, v)` of
    its outputs: `J^T u + H v` for `a` (H: the Hessian of `c . P`) and `J v` for `c`, the
    tangents of `(a, s) -> (P(a), grad_a(s . P))` along `(v, u)` at `(a, c)`: one forward
    pass over the reverse pass (v is zero but where the pass gave gradients)."""
    from .jvp import jvp_graph, zeros
    program, wrt, seed_ks = node.attrs["program"], node.attrs["wrt"], node.attrs["seeds"]
    main = program.main
    n, m = len(main.params), len(main.outputs)
    floats_in = [k for k, p in enumerate(main.params) if differentiable(p.type)]
    floats_out = [j for j, v in enumerate(main.outputs) if differentiable(v.type)]
    seeds = {}
    for j, c in zip(seed_ks, ins[n:]):
        seeds[j] = seeds[j] + c.primal if j in seeds else c.primal
    adjoint = [slot_get(d.adj) if d.adj is not None else None for d in outs]
    along = dict(zip(wrt, adjoint[m:]))
    primals = [d.primal for d in ins[:n]] + [seeds[j] if j in seeds else zeros(main.outputs[j].type) for j in floats_out]
    tangents = [along.get(k) for k in range(n)] + [adjoint[j] for j in floats_out]

    def outputs_and_gradient(*flat):
        o, g = value_and_grad_staged(program, list(flat[:n]), floats_in, list(zip(floats_out, flat[n:])))
        return tuple(o) + tuple(g)
    types = [p.type for p in main.params] + [main.outputs[j].type for j in floats_out]
    with _as_written():
        traced, _, captured = trace_program(outputs_and_gradient, tuple(primals), flatten(tuple(primals))[1], types)
    result = jvp_graph(traced.main, list(zip(primals, tangents)) + [(wrap(v), None) for v in captured])
    tans = [t for _, t in result]
    for k, t in zip(floats_in, tans[m:]):
        if ins[k].adj is not None and t is not None:
            slot_add(ins[k].adj, t)
    for d, j in zip(ins[n:], seed_ks):
        if d.adj is not None and tans[j] is not None:
            slot_add(d.adj, tans[j])


# A reverse pass that `_deferred_backward` differentiates in forward mode takes the tangents
# of its values as the cotangents of the reverse pass's reverse pass: right where each step's
# derivative is symmetric, as jitad's own rules are. A custom_vjp rule's need not be (its bwd
# may disagree with its fwd), so while such a pass is staged (`_AS_WRITTEN`) its outputs take
# their tangents from the transpose of bwd, and bwd's result its tangent in the cotangent from
# the transpose of fwd: forward mode then gives what reverse mode over fwd and bwd as written
# gives (autograd's and JAX's second derivatives): `custom_vjp.outputs_as_written`,
# `custom_vjp.bwd_as_written`.
_AS_WRITTEN = [0]


@contextmanager
def _as_written():
    _AS_WRITTEN[0] += 1
    try:
        yield
    finally:
        _AS_WRITTEN[0] -= 1


def _custom_forward(rv, node, ins, env):
    """A `custom_vjp` call: the user's fwd rule, staged here, replaces the body."""
    rule, in_td = node.attrs["custom"], node.attrs["in_td"]
    args = unflatten(in_td, [d.primal for d in ins[:in_td.num_leaves]])
    with float_checks.derived(node):   # (jax_debug_nans: what fwd makes names the call's line)
        out, residuals = rule.fwd(*args)
        if _written_rule(node, residuals):
            out = rule.outputs_as_written(args)
    leaves, out_td = flatten(out)
    if len(leaves) != len(node.outputs):
        raise ArgumentError(f"custom_vjp `{rule.__name__}`: fwd returned {len(leaves)} outputs "
                            f"where the function returns {len(node.outputs)}")
    outs = [Staged(coerce(x, v.type, f"custom_vjp `{rule.__name__}` fwd output")) for x, v in zip(leaves, node.outputs)]
    duals = new_duals(outs, [v.type for v in node.outputs])
    rv.bind(env, node.outputs, duals)
    return partial(_custom_backward, node, ins, duals, (out_td, residuals))


def _custom_backward(node, ins, outs, residuals):
    from .jvp import zeros
    rule, in_td = node.attrs["custom"], node.attrs["in_td"]
    if not any(d.adj is not None and slot_touched(d.adj._var) for d in outs):
        return   # symbolic zeros: no output's cotangent came back, so bwd is not run (as JAX's)
    out_td, res = residuals
    g = unflatten(out_td, [slot_get(d.adj) if d.adj is not None else zeros(v.type)
                           for d, v in zip(outs, node.outputs)])
    with float_checks.gradient_of(node):
        if _written_rule(node, res):
            cts = rule.bwd_as_written(unflatten(in_td, [d.primal for d in ins[:in_td.num_leaves]]), res, g)
        else:
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


def _written_rule(node, residuals):
    """Whether this custom_vjp call (a user's rule, not a custom_jvp's transpose) is staged
    for `_as_written`, its residuals values a call can take."""
    return bool(_AS_WRITTEN[0]) and "custom_jvp" not in node.attrs and hasattr(node.attrs["custom"], "bwd_as_written") and all(
        is_staged(x) and x.ir_dtype in FLOATS or isinstance(x, (float, np.ndarray, np.floating))
        for x in flatten(residuals)[0])


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
        emit(Op.ARENA_RELEASE, [mark._var])


def _backprop(rv, node, ins, outs):
    (out,) = outs
    if out.adj is None or not slot_touched(out.adj._var):
        return   # a symbolic zero: no cotangent reached the output (0 times an infinite partial is NaN)
    # the cotangents computed here are dead once added into their slots
    with arena_scope(any(getattr(v.type, "shape", ()) for v in list(node.inputs) + list(node.outputs))), \
            float_checks.gradient_of(node):
        _backprop_node(rv, node, ins, out)


def _backprop_node(rv, node, ins, out):
    rule = VJP.lookup(node.op)
    g = slot_get(out.adj)
    handled = rv.deferred.take(node, ins, g) if rv.deferred is not None and node.op == Op.MATMUL else ()
    transposed = rv.transposed
    if transposed and node.op == Op.MATMUL and 0 not in handled and ins[0].adj is not None \
            and not node.attrs["ta"] and not node.attrs["tb"] and ins[1].primal._var in transposed:
        from ..numeric import matmul_t   # a @ W's input cotangent g @ W^T, W^T made before the loop
        slot_add(ins[0].adj, matmul_t(g, transposed[ins[1].primal._var]))
        handled = tuple(handled) + (0,)
    cts = rule(g, *[d.primal for d in ins], out.primal, **node.attrs)
    for pos, (d, ct) in enumerate(zip(ins, cts)):
        if d.adj is None or ct is None or pos in handled:
            continue   # (a cotangent left unused here is dead code, removed before lowering)
        if isinstance(ct, Sparse):
            op = Op.SLOT_ADD_AT if ct.index.shape == () else Op.SLOT_SCATTER_ADD
            emit(op, [d.adj._var, ct.index._var, as_var(ct.value, d.adj._var.type.dtype)])
        elif isinstance(ct, Region):
            emit(Op.SLOT_ADD_SLICE, [d.adj._var, ct.value._var], ct.attrs)
        else:
            slot_add(d.adj, unbroadcast(ct, d.primal.shape))


def _types(vars_):
    return [v.type for v in vars_]


def _if(rv, node, ins, k):
    types = _types(node.outputs)
    kc = closure(k, types, "k_if")

    def branch(body):
        return lambda: cps(rv, body, ins[1:], resume(kc, types))
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


def _while(rv, node, ins, k):
    """WHILE as a recursive function: an iteration's values live in its frame. With
    `checkpoints=c` only the first c // 4 iterations do (no recomputation: a short loop
    costs what it costs without checkpoints); a loop still running then goes on in
    `_while_rest`, keeping the other c - c // 4 states."""
    _, state_in, caps_in = split_operands(node, ins)
    types, cap_types = _types(node.outputs), _types(split_operands(node)[2])
    cond, body = node.bodies
    c = node.attrs.get("checkpoints")

    def step(extra, state, caps, kk, loop):   # extra: [] or, with checkpoints, [iterations so far]
        go_on = restage(cond, [d.primal for d in state + caps])[0]

        def iterate():
            cps(rv, body, state + caps, lambda new: loop(*[j + 1 for j in extra], *pack(new, types),
                                                         *pack(caps, cap_types), kk))
        more = iterate if c is None else \
            lambda: IF(extra[0] < c // 4, iterate, lambda: _while_rest(rv, node, state, caps, kk, c - c // 4))
        IF(go_on, more, lambda: apply(kk, pack(state, types)))

    loop = _loop("while_rev", types, cap_types, step)
    counter = [] if c is None else [Staged(as_var(0, "i64"))]
    loop(*counter, *pack(state_in, types), *pack(caps_in, cap_types), closure(k, types, "k_while"))


def _for(rv, node, ins, k):
    (lower, upper), init, caps = split_operands(node, ins)
    types, (body,) = _types(node.outputs), node.bodies
    if node.attrs.get("checkpoints") is not None:
        return _for_checkpointed(rv, node, ins, k)
    _for_taped(rv, types, body, lower.primal, upper.primal, init, caps, k)


def _for_taped(rv, types, body, lower, upper, init, caps, k, segment=False):
    """FOR by two loops instead of recursion (its trip count is known when it starts):
    the forward loop keeps each iteration's state (`_StateTables`), and the body's products
    and transcendental values, in tables; after the continuation, the backward loop runs
    the iterations in reverse, recomputing the rest of each body from its stored state,
    and carries the state's adjoint as loop state. A state the body only writes a row of
    (`output_rows`: scan's stacked outputs) is neither stored nor carried: O(row) an
    iteration, not O(buffer).

    `segment`: these steps are a segment of a checkpointed loop, whose first forward
    pass ran them already: the forward loop skips its prints and checks and the rows,
    and the rows' cotangents are in the slots of `init`'s duals (the whole loop's
    result adjoints)."""
    from ..numeric import where
    from ..staging import FOR
    trips = where(upper > lower, upper - lower, 0)   # < 0 only if it overflowed: its tables fail
    rows = output_rows(body, len(types))
    tables = {k_: new_table(trips, t, written_first=True) for k_, t in enumerate(types) if k_ not in rows.states}
    stored = stored_values(body, trips)
    carried = [k_ for k_ in range(len(types)) if not (segment and k_ in rows.states)]
    skip = _ran_already(body, rows.states) if segment else ()
    tables = _StateTables(body, types, tables, init, lower)

    def forward(i, state):
        full = [init[k_].primal for k_ in range(len(types))]
        for k_, x in zip(carried, state):
            full[k_] = x
        tables.keep(i, full, tables.entering)
        outs = stored.run([i] + full + [d.primal for d in caps], i - lower, skip)
        tables.keep(i, outs, tables.leaving)
        return tuple(outs[k_] for k_ in carried)
    final = FOR(lower, upper, forward, tuple(init[k_].primal for k_ in carried))
    final = dict(zip(carried, final if isinstance(final, tuple) else (final,)))
    result = [new_duals([final[k_]], [types[k_]])[0] if k_ in final else init[k_] for k_ in range(len(types))]
    k(result)

    _for_backward(rv, types, body, lower, upper, init, caps, tables, stored, rows, result, trips, segment)


class _StateTables:
    """The tables of a taped FOR's states, `k -> table`. A tensor state is kept as it
    leaves each step (entry e: after step lower + e), so the step makes it in its entry
    (no copy), and the first step's entering state is the loop's input, read where it
    is (no copy either: one step copied nothing). A state that a product of the body
    reads as is stays kept as it enters each step: the backward pass's weight GEMM reads
    that table whole (`deferred_weight_grads`' shared tables)."""

    def __init__(self, body, types, tables, init, lower):
        products = {v for n in body_nodes(body) if n.op == Op.MATMUL for v in n.inputs}
        self.tables, self.init, self.lower = tables, init, lower
        self.leaving = {k_ for k_ in tables if isinstance(types[k_], Type) and types[k_].shape
                        and body.params[1 + k_] not in products}
        self.entering = set(tables) - self.leaving

    def keep(self, i, values, which):
        """Store `values[k]` at step i's entry for each k in `which`; the state leaving the
        last step is never read (`ir.last_step`)."""
        attrs = {"last_unread": True} if which is self.leaving else {}
        for k_ in sorted(which):
            emit(Op.TABLE_SET, [self.tables[k_]._var, (i - self.lower)._var, values[k_]._var], attrs)

    def state(self, k_, i):
        """State k as it enters step i."""
        tab, e = self.tables[k_], i - self.lower
        if k_ in self.entering:
            return at(tab, e)
        return IF(e == 0, lambda: self.init[k_].primal, lambda: at(tab, e - 1))

    def shared(self):
        """The tables read at entry i - lower in step i."""
        return [self.tables[k_] for k_ in sorted(self.entering)]


def _for_backward(rv, types, body, lower, upper, init, caps, tables, stored, rows, result, trips, segment):
    """The backward loop of `_for_taped`: the iterations in reverse, each body recomputed
    from its stored state, the state's adjoint carried as loop state."""
    from ..staging import FOR
    active = [k_ for k_ in tables.tables if differentiable(types[k_])]
    weights = deferred_weight_grads(body, caps, trips, shared=tables.shared() + stored.tables)
    transposes = loop_invariant_transposes(body, caps)
    rows_replay, rows_rule = rows.start(result), dict.fromkeys(map(id, rows.states.values()), rows)

    def backward(i_, adjoint):
        j = i_ - lower   # wraps only past 2^63 trips, whose tables (if any) failed already
        i = upper - 1 - j
        kept = iter(new_duals([tables.state(k_, i) for k_ in tables.tables], [types[k_] for k_ in tables.tables]))
        state = [next(kept) if k_ in tables.tables else Dual(result[k_].primal) for k_ in range(len(types))]

        def seed(outs):
            for k_, g in zip(active, adjoint):
                if outs[k_].adj is not None:
                    slot_add(outs[k_].adj, g)
        inner = rv.in_loop({**stored.replay(i - lower), **rows_replay}, weights.at(j), transposes.map, rows_rule)
        cps(inner, body, [Dual(i)] + state + caps, seed)
        return tuple(slot_get(state[k_].adj) for k_ in active)
    adjoint = FOR(lower, upper, backward, tuple(slot_get(result[k_].adj) for k_ in active))
    weights.flush()
    for k_, g in zip(active, adjoint if isinstance(adjoint, tuple) else (adjoint,)):
        if init[k_].adj is not None:
            slot_add(init[k_].adj, g)
    for k_ in () if segment else rows.states:   # the rows no iteration wrote
        if init[k_].adj is not None and result[k_].adj is not None:
            slot_add(init[k_].adj, slot_get(result[k_].adj))


# -- loops in bounded memory: checkpoints -------------------------------------------

def _for_checkpointed(rv, node, ins, k):
    """FOR with `checkpoints=c`. A loop of at most c + 1 trips is taped whole
    (`_for_taped`). A longer one runs forward once keeping only its result, runs the
    continuation, and then reverses its steps with `_reverse_segments`."""
    (lower, upper), init, caps = split_operands(node, ins)
    types, (body,) = _types(node.outputs), node.bodies
    lower, upper, c = lower.primal, upper.primal, node.attrs["checkpoints"]
    kc = closure(k, types, "k_for")

    def long_loop():
        final = restage_node(node, [d.primal for d in ins])
        result = new_duals(final, types)
        apply(kc, pack(result, types))
        _reverse_segments(rv, types, _types(split_operands(node)[2]), body, lower, upper, init, caps, result, c)
    IF(upper - lower <= c + 1, lambda: _for_taped(rv, types, body, lower, upper, init, caps, resume(kc, types)),
       long_loop)


def _while_rest(rv, node, init, caps, kk, c):
    """The rest of a checkpointed WHILE from the state `init`: count its trips forward,
    apply the continuation `kk` to the final state, then reverse the counted steps with
    `c` states (one forward sweep more than a FOR of that trip count)."""
    from ..staging import WHILE
    types, (cond, body) = _types(node.outputs), node.bodies
    cap_primals = [d.primal for d in caps]
    counted = WHILE(lambda st: restage(cond, list(st[1:]) + cap_primals)[0],
                    lambda st: (st[0] + 1,) + tuple(restage(body, list(st[1:]) + cap_primals)),
                    (Staged(as_var(0, "i64")),) + tuple(d.primal for d in init))
    trips, final = counted[0], counted[1:]
    result = new_duals(list(final), types)
    apply(kk, pack(result, types))
    step = _indexed_body(body)   # the body as a FOR body: the index unused
    _reverse_segments(rv, types, _types(split_operands(node)[2]), step, Staged(as_var(0, "i64")), trips, init, caps,
                      result, c)


def _indexed_body(body):
    from ..ir.graph import Graph, Var
    return Graph([Var(Type("i64"))] + list(body.params), body.nodes, body.outputs)


def _reverse_segments(rv, types, cap_types, body, lower, upper, init, caps, result, c):
    """Add the adjoints of the FOR steps [lower, upper) into `init` and `caps`, given the
    adjoints of the loop's `result`, keeping at most `c` states at once (the binomial
    schedule of Griewank's Revolve, as a recursion). A segment [a, b) with `s` states to
    spare and n = b - a steps:

    - n <= s + 1: tape it whole (`_for_taped`);
    - otherwise run [a, m) forward keeping only x_m, reverse [m, b) from x_m with s - 1
      (x_a is held meanwhile), then reverse [a, m) from x_a with s, seeded with x_m's
      adjoint. The split puts as many steps on the right as `s - 1` states can reverse
      with the recomputation count of the whole segment (`_split`).

    The rows of scan's stacked outputs (`output_rows`) were written by the first forward
    pass: no segment recomputes or keeps them, and their cotangents stay in `result`'s
    slots. Nor do recomputed steps print or check again."""
    from ..staging import FOR
    rows = output_rows(body, len(types)).states
    skip = _ran_already(body, rows)
    row_duals = {k_: result[k_] for k_ in rows}

    def start(duals):   # a segment's input state: the row states are the results'
        return [row_duals.get(k_, d) for k_, d in enumerate(duals)]

    def step(extra, state, caps_, kk, loop):
        a, b, s = extra
        n = b - a

        def split():
            m = b - _split(n, s)
            cap_primals = [d.primal for d in caps_]
            mid = FOR(a, m, lambda i, st: tuple(_advance(body, i, st, state, cap_primals, rows, skip)),
                      tuple(d.primal for k_, d in enumerate(state) if k_ not in rows))
            mid = iter(mid if isinstance(mid, tuple) else (mid,))
            mid_duals = start([None if k_ in rows else new_duals([next(mid)], [t])[0] for k_, t in enumerate(types)])
            loop(m, b, s - 1, *pack(mid_duals, types), *pack(caps_, cap_types), kk)

            def seed(outs):
                for k_, (o, md) in enumerate(zip(outs, mid_duals)):
                    if k_ not in rows and o.adj is not None and md.adj is not None:
                        slot_add(o.adj, slot_get(md.adj))
            loop(a, m, s, *pack(state, types), *pack(caps_, cap_types), closure(seed, types, "k_segment"))
        IF(n <= s + 1, lambda: _for_taped(rv, types, body, a, b, state, caps_, resume(kk, types), segment=True),
           split)

    def seed_result(outs):
        for k_, (o, r) in enumerate(zip(outs, result)):
            if k_ not in rows and o.adj is not None and r.adj is not None:
                slot_add(o.adj, slot_get(r.adj))
    loop = _loop("for_segments", types, cap_types, step)
    loop(lower, upper, Staged(as_var(c, "i64")), *pack(start(init), types), *pack(caps, cap_types),
         closure(seed_result, types, "k_segments"))
    for k_ in rows:   # the rows no iteration wrote
        if init[k_].adj is not None and result[k_].adj is not None:
            slot_add(init[k_].adj, slot_get(result[k_].adj))


def _ran_already(body, rows):
    """The ids of the nodes a recomputed step of `body` skips: prints and checks (the
    first pass ran them), and the scatters of output rows (it wrote them)."""
    skip = {id(n) for n in body_nodes(body) if n.op in (Op.DEBUG_PRINT, Op.CHECK)}
    return skip | {id(n) for n in rows.values()}


def _advance(body, i, carried, state, cap_primals, rows, skip):
    """One plain forward step of `body` over the non-row states `carried`; a skipped
    node (`_ran_already`) gives its first input for its result (a row scatter) or nothing."""
    full, it = [], iter(carried)
    for k_, d in enumerate(state):
        full.append(d.primal if k_ in rows else next(it))
    outs = run_graph(body, [i] + full + cap_primals,
                     lambda node, xs: xs[:len(node.outputs)] if id(node) in skip else restage_node(node, xs))
    return [o for k_, o in enumerate(outs) if k_ not in rows]


def _split(n, s):
    """How many of a segment's n steps go right (reversed with s - 1 spare states) in the
    binomial schedule: with r the least count of recomputations such that s spare states
    reverse n steps — N(s, r) = C(s + r + 1, s) >= n, as N(s, r) = N(s, r - 1) +
    N(s - 1, r) and N(s, 0) = s + 1 —, the right part takes min(n - 1, N(s - 1, r)) =
    min(n - 1, N(s, r) * s / (s + r + 1)) steps and the left part (recomputed once
    more) at most N(s, r - 1)."""
    from ..numeric import where
    from ..staging import WHILE
    r, big = WHILE(lambda st: st[1] < n, lambda st: (st[0] + 1, st[1] * (s + st[0] + 2) // (st[0] + 2)),
                   (Staged(as_var(0, "i64")), s + 1))
    right = big * s // (s + r + 1)
    return where(right < n - 1, right, n - 1)


def _checkpoint(rv, node, ins, k):
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
        cps(rv, fundef.body, ins, seed)


def _call(rv, node, ins, k):
    fundef = node.attrs["fun"]
    in_types, out_types = fundef.body.in_types, list(fundef.out_types)
    memo = trace_memo()
    fun = memo.get(("cps", fundef))
    if fun is None:
        def body(*flat):
            args, rest = unpack(flat, in_types)
            cps(rv, fundef.body, args, resume(rest[0], out_types))
            return ()
        fun = FUN(body, out=())
        fun.__name__ = fundef.name + "_rev"
        memo[("cps", fundef)] = fun
    fun(*pack(ins, in_types), closure(k, out_types, "k_" + fundef.name))


def _tree(rv, node, ins, k):
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
    get = lambda field, i: Staged(emit(Op.TREE_GET, [tree._var, i._var], {"field": field})[0])
    entries = Staged(emit(Op.TREE_SIZE, [tree._var], {"word": "size"})[0]) + 1
    count = Staged(emit(Op.TREE_SIZE, [tree._var], {"word": "reachable"})[0])
    states = [new_table(entries, t, written_first=True) for t in types]
    zero = as_var(0, "i64")
    for tab, d in zip(states, init):
        emit(Op.TABLE_SET, [tab._var, zero, d.primal._var])
    state_of = lambda child: [at(tab, child + 1) for tab in states]
    stored = stored_values(combine, entries)

    def forward(j, _):
        v = get("order", j)
        outs = stored.run([v] + state_of(get("left", v)) + state_of(get("right", v))
                          + [d.primal for d in caps], v + 1)
        for tab, o in zip(states, outs):
            emit(Op.TABLE_SET, [tab._var, (v + 1)._var, o._var])
        return ()
    FOR(0, count, forward, ())
    root = Staged(emit(Op.TREE_ROOT, [tree._var])[0])
    result = new_duals(state_of(root), types)
    k(result)

    adjoints = [new_table(entries, t) if differentiable(t) else None for t in types]
    weights = deferred_weight_grads(combine, caps, count)

    def add_to(child, slots):
        for tab, slot in zip(adjoints, slots):
            if tab is not None and slot is not None:
                emit(Op.TABLE_ADD, [tab._var, (child + 1)._var, slot_get(slot)._var])

    def take(duals, entry):   # add the adjoints' entry to the duals' adjoints
        for d, tab in zip(duals, adjoints):
            if d.adj is not None and tab is not None:
                slot_add(d.adj, at(tab, entry))
    add_to(root, [d.adj for d in result])

    def backward(j, _):
        v = get("order", count - 1 - j)
        kids = [get("left", v), get("right", v)]
        child_duals = [new_duals(state_of(c), types) for c in kids]
        inner = rv.in_loop(stored.replay(v + 1), weights.at(j))
        cps(inner, combine, [Dual(v)] + child_duals[0] + child_duals[1] + caps, lambda outs: take(outs, v + 1))
        for c, duals in zip(kids, child_duals):
            add_to(c, [d.adj for d in duals])
        return ()
    FOR(0, count, backward, ())
    weights.flush()
    take(init, Staged(zero))   # what reached the empty subtrees


def _forest(rv, node, ins, k):
    """TREE over a forest (`batching._forest`) as `_tree` does it, a chunk of nodes per
    step: the forward loop keeps the nodes' states in tables (`tape.ForestTape`); the
    backward loop runs the chunks last to first, recomputes each chunk's batched combine
    from its children's states and adds its adjoints into the children's entries (the
    init entries collect what reaches the empty subtrees)."""
    from ..staging import FOR
    combine, n = node.attrs["combine"].graph, node.attrs["n_state"]
    types = [Type(v.type.dtype, v.type.shape[1:]) for v in node.outputs]
    forest, init, caps = ins[0].primal, ins[1:1 + n], ins[1 + n:]
    tape = ForestTape(forest, types, [d.primal for d in init])
    stored = stored_values(combine, tape.chunks)
    result = new_duals(tape.forward([d.primal for d in caps], lambda c, args: stored.run(args, c)),
                       [v.type for v in node.outputs])
    k(result)

    adjoints = [new_table(tape.entries, t) if differentiable(t) else None for t in types]
    weights = deferred_weight_grads(combine, caps, tape.chunks)
    rows = [Type(t.dtype, (tape.width,) + t.shape) for t in types]

    def take(duals, entries):   # add the adjoints' entries to the duals' adjoints
        for d, tab in zip(duals, adjoints):
            if d.adj is not None and tab is not None:
                slot_add(d.adj, tape.gather([tab], entries)[0])
    tape.scatter(adjoints, tape.roots(), [slot_get(d.adj) if d.adj is not None else None for d in result], add=True)

    def backward(j, _):
        c = tape.chunks - 1 - j
        ids = tape.ids(c)
        states = tape.children(ids)
        kids = [new_duals(states[:n], rows), new_duals(states[n:], rows)]
        inner = rv.in_loop(stored.replay(c), weights.at(j))
        cps(inner, combine, [Dual(forest), Dual(ids)] + kids[0] + kids[1] + caps, lambda outs: take(outs, ids))
        for side, duals in zip(("left", "right"), kids):
            tape.scatter(adjoints, tape.kids(ids, side),
                         [slot_get(d.adj) if d.adj is not None else None for d in duals], add=True)
        return ()
    FOR(0, tape.chunks, backward, ())
    weights.flush()
    take(init, tape.size + np.arange(tape.lanes))


CONTROL = {Op.IF: _if, Op.WHILE: _while, Op.FOR: _for, Op.CALL: _call, Op.CHECKPOINT: _checkpoint, Op.TREE: _tree,
           Op.FOREST: _forest}


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
            emit(Op.SLOT_SET, [slot._var, d.primal._var])
        for k, ct in seeds:
            if outs[k].adj is not None:
                slot_add(outs[k].adj, ct)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))   # one Python level per sequential control node
    outer = transformation()   # (a custom rule's pullback inside another reverse pass)
    rv = Reverse(dict(outer.adjoints) if isinstance(outer, Reverse) else {})
    try:
        with transforming(rv):
            cps(rv, main, duals, finish)
    finally:
        sys.setrecursionlimit(limit)
    return [slot_get(s) for s in results], [slot_get(duals[k].adj) for k in wrt]
