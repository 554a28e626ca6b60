"""Arena space reuse (`jitad/lower/arena_plan.py`): a tensor takes the space of one whose
last reader has run. The numbers must not change: each program here runs with the plan
and without it (bit for bit the same) and against JAX (x64 and float32), on long chains
of temporaries, views of buffers whose own value is dead, values returned from bodies,
IF/WHILE/FOR/scan, reverse mode (with `checkpoints=`), vmap, recursion, the deep-stack
retry and two threads calling one compiled function; and the arena's high water drops."""
import contextlib
import threading

import numpy as np
import pytest

import jitad
from jitad import FOR, FUN, IF
from jitad.lower import arena_plan, runtime
from jitad.lower.runtime import arena_high_water
from jitad.testing import check_grads

from ..reliability.test_runtime import run_python

RNG = np.random.default_rng(3)
X = RNG.normal(size=(8, 12))
W = RNG.normal(size=(12, 12)) * 0.3
XS = RNG.normal(size=(3, 8, 12)) * 0.5


@contextlib.contextmanager
def reuse(flag):
    """Compile under `arena_plan.REUSE = flag` (a cache key of its own: the program prints alike)."""
    saved, compile_module = arena_plan.REUSE, runtime.compile_module
    arena_plan.REUSE = flag
    runtime.compile_module = lambda text, *rest: compile_module(f"{text}\n# arena reuse {flag}", *rest)
    try:
        yield
    finally:
        arena_plan.REUSE, runtime.compile_module = saved, compile_module


def chain(m, x, w):
    """Temporaries in a chain; views (reshape, transpose, slices) of buffers whose own value
    is read no more; a result that is a view of a temporary."""
    jnp = m.numpy
    h, total = x, 0.0
    for k in range(3):
        a = jnp.tanh(h @ w)
        v = a.reshape(4, 24).T   # a's buffer read through a view after a's last direct use
        s = a[1:5, ::2]
        h = jnp.sin(v.T.reshape(8, 12)) * 0.5 + jnp.sum(s) * 0.01 + (h @ w.T)[:, ::-1] * 0.1
        total = total + jnp.sum(h * h) * (k + 1)
    return total + jnp.sum(h[:, :6]), h.T[::2]


def _body(m, w, h):
    jnp = m.numpy
    a = jnp.tanh(h @ w)
    b = (jnp.sin(a) * a) @ w.T
    return (b.reshape(-1)[::-1].reshape(h.shape) * 0.5 + a[:, ::-1] * 0.25)


def control(m, x, w, xs, while_loop=True):
    """Bodies with chains of temporaries, each returning a view of one (JAX differentiates
    no `while_loop`)."""
    lax, jnp = m.lax, m.numpy
    body = lambda h: _body(m, w, h)  # noqa: E731
    c = lax.cond(jnp.sum(x) > 0, body, lambda h: body(body(h)), x)
    f = lax.fori_loop(0, 3, lambda i, h: body(h) + i * 0.01, c)
    if while_loop:
        f = lax.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, body(s[1])), (0, f))[1]
    carry, ys = lax.scan(lambda h, xi: (body(h) + xi, jnp.sum(h * xi)), f, xs)
    return jnp.sum(carry * carry) + jnp.sum(ys * ys)


def _programs(m):
    return {
        "chain": lambda x, w, xs: chain(m, x, w)[0],
        "chain views": lambda x, w, xs: chain(m, x, w)[1],
        "control": lambda x, w, xs: control(m, x, w, xs),
        "grad chain": lambda x, w, xs: m.grad(lambda w: chain(m, x, w)[0])(w),
        "grad control": lambda x, w, xs: m.grad(lambda w, x: control(m, x, w, xs, False), argnums=(0, 1))(w, x),
        "vmap chain": lambda x, w, xs: m.vmap(lambda xi: chain(m, xi, w)[0])(xs),
    }


@pytest.fixture(scope="module")
def jax64():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    return jax


CASES = [(name, "float64") for name in ("chain", "chain views", "control", "grad chain", "grad control", "vmap chain")]
CASES += [("grad chain", "float32")] + [pytest.param(name, "float32", marks=pytest.mark.slow)
                                        for name in ("chain", "chain views", "control", "grad control", "vmap chain")]


@pytest.mark.parametrize("name, dtype", CASES)
def test_values_with_and_without_reuse_and_against_jax(name, dtype, jax64):
    args = [a.astype(dtype) for a in (X, W, XS)]
    outs = []
    for flag in (False, True):
        with reuse(flag):
            outs.append(jitad.jit(_programs(jitad)[name])(*args))
    for a, b in zip(jitad.tree_leaves(outs[0]), jitad.tree_leaves(outs[1])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))   # only the addresses moved
    want = jax64.jit(_programs(jax64)[name])(*args)
    tol = 1e-10 if dtype == "float64" else 2e-4
    for a, b in zip(jitad.tree_leaves(outs[1]), jax64.tree_util.tree_leaves(want)):
        assert np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def test_gradients_with_reuse():
    check_grads(lambda w: chain(jitad, X, w)[0], (W,), order=1)
    check_grads(lambda x, w: control(jitad, x, w, XS), (X, W), order=1)


def _checkpointed(c):
    def loss(x, w):
        def step(i, h):
            a = jitad.tanh(h @ w)
            return (jitad.sin(a) * a).reshape(-1)[::-1].reshape(8, 12) * 0.5 + h[:, ::-1] * 0.5
        return jitad.sum(FOR(0, 9, step, x, checkpoints=c) ** 2)
    return loss


def test_checkpointed_loop_gradients_agree():
    want = jitad.grad(_checkpointed(None), argnums=(0, 1))(X, W)
    for c in (1, 3):
        got = jitad.grad(_checkpointed(c), argnums=(0, 1))(X, W)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


@FUN(out=jitad.ShapeDtype((8, 12), "f64"))
def _unroll(h, n, w):   # tensors made on every level, a view returned up the recursion
    return IF(n <= 0, lambda: h, lambda: _unroll((jitad.tanh(h @ w) * 0.9).T.reshape(12, 8).T.reshape(8, 12)[:, :]
                                                + h * 0.1, n - 1, w))


def _unroll_np(h, n, w):
    for _ in range(n):
        h = (np.tanh(h @ w) * 0.9).T.reshape(12, 8).T.reshape(8, 12) + h * 0.1
    return h


def test_recursion_with_tensors():
    f = jitad.jit(lambda x, w: jitad.sum(_unroll(x, 7, w) ** 2))
    np.testing.assert_allclose(f(X, W), np.sum(_unroll_np(X, 7, W) ** 2), rtol=1e-12)
    check_grads(lambda x: jitad.sum(_unroll(x, 3, W) ** 2), (X,), order=1)


def test_two_threads_call_one_compiled_function():
    f = jitad.jit(lambda x, w: chain(jitad, x, w))
    inputs = [(X * (1 + 0.1 * k), W * (1 - 0.05 * k)) for k in range(4)]
    want = [f(*a) for a in inputs]
    errors = []

    def run(k):
        for r in range(30):
            got = f(*inputs[(k + r) % 4])
            ref = want[(k + r) % 4]
            if not (np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1])):
                errors.append((k, r))
    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


@pytest.mark.slow
def test_deep_recursion_retried_on_the_deep_stack_thread():
    out = run_python("""
        import threading
        import numpy as np
        import jitad
        from jitad import FUN, IF

        @FUN(out=jitad.ShapeDtype((4,), "f64"))
        def walk(h, n):
            return IF(n <= 0, lambda: h, lambda: walk((jitad.sin(h) * 0.5 + h[::-1] * 0.25)[::-1] + 0.125, n - 1))

        def walk_np(h, n):
            for _ in range(n):
                h = (np.sin(h) * 0.5 + h[::-1] * 0.25)[::-1] + 0.125
            return h

        f = jitad.jit(walk)
        h = np.array([0.5, -1.0, 2.0, 0.25])
        print(np.allclose(f(h, 10), walk_np(h, 10), rtol=1e-13, atol=0))
        print(np.allclose(f(h, 200000), walk_np(h, 200000), rtol=1e-13, atol=0))
        print([t.name for t in threading.enumerate() if t.name == "jitad-deep-stack"])
    """, ulimit_s=8192)
    assert out.split("\n")[:3] == ["True", "True", "['jitad-deep-stack']"], out


def _layers(x, ws):
    for w in ws:
        x = jitad.tanh(x @ w) + x * 0.5
    return jitad.sum(x * x)


def test_high_water_drops():
    """A chain of 12 products of 128 x 128 and its gradient: without reuse every temporary
    and every adjoint slot keeps its space to the end."""
    x = RNG.normal(size=(128, 128)) * 0.1
    ws = [RNG.normal(size=(128, 128)) * 0.05 for _ in range(12)]
    peaks, values = {}, {}
    for flag in (False, True):
        with reuse(flag):
            f = jitad.jit(jitad.value_and_grad(_layers, argnums=1))
            f(x, ws)
            arena_high_water(reset=True)
            values[flag] = f(x, ws)
            peaks[flag] = arena_high_water(reset=True)
    for a, b in zip(jitad.tree_leaves(values[False]), jitad.tree_leaves(values[True])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    one = 128 * 128 * 8
    assert peaks[True] < 0.6 * peaks[False], peaks
    assert peaks[True] < 40 * one, (peaks, one)
