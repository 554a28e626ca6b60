"""A scan declared by its combine function alone gets its VJP and JVP derived from the
combine (`along_axis.derived_scan_vjp`/`derived_scan_jvp`): gradients against JAX's
cummax, cummin, cumprod (zeros included) and cumlogsumexp, both directions and axes,
and check_grads to second order."""
import numpy as np
import pytest

import jitad
from jitad.ir.ops import PRIMITIVES, TABLES, Op
from jitad.numeric import bind
from jitad.primitives import along_axis
from jitad.testing import check_grads

jax = pytest.importorskip("jax", reason="JAX is the reference (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
lax = jax.lax

X = np.array([[0.5, -1.0, 2.0, 2.0, 0.3], [1.5, 3.0, -0.75, 4.0, 0.0]])
WEIGHTS = np.arange(10.0).reshape(2, 5) - 3.0


def _logaddexp(a, x):
    return along_axis.maximum(a, x) + along_axis.log1p(along_axis.exp(-abs(a - x)))


@pytest.fixture(scope="module")
def scans():
    """Scans declared now with no derivative rules, removed afterwards."""
    ops = {"cummax": along_axis.declare_scan("derived_cummax", along_axis.maximum, -np.inf, flags="pure kernel float_only"),
           "cummin": along_axis.declare_scan("derived_cummin", along_axis.minimum, np.inf, flags="pure kernel float_only"),
           "cumprod": along_axis.declare_scan("derived_cumprod", lambda acc, x: acc * x, 1, flags="pure kernel float_only"),
           "cumlogsumexp": along_axis.declare_scan("derived_lcse", _logaddexp, -np.inf, flags="pure kernel float_only")}
    yield ops
    for op in ops.values():
        del PRIMITIVES[op.name], along_axis.SCANS[op]
        for table in TABLES.values():
            table.declared.pop(op, None)
        delattr(Op, op.name.upper())


@pytest.mark.parametrize("name", ["cummax", "cummin", "cumprod", "cumlogsumexp"])
def test_gradients_match_jax(scans, name):
    x = X.copy()
    if name == "cumprod":
        x[0, 2] = 0.0   # exact at zeros: no division
    for axis in (0, 1):
        for reverse in (False, True):
            ours = jitad.grad(lambda x: jitad.sum(bind(scans[name], x, axis=axis, reverse=reverse) * WEIGHTS))(x)
            theirs = jax.grad(lambda x: jax.numpy.sum(getattr(lax, name)(x, axis=axis, reverse=reverse) * WEIGHTS))(x)
            np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12, err_msg=f"{name} {axis} {reverse}")
            v = np.cos(np.arange(10.0)).reshape(2, 5)
            _, t_ours = jitad.jvp(lambda x: bind(scans[name], x, axis=axis, reverse=reverse), (x,), (v,))
            _, t_theirs = jax.jvp(lambda x: getattr(lax, name)(x, axis=axis, reverse=reverse), (x,), (v,))
            np.testing.assert_allclose(t_ours, t_theirs, rtol=1e-12, atol=1e-12)


def test_second_order_by_check_grads(scans):
    x = X + np.array([0.0, 0.1, 0.2, 0.3, 0.4])   # no ties: max and min are smooth there
    for name in ("cumprod", "cumlogsumexp", "cummax"):
        check_grads(lambda x: jitad.sum(bind(scans[name], x, axis=1, reverse=False) ** 2), (x,), order=2)


def test_the_builtin_cumprod_uses_the_derived_rules():
    assert TABLES["vjp"].declared[Op.CUMPROD].__qualname__.startswith("derived_scan_vjp")
    x = np.array([2.0, 0.0, 3.0, -1.5])
    np.testing.assert_allclose(jitad.grad(lambda x: jitad.sum(jitad.cumprod(x) * np.arange(4.0)))(x),
                               jax.grad(lambda x: jax.numpy.sum(jax.numpy.cumprod(x) * np.arange(4.0)))(x))


def test_cumprod_derivatives_stay_exact_where_the_running_product_overflows():
    # the recurrence's first maps have nothing before them: an infinite product of the others
    # must not meet the 0 that stood in for it (inf * 0: NaN, where the derivative is inf)
    x = np.array([[7.7, -1.0], [-0.0, 3.4e38], [3.4e38, -np.inf]], np.float32)
    for reverse in (False, True):
        xs = x[::-1].copy() if reverse else x
        ours = jitad.grad(lambda x: jitad.sum(jitad.lax.cumprod(x, axis=0, reverse=reverse)))(xs)
        theirs = jax.grad(lambda x: jax.numpy.sum(lax.cumprod(x, axis=0, reverse=reverse)))(xs)
        np.testing.assert_array_equal(ours, theirs)
    x = np.array([np.inf, 2.0, 3.0])
    _, t_ours = jitad.jvp(lambda x: jitad.lax.cumprod(x, axis=0), (x,), (np.ones(3),))
    _, t_theirs = jax.jvp(lambda x: lax.cumprod(x, axis=0), (x,), (np.ones(3),))
    np.testing.assert_array_equal(t_ours, t_theirs)
