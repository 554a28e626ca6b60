"""The stabilizing shift of `nn.softmax`/`log_softmax`/`logsumexp` is a constant to
reverse mode: their gradient programs compute no max's tie mask (its cotangent was zero)
and agree with JAX's gradients, masked lines (`where=`) included."""
import numpy as np
import pytest

import jitad
from jitad.ir.graph import walk
from jitad.ir.ops import Op


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp"])
def test_no_max_gradient_in_the_program_and_jax_gradients(name):
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5)).astype(np.float32)
    x[1, 2] = x[1, 4]   # a tie at the maximum
    where = np.ones((3, 5), bool)
    where[2, :3] = False

    def loss(m, x):
        y = getattr(m.nn, name)(x, axis=-1, where=where)
        y = y[:, None] if name == "logsumexp" else m.numpy.where(where, y, 0.0)
        return m.numpy.sum(y * m.numpy.cos(x))
    g = jitad.grad(lambda x: loss(jitad, x))
    got = g(x)
    ops = [n.op for n in walk(g._latest("ir").program.main)]   # fused bodies included
    assert Op.EQ not in ops and Op.MAX in ops
    np.testing.assert_allclose(got, np.asarray(jax.grad(lambda x: loss(jax, x))(x)), rtol=2e-5, atol=1e-6)
