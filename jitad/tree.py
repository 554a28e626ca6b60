"""JAX's `jax.tree` namespace: the pytree functions under their short names.

>>> jitad.tree.map(lambda x: 2 * x, {"a": 1.0, "b": (2.0, 3.0)})
{'a': 2.0, 'b': (4.0, 6.0)}
>>> jitad.tree.leaves({"b": 1.0, "a": (2.0, None)})
[2.0, 1.0]

Each is a thin name for the function of `jitad.tree_util`; `Tree`, the type of a
`TREE` node's values, is `jitad.Tree`.
"""
import builtins
import functools

from .tree_util import tree_flatten, tree_leaves, tree_map, tree_structure, tree_unflatten

__all__ = ["all", "flatten", "leaves", "map", "reduce", "structure", "unflatten"]


def map(f, tree, *rest):   # noqa: A001 (JAX's name)
    """`f` applied leafwise: `jitad.tree.map(lambda p, g: p - g, params, grads)`."""
    return tree_map(f, tree, *rest)


def leaves(tree):
    """The leaves of `tree`, in order: `jitad.tree.leaves((1.0, [2.0])) == [1.0, 2.0]`."""
    return tree_leaves(tree)


def flatten(tree):
    """`(leaves, treedef)`: `jitad.tree.flatten((1.0, [2.0]))[0] == [1.0, 2.0]`."""
    return tree_flatten(tree)


def unflatten(treedef, leaves):
    """The pytree of structure `treedef` holding `leaves` in order."""
    return tree_unflatten(treedef, leaves)


def structure(tree):
    """The treedef of `tree`: `jitad.tree.structure((1.0, 2.0)).num_leaves == 2`."""
    return tree_structure(tree)


def reduce(function, tree, *initializer):
    """`functools.reduce` over the leaves: `jitad.tree.reduce(lambda a, b: a + b, (1.0, [2.0])) == 3.0`."""
    return functools.reduce(function, tree_leaves(tree), *initializer)


def all(tree):   # noqa: A001 (JAX's name)
    """Whether every leaf is true: `jitad.tree.all((True, [1.0])) == True`."""
    return builtins.all(tree_leaves(tree))
