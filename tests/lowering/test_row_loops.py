"""Row loops (`jitad/ir/rows.py`): fused loops of one row shape that read each other's row
sums and maxima run row by row. Values and gradients against JAX (x64) and NumPy for the
normalizations over the last axis, with odd row lengths, in float32 and float64, under
`grad` and `vmap`; and the programs where rows are not apart stay whole loops."""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.ir import rows
from jitad.ir.graph import walk
from jitad.ir.ops import Op
from jitad.ir.passes import run_passes

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)


@pytest.fixture(autouse=True)
def small_rows(monkeypatch):
    monkeypatch.setattr(rows, "MIN_BYTES", 0)   # the small arrays of these tests take row loops too


def row_loops(fn, *args):
    return sum(n.op == Op.ROW_LOOPS for n in walk(run_passes(jitad.trace(fn, *args)).main))


def layer_norm(np_, x, g, b):
    mu = np_.mean(x, axis=-1, keepdims=True)
    var = np_.var(x, axis=-1, keepdims=True)
    return (x - mu) / np_.sqrt(var + 1e-5) * g + b


def attention_weights(np_, nn, x):
    t = x.shape[-1]
    return nn.softmax(np_.where(np_.tril(np_.ones((t, t), dtype=bool)), x * 0.5, -np_.inf), axis=-1)


def losses(m, nn, special):
    return {
        "softmax": lambda x, w: m.sum(attention_weights(m, nn, x) * m.sin(x) * w),
        "log_softmax": lambda x, w: m.sum(nn.log_softmax(x, axis=-1) * w),
        "logsumexp": lambda x, w: m.sum(special.logsumexp(x * w, axis=-1) ** 2),
        "layer_norm": lambda x, w: m.sum(m.tanh(layer_norm(m, x, w, 1.0 - w))),
    }


JITAD = losses(jnp, jitad.nn, jitad.scipy.special)
JAX = losses(jax.numpy, jax.nn, jax.scipy.special)


def data(shape, dtype, seed=0):
    r = np.random.default_rng(seed)
    return r.normal(size=shape).astype(dtype), r.normal(size=shape[-1]).astype(dtype)


@pytest.mark.parametrize("name,shape,dtype", [
    ("softmax", (2, 2, 19, 19), np.float32), ("softmax", (3, 37, 37), np.float64),
    ("log_softmax", (3, 37, 37), np.float64), ("logsumexp", (2, 2, 19, 19), np.float32),
    ("layer_norm", (2, 2, 19, 19), np.float32), ("layer_norm", (3, 37, 37), np.float64)])
def test_values_and_gradients_match_jax(name, shape, dtype):
    x, w = data(shape, dtype)
    f = jitad.jit(jitad.value_and_grad(JITAD[name], argnums=(0, 1)))
    assert row_loops(jitad.value_and_grad(JITAD[name], argnums=(0, 1)), x, w) >= 1
    (v, (gx, gw)), (jv, (jgx, jgw)) = f(x, w), jax.value_and_grad(JAX[name], argnums=(0, 1))(x, w)
    tol = dict(rtol=1e-11, atol=1e-11) if dtype == np.float64 else dict(rtol=2e-4, atol=2e-5)
    for got, want in ((v, jv), (gx, jgx), (gw, jgw)):
        assert np.asarray(got).dtype == dtype
        np.testing.assert_allclose(got, want, **tol)


@pytest.mark.parametrize("name", ["softmax", "layer_norm"])
def test_the_same_numbers_as_whole_loops(name, monkeypatch):
    """Each element goes through the same operations in the same order: bit for bit."""
    x, w = data((4, 33, 33), np.float32, seed=1)
    got = jitad.jit(jitad.grad(JITAD[name], argnums=(0, 1)))(x, w)
    monkeypatch.setattr(rows, "ROW_LOOPS", False)
    assert row_loops(jitad.grad(JITAD[name], argnums=(0, 1)), x, w) == 0
    want = jitad.jit(jitad.grad(JITAD[name], argnums=(0, 1)))(x, w)   # (its program prints otherwise: compiled apart)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_check_grads_and_vmap():
    x, w = data((5, 21), np.float64, seed=2)
    jitad.testing.check_grads(lambda x: JITAD["layer_norm"](x, w), (x,), order=2)
    per_row = jitad.jit(jitad.vmap(jitad.grad(lambda x, w: JITAD["softmax"](x[None], w)), in_axes=(0, None)))
    want = jax.vmap(jax.grad(lambda x, w: JAX["softmax"](x[None], w)), in_axes=(0, None))(x, w)
    np.testing.assert_allclose(per_row(x, w), want, rtol=1e-12, atol=1e-13)


def test_rows_that_are_not_apart_stay_whole_loops():
    """A row sum read broadcast along rows (element (i, j) reads row j's sum), and a column
    sum read by a later loop, are complete only after every row: those loops run whole."""
    x = np.random.default_rng(3).normal(size=(24, 24))

    def f(x):
        s = jnp.sum(jnp.exp(x), axis=-1)                  # (24,): row sums ...
        y = jnp.exp(x) / s                                # ... read along each row's columns
        c = jnp.sum(y * x, axis=0)                        # a column sum ...
        return jnp.tanh(y - c) / jnp.max(y, axis=-1, keepdims=True)   # ... read by every row
    e = np.exp(x)
    y = e / e.sum(axis=-1)
    want = np.tanh(y - (y * x).sum(axis=0)) / y.max(axis=-1, keepdims=True)
    np.testing.assert_allclose(jitad.jit(f)(x), want, rtol=1e-13)


def test_nan_and_infinite_rows(monkeypatch):
    x = np.random.default_rng(4).normal(size=(6, 40))
    x[1, 3], x[2, :], x[3, 5] = np.nan, -np.inf, -np.inf
    softmax = lambda x: jitad.nn.softmax(x, axis=-1)   # noqa: E731
    assert row_loops(softmax, x) == 1
    got = jitad.jit(softmax)(x)
    np.testing.assert_allclose(got, jax.nn.softmax(x, axis=-1), rtol=1e-14, atol=0, equal_nan=True)
    x[4, 7] = np.inf   # inf - inf: the whole row is NaN, as JAX's
    got = jitad.jit(softmax)(x)
    assert np.isnan(got[4]).all()
    np.testing.assert_allclose(got, jax.nn.softmax(x, axis=-1), rtol=1e-14, atol=0, equal_nan=True)
    monkeypatch.setattr(rows, "ROW_LOOPS", False)
    np.testing.assert_array_equal(got, jitad.jit(softmax)(x))


def scratch_rows(fn, *args):
    """The slots that became one row of scratch in `fn`'s row loops."""
    return sum(b.op == Op.SLOT for n in walk(run_passes(jitad.trace(fn, *args)).main) if n.op == Op.ROW_LOOPS
               for b in n.bodies[0].nodes)


@pytest.mark.parametrize("shape,dtype", [((3, 2, 19, 19), np.float32), ((2, 37, 37), np.float64)])
def test_slots_only_a_row_loop_uses_are_a_row_of_scratch(shape, dtype, monkeypatch):
    """Softmax's backward stores the exp's cotangent and reads it back in the next pass of the
    same row: a row of scratch on the stack holds it, with the numbers of the whole slot (but
    for the order LLVM adds a row sum in, which may vectorize otherwise)."""
    x, w = data(shape, dtype, seed=6)
    loss = jitad.grad(JITAD["softmax"], argnums=(0, 1))
    assert scratch_rows(loss, x, w) >= 1
    got = jitad.jit(loss)(x, w)
    monkeypatch.setattr(rows, "ROW_SCRATCH", False)
    assert scratch_rows(loss, x, w) == 0
    tol = 1e-13 if dtype == np.float64 else 1e-5
    for a, b in zip(got, jitad.jit(loss)(x, w)):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_the_switch_and_the_size_bound(monkeypatch):
    x, w = data((4, 32, 32), np.float32)
    loss = jitad.grad(JITAD["softmax"])
    assert row_loops(loss, x, w) == 1   # forward and backward: one loop over the rows
    monkeypatch.setattr(rows, "MIN_BYTES", x.nbytes + 1)
    assert row_loops(loss, x, w) == 0
    monkeypatch.setattr(rows, "MIN_BYTES", 0)
    monkeypatch.setattr(rows, "ROW_LOOPS", False)
    assert row_loops(loss, x, w) == 0


def test_a_softmax_in_a_while_loop_s_gradient():
    """Reverse mode runs a WHILE as a recursion, a frame per iteration: the row loops in its
    body keep their arena scopes (dropped, each frame would hold them while deeper ones run)."""
    x, w = data((8, 40), np.float64, seed=5)

    def loss(m, loop, x):
        def body(s):
            return s[0] + 1, m.nn.softmax(s[1] * 1.5, axis=-1) + s[1]
        return m.numpy.sum(loop(lambda s: s[0] < 3, body, (0, x))[1] * w)
    got = jitad.jit(jitad.grad(lambda x: loss(jitad, jitad.lax.while_loop, x)))(x)
    fori = lambda cond, body, init: jax.lax.fori_loop(0, 3, lambda i, s: body(s), init)   # noqa: E731
    np.testing.assert_allclose(got, jax.grad(lambda x: loss(jax, fori, x))(x), rtol=1e-12, atol=1e-13)


def test_column_sums_inside_row_loops_add_up_over_every_row():
    """A batch normalization's gradient (statistics over the rows, axis 0): the row loops'
    members take column sums, which must add up over the rows run one at a time (they had
    kept a block of columns on the stack, filled and copied only by a whole loop's run)."""
    def loss(np_):
        def f(a):
            mu = np_.mean(a, axis=0, keepdims=True)
            return np_.sum(((a - mu) / (np_.std(a, axis=0, keepdims=True) + 1)) ** 2)
        return f
    a = np.random.default_rng(3).normal(size=(40, 300))
    grad = jitad.jit(jitad.grad(loss(jnp)))
    assert row_loops(jitad.grad(loss(jnp)), a) >= 1
    np.testing.assert_allclose(grad(a), jax.grad(loss(jax.numpy))(a), rtol=1e-10, atol=1e-12)


def test_row_scratch_inside_a_scan_s_gradient():
    """A softmax in a scan body, differentiated: the row loops in the forward and backward
    bodies (their slots made there, or captured from the enclosing graph) against JAX."""
    x, w = data((6, 3, 40), np.float64, seed=7)

    def loss(m, scan, x):
        def body(c, xs):
            c = m.nn.softmax(c * xs[None, :] + 0.5, axis=-1) * c
            return c, m.numpy.sum(c)
        return scan(body, x[0], x[1:, 0, :])[1].sum() + m.numpy.sum(w * 0.0)
    got = jitad.jit(jitad.grad(lambda x: loss(jitad, jitad.lax.scan, x)))(x)
    want = jax.grad(lambda x: loss(jax, jax.lax.scan, x))(x)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
