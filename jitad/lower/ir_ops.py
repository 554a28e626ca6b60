"""LLVM rules of the IR's own ops (jitad/ir/ops.py): constants, trees, tables, slots,
closures, checks and control flow (`IF` in line, `WHILE`/`FOR` as loops with phis, calls,
`TREE` as a recursive function). The math primitives' rules come with their
declarations (jitad/primitives); the machinery they all use is `llvm.Lowerer`."""
import math

import llvmlite.ir as ir
import numpy as np

from ..ir.graph import Graph, Node, split_operands, uses
from ..ir.ops import CALLS, Op
from ..ir.types import DESCRIPTOR, FIRST_FIELD, FLOATS, Type
from . import arena_plan
from .llvm import (CLOSURE, ELEMENT_BYTES, I1, I32, I64, I64_T, LL, POLL_HEAVY, POLL_ITERATIONS, PTR, _table_entry,
                   _table_stores, alloca, cont_fnty, rule)


@rule(Op.CONST)
def _const(lo, node, ins):
    t = node.attrs["type"]
    if t.shape:
        return [lo.constant_array(node.attrs["value"])]
    return [LL[t.dtype](node.attrs["value"])]


@rule(Op.TREE_GET)
def _tree_get(lo, node, ins):
    """A node's field; a forest's vector of node indices gives a vector of fields."""
    desc, index = ins
    ttype = node.inputs[0].type
    field = node.attrs["field"]
    if field == "index":   # the node's index in its own tree: kept by a forest, else the index
        if ttype.field_dtype("_local") is None:
            return [index]
        field = "_local"
    slot = DESCRIPTOR.get(field)
    if slot is None:
        slot = FIRST_FIELD + [name for name, _ in ttype.fields].index(field)
    array = lo.tree_load(lo.b.gep(desc, [I64(slot)], source_etype=I64), PTR)
    t = node.outputs[0].type
    elt = LL[t.dtype]
    if not t.shape:
        return [lo.tree_load(lo.b.gep(array, [index], source_etype=elt), elt)]
    out = lo.alloc(t)

    def one(i):
        k = lo.b.load(lo.b.gep(index, [i], source_etype=I64), typ=I64)
        lo.b.store(lo.tree_load(lo.b.gep(array, [k], source_etype=elt), elt), lo.b.gep(out, [i], source_etype=elt))
    lo.counted_loop(I64(t.shape[0]), one)
    return [out]


@rule(Op.ARENA_MARK)
def _arena_mark(lo, node, ins):
    return [lo.b.ptrtoint(lo.mark(), I64)]


@rule(Op.ARENA_RELEASE)
def _arena_release(lo, node, ins):
    lo.release(lo.b.inttoptr(ins[0], PTR))
    return []


@rule(Op.TREE_ROOT, Op.TREE_SIZE)
def _tree_word(lo, node, ins):
    word = DESCRIPTOR["root" if node.op == Op.TREE_ROOT else node.attrs["word"]]
    return [lo.tree_load(lo.b.gep(ins[0], [I64(word)], source_etype=I64), I64)]


@rule(Op.TABLE)
def _table(lo, node, ins):
    t = node.attrs["type"]
    b = lo.b
    n, size = ins[0], max(1, math.prod(t.shape))   # n < 0: a trip count that overflowed
    umul = lo.extern("llvm.umul.with.overflow.i64", ir.FunctionType(ir.LiteralStructType([I64, I1]), [I64, I64]))
    nbytes = b.call(umul, [n, I64(size * ELEMENT_BYTES[t.dtype])])   # n < 0 is huge unsigned
    table = lo.alloc_bytes(b.select(b.extract_value(nbytes, 1), I64(-1), b.extract_value(nbytes, 0)))
    entries = b.mul(n, I64(size))   # fits: the table was allocated
    if not node.attrs.get("uninit"):   # (entries written before they are read need no zeros)
        lo.counted_loop(entries, lambda i: b.store(LL[t.dtype](0), b.gep(table, [i], source_etype=LL[t.dtype])))
    return [table]


@rule(Op.TABLE_GET)
def _table_get(lo, node, ins):
    t = node.outputs[0].type
    ptr = _table_entry(lo, ins[0], t, ins[1])
    return [ptr if t.shape else lo.b.load(ptr, typ=LL[t.dtype])]


@rule(Op.TABLE_SET, Op.TABLE_ADD)
def _table_update(lo, node, ins):
    t = node.inputs[2].type
    ptr = _table_entry(lo, ins[0], t, ins[1])
    if node.op == Op.TABLE_SET:
        if not t.shape:
            lo.b.store(ins[2], ptr)
        elif node not in lo.placed:
            lo.copy(ptr, ins[2], t)
        elif lo.placed[node] is not ins[2]:   # the producer was given the entry: a kernel call
            with lo.b.if_then(lo.b.icmp_unsigned("!=", ins[2], ptr)):   # returns it, a view does not
                lo.copy(ptr, ins[2], t)
    else:
        _add_into(lo, ptr, ins[2], t)
    return []


@rule(Op.TABLE_GATHER)
def _table_gather(lo, node, ins):
    table, index = ins
    t, (n,) = node.inputs[0].type.value_type, node.inputs[1].type.shape
    out = lo.alloc(node.outputs[0].type)
    lo.counted_loop(I64(n), lambda i: _move(lo, _table_entry(lo, out, t, i), _row(lo, table, t, index, i), t))
    return [out]


@rule(Op.TABLE_SCATTER)
def _table_scatter(lo, node, ins):
    table, index, value = ins
    t, (n,) = node.inputs[0].type.value_type, node.inputs[1].type.shape
    add = node.attrs.get("add")

    def one(i):
        dst, src = _row(lo, table, t, index, i), _table_entry(lo, value, t, i)
        if add:
            _add_into(lo, dst, src if t.shape else lo.b.load(src, typ=LL[t.dtype]), t)
        else:
            _move(lo, dst, src, t)
    lo.counted_loop(I64(n), one)
    return []


def _row(lo, table, t, index, i):
    """Pointer to the table entry `index[i]`."""
    return _table_entry(lo, table, t, lo.b.load(lo.b.gep(index, [i], source_etype=I64), typ=I64))


def _move(lo, dst, src, t):
    if t.shape:
        lo.copy(dst, src, t)
    else:
        lo.b.store(lo.b.load(src, typ=LL[t.dtype]), dst)


def _add_into(lo, ptr, value, t):
    """*ptr += value, elementwise over a tensor `t` (in one flat loop)."""
    t = Type(t.dtype, (int(np.prod(t.shape, dtype=np.int64)),)) if t.shape else t

    def add(idx):
        p = lo.elem_ptr(ptr, t, idx)
        lo.b.store(lo.b.fadd(lo.b.load(p, typ=LL[t.dtype]), lo.load_at(value, t, idx, t.shape)), p)
    lo.loop_nest(t.shape, add)


@rule(Op.SLOT)
def _slot(lo, node, ins):
    t = node.attrs["type"]
    if t.shape:   # a tensor slot is an arena buffer of the creating frame (or a result array)
        buf = lo.slot_homes.get(node.outputs[0]) if lo.func is lo.main_func else None
        buf = buf if buf is not None else lo.loop_homes.get(node.outputs[0])   # (`lower_loop_body`)
        buf = buf if buf is not None else lo.fresh_buffer(node.outputs[0], t)
        if "zero_boxes" in node.attrs:   # its first update stores into all but these boxes
            _zero_boxes(lo, buf, t, node.attrs["zero_boxes"])
        elif not node.attrs.get("uninit"):   # its first update stores instead of adding
            lo.fill(buf, t, LL[t.dtype](0))
        return [buf]
    slot = lo.frame_slots.get(node.outputs[0])
    slot = slot if slot is not None else alloca(lo.b, LL[t.dtype])
    # -0.0, the exact additive identity (x + -0.0 == x for every x; x + 0.0 turns -0.0 into
    # 0.0): LLVM folds the first slot_add into a store, which it cannot with 0.0. Gradients
    # leave through api._positive_zero, so an input without a path still reads 0.0.
    lo.b.store(LL[t.dtype](-0.0 if t.dtype in FLOATS else 0), slot)
    return [slot]


def _zero_boxes(lo, buf, t, boxes):
    """Zero the elements of tensor `buf` (of type `t`) in each box ((starts), (stops))."""
    zero, steps = LL[t.dtype](0), (1,) * len(t.shape)
    for starts, stops in boxes:
        lo.loop_nest([hi - s for s, hi in zip(starts, stops)],
                     lambda idx, starts=starts: lo.b.store(zero, lo.elem_ptr(buf, t, idx, steps=steps, starts=starts)))


@rule(Op.SLOT_GET)
def _slot_get(lo, node, ins):
    t = node.outputs[0].type
    return [ins[0] if t.shape else lo.b.load(ins[0], typ=LL[t.dtype])]


@rule(Op.SLOT_SET, Op.SLOT_ADD)
def _slot_update(lo, node, ins):
    t = node.inputs[1].type
    if node.op == Op.SLOT_ADD:
        _add_into(lo, ins[0], ins[1], t)
    elif t.shape:   # its producer may have made it in the slot (`llvm._slot_stores`)
        with lo.b.if_then(lo.b.icmp_unsigned("!=", ins[1], ins[0])):
            lo.copy(ins[0], ins[1], t)
    else:
        lo.b.store(ins[1], ins[0])
    return []


@rule(Op.CLOSURE)
def _closure(lo, node, ins):
    env_type = ir.LiteralStructType([v.type for v in ins])
    env = alloca(lo.b, env_type)
    for k, v in enumerate(ins):
        lo.b.store(v, lo.b.gep(env, [I32(0), I32(k)], source_etype=env_type))
    code = lo.trampoline(node.attrs["fun"], env_type)
    closure = lo.b.insert_value(ir.Constant(CLOSURE, None), code, 0)
    return [lo.b.insert_value(closure, env, 1)]


@rule(Op.APPLY)
def _apply(lo, node, ins):
    cont, args = ins[0], ins[1:]
    code = lo.b.extract_value(cont, 0)
    code.type = cont_fnty(node.inputs[0].type).as_pointer()   # lets llvmlite emit the indirect call
    return lo.call_checked(code, [lo.b.extract_value(cont, 1)] + args, 0)


@rule(Op.CHECK)
def _check(lo, node, ins):
    """A failed check sets its message's status and unwinds like an exhausted stack."""
    with lo.b.if_then(ins[0], likely=False):
        lo.b.store(I32(lo.check_status[node.attrs["message"]]), lo.status_ptr())
        lo.b.branch(lo.bail_block())
    return []


@rule(Op.IF)
def _if(lo, node, ins):
    b = lo.b
    then_bb, else_bb, merge_bb = (lo.func.append_basic_block(n) for n in ("then", "else", "endif"))
    b.cbranch(ins[0], then_bb, else_bb)
    incoming = []
    for bb, body in ((then_bb, node.bodies[0]), (else_bb, node.bodies[1])):
        b.position_at_end(bb)
        outs = lo.lower(body, ins[1:])
        incoming.append((outs, b.block))
        b.branch(merge_bb)
    b.position_at_end(merge_bb)
    return lo.phis([v.type for v in node.outputs], incoming)


def _loop(lo, types, init, cond, step, period=None):
    """A loop with state phis; `cond(phis) -> i1`, `step(phis) -> next state`.

    Tensor state lives in two buffers allocated before the loop: each iteration copies
    its new state into the spare one and releases everything else it (or its condition)
    allocated, whatever the state's type, so a loop's memory does not grow with its trip
    count. `step(phis, spares)` gets the spare buffers: a new state made in its spare
    buffer needs no copy, and one the body stored in a table entry of its own (an id in
    `lo.entry_states`, see `lower_loop_body`) is passed on as that entry and copied out
    once, when the loop ends. With a `period` (a power of two), an iteration counter paces
    interrupt polls at the end of the body (where the body's loads come first: LLVM still
    hoists the invariant ones).
    """
    b = lo.b
    tensors = [k for k, t in enumerate(types) if t.shape]
    init, spare_init = list(init), {}
    for k in tensors:
        first, spare_init[k] = lo.alloc(types[k]), lo.alloc(types[k])
        lo.copy(first, init[k], types[k])
        init[k] = first
    header, body_bb, exit_bb = (lo.func.append_basic_block(n) for n in ("loop", "body", "endloop"))
    pre = b.block
    b.branch(header)
    b.position_at_end(header)
    state = [b.phi(v.type) for v in init]
    spare = {k: b.phi(PTR) for k in tensors}
    for phi, v in zip(state, init):
        phi.add_incoming(v, pre)
    for k in tensors:
        spare[k].add_incoming(spare_init[k], pre)
    if period:
        count = b.phi(I64)
        count.add_incoming(I64(0), pre)
    mark, allocs = lo.mark(), lo.allocs
    b.cbranch(cond(state), body_bb, exit_bb)
    b.position_at_end(body_bb)
    new = list(step(state, spare))
    entries = {k for k in tensors if id(new[k]) in lo.entry_states}
    for k in tensors:   # else unchanged, updated in place, made in the spare or in a table entry
        if new[k] is not state[k] and new[k] is not spare[k] and k not in entries:
            lo.copy(spare[k], new[k], types[k])
            new[k] = spare[k]
    if tensors or lo.allocs != allocs:   # whatever the state's type, the body's temporaries are dead
        lo.release(mark)
    if period:
        lo.poll_every(count, period)
        count.add_incoming(b.add(count, I64(1)), b.block)
    for phi, v in zip(state, new):
        phi.add_incoming(v, b.block)
    for k in tensors:
        spare[k].add_incoming(spare[k] if new[k] is state[k] or k in entries else state[k], b.block)
    b.branch(header)
    b.position_at_end(exit_bb)
    out = list(state)
    for k in entries:   # the loop's result must not change when the table entry is written again
        lo.copy(spare[k], state[k], types[k])
        out[k] = spare[k]
    return out


def _heavy(graph):
    """Does `graph` call functions, loop, recurse or touch tensors (an iteration of
    unknown, possibly large cost)?"""
    return any(n.op in CALLS or n.op in (Op.APPLY, Op.TREE, Op.WHILE, Op.FOR) or any(_heavy(g) for g in n.bodies)
               or any(isinstance(v.type, Type) and v.type.shape for v in n.outputs) for n in graph.nodes)


def _poll_period(graphs):
    return POLL_HEAVY if any(_heavy(g) for g in graphs) else POLL_ITERATIONS


def _slots_in_states(body, args, states, spares, homes, excluded):
    """A tensor slot of a loop body whose first write stores tensor state k (a fused
    `slot_add[store=True]`), where nothing else reads that state, lives in the state's
    buffer (`_loop` owns it; its value is dead after the store), and the store goes: the
    reverse loop's carried cotangents no longer copy into the slots that update them, and
    one passed on unchanged is no copy either. Sets `homes`; returns the body's nodes."""
    users = uses(body.nodes, body.outputs)
    buffer_of = dict(zip(body.params, args))
    made = {n.outputs[0]: j for j, n in enumerate(body.nodes) if n.op == Op.SLOT}
    got = {n.outputs[0]: n.inputs[0] for n in body.nodes if n.op == Op.SLOT_GET}
    returned = {}   # slot -> the first output position reading it
    for k, v in enumerate(body.outputs):
        if v in got:
            returned.setdefault(got[v], k)
    nodes = list(body.nodes)
    for j, n in enumerate(body.nodes):
        if n.op != Op.FUSED or n.outputs:
            continue
        (inner,) = n.bodies
        outer = dict(zip(inner.params, n.inputs))
        inner_uses = uses(inner.nodes, inner.outputs)
        gone = set()
        for m in inner.nodes:
            if m.op != Op.SLOT_ADD or not m.attrs.get("store") or not all(x in outer for x in m.inputs):
                continue
            slot, value = outer[m.inputs[0]], outer[m.inputs[1]]
            k = states.index(value) if value in states else None
            if k is None or k not in spares or k in excluded or users.get(value) != [j] \
                    or slot not in made or body.nodes[made[slot]].attrs["type"] != value.type \
                    or not body.nodes[made[slot]].attrs.get("uninit") or min(users.get(slot, [j])) != j \
                    or returned.get(slot, k) != k or any(len(inner_uses.get(x, ())) != 1 for x in m.inputs):
                continue
            homes[slot] = buffer_of[value]
            gone.add(m)
        if gone:
            keep = [m for m in inner.nodes if m not in gone]
            used = {x for m in keep for x in m.inputs}
            pairs = [(p, v) for p, v in zip(inner.params, n.inputs) if p in used]
            nodes[j] = Node(Op.FUSED, tuple(v for _, v in pairs), n.outputs, n.attrs,
                            (Graph([p for p, _ in pairs], keep, inner.outputs),)) if keep else None
    return [n for n in nodes if n is not None]


def lower_loop_body(lo, body, args, states, spares, counter=None):
    """Lower a loop `body`; a scatter may write into its operand's buffer when that is a
    loop state (`states`: `_loop` owns their buffers) read nowhere after the scatter: an
    update of O(rows written) instead of a copy of the state per iteration.

    New states that `_loop` need not copy: a tensor slot of the body read as new state k
    is made in the spare buffer `spares[k]`; a new state the body stores in a table entry
    indexed by the iteration (`counter` minus a value from outside the body, a table made
    before the loop that the body only writes there, `_table_stores`) is that entry (its
    id goes into `lo.entry_states`), unless a scatter updates that state in place."""
    marks = {n for n in body.nodes if n.op is Op.SCATTER and n.inputs[0] in states and _last_reader(body, n)}
    made = {n.outputs[0]: n for n in body.nodes if len(n.outputs) == 1}
    homes = {}
    for k, v in enumerate(body.outputs):
        slot = made[v].inputs[0] if v in made and made[v].op == Op.SLOT_GET else None
        if k in spares and slot in made and made[slot].op == Op.SLOT and slot not in homes \
                and made[slot].attrs["type"] == v.type:
            homes[slot] = spares[k]
    stores = _table_stores(body) if counter is not None else {}
    in_place = {n.inputs[0] for n in marks}
    outside = set(body.params[1 + len(states):])   # the captured values (a FOR's body: counter, states, captures)
    entries = {}   # output position -> the `table_set` storing it
    for k, v in enumerate(body.outputs):
        store = stores.get(v)
        if k not in spares or store is None or store.inputs[0] not in outside or states[k] in in_place:
            continue
        index = made.get(store.inputs[1])
        if store.inputs[1] is counter or index is not None and index.op == Op.SUB \
                and index.inputs[0] is counter and (index.inputs[1] in outside or made.get(index.inputs[1])
                                                    is not None and made[index.inputs[1]].op == Op.CONST):
            entries[k] = store
    nodes = _slots_in_states(body, args, states, spares, homes, set(entries) | {states.index(v) for v in in_place})
    lo.in_place |= marks
    saved, lo.loop_homes = lo.loop_homes, {**lo.loop_homes, **homes}
    try:
        env, stores = dict(zip(body.params, args)), _table_stores(body)
        nodes = arena_plan.sink_slots(lo, nodes, stores)
        with arena_plan.body(lo, nodes, body.outputs):
            lo.lower_nodes(nodes, env, stores)
        outs = [env[v] for v in body.outputs]
    finally:
        lo.in_place -= marks
        lo.loop_homes = saved
    for k, store in entries.items():   # the entry holds the value once its `table_set` ran
        outs[k] = _table_entry(lo, env[store.inputs[0]], store.inputs[2].type, env[store.inputs[1]])
        lo.entry_states.add(id(outs[k]))
    return outs


def _last_reader(graph, scatter):
    """Is `scatter` the last reader of its operand x, directly or through views of it
    (an `index` row is a pointer into x), and no output of `graph`?"""
    aliases, after = {scatter.inputs[0]}, False
    for n in graph.nodes:
        if n is scatter:
            after = True
            if any(v in aliases for v in n.inputs[1:]):
                return False
        elif any(v in aliases for v in n.inputs):
            if after:
                return False
            if n.op.view or n.bodies:   # results that may share x's buffer
                aliases.update(n.outputs)
    return not any(v in aliases for v in graph.outputs)


@rule(Op.WHILE)
def _while(lo, node, ins):
    _, init, caps = split_operands(node, ins)
    cond, body = node.bodies
    return _loop(lo, [v.type for v in node.outputs], init, lambda s: lo.lower(cond, s + caps)[0],
                 lambda s, spares: lower_loop_body(lo, body, s + caps, body.params[:len(init)], spares),
                 _poll_period(node.bodies))


@rule(Op.FOR)
def _for(lo, node, ins):
    """A heavy body polls every POLL_HEAVY iterations; a scalar one runs in chunks of
    POLL_ITERATIONS iterations with a poll after each, each chunk a loop of known trip
    count that LLVM unrolls as it would the whole loop."""
    (lower, upper), init, caps = split_operands(node, ins)
    (body,) = node.bodies
    b = lo.b
    types = [I64_T] + [v.type for v in node.outputs]

    def step(s, spares):
        return [b.add(s[0], I64(1))] + lower_loop_body(lo, body, s + caps, body.params[1:1 + len(init)],
                                                       {k - 1: p for k, p in spares.items()}, body.params[0])

    def below(end):
        return lambda s: b.icmp_signed("<", s[0], end)
    if _heavy(body):
        return _loop(lo, types, [lower] + init, below(upper), step, POLL_HEAVY)[1:]

    def chunk(s, spares):
        sat_add = lo.extern("llvm.sadd.sat.i64", ir.FunctionType(I64, [I64, I64]))
        smin = lo.extern("llvm.smin.i64", ir.FunctionType(I64, [I64, I64]))
        end = b.call(smin, [b.call(sat_add, [s[0], I64(POLL_ITERATIONS)]), upper])
        s = _loop(lo, types, s, below(end), step)
        lo.poll()
        return s
    return _loop(lo, types, [lower] + init, below(upper), chunk)[1:]


@rule(*CALLS)
def _call(lo, node, ins):
    return lo.call_checked(lo.functions[node.attrs["fun"]], ins, len(node.outputs), [v.type for v in node.outputs])


@rule(Op.TREE)
def _tree(lo, node, ins):
    fn = lo.tree_function(node)
    root = lo.b.load(lo.b.gep(ins[0], [I64(1)], source_etype=I64), typ=I64)
    return lo.call_checked(fn, [ins[0], root] + ins[1:], len(node.outputs), [v.type for v in node.outputs])


# -- the lowerer ----------------------------------------------------------------
