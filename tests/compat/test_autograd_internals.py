"""The autograd internals its own test suite imports, as jitad gives them: core's
`make_vjp(fun, x)`/`make_jvp(fun, x)`, the rule tables `primitive_vjps`/`primitive_jvps`, a
primitive without a rule refusing to be differentiated, `vspace` of a scalar, the builtins'
`isinstance` of a staged array, and check_grads' failure message naming mode and function."""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad import builtins, core, extend
from jitad.errors import MissingRuleError
from jitad.test_util import check_grads


def test_core_make_vjp_and_make_jvp_take_the_point():
    vjp, ans = core.make_vjp(lambda x: x * x * 3.0, 2.0)
    assert ans == 12.0 and vjp(1.0) == 12.0
    assert core.make_jvp(lambda x: x * x * 3.0, 2.0)(0.5) == (12.0, 6.0)
    assert core.make_vjp(jitad.sin)(0.5)[0](1.0) == pytest.approx(np.cos(0.5))   # the operator form stays


def test_a_primitive_without_rules_runs_but_is_not_differentiated():
    double = extend.primitive(lambda x: 2.0 * x)
    assert double(3.0) == 6.0 and jitad.jit(double)(3.0) == 6.0
    with pytest.raises(MissingRuleError, match="defvjp"):
        jitad.grad(double)(1.0)
    with pytest.raises(NotImplementedError):   # autograd's exception type, too
        jitad.jvp(double, (1.0,), (1.0,))


def test_rules_live_in_the_tables():
    square = extend.primitive(lambda x: x * x)
    extend.defvjp(square, lambda ans, x: lambda g: g * 2.0 * x)
    assert square in core.primitive_vjps and square not in core.primitive_jvps
    assert jitad.grad(square)(3.0) == 6.0
    rule = core.primitive_vjps.pop(square)   # (a program compiled before keeps the rule it was traced with)
    with pytest.raises(MissingRuleError):
        jitad.grad(lambda x: square(x))(3.0)
    core.primitive_vjps[square] = rule
    assert jitad.grad(lambda x: square(x))(3.0) == 6.0


def test_vspace_of_a_scalar_draws_scalars():
    space = extend.vspace(0.0)
    assert isinstance(space.randn(), float) and space.zeros() == 0.0
    mixed = extend.vspace([1.0, np.zeros((2, 1))]).randn()
    assert isinstance(mixed[0], float) and mixed[1].shape == (2, 1)


def test_builtins_isinstance_sees_a_staged_array_as_an_array():
    def f(x):
        assert builtins.isinstance(x, jnp.ndarray) and builtins.isinstance(x, np.ndarray)
        assert not builtins.isinstance(x, (tuple, list))
        return jnp.sum(x)
    np.testing.assert_array_equal(jitad.grad(f)(np.zeros(2)), np.ones(2))


def test_check_grads_failure_names_mode_and_function():
    def foo(x):
        return x * 2.0
    wrong = extend.primitive(foo)
    extend.defvjp(wrong, lambda ans, x: lambda g: g * 2.001)
    with pytest.raises(AssertionError, match=r"\(VJP\) check of foo failed"):
        check_grads(wrong, modes=["rev"])(1.0)
