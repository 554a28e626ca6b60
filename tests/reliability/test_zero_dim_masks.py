"""A 0-d boolean index (found by the differential fuzzer): `x[True]` adds an axis of 1 and
`x[False]` an axis of 0, as NumPy and JAX index, in staged code and its transformations."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp

jax.config.update("jax_enable_x64", True)
X = np.arange(6.0).reshape(2, 3)


@pytest.mark.parametrize("mask", [np.array(True), np.array(False), np.True_, np.False_])
@pytest.mark.parametrize("x", [X, np.float64(2.5), np.zeros((0, 2))])
def test_values_as_numpy_and_jax(mask, x):
    out = jitad.jit(lambda x: x[mask])(x)
    np.testing.assert_array_equal(out, np.asarray(x)[mask])
    if isinstance(mask, np.ndarray):   # (JAX's indexing asserts on a NumPy bool scalar)
        np.testing.assert_array_equal(out, jjnp.asarray(x)[mask])
        assert out.shape == jjnp.asarray(x)[mask].shape


def test_gradient_and_vmap_as_jax():
    for mask in (np.array(True), np.array(False)):
        def f(x, m=mask, n=jnp):
            return n.sum(x[m] * 2.0)
        np.testing.assert_array_equal(jitad.grad(f)(X), jax.grad(lambda x: f(x, n=jjnp))(X))
        np.testing.assert_array_equal(jitad.vmap(lambda x: x[mask])(X), jax.vmap(lambda x: x[mask])(X))


def test_with_other_indices_refused_clearly():
    with pytest.raises(IndexError, match="0-d boolean index among other indices"):
        jitad.jit(lambda x: x[np.array(True), 0])(X)
