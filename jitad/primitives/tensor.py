"""The tensor primitives: broadcast, reductions, shape ops, matmul, conv2d, indexing,
slicing and concatenation. Their LLVM and CUDA lowerings are loop nests and kernels
registered in jitad/lower (`rule(Op.SUM)`); the declarations here hold the rest."""
import numpy as np

from ..errors import ShapeError
from ..ir.ops import Op, clip_index, declare, same_dtype, shape_rule
from ..ir.types import Type
# N: jitad.numeric, the staged math the derivative rules are written in (see rules.N)
from .rules import N, Region, Sparse, linear, reduced_shape, unbroadcast


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


_reduced = shape_rule(lambda types, axes, keepdims: reduced_shape(types[0].shape, axes, keepdims))
declare("broadcast", shape_rule(lambda types, shape: shape), lambda x, shape: np.broadcast_to(x, shape).copy(),
        arity=1, flags="pure cheap linear kernel", vjp=linear(lambda g, x, out, shape: unbroadcast(g, x.shape)),
        cuda="{0}")
declare("sum", _reduced, lambda x, axes, keepdims: np.sum(x, axis=axes, keepdims=keepdims),
        arity=1, flags="pure linear kernel", vjp=linear(lambda g, x, out, axes, keepdims: N.broadcast_to(
            N.reshape(g, reduced_shape(x.shape, axes, True)), x.shape)))
declare("max", _reduced, lambda x, axes, keepdims: np.max(x, axis=axes, keepdims=keepdims),
        arity=1, flags="pure kernel", vjp=_max_vjp, jvp=_max_jvp)
declare("reshape", shape_rule(lambda types, shape: shape), lambda x, shape: np.reshape(x, shape),
        arity=1, flags="pure cheap view linear", vjp=linear(lambda g, x, out, shape: N.reshape(g, x.shape)),
        cuda="{0}")
declare("transpose", shape_rule(lambda types, perm: [types[0].shape[p] for p in perm]),
        lambda x, perm: np.ascontiguousarray(np.transpose(x, perm)), arity=1, flags="pure linear kernel",
        vjp=linear(lambda g, x, out, perm: N.transpose(g, tuple(np.argsort(perm)))))


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


declare("matmul", _matmul_rule, lambda a, b, ta, tb: np.matmul(a.T if ta else a, b.T if tb else b),
        arity=2, flags="pure stored", vjp=_matmul_vjp, jvp=_bilinear_jvp)


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


# a GEMM per batch entry: op(a[i]) @ op(b[i]), op a transpose of the last two axes where flagged
declare("bmm", _bmm_rule, _bmm_impl, arity=2, flags="pure stored kernel", vjp=_bmm_vjp, jvp=_bilinear_jvp)
# running sums along `axis` (from the end with `reverse`): one sequential pass, NumPy's rounding
declare("cumsum", shape_rule(lambda types, axis, reverse: types[0].shape),
        lambda x, axis, reverse: np.flip(np.cumsum(np.flip(x, axis), axis), axis) if reverse else np.cumsum(x, axis),
        arity=1, flags="pure linear kernel",
        vjp=linear(lambda g, x, out, axis, reverse: N.bind(Op.CUMSUM, g, axis=axis, reverse=not reverse)))


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


declare("conv2d", _conv2d_rule, _conv2d_impl, arity=2, flags="kernel", vjp=_conv2d_vjp, jvp=_bilinear_jvp)


def _take_jvp(node, tangents, primals, out):
    """Linear in the first operand; the others (indices) are passed as they are."""
    return N.bind(node.op, tangents[0], *primals[1:], **node.attrs)


declare("index", shape_rule(lambda types: types[0].shape[1:]), lambda x, i: x[clip_index(i, x.shape[0])].copy(),
        arity=2, flags="pure view", vjp=lambda g, x, i, out: (Sparse(i, g), None), jvp=_take_jvp)
declare("gather", shape_rule(lambda types: types[1].shape + types[0].shape[1:]),
        lambda x, idx: x[clip_index(idx, x.shape[0])], arity=2, flags="pure kernel",
        vjp=lambda g, x, idx, out: (Sparse(idx, g), None), jvp=_take_jvp)
declare("slice", shape_rule(lambda types, starts, stops, steps: [
            len(range(a, b, c)) for a, b, c in zip(starts, stops, steps)]),
        lambda x, starts, stops, steps: x[_slices(x.shape, starts, stops, steps)].copy(),
        arity=1, flags="pure linear kernel",
        vjp=lambda g, x, out, starts, stops, steps: (Region(g, starts, stops, steps),))
declare("unslice", shape_rule(lambda types, shape, starts, stops, steps: shape), _unslice_impl,
        arity=1, flags="pure linear kernel",
        vjp=linear(lambda g, x, out, shape, starts, stops, steps: N.slice_static(g, starts, stops, steps)))


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


declare("concat", _concat_rule, lambda *xs, axis: np.concatenate(xs, axis=axis), flags="pure kernel",
        vjp=_concat_vjp, jvp=_concat_jvp)


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


# x with rows idx (clamped as `index` reads them) set to, or with `add` added, v's rows, in
# order; a loop state nothing else reads is updated in place (jitad/lower/llvm.py `_loop`)
declare("scatter", _scatter_rule, _scatter_impl, arity=3, flags="pure", vjp=_scatter_vjp, jvp=_scatter_jvp)
