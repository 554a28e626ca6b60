"""The reverse loop of a `FOR` keeps the cotangents it carries in the loop's own state
buffers: a slot that starts as a carried cotangent and is then updated lives in that
cotangent's buffer (no copy in per iteration), and one passed on unchanged is no copy."""
import numpy as np
import pytest

import jitad
from jitad.lower import ir_ops


def _loss(p, seq):
    Wx, Wh, b, Wy = p

    def body(t, carry):
        h, c, total = carry   # `c` is carried unchanged: its cotangent only passes through
        h = jitad.tanh(jitad.one_hot(seq[t], 12) @ Wx + h @ Wh + b)
        return h, c, total + jitad.cross_entropy(h @ Wy, seq[t + 1])
    return jitad.FOR(0, 6, body, (jitad.zeros((8, 16)), jitad.ones((8, 16)), 0.0))[2]


def test_carried_cotangents_live_in_the_state_buffers_and_gradients_hold(monkeypatch):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    r = np.random.default_rng(7)
    p = (r.normal(0, 0.3, (12, 16)), r.normal(0, 0.3, (16, 16)), r.normal(0, 0.1, 16), r.normal(0, 0.3, (16, 12)))
    xs = r.integers(0, 12, (7, 8))

    def reference(p, seq):
        Wx, Wh, b, Wy = p
        h, total = jnp.zeros((8, 16)), 0.0
        for t in range(6):
            h = jnp.tanh(jax.nn.one_hot(seq[t], 12) @ Wx + h @ Wh + b)
            logp = jax.nn.log_softmax(h @ Wy)
            total = total - jnp.mean(jnp.take_along_axis(logp, seq[t + 1][:, None], 1))
        return total
    want, want_grads = jax.value_and_grad(reference)(p, xs)
    step = jitad.value_and_grad(_loss)
    value, grads = step(p, xs)
    assert value == pytest.approx(float(want), rel=1e-12)
    for g, w in zip(grads, want_grads):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-11, atol=1e-12)
    # the optimization on the same program, compiled again: slots homed in state buffers
    homed, real = [], ir_ops._slots_in_states

    def spy(body, args, states, spares, homes, excluded):
        nodes = real(body, args, states, spares, homes, excluded)
        homed.extend(slot for slot, buf in homes.items() if any(buf is a for a in args))
        return nodes
    monkeypatch.setattr(ir_ops, "_slots_in_states", spy)
    again = jitad.value_and_grad(lambda p, xs: _loss(p, xs) * 1.0)   # another program: compiled
    value_2, grads_2 = again(p, xs)
    assert value_2 == value and all(np.array_equal(a, b) for a, b in zip(grads, grads_2))
    assert len(homed) >= 2, homed   # h's cotangent (updated) and c's (passed on)
