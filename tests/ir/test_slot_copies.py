"""A fused loop copying one tensor slot whole into others (a sum's cotangent handed to each
of its addends) makes no copies: the other slots' reads read the first slot, and a loop
left with nothing to store is dropped; not when the first slot is written while the
copies are read."""
import numpy as np
import pytest

import jitad
from jitad.ir.graph import Graph, Node, Var
from jitad.ir.ops import Op
from jitad.ir.peephole import forward_slot_copies
from jitad.ir.types import RefType, Type


def _program(write_src_after, also_compute=False):
    """src += x; a fused loop storing src's elements into dst1 and dst2 [and 2x into out];
    [src += x]; reads of dst1 and dst2."""
    t = Type("f64", (3, 4))
    ref = RefType("f64", (3, 4))
    x, src, d1, d2, out = Var(t), Var(ref), Var(ref), Var(ref), Var(ref)
    ps, p1, p2, po, e, e2 = Var(ref), Var(ref), Var(ref), Var(ref), Var(Type("f64")), Var(Type("f64"))
    body = [Node(Op.SLOT_GET, (ps,), (e,)), Node(Op.SLOT_ADD, (p1, e), (), {"store": True}),
            Node(Op.SLOT_ADD, (p2, e), (), {"store": True})]
    params, inputs = [ps, p1, p2], (src, d1, d2)
    if also_compute:
        body += [Node(Op.ADD, (e, e), (e2,)), Node(Op.SLOT_ADD, (po, e2), (), {"store": True})]
        params, inputs = params + [po], inputs + (out,)
    nodes = [Node(Op.SLOT, (), (src,), {"type": t}), Node(Op.SLOT_ADD, (src, x), ())] + \
        [Node(Op.SLOT, (), (v,), {"type": t, "uninit": True}) for v in (d1, d2, out)] + \
        [Node(Op.FUSED, inputs, (), {"shape": (3, 4)}, (Graph(params, body, []),))]
    if write_src_after:
        nodes.append(Node(Op.SLOT_ADD, (src, x), ()))
    y1, y2, y3 = Var(t), Var(t), Var(t)
    nodes += [Node(Op.SLOT_GET, (d1,), (y1,)), Node(Op.SLOT_GET, (d2,), (y2,)), Node(Op.SLOT_GET, (out,), (y3,))]
    return nodes, [y1, y2, y3], src


@pytest.mark.parametrize("also_compute", [False, True])
def test_copies_in_a_fused_loop_become_reads_of_the_source(also_compute):
    nodes, outputs, src = _program(False, also_compute)
    out = forward_slot_copies(nodes, outputs)
    fused = [n for n in out if n.op == Op.FUSED]
    assert len(fused) == also_compute   # a loop with only copies goes; one that computes stays
    if also_compute:
        assert [n.op for n in fused[0].bodies[0].nodes] == [Op.SLOT_GET, Op.ADD, Op.SLOT_ADD]
    assert [n.inputs for n in out if n.op == Op.SLOT_GET][:2] == [(src,), (src,)]
    assert sum(n.op == Op.SLOT for n in out) == 2   # src and out


def test_no_forwarding_when_the_source_is_written_while_the_copies_are_read():
    nodes, outputs, _ = _program(True)
    assert forward_slot_copies(nodes, outputs) == nodes


def test_a_cells_sum_cotangent_is_not_copied_and_the_gradients_are_right():
    r = np.random.default_rng(2)
    V, H, B = 6, 8, 5
    E, W, b, h0 = r.normal(size=(V, H)), r.normal(size=(H, H)) * 0.3, r.normal(size=H), r.normal(size=(B, H))
    idx = r.integers(0, V, (3, B))

    def loss(E, W, b):
        h, total = h0, 0.0
        for t in range(3):
            h = jitad.tanh(jitad.one_hot(idx[t], V) @ E + h @ W + b)
            total = total + jitad.sum(h * h)
        return total
    f = jitad.jit(jitad.grad(loss, argnums=(0, 1, 2)))
    got = f(E, W, b)
    for n in f._last.program.main.nodes:   # no loop left that only copies a slot
        assert not (n.op == Op.FUSED and {m.op for m in n.bodies[0].nodes} == {Op.SLOT_GET, Op.SLOT_ADD})
    jitad.testing.check_grads(loss, (E, W, b))
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def jloss(E, W, b):
        h, total = h0, 0.0
        for t in range(3):
            h = jnp.tanh(E[idx[t]] + h @ W + b)
            total = total + jnp.sum(h * h)
        return total
    for g, want in zip(got, jax.grad(jloss, argnums=(0, 1, 2))(E, W, b)):
        np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-12)
