"""Forward mode, second order, custom rules, fixed points and checkpointing."""
import math

import numpy as np
import pytest

import jitad
from jitad import FOR, FUN, IF, TREE, WHILE
from jitad.lower.runtime import arena_high_water
from jitad.testing import check_grads

X, V = np.array([2.0, 3.0]), np.array([4.0, 5.0])
CASES = {   # Lantern's second-order cases at (2, 3), v = (4, 5): gradient, Hessian @ v
    "x1*x2": (lambda x1, x2: x1 * x2, (3, 2), (5, 4)),
    "x1^2 x2^2": (lambda x1, x2: x1 * x1 * x2 * x2, (36, 24), (192, 136)),
    "2x1^2x2+3x2": (lambda x1, x2: 2 * x1 * x1 * x2 + 3 * x2, (24, 11), (88, 32)),
    "sin(x1+x2)": (lambda x1, x2: jitad.sin(x1 + x2), (math.cos(5), math.cos(5)),
                   (-9 * math.sin(5), -9 * math.sin(5))),
}


def _tree_identity(f):
    """f computed inside a TREE combine over a one-node tree."""
    tree = jitad.Tree([-1], [-1], value=[1.0])
    return lambda x: TREE(tree, 0.0, lambda node, l, r: f(x[0], x[1]) * node.value + l + r)


WRAPS = {
    "plain": lambda f: (lambda x: f(x[0], x[1])),
    "IF": lambda f: (lambda x: IF(x[0] > 0, lambda: f(x[0], x[1]), lambda: -f(x[0], x[1]))),
    "WHILE": lambda f: (lambda x: WHILE(lambda s: s[0] < 1, lambda s: (s[0] + 1, s[1] + f(x[0], x[1])),
                                        (0, 0.0))[1]),
    "FOR": lambda f: (lambda x: FOR(0, 3, lambda i, s: s + f(x[0], x[1]), 0.0) / 3.0),
    "TREE": _tree_identity,
}


@pytest.mark.parametrize("wrap", sorted(WRAPS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_lantern_second_order(case, wrap):
    f, grad, hv = CASES[case]
    g = WRAPS[wrap](f)
    np.testing.assert_allclose(jitad.grad(g)(X), grad, rtol=1e-13)
    np.testing.assert_allclose(jitad.hvp(g)(X, V), hv, rtol=1e-13)
    np.testing.assert_allclose(jitad.hessian(g)(X) @ V, hv, rtol=1e-13)


@FUN(out=0.0)
def _pow(x, n):
    return IF(n <= 0, lambda: 1.0, lambda: x * _pow(x, n - 1))


SECOND_ORDER = {
    "arith": (lambda x, y: (x * y - x / y) ** 2 + jitad.sqrt(y) * jitad.exp(-x), (0.3, 1.7)),
    "if": (lambda x, y: IF(x > y, lambda: x * jitad.sin(y), lambda: y / x), (0.5, 0.2)),
    "while": (lambda x: WHILE(lambda s: s[1] < 3.0, lambda s: (s[0] * 1.1 + 0.1, s[1] + s[0]), (x, 0.0))[0], (1.3,)),
    "for": (lambda x, n: FOR(0, n, lambda i, s: jitad.sin(s) * x + i, x), (0.6, 5)),
    "fun": (lambda x, n: _pow(x, n), (1.2, 4)),
    "tensor": (lambda w, x: jitad.sum(jitad.tanh(x @ w) ** 2), (np.array([[0.3, -0.2], [0.1, 0.4]]),
                                                               np.array([[1.0, 2.0], [-0.5, 0.3]]))),
    "tree": (lambda x, w, t: TREE(t, x, lambda node, l, r: IF(node.is_leaf, lambda: jitad.tanh(w * node.value),
                                                                 lambda: l * r + w)),
             (0.3, 0.7, jitad.Tree.from_nested((5.0, (3.0, None, None), (4.0, (1.0, None, None), None))))),
}


@pytest.mark.parametrize("name", sorted(SECOND_ORDER))
def test_check_grads_second_order_both_modes(name):
    f, args = SECOND_ORDER[name]
    check_grads(f, args, order=2, modes=("fwd", "rev"))


def test_jvp_and_vjp_values():
    assert jitad.jvp(lambda x: x * x, (3.0,), (1.0,)) == (9.0, 6.0)
    out, pullback = jitad.vjp(lambda x, y: x * y, 3.0, 4.0)
    assert out == 12.0 and pullback(1.0) == (4.0, 3.0)
    out, tangent = jitad.jvp(lambda a: jitad.sum(a * a), (np.arange(3.0),), (np.ones(3),))
    assert (out, tangent) == (5.0, 6.0)


def test_nested_grads_and_perturbation_confusion():
    assert jitad.grad(jitad.grad(lambda x: x ** 3))(2.0) == 12.0
    assert jitad.grad(jitad.grad(jitad.grad(lambda x: x ** 4)))(2.0) == 48.0
    # grad_x[x * grad_y(x + y)(1)] at 1 is 1: the inner derivative does not leak into the outer
    assert jitad.grad(lambda x: x * jitad.grad(lambda y: x + y)(1.0))(1.0) == 1.0


# -- custom rules ---------------------------------------------------------------
@jitad.custom_vjp
def log1pexp(x):
    return jitad.log(1 + jitad.exp(x))


log1pexp.defvjp(lambda x: (log1pexp(x), x), lambda x, g: (g * jitad.sigmoid(x),))


def test_custom_vjp_is_used():
    assert jitad.grad(log1pexp)(1000.0) == 1.0
    assert math.isnan(jitad.grad(lambda x: jitad.log(1 + jitad.exp(x)))(1000.0))   # the formula's own
    check_grads(log1pexp, (0.7,))


def test_custom_vjp_backward_rule_sees_closed_over_values():
    def f(a, x):
        @jitad.custom_vjp
        def scale(x):
            return a * x
        scale.defvjp(lambda x: (scale(x), x), lambda x, g: jitad.vjp(lambda x: a * x, x)[1](g))
        return scale(x) * x
    np.testing.assert_allclose(jitad.grad(f, argnums=(0, 1))(1.5, 2.0), (4.0, 6.0))


def test_fixed_point_gradient_by_implicit_function_theorem():
    sqrt = lambda a: jitad.fixed_point(lambda x: 0.5 * (x + a / x), 1.0)
    for a in (2.0, 9.0, 0.25):
        assert jitad.jit(sqrt)(a) == pytest.approx(math.sqrt(a), rel=1e-12)
        assert jitad.grad(sqrt)(a) == pytest.approx(1 / (2 * math.sqrt(a)), rel=1e-9)


def test_fixed_point_memory_does_not_depend_on_iterations():
    def solve(w, x, iters):
        return jitad.sum(jitad.fixed_point(lambda h: 0.5 * jitad.tanh(w @ h) + x, x, tol=0.0, max_iter=iters))
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((50, 50)) * 0.1, rng.standard_normal(50)
    peaks = []
    for iters in (10, 1000):
        g = jitad.grad(lambda w, x: solve(w, x, iters))
        g(w, x)
        arena_high_water(reset=True)
        g(w, x)
        peaks.append(arena_high_water(reset=True))
    assert peaks[1] == peaks[0]


def test_checkpoint_same_gradients_less_memory():
    rng = np.random.default_rng(0)
    W, x = rng.standard_normal((128, 128)) * 0.05, rng.standard_normal(128)

    def block(h, W):
        for _ in range(16):
            h = jitad.tanh(W @ h)
        return h
    ck = jitad.checkpoint(block)
    results = []
    jitad.config.update("jitad_tiering", "compile")   # (the compiled code's memory: no interpreted first calls)
    try:
        for f in (lambda W, x: jitad.sum(block(block(block(x, W), W), W)),
                  lambda W, x: jitad.sum(ck(ck(ck(x, W), W), W))):
            g = jitad.grad(f)
            g(W, x)
            arena_high_water(reset=True)
            results.append((g(W, x), arena_high_water(reset=True)))
    finally:
        jitad.config.update("jitad_tiering", "auto")
    (g_plain, m_plain), (g_ck, m_ck) = results
    np.testing.assert_allclose(g_ck, g_plain, rtol=1e-13)
    assert m_ck < m_plain


@pytest.mark.parametrize("fn, x, expected", [
    (jitad.softplus, 1000.0, 1.0), (jitad.softplus, -1000.0, 0.0), (jitad.softplus, 0.0, 0.5),
    (jitad.sigmoid, -1000.0, 0.0), (jitad.sigmoid, 1000.0, 0.0), (jitad.log1p, -0.5, 2.0),
    (lambda x: jitad.logsumexp(jitad.stack([x, 0.0 * x])), 1000.0, 1.0),
])
def test_careful_builtins_at_extremes(fn, x, expected):
    assert jitad.grad(fn)(x) == pytest.approx(expected, abs=1e-15)
    assert np.isfinite(jitad.jit(fn)(x))


def test_sqrt_at_zero_is_the_one_sided_derivative():
    assert jitad.grad(jitad.sqrt)(0.0) == math.inf
