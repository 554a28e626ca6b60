"""Loops in bounded memory: `checkpoints=` on FOR, WHILE and scan. Gradients equal those
of `checkpoints=None` (to rounding), the kept states stay bounded, recomputation stays
within the binomial bound, and vmap, forward mode and second order go through."""
import contextlib
import io
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import jitad
from jitad import FOR, FUN, IF, TREE, WHILE
from jitad.lower.runtime import arena_high_water
from jitad.testing import check_grads

RNG = np.random.default_rng(7)
W = RNG.normal(size=(3, 3)) * 0.4
X0 = RNG.normal(size=3)
CS = [1, 2, 3, 7, 64]


def _same(a, b):
    for x, y in zip(jitad.tree_leaves(a), jitad.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-12, atol=1e-14)


@FUN(out=0.0)
def _decay(x, n):   # recursion inside a checkpointed body
    return IF(n <= 0, lambda: x, lambda: _decay(x * 0.9, n - 1) + x)


def _for_tensor(c):   # tensors, an IF, a nested loop, a captured weight
    def body(i, s):
        x, acc = s
        x = FOR(0, 2, lambda j, t: jitad.tanh(W @ t + 0.1 * jitad.sin(t)), x)
        x = IF(i % 3 == 0, lambda: x * 1.01, lambda: x)
        return x, acc + jitad.sum(x * x)
    return lambda x0, w: FOR(0, 25, lambda i, s: body(i, (s[0] * w, s[1])), (x0, 0.0), checkpoints=c)[1]


def _for_fun(c):
    return lambda x: FOR(0, 15, lambda i, s: jitad.sin(_decay(s, 3)) + 0.01 * i, x, checkpoints=c)


def _while_tensor(c):
    return lambda x, w: jitad.sum(WHILE(lambda st: st[1] < 23, lambda st: (jitad.tanh(w * (W @ st[0])), st[1] + 1),
                                        (x, 0), checkpoints=c)[0])


def _while_data(c):   # the trip count depends on the input
    return lambda x: WHILE(lambda t: t > 1.0, lambda t: t * 0.5 + jitad.sin(t) * 0.01, x, checkpoints=c)


def _scan(c):   # stacked outputs are written once and never kept in checkpoints
    def loss(h0, xs):
        carry, ys = jitad.scan(lambda h, x: (jitad.tanh(W @ h + x), jitad.sum(h) * x), h0, xs, checkpoints=c)
        return jitad.sum(ys ** 2) + jitad.sum(carry)
    return loss


CASES = {
    "for_tensor": (_for_tensor, (X0, 0.9), (0, 1)),
    "for_fun": (_for_fun, (0.3,), 0),
    "while_tensor": (_while_tensor, (X0, 1.3), (0, 1)),
    "while_data": (_while_data, (1e5,), 0),
    "scan": (_scan, (X0, RNG.normal(size=(30, 3))), (0, 1)),
}


@pytest.mark.parametrize("case", CASES)
def test_gradients_equal_keeping_every_step(case):
    make, args, argnums = CASES[case]
    want = jitad.grad(make(None), argnums=argnums)(*args)
    for c in CS:
        _same(jitad.grad(make(c), argnums=argnums)(*args), want)


def test_tree_and_grad_inside_a_checkpointed_body():
    tree = jitad.Tree.random(7, seed=0, value=np.arange(7.0))
    f = lambda c: lambda x, t: FOR(0, 12, lambda i, s: 0.1 * TREE(t, s, lambda nd, l, r: jitad.tanh(l + r + nd.value * 0.1))
                                   - 0.1 * jitad.grad(lambda y: jitad.sin(y) * y)(s), x, checkpoints=c)
    want = jitad.grad(f(None))(0.3, tree)
    for c in (1, 3):
        _same(jitad.grad(f(c))(0.3, tree), want)


@settings(max_examples=8, deadline=None)
@given(n=st.integers(0, 40), c=st.integers(1, 45))
def test_any_trip_count_and_checkpoint_count(n, c):
    f = lambda c: lambda x, k: WHILE(lambda s: s[1] < k, lambda s: (jitad.sin(s[0]) * 1.1 + 0.1, s[1] + 1), (x, 0),
                                     checkpoints=c)[0]
    g = lambda c: lambda x, k: FOR(0, k, lambda i, s: jitad.cos(s) * 0.9 + 0.01 * i, x, checkpoints=c)
    for make in (f, g):
        np.testing.assert_allclose(jitad.grad(make(c))(0.4, n), jitad.grad(make(None))(0.4, n), rtol=1e-12)


def test_vmap_forward_mode_and_second_order():
    f = lambda c: lambda x: FOR(0, 30, lambda i, s: jitad.sin(s) * 0.9 + 0.05, x, checkpoints=c)
    xs = np.linspace(0.1, 1.0, 5)
    _same(jitad.vmap(jitad.grad(f(3)))(xs), jitad.vmap(jitad.grad(f(None)))(xs))
    _same(jitad.grad(lambda x: jitad.sum(jitad.vmap(f(3))(x)))(xs),
          jitad.grad(lambda x: jitad.sum(jitad.vmap(f(None))(x)))(xs))
    _same(jitad.jvp(f(3), (0.4,), (1.0,)), jitad.jvp(f(None), (0.4,), (1.0,)))
    h = lambda c: lambda x: jitad.sum(WHILE(lambda s: s[1] < 17, lambda s: (jitad.tanh(W @ s[0]), s[1] + 1), (x, 0),
                                            checkpoints=c)[0] ** 2)
    _same(jitad.hessian(h(2))(X0), jitad.hessian(h(None))(X0))
    check_grads(f(2), (0.4,), order=2, modes=("fwd", "rev"))


def _step_runs(n, c):
    """How many times each step's forward ran in `grad` (recomputed steps made to print)."""
    from jitad.transforms import vjp as reverse

    def f(x):
        def body(i, s):
            jitad.debug.print("{}", i)
            return s * 0.999 + 0.001
        return FOR(0, n, body, x, checkpoints=c)
    original, reverse._ran_already = reverse._ran_already, lambda body, rows: {id(r) for r in rows.values()}
    try:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            jitad.grad(f)(1.0)
    finally:
        reverse._ran_already = original
    return Counter(out.getvalue().split())


@pytest.mark.parametrize("n, c", [(60, 1), (100, 3), (200, 10)])
def test_recomputation_within_the_binomial_bound(n, c):
    runs = _step_runs(n, c)
    assert sorted(map(int, runs)) == list(range(n))
    t = next(t for t in range(n + 1) if math.comb(c + t, t) >= n)
    assert max(runs.values()) == t + 1   # Revolve's bound: t recomputations, reached


def test_recomputed_steps_do_not_print_again():
    f = lambda x: FOR(0, 50, lambda i, s: (jitad.debug.print("step {}", i), s * 0.9)[1], x, checkpoints=2)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        jitad.grad(f)(1.0)
    assert out.getvalue().count("step") == 50


def test_memory_does_not_grow_with_the_trip_count():
    def high_water(n, c):
        f = jitad.grad(lambda x: jitad.sum(WHILE(lambda s: s[1] < n, lambda s: (jitad.sin(s[0]) * 0.99, s[1] + 1),
                                                 (x, 0), checkpoints=c)[0]))
        x = np.linspace(0.0, 1.0, 256)
        f(x)
        arena_high_water(reset=True)
        f(x)
        return arena_high_water(reset=True)
    kept = high_water(1_000, None)
    small, large = high_water(1_000, 8), high_water(20_000, 8)
    assert large <= small * 1.25 + 65536, (small, large)
    assert large < kept / 20


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "3"])
def test_bad_checkpoint_counts(bad):
    for loop in (lambda: FOR(0, 3, lambda i, s: s, 0.0, checkpoints=bad),
                 lambda: WHILE(lambda s: s < 1.0, lambda s: s + 1.0, 0.0, checkpoints=bad),
                 lambda: jitad.scan(lambda c, x: (c, x), 0.0, np.ones(3), checkpoints=bad)):
        with pytest.raises(jitad.ArgumentError, match="checkpoints"):
            loop()
        with pytest.raises(jitad.ArgumentError, match="checkpoints"):
            jitad.jit(lambda x: loop())(1.0)


@pytest.mark.parametrize("variant", ["rr", "rf", "fr", "ff"])
def test_gradbench_nested_solvers_with_checkpointed_loops(variant):
    from bench.gradbench import inputs, nested
    assert nested.compiled("particle", variant, checkpoints=2)(0.0) == pytest.approx(inputs.EXPECTED["particle"],
                                                                                      rel=1e-12)
    if variant == "rr":
        want = nested.compiled("saddle", variant)(1.0, 1.0)
        np.testing.assert_allclose(nested.compiled("saddle", variant, checkpoints=3)(1.0, 1.0), want, rtol=1e-12)


ARENA_CHILD = """
import numpy as np, jitad
w0 = np.ones((64, 64)) * 1e-3
def loss(c):
    return lambda w: jitad.FOR(0, 1000, lambda i, s: s + jitad.sum((w * s) @ w) * 1e-9, 1.0, checkpoints=c)
try:
    jitad.grad(loss(None))(w0)
except jitad.ResourceError as e:
    assert "checkpoints=" in str(e), str(e)
    print("taped: ResourceError naming checkpoints=")
g = jitad.grad(loss(16))(w0)
print("checkpointed:", np.isfinite(g).all())
"""


def test_a_tape_that_outgrows_the_arena_names_checkpoints():
    """1,000 steps of a 64x64 temporary (32 KiB each) outgrow a 16 MiB arena when taped,
    and fit with checkpoints."""
    import os
    import subprocess
    import sys
    env = dict(os.environ, JITAD_ARENA_MB="16", JITAD_CACHE_DIR="")
    done = subprocess.run([sys.executable, "-c", ARENA_CHILD], capture_output=True, text=True, timeout=300, env=env,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "taped: ResourceError naming checkpoints=" in done.stdout and "checkpointed: True" in done.stdout, done.stdout
