"""Sorting (`sort`, `argsort`, `top_k`: NumPy's order, NaNs last, stable argsort; gradients
through the permutation) and NumPy's advanced indexing on any axis, against NumPy, JAX and
check_grads; the merge-sort lowering and the CUDA kernel (simulator) too."""
import numpy as np
import pytest

import jitad
import jitad.lower.sort as lower_sort
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


def _rows(dtype, shape=(6, 37), seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    x[1, 3] = x[1, 9] = np.nan
    x[2, :6] = 0.5                        # ties: a stable argsort keeps their order
    x[3, 4], x[3, 5], x[3, 6] = np.inf, -np.inf, -0.0
    x[4] = np.sort(x[4])[::-1]            # reversed
    return x


@pytest.fixture(params=["numpy_qsort", "merge_sort"])
def sort_path(request, monkeypatch):
    """`sort` through NumPy's vectorized quicksort (where this machine has it) and through
    the jitted merge sort."""
    if request.param == "merge_sort":
        monkeypatch.setattr(lower_sort, "FAST_SORT", set())
    return request.param


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [1, 2, 15, 16, 17, 37, 100, 1000])
def test_sort_and_argsort_match_numpy(dtype, n, sort_path):
    x = _rows(dtype, (6, max(n, 10)))[:, :n]
    got = jitad.jit(lambda x: (jitad.sort(x), jitad.argsort(x), jitad.sort(x, axis=0), x.argsort(axis=0)))(x)
    want = (np.sort(x), np.argsort(x, kind="stable"), np.sort(x, axis=0), np.argsort(x, axis=0, kind="stable"))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_sort_of_ints_bools_and_flattened():
    i = np.random.default_rng(1).integers(-3, 3, (4, 50))
    b = i > 0
    f = jitad.jit(lambda i, b: (jitad.sort(i), jitad.argsort(i), jitad.sort(b), jitad.sort(i, axis=None),
                                jitad.argsort(i, axis=None), np.sort(i, axis=0)))
    want = (np.sort(i), np.argsort(i, kind="stable"), np.sort(b), np.sort(i, axis=None),
            np.argsort(i, axis=None, kind="stable"), np.sort(i, axis=0))
    for g, w in zip(f(i, b), want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_descending_and_top_k_match_jax():
    x = np.array([[1.0, 3.0, 3.0, np.nan, 2.0, 3.0], [0.0, -1.0, 5.0, 5.0, -0.0, 2.0]])
    f = jitad.jit(lambda x: (jitad.sort(x, descending=True), jitad.argsort(x, descending=True), *jitad.top_k(x, 4)))
    got = f(x)
    want = (jnp.sort(x, descending=True), jnp.argsort(x, descending=True), *jax.lax.top_k(x, 4))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, np.asarray(w))
    np.testing.assert_array_equal(jitad.top_k(x, 2)[1], np.asarray(jax.lax.top_k(x, 2)[1]))   # eager


def test_sort_gradients_match_jax_and_check_grads():
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((4, 33)), rng.standard_normal((4, 33))

    def f(m, top_k):
        return lambda x: (m.sum(m.sort(x, axis=1) * w) + m.sum(m.sort(x, axis=0)[-1] ** 2)
                          + m.sum(top_k(x, 3)[0] ** 3))
    g = jitad.grad(f(jitad, jitad.top_k))(x)
    np.testing.assert_allclose(g, jax.grad(f(jnp, jax.lax.top_k))(x), rtol=1e-12)
    check_grads(f(jitad, jitad.top_k), (x,), order=2, modes=("fwd", "rev"))
    assert not np.any(jitad.grad(lambda x: jitad.sum(jitad.argsort(x) * x))(x) - jitad.argsort(x))


def test_sort_errors_name_the_function():
    with pytest.raises(jitad.ShapeError, match="`sort`: a 0-d array"):
        jitad.jit(lambda x: jitad.sort(x))(1.0)
    with pytest.raises(jitad.ShapeError, match="argsort"):
        jitad.jit(lambda x: jitad.argsort(x, axis=2))(np.ones((2, 3)))
    with pytest.raises(jitad.ArgumentError, match="top_k.*k=4"):
        jitad.top_k(np.ones(3), 4)


def test_sort_on_the_cuda_simulator():
    cuda = pytest.importorskip("numba.cuda")
    if not cuda.is_available():
        pytest.skip("no CUDA GPU and the simulator is off")
    x = _rows(np.float64, (5, 10))
    got = jitad.jit(lambda x: (jitad.sort(x), jitad.argsort(x, axis=0)), device="cuda")(x)
    np.testing.assert_array_equal(np.asarray(got[0]), np.sort(x))
    np.testing.assert_array_equal(np.asarray(got[1]), np.argsort(x, axis=0, kind="stable"))
    w = np.arange(36.0).reshape(4, 9)
    y = np.random.default_rng(3).standard_normal((4, 9))
    g = jitad.grad(lambda x: jitad.sum(jitad.sort(x) * w), device="cuda")(y)
    np.testing.assert_allclose(np.asarray(g), jitad.grad(lambda x: jitad.sum(jitad.sort(x) * w))(y))


# -- advanced indexing -------------------------------------------------------------

X = np.random.default_rng(4).standard_normal((4, 5, 6))
I5 = np.array([3, -1, 0, 4, -5])          # in range after counting from the end
I2 = np.array([[1], [2]])
MASK = np.array([True, False, True, True, False])
INDEXING = {
    "list_axis1": lambda x: x[:, [0, 2]],
    "array_axis1": lambda x: x[:, I5],
    "int_then_array": lambda x: x[1, :, I5],              # non-adjacent: the array's axis goes first
    "ellipsis_last_axis": lambda x: x[..., I5],
    "broadcast_pair": lambda x: x[I2, :, np.array([1, 2, 3])],
    "adjacent_pair": lambda x: x[:, I2, I5[:3]],
    "none_int_array": lambda x: x[None, :, 2, I5],
    "slice_none_between": lambda x: x[I2, 1:3, None, -2],
    "reversed_slice": lambda x: x[np.array([1, 2]), ::-1, np.array([0, 5])],
    "mask_axis1": lambda x: x[:, MASK],
    "none_then_list": lambda x: x[..., None, np.array([1, 1])],
    "ints_and_array": lambda x: x[2, 3, np.array([4, 5])],
}


@pytest.mark.parametrize("name", INDEXING)
def test_advanced_indexing_matches_numpy_and_jax_gradients(name):
    f = INDEXING[name]
    want = f(X)
    got = jitad.jit(f)(X)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    w = np.random.default_rng(5).standard_normal(want.shape)
    g = jitad.grad(lambda x: jitad.sum(f(x) * w))(X)
    np.testing.assert_allclose(g, jax.grad(lambda x: jnp.sum(f(x) * w))(X), rtol=1e-12)


def test_staged_indices_on_any_axis():
    i, j = np.array([1, -2, 3]), np.int64(-1)
    fns = [lambda x, i, j: x[:, i, j], lambda x, i, j: x[j, :, i], lambda x, i, j: x[:, j],
           lambda x, i, j: x[i, 1:, None], lambda x, i, j: x[..., i]]
    for f in fns:
        want = np.asarray(f(jnp.asarray(X), jnp.asarray(i), jnp.asarray(j)))
        got = jitad.jit(f)(X, i, j)
        np.testing.assert_array_equal(got, want)
        w = np.random.default_rng(6).standard_normal(want.shape)
        g = jitad.grad(lambda x, i, j: jitad.sum(f(x, i, j) * w))(X, i, j)
        np.testing.assert_allclose(g, jax.grad(lambda x: jnp.sum(f(x, i, j) * w))(X), rtol=1e-12)


def test_out_of_range_index_arrays_clamp_and_the_gradient_is_the_adjoint():
    idx = np.array([7, -9, 2])   # clamp to 5, 0, 2 on an axis of 6
    f = lambda x: x[:, 1, idx]
    np.testing.assert_array_equal(jitad.jit(f)(X), X[:, 1, [5, 0, 2]])
    check_grads(lambda x: jitad.sum(jitad.sin(f(x))), (X,), order=2, modes=("fwd", "rev"))
    k = np.array([9, -1])
    np.testing.assert_array_equal(jitad.jit(lambda x, k: x[:, k, k])(X, k), X[:, [4, 4], [5, 5]])


def test_indexing_errors_say_what_to_do():
    with pytest.raises(jitad.errors.IndexError_, match="do not broadcast"):
        jitad.jit(lambda x: x[:, np.array([0, 1]), np.array([0, 1, 2])])(X)
    with pytest.raises(jitad.StagingError, match="where"):
        jitad.jit(lambda x: x[:, x[0, :, 0] > 0])(X)
    with pytest.raises(jitad.ArgumentError, match="must be ints"):
        jitad.jit(lambda x: x[:, np.array([0.5])])(X)


def test_var_is_an_ordinary_method():
    x = np.arange(12.0).reshape(3, 4)
    np.testing.assert_allclose(jitad.jit(lambda x: x.var(axis=1, ddof=1))(x), x.var(axis=1, ddof=1))
    assert "__call__" not in vars(jitad.ir.graph.Var)
