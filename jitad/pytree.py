"""Pytrees: nested tuples, lists and dicts of leaves, flattened in a fixed order."""
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TreeDef:
    """The structure of a pytree: `kind` is 'leaf', 'none', 'tuple', 'list' or 'dict'."""
    kind: str
    children: tuple = ()
    keys: tuple = ()

    @property
    def num_leaves(self):
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    @property
    def is_tuple_nest(self):
        """True for a leaf or nested tuples of leaves (what the fast entry builds itself)."""
        return self.kind == "leaf" or (self.kind == "tuple" and all(c.is_tuple_nest for c in self.children))


LEAF = TreeDef("leaf")


def flatten(tree):
    """`(leaves, treedef)`; dict keys are sorted, as in JAX."""
    leaves = []
    treedef = _flatten(tree, leaves)
    return leaves, treedef


def _flatten(x, leaves):
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return TreeDef("tuple", tuple(_flatten(c, leaves) for c in x))
    if isinstance(x, list):
        return TreeDef("list", tuple(_flatten(c, leaves) for c in x))
    if isinstance(x, dict):
        keys = tuple(sorted(x))
        return TreeDef("dict", tuple(_flatten(x[k], leaves) for k in keys), keys)
    if x is None:
        return TreeDef("none")
    leaves.append(x)
    return LEAF


def unflatten(treedef, leaves):
    it = iter(leaves)
    out = _unflatten(treedef, it)
    return out


def _unflatten(td, it):
    if td.kind == "leaf":
        return next(it)
    if td.kind == "none":
        return None
    children = [_unflatten(c, it) for c in td.children]
    if td.kind == "tuple":
        return tuple(children)
    if td.kind == "list":
        return children
    return dict(zip(td.keys, children))


def tree_leaves(tree):
    """The leaves of a pytree in order: `tree_leaves({'b': 1, 'a': (2, 3)}) == [2, 3, 1]`."""
    return flatten(tree)[0]


def tree_map(fn, tree, *rest):
    """Apply `fn` leafwise: `tree_map(lambda p, g: p - 0.1 * g, params, grads)`."""
    leaves, td = flatten(tree)
    others = [flatten(r)[0] for r in rest]
    return unflatten(td, [fn(*xs) for xs in zip(leaves, *others)])
