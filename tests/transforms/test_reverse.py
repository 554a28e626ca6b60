"""Reverse mode by CPS through straight-line code and every combinator."""
import math
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import jitad
from jitad import FOR, FUN, IF, TREE, WHILE
from jitad.testing import check_grads


# -- the Lantern scalar cases, exact -------------------------------------------------
LANTERN = [
    (lambda x: x * x, lambda x: 2 * x),
    (lambda x: x + x * x * x, lambda x: 1 + 3 * x * x),
    (lambda x: jitad.sin(x), math.cos),
    (lambda x: jitad.cos(x), lambda x: -math.sin(x)),
    (lambda x: (x * x * x) * (x * x * x), lambda x: 6 * x ** 5),
    (lambda x: IF(x > 0, lambda: -(x * x), lambda: x * x), lambda x: -2 * x if x > 0 else 2 * x),
    (lambda x: WHILE(lambda t: t > 1.0, lambda t: t * 0.5, x), None),
]


@pytest.mark.parametrize("case", range(len(LANTERN)))
@pytest.mark.parametrize("x", [-2.5, 0.7, 3.0])
def test_lantern_scalar_cases(case, x):
    f, df = LANTERN[case]
    if df is None:   # WHILE halving: t = x * 0.5**k with k the trip count
        k = 0
        t = x
        while t > 1.0:
            t, k = t * 0.5, k + 1
        expected = 0.5 ** k
    else:
        expected = df(x)
    assert jitad.grad(f)(x) == pytest.approx(expected, rel=1e-14, abs=1e-300)


def test_while_halving_large():
    assert jitad.value_and_grad(lambda x: WHILE(lambda t: t > 1.0, lambda t: t * 0.5, x))(1e6) == \
        (1e6 * 0.5 ** 20, 0.5 ** 20)


def test_tree_product_240x3():
    tree = jitad.Tree.from_nested((5.0, (3.0, None, None), (4.0, None, None)))
    g = jitad.grad(lambda x, t: TREE(t, x, lambda node, l, r: l * r * node.value))
    for x in (0.5, 2.0, -1.5):
        assert g(x, tree) == pytest.approx(240 * x ** 3, rel=1e-14)


def test_product_over_list():
    xs = (1.5, -2.0, 3.0, 0.5)
    grads = jitad.grad(lambda v: math.prod(v))(xs)
    assert grads == pytest.approx([math.prod(xs[:i] + xs[i + 1:]) for i in range(len(xs))])


# -- check_grads on a table of programs ------------------------------------------
@FUN(out=0.0)
def _power(x, n):
    return IF(n <= 0, lambda: 1.0, lambda: x * _power(x, n - 1))


@FUN
def _smooth(x, y):
    return jitad.tanh(x * y) + jitad.sigmoid(x - y)


def _nested(x, y):
    def body(s):
        i, acc = s
        inner = IF(acc > 0.0, lambda: jitad.sin(acc) * y, lambda: acc * acc + x)
        return i + 1, inner + 0.1 * _smooth(acc, x)
    return WHILE(lambda s: s[0] < 5, body, (0, x))[1]


PROGRAMS = {
    "arith": (lambda x, y: (x * y - x / y) ** 2 + jitad.sqrt(y) * jitad.exp(-x), (0.3, 1.7)),
    "math": (lambda x: jitad.log1p(x * x) + jitad.expm1(x) + jitad.tanh(x) * jitad.sigmoid(x)
             + jitad.abs(x - 1.0) + jitad.relu(x) + jitad.square(x), (0.4,)),
    "where_max": (lambda x, y: jitad.where(x > y, x * y, x + y) + jitad.maximum(x, y * y)
                  + jitad.minimum(x, 2.0) + jitad.clip(y, 0.0, 1.5), (0.9, 1.1)),
    "mod_pow": (lambda x, y: x % 0.7 + x ** y + 2.0 ** x, (1.3, 2.2)),
    "convert": (lambda x: x * 2.0 + jitad.convert(jitad.convert(x, "i64"), "f64"), (2.5,)),
    "if_capture": (lambda x, y: IF(x > y, lambda: x * jitad.sin(y), lambda: y / x), (0.5, 0.2)),
    "if_operands": (lambda x, y: IF(x < y, lambda a, b: a * b, lambda a, b: a - b, x, y * 2.0), (0.5, 0.9)),
    "while": (lambda x: WHILE(lambda s: s[1] < 10.0, lambda s: (s[0] * 1.1 + 0.1, s[1] + s[0]), (x, 0.0))[0], (1.3,)),
    "for": (lambda x, n: FOR(0, n, lambda i, s: jitad.sin(s) * x + i, x), (0.6, 7)),
    "for_staged_bounds": (lambda x, lo, hi: FOR(lo, hi, lambda i, s: s * x, 1.0), (1.1, 2, 9)),
    "fun_recursive": (lambda x, n: _power(x, n), (1.2, 6)),
    "fun_shared": (lambda x, y: _smooth(x, y) * _smooth(y, x), (0.3, -0.4)),
    "nested": (_nested, (0.4, 0.8)),
    "pytree_args": (lambda p, x: p["w"] * x + p["b"] ** 2, ({"w": 0.5, "b": -1.5}, 2.0)),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_check_grads(name):
    f, args = PROGRAMS[name]
    check_grads(f, args)


def _random_tree(rng, n):
    return jitad.Tree.random(n, seed=int(rng.integers(1 << 30)), value=rng.uniform(0.5, 1.5, n),
                             word=rng.integers(0, 3, n))


def test_tree_gradients_to_init_and_captures():
    rng = np.random.default_rng(0)

    def f(x, w, t):
        return TREE(t, x, lambda node, l, r: jitad.tanh(w * (l + r) + node.value)
                    + IF(node.word == 1, lambda: w, lambda: 0.0))
    for n in (1, 2, 7, 40):
        check_grads(f, (0.3, 0.8, _random_tree(rng, n)))


# -- nesting: grad inside staged code ------------------------------------------------
def _loss(w, x, y):
    return (w["a"] * x + w["b"] - y) ** 2


def test_training_loop_in_graph_matches_python_loop():
    data = [(0.5, 1.0), (1.5, 2.0), (-1.0, 0.3)]
    step = jitad.jit_grad(_loss)

    params = {"a": 0.1, "b": -0.2}
    for it in range(30):
        x, y = data[it % 3]
        _, g = step(params, x, y)
        params = {k: params[k] - 0.05 * g[k] for k in params}

    def train(w, xs, ys):
        def body(i, w):
            k = i % 3
            x = IF(k == 0, lambda: xs[0], lambda: IF(k == 1, lambda: xs[1], lambda: xs[2]))
            y = IF(k == 0, lambda: ys[0], lambda: IF(k == 1, lambda: ys[1], lambda: ys[2]))
            g = jitad.grad(_loss)(w, x, y)
            return {n: w[n] - 0.05 * g[n] for n in w}
        return FOR(0, 30, body, w)

    staged = jitad.jit(train)({"a": 0.1, "b": -0.2}, tuple(d[0] for d in data), tuple(d[1] for d in data))
    for k in params:
        assert staged[k] == pytest.approx(params[k], rel=1e-10, abs=1e-12)


# -- API ------------------------------------------------------------------------
def test_api_forms():
    f = lambda x, y: x * x * y
    assert jitad.grad(f)(3.0, 2.0) == 12.0
    assert jitad.grad(f, argnums=1)(3.0, 2.0) == 9.0
    assert jitad.grad(f, argnums=(0, 1))(3.0, 2.0) == (12.0, 9.0)
    assert jitad.value_and_grad(f)(3.0, 2.0) == (18.0, 12.0)
    g, aux = jitad.grad(lambda x: (x * x, {"double": 2 * x}), has_aux=True)(3.0)
    assert g == 6.0 and aux == {"double": 6.0}
    (v, aux), g = jitad.value_and_grad(lambda x: (x * x, x + 1), has_aux=True)(3.0)
    assert (v, aux, g) == (9.0, 4.0, 6.0)

    @jitad.jit_grad
    def loss(w, x):
        return (w * x - 1.0) ** 2
    assert loss(0.5, 3.0) == (0.25, 3.0)

    @jitad.jit_grad(argnums=(0, 1), has_aux=True)
    def loss2(w, b):
        return w * b, w - b
    assert loss2(2.0, 5.0) == ((10.0, -3.0), (5.0, 2.0))


def test_gradient_of_independent_output_is_zero():
    assert jitad.grad(lambda x, y: y * 2.0, argnums=0)(1.0, 3.0) == 0.0
    assert jitad.grad(lambda x: 4.0)(1.0) == 0.0


def test_errors():
    with pytest.raises(jitad.ArgumentError, match="float scalar"):
        jitad.grad(lambda x: (x, x))(1.0)
    with pytest.raises(jitad.ArgumentError, match="i64"):
        jitad.grad(lambda n: n * 2.0)(3)
    with pytest.raises(jitad.ArgumentError, match="bool"):
        jitad.grad(lambda x, b: x * 2.0, argnums=1)(1.0, True)
    with pytest.raises(jitad.ArgumentError, match="i64"):
        jitad.grad(lambda x: x * 2)(1.0) if False else jitad.grad(lambda n: n + 1)(1)
    with pytest.raises(jitad.ArgumentError, match="argnums"):
        jitad.grad(lambda x: x, argnums=3)(1.0)
    with pytest.raises(jitad.ArgumentError, match="pair"):
        jitad.grad(lambda x: x, has_aux=True)(1.0)


def test_ieee_at_singular_points():
    assert jitad.grad(jitad.sqrt)(0.0) == math.inf
    assert math.isnan(jitad.grad(lambda x: jitad.sqrt(x) * 0.0)(0.0))
    assert jitad.grad(jitad.log)(0.0) == math.inf
    assert math.isnan(jitad.grad(lambda x: x * x)(math.nan))


# -- cost and depth ------------------------------------------------------------
def _chain(n):
    def f(x):
        for _ in range(n):
            x = 0.5 * x + 0.5 * x
        return x
    return f


def test_chain_share_unrolled_is_exact_not_exponential():
    # naive dual-number reverse AD takes 2**n steps here
    assert jitad.grad(_chain(300))(1.7) == 1.0


def _best_time(f, *args, repeat=5, number=3):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            f(*args)
        times.append(time.perf_counter() - t0)
    return min(times) / number


def test_gradient_time_is_linear_in_loop_length():
    g = jitad.grad(lambda x, n: FOR(0, n, lambda i, s: 0.5 * s + 0.5 * s, x))
    assert g(1.0, 100000) == 1.0
    small, large = _best_time(g, 1.0, 10000), _best_time(g, 1.0, 100000)
    assert large / small < 40   # linear: ~10x; quadratic would be ~100x


def test_long_while_and_deep_fun():
    g = jitad.grad(lambda x, n: WHILE(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * 1.0000001), (0, x))[1])
    assert g(1.0, 10 ** 6) == pytest.approx(1.0000001 ** 10 ** 6, rel=1e-9)

    @FUN(out=0.0)
    def rec(x, n):
        return IF(n <= 0, lambda: x, lambda: jitad.sin(rec(x, n - 1)))

    expected_x, expected_g = 0.5, 1.0
    for _ in range(10 ** 4):
        expected_g *= math.cos(expected_x)
        expected_x = math.sin(expected_x)
    assert jitad.grad(rec)(0.5, 10 ** 4) == pytest.approx(expected_g, rel=1e-9)


def test_huge_reverse_loop_completes_or_raises_resource_error():
    code = textwrap.dedent("""
        import jitad
        from jitad import WHILE
        g = jitad.grad(lambda x, n: WHILE(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * 1.0), (0, x))[1])
        try:
            print("completed", g(1.0, 3 * 10 ** 8))
        except jitad.ResourceError as e:
            print("resource error", e)
        print("after", g(2.0, 10))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "completed 1.0" in out.stdout or "resource error" in out.stdout
    assert "after 1.0" in out.stdout


def test_stop_gradient_blocks_both_modes():
    f = lambda x: x * jitad.stop_gradient(x * x)
    assert jitad.grad(f)(3.0) == 9.0                      # only the first factor is differentiated
    assert jitad.jvp(f, (3.0,), (1.0,)) == (27.0, 9.0)
    assert jitad.hessian(f)(3.0) == 0.0
    v = np.array([1.0, 2.0])
    np.testing.assert_array_equal(jitad.grad(lambda v: jitad.sum(jitad.stop_gradient(v) * v))(v), v)


def test_softmax_family_gradients_do_not_depend_on_the_shift():
    """logsumexp/softmax subtract a stopped maximum: their gradients still match JAX's formulas."""
    x = np.array([[1.0, 3.0, 3.0], [-2.0, 0.5, 7.0]])
    g = jitad.grad(lambda x: jitad.sum(jitad.logsumexp(x, 1) * np.array([1.0, 2.0])))(x)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(g, e / e.sum(1, keepdims=True) * np.array([[1.0], [2.0]]), rtol=1e-14)
