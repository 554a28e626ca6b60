"""lu, lu_factor, lu_solve, qr_multiply, hessenberg, sqrtm and the constructors hadamard,
invpascal, fiedler_companion against SciPy (the same factors: LAPACK's conventions) and JAX
(x64), eagerly and compiled, gradients against JAX's."""
import numpy as np
import pytest
import scipy.linalg as sl

import jitad
from jitad.errors import JitadError
from jitad.scipy import linalg as J
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jl = jax.scipy.linalg

RNG = np.random.default_rng(0)
A = RNG.normal(size=(5, 5))
B = RNG.normal(size=(5, 2))
# square, wide, tall, a pivot exchange on a zero, a singular matrix (a zero pivot), ties in |pivot|
MATRICES = [A, RNG.normal(size=(4, 6)), RNG.normal(size=(6, 4)), np.array([[0.0, 1.0], [1.0, 0.0]]),
            np.array([[1.0, 2.0], [2.0, 4.0]]), np.array([[1.0, 2.0, 0.0], [-1.0, 0.0, 3.0], [1.0, 1.0, 1.0]])]


@pytest.mark.parametrize("k", range(len(MATRICES)))
def test_lu_is_scipys(k):
    m = MATRICES[k]
    for got, want in zip(J.lu(m), sl.lu(m)):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    for got, want in zip(J.lu(m, permute_l=True), sl.lu(m, permute_l=True)):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


def test_lu_factor_and_solve():
    lu, piv = J.lu_factor(A)
    LU, PIV = sl.lu_factor(A)
    np.testing.assert_allclose(lu, LU, rtol=1e-13, atol=1e-15)
    np.testing.assert_array_equal(piv, PIV)
    for trans in (0, 1, 2):
        for b in (B, B[:, 0]):
            np.testing.assert_allclose(J.lu_solve((lu, piv), b, trans=trans), sl.lu_solve((LU, PIV), b, trans=trans),
                                       rtol=1e-12)
    with pytest.raises(JitadError, match="trans"):
        J.lu_solve((lu, piv), B, trans=3)
    with pytest.raises(JitadError, match="2-D"):
        J.lu(np.ones((2, 3, 3)))


def test_qr_multiply_and_hessenberg():
    c = RNG.normal(size=(3, 5))
    for mode, cc in (("right", c), ("left", c.T)):
        for got, want in zip(J.qr_multiply(A, cc, mode=mode), sl.qr_multiply(A, cc, mode=mode)):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    for got, want in zip(J.hessenberg(A, calc_q=True), sl.hessenberg(A, calc_q=True)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(J.hessenberg(np.triu(A, -1)), sl.hessenberg(np.triu(A, -1)), atol=1e-14)   # no reflection


def test_sqrtm():
    s = A @ A.T + np.eye(5)
    np.testing.assert_allclose(J.sqrtm(s), sl.sqrtm(s), rtol=1e-11)
    nonsym = np.array([[4.0, 1.0, 0.0], [0.5, 3.0, 0.2], [0.0, 0.3, 2.0]])
    np.testing.assert_allclose(J.sqrtm(nonsym), sl.sqrtm(nonsym), rtol=1e-12)
    np.testing.assert_allclose(J.sqrtm(nonsym), np.real(jl.sqrtm(nonsym)), rtol=1e-10)
    assert np.all(np.isnan(J.sqrtm(-np.eye(2))))   # the root is complex


@pytest.mark.parametrize("n", [1, 2, 3, 6, 10])
def test_schur(n):
    rng = np.random.default_rng(n)
    for a in (rng.normal(size=(n, n)), np.diag(np.arange(n, 0.0, -1.0)) + np.triu(rng.normal(size=(n, n)), 1)):
        t, z = J.schur(a)
        np.testing.assert_allclose(z @ t @ z.T, a, atol=1e-13 * n)
        np.testing.assert_allclose(z.T @ z, np.eye(n), atol=1e-13 * n)
        assert not np.any(np.tril(t, -2))
        sub = np.diag(t, -1)
        assert not np.any(sub[:-1] * sub[1:])   # blocks of at most 2 x 2
        for i in np.flatnonzero(sub):   # a complex pair: equal diagonal, off-diagonals of opposite signs
            assert abs(t[i, i] - t[i + 1, i + 1]) < 1e-12 * np.abs(t).max() and t[i, i + 1] * t[i + 1, i] < 0
        np.testing.assert_allclose(np.sort_complex(np.linalg.eigvals(t)), np.sort_complex(np.linalg.eigvals(a)),
                                   atol=1e-12 * n)
        if n <= 3:   # LAPACK's order too, for small matrices
            np.testing.assert_allclose(np.abs(np.diag(t)), np.abs(np.diag(sl.schur(a)[0])), rtol=1e-12)
    np.testing.assert_array_equal(J.schur(np.diag([3.0, 1.0, 2.0]))[0], sl.schur(np.diag([3.0, 1.0, 2.0]))[0])


def test_schur_declines_what_it_cannot_give():
    with pytest.raises(JitadError, match="complex"):
        J.schur(A, output="complex")
    with pytest.raises(JitadError, match="plain arrays"):
        jitad.jit(J.schur)(A)


def test_constructors():
    a = np.arange(2.0, 9.0)
    for n in (1, 2, 3, 4, 7):
        np.testing.assert_array_equal(J.fiedler_companion(a[:n]), sl.fiedler_companion(a[:n]))
    np.testing.assert_array_equal(J.fiedler_companion(a), jl.fiedler_companion(a))
    for kind in ("symmetric", "lower", "upper"):
        np.testing.assert_array_equal(J.invpascal(6, kind), sl.invpascal(6, kind))
        np.testing.assert_allclose(J.invpascal(6, kind) @ J.pascal(6, kind), np.eye(6))
    np.testing.assert_array_equal(J.hadamard(8), sl.hadamard(8))
    np.testing.assert_array_equal(J.hadamard(4, float), jl.hadamard(4, float))
    with pytest.raises(JitadError, match="power of 2"):
        J.hadamard(6)


def test_compiled_values_are_the_eager_ones():
    def run(m, b):
        return J.lu(m), J.lu_solve(J.lu_factor(m), b, trans=1), J.hessenberg(m), J.sqrtm(m @ m.T + np.eye(5)), \
            J.fiedler_companion(m[0])
    for got, want in zip(jitad.tree_util.tree_leaves(jitad.jit(run)(A, B)), jitad.tree_util.tree_leaves(run(A, B))):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


@pytest.mark.slow
def test_gradients_against_jax():
    def mine(m):
        p, l_, u = J.lu(m)
        return np.sum(J.lu_solve(J.lu_factor(m), B) ** 2) + np.sum(u * u) + np.sum(l_ * 0.5)

    def theirs(m):
        p, l_, u = jl.lu(m)
        return (jax.numpy.sum(jl.lu_solve(jl.lu_factor(m), B) ** 2) + jax.numpy.sum(u * u) + jax.numpy.sum(l_ * 0.5)
)
    np.testing.assert_allclose(jitad.grad(mine)(A), jax.grad(theirs)(A), rtol=1e-9)
    # JAX has no rule for hessenberg: the random-direction check against finite differences
    check_grads(lambda m: J.hessenberg(m, calc_q=True), (A[:4, :4],), order=1, modes=("rev",), rtol=1e-5)
    # nor for sqrtm (its Schur form): the derivative X' of X = sqrtm(S) solves X X' + X' X = S'
    s = A[:3, :3] @ A[:3, :3].T + np.eye(3)
    check_grads(J.sqrtm, (s,), order=1, modes=("rev",), rtol=1e-5)
