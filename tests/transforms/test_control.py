"""jitad.scan and jitad.switch against JAX's lax.scan / lax.switch."""
import numpy as np
import pytest

import jitad
from jitad.testing import check_grads

W = np.array([[0.5, -0.3], [0.2, 0.4]])
XS = np.random.default_rng(0).normal(size=(5, 2))


def rnn(W, xs, reverse=False):
    def step(h, x):
        h = jitad.tanh(W @ h + x)
        return h, (jitad.sum(h * h), h)
    h, (ys, hs) = jitad.scan(step, np.zeros(2), xs, reverse=reverse)
    return jitad.sum(h) + jitad.sum(ys * jitad.sin(hs[:, 0]))


def rnn_np(W, xs, reverse=False):
    h, ys, hs = np.zeros(2), [None] * len(xs), [None] * len(xs)
    for j in (range(len(xs) - 1, -1, -1) if reverse else range(len(xs))):
        h = np.tanh(W @ h + xs[j])
        ys[j], hs[j] = np.sum(h * h), h
    return np.sum(h) + np.sum(np.array(ys) * np.sin(np.array(hs)[:, 0]))


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_values_eager_and_staged(reverse):
    def cumsum(c, x):
        return c + x, {"s": c + x, "i": c * 0 + 1}
    xs = np.array([1.0, 2.0, 3.0])
    want = np.cumsum(xs[::-1])[::-1] if reverse else np.cumsum(xs)
    for fn in (lambda xs: jitad.scan(cumsum, 0.0, xs, reverse=reverse),
               jitad.jit(lambda xs: jitad.scan(cumsum, 0.0, xs, reverse=reverse))):
        c, ys = fn(xs)
        assert c == 6.0 and list(ys["s"]) == list(want) and list(ys["i"]) == [1.0] * 3
    assert jitad.jit(lambda W, xs: rnn(W, xs, reverse))(W, XS) == pytest.approx(rnn_np(W, XS, reverse), rel=1e-12)
    assert rnn(W, XS, reverse) == pytest.approx(rnn_np(W, XS, reverse), rel=1e-12)


def test_scan_length_without_xs_and_pytree_xs():
    c, ys = jitad.jit(lambda a: jitad.scan(lambda c, _: (c * a, c), 1.0, length=4))(2.0)
    assert c == 16.0 and list(ys) == [1.0, 2.0, 4.0, 8.0]
    xs = {"a": np.ones((3, 2)), "b": np.arange(3.0)}
    c, _ = jitad.jit(lambda xs: jitad.scan(lambda c, x: (c + jitad.sum(x["a"]) * x["b"], None), 0.0, xs))(xs)
    assert c == 6.0


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_gradients_and_second_order(reverse):
    check_grads(lambda W, xs: rnn(W, xs, reverse), (W, XS), order=2, modes=("rev", "fwd"))


def test_scan_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def rnn_jax(W, xs):
        def step(h, x):
            h = jnp.tanh(W @ h + x)
            return h, (jnp.sum(h * h), h)
        h, (ys, hs) = jax.lax.scan(step, jnp.zeros(2), xs)
        return jnp.sum(h) + jnp.sum(ys * jnp.sin(hs[:, 0]))
    np.testing.assert_allclose(jitad.grad(rnn, argnums=(0, 1))(W, XS)[0],
                               jax.grad(rnn_jax, argnums=(0, 1))(W, XS)[0], rtol=1e-10)
    np.testing.assert_allclose(jitad.grad(rnn, argnums=1)(W, XS), jax.grad(rnn_jax, argnums=1)(W, XS), rtol=1e-10)


def test_scan_errors():
    with pytest.raises(jitad.ArgumentError, match="different leading lengths"):
        jitad.jit(lambda a, b: jitad.scan(lambda c, x: (c, None), 0.0, (a, b)))(np.ones(3), np.ones(4))
    with pytest.raises(jitad.ArgumentError, match="length="):
        jitad.scan(lambda c, x: (c, None), 0.0)
    with pytest.raises(jitad.StagingError, match="carry"):
        jitad.jit(lambda xs: jitad.scan(lambda c, x: ((c, c), None), 0.0, xs))(np.ones(3))


BRANCHES = [lambda x: x, lambda x: x * x, lambda x: jitad.sin(x) * 2.0, lambda x: -x]


@pytest.mark.parametrize("i", [-2, 0, 1, 2, 3, 9])
def test_switch_values_clamped_and_gradients(i):
    f = jitad.jit(lambda i, x: jitad.switch(i, BRANCHES, x))
    want = [1.3, 1.69, 2 * np.sin(1.3), -1.3][min(max(i, 0), 3)]
    assert f(i, 1.3) == pytest.approx(want, rel=1e-14)
    assert jitad.switch(i, BRANCHES, 1.3) == pytest.approx(want, rel=1e-14)   # eager
    check_grads(lambda x, i: jitad.switch(i, BRANCHES, x), (1.3, i), order=2, modes=("rev", "fwd"))


def test_switch_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    jb = [lambda x: x, lambda x: x * x, lambda x: jnp.sin(x) * 2.0, lambda x: -x]
    for i in (-1, 1, 2, 5):
        assert jitad.grad(lambda x, i: jitad.switch(i, BRANCHES, x))(0.7, i) == pytest.approx(
            float(jax.grad(lambda x: jax.lax.switch(i, jb, x))(0.7)), rel=1e-14)


def test_switch_errors():
    with pytest.raises(jitad.StagingError, match="branch 1"):
        jitad.jit(lambda i, x: jitad.switch(i, [lambda x: x, lambda x: (x, x)], x))(0, 1.0)
    with pytest.raises(jitad.StagingError, match="branch 2"):
        jitad.jit(lambda i, x: jitad.switch(i, [lambda x: x, lambda x: x, lambda x: jitad.ones(2) * x], x))(0, 1.0)
    with pytest.raises(jitad.ArgumentError, match="int"):
        jitad.jit(lambda i, x: jitad.switch(i, BRANCHES, x))(1.0, 1.0)
    with pytest.raises(jitad.ArgumentError, match="branches"):
        jitad.switch(0, [], 1.0)
