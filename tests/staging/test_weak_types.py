"""Python scalars are weakly typed, as in JAX: combined with a float32 array they give
float32, also when they pass through staged arithmetic first (`0.9 ** step`) or arrive
as arguments; NumPy 0-d arrays stay strong. Each case is compared with JAX."""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp

jax = pytest.importorskip("jax", reason="JAX is the reference (the test extra installs it)")
jax.config.update("jax_enable_x64", True)

W = np.linspace(-1.0, 1.0, 5).astype(np.float32)


def adam_like(w, count, lr):   # an optimizer's update with an int step counter
    return w - lr * 0.9 ** count * w / (1.0 - 0.99 ** (count + 1))


CASES = [   # (f(numpy module, *args), args)
    (lambda m, w, c, lr: adam_like(w, c, lr), (W, 3, 0.1)),
    (lambda m, w, c: w * (c + 1), (W, 2)),
    (lambda m, w, s: w * s, (W, np.array(2.0))),          # a 0-d array is strong: float64
    (lambda m, w, s: w + m.sin(s) * 2.0, (W, 0.5)),       # a weak argument through a unary op
    (lambda m, w, c: m.tanh(w) * (c > 1) + c * 0.5, (W, 3)),
    (lambda m, w, s: (w * s).astype(m.float64) + s, (W, 1.5)),
]


@pytest.mark.parametrize("k", range(len(CASES)))
def test_dtypes_and_values_follow_jax(k):
    f, args = CASES[k]
    got = jitad.jit(lambda *a: f(jnp, *a))(*args)
    want = jax.jit(lambda *a: f(jax.numpy, *a))(*args)
    assert np.asarray(got).dtype == np.asarray(want).dtype, (np.asarray(got).dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_gradient_of_float32_parameters_stays_float32():
    def loss(m):
        return lambda w, lr, step: m.sum((w * lr * 0.5 ** step) ** 2)
    g = jitad.grad(loss(jnp))(W, 0.1, 2)
    want = jax.grad(loss(jax.numpy))(W, 0.1, 2)
    assert g.dtype == np.float32 == want.dtype
    np.testing.assert_allclose(g, want, rtol=1e-6)
