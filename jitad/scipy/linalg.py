"""`jitad.scipy.linalg`: SciPy's linear algebra names and conventions on `jitad.linalg`
(`cholesky(a, lower=False)` gives the upper factor, as SciPy)."""
from .. import linalg as L
from .. import numeric as N
from ..linalg import det, inv, norm, pinv, qr, svd  # noqa: F401
from ..staging import is_staged

__all__ = ["cholesky", "cho_factor", "cho_solve", "solve_triangular", "solve", "inv", "det", "eigh",
           "norm", "pinv", "qr", "svd"]


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
