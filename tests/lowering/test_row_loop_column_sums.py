"""A loop run row by row inside `row_loops` that also takes column sums (a bias's gradient
behind a LayerNorm's backward) adds them into their result buffers: its rows are the row
loop's, so no block of columns on the stack is set up or copied out for it."""
import numpy as np
import pytest

import jitad

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)


def _loss(m):
    def layer_norm(x, b):   # the residual's bias, then a LayerNorm over the last axis
        h = x + b
        mu = m.numpy.mean(h, axis=-1, keepdims=True)
        var = m.numpy.var(h, axis=-1, keepdims=True)
        return (h - mu) * m.lax.rsqrt(var + 1e-5)
    def loss(x, b, c):   # the residual stream goes on too: its cotangent sums both paths (a slot)
        h = x + b
        return m.numpy.sum(layer_norm(h, 0.0) * c) + m.numpy.sum(m.numpy.tanh(h) * c)
    return loss


@pytest.mark.parametrize("dtype, tol", [(np.float32, 2e-4), (np.float64, 1e-10)])
def test_a_bias_gradient_behind_a_layer_norm_agrees_with_jax(dtype, tol):
    rng = np.random.default_rng(0)
    x, b, c = rng.standard_normal((4, 64, 96)), rng.standard_normal(96), rng.standard_normal((4, 64, 96))
    args = [a.astype(dtype) for a in (x, b, c)]
    grad = jitad.jit(jitad.grad(_loss(jitad), argnums=(0, 1)))
    want = jax.grad(_loss(jax), argnums=(0, 1))(x, b, c)
    for got, w in zip(grad(*args), want):
        np.testing.assert_allclose(got, w, rtol=tol, atol=tol * np.abs(w).max())


@pytest.mark.slow
def test_the_large_gpt_s_bias_gradients_agree_with_jax():
    """The case that showed it: the residual stream's bias gradients (`proj_b`, `fc2_b`) are
    column sums taken in the LayerNorm backward's row loop, read after that loop's kernel."""
    from bench import gpt
    cfg = gpt.CONFIGS["large"]
    params = gpt.init_params(cfg)
    idx, tgt = gpt.batches(cfg, 1)[0]
    got = gpt.flatten(jitad.jit(jitad.grad(gpt.gpt_program(jitad, cfg)[0]))(params, idx, tgt))
    want = gpt.flatten(jax.jit(jax.grad(gpt.gpt_program(jax, cfg)[0]))(params, idx, tgt))
    for name, w in want.items():
        w = np.asarray(w)
        assert np.linalg.norm(got[name] - w) <= 1e-5 * np.linalg.norm(w), name
