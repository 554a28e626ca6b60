"""Wrong gradients (and those the nesting fuzzer of
tests/reliability/test_nesting.py found), one regression test each."""
import math

import numpy as np
import pytest

import jitad
from jitad.testing import check_grads


def second_derivatives(f, x, *held):
    """d²f/dx² at x by rev∘rev, rev∘fwd, fwd∘rev and fwd∘fwd (the `held` inputs fixed)."""
    zeros = (0.0,) * len(held)
    d_fwd = lambda x, *h: jitad.jvp(f, (x,) + h, (1.0,) + zeros)[1]
    d_rev = jitad.grad(f)
    return [jitad.grad(d_rev)(x, *held), jitad.grad(d_fwd)(x, *held),
            jitad.jvp(d_rev, (x,) + held, (1.0,) + zeros)[1], jitad.jvp(d_fwd, (x,) + held, (1.0,) + zeros)[1]]


# -- the power rule at zero (JAX's lax.pow rule; PyTorch gives the same) -------------

def test_zero_base_has_zero_exponent_derivative():
    assert jitad.grad(lambda y: 0.0 ** y)(2.0) == 0.0       # was NaN: log(0) * 0
    assert jitad.grad(lambda y: 0.0 ** y)(0.0) == 0.0
    assert jitad.grad(lambda x, y: x ** y, argnums=(0, 1))(0.0, 0.0) == (0.0, 0.0)
    assert jitad.grad(lambda x, y: x ** y, argnums=1)(0.0, 3.0) == 0.0


def test_zero_exponent_has_zero_base_derivative():
    assert jitad.grad(lambda x: x ** 0.0)(0.0) == 0.0       # was NaN: 0 * 0 ** -1
    assert jitad.grad(lambda x: x ** 0)(0.0) == 0.0
    assert jitad.grad(lambda x, y: x ** y)(0.0, 0.0) == 0.0   # a staged exponent
    assert jitad.grad(lambda x, y: x ** y)(0.0, 1.0) == 1.0
    assert all(v == 0.0 for v in second_derivatives(lambda x, y: x ** y, 0.0, 1.0))   # was NaN


def test_power_rule_keeps_its_own_derivatives_near_zero_exponent():
    # d/dy of d/dx x**y = y x**(y-1) is x**(y-1) + ..., 1/x at y == 0: a select on y == 0
    # alone (the exponent 1 there) gave 2.98 here
    f = lambda x: (2.0 + jitad.sin(x)) ** jitad.tanh(x)
    expected = 2 * 0.5 + math.log(2.0) ** 2   # (u'' + u'^2) e^u, u = tanh x log(2 + sin x)
    for v in second_derivatives(f, 0.0):
        assert v == pytest.approx(expected, rel=1e-12)
    check_grads(f, (0.0,), order=2, modes=("fwd", "rev"))


def test_negative_base_with_a_differentiated_exponent_is_nan_as_jax():
    assert math.isnan(jitad.grad(lambda y: (-2.0) ** y)(2.0))
    assert jitad.grad(lambda x, y: x ** y)(-2.0, 3.0) == 12.0   # the base's derivative is fine


# -- reverse over forward: dead code must not reach the backward pass ------------------

@pytest.mark.parametrize("power", [lambda t: t ** 2, lambda t: t ** 2.0, lambda t: jitad.square(t)],
                         ids=["int", "float", "square"])
def test_reverse_over_forward_of_power_with_negative_base(power):
    g = jitad.grad(lambda w: jitad.jvp(lambda x: power(x - 10.0 * w), (0.0,), (1.0,))[1])
    assert g(1.0) == -20.0   # was NaN


def test_reverse_over_forward_with_a_staged_constant_exponent():
    # the exponent is staged (no integer power), but carries no derivative: forward mode's
    # unused log(x) term for it is dead code, and 0 * log(-10) must not reach w's adjoint
    def f(w, y):
        return jitad.jvp(lambda x: (x - 10.0 * w) ** y, (0.0,), (1.0,))[1]
    assert jitad.grad(f)(1.0, 2.0) == -20.0
    assert jitad.grad(f)(1.0, 3.0) == pytest.approx(600.0, rel=1e-14)   # d/dw 300 w**2


def test_second_derivatives_of_negative_base_integer_powers():
    for f, expected in [(lambda x: x ** 3, -12.0), (lambda x: x ** 3.0, -12.0), (lambda x: x ** -2, 6 / 16),
                        (lambda x: (x - 3.0) ** 4, 12 * 25.0)]:
        assert second_derivatives(f, -2.0) == pytest.approx([expected] * 4, rel=1e-14)


# -- constant integer exponents are integer powers ---------------------------------------

def test_constant_integer_exponents_stage_without_pow():
    text = str(jitad.trace(lambda x: x ** 5 + x ** -2 + x ** 3.0 + x ** np.int64(2), 1.0))
    assert "pow" not in text and "square" in text
    assert "pow" in str(jitad.trace(lambda x: x ** 2.5 + x ** 100, 1.0))   # the rest stay pow


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 16, 64, -1, -2, -5, 2.0, -3.0])
def test_integer_powers_match_numpy(n):
    x = np.linspace(-3.0, 3.0, 13)   # 0 included: inf for the negative powers
    with np.errstate(divide="ignore"):
        expected, expected32 = x ** n, x.astype(np.float32) ** n
    np.testing.assert_allclose(jitad.jit(lambda x: x ** n)(x), expected, rtol=4e-15)
    got32 = jitad.jit(lambda x: x ** n)(x.astype(np.float32))
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, expected32, rtol=4e-6)


def test_zeroth_power_is_one_everywhere():
    f = jitad.jit(lambda x: (x ** 0, x ** 0.0))
    assert f(math.nan) == (1.0, 1.0) and f(math.inf) == (1.0, 1.0)
    out = jitad.jit(lambda x: x ** 0)(np.ones((2, 3), np.float32))
    assert out.shape == (2, 3) and out.dtype == np.float32 and (out == 1).all()
    # its second derivative at a tiny x was 0 * inf = NaN (0 * x ** -2 overflowing)
    assert second_derivatives(lambda x: x ** 0, 5e-269) == [0.0] * 4


def test_dead_weight_product_in_a_loop_adds_nothing():
    # the backward pass skips dead nodes, so the batched weight gradient must not plan
    # one: its tables would never be written, and their garbage would reach W's gradient
    def f(w, x0):
        def body(i, s):
            unused = s @ w   # noqa: F841  (a product nothing reads)
            return jitad.tanh(s * 0.9 + 0.1)
        return jitad.sum(jitad.FOR(0, 3, body, x0) @ w)
    w, x0 = np.random.default_rng(0).random((4, 4)), np.random.default_rng(1).random((3, 4))
    g = jitad.grad(f)
    g(w, x0)
    assert "table_gemm_add" not in g.ir
    check_grads(f, (w, x0))
