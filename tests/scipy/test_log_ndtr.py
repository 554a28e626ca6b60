"""log_ndtr and the normal's logcdf/logsf: values against SciPy across every formula's
range, and whole gradients (against JAX's and the exact pdf/cdf) at and around each
segment boundary, where a clip once halved them."""
import numpy as np
import pytest
import scipy.special as ss

import jitad
from jitad.scipy import special as S
from jitad.scipy import stats as ST
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

BOUNDS = (-20.0, -10.0, 0.0, 5.0, 8.0)
AROUND = np.array([v for b in BOUNDS for v in (np.nextafter(b, -np.inf), b, np.nextafter(b, np.inf), b - 1e-3, b + 1e-3)])


def _exact_grad(x):
    return np.exp(-0.5 * x * x - 0.5 * np.log(2 * np.pi) - ss.log_ndtr(x))


def test_values_match_scipy_over_the_whole_line():
    x = np.concatenate([-np.geomspace(1e3, 1e-3, 300), [0.0, -0.0], np.geomspace(1e-3, 40, 300), AROUND])
    np.testing.assert_allclose(S.log_ndtr(x), ss.log_ndtr(x), rtol=1e-13, atol=0)
    np.testing.assert_array_equal(S.log_ndtr(np.array([np.inf, -np.inf, np.nan])), [0.0, -np.inf, np.nan])
    x32 = np.linspace(-30, 12, 200).astype(np.float32)
    got = S.log_ndtr(x32)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ss.log_ndtr(x32.astype(np.float64)), rtol=1e-5)   # float32 erfc in the far tail


def test_gradients_are_whole_at_the_segment_boundaries():
    grads = jitad.jit(jitad.vmap(jitad.grad(S.log_ndtr)))(AROUND)
    np.testing.assert_allclose(grads, _exact_grad(AROUND), rtol=1e-13)
    theirs = jax.vmap(jax.grad(jax.scipy.special.log_ndtr))(AROUND)
    np.testing.assert_allclose(grads, theirs, rtol=1e-8)   # JAX's own series is 4e-9 off at -20
    for name in ("logcdf", "logsf"):
        mine = jitad.vmap(jitad.grad(getattr(ST.norm, name)))(AROUND)
        np.testing.assert_allclose(mine, jax.vmap(jax.grad(getattr(jax.scipy.stats.norm, name)))(AROUND),
                                   rtol=1e-8, err_msg=name)


@pytest.mark.parametrize("x", [-25.0, -20.0, -3.0, 0.0, 5.0, 9.0])
def test_check_grads_on_each_formula(x):
    check_grads(S.log_ndtr, (x,), order=2)
