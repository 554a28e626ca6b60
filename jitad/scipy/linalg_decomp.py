"""LU with partial pivoting (`lu`, `lu_factor`, `lu_solve`), `qr_multiply`, the Hessenberg
reduction and the real matrix square root of `jitad.scipy.linalg`, composed of jitad's array
operations (so they compile, and differentiate where the decomposition is smooth).

The factorizations follow LAPACK's conventions (the pivot of largest magnitude, first among
equals; Householder reflectors with beta = -sign(alpha) |x|), so their factors are SciPy's.

>>> from jitad.scipy import linalg
>>> p, l, u = linalg.lu(np.array([[1.0, 2.0], [3.0, 4.0]]))
>>> u.tolist()
[[3.0, 4.0], [0.0, 0.6666666666666667]]
"""
import numpy as np

from .. import linalg as L
from .. import numeric as N
from .. import numpy_api as A
from ..errors import ArgumentError


def _matrix(a, who):
    a = a if N.is_staged(a) else np.asarray(a, np.float64 if np.asarray(a).dtype.kind in "biu" else None)
    if len(N._shape(a)) != 2:
        raise ArgumentError(f"{who}: give one matrix (2-D), got shape {N._shape(a)}; vmap it for a batch")
    return a


def _swap_rows(x, k, p):
    """x with its rows k (a static int) and p (an int, maybe staged) exchanged."""
    rows = np.arange(N._shape(x)[0])
    at_p = (rows == p)[:, None] if len(N._shape(x)) == 2 else rows == p
    row_k, row_p = x[k], N.sum(N.where(at_p, x, 0.0), axis=0)
    at_k = (rows == k)[:, None] if len(N._shape(x)) == 2 else rows == k
    return N.where(at_k, row_p, N.where(at_p, row_k, x))


def _getrf(a):
    """LAPACK's getrf: (the packed factors, L below the diagonal and U on and above it, and
    the pivot of each step, as a list of ints)."""
    m, n = N._shape(a)
    rows, cols = np.arange(m)[:, None], np.arange(n)[None, :]
    lu, pivots = a, []
    for k in range(min(m, n)):
        p = A.argmax(N.where(rows[:, 0] >= k, N.abs(lu[:, k]), -1.0))
        pivots.append(p)
        lu = _swap_rows(lu, k, p)
        pivot = lu[k, k]
        safe = N.where(pivot == 0, 1.0, pivot)   # a zero pivot leaves its column (LAPACK's info > 0)
        f = N.where((rows[:, 0] > k) & (pivot != 0), lu[:, k] / safe, 0.0)
        lu = N.where((rows > k) & (cols == k), f[:, None], lu - f[:, None] * N.where(cols > k, lu[k][None, :], 0.0))
    return lu, pivots


def _permutation(pivots, m):
    """The one-hot matrix P with P a = L U for the row exchanges `pivots`."""
    p = np.eye(m)
    for k, piv in enumerate(pivots):
        p = _swap_rows(p, k, piv)
    return p


def lu_factor(a, overwrite_a=False, check_finite=True):
    """(lu, piv): L (unit diagonal, below) and U (on and above the diagonal) packed in one
    matrix, and the row exchanged with row i at step i, as SciPy's: `lu_solve(lu_factor(a), b)`."""
    lu, pivots = _getrf(_matrix(a, "lu_factor"))
    return lu, N.stack([N.convert(p, "i64") if N.is_staged(p) else np.int64(p) for p in pivots]) \
        if pivots else np.zeros(0, np.int64)


def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    """The LU decomposition with partial pivoting, a = p @ l @ u (`permute_l`: (p @ l, u));
    l is m x k with a unit diagonal, u is k x n, k = min(m, n)."""
    a = _matrix(a, "lu")
    m, n = N._shape(a)
    k = min(m, n)
    packed, pivots = _getrf(a)
    l_part = N.where(np.arange(m)[:, None] > np.arange(k)[None, :], packed[:, :k], 0.0) + np.eye(m, k)
    u = N.where(np.arange(k)[:, None] <= np.arange(n)[None, :], packed[:k], 0.0)
    p = N.NUMPY_API["swapaxes"](_permutation(pivots, m), 0, 1)
    return (N.matmul(p, l_part), u) if permute_l else (p, l_part, u)


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """x with a @ x = b (trans=0) or a.T @ x = b (trans=1 or 2), from `lu_factor(a)`."""
    if trans not in (0, 1, 2):
        raise ArgumentError(f"lu_solve: trans={trans!r}; use 0, 1 or 2 (2 is 1 for real matrices)")
    packed, piv = lu_and_piv
    n = N._shape(packed)[0]
    p = _permutation([piv[k] for k in range(N._shape(piv)[0])], n)
    lower = N.where(np.tri(n, k=-1, dtype=bool), packed, 0.0) + np.eye(n)
    upper = N.where(np.tri(n, dtype=bool).T, packed, 0.0)
    if trans == 0:
        y = L.solve_triangular(lower, N.matmul(p, b), lower=True)
        return L.solve_triangular(upper, y, lower=False)
    y = L.solve_triangular(upper, b, trans=1, lower=False)
    return N.matmul(N.NUMPY_API["swapaxes"](p, 0, 1), L.solve_triangular(lower, y, trans=1, lower=True))


def qr_multiply(a, c, mode="right", pivoting=False, conjugate=False, overwrite_a=False, overwrite_c=False):
    """(c @ q, r) for mode='right', (q @ c, r) for 'left', with q, r the economic QR of `a`."""
    if pivoting:
        raise ArgumentError("qr_multiply: pivoting=True is not supported; use pivoting=False")
    if mode not in ("right", "left"):
        raise ArgumentError(f"qr_multiply: mode={mode!r}; use 'right' or 'left'")
    q, r = L.qr(a, mode="reduced")
    return (N.matmul(c, q) if mode == "right" else N.matmul(q, c)), r


def _reflector(x):
    """LAPACK's Householder reflector of x: (v with v[0] = 1, tau, beta) with
    (I - tau v v^T) x = beta e_0."""
    alpha, rest = x[0], x[1:]
    norm_rest = N.sqrt(N.sum(rest * rest))
    plain = norm_rest == 0   # nothing to annihilate: the identity
    beta = N.where(alpha >= 0, -1.0, 1.0) * N.sqrt(alpha * alpha + norm_rest * norm_rest)
    beta = N.where(plain, alpha, beta)
    denom = N.where(plain, 1.0, alpha - beta)
    v = N.concatenate([np.ones(1), rest / denom])
    tau = N.where(plain, 0.0, (beta - alpha) / N.where(plain, 1.0, beta))
    return v, tau, beta


def _outer(x, y):
    return x[:, None] * y[None, :]


def hessenberg(a, *, calc_q=False, overwrite_a=False, check_finite=True):
    """The upper Hessenberg form h = q.T @ a @ q by Householder reflections (LAPACK's gehrd):
    h, or (h, q) with `calc_q=True`."""
    h = _matrix(a, "hessenberg")
    n = N._shape(h)[0]
    q = np.eye(n)
    for k in range(n - 2):
        v, tau, _ = _reflector(h[k + 1:, k])
        v = N.concatenate([np.zeros(k + 1), v])
        h = h - tau * _outer(v, N.matmul(v, h))
        h = h - tau * _outer(N.matmul(h, v), v)
        q = q - tau * _outer(N.matmul(q, v), v)
    h = N.where(np.tri(n, k=-2, dtype=bool), 0.0, h)
    return (h, q) if calc_q else h


def sqrtm(A_, blocksize=1):
    """The principal square root of a real matrix without eigenvalues on the closed negative
    real axis, by Denman and Beavers' iteration (real, as SciPy's for such matrices; JAX's
    answer is complex with this real part); NaN where the iteration does not settle (a
    negative or zero eigenvalue: the root is complex or does not exist)."""
    a = _matrix(A_, "sqrtm")
    n = N._shape(a)[0]
    y, z = a, np.eye(n)
    for _ in range(40):
        y, z = 0.5 * (y + L.inv(z)), 0.5 * (z + L.inv(y))
    residual = N.max(N.abs(N.matmul(y, y) - a))
    settled = residual <= 1e-8 * N.maximum(N.max(N.abs(a)), 1e-300)
    return N.where(settled, y, np.nan)
