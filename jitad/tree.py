"""JAX's `jax.tree` namespace: the pytree functions of `jitad.tree_util` under their
short names.

>>> jitad.tree.map(lambda x: 2 * x, {"a": 1.0, "b": (2.0, 3.0)})
{'a': 2.0, 'b': (4.0, 6.0)}
>>> jitad.tree.leaves({"b": 1.0, "a": (2.0, None)})
[2.0, 1.0]

`Tree`, the type of a `TREE` node's values, is `jitad.Tree`.
"""
import dataclasses

from . import tree_util as _tu

__all__ = ["all", "broadcast", "flatten", "flatten_with_path", "leaves", "leaves_with_path", "map",
           "map_with_path", "reduce", "reduce_associative", "static", "structure", "transpose", "unflatten"]

all = _tu.tree_all   # noqa: A001 (JAX's names)
broadcast = _tu.tree_broadcast
flatten = _tu.tree_flatten
flatten_with_path = _tu.tree_flatten_with_path
leaves = _tu.tree_leaves
leaves_with_path = _tu.tree_leaves_with_path
map = _tu.tree_map   # noqa: A001
map_with_path = _tu.tree_map_with_path
reduce = _tu.tree_reduce
reduce_associative = _tu.tree_reduce_associative
structure = _tu.tree_structure
transpose = _tu.tree_transpose
unflatten = _tu.tree_unflatten


def static(**kwargs):
    """A dataclass field that `register_dataclass` makes static (part of the structure,
    not a leaf); takes `dataclasses.field`'s arguments: `op: str = jitad.tree.static(default="add")`."""
    metadata = {**(kwargs.pop("metadata", None) or {}), "static": True}
    return dataclasses.field(metadata=metadata, **kwargs)
