"""`jitad.flatten_util.ravel_pytree` eagerly, where each structure's layout is kept: the
vector JAX's `ravel_pytree` gives, unravel giving back each leaf's shape and dtype as the
staged path does, and a kept layout never reused for leaves of another dtype or shape."""
import numpy as np
import pytest

import jitad
from jitad import tree_util as tu
from jitad.errors import ArgumentError
from jitad.flatten_util import ravel_pytree

jax = pytest.importorskip("jax")

MIXED = {"a": 1.0, "b": [np.arange(3), np.ones((2, 2), np.float32)], "c": (True, np.int32(4), 2),
         "d": np.float32(2.5), "e": np.zeros((0, 3))}


def _same_leaves(got, want):
    assert tu.tree_structure(got) == tu.tree_structure(want)
    for g, w in zip(tu.tree_leaves(got), tu.tree_leaves(want)):
        assert np.shape(g) == np.shape(w) and np.asarray(g).dtype == np.asarray(w).dtype, (g, w)
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("x64", (True, False))
def test_eager_is_the_staged_ravel(x64):   # with x64 off, int leaves are int32 both ways
    tree = MIXED
    before = jitad.config.read("jax_enable_x64")
    jitad.config.update("jax_enable_x64", x64)
    try:
        staged_flat, staged_back = jitad.jit(lambda t: (ravel_pytree(t)[0], ravel_pytree(t)[1](ravel_pytree(t)[0])))(tree)
        for _ in range(2):   # the first call makes the layout, the second reads it
            flat, unravel = ravel_pytree(tree)
            assert flat.dtype == np.asarray(staged_flat).dtype
            np.testing.assert_array_equal(flat, staged_flat)
            _same_leaves(unravel(flat), staged_back)
    finally:
        jitad.config.update("jax_enable_x64", before)


def test_values_are_jaxs_and_layouts_follow_the_leaves():
    from jax.flatten_util import ravel_pytree as jax_ravel
    with jax.enable_x64(True):
        for tree in ([np.arange(6.0).reshape(2, 3), np.float32(1.5)], [np.arange(6.0, dtype=np.float32), 2.0],
                     [np.arange(4.0).reshape(2, 2), np.float32(1.5)], [np.arange(4.0), np.float32(1.5)],
                     [np.arange(3), np.ones(2, np.float32)], (True, 2), [np.ones(2, np.float32), 2]):
            flat, unravel = ravel_pytree(tree)
            want, jax_unravel = jax_ravel(tree)
            assert flat.dtype == want.dtype
            np.testing.assert_array_equal(flat, want)
            _same_leaves(unravel(flat * 2), tu.tree_map(np.asarray, jax_unravel(want * 2)))


def test_unravel_checks_its_vector():
    flat, unravel = ravel_pytree([np.ones(3), np.zeros((2, 2))])
    with pytest.raises(ArgumentError, match=r"flat vector of shape \(7,\)"):
        unravel(np.ones(6))
    assert unravel(np.arange(7.0))[1][1, 1] == 6.0
    assert ravel_pytree([])[0].shape == (0,) and ravel_pytree([])[1](np.zeros(0)) == []
