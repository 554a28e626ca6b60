"""The lowerer's LAPACK service `lapack` (the LLVM rule of the `linalg` primitive,
jitad/primitives/linalg.py, calls it): calls of SciPy's bundled LAPACK.

SciPy exports its LAPACK and BLAS as C function pointers in the `__pyx_capi__` capsules of
`scipy.linalg.cython_lapack` / `cython_blas` (what numba calls too). They take every
argument by pointer, 32-bit ints, and column-major matrices. `register()` gives each the
symbol `jitad_lapack_<name>` for the JIT in this process; programs refer to those names
only, so the disk cache holds no addresses. A row-major matrix read column-major is its
transpose: factorizations run on A^T (same determinant, `getrs` with trans='T' then
solves A x = b), triangles swap (row-major lower = column-major upper), and right-hand
sides and factors are transposed into/out of arena scratch where the layout matters.
A routine that fails (info != 0: a singular matrix, not positive definite) leaves a
NaN-filled result for that matrix of the batch.
"""
import ctypes
import math

import llvmlite.binding as llvm
import llvmlite.ir as ir

from ..ir.types import Type
from . import runtime
from .llvm import ELEMENT_BYTES, I8, I32, I64, LL, PTR, alloca, service

ARGS = {"getrf": 6, "getrs": 9, "potrf": 5, "trsm": 11, "syevd": 11, "geqrf": 8, "orgqr": 9, "gesdd": 14}
BLAS = {"trsm"}
_ready = False


def _address(capsule):
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get_pointer(capsule, get_name(capsule))


def register():
    """Point the `jitad_lapack_*` symbols at SciPy's routines (once per process)."""
    global _ready
    with runtime._lock:
        if _ready:
            return
        from scipy.linalg import cython_blas, cython_lapack
        for name in ARGS:
            for p in "ds":
                capi = (cython_blas if name in BLAS else cython_lapack).__pyx_capi__
                llvm.add_symbol(f"jitad_lapack_{p}{name}", _address(capi[p + name]))
        _ready = True


class Call:
    """Argument passing for one routine family: every argument by reference."""

    def __init__(self, lo, dtype):
        self.lo, self.dtype, self.t = lo, dtype, LL[dtype]

    def ref(self, value):
        b = self.lo.b
        if isinstance(value, str):
            slot = alloca(b, I8)
            b.store(I8(ord(value)), slot)
        elif isinstance(value, float):
            slot = alloca(b, self.t)
            b.store(self.t(value), slot)
        elif isinstance(value, int):
            slot = alloca(b, I32)
            b.store(I32(value), slot)
        else:
            return value   # a pointer already
        return slot

    def __call__(self, name, *args):
        assert len(args) == ARGS[name], name
        fn = self.lo.extern(f"jitad_lapack_{'d' if self.dtype == 'f64' else 's'}{name}",
                            ir.FunctionType(ir.VoidType(), [PTR] * len(args)))
        self.lo.b.call(fn, [self.ref(a) for a in args])

    def scratch(self, count, dtype=None):
        return self.lo.alloc_bytes(I64(max(1, count) * ELEMENT_BYTES[dtype or self.dtype]))

    def at(self, ptr, offset, dtype=None):
        return self.lo.b.gep(ptr, [offset if isinstance(offset, ir.Value) else I64(offset)],
                             source_etype=LL[dtype or self.dtype] if dtype != "i32" else I32)

    def transpose(self, src, dst, rows, cols):
        """dst (cols, rows) = src (rows, cols)^T, both row-major."""
        lo, t = self.lo, self.t
        s_t, d_t = Type(self.dtype, (rows, cols)), Type(self.dtype, (cols, rows))
        lo.loop_nest((rows, cols), lambda idx: lo.b.store(
            lo.b.load(lo.elem_ptr(src, s_t, idx), typ=t), lo.elem_ptr(dst, d_t, idx[::-1])))

    def nan_if(self, failed, buf, count):
        """Fill `count` elements at `buf` with NaN when `failed` (an i1)."""
        lo = self.lo
        with lo.b.if_then(failed, likely=False):
            lo.fill(buf, Type(self.dtype, (count,)), self.t(math.nan))

    def info_failed(self, info):
        return self.lo.b.icmp_signed("!=", self.lo.b.load(info, typ=I32), I32(0))


@service("lapack")
def _linalg(lo, node, ins):
    """`node`'s linear-algebra function (attribute `fn`) per matrix of the batch."""
    register()
    fn = node.attrs["fn"]
    a_t, out_t = node.inputs[0].type, node.outputs[0].type
    c = Call(lo, a_t.dtype)
    out = lo.result_buffer(node.outputs[0])
    batch = math.prod(a_t.shape[:-2])
    sizes = [math.prod(v.type.shape[len(a_t.shape) - 2:]) for v in node.inputs]
    out_size = math.prod(out_t.shape[len(a_t.shape) - 2:]) if fn in ("lu", "lu_solve", "trisolve", "cholesky", "eigh") \
        else out_t.shape[-1]
    mark = lo.mark()
    step = LOWERINGS[fn](c, node, *a_t.shape[-2:])

    def one(i):
        mats = [c.at(x, lo.b.mul(i, I64(size))) for x, size in zip(ins, sizes)]
        step(*mats, c.at(out, lo.b.mul(i, I64(out_size))))
    lo.counted_loop(I64(batch), one)
    lo.release(mark)
    return [out]


def _lu(c, node, n, _):
    """getrf of a^T (a read column-major): its factors, then the pivots as floats."""
    lo = c.lo
    ipiv, info = c.scratch(n, "i64"), alloca(lo.b, I32)

    def step(a, out):
        b = lo.b
        lo.copy(out, a, Type(c.dtype, (n, n)))
        c("getrf", n, n, out, max(1, n), ipiv, info)   # info > 0 (a zero pivot): lu_solve gives NaN
        lo.counted_loop(I64(n), lambda j: b.store(b.sitofp(b.load(c.at(ipiv, j, "i32"), typ=I32), c.t),
                                                  c.at(out, b.add(j, I64(n * n)))))
    return step


def _lu_solve(c, node, n, _):
    """op(a) x = b from lu: getrs with trans 'T' solves a x = b (the factors are a^T's)."""
    lo, t = c.lo, c.t
    k = node.inputs[2].type.shape[-1]
    rhs, ipiv, info = c.scratch(n * k), c.scratch(n, "i64"), alloca(lo.b, I32)
    singular = alloca(lo.b, ir.IntType(1))

    def step(a, lu, bm, x):
        b = lo.b
        b.store(ir.IntType(1)(0), singular)

        def pivot(j):
            b.store(b.fptosi(b.load(c.at(lu, b.add(j, I64(n * n))), typ=t), I32), c.at(ipiv, j, "i32"))
            zero = b.fcmp_ordered("==", b.load(c.at(lu, b.mul(j, I64(n + 1))), typ=t), t(0))
            b.store(b.or_(b.load(singular, typ=ir.IntType(1)), zero), singular)
        lo.counted_loop(I64(n), pivot)
        failed = b.load(singular, typ=ir.IntType(1))
        with b.if_then(b.not_(failed)):
            c.transpose(bm, rhs, n, k)   # column-major b
            c("getrs", "N" if node.attrs["trans"] else "T", n, k, lu, max(1, n), ipiv, rhs, max(1, n), info)
            c.transpose(rhs, x, k, n)
        c.nan_if(failed, x, n * k)
    return step


def _lu_slogdet(c, node, n, _):
    lo, t = c.lo, c.t
    sign, logdet = alloca(lo.b, t), alloca(lo.b, t)

    def step(a, lu, out):
        b = lo.b
        b.store(t(1.0), sign)
        b.store(t(0.0), logdet)

        def pivot(j):
            d = b.load(c.at(lu, b.mul(j, I64(n + 1))), typ=t)
            s = b.select(b.fcmp_ordered("<", d, t(0)), t(-1), b.select(b.fcmp_ordered(">", d, t(0)), t(1),
                                                                       b.select(b.fcmp_ordered("==", d, t(0)), t(0), d)))
            row = b.load(c.at(lu, b.add(j, I64(n * n))), typ=t)
            swapped = b.fcmp_unordered("!=", row, b.sitofp(b.add(j, I64(1)), t))
            s = b.select(swapped, b.fneg(s), s)
            b.store(b.fmul(b.load(sign, typ=t), s), sign)
            fabs = lo.module.declare_intrinsic("llvm.fabs", [t])
            log = lo.module.declare_intrinsic("llvm.log", [t])
            b.store(b.fadd(b.load(logdet, typ=t), b.call(log, [b.call(fabs, [d])])), logdet)
        lo.counted_loop(I64(n), pivot)
        b.store(b.load(sign, typ=t), out)
        b.store(b.load(logdet, typ=t), c.at(out, 1))
    return step


def _cholesky(c, node, n, _):
    lo, t = c.lo, c.t
    info = alloca(lo.b, I32)
    mat = Type(c.dtype, (n, n))

    def step(a, out):
        b = lo.b
        lo.copy(out, a, mat)
        c("potrf", "U", n, out, max(1, n), info)   # column-major upper = row-major lower

        def clear_upper(idx):
            ptr = lo.elem_ptr(out, mat, idx)
            b.store(b.select(b.icmp_signed(">", idx[1], idx[0]), t(0), b.load(ptr, typ=t)), ptr)
        lo.loop_nest((n, n), clear_upper)
        c.nan_if(c.info_failed(info), out, n * n)
    return step


def _trisolve(c, node, n, _):
    lo, t = c.lo, c.t
    k = node.inputs[1].type.shape[-1]
    lower, trans = node.attrs["lower"], node.attrs["trans"]
    singular = alloca(lo.b, ir.IntType(1))

    def step(a, bm, x):
        b = lo.b
        lo.copy(x, bm, Type(c.dtype, (n, k)))
        b.store(ir.IntType(1)(0), singular)
        lo.counted_loop(I64(n), lambda j: b.store(b.or_(b.load(singular, typ=ir.IntType(1)), b.fcmp_ordered(
            "==", b.load(c.at(a, b.mul(j, I64(n + 1))), typ=t), t(0))), singular))
        failed = b.load(singular, typ=ir.IntType(1))
        with b.if_then(b.not_(failed)):   # x^T op(a)^T = b^T, column-major: x_c op(a_c) = b_c
            c("trsm", "R", "U" if lower else "L", "T" if trans else "N", "N", k, n, 1.0, a, max(1, n), x, max(1, k))
        c.nan_if(failed, x, n * k)
    return step


def _eigh(c, node, n, _):
    lo = c.lo
    lwork, liwork = 1 + 6 * n + 2 * n * n, 3 + 5 * n
    w, work, iwork, info = c.scratch(n * n), c.scratch(lwork), c.scratch(liwork, "i64"), alloca(lo.b, I32)

    uplo = "U" if node.attrs.get("upper") else "L"

    def step(a, out):
        c.transpose(a, w, n, n)   # a column-major, read on NumPy's side: its eigenvector signs
        c("syevd", "V", uplo, n, w, max(1, n), out, work, lwork, iwork, liwork, info)
        c.transpose(w, c.at(out, n), n, n)   # column j of w is eigenvector j
        c.nan_if(c.info_failed(info), out, n * n + n)
    return step


def _qr(c, node, m, n):
    lo, t = c.lo, c.t
    k = min(m, n)
    lwork = 64 * max(m, n, 1)
    w, tau, work, info = c.scratch(m * n), c.scratch(k), c.scratch(lwork), alloca(lo.b, I32)
    w_t = Type(c.dtype, (n, m))   # w[j, i] is a[i, j]: column-major a

    def step(a, out):
        b = lo.b
        c.transpose(a, w, m, n)
        c("geqrf", m, n, w, max(1, m), tau, work, lwork, info)
        r, r_t = c.at(out, m * k), Type(c.dtype, (k, n))

        def copy_r(idx):
            value = b.load(lo.elem_ptr(w, w_t, idx[::-1]), typ=t)
            b.store(b.select(b.icmp_signed(">", idx[0], idx[1]), t(0), value), lo.elem_ptr(r, r_t, idx))
        lo.loop_nest((k, n), copy_r)
        c("orgqr", m, k, k, w, max(1, m), tau, work, lwork, info)
        c.transpose(w, out, k, m)   # the first k columns of w are q
        c.nan_if(c.info_failed(info), out, m * k + k * n)
    return step


def _svd(c, node, m, n):
    from scipy.linalg import lapack
    lo = c.lo
    k, full = min(m, n), node.attrs["full"]
    ucols, vrows = (m, n) if full else (k, k)
    query = lapack.dgesdd_lwork if c.dtype == "f64" else lapack.sgesdd_lwork
    lwork = int(query(m, n, compute_uv=1, full_matrices=int(full))[0]) + 64
    w, u, vt = c.scratch(m * n), c.scratch(m * ucols), c.scratch(vrows * n)
    work, iwork, info = c.scratch(lwork), c.scratch(8 * k, "i64"), alloca(lo.b, I32)

    def step(a, out):
        c.transpose(a, w, m, n)
        s = c.at(out, m * ucols)
        c("gesdd", "A" if full else "S", m, n, w, max(1, m), s, u, max(1, m), vt, max(1, vrows),
          work, lwork, iwork, info)
        c.transpose(u, out, ucols, m)
        c.transpose(vt, c.at(out, m * ucols + k), n, vrows)
        c.nan_if(c.info_failed(info), out, m * ucols + k + vrows * n)
    return step


LOWERINGS = {"lu": _lu, "lu_solve": _lu_solve, "lu_slogdet": _lu_slogdet, "cholesky": _cholesky, "trisolve": _trisolve,
             "eigh": _eigh, "qr": _qr, "svd": _svd}
