"""`jitad.nn.one_hot` (JAX's spelling) times a matrix is the matrix's rows at the labels, as
`jitad.one_hot`'s is: its gradient adds the cotangent's rows and skips the labels outside
the classes itself (`masked_row_adds`). Values and gradients against JAX in float64 and
float32, int64 and int32 labels with repeats and labels outside the classes."""
import numpy as np
import pytest

import jitad
from jitad.ir.ops import Op
from jitad.testing import check_grads

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)

R = np.random.default_rng(5)
E, B = R.standard_normal((6, 8)), R.standard_normal(8)
LABELS = [0, 5, 2, 7, -1, 5, 5]   # repeats, and two outside [0, 6)


def _loss(m, e, b, labels):
    return m.numpy.sum(m.numpy.tanh(m.nn.one_hot(labels, 6, dtype=e.dtype) @ e + b) ** 2)


@pytest.mark.parametrize("dtype, int_type, tol", [(np.float64, np.int64, 1e-13), (np.float32, np.int32, 2e-5)])
def test_rows_at_the_labels_against_jax(dtype, int_type, tol):
    e, b, labels = E.astype(dtype), B.astype(dtype), np.array(LABELS, int_type)
    f = jitad.jit(jitad.value_and_grad(lambda e, b, l: _loss(jitad, e, b, l), argnums=(0, 1)))
    value, grads = f(e, b, labels)
    want, want_grads = jax.value_and_grad(lambda e, b, l: _loss(jax, e, b, l), argnums=(0, 1))(e, b, labels)
    np.testing.assert_allclose(value, want, rtol=tol)
    for got, ref in zip(grads, want_grads):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
    scatters = [n for n in f._last.program.main.nodes if n.op == Op.SLOT_SCATTER_ADD]
    assert scatters and all(n.attrs.get("skip_outside") for n in scatters)


def test_gradients_check():
    labels = np.array(LABELS)
    check_grads(lambda e, b: _loss(jitad, e, b, labels), (E, B), order=1, modes=["rev"])


def test_other_forms_stay_comparisons():
    labels = np.array([0, 2, -1, 3])
    want = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(jitad.jit(lambda l: jitad.nn.one_hot(l, 3))(labels), want)
    np.testing.assert_array_equal(jitad.jit(lambda l: jitad.nn.one_hot(l, 3, axis=0))(labels), want.T)
    assert jitad.jit(lambda l: jitad.nn.one_hot(l, 0))(labels).shape == (4, 0)
