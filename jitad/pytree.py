"""Pytrees: nested tuples, lists and dicts of leaves, flattened in a fixed order."""
from .errors import ArgumentError


class TreeDef(tuple):
    """The structure of a pytree: `(kind, children, keys)` with `kind` one of 'leaf',
    'none', 'tuple', 'list', 'dict', 'namedtuple' (keys: the class) or 'custom' (keys:
    `(class, aux_data)` of a class registered with `register_pytree_node`). A tuple, so
    hashing and comparing it (once per call of a compiled function) runs in C."""
    __slots__ = ()

    def __new__(cls, kind, children=(), keys=()):
        return tuple.__new__(cls, (kind, children, keys))

    kind = property(lambda self: self[0])
    children = property(lambda self: self[1])
    keys = property(lambda self: self[2])

    @property
    def num_leaves(self):
        if self[0] == "leaf":
            return 1
        return sum(c.num_leaves for c in self[1])

    def __str__(self):
        """JAX's notation: `{'a': *, 'b': (*, None)}`."""
        kind, children, keys = self
        if kind in ("leaf", "none"):
            return "*" if kind == "leaf" else "None"
        if kind == "namedtuple":
            return f"{keys.__name__}({', '.join(f'{n}={c}' for n, c in zip(keys._fields, children))})"
        if kind == "custom":
            return f"CustomNode({keys[0].__name__}[{keys[1]!r}], [{', '.join(map(str, children))}])"
        inner = ", ".join(map(str, children)) if kind != "dict" else \
            ", ".join(f"{k!r}: {c}" for k, c in zip(keys, children))
        return {"tuple": f"({inner}{',' if len(children) == 1 else ''})", "list": f"[{inner}]",
                "dict": f"{{{inner}}}"}[kind]

    def unflatten(self, leaves):
        """The pytree of this structure with `leaves` (as JAX's `PyTreeDef.unflatten`)."""
        return unflatten(self, leaves)

    @property
    def is_tuple_nest(self):
        """True for a leaf or nested tuples of leaves (what the fast entry builds itself)."""
        return self[0] == "leaf" or (self[0] == "tuple" and all(c.is_tuple_nest for c in self[1]))


LEAF = TreeDef("leaf")
NONE = TreeDef("none")


def flatten(tree):
    """`(leaves, treedef)`; dict keys are sorted, as in JAX."""
    leaves = []
    treedef = _flatten(tree, leaves)
    return leaves, treedef


def _flatten(x, leaves):
    t = type(x)
    if t is float or t is int:
        leaves.append(x)
        return LEAF
    if t is tuple:
        return TreeDef("tuple", tuple([_flatten(c, leaves) for c in x]))
    node = _REGISTRY.get(t)
    if node is not None:   # a registered class
        out = node[0](x)
        try:
            children, aux = out
            children = tuple(children)
        except (TypeError, ValueError):
            children = None
        if children is None:
            raise ArgumentError(f"the flatten function registered for the pytree class {t.__name__} returned "
                                f"{out!r}; it must return a pair (children, aux_data) with children a "
                                "list or tuple")
        return TreeDef("custom", tuple([_flatten(c, leaves) for c in children]), (t, aux))
    if isinstance(x, tuple):
        if hasattr(x, "_fields"):   # a namedtuple comes back as its class
            return TreeDef("namedtuple", tuple([_flatten(c, leaves) for c in x]), t)
        return TreeDef("tuple", tuple([_flatten(c, leaves) for c in x]))
    if isinstance(x, list):
        return TreeDef("list", tuple([_flatten(c, leaves) for c in x]))
    if isinstance(x, dict):
        try:
            keys = tuple(sorted(x))
        except TypeError:
            raise ArgumentError(f"a dict with keys {list(x)!r}: keys are sorted to fix the order of "
                                "the leaves, so they must be comparable (all strings or all numbers)") from None
        return TreeDef("dict", tuple([_flatten(x[k], leaves) for k in keys]), keys)
    if x is None:
        return NONE
    leaves.append(x)
    return LEAF


def check_hashable(td):
    """ArgumentError naming the registered class whose aux_data cannot be hashed (the
    structure of an argument is part of a compiled function's cache key)."""
    if td.kind == "custom":
        try:
            hash(td.keys[1])
        except TypeError:
            cls, aux = td.keys
            raise ArgumentError(f"the pytree class {cls.__name__} flattens to aux_data {aux!r}, which is not "
                                "hashable; aux_data is part of the structure that selects the compiled code, "
                                "so return it as a hashable value (a tuple instead of a list, None, ...)") from None
    for c in td.children:
        check_hashable(c)


def unflatten(treedef, leaves):
    return _unflatten(treedef, iter(leaves))


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
    if td.kind == "namedtuple":
        return td.keys(*children)
    if td.kind == "custom":
        cls, aux = td.keys
        return _REGISTRY[cls][1](aux, children)
    return dict(zip(td.keys, children))


_REGISTRY = {}   # class -> (flatten(x) -> (children, aux_data), unflatten(aux_data, children) -> x)


def register_pytree_node(nodetype, flatten_func, unflatten_func):
    """Make instances of `nodetype` pytrees: `flatten_func(x) -> (children, aux_data)`
    (aux_data hashable: it is part of the structure, as in JAX) and
    `unflatten_func(aux_data, children) -> x`.

    >>> class Pair:
    ...     def __init__(self, a, b): self.a, self.b = a, b
    >>> register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda aux, ch: Pair(*ch))
    """
    if not isinstance(nodetype, type):
        raise ArgumentError(f"register_pytree_node takes a class, got {nodetype!r}")
    if nodetype in (tuple, list, dict, type(None)) or nodetype in _REGISTRY:
        raise ArgumentError(f"register_pytree_node: {nodetype.__name__} is already a pytree node type")
    if not callable(flatten_func) or not callable(unflatten_func):
        raise ArgumentError("register_pytree_node(cls, flatten_func, unflatten_func): both must be functions")
    _REGISTRY[nodetype] = (flatten_func, unflatten_func)
    return nodetype


def tree_leaves(tree):
    """The leaves of a pytree in order: `tree_leaves({'b': 1, 'a': (2, 3)}) == [2, 3, 1]`."""
    return flatten(tree)[0]


def check_same_structure(who, named_trees):
    """ArgumentError unless the trees, `{name: tree}`, all have the structure of the first."""
    (name0, tree0), *others = named_trees.items()
    td0 = flatten(tree0)[1]
    for name, tree in others:
        td = flatten(tree)[1]
        if td != td0:
            raise ArgumentError(f"{who}: {name0} and {name} have different structures: {td0} vs {td}; "
                                "they must have the same structure, leaf for leaf")


def tree_map(fn, tree, *rest):
    """Apply `fn` leafwise: `tree_map(lambda p, g: p - 0.1 * g, params, grads)`."""
    leaves, td = flatten(tree)
    others = []
    for k, r in enumerate(rest):
        leaves_r, td_r = flatten(r)
        if td_r != td:
            raise ArgumentError(f"tree_map: tree {k + 1} has the structure {td_r}, different from the "
                                f"first tree's {td}; all trees must have the same structure")
        others.append(leaves_r)
    return unflatten(td, [fn(*xs) for xs in zip(leaves, *others)])
