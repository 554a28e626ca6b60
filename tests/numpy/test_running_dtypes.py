"""Running sums and products of plain arrays keep the array's dtype, as JAX's: an int32
array's cumsum wraps in int32 (NumPy's widens to int64), and `cumulative_sum` widens
small ints as JAX's does."""
import numpy as np
import pytest

import jitad.numpy as jnp

jax = pytest.importorskip("jax", reason="JAX is the reference")
jax.config.update("jax_enable_x64", True)

NAMES = ["cumsum", "cumprod", "nancumsum", "nancumprod", "cumulative_sum", "cumulative_prod"]
ARRAYS = [np.array([2**31 - 1, 2, -3], np.int32), np.array([200, 3, 1], np.uint8),
          np.array([True, True, False]), np.array([3.0e38, 2.0, -1.0], np.float32), np.array([1, 2], np.int64)]


@pytest.mark.parametrize("name", NAMES)
def test_running_results_have_jaxs_dtype_and_values(name):
    for x in ARRAYS:
        with np.errstate(all="ignore"):
            mine = np.asarray(getattr(jnp, name)(x))
        want = np.asarray(getattr(jax.numpy, name)(x))
        assert mine.dtype == want.dtype, (name, x.dtype, mine.dtype, want.dtype)
        np.testing.assert_array_equal(mine, want)


def test_an_explicit_dtype_is_kept():
    x = np.array([2**31 - 1, 2], np.int32)
    assert jnp.cumsum(x, dtype=np.int64).tolist() == [2**31 - 1, 2**31 + 1]
    assert jnp.cumprod(x, dtype=np.float64).dtype == np.float64
