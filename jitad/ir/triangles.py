"""Batched products that need only a triangle: what a constant causal mask tells the tiles.

Attention under a causal mask computes `where(tril, q @ kᵀ, -inf)`: the product's entries
above the diagonal are thrown away, and the softmax of the masked scores is zero there, so
the products that read it (`att @ v`, and in the backward pass `attᵀ @ dy`, `ds @ k`,
`dsᵀ @ q`, where `ds` is masked again) multiply zeros over half their contraction, and the
cotangent `dy @ vᵀ` is only read through products with those zeros. This pass finds these
facts on the node list before fusion, where each elementwise op is its own node, and marks
each `bmm` with what its lowering may skip (`jitad/lower/tensor.py`, the register tiles):

- `zero_a=d`: the left operand, as stored, is zero at entries (r, c) with c > r + d (rows
  and columns of its last two axes): the contraction of a block of rows stops there (a
  transposed operand: starts there);
- `only_out=d`: only the entries (i, j) with j <= i + d of the result are read (through a
  `select` with a constant mask inside that triangle, or multiplied by a value that is zero
  outside it); the tiles skip the stripes of columns wholly outside, and store zeros there
  where a reader multiplies them by zeros (`zero_rest`: what the buffer held might be NaN).

Facts are found per value, from the value's producer (zeros) or its readers (what is
read), through slots (a cotangent's additions and reads), reshapes that keep the last two
axes, and elementwise ops: `select(mask, x, 0)` is zero outside the mask, `select(mask,
x, -inf)` is -inf there, `exp` of -inf is zero, a product or quotient of a zero is zero,
a row's value (a softmax's max or sum, last axis 1) subtracted from or added to -inf leaves
it -inf. They are structural: the skipped terms are multiplications by those zeros, so an
infinity or NaN that would meet them (0·inf in the other operand, a softmax row whose max
or sum is not finite, which makes the whole row NaN) is not carried into the skipped part
of the result, as reference BLAS skips a zero factor.
"""
import numpy as np

from .graph import Node, uses
from .ops import Op

TRIANGLES = True   # False: no product is marked (for A/Bs: `bench.gpt --ab jitad.ir.triangles.TRIANGLES=False`)
DEPTH = 64   # producers and readers followed from a product at most (a long chain is left unmarked)


def triangle(mask):
    """The least d with every nonzero entry (r, c) of the last two axes at c <= r + d, or
    None (fewer than two axes, or no nonzero entry).

    >>> triangle(np.tril(np.ones((3, 3))))
    0
    """
    mask = np.asarray(mask)
    if mask.ndim < 2:
        return None
    rows, cols = np.nonzero(mask.reshape((-1,) + mask.shape[-2:]).any(axis=0))
    return int((cols - rows).max()) if rows.size else None


class _Facts:
    """Zeros, -infinities and read regions of the values of one node list (memoized)."""

    def __init__(self, nodes, outputs):
        self.nodes, self.outputs = nodes, outputs
        self.producer = {v: n for n in nodes for v in n.outputs}
        self.users = uses(nodes, outputs)
        self.memo = {}

    def _fact(self, kind, v, depth):
        key = (kind, v)
        if key not in self.memo:
            self.memo[key] = None   # (a cycle through a slot: unknown)
            if depth < DEPTH and len(getattr(v.type, "shape", ())) >= 2:
                self.memo[key] = getattr(self, "_" + kind)(v, depth + 1)
        return self.memo[key]

    def zero(self, v, depth=0):
        """d where `v` is zero at c > r + d, else None."""
        return self._fact("zero", v, depth)

    def neg_inf(self, v, depth=0):
        """d where `v` is -inf at c > r + d, else None."""
        return self._fact("neg_inf", v, depth)

    def read(self, v, depth=0):
        """`(d, zeros)` where only the entries c <= r + d of `v` are read (`zeros`: the rest
        must be finite: some reader multiplies them by zeros), else None."""
        return self._fact("read", v, depth)

    def _constant(self, v, value):
        n = self.producer.get(v)
        return n is not None and n.op == Op.CONST and np.ndim(n.attrs["value"]) == 0 and n.attrs["value"] == value

    def _mask(self, v, shape, every_row=False):
        """The triangle of a constant mask `v` read at `shape`, or None (`every_row`: also
        where a row of it is all False)."""
        n = self.producer.get(v)
        if n is None or n.op != Op.CONST or np.ndim(n.attrs["value"]) < 2:
            return None
        value = np.asarray(n.attrs["value"])
        value = np.broadcast_to(value, value.shape[:-2] + tuple(shape[-2:]))
        return None if every_row and not value.any(axis=-1).all() else triangle(value)

    def _same_matrix(self, a, b):
        return tuple(a.type.shape[-2:]) == tuple(b.type.shape[-2:])

    def _zero(self, v, depth):
        n = self.producer.get(v)
        if n is None:
            return None
        if n.op == Op.CONST:
            return triangle(np.broadcast_to(np.asarray(n.attrs["value"]) != 0, v.type.shape))
        if n.op == Op.SELECT:
            c, x, y = n.inputs
            if self._constant(y, 0) and self._mask(c, v.type.shape) is not None:
                return _least(self._mask(c, v.type.shape), self.zero(x, depth))
            return _most(self.zero(x, depth), self.zero(y, depth))
        if n.op == Op.MUL:
            return _least(*(self.zero(x, depth) for x in n.inputs if self._same_matrix(x, v)))
        if n.op in (Op.DIV, Op.NEG) and self._same_matrix(n.inputs[0], v):
            return self.zero(n.inputs[0], depth)
        if n.op in (Op.ADD, Op.SUB) and all(self._same_matrix(x, v) for x in n.inputs):
            return _most(*(self.zero(x, depth) for x in n.inputs))
        if n.op == Op.EXP:
            return self.neg_inf(n.inputs[0], depth)
        if n.op in (Op.RESHAPE, Op.BROADCAST) and self._same_matrix(n.inputs[0], v):
            return self.zero(n.inputs[0], depth)
        if n.op == Op.SLOT_GET:
            return self._slot_zero(n.inputs[0], depth)
        return None

    def _neg_inf(self, v, depth):
        n = self.producer.get(v)
        if n is None:
            return None
        if n.op == Op.SELECT and self._constant(n.inputs[2], -np.inf):   # (a row all -inf: the softmax of
            return self._mask(n.inputs[0], v.type.shape, every_row=True)   # it is NaN, its zeros too)
        if n.op in (Op.ADD, Op.SUB):   # -inf plus or minus a row's value (a softmax's max)
            x, r = n.inputs
            rows = lambda u: u.type.shape[-1:] in ((), (1,))   # noqa: E731
            if self._same_matrix(x, v) and rows(r):
                return self.neg_inf(x, depth)
            if n.op == Op.ADD and self._same_matrix(r, v) and rows(x):
                return self.neg_inf(r, depth)
            return None
        if n.op in (Op.RESHAPE, Op.BROADCAST) and self._same_matrix(n.inputs[0], v):
            return self.neg_inf(n.inputs[0], depth)
        return None

    def _slot_zero(self, slot, depth):
        """d where every value added to or stored in `slot` (zero at first) is zero."""
        n = self.producer.get(slot)
        if n is None or n.op != Op.SLOT or n.attrs.get("uninit"):
            return None
        found = []
        for k in self.users.get(slot, ()):
            m = self.nodes[k] if k < len(self.nodes) else None
            if m is not None and m.op == Op.SLOT_GET:
                continue
            if m is None or m.op not in (Op.SLOT_ADD, Op.SLOT_SET) or m.inputs[0] is not slot \
                    or m.inputs[1].type.shape != slot.type.value_type.shape:
                return None
            found.append(self.zero(m.inputs[1], depth))
        return _most(*found) if found and None not in found else None

    def _read(self, v, depth):
        found = []
        for k in self.users.get(v, ()):
            got = self._read_by(self.nodes[k], v, depth) if k < len(self.nodes) else None
            if got is None:
                return None
            found.append(got)
        return _looser(found)

    def _read_by(self, n, v, depth):
        """`(d, zeros)` where node `n` reads only the entries c <= r + d of `v` (`zeros`: it
        multiplies the rest by zeros, so they must be finite), else None."""
        out = n.outputs[0] if len(n.outputs) == 1 else None
        through = self.read(out, depth) if out is not None and self._same_matrix(v, out) and (
            n.op.elementwise or n.op in (Op.RESHAPE, Op.BROADCAST)) else None
        if n.op == Op.SELECT and n.inputs[1] is v and v not in (n.inputs[0], n.inputs[2]):
            return _tighter(through, self._mask(n.inputs[0], out.type.shape), False)
        if n.op == Op.MUL and n.inputs.count(v) == 1:
            other = n.inputs[1] if n.inputs[0] is v else n.inputs[0]
            return _tighter(through, self.zero(other, depth) if self._same_matrix(other, out) else None, True)
        if n.op in (Op.SLOT_ADD, Op.SLOT_SET) and n.inputs[1] is v and n.inputs[0] is not v \
                and v.type.shape == n.inputs[0].type.value_type.shape:
            return self._slot_read(n.inputs[0], depth)
        return through

    def _slot_read(self, slot, depth):
        """`(d, zeros)` of every read of `slot` together, else None."""
        found = []
        for k in self.users.get(slot, ()):
            m = self.nodes[k] if k < len(self.nodes) else None
            if m is None or m.op not in (Op.SLOT_GET, Op.SLOT_ADD, Op.SLOT_SET) or m.inputs[0] is not slot:
                return None
            if m.op == Op.SLOT_GET:
                found.append(self.read(m.outputs[0], depth))
        return _looser(found)


def _tighter(through, d, zeros):
    """A reader's `(d, zeros)`: its own triangle `d` (None: unknown; `zeros`: it reads the
    rest multiplied by zeros) or what its result's readers read, whichever is tighter."""
    if d is None:
        return through
    if through is None or d < through[0]:
        return d, zeros
    return through


def _looser(found):
    """The `(d, zeros)` all of `found` allow (None: one is unknown, or none)."""
    if not found or None in found:
        return None
    return max(d for d, _ in found), any(z for _, z in found)


def _least(*ds):
    """The tighter of known triangles (None: unknown)."""
    known = [d for d in ds if d is not None]
    return min(known) if known else None


def _most(*ds):
    """The looser of triangles that must all be known."""
    return None if not ds or None in ds else max(ds)


def triangle_products(nodes, outputs):
    """Each `bmm` marked with `zero_a` and `only_out` where its operand or its readers allow
    (see the module's docstring); the rest as they are."""
    if not TRIANGLES or not any(n.op == Op.BMM for n in nodes):
        return nodes
    facts = _Facts(nodes, outputs)
    out = []
    for n in nodes:
        if n.op == Op.BMM:
            attrs = dict(n.attrs)
            a, result = n.inputs[0], n.outputs[0]
            zero, read = facts.zero(a), facts.read(result)
            if zero is not None and zero < a.type.shape[-1] - 1:
                attrs["zero_a"] = zero
            if read is not None and read[0] < result.type.shape[-1] - 1:
                attrs["only_out"] = read[0]
                if read[1]:
                    attrs["zero_rest"] = True
            if attrs != n.attrs:
                n = Node(n.op, n.inputs, n.outputs, attrs, n.bodies)
        out.append(n)
    return out
