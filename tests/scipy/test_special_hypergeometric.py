"""hyp1f1 and hyp2f1 against SciPy (a grid crossing every transformation's seam) and JAX
(where JAX's own values hold: its hyp1f1 for x >= 0, its hyp2f1 on [0, 1)), gradients too."""
import numpy as np
import pytest
import scipy.special as ss

import jitad
from jitad.scipy import special as S

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
js = jax.scipy.special

A1, B1, X1 = (v.ravel() for v in np.meshgrid([0.0, 0.5, 1.0, 2.5, 7.0], [0.3, 1.0, 3.5, 10.0],
                                              [-80.0, -20.0, -1.0, 0.0, 0.3, 5.0, 30.0, 59.0, 61.0, 150.0]))
A2, B2, C2, X2 = (v.ravel() for v in np.meshgrid([0.3, 1.0, 2.5], [0.5, 1.5, -0.7], [1.2, 4.0, 2.5],
                                                 [-5.0, -0.9, -0.2, 0.0, 0.3, 0.5, 0.7, 0.95, 1.0]))


def test_hyp1f1_against_scipy_and_jax():
    got = S.hyp1f1(A1, B1, X1)
    np.testing.assert_allclose(got, ss.hyp1f1(A1, B1, X1), rtol=2e-9, atol=1e-300)
    pos = X1 >= 0
    np.testing.assert_allclose(got[pos], js.hyp1f1(A1[pos], B1[pos], X1[pos]), rtol=1e-8)


def test_hyp2f1_against_scipy_and_jax():
    got = S.hyp2f1(A2, B2, C2, X2)
    np.testing.assert_allclose(got, ss.hyp2f1(A2, B2, C2, X2), rtol=1e-12)
    unit = (X2 >= 0) & (X2 < 1)
    # JAX keeps about six digits near x = 1 (SciPy, above, is met to 1e-12)
    np.testing.assert_allclose(got[unit], js.hyp2f1(A2[unit], B2[unit], C2[unit], X2[unit]), rtol=1e-6)
    assert np.isnan(S.hyp2f1(1.0, 1.0, 2.0, 1.5)) and np.isnan(S.hyp2f1(1.0, 1.0, 2.0, np.nan))


def test_edge_conventions():
    assert S.hyp1f1(0.0, 2.0, 3.0) == 1.0 and S.hyp1f1(1.5, 1.5, 2.0) == np.exp(2.0)
    assert S.hyp1f1(1.0, 0.0, 2.0) == np.inf
    np.testing.assert_allclose(S.hyp2f1(1.0, 1.0, 2.0, 0.5), 2 * np.log(2), rtol=1e-15)


def test_staged_values_are_the_eager_ones():
    x = np.array([-3.0, -0.4, 0.2, 0.8])
    got = jitad.jit(lambda v: (S.hyp1f1(0.7, 2.5, 20.0 * v), S.hyp2f1(0.5, 1.5, 3.0, v)))(x)
    np.testing.assert_allclose(got[0], S.hyp1f1(0.7, 2.5, 20.0 * x), rtol=1e-14)
    np.testing.assert_allclose(got[1], S.hyp2f1(0.5, 1.5, 3.0, x), rtol=1e-14)


@pytest.mark.slow
def test_gradients_against_jax():
    x = np.array([0.2, 0.6, 0.8])
    mine = jitad.vmap(jitad.grad(lambda v: S.hyp2f1(0.5, 1.5, 3.0, v)))(x)
    np.testing.assert_allclose(mine, jax.vmap(jax.grad(lambda v: js.hyp2f1(0.5, 1.5, 3.0, v)))(x), rtol=1e-8)
    x = np.array([0.5, 3.0, 12.0])
    mine = jitad.vmap(jitad.grad(lambda v: S.hyp1f1(0.7, 2.5, v)))(x)
    np.testing.assert_allclose(mine, jax.vmap(jax.grad(lambda v: js.hyp1f1(0.7, 2.5, v)))(x), rtol=1e-8)
    # d/dx 1F1(a; b; x) = a / b 1F1(a + 1; b + 1; x), also below 0
    x = np.array([-4.0, 2.0])
    np.testing.assert_allclose(jitad.vmap(jitad.grad(lambda v: S.hyp1f1(0.7, 2.5, v)))(x),
                               0.7 / 2.5 * ss.hyp1f1(1.7, 3.5, x), rtol=1e-11)
