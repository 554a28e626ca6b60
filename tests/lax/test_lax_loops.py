"""`jitad.lax`'s control flow and implicitly differentiated solvers against `jax.lax`
(x64): values and gradients."""
import numpy as np
import pytest

from .lax_reference import assert_same, jax, jlax

import jitad
from jitad import lax

jnp = jitad.numpy


def _program(m, np_, x):
    """One program through every loop form of module `m` (lax or jax.lax)."""
    a = m.fori_loop(0, 3, lambda i, c: c * x + i, 1.0)
    b = m.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1] * 0.5 + x), (0, 0.0))[1]
    c = m.cond(x > 0.5, lambda u, v: u * v, lambda u, v: u - v, x, 2.0)
    d = m.switch(2, [lambda u: u, lambda u: -u, lambda u: u * u], x)
    e = m.switch(-3, [lambda u: u + 1.0, lambda u: -u], x)   # clamped to the first branch
    carry, ys = m.scan(lambda c, v: (c + v * x, c * v), 0.0, np_.arange(4.0), reverse=True, unroll=2)
    _, zs = m.scan(lambda c, _: (c * x, c), 1.0, None, length=3)
    f = m.map(lambda v: np_.sum(v * x), np_.arange(6.0).reshape(3, 2))
    g = m.optimization_barrier((x * 2.0, x))[0]
    return a + b + c + d + e + carry + np_.sum(ys) + np_.sum(zs) + np_.sum(f) + g


def test_control_flow_values_and_gradients():
    ours = jitad.jit(lambda x: (_program(lax, jnp, x), jitad.grad(lambda x: _program(lax, jnp, x))(x)))
    # JAX reverse-differentiates no while_loop: its forward mode is the reference
    theirs = jax.jit(lambda x: (_program(jlax, jax.numpy, x), jax.jacfwd(lambda x: _program(jlax, jax.numpy, x))(x)))
    for x in (0.3, 0.9):   # both branches of the cond; one compile each side
        for o, t in zip(ours(x), theirs(x)):
            assert_same(o, t, rtol=1e-12)
    assert lax.fori_loop(0, 4, lambda i, s: s + i, 0) == 6   # eager, plain Python values


def _newton(f, x0):
    return lax.fori_loop(0, 30, lambda i, x: x - f(x) / jitad.grad(f)(x), x0)


def _newton_jax(f, x0):
    return jlax.fori_loop(0, 30, lambda i, x: x - f(x) / jax.grad(f)(x), x0)


def test_custom_root_is_differentiated_implicitly():
    def ours(a):
        return lax.custom_root(lambda x: x ** 3 - a, 1.0, _newton, lambda g, y: y / g(1.0))

    def theirs(a):
        return jlax.custom_root(lambda x: x ** 3 - a, 1.0, _newton_jax, lambda g, y: y / g(1.0))
    a = 5.0
    assert_same(jitad.jit(ours)(a), theirs(a), rtol=1e-12)
    assert_same(jitad.grad(ours)(a), jax.grad(theirs)(a), rtol=1e-10)
    assert_same(jitad.grad(ours)(a), (1.0 / 3.0) * a ** (-2.0 / 3.0), rtol=1e-10)


def test_custom_linear_solve():
    A = np.array([[4.0, 1.0], [1.0, 3.0]])
    b = np.array([1.0, 2.0])

    def ours(s, b):
        return lax.custom_linear_solve(lambda x: (A * s) @ x, b,
                                       lambda mv, r: jnp.linalg.solve(A * s, r), symmetric=True)

    def theirs(s, b):
        return jlax.custom_linear_solve(lambda x: (A * s) @ x, b,
                                        lambda mv, r: jax.numpy.linalg.solve(A * s, r), symmetric=True)
    assert_same(jitad.jit(ours)(2.0, b), theirs(2.0, b), rtol=1e-12)
    for g, w in zip(jitad.grad(lambda s, b: jnp.sum(ours(s, b) ** 2), (0, 1))(2.0, b),
                    jax.grad(lambda s, b: jax.numpy.sum(theirs(s, b) ** 2), (0, 1))(2.0, b)):
        assert_same(g, w, rtol=1e-10)


def test_small_helpers():
    double = lax.composite(lambda x: x * 2.0, "double")
    assert_same(jitad.jit(double)(3.0), jlax.composite(lambda x: x * 2.0, "double")(3.0))
    assert lax.platform_dependent(2.0, cpu=lambda v: v + 1, default=lambda v: v) == 3.0
    assert lax.dtype(1.0) == jlax.dtype(1.0) and lax.dtype(np.int64(1)) == jlax.dtype(np.int64(1))
    assert_same(lax.shape_as_value((2, 3)), jlax.shape_as_value((2, 3)))
    assert lax.with_sharding_constraint(1.5, None) == 1.5 and lax.stage(2.0) == 2.0
    token = lax.after_all(lax.create_token(), lax.create_token())
    assert isinstance(token, lax.Token)
    assert_same(lax.ragged_dot(np.arange(12.0).reshape(4, 3), np.arange(18.0).reshape(2, 3, 3), np.array([1, 2])),
                jlax.ragged_dot(np.arange(12.0).reshape(4, 3), np.arange(18.0).reshape(2, 3, 3), np.array([1, 2])))
    vals, idx = lax.approx_max_k(np.array([[1.0, 5.0, 3.0]]), 2)
    assert_same(vals, [[5.0, 3.0]]) and assert_same(idx, [[1, 2]])
    with pytest.raises(jitad.JitadError, match="unbound axis name"):
        lax.psum(1.0, "i")
    with pytest.raises(jitad.JitadError, match="jitad.random"):
        lax.rng_uniform(0.0, 1.0, (2,))
