"""Arithmetic on bools in staged code keeps NumPy's and JAX's dtypes (found by the
differential fuzzer): `abs` of bools is bools, `-` of bools is refused as both refuse it."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp

jax.config.update("jax_enable_x64", True)
B = np.array([True, False, True])


def test_abs_of_bools_is_bools():
    out = jitad.jit(jnp.abs)(B)
    assert out.dtype == np.abs(B).dtype == jjnp.abs(B).dtype == np.bool_
    np.testing.assert_array_equal(out, B)
    assert jitad.jit(jnp.abs)(np.bool_(False)) == np.False_


def test_abs_of_bools_in_a_scan_over_empty_rows():
    # the scan's rows were typed int64 from a trace of `abs`, its steps' values bools
    xs = np.zeros((2, 1, 0), bool)
    ys = jitad.jit(lambda xs: jitad.scan(lambda c, x: (c, jnp.abs(x)), 0.0, xs)[1])(xs)
    assert ys.dtype == np.bool_ and ys.shape == (2, 1, 0)
    ys = jitad.jit(lambda xs: jitad.scan(lambda c, x: (c, jnp.abs(x)), 0.0, xs)[1])(B.reshape(3, 1))
    np.testing.assert_array_equal(ys, B.reshape(3, 1))


def test_negative_of_bools_is_refused():
    with pytest.raises(TypeError):
        jjnp.negative(B)
    with pytest.raises(jitad.ArgumentError, match="`~x`"):
        jitad.jit(lambda b: -b)(B)
    with pytest.raises(TypeError):   # ArgumentError is a TypeError, as JAX's
        jitad.jit(jnp.negative)(B)
    np.testing.assert_array_equal(jitad.jit(lambda b: -b.astype(jnp.int64))(B), [-1, 0, -1])


def test_square_of_bools_is_ints():
    out = jitad.jit(jnp.square)(B)
    assert out.dtype.kind == jjnp.square(B).dtype.kind == "i"
    np.testing.assert_array_equal(out, [1, 0, 1])


def test_eager_square_of_bools_is_ints_too():
    # eagerly, square of a bool scalar stayed a bool (staged: an int)
    assert jnp.square(np.False_).dtype.kind == jnp.square(B).dtype.kind == "i"
    assert jnp.square(np.True_) == 1
