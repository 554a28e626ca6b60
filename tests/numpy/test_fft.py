"""`jnp.fft`: the shifts stage and differentiate (against NumPy's values and JAX's
gradients); the transforms give NumPy's values on plain arrays and refuse staged ones."""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.errors import UnsupportedError
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

X = np.random.default_rng(0).normal(size=(5, 4))


@pytest.mark.parametrize("name", ["fftshift", "ifftshift"])
@pytest.mark.parametrize("axes", [None, 1, (-1, 0)])
def test_shifts_match_numpy_and_jax(name, axes):
    ours, theirs = getattr(jnp.fft, name), getattr(jax.numpy.fft, name)
    np.testing.assert_array_equal(ours(X, axes=axes), getattr(np.fft, name)(X, axes=axes))
    np.testing.assert_array_equal(jitad.jit(lambda x: ours(x, axes=axes))(X), theirs(X, axes=axes))
    w = np.arange(X.size, dtype=float).reshape(X.shape)
    g = jitad.grad(lambda x: jnp.sum(ours(x, axes=axes) * w))(X)
    np.testing.assert_array_equal(g, jax.grad(lambda x: jax.numpy.sum(theirs(x, axes=axes) * w))(X))


def test_shifts_check_grads_and_undo_each_other():
    check_grads(lambda x: jnp.fft.fftshift(jnp.sin(x)), (X,), order=2, modes=("fwd", "rev"))
    np.testing.assert_array_equal(jnp.fft.ifftshift(jnp.fft.fftshift(X)), X)


def test_frequencies_and_transforms_on_plain_arrays_are_numpys():
    np.testing.assert_array_equal(jnp.fft.fftfreq(5, 0.1), np.fft.fftfreq(5, 0.1))
    np.testing.assert_array_equal(jnp.fft.rfftfreq(6), np.fft.rfftfreq(6))
    np.testing.assert_allclose(jnp.fft.fft(X, axis=0), np.fft.fft(X, axis=0))
    np.testing.assert_allclose(jnp.fft.irfft(jnp.fft.rfft(X)), X, atol=1e-15)
    np.testing.assert_allclose(jnp.fft.fftn(X, s=(3, 6), axes=(0, 1)), np.fft.fftn(X, s=(3, 6), axes=(0, 1)))


@pytest.mark.parametrize("name", ["fft", "rfft", "irfftn", "fft2"])
def test_transforms_of_staged_values_raise_not_implemented(name):
    with pytest.raises(UnsupportedError, match=f"jnp.fft.{name}` of a staged value") as e:
        jitad.grad(lambda x: jnp.sum(jnp.abs(getattr(jnp.fft, name)(x))))(X)
    assert isinstance(e.value, NotImplementedError)
