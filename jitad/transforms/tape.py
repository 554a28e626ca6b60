"""The loop tape: what reverse mode keeps from a loop's forward pass, and how its
backward pass uses it, beyond the CPS rules of `jitad.transforms.vjp`.

A FOR loop or a TREE fold is differentiated by two staged loops (see `reverse._for`,
`reverse._tree`): the forward loop stores each iteration's state in a table, and the
backward loop recomputes each iteration's body from it. Four optimizations make that
backward loop cheap; each is an object built from the loop body before the backward
loop, which `reverse.Reverse.in_loop` hands to the backward body's transformation:

- `output_rows`: a FOR state the body only writes, one row an iteration (scan's stacked
  outputs), is neither stored per iteration nor carried whole by the backward loop:
  each backward iteration reads its row's cotangent in place;

- `stored_values`: the body's expensive values (ops flagged "stored": products,
  transcendental functions, on tensors) are stored by the forward loop too, and read
  back instead of recomputed;
- `deferred_weight_grads`: the weight gradient of a product with a loop-invariant
  matrix W is not added into W's adjoint each iteration: the factors are stored, and
  one GEMM after the loop adds them all;
- `loop_invariant_transposes`: W^T, for the input cotangent g @ W^T, is made once
  before the loop.
"""
from collections import Counter

import numpy as np

from ..ir.dce import live_nodes
from ..ir.ops import Op
from ..ir.types import FLOATS, Type
from ..staging import IF, Staged, as_var, current_frame, emit, new_slot, slot_add, slot_get, slot_set
from .jvp import zeros
from .base import restage_node, run_graph


def new_table(count, t, written_first=False):
    """A table of `count` entries of type `t`, zeroed unless every entry is written
    before it is read (`written_first`)."""
    return Staged(emit(Op.TABLE, [count._var], {"type": t, "uninit": True} if written_first else {"type": t})[0])


def at(table, i):
    return Staged(emit(Op.TABLE_GET, [table._var, i._var])[0])


def body_nodes(graph):
    """The live nodes of a loop body and of its IF branches (a branch runs at most once an
    iteration, and the backward pass runs the same branch)."""
    for n in live_nodes(graph):
        yield n
        if n.op == Op.IF:
            for branch in n.bodies:
                yield from body_nodes(branch)


class output_rows:
    """The output accumulators of a FOR body: state k whose only reader is one `scatter`
    (set, one row: a scalar index) making output k, read by nothing else. scan's stacked
    `ys` are such states: storing one per iteration copies the whole buffer, and carrying
    its cotangent through the backward loop copies it again.

    `states`: k -> that scatter. The forward loop stores no table for them; their cotangent
    stays in the slot of the loop result's adjoint (`start`), and the backward body's
    scatter (`backprop`) moves its row's cotangent into the row's adjoint and zeroes the
    row in the slot (what an earlier write to that row receives). After the loop the slot
    holds the cotangent of the initial buffer: the rows no iteration wrote."""

    def __init__(self, body, n_state):
        nodes = live_nodes(body)
        reads = Counter(v for n in nodes for v in n.inputs) + Counter(body.outputs)
        made_by = {v: n for n in nodes for v in n.outputs}
        self.states, self.slots = {}, {}
        for k in range(n_state):
            param, out = body.params[1 + k], body.outputs[k]
            node = made_by.get(out)
            if node is not None and node.op == Op.SCATTER and not node.attrs["add"] \
                    and node.inputs[0] is param and node.inputs[1].type.shape == () \
                    and reads[param] == 1 and reads[out] == 1:
                self.states[k] = node

    def start(self, results):
        """The replay of the backward body's scatters (a placeholder: nothing reads the
        buffer), and where their cotangents are: the adjoint slots of the loop's `results`."""
        self.slots = {id(node): results[k].adj for k, node in self.states.items()}
        return {id(node): [results[k].primal] for k, node in self.states.items()}

    def backprop(self, node, ins):
        """The backward step of a planned scatter of the Duals `ins` (buffer, index, row):
        O(row), where the scatter's own VJP makes two buffers."""
        slot, (_, index, row) = self.slots[id(node)], ins
        if slot is None:   # not a float buffer
            return
        if row.adj is not None:   # (the row read is a view: added before the row is zeroed)
            slot_add(row.adj, Staged(emit(Op.INDEX, [slot_get(slot)._var, index.primal._var])[0]))
        emit(Op.SLOT_SET_AT, [slot._var, index.primal._var, zeros(row.primal._var.type)._var])


class stored_values:
    """The expensive values of a loop body, kept per iteration (or tree node): products
    and transcendental functions of tensors at its top level and inside its IF branches
    (a branch runs at most once an iteration, and its backward pass runs in the same
    branch). `run(args, entry)` restages the body and stores them at `entry`;
    `replay(entry)` gives them to the backward pass's restaging of the body."""

    def __init__(self, body, count):
        self.body = body
        self.nodes = [n for n in body_nodes(body) if n.op.stored and n.outputs[0].type.shape]
        self.tables = [new_table(count, n.outputs[0].type, written_first=True) for n in self.nodes]

    def run(self, args, entry, skip=()):
        """(`skip`: ids of nodes a recomputed step leaves out: a row scatter gives its
        buffer for its result, a print or check nothing; see `reverse._ran_already`.)"""
        keep = {id(n): tab for n, tab in zip(self.nodes, self.tables)}

        def rule(node, xs):
            if id(node) in skip:
                return xs[:len(node.outputs)]
            if node.op == Op.IF:
                branch = lambda g: lambda *a: tuple(run_graph(g, list(a), rule))
                outs = IF(xs[0], branch(node.bodies[0]), branch(node.bodies[1]), *xs[1:])
                return list(outs) if isinstance(outs, tuple) else [outs]
            outs = restage_node(node, xs)
            if id(node) in keep:
                emit(Op.TABLE_SET, [keep[id(node)]._var, entry._var, outs[0]._var])
            return outs
        return run_graph(self.body, args, rule)

    def replay(self, entry):
        """The stored values read back at `entry`: node id -> its values."""
        return {id(n): [at(tab, entry)] for n, tab in zip(self.nodes, self.tables)}


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
        iteration; the iterations that take one fill its tables' first entries, counted, and
        the GEMM runs over those: no zeroed entries for the iterations that take the other).
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
                # in a branch: the iterations that take it fill entries 0, 1, ... (a counter)
                counter = new_slot(Type("i64")) if conditional else None
                self.plan[id(n), pos] = [d.adj, new_table(self.count, x_t, written_first=True),
                                         new_table(self.count, y_t, written_first=True), rows, first, counter]

    def _shared_read(self, value):
        """(table, entry) if `value` was read in this iteration from a `shared` table."""
        frame = current_frame()
        node = next((n for n in reversed(frame.graph.nodes) if value._var in n.outputs), None)
        if node is None or node.op != Op.TABLE_GET:
            return None
        for tab in self.shared:
            if node.inputs[0] is frame.captures.get(tab._var, tab._var):
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
            _, tab_x, tab_y, _, first, counter = planned
            other = ins[1 - pos].primal
            source = None if counter is not None else self._shared_read(other)
            entry = source[1] if source else slot_get(counter) if counter is not None else self.entry
            tab_g, tab_other = (tab_y, tab_x) if first == "other" else (tab_x, tab_y)
            if source:
                tab_other = source[0]
                planned[1 if first == "other" else 2] = tab_other
            else:
                emit(Op.TABLE_SET, [tab_other._var, entry._var, other._var])
            emit(Op.TABLE_SET, [tab_g._var, entry._var, g._var])
            if counter is not None:
                slot_set(counter, entry + 1)
            handled.append(pos)
        return handled

    def at(self, entry):
        """This, storing factors at `entry` (the backward iteration's), or None if no
        product is planned."""
        self.entry = entry
        return self if self.plan else None

    def flush(self):
        for slot, tab_x, tab_y, rows, _, counter in self.plan.values():
            count = slot_get(counter) if counter is not None else self.count
            emit(Op.TABLE_GEMM_ADD, [slot._var, tab_x._var, tab_y._var, count._var], {"rows": rows})


class loop_invariant_transposes:
    """The transposes of the matrices a loop body multiplies by on the right (x @ W, W
    captured), made once before the backward loop: each iteration's input cotangent
    g @ W^T is then an untransposed product (register tiles, not BLAS's transposed path:
    ~2x faster at 20×50 @ 50×50). `map`: W's staged var -> W^T."""

    def __init__(self, body, caps):
        by_param = dict(zip(body.params[len(body.params) - len(caps):], caps))
        weights = {n.inputs[1]: None for n in body_nodes(body)   # a dict: in program order, so the
                   if n.op == Op.MATMUL and not n.attrs["ta"] and not n.attrs["tb"]}   # program is the same in every process
        self.map = {}
        for v in weights:
            d = by_param.get(v)
            if d is not None and len(v.type.shape) == 2 and v.type.dtype in FLOATS:
                from ..numeric import transpose
                self.map[d.primal._var] = transpose(d.primal)


class ForestTape:
    """The tables of `TREE` over a `jitad.Forest` (`batching._forest`): one table per
    state leaf, entry v holding node v's state and entry size + b the init of tree b
    (what its empty subtrees give). Chunk c is the forest's nodes [c w, (c + 1) w), w the
    forest's width; the forest's packing puts every child in an earlier chunk."""

    def __init__(self, forest, types, init):
        from .. import numeric as N
        self.N, self.forest = N, forest
        self.lanes, self.width = forest._var.type.forest
        self.size = Staged(emit(Op.TREE_SIZE, [forest._var], {"word": "size"})[0])
        self.chunks = self.size // self.width
        self.entries = self.size + self.lanes
        self.tables = [new_table(self.entries, t, written_first=True) for t in types]
        self.scatter(self.tables, self.size + np.arange(self.lanes), init)

    def get(self, field, ids):
        return Staged(emit(Op.TREE_GET, [self.forest._var, as_var(ids, "i64")], {"field": field})[0])

    def ids(self, c):
        """The nodes of chunk `c`."""
        return c * self.width + np.arange(self.width)

    def kids(self, ids, side):
        """The entries of the `side` children of nodes `ids` (an init entry for none)."""
        child = self.get(side, ids)
        return self.N.where(child >= 0, child, self.size + self.get("_tree", ids))

    def roots(self):
        """The entries of the trees' roots (an empty tree's init entry)."""
        lanes = np.arange(self.lanes)
        root = self.get("_root", lanes)
        return self.N.where(root >= 0, root, self.size + lanes)

    def gather(self, tables, entries):
        return [Staged(emit(Op.TABLE_GATHER, [t._var, as_var(entries, "i64")])[0]) for t in tables]

    def scatter(self, tables, entries, values, add=False):
        for t, v in zip(tables, values):
            if t is not None and v is not None:
                emit(Op.TABLE_SCATTER, [t._var, as_var(entries, "i64"), v._var], {"add": True} if add else {})

    def children(self, ids):
        """The states of the left and the right children of nodes `ids`."""
        return self.gather(self.tables, self.kids(ids, "left")) + self.gather(self.tables, self.kids(ids, "right"))

    def forward(self, caps, run):
        """Run the chunks in order: `run(c, args)` gives chunk c's states from its args
        `[forest, ids] + left states + right states + caps`; return the roots' states."""
        from ..staging import FOR

        def step(c, _):
            ids = self.ids(c)
            self.scatter(self.tables, ids, run(c, [self.forest, ids] + self.children(ids) + list(caps)))
            return ()
        FOR(0, self.chunks, step, ())
        return self.gather(self.tables, self.roots())
