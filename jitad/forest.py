"""`jitad.Tree`: a binary tree as arrays, a runtime input of compiled functions."""
import hashlib
import operator
import types

import numpy as np

from .errors import ArgumentError, ImmutableError
from .ir.types import DESCRIPTOR, TreeType, check_int64_range, dtype_of_numpy

_NUMPY_OF = {"i64": np.int64, "f64": np.float64, "f32": np.float32}
_INT64_MAX = np.iinfo(np.int64).max
_TYPE_CODES = {}


# node attributes, and the descriptor words compiled code reads by these names
_RESERVED = {"index", "is_leaf", *DESCRIPTOR}


def _post_order(left, right, root):
    """The nodes reachable from `root`, every child before its parent."""
    order, stack = [], [(root, False)] if root >= 0 else []
    while stack:
        v, expanded = stack.pop()
        if expanded:
            order.append(v)
            continue
        stack.append((v, True))
        for child in (right[v], left[v]):
            if child >= 0:
                stack.append((child, False))
    return np.array(order, dtype=np.int64)


def _frozen(arr, dtype):
    """A contiguous `dtype` copy of `arr` over an immutable bytes buffer: read-only for
    good (unlike an array owning its memory, `flags.writeable = True` is refused)."""
    return np.frombuffer(np.ascontiguousarray(arr, dtype=dtype).tobytes(), dtype=dtype)


def _array(value, what):
    try:
        return np.asarray(value)
    except (ValueError, TypeError, OverflowError) as e:
        raise ArgumentError(f"Tree: {what} is not an array of numbers ({e})") from None


def _child_indices(name, value):
    arr = _array(value, f"`{name}`").reshape(-1)
    if arr.size and arr.dtype.kind not in "iu":
        raise ArgumentError(f"Tree: `{name}` must hold integer node indices, got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and arr.max() > _INT64_MAX:
        raise ArgumentError(f"Tree: `{name}` holds the index {arr.max()}, outside the tree; "
                            "children are node indices, -1 for no child")
    return arr.astype(np.int64)


def type_code(tree_type):
    """An int naming a tree type, the same in every process (compiled entries check it,
    and the disk cache shares them between processes): 56 bits of a digest of the type."""
    code = _TYPE_CODES.get(tree_type)
    if code is None:
        digest = hashlib.sha256(repr(tree_type).encode()).digest()
        code = _TYPE_CODES[tree_type] = int.from_bytes(digest[:7], "little") + 1
    return code


class Tree:
    """A binary tree: child index arrays `left`/`right` (-1 = none) and per-node fields.

    >>> t = Tree([1, -1, -1], [2, -1, -1], value=[1.0, 2.0, 3.0])
    >>> t = Tree.from_nested((1.0, (2.0, None, None), (3.0, None, None)))

    Arrays are copied once, here, to contiguous read-only arrays; a compiled function
    reads them in place. One compiled function serves every tree with the same field
    names and dtypes, whatever its shape and size. A Tree is immutable (build a new one
    to change it); copies and pickles rebuild it.
    """
    # Two slots are read by compiled entry points: the descriptor's address and a code
    # for the tree's field types (see `type_code` and `SLOT_OFFSETS`). `_keep` holds
    # every array the descriptor points into.
    __slots__ = ("_address", "_type_code", "left", "right", "root", "size", "fields", "type",
                 "order", "_keep", "__weakref__")

    def __init__(self, left, right, root=0, **fields):
        if _is_built(self):
            raise ImmutableError("jitad.Tree is immutable: __init__ cannot rebuild it; make a new Tree")
        left, right = _child_indices("left", left), _child_indices("right", right)
        n = left.shape[0]
        if right.shape[0] != n:
            raise ArgumentError(f"Tree: `left` has {n} entries but `right` has {right.shape[0]}")
        for name, arr in (("left", left), ("right", right)):
            if n and (arr.min() < -1 or arr.max() >= n):
                raise ArgumentError(f"Tree: `{name}` holds an index outside [-1, {n}); "
                                    "children are node indices, -1 for no child")
        parents = np.bincount(np.concatenate([left[left >= 0], right[right >= 0]]), minlength=n)
        if n and parents.max() > 1:
            raise ArgumentError("Tree: some node is the child of two parents (or twice of one); "
                                "every node needs a single parent")
        try:
            root = operator.index(root) if n else -1
        except TypeError:
            raise ArgumentError(f"Tree: root must be an int node index, got {type(root).__name__}") from None
        if n and not 0 <= root < n:
            raise ArgumentError(f"Tree: root {root} is outside [0, {n})")
        if n and parents[root]:
            raise ArgumentError(f"Tree: the root {root} is also a child: the tree has a cycle")
        arrays = {}
        for name in sorted(fields):
            if name in _RESERVED or name.startswith("_"):
                raise ArgumentError(f"Tree: `{name}` is reserved; choose another field name")
            arr = _array(fields[name], f"field `{name}`")
            kind = dtype_of_numpy(arr.dtype)
            if kind is None or arr.shape != (n,):
                raise ArgumentError(f"Tree: field `{name}` must be a numeric array of shape ({n},), "
                                    f"got dtype {arr.dtype} and shape {arr.shape}")
            check_int64_range(arr, f"Tree: field `{name}`")
            arrays[name] = _frozen(arr, _NUMPY_OF["i64" if kind == "bool" else kind])
        _install(self, left, right, root, arrays)

    def __setattr__(self, name, value):
        if type(self) is Tree or hasattr(Tree, name):   # a subclass may add attributes of its own
            raise ImmutableError(f"jitad.Tree is immutable: cannot set `{name}`; build a new Tree "
                                 "(e.g. Tree(t.left, t.right, t.root, **{**t.fields, 'value': new}))")
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        if type(self) is Tree or hasattr(Tree, name):
            raise ImmutableError(f"jitad.Tree is immutable: cannot delete `{name}`")
        object.__delattr__(self, name)

    def __reduce__(self):
        """Copies and pickles rebuild the tree: its descriptor holds this process's addresses."""
        t = plain_tree(self)   # Tree's own slots, whatever a subclass shadows
        return _rebuild, (type(self), t.left, t.right, t.root, dict(t.fields)), getattr(self, "__dict__", None) or None

    @property
    def address(self):
        """The address of the descriptor `[size, root, &left, &right, &fields...]`."""
        return self._address

    @classmethod
    def random(cls, n, seed=0, **fields):
        """A random binary tree of `n` nodes, grown by attaching each new node at a free
        child position chosen uniformly; node 0 is the root. `fields` are arrays of
        length `n`: `Tree.random(5, seed=1, value=np.ones(5))`."""
        try:
            n = operator.index(n)
        except TypeError:
            raise ArgumentError(f"Tree.random: n must be an int, got {type(n).__name__}") from None
        if n < 0:
            raise ArgumentError(f"Tree.random: n = {n} nodes; it must be >= 0")
        try:
            rng = np.random.default_rng(seed)
        except (TypeError, ValueError) as e:
            raise ArgumentError(f"Tree.random: seed={seed!r} is not a random seed ({e})") from None
        children = -np.ones((n, 2), dtype=np.int64)
        free = [(0, 0), (0, 1)] if n else []
        for k in range(1, n):
            j = int(rng.integers(len(free)))
            parent, side = free[j]
            free[j] = free[-1]
            free.pop()
            children[parent, side] = k
            free += [(k, 0), (k, 1)]
        return cls(children[:, 0], children[:, 1], root=0, **fields)

    @classmethod
    def from_nested(cls, obj):
        """Build from `(value, left_subtree, right_subtree)` tuples, `None` = empty;
        nodes are numbered in pre-order (the root is 0)."""
        left, right, values = [], [], []
        stack, path = [(obj, -1, None)], set()   # path: the ids of the nodes above, to refuse cycles
        while stack:
            node, parent, side = stack.pop()
            if side == "leave":
                path.remove(node)
                continue
            if node is None:
                continue
            if id(node) in path:
                raise ArgumentError("Tree.from_nested: a subtree contains itself")
            try:
                value, l, r = node
            except (TypeError, ValueError):
                raise ArgumentError("Tree.from_nested: each node is a (value, left, right) tuple or None, "
                                    f"got {type(node).__name__}") from None
            k = len(values)
            values.append(value)
            left.append(-1)
            right.append(-1)
            if side is not None:
                (left if side == "left" else right)[parent] = k
            path.add(id(node))
            stack += [(id(node), -1, "leave"), (r, k, "right"), (l, k, "left")]
        try:
            values = np.array(values, dtype=np.float64)
        except (TypeError, ValueError) as e:
            raise ArgumentError(f"Tree.from_nested: node values must be numbers ({e})") from None
        return cls(left, right, root=0, value=values)

    def __repr__(self):
        return f"Tree(size={self.size}, fields={list(self.fields)})" if _is_built(self) else "Tree(<unbuilt>)"


def _install(tree, left, right, root, arrays, forest=None):
    """Fill a new tree's slots from checked arrays (`arrays`: fields sorted by name)."""
    n = len(left)
    left, right = _frozen(left, np.int64), _frozen(right, np.int64)
    order = _frozen(_post_order(left.tolist(), right.tolist(), root), np.int64)   # lists: faster here
    # the runtime descriptor (see DESCRIPTOR): fields sorted by name
    descriptor = _frozen([n, root, left.ctypes.data, right.ctypes.data, len(order), order.ctypes.data]
                         + [a.ctypes.data for a in arrays.values()], np.int64)
    tree_type = TreeType(tuple((name, dtype_of_numpy(a.dtype)) for name, a in arrays.items()), forest)
    for slot, value in (("left", left), ("right", right), ("root", root), ("size", n),
                        ("fields", types.MappingProxyType(arrays)), ("type", tree_type), ("order", order),
                        ("_keep", (descriptor, left, right, order, *arrays.values())),
                        ("_address", descriptor.ctypes.data), ("_type_code", type_code(tree_type))):
        _SLOTS[slot].__set__(tree, value)   # Tree's own slots, whatever a subclass declares


_SLOTS = {name: Tree.__dict__[name] for name in Tree.__slots__ if name != "__weakref__"}


def _is_built(tree):
    try:
        _SLOTS["_type_code"].__get__(tree)
        return True
    except AttributeError:
        return False


def _rebuild(cls, left, right, root, fields):
    tree = cls.__new__(cls)
    Tree.__init__(tree, left, right, root, **fields)
    return tree


def plain_tree(tree):
    """`tree` as an exact `Tree`, the type compiled entry points take: a subclass's Tree
    part (sharing its arrays). ArgumentError for a Tree that `Tree.__init__` never built."""
    if not _is_built(tree):
        raise ArgumentError(f"a {type(tree).__name__} whose Tree.__init__ never ran; "
                            "build trees with Tree(left, right, root, **fields)")
    if type(tree) is Tree:
        return tree
    plain = object.__new__(Tree)
    for slot in _SLOTS.values():
        slot.__set__(plain, slot.__get__(tree))
    return plain


class Forest(Tree):
    """A batch of `jitad.Tree`s with the same fields, for `jitad.vmap`: mapped over, each
    lane folds one tree, and `TREE` runs level by level, the nodes of equal height
    (in chunks of `width`) as one batched computation.

    >>> forest = jitad.Forest([t1, t2, t3])   # doctest: +SKIP
    >>> jitad.vmap(tree_loss, in_axes=(None, 0))(params, forest)   # one loss per tree  # doctest: +SKIP

    Inside the combine function `node.index` is the node's index in its own tree. The
    trees are packed once, here (heights, a renumbering, padding to whole chunks);
    one compiled function serves every forest of the same number of trees, width
    and field types.
    """
    __slots__ = ("trees", "width")

    def __init__(self, trees, width=32):
        if _is_built(self):
            raise ImmutableError("jitad.Forest is immutable: __init__ cannot rebuild it; make a new Forest")
        if isinstance(trees, Tree) or not isinstance(trees, (list, tuple)) \
                or not all(isinstance(t, Tree) and not isinstance(t, Forest) for t in trees) or not trees:
            raise ArgumentError("Forest takes a non-empty list of jitad.Tree (e.g. Forest([t1, t2])), "
                                f"got {type(trees).__name__}")
        if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or width < 1:
            raise ArgumentError(f"Forest: width={width!r}; it must be a positive int (nodes per batched step)")
        plain = [plain_tree(t) for t in trees]
        for k, t in enumerate(plain):
            if t.type != plain[0].type:
                raise ArgumentError(f"Forest: tree {k} has fields {t.type} but tree 0 has {plain[0].type}; "
                                    "all trees of a forest need the same field names and dtypes")
        left, right, root, arrays = _pack(plain, int(width))
        _install(self, left, right, root, arrays, forest=(len(plain), int(width)))
        object.__setattr__(self, "trees", tuple(trees))
        object.__setattr__(self, "width", int(width))

    def __setattr__(self, name, value):
        raise ImmutableError(f"jitad.Forest is immutable: cannot set `{name}`; build a new Forest")

    def __reduce__(self):
        return Forest, (self.trees, self.width)

    def __repr__(self):
        return f"Forest(trees={len(self.trees)}, nodes={self.size}, width={self.width})"


def _concatenated(trees):
    """The reachable nodes of all trees as one array of global indices (each tree's
    post-order, tree after tree), with their tree, local index and global children."""
    offsets = np.cumsum([0] + [t.size for t in trees])[:-1]
    glob = np.concatenate([t.order + o for t, o in zip(trees, offsets)] or [np.zeros(0, np.int64)])
    all_left, all_right = (np.concatenate([np.where(a >= 0, a + o, -1) for a, o in zip(arrays, offsets)])
                           for arrays in ([t.left for t in trees], [t.right for t in trees]))
    tree_of = np.repeat(np.arange(len(trees)), [t.size for t in trees])
    return glob, offsets, tree_of, all_left, all_right


def _heights(glob, all_left, all_right):
    """The height of every node in `glob` (a leaf's is 0), children first."""
    h = [-1] * (len(all_left) + 1)   # entry -1: no child
    left, right = all_left.tolist(), all_right.tolist()
    for v in glob.tolist():
        h[v] = 1 + max(h[left[v]], h[right[v]])
    return np.array(h[:-1], np.int64)


MAX_FOREST_NODES = 1 << 24   # a forest's nodes, padding included (about 1 GiB of arrays)


def _pack(trees, width):
    """The forest as one tree's arrays: reachable nodes renumbered by (height, tree, node),
    each height padded with dummy nodes to whole chunks of `width`, so that chunk c is
    nodes [c * width, (c + 1) * width) and all its children lie in earlier chunks. Fields
    of its own: `_local` (index in its tree), `_tree`, `_real` (0 for a dummy), `_root`
    (entry b: tree b's root, -1 if empty)."""
    glob, offsets, tree_of, all_left, all_right = _concatenated(trees)
    height = _heights(glob, all_left, all_right)[glob]
    glob = glob[np.lexsort((glob, height))]   # by height, then tree and node (global order)
    height = np.sort(height)
    counts = np.bincount(height, minlength=1) if len(height) else np.zeros(0, np.int64)
    padded_counts = -(-counts // width) * width
    n = int(padded_counts.sum())
    n += max(0, len(trees) - n) + (-max(0, len(trees) - n) % width)   # room for a root per tree
    if n > MAX_FOREST_NODES:
        raise ArgumentError(f"Forest: width {width} pads these trees to {n} nodes (more than "
                            f"{MAX_FOREST_NODES}): every height is padded to whole chunks; use a smaller width")
    starts = np.concatenate([[0], np.cumsum(padded_counts)[:-1]]) if len(counts) else np.zeros(0, np.int64)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]]) if len(counts) else np.zeros(0, np.int64)
    pos = starts[height] + np.arange(len(glob)) - first[height]   # new index of glob[j]
    new = -np.ones(len(all_left) + 1, np.int64)   # global index -> new index; entry -1 stays -1
    new[glob] = pos
    left, right = -np.ones(n, np.int64), -np.ones(n, np.int64)
    left[pos], right[pos] = new[all_left[glob]], new[all_right[glob]]
    fields = {}
    for name in trees[0].fields:
        fields[name] = np.zeros(n, trees[0].fields[name].dtype)
        fields[name][pos] = np.concatenate([t.fields[name] for t in trees])[glob]
    local, tree_id, real = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    local[pos], tree_id[pos], real[pos] = glob - offsets[tree_of[glob]], tree_of[glob], 1
    roots = np.full(n, -1, np.int64)
    roots[:len(trees)] = [new[o + t.root] if t.size else -1 for t, o in zip(trees, offsets)]
    fields.update(_local=local, _real=real, _root=roots, _tree=tree_id)
    root = next((int(r) for r in roots[:len(trees)] if r >= 0), 0 if n else -1)
    return left, right, root, {name: _frozen(fields[name], fields[name].dtype) for name in sorted(fields)}


def _slot_offsets():
    """Where CPython keeps the `_address` and `_type_code` slots inside a Tree object
    (found by looking, on a sample tree); compiled entry points read them there.
    None if not found: trees then go through the Python dispatcher."""
    import ctypes
    t = object.__new__(Tree)
    marks = object(), object()   # unique: found in one place only
    for name, mark in zip(("_address", "_type_code"), marks):
        _SLOTS[name].__set__(t, mark)
    words = {}
    for off in range(16, Tree.__basicsize__, 8):
        words.setdefault(ctypes.cast(id(t) + off, ctypes.POINTER(ctypes.c_void_p))[0], []).append(off)
    found = [words.get(id(m), []) for m in marks]
    return tuple(f[0] for f in found) if all(len(f) == 1 for f in found) else None


SLOT_OFFSETS = _slot_offsets()
