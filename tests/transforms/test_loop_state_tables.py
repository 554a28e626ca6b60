"""Reverse mode keeps a FOR's tensor state as each step leaves it, and reads the state
entering the first step from the loop's input (`vjp._StateTables`); a loop whose results
nothing reads stops before its last step when that step only makes the state nobody
reads (`ir.last_step`). Values and gradients equal JAX's for loops of 0, 1, 2 and more
steps, taped whole and checkpointed, and the same programs without the pass, bit for bit."""
import numpy as np
import pytest

import jitad
from jitad.ir import last_step, passes
from jitad.testing import check_grads

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

X = np.linspace(0.3, 1.2, 9)
W = np.random.default_rng(3).normal(0.0, 0.4, (9, 9))
TRIPS = (0, 1, 2, 3, 7)


def _step(m, x, y, c, i):
    """One step: a shifted tensor state, a state passed on unchanged, a scalar state."""
    shifted = m.concatenate([m.ones(1), y[:-1]])
    return y + 0.1 * m.sin(x * shifted) + 0.01 * i, c, m.sum(y * y) * 0.5


def _loop(checkpoints, last):
    """A FOR over `n` steps (staged); `last`: the loss reads the final state linearly only."""
    def f(x, n):
        def body(i, s):
            y, c, acc = s
            y2, c2, a = _step(jitad, x, y, c, i)
            return y2, c2, acc + a
        y, c, acc = jitad.FOR(0, n, body, (x * 0.5, x, 0.0), checkpoints=checkpoints)
        return y[-1] + 2.0 * jitad.sum(c) if last else jitad.sum(jitad.tanh(y)) + acc
    return f


def _reference(last):
    def f(x, n):
        y, c, acc = x * 0.5, x, 0.0
        for i in range(n):
            y, c, a = _step(jnp, x, y, c, i)
            acc = acc + a
        return y[-1] + 2.0 * jnp.sum(c) if last else jnp.sum(jnp.tanh(y)) + acc
    return f


@pytest.mark.parametrize("checkpoints", [None, 2], ids=["taped", "checkpointed"])
@pytest.mark.parametrize("last", [False, True], ids=["final-state-read", "final-state-linear"])
def test_loop_gradients_equal_jax_for_every_trip_count(checkpoints, last):
    f = jitad.jit(jitad.value_and_grad(_loop(checkpoints, last)))
    ref = _reference(last)
    for n in TRIPS:
        value, grad = f(X, n)
        want, want_grad = jax.value_and_grad(ref)(X, n)
        assert value == pytest.approx(float(want), rel=1e-13, abs=1e-14), n
        np.testing.assert_allclose(grad, want_grad, rtol=1e-12, atol=1e-14, err_msg=f"n={n}")


def test_loop_gradients_check_numerically():
    f = _loop(None, False)
    check_grads(lambda x: f(x, 3), (X,), order=2, modes=("rev",))


def test_dead_last_step_is_dropped_and_changes_nothing(monkeypatch):
    calls = []
    real = last_step._one_step_fewer
    monkeypatch.setattr(last_step, "_one_step_fewer", lambda loop: calls.append(loop) or real(loop))
    grad = jitad.jit(jitad.grad(_loop(None, True)))
    got = [np.asarray(grad(X, n)) for n in TRIPS]
    assert len(calls) == 1   # the forward loop of the gradient, whose results nothing reads
    monkeypatch.setattr(passes, "PIPELINE", [s for s in passes.PIPELINE if s[0] != "dead_last_steps"])
    without = jitad.jit(jitad.grad(lambda x, n: _loop(None, True)(x, n) * 1.0))   # another program: compiled
    for n, g in zip(TRIPS, got):
        np.testing.assert_array_equal(g, np.asarray(without(X, n)))


def test_read_final_state_keeps_every_step(monkeypatch):
    calls = []
    monkeypatch.setattr(last_step, "_one_step_fewer", lambda loop: calls.append(loop))
    jitad.jit(jitad.grad(_loop(None, False)))(X, 2)
    assert not calls


def test_state_a_product_reads_keeps_its_entering_table():
    """h @ W: the weight's backward GEMM reads the state table whole (entries 0..n-1)."""
    def f(w, h0, n):
        return jitad.sum(jitad.FOR(0, n, lambda i, h: jitad.tanh(h @ w), h0))

    def ref(w, h0, n):
        for _ in range(n):
            h0 = jnp.tanh(h0 @ w)
        return jnp.sum(h0)
    h0 = np.linspace(-1.0, 1.0, 2 * 9).reshape(2, 9)
    g = jitad.jit(jitad.grad(f, argnums=(0, 1)))
    for n in (0, 1, 4):
        for got, want in zip(g(W, h0, n), jax.grad(ref, argnums=(0, 1))(W, h0, n)):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def _shift_loop(m):
    def f(x, n):
        step = lambda y: y + 0.1 * m.sin(x * m.concatenate([m.ones(1), y[:-1]]))
        if m is jnp:
            y = x * 0.5
            for _ in range(n):
                y = step(y)
            return y[-1]
        return jitad.FOR(0, n, lambda i, y: step(y), x * 0.5)[-1]
    return f


def test_batched_trip_counts_and_second_order():
    """vmap over gradients of loops of 0, 1 and 3 steps at once; the Hessian (forward over reverse)."""
    xs, ns = np.linspace(0.2, 1.0, 3 * 6).reshape(3, 6), np.array([0, 1, 3])
    got = jitad.jit(jitad.vmap(jitad.grad(_shift_loop(jitad))))(xs, ns)
    want = np.stack([jax.grad(_shift_loop(jnp))(x, int(n)) for x, n in zip(xs, ns)])
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(jitad.jit(jitad.hessian(_shift_loop(jitad)))(xs[0], 3),
                               jax.hessian(_shift_loop(jnp))(xs[0], 3), rtol=1e-12, atol=1e-14)
