"""The lowerer's tensor kernels: loop nests over arena buffers, which the declarations'
rules (jitad/primitives) call as `Lowerer` services (`llvm.service`).

Elementwise ops reuse their scalar rules inside a loop nest (`llvm.scalar_rule`). The
along-axis ops run `reduction`/`scan` (loop nests around their combine function). Matrix
products (`gemm`, `batched_gemm`) use a vectorizable loop nest below `BLAS_MIN_FLOPS`,
tiles of vector registers for products whose right operand fits in L2 (`_register_gemm`)
and numpy's bundled OpenBLAS otherwise; `conv2d` is a direct loop nest in register tiles too. The
passes' own ops (`matmul_add`, `table_gemm_add`, `fused`, slot updates) have rules
registered under their opcode here.
"""
from types import SimpleNamespace

import llvmlite.ir as ir
import numpy as np

from ..ir import regions
from ..ir.fuse import row_reduction
from ..ir.graph import Var
from ..ir.ops import Op
from ..ir.types import FLOATS, RefType, Type
from ..primitives.along_axis import REDUCTIONS, SCANS, lines
from .llvm import (ELEMENT_BYTES, F32, F64, I1, I8, I32, I64, LL, NO_WRAP, PTR, alloca, collapse, rule, scalar_rule_of,
                   service)

BLAS_MIN_FLOPS = 16 ** 3
BLAS_SYMBOLS = {"f64": "scipy_cblas_dgemm64_", "f32": "scipy_cblas_sgemm64_"}
BLAS = True   # call BLAS for the products beyond the kernels below (`jitad.export` turns it off)


def _scalar_or_buffer(lo, var):
    """Where a result accumulates: an alloca for a scalar, else its buffer."""
    return alloca(lo.b, LL[var.type.dtype]) if not var.type.shape else lo.result_buffer(var)


def _finish(lo, out, t):
    return lo.b.load(out, typ=LL[t.dtype]) if not t.shape else out


COLUMN_ROWS = 32   # `_reduce` combines a column of up to this many rows in registers


def _reduce(lo, node, ins, init, combine, row_combine=None):
    """out = combine over `axes` of x, on x's dimensions merged where possible: reduced
    innermost dimensions accumulate in a register per output element, kept innermost
    dimensions add a contiguous row into the output. `row_combine` (a float max) is the
    row loop's NaN-ignoring combine: NaN is then tracked in a flag of its own, off the
    accumulator's dependency chain, so that the row loop vectorizes."""
    x_t, out_t = node.inputs[0].type, node.outputs[0].type
    axes = node.attrs["axes"]
    b, t = lo.b, LL[x_t.dtype]
    keep_shape = tuple(1 if d in axes else n for d, n in enumerate(x_t.shape))
    shape, merged = collapse(x_t.shape, [x_t.shape, keep_shape])
    xt, kt = Type(x_t.dtype, merged[x_t.shape]), Type(out_t.dtype, merged[keep_shape])
    out = _scalar_or_buffer(lo, node.outputs[0])
    if len(shape) == 2 and kt.shape == (1, shape[1]) and 1 < shape[0] <= COLUMN_ROWS:
        # a column reduction over a few rows (a bias gradient): each column combines in a
        # register, rows in order as below (the same rounding), one store per element; the
        # loop over columns vectorizes, with no load of the output after its store
        def column(idx):
            acc = init
            for i in range(shape[0]):
                acc = combine(acc, b.load(lo.elem_ptr(ins[0], xt, [I64(i), idx[0]]), typ=t))
            b.store(acc, lo.elem_ptr(out, kt, [I64(0), idx[0]]))
        lo.loop_nest(shape[1:], column, work=shape[0])
        return [out]
    if out_t.shape:
        lo.fill(out, out_t, init)
    else:
        b.store(init, out)

    def out_ptr(idx):
        return lo.elem_ptr(out, kt, idx) if out_t.shape else out
    if shape and kt.shape[-1] == 1 and shape[-1] != 1:
        acc, nan = alloca(b, t), alloca(b, I1) if row_combine else None

        def step(idx, i):
            v = b.load(lo.elem_ptr(ins[0], xt, idx + [i]), typ=t)
            b.store((row_combine or combine)(b.load(acc, typ=t), v), acc)
            if nan:
                b.store(b.or_(b.load(nan, typ=I1), b.fcmp_unordered("uno", v, v)), nan)

        def row(idx):
            b.store(init, acc)
            if nan:
                b.store(I1(0), nan)
            lo.counted_loop(I64(shape[-1]), lambda i: step(idx, i), rolled=len(shape) > 1 and shape[-1] >= 8)
            total = b.load(acc, typ=t)
            if nan:
                total = b.select(b.load(nan, typ=I1), t(float("nan")), total)
            ptr = out_ptr(idx + [I64(0)])
            b.store(combine(b.load(ptr, typ=t), total), ptr)
        lo.loop_nest(shape[:-1], row)
    else:
        def body(idx):
            ptr = out_ptr(idx)
            b.store(combine(b.load(ptr, typ=t), b.load(lo.elem_ptr(ins[0], xt, idx), typ=t)), ptr)
        lo.loop_nest(shape, body)
    return [_finish(lo, out, out_t)]


class _Scalars:
    """The scalar language of along-axis combines (jitad/primitives/along_axis.py) on LLVM
    values: each elementwise primitive by its own scalar rule, except that a reduction's
    float sums may reassociate and float max/min are `llvm.maximum`/`llvm.minimum` (NaN
    propagates, as NumPy; LLVM vectorizes both in reductions)."""

    def __init__(self, lo, reassociate):
        self.lo, self.reassociate = lo, reassociate

    @staticmethod
    def constant(value, dtype):
        return LL[dtype](value)

    def apply(self, op, values, dtypes, out_dtype):
        b, dtype = self.lo.b, dtypes[0]
        if dtype in FLOATS and op == Op.ADD and self.reassociate:
            return b.fadd(*values, flags=("reassoc",))
        if dtype in FLOATS and op in (Op.MAXIMUM, Op.MINIMUM):
            t = LL[dtype]
            fn = self.lo.extern(f"llvm.{op.name}.{dtype}", ir.FunctionType(t, [t, t]))
            return b.call(fn, values)
        if dtype == "bool":   # NumPy's bool arithmetic, as staging rewrites it
            op = {Op.ADD: Op.OR, Op.MAXIMUM: Op.OR, Op.MUL: Op.AND, Op.MINIMUM: Op.AND}.get(op, op)
        node = SimpleNamespace(op=op, attrs={}, inputs=[Var(Type(d)) for d in dtypes], outputs=[Var(Type(out_dtype))])
        return scalar_rule_of(op)(self.lo, node, values)[0]


def _combine(lo, desc, dtype):
    """combine(acc, x) of an along-axis op's description, on LLVM values of `dtype`."""
    scalars = _Scalars(lo, desc.reassociate)
    return lambda acc, x: desc.run(scalars, dtype, acc, x)


def _row_max(lo, dtype):
    """A float max's NaN-ignoring combine for `_reduce`'s row loop (`maxnum`, no NaNs
    assumed: `_reduce` tracks NaN in a flag of its own), so that the row loop vectorizes."""
    t = LL[dtype]
    maxnum = lo.extern(f"llvm.maxnum.{dtype}", ir.FunctionType(t, [t, t]))
    return lambda acc, v: lo.b.call(maxnum, [acc, v], fastmath=("nnan", "nsz"))


@service("reduction")
def _reduction(lo, node, ins):
    """An along-axis reduction (jitad/primitives/along_axis.py) as a loop nest."""
    desc, dtype = REDUCTIONS[node.op], node.inputs[0].type.dtype
    row = _row_max(lo, dtype) if node.op == Op.MAX and dtype in FLOATS else None
    return _reduce(lo, node, ins, LL[dtype](desc.identity(dtype)), _combine(lo, desc, dtype), row)


@service("batched_gemm")
def _bmm(lo, out, out_t, ins, in_types, attrs):
    """out[i] = op(a[i]) @ op(b[i]) over the batch: a loop around `_gemm` (register tiles
    or one BLAS call per entry)."""
    a_t, b_t = in_types
    mats = [Type(t.dtype, t.shape[1:]) for t in (out_t, a_t, b_t)]
    sizes = [int(np.prod(t.shape)) for t in mats]
    ty, b = LL[out_t.dtype], lo.b
    triangles = _triangles(attrs)

    (m, n), k = mats[0].shape, mats[1].shape[0 if attrs["ta"] else 1]
    flags = [attrs["ta"], attrs["tb"]]
    # a transposed b of a small product is copied untransposed per entry: the register tiles
    # beat BLAS's small "nt" path by more than the copy costs (64 entries of 128x128 @ (32x128)^T:
    # 0.60 against 0.92 ms); a transposed a is read in place (`TILES_READ_A_TRANSPOSED`; a copy
    # per entry lost to BLAS's "tn" path: 64 entries of (128x128)^T @ 128x32, 1.13 against 0.69 ms)
    # (b copied stripe by stripe, `_packs`, is transposed on the way)
    pack = lo.alloc(Type(out_t.dtype, (k, n))) if _tiled(m, n, k, out_t.dtype, flags[0]) and _packs(m, n, k, out_t.dtype) \
        and (not flags[0] or TILES_READ_A_TRANSPOSED) and (not flags[1] or m >= 16) else None
    scratch = [None] + [lo.alloc(Type(mats[2].dtype, mats[2].shape[::-1])) if flags[1] and pack is None
                        and _tiled(m, n, k, out_t.dtype, flags[0]) else None]

    def entry(i):
        o, *ops = (b.gep(buf, [b.mul(i, I64(size))], source_etype=ty) for buf, size in zip((out, *ins), sizes))
        for j, (t, buf) in enumerate(zip(mats[1:], scratch)):
            if buf is not None:
                ops[j] = _transpose_into(lo, ops[j], t, buf)
        attrs = {"ta": flags[0] and scratch[0] is None, "tb": flags[1] and scratch[1] is None,
                 "copied": scratch[1] is not None, "tri": triangles}
        _gemm(lo, o, mats[0], ops, [Type(t.dtype, t.shape[::-1]) if buf is not None else t
                                    for t, buf in zip(mats[1:], scratch)], attrs, accumulate=False, pack=pack)
    lo.counted_loop(I64(out_t.shape[0]), entry, rolled=True)


@service("scan")
def _scan(lo, node, ins):
    """An along-axis scan (jitad/primitives/along_axis.py): out[o, j, r] =
    combine(out[o, j -+ 1, r], x[o, j, r]) from the identity: lines along `axis` in
    order, the inner axes (r) contiguous and vectorizable."""
    t = node.outputs[0].type
    axis, reverse = node.attrs["axis"], node.attrs["reverse"]
    outer, n, inner = lines(t.shape, axis)
    out = lo.result_buffer(node.outputs[0])
    ty, b = LL[t.dtype], lo.b
    desc = SCANS[node.op]
    combine, identity = _combine(lo, desc, t.dtype), ty(desc.identity(t.dtype))
    at = lambda buf, o, j, r: b.gep(buf, [b.add(b.mul(b.add(b.mul(o, I64(n)), j), I64(inner)), r)], source_etype=ty)
    acc = alloca(b, ty)

    def line(idx):
        o, r = idx
        b.store(identity, acc)

        def step(j):
            j = b.sub(I64(n - 1), j) if reverse else j
            total = combine(b.load(acc, typ=ty), b.load(at(ins[0], o, j, r), typ=ty))
            b.store(total, acc)
            b.store(total, at(out, o, j, r))
        lo.counted_loop(I64(n), step, rolled=True)
    if inner == 1:   # a running value in a register
        lo.loop_nest((outer, 1), line)
        return [out]

    def rows(odx):   # row j = combine(row j -+ 1, x's row j), the row loop innermost (vectorized)
        (o,) = odx
        first = I64(n - 1) if reverse else I64(0)
        lo.loop_nest((inner,), lambda r: b.store(combine(identity, b.load(at(ins[0], o, first, r[0]), typ=ty)),
                                                 at(out, o, first, r[0])))

        def step(j):
            j = b.sub(I64(n - 2), j) if reverse else b.add(j, I64(1))
            prev = b.add(j, I64(1)) if reverse else b.sub(j, I64(1))
            lo.loop_nest((inner,), lambda r: b.store(combine(b.load(at(out, o, prev, r[0]), typ=ty),
                                                             b.load(at(ins[0], o, j, r[0]), typ=ty)), at(out, o, j, r[0])))
        lo.counted_loop(I64(n - 1), step, rolled=True)
    if n:
        lo.loop_nest((outer,), rows)
    return [out]


def _blas_gemm(lo, dtype):
    """numpy's OpenBLAS cblas_?gemm (ILP64) for `dtype`: (order, transA, transB, m, n, k,
    alpha, A, lda, B, ldb, beta, C, ldc)."""
    t = LL[dtype]
    return lo.extern(BLAS_SYMBOLS[dtype], ir.FunctionType(ir.VoidType(), [
        I32, I32, I32, I64, I64, I64, t, PTR, I64, PTR, I64, t, PTR, I64]))


@rule(Op.TABLE_GEMM_ADD)
def _table_gemm_add(lo, node, ins):
    """slot (k, n) += X^T @ Y with X (count*rows, k), Y (count*rows, n): the tables' memory."""
    slot, x, y, count = ins
    (k, n), t = node.inputs[0].type.value_type.shape, LL[node.inputs[0].type.dtype]
    b = lo.b
    depth = b.mul(b.select(b.icmp_signed("<", count, I64(0)), I64(0), count), I64(node.attrs["rows"]))
    with b.if_then(b.icmp_signed(">", depth, I64(0))):
        if BLAS:
            b.call(_blas_gemm(lo, node.inputs[0].type.dtype), [I32(101), I32(112), I32(111), I64(k), I64(n), depth, t(1.0), x,
                          I64(k), y, I64(n), t(1.0), slot, I64(n)])
        else:   # (an exported library) the same sum of outer products in loops
            at = lambda base, row, width, col: b.gep(base, [b.add(b.mul(row, I64(width)), col)], source_etype=t)

            def outer(r):
                def row(i):
                    xi = b.load(at(x, r, k, i), typ=t)

                    def cell(j):
                        p = at(slot, i, n, j)
                        b.store(b.fadd(b.load(p, typ=t), b.fmul(xi, b.load(at(y, r, n, j), typ=t))), p)
                    lo.counted_loop(I64(n), cell)
                lo.counted_loop(I64(k), row)
            lo.counted_loop(depth, outer)
    return []


@rule(Op.MATMUL_BIAS)
def _matmul_bias(lo, node, ins):
    """op(a) @ op(b) + bias (a row broadcast to every row): the register tiles start each row
    from the bias; other products add into the bias's rows (BLAS beta = 1)."""
    a_t, b_t, bias_t = (v.type for v in node.inputs)
    ta, tb = node.attrs["ta"], node.attrs["tb"]
    (m, k), n = (a_t.shape[::-1] if ta else a_t.shape), (b_t.shape[0] if tb else b_t.shape[1])
    out, t = lo.result_buffer(node.outputs[0]), Type(bias_t.dtype, (m, n))
    if not tb and (not ta or TILES_READ_A_TRANSPOSED) and _tiled(m, n, k, t.dtype, ta):
        _register_gemm(lo, out, t, ins[0], ins[1], k, False, ta, bias=ins[2])
        return [out]
    _copy_matrix(lo, out, n, ins[2], 0, (m, n), LL[t.dtype])
    _gemm(lo, out, t, ins[:2], [a_t, b_t], node.attrs, accumulate=True)
    return [out]


@rule(Op.MATMUL_ADD)
def _matmul_add(lo, node, ins):
    _gemm(lo, ins[0], node.inputs[0].type.value_type, ins[1:], [v.type for v in node.inputs[1:]], node.attrs,
          accumulate=not node.attrs.get("store"))
    return []


@service("gemm")
def _gemm(lo, out, out_t, ins, in_types, attrs, accumulate, pack=None):
    """out (=|+=) op(a) @ op(b): a loop nest below BLAS_MIN_FLOPS, register tiles when the
    product is small or b fits `REGISTER_GEMM_B_BYTES` (BLAS's small-matrix path runs a
    20×50 @ 50×50 product at ~22 GFLOP/s, the tiles at ~39; a transposed a is read in place,
    a transposed b copied untransposed first), else BLAS. `pack`: a buffer of k·n elements for
    the tiles' copy of b (a loop around the call makes it once)."""
    a, bm = ins
    a_t, b_t = in_types
    ta, tb = attrs["ta"], attrs["tb"]
    (m, n), k = out_t.shape, (a_t.shape[0] if ta else a_t.shape[1])
    tri = attrs.get("tri") if 1 not in a_t.shape + b_t.shape else None   # (a vector's triangle: none to skip)
    # a transposed vector (one side 1) is the same memory untransposed: an outer product
    # ct @ v.T or a column A.T @ c (as the row c.T @ A) then needs no BLAS call
    if ta and 1 in a_t.shape:
        ta, a_t = False, Type(a_t.dtype, a_t.shape[::-1])
    if tb and 1 in b_t.shape:
        tb, b_t = False, Type(b_t.dtype, b_t.shape[::-1])
    if n == 1 and ta and not tb:   # out.T (1, m) = b.T (1, k) @ a (k, m), untransposed
        _gemm(lo, out, Type(out_t.dtype, (1, m)), (bm, a), (Type(b_t.dtype, (1, k)), Type(a_t.dtype, a_t.shape)),
              {"ta": False, "tb": False}, accumulate)
        return
    b = lo.b
    t = LL[out_t.dtype]
    if n == 1 and not ta and k >= 64 // ELEMENT_BYTES[out_t.dtype] and BLAS_MIN_FLOPS <= m * k <= REGISTER_GEMM_MAX \
            and out_t.dtype in BLAS_SYMBOLS:
        _row_dots(lo, out, out_t, a, bm, k, accumulate)
        return
    if (not ta or TILES_READ_A_TRANSPOSED) and _tiled(m, n, k, out_t.dtype, ta) and (not tb or m >= 16):
        if m <= 2 and n >= 64 and not ta:
            if tb:   # b copied untransposed first
                bm = _transpose_into(lo, bm, b_t)
            _streaming_gemm(lo, out, out_t, a, bm, k, accumulate)
        else:   # a transposed b is copied untransposed once (at most 1/16 of the product's work)
            _register_gemm(lo, out, out_t, a, bm, k, accumulate, ta, tb=tb, pack=pack, copied=attrs.get("copied", False),
                           tri=tri)
        return
    if m * n * k >= BLAS_MIN_FLOPS and out_t.dtype in BLAS_SYMBOLS and BLAS:
        # row-major C = op(A) @ op(B); 111 = no transpose, 112 = transpose
        b.call(_blas_gemm(lo, out_t.dtype), [I32(101), I32(112 if ta else 111), I32(112 if tb else 111), I64(m), I64(n), I64(k),
                      t(1.0), a, I64(a_t.shape[1]), bm, I64(b_t.shape[1]), t(1.0 if accumulate else 0.0),
                      out, I64(n)])
        return
    is_float = out_t.dtype in FLOATS
    mul, add = (b.fmul, b.fadd) if is_float else (b.mul, b.add)
    a_at = lambda i, p: b.load(lo.elem_ptr(a, a_t, [p, i] if ta else [i, p]), typ=t)
    b_at = lambda p, j: b.load(lo.elem_ptr(bm, b_t, [j, p] if tb else [p, j]), typ=t)
    if n >= 8 and not tb:   # out[i, :] += a[i, p] * b[p, :]: the inner loop runs along rows of b
        if not accumulate:
            lo.fill(out, out_t, t(0))

        def row(idx):
            i, p = idx
            a_ip = a_at(i, p)

            def inner(jdx):
                ptr = lo.elem_ptr(out, out_t, [i, jdx[0]])
                b.store(add(b.load(ptr, typ=t), mul(a_ip, b_at(p, jdx[0]))), ptr)
            lo.loop_nest((n,), inner)
        lo.loop_nest((m, k), row, work=n)
        return
    acc = alloca(b, t)   # out[i, j] = sum_p a[i, p] * b[p, j], accumulated in a register

    def cell(idx):
        i, j = idx
        ptr = lo.elem_ptr(out, out_t, [i, j])
        b.store(b.load(ptr, typ=t) if accumulate else t(0), acc)
        lo.loop_nest((k,), lambda pdx: b.store(add(b.load(acc, typ=t), mul(a_at(i, pdx[0]), b_at(pdx[0], j))), acc))
        b.store(b.load(acc, typ=t), ptr)
    lo.loop_nest((m, n), cell, work=k)


REGISTER_GEMM_MAX = 1 << 20   # m·n·k up to which `_register_gemm` replaces BLAS whatever b's size,
# and beyond it while b takes at most REGISTER_GEMM_B_BYTES (it stays in L2 while the blocks of a's
# rows go past): one thread, float32, the tiles against OpenBLAS's sgemm (CPU time, medians):
# 1024x64 @ 64x192 0.85, 2048x128 @ 128x512 0.83, 2048x512 @ 512x128 0.94, 4096x64 @ 64x64 0.80;
# with a larger b BLAS's packing wins: 1024x256 @ 256x1024 1.26, 512x512 @ 512x512 1.26
REGISTER_GEMM_B_BYTES = 256 << 10
# a transposed a (`gᵀ @ x`, a batched product's cotangent) is read in place by the tiles: a block's
# rows are then adjacent elements of a row of a. Against BLAS's "tn" path (one thread, float32, CPU
# time, medians): 64 entries of (128x128)ᵀ @ 128x32 0.99, of (64x64)ᵀ @ 64x16 0.88
TILES_READ_A_TRANSPOSED = True
TILE_ACCUMULATORS = 24   # vector registers a block of the tiles accumulates in (16 over a contraction
TILE_SHORT_K = 32        # shorter than this: storing the block then costs more than its steps along k)
# a product whose b is past REGISTER_GEMM_B_BYTES runs in the tiles too while its result fits
# this (it stays in L2): over chunks of b's rows that fit the budget, adding into the result
REGISTER_GEMM_C_BYTES = 512 << 10
# (not where a is stored transposed with rows longer than this: a block's elements along k then
# lie in a few of L1's sets and come from L2 at every step; OpenBLAS packs a)
REGISTER_GEMM_TA_ROW_BYTES = 512
# the tiles fetch ahead what the memory system would bring late: a product in a training step finds
# its operands in DRAM (written long before, L3 shared), and its strided steps (a transposed a's
# columns, b's rows a row of b apart) are ones the hardware prefetchers follow poorly. Each step
# along k prefetches a line of the next block of a's rows (two where a is read transposed: the
# block's first and last columns) and, where b is read in place, b's row `PREFETCH_STEPS` on
# (not where a is under `PREFETCH_MIN_BYTES`: a small model's operands stay in the caches, and
# the hints cost it 3% (char-RNN))
PREFETCH = True
PREFETCH_STEPS = 16
PREFETCH_MIN_BYTES = 16 << 10
PACK_B = True
PACK_B_ROWS = 64
PACK_B_BYTES = 32 << 10


def _tiled(m, n, k, dtype, ta=False):
    """Whether `_register_gemm` (not BLAS) computes an (m, k) @ (k, n) product (`ta`: a
    stored transposed, (k, m))."""
    size = ELEMENT_BYTES.get(dtype, 8)
    return dtype in BLAS_SYMBOLS and m * n * k >= BLAS_MIN_FLOPS and (
        m * n * k <= REGISTER_GEMM_MAX or k * n * size <= REGISTER_GEMM_B_BYTES
        or m * n * size <= REGISTER_GEMM_C_BYTES and (not ta or m * size <= REGISTER_GEMM_TA_ROW_BYTES))


def _k_chunk(m, n, k, dtype):
    """The rows of b the tiles take at a time (`_register_gemm`): all k while b fits
    `REGISTER_GEMM_B_BYTES`, else as many as fit it: a divisor of k down to half that
    many (no last, shorter chunk: its code would be a second copy), or a multiple of 16."""
    if m * n * k <= REGISTER_GEMM_MAX or k * n * ELEMENT_BYTES[dtype] <= REGISTER_GEMM_B_BYTES:
        return k
    most = max(16, REGISTER_GEMM_B_BYTES // (n * ELEMENT_BYTES[dtype]))
    return next((d for d in range(most, most // 2, -1) if k % d == 0), max(16, most // 16 * 16))


def _transpose_into(lo, src, t, buf=None, ld=None):
    """`buf` (default: a new scratch buffer) holding the (r, c) matrix `src` of type `t`
    (rows `ld` elements apart, default c) transposed, (c, r)."""
    tt, ty, b = Type(t.dtype, t.shape[::-1]), LL[t.dtype], lo.b
    buf = lo.alloc(tt) if buf is None else buf
    ld = t.shape[1] if ld is None else ld
    lo.loop_nest(tt.shape, lambda idx: b.store(b.load(b.gep(src, [b.add(b.mul(idx[1], I64(ld)), idx[0])],
                                                            source_etype=ty), typ=ty), lo.elem_ptr(buf, tt, idx)))
    return buf


def _copy_matrix(lo, dst, dst_ld, src, src_ld, shape, ty, add=False):
    """dst = src (`add`: dst += src), (rows, cols) matrices whose rows lie `dst_ld` and
    `src_ld` elements apart."""
    b = lo.b
    at = lambda buf, ld, idx: b.gep(buf, [b.add(b.mul(idx[0], I64(ld)), idx[1])], source_etype=ty)

    def cell(idx):
        value, ptr = b.load(at(src, src_ld, idx), typ=ty), at(dst, dst_ld, idx)
        total = (b.fadd if isinstance(ty, (ir.FloatType, ir.DoubleType)) else b.add)(b.load(ptr, typ=ty), value)
        b.store(total if add else value, ptr)
    lo.loop_nest(shape, cell)
    return dst


def _entry_offset(b, i, view):
    """The element offset of batch entry `i` of a strided view (jitad/ir/strided.py): its
    offset plus, for each batch part, the entry's digit in it times its stride."""
    offset, parts, _ = view
    total, inner = I64(offset), 1
    for size, stride in reversed(parts):
        digit = b.urem(b.udiv(i, I64(inner)), I64(size)) if inner > 1 else b.urem(i, I64(size))
        total = b.add(total, b.mul(digit, I64(stride)))
        inner *= size
    return total


@rule(Op.STRIDED_BMM)
def _strided_bmm(lo, node, ins):
    """A batched product through strided views (see `_strided_entries`)."""
    out = lo.result_buffer(node.outputs[0])
    _strided_entries(lo, node, out, ins, False)
    return [out]


@rule(Op.STRIDED_BMM_ADD)
def _strided_bmm_add(lo, node, ins):
    """The same into a slot's region (`ins[0]`), added to it or (`store`) stored."""
    _strided_entries(lo, node, ins[0], ins[1:], not node.attrs["store"])
    return []


def _strided_entries(lo, node, out, ins, accumulate):
    """out (=|+=) op(a) @ op(b) entry by entry through the node's strided views: the
    register tiles or BLAS given the views' row strides, or (a product too small for
    either) `_gemm` on contiguous copies."""
    dtype, a = node.inputs[-1].type.dtype, node.attrs
    (count, ra, ca), (_, rb, cb) = a["shapes"]
    ta, tb = a["ta"], a["tb"]
    (m, k), n = ((ca, ra) if ta else (ra, ca)), (rb if tb else cb)
    views, mats = (a["out"], a["a"], a["b"]), [Type(dtype, s) for s in ((m, n), (ra, ca), (rb, cb))]
    b, ty = lo.b, LL[dtype]
    tiles = _tiled(m, n, k, dtype, ta) and (not tb or m >= 16)
    blas = not tiles and BLAS and m * n * k >= BLAS_MIN_FLOPS and dtype in BLAS_SYMBOLS
    dense = [None if tiles or blas else lo.alloc(mt) for mt in mats]
    # every block of rows reads all of b: a strided b is copied contiguous first (rows a few
    # cache sets apart evict each other from L1: attention's heads at 1.5 KiB strides)
    # (or stripe by stripe, `_packs`, which reads it in place)
    pack = lo.alloc(Type(dtype, (k, n))) if tiles and _packs(m, n, k, dtype) else None
    b_copy = lo.alloc(Type(dtype, (k, n))) if tiles and pack is None and (tb or a["b"][2] != n) else None

    def entry(i):
        ptrs = [b.gep(buf, [_entry_offset(b, i, v)], source_etype=ty) for buf, v in zip((out, *ins), views)]
        lds = [v[2] for v in views]
        if pack is not None:
            _register_gemm(lo, ptrs[0], mats[0], ptrs[1], ptrs[2], k, accumulate, ta, lds[1:] + lds[:1], tb=tb,
                           pack=pack, tri=_triangles(a))
        elif tiles:
            bm = ptrs[2] if b_copy is None else _transpose_into(lo, ptrs[2], mats[2], b_copy, lds[2]) if tb else \
                _copy_matrix(lo, b_copy, n, ptrs[2], lds[2], (k, n), ty)
            _register_gemm(lo, ptrs[0], mats[0], ptrs[1], bm, k, accumulate, ta, (lds[1], n if b_copy else lds[2], lds[0]),
                           copied=b_copy is not None, tri=_triangles(a))
        elif blas:
            b.call(_blas_gemm(lo, dtype), [I32(101), I32(112 if ta else 111), I32(112 if tb else 111), I64(m), I64(n),
                                             I64(k), ty(1.0), ptrs[1], I64(lds[1]), ptrs[2], I64(lds[2]),
                                             ty(1.0 if accumulate else 0.0), ptrs[0], I64(lds[0])])
        else:
            for buf, p, ld, mt in zip(dense[1:], ptrs[1:], lds[1:], mats[1:]):
                _copy_matrix(lo, buf, mt.shape[1], p, ld, mt.shape, ty)
            _gemm(lo, dense[0], mats[0], dense[1:], mats[1:], {"ta": ta, "tb": tb}, accumulate=False)
            _copy_matrix(lo, ptrs[0], lds[0], dense[0], n, (m, n), ty, add=accumulate)
    lo.counted_loop(I64(count), entry, rolled=True)


def _streaming_gemm(lo, out, out_t, a, bm, k, accumulate):
    """out (=|+=) a @ b for a few rows of a (a matrix-vector product): b streams through
    row by row, four rows of it per pass over out (which stays in L1). Going down b's
    columns in register-sized stripes instead touches a new page every row, which the
    hardware prefetchers do not follow: 2-3x slower once b is larger than L2."""
    b = lo.b
    m, n = out_t.shape
    ty, lanes = LL[out_t.dtype], 64 // ELEMENT_BYTES[out_t.dtype]
    at = lambda buf, off: b.gep(buf, [off], source_etype=ty)
    if not accumulate:
        lo.fill(out, out_t, ty(0))
    tail = _pieces(n // lanes * lanes, n % lanes, lanes)

    def rows_of_b(p, depth):
        coef = [[_splat(b, b.load(at(a, b.add(I64(i * k), b.add(p, I64(d)))), typ=ty), lanes) for d in range(depth)]
                for i in range(m)]

        def chunk(j, size):
            ws = [b.load(at(bm, b.add(b.mul(b.add(p, I64(d)), I64(n)), j)), typ=ir.VectorType(ty, size), align=1)
                  for d in range(depth)]
            for i in range(m):
                dst = at(out, b.add(I64(i * n), j))
                y = b.load(dst, typ=ir.VectorType(ty, size), align=1)
                for d in range(depth):
                    c = coef[i][d] if size == lanes else _splat(b, b.extract_element(coef[i][d], I32(0)), size)
                    y = _fma(lo, c, ws[d], y)
                b.store(y, dst, align=1)
        if n // lanes:
            lo.counted_loop(I64(n // lanes), lambda jb: chunk(b.mul(jb, I64(lanes)), lanes), rolled=True)
        for off, size in tail:
            chunk(I64(off), size)
    if k // 4:
        lo.counted_loop(I64(k // 4), lambda pb: rows_of_b(b.mul(pb, I64(4)), 4), rolled=True)
    if k % 4:
        rows_of_b(I64(k // 4 * 4), k % 4)


def _row_dots(lo, out, out_t, a, x, k, accumulate):
    """out (m, 1) (=|+=) a (m, k) @ x (k, 1), a matrix times a vector: each output a dot
    product of a row of a with x, four rows at a time in vector registers (one load of x
    shared by them, four independent sums), summed across lanes at the end."""
    b = lo.b
    m = out_t.shape[0]
    ty, lanes = LL[out_t.dtype], 64 // ELEMENT_BYTES[out_t.dtype]
    vt = ir.VectorType(ty, lanes)
    at = lambda buf, off: b.gep(buf, [off], source_etype=ty)
    whole = k // lanes * lanes

    def rows(first, count):
        def body(update):
            def step(pb):
                p = b.mul(pb, I64(lanes))
                xv = b.load(at(x, p), typ=vt, align=1)
                for r in range(count):
                    row = b.load(at(a, b.add(b.mul(b.add(first, I64(r)), I64(k)), p)), typ=vt, align=1)
                    update(r, lambda acc, row=row: _fma(lo, row, xv, acc))
            lo.counted_loop(I64(k // lanes), step, rolled=True)
        sums = _registers(b, [vt] * count, body)
        for r in range(count):
            i = b.add(first, I64(r))
            total = b.extract_element(sums[r], I32(0))
            for e in range(1, lanes):
                total = b.fadd(total, b.extract_element(sums[r], I32(e)))
            for p in range(whole, k):   # the tail of the row
                total = b.fadd(total, b.fmul(b.load(at(a, b.add(b.mul(i, I64(k)), I64(p))), typ=ty),
                                             b.load(at(x, I64(p)), typ=ty)))
            if accumulate:
                total = b.fadd(b.load(at(out, i), typ=ty), total)
            b.store(total, at(out, i))
    if m // 4:
        lo.counted_loop(I64(m // 4), lambda ib: rows(b.mul(ib, I64(4)), 4), rolled=True)
    if m % 4:
        rows(I64(m // 4 * 4), m % 4)


def _register_gemm(lo, out, out_t, a, bm, k, accumulate, ta=False, ld=None, bias=None, tb=False, pack=None,
                   copied=False, tri=None):
    """`_tile_gemm`, over chunks of k (`_k_chunk`) where b is past the tiles' budget: out
    starts from zeros or the bias and each chunk adds into it, b's rows of the chunk (and
    its result) staying in L2. `tri`: the triangles `_tile_gemm` skips (not in chunks)."""
    m, n = out_t.shape
    kc = _k_chunk(m, n, k, out_t.dtype)
    if kc >= k:
        _tile_gemm(lo, out, out_t, a, bm, k, accumulate, ta, ld, bias, tb, pack, copied=copied, tri=tri)
        return
    b, ty, size = lo.b, LL[out_t.dtype], ELEMENT_BYTES[out_t.dtype]
    lda, ldb, ldc = ld or (m if ta else k, k if tb else n, n)
    if not accumulate and bias is not None:
        _copy_matrix(lo, out, ldc, bias, 0, (m, n), ty)
    elif not accumulate and ldc == n:
        lo.fill(out, out_t, ty(0))
    elif not accumulate:
        lo.loop_nest((m, n), lambda idx: b.store(ty(0), b.gep(out, [b.add(b.mul(idx[0], I64(ldc)), idx[1])], source_etype=ty)))
    if pack is None and tb:   # (once: a loop may be around) an untransposed b is read in place: its
        pack = lo.alloc_bytes(I64(kc * n * size))   # chunks' copies gained 0-5% and cost compile time
    at = lambda buf, off: b.gep(buf, [off], source_etype=ty)

    def chunk(p0, rows):
        _tile_gemm(lo, out, out_t, at(a, b.mul(p0, I64(lda)) if ta else p0), at(bm, p0 if tb else b.mul(p0, I64(ldb))),
                   rows, True, ta, (lda, ldb, ldc), None, tb, pack, chunk=True)
    lo.counted_loop(I64(k // kc), lambda c: chunk(b.mul(c, I64(kc)), kc), rolled=True)
    if k % kc:
        chunk(I64(k // kc * kc), k % kc)


def _tile_gemm(lo, out, out_t, a, bm, k, accumulate, ta=False, ld=None, bias=None, tb=False, pack=None, chunk=False,
               copied=False, tri=None):
    """out (=|+=) op(a) @ b where BLAS's call and packing cost more than the arithmetic: blocks
    of output rows in vector registers, one load of a row of b per step along k shared by
    the block. The blocks of rows are the outer loop and the register-wide stripes of
    columns the inner one, so a block's rows of a stay in L1 while all of b goes past
    (b stays in L2; the other order read all of a again for every stripe). The whole
    stripes share one loop (one copy of their code), the narrower last one has its own.
    A transposed a (`ta`, stored (k, m)) is read in place: a block's rows at a step along k
    are adjacent elements of one of its rows. `ld`: the row strides of a, b and out (default
    their row lengths). `bias` (n elements): every row starts from it, not from zero. `chunk`:
    one of `_register_gemm`'s chunks of k (b read in place unless `pack` is given). `copied`: b
    is a scratch copy (a caller's, in the caches): no prefetches of it. `tri`: `(zero_a, only_out,
    zero_rest)` of a product marked by `jitad.ir.triangles` (None: the whole product): a block's
    steps along k skip where op(a) is zero (`_k_range`), its stripes of columns wholly outside
    the read triangle are not computed (`_stripes_read`; zeros stored there with `zero_rest`)."""
    b = lo.b
    m, n = out_t.shape
    lda, ldb, ldc = ld or (m if ta else k, k if tb else n, n)
    zero_a, only_out, zero_rest = tri or (None, None, False)
    a_at = (lambda i, p: b.add(b.mul(p, I64(lda)), i)) if ta else (lambda i, p: b.add(b.mul(i, I64(lda)), p))
    ty, lanes = LL[out_t.dtype], 64 // ELEMENT_BYTES[out_t.dtype]
    at = lambda buf, off: b.gep(buf, [off], source_etype=ty)
    whole, rest = divmod(n, VECTOR)
    stripes = [(parts, first) for parts, first in ((_pieces(0, VECTOR, lanes), None), (_pieces(0, rest, lanes), whole))
               if parts and (first is not None or whole)]
    regs = TILE_ACCUMULATORS if k >= TILE_SHORT_K else 16
    rows = max(max(1, regs // len(parts)) for parts, _ in stripes)   # a stripe of more pieces takes fewer
    packed = pack is not None or _packs(m, n, k, out_t.dtype) and not chunk
    if packed:
        bm, ldb = _pack_stripes(lo, bm, k, n, ldb, out_t.dtype, tb, pack), None
    elif tb:
        bm, ldb = _transpose_into(lo, bm, Type(out_t.dtype, (n, k)), ld=ldb), n

    prefetch = PREFETCH and m * k * ELEMENT_BYTES[out_t.dtype] >= PREFETCH_MIN_BYTES
    b_ahead = not (packed or tb or copied)   # b read in place (a copy is in the caches)

    def a_next(i0, count, p):
        """The elements of a whose lines step p prefetches for the next block of rows: (ta)
        its first and last columns at row p; (rows adjacent) the next `count` elements of its
        rows; (rows apart) none."""
        if ta:
            first = b.add(b.mul(p, I64(lda)), b.add(i0, I64(count)))
            return [first, b.add(first, I64(count - 1))]
        return [b.add(b.mul(b.add(i0, I64(count)), I64(lda)), b.mul(p, I64(count)))] if lda == k else []

    def block(i0, count, parts, col0):
        types = [ir.VectorType(ty, size) for _ in range(count) for _, size in parts]
        dst = [(r, q, at(out, b.add(b.mul(b.add(i0, I64(r)), I64(ldc)), b.add(col0, I64(off)))))
               for r in range(count) for q, (off, _) in enumerate(parts)]
        init = [b.load(p, typ=types[r * len(parts) + q], align=1) for r, q, p in dst] if accumulate else \
            [b.load(at(bias, b.add(col0, I64(off))), typ=ir.VectorType(ty, size), align=1)
             for _ in range(count) for off, size in parts] if bias is not None else None

        def steps(update):
            def step(p):
                width = sum(size for _, size in parts)
                row = b.add(b.mul(col0, I64(k)), b.mul(p, I64(width))) if packed else b.add(b.mul(p, I64(ldb)), col0)
                bs = [b.load(at(bm, b.add(row, I64(off))), typ=ir.VectorType(ty, size), align=1)
                      for off, size in parts]
                if prefetch:
                    _prefetch_ahead(lo, [at(a, e) for e in a_next(i0, count, p)], at(bm, b.add(
                        row, I64(PREFETCH_STEPS * ldb))) if b_ahead else None, width * ELEMENT_BYTES[out_t.dtype])
                for r in range(count):
                    av = b.load(at(a, a_at(b.add(i0, I64(r)), p)), typ=ty)
                    for q, (bv, (_, size)) in enumerate(zip(bs, parts)):
                        update(r * len(parts) + q, lambda acc: _fma(lo, _splat(b, av, size), bv, acc))
            if zero_a is None:
                lo.counted_loop(I64(k), step, rolled=True)
            else:
                first, count_k = _k_range(b, i0, count, k, zero_a, ta)
                lo.counted_loop(count_k, lambda t: step(b.add(first, t)), rolled=True)
        for (r, q, p), v in zip(dst, _registers(b, types, steps, init)):
            b.store(v, p, align=1)

    def stripe(i0, count, parts, col0):   # whole blocks share one loop (one copy of their code)
        per = max(1, regs // len(parts))
        if count // per > 1:
            lo.counted_loop(I64(count // per), lambda r: block(b.add(i0, b.mul(r, I64(per))), per, parts, col0),
                            rolled=True)
        elif count // per:
            block(i0, per, parts, col0)
        if count % per:
            block(b.add(i0, I64(count // per * per)), count % per, parts, col0)

    def rows_from(i0, count):
        for parts, first in stripes:
            if first is None and only_out is not None:
                need = _stripes_read(b, i0, count, only_out, whole)
                lo.counted_loop(need, lambda j, parts=parts: stripe(i0, count, parts, b.mul(j, I64(VECTOR))),
                                rolled=True)
                if zero_rest and not accumulate:
                    _zero_stripes(lo, out, ldc, ty, i0, count, parts, need, whole)
            elif first is None:
                lo.counted_loop(I64(whole), lambda j, parts=parts: stripe(i0, count, parts, b.mul(j, I64(VECTOR))),
                                rolled=True)
            else:
                stripe(i0, count, parts, I64(first * VECTOR))
    if m % rows and m > rows and not accumulate:   # the last block overlaps the one before: its rows are
        last = I64(m - rows)                         # stored again, the same values (no code for fewer rows)
        lo.counted_loop(I64(m // rows + 1), lambda blk: rows_from(
            b.select(b.icmp_unsigned("<", blk, I64(m // rows)), b.mul(blk, I64(rows)), last), rows), rolled=True)
        return
    if m // rows:
        lo.counted_loop(I64(m // rows), lambda blk: rows_from(b.mul(blk, I64(rows)), rows), rolled=True)
    if m % rows:
        rows_from(I64(m // rows * rows), m % rows)


def _triangles(attrs):
    """`(zero_a, only_out, zero_rest)` of a product `jitad.ir.triangles` marked, or None."""
    tri = attrs.get("zero_a"), attrs.get("only_out"), attrs.get("zero_rest", False)
    return tri if tri[:2] != (None, None) else None


def _clamp(b, x, low, high):
    """x limited to [low, high] (signed i64 values)."""
    x = b.select(b.icmp_signed("<", x, low), low, x)
    return b.select(b.icmp_signed(">", x, high), high, x)


def _k_range(b, i0, count, k, zero_a, ta):
    """`(first, count)` of the steps along k that rows i0 .. i0 + count - 1 of op(a) take
    where the stored a is zero at (r, c) with c > r + zero_a: up to the block's last row
    (op(a) = a), or from its first (op(a) = aᵀ)."""
    if ta:
        first = _clamp(b, b.sub(i0, I64(zero_a)), I64(0), I64(k))
        return first, b.sub(I64(k), first)
    return I64(0), _clamp(b, b.add(i0, I64(count + zero_a)), I64(0), I64(k))


def _stripes_read(b, i0, count, only_out, whole):
    """The whole stripes of columns (from the first) that rows i0 .. i0 + count - 1 read
    where only the entries (i, j) with j <= i + only_out are read."""
    last = _clamp(b, b.add(i0, I64(count + only_out + VECTOR - 1)), I64(0), I64(whole * VECTOR))
    return b.udiv(last, I64(VECTOR))


def _zero_stripes(lo, out, ldc, ty, i0, count, parts, need, whole):
    """Zeros into rows i0 .. i0 + count - 1 of the whole stripes from `need` on."""
    b = lo.b

    def stripe(j):
        col0 = b.mul(b.add(need, j), I64(VECTOR))
        for r in range(count):
            for off, size in parts:
                b.store(ir.Constant(ir.VectorType(ty, size), None), b.gep(out, [b.add(
                    b.mul(b.add(i0, I64(r)), I64(ldc)), b.add(col0, I64(off)))], source_etype=ty), align=1)
    lo.counted_loop(b.sub(I64(whole), need), stripe, rolled=True)


def _prefetch(lo, ptr):
    """A hint to bring `ptr`'s line into the caches, to be read (a prefetch never faults,
    whatever the address)."""
    f = lo.extern("llvm.prefetch.p0", ir.FunctionType(ir.VoidType(), [PTR, I32, I32, I32]))
    lo.b.call(f, [ptr, I32(0), I32(3), I32(1)])


def _prefetch_ahead(lo, a_ptrs, b_ptr, b_bytes):
    """A step's prefetches in the tiles: `a_ptrs` (lines of the next block's a), and the
    `b_bytes` from `b_ptr` (a row of b ahead) where b is read in place (None: not)."""
    for ptr in a_ptrs:
        _prefetch(lo, ptr)
    if b_ptr is not None:
        for off in range(0, b_bytes, 64):
            _prefetch(lo, lo.b.gep(b_ptr, [I64(off)], source_etype=I8))


def _packs(m, n, k, dtype):
    """Whether `_register_gemm` copies b stripe by stripe first (`_pack_stripes`)."""
    return PACK_B and m >= PACK_B_ROWS and n > VECTOR and k * n * ELEMENT_BYTES[dtype] > PACK_B_BYTES


def _pack_stripes(lo, bm, k, n, ldb, dtype, tb=False, buf=None):
    """`buf` (default: a new scratch buffer of k·n elements) holding the (k, n) matrix `bm`
    (rows `ldb` apart; `tb`: its (n, k) transpose is stored) stripe by stripe: the k rows of
    each `VECTOR` columns wide stripe, then those of the narrower last one."""
    b, ty = lo.b, LL[dtype]
    whole, rest = divmod(n, VECTOR)
    buf = lo.alloc(Type(dtype, (k, n))) if buf is None else buf
    at = lambda base, off: b.gep(base, [off], source_etype=ty)

    def stripe(col0, width):
        dst = at(buf, b.mul(col0, I64(k)))
        if tb:
            _transpose_into(lo, at(bm, b.mul(col0, I64(ldb))), Type(dtype, (width, k)), dst, ldb)
        else:
            _copy_matrix(lo, dst, width, at(bm, col0), ldb, (k, width), ty)
    if whole:
        lo.counted_loop(I64(whole), lambda j: stripe(b.mul(j, I64(VECTOR)), VECTOR), rolled=True)
    if rest:
        stripe(I64(whole * VECTOR), rest)
    return buf


def _add_rows(lo, slot, ref_t, i, value, value_t, value_idx, store=False):
    """slot[clip_index(i)] += value[value_idx...] (a row, or one element for 1-D slots);
    `=` with `store`."""
    row_shape = ref_t.shape[1:]
    dst = lo.row(slot, ref_t.value_type, i)
    row_t = ref_t.value_type.__class__(ref_t.dtype, row_shape)
    t = LL[ref_t.dtype]

    def body(idx):
        ptr = lo.elem_ptr(dst, row_t, idx)
        v = lo.load_at(value, value_t, list(value_idx) + idx, value_t.shape) if value_t.shape else value
        lo.b.store(v if store else lo.b.fadd(lo.b.load(ptr, typ=t), v), ptr)
    lo.loop_nest(row_shape, body)


@rule(Op.SLOT_ADD_SLICE)
def _slot_add_slice(lo, node, ins):
    slot, value = ins
    t, a = node.inputs[1].type, node.attrs
    slot_t = node.inputs[0].type.value_type

    def add(idx):   # (`store`: the region's first write, `peephole.first_adds_store`)
        ptr = lo.elem_ptr(slot, slot_t, idx, steps=a["steps"], starts=a["starts"])
        v = lo.b.load(lo.elem_ptr(value, t, idx), typ=LL[t.dtype])
        lo.b.store(v if a.get("store") else lo.b.fadd(lo.b.load(ptr, typ=LL[t.dtype]), v), ptr)
    lo.loop_nest(t.shape, add)
    return []


@rule(Op.SLOT_ADD_AT, Op.SLOT_SET_AT)
def _slot_add_at(lo, node, ins):
    _add_rows(lo, ins[0], node.inputs[0].type, ins[1], ins[2], node.inputs[2].type, [], node.op == Op.SLOT_SET_AT)
    return []


@rule(Op.SLOT_SCATTER_ADD)
def _slot_scatter_add(lo, node, ins):
    """Rows of the value added at rows `index` of the slot (clipped); with `skip_outside` an
    index outside the slot's rows adds nothing."""
    ref_t, idx_t, value_t = (v.type for v in node.inputs)
    b = lo.b

    def add(idx):
        i = b.load(lo.elem_ptr(ins[1], idx_t, idx), typ=I64)
        if not node.attrs.get("skip_outside"):
            _add_rows(lo, ins[0], ref_t, i, ins[2], value_t, idx)
            return
        with b.if_then(b.icmp_unsigned("<", i, I64(ref_t.shape[0]))):   # 0 <= i < rows
            _add_rows(lo, ins[0], ref_t, i, ins[2], value_t, idx)
    lo.loop_nest(idx_t.shape, add)
    return []


class _FusedLoop:
    """One `fused` node lowered: a loop nest over its shape running the scalar body once
    per element (in row blocks where the body takes row sums or maxima, in one nest per
    box between a slice's or concatenation's cuts where it reads shifted; `by_rows`: a
    member of a `row_loops` node, whose rule calls `row_block` per row). Read top to
    bottom as the loop runs: `element` is one iteration, `_step` one body op."""

    def __init__(self, lo, node, ins, by_rows=False):
        self.lo, self.node, self.b, self.by_rows = lo, node, lo.b, by_rows
        (body,) = node.bodies
        self.body = body
        operand_shapes = [v.type.value_type.shape if isinstance(v.type, RefType) else v.type.shape for v in node.inputs]
        self.shifted = regions.indexed(node)   # slices, concatenations, region adds: no merged dimensions
        self.rows = {n.outputs[0]: n for n in body.nodes if n.op in (Op.SUM, Op.MAX)
                     and row_reduction(n, node.attrs["shape"])}
        self.products = any(n.op == Op.MATMUL for n in body.nodes)
        # sums over all axes but the last (`fuse.column_sums`): a row of accumulators, the result's buffer
        self.columns = {n.outputs[0] for n in body.nodes if n.op == Op.SUM
                        and regions.column_reduction(n, node.attrs["shape"])}
        self.shape, self.merged = (tuple(node.attrs["shape"]), None) \
            if self.shifted or self.rows or self.products or self.columns or by_rows \
            else collapse(node.attrs["shape"], [node.attrs["shape"]] + operand_shapes)
        self.index_nodes = {n.outputs[0]: n for n in body.nodes if n.op in (Op.SLICE, Op.CONCAT, Op.GATHER)}
        self.reduced = {n.outputs[0] for n in body.nodes if n.op == Op.SUM and n.outputs[0] not in self.rows
                        and n.outputs[0] not in self.columns}
        self.width = _column_block(self, body)   # columns summed on the stack, this many at a time
        self.column_copies, self.column_base = [], I64(0)   # (result, accumulators, type); the block's first column
        self.results = [self._result(v, out) for v, out in zip(body.outputs, node.outputs)]
        self.accumulator = {v: self.results[k] for k, v in enumerate(body.outputs) if v in self.reduced}
        self.sources = {p: (x, v.type) for p, x, v in zip(body.params, ins, node.inputs)}
        self.producer = {v: n for n in body.nodes for v in n.outputs}
        # a product in the loop: JAM rows at a time, sharing the right operand's loads
        self.jam = JAM if self.products and self.rows and len(self.shape) == 2 else 1
        self.lanes = [{v: (alloca(self.b, LL[n.inputs[0].type.dtype]), alloca(self.b, I1) if n.op == Op.MAX else None)
                       for v, n in self.rows.items()} for _ in range(self.jam)]   # registers, a max's NaN flag
        self.row_acc = self.lanes[0]   # the registers `element` accumulates into
        self.row_combine = {v: _combine(lo, REDUCTIONS[n.op], n.inputs[0].type.dtype) for v, n in self.rows.items()}
        self.row_max = next((_row_max(lo, n.inputs[0].type.dtype) for n in self.rows.values() if n.op == Op.MAX), None)
        self.gathered = []   # the loads of gathered reads (`gathered_reads`): their source and index are not written here

    def _result(self, v, out):
        if v in self.reduced:
            acc = alloca(self.b, LL[out.type.dtype])
            self.b.store(LL[out.type.dtype](0), acc)
            return acc
        buf = self.lo.result_buffer(out)
        if v in self.columns and self.width:   # a block's accumulators: no operand's pointer aliases them
            acc = alloca(self.b, ir.ArrayType(LL[out.type.dtype], self.width))
            self.column_copies.append((buf, acc, out.type))
            return acc
        if v in self.columns:
            self.lo.fill(buf, out.type, LL[out.type.dtype](0))
        return buf

    def flat(self, t):   # a type as the merged loop indexes it
        return Type(t.dtype, self.merged[t.shape]) if t.shape and self.merged else t

    def shift(self, at, d):
        b = self.b
        return [i if o == 0 else b.add(i, I64(o), flags=NO_WRAP) if o > 0 else b.sub(i, I64(-o), flags=NO_WRAP)
                for i, o in zip(at, d)]

    def read(self, v, idx, d, box, env):
        """Element idx + d of body value `v`: a tensor param's, a slice's or concatenation's
        (read where used), or a value the body computes (at an offset: computed there)."""
        lo, n = self.lo, self.index_nodes.get(v)
        if n is None and v in self.sources:
            x, t = self.sources[v]
            return lo.load_at(x, self.flat(t), self.shift(idx, d), self.shape)
        if n is None:   # computed at an offset (a recomputed stage read shifted)
            key = (v, d) if any(d) else v
            if key not in env:
                n = self.producer[v]
                args = [self.read(u, idx, d, box, env) for u in n.inputs]
                scalar = scalar_rule_of(n.op)
                env[key] = args[0] if n.op in (Op.BROADCAST, Op.RESHAPE) else \
                    scalar(lo, n, args)[0] if scalar is not None else lo_const(n)
            return env[key]
        if n.op == Op.GATHER:   # row idx[i] of x (clamped as `take` reads it) at the rest of the index
            (x, t), (rows, rows_t) = self.sources[n.inputs[0]], self.sources[n.inputs[1]]
            at, row_t = self.shift(idx, d), Type(t.dtype, t.shape[1:])
            row = self.b.load(lo.elem_ptr(rows, rows_t, at[:1]), typ=LL["i64"])
            ptr = lo.row(x, t, row)
            value = lo.load_at(ptr, row_t, at[1:], row_t.shape) if row_t.shape else self.b.load(ptr, typ=LL[t.dtype])
            self.gathered += [row, value]
            return value
        if n.op == Op.SLICE:
            u = n.inputs[0]
            if u not in self.sources:   # a slice of a computed value: its steps are 1
                return self.read(u, idx, tuple(o + s0 for o, s0 in zip(d, n.attrs["starts"])), box, env)
            x, t = self.sources[u]
            return self.b.load(lo.elem_ptr(x, t, self.shift(idx, d), steps=n.attrs["steps"], starts=n.attrs["starts"]),
                               typ=LL[t.dtype])
        axis, start = n.attrs["axis"], 0   # the piece this box lies in, read at the index shifted into it
        for piece, size in zip(n.inputs, n.attrs["sizes"]):
            if box[axis][0] + d[axis] < start + size:
                return self.read(piece, idx, d[:axis] + (d[axis] - start,) + d[axis + 1:], box, env)
            start += size

    def element(self, idx, box=None):
        """One iteration: the body's ops at index `idx`. Inputs are loaded where first used:
        a slot added to earlier in the same iteration must be read after that addition."""
        env, local, zero = {}, set(), (0,) * len(self.shape)

        def value(v):
            if v not in env:
                x, t = self.sources.get(v, (None, None))
                env[v] = x if isinstance(t, RefType) else self.read(v, idx, zero, box, env)
            return env[v]
        for n in self.body.nodes:
            if n.op in (Op.SLICE, Op.CONCAT, Op.GATHER):   # read where used, at the index it is used at
                continue
            if n.op == Op.MATMUL:   # element (i, j) of a product over a short contraction
                env[n.outputs[0]] = _dot(self.lo, *(self.sources[v] for v in n.inputs), idx)
                continue
            self._step(n, [value(v) for v in n.inputs], env, local, idx, box)
        for v, out, buf in zip(self.body.outputs, self.node.outputs, self.results):
            if v not in self.reduced and v not in self.rows and v not in self.columns:
                self.lo.store_elem(value(v), self.lo.elem_ptr(buf, self.flat(out.type), idx))

    def _step(self, n, args, env, local, idx, box):
        """Body op `n` on its element values `args`: a slot's read or update, a reduction's
        accumulation, or the op's scalar rule."""
        b, lo = self.b, self.lo
        if n.op == Op.SLOT_ADD_SLICE:   # added when this box lies in the region
            self._add_region(n, args, idx, box)
        elif n.op in (Op.SLOT, Op.SLOT_GET, Op.SLOT_ADD):
            self._slot(n, args, env, local, idx)
        elif n.outputs and n.outputs[0] in self.rows:   # a row's sum or max: its register
            acc, nan = self.row_acc[n.outputs[0]]
            combine = self.row_max if n.op == Op.MAX else self.row_combine[n.outputs[0]]
            b.store(combine(b.load(acc, typ=args[0].type), args[0]), acc)
            if nan is not None:
                b.store(b.or_(b.load(nan, typ=I1), b.fcmp_unordered("uno", args[0], args[0])), nan)
        elif n.outputs and n.outputs[0] in self.columns:   # its column's accumulator, in rows' order
            buf = self.results[self.body.outputs.index(n.outputs[0])]
            ptr = lo.elem_ptr(buf, Type(n.outputs[0].type.dtype, self.shape[-1:]),
                              [b.sub(idx[-1], self.column_base, flags=NO_WRAP)])
            b.store(b.fadd(b.load(ptr, typ=args[0].type), args[0]), ptr)
        elif n.op == Op.SUM:
            acc = self.accumulator.get(n.outputs[0]) or alloca(b, args[0].type)
            add = b.fadd(b.load(acc, typ=args[0].type), args[0], flags=("reassoc",)) \
                if args[0].type in (F64, F32) else b.add(b.load(acc, typ=args[0].type), args[0])
            b.store(add, acc)
        elif n.op in (Op.BROADCAST, Op.RESHAPE):   # the element is already broadcast
            env[n.outputs[0]] = args[0]
        else:
            scalar = scalar_rule_of(n.op)
            env[n.outputs[0]] = scalar(lo, n, args)[0] if scalar is not None else lo_const(n)

    def _add_region(self, n, args, idx, box):
        """A slice of a loop's result added to (or stored into) a slot's region."""
        b, lo, a = self.b, self.lo, n.attrs
        if not all(lo_ <= box[d][0] and box[d][1] <= hi for d, (lo_, hi) in
                   enumerate(zip(a["src_starts"], a["src_stops"]))):
            return
        t = ref_type(self.node, self.body, n.inputs[0])
        at = [b.sub(i, I64(s0), flags=NO_WRAP) for i, s0 in zip(idx, a["src_starts"])]
        if "flat" in a:   # a concatenation's piece, stored at base + strides · index
            ptr = lo.elem_ptr(args[0], Type(t.dtype, (int(np.prod(t.shape)),)), [_flat_index(b, at, *a["flat"])])
        else:
            ptr = lo.elem_ptr(args[0], t, at, steps=a["steps"], starts=a["starts"])
        if a.get("store"):
            lo.store_elem(args[1], ptr)
        else:
            b.store(b.fadd(b.load(ptr, typ=args[1].type), args[1]), ptr)

    def _slot(self, n, args, env, local, idx):
        """A slot op: a per-element scalar slot (a register after mem2reg) or an element of
        a tensor slot."""
        b, lo = self.b, self.lo
        if n.op == Op.SLOT:
            t = LL[n.attrs["type"].dtype]
            env[n.outputs[0]] = alloca(b, t)
            b.store(t(0), env[n.outputs[0]])
            local.add(n.outputs[0])
        elif n.op == Op.SLOT_GET and n.inputs[0] in local:
            env[n.outputs[0]] = b.load(args[0], typ=LL[n.outputs[0].type.dtype])
        elif n.op == Op.SLOT_ADD and n.inputs[0] in local:
            b.store(b.fadd(b.load(args[0], typ=args[1].type), args[1]), args[0])
        elif n.op == Op.SLOT_GET:
            ref = n.inputs[0]
            env[n.outputs[0]] = b.load(lo.elem_ptr(args[0], self.flat(ref_type(self.node, self.body, ref)), idx),
                                       typ=LL[n.outputs[0].type.dtype])
        else:
            ptr = lo.elem_ptr(args[0], self.flat(ref_type(self.node, self.body, n.inputs[0])), idx)
            if n.attrs.get("store"):   # the slot's first update: it was not zeroed
                b.store(args[1], ptr)
            else:
                b.store(b.fadd(b.load(ptr, typ=args[1].type), args[1]), ptr)

    def row_block(self, firsts):
        """The rows at index prefixes `firsts`, their elements interleaved."""
        b, shape = self.b, self.shape
        for lane in self.lanes[:len(firsts)]:
            for v, (acc, nan) in lane.items():
                b.store(LL[v.type.dtype](REDUCTIONS[self.rows[v].op].identity(v.type.dtype)), acc)
                if nan is not None:
                    b.store(I1(0), nan)

        def column(i):
            for lane, first in zip(self.lanes, firsts):
                self.row_acc = lane
                self.element(first + [i])
        _row_loop(self.lo, shape[-1], column)
        for lane, first in zip(self.lanes, firsts):
            for v, (acc, nan) in lane.items():
                total = b.load(acc, typ=LL[v.type.dtype])
                if nan is not None:
                    total = b.select(b.load(nan, typ=I1), LL[v.type.dtype](float("nan")), total)
                buf = self.results[self.body.outputs.index(v)]
                b.store(total, self.lo.elem_ptr(buf, Type(v.type.dtype, shape[:-1]), first))

    def run(self):
        """The loop nests, and the node's results (the gathered reads marked as not aliasing
        the stores: `_unaliased_gathers`)."""
        first_block = len(self.lo.func.basic_blocks)
        results = self._nests()
        _unaliased_gathers(self, first_block)
        return results

    def _nests(self):
        b, lo, shape, jam = self.b, self.lo, self.shape, self.jam
        if self.rows and jam > 1:
            blocks = shape[0] // jam
            lo.counted_loop(I64(blocks), lambda k: self.row_block(
                [[b.add(b.mul(k, I64(jam), flags=NO_WRAP), I64(q), flags=NO_WRAP)] for q in range(jam)]))
            for r in range(blocks * jam, shape[0]):
                self.row_block([[I64(r)]])
        elif self.rows:
            lo.loop_nest(shape[:-1], lambda idx: self.row_block([idx]))
        elif self.width:
            self.column_blocks()
        elif not self.shifted and len(shape) > 1 and shape[-1] < SHORT_ROW:
            lo.loop_nest(shape[:-1], lambda idx: _row_loop(lo, shape[-1], lambda j: self.element(idx + [j])),
                         work=shape[-1])
        elif not self.shifted:
            lo.loop_nest(shape, self.element)
        for box in regions.boxes(self.node) if self.shifted else ():   # one loop nest per box between the cuts
            lo.loop_nest(tuple(hi - lo_ for lo_, hi in box), lambda idx, box=box: self.element(
                [b.add(i, I64(lo_), flags=NO_WRAP) for i, (lo_, _) in zip(idx, box)], box))
        final = {id(acc): buf for buf, acc, _ in self.column_copies}
        return [b.load(buf, typ=LL[out.type.dtype]) if v in self.reduced else final.get(id(buf), buf)
                for v, out, buf in zip(self.body.outputs, self.node.outputs, self.results)]

    def column_blocks(self):
        """The loop nest a block of `width` columns at a time, each block's column sums
        added up on the stack (in L1, and vectorized: no operand aliases the stack) and
        stored after it."""
        b, lo, shape, width = self.b, self.lo, self.shape, self.width

        def block(first, size):
            self.column_base = first
            for _, acc, t in self.column_copies:
                lo.fill(acc, Type(t.dtype, (size,)), LL[t.dtype](0))
            lo.loop_nest(shape[:-1] + (size,), lambda idx: self.element(
                idx[:-1] + [b.add(idx[-1], first, flags=NO_WRAP)]))
            for buf, acc, t in self.column_copies:
                lo.copy(lo.elem_ptr(buf, t, [first]), acc, Type(t.dtype, (size,)))
        full, rest = divmod(shape[-1], width)
        if full:
            lo.counted_loop(I64(full), lambda j: block(b.mul(j, I64(width), flags=NO_WRAP), width))
        if rest:
            block(I64(full * width), rest)


UNALIASED_GATHERS = True   # gathered reads marked as not aliasing the loop's stores (False: unmarked, for A/Bs)


def _unaliased_gathers(loop, first_block):
    """Tell LLVM that a fused loop reading through an index (`gathered_reads`) does not
    store into the tensors it reads: alias scope metadata of the loop's own, its stores in
    the scope, its operands' loads marked as not aliasing it. LLVM can bound neither a
    gathered load's addresses nor, through them, those of the loads it groups with, so
    without it the loop runs scalar. The stores marked: those into the loop's results
    (fresh arena space or the result arrays the entry made, where no operand, live while
    the loop runs, lies), and the updates of its slots too where the passes found that no
    operand is a view of a slot or table it writes (`apart_reads`). A result placed into
    a table's entry, or in a buffer the loop also reads, keeps the loop unmarked. Only
    the loop's own blocks are marked (the block it started in holds earlier nodes' code)."""
    lo = loop.lo
    if not UNALIASED_GATHERS or not any(isinstance(v, ir.LoadInstr) for v in loop.gathered):
        return
    placed = {id(v) for v in getattr(lo, "placed", {}).values()}
    reads = {id(x) for x, t in loop.sources.values() if not isinstance(t, RefType)}
    outs = {id(buf) for buf in loop.results}
    if outs & (placed | reads):
        return
    outs |= {id(acc) for lane in loop.lanes for pair in lane.values() for acc in pair if acc is not None}
    every_store = loop.node.attrs.get("reads_apart", False)
    module = lo.func.module
    lo.alias_scopes = getattr(lo, "alias_scopes", 0) + 1
    name = f"{lo.prefix}fused.{lo.alias_scopes}"   # a named scope and domain (unique strings), as LLVM allows
    domain = module.add_metadata([ir.MetaDataString(module, name)])
    scopes = module.add_metadata([module.add_metadata([ir.MetaDataString(module, name + ".stores"), domain])])
    for block in lo.func.basic_blocks[first_block:]:
        for instr in block.instructions:
            base = id(_base(instr.operands[-1])) if isinstance(instr, (ir.LoadInstr, ir.StoreInstr)) else None
            if isinstance(instr, ir.StoreInstr) and (every_store or base in outs):
                instr.set_metadata("alias.scope", scopes)
            elif isinstance(instr, ir.LoadInstr) and base in reads:
                instr.set_metadata("noalias", scopes)


def _base(ptr):
    """The pointer a chain of `getelementptr`s starts from."""
    while isinstance(ptr, ir.GEPInstr):
        ptr = ptr.pointer
    return ptr


SHORT_ROW = 16   # a fused loop's rows shorter than this run unrolled (LLVM does not vectorize a loop of
# fewer iterations; unrolled, the row's elements vectorize side by side: k-means' loops over (n, 10))


def _row_loop(lo, n, body):
    """`body(j)` for j in range(n): unrolled below SHORT_ROW, else a loop kept rolled (from 8 on)."""
    if n < SHORT_ROW:
        for j in range(n):
            body(I64(j))
    else:
        lo.counted_loop(I64(n), body, rolled=n >= 8)


COLUMN_STACK = 32 << 10   # bytes of column-sum accumulators a fused loop keeps on the stack (a block of
# columns; 0: the result buffers accumulate, for A/Bs)


def _column_block(loop, body):
    """How many columns a fused loop taking column sums runs at a time, their accumulators
    on the stack (COLUMN_STACK bytes at most; a multiple of 8), or None where it runs
    through shifted boxes or rows, is a member of `row_loops` (run a row at a time, its
    sums add up over the rows in its results), or takes too many sums for 8 columns of
    each (its accumulators are then its results)."""
    sums = [v for v in body.outputs if v in loop.columns]
    width = COLUMN_STACK // (8 * max(len(sums), 1)) // 8 * 8
    if not sums or loop.shifted or loop.rows or loop.by_rows or width < 8:
        return None
    return min(loop.shape[-1], width)


@rule(Op.FUSED)
def _fused(lo, node, ins):
    """One loop nest over the node's shape running the scalar body once per element."""
    return _FusedLoop(lo, node, ins).run()


def _flat_index(b, at, base, strides):
    offset = I64(base)
    for i, s in zip(at, strides):
        if s:
            offset = b.add(offset, b.mul(i, I64(s), flags=NO_WRAP), flags=NO_WRAP)
    return offset


JAM = 4   # rows a fused loop with a product in it runs at once


def _dot(lo, a, b_, idx):
    """Σ_k a[i, k] b[k, j] at idx = (i, j), the short sum unrolled (`small_products`)."""
    (x, xt), (y, yt) = a, b_
    b, t, total = lo.b, LL[xt.dtype], LL[xt.dtype](0)
    fma = lo.extern(f"llvm.fmuladd.{xt.dtype}", ir.FunctionType(t, [t, t, t]))
    for k in range(xt.shape[1]):
        total = b.call(fma, [b.load(lo.elem_ptr(x, xt, [idx[0], I64(k)]), typ=t),
                             b.load(lo.elem_ptr(y, yt, [I64(k), idx[1]]), typ=t), total])
    return total


def ref_type(node, body, param):
    """The tensor type behind a slot param of a fused body."""
    return node.inputs[body.params.index(param)].type.value_type


def lo_const(n):
    return LL[n.attrs["type"].dtype](n.attrs["value"])


# -- register tiles: accumulators in vector registers (conv2d, small matrix products) ---

def _pieces(start, width, lanes):
    """(offset, size) pieces of a row: whole registers, then halves, ... (LLVM splits
    other vector sizes badly)."""
    out, size = [], lanes
    while width:
        while size > width:
            size //= 2
        out.append((start, size))
        start, width = start + size, width - size
    return out


def _fma(lo, a, v, acc):
    if not isinstance(a.type.element, (ir.DoubleType, ir.FloatType)):
        return lo.b.add(lo.b.mul(a, v), acc)
    name = "f64" if isinstance(a.type.element, ir.DoubleType) else "f32"
    f = lo.extern(f"llvm.fmuladd.v{a.type.count}{name}", ir.FunctionType(a.type, [a.type] * 3))
    return lo.b.call(f, [a, v, acc])


def _splat(b, v, size):
    vt = ir.VectorType(v.type, size)
    return b.shuffle_vector(b.insert_element(ir.Constant(vt, ir.Undefined), v, I32(0)),
                            ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(I32, size), [0] * size))


def _registers(b, types, body, init=None):
    """Registers of `types` (allocas LLVM promotes) starting at `init` (values, default
    zero); `body(update)` emits the loops, `update(k, f)` sets register k to f(its value).
    Their final values."""
    regs = [alloca(b, t) for t in types]
    for k, (r, t) in enumerate(zip(regs, types)):
        b.store(init[k] if init else ir.Constant(t, None), r)
    body(lambda k, f: b.store(f(b.load(regs[k], typ=types[k])), regs[k]))
    return [b.load(r, typ=t) for r, t in zip(regs, types)]


@service("conv2d")
def _conv2d(lo, out, out_t, ins, in_types):   # long: its two loop nests share the vector-register setup around them
    """out[n, o, y, x] = sum over c, i, j of w[o, c, i, j] * x[n, c, y + i, x + j], in
    vector registers, several independent sums at a time (a multiply-add waits for the
    previous one on its register):

    - a wide output row (or a narrow kernel): output rows of a block of channels, one
      load of an input row per kernel tap shared by the block;
    - a narrow row with a wide kernel (the weight gradient's shape, where the kernel is
      the image): the whole output row, as multiply-adds along the kernel's rows (one
      load of a kernel row shared by the row's elements), summed across lanes at the end.

    Rows wider than `VECTOR` elements go in pieces."""
    x_t, w_t = in_types
    _, C, H, W = x_t.shape
    _, _, KH, KW = w_t.shape
    _, O, OH, OW = out_t.shape
    b, ty, x, w = lo.b, LL[out_t.dtype], ins[0], ins[1]
    floating = out_t.dtype in FLOATS
    lanes = 64 // ELEMENT_BYTES[out_t.dtype]
    at = lambda buf, off: b.gep(buf, [off], source_etype=ty)
    # offsets as sums of index × stride in this order (`lo.offset`'s form measured 1.7× slower)
    lin = lambda *terms: _linear(b, terms)
    x_at = lambda n, c, y, xo: lin((n, C * H * W), (c, H * W), (y, W), (xo, 1))
    w_at = lambda o, c, i, j: lin((o, C * KH * KW), (c, KH * KW), (i, KW), (j, 1))
    out_at = lambda n, o, y, xo: lin((n, O * OH * OW), (o, OH * OW), (y, OW), (xo, 1))

    def loop(n, body):
        lo.counted_loop(I64(n), body, rolled=True)

    def loads(buf, off, size):
        return b.load(at(buf, off), typ=ir.VectorType(ty, size), align=1)

    if OW >= lanes or KW < lanes:
        def rows(n, y):
            for start in range(0, OW, VECTOR):
                parts = _pieces(start, min(VECTOR, OW - start), lanes)
                block = max(1, 16 // len(parts))   # output channels at a time
                for o0 in range(0, O, block):
                    os_ = list(range(o0, min(O, o0 + block)))

                    def taps(update):
                        def tap(c, i, j):
                            xs = [loads(x, x_at(n, c, b.add(y, i), b.add(j, I64(off))), size) for off, size in parts]
                            for k, o in enumerate(os_):
                                wv = b.load(at(w, w_at(I64(o), c, i, j)), typ=ty)
                                for q, (xv, (_, size)) in enumerate(zip(xs, parts)):
                                    update(k * len(parts) + q, lambda acc: _fma(lo, _splat(b, wv, size), xv, acc))
                        loop(C, lambda c: loop(KH, lambda i: loop(KW, lambda j: tap(c, i, j))))
                    regs = _registers(b, [ir.VectorType(ty, size) for _ in os_ for _, size in parts], taps)
                    for k, o in enumerate(os_):
                        for q, (off, _) in enumerate(parts):
                            dst = at(out, out_at(n, I64(o), y, I64(off)))
                            b.store(regs[k * len(parts) + q], dst, align=1)
        lo.loop_nest((out_t.shape[0], OH), lambda idx: rows(*idx), work=O * OW * C * KH * KW)
        return

    def row(n, o, y):
        totals = [None] * OW
        for start in range(0, KW, VECTOR):
            parts = _pieces(start, min(VECTOR, KW - start), lanes)

            def taps(update):
                def kernel_row(c, i):
                    for q, (off, size) in enumerate(parts):
                        wv = loads(w, w_at(o, c, i, I64(off)), size)
                        for xo in range(OW):
                            xv = loads(x, x_at(n, c, b.add(y, i), I64(off + xo)), size)
                            update(xo * len(parts) + q, lambda acc: _fma(lo, wv, xv, acc))
                loop(C, lambda c: loop(KH, lambda i: kernel_row(c, i)))
            regs = _registers(b, [ir.VectorType(ty, size) for _ in range(OW) for _, size in parts], taps)
            for k, reg in enumerate(regs):
                xo = k // len(parts)
                for lane in range(reg.type.count):
                    v = b.extract_element(reg, I32(lane))
                    totals[xo] = v if totals[xo] is None else (b.fadd(totals[xo], v) if floating
                                                               else b.add(totals[xo], v))
        for xo, total in enumerate(totals):
            b.store(total, at(out, out_at(n, o, y, I64(xo))))
    lo.loop_nest(out_t.shape[:3], lambda idx: row(*idx), work=OW * C * KH * KW)


VECTOR = 32   # row elements per register group in the tiles (four 512-bit registers of f64)


def _linear(b, terms):
    total = I64(0)
    for i, stride in terms:
        total = b.add(total, b.mul(i, I64(stride), flags=("nuw", "nsw")), flags=("nuw", "nsw"))
    return total
