"""A tensor stored whole into a slot is made in the slot (no copy) when nothing reads the
slot's old content from its producer on; not when something may (a `slot_get` of it, a
value made from one, the producer itself); and reverse-mode programs built of such stores
still give JAX's gradients."""
import numpy as np
import pytest

import jitad
from jitad.ir.graph import Graph, Node, Var
from jitad.ir.ops import Op
from jitad.ir.types import RefType, Type
from jitad.lower.llvm import _table_stores

T, R = Type("f32", (4, 6)), RefType("f32", (4, 6))


def _graph(before=(), between=(), value_from_reshape=False):
    """slot s; [before]; v = exp(x) (or reshape of it); [between]; slot_set s v; out = s."""
    x, s, v, u, out = Var(T), Var(R), Var(T), Var(Type("f32", (24,))), Var(T)
    nodes = [Node(Op.SLOT, (), (s,), {"type": T, "uninit": True}), *before(s, x)]
    if value_from_reshape:
        nodes += [Node(Op.EXP, (x,), (u,)), Node(Op.RESHAPE, (u,), (v,), {"shape": (4, 6)})]
    else:
        nodes += [Node(Op.EXP, (x,), (v,))]
    nodes += [*between(s, x), Node(Op.SLOT_SET, (s, v), ()), Node(Op.SLOT_GET, (s,), (out,))]
    return Graph([x], nodes, [out]), (u if value_from_reshape else v)


def _read(s, x):
    """old = slot_get s; y = -old (a value made from the slot's buffer, read later)."""
    old, y = Var(T), Var(T)
    return [Node(Op.SLOT_GET, (s,), (old,)), Node(Op.NEG, (old,), (y,))]


def _nothing(s, x):
    return []


@pytest.mark.parametrize("reshaped", [False, True])
def test_a_value_only_stored_is_made_in_the_slot(reshaped):
    graph, made = _graph(_nothing, _nothing, reshaped)
    stores = _table_stores(graph)
    assert list(stores) == [made] and stores[made].op == Op.SLOT_SET


def test_not_when_the_old_content_is_read_after_the_producer():
    graph, _ = _graph(_nothing, _read)
    assert _table_stores(graph) == {}


def test_not_when_a_view_of_the_old_content_taken_before_is_read_after():
    flat = Var(Type("f32", (24,)))

    def view_before(s, x):
        old = Var(T)
        return [Node(Op.SLOT_GET, (s,), (old,)), Node(Op.RESHAPE, (old,), (flat,), {"shape": (24,)})]

    def use_between(s, x):
        return [Node(Op.NEG, (flat,), (Var(flat.type),))]
    graph, _ = _graph(view_before, use_between)
    assert _table_stores(graph) == {}


def test_a_read_finished_before_the_producer_does_not_stop_it():
    graph, made = _graph(_read, _nothing)
    assert list(_table_stores(graph)) == [made]


def test_not_when_the_value_is_also_used_elsewhere():
    x, s, v, w = Var(T), Var(R), Var(T), Var(T)
    graph = Graph([x], [Node(Op.SLOT, (), (s,), {"type": T, "uninit": True}), Node(Op.EXP, (x,), (v,)),
                        Node(Op.SLOT_SET, (s, v), ()), Node(Op.NEG, (v,), (w,))], [w])
    assert _table_stores(graph) == {}


def test_attention_gradients_with_stores_in_place_agree_with_jax():
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 8, 4)).astype(np.float32) for _ in range(3))

    def attention(m, q, k, v):
        att = m.nn.softmax((q @ k.transpose(0, 1, 3, 2)) * 0.5, axis=-1)
        return m.numpy.sum(m.numpy.tanh(att @ v) * v)
    got = jitad.jit(jitad.grad(lambda *a: attention(jitad, *a), argnums=(0, 1, 2)))(q, k, v)
    want = jax.grad(lambda *a: attention(jax, *a), argnums=(0, 1, 2))(q, k, v)
    for g, w in zip(got, want):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-4, atol=1e-5)
