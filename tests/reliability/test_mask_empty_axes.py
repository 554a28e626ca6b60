"""A boolean mask with an axis of length 0 selects nothing from an axis of any length
(NumPy's and JAX's rule: each mask axis is 0 or the indexed axis's length), in staged
code and under `vmap` and `grad`; other lengths are still refused."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp

jax.config.update("jax_enable_x64", True)

X = np.arange(6.0).reshape(3, 2)
EMPTY = [(np.zeros(0, bool),), (np.zeros((0, 2), bool),), (np.zeros((3, 0), bool),), (np.zeros((0, 0), bool),),
         (slice(None), np.zeros(0, bool))]


@pytest.mark.parametrize("key", EMPTY, ids=lambda k: str([getattr(e, "shape", e) for e in k]))
def test_empty_mask_axes_select_nothing_as_jax(key):
    want = jjnp.asarray(X)[key]
    out = jitad.jit(lambda a: a[key])(X)
    assert out.shape == want.shape == X[key].shape
    np.testing.assert_array_equal(jitad.grad(lambda a: jnp.sum(a[key]) + jnp.sum(a))(X), np.ones_like(X))


def test_an_empty_mask_under_vmap_and_in_a_product():
    # (the fuzzer's program: `vmap` of `x[mask] @ y` with an empty mask)
    f = lambda n: (lambda x, y: x[np.zeros(0, bool)] @ y)
    xs, y = np.arange(6.0).reshape(2, 3), np.zeros(0)
    np.testing.assert_array_equal(jitad.vmap(f(jnp), in_axes=(0, None))(xs, y),
                                  jax.vmap(f(jjnp), in_axes=(0, None))(xs, y))
    np.testing.assert_array_equal(jitad.vmap(lambda x: x[np.zeros((0,), bool)])(xs).shape, (2, 0))


@pytest.mark.parametrize("mask", [np.zeros((0, 5), bool), np.zeros((1, 0), bool), np.zeros((0, 0, 0), bool)],
                         ids=str)
def test_other_lengths_still_raise_as_jax(mask):
    with pytest.raises(IndexError):
        jjnp.asarray(X)[mask]
    with pytest.raises(jitad.errors.JitadError) as e:
        jitad.jit(lambda a: a[mask])(X)
    assert isinstance(e.value, IndexError) and "boolean mask of shape" in str(e.value)
