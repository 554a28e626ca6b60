"""NumPy's integer conversion of a staged value (`np.int64(x)`, `np.asarray(x, int)`: what
jitad.numpy's scalar types, NumPy's own, do) under `grad` called from Python: the traced
value, as autograd's; guarded, so a call whose values convert otherwise traces again. Under
`jit` it stays a StagingError naming `x.astype`."""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.errors import StagingError

autograd = pytest.importorskip("autograd")
anp = pytest.importorskip("autograd.numpy")


def gather_rows(n):
    """autograd's program: rows of `W[:, :-1]` picked by the integer part of W's last column."""
    def fun(W):
        picked = n.int64(W[:, -1])
        assert picked.dtype == n.int64
        return n.sum(W[:, :-1][picked] ** 2)
    return fun


def test_int64_of_a_traced_array_gives_autograds_gradient_and_retraces_on_new_values():
    W = np.random.default_rng(0).normal(size=(5, 4))
    W[:, -1] = [3.7, 0.2, 4.9, 3.1, -1.5]
    f = jitad.grad(gather_rows(jnp))
    np.testing.assert_allclose(f(W), autograd.grad(gather_rows(anp))(W), rtol=1e-14)
    W2 = W.copy()
    W2[:, -1] = [0.5, 1.5, 2.5, 3.5, 4.5]   # other rows: the guard sends this call to a new trace
    np.testing.assert_allclose(f(W2), autograd.grad(gather_rows(anp))(W2), rtol=1e-14)
    np.testing.assert_allclose(f(W), autograd.grad(gather_rows(anp))(W), rtol=1e-14)


def test_bool_and_scalar_conversions_keep_values():
    def fun(x):
        mask = np.asarray(x > 0, dtype=bool)
        return jnp.sum(jnp.where(mask, x, 0.0) ** 2) * np.int64(x[0] * 10)
    x = np.array([0.25, -1.0, 2.0])
    np.testing.assert_allclose(jitad.grad(fun)(x), np.where(x > 0, 2 * x, 0.0) * 2, rtol=1e-14)


def test_under_jit_and_to_a_float_dtype_it_stays_a_staging_error_naming_astype():
    W = np.ones((3, 3))
    with pytest.raises(StagingError, match="astype"):
        jitad.jit(jitad.grad(gather_rows(jnp)))(W)
    with pytest.raises(StagingError, match="astype"):   # (a float conversion would drop the derivative)
        jitad.grad(lambda x: jnp.sum(np.float32(x)))(W)
