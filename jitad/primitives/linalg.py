"""The `linalg` primitive: one primitive for the LAPACK routines, its attribute `fn`
naming the routine. Its type rule, NumPy meaning and derivative rules, and the batched
matrix helpers those are written in (staged math: see `rules.N`). The public functions
are in jitad/linalg.py; its LLVM rule calls the lowerer's LAPACK service (jitad/lower/lapack.py)."""
import numpy as np

from ..errors import DeviceError, LinAlgError
from ..ir.graph import walk
from ..ir.ops import Op, declare
from ..ir.types import FLOATS, Type
# N: jitad.numeric, the staged math the derivative rules are written in (see rules.N)
from .rules import N


def scipy_linalg():
    import scipy.linalg
    return scipy.linalg


def _same_dtype(*xs):
    dts = {x.ir_dtype if N.is_staged(x) else {np.float32: "f32", np.float64: "f64"}[x.dtype.type] for x in xs}
    dtype = "f64" if "f64" in dts else "f32"
    return [N.Staged(N.as_var(x, dtype)) if N.is_staged(x) else
            np.asarray(x, np.float64 if dtype == "f64" else np.float32) for x in xs], dtype


def _prim(fn, *xs, **attrs):
    """Record the `linalg` primitive for routine `fn` (operands made float and of one dtype)."""
    xs, dtype = _same_dtype(*xs)
    return N.Staged(N.emit(Op.LINALG, [N.as_var(x, dtype) for x in xs], dict(fn=fn, **attrs))[0])


def _fail(who, what, check):
    if check:
        raise LinAlgError(f"`linalg.{who}`: {what}")


def _eager_each(fn, who, what, check, *arrays, out_shape, dtype):
    """Apply NumPy `fn` per matrix of a batch; a failing matrix gives NaN (or raises)."""
    try:
        return np.asarray(fn(*arrays), dtype)
    except np.linalg.LinAlgError:
        _fail(who, what, check)
    out = np.empty(out_shape, dtype)
    for idx in np.ndindex(*arrays[0].shape[:-2]):
        try:
            out[idx] = fn(*(x[idx] for x in arrays))
        except np.linalg.LinAlgError:
            out[idx] = np.nan
    return out


def _eager_trisolve(a, b, lower, trans, check):
    tri = np.tril(a) if lower else np.triu(a)
    if np.any(np.diagonal(a, axis1=-2, axis2=-1) == 0):
        _fail("solve_triangular", "singular matrix (a zero on the diagonal)", check)
    with np.errstate(all="ignore"):
        out = np.empty(b.shape, b.dtype)
        for idx in np.ndindex(*b.shape[:-2]):
            t = tri[idx].T if trans else tri[idx]
            singular = np.any(np.diagonal(t) == 0)
            out[idx] = np.nan if singular else np.linalg.solve(t, b[idx])
    return out


def _unpack_eigh(packed, n):
    nd = len(packed.shape)
    w = N.reshape(N.take_slice(packed, nd - 2, 0, 1), tuple(packed.shape[:-2]) + (n,))
    return w, N.take_slice(packed, nd - 2, 1, n + 1)


def _unpack(flat, shapes):
    """Split the last axis of a packed result into arrays of the given core shapes."""
    batch, nd, out, start = tuple(flat.shape[:-1]), len(flat.shape) - 1, [], 0
    for shape in shapes:
        size = int(np.prod(shape))
        out.append(N.reshape(N.take_slice(flat, nd, start, start + size), batch + tuple(shape)))
        start += size
    return out


# -- batched helpers for the derivative rules --------------------------------------

def _swap(x):
    """x with its last two axes swapped."""
    nd = len(x.shape)
    return N.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def _mm(a, b):
    """a @ b over matrices with the same batch dimensions."""
    if len(a.shape) == 2:
        return N.matmul_t(a, b)
    batch, (m, k), n = tuple(a.shape[:-2]), a.shape[-2:], b.shape[-1]
    count = int(np.prod(batch))
    if count <= 16:   # a product per matrix (BLAS), unrolled
        fa, fb = N.reshape(a, (count, m, k)), N.reshape(b, (count, k, n))
        rows = [N.matmul_t(N.reshape(N.take_slice(fa, 0, i, i + 1), (m, k)),
                           N.reshape(N.take_slice(fb, 0, i, i + 1), (k, n))) for i in range(count)]
        return N.reshape(N.stack(rows), batch + (m, n))
    nd = len(batch)
    return N.sum(N.reshape(a, batch + (m, k, 1)) * N.reshape(b, batch + (1, k, n)), axis=nd + 1)


def _eye(n, dtype):
    return np.eye(n, dtype=np.float64 if dtype in ("f64", np.float64) else np.float32)


def _diag(x):
    """The diagonal (..., n) of matrices (..., n, n)."""
    n = x.shape[-1]
    return N.sum(x * _eye(n, x.dtype), axis=len(x.shape) - 1)


def _diagm(v):
    """Diagonal matrices (..., n, n) from vectors (..., n)."""
    n = v.shape[-1]
    return N.reshape(v, tuple(v.shape) + (1,)) * _eye(n, v.dtype)


def _row(v):
    """Vectors (..., n) as rows (..., 1, n), which broadcast over a matrix's rows."""
    return N.reshape(v, tuple(v.shape[:-1]) + (1, v.shape[-1]))


def _sym(x):
    return 0.5 * (x + _swap(x))


def _tri_mask(n, dtype, lower, k=0):
    ones = np.ones((n, n), np.float64 if dtype in ("f64", np.float64) else np.float32)
    return np.tril(ones, k) if lower else np.triu(ones, -k)


def _lu_solve(a, lu, b, trans):
    """x with op(a) x = b, from `lu`, a's LU factors (the `lu` routine's packed result)."""
    return _prim("lu_solve", a, lu, b, trans=trans)


def _trisolve(a, b, lower, trans):
    return _prim("trisolve", a, b, lower=lower, trans=trans)


# -- the primitive: types, NumPy meaning, derivatives ---------------------------------

def type_rule(types, attrs):
    fn, a = attrs["fn"], types[0]
    assert all(t.dtype == a.dtype and t.dtype in FLOATS for t in types), types
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    if fn == "lu":   # getrf's factors (of a^T, read row-major), then the pivots as floats
        return [Type(a.dtype, batch + (n + 1, n))]
    if fn == "lu_solve":
        assert m == n and types[1].shape == batch + (n + 1, n) and types[2].shape[:-2] == batch \
            and types[2].shape[-2] == n, types
        return [types[2]]
    if fn == "trisolve":
        assert m == n and types[1].shape[:-2] == batch and types[1].shape[-2] == n, types
        return [types[1]]
    if fn == "cholesky":
        return [a]
    if fn == "lu_slogdet":
        return [Type(a.dtype, batch + (2,))]
    if fn == "eigh":
        return [Type(a.dtype, batch + (n + 1, n))]
    k = min(m, n)
    if fn == "qr":
        return [Type(a.dtype, batch + (m * k + k * n,))]
    assert fn == "svd", fn
    full = attrs["full"]
    return [Type(a.dtype, batch + ((m * m if full else m * k) + k + (n * n if full else k * n),))]


def impl(*xs, fn, **attrs):
    """The NumPy meaning of the primitive (the reference interpreter's)."""
    a = xs[0]
    with np.errstate(all="ignore"):
        if fn == "lu":
            out = np.empty(a.shape[:-2] + (a.shape[-1] + 1, a.shape[-1]), a.dtype)
            for idx in np.ndindex(*a.shape[:-2]):
                lu, piv = scipy_linalg().lu_factor(a[idx].T, check_finite=False)
                out[idx] = np.concatenate([lu.T, piv[None] + 1])
            return out
        if fn == "lu_solve":
            a = np.swapaxes(a, -1, -2) if attrs["trans"] else a
            return _eager_each(np.linalg.solve, fn, "", False, a, xs[2], out_shape=xs[2].shape, dtype=a.dtype)
        if fn == "trisolve":
            return _eager_trisolve(a, xs[1], attrs["lower"], attrs["trans"], False)
        if fn == "cholesky":
            return _eager_each(np.linalg.cholesky, fn, "", False, a, out_shape=a.shape, dtype=a.dtype)
        if fn == "lu_slogdet":
            return np.stack(np.linalg.slogdet(a), axis=-1).astype(a.dtype)
        if fn == "eigh":
            w, v = np.linalg.eigh(a, UPLO="U" if attrs.get("upper") else "L")
            return np.concatenate([w[..., None, :], v], axis=-2)
        batch = a.shape[:-2]
        flat = lambda *ps: np.concatenate([p.reshape(batch + (-1,)) for p in ps], axis=-1).astype(a.dtype)
        if fn == "qr":
            return flat(*np.linalg.qr(a))
        return flat(*np.linalg.svd(a, full_matrices=attrs["full"]))


def vjp(g, *args, fn, **attrs):
    """Cotangents of the primitive's operands given the cotangent `g` of its result."""
    *ins, out = args
    a = ins[0]
    if fn == "lu":   # only read by lu_solve / lu_slogdet, whose rules differentiate through `a`
        return (None,)
    if fn == "lu_solve":   # x = op(a)^-1 b: gb = op(a)^-T g, ga = -gb x^T (transposed for op)
        lu, trans = ins[1], attrs["trans"]
        gb = _lu_solve(a, lu, g, not trans)
        return -(_mm(out, _swap(gb)) if trans else _mm(gb, _swap(out))), None, gb
    if fn == "trisolve":
        lower, trans = attrs["lower"], attrs["trans"]
        gb = _trisolve(a, g, lower, not trans)
        ga = -(_mm(out, _swap(gb)) if trans else _mm(gb, _swap(out)))
        return ga * _tri_mask(a.shape[-1], a.dtype, lower), gb
    if fn == "lu_slogdet":   # d log|det a| = tr(a^-1 da): ga = g a^-T
        n = a.shape[-1]
        nd = len(g.shape) - 1
        g_log = N.reshape(N.take_slice(g, nd, 1, 2), tuple(g.shape[:-1]) + (1, 1))
        return g_log * _lu_solve(a, ins[1], np.broadcast_to(_eye(n, a.dtype), a.shape), True), None
    if fn == "cholesky":
        return (_cholesky_vjp(g, out),)
    if fn == "eigh":
        return (_eigh_vjp(g, out),)
    if fn == "qr":
        return (_qr_vjp(g, a, out),)
    return (_svd_vjp(g, a, out, attrs["full"]),)


def _phi(x):
    """The lower triangle of x with its diagonal halved (Murray 2016's Φ)."""
    n = x.shape[-1]
    return x * (_tri_mask(n, x.dtype, True) - 0.5 * _eye(n, x.dtype))


def _cholesky_vjp(g, L):
    """ga = sym(L^-T Φ(L^T g) L^-1), by two triangular solves."""
    p = _phi(_mm(_swap(L), g))
    q = _trisolve(L, p, True, True)                       # L^-T P
    return _sym(_swap(_trisolve(L, _swap(q), True, True)))  # (L^-T (L^-T P)^T)^T = L^-T P L^-1


def _eigh_parts(packed):
    return _unpack_eigh(packed, packed.shape[-1])


def _eig_gaps(w):
    """F[i, j] = 1 / (w[j] - w[i]), 0 where w[j] == w[i] (the diagonal, and repeated values:
    as with JAX's symbolic zeros, a function of the values alone, symmetric in the repeated
    ones, gets its finite gradient, not inf * 0)."""
    gap = _row(w) - N.reshape(w, tuple(w.shape) + (1,))
    same = gap == 0.0
    return N.where(same, 0.0, 1.0 / N.where(same, 1.0, gap))


def _eigh_vjp(g, packed):
    w, v = _eigh_parts(packed)
    gw, gv = _eigh_parts(g)
    inner = _diagm(gw) + _eig_gaps(w) * _mm(_swap(v), gv)
    return _sym(_mm(_mm(v, inner), _swap(v)))


def _qr_vjp(g, a, out):
    m, n = a.shape[-2:]
    if m < n:
        raise NotImplementedError("`linalg.qr`: derivatives need m >= n (as JAX)")
    q, r = _unpack(out, [(m, n), (n, n)])
    gq, gr = _unpack(g, [(m, n), (n, n)])
    mm = _mm(_swap(q), gq) - _mm(gr, _swap(r))
    skew = mm - _swap(mm)
    gc = skew * _tri_mask(n, a.dtype, True, -1) - mm
    y = gq + _mm(q, gc)                                    # ga = y r^-T
    return _swap(_trisolve(r, _swap(y), False, False))


def _svd_vjp(g, a, out, full):
    m, n = a.shape[-2:]
    k = min(m, n)
    if full:
        raise NotImplementedError("`linalg.svd`: derivatives of full_matrices=True need a square input; "
                                  "use full_matrices=False")
    u, s, vh = _unpack(out, [(m, k), (k,), (k, n)])
    gu, gs, gvh = _unpack(g, [(m, k), (k,), (k, n)])
    v, gv = _swap(vh), _swap(gvh)
    s2 = s * s
    f = _eig_gaps(s2)                                      # 1 / (s_j^2 - s_i^2)
    srow = _row(s)
    x = f * _mm(_swap(u), gu)
    y = f * _mm(vh, gv)
    gd = _diagm(gs) + (x + _swap(x)) * srow + _swap((y + _swap(y)) * srow)
    ga = _mm(_mm(u, gd), vh)
    if m > k:   # (I - u u^T) gu s^-1 v^T
        ga = ga + _mm((gu - _mm(u, _mm(_swap(u), gu))) / srow, vh)
    if n > k:   # u s^-1 gv^T (I - v v^T)
        ga = ga + _mm(u, _swap((gv - _mm(v, _mm(vh, gv))) / srow))
    return ga


def jvp(node, primals, tangents, out):
    """The tangent of the primitive's result (forward mode), given its operands' tangents:
    one rule per function, each its textbook formula."""
    fn = node.attrs["fn"]
    return None if fn == "lu" else _JVPS[fn](primals, tangents, out, node.attrs)


def _lu_solve_jvp(primals, tangents, out, attrs):   # dx = op(a)^-1 (db - op(da) x)
    a, ta, lu, trans, rhs = primals[0], tangents[0], primals[1], attrs["trans"], tangents[2]
    if ta is not None:
        term = _mm(_swap(ta) if trans else ta, out)
        rhs = -term if rhs is None else rhs - term
    return _lu_solve(a, lu, rhs, trans)


def _trisolve_jvp(primals, tangents, out, attrs):
    a, ta, lower, trans, rhs = primals[0], tangents[0], attrs["lower"], attrs["trans"], tangents[1]
    if ta is not None:
        tri = ta * _tri_mask(a.shape[-1], a.dtype, lower)
        term = _mm(_swap(tri) if trans else tri, out)
        rhs = -term if rhs is None else rhs - term
    return _trisolve(a, rhs, lower, trans)


def _slogdet_jvp(primals, tangents, out, attrs):   # d log|det| = tr(a^-1 da); the sign is locally constant
    a, ta = primals[0], tangents[0]
    nd = len(a.shape)
    dlog = N.sum(N.sum(_lu_solve(a, primals[1], ta, False) * _eye(a.shape[-1], a.dtype), axis=nd - 1), axis=nd - 2)
    dlog = N.reshape(dlog, tuple(dlog.shape) + (1,))
    return N.concatenate([dlog * 0.0, dlog], axis=nd - 2)


def _cholesky_jvp(primals, tangents, out, attrs):   # dL = L Φ(L^-1 sym(da) L^-T)
    tmp = _trisolve(out, _sym(tangents[0]), True, False)
    return _mm(out, _phi(_swap(_trisolve(out, _swap(tmp), True, False))))


def _eigh_jvp(primals, tangents, out, attrs):
    w, v = _eigh_parts(out)
    inner = _mm(_mm(_swap(v), _sym(tangents[0])), v)
    dw, dv = _diag(inner), _mm(v, _eig_gaps(w) * inner)
    return N.concatenate([_row(dw), dv], axis=len(primals[0].shape) - 2)


def _flat_parts(a, *parts):
    """The parts of a packed result, each flattened over the batch and concatenated."""
    batch = tuple(a.shape[:-2])
    return N.concatenate([N.reshape(p, batch + (-1,)) for p in parts], axis=len(batch))


def _qr_jvp(primals, tangents, out, attrs):
    a, ta = primals[0], tangents[0]
    m, n = a.shape[-2:]
    if m < n:
        raise NotImplementedError("`linalg.qr`: derivatives need m >= n (as JAX)")
    q, r = _unpack(out, [(m, n), (n, n)])
    z = _swap(_trisolve(r, _swap(ta), False, True))         # da r^-1
    c = _mm(_swap(q), z)
    low = c * _tri_mask(n, a.dtype, True, -1)
    do = low - _swap(low)
    return _flat_parts(a, _mm(q, do - c) + z, _mm(c - do, r))


def _svd_jvp(primals, tangents, out, attrs):
    a, ta = primals[0], tangents[0]
    m, n = a.shape[-2:]
    if attrs["full"]:
        raise NotImplementedError("`linalg.svd`: derivatives of full_matrices=True need a square input; "
                                  "use full_matrices=False")
    k = min(m, n)
    u, s, vh = _unpack(out, [(m, k), (k,), (k, n)])
    v = _swap(vh)
    ds_mat = _mm(_mm(_swap(u), ta), v)
    f = _eig_gaps(s * s)
    srow = _row(s)
    scol = _swap(srow)
    du = _mm(u, f * (ds_mat * srow + _swap(ds_mat * srow)))
    dv = _mm(v, f * (scol * ds_mat + _swap(scol * ds_mat)))
    if m > k:
        dav = _mm(ta, v)
        du = du + (dav - _mm(u, _mm(_swap(u), dav))) / srow
    if n > k:
        dau = _mm(_swap(ta), u)
        dv = dv + (dau - _mm(v, _mm(vh, dau))) / srow
    return _flat_parts(a, du, _diag(ds_mat), _swap(dv))


_JVPS = {"lu_solve": _lu_solve_jvp, "trisolve": _trisolve_jvp, "lu_slogdet": _slogdet_jvp,
         "cholesky": _cholesky_jvp, "eigh": _eigh_jvp, "qr": _qr_jvp, "svd": _svd_jvp}


def check_cpu(program):
    """A `DeviceError` when a program for the GPU backend holds linalg work."""
    graphs = [program.main] + [f.body for f in program.funs]
    for g in graphs:
        for node in walk(g):
            if node.op == Op.LINALG:
                name = {"trisolve": "solve_triangular", "lu": "solve", "lu_solve": "solve",
                        "lu_slogdet": "slogdet"}.get(node.attrs["fn"], node.attrs["fn"])
                raise DeviceError(f"`jitad.linalg.{name}` runs on the CPU backend only (LAPACK); "
                                  "device='cuda' has no linear-algebra solver yet: compile with "
                                  "device='cpu', or move the solve out of the GPU function")


def _linalg_llvm(lo, node, ins):   # calls of LAPACK, per matrix of the batch
    return lo.lapack(node, ins)


# (no CUDA rule: `check_cpu` refuses a GPU program holding one, before it runs)
declare("linalg", lambda op, types, attrs, bodies: type_rule(types, attrs), impl, flags="pure", vjp=vjp,
        jvp=lambda node, tangents, primals, out: jvp(node, primals, tangents, out), llvm=_linalg_llvm)
