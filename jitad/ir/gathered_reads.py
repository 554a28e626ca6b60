"""Gathered rows read where a fused loop uses them.

`take(x, rows)` along the first axis (`gather`) copies rows (or, of a vector, elements) of x
into a new tensor, which the loop using them reads back. When only fused loops of the gather's shape read it, each
reads x[rows[i], ...] itself at its own index and the rows are never stored: a triangle's
corners taken from posed vertices, in the primal and again in each direction of a
Jacobian; an embedding's rows fed to elementwise work; a camera's or point's column read at
each observation's index. The lowering tells LLVM that these reads through an index do not
alias the loop's stores (else it cannot vectorize the loop). In a fused body `gather` keeps its
name with an element's meaning: the element at the loop index of its params x and rows,
the row through `rows` (clamped as `take` clamps). LLVM only.
"""
from dataclasses import replace

from .ops import Op
from .regions import _absorb, node_facts, reduces_rows, unchanged_between
from .types import RefType


def gathered_reads(nodes, outputs):
    """A `gather` of rows of a tensor (or elements of a vector), by an int64 vector, that only
    fused loops of its shape read (each once, none taking row sums), its operands
    unchanged until the last of them: each loop reads the rows itself."""
    nodes = list(nodes)
    users, made, spans = node_facts(nodes, outputs)
    drop = set()
    for k, g in enumerate(nodes):
        if g.op != Op.GATHER or not _plain(g):
            continue
        v = g.outputs[0]
        readers = sorted(set(users.get(v, [])))
        if not readers or readers[-1] == len(nodes) or any(
                nodes[j].op != Op.FUSED or tuple(nodes[j].attrs["shape"]) != v.type.shape
                or nodes[j].inputs.count(v) != 1 or reduces_rows(nodes[j])
                or not all(unchanged_between(x, k, j, spans) for x in g.inputs) for j in readers):
            continue
        for j in readers:
            nodes[j] = _absorb(nodes[j], v, [g])
            spans.note(j, nodes[j])
        drop.add(k)
    return [n for k, n in enumerate(nodes) if k not in drop]


VECTORS = True   # elements of a vector read through the index too (False: only rows, for A/Bs)


def _plain(g):
    """Rows of a tensor (or elements of a vector; not a slot) by an int64 vector."""
    x, rows = g.inputs
    return not isinstance(x.type, RefType) and not isinstance(rows.type, RefType) \
        and len(x.type.shape) >= (1 if VECTORS else 2) and len(rows.type.shape) == 1 and rows.type.dtype == "i64"


def apart_reads(nodes, outputs):
    """Mark (`reads_apart`) each fused loop reading through an index that writes none of
    the tensors it reads (no slot or table any of them may be a view of): the lowering
    then tells LLVM that its loads do not alias its stores, which it cannot check at run
    time for a load through an index. Runs after the passes that change fused loops'
    operands or the slots they update."""
    nodes = list(nodes)
    _, _, spans = node_facts(nodes, outputs)
    for j, f in enumerate(nodes):
        if f.op != Op.FUSED or "reads_apart" in f.attrs or not any(b.op == Op.GATHER for b in f.bodies[0].nodes):
            continue
        if all(unchanged_between(x, j - 1, j, spans) for x in f.inputs if not isinstance(x.type, RefType)):
            nodes[j] = replace(f, attrs={**f.attrs, "reads_apart": True})
    return nodes
