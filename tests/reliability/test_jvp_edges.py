"""Forward mode of functions with int and bool outputs: their tangents are zeros of their
own dtype (JAX's are float0 zeros); the float outputs' agree with JAX."""
import jax
import jax.numpy as xnp
import numpy as np

import jitad
import jitad.numpy as jnp

jax.config.update("jax_enable_x64", True)


def _mixed(m):
    return lambda x: (x * 2.0, x > 1.0, m.argmax(x), m.sum(x ** 2))


def test_jvp_and_linearize_with_int_and_bool_outputs():
    x, t = np.array([1.0, 2.0, 0.5]), np.array([1.0, -1.0, 3.0])
    want_out, want_tan = jax.jvp(_mixed(xnp), (x,), (t,))
    for got_out, got_tan in (jitad.jvp(_mixed(jnp), (x,), (t,)),
                             jitad.jit(lambda x, t: jitad.jvp(_mixed(jnp), (x,), (t,)))(x, t)):
        for g, w in zip(got_out, want_out):
            np.testing.assert_array_equal(g, w)
        for g, w, o in zip(got_tan, want_tan, want_out):
            if w.dtype == jax.dtypes.float0:
                assert np.asarray(g).dtype == np.asarray(o).dtype and not np.any(g)
            else:
                np.testing.assert_allclose(g, w, rtol=1e-14)
    out, tangent = jitad.linearize(_mixed(jnp), x)
    for g, w, o in zip(tangent(t), want_tan, want_out):
        if w.dtype != jax.dtypes.float0:
            np.testing.assert_allclose(g, w, rtol=1e-14)
        else:
            assert np.asarray(g).dtype == np.asarray(o).dtype and not np.any(g)
