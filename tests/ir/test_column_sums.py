"""A sum over every axis but the last of a fused loop's result (a bias's or a LayerNorm gain's
gradient) is added up in that loop (`fuse.column_sums`): values against NumPy, a LayerNorm
layer's gradients against JAX's, and the sum gone from the program's top level."""
import numpy as np
import pytest

import jitad
from jitad.ir import fuse


def _sums(f):
    return sum(" sum[axes=(0, 1), keepdims=False]" in line for line in str(f.ir).splitlines())


def test_a_column_sum_runs_in_the_loop_making_its_operand():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((3, 5, 130)), rng.standard_normal(130)
    alone = jitad.jit(lambda x, y: jitad.numpy.sum(jitad.numpy.tanh(x) * y, axis=(0, 1)))
    kept = jitad.jit(lambda x, y: (jitad.numpy.sin(x * y), jitad.numpy.sum(jitad.numpy.sin(x * y), axis=(0, 1))))
    kept_dims = jitad.jit(lambda x: jitad.numpy.sum(jitad.numpy.exp(x), axis=(0, 1), keepdims=True))
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-5)):
        a, b = x.astype(dtype), y.astype(dtype)
        np.testing.assert_allclose(alone(a, b), np.sum(np.tanh(x) * y, axis=(0, 1)), rtol=tol, atol=tol)
        got = kept(a, b)
        np.testing.assert_allclose(got[0], np.sin(x * y), rtol=tol, atol=tol)
        np.testing.assert_allclose(got[1], np.sum(np.sin(x * y), axis=(0, 1)), rtol=tol, atol=tol)
        np.testing.assert_allclose(kept_dims(a), np.sum(np.exp(x), axis=(0, 1), keepdims=True), rtol=tol, atol=tol)
    assert _sums(alone) == _sums(kept) == 0 and " sum[" in str(kept_dims.ir)   # (keepdims: a sum of its own)


def _layer_norm(m):
    def loss(x, g, b, w):
        mu = m.numpy.mean(x, axis=-1, keepdims=True)
        y = (x - mu) / m.numpy.sqrt(m.numpy.var(x, axis=-1, keepdims=True) + 1e-5) * g + b
        return m.numpy.sum(m.numpy.tanh(y.reshape(-1, y.shape[-1]) @ w))
    return loss


def test_a_layer_norm_s_gradients_agree_with_jax(monkeypatch):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(1)
    args = rng.standard_normal((3, 7, 130)), rng.standard_normal(130), rng.standard_normal(130), \
        rng.standard_normal((130, 9)) * 0.1
    grad = jitad.jit(jitad.grad(_layer_norm(jitad), argnums=(0, 1, 2, 3)))
    want = jax.jit(jax.grad(_layer_norm(jax), argnums=(0, 1, 2, 3)))(*args)
    for g, w in zip(grad(*args), want):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-11)
    monkeypatch.setattr(fuse, "COLUMN_SUMS", False)
    apart = jitad.jit(jitad.grad(_layer_norm(jitad), argnums=(0, 1, 2, 3)))
    apart(*args)
    assert _sums(grad) < _sums(apart)


def _mlp(m):
    def loss(x, w1, b1, w2):
        h = m.numpy.tanh(x @ w1 + b1)
        return m.numpy.sum(m.numpy.sin(h @ w2)) + m.numpy.sum(h * h * b1)   # h's cotangent: two terms
    return loss


def test_a_bias_gradient_is_summed_in_the_loop_storing_its_cotangent():
    """`b1`'s gradient, the column sum of a cotangent a fused loop stores into a slot (then
    adds a second term to): summed in that loop from each element's final value."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(2)
    args = rng.standard_normal((21, 20)), rng.standard_normal((20, 130)) * 0.3, rng.standard_normal(130), \
        rng.standard_normal((130, 9)) * 0.1
    grad = jitad.jit(jitad.grad(_mlp(jitad), argnums=(0, 1, 2, 3)))
    want = jax.jit(jax.grad(_mlp(jax), argnums=(0, 1, 2, 3)))(*args)
    for g, w in zip(grad(*args), want):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-11)
    assert " sum[" not in str(grad.ir)


def test_short_rows_keep_their_sum_apart():
    """A last axis shorter than `COLUMN_SUM_ROW`: the loop stays one merged loop, the sum a
    pass of its own."""
    x = np.random.default_rng(4).standard_normal((3, 5, fuse.COLUMN_SUM_ROW - 1))
    f = jitad.jit(lambda x: jitad.numpy.sum(jitad.numpy.tanh(x) * x, axis=(0, 1)))
    np.testing.assert_allclose(f(x), np.sum(np.tanh(x) * x, axis=(0, 1)), rtol=1e-12, atol=1e-12)
    assert _sums(f) == 1
