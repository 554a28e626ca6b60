"""Eager calls on plain arrays and numbers that run NumPy's own function at once (the
`_NUMPY_SAME` functions, elementwise math of floats, the operators; all through
`jitad.numpy._common.reference_first`): the same result as jitad's own eager path (type,
dtype, shape, values to the bit) and as NumPy's values."""
import warnings

import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.errors import JitadError

_R = np.random.RandomState(0)
_M = _R.randn(4, 4)
_INPUTS = {"f64": _M, "f32": _M.astype(np.float32), "i64": np.arange(16).reshape(4, 4) - 5, "bool": _M > 0,
           "i32": (np.arange(16).reshape(4, 4) - 5).astype(np.int32), "Array": jnp.asarray(_M)}

CALLS = {
    "transpose": lambda m, x: m.transpose(x), "transpose axes": lambda m, x: m.transpose(x, axes=(1, 0)),
    "swapaxes": lambda m, x: m.swapaxes(x, 0, 1), "moveaxis": lambda m, x: m.moveaxis(x[None], 0, 2),
    "squeeze": lambda m, x: m.squeeze(x[:1], axis=0), "diag 2-d": lambda m, x: m.diag(x, 1),
    "diag 1-d": lambda m, x: m.diag(x[0], -1), "diagonal": lambda m, x: m.diagonal(x, offset=1),
    "tril": lambda m, x: m.tril(x, k=-1), "triu": lambda m, x: m.triu(x),
    "dot": lambda m, x: m.dot(x, x), "dot vector": lambda m, x: m.dot(x, x[0]), "matmul": lambda m, x: m.matmul(x, x),
    "inner": lambda m, x: m.inner(x, x), "outer": lambda m, x: m.outer(x[0], x[1]),
    "sum": lambda m, x: m.sum(x), "sum axis": lambda m, x: m.sum(x, axis=1, keepdims=True),
    "mean": lambda m, x: m.mean(x, 0), "prod": lambda m, x: m.prod(x, axis=(0, 1)), "max": lambda m, x: m.max(x, axis=0),
    "min": lambda m, x: m.min(x), "amax": lambda m, x: m.amax(x, 1), "amin": lambda m, x: m.amin(x, axis=-1),
    "var": lambda m, x: m.var(x, axis=0, ddof=1), "std": lambda m, x: m.std(x), "cumsum": lambda m, x: m.cumsum(x, axis=1),
    "cumprod": lambda m, x: m.cumprod(x), "reshape": lambda m, x: m.reshape(x, (2, -1)),
}


def _own(name):
    """jitad's eager path for `name`, without NumPy's in front."""
    return getattr(jnp, name).__wrapped__


class _Own:
    def __getattr__(self, name):
        return _own(name)


def _same(got, want):
    assert type(got) is type(want) is jnp.Array
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want, strict=True)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_numpy_own_results_are_jitads(name):
    call = CALLS[name]
    for kind, x in _INPUTS.items():
        got = call(jnp, x)
        want = call(_Own(), x)
        _same(got, want)
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(got, call(np, np.asarray(x)), rtol=1e-6 if kind == "f32" else 1e-13)


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "sin", "abs", "negative", "floor", "sign", "log1p",
                                  "expm1", "arctan", "cosh", "square"])
def test_elementwise_math_of_a_float_is_jitads(name):
    fn = getattr(jnp, name)
    for x in (0.3, -2.5, 0.0, np.float64(1.5), float("inf"), float("nan"), 2, -3, 0, np.int64(4)):
        got, want = fn(x), fn(np.asarray(x))   # (a 0-d array takes jitad's own eager path)
        _same(got, want)


_F32 = np.linspace(-2.0, 3.0, 6, dtype=np.float32)
_F64 = np.linspace(-2.0, 3.0, 6)
_OPERANDS = [(_F64, _F64[::-1]), (_F32, 0.5), (0.5, _F32), (_F32, 2), (_F64, 3), (2.5, -1), (-1.5, 0.25),
             (np.float64(1.5), _F32), (np.int64(3), _F32), (_F32, _F64), (_F64[:, None], _F64), (jnp.asarray(_F64), 0.5),
             (_F64[:0], 1.0), (np.asarray(2.0), _F64), (_F64.astype(">f8"), 1.0), (_F32 > 0, _F32), (3, 4)]


@pytest.mark.parametrize("name", ["maximum", "minimum", "arctan2", "add", "subtract", "multiply", "divide",
                                  "floor_divide", "less", "equal"])
def test_binary_elementwise_of_plain_operands_is_jitads(name):
    """Float32 arrays keep their dtype beside Python numbers (weak, as JAX's), a NumPy float64
    or int64 scalar promotes, mixed float dtypes and other operands take jitad's own path."""
    fn = getattr(jnp, name)
    for a, b in _OPERANDS:
        with np.errstate(all="ignore"):
            got, want = fn(a, b), _own(name)(a, b)
        _same(got, want)


def test_fast_paths_warn_nothing():
    """NumPy's floating-point warnings are off in the fast paths (an overflow is an inf, as in
    JAX and in compiled code), and the caller's error state is as it was after."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jnp.exp(np.array([1000.0]))[0] == np.inf and jnp.exp(1000.0) == np.inf
        assert np.isnan(jnp.log(-1.0)) and jnp.divide(np.ones(2), 0.0)[0] == np.inf
        assert jnp.sum(np.array([1e308, 1e308])) == np.inf
    with np.errstate(over="raise"):
        jnp.exp(np.array([1000.0]))
        with pytest.raises(FloatingPointError):
            np.exp(np.array([1000.0]))


def test_nan_checks_see_fast_path_results():
    jitad.config.update("jax_debug_nans", True)
    try:
        for call in (lambda: jnp.sqrt(-np.ones(3)), lambda: jnp.log(-1.0), lambda: jnp.maximum(np.array([np.nan]), 1.0),
                     lambda: jnp.arctan2(np.array([np.nan]), 1.0)):
            with pytest.raises(JitadError, match="NaN"):
                call()
    finally:
        jitad.config.update("jax_debug_nans", False)


def test_x64_off_takes_jitads_path():
    """With jax_enable_x64 off the results are JAX's 32-bit ones, not NumPy's."""
    jitad.config.update("jax_enable_x64", False)
    try:
        for got in (jnp.exp(_F64), jnp.sum(_F64), jnp.maximum(_F64, 0.5), jnp.add(_F64, 0.5)):
            assert got.dtype == np.float32
    finally:
        jitad.config.update("jax_enable_x64", True)


def test_refused_by_numpy_raises_jitads_error():
    for name, args in (("dot", (np.ones((2, 3)), np.ones((2, 3)))), ("sum", (np.ones(3), 2)),
                       ("transpose", (np.ones((2, 3)), (0, 0))), ("reshape", (np.ones(6), (4, -1)))):
        with pytest.raises(Exception) as own:
            _own(name)(*args)
        with pytest.raises(type(own.value)):
            getattr(jnp, name)(*args)


def test_nan_checks_see_eager_results():
    jitad.config.update("jax_debug_nans", True)
    try:
        with pytest.raises(JitadError, match="NaN"):
            jnp.sqrt(-1.0)
        with pytest.raises(JitadError, match="NaN"):
            jnp.dot(np.array([np.inf]), np.array([0.0]))
    finally:
        jitad.config.update("jax_debug_nans", False)


def test_reciprocal_of_a_python_zero_is_inf_as_numpy():
    with np.errstate(divide="ignore"):
        for x in (0.0, -0.0, 0, np.float64(0.0)):
            assert jnp.reciprocal(x) == np.reciprocal(np.float64(x)), x
    assert jnp.reciprocal(-0.0) < 0


_SPD = _M @ _M.T + np.eye(4)


@pytest.mark.parametrize("name,args", [("solve", (_SPD, _M)), ("solve", (_SPD, _M[0])), ("inv", (_SPD,)),
                                       ("cholesky", (_SPD,))], ids=["solve", "solve vector", "inv", "cholesky"])
def test_linalg_of_a_plain_matrix_is_numpys(name, args):
    """An eager `jnp.linalg` call on a plain float64 matrix runs NumPy's function (its values to
    the bit) and agrees with jitad's own eager path and the staged code."""
    got = getattr(jnp.linalg, name)(*args)
    assert type(got) is jnp.Array
    np.testing.assert_array_equal(got, getattr(np.linalg, name)(*args))
    np.testing.assert_allclose(got, jitad.jit(getattr(jnp.linalg, name))(*args), rtol=1e-12)


def test_linalg_of_a_singular_matrix_keeps_jitads_meaning():
    """NumPy raises on a singular (or indefinite) matrix; jitad gives NaN, eagerly as staged."""
    singular = np.ones((2, 2))
    for name, args in (("solve", (singular, np.ones(2))), ("inv", (singular,)), ("cholesky", (-np.eye(2),))):
        got = getattr(jnp.linalg, name)(*args)
        assert np.isnan(got).all()
        np.testing.assert_array_equal(got, jitad.jit(getattr(jnp.linalg, name))(*args))
