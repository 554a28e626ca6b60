"""Static arguments select compiled code by type as well as value: values Python calls
equal (`True == 1`, `2.0 == 2`) may trace to different programs."""
import collections

import jax
import numpy as np
import pytest

import jitad


def _kind(x, n):
    """x scaled by a factor that depends on the static argument's type."""
    if isinstance(n, bool):
        return x * 10.0
    if isinstance(n, float):
        return x * 100.0
    if isinstance(n, tuple):
        return x * sum(_kind(1.0, m) for m in n)
    return x * n


def test_bool_int_and_float_compile_apart():
    f = jitad.jit(_kind, static_argnums=1)
    ref = jax.jit(_kind, static_argnums=1)
    for n in (1, True, 2, 2.0, 1.0):
        assert f(2.0, n) == ref(2.0, n) == _kind(2.0, n), n
    assert [f(2.0, n) for n in (True, 1, 1.0)] == [20.0, 2.0, 200.0]   # each call after the others


def test_types_inside_tuples_are_part_of_the_key():
    f = jitad.jit(_kind, static_argnums=1)
    assert f(1.0, (1, 2)) == 3.0
    assert f(1.0, (True, 2)) == 12.0
    assert f(1.0, (1, 2.0)) == 101.0
    Pair = collections.namedtuple("Pair", "a b")
    g = jitad.jit(lambda x, p: x * (7.0 if isinstance(p, Pair) else 1.0), static_argnums=1)
    assert g(1.0, (1, 2)) == 1.0
    assert g(1.0, Pair(1, 2)) == 7.0


def test_equal_static_values_still_share_one_compile():
    f = jitad.jit(_kind, static_argnums=1)
    f(1.0, (1, 2))
    f(1.0, (1, 2))
    assert len(f._compiled) == 1


def test_unhashable_static_argument_is_named():
    f = jitad.jit(_kind, static_argnums=1)
    with pytest.raises(jitad.errors.ArgumentError, match="list"):
        f(np.float64(1.0), [1, 2])


def test_compiled_call_with_static_arguments_skips_the_dispatcher():
    """Once a signature is compiled, a call with the same static values runs its native
    entry on the other arguments (`api._static_entry`); a new static value, type, count or
    shape goes back through the dispatcher, which compiles or finds that signature."""
    f = jitad.jit(lambda x, n, y: x * n + y, static_argnums=1)
    ref = jax.jit(lambda x, n, y: x * n + y, static_argnums=1)
    x, y = np.arange(4.0), np.ones(4)
    for n, xs in [(2, x), (2, x), (3, x), (2, x), (2.0, x), (True, x), (2, x[:3]), (2, x)]:
        np.testing.assert_array_equal(f(xs, n, y[:len(xs)]), ref(xs, n, y[:len(xs)]))
    assert type(f).__call__ is not jitad.api.Jitted.__call__   # the last signature's entry is installed
    assert f(x, 2, y).tolist() == [1.0, 3.0, 5.0, 7.0]
    assert f(x[:2], 2, y[:2]).tolist() == [1.0, 3.0]   # the entry refuses the shape: the dispatcher
    assert f(x, 2, y=y).tolist() == [1.0, 3.0, 5.0, 7.0]   # a keyword: the dispatcher
    assert len(f._compiled) == 6   # 2, 3, 2.0, True at 4 elements; 2 at 3 and at 2 (the keyword call binds as positional)
    two = jitad.jit(lambda x, a, b: x * a - b, static_argnums=(1, 2))
    assert [two(1.0, 2, 3), two(1.0, 2, 3), two(1.0, 2, 4), two(1.0, 2.0, 3)] == [-1.0, -1.0, -2.0, -1.0]
    g = jitad.jit(lambda x, n: x ** n, static_argnums=1)
    g(2.0, 3)
    assert jitad.grad(lambda x: g(x, 3))(2.0) == 12.0   # inside a trace: inlined, as before


def test_static_entry_of_an_evicted_signature_is_not_called():
    f = jitad.jit(lambda x, n: x * n, static_argnums=1)
    f.max_signatures = 1
    assert f(1.0, 2) == 2.0 and f(1.0, 2) == 2.0
    assert f(1.0, 3) == 3.0   # evicts n = 2
    assert f(1.0, 2) == 2.0 and list(f._compiled)[0][1] == ((int, 2),)


def test_static_tuple_runs_the_entry_when_it_is_the_same_object():
    """A static tuple of plain values: the installed call runs the entry when the very
    object comes again; an equal tuple, even one whose items differ in type, goes through
    the dispatcher's key (`(1, 2)` and `(True, 2)` compile apart)."""
    f = jitad.jit(_kind, static_argnums=1)
    ones, same_values = (1, 2), (1, 2)
    assert f(np.ones(2), ones).tolist() == [3.0, 3.0]
    assert f(np.ones(2), ones).tolist() == [3.0, 3.0] and type(f).__call__ is not jitad.api.Jitted.__call__
    assert f(np.ones(2), same_values).tolist() == [3.0, 3.0] and len(f._compiled) == 1
    assert f(np.ones(2), (True, 2)).tolist() == [12.0, 12.0] and len(f._compiled) == 2
    assert f(np.ones(2), (1, 2.0)).tolist() == [101.0, 101.0]
