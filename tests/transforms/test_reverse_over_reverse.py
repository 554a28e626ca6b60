"""Reverse mode of a function that itself takes gradients: the inner reverse passes are kept
as `deferred_vjp` nodes and differentiated by forward-over-reverse, so the cost does not grow
with the number of inputs (no per-element forward passes, no limit on the input size);
compared with JAX's reverse-over-reverse on the same values."""
import numpy as np
import pytest

import jitad
from jitad.transforms import pullback

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

X = np.linspace(-3.0, 3.0, 300)   # more inputs than forward mode per element would take


def tanh_of(n):
    return lambda x: (1.0 - n.exp(-2 * x)) / (1.0 + n.exp(-(2 * x)))


def egrad(lib, f):
    return lib.grad(lambda v: lib.numpy.sum(f(v)))


@pytest.mark.parametrize("order", [2, 3])
def test_nested_elementwise_grad_on_many_points(order):
    ours, theirs = tanh_of(jitad.numpy), tanh_of(jax.numpy)
    for _ in range(order):
        ours, theirs = jitad.elementwise_grad(ours), egrad(jax, theirs)
    np.testing.assert_allclose(ours(X), theirs(X), rtol=1e-10, atol=1e-12)


def penalised(lib):
    """A loss with a gradient penalty (the inner gradient of a function of the parameters)."""
    n = lib.numpy

    def inner(w):
        return n.sum(n.sin(w) * w ** 2)

    def loss(w):
        g = lib.grad(inner)(w)
        return n.sum(n.cos(w)) + n.sum(g ** 2) + n.sum(g * w) ** 2 / w.shape[0]
    return loss


def test_gradient_of_a_gradient_penalty():
    np.testing.assert_allclose(jitad.grad(penalised(jitad))(X), jax.grad(penalised(jax))(X), rtol=1e-10, atol=1e-12)


def test_vjp_of_a_function_taking_a_gradient():
    ct = np.cos(np.arange(X.size))

    def fn(lib):
        return lambda w: lib.grad(lambda u: lib.numpy.sum(lib.numpy.tanh(u) ** 3))(w) * w
    ours = jitad.vjp(fn(jitad), X)[1](ct)[0]
    theirs = jax.vjp(fn(jax), X)[1](ct)[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_agrees_with_forward_mode_per_element(monkeypatch):
    from jitad.transforms import staged
    x = X[:5]
    deferred = jitad.grad(penalised(jitad))(x)
    forward = []
    monkeypatch.setattr(staged, "reverse_ready", lambda *a: None)   # the fallback: a forward pass per element
    monkeypatch.setattr(staged, "grad_by_forward_mode", lambda *a: forward.append(1) or pullback.grad_by_forward_mode(*a))
    np.testing.assert_allclose(jitad.jit(jitad.grad(penalised(jitad)))(x), deferred, rtol=1e-12)
    assert forward
