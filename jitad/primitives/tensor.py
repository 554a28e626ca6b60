"""The tensor primitives: broadcast, reductions, shape ops, matmul, conv2d, indexing,
slicing and concatenation, each declared with its rules: type, NumPy meaning, VJP, JVP,
batching, and its LLVM and CUDA rules, written against the lowerer and runner objects
they are given: the loop nests and kernels of the shape ops, indexing, slicing and
concatenation in full; the products (`matmul`, `bmm`, `conv2d`) as calls of the GEMM and
register-tile kernels those objects offer (`lo.gemm`, `rt.conv2d`, ...). The scans and
reductions are declared by a combine function and an identity, from which every backend
builds its loops (jitad/primitives/along_axis.py)."""
import numpy as np

from ..errors import ShapeError
from ..ir.ops import Op, clip_index, declare, same_dtype, shape_rule
from ..ir.types import FLOATS, Type
from . import along_axis
from .along_axis import declare_reduction, declare_scan
# N: jitad.numeric, the staged math the derivative rules are written in (see rules.N)
from .rules import N, Region, Sparse, batched, lift, linear, rebind, reduced_shape, unbroadcast


def _slices(shape, starts, stops, steps):
    return tuple(slice(a, b, c) for a, b, c in zip(starts, stops, steps))


def _unslice_impl(g, shape, starts, stops, steps):
    out = np.zeros(shape, dtype=g.dtype)
    out[_slices(shape, starts, stops, steps)] = g
    return out


def _max_share(x, out, axes):
    """Each element's share of the maximum's derivative: ties split it evenly."""
    keep = reduced_shape(x.shape, axes, True)
    hit = N.convert(x == N.broadcast_to(N.reshape(out, keep), x.shape), x.ir_dtype)
    return hit / N.broadcast_to(N.reshape(N.sum(hit, axis=axes), keep), x.shape), keep


def _max_vjp(g, x, out, axes, keepdims):
    share, keep = _max_share(x, out, axes)
    return (share * N.broadcast_to(N.reshape(g, keep), x.shape),)


def _max_jvp(node, tangents, primals, out):
    share, _ = _max_share(primals[0], out, node.attrs["axes"])
    return N.sum(share * tangents[0], axis=node.attrs["axes"], keepdims=node.attrs["keepdims"])


# -- LLVM rules: llvm(lo, node, ins) -> [values], lo a `jitad.lower.llvm.Lowerer` --------

def _copy_llvm(lo, out_t, out, read):
    """A fresh result buffer `out` filled by a loop nest: element idx is `read(idx)`."""
    lo.loop_nest(out_t.shape, lambda idx: lo.b.store(read(idx), lo.elem_ptr(out, out_t, idx)))
    return [out]


def _broadcast_llvm(lo, node, ins):
    out_t, src_t = node.outputs[0].type, node.inputs[0].type
    return _copy_llvm(lo, out_t, lo.result_buffer(node.outputs[0]),
                      lambda idx: lo.load_at(ins[0], src_t, idx, out_t.shape))


def _reshape_llvm(lo, node, ins):
    x_t, out_t = node.inputs[0].type, node.outputs[0].type
    if x_t.shape and out_t.shape:
        return [ins[0]]   # same row-major buffer
    if out_t.shape:   # a scalar into a buffer of size 1
        buf = lo.result_buffer(node.outputs[0])
        lo.b.store(ins[0], buf)
        return [buf]
    return [lo.b.load(ins[0], typ=lo.ll(x_t.dtype))]


def _transpose_llvm(lo, node, ins):
    x_t, out_t, perm = node.inputs[0].type, node.outputs[0].type, node.attrs["perm"]
    return _copy_llvm(lo, out_t, lo.result_buffer(node.outputs[0]), lambda idx: lo.b.load(
        lo.elem_ptr(ins[0], x_t, [idx[perm.index(d)] for d in range(len(perm))]), typ=lo.ll(x_t.dtype)))


# -- CUDA rules: cuda(rt, node, ins) -> [values], rt a `jitad.lower.cuda.Runner`; data
# movement is one kernel whose index expression (in the flat output index `i`) they build

def _size(shape):
    return int(np.prod(shape, dtype=np.int64))


def _transpose_cuda(rt, node, ins):
    shape, perm, out_shape = node.inputs[0].type.shape, node.attrs["perm"], node.outputs[0].type.shape
    strides = rt.strides(shape)
    index = " + ".join(f"{rt.coordinate('i', out_shape, d)} * {strides[p]}" for d, p in enumerate(perm)) or "0"
    return rt.gather(node, ins[0], lambda el: index, _size(out_shape))


def _batch_broadcast(node, ins, size, mask):
    shape = node.attrs["shape"]
    return rebind(node, lift(ins[0][0], len(shape)), shape=(size,) + tuple(shape))


def _lowest(dtype):
    """max's identity: below every value of `dtype`."""
    return {"bool": False, "i64": int(np.iinfo(np.int64).min)}.get(dtype, -np.inf)


def _broadcast_value(x, shape):
    """x repeated to `shape`, a fresh array (a quarter of `broadcast_to(x, shape).copy()`'s time)."""
    out = np.empty(shape, x.dtype if isinstance(x, (np.ndarray, np.generic)) else np.asarray(x).dtype)
    out[...] = x
    return out


declare("broadcast", shape_rule(lambda types, shape: shape), _broadcast_value,
        arity=1, flags="pure cheap linear kernel", vjp=linear(lambda g, x, out, shape: unbroadcast(g, x.shape)),
        batch=_batch_broadcast, llvm=_broadcast_llvm, cuda="{0}")
declare_reduction("sum", lambda acc, x: acc + x, 0, lambda x, axes, keepdims: np.add.reduce(x, axis=axes, keepdims=keepdims),
                  flags="pure linear kernel", vjp=linear(lambda g, x, out, axes, keepdims: N.broadcast_to(
                      N.reshape(g, reduced_shape(x.shape, axes, True)), x.shape)))
declare_reduction("max", along_axis.maximum, _lowest, lambda x, axes, keepdims: np.maximum.reduce(x, axis=axes, keepdims=keepdims),
                  vjp=_max_vjp, jvp=_max_jvp)
declare("reshape", shape_rule(lambda types, shape: shape), lambda x, shape: np.reshape(x, shape),
        arity=1, flags="pure cheap view linear", vjp=linear(lambda g, x, out, shape: N.reshape(g, x.shape)),
        batch=lambda node, ins, size, mask: rebind(node, ins[0][0], shape=(size,) + tuple(node.attrs["shape"])),
        llvm=_reshape_llvm, cuda="{0}")
declare("transpose", shape_rule(lambda types, perm: [types[0].shape[p] for p in perm]),
        lambda x, perm: np.ascontiguousarray(np.transpose(x, perm)), arity=1, flags="pure linear kernel",
        vjp=linear(lambda g, x, out, perm: N.transpose(g, tuple(np.argsort(perm)))),
        batch=lambda node, ins, size, mask: rebind(node, ins[0][0],
                                                   perm=(0,) + tuple(p + 1 for p in node.attrs["perm"])),
        llvm=_transpose_llvm, cuda=_transpose_cuda)


def _matmul_rule(op, types, attrs, bodies):
    a, b = types
    same_dtype(op, types)
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ShapeError(f"`matmul`: shapes {a.shape} and {b.shape}: need 2-D operands")
    (m, k), (k2, n) = a.shape[::-1] if attrs["ta"] else a.shape, b.shape[::-1] if attrs["tb"] else b.shape
    if k != k2:
        raise ShapeError(f"`matmul`: shapes {a.shape} and {b.shape} do not multiply "
                         "(need (m, k) @ (k, n))")
    return [Type(a.dtype, (m, n))]


def _matmul_vjp(g, a, b, out, ta, tb):
    """Cotangents of op(a) @ op(b), op a transpose where the flag says, without transposing."""
    mm = N.matmul_t
    ga = mm(b, g, ta=tb, tb=True) if ta else mm(g, b, ta=False, tb=not tb)
    gb = mm(g, a, ta=True, tb=ta) if tb else mm(a, g, ta=not ta, tb=False)
    return ga, gb


def _bilinear_jvp(node, tangents, primals, out):
    (a, b), (ta, tb) = primals, tangents
    terms = ([N.bind(node.op, ta, b, **node.attrs)] if ta is not None else []) + \
        ([N.bind(node.op, a, tb, **node.attrs)] if tb is not None else [])
    return terms[0] if len(terms) == 1 else terms[0] + terms[1]


def _swap_last(x):
    perm = tuple(range(len(x.shape)))
    return N.transpose(x, perm[:-2] + perm[-2:][::-1])


def _batch_matmul(node, ins, size, mask):
    """op(a) @ op(b) per lane: one GEMM when only `a` is batched, else NumPy's N-D matmul."""
    (a, ba), (b, bb) = ins
    ta, tb = node.attrs["ta"], node.attrs["tb"]
    if ba and not bb and not ta:   # the rows of every lane's `a` in one product
        m, k = a.shape[1:]
        out = N.matmul_t(N.reshape(a, (size * m, k)), b, ta=False, tb=tb)
        return [(N.reshape(out, (size, m, out.shape[1])), True)]
    return [(N.matmul(_swap_last(a) if ta else a, _swap_last(b) if tb else b), True)]   # (3-D: NumPy's rules)


def _matmul_llvm(lo, node, ins):   # register tiles, a loop nest or BLAS, as the sizes say
    out = lo.result_buffer(node.outputs[0])
    lo.gemm(out, node.outputs[0].type, ins, [v.type for v in node.inputs], node.attrs, accumulate=False)
    return [out]


def _matmul_cuda(rt, node, ins):
    out = rt.alloc(node.outputs[0].type)
    rt.gemm(node, out, ins, [v.type for v in node.inputs], node.outputs[0].type.shape)
    return [out]


declare("matmul", _matmul_rule, lambda a, b, ta, tb: np.matmul(a.T if ta else a, b.T if tb else b),
        arity=2, flags="pure stored", vjp=_matmul_vjp, jvp=_bilinear_jvp, batch=_batch_matmul,
        llvm=_matmul_llvm, cuda=_matmul_cuda)


def _bmm_rule(op, types, attrs, bodies):
    a, b = types
    same_dtype(op, types)
    if len(a.shape) != 3 or len(b.shape) != 3 or a.shape[0] != b.shape[0]:
        raise ShapeError(f"`matmul`: batched shapes {a.shape} and {b.shape}: need (B, m, k) and (B, k, n)")
    (m, k), (k2, n) = a.shape[:0:-1] if attrs["ta"] else a.shape[1:], b.shape[:0:-1] if attrs["tb"] else b.shape[1:]
    if k != k2:
        raise ShapeError(f"`matmul`: batched shapes {a.shape} and {b.shape} do not multiply")
    return [Type(a.dtype, (a.shape[0], m, n))]


def _bmm_impl(a, b, ta, tb):
    return np.matmul(np.swapaxes(a, 1, 2) if ta else a, np.swapaxes(b, 1, 2) if tb else b)


def _bmm_vjp(g, a, b, out, ta, tb):
    """`_matmul_vjp` per batch entry."""
    mm = lambda x, y, ta, tb: N.bind(Op.BMM, x, y, ta=ta, tb=tb)
    ga = mm(b, g, tb, True) if ta else mm(g, b, False, not tb)
    gb = mm(g, a, True, ta) if tb else mm(a, g, not ta, False)
    return ga, gb


def _batch_bmm(node, ins, size, mask):
    """The lanes' batches of products as one batch of lanes × entries."""
    a, b = (batched(x, bx, size) for x, bx in ins)
    out = N.bind(Op.BMM, *[N.reshape(x, (size * x.shape[1],) + x.shape[2:]) for x in (a, b)], **node.attrs)
    return [(N.reshape(out, (size,) + node.outputs[0].type.shape), True)]


def _bmm_llvm(lo, node, ins):
    out = lo.result_buffer(node.outputs[0])
    lo.batched_gemm(out, node.outputs[0].type, ins, [v.type for v in node.inputs], node.attrs)
    return [out]


def _bmm_cuda(rt, node, ins):
    out = rt.alloc(node.outputs[0].type)
    rt.batched_gemm(node, out, ins, [v.type for v in node.inputs], node.outputs[0].type)
    return [out]


# a GEMM per batch entry: op(a[i]) @ op(b[i]), op a transpose of the last two axes where flagged
declare("bmm", _bmm_rule, _bmm_impl, arity=2, flags="pure stored kernel", vjp=_bmm_vjp, jvp=_bilinear_jvp,
        batch=_batch_bmm, llvm=_bmm_llvm, cuda=_bmm_cuda)
# running sums along `axis` (from the end with `reverse`): one sequential pass, NumPy's rounding
# (a scan starts from -0.0, addition's exact identity: the first sum is x[0], -0.0 too, as NumPy's)
declare_scan("cumsum", lambda acc, x: acc + x, lambda dtype: -0.0 if dtype in FLOATS else 0,
             lambda x, axis, reverse: np.flip(np.cumsum(np.flip(x, axis), axis), axis) if reverse else np.cumsum(x, axis),
             flags="pure linear kernel",
             vjp=linear(lambda g, x, out, axis, reverse: N.bind(Op.CUMSUM, g, axis=axis, reverse=not reverse)))


# running products, one sequential pass (NumPy's rounding); its derivatives are derived
# from the combine (exact at zeros: only products and sums, no division by x)
declare_scan("cumprod", lambda acc, x: acc * x, 1,
             lambda x, axis, reverse: np.flip(np.cumprod(np.flip(x, axis), axis), axis) if reverse else np.cumprod(x, axis))


def _logaddexp(acc, x):
    """log(exp(acc) + exp(x)) without overflow; equal operands (two infinities too) add log 2."""
    d = along_axis.where(acc == x, 0.0, -abs(acc - x))
    return along_axis.maximum(acc, x) + along_axis.log1p(along_axis.exp(d))


def _log_part(v):
    """log v where v > 0, else -inf (no NaN in its derivatives either)."""
    pos = v > 0.0
    return N.where(pos, N.log(N.where(pos, v, 1.0)), -np.inf)


def _logcumsumexp_vjp(g, x, out, axis, reverse):
    """x_i's cotangent, the sum of g_j exp(x_i - out_j) over the outputs x_i reaches: a
    logcumsumexp the other way over log g - out, per sign of g (nothing overflows). An
    output of -inf (only -inf reached it) passes nothing back."""
    def back(logs):
        v = N.where(out > -np.inf, logs - out, -np.inf)
        return N.exp(x + N.bind(Op.LOGCUMSUMEXP, v, axis=axis, reverse=not reverse))
    return (back(_log_part(g)) - back(_log_part(-g)),)


def _logcumsumexp_jvp(node, tangents, primals, out):
    """out_j's tangent, the sum of t_i exp(x_i - out_j) over the inputs reaching it."""
    def ahead(logs):
        return N.exp(N.where(out > -np.inf, N.bind(Op.LOGCUMSUMEXP, primals[0] + logs, **node.attrs) - out, -np.inf))
    return ahead(_log_part(tangents[0])) - ahead(_log_part(-tangents[0]))


declare_scan("logcumsumexp", _logaddexp, -np.inf, flags="pure kernel float_only",
             vjp=_logcumsumexp_vjp, jvp=_logcumsumexp_jvp,
             doc="log(cumsum(exp(x))) along `axis` (None: the flattened array), without overflow: "
                 "`jitad.logcumsumexp(np.log([1.0, 2.0]))` is `np.log([1.0, 3.0])`.")


def _conv2d_rule(op, types, attrs, bodies):
    x, w = types
    same_dtype(op, types)
    if len(x.shape) != 4 or len(w.shape) != 4 or x.shape[1] != w.shape[1] \
            or w.shape[2] > x.shape[2] or w.shape[3] > x.shape[3]:
        raise ShapeError(f"`conv2d`: input {x.shape} and weights {w.shape}: need (n, c, h, w) and "
                         "(o, c, kh, kw) with kh <= h and kw <= w")
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    return [Type(x.dtype, (n, o, h - kh + 1, wd - kw + 1))]


def _conv2d_impl(x, w):
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))
    return np.einsum("ncyxij,ocij->noyx", windows, w)


def _conv2d_vjp(g, x, w, out):
    """Both cotangents are valid convolutions too: the input's, of g padded by the kernel
    size less one with the kernel flipped and its channel axes swapped; the weights', of
    the input with g as the kernel, batch and channel axes swapped on both."""
    kh, kw = w.shape[2:]
    n, o, oh, ow = g.shape
    padded = N.unslice(g, (n, o, oh + 2 * (kh - 1), ow + 2 * (kw - 1)), (0, 0, kh - 1, kw - 1),
                       (n, o, oh + kh - 1, ow + kw - 1), (1, 1, 1, 1))
    taps = N.reshape(N.transpose(w, (2, 3, 1, 0)), (kh * kw, w.shape[1], o))
    flipped = N.getitem(taps, np.arange(kh * kw - 1, -1, -1))         # tap (i, j) <- (kh-1-i, kw-1-j)
    flipped = N.transpose(N.reshape(flipped, (kh, kw, w.shape[1], o)), (2, 3, 0, 1))   # (c, o, kh, kw)
    swap = (1, 0, 2, 3)
    gw = N.transpose(N.conv2d_valid(N.transpose(x, swap), N.transpose(g, swap)), swap)
    return N.conv2d_valid(padded, flipped), gw


def _batch_conv2d(node, ins, size, mask):
    """The lanes' images as one batch of images; batched weights run per lane (None)."""
    (x, bx), (w, bw) = ins
    if bw:
        return None
    out = N.bind(Op.CONV2D, N.reshape(x, (size * x.shape[1],) + x.shape[2:]), w)
    return [(N.reshape(out, (size, x.shape[1]) + out.shape[1:]), True)]


def _conv2d_llvm(lo, node, ins):   # vector-register tiles
    out = lo.result_buffer(node.outputs[0])
    lo.conv2d(out, node.outputs[0].type, ins, [v.type for v in node.inputs])
    return [out]


def _conv2d_cuda(rt, node, ins):
    out = rt.alloc(node.outputs[0].type)
    rt.conv2d(node, out, ins, [v.type for v in node.inputs], node.outputs[0].type)
    return [out]


declare("conv2d", _conv2d_rule, _conv2d_impl, arity=2, flags="kernel", vjp=_conv2d_vjp, jvp=_bilinear_jvp,
        batch=_batch_conv2d, llvm=_conv2d_llvm, cuda=_conv2d_cuda)


def _take_jvp(node, tangents, primals, out):
    """Linear in the first operand; the others (indices) are passed as they are."""
    return N.bind(node.op, tangents[0], *primals[1:], **node.attrs)


def _lane_offsets(idx, size, n):
    """Per lane, the first row of its block in the lanes' rows stacked (shaped to add to `idx`)."""
    return N.reshape(np.arange(size) * n, (size,) + (1,) * (len(idx.shape) - 1))


def _batch_take(node, ins, size, mask):
    """x[idx] per lane, for `index` (a scalar idx) and `gather` (an index array)."""
    (x, bx), (idx, bi) = ins
    n = node.inputs[0].type.shape[0]
    if bx and bi:   # rows of the flattened lanes, offset by lane
        flat = N.reshape(x, (size * n,) + x.shape[2:])
        return [(N.bind(Op.GATHER, flat, N.clip_index(idx, n) + _lane_offsets(idx, size, n)), True)]
    if bi:
        return [(N.bind(Op.GATHER, x, idx), True)]
    out = N.bind(node.op, N.transpose(x, (1, 0) + tuple(range(2, len(x.shape)))), idx)   # rows (n, size, ...)
    lead = len(idx.shape)
    return [(N.NUMPY_API["moveaxis"](out, lead, 0) if lead else out, True)]


def _index_llvm(lo, node, ins):
    x_t, out_t = node.inputs[0].type, node.outputs[0].type
    ptr = lo.row(ins[0], x_t, ins[1])   # a view: values are immutable
    return [ptr if out_t.shape else lo.b.load(ptr, typ=lo.ll(x_t.dtype))]


def _gather_llvm(lo, node, ins):
    x_t, idx_t, out_t = node.inputs[0].type, node.inputs[1].type, node.outputs[0].type
    out = lo.result_buffer(node.outputs[0])
    row_size = int(np.prod(x_t.shape[1:], dtype=np.int64))
    row_t, i64 = Type(out_t.dtype, (row_size,)), lo.ll("i64")

    def body(idx):
        j = lo.b.load(lo.elem_ptr(ins[1], idx_t, idx), typ=i64)
        dst = lo.b.gep(out, [lo.b.mul(lo.offset(idx_t.shape, idx), i64(row_size))], source_etype=lo.ll(x_t.dtype))
        lo.copy(dst, lo.row(ins[0], x_t, j), row_t)
    lo.loop_nest(idx_t.shape, body)
    return [out]


def _take_cuda(rt, node, ins):   # rows of x at an index (a scalar for `index`) or an index array
    x, idx = ins
    rows, rest = node.inputs[0].type.shape[0], _size(node.inputs[0].type.shape[1:])
    return rt.gather(node, x, lambda el: f"h_clip({el(0, f'i // {rest}')}, {rows}) * {rest} + i % {rest}",
                     _size(node.outputs[0].type.shape), (idx,))


declare("index", shape_rule(lambda types: types[0].shape[1:]), lambda x, i: x[clip_index(i, x.shape[0])].copy(),
        arity=2, flags="pure view", vjp=lambda g, x, i, out: (Sparse(i, g), None), jvp=_take_jvp, batch=_batch_take,
        llvm=_index_llvm, cuda=_take_cuda)
declare("gather", shape_rule(lambda types: types[1].shape + types[0].shape[1:]),
        lambda x, idx: x[clip_index(idx, x.shape[0])], arity=2, flags="pure kernel",
        vjp=lambda g, x, idx, out: (Sparse(idx, g), None), jvp=_take_jvp, batch=_batch_take, llvm=_gather_llvm,
        cuda=_take_cuda)


def _batch_slice(node, ins, size, mask):
    a = node.attrs
    return rebind(node, ins[0][0], starts=(0,) + tuple(a["starts"]), stops=(size,) + tuple(a["stops"]),
                  steps=(1,) + tuple(a["steps"]))


def _batch_unslice(node, ins, size, mask):
    a = node.attrs
    return rebind(node, ins[0][0], shape=(size,) + tuple(a["shape"]), starts=(0,) + tuple(a["starts"]),
                  stops=(size,) + tuple(a["stops"]), steps=(1,) + tuple(a["steps"]))


def _slice_llvm(lo, node, ins):
    x_t, out_t, a = node.inputs[0].type, node.outputs[0].type, node.attrs
    return _copy_llvm(lo, out_t, lo.result_buffer(node.outputs[0]), lambda idx: lo.b.load(
        lo.elem_ptr(ins[0], x_t, idx, steps=a["steps"], starts=a["starts"]), typ=lo.ll(x_t.dtype)))


def _unslice_llvm(lo, node, ins):
    g_t, out_t, a = node.inputs[0].type, node.outputs[0].type, node.attrs
    out = lo.result_buffer(node.outputs[0])
    lo.fill(out, out_t, lo.ll(out_t.dtype)(0))
    lo.loop_nest(g_t.shape, lambda idx: lo.b.store(
        lo.load_at(ins[0], g_t, idx, g_t.shape),
        lo.elem_ptr(out, out_t, idx, steps=a["steps"], starts=a["starts"])))
    return [out]


def _slice_cuda(rt, node, ins):
    out_shape, a = node.outputs[0].type.shape, node.attrs
    index = rt.slice_index("i", out_shape, node.inputs[0].type.shape, a["starts"], a["steps"])
    return rt.gather(node, ins[0], lambda el: index, _size(out_shape))


def _unslice_cuda(rt, node, ins):
    g_shape, a, out_t = node.inputs[0].type.shape, node.attrs, node.outputs[0].type
    result = rt.alloc(out_t)
    rt.fill(result, 0, out_t.dtype)
    rt.put(id(node), ins[0], rt.slice_index("i", g_shape, a["shape"], a["starts"], a["steps"]), _size(g_shape), result)
    return [result]


declare("slice", shape_rule(lambda types, starts, stops, steps: [
            len(range(a, b, c)) for a, b, c in zip(starts, stops, steps)]),
        lambda x, starts, stops, steps: x[_slices(x.shape, starts, stops, steps)].copy(),
        arity=1, flags="pure linear kernel",
        vjp=lambda g, x, out, starts, stops, steps: (Region(g, starts, stops, steps),), batch=_batch_slice,
        llvm=_slice_llvm, cuda=_slice_cuda)
declare("unslice", shape_rule(lambda types, shape, starts, stops, steps: shape), _unslice_impl,
        arity=1, flags="pure linear kernel",
        vjp=linear(lambda g, x, out, shape, starts, stops, steps: N.slice_static(g, starts, stops, steps)),
        batch=_batch_unslice, llvm=_unslice_llvm, cuda=_unslice_cuda)


def _concat_rule(op, types, attrs, bodies):
    axis = attrs["axis"]
    same_dtype(op, types)
    first = types[0].shape
    for t in types[1:]:
        if len(t.shape) != len(first) or any(a != b for d, (a, b) in enumerate(zip(first, t.shape)) if d != axis):
            raise ShapeError(f"`concatenate`: shapes {first} and {t.shape} differ off axis {axis}")
    shape = list(first)
    shape[axis] = sum(t.shape[axis] for t in types)
    return [Type(types[0].dtype, tuple(shape))]


def _concat_vjp(g, *args, axis):
    cuts, start = [], 0
    for x in args[:-1]:
        n = x.shape[axis]
        cuts.append(N.take_slice(g, axis, start, start + n))
        start += n
    return tuple(cuts)


def _concat_jvp(node, tangents, primals, out):
    return N.bind(node.op, *[t if t is not None else N.zeros_like(p) for p, t in zip(primals, tangents)],
                  **node.attrs)


def _concat_llvm(lo, node, ins):
    out_t, axis = node.outputs[0].type, node.attrs["axis"]
    out = lo.result_buffer(node.outputs[0])
    start = 0
    for x, v in zip(ins, node.inputs):
        t = v.type
        starts = [start if d == axis else 0 for d in range(len(t.shape))]
        lo.loop_nest(t.shape, lambda idx, t=t, x=x, starts=starts: lo.b.store(
            lo.b.load(lo.elem_ptr(x, t, idx), typ=lo.ll(t.dtype)),
            lo.elem_ptr(out, out_t, idx, steps=[1] * len(starts), starts=starts)))
        start += t.shape[axis]
    return [out]


def _concat_cuda(rt, node, ins):
    out_t, axis = node.outputs[0].type, node.attrs["axis"]
    result = rt.alloc(out_t)
    offset, out_strides = 0, rt.strides(out_t.shape)
    for j, (x, t) in enumerate(zip(ins, node.inputs)):
        shape = t.type.shape
        index = " + ".join(f"({rt.coordinate('i', shape, d)}{f' + {offset}' if d == axis else ''}) * {out_strides[d]}"
                           for d in range(len(shape))) or "0"
        rt.put((id(node), j), x, index, _size(shape), result)
        offset += shape[axis]
    return [result]


declare("concat", _concat_rule, lambda *xs, axis: np.concatenate(xs, axis=axis), flags="pure kernel",
        vjp=_concat_vjp, jvp=_concat_jvp, batch=lambda node, ins, size, mask: rebind(
            node, *[batched(x, b, size) for x, b in ins], axis=node.attrs["axis"] + 1), llvm=_concat_llvm,
        cuda=_concat_cuda)


def _scatter_rule(op, types, attrs, bodies):
    x, idx, v = types
    if idx.dtype != "i64" or not x.shape or v.dtype != x.dtype or v.shape != idx.shape + x.shape[1:]:
        raise ShapeError(f"`scatter`: rows {idx} of {x} with values {v}: need int indices and values "
                         "shaped indices.shape + x.shape[1:] of x's dtype")
    return [x]


def _scatter_impl(x, idx, v, add):
    out = x.copy()
    rows = np.reshape(clip_index(idx, x.shape[0]), -1)
    for r, row in zip(rows, np.reshape(v, (len(rows),) + x.shape[1:])):   # in order: the last set wins
        out[r] = out[r] + row if add else row
    return out


def _rows_of(g, idx):
    return N.bind(Op.GATHER if idx.shape else Op.INDEX, g, idx)


def _scatter_vjp(g, x, idx, v, out, add):
    if add:
        return g, None, _rows_of(g, idx)
    gv = _rows_of(g, idx)
    if idx.shape:   # only the last write to a row receives its cotangent
        order = np.arange(int(np.prod(idx.shape)), dtype=np.int64).reshape(idx.shape)
        winner = N.bind(Op.SCATTER, N.full((x.shape[0],), -1, "i64"), idx, order, add=False)
        hit = N.reshape(_rows_of(winner, idx) == order, idx.shape + (1,) * (len(x.shape) - 1))
        gv = N.where(N.broadcast_to(hit, v.shape), gv, N.zeros(v.shape, v.ir_dtype))
    return N.bind(Op.SCATTER, g, idx, N.zeros(v.shape, v.ir_dtype), add=False), None, gv


def _scatter_jvp(node, tangents, primals, out):
    (x, idx, v), (tx, _, tv) = primals, tangents
    tx = tx if tx is not None else N.zeros(x.shape, x.ir_dtype)
    tv = tv if tv is not None else N.zeros(v.shape, v.ir_dtype)
    return N.bind(node.op, tx, idx, tv, **node.attrs)


def _scatter_llvm(lo, node, ins):
    """A copy of x (none when x is a loop state only this reads: `llvm.lower_loop_body`), then
    its rows at the indices set or added, in order."""
    x_t, idx_t, v_t = (v.type for v in node.inputs)
    out = ins[0] if node in lo.in_place else lo.result_buffer(node.outputs[0])
    if out is not ins[0]:
        lo.copy(out, ins[0], x_t)
    row_t, ty, b = Type(x_t.dtype, x_t.shape[1:]), lo.ll(x_t.dtype), lo.b
    add = b.fadd if x_t.dtype in FLOATS else b.add

    def update(idx):
        i = b.load(lo.elem_ptr(ins[1], idx_t, idx), typ=lo.ll("i64")) if idx_t.shape else ins[1]
        dst = lo.row(out, x_t, i)

        def element(r):
            v = lo.load_at(ins[2], v_t, idx + r, v_t.shape) if v_t.shape else ins[2]
            ptr = lo.elem_ptr(dst, row_t, r)
            b.store(add(b.load(ptr, typ=ty), v) if node.attrs["add"] else v, ptr)
        lo.loop_nest(row_t.shape, element)
    lo.loop_nest(idx_t.shape, update)
    return [out]


def _scatter_cuda(rt, node, ins):   # a copy of x, then one thread per element of a row
    out = rt.alloc(node.inputs[0].type)
    rt.copy(out, ins[0])
    rt.scatter_rows(node, out, ins[1], ins[2], node.attrs["add"])
    return [out]


def _batch_scatter(node, ins, size, mask):
    """Every lane's rows in one scatter into the flattened lanes, indices offset by lane."""
    x, idx, v = (batched(x, b, size) for x, b in ins)
    n = node.inputs[0].type.shape[0]
    flat = N.reshape(x, (size * n,) + x.shape[2:])
    out = N.bind(Op.SCATTER, flat, N.clip_index(idx, n) + _lane_offsets(idx, size, n), v, **node.attrs)
    return [(N.reshape(out, x.shape), True)]


# x with rows idx (clamped as `index` reads them) set to, or with `add` added, v's rows, in
# order; a loop state nothing else reads is updated in place (jitad/lower/llvm.py `_loop`)
declare("scatter", _scatter_rule, _scatter_impl, arity=3, flags="pure", vjp=_scatter_vjp, jvp=_scatter_jvp,
        batch=_batch_scatter, llvm=_scatter_llvm, cuda=_scatter_cuda)
