"""Per-example gradients as batched GEMMs (`ir.peephole.batched_products`) and the batching
rules of `bmm`, `cumsum`, `scatter` and `linalg`, against JAX and NumPy."""
import itertools

import numpy as np
import pytest

import jitad
from jitad import numeric as N
from jitad.ir.graph import walk
from jitad.ir.ops import Op
from jitad.ir.passes import run_passes

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)

rng = np.random.default_rng(1)
B = 6


from .test_vmap import close  # noqa: E402  (leaves' shapes and values against JAX's)


def mlp(N, W1, b1, W2, b2, x):   # bench/tensors.py's mlp
    h = N.maximum(W1 @ x + b1, 0.0)
    z = W2 @ h + b2
    e = N.exp(z - N.max(z))
    return N.sum(e / N.sum(e) * np.arange(float(z.shape[0])))


def params(n_in=5, n_hid=7, n_out=4):
    return (rng.standard_normal((n_hid, n_in)), rng.standard_normal(n_hid), rng.standard_normal((n_out, n_hid)),
            rng.standard_normal(n_out))


def nodes(program):
    graphs = [program.main] + [f.body for f in program.funs]
    return [n for g in graphs for n in walk(g)]


def test_per_example_gradients_match_jax_and_are_gemms():
    p, X = params(), rng.standard_normal((B, 5))
    loss = lambda p, x: mlp(jitad, *p, x)   # noqa: E731
    per_example = jitad.vmap(jitad.grad(loss), in_axes=(None, 0))
    want = jax.vmap(jax.grad(lambda p, x: mlp(jnp, *p, x)), in_axes=(None, 0))(p, X)
    close(per_example(p, X), want)
    program = run_passes(jitad.trace(per_example, p, X))
    ops = [n.op for n in nodes(program)]
    # no lane copies of the weights, no per-lane products: GEMMs with the shared weights
    copies = [n for n in nodes(program) if n.op == Op.BROADCAST and n.outputs[0].type.shape[1:] in
              {w.shape for w in p if w.ndim == 2}]
    assert not copies and Op.BMM not in ops
    assert ops.count(Op.MATMUL) == 3   # the two forward products, one transposed (the first needs none)


def test_per_example_gradients_of_a_loss_with_labels_and_a_loop():
    """Also through a FOR (the weights captured by its bodies, forward and reverse) and with
    two batched arguments."""
    def loss(N, FOR):
        def f(p, x, y):
            W, b = p
            h = FOR(0, 3, lambda i, h: N.tanh(W @ h + b), x)
            return N.sum((h - y) ** 2)
        return f
    p = (rng.standard_normal((4, 4)) * 0.5, rng.standard_normal(4))
    X, Y = rng.standard_normal((B, 4)), rng.standard_normal((B, 4))
    per_example = jitad.vmap(jitad.grad(loss(jitad, jitad.FOR)), in_axes=(None, 0, 0))
    got = per_example(p, X, Y)
    program = run_passes(jitad.trace(per_example, p, X, Y))
    assert not [n for n in nodes(program) if n.op == Op.BMM or n.op == Op.BROADCAST
                and n.outputs[0].type.shape == (B, 4, 4)]   # the loop bodies read the shared weights

    def jax_for(lo, hi, body, init):
        return jax.lax.fori_loop(lo, hi, body, init)
    want = jax.vmap(jax.grad(loss(jnp, jax_for)), in_axes=(None, 0, 0))(p, X, Y)
    close(got, want)


@pytest.mark.parametrize("side,ta,tb,shape", [
    (side, ta, tb, shape) for side in ("left", "right") for ta, tb in itertools.product((False, True), repeat=2)
    for shape in ((3, 4, 1), (1, 4, 3), (3, 1, 2), (3, 4, 2))])
def test_products_with_a_broadcast_matrix(side, ta, tb, shape):
    """Every transpose and vector case of a `bmm` against a broadcast matrix, and of one over a
    single term, computes what NumPy does, rewritten or not."""
    m, k, n = shape
    a = rng.standard_normal((B,) + ((k, m) if ta else (m, k)))
    b = rng.standard_normal((B,) + ((n, k) if tb else (k, n)))
    w = a[0] if side == "left" else b[0]

    def f(w, x):
        wb = N.broadcast_to(w, (B,) + w.shape)
        return N.bind(Op.BMM, *((wb, x) if side == "left" else (x, wb)), ta=ta, tb=tb)
    x = b if side == "left" else a
    sw = lambda t, f: np.swapaxes(t, 1, 2) if f else t   # noqa: E731
    aa, bb = (np.broadcast_to(w, a.shape), b) if side == "left" else (a, np.broadcast_to(w, b.shape))
    want = np.matmul(sw(aa, ta), sw(bb, tb))
    close(jitad.jit(f)(w, x), want)
    ops = [n.op for n in nodes(run_passes(jitad.trace(f, w, x)))]
    rewritten = (m == 1 or not ta) if side == "right" else (n == 1 or m == 1 and tb)
    assert (Op.BMM not in ops) == (rewritten or k == 1)


# -- batching rules against jax.vmap ---------------------------------------------------

def _jitad_cumsum_rev(x):
    return N.bind(Op.CUMSUM, x, axis=1, reverse=True)


RULES = [   # (name, function of a numpy namespace, args, in_axes)
    ("bmm both", lambda N, a, b: N.matmul(a, b), (rng.random((B, 2, 3, 4)), rng.random((B, 2, 4, 5))), 0),
    ("bmm left", lambda N, a, b: N.matmul(a, b), (rng.random((B, 2, 3, 4)), rng.random((2, 4, 5))), (0, None)),
    ("bmm right", lambda N, a, b: N.matmul(a, b), (rng.random((2, 3, 4)), rng.random((B, 2, 4, 5))), (None, 0)),
    ("cumsum", lambda N, x: N.cumsum(x, axis=1), (rng.random((B, 3, 4)),), 0),
    ("cumsum axis 0", lambda N, x: N.cumsum(x, axis=0), (rng.random((3, B)),), 1),
    ("scatter set", lambda N, x, i, v: x.at[i].set(v), (rng.random((B, 5, 2)), np.array([4, 0, 2]),
                                                        rng.random((B, 3, 2))), (0, None, 0)),
    ("scatter add batched index", lambda N, x, i, v: (x if hasattr(x, "at") else jnp.asarray(x)).at[i].add(v),
     (rng.random((5, 2)), rng.integers(0, 5, (B, 4)), rng.random((4, 2))), (None, 0, None)),
    ("scatter scalar index", lambda N, x, i, v: x.at[i].set(v), (rng.random((B, 5)), np.arange(B) % 5, 7.0),
     (0, 0, None)),
    ("solve", lambda N, a, b: N.linalg.solve(a, b), (rng.random((B, 3, 3)) + 3 * np.eye(3), rng.random((3, 2))),
     (0, None)),
    ("cholesky", lambda N, a: N.linalg.cholesky(a @ N.swapaxes(a, -1, -2) + 3 * np.eye(3)),
     (rng.random((B, 3, 3)),), 0),
]


@pytest.mark.parametrize("name,fn,args,in_axes", RULES, ids=[r[0] for r in RULES])
def test_batching_rules_match_jax(name, fn, args, in_axes):
    got = jitad.vmap(lambda *a: fn(jitad, *a), in_axes=in_axes)(*args)
    close(got, jax.vmap(lambda *a: fn(jnp, *a), in_axes=in_axes)(*args))
    program = jitad.trace(jitad.vmap(lambda *a: fn(jitad, *a), in_axes=in_axes), *args)
    ops = [n.op for n in nodes(program) if n.op in (Op.BMM, Op.CUMSUM, Op.SCATTER, Op.LINALG)]
    assert 0 < len(ops) < B   # batched ops, not the per-lane fallback (B copies)


def test_scatter_out_of_range_and_repeated_indices_match_a_loop():
    """jitad clamps indices (as `index` reads them) and the last write to a row wins."""
    x, v = rng.random((B, 4)), rng.random((B, 3))
    idx = np.array([[9, -1, 0], [2, 2, 2], [-7, 3, 3], [0, 1, 2], [1, 1, 0], [3, 3, -2]])
    f = lambda x, i, v: x.at[i].set(v)   # noqa: E731
    g = lambda x, i, v: x.at[i].add(v)   # noqa: E731
    for h in (f, g):
        got = jitad.vmap(h)(x, idx, v)
        one = jitad.jit(h)
        close(got, np.stack([one(x[j], idx[j], v[j]) for j in range(B)]))


def test_gradients_through_the_new_rules():
    """vmap(grad) through bmm, cumsum (its VJP is a reverse cumsum) and scatter."""
    def loss(N, w, x):
        y = N.cumsum(N.matmul(N.broadcast_to(w, (2,) + w.shape), x), axis=1)
        return N.sum(N.sin(y.at[0].set(y[1] * 2.0)))
    w, X = rng.random((3, 4)), rng.random((B, 2, 4, 2))
    got = jitad.vmap(jitad.grad(lambda w, x: loss(jitad, w, x)), in_axes=(None, 0))(w, X)
    close(got, jax.vmap(jax.grad(lambda w, x: loss(jnp, w, x)), in_axes=(None, 0))(w, X))
    x = rng.random((B, 2, 3))
    close(jitad.vmap(_jitad_cumsum_rev)(x), np.flip(np.cumsum(np.flip(x, 2), 2), 2))


def test_sort_and_argsort_batch_without_a_loop():
    x = np.random.default_rng(0).standard_normal((4, 3, 5))
    f = jitad.jit(jitad.vmap(lambda a: jitad.sort(a) * jitad.argsort(a, axis=-1)))
    np.testing.assert_allclose(f(x), jax.vmap(lambda a: jnp.sort(a) * jnp.argsort(a))(x))
    assert f.ir.count("sort %") == 2 and "for" not in f.ir
    g = jitad.vmap(jitad.grad(lambda a: jitad.sum(jitad.sort(a)[..., -1] * jitad.top_k(a, 2)[0][..., 0])))(x)
    w = jax.vmap(jax.grad(lambda a: jnp.sum(jnp.sort(a)[..., -1] * jax.lax.top_k(a, 2)[0][..., 0])))(x)
    np.testing.assert_allclose(g, w)
