"""A value whose adjoint nothing ever adds to (it only reaches a comparison, a bool or
int result, or an op of zero derivative) passes no cotangent back, as JAX's symbolic zeros:
its VJP is not run, so 0 times an infinite or NaN partial (x / x at 0, sqrt at 0) does not
make a NaN gradient."""
import numpy as np
import pytest

import jax
import jax.numpy as xnp

import jitad
import jitad.lax
import jitad.numpy as jnp
from jitad.testing import check_grads

jax.config.update("jax_enable_x64", True)


def programs(m, lax, scan):
    """Each reaches an op with an infinite or NaN derivative at 0 only through a comparison,
    a bool, an int or a piecewise-constant op, beside a path that does carry a gradient."""
    return {
        "compare": lambda x: (x / x == 2.0) * 1.0 + x,
        "bool_op": lambda x: m.where(m.isnan(m.log(x)) | (m.sqrt(x) > 1.0), x, 2.0 * x),
        "floor_and_argmax": lambda x: m.floor(m.sqrt(x)) + m.argmax(m.sqrt(x)) * x,
        "in_scan": lambda x: scan(lambda c, xi: (c + (m.sqrt(xi) > 1.0) * 1.0, (xi / xi == 2.0) * xi + xi),
                                  0.0, x)[1],
        "in_fori": lambda x: lax.fori_loop(0, 2, lambda i, v: v * 1.5 + (m.sqrt(v) > 1.0) * 1.0, x),
        "in_cond": lambda x: lax.cond(m.sum(x) >= 0.0, lambda v: (m.log(v) > 0.0) * 1.0 + v, lambda v: v, x),
    }


MINE = programs(jnp, jitad.lax, jitad.scan)
JAXS = programs(xnp, jax.lax, lambda f, c, xs: jax.lax.scan(f, c, xs))


@pytest.mark.parametrize("name", sorted(MINE))
def test_gradient_at_zero_is_jaxs_not_nan(name):
    x = np.array([0.0, 4.0, 0.0])
    mine = jitad.grad(lambda x: jnp.sum(MINE[name](x)))(x)
    theirs = jax.grad(lambda x: xnp.sum(JAXS[name](x)))(x)
    assert not np.isnan(mine).any()
    np.testing.assert_allclose(mine, theirs, rtol=1e-15)


def test_second_order_and_per_example_gradients_at_zero():
    x = np.array([0.0, 4.0])
    f_mine, f_jax = MINE["compare"], JAXS["compare"]
    hvp = jitad.grad(lambda x: jnp.sum(jitad.grad(lambda y: jnp.sum(f_mine(y) * y))(x)))(x)
    np.testing.assert_array_equal(hvp, jax.grad(lambda x: xnp.sum(jax.grad(lambda y: xnp.sum(f_jax(y) * y))(x)))(x))
    per_example = jitad.vmap(jitad.grad(lambda x: jnp.sum(MINE["bool_op"](x))))(np.stack([x, x + 1.0]))
    np.testing.assert_array_equal(per_example, [[2.0, 1.0], [2.0, 1.0]])


def test_a_cotangent_that_does_flow_still_counts():
    # (the same programs away from 0: the gradient is the ordinary one)
    check_grads(lambda x: jnp.sum(MINE["in_scan"](x) * x), (np.array([0.5, 2.0]),), order=2, modes=("rev",))
    check_grads(lambda x: jnp.sum(MINE["in_cond"](x) ** 2), (np.array([0.5, 2.0]),), order=1, modes=("rev",))


def test_an_unused_custom_rule_output_runs_no_backward_pass():
    # (a fuzz finding) `lax.rsqrt` is a custom_jvp: its output unused, its transposed rule
    # multiplied a zero cotangent by the NaN partial at x < 0; JAX's gradient is 0 there
    def f(m, lax):
        def loss(x):
            lax.rsqrt(x)
            return m.sum(x[1:] * 2.0) + m.sum(x[0:0])
        return loss
    x = np.array([-1e300, 2.0, -1.0])
    want = jax.grad(f(xnp, jax.lax))(x)
    np.testing.assert_array_equal(jitad.grad(f(jnp, jitad.lax))(x), want)
    np.testing.assert_array_equal(jitad.jit(jitad.grad(f(jnp, jitad.lax)))(x), want)


def test_a_custom_vjp_whose_outputs_get_no_cotangent_is_not_run_backward():
    calls = []

    @jitad.custom_vjp
    def g(x):
        return jnp.sqrt(x)
    g.defvjp(lambda x: (g(x), x), lambda x, ct: (calls.append(1) or ct * np.nan,))
    x = np.array([1.0, 4.0])
    np.testing.assert_array_equal(jitad.grad(lambda x: (g(x), jnp.sum(x))[1])(x), [1.0, 1.0])
    assert calls == []
    np.testing.assert_array_equal(jitad.grad(lambda x: jnp.sum(g(x)))(x), [np.nan, np.nan])   # (it runs when used)


def test_an_unused_loop_or_branch_gets_no_backward_pass():
    # (a fuzz finding) a `cond` whose output nothing reads: its branch's derivative at NaN made
    # the whole gradient NaN; JAX's is that of the rest
    def f(m, lax):
        def loss(x):
            lax.cond(m.min(x) > 0, lambda v: v * 2.0, lambda v: m.cos(v), m.min(x))
            lax.fori_loop(0, 2, lambda i, v: m.sqrt(v), x * 0.0 - 1.0)
            return m.sum(x * 3.0)
        return loss
    x = np.array([np.nan, 2.5])
    want = jax.grad(f(xnp, jax.lax))(x)
    np.testing.assert_array_equal(jitad.grad(f(jnp, jitad.lax))(x), want)
    np.testing.assert_array_equal(jitad.jit(jitad.grad(f(jnp, jitad.lax)))(x), want)
