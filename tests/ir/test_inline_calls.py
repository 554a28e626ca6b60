"""Calls of small straight-line functions are inlined after differentiation
(`inline_small_calls` in jitad.ir.passes): a custom rule's primal (`lax.rsqrt` in a
LayerNorm) joins the fused loops around it. Values and gradients against JAX; functions
with control flow or recursion stay calls."""
import numpy as np
import pytest

import jitad
from jitad.ir.graph import walk
from jitad.ir.ops import CALLS
from jitad.ir.passes import run_passes

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)


def calls(fn, *args):
    program = run_passes(jitad.trace(fn, *args))
    return sum(n.op in CALLS for n in walk(program.main)), len(program.funs)


def layer_norm(m, lax, x):
    mu = m.mean(x, axis=-1, keepdims=True)
    return (x - mu) * lax.rsqrt(m.var(x, axis=-1, keepdims=True) + 1e-5)


def test_a_custom_rule_s_primal_joins_the_loops_around_it():
    x = np.random.default_rng(0).normal(size=(6, 9))
    loss = lambda x: jitad.numpy.sum(jitad.numpy.tanh(layer_norm(jitad.numpy, jitad.lax, x)) * x)   # noqa: E731
    want = jax.value_and_grad(lambda x: jax.numpy.sum(jax.numpy.tanh(layer_norm(jax.numpy, jax.lax, x)) * x))(x)
    assert calls(jitad.value_and_grad(loss), x) == (0, 0)
    got = jitad.jit(jitad.value_and_grad(loss))(x)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-14)
    jitad.testing.check_grads(loss, (x,), order=2)


def test_calls_with_control_flow_stay_calls():
    @jitad.custom_jvp
    def clipped(x):
        return jitad.IF(x > 0.0, lambda: x * 2.0, lambda: x)

    @clipped.defjvp
    def _(primals, tangents):
        return clipped(primals[0]), tangents[0] * 2.0

    f = jitad.jit(jitad.grad(lambda x: clipped(x) * 3.0))
    assert f(1.5) == 6.0
    assert calls(jitad.grad(lambda x: clipped(x) * 3.0), 1.5)[1] >= 1   # (the function is kept, and called)
