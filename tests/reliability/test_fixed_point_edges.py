"""`jitad.fixed_point`'s derivatives of every order are the implicit function theorem's
at the point the solve stopped at, each linear equation solved by a fixed point of its
own: second derivatives agree with autograd's `fixed_point` and with the exact value to
the solver's tolerance."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from autograd.misc.fixed_points import fixed_point as ag_fixed_point

import jitad
import jitad.numpy as jnp
from jitad.testing import check_grads

EXACT_D2 = -0.25 * 2.0 ** -1.5   # d2/da2 sqrt(a) at a = 2


def _newton(a):
    return lambda x: 0.5 * (x + a / x)


def _descent(a):   # contraction L = 1 - 0.1 sqrt(a) near the root: slow, so tolerances show
    return lambda x: x - 0.05 * (x ** 2 - a)


def _sqrt(step, guess, tol):
    return lambda a: jitad.fixed_point(step(a), guess, tol=tol)


def test_autograds_example_agrees_with_autograd():
    distance = lambda x, y: anp.abs(x - y)
    ours = jitad.grad(jitad.grad(_sqrt(_descent, 10.0, 1e-4)))(2.0)
    theirs = autograd.grad(autograd.grad(lambda a: ag_fixed_point(_descent, a, 10.0, distance, 1e-4)))(2.0)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)
    contraction = 1.0 - 0.1 * np.sqrt(2.0)
    assert abs(ours - EXACT_D2) < 1e-4 / (1.0 - contraction)   # to the solver's tolerance


@pytest.mark.parametrize("step", [_newton, _descent])
@pytest.mark.parametrize("guess", [1.0, 10.0])
def test_second_derivatives_are_exact_at_a_tight_tolerance(step, guess):
    s = _sqrt(step, guess, 1e-12)
    assert abs(jitad.grad(jitad.grad(s))(2.0) - EXACT_D2) < 1e-9
    assert abs(jitad.jit(jitad.grad(jitad.grad(s)))(2.0) - EXACT_D2) < 1e-9
    assert abs(jitad.hessian(s)(2.0) - EXACT_D2) < 1e-9
    tangent = lambda a: jitad.jvp(s, (a,), (1.0,))[1]   # forward mode: its own tangent rule
    assert abs(tangent(2.0) - 0.5 / np.sqrt(2.0)) < 1e-10
    assert abs(jitad.jvp(tangent, (2.0,), (1.0,))[1] - EXACT_D2) < 1e-9


def test_forward_mode_at_a_loose_tolerance_is_exact_at_the_solution_found():
    s = _sqrt(_descent, 10.0, 1e-4)
    x = s(2.0)
    contraction = 1.0 - 0.1 * x
    tangent = jitad.jvp(s, (2.0,), (1.0,))[1]
    assert abs(tangent - 0.5 / x) < 1e-4 / (1.0 - contraction)   # d x*/da = 0.5 / x* at the x* found
    assert abs(jitad.grad(s)(2.0) - 0.5 / x) < 1e-4 / (1.0 - contraction)


def test_vector_fixed_point_with_several_closed_over_values():
    rng = np.random.default_rng(0)
    w, c = rng.normal(size=(3, 3)) * 0.3, rng.normal(size=3)

    def loss(w, c):
        z = jitad.fixed_point(lambda z: 0.5 * jnp.tanh(w @ z) + c, jnp.zeros(3) * c, tol=1e-13)
        return jnp.sum(z * z)
    check_grads(loss, (w, c), order=2, modes=("fwd", "rev"))
    z = np.zeros(3)
    for _ in range(200):
        z = 0.5 * np.tanh(w @ z) + c
    jac = np.eye(3) - 0.5 * (1.0 - np.tanh(w @ z) ** 2)[:, None] * w   # I - df/dz at z*
    np.testing.assert_allclose(jitad.grad(loss, 1)(w, c), np.linalg.solve(jac.T, 2.0 * z), rtol=1e-10)
    batched = jitad.vmap(jitad.grad(loss, 1), in_axes=(None, 0))(w, np.stack([c, 2.0 * c]))
    np.testing.assert_allclose(batched[0], jitad.grad(loss, 1)(w, c), rtol=1e-12)
