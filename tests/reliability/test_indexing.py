"""Reliability (silently wrong values): negative staged indices count from the
end as in NumPy and JAX (then out-of-range clamps, as JAX), in every backend and
derivative; bool arrays whose bytes are not 0/1 read as NumPy reads them; masked
arrays are refused instead of losing their mask."""
import numpy as np
import pytest

import jitad
from jitad import FOR
from jitad.ir.interpret import interpret
from jitad.testing import check_grads

E = np.arange(12.0).reshape(4, 3) + 1.0
W = np.array([1.0, -2.0, 3.0])
INDICES = [-1, -2, -4, -5, -100, 0, 3, 4, 10 ** 9, 2 ** 63 - 1, -2 ** 63]


def row(i, n=4):
    """NumPy's row for an index in range, JAX's clamp after wrapping otherwise."""
    return min(max(i + n if i < 0 else i, 0), n - 1)


def scatter(idx, value_rows, n=4):
    out = np.zeros((n, value_rows.shape[-1]))
    np.add.at(out, [row(int(i), n) for i in np.ravel(idx)], value_rows.reshape(-1, value_rows.shape[-1]))
    return out


@pytest.mark.parametrize("i", INDICES)
def test_staged_int_index_counts_from_the_end(i):
    f = lambda e, k: e[k] * 1.0                                    # noqa: E731
    want = E[row(i)]
    if -4 <= i < 4:
        np.testing.assert_array_equal(want, E[i])
    np.testing.assert_array_equal(jitad.jit(f)(E, i), want)
    np.testing.assert_array_equal(interpret(jitad.trace(f, E, 0), [E, i])[0], want)
    g = jitad.grad(lambda e, k: jitad.sum(e[k] * W))(E, i)
    np.testing.assert_array_equal(g, scatter([i], W[None]))
    t = np.arange(12.0).reshape(4, 3) * 0.5
    tangent = jitad.jit(lambda e, t, k: jitad.jvp(lambda e: e[k] * 2.0, (e,), (t,))[1])(E, t, i)
    np.testing.assert_array_equal(tangent, 2.0 * t[row(i)])


def test_scalar_element_and_static_negative_index():
    v = np.array([1.0, 2.0, 5.0])
    assert jitad.jit(lambda x, k: x[k])(v, -1) == 5.0
    np.testing.assert_array_equal(jitad.grad(lambda x, k: x[k] ** 2)(v, -1), [0.0, 0.0, 10.0])
    np.testing.assert_array_equal(jitad.jit(lambda e: e[-1])(E), E[-1])                # static
    np.testing.assert_array_equal(jitad.jit(lambda e: e[-2, -1])(E), E[-2, -1])
    np.testing.assert_array_equal(jitad.grad(lambda e: jitad.sum(e[-1] * W))(E), scatter([-1], W[None]))
    check_grads(lambda e, k: jitad.sum(jitad.tanh(e[k])), (E * 0.1, -3), modes=("fwd", "rev"))


@pytest.mark.parametrize("idx", [np.array([-1, 3, -4, 0, -1]), np.array([[-2, -5], [7, -1]]), np.array([-1])])
def test_index_array_gather_counts_from_the_end(idx):
    want = E[[row(int(i)) for i in idx.ravel()]].reshape(idx.shape + (3,))
    np.testing.assert_array_equal(jitad.jit(lambda e, k: e[k])(E, idx), want)            # staged
    np.testing.assert_array_equal(jitad.jit(lambda e: e[idx])(E), want)                  # constant
    np.testing.assert_array_equal(jitad.jit(lambda e: jitad.take(e, idx))(E), want)
    np.testing.assert_array_equal(jitad.jit(lambda e, k: jitad.take(e, k))(E, idx), want)
    np.testing.assert_array_equal(interpret(jitad.trace(lambda e, k: e[k], E, idx), [E, idx])[0], want)
    weights = np.arange(idx.size * 3, dtype=float).reshape(idx.shape + (3,))
    g = jitad.grad(lambda e, k: jitad.sum(jitad.take(e, k) * weights))(E, idx)
    np.testing.assert_array_equal(g, scatter(idx, weights))
    check_grads(lambda e: jitad.sum(jitad.sin(e[idx]) * weights), (E,), modes=("fwd", "rev"), order=2)


def test_unsigned_indices_beyond_int64_are_refused_not_wrapped_to_negative():
    huge = np.array([2 ** 64 - 1], np.uint64)
    with pytest.raises(jitad.ArgumentError, match="beyond the int64 range"):   # a constant
        jitad.jit(lambda e: e[huge])(E)
    with pytest.raises(jitad.ArgumentError, match="beyond the int64 range"):   # an argument
        jitad.jit(lambda e, k: e[k])(E, huge)
    np.testing.assert_array_equal(jitad.jit(lambda e, k: e[k])(E, np.array([3], np.uint64)), E[[3]])


def test_take_with_a_list_of_negative_indices_matches_numpy():
    np.testing.assert_array_equal(jitad.jit(lambda e: jitad.take(e, [-1, -3, 0]))(E), np.take(E, [-1, -3, 0], 0))


def test_for_loop_index_counting_from_the_end():
    """xs[-1 - i] in a FOR body reads the rows in reverse (staged negative indices)."""
    xs = np.array([1.0, 2.0, 3.0, 4.0])

    def f(x):
        return FOR(0, 4, lambda i, s: s * 0.5 + x[-1 - i], 0.0)
    want = ((4.0 * 0.5 + 3.0) * 0.5 + 2.0) * 0.5 + 1.0
    assert jitad.jit(f)(xs) == want
    np.testing.assert_allclose(jitad.grad(f)(xs), [1.0, 0.5, 0.25, 0.125])
    check_grads(f, (xs,), modes=("fwd", "rev"), order=2)


def test_one_hot_product_with_a_negative_label_is_a_zero_row():
    """`one_hot(labels, n) @ W` takes a fast gather path; a negative label's one-hot row
    is zero (as NumPy's `labels[:, None] == arange(n)`), not the last row."""
    labels = np.array([1, -1, 3, 4])
    hot = (labels[:, None] == np.arange(4)).astype(float)
    f = lambda e, k: jitad.one_hot(k, 4) @ e                       # noqa: E731
    np.testing.assert_array_equal(jitad.jit(f)(E, labels), hot @ E)
    np.testing.assert_array_equal(jitad.grad(lambda e, k: jitad.sum(f(e, k) * W))(E, labels), hot.T @ np.tile(W, (4, 1)))


# -- the GPU backend (numba-cuda simulator without a GPU) ------------------------------

@pytest.mark.gpu
def test_gpu_negative_indices_and_their_gradients():
    cuda = pytest.importorskip("numba.cuda")
    if not cuda.is_available():
        pytest.skip("no CUDA GPU and the simulator is off")
    idx = np.array([-1, 3, -4, -7, 9, -1])
    np.testing.assert_array_equal(jitad.jit(lambda e, k: e[k], device="cuda")(E, -1), E[-1])
    np.testing.assert_array_equal(jitad.jit(lambda e, k: e[k], device="cuda")(E, idx), E[[3, 3, 0, 0, 3, 3]])
    g = jitad.grad(lambda e, k: jitad.sum(e[k] * W), device="cuda")(E, -2)
    np.testing.assert_array_equal(g, scatter([-2], W[None]))
    weights = np.arange(18.0).reshape(6, 3)
    g = jitad.grad(lambda e, k: jitad.sum(jitad.take(e, k) * weights), device="cuda")(E, idx)
    np.testing.assert_array_equal(g, scatter(idx, weights))
    check_grads(lambda e: jitad.sum(jitad.sin(e[idx]) * weights), (E,), device="cuda")


# -- bool arrays whose bytes are not 0/1 ---------------------------------------------

DIRTY = np.array([2, 0, 1, 255], np.uint8).view(bool)      # NumPy reads it as [T, F, T, T]
CLEAN = DIRTY.astype(np.uint8).astype(bool)                # (`astype(bool)` keeps the bytes)

BOOL_CASES = {
    "sum as ints": lambda m: jitad.sum(jitad.convert(m, "i64")),
    "where": lambda m: jitad.sum(jitad.where(m, 1.0, 0.0)),
    "times a float": lambda m: jitad.sum(m * 1.5),
    "not": lambda m: jitad.sum(jitad.convert(~m, "i64")),
    "and": lambda m: jitad.sum(jitad.convert(m & m, "i64")),
    "== True": lambda m: jitad.sum(jitad.convert(m == True, "i64")),   # noqa: E712
}


@pytest.mark.parametrize("name", BOOL_CASES)
def test_bool_bytes_other_than_0_and_1_read_as_numpy_reads_them(name):
    fn = BOOL_CASES[name]
    f = jitad.jit(fn)
    want = f(CLEAN)
    assert f(DIRTY) == want            # the fast entry sends it to the dispatcher, which cleans it
    assert f(DIRTY[::-1]) == want      # (non-contiguous: copied)
    assert f(CLEAN) == want and f(DIRTY) == want
    assert jitad.jit(lambda: fn(DIRTY))() == want                 # a captured constant
    big = np.zeros(1000, np.uint8)
    big[::7] = 3
    assert jitad.jit(fn)(big.view(bool)) == jitad.jit(fn)(big.astype(bool))


def test_dirty_bools_in_a_pytree_and_a_grad():
    loss = lambda x, p: jitad.sum(jitad.where(p["mask"], x, 0.0) ** 2)   # noqa: E731
    x = np.array([1.0, 2.0, 3.0, 4.0])
    g = jitad.grad(loss)(x, {"mask": DIRTY})
    np.testing.assert_array_equal(g, 2.0 * x * [1, 0, 1, 1])
    assert jitad.jit(loss)(x, {"mask": DIRTY}) == 1.0 + 9.0 + 16.0


def test_clean_bool_arrays_are_not_copied():
    from jitad.lower.compile import _canonical
    from jitad.ir.types import Type
    assert _canonical(CLEAN, Type("bool", (4,))) is CLEAN
    fixed = _canonical(DIRTY, Type("bool", (4,)))
    assert fixed.view(np.uint8).tolist() == [1, 0, 1, 1]
    assert DIRTY.view(np.uint8).tolist() == [2, 0, 1, 255]   # the input is never written


@pytest.mark.gpu
def test_gpu_dirty_bools():
    cuda = pytest.importorskip("numba.cuda")
    if not cuda.is_available():
        pytest.skip("no CUDA GPU and the simulator is off")
    f = jitad.jit(BOOL_CASES["where"], device="cuda")
    assert f(DIRTY) == 3.0


# -- ndarray subclasses -------------------------------------------------------------

def test_masked_arrays_are_refused():
    m = np.ma.MaskedArray([1.0, 2.0, 3.0], mask=[False, True, False])
    f = jitad.jit(lambda x: jitad.sum(x))
    for call in (lambda: f(m), lambda: jitad.grad(lambda x: jitad.sum(x))(m), lambda: f({"a": m})):
        with pytest.raises(jitad.ArgumentError, match=r"masked array.*filled"):
            call()
    assert f(m.filled(0.0)) == 4.0
    with pytest.raises(jitad.ArgumentError, match="masked"):   # after the signature is compiled
        f(m)
    with pytest.raises(jitad.ArgumentError, match="masked"):
        jitad.jit(lambda x: jitad.sum(x))(np.ma.MaskedArray(1.0, mask=True))
    with pytest.raises(jitad.ArgumentError, match="masked array.*in staged code"):   # a constant
        jitad.jit(lambda x: jitad.sum(x * m))(np.ones(3))


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")   # np.matrix
def test_other_ndarray_subclasses_are_read_as_their_data():
    mat = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    f = jitad.jit(lambda x: x * x)      # elementwise, not np.matrix's product
    out = f(mat)
    assert type(out) is jitad.numpy.Array   # a plain array (jitad.numpy.Array, an ndarray), not a matrix
    np.testing.assert_array_equal(out, np.asarray(mat) ** 2)
    g = jitad.grad(lambda x: jitad.sum(x @ x))(mat)
    assert type(g) is jitad.numpy.Array and g.shape == (2, 2)
    a = np.asarray(mat)
    np.testing.assert_allclose(g, np.ones((2, 2)) @ a.T + a.T @ np.ones((2, 2)))
