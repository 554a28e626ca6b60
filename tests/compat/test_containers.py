"""Containers keep their type and order through `jit`, `grad`, `vmap` and
`interop.to_jax`, as in JAX: an OrderedDict in insertion order, a defaultdict (sorted
keys) with its factory, namedtuples as their class; compared with JAX (x64) on the
same programs."""
import collections

import numpy as np
import pytest

import jitad

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)

P = collections.namedtuple("P", "w b")


def ordered():
    return collections.OrderedDict([("z", np.arange(2.0)), ("a", 1.5), ("m", P(np.ones(2), 0.5))])


def defaulted():
    return collections.defaultdict(list, {"z": np.arange(2.0), "a": 1.5})


def assert_same(ours, theirs):
    """Same container types, key order, factories and values, all the way down."""
    if isinstance(theirs, (dict, tuple, list)):
        assert type(ours) is type(theirs), (type(ours), type(theirs))
    if isinstance(theirs, dict):
        assert list(ours) == list(theirs)
        if isinstance(theirs, collections.defaultdict):
            assert ours.default_factory is theirs.default_factory
        for k in theirs:
            assert_same(ours[k], theirs[k])
    elif isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_same(a, b)
    else:
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-12)


def scale(tree):
    return jitad.tree.map(lambda x: 2.0 * x, tree)


def jscale(tree):
    return jax.tree.map(lambda x: 2.0 * x, tree)


@pytest.mark.parametrize("make", [ordered, defaulted, lambda: P(np.ones(2), 3.0)], ids=["ordered", "default", "nt"])
def test_jit_keeps_container_types_and_order(make):
    assert_same(jitad.jit(scale)(make()), jax.jit(jscale)(make()))
    leaves, td = jitad.tree_util.tree_flatten(make())
    jleaves, _ = jax.tree_util.tree_flatten(make())
    for a, b in zip(leaves, jleaves):   # leaves in the same order
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_built_containers_come_back_as_built():
    def build(x):
        return (collections.OrderedDict([("b", x), ("a", 2.0 * x)]), collections.defaultdict(int, {"y": x, "x": x}),
                P(x, x + 1.0))
    assert_same(jitad.jit(build)(1.0), jax.jit(build)(1.0))
    assert_same(jitad.vmap(build)(np.arange(3.0)), jax.vmap(build)(np.arange(3.0)))


def test_grad_of_ordered_and_default_dicts():
    def loss(d):
        return jitad.sum(d["z"] ** 2) * d["a"]

    def jloss(d):
        return jnp.sum(d["z"] ** 2) * d["a"]
    for make in (ordered, defaulted):
        assert_same(jitad.grad(loss)(make()), jax.grad(jloss)(make()))
        v, g = jitad.value_and_grad(loss)(make())
        jv, jg = jax.value_and_grad(jloss)(make())
        assert_same((v, g), (jv, jg))
    params = P(np.array([1.0, -2.0]), 0.5)
    assert_same(jitad.grad(lambda p: jitad.sum(jitad.tanh(p.w + p.b)))(params),
                jax.grad(lambda p: jnp.sum(jnp.tanh(p.w + p.b)))(params))


def test_vmap_over_ordered_dict_with_matching_axes():
    batch = collections.OrderedDict([("z", np.arange(6.0).reshape(3, 2)), ("a", np.arange(3.0))])
    axes = collections.OrderedDict([("z", 0), ("a", 0)])
    assert_same(jitad.vmap(scale, in_axes=(axes,))(batch), jax.vmap(jscale, in_axes=(axes,))(batch))
    assert_same(jitad.vmap(scale)(batch), jax.vmap(jscale)(batch))


def test_insertion_order_is_part_of_the_structure():
    a = collections.OrderedDict([("x", 1.0), ("y", 2.0)])
    b = collections.OrderedDict([("y", 2.0), ("x", 1.0)])
    ours = jitad.tree_util.tree_structure(a) == jitad.tree_util.tree_structure(b)
    theirs = jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    assert ours == theirs is False
    f = jitad.jit(lambda d: d["x"] - d["y"])
    assert f(a) == f(b) == -1.0   # each order its own signature, same values


def test_to_jax_keeps_result_containers():
    pytest.importorskip("jax.ffi")

    def f(d):
        return (P(d["z"] * 2.0, d["a"] + 1.0), collections.OrderedDict([("q", d["a"]), ("p", d["z"])]))

    def jf(d):
        return (P(d["z"] * 2.0, d["a"] + 1.0), collections.OrderedDict([("q", d["a"]), ("p", d["z"])]))
    wrapped = jitad.interop.to_jax(f)
    d = collections.OrderedDict([("z", np.arange(2.0)), ("a", np.float64(1.5))])
    assert_same(wrapped(d), jf(d))
    assert_same(jax.jit(wrapped)(d), jax.jit(jf)(d))
    g = jax.grad(lambda d: jnp.sum(wrapped(d)[0].w) * wrapped(d)[1]["q"])(d)
    jg = jax.grad(lambda d: jnp.sum(jf(d)[0].w) * jf(d)[1]["q"])(d)
    assert_same(g, jg)
