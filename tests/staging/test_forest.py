"""vmap over TREE with a batch of trees (`jitad.Forest`): level-by-level batched
execution against one TREE per tree, the reference interpreter and JAX; gradients
(summed, per example, of captured and per-tree values); errors."""
import pickle
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jitad
from jitad.errors import ArgumentError, ImmutableError, StagingError
from jitad.ir.interpret import interpret

H = 4


def _tree(n, seed, rng):
    t = jitad.Tree.random(n, seed=seed)
    return jitad.Tree(t.left, t.right, word=rng.integers(0, 7, n), label=rng.integers(0, 3, n))


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    trees = [_tree(n, s, rng) for s, n in enumerate((1, 4, 0, 9, 5, 13, 2))]   # an empty tree too
    E = rng.standard_normal((7, 5))
    p = {"Wl": rng.standard_normal((5, 3 * H)) * .4, "Wi": rng.standard_normal((2 * H, 5 * H)) * .4,
         "Wo": rng.standard_normal((H, 3)) * .4}
    return trees, E, p


def _leaf(np_, p, e):
    z = e @ p["Wl"]
    c = np_.sigmoid(z[:H]) * np_.tanh(z[2 * H:])
    return np_.sigmoid(z[H:2 * H]) * np_.tanh(c), c


def _internal(np_, concat, p, hl, cl, hr, cr):
    z = concat([hl, hr]) @ p["Wi"]
    i, fl, fr, o = (np_.sigmoid(z[k * H:(k + 1) * H]) for k in range(4))
    c = i * np_.tanh(z[4 * H:]) + fl * cl + fr * cr
    return o * np_.tanh(c), c


def loss(p, E, tree):
    """A TreeLSTM's summed cross-entropy, plus a term in node.index (the index in its own tree)."""
    def combine(node, left, right):
        (hl, cl, ll), (hr, cr, lr) = left, right
        h, c = jitad.IF(node.is_leaf, lambda: _leaf(jitad, p, E[node.word]),
                        lambda: _internal(jitad, jitad.concatenate, p, hl, cl, hr, cr))
        logits = h @ p["Wo"]
        return h, c, ll + lr + (jitad.logsumexp(logits, 0) - logits[node.label]) + 0.01 * node.index
    z = np.zeros(H)
    return jitad.TREE(tree, (z, z, 0.0), combine)[2]


def batched(p, E, forest):
    return jitad.vmap(loss, in_axes=(None, None, 0))(p, E, forest)


def total(p, E, forest):
    return jitad.sum(batched(p, E, forest))


@pytest.mark.parametrize("width", [1, 3, 32])
def test_forest_values_and_gradients_match_one_tree_at_a_time(data, width):
    trees, E, p = data
    forest = jitad.Forest(trees, width=width)
    want = np.array([jitad.jit(loss)(p, E, t) for t in trees])
    np.testing.assert_allclose(jitad.jit(batched)(p, E, forest), want, rtol=1e-12, atol=1e-12)
    grads = [jitad.grad(loss)(p, E, t) for t in trees]
    g = jitad.grad(total)(p, E, forest)
    for k in p:
        np.testing.assert_allclose(g[k], sum(x[k] for x in grads), rtol=1e-10, atol=1e-12)
    per_tree = jitad.jit(jitad.vmap(jitad.grad(loss), in_axes=(None, None, 0)))(p, E, forest)
    for k in p:
        np.testing.assert_allclose(per_tree[k], np.stack([x[k] for x in grads]), rtol=1e-10, atol=1e-12)
    gE = jitad.grad(total, argnums=1)(p, E, forest)
    np.testing.assert_allclose(gE, sum(jitad.grad(loss, argnums=1)(p, E, t) for t in trees), atol=1e-12)


def test_forest_check_grads_and_interpreter(data):
    trees, E, p = data
    forest = jitad.Forest(trees, width=4)
    jitad.testing.check_grads(total, (p, E, forest), modes=("rev", "fwd"))
    program = jitad.trace(lambda p, E, f: batched(p, E, f), p, E, forest)
    args = [p[k] for k in sorted(p)] + [E, forest]
    np.testing.assert_allclose(interpret(program, args)[0], jitad.jit(batched)(p, E, forest), rtol=1e-12)
    gprog = jitad.trace(jitad.grad(total), p, E, forest)
    for got, want in zip(interpret(gprog, args), [jitad.grad(total)(p, E, forest)[k] for k in sorted(p)]):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_forest_against_jax(data):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    jax.config.update("jax_enable_x64", True)
    trees, E, p = data
    ops = types.SimpleNamespace(sigmoid=jax.nn.sigmoid, tanh=jnp.tanh)

    def jax_loss(p, tree):
        def rec(k):
            if tree.left[k] < 0 and tree.right[k] < 0:
                h, c = _leaf(ops, p, E[tree.fields["word"][k]])
                below = 0.0
            else:
                kids = [rec(tree.left[k]) if tree.left[k] >= 0 else (jnp.zeros(H), jnp.zeros(H), 0.0),
                        rec(tree.right[k]) if tree.right[k] >= 0 else (jnp.zeros(H), jnp.zeros(H), 0.0)]
                h, c = _internal(ops, jnp.concatenate, p, kids[0][0], kids[0][1], kids[1][0], kids[1][1])
                below = kids[0][2] + kids[1][2]
            logits = h @ p["Wo"]
            return h, c, below + jax.nn.logsumexp(logits) - logits[tree.fields["label"][k]] + 0.01 * k
        return rec(tree.root)[2] if tree.size else 0.0
    forest = jitad.Forest(trees, width=8)
    want = [float(jax_loss(p, t)) for t in trees]
    np.testing.assert_allclose(jitad.jit(batched)(p, E, forest), want, rtol=1e-10)
    g = jitad.grad(total)(p, E, forest)
    gj = jax.grad(lambda p: sum(jax_loss(p, t) for t in trees))(p)
    for k in p:
        np.testing.assert_allclose(g[k], gj[k], rtol=1e-9, atol=1e-12)


def test_forest_per_tree_init_and_captures():
    """A batched init and a captured value that differs per tree (a scale per tree)."""
    trees = [jitad.Tree.random(n, seed=n, value=np.arange(n) + 1.0) for n in (3, 1, 6)]
    scale = np.array([0.5, 2.0, -1.0])
    init = np.array([1.0, 2.0, 3.0])

    def f(s, i, t):
        return jitad.TREE(t, i, lambda nd, l, r: s * jitad.tanh(l + r * nd.value) + nd.value)
    forest = jitad.Forest(trees, width=2)
    got = jitad.vmap(f, in_axes=(0, 0, 0))(scale, init, forest)
    want = [jitad.jit(f)(s, i, t) for s, i, t in zip(scale, init, trees)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    g = jitad.grad(lambda s, i, fo: jitad.sum(jitad.vmap(f, in_axes=(0, 0, 0))(s, i, fo)), argnums=(0, 1))(
        scale, init, forest)
    for b, t in enumerate(trees):
        gs, gi = jitad.grad(f, argnums=(0, 1))(scale[b], init[b], t)
        np.testing.assert_allclose([g[0][b], g[1][b]], [gs, gi], rtol=1e-10, atol=1e-14)


def test_forest_packing_puts_children_in_earlier_chunks():
    trees = [jitad.Tree.random(n, seed=n) for n in (5, 17, 1, 30)]
    for width in (1, 4, 16):
        f = jitad.Forest(trees, width=width)
        assert f.size % width == 0 and f.size >= sum(t.size for t in trees)
        chunk = np.arange(f.size) // width
        for side in (f.left, f.right):
            has = side >= 0
            assert np.all(chunk[side[has]] < chunk[has])
        assert int(np.sum(f.fields["_real"])) == sum(t.size for t in trees)
    assert pickle.loads(pickle.dumps(f)).size == f.size


def test_forest_errors(data):
    trees, E, p = data
    forest = jitad.Forest(trees[:3])
    with pytest.raises(ArgumentError, match="in_axes None; give it axis 0"):
        jitad.vmap(loss, in_axes=(None, None, None))(p, E, forest)
    with pytest.raises(StagingError, match="map over it with jitad.vmap"):
        jitad.jit(loss)(p, E, forest)
    with pytest.raises(StagingError, match="map over it with jitad.vmap"):
        loss(p, E, forest)
    with pytest.raises(ArgumentError, match="different sizes"):
        jitad.vmap(lambda x, t: loss(p, E, t) * x)(np.ones(4), forest)
    with pytest.raises(ArgumentError, match="cannot be batched"):
        jitad.vmap(loss, in_axes=(None, None, 0))(p, E, trees[0])
    with pytest.raises(ArgumentError, match="non-empty list of jitad.Tree"):
        jitad.Forest([])
    with pytest.raises(ArgumentError, match="width"):
        jitad.Forest(trees, width=0)
    with pytest.raises(ArgumentError, match="use a smaller width"):
        jitad.Forest(trees, width=10 ** 9)
    other = jitad.Tree([-1], [-1], value=[1.0])
    with pytest.raises(ArgumentError, match="same field names"):
        jitad.Forest([trees[0], other])
    with pytest.raises(ImmutableError):
        forest.width = 3
    with pytest.raises(StagingError, match="no field `_real`"):
        jitad.vmap(lambda t: jitad.TREE(t, 0.0, lambda nd, l, r: l + r + nd._real))(forest)
    with pytest.raises(StagingError, match="only be folded by TREE"):
        jitad.vmap(jitad.FUN(lambda t: jitad.TREE(t, 0.0, lambda nd, l, r: l + r + 1.0)))(forest)
    with pytest.raises(ArgumentError, match="argument of the jitted"):
        jitad.jit(lambda x: jitad.vmap(lambda t: jitad.TREE(t, x, lambda nd, l, r: l + r))(forest))(1.0)


def test_tree_types_compiled_in_one_process_load_in_another(tmp_path):
    """Tree type codes are baked into compiled entries and the disk cache shares them
    between processes: a process that met its tree types in another order (other codes,
    before codes were digests) must still accept its trees."""
    import subprocess
    import sys
    code = """
import sys, numpy as np, jitad
first = jitad.Tree([-1], [-1], other=[1.0]) if sys.argv[1] == "b" else None
t = jitad.Tree([1, -1], [-1, -1], value=[1.0, 2.0])
f = jitad.Forest([t, t], width=2)
print(jitad.jit(lambda t: jitad.TREE(t, 0.0, lambda nd, l, r: l + r + nd.value))(t),
      jitad.jit(jitad.vmap(lambda t: jitad.TREE(t, 0.0, lambda nd, l, r: l + r + nd.value)))(f).tolist())
"""
    env = {**__import__("os").environ, "JITAD_CACHE_DIR": str(tmp_path)}
    outs = [subprocess.run([sys.executable, "-c", code, which], env=env, capture_output=True, text=True, timeout=300)
            for which in ("a", "b")]
    for out in outs:
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["3.0", "[3.0,", "3.0]"]


def test_forest_on_the_gpu_backend():
    """The CUDA backend (the simulator here) runs a forest's loops and their gradient."""
    trees = [jitad.Tree.random(n, seed=n, value=np.arange(n) * 0.3 + 1.0) for n in (3, 1, 6)]
    forest = jitad.Forest(trees, width=2)
    w = np.array([[0.5, -0.3], [0.2, 0.4]])

    def f(w, fo):
        g = lambda w, t: jitad.TREE(t, np.ones(2) * 0.1, lambda nd, l, r: jitad.tanh(w @ (l + r) * nd.value))  # noqa: E731
        return jitad.sum(jitad.vmap(g, in_axes=(None, 0))(w, fo))
    np.testing.assert_allclose(jitad.jit(f, device="cuda")(w, forest), jitad.jit(f)(w, forest), rtol=1e-12)
    np.testing.assert_allclose(jitad.grad(f, device="cuda")(w, forest), jitad.grad(f)(w, forest), rtol=1e-10)


def test_forest_second_order(data):
    trees = [jitad.Tree.random(n, seed=n, value=np.arange(n) * 0.3 + 1.0) for n in (3, 1, 6, 4)]
    forest = jitad.Forest(trees, width=2)

    def f(w, fo):
        g = lambda w, t: jitad.TREE(t, np.ones(2) * 0.1, lambda nd, l, r: jitad.tanh(w @ (l + r) * nd.value))  # noqa: E731
        return jitad.sum(jitad.vmap(g, in_axes=(None, 0))(w, fo))
    jitad.testing.check_grads(f, (np.array([[0.5, -0.3], [0.2, 0.4]]), forest), order=2, modes=("rev", "fwd"))


def test_forest_inside_loops_and_branches():
    """A TREE over the forest inside a FOR body (its state batched) and a batched IF branch."""
    trees = [jitad.Tree.random(n, seed=n, value=np.arange(n) * 0.3 + 1.0) for n in (3, 1, 6)]
    forest = jitad.Forest(trees, width=2)

    def f(w, x, t):
        y = jitad.FOR(0, 3, lambda i, s: s + jitad.TREE(t, s, lambda nd, l, r: jitad.tanh(w * (l + r) + nd.value)), x)
        return jitad.IF(x > 0.0, lambda: y * 2.0, lambda: jitad.TREE(t, y, lambda nd, l, r: l + r + nd.value))
    xs = np.array([0.5, -0.2, 0.3])
    got = jitad.vmap(f, in_axes=(None, 0, 0))(0.7, xs, forest)
    np.testing.assert_allclose(got, [jitad.jit(f)(0.7, x, t) for x, t in zip(xs, trees)], rtol=1e-13)
    g = jitad.grad(lambda w, xs, fo: jitad.sum(jitad.vmap(f, in_axes=(None, 0, 0))(w, xs, fo)), argnums=(0, 1))(
        0.7, xs, forest)
    np.testing.assert_allclose(g[0], sum(jitad.grad(f)(0.7, x, t) for x, t in zip(xs, trees)), rtol=1e-12)
    np.testing.assert_allclose(g[1], [jitad.grad(f, argnums=1)(0.7, x, t) for x, t in zip(xs, trees)], rtol=1e-12)


_SUM_PROGRAM = {}


def _sum_program():
    """One compiled forest program per (trees, width), shared by the Hypothesis examples."""
    def f(w, t):
        return jitad.TREE(t, 0.25, lambda nd, l, r: jitad.tanh(w * l - r + nd.value) + 0.1 * nd.index)
    if not _SUM_PROGRAM:
        _SUM_PROGRAM["one"] = (jitad.jit(f), jitad.grad(f))
        _SUM_PROGRAM["f"] = f
    return _SUM_PROGRAM


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(0, 12), min_size=1, max_size=4), width=st.integers(1, 5),
       seed=st.integers(0, 1000))
def test_random_forests_against_one_tree_at_a_time(sizes, width, seed):
    """Random trees (empty ones too) and widths: values and gradients equal those of one
    TREE per tree."""
    rng = np.random.default_rng(seed)
    trees = [jitad.Tree.random(n, seed=seed + k, value=rng.standard_normal(n)) for k, n in enumerate(sizes)]
    prog = _sum_program()
    one, one_grad = prog["one"]
    forest = jitad.Forest(trees, width=width)
    batched = jitad.vmap(prog["f"], in_axes=(None, 0))
    np.testing.assert_allclose(batched(0.7, forest), [one(0.7, t) for t in trees], rtol=1e-12, atol=1e-14)
    g = jitad.grad(lambda w, fo: jitad.sum(batched(w, fo)))(0.7, forest)
    np.testing.assert_allclose(g, sum(one_grad(0.7, t) for t in trees), rtol=1e-10, atol=1e-13)
