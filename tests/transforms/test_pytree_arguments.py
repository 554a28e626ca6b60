"""Pytrees: namedtuples, registered classes and dataclasses, None, tree_util."""
import collections
import dataclasses

import numpy as np
import pytest

import jitad
from jitad.testing import check_grads
from jitad.tree_util import (register_dataclass, register_pytree_node, tree_flatten, tree_leaves, tree_map,
                             tree_structure, tree_unflatten)

Params = collections.namedtuple("Params", "w b")


class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b


register_pytree_node(Pair, lambda p: ((p.a, p.b), "pair"), lambda aux, ch: Pair(*ch))


@register_dataclass
@dataclasses.dataclass
class Layer:
    w: object
    b: object


@dataclasses.dataclass
class Scaled:
    x: object
    scale: float


register_dataclass(Scaled, data_fields=["x"], meta_fields=["scale"])


def loss(p, x):
    return jitad.sum(jitad.tanh(p.w @ x + p.b) ** 2)


X = np.linspace(-1, 1, 3)
W = np.arange(6.0).reshape(2, 3) / 10


def test_flatten_unflatten_roundtrip_and_none():
    tree = {"b": (1.0, None), "a": [Params(2.0, 3.0), Pair(4.0, 5.0)], "c": Layer(6.0, 7.0)}
    leaves, td = tree_flatten(tree)
    assert leaves == [2.0, 3.0, 4.0, 5.0, 1.0, 6.0, 7.0]
    back = tree_unflatten(td, [x * 10 for x in leaves])
    assert back["a"][0] == Params(20.0, 30.0) and isinstance(back["a"][1], Pair) and back["a"][1].b == 50.0
    assert back["b"] == (10.0, None) and back["c"] == Layer(60.0, 70.0)
    assert td == tree_structure(back) and td.num_leaves == 7 and td.unflatten(leaves)["b"] == (1.0, None)
    assert str(tree_structure(Params(1.0, None))) == "Params(w=*, b=None)"
    assert tree_structure(Scaled(1.0, 2.0)) != tree_structure(Scaled(1.0, 3.0))   # meta is structure
    assert tree_leaves(Scaled(np.ones(2), 2.0))[0].shape == (2,)


def test_tree_map_several_trees_and_mismatch():
    a, b = Params(1.0, (2.0, None)), Params(10.0, (20.0, None))
    assert tree_map(lambda x, y: x + y, a, b) == Params(11.0, (22.0, None))
    with pytest.raises(jitad.ArgumentError, match="structure"):
        tree_map(lambda x, y: x + y, a, (1.0, 2.0))
    with pytest.raises(jitad.ArgumentError, match="leaves"):
        tree_unflatten(tree_structure(a), [1.0])


@pytest.mark.parametrize("make", [lambda w, b: Params(w, b), lambda w, b: Layer(w, b), lambda w, b: Pair(w, b)],
                         ids=["namedtuple", "dataclass", "registered"])
def test_grad_returns_the_users_type(make):
    if make(0, 0).__class__ is Pair:
        lossp = lambda p, x: jitad.sum(jitad.tanh(p.a @ x + p.b) ** 2)
    else:
        lossp = loss
    p = make(W, np.array([0.1, -0.2]))
    g = jitad.grad(lossp)(p, X)
    assert type(g) is type(p)
    gw, gb = (g.a, g.b) if isinstance(g, Pair) else (g.w, g.b)
    h = W @ X + p.b if not isinstance(p, Pair) else W @ X + p.b
    d = 2 * np.tanh(h) * (1 - np.tanh(h) ** 2)
    np.testing.assert_allclose(gb, d, rtol=1e-12)
    np.testing.assert_allclose(gw, np.outer(d, X), rtol=1e-12)
    v, g2 = jitad.value_and_grad(lossp)(p, X)
    assert v == pytest.approx(np.sum(np.tanh(h) ** 2)) and type(g2) is type(p)


def test_jit_returns_namedtuple_and_optimizer_keeps_it():
    f = jitad.jit(lambda p: Params(p.w * 2.0, None))
    out = f(Params(np.ones(2), 1.0))
    assert type(out) is Params and out.b is None and list(out.w) == [2.0, 2.0]
    p = Params(W, np.zeros(2))
    opt = jitad.optim.sgd(0.1)
    state = opt.init(p)
    new, state = opt.update(p, jitad.grad(loss)(p, X), state)
    assert type(new) is Params
    with pytest.raises(jitad.ArgumentError):
        opt.update(p, (W, np.zeros(2)), state)


def test_jvp_vjp_and_check_grads_on_namedtuples():
    p = Params(W, np.array([0.1, -0.2]))
    check_grads(loss, (p, X), order=2, modes=("rev", "fwd"))
    out, pullback = jitad.vjp(lambda p: Params(p.w * p.b[0], p.b), p)
    assert type(out) is Params
    (ct,) = pullback(Params(np.ones((2, 3)), np.zeros(2)))
    assert type(ct) is Params and ct.b[0] == pytest.approx(W.sum())
    _, t = jitad.jvp(loss, (p, X), (Params(np.ones((2, 3)), np.zeros(2)), np.zeros(3)))
    assert t == pytest.approx(np.sum(jitad.grad(loss)(p, X).w))


def test_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    p = Params(W, np.array([0.1, -0.2]))
    g = jitad.grad(loss)(p, X)
    gj = jax.grad(lambda p, x: jnp.sum(jnp.tanh(p.w @ x + p.b) ** 2))(p, X)
    assert type(gj) is Params
    np.testing.assert_allclose(g.w, gj.w, rtol=1e-12)
    np.testing.assert_allclose(g.b, gj.b, rtol=1e-12)
    assert tree_flatten({"b": 1, "a": (2, None)})[0] == jax.tree_util.tree_flatten({"b": 1, "a": (2, None)})[0]
