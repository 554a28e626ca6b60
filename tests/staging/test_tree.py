"""`jitad.Tree` and `TREE`: random trees of 0…1000 nodes against a Python
recursion, one compiled signature for every shape and size, and construction errors."""
import math

import numpy as np
import pytest

import jitad
from jitad import IF, TREE, WHILE, Tree

# -- building trees ------------------------------------------------------------------


def _fields(rng, n):
    return {"word": rng.integers(0, 50, n), "value": rng.normal(size=n)}


def random_tree(n, seed):
    """A uniformly grown random binary tree with nodes relabelled by a random permutation
    (so the root is not node 0 and children are not numbered after their parents)."""
    rng = np.random.default_rng(seed)
    child = -np.ones((n, 2), dtype=np.int64)
    slots = [(0, 0), (0, 1)]          # free (parent, side) positions
    for k in range(1, n):
        j = int(rng.integers(len(slots)))
        parent, side = slots[j]
        slots[j] = slots[-1]
        slots.pop()
        child[parent, side] = k
        slots += [(k, 0), (k, 1)]
    perm = rng.permutation(n)         # old label k -> new label perm[k]
    relabelled = -np.ones((n, 2), dtype=np.int64)
    relabelled[perm] = np.where(child >= 0, perm[np.maximum(child, 0)], -1)
    return Tree(relabelled[:, 0], relabelled[:, 1], root=int(perm[0]), **_fields(rng, n))


def chain(n, side="left", reverse=False, seed=0):
    """A linked list of depth `n` hanging off one side (or alternating sides: 'zigzag')."""
    left, right = -np.ones(n, dtype=np.int64), -np.ones(n, dtype=np.int64)
    order = np.arange(n)[::-1] if reverse else np.arange(n)
    for depth in range(n - 1):
        parent, kid = order[depth], order[depth + 1]
        go_left = side == "left" or (side == "zigzag" and depth % 2 == 0)
        (left if go_left else right)[parent] = kid
    return Tree(left, right, root=int(order[0]), **_fields(np.random.default_rng(seed), n))


def complete(n, seed=0):
    k = np.arange(n)
    left = np.where(2 * k + 1 < n, 2 * k + 1, -1)
    right = np.where(2 * k + 2 < n, 2 * k + 2, -1)
    return Tree(left, right, **_fields(np.random.default_rng(seed), n))


def empty():
    return Tree([], [], word=np.zeros(0, dtype=np.int64), value=np.zeros(0))


TREES = {
    "empty": empty,
    "single": lambda: random_tree(1, 0),
    "pair": lambda: random_tree(2, 1),
    "three": lambda: random_tree(3, 2),
    **{f"random{n}-seed{s}": (lambda n=n, s=s: random_tree(n, s))
       for n, s in [(5, 3), (10, 4), (31, 5), (100, 6), (257, 7), (500, 8), (1000, 9), (1000, 10)]},
    "left-chain1000": lambda: chain(1000, "left"),
    "right-chain1000": lambda: chain(1000, "right", seed=1),
    "zigzag1000": lambda: chain(1000, "zigzag", seed=2),
    "reversed-list1000": lambda: chain(1000, "left", reverse=True, seed=3),
    "complete1000": lambda: complete(1000, seed=4),
    "complete7": lambda: complete(7, seed=5),
}
_BUILT = {}


def get_tree(name):
    if name not in _BUILT:
        _BUILT[name] = TREES[name]()
    return _BUILT[name]


# -- the Python reference: an explicit post-order walk (no recursion limit) --------------

class PyNode:
    """What `combine` sees on a Python tree: the node's index, children and fields."""

    def __init__(self, tree, k):
        self.index, self.left, self.right = k, int(tree.left[k]), int(tree.right[k])
        self.is_leaf = self.left == -1 and self.right == -1
        for name, arr in tree.fields.items():
            setattr(self, name, arr[k].item())


def reference(tree, init, combine):
    """`f(n) = init if n is empty else combine(node, f(n.left), f(n.right))`, iteratively."""
    if tree.size == 0:
        return init
    done = {}
    stack = [(tree.root, False)]
    while stack:
        k, ready = stack.pop()
        node = PyNode(tree, k)
        if ready:
            kids = [done.pop(c) if c >= 0 else init for c in (node.left, node.right)]
            done[k] = combine(node, *kids)
        else:
            stack.append((k, True))
            stack += [(c, False) for c in (node.right, node.left) if c >= 0]
    return done[tree.root]


# -- combine functions: the same Python code runs staged and on PyNodes --------------------

COMBINES = {
    "size": (0, lambda node, l, r: l + r + 1),
    "weighted-sum": (0.0, lambda node, l, r: l + r + node.value * (node.index + 1)),
    "height": (0, lambda node, l, r: jitad.maximum(l, r) + 1),
    "leaves-words": ((0, 0, 0.0), lambda node, l, r: (
        l[0] + r[0] + IF(node.is_leaf, lambda: 1, lambda: 0),
        l[1] + r[1] + node.word,
        l[2] + r[2] + node.value * node.word)),
    "shape-hash": (7, lambda node, l, r:
                   (l * 31 + r * 17 + (node.left + 2) * (node.right + 3) + node.index) % 1000003),
    "if-combine": (0.5, lambda node, l, r: IF(node.value > 0, lambda: l * 0.5 + node.value,
                                              lambda: r * 0.25 - node.value + l * 0.125)),
    "dict-state": ({"n": 0, "max": -1e300, "any": False}, lambda node, l, r: {
        "n": l["n"] + r["n"] + 1,
        "max": jitad.maximum(jitad.maximum(l["max"], r["max"]), node.value),
        "any": l["any"] | r["any"] | (node.word == 7)}),
}
_JITTED = {name: jitad.jit(lambda t, init=init, combine=combine: TREE(t, init, combine))
           for name, (init, combine) in COMBINES.items()}


def py(x):
    return x.item() if isinstance(x, np.generic) else x


def assert_close(got, want):
    """Same structure and leaf types (a NumPy scalar counts as its Python number), close values."""
    want = jitad.tree_map(py, want)
    got_leaves, want_leaves = jitad.tree_leaves(got), jitad.tree_leaves(want)
    assert type(got) is type(want) and len(got_leaves) == len(want_leaves), (got, want)
    for a, b in zip(got_leaves, want_leaves):
        assert type(a) is type(b), (got, want)
        if isinstance(b, float):
            assert a == pytest.approx(b, rel=1e-12, abs=1e-12), (got, want)
        else:
            assert a == b, (got, want)


@pytest.mark.parametrize("combine", sorted(COMBINES))
@pytest.mark.parametrize("tree_name", sorted(TREES))
def test_tree_matches_python_recursion(tree_name, combine):
    tree = get_tree(tree_name)
    init, fn = COMBINES[combine]
    f = _JITTED[combine]
    assert_close(f(tree), reference(tree, init, fn))
    assert len(f._compiled) == 1        # one signature serves every shape and size


def test_one_signature_serves_every_tree():
    f = jitad.jit(lambda t, x: TREE(t, x, lambda node, l, r: l * 0.5 + r * 0.25 + node.value * node.word))
    for name in TREES:
        tree = get_tree(name)
        want = reference(tree, 1.5, lambda node, l, r: l * 0.5 + r * 0.25 + node.value * node.word)
        assert f(tree, 1.5) == pytest.approx(want, rel=1e-12, abs=1e-12), name
    assert len(f._compiled) == 1


@pytest.mark.parametrize("tree_name", ["single", "pair", "random10-seed4", "random100-seed6", "complete7"])
def test_compiled_matches_eager_tree(tree_name):
    """Outside of jit, TREE recurses in Python on the same Tree."""
    tree = get_tree(tree_name)
    for name in ("size", "weighted-sum", "leaves-words", "if-combine"):
        init, fn = COMBINES[name]
        assert_close(_JITTED[name](tree), TREE(tree, init, fn))


# -- empty trees: the result is the init ---------------------------------------------------

@pytest.mark.parametrize("init", [0.0, 2.5, -1])
def test_empty_tree_returns_init(init):
    f = jitad.jit(lambda t, x: TREE(t, x, lambda node, l, r: l + r + 1))
    assert f(Tree([], []), init) == init
    assert f(Tree.from_nested(None), init) == init
    g = jitad.jit(lambda t, x: TREE(t, x * 1.0, lambda node, l, r: l + r + node.value))
    assert g(Tree.from_nested(None), init) == init
    assert g(Tree([], [], value=np.zeros(0)), init) == init
    assert TREE(Tree([], []), init, lambda node, l, r: l + r + 1) == init       # eager


def test_empty_tree_init_function_and_pytree():
    f = jitad.jit(lambda t: TREE(t, lambda: (1, 2.0, True), lambda node, l, r: (l[0] + r[0], l[1], l[2])))
    assert f(Tree([], [])) == (1, 2.0, True)


# -- node attributes -------------------------------------------------------------------------

#        0:5.0
#       /      \
#   1:3.0      3:4.0
#      \       /
#    2:2.0  4:1.0
NESTED = Tree.from_nested((5.0, (3.0, None, (2.0, None, None)), (4.0, (1.0, None, None), None)))


def test_from_nested_layout():
    assert NESTED.left.tolist() == [1, -1, -1, 4, -1]
    assert NESTED.right.tolist() == [3, 2, -1, -1, -1]
    assert NESTED.fields["value"].tolist() == [5.0, 3.0, 2.0, 4.0, 1.0]
    assert NESTED.root == 0 and NESTED.size == 5


def test_node_index_left_right_is_leaf():
    f = jitad.jit(lambda t: TREE(t, ((), 0), lambda node, l, r: (
        (), l[1] + r[1] + node.index * 1000 + (node.left + 1) * 100 + (node.right + 1) * 10 + node.is_leaf)))
    want = sum(k * 1000 + (NESTED.left[k] + 1) * 100 + (NESTED.right[k] + 1) * 10
               + (NESTED.left[k] == -1 and NESTED.right[k] == -1) for k in range(5))
    assert f(NESTED) == ((), int(want))


def test_preorder_sequence_of_indices():
    """Encode the post-order of visits in a number: checks which child is `l` and which `r`."""
    f = jitad.jit(lambda t: TREE(t, 0, lambda node, l, r: (l * 10 + r) * 10 + node.index + 1))
    assert f(NESTED) == reference(NESTED, 0, lambda node, l, r: (l * 10 + r) * 10 + node.index + 1)
    assert f(Tree.from_nested((1.0, (2.0, None, None), None))) == (2 * 10 + 0) * 10 + 1
    assert f(Tree.from_nested((1.0, None, (2.0, None, None)))) == (0 * 10 + 2) * 10 + 1


def test_several_fields_int_word_ids_and_float_values():
    tree = Tree([1, -1, -1], [2, -1, -1], word=[11, 22, 33], value=[0.5, 1.5, 2.5],
                label=np.array([1, 0, 1], dtype=np.int32), flag=[True, False, True],
                weight=np.array([1.0, 2.0, 4.0], dtype=np.float32))
    assert tree.fields["flag"].dtype == np.int64 and tree.fields["weight"].dtype == np.float32
    f = jitad.jit(lambda t: TREE(t, (0, 0.0, 0, 0.0), lambda node, l, r: (
        l[0] + r[0] + node.word * node.label, l[1] + r[1] + node.value * node.word,
        l[2] + r[2] + node.flag, l[3] + r[3] + node.weight)))
    assert f(tree) == (11 + 33, 0.5 * 11 + 1.5 * 22 + 2.5 * 33, 2, 7.0)
    with pytest.raises(jitad.StagingError, match="no field `colour`"):
        jitad.jit(lambda t: TREE(t, 0, lambda node, l, r: node.colour))(tree)


def test_trees_with_different_fields_are_different_signatures():
    f = jitad.jit(lambda t: TREE(t, 0, lambda node, l, r: l + r + 1))
    assert f(Tree([-1], [-1], value=[1.0])) == 1
    assert f(Tree([1, -1], [-1, -1], value=[1.0, 2.0])) == 2
    assert len(f._compiled) == 1
    assert f(Tree([1, -1], [-1, -1], word=[1, 2])) == 2
    assert f(Tree([1, -1], [-1, -1])) == 2
    assert len(f._compiled) == 3


def tree_collatz(t):
    return TREE(t, 0, lambda node, l, r: WHILE(
        lambda s: s[0] > 1, lambda s: (IF(s[0] % 2 == 0, lambda: s[0] // 2, lambda: 3 * s[0] + 1), s[1] + 1),
        (node.word + 1 + l + r, 0))[1])


def test_while_inside_tree_combine_on_random_trees():
    def ref_combine(node, l, r):
        k, steps = node.word + 1 + l + r, 0
        while k > 1:
            k, steps = (k // 2 if k % 2 == 0 else 3 * k + 1), steps + 1
        return steps
    f = jitad.jit(tree_collatz)
    for name in ("single", "random31-seed5", "random257-seed7", "zigzag1000"):
        tree = get_tree(name)
        assert f(tree) == reference(tree, 0, ref_combine), name
    assert len(f._compiled) == 1


def test_capture_of_staged_values_in_combine():
    f = jitad.jit(lambda t, w, b: TREE(t, b, lambda node, l, r: jitad.tanh(w * node.value + 0.5 * l - 0.25 * r)))
    for name in ("pair", "random100-seed6", "left-chain1000"):
        tree = get_tree(name)
        want = reference(tree, 0.1, lambda node, l, r: math.tanh(0.7 * node.value + 0.5 * l - 0.25 * r))
        assert f(tree, 0.7, 0.1) == pytest.approx(want, rel=1e-12, abs=1e-14)
    assert len(f._compiled) == 1


def test_very_deep_chain_completes_or_raises_resource_error():
    n = 200_000
    tree = Tree(np.r_[np.arange(1, n), -1], -np.ones(n, dtype=np.int64), value=np.ones(n))
    f = jitad.jit(lambda t: TREE(t, 0.0, lambda node, l, r: l + r + node.value))
    try:
        assert f(tree) == float(n)
    except jitad.ResourceError:
        pass
    assert f(Tree([-1], [-1], value=[2.0])) == 2.0


# -- a Tree is an input: copied, read-only --------------------------------------------

def test_tree_copies_its_arrays_and_is_read_only():
    left, right, value = [1, -1], [-1, -1], [1.0, 2.0]
    tree = Tree(left, right, value=value)
    left[0], value[1] = -1, 100.0
    assert tree.left.tolist() == [1, -1] and tree.fields["value"].tolist() == [1.0, 2.0]
    with pytest.raises(ValueError):
        tree.left[0] = -1
    with pytest.raises(ValueError):
        tree.fields["value"][0] = 3.0
    f = jitad.jit(lambda t: TREE(t, 0.0, lambda node, l, r: l + r + node.value))
    assert f(tree) == 3.0


def test_tree_copies_numpy_field_arrays():
    value = np.array([1.0, 2.0])
    tree = Tree([1, -1], [-1, -1], value=value)
    value[1] = 100.0              # the caller's array stays theirs
    assert tree.fields["value"].tolist() == [1.0, 2.0]


def test_root_other_than_zero():
    tree = Tree([-1, 0, -1], [-1, 2, -1], root=1, value=[1.0, 10.0, 100.0])
    f = jitad.jit(lambda t: TREE(t, 0.0, lambda node, l, r: l * 2.0 + r * 3.0 + node.value))
    assert f(tree) == 1.0 * 2.0 + 100.0 * 3.0 + 10.0


# -- construction errors ----------------------------------------------------------------

BAD_TREES = {
    "left index past the end": lambda: Tree([5], [-1]),
    "right index past the end": lambda: Tree([-1, -1], [-1, 2]),
    "index below -1": lambda: Tree([-2], [-1]),
    "node with two parents": lambda: Tree([1, -1, 1], [2, -1, -1]),
    "same child on both sides": lambda: Tree([1, -1], [1, -1]),
    "root out of range": lambda: Tree([-1], [-1], root=1),
    "negative root": lambda: Tree([-1, -1], [1, -1], root=-1),
    "root is a child (cycle)": lambda: Tree([1, -1], [-1, -1], root=1),
    "self loop": lambda: Tree([0], [-1]),
    "two-node cycle": lambda: Tree([1, 0], [-1, -1]),
    "left and right lengths differ": lambda: Tree([1, -1], [-1]),
    "field of the wrong length": lambda: Tree([-1], [-1], value=[1.0, 2.0]),
    "field of strings": lambda: Tree([-1], [-1], word=["a"]),
    "reserved field name": lambda: Tree([-1], [-1], index=[1]),
    "reserved field name is_leaf": lambda: Tree([-1], [-1], is_leaf=[1]),
}


@pytest.mark.parametrize("make", list(BAD_TREES.values()), ids=list(BAD_TREES))
def test_bad_tree_raises_argument_error(make):
    with pytest.raises(jitad.ArgumentError) as info:
        make()
    assert isinstance(info.value, TypeError) and isinstance(info.value, jitad.JitadError)
    assert str(info.value).startswith("Tree")


def test_non_integer_child_index_raises_argument_error():
    with pytest.raises(jitad.ArgumentError):
        Tree([1.5, -1], [-1, -1])


def test_tree_combine_must_keep_the_init_structure_and_types():
    tree = get_tree("pair")
    with pytest.raises(jitad.StagingError, match="different structures"):
        jitad.jit(lambda t: TREE(t, (0.0, 0.0), lambda node, l, r: l[0] + r[1]))(tree)
    with pytest.raises(jitad.StagingError):
        jitad.jit(lambda t: TREE(t, 0, lambda node, l, r: l + r + node.value))(tree)


def test_tree_of_a_non_tree_raises_argument_error():
    with pytest.raises(jitad.ArgumentError):
        TREE([1, 2, 3], 0.0, lambda node, l, r: l + r)


def test_tree_random_is_a_valid_tree_of_n_nodes():
    for n in (0, 1, 2, 17, 300):
        t = jitad.Tree.random(n, seed=n, value=np.arange(float(n)))
        assert t.size == n and len(t.order) == n   # every node reachable from the root
        assert jitad.jit(lambda t: TREE(t, 0, lambda node, l, r: l + r + 1))(t) == n
