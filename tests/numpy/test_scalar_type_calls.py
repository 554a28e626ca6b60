"""`jnp.int64(x)`, `jnp.float32(x)`, ... convert a traced array, as JAX's and autograd's do,
and still name NumPy's dtypes wherever a dtype is taken."""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)


def test_a_scalar_type_converts_a_staged_array():
    x = np.array([1.7, -2.2, 3.0])
    for name in ("int64", "int32", "float32", "bool_"):
        got = jitad.jit(lambda v: getattr(jnp, name)(v) * 1)(x)
        want = getattr(jax.numpy, name)(x) * 1
        np.testing.assert_array_equal(got, np.asarray(want))


def test_indices_from_a_converted_column_are_differentiable():
    w = np.random.default_rng(0).normal(size=(4, 3))
    w[:, -1] = [2.0, 0.0, 1.0, 3.0]
    loss = lambda m: lambda w: (w[:, :-1][m.int64(w[:, -1])] ** 2).sum()   # noqa: E731
    np.testing.assert_allclose(jitad.grad(loss(jnp))(w), jax.grad(loss(jax.numpy))(w), rtol=1e-12)


def test_the_types_are_numpys_dtypes():
    assert np.dtype(jnp.int64) == np.int64 and jnp.zeros(2, jnp.float32).dtype == np.float32
    assert np.issubdtype(jnp.int32, np.integer) and jnp.float_(1.5) == 1.5
    assert type(jnp.int64(3)) is np.int64 and isinstance(jnp.float32(2.0), np.float32)
    assert np.asarray([1, 2], dtype=jnp.uint8).dtype == np.uint8
