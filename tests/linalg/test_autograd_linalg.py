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
