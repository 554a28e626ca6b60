"""NumPy breadth, second part: the inverse trigonometric and erfc primitives, arrays that
feel like NumPy's (dtype, attributes, methods, NumPy's functions on staged values),
indexing (negative steps, take_along_axis, `.at[...]`). Values against NumPy,
derivatives against JAX, check_grads(order=2) where differentiable. (The primitives' rows
in tests/lowering/test_ops.py's table check them at random inputs, on the CPU and the CUDA
simulator.)"""
import math

import numpy as np
import pytest

import jitad
from jitad.testing import check_grads

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


# -- arcsin arccos arctan arctan2 erfc ---------------------------------------------------

def test_inverse_trig_and_erfc_special_values():
    v = np.array([0.0, -0.0, 1.0, -1.0, 1.5, np.inf, -np.inf, np.nan, 1e-300, 30.0, -30.0])
    names = ["arcsin", "arccos", "arctan", "erfc"]
    outs = jitad.jit(lambda x: tuple(getattr(jitad, n)(x) for n in names))(v)
    with np.errstate(all="ignore"):
        for n, got in zip(names, outs):
            want = jax.scipy.special.erfc(v) if n == "erfc" else getattr(np, n)(v)
            np.testing.assert_allclose(got, want, rtol=1e-14, err_msg=n)
    y = np.array([0.0, -0.0, 0.0, 1.0, -1.0, np.inf, np.inf, np.nan])
    x = np.array([0.0, 0.0, -0.0, -np.inf, np.inf, np.inf, -1.0, 1.0])
    np.testing.assert_array_equal(jitad.jit(jitad.arctan2)(y, x), np.arctan2(y, x))
    assert jitad.arctan2(1, -1) == pytest.approx(3 * math.pi / 4)   # ints compute in f64
    assert jitad.jit(jitad.arctan2)(np.ones(2, np.float32), np.float32(2)).dtype == np.float32


@pytest.mark.parametrize("name,x", [("arcsin", 0.3), ("arccos", -0.7), ("arctan", 2.5), ("erfc", -0.4)])
def test_inverse_trig_and_erfc_derivatives(name, x):
    f, fj = getattr(jitad, name), getattr(jax.scipy.special if name == "erfc" else jnp, name)
    assert jitad.grad(f)(x) == pytest.approx(float(jax.grad(fj)(x)), rel=1e-13)
    assert jitad.grad(jitad.grad(f))(x) == pytest.approx(float(jax.grad(jax.grad(fj))(x)), rel=1e-12)
    check_grads(f, (x,), order=2, modes=("rev", "fwd"))


def test_arctan2_derivatives():
    y, x = 0.7, -1.3
    for arg in (0, 1):
        want = jax.grad(jax.grad(jnp.arctan2, arg), arg)(y, x)
        assert jitad.grad(jitad.grad(jitad.arctan2, arg), arg)(y, x) == pytest.approx(float(want), rel=1e-12)
    check_grads(jitad.arctan2, (y, x), order=2, modes=("rev", "fwd"))
    assert jitad.grad(jitad.arctan2, argnums=(0, 1))(0.0, 0.0) == (0.0, 0.0)   # JAX: NaN


# -- arrays feel like arrays --------------------------------------------------------------

def test_staged_dtype_is_numpys_and_attributes():
    seen = {}

    def f(x, n):
        seen.update(dtype=x.dtype, ndim=x.ndim, size=x.size, len=len(x), ndt=n.dtype,
                    bdt=(x > 0).dtype, f32=x.astype(np.float32).dtype, f32s=x.astype("float32").dtype)
        return jitad.zeros_like(x) + x.astype(x.dtype)
    x = np.ones((3, 4))
    np.testing.assert_array_equal(jitad.jit(f)(x, 3), x)
    assert seen["dtype"] == np.float64 and isinstance(seen["dtype"], np.dtype)
    assert seen["ndt"] == np.int64 and seen["bdt"] == np.bool_ and seen["f32"] == seen["f32s"] == np.float32
    assert (seen["ndim"], seen["size"], seen["len"]) == (2, 12, 3)
    jitad.jit(f)(np.ones((2, 5), np.float32), 1)
    assert seen["dtype"] == np.float32
    # f32 stays f32 through ops that read a staged dtype internally (zeros_like, convert's VJP)
    g = jitad.grad(lambda x: jitad.sum(jitad.zeros_like(x) + x.astype(np.float64) ** 2))(np.ones(3, np.float32))
    assert g.dtype == np.float32 and g.tolist() == [2.0, 2.0, 2.0]


METHODS = [
    ("sum", lambda x: x.sum(axis=1)), ("mean", lambda x: x.mean(0, keepdims=True)), ("max", lambda x: x.max()),
    ("min", lambda x: x.min(axis=-1)), ("prod", lambda x: x.prod(axis=0)), ("var", lambda x: x.var(axis=1, ddof=1)),
    ("std", lambda x: x.std()), ("argmax", lambda x: x.argmax(axis=1)), ("argmin", lambda x: x.argmin()),
    ("reshape", lambda x: x.reshape(4, 3)), ("reshape_tuple", lambda x: x.reshape((2, -1))),
    ("ravel", lambda x: x.ravel()), ("flatten", lambda x: x.flatten()),
    ("squeeze", lambda x: x[:1].squeeze()), ("squeeze_axis", lambda x: x[:, None].squeeze(1)),
    ("transpose", lambda x: x.transpose()), ("transpose_axes", lambda x: x[None].transpose(2, 0, 1)),
    ("transpose_tuple", lambda x: x[None].transpose((1, 2, 0))), ("T", lambda x: x.T),
    ("astype", lambda x: x.astype(np.float32)), ("clip", lambda x: x.clip(-0.5, 0.5)),
    ("clip_min", lambda x: x.clip(0.0)), ("clip_max", lambda x: x.clip(max=0.1)),
    ("cumsum", lambda x: x.cumsum(axis=1)), ("any", lambda x: (x > 1).any(axis=0)), ("all", lambda x: (x > -3).all()),
]


@pytest.mark.parametrize("name,fn", METHODS, ids=[m[0] for m in METHODS])
def test_methods_on_staged_values_as_numpy(name, fn):
    x = np.random.default_rng(1).standard_normal((3, 4))
    got, want = jitad.jit(fn)(x), fn(x)
    assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == np.asarray(want).dtype, name
    np.testing.assert_allclose(got, want, rtol=1e-13, err_msg=name)


def test_method_gradients_match_jax():
    x = np.random.default_rng(2).uniform(0.5, 2.0, (3, 4))
    f = lambda x: (x.prod(axis=0).sum() + x.var(axis=1, ddof=1).sum() + x.std() + x.clip(0.7, 1.5).sum()
                   + x.T.reshape(2, 6).max(axis=1).sum() + (x.cumsum(axis=1) * x).sum())
    np.testing.assert_allclose(jitad.grad(f)(x), jax.grad(f)(jnp.asarray(x)), rtol=1e-12)
    check_grads(f, (x,), order=2)


def test_numpy_functions_on_staged_values_run_jitads():
    x = np.random.default_rng(3).standard_normal((3, 4))
    fns = [lambda x: np.var(x, axis=0), lambda x: np.cumsum(x, axis=1), lambda x: np.prod(x),
           lambda x: np.std(x, ddof=1), lambda x: np.argmax(x, axis=1), lambda x: np.squeeze(x[None]),
           lambda x: np.flip(x, 1), lambda x: np.arctan2(x, 1.5), lambda x: np.arcsin(x / 4),
           lambda x: np.sinh(x), lambda x: np.floor(x), lambda x: np.isnan(x), lambda x: np.hypot(x, x),
           lambda x: np.clip(x, -0.5, None), lambda x: np.einsum("ij->j", x)]
    for k, fn in enumerate(fns):
        np.testing.assert_allclose(jitad.jit(fn)(x), fn(x), rtol=1e-13, err_msg=str(k))
    g = jitad.grad(lambda x: np.sum(np.var(x, axis=0) * np.arctan(x)))(x)
    np.testing.assert_allclose(g, jax.grad(lambda x: jnp.sum(jnp.var(x, axis=0) * jnp.arctan(x)))(x), rtol=1e-12)
    with pytest.raises(jitad.StagingError, match="np.fft"):
        jitad.jit(lambda x: np.fft.fft(x))(x)


# -- indexing: negative steps, take, take_along_axis, .at --------------------------------

X = np.arange(60.0).reshape(3, 4, 5) / 7.0


@pytest.mark.parametrize("key", [np.s_[::-1], np.s_[:, 5:1:-2], np.s_[1, ::-2, None, 3:0:-1], np.s_[..., ::-3],
                                 np.s_[:, 0:2:-1], np.s_[2:1:-1]], ids=str)
def test_negative_slice_steps(key):
    got = jitad.jit(lambda x: x[key])(X)
    assert got.shape == X[key].shape and np.array_equal(got, X[key])
    w = np.random.default_rng(0).standard_normal(X[key].shape)
    f = lambda x: (x[key] * w).sum()
    np.testing.assert_array_equal(jitad.grad(f)(X), jax.grad(f)(jnp.asarray(X)))


def test_negative_step_second_order():
    check_grads(lambda x: jitad.sum(jitad.sin(x[::-2, 3:0:-1]) ** 2), (X,), order=2, modes=("rev", "fwd"))


@pytest.mark.parametrize("axis", [0, 1, 2, -1, None])
def test_take_on_any_axis_clamps_as_jax(axis):
    idx = np.array([[0, -1], [2, 9]])
    want = jnp.take(X, jnp.where(idx < 0, idx + (X.size if axis is None else X.shape[axis]), idx), axis=axis,
                    mode="clip")
    np.testing.assert_array_equal(jitad.jit(lambda x, i: jitad.take(x, i, axis=axis))(X, idx), want)
    np.testing.assert_array_equal(jitad.take(X, idx, axis=axis), want)   # eager


def test_take_along_axis():
    rng = np.random.default_rng(4)
    for axis, ishape in [(0, (2, 4, 5)), (1, (3, 2, 5)), (-1, (3, 4, 3)), (2, (1, 4, 2)), (1, (3, 6, 1))]:
        n = X.shape[axis]
        idx = rng.integers(-n, n, ishape)
        want = np.take_along_axis(X, idx, axis)
        np.testing.assert_array_equal(jitad.jit(lambda x, i: jitad.take_along_axis(x, i, axis))(X, idx), want)
        np.testing.assert_array_equal(jitad.jit(lambda x: jitad.take_along_axis(x, idx, axis))(X), want)
        f = lambda x, i: jitad.sum(jitad.take_along_axis(x, i, axis) ** 2)
        fj = lambda x, i: jnp.sum(jnp.take_along_axis(x, i, axis) ** 2)
        np.testing.assert_allclose(jitad.grad(f)(X, idx), jax.grad(fj)(X, idx), rtol=1e-13)
    x = rng.standard_normal((4, 6))   # the classic: values at the argmax
    got = jitad.jit(lambda x: jitad.take_along_axis(x, jitad.argmax(x, 1, keepdims=True), 1))(x)
    np.testing.assert_array_equal(got, x.max(1, keepdims=True))
    with pytest.raises(jitad.ShapeError, match="take_along_axis"):
        jitad.take_along_axis(X, np.zeros((3, 4), np.int64), 1)


AT_INDICES = [np.s_[1], np.s_[:, ::2], np.s_[np.array([0, 2, 0])], np.s_[1, np.array([3, 3, 1])], np.s_[..., -1],
              np.s_[::-1, 1:3]]


@pytest.mark.parametrize("how", ["set", "add", "multiply", "min", "max"])
def test_at_updates_with_static_indices(how):
    x = np.arange(12.0).reshape(3, 4) + 1
    for k, idx in enumerate(AT_INDICES):
        v = np.linspace(1.05, 2.05, x[idx].size).reshape(x[idx].shape)
        want = getattr(jnp.asarray(x).at[idx], how)(v)
        np.testing.assert_array_equal(jitad.jit(lambda x, v: getattr(x.at[idx], how)(v))(x, v), want)
        np.testing.assert_array_equal(jitad.jit(lambda x: getattr(x.at[idx], how)(2.5))(x),
                                      getattr(jnp.asarray(x).at[idx], how)(2.5))   # a broadcast scalar
        f = lambda x, v: jitad.sum(getattr(x.at[idx], how)(v) ** 2)
        if how == "multiply" and k in (2, 3):   # JAX has no gradient of repeated multiplies
            check_grads(f, (x, v), order=2)
            continue
        fj = lambda x, v: jnp.sum(getattr(x.at[idx], how)(v) ** 2)
        for got, want in zip(jitad.grad(f, argnums=(0, 1))(x, v), jax.grad(fj, argnums=(0, 1))(x, v)):
            np.testing.assert_allclose(got, want, rtol=1e-13)
    check_grads(lambda x, v: jitad.sum(jitad.sin(getattr(x.at[1:, 2], how)(v))), (x, np.array([1.5, 0.7])),
                order=2, modes=("rev", "fwd"))


@pytest.mark.parametrize("how", ["set", "add", "multiply", "min", "max"])
def test_at_updates_with_staged_indices(how):
    x = np.arange(12.0).reshape(3, 4) + 1
    f = lambda x, i, v: jitad.sum(getattr(x.at[i], how)(v) ** 2)
    fj = lambda x, i, v: jnp.sum(getattr(x.at[i], how)(v) ** 2)
    for i in (1, -1):
        v = np.array([3.0, 0.5, 2.0, 1.5])
        np.testing.assert_array_equal(jitad.jit(lambda x, i, v: getattr(x.at[i], how)(v))(x, i, v),
                                      getattr(jnp.asarray(x).at[i], how)(v))
        for got, want in zip(jitad.grad(f, argnums=(0, 2))(x, i, v), jax.grad(fj, argnums=(0, 2))(x, i, v)):
            np.testing.assert_allclose(got, want, rtol=1e-13)
    i, v = np.array([0, 2, 0]), np.arange(12.0).reshape(3, 4)   # repeated rows apply in order
    np.testing.assert_array_equal(jitad.jit(lambda x, i, v: getattr(x.at[i], how)(v))(x, i, v),
                                  getattr(jnp.asarray(x).at[i], how)(v))


# -- data-dependent shapes -----------------------------------------------------------------

def test_constant_boolean_masks_index_and_differentiate():
    x = np.arange(12.0).reshape(3, 4)
    for mask in (x > 4, np.array([True, False, True])):
        np.testing.assert_array_equal(jitad.jit(lambda x: x[mask])(x), x[mask])
        g = jitad.grad(lambda x: jitad.sum(x[mask] ** 2))(x)
        np.testing.assert_array_equal(g, jax.grad(lambda x: jnp.sum(x[mask] ** 2))(x))


@pytest.mark.parametrize("fn", [lambda x: x[x > 3], lambda x: jitad.nonzero(x), lambda x: np.unique(x),
                                lambda x: np.nonzero(x), lambda x: jitad.argwhere(x > 0),
                                lambda x: np.flatnonzero(x)], ids=["mask", "nonzero", "np.unique", "np.nonzero",
                                                                   "argwhere", "np.flatnonzero"])
def test_data_dependent_shapes_raise_a_clear_error(fn):
    with pytest.raises(jitad.StagingError, match="shape would depend on the values.*where.*size="):
        jitad.jit(fn)(np.arange(6.0))
    assert np.array_equal(jitad.nonzero(np.array([0, 3, 0, 1]))[0], [1, 3])   # eager: NumPy's


def test_array_prints_as_numpy_prints_it():
    """`str` and `repr` of a jitad array: NumPy's text for its subclass (class name "Array"),
    made from the plain array, for every dtype, rank, special value and print option."""
    values = [np.float64(1.5), np.linspace(-1.0, 1.0, 10), np.arange(6.0).reshape(2, 3) / 7,
              np.arange(2000.0), np.array([np.nan, np.inf, -np.inf, 0.0]), np.arange(5, dtype=np.float32),
              np.arange(-3, 3), np.array([True, False]), np.array([1 + 2j, 3.5j]), np.zeros((0, 3)),
              np.ones((2, 1, 3), dtype=np.int32)]
    for v in values:
        x = np.asarray(v).view(jitad.numpy.Array)
        for options in ({}, {"precision": 3, "suppress": True}, {"threshold": 5}):
            with np.printoptions(**options):
                assert str(x) == np.ndarray.__str__(x) == str(np.asarray(v))
                assert repr(x) == np.ndarray.__repr__(x) == "Array" + repr(np.asarray(v))[5:]
                assert repr(x).startswith("Array(")

    class Mine(jitad.numpy.Array):   # a subclass of it: NumPy's own text, with its name
        pass
    y = np.arange(12.0).reshape(3, 4).view(Mine)
    assert repr(y) == "Mine" + repr(np.asarray(y))[5:].replace("\n      ", "\n     ") and str(y) == str(np.asarray(y))
