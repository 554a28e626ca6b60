"""A custom_vjp rule (and autograd's `defvjp`) gives the derivatives of every order, also
where a program that itself takes a gradient is differentiated (forward mode there runs the
transpose of the rule's bwd, never the body); compared with JAX, which differentiates the bwd.
The rule below is deliberately not the body's derivative (2 cos x for sin x), so the body's
derivative would show."""
import numpy as np
import pytest

import jitad
from jitad.extend import defvjp, primitive

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)


def doubled(lib):
    """sin with the rule `2 cos x`, the residual made by fwd."""
    @lib.custom_vjp
    def f(x):
        return lib.numpy.sin(x)
    f.defvjp(lambda x: (lib.numpy.sin(x), 2.0 * lib.numpy.cos(x)), lambda r, g: (g * r,))
    return f


@primitive
def doubled_autograd(x):
    return jitad.numpy.sin(x)


defvjp(doubled_autograd, lambda ans, x: lambda g: g * 2.0 * jitad.numpy.cos(x))

X = 0.7
XS = np.array([0.3, 0.9, -1.1])


def programs(lib, f):
    """Functions of second and third order that reach the rule through an inner gradient."""
    n = lib.numpy
    return [
        lambda v: lib.grad(n.sin)(v) * f(v),                     # the rule outside the inner grad
        lib.grad(lambda v: f(v) * v),
        lib.grad(lib.grad(lambda v: f(v) * v)),
        lambda v: n.sum(lib.grad(lambda u: n.sum(f(u) ** 2))(v) * f(v)),
    ]


@pytest.mark.parametrize("k", range(4))
def test_grad_of_a_program_taking_a_gradient_uses_the_rule(k):
    x = XS if k == 3 else X
    ours, theirs = programs(jitad, doubled(jitad))[k], programs(jax, doubled(jax))[k]
    np.testing.assert_allclose(jitad.grad(ours)(x), jax.grad(theirs)(x), rtol=1e-12)


def test_autograd_defvjp_rule_at_second_order():
    ours = jitad.grad(lambda v: jitad.grad(jitad.numpy.sin)(v) * doubled_autograd(v))(X)
    theirs = jax.grad(lambda v: jax.grad(jax.numpy.sin)(v) * doubled(jax)(v))(X)
    assert ours == pytest.approx(float(theirs), rel=1e-12)


def test_forward_mode_of_a_custom_vjp_transposes_its_rule():
    out, tangent = jitad.jvp(doubled(jitad), (XS,), (np.ones(3),))
    np.testing.assert_allclose(out, np.sin(XS), rtol=1e-15)
    np.testing.assert_allclose(tangent, 2.0 * np.cos(XS), rtol=1e-14)
    np.testing.assert_allclose(jitad.hessian(lambda u: jitad.numpy.sum(doubled(jitad)(u) ** 2))(XS),
                               jax.hessian(lambda u: jax.numpy.sum(doubled(jax)(u) ** 2))(XS), rtol=1e-12)


def scaled_by_its_own_rule(lib):
    """`2 x`, computed by a fwd that does not call itself, whose bwd `2 h(g) + x[::-1] g` uses
    another rule `h` (the identity, its bwd 1.001 g): the bwd disagrees with the fwd."""
    n = lib.numpy

    @lib.custom_vjp
    def h(x):
        return x
    h.defvjp(lambda x: (x, None), lambda r, g: (1.001 * g,))

    @lib.custom_vjp
    def f(x):
        return 2.0 * x
    f.defvjp(lambda x: (2.0 * x, x), lambda x, g: (2.0 * h(g) + x[::-1] * g,))
    return f, n


@pytest.mark.parametrize("argnum", [0, 1])
def test_reverse_over_reverse_differentiates_the_backward_pass_as_written(argnum):
    """The cotangent of the seed of an inner gradient is the bwd's transpose, not the fwd's
    derivative (as autograd's and JAX's: their second-order check sees a wrong bwd)."""
    def program(lib):
        f, n = scaled_by_its_own_rule(lib)
        return lambda x, c: n.sum(lib.grad(lambda u: n.sum(f(u) * c))(x) ** 2)
    x, c = XS, np.array([0.5, -2.0, 1.5])
    ours = jitad.grad(program(jitad), argnum)(x, c)
    np.testing.assert_allclose(ours, jax.grad(program(jax), argnum)(x, c), rtol=1e-12)


def test_autograd_defvjp_rule_with_a_wrong_backward_pass_at_second_order():
    @primitive
    def twice(x):
        return 2.0 * x

    @primitive
    def same(x):
        return x
    defvjp(twice, lambda ans, x: lambda g: 2.0 * same(g))
    defvjp(same, lambda ans, x: lambda g: 1.001 * g)
    seed_gradient = jitad.grad(lambda x, g: jitad.grad(lambda u: twice(u) * g)(x), 1)
    assert seed_gradient(1.0, 1.0) == pytest.approx(2.002, rel=1e-14)
