"""`lax.linalg`: the factorizations under `jitad.linalg` with `lax`'s argument names."""
from .. import linalg as _L
from .. import numeric as N


def cholesky(x, *, symmetrize_input=True):
    """The lower Cholesky factor of a symmetric positive definite matrix (the average of x
    and its transpose with `symmetrize_input`): `lax.linalg.cholesky(a)`."""
    if symmetrize_input:
        x = (x + N.NUMPY_API["swapaxes"](x, -1, -2)) / 2.0
    return _L.cholesky(x)


def triangular_solve(a, b, *, left_side=False, lower=False, transpose_a=False, conjugate_a=False,
                     unit_diagonal=False):
    """x with a @ x = b (`left_side`) or x @ a = b, for triangular `a`:
    `lax.linalg.triangular_solve(L, b, left_side=True, lower=True)`."""
    swap = lambda m: N.NUMPY_API["swapaxes"](m, -1, -2)
    if unit_diagonal:
        n = a.shape[-1]
        eye = N.NUMPY_API["eye"](n)
        a = a * (1.0 - eye) + eye
    if left_side:
        return _L.solve_triangular(a, b, trans=1 if transpose_a else 0, lower=lower)
    # x a = b  <=>  a^T x^T = b^T
    return swap(_L.solve_triangular(a, swap(b), trans=0 if transpose_a else 1, lower=lower))


def eigh(x, *, lower=True, symmetrize_input=True, sort_eigenvalues=True, subset_by_index=None):
    """Eigenvectors (columns) and ascending eigenvalues of a symmetric matrix, in that order
    (as `lax.linalg.eigh`): `v, w = lax.linalg.eigh(a)`."""
    w, v = _L.eigh(x, "L" if lower else "U", symmetrize_input=symmetrize_input)
    return v, w


def qr(x, *, pivoting=False, full_matrices=True, use_magma=None):
    """Q and R of a matrix (`full_matrices=False`: the reduced factors)."""
    return _L.qr(x, "complete" if full_matrices else "reduced")


def svd(x, *, full_matrices=True, compute_uv=True, subset_by_index=None, algorithm=None):
    """u, s, vh of a matrix (`compute_uv=False`: s only)."""
    return _L.svd(x, full_matrices, compute_uv)
