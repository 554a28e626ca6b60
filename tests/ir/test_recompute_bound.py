"""A cheap fused result is recomputed in the later loops reading it only while its cone
reads at most `RECOMPUTE_STREAMS` whole tensors: a residual stream's running sum is stored,
so a deep stack's loops stay the same size (and its layers can share their kernels)."""
import numpy as np

import jitad
from jitad.ir import peephole
from jitad.ir.ops import Op

DEPTH = 4


def _stack(x, ws):
    """A residual stack: x <- x + tanh(norm(x)) @ w per layer, each layer's residual sum read
    by the next layer's row statistics and by its own addition."""
    for w in ws:
        mu = jitad.mean(x, axis=-1, keepdims=True)
        h = jitad.tanh((x - mu) * 0.5) @ w
        x = x + h
    return jitad.sum(x * x)


def _np_stack(x, ws):
    for w in ws:
        x = x + np.tanh((x - x.mean(-1, keepdims=True)) * 0.5) @ w
    return np.sum(x * x)


def _inputs():
    r = np.random.default_rng(3)
    return r.normal(size=(6, 8)), [r.normal(0, 0.3, (8, 8)) for _ in range(DEPTH)]


def test_a_residual_stack_is_right_against_numpy_and_jax():
    x, ws = _inputs()
    f = jitad.jit(jitad.value_and_grad(_stack, argnums=(0, 1)))
    value, (gx, gws) = f(x, ws)
    np.testing.assert_allclose(value, _np_stack(x, ws), rtol=1e-12)
    jitad.testing.check_grads(_stack, (x, ws), order=1, modes=("rev",))
    try:
        import jax
    except ImportError:
        return
    jax.config.update("jax_enable_x64", True)

    def jax_stack(x, ws):
        for w in ws:
            x = x + jax.numpy.tanh((x - x.mean(-1, keepdims=True)) * 0.5) @ w
        return jax.numpy.sum(x * x)
    jv, (jgx, jgws) = jax.value_and_grad(jax_stack, argnums=(0, 1))(x, ws)
    np.testing.assert_allclose(gx, jgx, rtol=1e-11, atol=1e-13)
    for got, want in zip(gws, jgws):
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-13)


def _chain(depth):
    """Fused loops y_k = y_(k-1) + a_k (a residual stream), then one loop reading tanh(y)."""
    from jitad.ir.graph import Graph, Node, Var
    from jitad.ir.types import Type
    t, e = Type("f64", (3, 4)), Type("f64")

    def loop(op, *inputs):
        params, out, inner = [Var(t) for _ in inputs], Var(t), Var(e)
        return Node(Op.FUSED, inputs, (out,), {"shape": (3, 4)}, (Graph(params, [Node(op, tuple(params), (inner,))],
                                                                           [inner]),))
    y, nodes = Var(t), []
    for _ in range(depth):
        nodes.append(loop(Op.ADD, y, Var(t)))
        y = nodes[-1].outputs[0]
    nodes.append(loop(Op.TANH, y))
    return nodes, nodes[-1].outputs[0]


def test_a_running_sum_is_recomputed_in_its_readers_only_up_to_the_bound(monkeypatch):
    """Unbounded, the last loop reads every addend of the chain; bounded, no loop reads more
    than the bound plus the one tensor it adds, however deep the chain."""
    from jitad.ir.peephole import recompute_cheap
    widest = {}
    for bound in (10**6, 2):
        monkeypatch.setattr(peephole, "RECOMPUTE_STREAMS", bound)
        for depth in (3, 6):
            nodes, out = _chain(depth)
            loops = [n for n in recompute_cheap(nodes, [out]) if n.op == Op.FUSED]
            assert loops[-1].outputs == (out,)
            widest[bound, depth] = max(len(set(n.inputs)) for n in loops)
    assert widest[10**6, 3] == 4 and widest[10**6, 6] == 7   # every addend and the start
    assert widest[2, 3] == widest[2, 6] == 3
