"""NumPy breadth, second part: the inverse trigonometric and erfc primitives, arrays that
feel like NumPy's (dtype, attributes, methods, NumPy's functions on staged values),
indexing (negative steps, take_along_axis, `.at[...]`). Values against NumPy,
derivatives against JAX, check_grads(order=2) where differentiable. (The primitives' rows
in tests/test_ops.py's table check them at random inputs, on the CPU and the CUDA
simulator.)"""
import math

import numpy as np
import pytest

import jitad
from jitad.testing import check_grads

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


# -- arcsin arccos arctan arctan2 erfc ---------------------------------------------------

def test_inverse_trig_and_erfc_special_values():
    v = np.array([0.0, -0.0, 1.0, -1.0, 1.5, np.inf, -np.inf, np.nan, 1e-300, 30.0, -30.0])
    names = ["arcsin", "arccos", "arctan", "erfc"]
    outs = jitad.jit(lambda x: tuple(getattr(jitad, n)(x) for n in names))(v)
    with np.errstate(all="ignore"):
        for n, got in zip(names, outs):
            want = jax.scipy.special.erfc(v) if n == "erfc" else getattr(np, n)(v)
            np.testing.assert_allclose(got, want, rtol=1e-14, err_msg=n)
    y = np.array([0.0, -0.0, 0.0, 1.0, -1.0, np.inf, np.inf, np.nan])
    x = np.array([0.0, 0.0, -0.0, -np.inf, np.inf, np.inf, -1.0, 1.0])
    np.testing.assert_array_equal(jitad.jit(jitad.arctan2)(y, x), np.arctan2(y, x))
    assert jitad.arctan2(1, -1) == pytest.approx(3 * math.pi / 4)   # ints compute in f64
    assert jitad.jit(jitad.arctan2)(np.ones(2, np.float32), np.float32(2)).dtype == np.float32


@pytest.mark.parametrize("name,x", [("arcsin", 0.3), ("arccos", -0.7), ("arctan", 2.5), ("erfc", -0.4)])
def test_inverse_trig_and_erfc_derivatives(name, x):
    f, fj = getattr(jitad, name), getattr(jax.scipy.special if name == "erfc" else jnp, name)
    assert jitad.grad(f)(x) == pytest.approx(float(jax.grad(fj)(x)), rel=1e-13)
    assert jitad.grad(jitad.grad(f))(x) == pytest.approx(float(jax.grad(jax.grad(fj))(x)), rel=1e-12)
    check_grads(f, (x,), order=2, modes=("rev", "fwd"))


def test_arctan2_derivatives():
    y, x = 0.7, -1.3
    for arg in (0, 1):
        want = jax.grad(jax.grad(jnp.arctan2, arg), arg)(y, x)
        assert jitad.grad(jitad.grad(jitad.arctan2, arg), arg)(y, x) == pytest.approx(float(want), rel=1e-12)
    check_grads(jitad.arctan2, (y, x), order=2, modes=("rev", "fwd"))
    assert jitad.grad(jitad.arctan2, argnums=(0, 1))(0.0, 0.0) == (0.0, 0.0)   # JAX: NaN
