"""`jitad.Tree`: a Tree is immutable, copies and pickles rebuild
it (its descriptor holds this process's addresses), subclasses run as Trees, and no
construction input crashes: each either builds a tree a compiled TREE reads correctly
or raises a `JitadError`. What used to crash runs in a subprocess."""
import copy
import json
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jitad
from jitad import TREE, Tree
from jitad.forest import ImmutableError

PROD = "jitad.jit(lambda t, x: TREE(t, x, lambda node, l, r: l * r * node.value))"
prod = eval(PROD)


def small():
    """0:1.0 with children 1:2.0 and 2:3.0; prod(small(), x) = 6 x^4."""
    return Tree([1, -1, -1], [2, -1, -1], value=[1.0, 2.0, 3.0])


def run_python(code, *args, timeout=120):
    """Run `code` (source, or a script's path) in a fresh interpreter; it must exit
    normally. Return its last line of output."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    program = [str(code)] if isinstance(code, os.PathLike) else ["-c", textwrap.dedent(code)]
    proc = subprocess.run([sys.executable, *program, *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert proc.returncode == 0, (f"the child exited with {proc.returncode} (negative: killed by "
                                  f"a signal)\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc.stdout.strip().splitlines()[-1]


CHILD_HEADER = f"""
import copy, gc, pickle, sys
import numpy as np
import jitad
from jitad import TREE, Tree
prod = {PROD}
def small():
    return Tree([1, -1, -1], [2, -1, -1], value=[1.0, 2.0, 3.0])
def churn():   # reuse freed memory: a dangling descriptor would now read junk
    gc.collect()
    return [np.full(n, 1e300) for n in (3, 8, 16, 64)] + [bytes(200) for _ in range(1000)]
"""

# -- copies and pickles rebuild the descriptor -----------------------------------------------


@pytest.mark.parametrize("make_copy", [copy.copy, copy.deepcopy, lambda t: pickle.loads(pickle.dumps(t)),
                                       lambda t: pickle.loads(pickle.dumps(t, protocol=0))],
                         ids=["copy", "deepcopy", "pickle", "pickle-protocol0"])
def test_copies_own_their_descriptor(make_copy):
    t = small()
    t2 = make_copy(t)
    assert type(t2) is Tree and t2.address != t.address
    assert all(a.ctypes.data != b.ctypes.data for a, b in zip(t2._keep, t._keep))
    assert t2.left.tolist() == t.left.tolist() and t2.root == t.root and t2.order.tolist() == t.order.tolist()
    assert dict(t2.fields).keys() == {"value"} and t2.fields["value"].tolist() == [1.0, 2.0, 3.0]
    del t
    junk = [np.full(3, 1e300) for _ in range(100)]
    assert prod(t2, 2.0) == 96.0
    assert not t2.left.flags.writeable and not t2.fields["value"].flags.writeable
    del junk


@pytest.mark.parametrize("how", ["copy.copy(t)", "copy.deepcopy(t)", "pickle.loads(pickle.dumps(t))"])
def test_copy_then_drop_the_original_in_a_subprocess(how):
    """The issue's reproducer: `t2 = copy.deepcopy(t); del t; gc.collect(); prod(t2, 2.0)`."""
    out = run_python(CHILD_HEADER + f"""
t = small()
print(prod(t, 2.0))
t2 = {how}
del t
junk = churn()
print(prod(t2, 2.0), prod(t2, 1.0))
""")
    assert out == "96.0 6.0"


def test_pickle_through_a_file_read_by_another_process(tmp_path):
    trees = [small(), Tree.random(50, seed=3, value=np.linspace(0.9, 1.1, 50)), Tree([], [], value=[])]
    want = [prod(t, 1.5) for t in trees]
    path = tmp_path / "trees.pkl"
    path.write_bytes(pickle.dumps(trees))
    out = run_python(CHILD_HEADER + """
import json
trees = pickle.loads(open(sys.argv[1], "rb").read())
junk = churn()
print(json.dumps([prod(t, 1.5) for t in trees]))
""", str(path))
    assert json.loads(out) == want


SPAWN_CHILD = CHILD_HEADER + """
import json


class Named(Tree):
    pass


def work(t):
    return [prod(t, 1.5), type(t).__name__, getattr(t, "name", None)]


if __name__ == "__main__":
    import multiprocessing
    trees = [small(), Tree.random(30, seed=1, value=np.linspace(0.9, 1.1, 30)), Named([-1], [-1], value=[2.0])]
    trees[2].name = "leaf"
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        got = pool.map(work, trees)
    print(json.dumps([got, [work(t) for t in trees]]))
"""


def test_trees_through_a_spawn_pool(tmp_path):
    """multiprocessing with spawn (data-loader workers) pickles the trees to the workers."""
    script = tmp_path / "spawn_child.py"
    script.write_text(SPAWN_CHILD)
    got, want = json.loads(run_python(script))
    assert got == want and want[0] == [6 * 1.5 ** 4, "Tree", None] and want[2] == [2.0 * 1.5 ** 2, "Named", "leaf"]


# -- immutability ---------------------------------------------------------------------------


def test_fields_mapping_is_read_only():
    t = small()
    with pytest.raises(TypeError):
        t.fields["value"] = np.ones(3)
    with pytest.raises(TypeError):
        del t.fields["value"]
    assert t.fields["value"].tolist() == [1.0, 2.0, 3.0] and prod(t, 2.0) == 96.0


@pytest.mark.parametrize("stmt", ["t.left = np.zeros(3, np.int64)", "t.fields = {}", "t.root = 1",
                                  "t._address = 0", "t._type_code = 1", "t.size = 10**6", "t.extra = 1",
                                  "del t.left", "del t.order", "t.__class__ = Sub"])
def test_attributes_cannot_be_set_or_deleted(stmt):
    class Sub(Tree):
        pass
    t = small()
    with pytest.raises(ImmutableError, match="immutable") as info:
        exec(stmt, {"t": t, "np": np, "Sub": Sub})
    assert isinstance(info.value, AttributeError) and isinstance(info.value, jitad.JitadError)
    assert type(t) is Tree and prod(t, 2.0) == 96.0


def test_init_cannot_rebuild_a_tree():
    t = small()
    with pytest.raises(ImmutableError):
        t.__init__([-1], [-1], value=[5.0])
    assert t.size == 3 and prod(t, 2.0) == 96.0


@pytest.mark.parametrize("array", ["t.left", "t.right", "t.order", "t.fields['value']"])
def test_arrays_cannot_be_made_writable(array):
    t = small()
    arr = eval(array, {"t": t})
    with pytest.raises(ValueError):
        arr[0] = 7
    with pytest.raises(ValueError):
        arr.flags.writeable = True
    base = arr.base   # the immutable bytes the array views
    assert isinstance(base, bytes)
    assert prod(t, 2.0) == 96.0


def test_mutation_attempts_in_a_subprocess():
    """The issue's reproducers (garbage 5488.0, SIGSEGV), and `object.__setattr__`, the
    frozen-dataclass escape hatch: the descriptor keeps its own arrays alive, so the
    compiled code still reads the tree as built."""
    out = run_python(CHILD_HEADER + """
t = small()
print(prod(t, 2.0))
for stmt in ['t.fields["value"] = np.ones(3)', 't.left = np.array([5, 9, 7])', 'del t.right',
             't.left.flags.writeable = True', 't.fields["value"].flags.writeable = True']:
    try:
        exec(stmt)
    except (TypeError, AttributeError, ValueError):
        pass
junk = churn()
results = [prod(t, 2.0)]
object.__setattr__(t, "left", np.array([5, 9, 7]))
object.__setattr__(t, "fields", {})
junk = churn()
results.append(prod(t, 2.0))
print(*results)
""")
    assert out == "96.0 96.0"


# -- subclasses --------------------------------------------------------------------------


class Labelled(Tree):
    def __init__(self, left, right, label="", **fields):
        super().__init__(left, right, **fields)
        self.label = label


def test_a_subclass_runs_as_its_tree():
    t = Labelled([1, -1, -1], [2, -1, -1], label="abc", value=[1.0, 2.0, 3.0])
    t.label = "changed"   # a subclass's own attributes stay assignable
    assert t.label == "changed"
    with pytest.raises(ImmutableError):
        t.left = None
    f = eval(PROD)
    assert f(t, 2.0) == 96.0 and f(small(), 2.0) == 96.0 and f(t, 1.0) == 6.0
    assert len(f._compiled) == 1   # the same signature as a plain Tree
    assert TREE(t, 2.0, lambda node, l, r: l * r * node.value) == 96.0   # eager
    for t2 in (copy.deepcopy(t), pickle.loads(pickle.dumps(t))):
        assert type(t2) is Labelled and t2.label == "changed" and f(t2, 2.0) == 96.0


def test_a_shadowing_subclass_is_read_as_built():
    """A subclass whose `type` and `left` are not the tree's: compiled code still reads
    the tree as built."""
    out = run_python(CHILD_HEADER + textwrap.dedent(SHADOWING_SRC) + """
t = Shadowing([1, -1, -1], [2, -1, -1], value=[1.0, 2.0, 3.0])
t2 = pickle.loads(pickle.dumps(t))
print(prod(small(), 2.0), prod(t, 2.0), prod(t2, 2.0), type(t2).__name__)
""")
    assert out == "96.0 96.0 96.0 Shadowing"


SHADOWING_SRC = '''
class Shadowing(Tree):
    type = jitad.forest.TreeType((("a", "f64"), ("b", "f64"), ("value", "f64")))
    left = property(lambda self: np.array([2, 0, 1]))
'''


@pytest.mark.parametrize("make", [lambda: object.__new__(Tree), lambda: Tree.__new__(Tree),
                                  lambda: type("NoInit", (Tree,), {"__init__": lambda self: None})()],
                         ids=["object.__new__", "Tree.__new__", "subclass-without-super-init"])
def test_an_unbuilt_tree_is_an_argument_error(make):
    f = eval(PROD)
    assert f(small(), 2.0) == 96.0   # the native entry is installed
    with pytest.raises(jitad.ArgumentError, match="never ran"):
        f(make(), 2.0)
    with pytest.raises(jitad.ArgumentError, match="never ran"):
        eval(PROD)(make(), 2.0)   # the first call of a signature
    assert f(small(), 1.0) == 6.0
    with pytest.raises(jitad.ArgumentError, match="never ran"):
        TREE(make(), 2.0, lambda node, l, r: l * r)   # eager
    with pytest.raises(jitad.ArgumentError, match="never ran"):
        jitad.grad(lambda x, t: TREE(t, x, lambda node, l, r: l * r))(2.0, make())


def test_eager_tree_on_a_deep_chain():
    """Outside jit, TREE walks the post-order instead of recursing in Python."""
    n = 20_000
    t = Tree(np.r_[np.arange(1, n), -1], -np.ones(n, dtype=np.int64), value=np.ones(n))
    assert TREE(t, 0.0, lambda node, l, r: l + r + node.value) == float(n)
    assert TREE(Tree([], []), 2.5, lambda node, l, r: l + r) == 2.5
    order = []
    TREE(Tree([1, -1, -1], [2, -1, -1]), 0, lambda node, l, r: order.append(node.index))
    assert order == [1, 2, 0]


# -- construction checks -------------------------------------------------------------------

U64_MAX = np.iinfo(np.uint64).max

BAD_TREES = {
    "uint64 2^64-1 left": lambda: Tree(np.array([U64_MAX], np.uint64), [-1]),
    "uint64 2^63 right": lambda: Tree([-1], np.array([2**63], np.uint64)),
    "python int 2^64-1": lambda: Tree([2**64 - 1], [-1]),
    "python int 2^70": lambda: Tree([2**70], [-1]),
    "ragged left": lambda: Tree([[1], [2, 3]], [-1, -1]),
    "None left": lambda: Tree(None, None),
    "bool children": lambda: Tree([False], [False]),
    "string root": lambda: Tree([-1], [-1], root="0"),
    "float root": lambda: Tree([-1], [-1], root=0.5),
    "root 2^70": lambda: Tree([-1], [-1], root=2**70),
    "uint64 field beyond int64": lambda: Tree([-1], [-1], w=np.array([U64_MAX], np.uint64)),
    "ragged field": lambda: Tree([-1, -1], [-1, -1], w=[[1.0], [1.0, 2.0]]),
    "complex field": lambda: Tree([-1], [-1], w=[1j]),
    "object field": lambda: Tree([-1], [-1], w=[object()]),
    "datetime field": lambda: Tree([-1], [-1], w=np.array(["2020-01-01"], "datetime64[D]")),
    "2-D field": lambda: Tree([-1], [-1], w=[[1.0]]),
    "scalar field": lambda: Tree([-1], [-1], w=1.0),
    **{f"reserved field name {name}": (lambda name=name: Tree([-1], [-1], **{name: [1.0]}))
       for name in ("size", "order", "reachable", "index", "is_leaf", "_x")},
    "Tree.random(-1)": lambda: Tree.random(-1),
    "Tree.random seed": lambda: Tree.random(3, seed="x"),
    "Tree.random(2.5)": lambda: Tree.random(2.5),
    "from_nested pair": lambda: Tree.from_nested((1.0, None)),
    "from_nested string value": lambda: Tree.from_nested(("a", None, None)),
    "from_nested cycle": lambda: Tree.from_nested(_cyclic()),
}


def _cyclic():
    node = [1.0, None, None]
    node[2] = (2.0, node, None)
    return node


@pytest.mark.parametrize("make", list(BAD_TREES.values()), ids=list(BAD_TREES))
def test_bad_tree_raises_argument_error(make):
    with pytest.raises(jitad.ArgumentError, match="^Tree"):
        make()


def test_fields_named_as_descriptor_words_in_a_subprocess():
    """A field `size` or `reachable` was read as the descriptor's word of that name, an
    address: SIGSEGV; `order` read the post-order. Those names are now refused."""
    out = run_python(CHILD_HEADER + """
results = []
for name in ("size", "reachable", "order"):
    try:
        t = Tree([1, -1], [-1, -1], **{name: [1.5, 2.5]})
        results.append(jitad.jit(lambda t: TREE(t, 0.0, lambda node, l, r: l + r + getattr(node, name)))(t))
    except jitad.ArgumentError as e:
        results.append(str(e).split(";")[0])
print(results)
""")
    assert out == str([f"Tree: `{name}` is reserved" for name in ("size", "reachable", "order")])


def test_unusual_but_valid_inputs_build_correct_trees():
    f = jitad.jit(lambda t: TREE(t, 0.0, lambda node, l, r: l * 0.5 + r * 0.25 + node.value))
    strided = np.arange(6.0)[::2]                          # non-contiguous: copied
    t = Tree(np.array([1, -1, -1], np.int8), np.array([2, -1, -1], np.int16), root=np.int64(0), value=strided)
    assert f(t) == 0.5 * 2.0 + 0.25 * 4.0
    assert f(Tree([-1], [-1], value=np.array([1.5], np.float16))) == 1.5
    assert f(Tree(np.zeros(0), np.zeros(0), value=[])) == 0.0   # an empty float list is no index
    unreachable = Tree([-1, 2, 1], [-1, -1, -1], value=[1.0, 2.0, 3.0])   # nodes 1, 2: a cycle off the tree
    assert f(unreachable) == 1.0 and unreachable.order.tolist() == [0]
    shared = (1.0, None, None)                            # a shared subtree is copied, not a cycle
    assert Tree.from_nested((0.0, shared, shared)).size == 3
    deep = None
    for _ in range(50_000):                               # deeper than Python's recursion limit
        deep = (1.0, deep, None)
    assert Tree.from_nested(deep).size == 50_000


# -- fuzz: every input builds a correct tree or raises a JitadError ---------------------

SUM = jitad.jit(lambda t: TREE(t, 0.0, lambda node, l, r: l * 0.5 + r * 0.25 + node.index + node.value))


def python_sum(left, right, root, value):
    """The plain recursion SUM compiles (iteratively: chains are deep)."""
    if not len(left):
        return 0.0
    done, stack = {}, [(root, False)]
    while stack:
        k, ready = stack.pop()
        kids = [c for c in (left[k], right[k]) if c >= 0]
        if ready:
            l, r = (done.pop(c) if c >= 0 else 0.0 for c in (left[k], right[k]))
            done[k] = l * 0.5 + r * 0.25 + k + float(value[k])
        else:
            stack += [(k, True)] + [(c, False) for c in kids]
    return done[root]


FIELD_DTYPES = [np.float64, np.float32, np.int32, np.uint8, np.bool_, "strided"]


@st.composite
def tree_inputs(draw):
    """Arrays of a random tree with random node labels, sometimes corrupted."""
    n = draw(st.integers(0, 40))
    labels = draw(st.permutations(range(n)))
    left, right = [-1] * n, [-1] * n
    free = [(labels[0], 0), (labels[0], 1)] if n else []
    for k in labels[1:]:
        parent, side = free.pop(draw(st.integers(0, len(free) - 1)))
        (left if side == 0 else right)[parent] = k
        free += [(k, 0), (k, 1)]
    root = labels[0] if n else 0
    value = draw(st.lists(st.floats(-1e3, 1e3), min_size=n, max_size=n))
    corrupted = False
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        corrupted = True
        what = draw(st.sampled_from(["left", "right", "root", "value"]))
        if what == "root":
            root = draw(st.integers(-2, n + 1))
        elif what == "value":
            value = value + [1.0] if draw(st.booleans()) or not value else value[:-1]
        elif n:
            (left if what == "left" else right)[draw(st.integers(0, n - 1))] = draw(
                st.sampled_from([-2, -1, n, 2**63 - 1, -2**63]) | st.integers(-1, n - 1))
    index_dtype = draw(st.sampled_from([np.int64, np.int32, np.uint64]))
    field_dtype = draw(st.sampled_from(FIELD_DTYPES))
    return left, right, root, value, corrupted, index_dtype, field_dtype


def as_array(values, dtype):
    if dtype == np.uint64:   # as a user might: -1 wraps to 2^64-1
        return np.array(values, dtype=np.int64).astype(np.uint64)
    if dtype == np.int32:
        return np.array(values, dtype=np.int64).astype(np.int32)   # wraps the huge ones
    if dtype == "strided":
        return np.repeat(np.array(values, dtype=np.float64), 2)[::2]
    return np.array(values).astype(dtype)


@settings(max_examples=50, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(tree_inputs())
def test_random_trees_build_correctly_or_raise(inputs):
    left, right, root, value, corrupted, index_dtype, field_dtype = inputs
    left_arr, right_arr = as_array(left, index_dtype), as_array(right, index_dtype)
    value_arr = as_array(value, field_dtype)
    try:
        tree = Tree(left_arr, right_arr, root=root, value=value_arr)
    except jitad.JitadError:
        assert corrupted or (index_dtype == np.uint64 and -1 in left + right)
        return
    assert np.array_equal(tree.left, left_arr.astype(np.int64)) and np.array_equal(tree.right, right_arr)
    stored = value_arr.astype(tree.fields["value"].dtype)
    want = python_sum(tree.left, tree.right, tree.root, stored)
    assert SUM(tree) == pytest.approx(want, rel=1e-12, abs=1e-12)
    assert SUM(pickle.loads(pickle.dumps(tree))) == SUM(tree)
