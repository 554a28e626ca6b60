"""`jitad.linalg`: NumPy's `numpy.linalg` (and SciPy's `solve_triangular`) with derivatives.

    import jitad, jitad.linalg as la
    def nll(K, y):                       # a Gaussian process's negative log marginal likelihood
        L = la.cholesky(K)
        alpha = la.solve_triangular(L, y, lower=True)
        return 0.5 * jitad.sum(alpha * alpha) + jitad.sum(jitad.log(jitad.diagonal(L)))
    jitad.grad(nll)(K, y)

On NumPy values these compute eagerly with NumPy/SciPy; on staged values they record one
primitive, `linalg` (its attribute `fn` names the routine), which the compiled code runs by
calling SciPy's bundled LAPACK directly (jitad/lower/lapack.py): no Python in the hot path.
Operands are float64/float32 matrices with any leading batch dimensions (integers become
float64). Several results are packed into one array by the primitive (`slogdet`: `[sign,
logabsdet]`; `eigh`: eigenvalues atop eigenvectors; `qr`/`svd`: the factors flattened) and
sliced apart here, so every primitive has one result.

Failures follow NumPy/JAX: a singular matrix (`solve`, `inv`, `solve_triangular`) or a
`cholesky` of a matrix that is not positive definite gives a NaN-filled result (per matrix
of a batch) inside staged code, and eagerly too unless `check=True`, which raises
`jitad.linalg.LinAlgError` (a `JitadError` and a `numpy.linalg.LinAlgError`). `check=True`
has no effect inside staged code, where values are only known when the compiled code runs.
`slogdet`/`det` of a singular matrix give sign 0, log|det| -inf (det 0), as NumPy.

Derivatives (reverse and forward, written with these primitives so they differentiate
again): `solve`/`inv` by the adjoint solve, `det` through `slogdet`, `cholesky` by Murray
(2016), `solve_triangular` by triangular solves, `eigh`/`svd`/`qr` by the perturbation
formulas JAX uses. As in JAX, `cholesky` and `eigh` differentiate as functions of the
symmetric part of their input ((A + A^T) / 2: the gradient is symmetric; `eigh`'s values
are those of the symmetric part too), and the `eigh`
and `svd` derivatives are infinite/NaN at repeated eigenvalues (singular values), where
eigenvectors are not unique; `qr` differentiates for m >= n, `svd` with
`full_matrices=False` or square inputs.

With `device="cuda"` these functions raise `DeviceError`: they run on the CPU backend.
"""
import numpy as np

from .errors import ArgumentError, LinAlgError, ShapeError, StagingError
from .ir.types import FLOATS
from .primitives.linalg import (_eager_each, _eager_trisolve, _eye, _lu_solve, _mm, _prim, _same_dtype, _swap, _unpack,
    _unpack_eigh)
from .staging import Staged, as_var, is_staged
from .staging.values import by_squaring

__all__ = ["solve", "inv", "det", "slogdet", "cholesky", "solve_triangular", "eigh", "eigvalsh", "eig", "eigvals",
           "qr", "svd", "norm", "pinv", "LinAlgError", "lstsq", "matrix_power", "matrix_rank", "cond", "svdvals",
           "matrix_norm", "vector_norm", "multi_dot", "tensorinv", "tensorsolve", "cross", "diagonal", "matmul",
           "matrix_transpose", "outer", "tensordot", "trace", "vecdot"]


def _N():
    from . import numeric
    return numeric


# -- operands --------------------------------------------------------------------

def _stacked(x):
    """`x`, or the staged array of a list or tuple (nested too) that holds staged values:
    `norm([x, x + 2])` as NumPy reads a list of numbers."""
    if isinstance(x, (list, tuple)) and _holds_staged(x):
        return _N().stack([_stacked(v) for v in x])
    return x


def _holds_staged(x):
    return any(_holds_staged(v) for v in x) if isinstance(x, (list, tuple)) else is_staged(x)


def _float(x, who):
    """`x` as a float staged value or a float NumPy array (ints become float64); a list
    holding staged values is stacked."""
    x = _stacked(x)
    if is_staged(x):
        if x.ir_dtype not in FLOATS:
            return Staged(as_var(x, "f64"))
        return x
    a = np.asarray(x)
    if a.dtype.kind not in "biuf":
        raise ArgumentError(f"`linalg.{who}` takes float arrays, got {a.dtype}")
    return a if a.dtype in (np.float32, np.float64) else a.astype(np.float64)


def _square(a, who):
    shape = tuple(a.shape)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ShapeError(f"`linalg.{who}`: shape {shape}: need square matrices (..., n, n)")
    return shape[-1]


def _matrix(a, who):
    if len(a.shape) < 2:
        raise ShapeError(f"`linalg.{who}`: shape {tuple(a.shape)}: need matrices (..., m, n)")


def _broadcast_batch(a, b, core_a, core_b):
    """`a`, `b` broadcast to one batch shape (the dimensions before their `core` ones)."""
    N = _N()
    batch = tuple(np.broadcast_shapes(tuple(a.shape[:len(a.shape) - core_a]), tuple(b.shape[:len(b.shape) - core_b])))
    bt = lambda x, core: x if tuple(x.shape[:len(x.shape) - core]) == batch else (
        N.broadcast_to(x, batch + tuple(x.shape[len(x.shape) - core:])) if is_staged(x)
        else np.broadcast_to(x, batch + tuple(x.shape[len(x.shape) - core:])))
    return bt(a, core_a), bt(b, core_b)


# -- the public functions ----------------------------------------------------------

def solve(a, b, check=False):
    """The solution x of a @ x = b: `jitad.linalg.solve(a, b)`, NumPy's rules (b of shape
    (..., n) is a vector when it is 1-D, else (..., n, k); batch dimensions broadcast).
    A singular a gives NaN (see the module's docstring)."""
    a, b = _float(a, "solve"), _float(b, "solve")
    n = _square(a, "solve")
    vector = len(b.shape) == 1
    if vector:
        b = b.reshape((n, 1)) if not is_staged(b) else _N().reshape(b, (n, 1))
    if len(b.shape) < 2 or b.shape[-2] != n:
        raise ShapeError(f"`linalg.solve`: a {tuple(a.shape)} and b {tuple(b.shape)}: b needs {n} rows")
    a, b = _broadcast_batch(a, b, 2, 2)
    if is_staged(a) or is_staged(b):
        x = _lu_solve(a, _prim("lu", a), b, False)
    else:
        (a, b), _ = _same_dtype(a, b)
        x = _eager_each(np.linalg.solve, "solve", "singular matrix", check, a, b, out_shape=b.shape, dtype=b.dtype)
    # a vector b solves against each matrix of a batched a: x is (..., n), as in NumPy
    return (_N().reshape(x, tuple(x.shape[:-1])) if is_staged(x) else x[..., 0]) if vector else x


def inv(a, check=False):
    """The inverse of square matrices (..., n, n); singular ones give NaN."""
    a = _float(a, "inv")
    n = _square(a, "inv")
    eye = np.broadcast_to(np.eye(n, dtype=np.float64 if a.dtype in ("f64", np.float64) else np.float32), a.shape)
    if is_staged(a):
        return _lu_solve(a, _prim("lu", a), eye, False)
    return solve(a, eye, check=check)


def slogdet(a):
    """`(sign, log|det a|)` of square matrices, as NumPy: sign 0 and -inf for a singular one."""
    a = _float(a, "slogdet")
    _square(a, "slogdet")
    if not is_staged(a):
        return tuple(np.linalg.slogdet(a))
    both = _prim("lu_slogdet", a, _prim("lu", a))
    N = _N()
    nd = len(both.shape) - 1
    pick = lambda k: N.reshape(N.take_slice(both, nd, k, k + 1), both.shape[:-1])
    return pick(0), pick(1)


def det(a):
    """The determinant of square matrices (..., n, n), through `slogdet`; its derivative is
    the adjugate (transposed), finite at singular matrices too."""
    a = _float(a, "det")
    _square(a, "det")
    if not is_staged(a):
        return np.linalg.det(a)
    global _DET
    if _DET is None:
        from .transforms.custom import custom_jvp
        _DET = custom_jvp(_det_value)
        _DET.__name__ = "det"
        _DET.defjvp(_det_jvp)
    return _DET(a)


_DET = None   # det as a custom_jvp (made at first use)


def _det_value(a):
    sign, logdet = slogdet(a)
    return sign * _N().exp(logdet)


def _det_jvp(primals, tangents):
    (a,), (t,) = primals, tangents
    nd = len(a.shape)
    N = _N()
    return _det_value(a), N.sum(N.sum(_adjugate_t(a) * t, axis=nd - 1), axis=nd - 2)


def _adjugate_t(a):
    """adj(a)^T, the gradient of det(a): det(a) a^-T where a is well conditioned (so that
    its own derivative is the textbook one), else from the SVD a = u s vh as
    det(u) det(vh) u diag(prod_{j != i} s_j) vh, which stays finite at singular matrices
    (zero below rank n - 1)."""
    N = _N()
    n = a.shape[-1]
    batch = tuple(a.shape[:-2])
    u, s, vh = svd(a)
    eye = _eye(n, a.dtype)
    rows = N.where(eye != 0.0, 1.0, N.reshape(s, batch + (1, n)) + 0.0 * eye)   # row i: s, s_i made 1
    others = N.reshape(_prod_last(rows), batch + (1, n))
    sign = slogdet(u)[0] * slogdet(vh)[0]
    by_svd = N.reshape(sign, batch + (1, 1)) * _mm(u * others, vh)
    nd = len(s.shape)
    smin = N.reshape(N.min(s, axis=nd - 1), batch + (1, 1))
    ok = smin > N.reshape(N.max(s, axis=nd - 1), batch + (1, 1)) * (n * float(np.finfo(_np_float(a.dtype)).eps) * 16.0)
    safe = N.where(ok, a, eye + 0.0 * a)   # (the inverse of a singular matrix is never formed)
    lu = _prim("lu", safe)
    by_inv = N.reshape(_det_value(safe), batch + (1, 1)) * _lu_solve(safe, lu, np.broadcast_to(eye, a.shape), True)
    return N.where(ok, by_inv, by_svd)


def _np_float(dtype):
    return np.float64 if dtype in ("f64", np.float64) else np.float32


def _prod_last(x):
    """The product over the last axis (a staged tree of products)."""
    N = _N()
    last, n = len(x.shape) - 1, x.shape[-1]
    while n > 1:
        h = n // 2
        p = N.take_slice(x, last, 0, h) * N.take_slice(x, last, h, 2 * h)
        x = N.concatenate([p, N.take_slice(x, last, 2 * h, n)], last) if n % 2 else p
        n = h + n % 2
    return N.reshape(x, tuple(x.shape[:-1]))


def cholesky(a, check=False, lower=True):
    """The lower-triangular L with L @ L.T == a (only a's lower triangle is read); a
    matrix that is not positive definite gives NaN. `lower=False` (SciPy's default) gives
    the upper-triangular U = L.T with U.T @ U == a, reading a's upper triangle.

    >>> jitad.linalg.cholesky(np.array([[4.0, 2.0], [2.0, 5.0]]), lower=False)
    array([[2., 1.],
           [0., 2.]])
    """
    a = _float(a, "cholesky")
    _square(a, "cholesky")
    if not lower:
        swap = _swap if is_staged(a) else (lambda x: np.swapaxes(x, -1, -2))
        return swap(cholesky(swap(a), check))
    if is_staged(a):
        return _prim("cholesky", a)
    return _eager_each(np.linalg.cholesky, "cholesky", "matrix is not positive definite", check, a,
                       out_shape=a.shape, dtype=a.dtype)


def solve_triangular(a, b, trans=0, lower=False, check=False):
    """SciPy's `solve_triangular`: x with op(a) @ x = b, op(a) = a (`trans=0`/'N') or
    a.T (1/'T'), reading only a's lower (`lower=True`) or upper triangle. A zero on the
    diagonal gives NaN."""
    if trans not in (0, 1, "N", "T"):
        raise ArgumentError(f"`linalg.solve_triangular`: trans={trans!r}; use 0/'N' or 1/'T'")
    trans = trans in (1, "T")
    a, b = _float(a, "solve_triangular"), _float(b, "solve_triangular")
    n = _square(a, "solve_triangular")
    vector = len(b.shape) == len(a.shape) - 1
    N = _N()
    if vector:
        b = N.reshape(b, tuple(b.shape) + (1,)) if is_staged(b) else b[..., None]
    if b.shape[-2] != n:
        raise ShapeError(f"`linalg.solve_triangular`: a {tuple(a.shape)} and b {tuple(b.shape)}: b needs {n} rows")
    a, b = _broadcast_batch(a, b, 2, 2)
    if is_staged(a) or is_staged(b):
        x = _prim("trisolve", a, b, lower=bool(lower), trans=trans)
    else:
        (a, b), _ = _same_dtype(a, b)
        x = _eager_trisolve(a, b, lower, trans, check)
    return (N.reshape(x, tuple(x.shape[:-1])) if is_staged(x) else x[..., 0]) if vector else x


def eigh(a, UPLO="L", symmetrize_input=True):
    """Eigenvalues (ascending) and eigenvectors (columns) of symmetric matrices, as JAX's:
    of the symmetric part (a + a^T) / 2 (`symmetrize_input=False`: of the triangle `UPLO`
    names, "L" or "U", as NumPy's), so the values and the symmetric gradient agree for any
    input: `w, v = jitad.linalg.eigh(a)`. The same LAPACK routine as NumPy's, so the same
    eigenvector signs. A failed decomposition gives NaN."""
    if UPLO not in ("L", "U"):
        raise ArgumentError(f"`linalg.eigh`: UPLO={UPLO!r}; use 'L' or 'U'")
    a = _float(a, "eigh")
    n = _square(a, "eigh")
    if not is_staged(a):
        a = (a + np.swapaxes(a, -1, -2)) / 2.0 if symmetrize_input else a
        w, v = np.linalg.eigh(a, UPLO=UPLO)
        return w, v
    if a.ir_dtype == "f32":   # as NumPy: computed in double, so the eigenvector signs are NumPy's
        return tuple(_N().convert(x, "f32") for x in eigh(_N().convert(a, "f64"), UPLO, symmetrize_input))
    if symmetrize_input:
        a = (a + _swap(a)) * 0.5
    packed = _prim("eigh", a, upper=UPLO == "U")
    return _unpack_eigh(packed, n)


def eigvalsh(a, UPLO="L", symmetrize_input=True):
    """The eigenvalues (ascending) of symmetric matrices (of `a`'s symmetric part, as `eigh`)."""
    return eigh(a, UPLO, symmetrize_input)[0]


def eig(a):
    """Eigenvalues and right eigenvectors of general square matrices, NumPy's (complex
    where they are): on plain arrays only, and not differentiated; staged code has no
    complex dtype, so it raises there: use `eigh` for symmetric matrices.

    >>> w, v = jitad.linalg.eig(np.array([[2.0, 1.0], [0.0, 3.0]]))
    """
    if is_staged(a):
        raise StagingError("`linalg.eig` on a staged value: its eigenvalues may be complex, which staged "
                           "code does not have. Call it on plain arrays (outside jit and grad), or use "
                           "`jitad.linalg.eigh` for a symmetric matrix")
    return np.linalg.eig(a)


def eigvals(a):
    """The eigenvalues of general square matrices (see `eig`: plain arrays only):
    `jitad.linalg.eigvals(np.diag([1.0, 2.0]))` is `array([1., 2.])`."""
    return eig(a)[0]


def qr(a, mode="reduced"):
    """`q, r = jitad.linalg.qr(a)` (mode 'reduced'; 'r' gives r alone), as NumPy: q (..., m, k),
    r (..., k, n), k = min(m, n)."""
    if mode not in ("reduced", "r"):
        raise ArgumentError(f"`linalg.qr`: mode={mode!r}; use 'reduced' or 'r'")
    a = _float(a, "qr")
    _matrix(a, "qr")
    if not is_staged(a):
        return np.linalg.qr(a, mode=mode)
    m, n = a.shape[-2:]
    q, r = _unpack(_prim("qr", a), [(m, min(m, n)), (min(m, n), n)])
    return r if mode == "r" else (q, r)


def svd(a, full_matrices=True, compute_uv=True):
    """`u, s, vh = jitad.linalg.svd(a)`, NumPy's convention (singular values descending;
    `full_matrices=False` gives the reduced factors; `compute_uv=False` s alone)."""
    a = _float(a, "svd")
    _matrix(a, "svd")
    if not is_staged(a):
        return np.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    m, n = a.shape[-2:]
    k = min(m, n)
    if k == 0:   # an empty matrix (LAPACK refuses one): no singular values, identity factors
        dt, batch = _np_float(a.dtype), tuple(a.shape[:-2])
        full = bool(full_matrices)
        u = np.broadcast_to(np.eye(m, m if full else 0, dtype=dt), batch + (m, m if full else 0))
        vh = np.broadcast_to(np.eye(n if full else 0, n, dtype=dt), batch + (n if full else 0, n))
        s = np.zeros(batch + (0,), dt)
        return (u, s, vh) if compute_uv else s
    full = bool(full_matrices) and compute_uv and m != n
    u, s, vh = _unpack(_prim("svd", a, full=full), [(m, m if full else k), (k,), (n if full else k, n)])
    return (u, s, vh) if compute_uv else s


def norm(x, ord=None, axis=None, keepdims=False):
    """NumPy's `norm`: vector norms (ord None/2, 1, inf, -inf, 0, p) and matrix norms
    (None/'fro', 'nuc', 1, -1, 2, -2, inf, -inf over two axes)."""
    N = _N()
    x = _stacked(x)
    if not is_staged(x):
        return np.linalg.norm(x, ord=ord, axis=axis, keepdims=keepdims)
    x = _float(x, "norm")
    nd = len(x.shape)
    if axis is None:
        if ord is not None and nd not in (1, 2):
            raise ShapeError(f"`linalg.norm`: ord={ord!r} of shape {tuple(x.shape)}: needs 1-D or 2-D, or give axis")
        axis = tuple(range(nd))
    axis = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axis = tuple(int(d) % nd for d in axis)
    absx = N.abs(x)
    if ord is None or ord == "fro" and len(axis) == 2:
        out = N.sqrt(N.sum(x * x, axis=axis, keepdims=keepdims))
    elif len(axis) == 1:
        out = _vector_norm(x, absx, ord, axis, keepdims)
    elif len(axis) == 2:
        out = _matrix_norm(x, absx, ord, axis, keepdims)
    else:
        raise ShapeError(f"`linalg.norm`: axis={axis}: one or two axes")
    return out


def _vector_norm(x, absx, ord, axis, keepdims):
    N = _N()
    if ord == np.inf:
        return N.max(absx, axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return N.min(absx, axis=axis, keepdims=keepdims)
    if ord == 0:
        return N.sum(N.convert(x != 0.0, x.dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return N.sum(absx, axis=axis, keepdims=keepdims)
    if ord == 2:
        return N.sqrt(N.sum(x * x, axis=axis, keepdims=keepdims))
    if isinstance(ord, str):
        raise ArgumentError(f"`linalg.norm`: ord={ord!r} is a matrix norm; vectors take numbers")
    return N.sum(absx ** float(ord), axis=axis, keepdims=keepdims) ** (1.0 / float(ord))


def _matrix_norm(x, absx, ord, axis, keepdims):
    N = _N()
    r, c = axis
    if ord in (1, -1, np.inf, -np.inf):
        sum_axis, ext_axis = (r, c) if ord in (1, -1) else (c, r)
        sums = N.sum(absx, axis=sum_axis, keepdims=True)
        out = (N.max if ord > 0 else N.min)(sums, axis=ext_axis, keepdims=True)
    elif ord in (2, -2, "nuc"):
        rest = [d for d in range(len(x.shape)) if d not in axis]
        moved = N.transpose(x, tuple(rest) + (r, c))
        s = svd(moved, compute_uv=False)
        s_axis = len(s.shape) - 1
        out = N.sum(s, axis=s_axis) if ord == "nuc" else (N.max if ord == 2 else N.min)(s, axis=s_axis)
        if keepdims:
            shape = [1 if d in axis else n for d, n in enumerate(x.shape)]
            out = N.reshape(out, tuple(shape))
        return out
    else:
        raise ArgumentError(f"`linalg.norm`: ord={ord!r} is not a matrix norm; use None, 'fro', 'nuc', "
                            "1, -1, 2, -2, inf or -inf")
    if not keepdims:
        out = N.reshape(out, tuple(n for d, n in enumerate(x.shape) if d not in axis))
    return out


def pinv(a, rtol=None):
    """The Moore-Penrose pseudo-inverse, through `svd`: singular values at most
    `rtol * max(s)` (default max(m, n) * eps, as NumPy 2) count as zero."""
    a = _float(a, "pinv")
    _matrix(a, "pinv")
    m, n = a.shape[-2:]
    if not is_staged(a):
        return np.linalg.pinv(a, rtol=max(m, n) * np.finfo(a.dtype).eps if rtol is None else rtol)
    N = _N()
    if m == 0 or n == 0:   # no singular values: the (n, m) zero matrix, as NumPy
        return N.zeros(tuple(a.shape[:-2]) + (n, m), a.ir_dtype)
    rtol = max(m, n) * np.finfo(a.dtype).eps if rtol is None else rtol
    u, s, vh = svd(a, full_matrices=False)
    nd = len(s.shape)
    cutoff = N.reshape(rtol * N.max(s, axis=nd - 1), tuple(s.shape[:-1]) + (1,))
    s_inv = N.where(s > cutoff, 1.0 / N.where(s > cutoff, s, 1.0), 0.0)
    return _mm(_swap(vh) * N.reshape(s_inv, tuple(s.shape[:-1]) + (1, s.shape[-1])), _swap(u))


def _A():
    from . import numpy_api
    return numpy_api


def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """The least-squares solution `x` of `a @ x = b` (2-D `a`; `b` 1-D or 2-D), through the
    SVD: `(x, residuals, rank, s)`; singular values below `rcond * max(s)` (default
    eps * max(m, n)) count as zero; the residuals are the squared column norms of
    `b - a @ x`, as JAX's: `x = jitad.linalg.lstsq(a, b)[0]`."""
    N = _N()
    a, b = _float(a, "lstsq"), _float(b, "lstsq")
    if len(a.shape) != 2 or len(b.shape) not in (1, 2) or a.shape[0] != b.shape[0]:
        raise ShapeError(f"`linalg.lstsq`: a must be 2-D and b 1-D or 2-D with a's rows, got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    vector = len(b.shape) == 1
    b2 = N.reshape(b, (b.shape[0], 1)) if vector else b
    m, n = a.shape
    if m * n == 0:
        x = N.zeros((n,) + tuple(b2.shape[1:]), _dt(a))
        s, rank = np.zeros(0, _np_float(a.dtype)), np.int64(0)
    else:
        eps = np.finfo(_np_float(a.dtype)).eps
        rcond = eps * max(m, n) if rcond is None or (not is_staged(rcond) and rcond < 0) else rcond
        u, s, vh = svd(a, full_matrices=False)
        keep = (s > 0) & (s >= rcond * s[0])
        rank = N.sum(N.convert(keep, "i64"))
        s_inv = N.where(keep, 1.0 / N.where(keep, s, 1.0), 0.0)
        x = N.matmul(_swap(vh), N.reshape(s_inv, (-1, 1)) * N.matmul(_swap(u), b2))
    r = b2 - N.matmul(a, x)
    resid = N.sum(r * r, axis=0)
    if numpy_resid and not is_staged(rank) and (int(rank) < n or m <= n):
        resid = np.zeros(0, _np_float(a.dtype))
    return (N.reshape(x, (n,)) if vector else x), resid, rank, s


def _dt(a):
    return a.ir_dtype if is_staged(a) else _np_float(a.dtype)


def matrix_power(a, n):
    """`a` (square, any batch) to the integer power `n` (by squarings; negative `n` inverts
    first; 0 gives identities): `jitad.linalg.matrix_power(a, 3)`."""
    N = _N()
    if not isinstance(n, (int, np.integer)):
        raise ArgumentError(f"`linalg.matrix_power`: n={n!r}; the exponent must be a Python int")
    k = _square(a if is_staged(a) else np.asarray(a), "matrix_power")
    if n == 0:
        eye = np.eye(k, dtype=a.dtype if is_staged(a) else np.asarray(a).dtype)
        return N.broadcast_to(eye, tuple(a.shape)) if is_staged(a) else np.broadcast_to(eye, np.shape(a)).copy()
    if n < 0:
        a, n = inv(a), -n
    return by_squaring(a, n, N.matmul)


def svdvals(x, /):
    """The singular values, descending: `jitad.linalg.svdvals(a)`."""
    return svd(x, compute_uv=False)


def matrix_rank(M, rtol=None, *, tol=None):
    """The number of singular values above `tol` (default `rtol * max(s)`, rtol =
    eps * max(m, n)): `jitad.linalg.matrix_rank(np.eye(3)) == 3`."""
    N = _N()
    M = _float(M, "matrix_rank")
    if len(M.shape) < 2:
        return N.convert(N.NUMPY_API["any"](M != 0), "i64")
    s = svdvals(M)
    if tol is None:
        m, n = M.shape[-2:]
        r = max(m, n) * np.finfo(_np_float(M.dtype)).eps if rtol is None else rtol
        tol = N.max(s, axis=len(s.shape) - 1, keepdims=True) * r
    elif len(s.shape) > 1 and np.ndim(tol):
        tol = np.asarray(tol)[..., None]
    return N.sum(N.convert(s > tol, "i64"), axis=len(s.shape) - 1)


def cond(x, p=None):
    """The condition number in norm `p` (None or 2: largest over smallest singular value):
    `jitad.linalg.cond(np.diag([1.0, 4.0])) == 4.0`."""
    N = _N()
    x = _float(x, "cond")
    _matrix(x, "cond")
    if p in (None, 2, -2):
        s = svdvals(x)
        last = len(s.shape) - 1
        hi, lo = N.max(s, axis=last), N.min(s, axis=last)
        return hi / lo if p != -2 else lo / hi
    return norm(x, p, axis=(-2, -1)) * norm(inv(x), p, axis=(-2, -1))


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """The norm `ord` of the matrices over the last two axes: `jitad.linalg.matrix_norm(a)`."""
    return norm(x, ord, axis=(-2, -1), keepdims=keepdims)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """The vector norm `ord` over `axis` (None: all entries as one vector):
    `jitad.linalg.vector_norm(np.array([3.0, 4.0])) == 5.0`."""
    N = _N()
    if axis is None:
        flat = N.reshape(x, (-1,)) if is_staged(x) else np.ravel(x)
        out = norm(flat, ord, 0)
        if keepdims:
            shape = (1,) * len(x.shape if is_staged(x) else np.shape(x))
            out = N.reshape(out, shape) if is_staged(out) else np.reshape(out, shape)
        return out
    return norm(x, ord, axis, keepdims)


def multi_dot(arrays, *, precision=None):
    """The product of a chain of matrices (the first may be a row vector, the last a
    column vector, as NumPy's): `jitad.linalg.multi_dot([a, b, c])`."""
    N = _N()
    if len(arrays) < 2:
        raise ArgumentError("`linalg.multi_dot` needs at least two arrays")
    out = arrays[0]
    for a in arrays[1:]:
        out = N.NUMPY_API["dot"](out, a) if "dot" in N.NUMPY_API else N.dot(out, a)
    return out


def tensorinv(a, ind=2):
    """The inverse of `a` seen as a matrix (the first `ind` axes as rows):
    `jitad.linalg.tensorinv(np.eye(4).reshape(4, 2, 2), ind=1)`."""
    N = _N()
    shape = tuple(a.shape if is_staged(a) else np.shape(a))
    rows, cols = shape[:ind], shape[ind:]
    m = int(np.prod(rows))
    if m != int(np.prod(cols)):
        raise ShapeError(f"`linalg.tensorinv`: shape {shape} with ind={ind} is not square as a matrix")
    return N.reshape(inv(N.reshape(a, (m, m))), cols + rows)


def tensorsolve(a, b, axes=None):
    """`x` with `tensordot(a, x, x.ndim) == b`: `jitad.linalg.tensorsolve(a, b)`."""
    N = _N()
    if axes is not None:
        nd = len(a.shape if is_staged(a) else np.shape(a))
        rest = [d for d in range(nd) if d not in [x % nd for x in axes]]
        a = N.transpose(a, tuple(rest) + tuple(x % nd for x in axes))
    shape = tuple(a.shape if is_staged(a) else np.shape(a))
    bshape = tuple(b.shape if is_staged(b) else np.shape(b))
    xshape = shape[len(bshape):]
    m = int(np.prod(bshape))
    if m != int(np.prod(xshape)):
        raise ShapeError(f"`linalg.tensorsolve`: a of shape {shape} and b of shape {bshape} are not square")
    return N.reshape(solve(N.reshape(a, (m, m)), N.reshape(b, (m,))), xshape)


def cross(x1, x2, /, *, axis=-1):
    """The cross product of 3-vectors along `axis`: `jitad.linalg.cross(a, b)`."""
    return _A().cross(x1, x2, axis=axis)


def diagonal(x, /, *, offset=0):
    """The diagonals of the matrices over the last two axes: `jitad.linalg.diagonal(a)`."""
    return _A().diagonal(x, offset, -2, -1)


def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    """The matrix product (`x1 @ x2`): `jitad.linalg.matmul(a, b)`."""
    return _N().matmul(x1, x2)


def matrix_transpose(x, /):
    """The last two axes swapped: `jitad.linalg.matrix_transpose(a)`."""
    if len(x.shape if is_staged(x) else np.shape(x)) < 2:
        raise ShapeError("`linalg.matrix_transpose` needs at least 2 axes")
    return _A().swapaxes(x, -1, -2)


def outer(x1, x2, /):
    """The outer product of two vectors: `jitad.linalg.outer(a, b)`."""
    if len(x1.shape if is_staged(x1) else np.shape(x1)) != 1 or len(x2.shape if is_staged(x2) else np.shape(x2)) != 1:
        raise ShapeError("`linalg.outer` takes two 1-D arrays")
    return _N().outer(x1, x2)


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None):
    """`jnp.tensordot` (array API keywords): `jitad.linalg.tensordot(a, b, axes=1)`."""
    return _A().tensordot(x1, x2, axes)


def trace(x, /, *, offset=0, dtype=None):
    """The traces of the matrices over the last two axes: `jitad.linalg.trace(a)`."""
    return _A().trace(x, offset, -2, -1, dtype)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """Dot products along `axis`: `jitad.linalg.vecdot(a, b)`."""
    return _N().sum(x1 * x2, axis)


_N().NUMPY_API.update({f"linalg.{name}": globals()[name] for name in __all__})   # np.linalg.solve(staged)
