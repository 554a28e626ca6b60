"""A constant array of staged code read past its end clamps, as `jax.jit` reads a traced
array (static ints, index arrays, several axes, derived constants), under `jit`, `grad`
and `vmap`; outside staged code the arrays are NumPy's and raise IndexError. An `.at`
update at a plain index out of range is dropped (JAX's default) in both."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp

jax.config.update("jax_enable_x64", True)
C = np.array([3.0, 2.0, 5.0])
M = np.arange(6.0).reshape(2, 3)
READS = {"int": lambda c, m: c[7], "negative": lambda c, m: c[-5], "array": lambda c, m: c[np.array([5, -9, 1])],
         "2d": lambda c, m: m[1, 4], "pair": lambda c, m: m[np.array([3, -3]), np.array([0, 8])],
         "derived": lambda c, m: (c * 2.0)[3]}


@pytest.mark.parametrize("name", sorted(READS))
def test_staged_reads_of_constants_clamp_as_jax_jit(name):
    read = READS[name]
    f = lambda m: (lambda x: read(m.asarray(C), m.asarray(M)) * x)
    np.testing.assert_array_equal(jitad.jit(f(jnp))(2.0), jax.jit(f(jjnp))(2.0))
    np.testing.assert_array_equal(jitad.grad(lambda x: jnp.sum(f(jnp)(x)))(2.0),
                                  jax.grad(lambda x: jjnp.sum(f(jjnp)(x)))(2.0))
    xs = np.array([1.0, -1.0])
    np.testing.assert_array_equal(jitad.vmap(f(jnp))(xs), jax.vmap(f(jjnp))(xs))


def test_outside_staged_code_a_jnp_array_clamps_as_jax_and_numpys_raises():
    assert jnp.asarray(C)[7] == jjnp.asarray(C)[7] and jnp.asarray(C)[-1] == 5.0
    with pytest.raises(IndexError):
        np.asarray(C)[7]


def test_at_updates_at_plain_indices_out_of_range_are_dropped_as_jax():
    f = lambda m: (lambda x: m.asarray(C).at[np.array([1, 9, -7])].add(x))
    np.testing.assert_array_equal(jitad.jit(f(jnp))(1.0), jax.jit(f(jjnp))(1.0))
    np.testing.assert_array_equal(f(jnp)(1.0), [3.0, 3.0, 5.0])
