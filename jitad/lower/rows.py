"""The LLVM rule of `row_loops` (jitad/ir/rows.py): one loop over the rows of its shape,
running each member loop's pass over the row in turn, so that a row a later pass reads
again (an input, a result the loops make) is still in L1."""
import llvmlite.ir as ir

from ..ir.ops import Op
from ..ir.types import Type
from .llvm import ELEMENT_BYTES, I64, LL, alloca, rule
from .tensor import _FusedLoop, ref_type


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
            if "skip_cols" in node.attrs and tuple(n.attrs["shape"]) == shape:
                masked = [(kind, j, value) for k, kind, j, value in node.attrs["masked"] if body.nodes[k] is n]
                passes.append(lambda idx, loop=loop, n=n, args=args, masked=masked: _masked_row(
                    lo, loop, n, args, masked, idx, node.attrs["skip_cols"], shape))
            else:
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


def _masked_row(lo, loop, member, args, masked, idx, skip, shape):
    """A member's row `idx` over the whole vectors of columns that reach r + skip (r: the
    row's index along the next-to-last axis) and the columns past the last whole vector, then
    the constants it stores in the vectors between (`jitad.ir.triangles`)."""
    b, n = lo.b, shape[-1]
    (body,) = member.bodies
    dtype = min((v.type.dtype for v in member.inputs + member.outputs if v.type.dtype in ("f32", "f64")),
                key=ELEMENT_BYTES.get, default="f64")
    width = 64 // ELEMENT_BYTES[dtype]   # a vector register's columns: no scalar remainder per row (a
    whole = n // width                   # scalar `exp` per column costs more than a vector of them)
    chunks = b.udiv(b.add(idx[-1], I64(skip + width)), I64(width))   # ceil((r + skip + 1) / width), r + skip >= 0
    chunks = b.select(b.icmp_unsigned(">", chunks, I64(whole)), I64(whole), chunks)
    loop.row_block([idx], chunks, width)
    start = b.mul(chunks, I64(width))
    for kind, j, value in masked:
        if kind == "out":
            ptr, t = loop.results[j], member.outputs[j].type
        else:
            ptr, t = args[j], ref_type(member, body, body.params[j])
        const = ir.Constant(ir.VectorType(LL[t.dtype], width), [LL[t.dtype](value)] * width)
        lo.counted_loop(b.sub(I64(whole), chunks), lambda c, ptr=ptr, t=t, const=const: lo.b.store(
            const, lo.elem_ptr(ptr, t, idx + [b.add(start, b.mul(c, I64(width)))]), align=1), rolled=True)
