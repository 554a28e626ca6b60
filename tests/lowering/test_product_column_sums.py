"""A bias's gradient summed from a cotangent a matrix product stores (`dY @ Wᵀ` into a slot,
then the sum of its rows) is added up by the product as it stores the rows
(`peephole.product_column_sums`): in the register tiles from their registers, otherwise in
one pass after the product. Values and gradients against JAX's in float64 and float32, at
odd sizes, under `grad` and `vmap`."""
import numpy as np
import pytest

import jitad
from jitad.ir import peephole

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)


def _layer(m, x, c, w, v):
    """Two uses of the row `c`: its gradient is a first column sum stored, a second added."""
    jnp = m.numpy
    h = jnp.tanh((x + c) @ w)
    return jnp.sum(jnp.sin(h)) + jnp.sum(jnp.cos((h + c[: h.shape[-1]]) @ v))


# (x, w, v): in the register tiles (b transposed: copied first); small enough for loop nests
SHAPES = {"tiles": ((3, 23, 37), (37, 29), (29, 31)), "loops": ((2, 3, 5), (5, 4), (4, 3))}


@pytest.mark.parametrize("path", list(SHAPES))
def test_bias_gradients_summed_by_the_products(path):
    rng = np.random.default_rng(0)
    xs, ws, vs = SHAPES[path]
    for dtype, tol in ((np.float64, 1e-11), (np.float32, 2e-4)):
        x, c, w, v = (rng.standard_normal(s).astype(dtype) * 0.3 for s in (xs, xs[-1:], ws, vs))
        got = jitad.jit(jitad.grad(lambda *a: _layer(jitad, *a), argnums=(0, 1, 2, 3)))
        want = jax.jit(jax.grad(lambda *a: _layer(jax, *a), argnums=(0, 1, 2, 3)))(x, c, w, v)
        for g, r in zip(got(x, c, w, v), want):
            assert g.dtype == dtype
            np.testing.assert_allclose(g, r, rtol=tol, atol=tol)
        assert "column_sums" in str(got.ir)


def test_under_vmap_and_with_the_switch_off():
    rng = np.random.default_rng(1)
    x, c, w, v = (rng.standard_normal(s) * 0.3 for s in ((4, 17, 21), (21,), (21, 19), (19, 9)))
    f = lambda c, x: _layer(jitad, x, c, w, v)  # noqa: E731
    got = jitad.jit(jitad.vmap(jitad.grad(f), in_axes=(None, 0)))(c, x)
    want = jax.vmap(jax.grad(lambda c, x: _layer(jax, x, c, w, v)), in_axes=(None, 0))(c, x)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11)
    peephole.PRODUCT_COLUMN_SUMS = False
    try:
        off = jitad.jit(jitad.grad(lambda c, x: f(c, x) * 1.0))
        np.testing.assert_allclose(off(c, x[0]), want[0], rtol=1e-11, atol=1e-11)
        assert "column_sums" not in str(off.ir)
    finally:
        peephole.PRODUCT_COLUMN_SUMS = True
