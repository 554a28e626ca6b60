"""`jitad.Tree`: a binary tree as arrays, a runtime input of compiled functions."""
import numpy as np

from .errors import ArgumentError
from .ir.types import TreeType, dtype_of_numpy

_NUMPY_OF = {"i64": np.int64, "f64": np.float64, "f32": np.float32}
_TYPE_CODES = {}


# Words of the runtime descriptor: node count, root, child arrays, the number of nodes
# reachable from the root and their post-order (children before parents), then one
# array per field.
DESCRIPTOR = {"size": 0, "root": 1, "left": 2, "right": 3, "reachable": 4, "order": 5}
FIRST_FIELD = 6


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


def type_code(tree_type):
    """A small int naming a tree type within this process."""
    return _TYPE_CODES.setdefault(tree_type, len(_TYPE_CODES) + 1)


class Tree:
    """A binary tree: child index arrays `left`/`right` (-1 = none) and per-node fields.

    >>> t = Tree([1, -1, -1], [2, -1, -1], value=[1.0, 2.0, 3.0])
    >>> t = Tree.from_nested((1.0, (2.0, None, None), (3.0, None, None)))

    Arrays are copied once, here, to contiguous read-only arrays; a compiled function
    reads them in place. One compiled function serves every tree with the same field
    names and dtypes, whatever its shape and size.
    """
    # Two slots are read by compiled entry points: the descriptor's address and a code
    # for the tree's field types (see `type_code` and `SLOT_OFFSETS`).
    __slots__ = ("_address", "_type_code", "left", "right", "root", "size", "fields", "type",
                 "order", "_descriptor", "__weakref__")

    def __init__(self, left, right, root=0, **fields):
        left, right = np.asarray(left).reshape(-1), np.asarray(right).reshape(-1)
        for name, arr in (("left", left), ("right", right)):
            if arr.size and arr.dtype.kind not in "iu":
                raise ArgumentError(f"Tree: `{name}` must hold integer node indices, got dtype {arr.dtype}")
        left, right = left.astype(np.int64), right.astype(np.int64)
        n = left.shape[0]
        if right.shape[0] != n:
            raise ArgumentError(f"Tree: `left` has {n} entries but `right` has {right.shape[0]}")
        for name, arr in (("left", left), ("right", right)):
            if n and (arr.min() < -1 or arr.max() >= n):
                raise ArgumentError(f"Tree: `{name}` holds an index outside [-1, {n}); "
                                    "children are node indices, -1 for no child")
        children = np.concatenate([left[left >= 0], right[right >= 0]])
        if len(np.unique(children)) != len(children):
            raise ArgumentError("Tree: some node is the child of two parents (or twice of one); "
                                "every node needs a single parent")
        root = int(root) if n else -1
        if n and not 0 <= root < n:
            raise ArgumentError(f"Tree: root {root} is outside [0, {n})")
        if n and root in children:
            raise ArgumentError(f"Tree: the root {root} is also a child: the tree has a cycle")
        self.left, self.right, self.root, self.size = left, right, root, n
        self.fields = {}
        for name in sorted(fields):
            if name in ("left", "right", "index", "is_leaf") or name.startswith("_"):
                raise ArgumentError(f"Tree: `{name}` is reserved; choose another field name")
            arr = np.asarray(fields[name])
            kind = dtype_of_numpy(arr.dtype)
            if kind is None or arr.shape != (n,):
                raise ArgumentError(f"Tree: field `{name}` must be a numeric array of shape ({n},), "
                                    f"got dtype {arr.dtype} and shape {arr.shape}")
            kind = "i64" if kind == "bool" else kind
            self.fields[name] = np.array(arr, dtype=_NUMPY_OF[kind], order="C", copy=True)
        for arr in (self.left, self.right, *self.fields.values()):
            arr.flags.writeable = False
        self.type = TreeType(tuple((name, dtype_of_numpy(a.dtype)) for name, a in self.fields.items()))
        self.order = _post_order(left, right, root)
        self.order.flags.writeable = False
        # the runtime descriptor (see DESCRIPTOR): fields sorted by name
        self._descriptor = np.array([n, root, left.ctypes.data, right.ctypes.data, len(self.order),
                                     self.order.ctypes.data] + [a.ctypes.data for a in self.fields.values()],
                                    dtype=np.int64)
        self._address = self._descriptor.ctypes.data
        self._type_code = type_code(self.type)

    @property
    def address(self):
        """The address of the descriptor `[size, root, &left, &right, &fields...]`."""
        return self._address

    @classmethod
    def random(cls, n, seed=0, **fields):
        """A random binary tree of `n` nodes, grown by attaching each new node at a free
        child position chosen uniformly; node 0 is the root. `fields` are arrays of
        length `n`: `Tree.random(5, seed=1, value=np.ones(5))`."""
        rng = np.random.default_rng(seed)
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
        """Build from `(value, left_subtree, right_subtree)` tuples, `None` = empty."""
        left, right, values = [], [], []

        def add(node):
            if node is None:
                return -1
            value, l, r = node
            k = len(values)
            values.append(value)
            left.append(-1)
            right.append(-1)
            left[k] = add(l)
            right[k] = add(r)
            return k

        add(obj)
        return cls(left, right, root=0, value=np.array(values, dtype=np.float64))

    def __repr__(self):
        return f"Tree(size={self.size}, fields={list(self.fields)})"


def _slot_offsets():
    """Where CPython keeps the `_address` and `_type_code` slots inside a Tree object
    (found by looking, on a sample tree); compiled entry points read them there.
    None if not found: trees then go through the Python dispatcher."""
    import ctypes
    t = Tree([-1], [-1])
    t._address, t._type_code = marks = object(), object()   # unique: found in one place only
    words = {}
    for off in range(16, Tree.__basicsize__, 8):
        words.setdefault(ctypes.cast(id(t) + off, ctypes.POINTER(ctypes.c_void_p))[0], []).append(off)
    found = [words.get(id(m), []) for m in marks]
    return tuple(f[0] for f in found) if all(len(f) == 1 for f in found) else None


SLOT_OFFSETS = _slot_offsets()
