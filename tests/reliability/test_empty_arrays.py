"""Empty values in staged code stay staged (found by the differential fuzzer): a row of an
empty array read at a staged index (each step of a `scan` over one) was a NumPy constant,
so a static index past its end raised NumPy's IndexError where staged code clamps, as
`jax.jit` does."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp

jax.config.update("jax_enable_x64", True)
XS = np.zeros((2, 3, 0, 2))


def test_a_scan_over_empty_rows_indexes_as_staged_code():
    def step(n):
        return lambda c, x: (c, n.abs(x[4]))
    mine = jitad.jit(lambda xs: jitad.scan(step(jnp), 0.0, xs)[1])(XS)
    theirs = jax.jit(lambda xs: jax.lax.scan(step(jjnp), 0.0, xs)[1])(XS)
    assert mine.shape == theirs.shape == (2, 0, 2) and mine.dtype == theirs.dtype


def test_a_staged_index_into_an_empty_row():
    out = jitad.jit(lambda xs, j: xs[j][5])(XS, 1)
    assert out.shape == jax.jit(lambda xs, j: xs[j][5])(XS, 1).shape == (0, 2)
    g = jitad.grad(lambda xs: jitad.scan(lambda c, x: (c + jnp.sum(x[4]), x[4]), 0.0, xs, checkpoints=1)[0])(XS)
    assert g.shape == XS.shape


def test_plain_arrays_stay_plain():
    assert type(jnp.asarray(np.zeros((2, 0)))[np.array([1])]) is not jitad.staging.Staged


def test_an_empty_batch_of_products_with_a_shared_matrix():
    # the batched_products pass divided by the batch size: ZeroDivisionError at compile time
    x = np.ones((2, 3, 1), np.float32)
    def f(n, x):
        return x[:1] @ x[np.zeros((0, 1), np.int64), -2]
    mine, theirs = jitad.jit(lambda x: f(jnp, x))(x), jax.jit(lambda x: f(jjnp, x))(x)
    assert mine.shape == theirs.shape == (0, 3, 1) and mine.dtype == theirs.dtype
    out = jitad.jit(jitad.vmap(lambda a, b: a @ b, in_axes=(0, None)))(np.ones((0, 2, 3)), np.ones((3, 4)))
    assert out.shape == (0, 2, 4)


def test_products_with_an_empty_axis_beside_a_batch_as_numpy():
    # a batched matmul against one matrix reshaped with -1, which an empty array leaves ambiguous
    pairs = [((0, 2), (0, 2, 1)), ((2, 3, 0), (0, 5)), ((0, 2), (4, 2, 1)), ((0, 2), (1, 2, 3)), ((2, 0, 3), (3, 2))]
    for sa, sb in pairs:
        a, b = np.arange(1.0, 1 + np.prod(sa)).reshape(sa), np.arange(1.0, 1 + np.prod(sb)).reshape(sb)
        want = a @ b
        for got in (jnp.matmul(a, b), jitad.jit(lambda a, b: a @ b)(a, b)):
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
        ga, gb = jitad.grad(lambda a, b: jnp.sum(a @ b), argnums=(0, 1))(a, b)
        want_a, want_b = jax.grad(lambda a, b: jjnp.sum(a @ b), argnums=(0, 1))(a, b)
        np.testing.assert_array_equal(ga, want_a)
        np.testing.assert_array_equal(gb, want_b)


def test_the_product_of_an_empty_array_is_staged():
    # (a fuzz finding) a Python branch on it under jit raises, as on an empty sum and as in
    # JAX; the product was a NumPy constant 1 and the branch was taken silently
    def f(n):
        def body(x):
            return x * 2.0 if float(n.prod(x[:0])) > 0 else -x
        return body
    for x in (np.zeros((0, 2)), np.ones(3)):
        with pytest.raises(jitad.errors.StagingError):
            jitad.jit(f(jnp))(x)
        with pytest.raises(jax.errors.ConcretizationTypeError):
            jax.jit(f(jjnp))(x)
    for dtype in ("float64", "float32", "int64", "bool"):
        x = np.zeros((0, 2), dtype)
        for kw in ({}, {"axis": 0}, {"axis": 1, "keepdims": True}):
            got = np.asarray(jitad.jit(lambda a: jnp.prod(a, **kw))(x))
            want = np.prod(x, **kw)
            assert got.dtype == want.dtype and got.shape == want.shape and (got == want).all()


REDUCTIONS_OF_NOTHING = {
    "min-initial": lambda n, lax, x: n.min(x, axis=1, where=np.array(False), initial=-0.0),
    "max-initial": lambda n, lax, x: n.max(x, axis=(0, 1), keepdims=True, initial=2.0),
    "reduce_max": lambda n, lax, x: lax.reduce_max(x, (1,)),
    "reduce_and": lambda n, lax, x: lax.reduce_and(x.astype(n.int64), (1, 2)),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS_OF_NOTHING))
def test_a_reduction_over_an_empty_axis_of_a_staged_array_is_staged(name):
    # its value is a constant (the identity, or initial=), but it is computed from a staged
    # value: a Python branch on it raises under jit, as JAX's does (it returned a NumPy array)
    fn = REDUCTIONS_OF_NOTHING[name]
    x = np.zeros((2, 0, 2))

    def branch(n, lax):
        return lambda x: fn(n, lax, x) if bool(n.any(fn(n, lax, x) > 0)) else -fn(n, lax, x)
    with pytest.raises(jitad.errors.StagingError):
        jitad.jit(branch(jnp, jitad.lax))(x)
    with pytest.raises(jax.errors.ConcretizationTypeError):
        jax.jit(branch(jjnp, jax.lax))(x)
    mine, theirs = jitad.jit(lambda x: fn(jnp, jitad.lax, x))(x), fn(jjnp, jax.lax, x)
    np.testing.assert_array_equal(mine, theirs)
    assert mine.dtype == theirs.dtype and (np.signbit(mine) == np.signbit(theirs)).all()
