"""custom_jvp with defjvp: forward mode runs the rule, reverse mode transposes it."""
import numpy as np
import pytest

import jitad
from jitad.testing import check_grads


@jitad.custom_jvp
def log1pexp(x):
    return jitad.log(1.0 + jitad.exp(x))


@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * (1.0 - 1.0 / (1.0 + jitad.exp(x)))


@jitad.custom_jvp
def scaled(x, w):
    return jitad.sum(jitad.tanh(x) * w)


@scaled.defjvp
def scaled_jvp(primals, tangents):
    (x, w), (tx, tw) = primals, tangents
    th = jitad.tanh(x)
    return scaled(x, w), jitad.sum((1.0 - th * th) * w * tx) + jitad.sum(th * tw)


X = np.array([0.3, -1.2, 2.0])
W = np.array([1.5, 0.5, -2.0])


def test_rule_is_used_forward_and_reverse():
    assert jitad.grad(log1pexp)(1000.0) == 1.0   # differentiating the body gives inf / inf = nan
    assert jitad.jvp(log1pexp, (1000.0,), (2.0,))[1] == 2.0
    assert jitad.grad(log1pexp)(0.5) == pytest.approx(1 / (1 + np.exp(-0.5)), rel=1e-14)
    assert log1pexp(0.5) == pytest.approx(np.log1p(np.exp(0.5)))   # eager call runs the body

    @jitad.custom_jvp
    def fake(x):
        return x * x

    @fake.defjvp
    def fake_jvp(p, t):
        return fake(p[0]), 10.0 * t[0]   # a rule unlike the body: proves which one runs
    assert jitad.grad(fake)(3.0) == 10.0 and jitad.jvp(fake, (3.0,), (1.0,)) == (9.0, 10.0)
    assert jitad.grad(lambda x: jitad.grad(fake)(x) * x)(3.0) == 10.0


def test_check_grads_second_order():
    check_grads(lambda x: jitad.sum(log1pexp(x) * x), (X,), order=2, modes=("rev", "fwd"))
    check_grads(lambda x, w: scaled(x, w) ** 2, (X, W), order=2, modes=("rev", "fwd"))
    h = jitad.hessian(lambda x: scaled(x, W))(X)
    th = np.tanh(X)
    np.testing.assert_allclose(h, np.diag(-2 * th * (1 - th * th) * W), rtol=1e-12)


def test_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    @jax.custom_jvp
    def scaled_j(x, w):
        return jnp.sum(jnp.tanh(x) * w)

    @scaled_j.defjvp
    def _(primals, tangents):
        (x, w), (tx, tw) = primals, tangents
        th = jnp.tanh(x)
        return scaled_j(x, w), jnp.sum((1.0 - th * th) * w * tx) + jnp.sum(th * tw)
    loss = lambda x, w: scaled(x, w) ** 2 * jitad.sum(x)
    loss_j = lambda x, w: scaled_j(x, w) ** 2 * jnp.sum(x)
    for a, b in zip(jitad.grad(loss, argnums=(0, 1))(X, W), jax.grad(loss_j, argnums=(0, 1))(X, W)):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(jitad.hessian(loss)(X, W), jax.hessian(loss_j)(X, W), rtol=1e-11)


def test_errors():
    @jitad.custom_jvp
    def bad(x):
        return x * 2.0

    @bad.defjvp
    def bad_jvp(p, t):
        return bad(p[0]), jitad.ones(3) * t[0]
    with pytest.raises(jitad.ShapeError, match="tangent of shape"):
        jitad.jvp(bad, (1.0,), (1.0,))
    with pytest.raises(jitad.ShapeError, match="tangent of shape"):
        jitad.grad(bad)(1.0)

    @jitad.custom_jvp
    def undefined(x):
        return x
    with pytest.raises(jitad.ArgumentError, match="defjvp"):
        jitad.grad(undefined)(1.0)

    @jitad.custom_jvp
    def single(x):
        return x

    single.defjvp(lambda p, t: t[0])
    with pytest.raises(jitad.ArgumentError, match="pair"):
        jitad.jvp(single, (1.0,), (1.0,))


@jitad.custom_jvp
def _square_by_rule(x):   # the body's own derivative (2x) is not the rule's (3 * out)
    return x * x


@_square_by_rule.defjvp
def _square_by_rule_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    out = _square_by_rule(x)
    return out, 3.0 * out * t


def test_every_order_takes_the_rule_not_the_body():
    # d/dx = 3 f; d2/dx2 = 3 * (3 f) = 9 x^2 by the rule (the body's derivative would give 6x)
    x = 2.0
    assert jitad.grad(_square_by_rule)(x) == pytest.approx(12.0)
    for second in (jitad.grad(jitad.grad(_square_by_rule)), jitad.hessian(_square_by_rule),
                   lambda x: jitad.jvp(jitad.grad(_square_by_rule), (x,), (1.0,))[1]):
        assert second(x) == pytest.approx(36.0)
    assert jitad.grad(jitad.grad(jitad.grad(_square_by_rule)))(x) == pytest.approx(27 * x * x)


def test_a_program_traced_again_finds_its_code_compiled():
    def program():   # a script run afresh: new functions over the same custom_jvp
        return jitad.jit(lambda x: log1pexp(x) * 2.0)
    first, again = program(), program()
    expected = first(X)
    np.testing.assert_allclose(again(X), expected)
    assert again.compile_report().cache == "process"
