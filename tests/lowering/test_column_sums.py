"""A reduction over the leading rows of a matrix with few rows (a bias gradient: the column
sums of a batch's cotangents) combines each column in registers and stores each result
once: no zero-filled output read back and added to row after row."""
import numpy as np
import pytest

import jitad


@pytest.mark.parametrize("shape", [(20, 50), (20, 26), (2, 3), (32, 9), (33, 9), (20, 5, 10)])
def test_column_sums_and_maxima_match_numpy_exactly(shape):
    x = np.random.default_rng(len(shape) + shape[0]).normal(0, 1, shape)
    s = jitad.jit(lambda x: jitad.sum(x, axis=0))
    m = jitad.jit(lambda x: jitad.max(x, axis=0, keepdims=True))
    np.testing.assert_array_equal(s(x), x.sum(axis=0))   # rows added in order, as NumPy does here
    np.testing.assert_array_equal(m(x), x.max(axis=0, keepdims=True))


def test_nan_and_integers():
    x = np.arange(60.0).reshape(20, 3)
    x[7, 1] = np.nan
    assert np.isnan(jitad.jit(lambda x: jitad.max(x, axis=0))(x)[1])
    assert np.isnan(jitad.jit(lambda x: jitad.sum(x, axis=0))(x)[1])
    k = np.arange(60).reshape(20, 3)
    np.testing.assert_array_equal(jitad.jit(lambda k: jitad.sum(k, axis=0))(k), k.sum(axis=0))


def test_a_few_rows_are_summed_in_registers_without_filling_the_output():
    f = jitad.jit(lambda x: jitad.sum(x, axis=0))
    f(np.ones((20, 50)))
    assert "memset" not in str(f.llvm_ir)   # the row-by-row form starts from a zero-filled output
    g = jitad.jit(lambda x: jitad.sum(x, axis=0))
    g(np.ones((40, 50)))   # more rows: the row-by-row form
    assert "memset" in str(g.llvm_ir)


def test_the_bias_gradient_of_a_batch():
    r = np.random.default_rng(3)
    x, w, b = r.normal(size=(20, 7)), r.normal(size=(7, 5)), r.normal(size=5)
    loss = lambda w, b: jitad.sum(jitad.tanh(x @ w + b) ** 2)
    jitad.testing.check_grads(loss, (w, b))
    gb = jitad.grad(loss, argnums=1)(w, b)
    h = np.tanh(x @ w + b)
    np.testing.assert_allclose(gb, (2 * h * (1 - h ** 2)).sum(axis=0), rtol=1e-13)
