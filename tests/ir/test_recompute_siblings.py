"""A cheap result of a fused loop computed from another result the loop stores anyway (an
expensive one: `1 + t` beside `t = tanh(u)`) is recomputed from the stored one in the loops
reading it, not stored too: the tanh-GELU's forward loop stores `tanh`, not `1 + tanh` as
well; values and gradients against NumPy, JAX and `check_grads`."""
import numpy as np
import pytest

import jitad
from jitad.ir import peephole
from jitad.ir.graph import Graph, Node, Var
from jitad.ir.ops import Op
from jitad.ir.types import Type

C = np.sqrt(2 / np.pi)


def _gelu_loss(m):
    return lambda x, w: m.numpy.sum(m.nn.gelu(x @ w, approximate=True) ** 2)


def _np_gelu_grads(x, w):
    u = x @ w
    t = np.tanh(C * (u + 0.044715 * u ** 3))
    y = 0.5 * u * (1 + t)
    dy = 0.5 * (1 + t) + 0.5 * u * (1 - t * t) * C * (1 + 3 * 0.044715 * u * u)
    g = 2 * y * dy
    return np.sum(y * y), g @ w.T, x.T @ g


def _stored(f, x, w):
    """How many (12, 16) tensors the fused loops of `f`'s program store."""
    g = jitad.jit(f)
    out = g(x, w)
    return sum(line.split("=")[0].count("f64[12,16]") for line in str(g.ir).splitlines() if "= fused" in line), out


def test_the_gelu_forward_stores_tanh_once_and_gradients_agree(monkeypatch):
    rng = np.random.default_rng(5)
    x, w = rng.normal(size=(12, 8)), rng.normal(0, 0.5, (8, 16))
    f = jitad.value_and_grad(_gelu_loss(jitad), argnums=(0, 1))
    stored, (value, (gx, gw)) = _stored(f, x, w)
    monkeypatch.setattr(peephole, "_stored_siblings", lambda producer, inner: frozenset())
    assert _stored(jitad.value_and_grad(_gelu_loss(jitad), argnums=(0, 1)), x, w)[0] == stored + 2
    # (stored: tanh; recomputed from it where read: 1 + tanh and the activation, which only loops read)
    want = _np_gelu_grads(x, w)
    np.testing.assert_allclose(value, want[0], rtol=1e-12)
    np.testing.assert_allclose(gx, want[1], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gw, want[2], rtol=1e-10, atol=1e-12)
    jitad.testing.check_grads(_gelu_loss(jitad), (x, w), order=1, modes=("rev",))
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    for got, ref in zip((gx, gw), jax.grad(_gelu_loss(jax), argnums=(0, 1))(x, w)):
        np.testing.assert_allclose(got, np.asarray(ref), rtol=1e-10, atol=1e-12)


def _producer_and_reader():
    """A loop storing t = tanh(u), s = 1 + t and a cheap r = 2u, and one loop reading all three."""
    t, e = Type("f64", (3, 4)), Type("f64")
    u, one, two = Var(t), Var(e), Var(e)
    pu, p1, p2, th, s, r = Var(t), Var(e), Var(e), Var(e), Var(e), Var(e)
    body = Graph([pu, p1, p2], [Node(Op.TANH, (pu,), (th,)), Node(Op.ADD, (p1, th), (s,)),
                                Node(Op.MUL, (pu, p2), (r,))], [th, s, r])
    producer = Node(Op.FUSED, (u, one, two), (Var(t), Var(t), Var(t)), {"shape": (3, 4)}, (body,))
    qs, a, b = [Var(t) for _ in range(3)], Var(e), Var(e)
    reader_body = Graph(qs, [Node(Op.MUL, (qs[0], qs[1]), (a,)), Node(Op.ADD, (a, qs[2]), (b,))], [b])
    reader = Node(Op.FUSED, producer.outputs, (Var(t),), {"shape": (3, 4)}, (reader_body,))
    return [producer, reader], reader.outputs[0]


def test_only_results_of_cheap_ops_on_a_stored_expensive_one_are_recomputed():
    nodes, out = _producer_and_reader()
    producer, reader = peephole.recompute_cheap(nodes, [out])
    assert producer.outputs == (nodes[0].outputs[0],)   # tanh stays; 1 + tanh and 2u are recomputed
    (body,) = reader.bodies
    assert sorted(n.op.name for n in body.nodes) == ["add", "add", "mul", "mul"]
    assert set(reader.inputs) == {nodes[0].outputs[0], *nodes[0].inputs}
