"""Pytrees: nested tuples, lists and dicts of leaves, flattened in a fixed order.

As in JAX, a plain dict's leaves come in sorted-key order, an `OrderedDict`'s in
insertion order, a `defaultdict`'s in sorted-key order; each comes back as its own type
(a defaultdict with its factory). Paths (`flatten_with_path`) name each leaf's place by
keys: `DictKey`, `SequenceKey`, `GetAttrKey` (namedtuple fields, dataclass fields) and
`FlattenedIndexKey` (children of registered classes without keys).
"""
import collections
import dataclasses

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

    def __reduce__(self):   # (copies and pickles)
        return TreeDef, tuple(self)

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

    def __repr__(self):
        return f"PyTreeDef({self})"

    def unflatten(self, leaves):
        """The pytree of this structure with `leaves` (as JAX's `PyTreeDef.unflatten`)."""
        return unflatten(self, leaves)

    @property
    def is_tuple_nest(self):
        """True for a leaf or nested tuples of leaves (what the fast entry builds itself)."""
        return self[0] == "leaf" or (self[0] == "tuple" and all(c.is_tuple_nest for c in self[1]))


LEAF = TreeDef("leaf")
NONE = TreeDef("none")


class BuiltDict(TreeDef):
    """A dict node that also remembers the order its keys were built in (`order`), for
    results: it compares and hashes as the plain node (leaves stay in sorted-key order)."""

    def __new__(cls, children, keys, order):
        td = tuple.__new__(cls, ("dict", children, keys))
        td.order = order
        return td

    def __reduce__(self):   # (copies and pickles)
        return BuiltDict, (self[1], self[2], self.order)


def with_built_order(tree, td):
    """`td` (the structure of `tree`) with the dicts whose keys `tree` holds in another
    than sorted order marked with that order (`BuiltDict`), so that results come back
    with their keys in the order the function built them."""
    kind, children = td[0], td[1]
    if kind in ("leaf", "none", "custom"):
        return td
    if kind == "dict":
        marked = tuple([with_built_order(tree[k], c) for k, c in zip(td.keys, children)])
        order = tuple(tree)
        if order != td.keys:
            return BuiltDict(marked, td.keys, order)
    else:
        marked = tuple([with_built_order(x, c) for x, c in zip(tree, children)])
    return td if all(m is c for m, c in zip(marked, children)) else TreeDef(kind, marked, td.keys)


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
        return TreeDef("custom", tuple([_flatten(c, leaves) for c in children]), NodeKey((t, aux)))
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


class NodeKey(tuple):
    """A registered class's `(class, aux_data)` in a structure: compared with `==` and hashed
    even where aux_data is a dict or a list (JAX asks aux_data for equality only), through a
    frozen copy of it."""
    __slots__ = ()

    def __hash__(self):
        return hash((self[0], _frozen(self[1])))

    def __reduce__(self):   # (copies and pickles)
        return NodeKey, (tuple(self),)


def _frozen(x):
    """A hashable stand-in for `x`, equal for equal values (dicts, lists, sets by content;
    another unhashable value by its type alone: coarser, never wrong)."""
    try:
        hash(x)
        return x
    except TypeError:
        pass
    if isinstance(x, dict):
        return ("dict", frozenset((_frozen(k), _frozen(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(_frozen(v) for v in x))
    if isinstance(x, (set, frozenset)):
        return ("set", frozenset(_frozen(v) for v in x))
    return ("unhashable", type(x).__qualname__)


def check_hashable(td):
    """ArgumentError naming the registered class whose aux_data cannot be hashed (the
    structure of an argument is part of a compiled function's cache key)."""
    if td.kind == "custom":
        try:
            hash(td.keys)   # a NodeKey: only an aux_data whose frozen copy cannot be hashed fails
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
    d = dict(zip(td.keys, children))
    order = getattr(td, "order", None)   # a BuiltDict
    return d if order is None else {k: d[k] for k in order}


# class -> (flatten(x) -> (children, aux_data), unflatten(aux_data, children) -> x,
#           flatten_with_keys(x) -> ([(key, child)], aux_data), or None: FlattenedIndexKey)
_REGISTRY = {}


def register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys=None):
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
    if not callable(flatten_func) or not callable(unflatten_func) or \
            (flatten_with_keys is not None and not callable(flatten_with_keys)):
        raise ArgumentError("register_pytree_node(cls, flatten_func, unflatten_func): both must be functions")
    _REGISTRY[nodetype] = (flatten_func, unflatten_func, flatten_with_keys)
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


# -- OrderedDict and defaultdict: registered nodes, as in JAX -------------------------

def _sorted_keys(d):
    try:
        return tuple(sorted(d))
    except TypeError:
        raise ArgumentError(f"a dict with keys {list(d)!r}: keys are sorted to fix the order of "
                            "the leaves, so they must be comparable (all strings or all numbers)") from None


def _ordered_keys(d):
    return [(DictKey(k), v) for k, v in d.items()], tuple(d)


def _default_keys(d):
    keys = _sorted_keys(d)
    return [(DictKey(k), d[k]) for k in keys], (d.default_factory, keys)


_REGISTRY[collections.OrderedDict] = (
    lambda d: (list(d.values()), tuple(d)),
    lambda keys, children: collections.OrderedDict(zip(keys, children)), _ordered_keys)
_REGISTRY[collections.defaultdict] = (
    lambda d: ([d[k] for k in _sorted_keys(d)], (d.default_factory, _sorted_keys(d))),
    lambda aux, children: collections.defaultdict(aux[0], zip(aux[1], children)), _default_keys)


# -- keys and paths ----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class DictKey:
    """A dict entry on a path: `str(DictKey("a")) == "['a']"`."""
    key: object

    def __str__(self):
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """A tuple or list position on a path: `str(SequenceKey(0)) == "[0]"`."""
    idx: int

    def __str__(self):
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """An attribute (a namedtuple or dataclass field) on a path: `str(GetAttrKey("w")) == ".w"`."""
    name: str

    def __str__(self):
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    """The position of a child of a registered class without keys: `"[<flat index 0>]"`."""
    key: int

    def __str__(self):
        return f"[<flat index {self.key}>]"


def _custom_children(x, t):
    """`(children, aux, keys)` of an instance of a registered class."""
    flatten_fn, _, keyed = _REGISTRY[t]
    if keyed is not None:
        pairs, aux = keyed(x)
        pairs = list(pairs)
        return [c for _, c in pairs], aux, [k for k, _ in pairs]
    out = flatten_fn(x)
    try:
        children, aux = out
        children = list(children)
    except (TypeError, ValueError):
        raise ArgumentError(f"the flatten function registered for the pytree class {t.__name__} returned "
                            f"{out!r}; it must return a pair (children, aux_data) with children a "
                            "list or tuple") from None
    return children, aux, [FlattenedIndexKey(i) for i in range(len(children))]


def one_level(x):
    """`(TreeDef node without children, children, keys)` for a pytree node, None for a
    leaf (None itself is a node without children)."""
    t = type(x)
    if x is None:
        return NONE, [], []
    if t in _REGISTRY:
        children, aux, keys = _custom_children(x, t)
        return TreeDef("custom", (), NodeKey((t, aux))), children, keys
    if isinstance(x, tuple):
        if hasattr(x, "_fields"):
            return TreeDef("namedtuple", (), t), list(x), [GetAttrKey(f) for f in x._fields]
        return TreeDef("tuple"), list(x), [SequenceKey(i) for i in range(len(x))]
    if isinstance(x, list):
        return TreeDef("list"), list(x), [SequenceKey(i) for i in range(len(x))]
    if isinstance(x, dict):
        keys = _sorted_keys(x)
        return TreeDef("dict", (), keys), [x[k] for k in keys], [DictKey(k) for k in keys]
    return None


def flatten_with_path(tree, is_leaf=None, is_leaf_takes_path=False):
    """`([(path, leaf)], treedef)`: each leaf with the tuple of keys leading to it;
    `is_leaf(x)` (or `is_leaf(path, x)`) True stops the descent there."""
    pairs = []

    def walk(x, path):
        if is_leaf is not None and (is_leaf(path, x) if is_leaf_takes_path else is_leaf(x)):
            pairs.append((path, x))
            return LEAF
        node = one_level(x)
        if node is None:
            pairs.append((path, x))
            return LEAF
        td, children, keys = node
        return TreeDef(td.kind, tuple(walk(c, path + (k,)) for c, k in zip(children, keys)), td.keys)
    treedef = walk(tree, ())
    return pairs, treedef


def flatten_up_to(treedef, tree, who="flatten_up_to"):
    """The subtrees of `tree` at the leaves of `treedef`, a prefix of its structure."""
    out = []
    _up_to(treedef, tree, who, out)
    return out


def _up_to(td, x, who, out):
    """`flatten_up_to`'s walk (a function of the module: a nested one calling itself would be
    a reference cycle, left for the collector at each call)."""
    if td.kind == "leaf":
        out.append(x)
        return
    node = one_level(x)
    if node is None or node[0].kind != td.kind or node[0].keys != td.keys or len(node[1]) != len(td.children):
        raise ArgumentError(f"{who}: the tree {x!r} does not have the structure {td} here; the first tree "
                            "must be a prefix of the second's structure")
    for c, sub in zip(td.children, node[1]):
        _up_to(c, sub, who, out)
