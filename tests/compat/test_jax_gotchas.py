"""Behaviours JAX's documentation shows (its "common gotchas" page) that a renamed program
relies on: an index out of bounds is clamped in eager indexing too (iterating an array
still stops at its end), a pytree class's aux_data need only compare equal (a dict is fine,
and a changed one retraces), and `@jit` on a method binds its instance."""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp

jax = pytest.importorskip("jax")


def test_out_of_bounds_index_is_clamped_as_in_jax():
    for index in (11, -20, (np.array([1, 12, -20]),)):
        mine = jnp.arange(10.0)[index]
        np.testing.assert_array_equal(mine, jax.numpy.arange(10.0)[index])
    np.testing.assert_array_equal(jnp.arange(6.0).reshape(2, 3)[5, 1], 4.0)
    with pytest.raises(IndexError):   # a plain NumPy array keeps NumPy's rule
        np.arange(10.0)[11]


class Scaled:
    def __init__(self, x, options):
        self.x, self.options = x, options

    @jitad.jit
    def apply(self, y):
        return self.x * y if self.options["mul"] else y


jitad.tree_util.register_pytree_node(Scaled, lambda s: ((s.x,), s.options), lambda aux, ch: Scaled(ch[0], aux))


def test_dict_aux_data_and_jit_on_a_method():
    s = Scaled(2.0, {"mul": True})
    assert s.apply(3.0) == 6.0
    s.options = {"mul": False}   # a different aux_data: another compiled program
    assert s.apply(3.0) == 3.0
    assert Scaled(2.0, {"mul": True}).apply(4.0) == 8.0   # an equal one: the first again
    assert jitad.grad(lambda s: s.x * 3.0)(Scaled(2.0, [1, 2])).x == 3.0   # a list too


class Static:
    def __init__(self, k):
        self.k = k

    @jitad.jit(static_argnums=0)
    def times(self, y):
        return self.k * y


def test_jit_with_static_self_caches_by_the_instance_as_jax_does():
    s = Static(2.0)
    assert s.times(3.0) == 6.0
    s.k = 5.0   # JAX's documented pitfall: the same (hashable) instance reuses its compiled code
    assert s.times(3.0) == 6.0
    assert Static(5.0).times(3.0) == 15.0


def test_iteration_stops_at_the_end():
    assert [float(v) for v in jnp.arange(3.0)] == [0.0, 1.0, 2.0]
    assert [list(row) for row in jnp.arange(4.0).reshape(2, 2)] == [[0.0, 1.0], [2.0, 3.0]]
    with pytest.raises(TypeError):
        iter(jnp.asarray(1.0))
