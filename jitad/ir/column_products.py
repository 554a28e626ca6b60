"""Column reductions of a tensor slot that one fused loop stored whole, taken in that loop.

Reverse mode often leaves a fused loop over (n, k) that stores a cotangent slot, and later
reduces that slot over its n rows: a column sum (the cotangent of a row broadcast, as
k-means' centroid norms) or a product `A^T G` with a short (n, d) matrix `A` (the
cotangent of `A @ B` for B, as k-means' centroids). Each then reads the n x k slot back
from memory, and BLAS packs it first. This pass adds those rows up in the loop that
makes them, as `fuse.column_sums` does for a result of the loop: `A^T G` becomes the
d column sums of `A[:, l] * G`, each a row of k accumulators, and the slot is no longer
stored at all where nothing else reads it (LLVM only).
"""

from .graph import Graph, Node, Var
from .ops import Op
from .regions import indexed, node_facts, reduces_rows, unchanged_between
from .types import Type

COLUMN_PRODUCT = 16   # the widest A whose product A^T G a loop takes as column sums
ENABLED = True        # False: the pass changes nothing (for A/Bs)
# the smallest slot (bytes) it does so for: a smaller one is read back from the caches, where the
# loop's extra accumulators cost more than they save (k-means' dir, CPU time with/without the pass:
# 0.8 MB 1.00-1.03, 8 MB 0.88-0.90, 80 MB 0.60-0.63)
COLUMN_SLOT_BYTES = 4 << 20
# the shortest rows it does so for. Shorter than `fuse.COLUMN_SUM_ROW`: a slot past the caches costs
# more to store and read back than the loop's running row by row (k-means' dir at k = 100, n = 10^4,
# d = 16, the product by BLAS: 0.59-0.64x with rows of 64 taken)
COLUMN_ROW = 64


def column_products(nodes, outputs):
    """Each fused loop over (n, k) that sets every element of a tensor slot (of at least
    COLUMN_SLOT_BYTES) with one store, whose value is then read only by column sums (`sum`
    over axis 0) and products `A^T @ value` with a short A, takes those in its body, and
    the slot goes. Rows of at least COLUMN_ROW; loops with row reductions are left alone."""
    nodes = list(nodes)
    while ENABLED:   # each rewrite takes one slot out of a loop: the facts are made again after it
        users, made, spans = node_facts(nodes, outputs)
        found = next(((f, c) for f in range(len(nodes))
                      for c in [_candidate(nodes, f, users, made, spans)] if c is not None), None)
        if found is None:
            return nodes
        f, (slot, gets, readers) = found
        nodes = _rewrite(nodes, f, slot, gets, readers, made[slot])
    return nodes


def _candidate(nodes, f, users, made, spans):
    """(slot, its reads, the readers) for the fused loop at `f`, or None."""
    loop = nodes[f]
    if loop.op != Op.FUSED or len(loop.attrs["shape"]) != 2 or indexed(loop) or reduces_rows(loop):
        return None
    if loop.attrs["shape"][1] < COLUMN_ROW:
        return None
    for slot in dict.fromkeys(loop.inputs):
        if _stored_once(loop, slot) is None or slot not in made or nodes[made[slot]].op != Op.SLOT:
            continue   # (a slot made elsewhere may be read there)
        rest = [k for k in users.get(slot, []) if k != f and k != made[slot]]
        gets = [k for k in rest if f < k < len(nodes) and nodes[k].op == Op.SLOT_GET]
        if not gets or len(gets) != len(rest):
            continue
        readers = [k for g in gets for k in users.get(nodes[g].outputs[0], [])]
        if readers and all(k < len(nodes) and _reducible(nodes, k, nodes[g].outputs[0], f, spans)
                           for g in gets for k in users.get(nodes[g].outputs[0], [])):
            return slot, gets, sorted(set(readers))
    return None


def _stored_once(loop, slot):
    """The body's param of `slot` where the loop's one write to it is a first store of
    every element, and the body does not read it back; else None."""
    t = getattr(slot.type, "value_type", None)
    if loop.inputs.count(slot) != 1 or t is None or tuple(t.shape) != tuple(loop.attrs["shape"]) \
            or t.dtype not in ("f64", "f32") or t.nbytes < COLUMN_SLOT_BYTES:
        return None
    (body,) = loop.bodies
    param = body.params[loop.inputs.index(slot)]
    touches = [b for b in body.nodes if param in b.inputs]
    if len(touches) != 1 or touches[0].op != Op.SLOT_ADD or not touches[0].attrs.get("store") \
            or touches[0].inputs[0] is not param:
        return None
    return param


def _reducible(nodes, k, value, f, spans):
    """Whether node `k` reduces `value` (n, k) over its rows in a form the loop at `f` can
    take: a column sum, or `A^T @ value` with A (n, d <= COLUMN_PRODUCT) made before the
    loop and unchanged until `k`."""
    r = nodes[k]
    if r.op == Op.SUM:
        return r.inputs[0] is value and tuple(r.attrs["axes"]) == (0,) and not r.attrs["keepdims"]
    if r.op != Op.MATMUL or not r.attrs["ta"] or r.attrs["tb"] or r.inputs[1] is not value or r.inputs[0] is value:
        return False
    a = r.inputs[0]
    return len(a.type.shape) == 2 and a.type.shape[1] <= COLUMN_PRODUCT and a.type.dtype == value.type.dtype \
        and spans.made.get(a, -1) < f and unchanged_between(a, f, k, spans)


class _Taken:
    """What the loop gains: operands (with their body params), body nodes, body outputs and
    the node's results; the nodes to place before the loop, and each reader's replacement."""

    def __init__(self, loop, value):
        self.loop, self.value = loop, value
        self.inputs, self.params, self.body, self.outputs, self.results = [], [], [], [], []
        self.before, self.after = [], {}

    def column_sum(self, value, result):
        """The column sum of body value `value` in the loop, as node result `result`."""
        total = Var(Type(value.type.dtype))
        self.body.append(Node(Op.SUM, (value,), (total,), {"axes": (0,), "keepdims": False}))
        self.outputs.append(total)
        self.results.append(result)

    def product(self, k, r):
        """Product `r` = A^T @ value as the d column sums of A[:, l] * value (A's columns
        sliced before the loop), stacked after it where `r` was (position `k`)."""
        a = r.inputs[0]
        (n, d), dtype = a.type.shape, self.value.type.dtype
        rows = []
        for l in range(d):
            column, param, term = Var(Type(a.type.dtype, (n, 1))), Var(Type(a.type.dtype, (n, 1))), Var(Type(dtype))
            self.before.append(Node(Op.SLICE, (a,), (column,), {"starts": (0, l), "stops": (n, l + 1), "steps": (1, 1)}))
            self.inputs.append(column)
            self.params.append(param)
            self.body.append(Node(Op.MUL, (param, self.value), (term,)))
            rows.append(Var(Type(dtype, (self.loop.attrs["shape"][1],))))
            self.column_sum(term, rows[-1])
        self.after[k] = _stacked(r, rows)


def _rewrite(nodes, f, slot, gets, readers, declared):
    """The loop at `f` taking the readers' column sums; the slot (declared at `declared`),
    its store, reads and readers dropped."""
    loop = nodes[f]
    (body,) = loop.bodies
    param = body.params[loop.inputs.index(slot)]
    store = next(b for b in body.nodes if param in b.inputs)
    taken = _Taken(loop, store.inputs[1])
    for k in readers:
        if nodes[k].op == Op.SUM:
            taken.column_sum(taken.value, nodes[k].outputs[0])
            taken.after[k] = []
        else:
            taken.product(k, nodes[k])
    kept = [i for i, v in enumerate(loop.inputs) if v is not slot]
    new_body = Graph([body.params[i] for i in kept] + taken.params,
                     [b for b in body.nodes if b is not store] + taken.body, body.outputs + taken.outputs)
    out = list(nodes)
    out[f] = taken.before + [Node(Op.FUSED, tuple(loop.inputs[i] for i in kept) + tuple(taken.inputs),
                                  loop.outputs + tuple(taken.results), loop.attrs, (new_body,))]
    for k in gets + [declared]:
        out[k] = []
    for k, replacement in taken.after.items():
        out[k] = replacement
    _drop_scopes_around(out, f, max(readers))
    return [n for item in out for n in (item if isinstance(item, list) else [item])]


def _stacked(r, rows):
    """The nodes stacking the d rows into product `r`'s (d, k) result."""
    dtype, k = rows[0].type.dtype, rows[0].type.shape[0]
    pieces = [Var(Type(dtype, (1, k))) for _ in rows]
    return [Node(Op.RESHAPE, (row,), (piece,), {"shape": (1, k)}) for row, piece in zip(rows, pieces)] \
        + [Node(Op.CONCAT, tuple(pieces), r.outputs, {"axis": 0})]


def _drop_scopes_around(nodes, f, last):
    """Drop the arena scopes that hold the loop at `f` and close before `last` (their
    temporaries then live until an enclosing scope closes): the loop's new results must.
    `nodes` holds nodes and lists of nodes (the rewritten places)."""
    marks = {n.outputs[0]: i for i, n in enumerate(nodes[:f]) if isinstance(n, Node) and n.op == Op.ARENA_MARK}
    for i in range(f + 1, last):
        n = nodes[i]
        if isinstance(n, Node) and n.op == Op.ARENA_RELEASE and n.inputs[0] in marks:
            nodes[marks[n.inputs[0]]] = []
            nodes[i] = []
