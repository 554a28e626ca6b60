"""Derivatives the differential fuzzer found unlike JAX's at edge values: `lax.rsqrt` at
-0.0 (JAX's rule, -0.5 * rsqrt(x) / x), `floor`/`ceil`/`trunc`/`round`/`rint` (0
everywhere, ±inf too), and `logaddexp` where an argument is +inf (jitad's documented
choice: the other argument's derivative is 0, two +inf share it) -- against JAX's
gradients and `check_grads` elsewhere."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import jitad
import jitad.lax as lax
import jitad.numpy as jnp
from jitad.testing import check_grads

jax.config.update("jax_enable_x64", True)
INF, NAN = np.inf, np.nan


def test_rsqrt_derivatives_are_jaxs():
    x = np.array([-0.0, 0.0, 1e-300, 0.25, 4.0, INF, -1.0, NAN])
    want = jax.vmap(jax.grad(jax.lax.rsqrt))(x)
    np.testing.assert_array_equal(jitad.vmap(jitad.grad(lax.rsqrt))(x), want)
    np.testing.assert_array_equal(jitad.grad(lambda v: jnp.sum(lax.rsqrt(v)))(x), want)
    assert jitad.grad(lax.rsqrt)(-0.0) == -INF
    second = jitad.grad(jitad.grad(lax.rsqrt))(2.0)
    np.testing.assert_allclose(second, jax.grad(jax.grad(jax.lax.rsqrt))(2.0), rtol=1e-14)
    check_grads(lax.rsqrt, (np.array([0.3, 2.0, 7.5]),), order=2)
    out = jitad.jvp(lax.rsqrt, (np.array([4.0, -0.0]),), (np.ones(2),))[1]
    np.testing.assert_array_equal(out, [-0.0625, -INF])


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "round", "rint"])
def test_rounding_has_derivative_zero_at_infinities_too(name):
    x = np.array([INF, -INF, 1.5, -2.5, 0.0, NAN])
    f = lambda m: (lambda v: m.sum(getattr(m, name)(v) * 3.0))
    out = jitad.grad(f(jnp))(x)
    np.testing.assert_array_equal(np.abs(out), np.zeros(6))
    np.testing.assert_array_equal(np.abs(jax.grad(f(jjnp))(x)), np.zeros(6))
    np.testing.assert_array_equal(jitad.jit(getattr(jnp, name))(x), getattr(np, name)(x))


def test_logaddexp_gradients_as_jax_and_at_inf_as_documented():
    vals = [-INF, -1.0, 0.0, 2.0, INF, NAN]
    a, b = (v.ravel() for v in np.meshgrid(vals, vals))
    loss = lambda m: (lambda a, b: m.sum(m.logaddexp(a, b)))
    mine = jitad.grad(loss(jnp), argnums=(0, 1))(a, b)
    theirs = jax.grad(loss(jjnp), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(jitad.jit(jnp.logaddexp)(a, b), jjnp.logaddexp(a, b), rtol=1e-15)
    inf = np.maximum(a, b) == INF
    for m, t, this, other in ((mine[0], theirs[0], a, b), (mine[1], theirs[1], b, a)):
        np.testing.assert_allclose(m[~inf], t[~inf], rtol=1e-15)   # NaN at the same places too
        # where the result is +inf: 1 for the +inf argument, 0 for the other, 0.5 for a tie
        np.testing.assert_array_equal(m[inf], np.where(other[inf] == INF, np.where(this[inf] == INF, 0.5, 0.0),
                                                       (this[inf] == INF) * 1.0))
    check_grads(jnp.logaddexp, (np.array([-1.0, 0.0, 30.0]), np.array([2.0, 0.0, -700.0])), order=2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_hypot_derivatives_are_exact_at_extreme_magnitudes(dtype):
    # x / hypot(x, y) with hypot subnormal or overflowing is not x / r's true value; JAX's
    # derivative is -inf at (1e-300, 1e-300) and NaN at (1e-300, 0)
    tiny, huge = np.finfo(dtype).smallest_subnormal, np.finfo(dtype).max
    x = np.array([tiny, 1e-30, 3e-30, tiny, huge, INF, -INF, 0.0, -3.0, 2.0], dtype)
    y = np.array([tiny, 1e-30, 4e-30, 0.0, huge, 1.0, 2.0, 0.0, 4.0, NAN], dtype)
    r = 1 / np.sqrt(2.0)
    want_x = [r, r, 0.6, 1.0, r, 1.0, -1.0, 0.5, -0.6, NAN]
    want_y = [r, r, 0.8, 0.0, r, 0.0, 0.0, 0.5, 0.8, NAN]
    gx, gy = jitad.grad(lambda a, b: jnp.sum(jnp.hypot(a, b)), argnums=(0, 1))(x, y)
    assert gx.dtype == dtype
    np.testing.assert_allclose(gx, want_x, rtol=4 * np.finfo(dtype).eps)
    np.testing.assert_allclose(gy, want_y, rtol=4 * np.finfo(dtype).eps)
    check_grads(jnp.hypot, (np.array([0.3, -2.0, 5.0]), np.array([1e-3, 4.0, -5.0])), order=2, modes=("rev", "fwd"))


@pytest.mark.parametrize("how", ["min", "max", "multiply"])
def test_at_updates_at_a_staged_index_leave_other_positions_whole(how):
    # a position no update hits was combined with the reduction's identity (min(inf, inf): a
    # tie, half the gradient)
    x, i = np.array([INF, 1.0, -INF, 2.0]), np.array([1, 3])
    mine = jitad.grad(lambda x, i: jnp.sum(getattr(jnp.asarray(x).at[i], how)(1.5)))(x, i)
    theirs = jax.grad(lambda x, i: jjnp.sum(getattr(jjnp.asarray(x).at[i], how)(1.5, mode="clip")))(x, i)
    np.testing.assert_array_equal(mine, theirs)
    np.testing.assert_array_equal(mine[[0, 2]], [1.0, 1.0])


def test_arctan2_derivatives_where_the_squared_radius_underflows_or_overflows():
    # (a fuzz finding) x / (x² + y²) read 1e-200 at (1e-200, 1e-200) (x² + y² underflowed to 0)
    # and 0 at (1e200, 1e200); jitad divides by the larger magnitude first
    y = np.array([1e-200, 1e200, 3.0, -2.0, 0.0, INF, 1.0, -INF, -5e-324])
    x = np.array([1e-200, 1e200, 4.0, -1e-300, 0.0, 1.0, -INF, -INF, 1e-310])
    dy, dx = jitad.vmap(jitad.grad(jnp.arctan2, argnums=(0, 1)))(y, x)
    np.testing.assert_allclose(dy[:4], [5e199, 5e-201, 0.16, -2.5e-301], rtol=1e-15)
    np.testing.assert_allclose(dx[:4], [-5e199, -5e-201, -0.12, 0.5], rtol=1e-15)
    np.testing.assert_array_equal(np.abs(np.concatenate([dy[4:8], dx[4:8]])), 0.0)   # the origin, infinities
    assert dy[8] == INF and dx[8] == pytest.approx(4.9406564584124654e296, rel=1e-12)   # (1e310 overflows)
    # the tangent of arctan2(x, x) is exactly 0 (its two terms cancel)
    t = np.array([0.3, 0.7, -0.1])
    assert np.all(jitad.jvp(lambda a: jnp.arctan2(a, a), (np.array([1e-40, -5e-194, 2.3]),), (t,))[1] == 0.0)
    check_grads(jnp.arctan2, (np.array([0.3, -1.2, 2.0]), np.array([1.5, -0.4, -3.0])), order=2)


def test_arccosh_derivative_at_one_is_infinite():
    # (a fuzz finding) it was NaN: inf * 0 in the derivative of sqrt(t (t + 2)) at t = 0; below 1,
    # where the value is NaN, so is the derivative (JAX's formula 1 / sqrt(x² - 1) gives numbers
    # below -1)
    x = np.array([1.0, 1.0000001, 2.0, 1e9, 0.5, -7.2, -1.0, -1e9])
    assert np.isnan(jitad.vmap(jitad.grad(jnp.arccosh))(x[4:])).all()
    x = x[:4]
    np.testing.assert_allclose(jitad.vmap(jitad.grad(jnp.arccosh))(x), jax.vmap(jax.grad(jjnp.arccosh))(x), rtol=1e-14)
    assert jitad.grad(jnp.arccosh)(np.float32(1.0)) == INF
    below = np.array([0.5, -7.2, -1.0, -1e9, -np.inf])
    assert np.isnan(jitad.jit(jnp.arccosh)(below)).all() and np.isnan(jnp.arccosh(below)).all()
    check_grads(jnp.arccosh, (np.array([1.5, 3.0, 1e3]),), order=2)


BIG = 1.7976931348623157e308


@pytest.mark.parametrize("initial", [None, 0.0, 2.0])
def test_prod_has_derivative_zero_beside_a_zero_factor_whose_partners_overflow(initial):
    # the derivative of an entry is the product of the other factors (`initial` one of them):
    # 0 where one is 0, also where the rest overflow (0 · inf would make NaN); JAX's agrees
    # wherever it is not NaN
    rows = np.array([[-1.5, 0.1, BIG], [BIG, -1.5, 0.1], [1e300, 0.0, 1e300], [0.0, 1e300, 1e300],
                     [2.0, 1e300, 0.0], [3.0, -0.5, 4.0]])
    prod = lambda m: (lambda x: m.sum(m.prod(x, axis=1, initial=initial)))
    zero_elsewhere = (np.sum(rows == 0, axis=1, keepdims=True) - (rows == 0) > 0) | (initial == 0.0)
    # forward mode, where `initial` is not 0: the same derivatives along t (at initial=0 an
    # overflowing tangent of the product meets the 0 last: NaN, as JAX's)
    t = np.cos(np.arange(18) + 0.5).reshape(6, 3)
    mine = jitad.jvp(lambda r: jnp.prod(r, axis=1, initial=initial) * 1.0, (rows,), (t,))[1]
    if initial != 0.0:
        np.testing.assert_array_equal(mine[2:], np.sum(jitad.grad(prod(jnp))(rows) * t, axis=1)[2:])
    mine, theirs = jitad.grad(prod(jnp))(rows), jax.grad(prod(jjnp))(rows)
    assert not np.isnan(mine).any()
    np.testing.assert_array_equal(mine[zero_elsewhere], 0.0)
    known = ~np.isnan(theirs)
    known[:2] = False   # (where nothing is 0, an overflow in the tree of products differs from JAX's)
    np.testing.assert_allclose(mine[known], theirs[known], rtol=1e-15)
    check_grads(lambda x: jnp.prod(x, axis=1, initial=initial), (rows[5:] * np.array([[1.0, 0.0, 1.0]]),), order=2)
