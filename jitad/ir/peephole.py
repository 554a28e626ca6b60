"""Peepholes after fusion: local rewrites of a graph's node list that save memory
traffic around the fused loops and the matrix products. Each takes a graph's nodes and
outputs and returns the new nodes; `jitad.ir.passes.PIPELINE` runs them in order.
"""
import heapq
from dataclasses import replace

import numpy as np

from .graph import HEAD, Graph, Node, Var, renamed, split_operands, uses
from .ops import Op
from .types import RefType, Type


def _first_close(scopes, n):
    """For each position p < n, the least r of the scopes (m, r) with m < p < r (infinite
    when none): one sweep with a heap, not a scan of every scope per position."""
    starts = sorted(scopes)
    closes, open_, i = [], [], 0
    for p in range(n):
        while i < len(starts) and starts[i][0] < p:
            heapq.heappush(open_, starts[i][1])
            i += 1
        while open_ and open_[0] <= p:
            heapq.heappop(open_)
        closes.append(open_[0] if open_ else float("inf"))
    return closes


def forward_single_stores(nodes, outputs):
    """A tensor slot set once (`slot_set`, an adjoint's only contribution) and then only
    read: its reads are the stored value, no copy. The value's buffer must outlive the
    reads (no arena scope around where it was made closes before them) and stay unchanged
    (when it is a view of another slot, that slot is not written after the store)."""
    users, made_at = uses(nodes), {v: (k, n) for k, n in enumerate(nodes) for v in n.outputs}
    scopes = [(made_at[n.inputs[0]][0], k) for k, n in enumerate(nodes)
              if n.op == Op.ARENA_RELEASE and n.inputs[0] in made_at]
    closes = _first_close(scopes, len(nodes))
    candidates = []
    for k, n in enumerate(nodes):
        where = users.get(n.outputs[0], []) if n.op == Op.SLOT and n.outputs[0].type.shape else []
        sets = [j for j in where if nodes[j].op == Op.SLOT_SET]
        if len(sets) == 1 and all(nodes[g].op == Op.SLOT_GET and g > sets[0] for g in where if g != sets[0]):
            candidates.append((sets[0], k, [g for g in where if g != sets[0]]))
    rename, drop = {}, set()
    for j, k, gets in sorted(candidates):   # in store order: a value may be an earlier one's read
        value = rename.get(nodes[j].inputs[1], nodes[j].inputs[1])
        root, born = value, -1
        while root in made_at:
            born, producer = made_at[root]
            if not producer.op.view or not producer.inputs[0].type.shape:
                break
            if producer.op == Op.SLOT_GET:   # a view of another slot: unchanged after the store?
                slot = producer.inputs[0]
                born = made_at[slot][0] if slot in made_at else -1
                if any(nodes[u].op != Op.SLOT_GET for u in users.get(slot, []) if u > j):
                    born = None
                break
            root = rename.get(producer.inputs[0], producer.inputs[0])
        last = max((u for g in gets for u in users.get(nodes[g].outputs[0], [])), default=j)
        if born is None or 0 <= born < len(closes) and closes[born] <= last \
                or any(nodes[g].outputs[0] in outputs for g in gets):
            continue
        drop.update([k, j] + gets)
        rename.update((nodes[g].outputs[0], value) for g in gets)
    return renamed([n for k, n in enumerate(nodes) if k not in drop], rename)


def forward_slot_copies(nodes, outputs):
    """A tensor slot set once to another slot's value (`slot_set dst (slot_get src)`, or a
    fused loop storing src's elements into it) and then only read (its value, or its
    elements by fused loops) is read from `src` instead, no copy, when `src` is not written
    while those reads and their values last and no arena scope around its creation closes
    before them. A copy of such a copy reads the first slot; a fused loop left with no
    store is dropped. A copy of src's value reshaped (`slot_set dst (reshape (slot_get
    src))`, a reshape's cotangent) goes too: dst's readers read src through a reshape."""
    users, made_at = uses(nodes, outputs), {v: k for k, n in enumerate(nodes) for v in n.outputs}
    scopes = [(made_at[n.inputs[0]], k) for k, n in enumerate(nodes)
              if n.op == Op.ARENA_RELEASE and n.inputs[0] in made_at]
    closes = _first_close(scopes, len(nodes))
    rename, drop, stores, reshaped = {}, set(), {}, {}
    for j, n in enumerate(nodes):
        for dst, src, g, at in _copies(n, j, made_at, nodes):
            src = rename.get(src, src)   # a copy of a copy: of the first slot
            d, s = made_at.get(dst), made_at.get(src)
            reads = [u for u in users.get(dst, []) if u != j]
            if d is None or nodes[d].op != Op.SLOT or dst in rename or dst in reshaped or src in reshaped \
                    or s is None or nodes[s].op != Op.SLOT or not reads \
                    or any(u < j or u >= len(nodes) or not _reads_slot(nodes[u], dst) for u in reads):
                continue
            last = max(max(users.get(nodes[u].outputs[0], [u])) if nodes[u].op == Op.SLOT_GET else u for u in reads)
            if closes[s] <= last or any(g < u <= last and (u >= len(nodes) or not _reads_slot(nodes[u], src))
                                        for u in users.get(src, []) if u != j):
                continue
            drop.add(d)
            if at == RESHAPED:   # its readers read `src` reshaped (a view)
                reshaped[dst] = src
                drop.add(j)
                continue
            rename[dst] = src
            if at is None:
                drop.add(j)
            else:
                stores.setdefault(j, set()).add((at, dst))
    if not rename and not reshaped:
        return nodes
    for j, removed in stores.items():   # a fused loop's copies leave it; a loop left with no effect goes
        n = nodes[j]
        (body,) = n.bodies
        gone = {at for at, _ in removed}
        keep = [k for k, v in enumerate(n.inputs) if v not in {dst for _, dst in removed}]
        kept = [m for i, m in enumerate(body.nodes) if i not in gone]
        if not n.outputs and all(m.op.pure for m in kept):
            drop.add(j)
            continue
        nodes[j] = Node(Op.FUSED, tuple(n.inputs[k] for k in keep), n.outputs, n.attrs,
                        (Graph([body.params[k] for k in keep], kept, body.outputs),))
    out = []
    for n in renamed([n for k, n in enumerate(nodes) if k not in drop], rename):
        out += _read_reshaped(n, reshaped)
    return out


RESHAPED = "reshaped"   # `_copies`' mark of a copy of another slot's value reshaped


def _read_reshaped(node, reshaped):
    """`node`, reading slots that copied another slot's value reshaped (`reshaped`: dst ->
    src), as nodes reading `src` reshaped: a `slot_get` of dst becomes src's `slot_get` and
    a reshape (views, no copy); a fused loop's element reads of dst read that view."""
    targets = [v for v in dict.fromkeys(node.inputs) if v in reshaped]
    if not targets:
        return [node]
    views, before = {}, []
    for dst in targets:
        value_t = dst.type.value_type
        whole = Var(reshaped[dst].type.value_type)
        views[dst] = node.outputs[0] if node.op == Op.SLOT_GET else Var(value_t)
        before += [Node(Op.SLOT_GET, (reshaped[dst],), (whole,)),
                   Node(Op.RESHAPE, (whole,), (views[dst],), {"shape": value_t.shape})]
    if node.op == Op.SLOT_GET:
        return before
    (body,) = node.bodies
    params = [Var(views[v].type) if v in views else p for p, v in zip(body.params, node.inputs)]
    now = {old: new for old, new in zip(body.params, params) if old is not new}
    got = {b.outputs[0]: now[b.inputs[0]] for b in body.nodes if b.op == Op.SLOT_GET and b.inputs[0] in now}
    kept = [replace(b, inputs=tuple(got.get(v, v) for v in b.inputs)) for b in body.nodes
            if not (b.op == Op.SLOT_GET and b.inputs[0] in now)]
    inputs = tuple(views.get(v, v) for v in node.inputs)
    return before + [Node(Op.FUSED, inputs, node.outputs, node.attrs,
                          (Graph(params, kept, [got.get(v, v) for v in body.outputs]),))]


def _copies(node, j, made_at, nodes):
    """(dst, src, position of src's read, where) for each whole copy of a tensor slot into
    another that `node` makes: `slot_set dst (slot_get src)` (where None), the same of its
    reshape (where RESHAPED), or a fused loop's element stores `slot_add[store] dst
    (slot_get src)` over the slots' shape (where: its index in the loop's body; loops run
    every element; src only read there, dst only stored to)."""
    if node.op == Op.SLOT_SET and node.inputs[1].type.shape:
        g = made_at.get(node.inputs[1])
        if g is not None and nodes[g].op == Op.SLOT_GET:
            yield node.inputs[0], nodes[g].inputs[0], g, None
        elif g is not None and nodes[g].op == Op.RESHAPE and made_at.get(nodes[g].inputs[0]) is not None \
                and nodes[made_at[nodes[g].inputs[0]]].op == Op.SLOT_GET:
            g = made_at[nodes[g].inputs[0]]
            yield node.inputs[0], nodes[g].inputs[0], g, RESHAPED
        return
    if node.op != Op.FUSED:
        return
    (body,) = node.bodies
    slot_of = {p: v for p, v in zip(body.params, node.inputs)}
    read = {m.outputs[0]: m.inputs[0] for m in body.nodes if m.op == Op.SLOT_GET and m.inputs[0] in slot_of}
    shape = tuple(node.attrs["shape"])
    for at, m in enumerate(body.nodes):
        if m.op != Op.SLOT_ADD or not m.attrs.get("store") or m.inputs[1] not in read:
            continue
        p_dst, p_src = m.inputs[0], read[m.inputs[1]]
        dst, src = slot_of.get(p_dst), slot_of[p_src]
        if dst is None or node.inputs.count(dst) != 1 or node.inputs.count(src) != 1 \
                or not isinstance(dst.type, RefType) or dst.type.value_type.shape != shape \
                or src.type.value_type.shape != shape or not _reads_slot(node, src) \
                or sum(p_dst in b.inputs for b in body.nodes) != 1:
            continue
        yield dst, src, j, at


def _reads_slot(node, slot):
    """Does `node` only read `slot`: its value, or its elements in a fused loop?"""
    if node.op == Op.SLOT_GET:
        return True
    if node.op != Op.FUSED:
        return False
    (body,) = node.bodies
    params = {p for p, v in zip(body.params, node.inputs) if v is slot}
    return all(b.op == Op.SLOT_GET for b in body.nodes if params & set(b.inputs))


def accumulate_products(nodes, outputs):
    """A matrix product used only to update a tensor slot (a weight's adjoint) becomes
    `matmul_add`: BLAS adds into the slot (beta = 1), no temporary, one pass over it."""
    users, position = uses(nodes), {v: k for k, n in enumerate(nodes) for v in n.outputs}
    out = list(nodes)
    for j, n in enumerate(nodes):
        if n.op not in (Op.SLOT_ADD, Op.SLOT_SET) or len(users.get(n.inputs[1], ())) != 1:
            continue
        k = position.get(n.inputs[1])
        if k is None or nodes[k].op != Op.MATMUL or any(m.op == Op.ARENA_RELEASE for m in nodes[k + 1:j]):
            continue   # (the product's operands must still be live where the update is)
        product = nodes[k]
        out[k] = None
        out[j] = Node(Op.MATMUL_ADD, (n.inputs[0],) + product.inputs, (),
                      {**product.attrs, "store": n.op == Op.SLOT_SET})
    return [n for n in out if n is not None]


def _product_under(x, j, nodes, position, users):
    """`(matmul, nodes between it and x)` where `x` is a matrix product, or a reshape of one,
    that only node `j` reads (the product's operands still live there), else None."""
    k = position.get(x)
    chain = []
    if k is not None and nodes[k].op == Op.RESHAPE and users.get(x) == [j]:
        chain, x, j = [nodes[k]], nodes[k].inputs[0], k
        k = position.get(x)
    if k is None or nodes[k].op != Op.MATMUL or users.get(x) != [j]:
        return None
    if any(m.op == Op.ARENA_RELEASE for m in nodes[k + 1:j]):
        return None
    return nodes[k], chain


BIAS_EPILOGUES = True   # False: the product and the bias add apart, as before (for A/Bs: `bench.gpt --ab`)


def bias_epilogues(nodes, outputs):
    """A matrix product (or its reshape) only read by the addition of a row broadcast to
    every row (a bias) becomes `matmul_bias`: the product's tiles start from the bias, no
    second pass over the result."""
    users, position = uses(nodes, outputs), {v: k for k, n in enumerate(nodes) for v in n.outputs}
    out = list(nodes)
    for j, n in enumerate(nodes):
        if n.op != Op.ADD or not BIAS_EPILOGUES:
            continue
        for x, bias in (n.inputs, n.inputs[::-1]):
            found = _product_under(x, j, nodes, position, users)
            t, bt = n.outputs[0].type, bias.type
            if found is None or x.type != t or bt.dtype != t.dtype or bt.shape[-1:] != t.shape[-1:] \
                    or any(d != 1 for d in bt.shape[:-1]) or len(bt.shape) > len(t.shape):
                continue
            product, chain = found
            shape = product.outputs[0].type.shape   # a matrix's rows (not a vector's or a dot's),
            if len(shape) != 2 or not t.shape or shape[1] != t.shape[-1]:   # nor a column reshaped to a vector
                continue
            out[j] = Node(Op.MATMUL_BIAS, product.inputs + (bias,), n.outputs, {**product.attrs, "shape": t.shape})
            for m in [product, *chain]:
                out[position[m.outputs[0]]] = None
            break
    return [m for m in out if m is not None]


_PER_ELEMENT = {Op.BROADCAST, Op.CONST, Op.SLOT, Op.SLOT_GET, Op.SLOT_ADD, Op.SLOT_SET}


def _per_element(node):
    """Whether a fused loop's body does nothing across elements (no row reduction, no
    product, no index map): each element's work reads and writes that element alone."""
    return all(n.op.elementwise or n.op in _PER_ELEMENT for n in node.bodies[0].nodes)


def merge_slot_loops(nodes, outputs):
    """Fused loops of one shape that hand a tensor on run as one loop, element by element
    in the same order, so that the tensor is never stored and read back:
    - a loop writing no slot whose results only a later loop of its shape reads (no arena
      release between, nothing between writing a slot it reads) runs inside that loop;
    - a loop writing a tensor slot and the next loop of its shape reading it (only arena
      releases between: a cotangent stored by one loop and split by the next) become one,
      and the slot one loop's (`localize_slots` makes it a register). Every slot both touch
      has the loop's shape; a loop moved above a release makes no value.
    Neither body may work across elements (row reductions, products, index maps)."""
    return _merge_slot_pairs(_sink_into_reader(list(nodes), outputs))


def _sink_into_reader(nodes, outputs):
    """The first rule of `merge_slot_loops`."""
    users, made, drop = uses(nodes, outputs), {v: k for k, n in enumerate(nodes) for v in n.outputs}, set()
    for k, first in enumerate(nodes):
        if first.op != Op.FUSED or not first.outputs or not _per_element(first) \
                or any(isinstance(v.type, RefType) for v in first.inputs):
            continue
        readers = {j for v in first.outputs for j in users.get(v, [len(nodes)])}
        j = readers.pop() if len(readers) == 1 else len(nodes)
        if j == len(nodes) or j in drop or nodes[j].op != Op.FUSED or not _per_element(nodes[j]) \
                or nodes[j].attrs["shape"] != first.attrs["shape"]:
            continue
        between = nodes[k + 1:j]
        touched = {v for n in between for v in n.inputs if isinstance(v.type, RefType)}
        if any(n.op == Op.ARENA_RELEASE or (n.bodies and n.op != Op.FUSED) for n in between) \
                or any(_viewed_slot(v, nodes, made) in touched for v in first.inputs):
            continue
        nodes[j] = _merged(first, nodes[j], keep_first=False)
        drop.add(k)
    return [n for k, n in enumerate(nodes) if k not in drop]


def _viewed_slot(v, nodes, made):
    """The slot whose memory value `v` is (through reshapes, transposes, broadcasts), or None."""
    while v in made and nodes[made[v]].op in _VIEWS:
        producer = nodes[made[v]]
        if producer.op == Op.SLOT_GET:
            return producer.inputs[0]
        v = producer.inputs[0]
    return None


def _merge_slot_pairs(nodes):
    """The second rule of `merge_slot_loops`."""
    made = {v: k for k, n in enumerate(nodes) for v in n.outputs}
    nodes, drop = list(nodes), set()
    for k, first in enumerate(nodes):
        if first.op != Op.FUSED or k in drop or not _per_element(first):
            continue
        j = k + 1
        while j < len(nodes) and nodes[j].op == Op.ARENA_RELEASE:
            j += 1
        if j == len(nodes) or j in drop:
            continue
        second = nodes[j]
        if second.op != Op.FUSED or second.attrs["shape"] != first.attrs["shape"] or not _per_element(second) \
                or (j > k + 1 and second.outputs) or any(made.get(v, -1) > k for v in second.inputs):
            continue
        shared = [v for v in first.inputs if isinstance(v.type, RefType) and v in second.inputs]
        if not shared or any(tuple(v.type.value_type.shape) != tuple(first.attrs["shape"]) for v in shared) \
                or _reads_written_views(first, second, nodes, made):
            continue
        nodes[k] = _merged(first, second)
        for v in second.outputs:
            made[v] = k
        drop.add(j)
    return [n for k, n in enumerate(nodes) if k not in drop]


_VIEWS = {Op.SLOT_GET, Op.RESHAPE, Op.TRANSPOSE, Op.BROADCAST}


def _reads_written_views(first, second, nodes, made):
    """Whether either loop reads, as a value, a view of a slot that one of them writes: its
    elements may lie elsewhere in the slot, written at another element of the merged loop."""
    written = set()
    for loop in (first, second):
        (body,) = loop.bodies
        targets = {n.inputs[0] for n in body.nodes if n.op in (Op.SLOT_ADD, Op.SLOT_SET)}
        written.update(v for v, p in zip(loop.inputs, body.params) if p in targets)
    return any(_viewed_slot(v, nodes, made) in written for v in first.inputs + second.inputs
               if not isinstance(v.type, RefType))


def _merged(first, second, keep_first=True):
    """One fused loop running `first`'s body then `second`'s at each element (`first`'s
    results only inside it unless `keep_first`)."""
    (a,), (b,) = first.bodies, second.bodies
    rename = dict(zip(first.outputs, a.outputs))   # (second may read first's results)
    params, inputs = list(a.params), list(first.inputs)
    for v, p in zip(second.inputs, b.params):
        if v in rename:
            rename[p] = rename[v]
        elif v in inputs:
            rename[p] = params[inputs.index(v)]
        else:
            inputs.append(v)
            params.append(p)
    body_nodes = a.nodes + [Node(n.op, tuple(rename.get(v, v) for v in n.inputs), n.outputs, n.attrs, n.bodies)
                            for n in b.nodes]
    kept, kept_outputs = (a.outputs, first.outputs) if keep_first else ([], ())
    body = Graph(params=params, nodes=body_nodes, outputs=kept + [rename.get(v, v) for v in b.outputs])
    return Node(Op.FUSED, tuple(inputs), kept_outputs + second.outputs, first.attrs, (body,))


def localize_slots(nodes, outputs):
    """A tensor slot used by a single fused loop and nowhere else becomes a per-element
    scalar slot inside it (a register): no buffer, no zero fill, no memory traffic."""
    users, local = uses(nodes), {}
    for n in nodes:
        if n.op == Op.SLOT and n.outputs[0].type.shape:
            u = [nodes[j] for j in users.get(n.outputs[0], [])]
            if len(u) == 1 and u[0].op == Op.FUSED and n.outputs[0] not in outputs \
                    and u[0].inputs.count(n.outputs[0]) == 1:
                local[n.outputs[0]] = u[0]
    if not local:
        return nodes
    result = []
    for n in nodes:
        if n.op == Op.SLOT and n.outputs[0] in local:
            continue
        if n.op == Op.FUSED and any(v in local for v in n.inputs):
            (body,) = n.bodies
            keep = [k for k, v in enumerate(n.inputs) if v not in local]
            slots = [Node(Op.SLOT, (), (Var(RefType(v.type.dtype)),), {"type": Type(v.type.dtype)})
                     for v in n.inputs if v in local]
            moved = [body.params[k] for k, v in enumerate(n.inputs) if v in local]
            rename = {old: s.outputs[0] for old, s in zip(moved, slots)}
            body_nodes = slots + [Node(b.op, tuple(rename.get(v, v) for v in b.inputs), b.outputs, b.attrs)
                                  for b in body.nodes]
            new_body = Graph(params=[body.params[k] for k in keep], nodes=body_nodes, outputs=body.outputs)
            n = Node(Op.FUSED, tuple(n.inputs[k] for k in keep), n.outputs, n.attrs, (new_body,))
        result.append(n)
    return result


REGION_STORES = True   # False: additions to regions keep the slot's zero fill (for A/Bs: `bench.gpt --ab`)


def first_adds_store(nodes, outputs):
    """A tensor slot first touched by an addition inside a fused loop (which covers every
    element), or by additions to regions that cover it exactly, needs no zero fill: those
    additions become stores."""
    users, changed = uses(nodes), {}
    for k, n in enumerate(nodes):
        if n.op != Op.SLOT or not n.outputs[0].type.shape:
            continue
        slot = n.outputs[0]
        where = users.get(slot, [])
        first = next((j for j in where if nodes[j].op != Op.SLOT_GET), None)
        if first is not None and nodes[first].op == Op.SLOT_ADD and _only_late_reads(nodes, users, where, first):
            changed[k] = Node(Op.SLOT, n.inputs, n.outputs, {**n.attrs, "uninit": True})
            changed[first] = Node(Op.SLOT_SET, nodes[first].inputs, (), {})   # a whole-slot first add
            continue
        regions = _covering_region_adds(nodes, users, where, slot) if REGION_STORES else None
        if regions:   # (attention's QKV cotangent: its three thirds)
            changed[k] = Node(Op.SLOT, n.inputs, n.outputs, {**n.attrs, "uninit": True})
            for j in regions:
                changed[j] = Node(Op.SLOT_ADD_SLICE, nodes[j].inputs, (), {**nodes[j].attrs, "store": True})
            continue
        fused_at = next((j for j in where if nodes[j].op == Op.FUSED), None)
        if fused_at is None:
            continue
        fused = nodes[fused_at]
        # earlier uses may only be pointer reads whose values are used after the loop
        if not _only_late_reads(nodes, users, where, fused_at) or fused.inputs.count(slot) != 1 \
                or tuple(fused.attrs["shape"]) != slot.type.shape:
            continue
        (body,) = fused.bodies
        param = body.params[fused.inputs.index(slot)]
        first = next((i for i, b in enumerate(body.nodes) if param in b.inputs), None)
        if first is None or body.nodes[first].op != Op.SLOT_ADD:
            continue
        changed[k] = Node(Op.SLOT, n.inputs, n.outputs, {**n.attrs, "uninit": True})
        j = fused_at
        fused = changed.get(j, fused)
        (body,) = fused.bodies
        b = body.nodes[first]
        new_nodes = list(body.nodes)
        new_nodes[first] = Node(b.op, b.inputs, b.outputs, {**b.attrs, "store": True})
        changed[j] = Node(Op.FUSED, fused.inputs, fused.outputs, fused.attrs,
                          (Graph(body.params, new_nodes, body.outputs),))
    return [changed.get(k, n) for k, n in enumerate(nodes)]


def _covering_region_adds(nodes, users, where, slot):
    """The positions of the additions to regions of `slot` that write it first, where they
    cover it exactly (steps 1, disjoint boxes) and it is read only after the last of them
    (or through pointers used only then); else None."""
    run = []
    for j in where:
        if nodes[j].op == Op.SLOT_GET:
            continue
        if nodes[j].op != Op.SLOT_ADD_SLICE or nodes[j].inputs[0] is not slot:
            break
        run.append(j)
    if not run or any(step != 1 for j in run for step in nodes[j].attrs["steps"]):
        return None
    boxes = [tuple(zip(nodes[j].attrs["starts"], nodes[j].attrs["stops"])) for j in run]
    volume = sum(int(np.prod([hi - lo for lo, hi in box])) for box in boxes)
    disjoint = all(any(a_hi <= b_lo or b_hi <= a_lo for (a_lo, a_hi), (b_lo, b_hi) in zip(a, b))
                   for i, a in enumerate(boxes) for b in boxes[i + 1:])
    late = all(nodes[j].op != Op.SLOT_GET or all(u > run[-1] for u in users.get(nodes[j].outputs[0], ()))
               for j in where if j < run[-1])
    return run if disjoint and late and volume == int(np.prod(slot.type.value_type.shape)) else None


def _only_late_reads(nodes, users, where, at):
    """Every use of a slot before node `at` is a pointer read whose value is used only after it."""
    return all(nodes[j].op == Op.SLOT_GET and all(u > at for u in users.get(nodes[j].outputs[0], ()))
               for j in where if j < at)


def _cone(body, var, leaves=frozenset()):
    """The body nodes computing `var`, if all are cheap and read only params and `leaves`
    (results of the loop, read from its stored outputs); else None."""
    producer = {v: n for n in body.nodes for v in n.outputs}
    needed, stack = [], [var]
    while stack:
        v = stack.pop()
        n = producer.get(v)
        if n is None or v in leaves:
            continue   # a param, or a stored result
        if not n.op.cheap:
            return None
        if n not in needed:
            needed.append(n)
            stack.extend(n.inputs)
    return [n for n in body.nodes if n in needed]


def recompute_cheap(nodes, outputs):
    """A fused loop's tensor result that only later fused loops read, and that costs a few
    arithmetic operations, is recomputed there instead of written to memory and read back."""
    users = uses(nodes)

    def choose(k, producer, out, inner, nodes):
        readers = users.get(out, [])
        if out.type.shape and out not in outputs and readers and all(
                nodes[j].op == Op.FUSED and nodes[j].attrs["shape"] == producer.attrs["shape"] for j in readers):
            cone = _cone(producer.bodies[0], inner, _stored_siblings(producer, inner))
            if cone is None or _streams(cone, producer) > RECOMPUTE_STREAMS:
                return None
            return cone, readers
        return None
    return recompute_in_readers(list(nodes), choose)


def _stored_siblings(producer, inner):
    """The loop's other results that it stores whatever the readers do (each made by an
    expensive op: `tanh`, `exp`): a cheap result computed from them (`1 + tanh(u)` beside
    `tanh(u)`) is recomputed from the stored one where it is read, not stored too."""
    (body,) = producer.bodies
    made, shape = {v: n for n in body.nodes for v in n.outputs}, tuple(producer.attrs["shape"])
    return {v for out, v in zip(producer.outputs, body.outputs)
            if v is not inner and v in made and not made[v].op.cheap and out.type.shape == shape}


# a cheap result whose cone reads more whole tensors than this is stored, not recomputed:
# a residual stream's running sum, recomputed, grew by a tensor per layer in every later
# loop (17 in a 4-layer GPT's last LayerNorm) and made each layer's loops distinct kernels;
# stored, the layers share their kernels (the large GPT step: 87 -> 58 fused kernels, their
# LLVM time 1.85 -> 1.31 s of CPU, the step's run time unchanged within the noise: 0.995x,
# 0.97-1.03)
RECOMPUTE_STREAMS = 2


def _streams(cone, producer):
    """How many whole tensors of the loop's shape `cone` reads: each reader reads them
    instead of the one stored result."""
    (body,) = producer.bodies
    shape = tuple(producer.attrs["shape"])
    made = {v for n in cone for v in n.outputs}
    whole = {p for p in body.params if getattr(p.type, "shape", None) == shape} | (set(body.outputs) - made)
    return len({v for n in cone for v in n.inputs if v in whole})


def recompute_in_readers(nodes, choose, drop_emptied=False, replaced=None):
    """The node list with each fused loop's results that `choose(k, producer, out, inner,
    nodes)` gives (cone, readers) for computed in those readers by the cone (`inline_cone`)
    and no longer by the loop; with `drop_emptied`, a pure loop left with no result goes.
    `replaced(j, node)` hears of each reader rewritten (the list is `nodes` itself)."""
    drop = set()
    for k, producer in enumerate(nodes):
        if producer.op != Op.FUSED:
            continue
        (body,) = producer.bodies
        keep = []
        for out, inner in zip(producer.outputs, body.outputs):
            chosen = choose(k, producer, out, inner, nodes)
            if chosen is None:
                keep.append((out, inner))
                continue
            cone, readers = chosen
            for j in readers:
                nodes[j] = inline_cone(nodes[j], out, cone, body, producer)
                if replaced is not None:
                    replaced(j, nodes[j])
        if len(keep) < len(producer.outputs):
            if drop_emptied and not keep and all(n.op.pure for n in body.nodes):
                drop.add(k)
                continue
            new_body = Graph(body.params, body.nodes, [inner for _, inner in keep])
            nodes[k] = Node(Op.FUSED, producer.inputs, tuple(out for out, _ in keep), producer.attrs, (new_body,))
    return [n for k, n in enumerate(nodes) if k not in drop]


def inline_cone(consumer, var, cone, source, producer):
    """`consumer` with its param for `var` computed in its own body by a copy of `cone`."""
    (body,) = consumer.bodies
    inputs, params = list(consumer.inputs), list(body.params)
    param_of = dict(zip(inputs, params))
    rename = {}
    read = {v for n in cone for v in n.inputs} - {v for n in cone for v in n.outputs} - set(source.params)
    stored = [(outer, v) for outer, v in zip(producer.outputs, source.outputs) if v in read]
    for outer, p in [*zip(producer.inputs, source.params), *stored]:   # the cone's reads of the producer's
        if outer not in param_of:                                        # inputs and stored results
            param_of[outer] = Var(outer.type)
            inputs.append(outer)
            params.append(param_of[outer])
        rename[p] = param_of[outer]
    copies = []
    for n in cone:
        outs = tuple(Var(v.type) for v in n.outputs)
        copies.append(Node(n.op, tuple(rename.get(v, v) for v in n.inputs), outs, n.attrs))
        rename.update(zip(n.outputs, outs))
    target = param_of[var]
    k = inputs.index(var)
    del inputs[k], params[k]
    result = rename[next(inner for out, inner in zip(producer.outputs, source.outputs) if out is var)]
    nodes = copies + [Node(n.op, tuple(result if v is target else v for v in n.inputs), n.outputs, n.attrs)
                      for n in body.nodes]
    outputs = [result if v is target else v for v in body.outputs]
    return Node(Op.FUSED, tuple(inputs), consumer.outputs, consumer.attrs, (Graph(params, nodes, outputs),))


def batched_products(nodes, outputs):
    """`bmm`s that need no loop of small GEMMs (what `vmap(grad)` makes of shared weights):
    a product with a matrix broadcast along the batch axis (each lane's copy of the shared
    weights, forward and transposed) becomes one GEMM of the other operand's rows against
    the matrix, and the broadcast copy goes dead; a product over one term (the per-lane
    outer products of the weights' cotangents) becomes an elementwise `mul`, which fusion
    writes straight into the gradient's slot."""
    producer, users = {v: n for n in nodes for v in n.outputs}, uses(nodes, outputs)
    nodes = [_sink_shared(n, producer) if n.op.name in HEAD else n for n in nodes]
    before = {}   # position -> nodes to put before it
    for k, n in enumerate(nodes):
        if n.op != Op.BMM:
            continue
        shared = _unbatched_product(n, producer)
        outer = None if shared else _outer_products(n)
        at = k
        if outer:   # next to its (first) reader, so that fusion joins them in one loop (past
            first = min(users.get(n.outputs[0], [k]))   # pure nodes: its operands stay as they are)
            at = first if all(m.op.pure for m in nodes[k + 1:first]) else k
        if shared or outer:
            before.setdefault(at, []).extend(shared or outer)
            nodes[k] = None
    if not before:
        return nodes
    out = []
    for k, n in enumerate(nodes + [None]):
        out.extend(before.get(k, ()))
        if n is not None:
            out.append(n)
    return out


def _sink_shared(node, producer):
    """Control-flow `node` given the matrix, not its broadcast copy, where a body reads a
    captured copy only in products that then become GEMMs (a loop over shared weights under
    vmap(grad)): the broadcast moves into the body, and the rewrite drops it there."""
    _, _, caps = split_operands(node)
    inputs, bodies = list(node.inputs), list(node.bodies)
    for c, v in enumerate(caps):
        w = _shared(v, producer)
        if w is None:
            continue
        params = [g.params[len(g.params) - len(caps) + c] for g in bodies]
        if not all(_only_gemms(g, p, producer[v]) for g, p in zip(bodies, params)):
            continue
        inputs[len(inputs) - len(caps) + c] = w
        for j, (g, p) in enumerate(zip(bodies, params)):
            new = Var(w.type)
            body = Graph([new if q is p else q for q in g.params],
                         [Node(Op.BROADCAST, (new,), (p,), producer[v].attrs)] + g.nodes, g.outputs)
            body.nodes = batched_products(body.nodes, body.outputs)
            bodies[j] = body
    return replace(node, inputs=tuple(inputs), bodies=tuple(bodies)) if inputs != list(node.inputs) else node


def _only_gemms(graph, param, broadcast):
    """Whether `graph` reads `param` (a copy made by `broadcast`) only in rewritable products."""
    readers = [n for n in graph.nodes if param in n.inputs]
    return param not in graph.outputs and all(
        n.op == Op.BMM and _unbatched_product(n, {param: broadcast}) for n in readers)


def _outer_products(node):
    """Nodes computing the `bmm` `node` over a single term (op(a) a column, op(b) a row per
    lane) as an elementwise product, or None."""
    (a, b), out = node.inputs, node.outputs[0]
    size, m, n = out.type.shape
    if a.type.shape[1 if node.attrs["ta"] else 2] != 1:
        return None
    column, row = (_reshaped(x, shape) for x, shape in ((a, (size, m, 1)), (b, (size, 1, n))))
    return [r for r, _ in (column, row) if r is not None] + [Node(Op.MUL, (column[1], row[1]), (out,), {})]


def _reshaped(x, shape):
    """(a node reshaping `x` to `shape` or None if it has it, the reshaped value)."""
    if x.type.shape == shape:
        return None, x
    node = Node(Op.RESHAPE, (x,), (Var(Type(x.type.dtype, shape)),), {"shape": shape})
    return node, node.outputs[0]


def _shared(v, producer):
    """The matrix `v` broadcasts along its leading (batch) axis, or None."""
    n = producer.get(v)
    if n is None or n.op != Op.BROADCAST:
        return None
    w = n.inputs[0]
    return w if w.type.shape in (v.type.shape[1:], (1,) + v.type.shape[1:]) else None


def _unbatched_product(node, producer):
    """Nodes computing the `bmm` `node` as one `matmul`, or None. Per lane, out = op(a) @ op(b);
    with b shared that is the rows of every lane's op(a) against op(b); with a shared, the
    transposed product op(b)ᵀ @ op(a)ᵀ, whose rows are the result's when it is a vector."""
    (a, b), (ta, tb) = node.inputs, (node.attrs["ta"], node.attrs["tb"])
    size, m, n = node.outputs[0].type.shape
    if not size * m * n:   # an empty product: nothing to gain (and no rows to divide by)
        return None
    w_b, w_a = _shared(b, producer), _shared(a, producer)
    if w_b is not None and (not ta or m == 1):
        x, w, flag, rows, cols = a, w_b, tb, size * m, n
    elif w_a is not None and (n == 1 or m == 1 and tb):
        x, w, flag, rows, cols = b, w_a, not ta, size * n, m
    else:
        return None
    dtype = node.outputs[0].type.dtype
    nodes = []

    def make(op, inputs, out_shape, **attrs):
        nodes.append(Node(op, inputs, (Var(Type(dtype, out_shape)),), attrs))
        return nodes[-1].outputs[0]
    if len(w.type.shape) == 3:
        w = make(Op.RESHAPE, (w,), w.type.shape[1:], shape=w.type.shape[1:])
    k = x.type.shape[1] * x.type.shape[2] // (rows // size)
    flat = make(Op.RESHAPE, (x,), (rows, k), shape=(rows, k))
    product = make(Op.MATMUL, (flat, w), (rows, cols), ta=False, tb=flag)
    nodes.append(Node(Op.RESHAPE, (product,), node.outputs, {"shape": node.outputs[0].type.shape}))
    return nodes


SHARED_TRANSPOSE_MAX = 1 << 20   # m·n·k of the products that read a transposed copy (register tiles)


def shared_transposes(graph):
    """A matrix read transposed by several small products (a weight in an unrolled loop,
    `dz @ W.T` at every step) is transposed once, first thing: each product then
    runs untransposed in register tiles rather than one BLAS call each. Only for the
    graph's inputs (transposed first thing: no arena scope to outlive, no slot write to
    miss)."""
    nodes, params = graph.nodes, set(graph.params)
    reads = {}
    for k, n in enumerate(nodes):
        if n.op not in (Op.MATMUL, Op.MATMUL_ADD):
            continue
        a, b = n.inputs[-2:]
        out_shape = n.outputs[0].type.shape if n.op == Op.MATMUL else n.inputs[0].type.value_type.shape
        depth = a.type.shape[0] if n.attrs["ta"] else a.type.shape[1]
        if out_shape[0] * out_shape[1] * depth > SHARED_TRANSPOSE_MAX:
            continue
        for flag, v in (("ta", a), ("tb", b)):
            if n.attrs[flag] and 1 not in v.type.shape and v in params:
                reads.setdefault(v, []).append((k, flag))
    shared = {v: ks for v, ks in reads.items() if len(ks) >= 2}
    if not shared:
        return
    transposed = {v: Var(Type(v.type.dtype, v.type.shape[::-1])) for v in shared}
    rewrite = {(k, flag): v for v, ks in shared.items() for k, flag in ks}
    out = [Node(Op.TRANSPOSE, (v,), (tv,), {"perm": (1, 0)}) for v, tv in transposed.items()]
    for k, n in enumerate(nodes):
        flags = [f for f in ("ta", "tb") if (k, f) in rewrite]
        if flags:
            ins = list(n.inputs)
            for f in flags:
                i = len(ins) - (2 if f == "ta" else 1)
                ins[i] = transposed[ins[i]]
            n = Node(n.op, tuple(ins), n.outputs, {**n.attrs, **{f: False for f in flags}})
        out.append(n)
    graph.nodes = out


def masked_row_adds(nodes, outputs):
    """The adjoint of `one_hot(labels, n) @ W` (rows of W at labels, a zero row for a label
    outside [0, n)) adds the cotangent's rows at `labels` after zeroing those of labels
    outside: that mask, a pass over the cotangent, becomes the row addition's own check
    (`slot_scatter_add[skip_outside]` adds no row for an index outside the slot's rows)."""
    users, made = uses(nodes, outputs), {v: n for n in nodes for v in n.outputs}

    def const(v):
        n = made.get(v)
        return n.attrs["value"] if n is not None and n.op == Op.CONST and not v.type.shape else None

    def inside(mask, index, rows):   # (index >= 0) & (index < rows), as `one_hot` stages it
        n = made.get(mask)
        if n is not None and n.op == Op.RESHAPE:
            n = made.get(n.inputs[0])
        if n is None or n.op != Op.AND or n.inputs[0].type.shape != index.type.shape:
            return False
        tests = sorted((made.get(v) for v in n.inputs), key=lambda m: m is None or m.op != Op.GE)
        return all(t is not None for t in tests) and [t.op for t in tests] == [Op.GE, Op.LT] \
            and all(t.inputs[0] is index for t in tests) and const(tests[0].inputs[1]) == 0 \
            and const(tests[1].inputs[1]) == rows

    changed = {}
    for k, n in enumerate(nodes):
        if n.op != Op.SLOT_SCATTER_ADD or n.attrs.get("skip_outside"):
            continue
        ref, index, value = n.inputs
        get = made.get(value)
        if get is None or get.op != Op.SLOT_GET or users.get(value) != [k]:
            continue
        temp = get.inputs[0]
        at = [j for j in users.get(temp, []) if nodes[j].op != Op.SLOT_GET]
        slot = made.get(temp)
        if slot is None or slot.op != Op.SLOT or slot.attrs.get("uninit") or len(at) != 1 \
                or nodes[at[0]].op != Op.SLOT_ADD or at[0] > k \
                or any(nodes[j].op == Op.SLOT_GET and users.get(nodes[j].outputs[0]) != [k]
                       for j in users.get(temp, []) if j != at[0]):
            continue
        add = nodes[at[0]]
        sel = made.get(add.inputs[1])
        if sel is None or sel.op != Op.SELECT or users.get(add.inputs[1]) != [at[0]] \
                or const(sel.inputs[2]) != 0 or sel.inputs[1].type != add.inputs[1].type \
                or not inside(sel.inputs[0], index, ref.type.shape[0]):
            continue
        changed[at[0]] = replace(add, inputs=(temp, sel.inputs[1]))
        changed[k] = replace(n, attrs={**n.attrs, "skip_outside": True})
    return [changed.get(k, n) for k, n in enumerate(nodes)] if changed else nodes
