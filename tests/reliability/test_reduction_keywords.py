"""`jnp.mean` with an integer `dtype=` (found by the differential fuzzer: staged code gave
floats): JAX's integer mean, the sum in that dtype divided by the count rounded toward
zero, with `where=` and `keepdims=`, in and out of staged code; `dtype=bool` is refused
as JAX refuses it."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.errors import JitadError

jax.config.update("jax_enable_x64", True)
X = np.array([-7, 2, 0, 2, -2**63, -1, -7, 2, 3, 2, 2**62, 1, 3, 1, 3, -5, 0, -1], np.int64).reshape(2, 3, 3)
KW = [dict(axis=2), dict(axis=None), dict(axis=0, keepdims=True), dict(axis=1, where=np.array([True, False, False])),
      dict(axis=2, where=np.zeros(3, bool))]


@pytest.mark.parametrize("kw", KW, ids=str)
def test_integer_mean_as_jax(kw):
    want = jjnp.mean(X, dtype=jjnp.int64, **kw)
    for out in (jnp.mean(X, dtype=np.int64, **kw), jitad.jit(lambda x: jnp.mean(x, dtype=np.int64, **kw))(X)):
        assert np.asarray(out).dtype == np.int64
        np.testing.assert_array_equal(out, want)


def test_float_input_and_bool_dtype():
    x = np.array([1.5, 2.5, -4.0])
    np.testing.assert_array_equal(jitad.jit(lambda x: jnp.mean(x, dtype=np.int64))(x), jjnp.mean(x, dtype=jjnp.int64))
    with pytest.raises(TypeError):
        jjnp.mean(x, dtype=bool)
    with pytest.raises(JitadError) as e:
        jitad.jit(lambda x: jnp.mean(x, dtype=bool))(x)
    assert isinstance(e.value, TypeError) and "dtype=bool" in str(e.value)
