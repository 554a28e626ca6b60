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
