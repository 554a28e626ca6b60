"""Values and derivatives at edge inputs (0, -0.0, ±inf, huge, tiny) against JAX and
NumPy, for what the differential fuzzer found wrong there."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import jitad
import jitad.lax as lax
import jitad.numpy as jnp
from jitad.testing import check_grads

jax.config.update("jax_enable_x64", True)
EDGES = np.array([0.0, -0.0, np.inf, -np.inf, 1e155, -1e-160, 5e-324, 2.0, -1.5, 3.0])


@pytest.mark.parametrize("n", [-1, -2, -3, -4, -7])
def test_negative_integer_powers(n):
    # x ** n for n < 0 was 1 / x**|n|: its derivative at 0 and inf was NaN (JAX: ±inf, -0)
    with np.errstate(all="ignore"):
        want = EDGES ** float(n)
    np.testing.assert_allclose(jitad.jit(lambda x: x ** n)(EDGES), want, rtol=4e-16 * abs(n))
    np.testing.assert_allclose(jitad.jit(lambda x: lax.integer_pow(x, n))(EDGES), want, rtol=4e-16 * abs(n))
    mine = jitad.grad(lambda x: jnp.sum(x ** n))(EDGES)
    theirs = jax.grad(lambda x: jjnp.sum(jax.lax.integer_pow(x, n)))(EDGES)
    finite = np.isfinite(theirs)
    np.testing.assert_array_equal(mine[~finite], theirs[~finite])   # ±inf where JAX has them, no NaN
    # (subnormal results: JAX flushes them to 0)
    np.testing.assert_allclose(mine[finite], theirs[finite], rtol=1e-15 * abs(n), atol=1e-300)
    assert np.all(mine[np.isinf(EDGES)] == 0.0)
    check_grads(lambda x: jnp.sum(x ** n), (np.array([0.7, -1.3, 2.0]),), order=2)


def test_negative_powers_of_float32_stay_float32():
    x = np.array([0.0, 2.0, np.inf], np.float32)
    out = jitad.jit(lambda x: x ** -2)(x)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array([np.inf, 0.25, 0.0], np.float32))


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_min_of_ints_reaches_the_lowest_int(dtype):
    # min was -max(-x): -x overflows at the lowest int, so min([5, lowest, 3]) gave -3
    lowest = np.iinfo(dtype).min
    x = np.array([[5, lowest, 3], [-7, 0, 2]], dtype)
    for axis in (None, 0, 1, (0, 1), (1, 0)):
        want = np.min(x, axis=axis)
        np.testing.assert_array_equal(jitad.jit(lambda x: jnp.min(x, axis=axis))(x), want)
        np.testing.assert_array_equal(jnp.min(x, axis=axis), want)   # eagerly too
        np.testing.assert_array_equal(jnp.min(x, axis=axis), jjnp.min(x, axis=axis))
    assert jitad.jit(jnp.argmin)(x.ravel()) == 1


def test_min_of_bools():
    b = np.array([[True, False], [True, True]])
    np.testing.assert_array_equal(jitad.jit(lambda b: jnp.min(b, axis=1))(b), [False, True])
    out = jitad.jit(jnp.min)(b)
    assert isinstance(out, (bool, np.bool_)) and not out
