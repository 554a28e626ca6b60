"""A slot whose first writes are additions to regions that cover it exactly (the cotangent
of a split: each piece's cotangent added to its third) is not zero-filled, and those
additions store (`peephole.first_adds_store`); regions leaving part of it unwritten, or
overlapping, keep the fill and the additions. Gradients against JAX's."""
import numpy as np
import pytest

import jitad


def _loss(m, pieces):
    def loss(x):
        parts = [x[:, :, lo:hi] for lo, hi in pieces]
        total = 0.0
        for p, q in zip(parts, parts[1:] + parts[:1]):
            total = total + m.numpy.sum(m.numpy.sin(p @ m.numpy.swapaxes(q, -1, -2)))
        return total
    return loss


@pytest.mark.parametrize("pieces, stored", [(((0, 4), (4, 8), (8, 12)), True),   # the thirds: stores
                                            (((0, 4), (8, 12)), False),          # the middle unwritten
                                            (((0, 8), (4, 12)), False)])         # overlapping
def test_covering_region_additions_store(pieces, stored):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    x = np.random.default_rng(0).standard_normal((2, 5, 12))
    grad = jitad.jit(jitad.grad(_loss(jitad, pieces)))
    np.testing.assert_allclose(grad(x), jax.jit(jax.grad(_loss(jax, pieces)))(x), rtol=1e-12, atol=1e-12)
    lines = [line for line in str(grad.ir).splitlines() if "slot_add_slice" in line]
    assert lines and all(("store=True" in line) == stored for line in lines)
    assert ("ref<f64[2,5,12]> = slot[uninit=True]" in str(grad.ir)) == stored
