"""The LLVM rule of `row_loops` (jitad/ir/rows.py): one loop over the rows of its shape,
running each member loop's pass over the row in turn, so that a row a later pass reads
again (an input, a result the loops make) is still in L1."""
import llvmlite.ir as ir

from ..ir.ops import Op
from ..ir.types import Type
from .llvm import LL, alloca, rule
from .tensor import _FusedLoop


@rule(Op.ROW_LOOPS)
def _row_loops(lo, node, ins):
    """Each member's buffers and registers are made before the loop over rows (the
    node's results in their destinations); in it, each member runs its row."""
    (body,) = node.bodies
    shape = tuple(node.attrs["shape"])
    saved = lo.dests
    lo.dests = {**saved, **{v: lo.result_buffer(out) for v, out in zip(body.outputs, node.outputs) if out.type.shape}}
    env, passes, totals = dict(zip(body.params, ins)), [], {}
    try:
        for n in body.nodes:
            if n.op == Op.SLOT:   # one row of a slot only the row loop uses: its scratch, on the stack
                t = n.attrs["type"]
                env[n.outputs[0]] = alloca(lo.b, ir.ArrayType(LL[t.dtype], t.shape[-1]))
                continue
            args = [env[v] for v in n.inputs]
            if n.op in (Op.RESHAPE, Op.SLOT_SET):   # (...) <-> (..., 1): one element per row, copied
                out = lo.result_buffer(n.outputs[0]) if n.op == Op.RESHAPE else args[0]
                passes.append(lambda idx, src=args[-1], out=out, t=n.inputs[-1].type: _copy_row_value(lo, src, out, t, idx))
                env.update(zip(n.outputs, [out]))
                continue
            loop = _FusedLoop(lo, n, args, by_rows=True)
            passes.append(lambda idx, loop=loop: loop.row_block([idx]))
            for v, result in zip(n.outputs, loop.results):
                if v.type.shape:
                    env[v] = result
                else:   # a total over every element: an accumulator, read after the loop
                    env[v], totals[v] = None, result
    finally:
        lo.dests = saved
    lo.loop_nest(shape[:-1], lambda idx: [run(idx) for run in passes], work=shape[-1] * len(passes))
    for v, acc in totals.items():
        env[v] = lo.b.load(acc, typ=LL[v.type.dtype])
    return [env[v] for v in body.outputs]


def _copy_row_value(lo, src, out, t, idx):
    row = Type(t.dtype, tuple(int(d) for d in t.shape[:len(idx)]))   # (...) and (..., 1) share their layout
    lo.b.store(lo.b.load(lo.elem_ptr(src, row, idx), typ=LL[t.dtype]), lo.elem_ptr(out, row, idx))
