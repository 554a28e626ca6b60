"""Reverse mode through jitad.scan: gradients (against central differences and JAX), and
the loop tape of its stacked outputs (`jitad.transforms.tape.output_rows`): O(one step) per
iteration, never the whole stacked buffer."""
import numpy as np
import pytest

import jitad
from jitad import FOR
from jitad.ir.graph import walk
from jitad.ir.ops import Op
from jitad.testing import check_grads

RNG = np.random.default_rng(0)
W = RNG.normal(size=(3, 3)) * 0.5
XS = RNG.normal(size=(6, 3))


def rnn(W, xs, reverse=False):
    def step(c, x):
        c = jitad.tanh(W @ c + x)
        return c, c * c
    c, ys = jitad.scan(step, np.zeros(3), xs, reverse=reverse)
    return jitad.sum(c) + jitad.sum(ys * jitad.sin(ys))


def pytrees(W, xs):
    def step(carry, x):
        h, s = carry["h"], carry["s"]
        h = jitad.tanh(W @ h + x["a"] * x["b"])
        return {"h": h, "s": s + jitad.sum(h)}, (jitad.sum(h * h), {"h": h, "n": jitad.convert(s, "i64")})
    carry, (sq, out) = jitad.scan(step, {"h": np.zeros(3), "s": 0.0}, {"a": xs, "b": xs[:, 0]})
    return carry["s"] + jitad.sum(sq * jitad.cos(out["h"][:, 1])) + jitad.sum(jitad.convert(out["n"], "f64")) * 0.0


def no_xs(W, c0):
    c, ys = jitad.scan(lambda c, _: (jitad.sin(W @ c), c), c0, length=5)
    return jitad.sum(c) + jitad.sum(ys[2] * ys[4])


def ys_unused(W, xs):
    c, _ = jitad.scan(lambda c, x: (jitad.tanh(W @ c + x), jitad.exp(c)), np.zeros(3), xs)
    return jitad.sum(c * c)


def ys_twice(W, xs):
    c, ys = jitad.scan(lambda c, x: (jitad.tanh(W @ c + x), c + x), np.zeros(3), xs)
    return jitad.sum(ys * ys) + jitad.sum(jitad.sin(ys)) + jitad.sum(ys[1]) * jitad.sum(c)


def ys_apart(W, xs):
    """y depends on x alone: its adjoint gets nothing but the row read from the stacked
    cotangent (a single store the peephole must not forward past the row's zeroing)."""
    c, ys = jitad.scan(lambda c, x: (c * 0.9 + W @ x, jitad.sin(x) * 2.0), np.zeros(3), xs)
    return jitad.sum(c) + jitad.sum(ys * ys)


def nested(W, xs):
    def outer(c, x):
        def inner(d, w):
            d = jitad.tanh(d * w + x)
            return d, jitad.sum(d * c)
        d, zs = jitad.scan(inner, c, W)
        return d + c * 0.5, zs
    c, ys = jitad.scan(outer, np.zeros(3), xs, reverse=True)
    return jitad.sum(c) + jitad.sum(ys * ys)


CASES = {"forward": rnn, "reverse": lambda W, xs: rnn(W, xs, True), "pytrees": pytrees,
         "ys_unused": ys_unused, "ys_twice": ys_twice, "ys_apart": ys_apart, "nested": nested}


@pytest.mark.parametrize("name", sorted(CASES))
def test_scan_gradients(name):
    check_grads(CASES[name], (W, XS), order=2, modes=("rev", "fwd"))


def test_scan_length_without_xs():
    check_grads(no_xs, (W, np.array([0.3, -0.2, 0.5])), order=2, modes=("rev", "fwd"))


def test_scan_grad_of_grad():
    def inner(a, xs):
        return jitad.sum(jitad.grad(lambda W: rnn(W * a, xs))(W))
    check_grads(inner, (0.7, XS))


def test_scan_vmap_of_grad():
    g = jitad.vmap(jitad.grad(rnn), in_axes=(None, 0))(W, np.stack([XS, XS[::-1]]))
    np.testing.assert_allclose(g[1], jitad.grad(rnn)(W, XS[::-1]), rtol=1e-12)


def jax_versions():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp, scan = jax.numpy, jax.lax.scan

    def rnn_jax(W, xs, reverse=False):
        def step(c, x):
            c = jnp.tanh(W @ c + x)
            return c, c * c
        c, ys = scan(step, jnp.zeros(3), xs, reverse=reverse)
        return jnp.sum(c) + jnp.sum(ys * jnp.sin(ys))

    def nested_jax(W, xs):
        def outer(c, x):
            def inner(d, w):
                d = jnp.tanh(d * w + x)
                return d, jnp.sum(d * c)
            d, zs = scan(inner, c, W)
            return d + c * 0.5, zs
        c, ys = scan(outer, jnp.zeros(3), xs, reverse=True)
        return jnp.sum(c) + jnp.sum(ys * ys)

    def ys_twice_jax(W, xs):
        c, ys = scan(lambda c, x: (jnp.tanh(W @ c + x), c + x), jnp.zeros(3), xs)
        return jnp.sum(ys * ys) + jnp.sum(jnp.sin(ys)) + jnp.sum(ys[1]) * jnp.sum(c)

    def ys_apart_jax(W, xs):
        c, ys = scan(lambda c, x: (c * 0.9 + W @ x, jnp.sin(x) * 2.0), jnp.zeros(3), xs)
        return jnp.sum(c) + jnp.sum(ys * ys)
    return jax, {"forward": rnn_jax, "reverse": lambda W, xs: rnn_jax(W, xs, True), "nested": nested_jax,
                 "ys_twice": ys_twice_jax, "ys_apart": ys_apart_jax}


def test_scan_gradients_against_jax():
    jax, programs = jax_versions()
    for name, fn in programs.items():
        got = jitad.grad(CASES[name], argnums=(0, 1))(W, XS)
        want = jax.grad(fn, argnums=(0, 1))(W, XS)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, np.asarray(w), rtol=1e-10, atol=1e-13, err_msg=name)


# -- the same tape on a hand-written FOR: rows written twice, a differentiable initial buffer

def rewrites(W, buf):
    """Rows i // 2 (each written twice; the first write's cotangent is zero), then a
    clamped row 9 (the last row: three writes in all), into a buffer with a gradient."""
    def body(i, state):
        c, out = state
        c = jitad.tanh(W @ c + 0.1 * i)
        row = jitad.where(i < 6, i // 2, 9)
        return c, jitad.numeric.bind(Op.SCATTER, out, row, jitad.sin(c), add=False)
    c, out = FOR(0, 7, body, (np.ones(3) * 0.2, buf * 1.5))
    return jitad.sum(c) + jitad.sum(out * out * np.arange(15.0).reshape(5, 3))


def test_rewritten_rows_and_initial_buffer():
    check_grads(rewrites, (W, RNG.normal(size=(5, 3))), order=2, modes=("rev", "fwd"))


# -- the tape: no table and no loop state holds the stacked outputs, and the backward loop
#    makes nothing of their size but the view of their cotangent

N, D = 37, 3


def _program(fn):
    xs = RNG.normal(size=(N, D))
    return jitad.trace(lambda W, xs: jitad.grad(fn, argnums=(0, 1))(W, xs), W, xs)


@pytest.mark.parametrize("name", ["forward", "reverse", "ys_twice", "pytrees"])
def test_no_per_step_copy_of_stacked_outputs(name):
    program = _program(CASES[name])
    nodes = list(walk(program.main))
    stacked = lambda t: getattr(t, "shape", ())[:1] == (N,)
    tables = [n for n in nodes if n.op == Op.TABLE and stacked(n.attrs["type"])]
    assert not tables, f"tables of the stacked outputs: {[str(n.attrs['type']) for n in tables]}"
    loops = [n for n in nodes if n.op == Op.FOR]
    assert len(loops) == 2   # the forward loop and the backward loop
    forward, backward = loops
    assert not any(stacked(v.type) for v in backward.outputs), "the backward loop carries a stacked cotangent"
    per_step = [n for n in walk(backward.bodies[0]) if any(stacked(v.type) for v in n.outputs)]
    assert all(n.op == Op.SLOT_GET for n in per_step), [n.op for n in per_step]
    assert any(n.op == Op.SLOT_SET_AT for n in walk(backward.bodies[0]))


def test_reference_interpreter_runs_the_tape():
    from jitad.ir.interpret import interpret
    for fn, buf in ((CASES["ys_twice"], XS), (rewrites, RNG.normal(size=(5, 3)))):
        grad = lambda W, b: jitad.grad(fn, argnums=(0, 1))(W, b)
        for got, want in zip(interpret(jitad.trace(grad, W, buf), [W, buf]), grad(W, buf)):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


@pytest.mark.gpu
def test_scan_gradients_on_cuda():
    cuda = pytest.importorskip("numba.cuda")
    if not cuda.is_available():
        pytest.skip("no CUDA GPU and the simulator is off")
    for fn, buf in ((CASES["forward"], XS), (CASES["ys_apart"], XS), (rewrites, RNG.normal(size=(5, 3)))):
        for got, want in zip(jitad.grad(fn, argnums=(0, 1), device="cuda")(W, buf),
                             jitad.grad(fn, argnums=(0, 1))(W, buf)):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
