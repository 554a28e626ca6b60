"""A short product that several fused loops read is computed in each of them.

`fuse.small_products` moves a matrix product over a short contraction (k-means' points
against its centroids: 8 or 16 terms) into the one fused loop that reads it, so the
product is never stored. Where several loops of its shape read it (k-means' Newton
direction: the row minimum, the count of ties at the minimum and the cotangent loop each
read the n x k distances), this pass puts a copy into every reader: a few multiply-adds
an element cost less than writing the product once and reading it back several times
(at k = 1000, n = 10^4: 80 MB a pass; BLAS also clears its output before the product).
It runs after `merge_slot_loops`, whose rules keep loops with products apart (LLVM only).
"""
from .fuse import short_product, with_product
from .ops import Op
from .regions import indexed, node_facts, unchanged_between


def shared_small_products(nodes, outputs):
    """A short product (`fuse.short_product`, as `small_products` takes) read only by two
    or more fused loops of its shape, each reading it once and through no index map, with its operands unchanged
    until the last of them, is computed in each loop and no longer stored."""
    nodes = list(nodes)
    users, made, spans = node_facts(nodes, outputs)
    drop = set()
    for k, m in enumerate(nodes):
        if not short_product(m):
            continue
        (v,), (a, b) = m.outputs, m.inputs
        readers = sorted(set(users.get(v, [])))
        if len(readers) < 2 or len(nodes) in readers or not all(
                _takes_product(nodes[j], v) and unchanged_between(x, k, j, spans) for j in readers for x in (a, b)):
            continue
        for j in readers:
            nodes[j] = with_product(nodes[j], m)
            spans.note(j, nodes[j])
        drop.add(k)
    return [n for k, n in enumerate(nodes) if k not in drop]


def _takes_product(f, v):
    """Whether fused loop `f` can compute product `v` in its body: of its shape, read
    once, no slices or concatenations read through index maps."""
    return f.op == Op.FUSED and tuple(f.attrs["shape"]) == v.type.shape and f.inputs.count(v) == 1 and not indexed(f)
