"""Tensors through control flow, a small TreeLSTM, optimizers and in-graph training."""
import numpy as np
import pytest

import jitad
from jitad import FOR, FUN, IF, TREE, WHILE
from jitad.testing import check_grads

rng = np.random.default_rng(0)
X3 = rng.standard_normal(3)
W33 = rng.standard_normal((3, 3)) * 0.5


@FUN(out=jitad.ShapeDtype((3,), "f64"))
def _iterate(h, n, W):
    return IF(n <= 0, lambda: h, lambda: _iterate(jitad.tanh(W @ h), n - 1, W))


CONTROL = {
    "for": lambda W, x: jitad.sum(FOR(0, 5, lambda i, h: jitad.tanh(W @ h + x), x)),
    "while": lambda W, x: jitad.sum(WHILE(lambda s: s[0] < 4, lambda s: (s[0] + 1, jitad.tanh(W @ s[1])), (0, x))[1]),
    "if": lambda W, x: jitad.sum(IF(jitad.sum(x) > 0, lambda: W @ x, lambda: x * 2.0)),
    "fun": lambda W, x: jitad.sum(_iterate(x, 6, W)),
    "while_data_dependent": lambda W, x: jitad.sum(WHILE(
        lambda h: jitad.sum(h * h) > 0.1, lambda h: 0.5 * jitad.tanh(W @ h), x)),
}


@pytest.mark.parametrize("name", sorted(CONTROL))
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_tensor_control_flow_gradients(name, sign):
    f = CONTROL[name]
    assert np.isfinite(jitad.jit(f)(W33, sign * X3))
    check_grads(f, (W33, sign * X3))


def test_forward_loop_memory_does_not_grow_with_trip_count():
    # 10**6 iterations over a 1000-element state would need 8 GB without per-iteration release
    f = jitad.jit(lambda x, n: FOR(0, n, lambda i, h: h * 0.5 + 1.0, x))
    out = f(np.zeros(1000), 10 ** 6)
    np.testing.assert_allclose(out, 2.0)


# -- a small binary TreeLSTM against a NumPy implementation -----------------------
D, H, C, V = 4, 5, 3, 7


def _params(seed=1):
    r = np.random.default_rng(seed)
    return {"E": r.standard_normal((V, D)) * 0.5, "W": r.standard_normal((5 * H, D + 2 * H)) * 0.3,
            "b": r.standard_normal(5 * H) * 0.1, "U": r.standard_normal((C, H)) * 0.3}


def _tree(seed, n):
    r = np.random.default_rng(seed)
    return jitad.Tree.random(n, seed=seed, word=r.integers(0, V, n), label=r.integers(0, C, n))


def treelstm_loss(p, tree):
    """Binary TreeLSTM (leaf children are zeros), cross-entropy at every node, summed."""
    def combine(node, left, right):
        (hl, cl, ll), (hr, cr, lr) = left, right
        z = p["W"] @ jitad.concatenate([p["E"][node.word], hl, hr]) + p["b"]
        i, fl, fr, o, u = (z[k * H:(k + 1) * H] for k in range(5))
        c = jitad.sigmoid(i) * jitad.tanh(u) + jitad.sigmoid(fl) * cl + jitad.sigmoid(fr) * cr
        h = jitad.sigmoid(o) * jitad.tanh(c)
        logits = p["U"] @ h
        loss = jitad.logsumexp(logits, 0) - jitad.sum(logits * jitad.one_hot(node.label, C))
        return h, c, ll + lr + loss
    return TREE(tree, (np.zeros(H), np.zeros(H), 0.0), combine)[2]


def _treelstm_numpy(p, tree):
    sig = lambda v: 1 / (1 + np.exp(-v))

    def rec(k):
        if k < 0:
            return np.zeros(H), np.zeros(H), 0.0
        (hl, cl, ll), (hr, cr, lr) = rec(tree.left[k]), rec(tree.right[k])
        z = p["W"] @ np.concatenate([p["E"][tree.fields["word"][k]], hl, hr]) + p["b"]
        i, fl, fr, o, u = (z[j * H:(j + 1) * H] for j in range(5))
        c = sig(i) * np.tanh(u) + sig(fl) * cl + sig(fr) * cr
        h = sig(o) * np.tanh(c)
        logits = p["U"] @ h
        m = logits.max()
        loss = m + np.log(np.exp(logits - m).sum()) - logits[tree.fields["label"][k]]
        return h, c, ll + lr + loss
    return rec(tree.root)[2]


def test_treelstm_matches_numpy_and_gradients_check():
    p = _params()
    f = jitad.jit(treelstm_loss)
    for seed, n in [(0, 1), (1, 5), (2, 30), (3, 200)]:
        tree = _tree(seed, n)
        assert f(p, tree) == pytest.approx(_treelstm_numpy(p, tree), rel=1e-12)
    assert len(f._compiled) == 1   # one compiled function for every tree
    check_grads(treelstm_loss, (p, _tree(4, 12)))


def test_embedding_gradient_is_sparse_rows():
    p = _params()
    tree = _tree(5, 6)
    g = jitad.grad(treelstm_loss)(p, tree)
    unused = sorted(set(range(V)) - set(tree.fields["word"]))
    assert unused and np.all(g["E"][unused] == 0.0)


# -- optimizers and in-graph training --------------------------------------------
def _regression_loss(p, x, y):
    return jitad.mean((jitad.tanh(x @ p["w"]) * p["a"] + p["b"] - y) ** 2)


@pytest.mark.parametrize("make", [lambda: jitad.optim.sgd(0.1), lambda: jitad.optim.sgd(0.1, momentum=0.9),
                                  lambda: jitad.optim.adagrad(0.1), lambda: jitad.optim.adam(0.05)],
                         ids=["sgd", "momentum", "adagrad", "adam"])
def test_in_graph_training_matches_python_loop(make):
    opt = make()
    X, Y = rng.standard_normal((8, 3)), rng.standard_normal(8)
    p0 = {"w": rng.standard_normal(3), "a": 1.0, "b": 0.0}
    step = jitad.jit_grad(_regression_loss)
    p, s = p0, opt.init(p0)
    for _ in range(25):
        _, g = step(p, X, Y)
        p, s = opt.update(p, jitad.optim.clip_by_value(g, 5.0), s)

    def train(p, X, Y):
        def body(i, carry):
            params, state = carry
            g = jitad.grad(_regression_loss)(params, X, Y)
            return opt.update(params, jitad.optim.clip_by_value(g, 5.0), state)
        return FOR(0, 25, body, (p, opt.init(p)))[0]

    q = jitad.jit(train)(p0, X, Y)
    for k in p:
        np.testing.assert_allclose(q[k], p[k], rtol=1e-10, atol=1e-12)


def test_float32_inputs_compute_and_return_float32():
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal(3).astype(np.float32)
    out = jitad.jit(lambda x, w: jitad.tanh(x @ w) * 2.0)(x, w)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.tanh(x @ w) * 2.0, rtol=1e-5)
    g = jitad.grad(lambda w, x: jitad.sum(jitad.tanh(x @ w)))(w, x)
    assert g.dtype == np.float32


def test_loop_weight_gradients_are_batched_through_branches():
    """Products with captured weights inside FOR (and in IF branches there) get their weight
    gradients from one GEMM after the backward loop (`table_gemm_add`): same derivatives."""
    from jitad.numeric import matmul_t
    r = np.random.default_rng(7)
    W, U, x = r.standard_normal((4, 4)) * 0.5, r.standard_normal((4, 4)) * 0.5, r.standard_normal((2, 4))

    def f(W, U, x):
        def body(i, h):
            return IF(i % 2 == 0, lambda: jitad.tanh(h @ W), lambda: jitad.tanh(matmul_t(h, U, tb=True) + h))
        col = jitad.reshape(FOR(0, 5, body, x)[0], (4, 1))
        return jitad.sum(FOR(0, 3, lambda i, c: jitad.tanh(W @ c), col) ** 2)
    g = jitad.grad(f, argnums=(0, 1, 2))
    g(W, U, x)
    assert g.ir.count("table_gemm_add") == 3   # h @ W, h @ U.T (in the branches), W @ c
    check_grads(f, (W, U, x), order=2, modes=("fwd", "rev"))


def test_loop_tables_hold_only_what_the_backward_pass_reads():
    """Reverse mode through FOR keeps the state entering each iteration and the products
    and transcendental values in tables. Here the backward pass needs h's states (W's
    weight gradient, read in place by `table_gemm_add`) and tanh's values; c passes
    through unchanged and the product h @ W is never read back: neither is stored, and
    only the cotangent factor of the weight gradient is written backward."""
    r = np.random.default_rng(3)
    h0, c0, W = r.standard_normal((2, 3)), r.standard_normal((2, 3)), r.standard_normal((3, 3)) * 0.5

    def f(h0, c0, W):
        h, c = FOR(0, 6, lambda i, s: (jitad.tanh(s[0] @ W), s[1]), (h0, c0))
        return jitad.sum(h * c)
    g = jitad.grad(f, argnums=(0, 1, 2))
    g(h0, c0, W)
    assert g.ir.count("= table") - g.ir.count("= table_get") == 3   # h states, tanh values, cotangents
    assert g.ir.count("table_set") == 3                              # two forward, one backward
    check_grads(f, (h0, c0, W), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("name", ["exp", "tanh", "sigmoid"])
def test_vectorized_math_is_accurate_over_the_whole_range(name):
    """Tensor exp/tanh/sigmoid are jitad's own vectorized code (jitad.lower.vmath), not
    libm: within 4 ulp of NumPy everywhere, IEEE edge values included."""
    r = np.random.default_rng(5)
    x = np.concatenate([r.uniform(-3, 3, 4000), r.uniform(-0.7, 0.7, 2000), r.uniform(-745, 709, 2000),
                        10.0 ** r.uniform(-300, 2.5, 2000) * r.choice([-1, 1], 2000),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 19.06, 40.0, 709.7, 710.0, -744.4, -746.0]])
    want = {"exp": np.exp, "tanh": np.tanh, "sigmoid": lambda v: 1 / (1 + np.exp(-v))}[name]
    with np.errstate(over="ignore"):
        want = want(x)
    got = jitad.jit(getattr(jitad, name))(x)
    normal = np.isfinite(want) & (np.abs(want) >= np.finfo(float).tiny)
    assert np.max(np.abs(got[normal] - want[normal]) / np.spacing(np.abs(want[normal]))) <= 4
    np.testing.assert_allclose(got[~normal], want[~normal], rtol=0, atol=1e-320)   # inf, nan, 0, subnormal
    np.testing.assert_array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0]))


@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_one_hot_times_a_matrix_is_a_row_gather(dtype):
    """`one_hot(labels, n) @ W` picks rows of W (a zero row for a label outside [0, n)):
    staged as a gather, its gradient a scatter-add; values and derivatives are the dense
    product's."""
    from jitad.numeric import matmul_t
    r = np.random.default_rng(11)
    W = r.standard_normal((5, 3)).astype(np.float32 if dtype == "f32" else np.float64)
    labels, C = np.array([0, 4, 2, 7, -1, 4]), r.standard_normal((6, 3))
    f = lambda W, lab: jitad.sum(jitad.tanh(jitad.one_hot(lab, 5, dtype) @ W) * C)
    dense = lambda W, lab: jitad.sum(jitad.tanh(matmul_t(jitad.one_hot(lab, 5, dtype), W)) * C)
    g = jitad.grad(f)
    got = g(W, labels)
    from jitad.ir.graph import walk   # (the fused loop reading the rows holds the gather)
    assert any(n.op.name == "gather" for n in walk(g._latest("ir").program.main)) and "matmul" not in g.ir
    np.testing.assert_array_equal(got, jitad.grad(dense)(W, labels))
    assert jitad.jit(f)(W, labels) == pytest.approx(jitad.jit(dense)(W, labels), rel=1e-15)   # (sum orders differ)
    assert f(W, labels) == pytest.approx(jitad.jit(f)(W, labels), rel=1e-6)   # eager: NumPy's product
    if dtype == "f64":
        check_grads(lambda W: f(W, labels), (W,), order=2, modes=("fwd", "rev"))
    mixed = jitad.jit(lambda W, lab: jitad.one_hot(lab, 5, "f32") @ W)   # promotes: the dense product
    np.testing.assert_allclose(mixed(W.astype(np.float64), labels),
                               np.eye(5, dtype=np.float32)[np.clip(labels, 0, 4)] * ((labels >= 0) & (labels < 5))[:, None] @ W)
    assert "matmul" in mixed.ir
    ints = jitad.jit(lambda lab: jitad.one_hot(lab, 5, dtype) @ np.arange(15).reshape(5, 3))   # promotes too
    assert ints(labels).dtype.kind == "f" and "matmul" in ints.ir


def test_a_stop_gradient_maximum_costs_nothing_backward():
    """logsumexp/softmax subtract max(stop_gradient(x)): reverse mode carries no adjoint
    through it (no pass computing the maximum's mask and cotangent), and the compiled
    code has no stop_gradient copy left."""
    r = np.random.default_rng(2)
    x, labels = r.standard_normal((6, 5)), r.integers(0, 5, 6)
    g = jitad.grad(lambda x: jitad.cross_entropy(x, labels) + jitad.sum(jitad.softmax(x * x, 0)[0]))
    got = g(x)
    assert "stop_gradient" not in g.ir
    # forward: 2 max and the sums backward reads (the loss's own sums are dead under grad); backward: 3 sums
    # (row sums and maxima may be taken inside the fused loops making their operands)
    def ops(graph):
        return [m for n in graph.nodes for m in [n.op.name] + [o for b in n.bodies for o in ops(b)]]
    taken = ops(g._latest("ir").program.main)
    assert taken.count("max") == 2 and taken.count("sum") == 4
    check_grads(lambda x: jitad.cross_entropy(x, labels) + jitad.sum(jitad.softmax(x * x, 0)[0]), (x,),
                order=2, modes=("fwd", "rev"))
    assert np.all(np.isfinite(got))


def test_an_adjoint_set_once_is_read_in_place():
    """The cotangent of a reshape is the only contribution to its input's adjoint: the
    matrix product's backward reads that cotangent itself (no slot, no copy)."""
    r = np.random.default_rng(4)
    x, W = r.standard_normal((2, 3)), r.standard_normal((3, 4))

    def f(x, W):
        return jitad.sum(jitad.tanh(jitad.reshape(x @ W, (8,))) ** 2)
    g = jitad.grad(f, argnums=(0, 1))
    g(x, W)
    assert g.ir.count("slot_set") == 0   # the loss value's slot is dead under grad
    # three tensor slots (x's and W's adjoints, the reshape's cotangent) and their reads:
    # no slot for a copy of the product's adjoint, and the scalar slots are SSA values
    assert g.ir.count("= slot") == 6
    check_grads(f, (x, W), order=2, modes=("fwd", "rev"))


def test_tiling_pool_windows_are_a_reshape():
    """max/avg pooling with stride k reads its k×k windows through a reshape: no gather
    forward and no scatter-add backward (overlapping windows still gather)."""
    x = np.random.default_rng(6).standard_normal((2, 3, 7, 9))
    for pool in (jitad.max_pool2d, jitad.avg_pool2d):
        g = jitad.grad(lambda x: jitad.sum(pool(x, 2) ** 2))
        g(x)
        assert "gather" not in g.ir and "scatter" not in g.ir
        check_grads(lambda x: jitad.sum(pool(x, 2) ** 2), (x,), order=2, modes=("fwd", "rev"))
    g = jitad.grad(lambda x: jitad.sum(jitad.max_pool2d(x, 3, stride=2)))
    g(x)
    assert "gather" in g.ir


def _conv_reference(x, w):
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))
    return np.einsum("ncyxij,ocij->noyx", windows, w)


@pytest.mark.parametrize("xs, ws", [
    ((2, 3, 7, 9), (4, 3, 3, 2)),      # rows of the output per tap, rows in pieces 4 + 2 + 1
    ((1, 2, 6, 45), (19, 2, 3, 3)),    # a row wider than one register group (32 + 8 + 4 + 1), 19 channels
    ((2, 2, 12, 13), (3, 2, 9, 10)),   # narrow rows, wide kernel: multiply-adds along kernel rows
])
def test_conv2d_is_a_direct_loop_nest(xs, ws):
    """Stride-1 conv2d is one `conv2d` primitive (no im2col gather of the image); its cotangents are
    convolutions too. Values against NumPy in f64, f32 and i64; gradients to second order."""
    r = np.random.default_rng(7)
    x, w = r.standard_normal(xs), r.standard_normal(ws)
    f = jitad.jit(lambda x, w: jitad.conv2d(x, w))
    np.testing.assert_allclose(f(x, w), _conv_reference(x, w), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(f(x.astype(np.float32), w.astype(np.float32)), _conv_reference(x, w),
                               rtol=1e-4, atol=1e-4)
    xi, wi = r.integers(-5, 5, xs), r.integers(-5, 5, ws)
    np.testing.assert_array_equal(f(xi, wi), _conv_reference(xi, wi))
    g = jitad.grad(lambda x, w: jitad.sum(jitad.tanh(jitad.conv2d(x, w))), argnums=(0, 1))
    g(x, w)
    assert g.ir.count("= gather") == 1 and g.ir.count("conv2d") == 3   # the gather flips the kernel
    check_grads(lambda x, w: jitad.sum(jitad.tanh(jitad.conv2d(x, w) * 0.3)), (x, w), order=2, modes=("fwd", "rev"))


def test_conv2d_rejects_booleans():
    x = np.ones((1, 1, 3, 3), bool)
    with pytest.raises(jitad.errors.ArgumentError, match="booleans"):
        jitad.jit(lambda x: jitad.conv2d(x, x[:, :, :2, :2]))(x)


@pytest.mark.parametrize("m, k, n", [(20, 50, 50), (7, 13, 45), (1, 300, 75), (2, 39, 130), (17, 9, 30)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_small_products_in_register_tiles(m, k, n, dtype):
    """Small untransposed products run in vector-register tiles (row blocks, rows in
    pieces of 8/4/2/1 lanes; one or two rows stream through b instead; BLAS otherwise):
    values, and a backward pass that adds g @ W into an adjoint already holding another
    contribution."""
    r = np.random.default_rng(8)
    x, W1, W2 = (r.standard_normal(s).astype(dtype) for s in [(m, k), (n, k), (k, n)])
    tol = 1e-12 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(jitad.jit(lambda a, b: a @ b)(x, W2), x @ W2, rtol=tol, atol=tol * k)

    def f(x, W1, W2):
        return jitad.sum(jitad.tanh(jitad.numeric.matmul_t(x, W1, ta=False, tb=True) * 0.3 + x @ W2 * 0.2))
    if dtype == np.float64:
        check_grads(f, (x, W1, W2), order=1, modes=("rev",))


def test_result_arrays_are_reused_only_once_nobody_holds_them():
    """A compiled function keeps its last result arrays and reuses one when the caller
    dropped every reference to it (no allocation, no page faults in a training loop);
    an array still referenced, directly or through a view, is never overwritten, nor
    one whose shape or flags were changed."""
    f = jitad.jit(lambda x: x * 2.0)
    x = np.arange(6.0)
    buffers = set()
    for _ in range(10):
        r = f(x)
        buffers.add(r.ctypes.data)
        del r
    assert len(buffers) == 1
    kept = [f(x + k) for k in range(4)]
    view = f(x + 10)[1:]
    for k in range(3):
        f(x + 20 + k)
    for k, r in enumerate(kept):
        np.testing.assert_array_equal(r, (x + k) * 2)
    np.testing.assert_array_equal(view, ((x + 10) * 2)[1:])
    r = f(x)
    r.shape = (2, 3)
    del r
    assert f(x).shape == (6,)
    r = f(x)
    r.flags.writeable = False
    del r
    out = f(x + 1)
    assert out.flags.writeable
    np.testing.assert_array_equal(out, (x + 1) * 2)


def test_large_result_arrays_are_reused_up_to_the_pool_limit():
    """A result of tens of MB (a Jacobian's) is reused too, up to POOL_MAX_BYTES: a fresh
    one would fault in its pages on every call."""
    from jitad.lower.entry import POOL_MAX_BYTES
    assert POOL_MAX_BYTES >= 48 << 20   # GradBench's ht and ba Jacobians: 34 and 45 MB
    f = jitad.jit(lambda x: x * 2.0)
    for n, pooled in ((POOL_MAX_BYTES // 8, True), (POOL_MAX_BYTES // 8 + 1, False)):
        x = np.ones(n)
        r = f(x)
        first = r.ctypes.data
        del r
        block = np.ones(n)   # takes the freed memory, unless the pool kept the array
        r = f(x)
        assert (r.ctypes.data == first) == pooled and r[-1] == 2.0 and block[-1] == 1.0
        del r, block


def test_values_inside_if_branches_of_a_loop_are_stored_not_recomputed():
    """Reverse mode through FOR/TREE keeps the products and transcendental values of the
    body's IF branches per iteration too (a TreeLSTM's leaf and internal-node products):
    the backward pass reads them instead of computing the branch's product again."""
    r = np.random.default_rng(9)
    x, W = r.standard_normal((2, 3)), r.standard_normal((3, 3))

    def f(x, W):
        def body(i, s):
            return jitad.IF(i % 2 == 0, lambda: jitad.tanh(s @ W), lambda: jitad.exp(s * 0.1) - 1.0)
        return jitad.sum(FOR(0, 5, body, x))
    g = jitad.grad(f, argnums=(0, 1))
    g(x, W)
    assert g.ir.count("= matmul[") == 1 and g.ir.count("= tanh") == 1   # forward only
    check_grads(f, (x, W), order=2, modes=("fwd", "rev"))


def test_input_cotangents_in_a_loop_use_a_transpose_made_once():
    """In a loop body's x @ W with W captured, the backward iteration's g @ W^T reads a
    transpose of W made once before the backward loop: an untransposed product per
    iteration (the transposed one runs on BLAS's slower path)."""
    r = np.random.default_rng(10)
    h0, W = r.standard_normal((4, 5)), r.standard_normal((5, 5)) * 0.5

    def f(h0, W):
        return jitad.sum(FOR(0, 6, lambda i, h: jitad.tanh(h @ W), h0))
    g = jitad.grad(f, argnums=(0, 1))
    g(h0, W)
    assert "tb=True" not in g.ir and g.ir.count("= transpose") == 1
    check_grads(f, (h0, W), order=2, modes=("fwd", "rev"))
