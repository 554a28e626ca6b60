"""A batched product of a transposed operand (`q @ k.swapaxes(-1, -2)`) reads the operand in
place with BLAS's transpose flag: no transpose is copied, forward or backward (the gradient
comes out in the operand's own layout); values and gradients are JAX's (and `x @ W.T`'s)."""
import numpy as np
import pytest

import jitad


def _lowered(f, *args):
    g = jitad.jit(f)
    g(*args)
    return str(g.ir)


@pytest.mark.parametrize("case", ["batched", "matrix"])
def test_transposed_operands_are_read_in_place_and_gradients_agree_with_jax(case):
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(0)
    if case == "batched":
        a, b = rng.standard_normal((2, 3, 5, 4)).astype(np.float32), rng.standard_normal((2, 3, 6, 4)).astype(np.float32)
        prod = lambda m, a, b: a @ m.numpy.swapaxes(b, -1, -2)   # noqa: E731
    else:
        a, b = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((6, 4)).astype(np.float32)
        prod = lambda m, a, b: a @ b.T   # noqa: E731
    loss = lambda m: lambda a, b: m.numpy.sum(m.numpy.tanh(prod(m, a, b)) * prod(m, a, b))   # noqa: E731
    grad = jitad.grad(loss(jitad), argnums=(0, 1))
    text = _lowered(grad, a, b)
    if case == "batched":   # (a matrix's transpose stays a copy: `small_products` reads its rows in loops)
        assert "transpose" not in text and "tb=True" in text
    want = jax.grad(loss(jax), argnums=(0, 1))(a, b)
    for g, w in zip(grad(a, b), want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jitad.jit(lambda a, b: prod(jitad, a, b))(a, b), np.asarray(prod(jax, a, b)), rtol=1e-5, atol=1e-6)
    jitad.testing.check_grads(lambda a, b: prod(jitad, a, b), (a.astype(np.float64), b.astype(np.float64)), order=1)
