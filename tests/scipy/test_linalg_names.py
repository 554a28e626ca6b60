"""`jitad.scipy.linalg`'s further SciPy names: the ones jitad stages (banded solves,
`eigvalsh`, `svdvals`, `lstsq`, `diagsvd`, `khatri_rao`, autograd's VJP makers) against
SciPy's values and autograd's/JAX's gradients; the rest are SciPy's on plain arrays and
refuse staged values."""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
import jitad.scipy.linalg as jsl
from jitad.errors import UnsupportedError
from jitad.testing import check_grads

sl = pytest.importorskip("scipy.linalg")
ag = pytest.importorskip("autograd")
agsl = pytest.importorskip("autograd.scipy.linalg")
agnp = pytest.importorskip("autograd.numpy")

RNG = np.random.default_rng(4)
AB = RNG.normal(size=(4, 6)) + np.array([[0.0], [0.0], [6.0], [0.0]])   # (1, 2) bands, diagonally dominant
B = RNG.normal(size=(6, 2))


def test_solve_banded_values_and_gradients_against_scipy_and_autograd():
    np.testing.assert_allclose(jsl.solve_banded((1, 2), AB, B), sl.solve_banded((1, 2), AB, B), rtol=1e-12)
    f = lambda m: lambda ab, b: m.sum(m.sin(sl_or(m).solve_banded((1, 2), ab, b)))   # noqa: E731
    got = jitad.grad(f(jnp), argnums=(0, 1))(AB, B[:, 0])   # (autograd's rule takes one right-hand side)
    want = ag.grad(f(agnp), argnum=(0, 1))(AB, B[:, 0])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    check_grads(lambda ab: jsl.solve_banded((1, 2), ab, B), (AB,), order=1, modes=("fwd", "rev"))
    x = sl.solve_banded((1, 2), AB, B[:, 0])
    for argnum in (1, 2):
        np.testing.assert_allclose(jsl.grad_solve_banded(argnum, x, (1, 2), AB, B[:, 0])(B[:, 1]),
                                   agsl.grad_solve_banded(argnum, x, (1, 2), AB, B[:, 0])(B[:, 1]), rtol=1e-10)


def sl_or(m):
    return jsl if m is jnp else agsl


@pytest.mark.parametrize("lower", [False, True])
def test_solveh_banded_against_scipy(lower):
    a = RNG.normal(size=(5, 5))
    spd = a @ a.T + 5.0 * np.eye(5)
    ab = np.array([np.concatenate([np.zeros(1), np.diag(spd, 1)]), np.diag(spd)]) if not lower else \
        np.array([np.diag(spd), np.concatenate([np.diag(spd, -1), np.zeros(1)])])
    banded = (spd * (np.abs(np.subtract.outer(range(5), range(5))) <= 1))
    want = sl.solveh_banded(ab, B[:5], lower=lower)
    np.testing.assert_allclose(want, np.linalg.solve(banded, B[:5]), rtol=1e-10)
    np.testing.assert_allclose(jsl.solveh_banded(ab, B[:5], lower=lower), want, rtol=1e-10)
    np.testing.assert_allclose(jitad.jit(lambda m: jsl.solveh_banded(m, B[:5], lower=lower))(ab), want, rtol=1e-10)


def test_eigvalsh_svdvals_lstsq_diagsvd_khatri_rao():
    a = RNG.normal(size=(4, 3))
    s = a.T @ a
    for fn, args in ((jsl.eigvalsh, (s,)), (jsl.svdvals, (a,)), (jsl.khatri_rao, (a, a[:2]))):
        want = getattr(sl, fn.__name__)(*args)
        np.testing.assert_allclose(fn(*args), want, rtol=1e-12)
        np.testing.assert_allclose(jitad.jit(fn)(*args), want, rtol=1e-12)
    np.testing.assert_allclose(jsl.eigvalsh(s, lower=False), sl.eigvalsh(s, lower=False), rtol=1e-12)
    np.testing.assert_allclose(jsl.lstsq(a, B[:4])[0], sl.lstsq(a, B[:4])[0], rtol=1e-12)
    for shape in ((3, 5), (5, 3)):
        np.testing.assert_array_equal(jsl.diagsvd([1.0, 2.0, 3.0], *shape), sl.diagsvd([1.0, 2.0, 3.0], *shape))
    check_grads(lambda x: jsl.svdvals(x) + jsl.khatri_rao(x, x)[:3, 0], (a,), order=1, modes=("fwd", "rev"))


def test_grad_solve_triangular_is_autograds():
    t = np.tril(RNG.normal(size=(3, 3))) + 3.0 * np.eye(3)
    b = RNG.normal(size=(3, 2))
    x = sl.solve_triangular(t, b, lower=True)
    np.testing.assert_allclose(jsl.grad_solve_triangular(x, t, b, lower=True)(b),
                               agsl.grad_solve_triangular(x, t, b, lower=True)(b), rtol=1e-10, atol=1e-12)


def test_scipy_only_names_compute_with_scipy_and_refuse_staged_values():
    a = RNG.normal(size=(3, 3))
    for name, args in (("logm", (a @ a.T + np.eye(3),)), ("eigvals", (a,)), ("null_space", (a[:2],)),
                       ("orth", (a,)), ("issymmetric", (a + a.T,))):
        want, got = getattr(sl, name)(*args), getattr(jsl, name)(*args)
        np.testing.assert_allclose(got, want, rtol=1e-12)
        with pytest.raises(UnsupportedError, match=f"scipy.linalg.{name}` of a staged value"):
            jitad.jit(getattr(jsl, name))(*args)
    assert jsl.LinAlgWarning is sl.LinAlgWarning and issubclass(jsl.LinAlgError, np.linalg.LinAlgError)
