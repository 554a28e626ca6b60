"""Boolean masks in staged indexing: a mask must match the axes it indexes exactly, as
in NumPy and JAX; a wrong one is an IndexError at trace time, never other entries."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jitad
import jitad.numpy

jax.config.update("jax_enable_x64", True)

X = np.arange(24.0).reshape(2, 3, 4)
M2, M3, M4 = np.array([False, True]), np.array([True, False, True]), np.array([1, 0, 0, 1], bool)
M34 = np.arange(12).reshape(3, 4) % 5 == 0

GOOD = [(M2,), (slice(None), M3), (M2, slice(None), M4), (Ellipsis, M4), (None, M2), (0, M34), (M2, M34),
        (1, Ellipsis, M4)]
BAD = [(M3,), (np.ones(7, bool),), (slice(None), M4), (Ellipsis, M3), (M34,), (0, M34.T)]


@pytest.mark.parametrize("key", GOOD, ids=str)
def test_matching_masks_agree_with_numpy_and_jax(key):
    want = X[key]
    np.testing.assert_array_equal(jitad.jit(lambda a: a[key])(X), want)
    np.testing.assert_array_equal(jax.jit(lambda a: a[key])(X), want)


@pytest.mark.parametrize("key", BAD, ids=str)
def test_mismatched_masks_raise_index_error(key):
    with pytest.raises(IndexError):
        X[key]
    with pytest.raises(IndexError):
        jax.jit(lambda a: a[key])(X)
    with pytest.raises(jitad.errors.JitadError) as e:
        jitad.jit(lambda a: a[key])(X)
    assert isinstance(e.value, IndexError)
    assert "boolean mask of shape" in str(e.value) and str(X.shape) in str(e.value)


def test_the_reported_cases():
    with pytest.raises(IndexError, match=r"\(2,\).*\(6,\)"):
        jitad.jit(lambda a: a[np.array([True, False])])(np.arange(6.0))
    with pytest.raises(IndexError, match=r"\(7,\)"):
        jitad.jit(lambda a: a[np.ones(7, bool)])(np.arange(6.0))
    with pytest.raises(IndexError, match=r"\(2, 2\).*\(3, 3\)"):
        jitad.jit(lambda a: a[np.array([[True, False], [False, True]])])(np.arange(9.0).reshape(3, 3))


def test_gradient_through_masks():
    with pytest.raises(IndexError):
        jitad.grad(lambda a: a[np.array([True, False])].sum())(np.arange(6.0))
    m = np.array([True, False, True, True, False, False])
    f = lambda a: (a[m] ** 2).sum()
    np.testing.assert_allclose(jitad.grad(f)(np.arange(6.0)), jax.grad(f)(jnp.arange(6.0)))


# -- pad of a 0-d array: nothing to pad, itself (NumPy and JAX) ---------------------

@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric", "wrap"])
@pytest.mark.parametrize("width", [1, (1, 2), ((1, 2),), 0])
def test_pad_of_a_0d_array_is_itself(mode, width):
    x = np.array(2.5)
    want = np.pad(x, width, mode=mode)
    assert want.shape == () and float(jnp.pad(jnp.asarray(x), width, mode=mode)) == 2.5
    for got in (jitad.numpy.pad(x, width, mode=mode), jitad.jit(lambda a: jitad.numpy.pad(a, width, mode=mode))(x)):
        assert np.shape(got) == () and got == want


def test_pad_of_a_0d_array_gradient_and_constant():
    assert jitad.grad(lambda a: jitad.numpy.pad(a, 2, constant_values=7.0).sum())(3.0) == 1.0
    assert jitad.jit(lambda a: jitad.numpy.pad(a, 2, constant_values=7.0))(np.array(3.0)) == 3.0
    with pytest.raises(jitad.errors.JitadError, match="negative"):
        jitad.jit(lambda a: jitad.numpy.pad(a, -1))(np.array(3.0))
