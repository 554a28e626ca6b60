"""Derivatives at kinks and ties, against JAX: the conventions docs/transformations.md's "Gradient
conventions" lists. Where jitad deliberately differs (d/dx x**0 at 0) the test says so."""
import numpy as np
import pytest

import jitad
from jitad.testing import check_grads

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

CASES = {
    "max_ties": (lambda m, x: m.max(x), [1.0, 3.0, 3.0, 2.0]),
    "min_ties": (lambda m, x: m.min(x), [1.0, 1.0, 3.0]),
    "max_axis_ties": (lambda m, x: m.sum(m.max(m.reshape(x, (2, 2)), axis=1)), [2.0, 2.0, 1.0, 5.0]),
    "maximum_tie": (lambda m, x: m.sum(m.maximum(x, 1.0)), [1.0, 2.0, 0.0]),
    "minimum_tie": (lambda m, x: m.sum(m.minimum(x, 1.0) * x), [1.0, 2.0, 0.0]),
    "maximum_self": (lambda m, x: m.sum(m.maximum(x, x)), [1.0, -2.0]),
    "maximum_nan": (lambda m, x: m.sum(m.maximum(x, 1.0)), [np.nan, 2.0]),
    "clip_edges": (lambda m, x: m.sum(m.clip(x, 0.0, 1.0)), [0.0, 1.0, 0.5, 2.0]),
    "relu_at_0": (lambda m, x: m.sum(jitad.relu(x) if m is jitad else jax.nn.relu(x)), [0.0, -0.0, 1.0]),
    "abs_at_0": (lambda m, x: m.sum(m.abs(x)), [0.0, -0.0, -1.0]),
    "sign_at_0": (lambda m, x: m.sum(m.sign(x) * x), [0.0, 1.0, -2.0]),
    "floor_at_integers": (lambda m, x: m.sum(m.floor(x) * x), [1.0, 2.5, -3.0]),
    "round_at_halves": (lambda m, x: m.sum(m.round(x) * x), [0.5, 1.5, 2.0]),
    "sqrt_at_0": (lambda m, x: m.sum(m.sqrt(x)), [0.0, 4.0]),
    "power_2_at_0": (lambda m, x: m.sum(x ** 2.0), [0.0, 3.0]),
    "power_half_at_0": (lambda m, x: m.sum(x ** 0.5), [0.0, 4.0]),
}


@pytest.mark.parametrize("name", CASES)
def test_gradient_at_kinks_and_ties_as_jax(name):
    f, x = CASES[name]
    x = np.array(x)
    got = jitad.grad(lambda x: f(jitad, x))(x)
    want = np.asarray(jax.grad(lambda x: f(jnp, x))(jnp.asarray(x)))
    np.testing.assert_array_equal(got, want)


def test_power_with_exponent_0_has_derivative_0_at_0():
    # x**0 is the constant 1: jitad's derivative is 0 everywhere; JAX gives NaN at x = 0
    assert jitad.grad(lambda x: x ** 0.0)(0.0) == 0.0
    assert np.isnan(float(jax.grad(lambda x: x ** 0.0)(0.0)))
    assert jitad.grad(lambda y: 0.0 ** y)(2.0) == 0.0 == float(jax.grad(lambda y: 0.0 ** y)(2.0))


def test_tie_split_is_a_gradient_away_from_ties():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(6), rng.standard_normal(6)
    check_grads(lambda x, y: jitad.sum(jitad.maximum(x, y) * jitad.minimum(x, y)), (x, y), order=2)
