"""The last fused loop touching a cotangent slot adds in a register (`last_adds` in
jitad.ir.passes), and computes the slot's one earlier contribution itself where that is
an elementwise function of values still unchanged (RK4's stage cotangents, multiples of
the step's incoming cotangent): gradients equal JAX's and the pipeline's without the
pass, bit for bit, and the stage slots are gone."""
import numpy as np
import pytest

import jitad
from jitad.ir import last_adds, passes

from .test_shift_adjoint_stores import CASES

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


def _without_pass(monkeypatch):
    monkeypatch.setattr(passes, "PIPELINE", [s for s in passes.PIPELINE if s[0] != "last_adds"])


def rk4_last(m, x, steps):
    """GradBench's ode as its jitad tool writes it: RK4 steps in a FOR (a loop in JAX)."""
    h, one = 2.0 / steps, m.ones(1)
    f = lambda y: x * m.concatenate([one, y[:-1]])

    def step(i, y):
        k1 = f(y)
        k2 = f(y + h / 2 * k1)
        k3 = f(y + h / 2 * k2)
        return y + h / 6 * (k1 + 2.0 * k2 + 2.0 * k3 + f(y + h * k3))
    if m is jnp:
        y = jnp.zeros_like(x)
        for i in range(steps):
            y = step(i, y)
        return y[-1]
    return jitad.FOR(0, steps, step, m.zeros_like(x))[-1]


def _tensor_slots(ir):
    return sum(1 for line in ir.splitlines() if "= slot" in line and "ref<f64[" in line.split("=")[0])


def test_rk4_stage_cotangents_are_computed_where_they_are_read(monkeypatch):
    copies = []
    real = last_adds._copy_cone
    monkeypatch.setattr(last_adds, "_copy_cone", lambda *a: copies.append(a) or real(*a))
    x = np.linspace(0.5, 1.5, 23)
    grads = {}
    g = jitad.jit(jitad.grad(lambda x, s: rk4_last(jitad, x, s)), static_argnums=1)
    for steps in (1, 2):
        grads[steps] = (np.asarray(g(x, steps)), _tensor_slots(g.ir))
        np.testing.assert_allclose(grads[steps][0], jax.grad(rk4_last, argnums=1)(jnp, x, steps),
                                   rtol=1e-13, atol=1e-15)
    assert len(copies) >= 2   # stage's cotangents: a multiple of the incoming one, recomputed
    _without_pass(monkeypatch)
    g = jitad.jit(jitad.grad(lambda x, s: rk4_last(jitad, x, s) * 1.0), static_argnums=1)   # compiled again
    for steps in (1, 2):
        np.testing.assert_array_equal(grads[steps][0], g(x, steps))
        assert _tensor_slots(g.ir) >= grads[steps][1] + 2


@pytest.mark.parametrize("make, args", CASES[1:], ids=["rows", "columns"])
def test_shifted_cotangents_unchanged_by_the_pass(make, args, monkeypatch):
    got = jitad.jit(jitad.grad(make(jitad)))(*args)
    np.testing.assert_allclose(got, jax.grad(make(jnp))(*args), rtol=1e-13, atol=1e-15)
    _without_pass(monkeypatch)
    np.testing.assert_array_equal(got, jitad.jit(jitad.grad(lambda *a: make(jitad)(*a) * 1.0))(*args))


def test_a_slot_read_after_the_loop_keeps_its_stores():
    """A cotangent summed over two fused loops and then returned (x's own) is stored."""
    def f(x, w):
        y = jitad.sin(x) * w
        return jitad.sum(jitad.exp(y) + jitad.concatenate([y[1:], y[:1]]) * x)
    x, w = np.linspace(-1.0, 1.0, 17), np.linspace(0.5, 2.0, 17)
    got = jitad.jit(jitad.grad(f, argnums=(0, 1)))(x, w)

    def ref(x, w):
        y = jnp.sin(x) * w
        return jnp.sum(jnp.exp(y) + jnp.concatenate([y[1:], y[:1]]) * x)
    for a, b in zip(got, jax.grad(ref, argnums=(0, 1))(x, w)):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-15)
