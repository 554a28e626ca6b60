"""Pytree utilities with JAX's names (`jax.tree_util`).

A pytree is a nest of tuples, lists, dicts (keys sorted), `None` (a subtree without
leaves), namedtuples and classes registered here; everything else is a leaf. Every
transformation takes and returns pytrees: the gradient of a namedtuple of parameters
is that namedtuple.

>>> from jitad.tree_util import tree_flatten, tree_unflatten
>>> leaves, treedef = tree_flatten({"b": 1.0, "a": (2.0, None)})
>>> leaves
[2.0, 1.0]
>>> tree_unflatten(treedef, [3.0, 4.0])
{'a': (3.0, None), 'b': 4.0}
"""
import dataclasses

from .errors import ArgumentError
from .pytree import TreeDef, flatten, register_pytree_node, tree_leaves, unflatten
from .pytree import tree_map as _tree_map

__all__ = ["TreeDef", "register_dataclass", "register_pytree_node", "tree_flatten", "tree_leaves",
           "tree_map", "tree_structure", "tree_unflatten"]


def tree_flatten(tree):
    """`(leaves, treedef)`: `tree_flatten((1.0, [2.0]))[0] == [1.0, 2.0]`."""
    return flatten(tree)


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


def tree_structure(tree):
    """The treedef of `tree`: `str(tree_structure((1.0, {'a': 2.0}))) == "(*, {'a': *})"`."""
    return flatten(tree)[1]


def tree_map(f, tree, *rest):
    """`f` applied leafwise to `tree` and the trees in `rest` (all of one structure):
    `tree_map(lambda p, g: p - 0.1 * g, params, grads)`."""
    return _tree_map(f, tree, *rest)


def register_dataclass(nodetype=None, data_fields=None, meta_fields=None):
    """Register a dataclass as a pytree: `data_fields` are children (leaves or subtrees),
    `meta_fields` static parts of the structure (hashable). Without field lists every
    field is a data field. Usable as a decorator:

    >>> @register_dataclass
    ... @dataclasses.dataclass
    ... class Params:
    ...     w: object
    ...     b: object
    """
    if nodetype is None:
        return lambda cls: register_dataclass(cls, data_fields, meta_fields)
    if not dataclasses.is_dataclass(nodetype):
        raise ArgumentError(f"register_dataclass: {getattr(nodetype, '__name__', nodetype)!r} is not a "
                            "dataclass; decorate it with @dataclasses.dataclass first, or use "
                            "register_pytree_node")
    names = [f.name for f in dataclasses.fields(nodetype)]
    data = list(names if data_fields is None and meta_fields is None else data_fields or ())
    meta = list(meta_fields or ()) if meta_fields is not None or data_fields is not None else []
    if data_fields is not None and meta_fields is None:
        meta = [n for n in names if n not in data]
    if sorted(data + meta) != sorted(names):
        raise ArgumentError(f"register_dataclass({nodetype.__name__}): data_fields {data} and meta_fields "
                            f"{meta} must name each of the fields {names} once")

    def flatten_fn(x):
        return [getattr(x, n) for n in data], tuple(getattr(x, n) for n in meta)

    def unflatten_fn(aux, children):
        return nodetype(**dict(zip(data, children)), **dict(zip(meta, aux)))
    return register_pytree_node(nodetype, flatten_fn, unflatten_fn)
