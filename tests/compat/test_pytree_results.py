"""Pytree results built by the compiled entry: types, keys, key order and values from every
transformation; results the user holds are never overwritten by later calls."""
import collections
import sys
import typing

import jax
import numpy as np
import pytest

import jitad
from jitad.tree_util import register_pytree_node

jax.config.update("jax_enable_x64", True)

Point = collections.namedtuple("Point", "x y")


class Typed(typing.NamedTuple):
    w: object
    b: object


class Extended(collections.namedtuple("Base", "a b")):   # its own __new__: the entry calls the class
    def __new__(cls, a, b):
        return super().__new__(cls, a, b)


class Box:
    def __init__(self, items, tag):
        self.items, self.tag = items, tag


register_pytree_node(Box, lambda b: (b.items, b.tag), lambda tag, items: Box(tuple(items), tag))


class Refuses:
    def __init__(self, a):
        self.a = a


def _refuse(aux, children):
    if children[0] < 0:
        raise ValueError("Refuses: a negative value")
    return Refuses(children[0])


register_pytree_node(Refuses, lambda r: ((r.a,), None), _refuse)

A = np.arange(6.0).reshape(2, 3)


def _native(f):
    """The compiled entry answered (no Python dispatcher between the call and the result)."""
    return type(type(f).__call__).__name__ == "builtin_function_or_method"


def test_every_kind_comes_back_with_its_type_keys_order_and_values():
    def f(x, s):
        return {"z": 2 * x, "a": [x + 1, s, None], "m": (Point(s, 3 * s), Typed(x, 1.0)),
                "k": Extended(s, 2 * s), "b": Box((x, 5 * s), "tag"), "i": 7, "t": s > 1.0}
    jf = jitad.jit(f)
    for _ in range(2):
        r = jf(A, 2.0)
        assert list(r) == ["z", "a", "m", "k", "b", "i", "t"]   # as f built it
        np.testing.assert_array_equal(r["z"], 2 * A)
        assert type(r["a"]) is list and r["a"][1:] == [2.0, None]
        np.testing.assert_array_equal(r["a"][0], A + 1)
        p, t = r["m"]
        assert type(p) is Point and p == Point(2.0, 6.0) and type(t) is Typed and t.b == 1.0
        assert type(r["k"]) is Extended and r["k"] == (2.0, 4.0)
        assert type(r["b"]) is Box and r["b"].tag == "tag" and r["b"].items[1] == 10.0
        assert type(r["i"]) is int and r["i"] == 7 and r["t"] is True
    assert _native(jf)


@pytest.mark.parametrize("make", [tuple, list, lambda xs: Point(*xs), lambda xs: dict(zip("ba", xs)),
                                  lambda xs: None])
def test_each_container_alone_is_built_natively(make):
    jf = jitad.jit(lambda x: make([x * 2, x + 1]))
    want = make([A * 2, A + 1])
    for _ in range(2):
        got = jf(A)
        assert type(got) is type(want)
        assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
        for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
            np.testing.assert_array_equal(g, w)
    if isinstance(want, dict):
        assert list(got) == ["b", "a"]
    assert _native(jf)


def test_a_held_result_is_never_overwritten():
    jf = jitad.jit(lambda p: {k: 2 * v for k, v in p.items()})
    first = jf({"w": A, "b": A[0]})
    keep = {k: v.copy() for k, v in first.items()}
    for k in range(5):   # the pool reuses only arrays nobody holds
        later = jf({"w": A + k, "b": A[0] - k})
        assert all(later[n] is not first[n] for n in first)
    for n in keep:
        np.testing.assert_array_equal(first[n], keep[n])
    a, b = jf({"w": A, "b": A[0]}), jf({"w": A, "b": A[0]})
    assert a is not b and a["w"] is not b["w"]


def test_a_dropped_result_is_reused_and_references_balance():
    jf = jitad.jit(lambda x: Point(x * 2, [x, None]))
    jf(A)
    before = sys.getrefcount(Point), sys.getrefcount(None)
    for _ in range(200):
        r = jf(A)
    del r
    after = sys.getrefcount(Point), sys.getrefcount(None)
    assert after[0] == before[0] and abs(after[1] - before[1]) < 50   # (None: others use it too)


def test_non_string_dict_keys_still_come_back():
    jf = jitad.jit(lambda x: {2: x, 1: (x, None)})
    r = jf(1.5)
    assert r == {1: (1.5, None), 2: 1.5}


def test_a_raising_unflatten_raises_and_the_next_call_works():
    jf = jitad.jit(lambda x: (Refuses(x), x * A))
    with pytest.raises(ValueError, match="negative"):
        jf(-1.0)
    r = jf(2.0)
    assert type(r[0]) is Refuses and r[0].a == 2.0
    np.testing.assert_array_equal(r[1], 2 * A)


def _loss(p, x):
    return jitad.sum(jitad.tanh(p["w"] @ x + p["b"]) ** 2) + p["s"] ** 2


def _loss_jax(p, x):
    return jax.numpy.sum(jax.numpy.tanh(p["w"] @ x + p["b"]) ** 2) + p["s"] ** 2


P = {"w": np.arange(6.0).reshape(2, 3) / 10, "s": 0.5, "b": np.array([0.1, -0.2])}
X = np.linspace(-1, 1, 3)


def _same(got, want):
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


def test_gradients_come_back_as_dicts_of_the_right_values():
    want_v, want_g = jax.value_and_grad(_loss_jax)(P, X)
    g = jitad.grad(_loss)
    vg, step = jitad.value_and_grad(_loss), jitad.jit_grad(_loss)
    for _ in range(2):
        _same(g(P, X), want_g)
        for f in (vg, step):
            v, grads = f(P, X)
            assert type(grads) is dict and type(grads["s"]) is float
            np.testing.assert_allclose(v, want_v, rtol=1e-12)
            _same(grads, want_g)
    assert _native(step)   # (`grad` from Python dispatches in Python: it may decide on values)


def test_aux_keeps_the_key_order_the_function_built():
    def f(p, x):
        return _loss(p, x), {"second": p["s"] * 2, "first": [x * 2, None]}
    (v, aux), grads = jitad.value_and_grad(f, has_aux=True)(P, X)
    assert list(aux) == ["second", "first"] and type(aux["first"]) is list and aux["first"][1] is None
    np.testing.assert_allclose(aux["first"][0], X * 2)
    _same(grads, jax.grad(_loss_jax)(P, X))


def test_vmap_and_jacrev_results():
    xs = np.stack([X, 2 * X])
    out = jitad.vmap(lambda x: {"y": 2 * x, "n": Point(jitad.sum(x), x[0])})(xs)
    assert list(out) == ["y", "n"] and type(out["n"]) is Point
    np.testing.assert_allclose(out["y"], 2 * xs)
    np.testing.assert_allclose(out["n"].x, xs.sum(axis=1))

    def f(p):
        return {"o": jitad.tanh(p["w"] @ X + p["b"]), "s": [p["s"] * 3.0]}

    def f_jax(p):
        return {"o": jax.numpy.tanh(p["w"] @ X + p["b"]), "s": [p["s"] * 3.0]}
    got, want = jitad.jacrev(f)(P), jax.jacrev(f_jax)(P)
    assert list(got) == ["o", "s"] and type(got["s"]) is list and type(got["o"]) is dict
    _same(got, want)


def test_list_and_none_arguments_go_through_the_entry():
    jf = jitad.jit(lambda p, n, x: (p[0] * x, p[1][0] + x, n))
    for _ in range(2):
        r = jf([A, [2.0]], None, 1.5)
        np.testing.assert_array_equal(r[0], 1.5 * A)
        assert r[1:] == (3.5, None)
    assert _native(jf)
    assert jf([A, [2.0, 3.0]], None, 1.5)[1] == 3.5   # another structure: another signature
    assert jf((A, [2.0]), None, 1.5)[1] == 3.5
    assert jf([A, [2.0]], 4.0, 1.5)[2] == 4.0


def test_structures_pickle_and_keep_the_built_order():
    import pickle
    from jitad.pytree import flatten, with_built_order
    tree = {"z": 1.0, "a": (2.0, {"y": 1.0, "b": None}), "p": Point(1.0, [2.0])}
    td = with_built_order(tree, flatten(tree)[1])
    back = pickle.loads(pickle.dumps(td))
    assert back == td == flatten(tree)[1] and hash(back) == hash(td)
    rebuilt = back.unflatten([10.0, 20.0, 30.0, 40.0, 50.0])
    assert list(rebuilt) == ["z", "a", "p"] and list(rebuilt["a"][1]) == ["y", "b"]
    assert rebuilt["p"] == Point(30.0, [40.0]) and rebuilt["z"] == 50.0   # leaves in sorted-key order


def test_an_equal_aux_rebuilt_by_a_fresh_program_finds_the_code_compiled_for_the_first():
    def program(tag):   # each run makes a new function and a new (equal) aux object, as a script run again
        @jitad.jit
        def step(x):
            return Box((2 * x, x + 1), tuple(tag))
        return step

    first, again = program(["w", 1]), program(["w", 1])
    out, out2 = first(A), again(A + 1)
    assert again.compile_report().cache == "process"
    assert out.tag == out2.tag == ("w", 1) and out2.tag is out.tag
    np.testing.assert_array_equal(out2.items[0], 2 * (A + 1))
    other = program(["w", 2])(A)   # an unequal aux: code of its own, its own aux
    assert other.tag == ("w", 2)
    np.testing.assert_array_equal(other.items[1], A + 1)


def test_a_class_made_again_gets_its_own_instances_from_the_code_compiled_for_the_first():
    def program():   # a script run afresh: its classes are new objects of the same code
        class Pair:
            def __init__(self, a, b):
                self.a, self.b = a, b

        register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda _, c: Pair(*c))
        Named = collections.namedtuple("Named", "x y")
        return Pair, Named, jitad.jit(lambda x: (Pair(x, 2 * x), Named(x, x + 1)))

    (Pair1, Named1, f1), (Pair2, Named2, f2) = program(), program()
    p1, n1 = f1(A)
    p2, n2 = f2(A + 1)
    assert f2.compile_report().cache == "process"
    assert type(p1) is Pair1 and type(p2) is Pair2 and type(n1) is Named1 and type(n2) is Named2
    np.testing.assert_array_equal(p2.b, 2 * (A + 1))
    np.testing.assert_array_equal(n2.y, A + 2)


def test_an_argument_of_a_class_made_again_finds_the_code_compiled_for_the_first():
    def program():
        Params = collections.namedtuple("Params", "w b")
        return Params, jitad.jit(lambda p, x: p.w * x + p.b)

    (P1, f1), (P2, f2) = program(), program()
    np.testing.assert_array_equal(f1(P1(2.0, A), A), 2 * A + A)
    np.testing.assert_array_equal(f2(P2(3.0, A), A), 3 * A + A)
    assert f2.compile_report().cache == "process"
