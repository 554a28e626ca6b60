"""Shared pieces of the `jitad.lax` differential tests: JAX with x64 as the reference,
edge-value inputs, and one staged program per group of functions (compiles are the cost)."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
from jax import lax as jlax  # noqa: E402,F401 (the tests import it from here)
import jax.numpy as jjnp  # noqa: E402,F401

import jitad  # noqa: E402
from jitad import lax  # noqa: E402,F401

EDGES = np.array([0.0, -0.0, 1.5, -2.5, 0.5, -0.5, np.inf, -np.inf, np.nan, 3.0, 1e-3, -7.0])
OTHER = np.array([2.0, -0.0, -1.5, 0.5, 0.5, 3.0, 1.0, np.inf, 1.0, -np.inf, 0.0, 2.0])
INTS = np.array([0, 1, -1, 7, -7, 2 ** 40, -(2 ** 40), 5, -3, 64, 12, 3])
INTS2 = np.array([3, 2, -2, 2, 2, 3, 7, -5, 3, 3, 0, 65])


def assert_same(got, want, rtol=1e-12, atol=0.0, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if want.dtype.kind in "biu":
        assert np.array_equal(got.astype(np.int64) if got.dtype != bool else got,
                              want.astype(np.int64) if want.dtype != bool else want), f"{what}: {got} != {want}"
        return
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def compare_group(table, args, jit=True, rtol=1e-12, atol=0.0):
    """Run every `(name, ours, theirs)` of `table` on `args`: ours in one staged program
    (and eagerly where `jit` is False), theirs with JAX; outputs must agree."""
    fn = lambda *a: tuple(ours(*a) for _, ours, _ in table)
    got = jitad.jit(fn)(*args) if jit else fn(*args)
    wants = jax.jit(lambda *a: tuple(theirs(*a) for _, _, theirs in table))(*args)   # one XLA compile
    for (name, _, _), g, want in zip(table, got, wants):
        assert_same(g, want, rtol, atol, name)
