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
