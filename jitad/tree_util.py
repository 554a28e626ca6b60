"""Pytree utilities with JAX's names (`jax.tree_util`).

A pytree is a nest of tuples, lists, dicts (keys sorted), `OrderedDict`s (insertion
order), `defaultdict`s, `None` (a subtree without leaves), namedtuples and classes
registered here; everything else is a leaf. Every transformation takes and returns
pytrees: the gradient of a namedtuple of parameters is that namedtuple. Functions
taking `is_leaf` stop descending where it returns True.

>>> from jitad.tree_util import tree_flatten, tree_unflatten, tree_flatten_with_path, keystr
>>> leaves, treedef = tree_flatten({"b": 1.0, "a": (2.0, None)})
>>> leaves
[2.0, 1.0]
>>> tree_unflatten(treedef, [3.0, 4.0])
{'a': (3.0, None), 'b': 4.0}
>>> [keystr(path) for path, _ in tree_flatten_with_path({"w": [1.0, 2.0]})[0]]
["['w'][0]", "['w'][1]"]
"""
import dataclasses
import functools
from typing import Any

from .errors import ArgumentError
from .pytree import (DictKey, FlattenedIndexKey, GetAttrKey, SequenceKey, TreeDef, _REGISTRY, flatten,
                     flatten_up_to, flatten_with_path, one_level, register_pytree_node, unflatten)
from .pytree import tree_map as _tree_map

__all__ = ["DictKey", "FlattenedIndexKey", "GetAttrKey", "KeyEntry", "KeyPath", "Partial", "PyTreeDef",
           "SequenceKey", "TreeDef", "all_leaves", "default_registry", "flatten_one_level",
           "flatten_one_level_with_keys", "is_tree_node", "keystr", "register_dataclass",
           "register_pytree_node", "register_pytree_node_class", "register_pytree_with_keys",
           "register_pytree_with_keys_class", "register_static", "tree_all", "tree_broadcast", "tree_flatten",
           "tree_flatten_with_path", "tree_leaves", "tree_leaves_with_path", "tree_map", "tree_map_with_path",
           "tree_reduce", "tree_reduce_associative", "tree_structure", "tree_transpose", "tree_unflatten",
           "treedef_children", "treedef_is_leaf", "treedef_tuple"]

PyTreeDef = TreeDef
KeyEntry = (DictKey, SequenceKey, GetAttrKey, FlattenedIndexKey)   # the kinds of key on a path
KeyPath = tuple
_NO_INITIALIZER = object()


def tree_flatten(tree, is_leaf=None):
    """`(leaves, treedef)`: `tree_flatten((1.0, [2.0]))[0] == [1.0, 2.0]`."""
    if is_leaf is None:
        return flatten(tree)
    pairs, treedef = flatten_with_path(tree, is_leaf)
    return [x for _, x in pairs], treedef


def tree_unflatten(treedef, leaves):
    """The pytree of structure `treedef` holding `leaves` in order."""
    leaves = list(leaves)
    if not isinstance(treedef, TreeDef):
        raise ArgumentError(f"tree_unflatten takes a treedef (from tree_flatten or tree_structure), "
                            f"got {type(treedef).__name__}")
    if len(leaves) != treedef.num_leaves:
        raise ArgumentError(f"tree_unflatten: the structure {treedef} has {treedef.num_leaves} leaves, "
                            f"but {len(leaves)} were given")
    return unflatten(treedef, leaves)


def tree_leaves(tree, is_leaf=None):
    """The leaves of `tree` in order: `tree_leaves({'b': 1.0, 'a': [2.0]}) == [2.0, 1.0]`."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None):
    """The treedef of `tree`: `str(tree_structure((1.0, {'a': 2.0}))) == "(*, {'a': *})"`."""
    return tree_flatten(tree, is_leaf)[1]


def tree_map(f, tree, *rest, is_leaf=None):
    """`f` applied leafwise to `tree` and the trees in `rest` (the first tree's structure
    a prefix of theirs): `tree_map(lambda p, g: p - 0.1 * g, params, grads)`."""
    if is_leaf is None and not rest:
        return _tree_map(f, tree)
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = [_leaves_under(treedef, r, "tree_map") for r in rest]
    return unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])


def _leaves_under(treedef, tree, who):
    """The subtrees of `tree` at `treedef`'s leaves: its leaves when the structures are
    equal (the common case, flattened in one pass), else walked as a prefix."""
    leaves, td = flatten(tree)
    return leaves if td == treedef else flatten_up_to(treedef, tree, who)


def tree_flatten_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """`([(path, leaf)], treedef)`, each path a tuple of keys (`DictKey`, `SequenceKey`,
    `GetAttrKey`, `FlattenedIndexKey`): `tree_flatten_with_path([1.0])[0] == [((SequenceKey(0),), 1.0)]`."""
    return flatten_with_path(tree, is_leaf, is_leaf_takes_path)


def tree_leaves_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """`[(path, leaf)]` in leaf order: `tree_leaves_with_path({'a': 1.0}) == [((DictKey('a'),), 1.0)]`."""
    return flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_map_with_path(f, tree, *rest, is_leaf=None, is_leaf_takes_path=False):
    """`f(path, leaf, *others)` leafwise: `tree_map_with_path(lambda p, x: keystr(p), {'a': 1.0}) == {'a': "['a']"}`."""
    pairs, treedef = flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    others = [_leaves_under(treedef, r, "tree_map_with_path") for r in rest]
    return unflatten(treedef, [f(path, x, *xs) for (path, x), *xs in zip(pairs, *others)])


def keystr(keys, *, simple=False, separator=""):
    """A path as text: `keystr((DictKey('a'), SequenceKey(0))) == "['a'][0]"`; with
    `simple=True` the bare keys joined by `separator` (`'a/0'` with `separator='/'`)."""
    if not simple:
        return separator.join(str(k) for k in keys)
    return separator.join(str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k)))) for k in keys)


def tree_reduce(function, tree, initializer=_NO_INITIALIZER, is_leaf=None):
    """`functools.reduce` over the leaves: `tree_reduce(operator.add, (1.0, [2.0])) == 3.0`."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INITIALIZER:
        if not leaves:
            raise ArgumentError("tree_reduce of a tree without leaves needs an initializer")
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_reduce_associative(operation, tree, *, identity=_NO_INITIALIZER, is_leaf=None):
    """An associative `operation` over the leaves, combined pairwise (a balanced tree of
    calls): `tree_reduce_associative(operator.add, [1, 2, 3]) == 6`."""
    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is _NO_INITIALIZER:
            raise ArgumentError("tree_reduce_associative of a tree without leaves needs identity=")
        return identity
    while len(leaves) > 1:
        pairs = [operation(a, b) for a, b in zip(leaves[::2], leaves[1::2])]
        leaves = pairs + leaves[len(pairs) * 2:]
    return leaves[0]


def tree_all(tree, *, is_leaf=None):
    """Whether every leaf is true: `tree_all((True, [1.0])) is True`."""
    return all(tree_leaves(tree, is_leaf))


def all_leaves(iterable, is_leaf=None):
    """Whether every element of `iterable` is a leaf: `all_leaves([1.0, 2.0])`, not `all_leaves([[1.0]])`."""
    items = list(iterable)
    if is_leaf is None:
        return all(one_level(x) is None for x in items)
    return items == tree_leaves(items, is_leaf)


def tree_transpose(outer_treedef, inner_treedef, pytree_to_transpose):
    """A tree of structure outer-of-inner as inner-of-outer:
    `tree_transpose(tree_structure([0, 0]), tree_structure((0, 0)), [(1, 2), (3, 4)]) == ([1, 3], [2, 4])`.
    `inner_treedef` None takes the structure of the first inner tree."""
    subtrees = flatten_up_to(outer_treedef, pytree_to_transpose, "tree_transpose")
    if inner_treedef is None:
        if not subtrees:
            raise ArgumentError("tree_transpose: inner_treedef None needs at least one inner tree to infer it")
        inner_treedef = tree_structure(subtrees[0])
    columns = [flatten_up_to(inner_treedef, s, "tree_transpose") for s in subtrees]
    inner_count = inner_treedef.num_leaves
    return unflatten(inner_treedef, [unflatten(outer_treedef, [col[k] for col in columns])
                                     for k in range(inner_count)])


def tree_broadcast(prefix_tree, full_tree, is_leaf=None):
    """`prefix_tree` with each leaf repeated over the subtree of `full_tree` it covers:
    `tree_broadcast((1, 2), ((3, 4), [5, 6])) == ((1, 1), [2, 2])`."""
    leaves, treedef = tree_flatten(prefix_tree, is_leaf)
    subtrees = flatten_up_to(treedef, full_tree, "tree_broadcast")
    return unflatten(treedef, [tree_map(lambda _, v=v: v, sub, is_leaf=is_leaf) for v, sub in zip(leaves, subtrees)])


def treedef_is_leaf(treedef):
    """Whether `treedef` is one node without children (a leaf, None, or an empty
    container, as JAX counts them): `treedef_is_leaf(tree_structure(1.0))`."""
    return not treedef.children


def treedef_children(treedef):
    """The treedefs of the root's children: `treedef_children(tree_structure((1.0, [2.0])))`."""
    return list(treedef.children)


def treedef_tuple(treedefs):
    """The treedef of a tuple of trees with these structures."""
    return TreeDef("tuple", tuple(treedefs))


def flatten_one_level(tree):
    """`(children, node_data)` of the root: `flatten_one_level({'a': 1, 'b': (2,)}) == ((1, (2,)), ('a', 'b'))`."""
    node = one_level(tree)
    if node is None or tree is None:
        raise ArgumentError(f"flatten_one_level: {tree!r} is a leaf (or None); give a pytree node")
    return tuple(node[1]), _node_data(node[0])


def flatten_one_level_with_keys(tree):
    """`(((key, child), ...), node_data)` of the root."""
    node = one_level(tree)
    if node is None or tree is None:
        raise ArgumentError(f"flatten_one_level_with_keys: {tree!r} is a leaf (or None); give a pytree node")
    return tuple(zip(node[2], node[1])), _node_data(node[0])


def _node_data(td):
    return td.keys[1] if td.kind == "custom" else (td.keys if td.keys != () else None)


def is_tree_node(typ):
    """Whether instances of the class `typ` are pytree nodes (not leaves): `is_tree_node(tuple)`."""
    if not isinstance(typ, type):
        raise ArgumentError(f"is_tree_node takes a class, got {typ!r}")
    return typ in _REGISTRY or typ is type(None) or issubclass(typ, (tuple, list, dict))


class _Registry:
    """The registry of pytree node classes (JAX's `default_registry`)."""

    def is_node(self, typ):
        return is_tree_node(typ)

    def flatten(self, tree, is_leaf=None):
        return tree_flatten(tree, is_leaf)


default_registry = _Registry()


def register_pytree_with_keys(nodetype, flatten_with_keys, unflatten_func, flatten_func=None):
    """Register a class whose children have keys: `flatten_with_keys(x) -> ([(key, child)],
    aux_data)` (keys appear in paths), `unflatten_func(aux_data, children) -> x`."""
    if flatten_func is None:
        def without_keys(x):
            pairs, aux = flatten_with_keys(x)
            return [c for _, c in pairs], aux
        flatten_func = without_keys
    return register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def register_pytree_node_class(cls):
    """Class decorator: register `cls` by its `tree_flatten()` method and `tree_unflatten(aux,
    children)` classmethod."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_pytree_with_keys_class(cls):
    """Class decorator: register `cls` by its `tree_flatten_with_keys()` method and
    `tree_unflatten(aux, children)` classmethod (`tree_flatten()` used where defined)."""
    flatten_fn = (lambda x: x.tree_flatten()) if hasattr(cls, "tree_flatten") else None
    register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(), cls.tree_unflatten, flatten_fn)
    return cls


def register_static(cls):
    """Register `cls` as a node without children: its instances (hashable) are part of the
    structure, not leaves, so transformations pass them through as constants."""
    register_pytree_node(cls, lambda x: ((), x), lambda aux, _: aux)
    return cls


class Partial(functools.partial):
    """`functools.partial` as a pytree: the bound arguments are its children (so it may be
    passed to and returned from transformed functions), the function is static.

    >>> add = jitad.tree_util.Partial(lambda a, b: a + b, 1.0)
    >>> jitad.jit(lambda f, x: f(x))(add, 2.0)
    3.0
    """

    def __new__(cls, func, *args, **kw):
        if isinstance(func, functools.partial):   # unwrap, so the function itself is the static part
            original, func = func, func.func
            args, kw = original.args + args, {**original.keywords, **kw}
        return super().__new__(cls, func, *args, **kw)


register_pytree_node(Partial, lambda p: ((p.args, p.keywords), p.func),
                     lambda func, children: Partial(func, *children[0], **children[1]))


def register_dataclass(nodetype: Any = None, data_fields=None, meta_fields=None, drop_fields=()):
    """Register a dataclass as a pytree: `data_fields` are children (leaves or subtrees),
    `meta_fields` static parts of the structure (hashable). Without field lists every
    field is a data field but those declared `jitad.tree.static()`. Usable as a decorator:

    >>> @register_dataclass
    ... @dataclasses.dataclass
    ... class Params:
    ...     w: object
    ...     b: object
    """
    if nodetype is None:
        return lambda cls: register_dataclass(cls, data_fields, meta_fields, drop_fields)
    if not (isinstance(nodetype, type) and dataclasses.is_dataclass(nodetype)):
        raise ArgumentError(f"register_dataclass: {getattr(nodetype, '__name__', nodetype)!r} is not a "
                            "dataclass; decorate it with @dataclasses.dataclass first, or use "
                            "register_pytree_node")
    fields = [f for f in dataclasses.fields(nodetype) if f.name not in drop_fields]
    names = [f.name for f in fields]
    if data_fields is None and meta_fields is None:
        meta = [f.name for f in fields if f.metadata.get("static", False)]
        data = [n for n in names if n not in meta]
    else:
        data = list(data_fields or ())
        meta = list(meta_fields) if meta_fields is not None else [n for n in names if n not in data]
    if sorted(data + meta) != sorted(names):
        raise ArgumentError(f"register_dataclass({nodetype.__name__}): data_fields {data} and meta_fields "
                            f"{meta} must name each of the fields {names} once")

    def flatten_fn(x):
        return [getattr(x, n) for n in data], tuple(getattr(x, n) for n in meta)

    def flatten_keys(x):
        return [(GetAttrKey(n), getattr(x, n)) for n in data], tuple(getattr(x, n) for n in meta)

    def unflatten_fn(aux, children):
        return nodetype(**dict(zip(data, children)), **dict(zip(meta, aux)))
    return register_pytree_node(nodetype, flatten_fn, unflatten_fn, flatten_keys)
