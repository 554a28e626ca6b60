"""Where JAX and autograd programs used to meet a different API, a crash or a silently
different value: argnums order, vjp of vjp, vmap inside jit, float32 results, einsum
broadcasting, eigh signs, cholesky(lower=), custom_vjp(nondiff_argnums=), check_grads's two
call forms, static index clamping, NumPy constants indexed by staged values, and the NumPy
functions autograd's test suite uses (values against NumPy, derivatives against JAX)."""
import functools

import numpy as np
import pytest

import jitad
from jitad.testing import check_grads

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


def _close(got, want, **tol):
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), **(tol or dict(rtol=1e-12, atol=1e-12)))


# -- a tuple argnums keeps the order asked --------------------------------------------

def _f4(m):
    return lambda a, b, c, d: m.sum(a * b * 2.0 + d * b ** 2 + m.sin(c) * a)


ARGS4 = (0.7, np.array([1.0, 2.0]), 0.3, np.array([0.5, -1.5]))


@pytest.mark.parametrize("argnums", [(3, 1), (2, 0, 1), (1, 3, 0)])
def test_grad_and_value_and_grad_keep_argnums_order(argnums):
    want = jax.grad(_f4(jnp), argnums=argnums)(*ARGS4)
    _close(jitad.grad(_f4(jitad), argnums=argnums)(*ARGS4), want)
    value, g = jitad.value_and_grad(_f4(jitad), argnums=argnums)(*ARGS4)
    _close(g, want)
    _close(jitad.jit_grad(argnums=argnums)(_f4(jitad))(*ARGS4)[1], want)


def test_jacobians_and_hessian_keep_argnums_order():
    f = lambda m: lambda a, b: m.sin(a) * b ** 2 + a   # noqa: E731
    x, y = np.array([0.3, -0.4]), np.array([1.5, 0.5])
    for ours, theirs in ((jitad.jacrev, jax.jacrev), (jitad.hessian, jax.hessian)):   # hessian: jacfwd(jacrev)
        g = ours(lambda a, b: jitad.sum(f(jitad)(a, b)) if ours is jitad.hessian else f(jitad)(a, b), argnums=(1, 0))
        h = theirs(lambda a, b: jnp.sum(f(jnp)(a, b)) if ours is jitad.hessian else f(jnp)(a, b), argnums=(1, 0))
        _close(g(x, y), h(x, y))


# -- vjp of a function that calls vjp ------------------------------------------------------

def _inner_vjp(m_vjp, m):
    def f(x):
        _, pullback = m_vjp(lambda y: m.sin(y) * y ** 2, x)
        return pullback(m.ones_like(x) if hasattr(m, "ones_like") else 1.0)[0] * 2.0
    return f


@pytest.mark.parametrize("x", [0.5, np.array([0.1, -0.7, 1.3])], ids=["scalar", "vector"])
def test_vjp_of_a_function_that_calls_vjp(x):
    ct = 1.0 if np.ndim(x) == 0 else np.array([1.0, 2.0, -1.0])
    got = jitad.vjp(_inner_vjp(jitad.vjp, jitad), x)[1](ct)
    want = jax.vjp(_inner_vjp(jax.vjp, jnp), x)[1](ct)
    _close(got, want)


# -- vmap inside jit with an unbatched constant ---------------------------------------------

def test_vmap_inside_jit_with_an_in_axes_none_constant():
    x = np.arange(3.0)
    f = jitad.jit(lambda x: jitad.vmap(lambda a, c: a * c, in_axes=(0, None))(x, 2.0))
    np.testing.assert_array_equal(f(x), 2.0 * x)
    table = np.array([1.0, -1.0])
    g = jitad.jit(lambda x: jitad.vmap(lambda a, t, k: a * t + k, in_axes=(0, None, None))(x, table, 3))
    np.testing.assert_array_equal(g(np.ones((4, 2))), np.ones((4, 2)) * table + 3)


# -- float32 stays float32 -----------------------------------------------------------------

REDUCTIONS = ["sum", "mean", "var", "std", "prod", "max", "min", "cumsum", "cumprod", "logsumexp"]


@pytest.mark.parametrize("name", REDUCTIONS)
def test_float32_reductions_stay_float32(name):
    x = np.linspace(0.5, 1.5, 6, dtype=np.float32).reshape(2, 3)
    fn = getattr(jitad, name)
    ref = functools.partial(jax.scipy.special.logsumexp, axis=-1) if name == "logsumexp" else getattr(np, name)
    want = np.asarray(ref(x))
    for got in (fn(x), jitad.jit(fn)(x), jitad.jit(lambda x: fn(x, axis=0))(x)):
        assert np.asarray(got).dtype == np.float32, (name, type(got))
    # a scalar comes back as NumPy's scalar type; an array as jitad.numpy.Array (an ndarray)
    assert type(jitad.jit(fn)(x)) is (type(np.sum(x)) if want.ndim == 0 else jitad.numpy.Array)
    np.testing.assert_allclose(jitad.jit(fn)(x), want, rtol=1e-6)
    assert jitad.linalg.norm(x).dtype == np.float32 == jitad.jit(jitad.linalg.norm)(x).dtype


def test_float32_scalar_results_and_gradients_are_numpy_float32():
    x = np.arange(4, dtype=np.float32)
    loss = lambda w: jitad.sum((w * x - 1.0) ** 2)   # noqa: E731
    value, g = jitad.value_and_grad(loss)(np.float32(0.5))
    assert type(value) is np.float32 and type(g) is np.float32
    assert type(jitad.jit(lambda a: a * 2.0)(1.5)) is float   # float64 scalars stay Python floats


@pytest.mark.parametrize("fn", [lambda x: jitad.logaddexp(x, 1.0), lambda x: jitad.clip(x, 0.1, 0.5),
                                lambda x: jitad.maximum(x, 0), lambda x: jitad.arctan2(x, 1.0)])
def test_eager_float32_with_python_numbers_stays_float32(fn):
    x = np.linspace(0, 1, 5, dtype=np.float32)
    assert fn(x).dtype == np.float32 == jitad.jit(fn)(x).dtype


# -- einsum broadcasts length-1 axes ----------------------------------------------------------

@pytest.mark.parametrize("spec,shapes", [("ij,jk->ik", [(3, 1), (4, 5)]), ("ij,jk", [(3, 1), (1, 5)]),
                                         ("...j,...j->...", [(2, 1, 3), (4, 3)]), ("i,i->", [(1,), (4,)]),
                                         ("ij,ij->i", [(3, 1), (1, 4)])])
def test_einsum_broadcasts_length_1_axes(spec, shapes):
    rng = np.random.default_rng(0)
    ops = [rng.standard_normal(s) for s in shapes]
    want = np.einsum(spec, *ops)
    np.testing.assert_allclose(jitad.einsum(spec, *ops), want, rtol=1e-12)
    np.testing.assert_allclose(jitad.jit(lambda *o: jitad.einsum(spec, *o))(*ops), want, rtol=1e-12)
    _close(jitad.grad(lambda *o: jitad.sum(jitad.sin(jitad.einsum(spec, *o))), argnums=(0, 1))(*ops),
           jax.grad(lambda *o: jnp.sum(jnp.sin(jnp.einsum(spec, *o))), argnums=(0, 1))(*ops))


def test_einsum_still_refuses_different_lengths():
    with pytest.raises(jitad.ShapeError, match="lengths 2 and 4"):
        jitad.einsum("ij,jk->ik", np.ones((3, 2)), np.ones((4, 5)))
    with pytest.raises(jitad.ShapeError, match="repeated"):
        jitad.einsum("ii->i", np.ones((1, 3)))


# -- eigh: NumPy's eigenvector signs, of the symmetric part (as JAX) -------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_eigenvectors_are_numpys(uplo, dtype):
    rng = np.random.default_rng(7)
    staged = jitad.jit(lambda a: jitad.linalg.eigh(a, UPLO=uplo))
    for n in (3, 8):
        a = rng.standard_normal((n, n))
        a = (a + a.T + np.tril(rng.standard_normal((n, n)))).astype(dtype)   # not symmetric: its symmetric part
        w0, v0 = np.linalg.eigh((a + a.T) / 2, UPLO=uplo)
        for w, v in (jitad.linalg.eigh(a, UPLO=uplo), staged(a)):
            assert v.dtype == dtype
            np.testing.assert_allclose(v, v0, atol=1e-10 if dtype == np.float64 else 1e-5)
            np.testing.assert_allclose(w, w0, rtol=1e-10 if dtype == np.float64 else 1e-5)
    batch = rng.standard_normal((3, 4, 4)).astype(dtype)
    batch = batch + batch.swapaxes(-1, -2)
    np.testing.assert_allclose(staged(batch)[1], np.linalg.eigh(batch, UPLO=uplo)[1], atol=1e-5)


def test_eigh_of_a_nonsymmetric_matrix_is_jaxs_with_its_gradient():
    a = np.random.default_rng(3).standard_normal((5, 5))
    for fn in (lambda m: m.linalg.eigh(a)[0], lambda m: m.linalg.eigh(a, UPLO="U")[0]):
        _close(fn(jitad), fn(jnp), rtol=1e-10, atol=1e-12)
    loss = lambda m: lambda x: m.sum(m.linalg.eigh(x)[0] ** 3) + m.sum(m.linalg.eigh(x)[1][0] ** 2)  # noqa: E731
    _close(jitad.grad(loss(jitad))(a), jax.grad(loss(jnp))(a), rtol=1e-8, atol=1e-10)
    check_grads(loss(jitad), (a,), order=1, modes=("rev", "fwd"))


def test_eigh_upper_gradients():
    a = np.random.default_rng(1).standard_normal((4, 4))
    f = lambda m: lambda a: m.sum(m.linalg.eigh(a + a.T, UPLO="U")[1] ** 2 * m.arange(4.0))   # noqa: E731
    check_grads(f(jitad), (a,), order=1, modes=("rev", "fwd"))
    _close(jitad.grad(lambda a: jitad.sum(jitad.linalg.eigh(a + a.T, UPLO="U")[0] ** 3))(a),
           jax.grad(lambda a: jnp.sum(jnp.linalg.eigh(a + a.T, UPLO="U")[0] ** 3))(a), rtol=1e-9, atol=1e-10)


# -- cholesky(lower=) --------------------------------------------------------------------------

def test_cholesky_lower_keyword():
    import scipy.linalg
    rng = np.random.default_rng(2)
    b = rng.standard_normal((4, 4))
    k = b @ b.T + 4 * np.eye(4)
    for lower in (True, False):
        want = scipy.linalg.cholesky(k, lower=lower)
        np.testing.assert_allclose(jitad.linalg.cholesky(k, lower=lower), want, rtol=1e-12)
        np.testing.assert_allclose(jitad.jit(lambda k: jitad.linalg.cholesky(k, lower=lower))(k), want, rtol=1e-12)
        _close(jitad.grad(lambda k: jitad.sum(jitad.sin(jitad.linalg.cholesky(k, lower=lower))))(k),
               jax.grad(lambda k: jnp.sum(jnp.sin(jnp.linalg.cholesky(k) if lower else jnp.linalg.cholesky(k).T)))(k),
               rtol=1e-9, atol=1e-10)
    check_grads(lambda k: jitad.sum(jitad.linalg.cholesky(k + k.T, lower=False) ** 2), (k,), modes=("rev", "fwd"))
    np.testing.assert_allclose(jitad.linalg.cholesky(k), np.linalg.cholesky(k), rtol=1e-12)   # NumPy's default


# -- custom_vjp(nondiff_argnums=) ----------------------------------------------------------------

def _clip_gradient(custom_vjp, m):
    @functools.partial(custom_vjp, nondiff_argnums=(0, 1))
    def clip_gradient(lo, hi, x):
        return x
    clip_gradient.defvjp(lambda lo, hi, x: (x, None), lambda lo, hi, _, g: (m.clip(g, lo, hi),))
    return lambda x: m.sum(clip_gradient(-0.75, 0.5, 3.0 * m.sin(x)) * m.arange(1.0, 6.0))


def test_custom_vjp_nondiff_argnums_as_jax():
    x = np.linspace(-2.0, 2.0, 5)
    want = jax.grad(_clip_gradient(jax.custom_vjp, jnp))(x)
    _close(jitad.grad(_clip_gradient(jitad.custom_vjp, jitad))(x), want)
    np.testing.assert_allclose(jitad.jit(_clip_gradient(jitad.custom_vjp, jitad))(x),
                               np.sum(3.0 * np.sin(x) * np.arange(1.0, 6.0)))


def test_custom_vjp_nondiff_function_argument():
    @functools.partial(jitad.custom_vjp, nondiff_argnums=(0,))
    def apply(f, x, y):
        return f(x) * y

    apply.defvjp(lambda f, x, y: (f(x) * y, (x, y)),
                 lambda f, res, g: (2.0 * g * res[1] * jitad.grad(f)(res[0]), g * f(res[0])))
    gx, gy = jitad.grad(lambda x, y: apply(jitad.sin, x, y) + apply(jitad.cos, x, y), argnums=(0, 1))(0.3, 2.0)
    np.testing.assert_allclose(gx, 2.0 * 2.0 * (np.cos(0.3) - np.sin(0.3)), rtol=1e-12)   # the rule's 2x
    np.testing.assert_allclose(gy, np.sin(0.3) + np.cos(0.3), rtol=1e-12)
    assert apply(np.sin, 0.3, 2.0) == np.sin(0.3) * 2.0   # eager: the function itself
    with pytest.raises(jitad.ArgumentError, match="nondiff_argnums"):
        jitad.custom_vjp(lambda x: x, nondiff_argnums="0")


# -- check_grads: JAX's and autograd's call forms ------------------------------------------------

def test_check_grads_takes_jax_and_autograd_forms():
    x = np.array([0.1, -0.4, 0.7])
    check_grads(lambda x: jitad.sin(x) * x, (x,), 2, modes=("fwd", "rev"), atol=1e-6, rtol=1e-5, eps=1e-6)
    check_grads(jitad.tanh, modes=["fwd", "rev"], order=2)(x)                  # autograd: vector output
    check_grads(lambda x, y: {"a": x * y, "b": (jitad.exp(x),)})(x, 0.5)       # pytree output, order 2
    with pytest.raises(AssertionError, match="rev"):   # a wrong derivative is still caught
        check_grads(lambda x: jitad.stop_gradient(x) * x, modes=["rev"])(x)
    with pytest.raises(AssertionError, match="fwd"):
        check_grads(lambda x: jitad.stop_gradient(x) * x, (x,), 1, modes=("fwd",))
    with pytest.raises(jitad.ArgumentError, match="tuple"):
        check_grads(jitad.sin, x)


# -- static indices past the end clamp, as JAX ------------------------------------------------

@pytest.mark.parametrize("index", [10, -10, 4, -1, (slice(None), 7), (-9, 2)], ids=str)
def test_static_out_of_range_index_clamps_as_jax(index):
    x = np.arange(15.0).reshape(5, 3)
    want = jax.jit(lambda x: x[index])(x)
    np.testing.assert_array_equal(jitad.jit(lambda x: x[index])(x), want)
    _close(jitad.grad(lambda x: jitad.sum(x[index] ** 2))(x), jax.grad(lambda x: jnp.sum(x[index] ** 2))(x))


def test_staged_out_of_range_index_clamps_and_empty_axis_raises():
    x = np.arange(5.0)
    f = jitad.jit(lambda x, i: x[i])
    assert f(x, 10) == jax.jit(lambda x, i: x[i])(x, 10) == 4.0
    assert f(x, -10) == jax.jit(lambda x, i: x[i])(x, -10) == 0.0
    with pytest.raises(IndexError, match="size 0"):
        jitad.jit(lambda x: x[3])(np.zeros((0, 2)))
    with pytest.raises(IndexError):   # plain arrays index as NumPy
        np.arange(5.0)[10]


# -- a NumPy constant indexed by a staged index --------------------------------------------------

def test_numpy_constant_indexed_by_staged_index_says_how():
    table = np.arange(5.0) * 2
    with pytest.raises(jitad.StagingError, match=r"jitad\.numpy\.asarray\(table\)\[i\]"):
        jitad.jit(lambda i: table[i])(3)
    assert jitad.jit(lambda i: jitad.take(table, i))(3) == 6.0


# -- NumPy functions autograd's tests use (the op table in test_numpy_api.py has their values
# -- and gradients; here the parts a table row cannot hold) -----------------------------------

def test_one_argument_where_is_nonzero_on_plain_arrays_only():
    x = np.array([[0.0, 1.5], [-2.0, 0.0]])
    for got, want in zip(jitad.where(x != 0), np.where(x != 0)):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(jitad.StagingError, match="where"):
        jitad.jit(lambda x: jitad.where(x > 0))(x)
    with pytest.raises(jitad.ArgumentError, match="where"):
        jitad.where(x > 0, x)


def test_gradient_edge_order_2_and_r_directives():
    x = np.sin(np.linspace(0, 3, 9))
    for args, kw in (((0.25,), dict(edge_order=2)), ((), {})):
        np.testing.assert_allclose(jitad.jit(lambda x: jitad.gradient(x, *args, **kw))(x),
                                   np.gradient(x, *args, **kw), rtol=1e-12)
    check_grads(lambda x: jitad.sum(jitad.gradient(x, 0.25, edge_order=2) ** 2), (x,), order=2)
    y = np.arange(3.0)
    for directive, item in (("0,2,1", y), ("1", y[None]), ("0,2", y), ("-1,2,0", y), ("0,3,-1", y[None])):
        np.testing.assert_array_equal(jitad.jit(lambda y: jitad.r_[directive, y, y])(item), np.r_[directive, item, item])
    np.testing.assert_array_equal(jitad.jit(lambda y: jitad.r_[y, 0:4:2, 0:1:3j])(y), np.r_[y, 0:4:2, 0:1:3j])


def test_rot90_partition_split_errors_match_numpy():
    x = np.arange(24.0).reshape(2, 3, 4)
    for k in range(-4, 5):
        np.testing.assert_array_equal(jitad.jit(lambda x: jitad.rot90(x, k, axes=(1, 2)))(x),
                                      np.rot90(x, k, axes=(1, 2)))
    with pytest.raises(jitad.ArgumentError, match="kth"):
        jitad.jit(lambda x: jitad.partition(x, 7))(x)
    with pytest.raises(jitad.ShapeError, match="dsplit"):
        jitad.jit(lambda x: jitad.dsplit(x[0], 2))(x)
    np.testing.assert_array_equal(jitad.jit(lambda x: jitad.partition(x, 3, axis=None))(x), np.sort(x, axis=None))


def test_linalg_eig_on_plain_arrays():
    a = np.array([[2.0, 1.0, 0.0], [0.5, 3.0, -1.0], [0.0, 1.0, 1.0]])
    w, v = jitad.linalg.eig(a)
    w0, v0 = np.linalg.eig(a)
    np.testing.assert_allclose(w, w0)
    np.testing.assert_allclose(v, v0)
    np.testing.assert_allclose(jitad.linalg.eigvals(a), w0)
    with pytest.raises(jitad.StagingError, match="eigh"):
        jitad.jit(jitad.linalg.eig)(a)
