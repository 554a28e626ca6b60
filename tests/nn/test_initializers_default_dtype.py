"""An initializer called without a dtype draws JAX's default float: float64, or float32
with its 32-bit numbers where `jax_enable_x64` is off (JAX's default), so a JAX program's
`stax`/`nn.initializers` parameters are JAX's under either setting."""
import contextlib

import numpy as np
import pytest

jax = pytest.importorskip("jax")
from jax.example_libraries import stax as jax_stax  # noqa: E402

import jitad  # noqa: E402
from jitad.example_libraries import stax  # noqa: E402


@contextlib.contextmanager
def x64(on):
    """Both libraries with `jax_enable_x64` set to `on`, restored after."""
    saved = jax.config.jax_enable_x64, jitad.config.jax_enable_x64
    jax.config.update("jax_enable_x64", on)
    jitad.config.update("jax_enable_x64", on)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", saved[0])
        jitad.config.update("jax_enable_x64", saved[1])


@pytest.mark.parametrize("on", [False, True])
def test_initializers_and_stax_without_dtype_draw_jax_default_float(on):
    with x64(on):
        mine = jitad.nn.initializers.normal(0.5)(jitad.random.key(1), (6,))
        theirs = jax.nn.initializers.normal(0.5)(jax.random.key(1), (6,))
        assert np.asarray(mine).dtype == theirs.dtype
        np.testing.assert_allclose(np.asarray(mine), theirs, rtol=1e-6)
        assert np.asarray(jitad.nn.initializers.zeros(None, (2,))).dtype == jax.nn.initializers.zeros(None, (2,)).dtype
        _, mine = stax.serial(stax.Dense(3), stax.Relu, stax.Dense(2))[0](jitad.random.key(0), (-1, 4))
        _, theirs = jax_stax.serial(jax_stax.Dense(3), jax_stax.Relu, jax_stax.Dense(2))[0](jax.random.key(0), (-1, 4))
        for (w, b), (tw, tb) in zip(mine[::2], theirs[::2]):   # glorot_normal weights, normal biases
            assert np.asarray(w).dtype == tw.dtype and np.asarray(b).dtype == tb.dtype
            np.testing.assert_allclose(np.asarray(w), tw, rtol=1e-6)
            np.testing.assert_allclose(np.asarray(b), tb, rtol=1e-6)
