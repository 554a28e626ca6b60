"""A concatenation of slices that lay one tensor out again whole is that tensor
(`tiled_concats` in jitad.ir.passes): no copy into the slices and back, the case of a
Jacobian's per-argument blocks joined into one matrix (against JAX); pieces out of order,
with a gap, strided or partial along another axis are concatenated as written."""
import numpy as np
import pytest

import jitad
from jitad.ir import passes

X = np.arange(24.0).reshape(4, 6)


def _concats(ir):
    return sum(" = concat[" in line for line in ir.splitlines())


def _joined(x):
    return jitad.concatenate([(x * 2.0)[:, :1], jitad.numpy.reshape(
        jitad.numpy.reshape((x * 2.0)[:, 1:4], (12,)), (4, 3)), (x * 2.0)[:, 4:]], axis=1) + 1.0


def test_slices_joined_back_are_the_tensor(monkeypatch):
    f = jitad.jit(_joined)
    np.testing.assert_array_equal(f(X), X * 2.0 + 1.0)
    assert _concats(f.ir) == 0
    monkeypatch.setattr(passes, "PIPELINE", [s for s in passes.PIPELINE if s[0] != "tiled_concats"])
    copied = jitad.jit(_joined)
    np.testing.assert_array_equal(copied(X), X * 2.0 + 1.0)
    assert _concats(copied.ir) == 1   # the case the pass exists for


def test_a_jacobians_blocks_joined_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def residuals(m, shift, theta):
        return m.reshape(m.sin(X[:, :2] * theta[None, :2]) + shift[0] * X[:, 2:4] - shift[1] * theta[2:4], (-1,))

    def joined(m, jacfwd, shift, theta):
        d_shift, d_theta = jacfwd(lambda s, t: residuals(m, s, t), argnums=(0, 1))(shift, theta)
        return m.concatenate([d_shift, d_theta], axis=1)
    shift, theta = np.array([0.3, -0.7]), np.linspace(0.5, 1.5, 9)
    f = jitad.jit(lambda s, t: joined(jitad.numpy, jitad.jacfwd, s, t))
    np.testing.assert_allclose(f(shift, theta), joined(jnp, jax.jacfwd, shift, theta), rtol=1e-14, atol=1e-15)
    assert _concats(f.ir) == 0


def test_other_concatenations_are_copies():
    cases = {"order": lambda x: jitad.concatenate([x[:, 3:], x[:, :3]], axis=1),
             "gap": lambda x: jitad.concatenate([x[:, :2], x[:, 3:]], axis=1),
             "strided": lambda x: jitad.concatenate([x[:, 0:6:2], x[:, 1:6:2]], axis=1),
             "partial": lambda x: jitad.concatenate([x[:2, :3], x[:2, 3:]], axis=1),
             "two": lambda x: jitad.concatenate([x[:, :3], (x + 1.0)[:, 3:]], axis=1)}
    want = {"order": np.concatenate([X[:, 3:], X[:, :3]], axis=1), "gap": np.concatenate([X[:, :2], X[:, 3:]], axis=1),
            "strided": np.concatenate([X[:, 0:6:2], X[:, 1:6:2]], axis=1), "partial": X[:2],
            "two": np.concatenate([X[:, :3], X[:, 3:] + 1.0], axis=1)}
    for name, fn in cases.items():
        f = jitad.jit(fn)
        np.testing.assert_array_equal(f(X), want[name], err_msg=name)
        assert _concats(f.ir) == 1, name
