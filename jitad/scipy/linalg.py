"""`jitad.scipy.linalg`: SciPy's linear algebra names and conventions on `jitad.linalg`
(`cholesky(a, lower=False)` gives the upper factor, as SciPy)."""
import numpy as np

from .. import linalg as L
from .. import numeric as N
from ..linalg import det, inv, norm, pinv, qr, svd  # noqa: F401
from ..errors import ArgumentError
from ..staging import is_staged

__all__ = ["cholesky", "cho_factor", "cho_solve", "solve_triangular", "solve", "inv", "det", "eigh",
           "norm", "pinv", "qr", "svd", "block_diag", "toeplitz", "hankel", "circulant", "companion", "hilbert",
           "invhilbert", "pascal", "helmert", "leslie", "fiedler", "convolution_matrix", "expm", "expm_frechet",
           "polar", "eigh_tridiagonal", "solve_sylvester", "fiedler_companion", "hadamard", "invpascal", "lu", "lu_factor",
           "lu_solve", "qr_multiply", "hessenberg", "sqrtm", "schur"]


def _mT(x):
    return N.NUMPY_API["swapaxes"](x, -1, -2) if is_staged(x) else x.swapaxes(-1, -2)


def cholesky(a, lower=False):
    """The Cholesky factor of `a`: upper `U` with `U.T @ U == a` (SciPy's default), or lower
    with `lower=True`."""
    low = L.cholesky(a)
    return low if lower else _mT(low)


def cho_factor(a, lower=False):
    """`(c, lower)` for `cho_solve`: `c` the Cholesky factor (the other triangle zero)."""
    return cholesky(a, lower), lower


def cho_solve(c_and_lower, b):
    """x with a @ x = b, given `cho_factor(a)`: `cho_solve(cho_factor(a), b)`."""
    c, lower = c_and_lower
    if lower:
        return L.solve_triangular(c, L.solve_triangular(c, b, lower=True), trans=1, lower=True)
    return L.solve_triangular(c, L.solve_triangular(c, b, trans=1, lower=False), lower=False)


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False, check_finite=True):
    """x with op(a) @ x = b for triangular `a` (SciPy's signature; `unit_diagonal` reads 1s)."""
    if unit_diagonal:
        n = a.shape[-1]
        eye = N.NUMPY_API["eye"](n)
        a = a * (1 - eye) + eye
    return L.solve_triangular(a, b, trans=trans, lower=lower)


def solve(a, b, assume_a="gen", lower=False, **_):
    """x with a @ x = b (`assume_a='pos'` solves through Cholesky)."""
    if assume_a == "pos":
        return cho_solve(cho_factor(a, lower=True), b)
    return L.solve(a, b)


def eigh(a, lower=True, eigvals_only=False):
    """Eigenvalues (ascending) and eigenvectors of a symmetric `a`, reading its lower
    (default) or upper triangle."""
    if eigvals_only:
        return L.eigvalsh(a, UPLO="L" if lower else "U")
    return L.eigh(a, UPLO="L" if lower else "U")


# -- special matrices ------------------------------------------------------------------------

def _shape(x):
    return N._shape(x)


def _np(name):
    return N.NUMPY_API[name]


def block_diag(*arrs):
    """The block-diagonal matrix of the given matrices (scalars and 1-D rows count as 1 x n)."""
    blocks = [N.reshape(a, (1, -1)) if len(_shape(a)) < 2 else a for a in arrs]
    if not blocks:
        return np.zeros((1, 0))
    cols = sum(_shape(b)[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        r, c = _shape(b)
        rows.append(_np("pad")(b, ((0, 0), (left, cols - left - c))))
        left += c
    return N.concatenate(rows, axis=0)


def _from_index(values, index):
    """values[index] for a static int index array."""
    return N.take(values, np.asarray(index))


def toeplitz(c, r=None):
    """The Toeplitz matrix with first column `c` and first row `r` (r[0] ignored; r = c
    when None)."""
    c = N.reshape(c, (-1,))
    r = c if r is None else N.reshape(r, (-1,))
    m, n = _shape(c)[0], _shape(r)[0]
    vals = N.concatenate([_np("flip")(r[1:], 0), c]) if n > 1 else c
    i, j = np.arange(m)[:, None], np.arange(n)[None, :]
    return _from_index(vals, i - j + n - 1)


def hankel(c, r=None):
    """The Hankel matrix with first column `c` and last row `r` (r[0] ignored; zeros when None)."""
    c = N.reshape(c, (-1,))
    r = N.zeros_like(c) if r is None else N.reshape(r, (-1,))
    m, n = _shape(c)[0], _shape(r)[0]
    vals = N.concatenate([c, r[1:]])
    return _from_index(vals, np.arange(m)[:, None] + np.arange(n)[None, :])


def circulant(c):
    """The circulant matrix with first column `c`."""
    c = N.reshape(c, (-1,))
    n = _shape(c)[0]
    return _from_index(c, (np.arange(n)[:, None] - np.arange(n)[None, :]) % n)


def companion(a):
    """The companion matrix of the polynomial with coefficients `a` (highest first)."""
    n = _shape(a)[0]
    first = -a[1:] / a[0]
    return N.concatenate([N.reshape(first, (1, n - 1)), np.eye(n - 2, n - 1)], axis=0)


def hilbert(n):
    """The n x n Hilbert matrix 1 / (i + j + 1)."""
    i = np.arange(n)
    return 1.0 / (i[:, None] + i[None, :] + 1.0)


def invhilbert(n):
    """The inverse of the n x n Hilbert matrix (exact integers, as floats)."""
    from math import comb
    out = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            out[i, j] = ((-1) ** (i + j) * (i + j + 1) * comb(n + i, n - j - 1) * comb(n + j, n - i - 1)
                         * comb(i + j, i) ** 2)
    return out


def pascal(n, kind=None):
    """The n x n Pascal matrix: 'symmetric' (default), 'lower' or 'upper'."""
    from math import comb
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise ArgumentError(f"pascal: kind={kind!r}; use 'symmetric', 'lower' or 'upper'")
    lower = np.array([[comb(i, j) for j in range(n)] for i in range(n)], float)
    return {"symmetric": lower @ lower.T, "lower": lower, "upper": lower.T}[kind]


def helmert(n, full=False):
    """The Helmert matrix of order n (its first row, 1/sqrt(n), only when `full`)."""
    out = np.zeros((n, n))
    out[0] = 1.0 / np.sqrt(n)
    for i in range(1, n):
        out[i, :i] = 1.0 / np.sqrt(i * (i + 1))
        out[i, i] = -i / np.sqrt(i * (i + 1))
    return out if full else out[1:]


def leslie(f, s):
    """The Leslie matrix of fecundities `f` (n) and survival rates `s` (n - 1)."""
    n = _shape(f)[0]
    return N.concatenate([N.reshape(f, (1, n)), _np("pad")(_np("diag")(s), ((0, 0), (0, 1)))], axis=0)


def invpascal(n, kind="symmetric", exact=True):
    """The inverse of `pascal(n, kind)` (exact integers, as floats): the lower one is
    (-1)**(i + j) C(i, j), the symmetric one its transpose times itself."""
    from math import comb
    if kind not in ("symmetric", "lower", "upper"):
        raise ArgumentError(f"invpascal: kind={kind!r}; use 'symmetric', 'lower' or 'upper'")
    lower = np.array([[(-1) ** (i + j) * comb(i, j) for j in range(n)] for i in range(n)], float)
    return {"symmetric": lower.T @ lower, "lower": lower, "upper": lower.T}[kind]


def hadamard(n, dtype=int):
    """The n x n Hadamard matrix of Sylvester's construction (n a power of 2):
    `hadamard(2) == [[1, 1], [1, -1]]`."""
    if n < 1 or n & (n - 1):
        raise ArgumentError(f"hadamard: n={n}; give a power of 2")
    out = np.ones((1, 1), dtype)
    while out.shape[0] < n:
        out = np.block([[out, out], [out, -out]])
    return out


def _fiedler_pattern(n):
    """For Fiedler's companion matrix of order n - 1: which coefficient (j > 0 for -a_j / a_0,
    -1 for a one, 0 for a zero) sits where."""
    m = n - 1
    w = np.zeros((m, m), int)
    cells = [(0, 0, 1), (1, 0, -1)]
    for r in range(0, m, 2):
        cells += [(r, r - 1, r + 1), (r, r + 1, r + 2), (r, r + 2, -1)] if r else [(0, 1, 2), (0, 2, -1)]
    cells += [(r, r - 2, -1) for r in range(3, m, 2)]
    for r, c, j in cells:
        if 0 <= r < m and 0 <= c < m:
            w[r, c] = j
    return w


def fiedler_companion(a):
    """Fiedler's companion matrix of the polynomial with coefficients `a` (highest first): a
    pentadiagonal matrix whose eigenvalues are the polynomial's roots."""
    n = _shape(a)[0]
    if n < 2:
        return np.zeros(0)   # SciPy's empty answer
    w = _fiedler_pattern(n)
    b = N.concatenate([np.zeros(1), -a[1:] / a[0]])
    return N.where(w > 0, _from_index(b, np.maximum(w, 0)), N.where(w < 0, 1.0, 0.0))


def fiedler(a):
    """The Fiedler matrix |a_i - a_j|."""
    return N.abs(a[:, None] - a[None, :])


def convolution_matrix(a, n, mode="full"):
    """The matrix whose product with a length-n vector v is convolve(a, v, mode)."""
    if mode not in ("full", "same", "valid"):
        raise ArgumentError(f"convolution_matrix: mode={mode!r}; use 'full', 'same' or 'valid'")
    m = _shape(a)[0]
    full = np.arange(m + n - 1)[:, None] - np.arange(n)[None, :]   # a's index for (row, column)
    if mode == "same":   # the larger length, centred
        start = (min(m, n) - 1) // 2
        full = full[start:start + max(m, n)]
    elif mode == "valid":
        full = full[min(m, n) - 1:max(m, n)]
    inside = (full >= 0) & (full < m)
    return N.where(inside, N.take(a, np.clip(full, 0, m - 1)), 0.0)


# -- matrix functions -------------------------------------------------------------------------

_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)


def expm(A, *, upper_triangular=False, max_squarings=16):
    """The matrix exponential (Higham's scaling and squaring with a degree-13 Padé
    approximant, as JAX's float64 path), differentiable: `expm(np.zeros((2, 2)))` is I."""
    n = _shape(A)[-1]
    eye = np.eye(n)
    norm1 = N.max(N.sum(N.abs(A), axis=-2), axis=-1)
    s = N.maximum(0.0, N.NUMPY_API["ceil"](N.log(N.maximum(norm1, 1e-300) / 5.371920351148152) / np.log(2.0)))
    s = N.minimum(s, float(max_squarings))
    a = A / (2.0 ** s)[..., None, None]
    b = _PADE13
    a2 = N.matmul(a, a)
    a4 = N.matmul(a2, a2)
    a6 = N.matmul(a4, a2)
    u = N.matmul(a, N.matmul(a6, b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = N.matmul(a6, b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
    r = L.solve(v - u, v + u)
    from ..staging import FOR
    return FOR(0, max_squarings, lambda i, x: N.where(i < s, N.matmul(x, x), x), r)


def expm_frechet(A, E, *, method=None, compute_expm=True):
    """The Fréchet derivative of expm at A in direction E (the top-right block of
    expm([[A, E], [0, A]])); with `compute_expm`, (expm(A), derivative)."""
    n = _shape(A)[-1]
    zero = N.zeros_like(A)
    big = expm(N.concatenate([N.concatenate([A, E], axis=-1), N.concatenate([zero, A], axis=-1)], axis=-2))
    frechet = big[..., :n, n:]
    return (big[..., :n, :n], frechet) if compute_expm else frechet


def polar(a, side="right", *, method="svd", eps=None, max_iterations=None):
    """The polar decomposition a = u p (`side='right'`) or p u ('left'), u with orthonormal
    columns and p symmetric positive semidefinite, through the SVD."""
    if side not in ("right", "left"):
        raise ArgumentError(f"polar: side={side!r}; use 'right' or 'left'")
    w, s, vh = L.svd(a, full_matrices=False)
    u = N.matmul(w, vh)
    if side == "right":
        p = N.matmul(_mT(vh) * s[..., None, :], vh)
    else:
        p = N.matmul(w * s[..., None, :], _mT(w))
    return u, p


def eigh_tridiagonal(d, e, *, eigvals_only=False, select="a", select_range=None, tol=None, key=None):
    """The eigenvalues (ascending) of the symmetric tridiagonal matrix with diagonal `d`
    and off-diagonal `e` (JAX's, which needs `eigvals_only=True`)."""
    if not eigvals_only:
        raise ArgumentError("eigh_tridiagonal: pass eigvals_only=True (JAX computes only eigenvalues); "
                            "for vectors use eigh on the dense matrix")
    if select != "a":
        raise ArgumentError(f"eigh_tridiagonal: select={select!r}; jitad computes all eigenvalues ('a')")
    dense = _np("diag")(d) + _np("diag")(e, 1) + _np("diag")(e, -1)
    return L.eigvalsh(dense)


def solve_sylvester(A, B, C, *, method="schur", tol=1e-8):
    """X with A X + X B = C, by the Kronecker form (I ⊗ A + Bᵀ ⊗ I) vec(X) = vec(C): for
    small matrices (its cost is (m n)³)."""
    m, n = _shape(A)[-1], _shape(B)[-1]
    big = _np("kron")(np.eye(n), A) + _np("kron")(_mT(B), np.eye(m))
    x = L.solve(big, N.reshape(_mT(C), (m * n,)))
    return _mT(N.reshape(x, (n, m)))


from ._linalg_decomp import hessenberg, lu, lu_factor, lu_solve, qr_multiply, schur, sqrtm  # noqa: E402,F401


# -- more of SciPy's names: jitad's own where they stage, SciPy's on plain arrays otherwise ----

from ..extend import defjvp, defjvp_argnums, defvjp, defvjp_argnums  # noqa: E402,F401  (autograd's module has them)
from ..numpy.numpy_names import wrap_namespace  # noqa: E402,F401
from ..linalg import LinAlgError, lstsq as _lstsq  # noqa: E402,F401


def eigvalsh(a, b=None, *, lower=True, **_):
    """The eigenvalues (ascending) of a symmetric `a`, from its lower (default) or upper
    triangle: `eigvalsh(np.diag([2.0, 1.0]))` is `[1., 2.]`."""
    if b is not None:
        return _scipy_only("eigvalsh")(a, b, lower=lower)
    return L.eigvalsh(a, UPLO="L" if lower else "U")


def svdvals(a, overwrite_a=False, check_finite=True):
    """The singular values of `a`, descending: `svdvals(np.diag([1.0, 3.0]))` is `[3., 1.]`."""
    return L.svd(a, compute_uv=False)


def lstsq(a, b, cond=None, overwrite_a=False, overwrite_b=False, check_finite=True, lapack_driver=None):
    """`(x, residues, rank, s)`: x minimizing |a x - b| (SciPy's order; `cond` cuts small
    singular values as NumPy's `rcond`)."""
    return _lstsq(a, b, rcond=cond)


def diagsvd(s, M, N_):
    """The `M` x `N_` matrix with `s` on its diagonal (to rebuild `u @ diagsvd(s, m, n) @ vh`):
    `diagsvd([1.0, 2.0], 2, 3)[1, 1] == 2.0`."""
    k = _shape(s)[-1]
    if k not in (M, N_):
        raise ArgumentError(f"diagsvd: {k} singular values for a {M} x {N_} matrix; give min(M, N) of them")
    square = _np("diag")(s if is_staged(s) else np.asarray(s, dtype=np.float64))
    if k == M:
        return N.concatenate([square, N.zeros((M, N_ - k))], axis=1)
    return N.concatenate([square, N.zeros((M - k, N_))], axis=0)


def khatri_rao(a, b):
    """The column-wise Kronecker product: column j is `kron(a[:, j], b[:, j])`."""
    (m, n), (p, q) = _shape(a), _shape(b)
    if n != q:
        raise ArgumentError(f"khatri_rao: a {(m, n)} and b {(p, q)} need the same number of columns")
    return N.reshape(N.reshape(a, (m, 1, n)) * N.reshape(b, (1, p, n)), (m * p, n))


def _banded_dense(l_and_u, ab):
    """The square matrix whose diagonals `ab` holds in LAPACK's banded form (row u + i - j, column j)."""
    lower, upper = l_and_u
    n = _shape(ab)[-1]
    dense = N.zeros((n, n))
    for k in range(lower + upper + 1):
        offset = upper - k   # row k of `ab` is the diagonal `offset` above the main one
        start, stop = max(0, offset), n + min(0, offset)
        if stop > start:
            dense = dense + _np("diag")(ab[k, start:stop], offset)
    return dense


def solve_banded(l_and_u, ab, b, overwrite_ab=False, overwrite_b=False, check_finite=True):
    """x with a @ x = b, `a` given by its diagonals in LAPACK's banded form (`l_and_u`:
    the numbers of diagonals below and above the main one), differentiable in `ab` and `b`."""
    return L.solve(_banded_dense(l_and_u, ab), b)


def solveh_banded(ab, b, overwrite_ab=False, overwrite_b=False, lower=False, check_finite=True):
    """x with a @ x = b, `a` symmetric positive definite given by its upper (default) or
    lower diagonals in LAPACK's banded form."""
    u = _shape(ab)[0] - 1
    if lower:   # row k holds the diagonal k below the main one: as the upper form, mirrored
        full = _banded_dense((u, 0), ab)
    else:
        full = _banded_dense((0, u), ab)
    sym = full + _mT(full) - _np("diag")(_np("diagonal")(full))
    return cho_solve(cho_factor(sym, lower=True), b)


def grad_solve_triangular(ans, a, b, trans=0, lower=False, **kwargs):
    """autograd's VJP maker of `solve_triangular` for `a`: `grad_solve_triangular(x, a, b)(g)`."""
    from ..api import vjp
    return lambda g: vjp(lambda m: solve_triangular(m, b, trans=trans, lower=lower), a)[1](g)[0]


def grad_solve_banded(argnum, ans, l_and_u, a, b):
    """autograd's VJP maker of `solve_banded` for argument `argnum` (1: the bands, 2: `b`)."""
    from ..api import vjp
    return lambda g: vjp(lambda ab, rhs: solve_banded(l_and_u, ab, rhs), a, b)[1](g)[argnum - 1]


def _scipy_only(name):
    """SciPy's `scipy.linalg.<name>`, on plain arrays; staged arguments raise UnsupportedError."""
    import scipy.linalg
    from ..numpy._common import plain_only
    return plain_only(getattr(scipy.linalg, name), f"scipy.linalg.{name}",
                      "jitad computes it with SciPy, on plain arrays only (outside jit and grad; its results "
                      "may be complex)",
                      f"SciPy's `scipy.linalg.{name}` on plain arrays: `jitad.scipy.linalg.{name}(...)`. "
                      f"Staged arguments raise `UnsupportedError`.")


def _scipy_names():
    try:
        import scipy.linalg
    except ImportError:   # SciPy is optional: the names jitad computes itself are all there is
        return []
    return [n for n in scipy.linalg.__all__ if n not in globals() and n != "test"
            and callable(getattr(scipy.linalg, n))]


_SCIPY_ONLY = _scipy_names()
__all__ += ["eigvalsh", "svdvals", "lstsq", "diagsvd", "khatri_rao", "solve_banded", "solveh_banded",
            "grad_solve_triangular", "grad_solve_banded", "LinAlgError"] + _SCIPY_ONLY


def _scipy_name(name):
    """SciPy's class (`LinAlgWarning`) as it is; a function through `_scipy_only`."""
    import scipy.linalg
    value = getattr(scipy.linalg, name)
    return value if isinstance(value, type) else _scipy_only(name)


for _name in _SCIPY_ONLY:
    globals()[_name] = _scipy_name(_name)
