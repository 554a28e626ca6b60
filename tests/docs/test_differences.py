"""The README's table of what still differs from JAX and autograd states facts: one test per
row, in the table's order. A change that removes a difference fails its row's test: then
update (or drop) the row in README.md along with the test."""
import warnings

import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad import grad, jit, lax
from jitad.errors import JitadWarning, StagingError


def test_python_decisions_on_values_under_grad_and_jit():
    g = grad(lambda x: x * x if x < 3 else 2 * x)
    assert g(1.0) == 2.0 and g(5.0) == 2.0 and g(2.0) == 4.0   # one gradient object, both branches
    count = grad(lambda x, n: sum(x for _ in range(n)))
    assert count(1.0, 3) == 3.0 and count(1.0, 4) == 4.0
    with pytest.raises(StagingError):
        jit(lambda x: x * 2 if x < 3 else x)(1.0)


def test_reverse_mode_through_while_loop_and_traced_fori_loop():
    assert grad(lambda x: lax.while_loop(lambda t: t > 1.0, lambda t: t * 0.5, x))(1e6) == 0.5 ** 20
    power = jit(lambda x, n: lax.fori_loop(0, n, lambda i, s: s * x, 1.0))
    assert grad(power)(2.0, 3) == 12.0
    jax = pytest.importorskip("jax")
    with pytest.raises(ValueError, match="Reverse-mode differentiation does not work"):
        jax.grad(lambda x: jax.lax.while_loop(lambda t: t > 1.0, lambda t: t * 0.5, x))(1e6)


def test_default_float_is_float64_and_float32_stays():
    assert jnp.zeros(2).dtype == np.float64 and type(jit(lambda x: x * 2)(1.0)) is float
    assert jit(lambda x: x * 2)(np.ones(2, np.float32)).dtype == np.float32
    jitad.config.update("jax_enable_x64", False)
    try:
        assert jnp.zeros(2).dtype == np.float32 and jnp.arange(3).dtype == np.int32
        assert jit(lambda x: x * 2.0)(np.ones(2)).dtype == np.float32
    finally:
        jitad.config.update("jax_enable_x64", True)


def test_other_dtypes():
    double = jit(lambda x: x * 2)
    assert double(np.ones(2, np.int32)).dtype == np.int64
    assert double(np.ones(2, np.float16)).dtype == np.float64
    out = double(np.ones(2, np.complex128))   # complex values: pairs of real parts (docs/complex.md)
    assert out.dtype == np.complex128 and out.tolist() == [2 + 0j, 2 + 0j]


def test_arrays_outside_staged_code():
    made = [jnp.array([1.0]), jnp.asarray([1.0]), jnp.zeros(2), jnp.ones(2), jnp.full(2, 1.0), jnp.eye(2),
            jnp.arange(3), jnp.linspace(0.0, 1.0, 3)]
    assert all(type(a) is jnp.Array and isinstance(a, np.ndarray) for a in made)
    y = jit(lambda x: x * 2)(np.ones(2))
    assert type(y) is jnp.Array and y.block_until_ready() is y and type(jit(lambda x: x * 2)(1.0)) is float
    assert y.at[0].set(5.0).tolist() == [5.0, 2.0] and np.shares_memory(np.asarray(y), y)
    autograd = pytest.importorskip("autograd")
    with pytest.raises(TypeError):   # autograd differentiates plain arrays only
        autograd.grad(lambda x: (x * x).sum())(y)
    assert autograd.grad(lambda x: (x * x).sum())(np.asarray(y)).tolist() == [4.0, 4.0]


def test_item_assignment():
    def put(x):
        x[0] = 1.0
        return x
    assert put(jnp.zeros(3)).tolist() == [1.0, 0.0, 0.0]
    with pytest.raises(TypeError):
        jit(put)(np.zeros(3))


def test_lax_loops_outside_jit_run_in_python():
    seen = []
    assert lax.while_loop(lambda c: c < 3, lambda c: seen.append(type(c)) or c + 1, 0) == 3
    assert seen == [int, int, int]


def test_numpy_random_numbers_are_drawn_at_each_call_of_grad_and_once_under_jit():
    rs = np.random.RandomState(0)
    noisy = grad(lambda x: x * rs.rand())
    first, second = noisy(1.0), noisy(1.0)
    assert first == np.random.RandomState(0).rand() and first != second
    frozen = jit(grad(lambda x: x * np.random.rand()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert frozen(1.0) == frozen(1.0)
    assert any(issubclass(w.category, JitadWarning) for w in caught)


def test_make_jaxpr_prints_jitads_ir():
    assert str(jitad.make_jaxpr(lambda x: x * 2.0)(1.0)) == str(jitad.trace(lambda x: x * 2.0, 1.0))
    assert str(jitad.trace(lambda x: x * 2.0, 1.0)).startswith("main(")


def test_precision_is_accepted():
    assert jnp.dot(np.ones(2), np.ones(2), precision=lax.Precision.HIGHEST) == 2.0


def test_data_dependent_shapes_in_staged_code():
    with pytest.raises(StagingError):
        jit(lambda x: jnp.nonzero(x))(np.ones(3))
    with pytest.raises(StagingError):
        jit(lambda x: x[x > 0])(np.ones(3))
    assert jnp.nonzero(np.array([0.0, 1.0]))[0].tolist() == [1]
