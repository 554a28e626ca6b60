"""Custom rules (`custom_jvp`, `custom_vjp`) called under `grad` from Python run with the
call's values, as JAX runs them: Python `if` on an argument, in the function and in its rule,
decides per call; compared with JAX's gradients on the same values."""
import pytest

import jitad

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)


def branchy_jvp(lib):
    """A custom_jvp function whose body and rule both branch on the argument in Python."""
    @lib.custom_jvp
    def f(x):
        return lib.numpy.sin(x) if x > 0 else lib.numpy.cos(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), (2.0 * t if x > 0 else 3.0 * t)
    return f


def branchy_vjp(lib):
    """A custom_vjp function whose forward rule branches on the argument in Python."""
    @lib.custom_vjp
    def g(x):
        return x * x

    def fwd(x):
        return g(x), (x if x < 1.0 else 10.0 * x)

    g.defvjp(fwd, lambda r, ct: (r * ct,))
    return g


@pytest.mark.parametrize("x", [3.0, -0.5])
def test_custom_jvp_with_python_if_under_grad(x):
    ours, theirs = branchy_jvp(jitad), branchy_jvp(jax)
    assert jitad.grad(ours)(x) == pytest.approx(float(jax.grad(theirs)(x)), rel=1e-14)
    both = jitad.grad(lambda v: ours(v) * ours(-v))(x)   # one call of each kind in one program
    assert both == pytest.approx(float(jax.grad(lambda v: theirs(v) * theirs(-v))(x)), rel=1e-14)


def test_custom_jvp_decisions_follow_each_call():
    ours, theirs = branchy_jvp(jitad), branchy_jvp(jax)
    g = jitad.grad(lambda v: ours(v) + ours(2.0 - v))
    for x in (0.5, 3.0, -1.0, 0.5):   # each call's own branches: a guard picks the path or retraces
        assert g(x) == pytest.approx(float(jax.grad(lambda v: theirs(v) + theirs(2.0 - v))(x)), rel=1e-14)


@pytest.mark.parametrize("x", [0.5, 2.0])
def test_custom_vjp_with_python_if_in_fwd_under_grad(x):
    ours, theirs = branchy_vjp(jitad), branchy_vjp(jax)
    assert jitad.grad(ours)(x) == pytest.approx(float(jax.grad(theirs)(x)), rel=1e-14)


def test_under_jit_the_decision_is_still_refused():
    with pytest.raises(jitad.StagingError):
        jitad.jit(jitad.grad(branchy_jvp(jitad)))(3.0)
