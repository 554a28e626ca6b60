"""autograd's form of `check_grads` checks, at the second order in reverse mode, the VJP
as a function of the point and the cotangent: a rule whose bwd disagrees with its fwd at
the second order fails it, as it fails autograd's checker; a right one passes."""
import numpy as np
import pytest

import jitad.numpy as jnp
from jitad.extend import defvjp, primitive
from jitad.test_util import check_grads


def scaled(factor):
    @primitive
    def twice(x):
        return 2.0 * x

    @primitive
    def inner(g):
        return g

    defvjp(twice, lambda ans, x: lambda g: 2.0 * inner(g))
    defvjp(inner, lambda ans, g: lambda h: factor * h)
    return twice


def test_a_wrong_backward_pass_fails_the_second_order_reverse_check():
    with pytest.raises(AssertionError, match=r"\(VJP\) check of vjp_twice failed"):
        check_grads(scaled(1.001), modes=["rev"])(1.0)
    check_grads(scaled(1.001), modes=["rev"], order=1)(1.0)   # the first order holds


def test_right_rules_pass_both_orders_and_modes():
    check_grads(scaled(1.0), modes=["rev"])(1.0)
    check_grads(lambda x: jnp.sum(jnp.sin(x) * x[::-1]), modes=["fwd", "rev"])(np.array([0.3, -1.2, 0.8]))
