"""An elementwise op of a reshaped value and scalars runs before the reshape
(`scalar_ops_before_reshapes` in jitad.ir.passes), inside the fused loop that makes the
value: a residual's sign behind `reshape(points - hand)` in every direction of a
Jacobian. Values and Jacobians against NumPy and JAX; where the reshaped value has
another reader, or the other operand is a tensor, the op stays where it is."""
import numpy as np
import pytest

import jitad
from jitad.ir import passes

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

X = np.linspace(-1.0, 2.0, 24).reshape(4, 6)


def _loops(ir, depth=0):
    """Lines of the printed program at `depth` (0: main, 1: a loop's body) that loop over
    elements: fused loops and lone `mul`s."""
    return [line for line in ir.splitlines() if line[2 + 4 * depth:3 + 4 * depth] not in (" ", "")
            and line.startswith(" " * (2 + 4 * depth)) and ("fused[" in line or " = mul " in line)]


def _residuals(m, x, w):
    """points − hand as a residual vector: the sign of the tangent comes after the reshape."""
    hand = m.sin(x) * w[0] + x * x * w[1]
    return m.reshape(1.5 - hand, (-1,)) * -2.0


def test_the_op_joins_the_loop_and_values_hold():
    w = np.array([0.5, -0.25])
    f = jitad.jit(lambda x: _residuals(jitad.numpy, x, w))
    np.testing.assert_allclose(f(X), _residuals(np, X, w), rtol=1e-15)
    assert len(_loops(f.ir)) == 1


def test_jacobian_directions_keep_the_sign_in_their_loop(monkeypatch):
    w = np.array([0.5, -0.25])
    jac = jitad.jit(jitad.jacfwd(lambda w: _residuals(jitad.numpy, X, w)))
    want = jax.jacfwd(lambda w: _residuals(jnp, X, w))(w)
    np.testing.assert_allclose(jac(w), want, rtol=1e-14)
    big = jitad.jit(jitad.jacfwd(lambda x: _residuals(jitad.numpy, x, w)))   # 24 directions: a FOR loop
    np.testing.assert_allclose(big(X), jax.jacfwd(lambda x: _residuals(jnp, x, w))(X), rtol=1e-14)
    assert len(_loops(big.ir, depth=1)) == 2   # in the loop over directions: the basis vector, the tangent
    monkeypatch.setattr(passes, "PIPELINE", [s for s in passes.PIPELINE if s[0] != "scalar_ops_before_reshapes"])
    without = jitad.jit(jitad.jacfwd(lambda x: _residuals(jitad.numpy, x, w)))
    np.testing.assert_array_equal(without(X), big(X))
    assert len(_loops(without.ir, depth=1)) == 3   # the sign in a loop of its own


def test_other_readers_or_tensor_operands_keep_the_op_after_the_reshape():
    y = np.arange(24.0)

    def shared(x):   # the reshaped value is read twice
        r = jitad.numpy.reshape(jitad.sin(x) + 1.0, (-1,))
        return r * 3.0 + jitad.numpy.sum(r)

    def tensor(x):   # the other operand is a tensor of the reshaped shape
        return jitad.numpy.reshape(jitad.sin(x) + 1.0, (-1,)) * y
    for fn, ref in ((shared, lambda x: (np.sin(x) + 1.0).reshape(-1) * 3.0 + np.sum(np.sin(x) + 1.0)),
                    (tensor, lambda x: (np.sin(x) + 1.0).reshape(-1) * y)):
        f = jitad.jit(fn)
        np.testing.assert_allclose(f(X), ref(X), rtol=1e-14)
        assert len(_loops(f.ir)) >= 2   # the op in a loop after the reshape


def test_a_product_s_reshaped_result_keeps_the_op_with_the_loop_reading_it():
    """No loop makes a product's result: the scale behind its reshape (attention's
    `q @ kᵀ * scale`, heads split) stays after the reshape, in the loop of the work after it."""
    q, mask = np.linspace(-1.0, 1.0, 4 * 6 * 5).reshape(4, 6, 5), np.linspace(0.0, 1.0, 144).reshape(2, 2, 6, 6)

    def scores(m, q):
        att = m.reshape(m.matmul(q, m.swapaxes(q, 1, 2)), (2, 2, 6, 6)) * 0.5
        return m.tanh(att) * mask
    f = jitad.jit(lambda q: scores(jitad.numpy, q))
    np.testing.assert_allclose(f(q), scores(np, q), rtol=1e-14)
    assert len(_loops(f.ir)) == 1   # the scale, tanh and the product in one loop
