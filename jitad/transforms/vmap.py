"""vmap: batching as an IR transformation.

`batch_graph(graph, ins, size)` runs a traced graph on `(value, batched)` pairs and
emits code in which every batched value carries a leading batch axis of `size` (JAX's
`BatchTrace`, written as a staging interpreter like forward mode): a node with no
batched input is re-emitted as it is; otherwise its primitive's batching rule (the
`batch` slot of its declaration) emits the batched computation. An op without a rule
runs once per lane in a staged loop (the generic fallback: `random`, a `conv2d` with
batched weights). A batched value is batched in every lane: the rules
return batched outputs whenever an input is batched, so `analyze` can tell from the
inputs alone which results a control-flow body makes batched.

Control flow follows JAX: a batched `IF` predicate runs each branch (when some lane
takes it) and selects per lane; a batched `WHILE` condition runs until every lane is
done, freezing finished lanes. A lane still running whose state stopped changing can
never finish (the body is deterministic): every `CHECK_EVERY` iterations a `check`
looks for one and fails with `RuntimeCheckError` naming the fix. A lane whose state
keeps changing forever still runs until Ctrl-C stops it (WHILE has no iteration cap).
`FOR` and `TREE` batch their bodies; `FUN` calls a batched copy of the function,
recursion included (a `custom_vjp`/`custom_jvp` copy keeps the user's rule, run per lane
by `vmap`; a `checkpoint` stays one). Inside a batched branch or loop step, the lanes
that do not run it pass no cotangent back (`_lane_gate`, a select), and a branch's
skipping lanes compute on a stand-in, the first taking lane's values: each lane's gradient
is its own program's, even where a discarded lane would have computed inf or NaN, or met
one computed before the branch. A `TREE` over a
batch of trees (a `jitad.Forest`) runs level by level, a chunk of nodes of equal height
per step (`_forest`). Lanes a branch does not take are masked: the mask reaches the
loops inside, so they stop when the active lanes are done.

`vmap(grad(f))`: reverse mode is effectful CPS code that cannot be batched after the
fact, so while `vmap` traces its function, `grad`/`vjp` emit a `deferred_vjp` node
holding the function's pure program instead; batching that node batches the program
first and differentiates the batched program (the summed loss, each example's
parameters a lane of their own), which gives per-example gradients as batched code; the
passes then make the products against those lane copies GEMMs with the shared parameters
(`ir.peephole.batched_products`).
"""
import contextlib
import threading

import numpy as np

from .. import numeric as N
from .. import numpy_api
from .jvp import contains_effects
from .base import restage, restage_node, run_graph
from .vjp import value_and_grad_staged
from .tape import ForestTape
from ..errors import ArgumentError, StagingError
from ..ir.graph import loop_state_flags, split_operands, walk
from ..ir.ops import BATCH, CALLS, Op, declare, missing_rule
from ..ir.types import FLOATS, TreeType, Type
from ..primitives.rules import batch_stacked, lift, unbroadcast
from ..pytree import flatten, unflatten
from ..staging import (FOR, FUN, IF, TREE, WHILE, ShapeDtype, Staged, StagedTree, arg_type, coerce, current_frame, emit,
                      result_dtype, trace_memo, trace_program, wrap)

UNROLL = 8   # the per-lane fallback unrolls up to this many lanes, else loops


# -- the deferred reverse pass (see the module docstring) -----------------------

def _deferred_rule(op, types, attrs, bodies):
    return list(attrs["out_types"])


# attrs: program (pure), wrt (flat arg indices), seeds (output indices given a cotangent
# operand), out_types; operands: the program's args, then the cotangents
declare("deferred_vjp", _deferred_rule)


def deferring():
    """True while `vmap` traces its function (in its own trace, not in nested ones)."""
    return current_frame() is not None and trace_memo().get("vmap", False)


_REVERSE = threading.local()


class deferring_reverse:
    """Context: `grad`/`vjp` traced inside it, at any depth, emit `deferred_vjp` nodes (pure)
    instead of reverse-mode code, so that reverse mode can differentiate the function that
    takes them (`jitad.transforms.pullback.reverse_ready`)."""

    def __enter__(self):
        _REVERSE.depth = getattr(_REVERSE, "depth", 0) + 1

    def __exit__(self, *exc):
        _REVERSE.depth -= 1


def value_and_grad(program, args, wrt, seeds=((0, 1.0),)):
    """`ad.reverse.value_and_grad_staged`, or, while `vmap` traces, a `deferred_vjp` node
    that `vmap` differentiates after batching (or, under `deferring_reverse`, that reverse
    mode differentiates by forward-over-reverse)."""
    if not _keeps_deferred():
        return value_and_grad_staged(program, args, wrt, seeds)
    main = program.main
    cts = [Staged(coerce(ct, main.outputs[k].type, "cotangent")) for k, ct in seeds]
    out_types = main.out_types + [main.params[k].type for k in wrt]
    outs = emit(Op.DEFERRED_VJP, [a._var for a in args] + [c._var for c in cts],
                {"program": program, "wrt": tuple(wrt), "seeds": tuple(k for k, _ in seeds), "out_types": out_types})
    n = len(main.outputs)
    return [wrap(v) for v in outs[:n]], [wrap(v) for v in outs[n:]]


def _keeps_deferred():
    """Whether a reverse pass met now stays a `deferred_vjp` node: while `vmap` traces, or
    under `deferring_reverse`."""
    return deferring() or bool(getattr(_REVERSE, "depth", 0))


def _nests_deferred(program):
    return any(n.op == Op.DEFERRED_VJP for g in [program.main] + [f.body for f in program.funs] for n in walk(g))


def _deferred(node, ins, size, mask):
    program, wrt, seed_ks = node.attrs["program"], node.attrs["wrt"], node.attrs["seeds"]
    n = len(program.main.params)
    args, cts = ins[:n], ins[n:]
    if not any(b for _, b in ins):
        if _keeps_deferred():   # an enclosing vmap, or reverse pass, takes it
            return [(o, False) for o in restage_node(node, [x for x, _ in ins])]
        outs, grads = value_and_grad_staged(program, [x for x, _ in args], wrt, list(zip(seed_ks, [c for c, _ in cts])))
        return [(o, False) for o in outs + grads]
    # each differentiated argument gets a lane of its own, so its gradient is per example
    flags = [b or k in wrt for k, (_, b) in enumerate(args)]
    values = [_batched(x, b, size) if f else x for (x, b), f in zip(args, flags)]
    types = [_type(x) for x in values]

    def batched_fn(*flat):
        # a reverse pass nested in this one stays deferred: this one's reverse mode takes it
        # by its own rule (forward over reverse) instead of meeting its reverse-mode code
        with deferring_reverse() if _nests_deferred(program) else contextlib.nullcontext():
            outs = batch_graph(program.main, list(zip(flat, flags)), size)
        return tuple(_batched(x, b, size) for x, b in outs)
    leaves, td = flatten(tuple(values))
    batched, _, captured = trace_program(batched_fn, tuple(values), td, types)
    assert not captured
    cts = [_batched(c, b, size) for c, b in cts]
    if _keeps_deferred():
        out_types = batched.main.out_types + [batched.main.params[k].type for k in wrt]
        outs = emit(Op.DEFERRED_VJP, [v._var for v in values] + [c._var for c in cts],
                    {**node.attrs, "program": batched, "out_types": out_types})
        return [(wrap(v), True) for v in outs]
    outs, grads = value_and_grad_staged(batched, values, wrt, list(zip(seed_ks, cts)))
    return [(o, True) for o in outs + grads]


# -- helpers the rules share -------------------------------------------------------

def _type(x):
    return x._var.type


def _batched(x, b, size):
    """`x` with the batch axis (broadcast if `x` is the same in every lane)."""
    if b:
        return x
    if isinstance(x, StagedTree):
        raise ArgumentError("vmap: a jitad.Tree cannot be batched; pass it with in_axes=None")
    x = x if isinstance(x, Staged) else Staged(coerce(x, Type(result_dtype(x)), "vmap"))
    return N.broadcast_to(x, (size,) + x.shape)


def _emit(node, args, **attrs):
    return [(wrap(v), True) for v in emit(node.op, [a._var for a in args], {**node.attrs, **attrs})]


def _lane_select(active, new, old):
    """Per lane: `new` where `active` (a bool per lane) else `old`."""
    return N.where(lift(active, len(new.shape) - 1), new, old)


def _lane_gate(x, active, stand_in):
    """Batched `x` for a branch or loop step that only the `active` lanes run: its
    cotangent is zero in the other lanes, and (with `stand_in`) their value is a copy of the
    first active lane's. Their discarded results are then those of a lane that does run,
    so where a zero cotangent meets them (0 * value, summed into a value shared by all
    lanes) it meets no inf or NaN that the lane's own program never computed."""
    if active is None or not isinstance(x, Staged):
        return x
    if not stand_in:
        return _lane_select(active, x, N.stop_gradient(x)) if _type(x).is_float else x
    other = x[numpy_api.argmax(active)]
    return _lane_select(active, x, N.stop_gradient(other) if _type(x).is_float else other)


def _gated(run, active, flags, stand_in=False):
    """`run` with its batched arguments gated by `active` (`_lane_gate`)."""
    def gated(*args):
        return run(*[_lane_gate(a, active, stand_in) if f else a for a, f in zip(args, flags)])
    return gated


# -- the rules held here: elementwise ops, the along-axis ops, the IR's own ops --------

def batch_elementwise(node, ins, size, mask):
    rank = max(len(v.type.shape) for v in node.inputs)
    return _emit(node, [lift(x, rank) if b else x for x, b in ins])




def _debug_print(node, ins, size, mask):
    """Prints once per lane, in lane order, every lane (as JAX: a loop's finished lanes too)."""
    def lane(i):
        restage_node(node, [N.getitem(x, i) if b else x for x, b in ins])
    if size <= UNROLL:
        for i in range(size):
            lane(i)
    else:
        FOR(0, size, lambda i, done: (lane(i), done)[1], 0)
    return []


def _check(node, ins, size, mask):   # fails when it fails in some lane that counts
    (fail, _), = ins
    check(numpy_api.any(_and(mask, fail)), node.attrs["message"])
    return []


def check(fail, message):
    """Emit a `check`: the call raises RuntimeCheckError(message) when `fail` is true."""
    emit(Op.CHECK, [fail._var], {"message": message})


def per_lane(node, ins, size):
    """The generic rule: the node once per lane, its results stacked (`stack_lanes`)."""
    types = [v.type for v in node.outputs]
    if any(not isinstance(t, Type) for t in types):
        raise missing_rule(node.op, BATCH.what, BATCH.slot)   # no per-lane fallback here
    return stack_lanes(lambda i: restage_node(node, [x[i] if b else x for x, b in ins]), types, size)


def stack_lanes(lane, types, size):
    """`lane(i)`'s results (of `types`) for every lane, stacked: unrolled for a few lanes,
    else a staged FOR writing one row per step."""
    if size <= UNROLL:
        rows = [lane(i) for i in range(size)]
        return [(N.stack([r[k] for r in rows]), True) for k in range(len(types))]
    lanes = np.arange(size)

    def body(i, acc):
        return tuple(N.where(N.reshape(lanes == i, (size,) + (1,) * len(t.shape)), N.reshape(r, (1,) + t.shape), a)
                     for a, r, t in zip(acc, lane(i), types))
    init = tuple(N.zeros((size,) + t.shape, t.dtype) for t in types)
    return [(x, True) for x in FOR(0, size, body, init)]


# -- control flow ----------------------------------------------------------------

def analyze(graph, flags):
    """Which outputs of `graph` are batched, given which params are (as the rules do it)."""
    env = dict(zip(graph.params, flags))
    for node in graph.nodes:
        env.update(zip(node.outputs, node_flags(node, [env[v] for v in node.inputs])))
    return [env[v] for v in graph.outputs]


def node_flags(node, flags):
    n = len(node.outputs)
    if not any(flags):
        return [False] * n
    op = node.op
    if op == Op.IF and not flags[0]:
        then_body, else_body = node.bodies
        return [a or b for a, b in zip(analyze(then_body, flags[1:]), analyze(else_body, flags[1:]))]
    if op == Op.TREE and flags[0]:   # over a forest
        return [True] * n
    if op in (Op.WHILE, Op.FOR, Op.TREE):
        return _state_flags(node, flags)
    return [True] * n


def _state_flags(node, flags):
    """The loop state's batched flags: batched where the init is, or where the body makes
    it so (a fixed point); all of it when the condition or the trip count is batched (the
    condition's flags only grow with the state's, so the fixed point's decide)."""
    head, state, caps = split_operands(node, flags)
    if any(head) and node.op == Op.FOR:
        return [True] * len(state)
    state = loop_state_flags(node, state, caps, analyze)
    if node.op == Op.WHILE and analyze(node.bodies[0], state + caps)[0]:
        return [True] * len(state)
    return state


def _fit(pairs, flags, size):
    out = []
    for (x, b), f in zip(pairs, flags):
        assert f or not b, "the batching analysis missed a batched value"
        out.append(_batched(x, b, size) if f else x)
    return tuple(out)


def _and(mask, m):
    return m if mask is None else mask & m


def _body(graph, flags, size, mask, out_flags, lead=0):
    """A combinator body running `graph` batched: its params after the first `lead`
    (unbatched) carry `flags`; its results are batched as `out_flags` say."""
    def run(*args):
        pairs = [(a, False) for a in args[:lead]] + list(zip(args[lead:], flags))
        return _fit(batch_graph(graph, pairs, size, mask), out_flags, size)
    return run


def _if(node, ins, size, mask):
    (pred, pb), ops = ins[0], ins[1:]
    values, flags = [x for x, _ in ops], [b for _, b in ops]
    then_body, else_body = node.bodies
    if not pb:
        out_flags = node_flags(node, [False] + flags)

        out = IF(pred, _body(then_body, flags, size, mask, out_flags),
                 _body(else_body, flags, size, mask, out_flags), *values)
        return list(zip(out, out_flags))
    # a batched predicate: each branch where some lane takes it (so recursion ends), then a select
    types = [v.type for v in node.outputs]
    results = []
    for body, take in ((then_body, pred), (else_body, ~pred)):
        active = _and(mask, take)
        taken = _gated(_body(body, flags, size, active, [True] * len(types)), active, flags, stand_in=True)

        def idle(*a):
            return tuple(N.zeros((size,) + t.shape, t.dtype) for t in types)
        results.append(IF(numpy_api.any(active), taken, idle, *values))
    return [(_lane_select(pred, t, e), True) for t, e in zip(*results)]


def _while(node, ins, size, mask):
    _, init, caps = split_operands(node, ins)
    cap_vals, cap_flags = [x for x, _ in caps], [b for _, b in caps]
    flags = _state_flags(node, [b for _, b in ins])
    cond, body = node.bodies
    state = _fit(init, flags, size)

    def test(s, m):
        (c, b), = batch_graph(cond, list(zip(s, flags)) + list(zip(cap_vals, cap_flags)), size, m)
        return c, b
    if not analyze(cond, flags + cap_flags)[0]:   # every lane runs the same trips
        run = _body(body, flags + cap_flags, size, mask, flags)
        out = WHILE(lambda s: test(s, mask)[0], lambda s: run(*s, *cap_vals), state,
                    checkpoints=node.attrs.get("checkpoints"))
        return list(zip(out, flags))
    # a batched condition: run while some lane is active; finished lanes keep their state
    first, _ = test(state, mask)
    active = _and(mask, first)

    def step(st):
        trip, act, s = st[0], st[1], st[2:]
        new = _gated(_body(body, flags + cap_flags, size, act, flags), act, flags + cap_flags)(*s, *cap_vals)
        new = tuple(_lane_select(act, n, o) for n, o in zip(new, s))
        going = act & test(new, act)[0]
        check(IF(trip % CHECK_EVERY == 0, lambda: _stuck(going, new, s), lambda: False), STUCK)
        return (trip + 1, going) + new
    out = WHILE(lambda st: numpy_api.any(st[1]), step, (0, active) + state, checkpoints=node.attrs.get("checkpoints"))
    return [(x, True) for x in out[2:]]


CHECK_EVERY = 64   # iterations between tests for stuck lanes (a stuck lane stays stuck)
STUCK = ("vmap: a lane of a WHILE loop never finishes: its condition stays true while its state "
         "stops changing; bound the loop (carry a counter and test `i < max_iter` in the condition)")


def _stuck(act, new, old):
    """Whether an active lane's state did not change in an iteration: the body is
    deterministic, so that lane would never finish."""
    stuck = act
    for n, o in zip(new, old):
        stuck = stuck & _unchanged(n, o)
    return numpy_api.any(stuck)


def _unchanged(new, old):
    """Per lane: whether batched `new` equals `old` in every element (NaN equal to NaN,
    -0.0 not to 0.0: the values a deterministic body cannot tell apart)."""
    n, o = N.stop_gradient(new), N.stop_gradient(old)   # no adjoints for the 1/x below
    same = n == o
    if _type(n).dtype in FLOATS:
        same = (same & (1.0 / n == 1.0 / o)) | ((n != n) & (o != o))
    return numpy_api.all(N.reshape(same, (n.shape[0], int(np.prod(n.shape[1:])))), axis=1) if len(n.shape) > 1 else same


def _for(node, ins, size, mask):
    (lower, upper), init, caps = split_operands(node, ins)
    cap_vals, cap_flags = [x for x, _ in caps], [b for _, b in caps]
    flags = _state_flags(node, [b for _, b in ins])
    run = _body(node.bodies[0], flags + cap_flags, size, mask, flags, lead=1)
    state = _fit(init, flags, size)
    if not (lower[1] or upper[1]):
        out = FOR(lower[0], upper[0], lambda i, s: run(i, *s, *cap_vals), state,
                  checkpoints=node.attrs.get("checkpoints"))
        return list(zip(out, flags))
    # batched bounds: from the least lower to the greatest upper bound, lanes outside theirs frozen
    lo, hi = (_batched(x, b, size) for x, b in (lower, upper))

    def step(i, s):
        act = _and(mask, (i >= lo) & (i < hi))
        run = _body(node.bodies[0], flags + cap_flags, size, act, flags, lead=1)
        new = _gated(lambda *a: run(i, *a), act, flags + cap_flags)(*s, *cap_vals)
        return tuple(_lane_select(act, n, o) for n, o in zip(new, s))
    out = FOR(N.min(lo), N.max(hi), step, state, checkpoints=node.attrs.get("checkpoints"))
    return [(x, True) for x in out]


def _tree(node, ins, size, mask):
    (tree,), init, caps = split_operands(node, ins)
    if tree[1]:
        return _forest(node, tree[0], init, caps, size)
    cap_vals, cap_flags = [x for x, _ in caps], [b for _, b in caps]
    flags = _state_flags(node, [b for _, b in ins])
    run = _body(node.bodies[0], flags + flags + cap_flags, size, mask, flags, lead=1)
    out = TREE(tree[0], _fit(init, flags, size), lambda nd, l, r: run(nd._k, *l, *r, *cap_vals))
    return list(zip(out, flags))


class ForestCombine:
    """A `forest` node's combine function over a chunk of nodes (a graph: forest, node
    indices, left states, right states, captures -> states), for its reverse rule."""

    def __init__(self, graph):
        self.graph = graph

    def __repr__(self):
        return "forest_combine"


class _ForestLoop(FUN):
    """The forward loop of a TREE over a forest: a call that reverse mode differentiates
    by its own rule (`ad.reverse._forest`) from the `combine` attribute."""
    call_op = Op.FOREST
    attrs = None   # set by `_forest`

    def call_attrs(self, in_td):
        return self.attrs


def _forest(node, forest, init, caps, size):
    """TREE over a batch of trees (a `jitad.Forest`), level by level: each step runs the
    combine function on a chunk of `width` nodes of equal height (DyNet's autobatching,
    statically scheduled by the forest's packing) as batched code, reading the children's
    states from tables and writing the chunk's (`ad.tape.ForestTape`). Captured values
    that differ per tree are read per node (by its tree)."""
    lanes, width = forest._var.type.forest
    n = node.attrs["n_state"]
    types = [v.type for v in node.outputs]
    rows = [Type(t.dtype, (width,) + t.shape) for t in types]
    cap_vals, cap_flags = [x for x, _ in caps], [b for _, b in caps]
    combine = node.bodies[0]

    def chunk(f, ids, *rest):
        which, real = _tree_field(f, ids, "_tree"), _tree_field(f, ids, "_real") != 0
        pairs = [(ids, True)] + [(x, True) for x in rest[:2 * n]]
        for c, b, orig in zip(rest[2 * n:], cap_flags, cap_vals):
            if isinstance(orig, StagedTree) and b and orig._var is not forest._var:
                raise StagingError("vmap: a TREE over one jitad.Forest reads the nodes of another; "
                                   "fold each forest with its own TREE")
            pairs.append((f, True) if isinstance(orig, StagedTree) and b else (c[which], True) if b else (c, False))
        # (no gates: the rows of padding nodes are left to the forest's own reverse rule, as before)
        return tuple(_batched(x, b, width) for x, b in batch_graph(combine, pairs, width, real, gate=False))
    in_types = [forest._var.type, Type("i64", (width,))] + rows + rows + [_type(c) for c in cap_vals]
    graph = trace_program(chunk, None, flatten(tuple(in_types))[1], in_types)[0].main

    def loop(f, *rest):
        tape = ForestTape(f, types, rest[:n])
        return tuple(tape.forward(rest[n:], lambda c, args: restage(graph, args)))
    attrs = {"combine": ForestCombine(graph), "lanes": lanes, "width": width, "n_state": n}
    fun = _ForestLoop(loop, tuple(ShapeDtype((lanes,) + t.shape, t.dtype) for t in types))
    fun.attrs, fun.__name__ = attrs, "forest"
    return [(x, True) for x in fun(forest, *_fit(init, [True] * n, size), *cap_vals)]


def _tree_field(tree, ids, field):
    return wrap(emit(Op.TREE_GET, [tree._var, ids._var], {"field": field})[0])


def _tree_get(node, ins, size, mask):
    """A node's field inside a forest's combine: the chunk's nodes' fields, one gather."""
    (tree, bt), (k, bk) = ins
    if not bk:
        raise StagingError("vmap: a tree's field read at a node index that is the same in every lane, "
                           "from a batch of trees; read fields through TREE's node argument")
    return [(_tree_field(tree, k, node.attrs["field"]), True)]


def _forest_again(node, ins, size, mask):
    raise StagingError("vmap: a TREE over a jitad.Forest cannot be batched again (vmap inside vmap "
                       "over a forest); put all the trees in one Forest")


def _call(node, ins, size, mask):
    """A batched copy of the function (per set of batched arguments), recursion included."""
    fundef = node.attrs["fun"]
    flags = tuple(b for _, b in ins)
    memo = trace_memo()
    key = ("vmap", fundef, flags, size, mask is not None)
    fun = memo.get(key)
    if fun is None:
        n = len(flags)
        spec = tuple(ShapeDtype((size,) + t.shape, t.dtype) for t in fundef.out_types)

        def body(*a):
            outs = batch_graph(fundef.body, list(zip(a[:n], flags)), size, a[n] if len(a) > n else None)
            return tuple(_batched(x, b, size) for x, b in outs)
        fun = memo[key] = _batched_fun(node, body, spec, flags, size, mask is not None)
        fun.__name__ = fundef.name + "_vmap"
    args = [x for x, _ in ins] + ([mask] if mask is not None else [])
    return [(x, True) for x in fun(*args)]


def _batched_fun(node, body, spec, flags, size, masked):
    """The batched copy of a called function, keeping what reverse and forward mode read
    from the call: a checkpoint stays one, and a function with the user's derivative rule
    gets that rule batched (the rule runs per lane), so the rule, not the body, is
    differentiated. A rule whose function closes over staged values reads them, per lane,
    as the batched call's extra arguments (they get no cotangent or tangent from the rule,
    as without `vmap`)."""
    from ..staging import checkpoint, substituted   # (the rules' own classes: transforms/custom.py is above us)
    if node.op == Op.CHECKPOINT:
        return checkpoint(body, out=spec)
    fundef = node.attrs["fun"]
    if node.op != Op.CUSTOM_VJP:
        return FUN(body, out=spec)
    in_td = node.attrs["in_td"]
    k = in_td.num_leaves
    n = k + fundef.n_captures
    lane_types = fundef.in_types[:k]
    axes = tuple(0 if f else None for f in flags[:n])

    def per_lane(rule_part):
        """rule_part(args pytree) run on one lane, the captured values rebound to the lane's."""
        def lane(*a):
            with substituted(dict(zip(fundef.captured, (x._var for x in a[k:n])))):
                return rule_part(unflatten(in_td, list(a[:k])))
        return lane

    if "custom_jvp" in node.attrs:
        def jvp_rule(primals, tangents):
            def lane(p, t):
                def rule(args):
                    out, tan = node.attrs["custom_jvp"]._rule(args, unflatten(in_td, list(t)))
                    return tuple(flatten(out)[0]), tuple(flatten(tan)[0])
                return per_lane(rule)(*p)
            return vmap_staged(lane, (primals[:n], tangents[:k]), (axes, axes[:k]), 0)
        fun = type(node.attrs["custom_jvp"])(body, out=spec)
        fun.defjvp(jvp_rule)
        return fun
    rule = node.attrs["custom"]

    def fwd(*args):
        out, res = vmap_staged(per_lane(lambda a: rule.fwd(*a)), args[:n], axes, 0)
        return out, (res, args[k:n])

    def bwd(res_caps, g):
        res, caps = res_caps
        def lane(res, g):
            cts = rule.bwd(res, g)
            leaves = flatten(tuple(cts) if isinstance(cts, (tuple, list)) else (cts,))[0]
            return tuple(_lane_cotangent(c, t) for c, t in zip(leaves, lane_types)) if len(leaves) == k else leaves
        cts = list(vmap_staged(lane, (res, g), 0, 0))
        if len(cts) != k:   # the reverse pass names the mismatch
            return tuple(cts)
        cts = [c if f else N.sum(c, axis=0) for c, f in zip(cts, flags)]
        return tuple(cts) + tuple(N.zeros_like(c) for c in caps) + (0.0,) * masked   # (captures, lane mask)
    fun = type(rule)(body, out=spec)
    fun.defvjp(fwd, bwd)
    return fun


def _lane_cotangent(ct, t):
    """One lane's cotangent from a user's bwd rule as an array of its argument's type `t`:
    None or a scalar broadcast, a larger one summed (as the reverse pass takes them)."""
    if isinstance(t, TreeType) or not t.is_float:
        return N.zeros((), "f64")   # (not differentiated)
    if ct is None:
        return N.zeros(t.shape, t.dtype)
    shape = tuple(N._shape(ct))
    try:
        grown = np.broadcast_shapes(shape, t.shape)
    except ValueError:
        return ct   # (the reverse pass names the mismatch)
    if shape != t.shape and grown == shape:
        return unbroadcast(ct if isinstance(ct, Staged) else Staged(coerce(ct, Type(t.dtype, shape), "bwd")), t.shape)
    return N.broadcast_to(ct, t.shape) if shape != t.shape else ct


# the rules of the IR's own ops, and of ops whose declarations do not give theirs (the
# tensor and along-axis primitives' are beside their declarations, in jitad/primitives)
RULES = {Op.DEBUG_PRINT: _debug_print, Op.CHECK: _check, Op.LINALG: batch_stacked}
CONTROL = {Op.IF: _if, Op.WHILE: _while, Op.FOR: _for, Op.TREE: _tree, **{op: _call for op in CALLS},
           Op.DEFERRED_VJP: _deferred, Op.TREE_GET: _tree_get, Op.FOREST: _forest_again}


BATCH.registered.update(CONTROL)
BATCH.registered.update(RULES)
BATCH.derive(lambda op: batch_elementwise if op.elementwise else None)


def batching_rule(op):
    """`op`'s batching rule from the table `BATCH` (its declaration's, else one registered
    here, else the elementwise rule); None: the per-lane fallback."""
    return BATCH.find(op)

EFFECTS = {Op.SLOT, Op.SLOT_GET, Op.SLOT_SET, Op.SLOT_ADD, Op.SLOT_ADD_AT, Op.SLOT_SCATTER_ADD,
           Op.SLOT_SET_AT, Op.SLOT_ADD_SLICE, Op.CLOSURE, Op.APPLY, Op.TABLE, Op.TABLE_GET, Op.TABLE_SET, Op.TABLE_ADD,
           Op.TABLE_GATHER, Op.TABLE_SCATTER,
           Op.TABLE_GEMM_ADD, Op.MATMUL_ADD, Op.ARENA_MARK, Op.ARENA_RELEASE}


# -- the interpreter ---------------------------------------------------------------

def batch_graph(graph, ins, size, mask=None, gate=True):
    """Run `graph` on `(value, batched)` pairs, emitting the batched computation into the
    current trace; return the outputs as `(value, batched)` pairs. `mask` (a bool per
    lane, or None) marks the lanes whose results count (inside a batched branch); with
    `gate`, the lanes outside it pass no cotangent to unbatched values (`_lane_gate`)."""
    return run_graph(graph, ins, lambda node, node_ins: batch_node(node, node_ins, size, mask, gate))


def batch_node(node, ins, size, mask, gate=True):
    if not any(b for _, b in ins) and not _holds_deferred(node):
        return [(o, False) for o in restage_node(node, [x for x, _ in ins])]
    if node.op not in (Op.TREE, Op.TREE_GET, Op.IF, Op.WHILE, Op.FOR, Op.DEFERRED_VJP) \
            and any(b and isinstance(x, StagedTree) for x, b in ins):
        raise StagingError(f"vmap over a jitad.Forest: `{node.op.name}` got its batch of trees; a batched "
                           "tree can only be folded by TREE (its fields read through the node argument)")
    rule = batching_rule(node.op)
    outs = rule(node, ins, size, mask) if rule is not None else None
    if outs is not None:
        if gate and mask is not None and node.op not in CONTROL and _meets_unbatched_float(node, ins):
            # an unbatched value met the lanes: its cotangent sums theirs, so gate them first
            outs = [(_lane_gate(x, mask, stand_in=False), b) if b else (x, b) for x, b in outs]
        return outs
    if node.op in EFFECTS:
        raise StagingError(f"vmap: cannot batch `{node.op.name}` (reverse-mode code made before vmap "
                           "saw it, e.g. by jitad.hvp or a grad inside a combinator body); apply vmap "
                           "to the function that calls grad, or take the gradient of the vmapped function")
    return per_lane(node, ins, size)


def _meets_unbatched_float(node, ins):
    return any(not b and isinstance(v.type, Type) and v.type.is_float for (_, b), v in zip(ins, node.inputs))


def _holds_deferred(node):
    """Whether a deferred reverse pass hides in `node` (it must be expanded)."""
    if node.op == Op.DEFERRED_VJP:
        return True
    if not node.bodies and node.op not in CALLS:
        return False
    memo = trace_memo().setdefault("vmap_deferred", {})
    key = node.attrs["fun"] if node.op in CALLS else node
    if key not in memo:
        memo[key] = False   # (a recursive function: assume not while looking)
        graphs = [node.attrs["fun"].body] if node.op in CALLS else list(node.bodies)
        memo[key] = any(_holds_deferred(n) for g in graphs for n in walk(g))
    return memo[key]


# -- the public transformation (jitad.vmap wraps it in jit) --------------------------

def _axes_per_leaf(axes, tree_args, who):
    """One axis (int or None) per leaf of `tree_args`, from `axes` given for the whole
    tuple of arguments: an int or None for all, or a tuple/list with one prefix pytree per argument."""
    out = []

    def spread(ax, x, where):
        if ax is None or isinstance(ax, (int, np.integer)) and not isinstance(ax, bool):
            out.extend([ax] * len(flatten(x)[0]))
            return
        leaves, td = flatten(x)
        ax_leaves, ax_td = flatten(ax)
        if isinstance(ax, (tuple, list, dict)) and type(ax) is type(x) or type(ax) is tuple and isinstance(x, tuple):
            if len(ax) != len(x) or (isinstance(ax, dict) and set(ax) != set(x)):
                raise ArgumentError(f"vmap: {who}{where} is {ax!r} but the value there has structure "
                                    f"{td}; give one axis per entry (or one int/None for all)")
            for key in sorted(ax) if isinstance(ax, dict) else range(len(ax)):
                spread(ax[key], x[key], f"{where}[{key!r}]")
            return
        raise ArgumentError(f"vmap: {who}{where} is {ax!r}, which does not match the value there "
                            f"(structure {td}); use an int, None, or a pytree of them matching the arguments")
    spread(axes, tree_args, "")
    return out


def _batched_inputs(leaves, axes):
    """Each argument leaf with its batch axis moved to the front (flag True) or as it is
    (None: flag False); with the common batch size, checked."""
    size, values, flags = None, [], []
    for k, (x, ax) in enumerate(zip(leaves, axes)):
        forest = x._var.type.forest if isinstance(x, StagedTree) else None
        if ax is None:
            if forest:
                raise ArgumentError(f"vmap: argument leaf {k} is a jitad.Forest (a batch of trees) with "
                                    "in_axes None; give it axis 0")
            if not isinstance(x, (Staged, StagedTree)) and getattr(x, "_type_code", None) is None:
                x = Staged(coerce(x, Type(result_dtype(x), np.shape(x)), "vmap"))   # a constant (vmap inside jit)
            values.append(x)
            flags.append(False)
            continue
        if isinstance(x, StagedTree) or getattr(x, "_type_code", None) is not None:
            if not forest and getattr(x, "type", None) is not None and x.type.forest:
                raise ArgumentError("vmap: this jitad.Forest is a constant of the traced function (closed "
                                    "over); pass it as an argument of the jitted or differentiated function")
            if not forest or ax not in (0, -1):
                raise ArgumentError("vmap: a jitad.Tree cannot be batched; pass it with in_axes=None, or "
                                    "batch trees as a jitad.Forest([t1, t2, ...]) with axis 0")
            if size is not None and forest[0] != size:
                raise ArgumentError(f"vmap: the batched axes have different sizes: {size} and {forest[0]} (the "
                                    f"jitad.Forest at argument leaf {k} has {forest[0]} trees)")
            size = forest[0]
            values.append(x)
            flags.append(True)
            continue
        x = x if isinstance(x, Staged) else Staged(coerce(x, Type(result_dtype(x), np.shape(x)), "vmap"))
        ndim = len(x.shape)
        if not -ndim <= ax < ndim:
            raise ArgumentError(f"vmap: in_axes gives axis {ax} for argument leaf {k} of shape {x.shape}; "
                                f"the axis must be in [{-ndim}, {ndim}) (use None for an unbatched value)")
        ax %= ndim
        n = x.shape[ax]
        if size is not None and n != size:
            raise ArgumentError(f"vmap: the batched axes have different sizes: {size} and {n} (argument "
                                f"leaf {k}, shape {x.shape}, axis {ax}); every batched argument needs the "
                                "same batch size")
        size = n
        values.append(numpy_api.moveaxis(x, ax, 0) if ax else x)
        flags.append(True)
    return values, flags, size


def _placed_outputs(outs, out_ax, size):
    """Each output leaf's batch axis moved where out_axes puts it (None: unbatched, checked)."""
    results = []
    for k, ((x, b), ax) in enumerate(zip(outs, out_ax)):
        if ax is None:
            if b:
                raise ArgumentError(f"vmap: out_axes is None for output leaf {k}, but it differs between "
                                    "lanes; give it an axis in out_axes")
            results.append(x)
            continue
        x = _batched(x, b, size)
        if not -len(x.shape) <= ax < len(x.shape):
            raise ArgumentError(f"vmap: out_axes gives axis {ax} for output leaf {k} of batched shape "
                                f"{x.shape}; the axis must be in [{-len(x.shape)}, {len(x.shape)})")
        results.append(numpy_api.moveaxis(x, 0, ax % len(x.shape)) if ax % len(x.shape) else x)
    return results


def _named_vmap(fn, args, in_axes, out_axes, axis_name):
    """vmap with a named axis: `fn` gets the lanes' indices as one more batched argument,
    bound to the name for `lax`'s collectives (`primitives/named.py`)."""
    from ..primitives import named
    leaves, _ = flatten(tuple(args))
    _, _, size = _batched_inputs(leaves, _axes_per_leaf(in_axes, tuple(args), "in_axes"))
    per_arg = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)

    def with_name(*a):
        with named.bound(axis_name, size, a[-1]):
            return fn(*a[:-1])
    return vmap_staged(with_name, tuple(args) + (np.arange(size or 0),), per_arg + (0,), out_axes)


def _lane_type(t):
    """The type of one lane of a batched value: an array without its batch axis, one
    tree of a forest (its own fields)."""
    if isinstance(t, TreeType):
        return TreeType(tuple((name, d) for name, d in t.fields if not name.startswith("_")))
    return Type(t.dtype, t.shape[1:])


def vmap_staged(fn, args, in_axes, out_axes, axis_name=None):
    """Emit `vmap(fn, in_axes, out_axes)(*args)` into the current trace."""
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    if axis_name is not None:
        return _named_vmap(fn, args, in_axes, out_axes, axis_name)
    if isinstance(in_axes, tuple) and len(in_axes) != len(args):
        raise ArgumentError(f"vmap: in_axes has {len(in_axes)} entries but the function got {len(args)} "
                            "arguments; give one entry per positional argument (or one int/None for all)")
    leaves, td = flatten(tuple(args))
    axes = _axes_per_leaf(in_axes, tuple(args), "in_axes")
    values, flags, size = _batched_inputs(leaves, axes)
    if size is None:
        raise ArgumentError("vmap: in_axes batches no argument; give at least one argument an axis")
    types = []
    for x, f in zip(values, flags):
        t = x._var.type if isinstance(x, (Staged, StagedTree)) else arg_type(x)
        types.append(_lane_type(t) if f else t)

    def traced(*a):
        trace_memo()["vmap"] = True
        return fn(*a)
    program, out_td, captured = trace_program(traced, unflatten(td, values), td, types)
    if contains_effects(program):   # reverse-mode code made inside (jitad.hvp): fn once per lane
        def lane(i):
            return flatten(fn(*unflatten(td, [x[i] if f else x for x, f in zip(values, flags)])))[0]
        outs = stack_lanes(lane, program.main.out_types, size)
    else:
        ins = list(zip(values, flags)) + [(wrap(v), False) for v in captured]
        outs = batch_graph(program.main, ins, size)
    out_ax = _axes_per_leaf(out_axes, unflatten(out_td, [0] * len(outs)), "out_axes")
    return unflatten(out_td, _placed_outputs(outs, out_ax, size))
