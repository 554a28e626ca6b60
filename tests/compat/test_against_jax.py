"""JAX as the semantic reference: the same programs, values and derivatives in jitad and
JAX (float64), including the cases this release fixed (powers at 0, reverse over
forward, negative indices) and the nested-AD shapes GradBench's evals use.

Where JAX and jitad deliberately differ the test says so: jitad gives 0 for the
derivative of `x ** 0.0` at 0 (as PyTorch and older JAX); JAX 0.10 gives NaN there.
"""
import numpy as np
import pytest

import jitad

jax = pytest.importorskip("jax", reason="JAX is the semantic reference (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


# (name, program over a namespace `np_` that is jitad or jax.numpy, arguments)
SCALAR_PROGRAMS = [
    ("poly", lambda m: lambda x: x ** 3 - 2.0 * x ** 2 + x, (0.7,)),
    ("int_pow_negative_base", lambda m: lambda x: (x - 10.0) ** 2, (0.0,)),
    ("negative_int_pow", lambda m: lambda x: x ** -2 + m.exp(x), (1.3,)),
    ("fractional_pow", lambda m: lambda x: x ** 0.5 * m.sin(x), (2.0,)),
    ("staged_exponent", lambda m: lambda x: 2.5 ** m.tanh(x), (0.4,)),
    ("zero_base", lambda m: lambda y: 0.0 ** (y * y + 1.0), (0.8,)),
    ("softplus_like", lambda m: lambda x: m.log1p(m.exp(x)) * m.tanh(x), (-0.3,)),
]


@pytest.mark.parametrize("name,program,args", SCALAR_PROGRAMS, ids=[p[0] for p in SCALAR_PROGRAMS])
def test_first_and_second_derivatives_match_jax(name, program, args):
    fj, fx = program(jnp), program(jitad)
    assert jitad.jit(fx)(*args) == pytest.approx(float(fj(*args)), rel=1e-12)
    assert jitad.grad(fx)(*args) == pytest.approx(float(jax.grad(fj)(*args)), rel=1e-12, abs=1e-300)
    assert jitad.grad(jitad.grad(fx))(*args) == pytest.approx(float(jax.grad(jax.grad(fj))(*args)),
                                                            rel=1e-10, abs=1e-300)
    want = float(jax.jvp(jax.grad(fj), args, (1.0,))[1])
    assert jitad.jvp(jitad.grad(fx), args, (1.0,))[1] == pytest.approx(want, rel=1e-10, abs=1e-300)


def test_reverse_over_forward_of_a_negative_base_power_matches_jax():
    def outer(m, jvp, grad):
        return grad(lambda w: jvp(lambda x: (x - 10.0 * w) ** 2, (0.0,), (1.0,))[1])
    got = outer(jitad, jitad.jvp, jitad.grad)(1.0)
    want = float(outer(jnp, jax.jvp, jax.grad)(1.0))
    assert got == pytest.approx(want) and want == pytest.approx(-20.0)


def test_power_at_zero_where_jitad_and_jax_differ_on_purpose():
    assert jitad.grad(lambda x: x ** 0.0)(0.0) == 0.0
    assert np.isnan(float(jax.grad(lambda x: x ** 0.0)(0.0)))   # JAX 0.10: lax.pow's rule


def test_negative_index_gather_and_its_gradient_match_jax():
    E = np.arange(12.0).reshape(4, 3)
    idx = np.array([-1, 0, -4, 2, -2])

    def loss(m):
        return lambda E: m.sum(m.tanh(E[idx]) * np.arange(1.0, 4.0))
    assert jitad.jit(loss(jitad))(E) == pytest.approx(float(loss(jnp)(E)), rel=1e-12)
    np.testing.assert_allclose(jitad.grad(loss(jitad))(E), jax.grad(loss(jnp))(E), rtol=1e-12, atol=1e-12)

    def row(m):
        return lambda E, i: m.sum(E[i] ** 2)
    for i in (-1, -3, 2):
        np.testing.assert_allclose(jitad.grad(row(jitad))(E, i), jax.grad(row(jnp))(E, i), rtol=1e-12)


def test_mlp_loss_gradient_matches_jax():
    rng = np.random.default_rng(0)
    W1, b1, W2 = rng.standard_normal((5, 8)), rng.standard_normal(8), rng.standard_normal((8, 3))
    x, labels = rng.standard_normal((6, 5)), np.array([0, 2, 1, 1, 0, 2])

    def loss_jax(W1, b1, W2):
        logits = jnp.tanh(x @ W1 + b1) @ W2
        return -jnp.mean(jax.nn.log_softmax(logits)[np.arange(6), labels])

    def loss_jitad(W1, b1, W2):
        return jitad.cross_entropy(jitad.tanh(x @ W1 + b1) @ W2, labels)
    assert jitad.jit(loss_jitad)(W1, b1, W2) == pytest.approx(float(loss_jax(W1, b1, W2)), rel=1e-12)
    got = jitad.grad(loss_jitad, argnums=(0, 1, 2))(W1, b1, W2)
    want = jax.grad(loss_jax, argnums=(0, 1, 2))(W1, b1, W2)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-11, atol=1e-14)


def test_while_loop_forward_derivative_matches_jax():
    """Forward mode through a data-dependent loop, which JAX also supports."""
    def f_jitad(x):
        return jitad.WHILE(lambda s: s[1] < 5, lambda s: (jitad.sin(s[0]) * 1.5 + x, s[1] + 1), (x, 0))[0]

    def f_jax(x):
        return jax.lax.while_loop(lambda s: s[1] < 5, lambda s: (jnp.sin(s[0]) * 1.5 + x, s[1] + 1), (x, 0))[0]
    assert jitad.jvp(f_jitad, (0.3,), (1.0,))[1] == pytest.approx(float(jax.jvp(f_jax, (0.3,), (1.0,))[1]),
                                                                   rel=1e-12)
    # reverse mode too, which JAX refuses for while_loop: compare with JAX's forward mode
    assert jitad.grad(f_jitad)(0.3) == pytest.approx(float(jax.jvp(f_jax, (0.3,), (1.0,))[1]), rel=1e-12)
