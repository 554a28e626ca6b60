"""`jitad.numpy.linalg` as autograd programs call it: lists of traced numbers as operands,
and autograd's helpers. Values and gradients against autograd and NumPy."""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.testing import check_grads

ag = pytest.importorskip("autograd")
agnp = pytest.importorskip("autograd.numpy")


@pytest.mark.parametrize("ord", [None, 3])
def test_norm_of_a_list_holding_traced_numbers(ord):
    def f(m):
        return lambda x: m.linalg.norm([x, x + 2.0, 3.0 * x], ord=ord)
    for x in (0.0, 0.7, -1.3):
        assert jitad.grad(f(jnp))(x) == pytest.approx(ag.grad(f(agnp))(x), rel=1e-12)
        assert f(jnp)(x) == pytest.approx(np.linalg.norm([x, x + 2.0, 3.0 * x], ord=ord))
    check_grads(f(jnp), (0.7,), order=2)


def test_norm_of_nested_lists_is_a_matrix_norm():
    f = lambda x: jnp.linalg.norm([[x, 1.0], [2.0, x * x]], ord="fro")   # noqa: E731
    g = lambda x: agnp.linalg.norm(agnp.array([[x, 1.0], [2.0, x * x]]), ord="fro")   # noqa: E731
    assert jitad.grad(f)(1.5) == pytest.approx(ag.grad(g)(1.5), rel=1e-12)


def test_private_dot_multiplies_stacks_of_matrices():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 4, 2))
    np.testing.assert_allclose(jnp.linalg._dot(a, b), a @ b, rtol=1e-13)
    f = lambda a: jnp.sum(jnp.linalg.pinv(jnp.linalg._dot(jnp.linalg.T(a), a)))   # noqa: E731
    g = lambda a: agnp.sum(agnp.linalg.pinv(agnp.linalg._dot(agnp.linalg.T(a), a)))   # noqa: E731
    np.testing.assert_allclose(jitad.grad(f)(a[0]), ag.grad(g)(a[0]), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_differentiates_the_triangle_it_reads(uplo):
    """NumPy's eigh reads one triangle: on a matrix that is not symmetric its derivatives
    are those of that triangle's function (autograd's), in both modes."""
    rng = np.random.default_rng(2)
    a, wv = rng.normal(size=(2, 4, 4)), rng.normal(size=(4, 4))
    ours = lambda m: jnp.sum(jnp.linalg.eigh(m, uplo)[0] ** 3) + jnp.sum(jnp.linalg.eigh(m, uplo)[1] ** 2 * wv)  # noqa: E731
    theirs = lambda m: agnp.sum(agnp.linalg.eigh(m, uplo)[0] ** 3) + agnp.sum(agnp.linalg.eigh(m, uplo)[1] ** 2 * wv)  # noqa: E731
    g = jitad.grad(ours)(a)
    np.testing.assert_allclose(g, ag.grad(theirs)(a), rtol=1e-9, atol=1e-12)
    assert np.all((np.triu(g[0], 1) if uplo == "L" else np.tril(g[0], -1)) == 0.0)
    check_grads(lambda m: jnp.linalg.eigh(m, uplo)[0], (a,), order=1, modes=("fwd", "rev"))


def test_eigh_on_symmetric_input_is_jaxs_derivative():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(3)
    b = rng.normal(size=(4, 4))
    s, t = b + b.T, rng.normal(size=(4, 4))
    t = t + t.T   # a symmetric direction: both libraries' derivatives agree along it
    f = lambda m: jnp.sum(jnp.linalg.eigh(m)[0] * np.arange(4.0))   # noqa: E731
    jf = lambda m: jax.numpy.sum(jax.numpy.linalg.eigh(m)[0] * np.arange(4.0))   # noqa: E731
    np.testing.assert_allclose(np.sum(jitad.grad(f)(s) * t), np.sum(jax.grad(jf)(s) * t), rtol=1e-10)
    np.testing.assert_allclose(jitad.jvp(f, (s,), (t,))[1], jax.jvp(jf, (s,), (t,))[1], rtol=1e-10)
