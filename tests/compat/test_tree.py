"""`jitad.tree`, `jitad.tree_util` and `jitad.flatten_util` against `jax.tree`,
`jax.tree_util` and `jax.flatten_util`: the same leaves, structures (printed alike),
paths and results on the same trees. Pure Python: nothing compiles."""
import collections
import dataclasses
import functools
import operator

import numpy as np
import pytest

import jitad
from jitad import tree_util as tu

jax = pytest.importorskip("jax")
jtu = jax.tree_util
jax.config.update("jax_enable_x64", True)

P = collections.namedtuple("P", "x y")
TREES = [
    1.0, None, (), [], {}, (1.0,), [1.0, (2.0, None)], {"b": 1.0, "a": (2.0, [3.0])},
    P(1.0, [2.0, {"k": 3.0}]), collections.OrderedDict([("z", 1.0), ("a", 2.0)]),
    collections.defaultdict(list, {"b": 1.0, "a": [2.0]}), {1: 1.0, 0: (None, 2.0)},
    (np.ones(2), np.float32(3.0), True, 4),
]


def same_leaves(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert type(x) is type(y) or np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("tree", TREES, ids=lambda t: type(t).__name__ + str(len(jtu.tree_leaves(t))))
def test_flatten_unflatten_structure_like_jax(tree):
    leaves, td = tu.tree_flatten(tree)
    jleaves, jtd = jtu.tree_flatten(tree)
    same_leaves(leaves, jleaves)
    assert td.num_leaves == jtd.num_leaves
    rebuilt, jrebuilt = tu.tree_unflatten(td, leaves), jtu.tree_unflatten(jtd, jleaves)
    assert type(rebuilt) is type(jrebuilt) and repr(rebuilt) == repr(jrebuilt)
    if isinstance(tree, collections.defaultdict):
        assert rebuilt.default_factory is jrebuilt.default_factory
    if not isinstance(tree, tuple) or not hasattr(tree, "_fields"):   # (JAX prints namedtuples as custom nodes)
        assert str(td) == str(jtd).removeprefix("PyTreeDef(").removesuffix(")") or str(td) == str(jtd)
    assert [str(p) for p, _ in tu.tree_flatten_with_path(tree)[0]] == \
        [str(p) for p, _ in jtu.tree_flatten_with_path(tree)[0]]
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(tree)] == \
        [jtu.keystr(p) for p, _ in jtu.tree_leaves_with_path(tree)]
    assert tu.tree_flatten_with_path(tree)[1] == td
    assert tu.treedef_is_leaf(td) == jtu.treedef_is_leaf(jtd)
    assert len(tu.treedef_children(td)) == len(jtu.treedef_children(jtd))


def test_map_with_is_leaf_rest_and_paths():
    tree = {"a": (1.0, 2.0), "b": [3.0]}
    assert jitad.tree.map(lambda x, y: x + y, tree, tree) == jax.tree.map(lambda x, y: x + y, tree, tree)
    is_pair = lambda x: isinstance(x, tuple)   # noqa: E731
    assert jitad.tree.map(lambda t: len(t) if isinstance(t, tuple) else t, tree, is_leaf=is_pair) == \
        jax.tree.map(lambda t: len(t) if isinstance(t, tuple) else t, tree, is_leaf=is_pair)
    assert jitad.tree.leaves(tree, is_leaf=is_pair) == jax.tree.leaves(tree, is_leaf=is_pair)
    assert str(jitad.tree.structure(tree, is_leaf=is_pair)) == str(jax.tree.structure(tree, is_leaf=is_pair))[10:-1]
    prefix = {"a": 10.0, "b": [20.0]}   # the first tree a prefix of the second
    assert jitad.tree.map(lambda p, t: (p, t), prefix, {"a": (1.0, 2.0), "b": [3.0]}) == \
        jax.tree.map(lambda p, t: (p, t), prefix, {"a": (1.0, 2.0), "b": [3.0]})
    assert jitad.tree.map_with_path(lambda p, x, y: (tu.keystr(p), x * y), tree, tree) == \
        jax.tree.map_with_path(lambda p, x, y: (jtu.keystr(p), x * y), tree, tree)
    ours = tu.tree_map_with_path(lambda p, x: len(p), tree, is_leaf=lambda p, x: len(p) == 1, is_leaf_takes_path=True)
    theirs = jtu.tree_map_with_path(lambda p, x: len(p), tree, is_leaf=lambda p, x: len(p) == 1,
                                    is_leaf_takes_path=True)
    assert ours == theirs
    assert jitad.tree.leaves_with_path(tree, is_leaf=is_pair)[0][1] == jax.tree.leaves_with_path(
        tree, is_leaf=is_pair)[0][1] == (1.0, 2.0)
    path = jitad.tree.flatten_with_path({"w": P(1.0, [2.0])})[0][1][0]
    assert tu.keystr(path) == "['w'].y[0]" == jtu.keystr(jax.tree.flatten_with_path({"w": P(1.0, [2.0])})[0][1][0])
    assert tu.keystr(path, simple=True, separator="/") == "w/y/0"
    assert repr(path[0]) == repr(jtu.DictKey("w")) and repr(path[1]) == repr(jtu.GetAttrKey("y"))
    assert repr(path[2]) == repr(jtu.SequenceKey(0)) and str(tu.FlattenedIndexKey(3)) == str(jtu.FlattenedIndexKey(3))
    with pytest.raises(jitad.ArgumentError, match="prefix"):
        jitad.tree.map(lambda a, b: a, [1.0, 2.0], [1.0])


def test_reduce_all_transpose_broadcast():
    tree = [1.0, (2.0, {"a": 3.0})]
    assert jitad.tree.reduce(operator.add, tree) == jax.tree.reduce(operator.add, tree) == 6.0
    assert jitad.tree.reduce(operator.add, tree, 10.0) == jax.tree.reduce(operator.add, tree, 10.0)
    assert jitad.tree.reduce(operator.add, [], 1.0) == 1.0
    with pytest.raises(jitad.ArgumentError, match="initializer"):
        jitad.tree.reduce(operator.add, [])
    assert jitad.tree.reduce_associative(operator.add, [1, 2, 3, 4, 5]) == \
        jax.tree.reduce_associative(operator.add, [1, 2, 3, 4, 5])
    assert jitad.tree.reduce_associative(operator.add, [], identity=0) == 0
    assert jitad.tree.all((True, [1.0])) == jax.tree.all((True, [1.0])) is True
    assert jitad.tree.all((True, [0.0])) == jax.tree.all((True, [0.0])) is False
    assert jitad.tree.all([(0.0,)], is_leaf=lambda x: isinstance(x, tuple)) is True
    outer, inner = jtu.tree_structure([0, 0]), jtu.tree_structure((0, 0, 0))
    assert tu.tree_transpose(tu.tree_structure([0, 0]), tu.tree_structure((0, 0, 0)), [(1, 2, 3), (4, 5, 6)]) == \
        jtu.tree_transpose(outer, inner, [(1, 2, 3), (4, 5, 6)])
    assert jitad.tree.transpose(tu.tree_structure([0, 0]), None, [{"a": 1, "b": 2}, {"a": 3, "b": 4}]) == \
        jax.tree.transpose(outer, None, [{"a": 1, "b": 2}, {"a": 3, "b": 4}])
    assert jitad.tree.broadcast((1, 2), ((3, 4), [5, 6])) == jax.tree.broadcast((1, 2), ((3, 4), [5, 6]))
    assert tu.tree_broadcast({"a": 1}, {"a": (None, [2, 3])}) == jtu.tree_broadcast({"a": 1}, {"a": (None, [2, 3])})


def test_one_level_and_node_tests():
    tree = {"a": 1, "b": (2,)}
    assert tu.flatten_one_level(tree) == jtu.flatten_one_level(tree)
    ours, theirs = tu.flatten_one_level_with_keys(tree), jtu.flatten_one_level_with_keys(tree)
    assert [(repr(k), v) for k, v in ours[0]] == [(repr(k), v) for k, v in theirs[0]] and ours[1] == theirs[1]
    assert tu.flatten_one_level([1, 2])[0] == tuple(jtu.flatten_one_level([1, 2])[0])
    with pytest.raises(jitad.ArgumentError, match="leaf"):
        tu.flatten_one_level(1.0)
    for typ in (tuple, list, dict, collections.OrderedDict, P, type(None), float, np.ndarray):
        assert tu.is_tree_node(typ) == jtu.default_registry.is_node(typ) or typ is P, typ
    assert tu.default_registry.is_node(tuple)
    assert tu.all_leaves([1.0, np.ones(2)]) == jtu.all_leaves([1.0, np.ones(2)]) is True
    assert tu.all_leaves([[1.0]]) == jtu.all_leaves([[1.0]]) is False
    assert tu.all_leaves([(1.0,)], is_leaf=lambda x: isinstance(x, tuple)) is True
    td = tu.treedef_tuple([tu.tree_structure(1.0), tu.tree_structure([1.0])])
    jtd = jtu.treedef_tuple([jtu.tree_structure(1.0), jtu.tree_structure([1.0])])
    assert str(td) == str(jtd)[10:-1] and repr(td) == repr(jtd)
    assert td.unflatten([1.0, 2.0]) == jtd.unflatten([1.0, 2.0])


def test_registration_kinds():
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

    tu.register_pytree_with_keys(Pair, lambda p: ([(tu.GetAttrKey("a"), p.a), (tu.GetAttrKey("b"), p.b)], "meta"),
                                 lambda aux, ch: Pair(*ch))
    leaves = tu.tree_leaves_with_path({"p": Pair(1.0, 2.0)})
    assert [tu.keystr(p) for p, _ in leaves] == ["['p'].a", "['p'].b"]
    g = jitad.grad(lambda p: p.a * p.b)(Pair(3.0, 4.0))
    assert (g.a, g.b) == (4.0, 3.0)

    @tu.register_pytree_node_class
    class Scaled:
        def __init__(self, v, k):
            self.v, self.k = v, k

        def tree_flatten(self):
            return (self.v,), self.k

        @classmethod
        def tree_unflatten(cls, k, children):
            return cls(children[0], k)
    out = jitad.jit(lambda s: Scaled(s.v * s.k, s.k))(Scaled(np.ones(2), 3.0))
    assert isinstance(out, Scaled) and out.k == 3.0 and list(out.v) == [3.0, 3.0]

    @tu.register_pytree_with_keys_class
    class Keyed:
        def __init__(self, v):
            self.v = v

        def tree_flatten_with_keys(self):
            return ((tu.GetAttrKey("v"), self.v),), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)
    assert tu.keystr(tu.tree_leaves_with_path(Keyed(1.0))[0][0]) == ".v"

    @tu.register_static
    class Mode:
        def __init__(self, name):
            self.name = name

        def __hash__(self):
            return hash(self.name)

        def __eq__(self, other):
            return isinstance(other, Mode) and other.name == self.name
    assert tu.tree_leaves((Mode("x"), 1.0)) == [1.0]
    assert jitad.jit(lambda m, x: x * (2.0 if m.name == "x" else 3.0))(Mode("x"), 1.0) == 2.0

    @tu.register_dataclass
    @dataclasses.dataclass
    class Layer:
        w: object
        b: object
        act: str = jitad.tree.static(default="tanh")
    layer = Layer(np.ones(2), 0.5)
    assert tu.tree_leaves(layer)[1] == 0.5 and len(tu.tree_leaves(layer)) == 2
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(layer)] == [".w", ".b"]
    assert tu.tree_structure(layer) != tu.tree_structure(Layer(np.ones(2), 0.5, act="relu"))
    with pytest.raises(jitad.ArgumentError, match="already"):
        tu.register_pytree_node(collections.OrderedDict, lambda x: ((), None), lambda a, c: None)


def test_partial_is_a_pytree():
    add = tu.Partial(lambda a, b: a + b, 1.0)
    jadd = jtu.Partial(lambda a, b: a + b, 1.0)
    assert add(2.0) == jadd(2.0) == 3.0
    assert tu.tree_leaves(add) == jtu.tree_leaves(jadd) == [1.0]
    assert jitad.jit(lambda f, x: f(x))(add, 2.0) == 3.0
    g = jitad.grad(lambda f, x: f(x) * f.args[0])(tu.Partial(operator.mul, 3.0), 2.0)
    jg = jax.grad(lambda f, x: f(x) * f.args[0])(jtu.Partial(operator.mul, 3.0), 2.0)
    assert type(g) is tu.Partial and g.func is operator.mul and g.args == (12.0,) == tuple(map(float, jg.args))
    nested = tu.Partial(functools.partial(operator.mul, 2.0))
    assert nested(5.0) == 10.0 and tu.tree_leaves(nested) == [2.0]


def test_ravel_pytree_like_jax():
    from jax.flatten_util import ravel_pytree as jravel

    from jitad.flatten_util import ravel_pytree
    tree = {"w": np.arange(4.0).reshape(2, 2), "b": (np.float32(1.0), np.zeros(0))}
    flat, unravel = ravel_pytree(tree)
    jflat, junravel = jravel(tree)
    np.testing.assert_array_equal(flat, jflat)
    assert flat.dtype == jflat.dtype
    back, jback = unravel(flat), junravel(jflat)
    assert jax.tree.structure(back) == jax.tree.structure(jback)
    assert back["b"][0].dtype == np.asarray(jback["b"][0]).dtype


def test_flatten_up_to_leaves_no_reference_cycle():
    import gc
    tree = {"a": (np.ones(3), [np.zeros(2), 1.0]), "b": None}
    td = tu.tree_structure({"a": (0, 0), "b": None})
    gc.collect()
    gc.disable()
    try:
        for _ in range(5):
            assert len(jitad.pytree.flatten_up_to(td, tree)) == 2
        assert gc.collect() == 0   # (the walk's objects went with the calls, none left for the collector)
    finally:
        gc.enable()
