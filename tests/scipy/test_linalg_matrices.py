"""jitad.scipy.linalg's special matrices and matrix functions against SciPy and JAX (x64):
values, expm's gradient against JAX's and check_grads, and staging."""
import numpy as np
import pytest
import scipy.linalg as sl

import jitad
from jitad.errors import JitadError
from jitad.scipy import linalg as L
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.scipy.linalg as jl  # noqa: E402

RNG = np.random.default_rng(0)
A, E = RNG.normal(size=(4, 4)), RNG.normal(size=(4, 4))
B, C = RNG.normal(size=(3, 3)), RNG.normal(size=(4, 3))
c, r, a = np.array([1.0, 2.0, 3.0]), np.array([9.0, 5.0, 6.0, 7.0]), np.array([2.0, -3.0, 1.0, 4.0])

CASES = [("block_diag", (A[:2, :3], np.array([[1.0]]), c)), ("toeplitz", (c, r)), ("toeplitz", (c,)),
         ("hankel", (c, r)), ("hankel", (c,)), ("circulant", (c,)), ("companion", (a,)), ("hilbert", (4,)),
         ("invhilbert", (4,)), ("pascal", (4,)), ("pascal", (4, "lower")), ("pascal", (4, "upper")),
         ("helmert", (4,)), ("helmert", (4, True)), ("leslie", (a, c)), ("fiedler", (a,)),
         ("expm", (A,)), ("expm", (30.0 * A,)), ("expm", (np.zeros((3, 3)),)), ("expm_frechet", (A, E)),
         ("polar", (A,)), ("polar", (A[:, :3],)), ("solve_sylvester", (A, B, C))]
CASES += [("convolution_matrix", (a, n, mode)) for n in (2, 3, 6) for mode in ("full", "same", "valid")]


def _same(mine, want, rtol, msg):
    if isinstance(want, tuple):
        for m, w in zip(mine, want):
            np.testing.assert_allclose(m, w, rtol=rtol, atol=1e-12, err_msg=msg)
    else:
        np.testing.assert_allclose(mine, want, rtol=rtol, atol=1e-12, err_msg=msg)


@pytest.mark.parametrize("name,args", CASES, ids=[f"{n}{i}" for i, (n, _) in enumerate(CASES)])
def test_against_scipy_and_jax(name, args):
    mine = getattr(L, name)(*args)
    _same(mine, getattr(sl, name)(*args), 1e-12, "SciPy")
    if name != "pascal":   # JAX builds Pascal matrices in float32 approximations; SciPy's (and jitad's) are exact
        _same(mine, getattr(jl, name)(*args), 1e-10, "JAX")


def test_eigh_tridiagonal():
    got = L.eigh_tridiagonal(a, c, eigvals_only=True)
    np.testing.assert_allclose(got, sl.eigvalsh_tridiagonal(a, c), rtol=1e-13)
    np.testing.assert_allclose(got, jl.eigh_tridiagonal(a, c, eigvals_only=True), rtol=1e-12)
    with pytest.raises(JitadError, match="eigvals_only"):
        L.eigh_tridiagonal(a, c)


def test_expm_gradients_and_staging():
    loss = lambda f: lambda m: (f(m) ** 2).sum()
    np.testing.assert_allclose(jitad.grad(loss(L.expm))(A), jax.grad(loss(jl.expm))(A), rtol=1e-10)
    check_grads(lambda m: L.expm(m)[0, 1], (0.3 * A,), order=1)
    np.testing.assert_allclose(jitad.jit(L.expm)(A), sl.expm(A), rtol=1e-12)
    np.testing.assert_allclose(jitad.jit(lambda x, y: L.solve_sylvester(x, B, y))(A, C), sl.solve_sylvester(A, B, C),
                               rtol=1e-12)
