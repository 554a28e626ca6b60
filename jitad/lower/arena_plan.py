"""Arena space reuse inside one body: a tensor whose last reader has run gives its space to
a later tensor of the same body.

Shapes are static, so the lowering knows each tensor's size and, from the body's node
list, the position of its last reader. A body with tensors to place takes one block of
arena space when it starts (`BodyPlan.start`: its size, the plan's high water, is known
only once the body is lowered, so it is a constant global filled in at the end), and a
node's fresh result buffer is a range of that block (`BodyPlan.buffer`), chosen best-fit
among the ranges of tensors already dead (`Ranges`).

A range is dead once every value that may point into it has had its last reader. The
plan follows pointers as the lowering made them (`BodyPlan.after`): a result that is the
very value of a buffer (a reshape, a slot read, an update in place, a kernel's result
buffer) or a `gep`/`select` of such values shares its ranges; any other pointer is
taken to point into everything the node read, allocated or was given. A range is kept
to the end of the body when a value in it is a result of the body or is read by what
may hold on to it: a call, a closure, a continuation, a tree recursion, or control flow
(its bodies may store a closure over it). A body that releases an arena mark it did not
take gets no plan; the stack discipline around bodies (functions, loop iterations)
stays as it was, and every buffer the plan does not place is bump-allocated as before.

    >>> Ranges().take(100), Ranges().take(64)
    (0, 0)
"""
from collections import defaultdict
from contextlib import contextmanager
import math

import llvmlite.ir as ir

from ..ir.graph import walk
from ..ir.ops import CALLS, Op
from ..ir.types import ITEMSIZE

REUSE = True   # False: every tensor keeps its space until its body returns (for A/Bs: `bench.gpt --ab`)
ALIGN = 64   # every arena allocation's alignment and granularity
NEVER = 1 << 62   # the last reader of a body's result
I8, I64 = ir.IntType(8), ir.IntType(64)
_CALLING = frozenset(CALLS) | {Op.APPLY, Op.TREE}   # what may recurse
_RETAINING = _CALLING | {Op.CLOSURE}
_LOOPS_OVER_ROWS = (Op.FUSED, Op.ROW_LOOPS)   # their bodies compute on elements and rows, keep nothing


class Ranges:
    """Byte ranges of one block handed out and taken back: best fit among the free ranges,
    else at the top (growing the block, `top` its size so far).

    >>> r = Ranges(); a, b = r.take(128), r.take(64); r.give(a, 128); r.take(64), r.top
    (0, 192)
    """

    def __init__(self):
        self.free, self.top = [], 0   # free: sorted, disjoint, never adjacent (offset, size)

    def take(self, size, grow=True):
        """The offset of `size` bytes (None: none free, and not `grow`)."""
        size = -(-max(size, 1) // ALIGN) * ALIGN
        fits = [k for k, (_, n) in enumerate(self.free) if n >= size]
        if fits:
            k = min(fits, key=lambda k: self.free[k][1])
            offset, n = self.free[k]
            self.free[k:k + 1] = [(offset + size, n - size)] if n > size else []
            return offset
        if not grow:
            return None
        offset = self.free.pop()[0] if self.free and sum(self.free[-1]) == self.top else self.top
        self.top = offset + size
        return offset

    def give(self, offset, size):
        size = -(-max(size, 1) // ALIGN) * ALIGN
        k = next((k for k, (o, _) in enumerate(self.free) if o > offset), len(self.free))
        if k < len(self.free) and offset + size == self.free[k][0]:
            size += self.free.pop(k)[1]
        if k > 0 and sum(self.free[k - 1]) == offset:
            offset, size = self.free[k - 1][0], self.free[k - 1][1] + size
            k -= 1
            del self.free[k]
        self.free.insert(k, (offset, size))


class _Block:
    """Arena space taken by a body: its size (a constant filled in at the end), its ranges,
    its address in the function being emitted."""
    __slots__ = ("size", "ranges", "base")

    def __init__(self, size, base):
        self.size, self.ranges, self.base = size, Ranges(), base


class _Range:
    __slots__ = ("block", "offset", "size", "end", "freed")

    def __init__(self, block, offset, size, end):
        self.block, self.offset, self.size, self.end, self.freed = block, offset, size, end, False


def _tensor(t):
    return bool(getattr(t, "shape", ()))


def _wants_plan(nodes, dests):
    """Does a body make tensors to place (not all given their buffers, as a kernel's
    results are), and release only the arena marks it took itself?"""
    marks = {n.outputs[0] for n in nodes if n.op == Op.ARENA_MARK}
    if any(n.op == Op.ARENA_RELEASE and n.inputs[0] not in marks for n in nodes):
        return False
    return any(_tensor(v.type) and v not in dests for n in nodes for v in n.outputs)


def _calls(node):
    """May `node` call a function (recurse) while it runs?"""
    return node.op in _CALLING or any(n.op in _CALLING for body in node.bodies for n in walk(body))


def _retains(node):
    """May `node` keep a pointer it reads beyond its own run (other than in its results)?"""
    return node.op in _RETAINING or (bool(node.bodies) and node.op not in _LOOPS_OVER_ROWS)


class BodyPlan:
    """The offsets of one body's tensors in a block of arena space taken at its start; with
    `split`, a node that may call (recurse) ends the block, and the tensors made after it
    take a block of their own, taken after it: the deeper frames of a recursion then do
    not find the space of what this frame makes only once they have returned held."""

    def __init__(self, lo, nodes, outputs, split):
        self.lo, self.nodes = lo, nodes
        self.position = {id(n): k for k, n in enumerate(nodes)}
        self.last = {}
        for k, n in enumerate(nodes):
            for v in n.inputs:
                self.last[v] = k
        for v in outputs:
            self.last[v] = NEVER
        self.roots, self.by_value, self.split, self.blocks = {}, {}, split, []
        self.expiring = defaultdict(list)
        self.current, self.made, self.given = None, [], frozenset()
        self._new_block()

    def _new_block(self):
        size = ir.GlobalVariable(self.lo.module, I64, name=f"{self.lo.prefix}arena_plan{len(self.lo.module.globals)}")
        size.linkage, size.global_constant = "internal", True
        self.blocks.append(_Block(size, self.lo.alloc_bytes(self.lo.b.load(size, typ=I64))))

    @property
    def base(self):
        """The address of a plan's one block (main's, which lowers as several functions)."""
        (block,) = self.blocks
        return block.base

    @base.setter
    def base(self, value):
        (block,) = self.blocks
        block.base = value

    def covers(self, nodes):
        return bool(nodes) and id(nodes[0]) in self.position

    def buffer(self, var, t):
        """A range for `var`, a result of the node being lowered, or None (not this plan's)."""
        node = self.current
        if node is None or not any(v is var for v in node.outputs):
            return None
        nbytes = max(1, math.prod(t.shape)) * ITEMSIZE[t.dtype]
        r = self._range(nbytes, self.position[id(node)])
        self.made.append(r)
        ptr = self.lo.b.gep(r.block.base, [I64(r.offset)], source_etype=I8)   # a value of its own, also at 0
        self.by_value[id(ptr)] = (ptr, frozenset([r]), True)
        return ptr

    def _range(self, nbytes, end):
        """Space that is free in a block closed by a call (it returned), else in the open one."""
        for block in self.blocks[:-1]:
            offset = block.ranges.take(nbytes, grow=False)
            if offset is not None:
                return _Range(block, offset, nbytes, end)
        return _Range(self.blocks[-1], self.blocks[-1].ranges.take(nbytes), nbytes, end)

    def enter(self, env):
        """A span of the body starts (in a function of its own): its values' pointers."""
        for v, value in env.items():
            if v in self.roots:
                self.by_value[id(value)] = (value, self.roots[v], False)

    def before(self, node):
        self.current, self.made = node, []
        given = [self.lo.dests.get(v) for v in node.outputs]
        self.given = frozenset().union(*(self._known(g) or () for g in given if g is not None))

    def after(self, node, outs):
        """Bind `node`'s results to the ranges they may point into; free the ranges whose
        last reader was `node`."""
        k = self.position[id(node)]
        read = frozenset().union(*(self.roots.get(v, ()) for v in node.inputs))
        if _retains(node):
            self._extend(read, NEVER)
        fallback = read | frozenset(self.made) | self.given
        for v, value in zip(node.outputs, outs):
            if value is None or not isinstance(value.type, ir.PointerType):
                continue
            roots = self._known(value)
            exact, roots = roots is not None, fallback if roots is None else roots
            if roots:
                assert not any(r.freed for r in roots), f"arena plan: {v} points into a range already reused"
                self.roots[v] = roots
                self.by_value[id(value)] = (value, roots, exact)
                self._extend(roots, self.last.get(v, k))
        for r in self.made:
            self.expiring[r.end].append(r)
        for r in self.expiring.pop(k, ()):
            if r.end == k and not r.freed:
                r.freed = True
                r.block.ranges.give(r.offset, r.size)
        self.current, self.made, self.given = None, [], frozenset()
        if self.split and _calls(node):
            self._new_block()

    def _extend(self, roots, end):
        for r in roots:
            if end > r.end:
                r.end = end
                if r not in self.made:
                    self.expiring[end].append(r)

    def _known(self, value, depth=0):
        """The ranges `value` may point into, or None where it cannot tell."""
        hit = self.by_value.get(id(value))
        if hit is not None and hit[0] is value:   # (a value not known exactly, seen again for another
            value, roots, exact = hit              # var, e.g. a loop's spare buffer: its stale ranges go)
            return roots if exact else frozenset(r for r in roots if not r.freed)
        if isinstance(value, (ir.Argument, ir.GlobalVariable, ir.Constant)):
            return frozenset()   # a caller's buffer, a result array, constant data: not this block
        if depth > 8:
            return None
        if isinstance(value, ir.GEPInstr):
            return self._known(value.pointer, depth + 1)
        if isinstance(value, ir.CastInstr) and value.opname in ("bitcast", "addrspacecast"):
            return self._known(value.operands[0], depth + 1)
        if not isinstance(value, ir.SelectInstr):   # (a phi may get its incoming values later)
            return None
        found = [self._known(v, depth + 1) for v in value.operands[1:]]
        return None if any(f is None for f in found) else frozenset().union(*found)

    def finish(self):
        for block in self.blocks:
            block.size.initializer = I64(block.ranges.top)


def sink_slots(lo, nodes, stores):
    """`nodes` with each tensor slot made just before it is first needed: read, or written
    by the producer of a value stored in it (`stores`, `llvm._table_stores`). Reverse mode
    makes the adjoint slots first; made there, they would hold their space through the
    whole forward pass. (Nothing reads a slot before its first use, zeros included.) Only
    in a body with a plan: a slot moved past an arena mark must not be bump-allocated
    there, or the mark's release would free it."""
    if not (REUSE and _wants_plan(nodes, lo.dests)):
        return nodes
    made = {v: k for k, n in enumerate(nodes) for v in n.outputs}
    need = {}
    for k, n in enumerate(nodes):
        for v in n.inputs:
            need.setdefault(v, k)
    for v, store in stores.items():
        slot = store.inputs[0]
        if store.op == Op.SLOT_SET and v in made and made[v] < need.get(slot, made[v] + 1):
            need[slot] = made[v]
    slots = {k for k, n in enumerate(nodes) if n.op == Op.SLOT and not n.inputs and _tensor(n.attrs["type"])}
    if not slots:
        return nodes
    at = defaultdict(list)
    for k in sorted(slots):
        at[max(k, need.get(nodes[k].outputs[0], k))].append(nodes[k])
    return [m for k, n in enumerate(nodes) for m in at.get(k, []) + ([] if k in slots else [n])]


@contextmanager
def body(lo, nodes, outputs):
    """Lower a body's `nodes` (in `lo.lower_nodes`, one span or several) under a plan of
    its own when it has tensors to place (`lo.plans[-1]`; None: buffers as before)."""
    plan = BodyPlan(lo, nodes, outputs, split=lo.func is not getattr(lo, "main", None)) \
        if REUSE and _wants_plan(nodes, lo.dests) else None
    lo.plans.append(plan)
    try:
        yield plan
    finally:
        lo.plans.pop()
    plan is not None and plan.finish()
