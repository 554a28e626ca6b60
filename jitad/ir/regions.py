"""Slices and concatenations inside fused loops: a shifted operand (`concatenate([c,
y[:-1]])`) is read through its index map in the loop that uses it, and a region of a
fused loop's result added to a slot (the adjoint of a shift: the VJP of `concatenate`
is slices, that of a slice a region added in place) is added from inside that loop.
No copy is made either way.

In a fused body these ops keep their names with an element's meaning: `slice` reads
one element of a tensor param at the mapped index; `concat` picks its piece by where
the loop index falls on its axis (`sizes`: the pieces' lengths); `slot_add_slice` adds
the element into a slot param at the mapped index while the loop index lies in
[`src_starts`, `src_stops`). The lowering runs one loop nest per box between these
cuts, so each box knows statically which piece or region applies (`cuts`).
"""
import bisect
import itertools

from .graph import Graph, Node, Var, uses
from .ops import Op
from .peephole import only_late_reads, recompute_in_readers
from .types import RefType, TableType, Type


def indexed_reads(nodes, outputs):
    """A tensor made by `slice`, or `concatenate` of slices and tensors, that only fused
    loops of its shape read is read through that index map inside each of them: the
    slice and concatenation copies go."""
    nodes = list(nodes)
    users, made, spans = node_facts(nodes, outputs)
    drop = set()
    for k, n in enumerate(nodes):
        chain = _chain(n, k, nodes, made, users)
        if not chain:
            continue
        readers = sorted(set(users.get(n.outputs[0], [])))
        if readers and readers[-1] == len(nodes):   # returned: it is made
            continue
        reads = {x for i in chain for x in nodes[i].inputs if made.get(x) not in chain}
        if not readers or any(nodes[j].op != Op.FUSED or tuple(nodes[j].attrs["shape"]) != n.outputs[0].type.shape
                              or reduces_rows(nodes[j])
                              or not all(unchanged_between(x, min(chain), j, spans) for x in reads)
                              for j in readers):
            continue
        for j in readers:
            nodes[j] = _absorb(nodes[j], n.outputs[0], [nodes[i] for i in sorted(chain)])
            spans.note(j, nodes[j])
        drop.update(chain)
    return [n for k, n in enumerate(nodes) if k not in drop]


def _chain(n, k, nodes, made, users):
    """Positions of `n` (at `k`: a `slice`, or a `concat` with the slices only it reads),
    or None."""
    if n.op == Op.SLICE and not isinstance(n.inputs[0].type, RefType):
        return {k}
    if n.op != Op.CONCAT:
        return None
    chain = {k}
    for p in n.inputs:
        j = made.get(p)
        if j is not None and nodes[j].op == Op.SLICE and users.get(p) == [k]:
            chain.add(j)
        elif isinstance(p.type, RefType):
            return None
    return chain


def node_facts(nodes, outputs):
    """What the rewrites reading values across a node list ask of it: each var's readers
    (`uses`), the position of the node making each var, and the `Spans` that
    `unchanged_between` queries."""
    users = uses(nodes, outputs)
    made = {v: k for k, n in enumerate(nodes) for v in n.outputs}
    return users, made, Spans(nodes, made, users)


_GETS = (Op.SLOT_GET, Op.TABLE_GET)


class Spans:
    """A node list indexed once for `unchanged_between`, so that asking about a span costs
    a few lookups, not a walk over its nodes (a walk per query made the passes quadratic
    on large unrolled programs): the arena releases with their marks' positions (a range
    minimum table), the writers of each slot or table read in the list (positions, sorted), and running counts
    of the nodes that may write through a ref the list did not make. A rewrite that
    replaces a node calls `note` with the new one; the facts only grow (a position once a
    writer stays one), so an answer can be too cautious, never wrong."""

    def __init__(self, nodes, made, users):
        marks = {m.outputs[0]: k for k, m in enumerate(nodes) if m.op == Op.ARENA_MARK}
        self.local = {v for m in nodes if m.op in (Op.SLOT, Op.TABLE) for v in m.outputs}
        releases = [(k, marks.get(m.inputs[0], -1)) for k, m in enumerate(nodes) if m.op == Op.ARENA_RELEASE]
        self.release_at = [k for k, _ in releases]
        self.release_min = [[mark for _, mark in releases]]   # level i: minimum over 2**i releases
        while 2 ** len(self.release_min) <= len(releases):
            prev, half = self.release_min[-1], 2 ** (len(self.release_min) - 1)
            self.release_min.append([min(prev[i], prev[i + half]) for i in range(len(prev) - half)])
        read = {n.inputs[0] for n in nodes if n.op in _GETS}   # the slots and tables read in the list
        self.writers = {v: [k for k in sorted(set(users.get(v, ()))) if k < len(nodes) and nodes[k].op not in _GETS]
                        for v in read}
        self.foreign = [0] * (len(nodes) + 1)   # Fenwick tree: nodes writing through refs made elsewhere
        for k, n in enumerate(nodes):
            if self._foreign(n):
                self._count(k)
        self.nodes, self.made = nodes, made

    def _foreign(self, n):
        return not n.op.pure and any(isinstance(v.type, (RefType, TableType)) and v not in self.local
                                     for v in n.inputs)

    def _count(self, k):
        k += 1
        while k < len(self.foreign):
            self.foreign[k] += 1
            k += k & -k

    def _foreign_before(self, k):
        """How many nodes before position k write through a ref made elsewhere."""
        total = 0
        while k > 0:
            total += self.foreign[k]
            k -= k & -k
        return total

    def note(self, k, node):
        """Position `k` now holds `node` (its writes and refs join the facts)."""
        if node.op not in _GETS:
            for v in node.inputs:
                at = self.writers.get(v)
                if at is not None and k not in at:
                    bisect.insort(at, k)
        if self._foreign(node):
            self._count(k)

    def released_before(self, born, start, end):
        """Whether an arena release at a position in (start, end] closes a scope marked
        before position `born`."""
        lo, hi = bisect.bisect_right(self.release_at, start), bisect.bisect_right(self.release_at, end)
        if lo >= hi:
            return False
        level = (hi - lo).bit_length() - 1
        table = self.release_min[level]
        return min(table[lo], table[hi - 2 ** level]) < born

    def written(self, ref, start, end):
        """Whether a node at a position in (start, end] takes `ref` other than to read it."""
        at = self.writers.get(ref)
        if at is None:   # not read in the list when indexed: asked the long way
            return any(ref in m.inputs and m.op not in _GETS for m in self.nodes[start + 1:end + 1])
        i = bisect.bisect_right(at, start)
        return i < len(at) and at[i] <= end

    def foreign_writes(self, start, end):
        return self._foreign_before(end + 1) - self._foreign_before(start + 1) > 0


def unchanged_between(x, start, end, spans):
    """Whether tensor `x` holds the same elements, in a live buffer, while the node at
    `end` runs as at `start`: the slot or table it may be a view of is not written in
    between (nor by that node), and no arena scope that holds its buffer closes."""
    nodes, made = spans.nodes, spans.made
    root = x
    while root in made and nodes[made[root]].op.view and nodes[made[root]].op != Op.SLOT_GET:
        root = nodes[made[root]].inputs[0]
    if spans.released_before(made.get(root, -1), start, end):   # the reader too: it may write what it reads
        return False
    producer = nodes[made[root]] if root in made else None
    if producer is not None and producer.op in _GETS:
        return not spans.written(producer.inputs[0], start, end)
    if producer is not None:
        return True   # a value of its own
    return not spans.foreign_writes(start, end)   # a param: written only through refs it cannot alias


def _absorb(f, v, chain):
    """Fused loop `f` with its operand `v` computed in its body by `chain`."""
    (body,) = f.bodies
    inputs, params = list(f.inputs), list(body.params)
    target = params[inputs.index(v)]
    del params[inputs.index(v)], inputs[inputs.index(v)]
    local = {}

    def param(x):
        if x in local:
            return local[x]
        if x not in inputs:
            inputs.append(x)
            params.append(Var(x.type))
        return params[inputs.index(x)]
    new = []
    for n in chain:
        out = target if n.outputs[0] is v else Var(Type(n.outputs[0].type.dtype))
        attrs = dict(n.attrs)
        if n.op == Op.CONCAT:
            attrs["sizes"] = tuple(p.type.shape[n.attrs["axis"]] for p in n.inputs)
        new.append(Node(n.op, tuple(param(x) for x in n.inputs), (out,), attrs))
        local[n.outputs[0]] = out
    return Node(Op.FUSED, tuple(inputs), f.outputs, f.attrs, (Graph(params, new + body.nodes, body.outputs),))


def region_adds(nodes, outputs):
    """A fused loop that stores a slot S read only to add a slice of it into a region of
    slot R (through a temporary slot T: `slot_get S`, `slice`, `slot_set T`, `slot_get
    T`, `slot_add_slice R`) adds into R from inside the loop; S, T and the copies go."""
    users = uses(nodes, outputs)
    made = {v: k for k, n in enumerate(nodes) for v in n.outputs}
    nodes, drop = list(nodes), set()
    for k, f in enumerate(nodes):
        if f.op != Op.FUSED or reduces_rows(f):
            continue
        for s in f.inputs:
            found = _region_chain(s, k, nodes, made, users, outputs)
            if found is None or drop.intersection(found[0]):
                continue
            chain, (a, add) = found
            f = _add_region(f, s, add.inputs[0], a.attrs, add.attrs)
            nodes[k] = f
            drop.update(chain)
    nodes = [n for k, n in enumerate(nodes) if k not in drop]
    return [n for k, n in enumerate(nodes) if not _empty_scope(nodes, k)]


def region_stores(nodes, outputs):
    """A zero-filled tensor slot whose first write is one fused loop's region add (the
    adjoint of a shift, `y[:-1]` in `concatenate([c, y[:-1]])`: every element but the
    shifted-out ones) is stored by that add, and only the elements outside the region are
    zeroed (the slot's `zero_boxes`), not the whole slot first."""
    users = uses(nodes, outputs)
    changed = {}
    for k, n in enumerate(nodes):
        if n.op != Op.SLOT or n.attrs.get("uninit") or "zero_boxes" in n.attrs or not n.attrs["type"].shape:
            continue
        slot, shape = n.outputs[0], n.attrs["type"].shape
        where = users.get(slot, [])
        at = next((j for j in where if nodes[j].op != Op.SLOT_GET), None)
        if at is None or at == len(nodes) or nodes[at].op != Op.FUSED or not only_late_reads(nodes, users, where, at):
            continue
        f = changed.get(at, nodes[at])
        found = _sole_region_add(f, slot, shape)
        if found is None:
            continue
        i, box = found
        (body,) = f.bodies
        b = body.nodes[i]
        new = list(body.nodes)
        new[i] = Node(b.op, b.inputs, b.outputs, {**b.attrs, "store": True})
        changed[at] = Node(Op.FUSED, f.inputs, f.outputs, f.attrs, (Graph(body.params, new, body.outputs),))
        changed[k] = Node(Op.SLOT, n.inputs, n.outputs, {**n.attrs, "zero_boxes": _outside(shape, *box)})
    return [changed.get(k, n) for k, n in enumerate(nodes)]


def _sole_region_add(f, slot, shape):
    """(its position in the body, the (starts, stops) it writes) of the one op of fused
    loop `f` touching `slot`, where that op adds a step-1 region inside `shape`; else None."""
    if f.inputs.count(slot) != 1:
        return None
    (body,) = f.bodies
    p = body.params[f.inputs.index(slot)]
    touching = [i for i, b in enumerate(body.nodes) if p in b.inputs]
    if len(touching) != 1:
        return None
    b = body.nodes[touching[0]]
    a = b.attrs
    if b.op != Op.SLOT_ADD_SLICE or b.inputs[0] is not p or a.get("store") or "flat" in a \
            or len(a["starts"]) != len(shape) or any(step != 1 for step in a["steps"]):
        return None
    loop = f.attrs["shape"]
    src = [(max(lo, 0), min(hi, size)) for lo, hi, size in zip(a["src_starts"], a["src_stops"], loop)]
    starts = tuple(s + lo - s0 for s, (lo, _), s0 in zip(a["starts"], src, a["src_starts"]))
    stops = tuple(s + hi - s0 for s, (_, hi), s0 in zip(a["starts"], src, a["src_starts"]))
    if any(lo < 0 or hi > size or lo > hi for lo, hi, size in zip(starts, stops, shape)):
        return None
    return touching[0], (starts, stops)


def _outside(shape, starts, stops):
    """Disjoint boxes ((starts), (stops)) that cover `shape` outside the box [starts, stops)."""
    out = []
    for d in range(len(shape)):
        for lo, hi in ((0, starts[d]), (stops[d], shape[d])):
            if lo < hi:
                out.append((tuple(starts[:d]) + (lo,) + (0,) * (len(shape) - d - 1),
                            tuple(stops[:d]) + (hi,) + tuple(shape[d + 1:])))
    return tuple(out)


def _empty_scope(nodes, k):
    """Whether node `k` is half of an arena scope around nothing (what the rewrite leaves)."""
    n = nodes[k]
    if n.op == Op.ARENA_MARK:
        return k + 1 < len(nodes) and nodes[k + 1].op == Op.ARENA_RELEASE and nodes[k + 1].inputs[0] is n.outputs[0]
    return n.op == Op.ARENA_RELEASE and k > 0 and nodes[k - 1].outputs[:1] == n.inputs[:1]


def _region_chain(s, k, nodes, made, users, outputs):
    """(positions to drop, (the slice, the slot_add_slice)) for slot `s` written by the
    fused loop at `k` in the chain `region_adds` rewrites, or None."""
    def only(v, op):
        u = users.get(v, [])
        return u[0] if len(u) == 1 and u[0] < len(nodes) and nodes[u[0]].op == op else None
    f = nodes[k]
    if not isinstance(s.type, RefType) or s not in made or nodes[made[s]].op != Op.SLOT or s in outputs:
        return None
    (body,) = f.bodies
    p = body.params[f.inputs.index(s)]
    touching = [b for b in body.nodes if p in b.inputs]
    if len(touching) != 1 or touching[0].op != Op.SLOT_ADD or tuple(f.attrs["shape"]) != s.type.shape \
            or f.inputs.count(s) != 1:
        return None
    where = users.get(s, [])
    if len(where) != 2 or where[0] != k or where[1] == len(nodes) or nodes[where[1]].op != Op.SLOT_GET:
        return None
    jv = where[1]
    j0 = only(nodes[jv].outputs[0], Op.SLICE)
    if j0 is None or any(st != 1 for st in nodes[j0].attrs["steps"]):
        return None
    j1 = only(nodes[j0].outputs[0], Op.SLOT_SET)
    if j1 is None:
        return None
    t = nodes[j1].inputs[0]
    tu = users.get(t, [])
    if t in outputs or t not in made or nodes[made[t]].op != Op.SLOT or len(tu) != 2 or tu[0] != j1 \
            or tu[1] == len(nodes) or nodes[tu[1]].op != Op.SLOT_GET:
        return None
    j2 = tu[1]
    j3 = only(nodes[j2].outputs[0], Op.SLOT_ADD_SLICE)
    if j3 is None or nodes[j3].inputs[1] is not nodes[j2].outputs[0]:
        return None
    r = nodes[j3].inputs[0]
    if r in (s, t) or _reads(f, r) or made.get(r, -1) > k or any(u for u in users.get(r, []) if k < u < j3):
        return None
    return {made[s], jv, j0, j1, made[t], j2, j3}, (nodes[j0], nodes[j3])


def _reads(f, r):
    """Whether fused loop `f` reads or stores slot `r` (adding to it commutes with the
    region add; a store, `first_adds_store`'s, would overwrite it)."""
    if r not in f.inputs:
        return False
    q = f.bodies[0].params[f.inputs.index(r)]
    return any(q in b.inputs and (b.op != Op.SLOT_ADD or b.attrs.get("store")) for b in f.bodies[0].nodes)


def _add_region(f, s, r, region, add):
    """Fused loop `f` adding into slot `r` at the region, in place of storing slot `s`."""
    (body,) = f.bodies
    i = f.inputs.index(s)
    p = body.params[i]
    inputs, params = list(f.inputs), list(body.params)
    if r in inputs:
        q = params[inputs.index(r)]
        del inputs[i], params[i]
    else:
        inputs[i], params[i] = r, Var(r.type)
        q = params[i]
    attrs = {"src_starts": region["starts"], "src_stops": region["stops"],
             "starts": add["starts"], "steps": add["steps"]}
    new = [Node(Op.SLOT_ADD_SLICE, (q, b.inputs[1]), (), attrs) if p in b.inputs else b for b in body.nodes]
    return Node(Op.FUSED, tuple(inputs), f.outputs, f.attrs, (Graph(params, new, body.outputs),))


def cuts(node):
    """Per loop axis of fused `node`, the sorted positions where a body's `concat` changes
    piece or a region add starts or stops (0 and the length included)."""
    shape = node.attrs["shape"]
    at = [{0, n} for n in shape]
    needed = offsets(node.bodies[0], len(shape))
    for b in node.bodies[0].nodes:
        if b.op == Op.CONCAT:   # where the index, at each offset it is read at, changes piece
            d = b.attrs["axis"]
            at[d].update(min(max(c - o[d], 0), shape[d]) for o in needed.get(b.outputs[0], ())
                         for c in itertools.accumulate(b.attrs["sizes"]))
        elif b.op == Op.SLOT_ADD_SLICE:
            for d, (lo, hi) in enumerate(zip(b.attrs["src_starts"], b.attrs["src_stops"])):
                at[d].update((lo, hi))
    return [sorted(c) for c in at]


def boxes(node):
    """The boxes (per axis (start, stop)) between `cuts`, in order."""
    return list(itertools.product(*[list(zip(c, c[1:])) for c in cuts(node)]))


def row_reduction(node, shape):
    """Whether `node`, a reduction of a value of `shape` (in a fused body: of the loop's
    shape), reduces its last axis alone, over a loop of at least two axes."""
    return len(shape) >= 2 and tuple(node.attrs["axes"]) == (len(shape) - 1,)


def column_reduction(node, shape):
    """Whether `node`, a reduction of a value of `shape` (in a fused body: of the loop's
    shape), reduces every axis but the last, over a loop of at least two axes, to a row."""
    return len(shape) >= 2 and tuple(node.attrs["axes"]) == tuple(range(len(shape) - 1)) \
        and not node.attrs["keepdims"]


def reduces_rows(node):
    """Whether fused `node` takes row sums or maxima in its loop (`row_reductions`): its
    rows run in one loop nest, so it reads and adds nothing through an index map."""
    shape = tuple(node.attrs["shape"])
    return any(b.op in (Op.SUM, Op.MAX) and row_reduction(b, shape) for b in node.bodies[0].nodes)


def indexed(node):
    """Whether fused `node` reads or adds through index maps (then its loop is not merged):
    slices, concatenations, region adds, gathered rows (`gathered_reads`)."""
    return any(b.op in (Op.SLICE, Op.CONCAT, Op.SLOT_ADD_SLICE, Op.GATHER) for b in node.bodies[0].nodes)


def recompute_shifted_program(program):
    """`recompute_shifted` on every graph and sub-graph, knowing which params of a `FOR`
    body are no slot's view (the program's arguments, values the graph computes, and
    such params passed on): no write through a ref can change them."""
    for f in program.funs:
        _recompute_shifted_in(f.body, set())
    _recompute_shifted_in(program.main, set(program.main.params))


def _recompute_shifted_in(graph, fresh):
    made = {v: n for n in graph.nodes for v in n.outputs}

    def own(x):   # no slot's or table's view
        while x in made and made[x].op.view and made[x].op not in (Op.SLOT_GET, Op.TABLE_GET):
            x = made[x].inputs[0]
        return x in fresh if x not in made else made[x].op not in (Op.SLOT_GET, Op.TABLE_GET)
    for node in graph.nodes:
        if node.op == Op.FUSED:
            continue
        for body in node.bodies:
            inner = set()
            if node.op == Op.FOR:   # body params: the index, the state, then the captured operands
                skip = 1 + node.attrs["n_state"]
                inner = {p for p, x in zip(body.params[skip:], node.inputs[1 + skip:])
                         if not isinstance(x.type, (RefType, TableType)) and own(x)}
            _recompute_shifted_in(body, inner)
    graph.nodes = recompute_shifted(graph.nodes, graph.outputs, fresh)


def recompute_shifted(nodes, outputs, fresh=frozenset()):
    """A fused loop's result that later fused loops of its shape read, some of them
    through a slice or concatenation (a shift, as RK4's stages read the stage before),
    and that costs a few arithmetic operations, is recomputed in each of them at the
    index it is read at: a chain of shifted stages becomes one loop reading its inputs at
    a few neighbouring indices, with no stage stored and read back (LLVM only). `fresh`:
    params of the graph that no write through a ref can change."""
    nodes = list(nodes)
    users, made, spans = node_facts(nodes, outputs)

    def choose(k, producer, out, inner, nodes):
        (body,) = producer.bodies
        readers = sorted(set(users.get(out, [])))
        cone = _shift_cone(body, inner) if out.type.shape and readers and readers[-1] < len(nodes) \
            and any(indexed(nodes[j]) for j in readers if nodes[j].op == Op.FUSED) \
            and all(_reads_shiftable(nodes[j], out, producer) and not reduces_rows(nodes[j]) for j in readers) \
            else None
        if cone is None or not all(x in fresh or unchanged_between(x, k, j, spans)
                                   for j in readers for x in _cone_reads(cone, body, producer)):
            return None
        return cone, readers
    return recompute_in_readers(nodes, choose, drop_emptied=True, replaced=spans.note)


MAX_SHIFTED_CONE = 48   # body nodes a recomputed stage may have (its own inlined stages included)


def _shift_cone(body, var):
    """The body nodes computing `var` if all are cheap, slices of step 1 or concatenations
    (each can be computed at any index), at most MAX_SHIFTED_CONE of them; else None."""
    producer = {v: n for n in body.nodes for v in n.outputs}
    needed, stack = set(), [var]
    while stack:
        n = producer.get(stack.pop())
        if n is None or id(n) in needed:
            continue   # a param, or seen
        if not (n.op.cheap or n.op == Op.CONCAT or (n.op == Op.SLICE and all(s == 1 for s in n.attrs["steps"]))):
            return None
        needed.add(id(n))
        stack.extend(n.inputs)
    return [n for n in body.nodes if id(n) in needed] if len(needed) <= MAX_SHIFTED_CONE else None


def _cone_reads(cone, body, producer):
    """The producer's inputs that `cone` (nodes of its body) reads."""
    read = {v for n in cone for v in n.inputs}
    return [x for x, p in zip(producer.inputs, body.params) if p in read]


def _reads_shiftable(f, v, producer):
    """Whether fused loop `f`, over `producer`'s shape, reads `v` once, as a value, with
    slices of step 1 at most (each read is the producer's element at a fixed offset; not
    a gather's vector or index, read at an index the loop computes)."""
    if f.op != Op.FUSED or tuple(f.attrs["shape"]) != tuple(producer.attrs["shape"]) or f.inputs.count(v) != 1:
        return False
    p = f.bodies[0].params[f.inputs.index(v)]
    return all(n.op != Op.GATHER and (n.op != Op.SLICE or all(s == 1 for s in n.attrs["steps"]))
               for n in f.bodies[0].nodes if p in n.inputs)


def offsets(body, ndim):
    """Each body value -> the offsets (per loop axis, from the loop index) at which the
    loop needs it: (0, ...) for what it computes at its own index; a slice adds its
    starts, a concatenation's piece subtracts where the piece starts. A value computed
    in the body and read shifted is computed at each of its offsets."""
    producer = {v: n for n in body.nodes for v in n.outputs}
    at, stack = {}, []
    zero = (0,) * ndim
    for n in body.nodes:
        if n.op not in (Op.SLICE, Op.CONCAT):
            stack.extend((v, zero) for v in n.inputs)
    stack.extend((v, zero) for v in body.outputs)
    while stack:
        v, d = stack.pop()
        if d in at.setdefault(v, set()):
            continue
        at[v].add(d)
        n = producer.get(v)
        if n is None:
            continue
        if n.op == Op.SLICE:
            stack.append((n.inputs[0], tuple(a + s for a, s in zip(d, n.attrs["starts"]))))
        elif n.op == Op.CONCAT:
            axis, start = n.attrs["axis"], 0
            for piece, size in zip(n.inputs, n.attrs["sizes"]):
                stack.append((piece, d[:axis] + (d[axis] - start,) + d[axis + 1:]))
                start += size
        else:
            stack.extend((u, d) for u in n.inputs)
    return at
