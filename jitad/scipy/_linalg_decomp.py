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


# -- the real Schur form (plain arrays, as jitad.linalg.eig) --------------------------------------

def _rotate(h, z, k, c, s):
    """Apply the plane rotation [[c, -s], [s, c]] to rows and columns k, k + 1 of h (a
    similarity) and to columns k, k + 1 of z."""
    g = np.array([[c, -s], [s, c]])
    h[k:k + 2, :] = g.T @ h[k:k + 2, :]
    h[:, k:k + 2] = h[:, k:k + 2] @ g
    z[:, k:k + 2] = z[:, k:k + 2] @ g


def _standardize(h, z, k):
    """Make the 2 x 2 block at k triangular (real eigenvalues) or of equal diagonal entries
    (a complex pair), as LAPACK leaves it."""
    a, b, c, d = h[k, k], h[k, k + 1], h[k + 1, k], h[k + 1, k + 1]
    p, disc = 0.5 * (a - d), (0.5 * (a - d)) ** 2 + b * c
    if disc >= 0:   # an eigenvalue lam with eigenvector (b, lam - a) or (lam - d, c)
        lam = 0.5 * (a + d) + np.copysign(np.sqrt(disc), p)
        v = np.array([b, lam - a]) if abs(b) + abs(lam - a) >= abs(lam - d) + abs(c) else np.array([lam - d, c])
        v = v / np.hypot(*v)
        _rotate(h, z, k, v[0], v[1])
        h[k + 1, k] = 0.0
    else:   # the angle equalizing the diagonal: (a - d) cos 2t + (b + c) sin 2t = 0
        t = 0.5 * np.arctan2(d - a, b + c)
        _rotate(h, z, k, np.cos(t), np.sin(t))
        h[k, k] = h[k + 1, k + 1] = 0.5 * (h[k, k] + h[k + 1, k + 1])


def _active_start(h, hi):
    """The first row of the unreduced block ending at row hi (a negligible subdiagonal entry
    above it is set to zero)."""
    eps = np.finfo(np.float64).eps
    lo = hi
    while lo > 0 and abs(h[lo, lo - 1]) > eps * (abs(h[lo, lo]) + abs(h[lo - 1, lo - 1])):
        lo -= 1
    if lo > 0:
        h[lo, lo - 1] = 0.0
    return lo


def _francis_step(h, z, lo, hi, exceptional):
    """One explicit double-shift QR step on the block lo..hi (shifts: the eigenvalues of its
    trailing 2 x 2, or an exceptional pair to break a cycle)."""
    w = h[lo:hi + 1, lo:hi + 1]
    if exceptional:
        s = 1.5 * (abs(h[hi, hi - 1]) + abs(h[hi - 1, hi - 2] if hi - 2 >= lo else 0.0))
        trace, det = s, s * s / 1.5
    else:
        trace = h[hi - 1, hi - 1] + h[hi, hi]
        det = h[hi - 1, hi - 1] * h[hi, hi] - h[hi - 1, hi] * h[hi, hi - 1]
    m = w @ w - trace * w + det * np.eye(hi - lo + 1)
    q = np.linalg.qr(m)[0]
    h[lo:hi + 1, :] = q.T @ h[lo:hi + 1, :]
    h[:, lo:hi + 1] = h[:, lo:hi + 1] @ q
    z[:, lo:hi + 1] = z[:, lo:hi + 1] @ q
    h[:] = np.triu(h, -1)   # the step keeps h Hessenberg; what lies below is rounding


def schur(a, output="real"):
    """The real Schur decomposition a = z @ t @ z.T: z orthogonal, t quasi upper triangular
    (1 x 1 blocks for real eigenvalues, 2 x 2 blocks of equal diagonal for complex pairs), by
    Francis' double-shift QR iteration on the Hessenberg form. Like `jitad.linalg.eig`, on
    plain arrays only and not differentiated (JAX's has no derivative either); `output`
    must be 'real' (complex dtypes are out of jitad's scope)."""
    if output != "real":
        raise ArgumentError(f"schur: output={output!r}; jitad has no complex dtypes: use output='real'")
    if N.is_staged(a):
        from ..errors import StagingError
        raise StagingError("`schur` on a staged value: its iteration runs on plain arrays (outside jit and grad)")
    h, z = (np.array(v, np.float64) for v in hessenberg(np.asarray(a, np.float64), calc_q=True))
    hi, steps = N._shape(h)[0] - 1, 0
    while hi > 0:
        lo = _active_start(h, hi)
        if lo >= hi - 1:   # a 1 x 1 or 2 x 2 block has split off
            if lo == hi - 1:
                _standardize(h, z, lo)
                if h[hi, hi - 1] != 0.0:   # a complex pair stays a 2 x 2 block
                    hi -= 2
                    steps = 0
                    continue
            hi -= 1
            steps = 0
            continue
        if steps > 60 * N._shape(h)[0]:
            raise ArgumentError("schur: the QR iteration did not converge (is the matrix finite?)")
        _francis_step(h, z, lo, hi, exceptional=steps in (10, 20))
        steps += 1
    return h, z
