"""The gradient of `one_hot(labels, n) @ W` adds the cotangent's rows at the labels that lie
in [0, n) and skips the others itself: no masked copy of the cotangent first."""
import numpy as np
import pytest

import jitad
from jitad.ir.ops import Op

V, H = 6, 8


def _loss(E, b, labels):
    h = jitad.tanh(jitad.one_hot(labels, V) @ E + b)
    return jitad.sum(h * h)


@pytest.mark.parametrize("labels", [[0, 5, 2, 7, -1, 5], [3, 1, 1, 0]])
def test_labels_outside_the_rows_add_nothing_and_no_mask_is_made(labels):
    r = np.random.default_rng(len(labels))
    E, b, labels = r.normal(size=(V, H)), r.normal(size=H), np.array(labels)
    f = jitad.jit(jitad.grad(_loss, argnums=(0, 1)))
    gE, gb = f(E, b, labels)
    nodes = f._last.program.main.nodes
    scatters = [n for n in nodes if n.op == Op.SLOT_SCATTER_ADD]
    assert scatters and all(n.attrs.get("skip_outside") for n in scatters)
    ok = (labels >= 0) & (labels < V)
    hot = np.eye(V)[np.where(ok, labels, 0)] * ok[:, None]
    h = np.tanh(hot @ E + b)
    dz = 2 * h * (1 - h * h)
    np.testing.assert_allclose(gE, hot.T @ dz, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(gb, dz.sum(axis=0), rtol=1e-13)
    jitad.testing.check_grads(lambda E, b: _loss(E, b, labels), (E, b))
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jl = lambda E, b: jax.numpy.sum(jax.numpy.tanh(jax.nn.one_hot(labels, V) @ E + b) ** 2)
    for got, want in zip((gE, gb), jax.grad(jl, argnums=(0, 1))(E, b)):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


def test_a_mask_that_is_not_the_labels_range_stays():
    r = np.random.default_rng(1)
    E, labels = r.normal(size=(V, H)), np.array([0, 2, 4])
    keep = np.array([True, False, True])[:, None]
    loss = lambda E, labels: jitad.sum(jitad.where(keep, E[labels], 0.0) ** 2)
    f = jitad.jit(jitad.grad(loss))
    g = f(E, labels)
    assert not any(n.attrs.get("skip_outside") for n in f._last.program.main.nodes if n.op == Op.SLOT_SCATTER_ADD)
    want = np.zeros_like(E)
    np.add.at(want, labels, 2 * np.where(keep, E[labels], 0.0))
    np.testing.assert_allclose(g, want, rtol=1e-14)


def test_the_interpreter_skips_too():
    from jitad.ir.interpret import _add_at
    slot = [np.zeros((3, 2))]
    _add_at(slot, np.array([0, 3, -1, 2]), np.ones((4, 2)), skip_outside=True)
    np.testing.assert_array_equal(slot[0], [[1, 1], [0, 0], [1, 1]])
