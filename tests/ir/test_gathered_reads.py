"""Rows taken by a gather that only fused loops read are read through the row index
inside those loops (`gathered_reads` in jitad.ir.passes), never stored: values against
NumPy (repeated, negative and out-of-range rows, which `take` counts from the end and
clamps), gradients, and a Jacobian of triangle corners against JAX's; a gather read by
anything but a fused loop stays a copy."""
import numpy as np
import pytest

import jitad
from jitad.ir import passes
from jitad.testing import check_grads

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

R = np.random.default_rng(4)
X = R.standard_normal((7, 3))
ROWS = np.array([0, 6, 6, 2, -1, -7, 3, 9, -12, 1])   # repeats, from the end, clamped


def _clamped(rows, n):
    return np.clip(np.where(rows < 0, rows + n, rows), 0, n - 1)


def _gathers(ir, depth=0):
    """The gathers of the printed program at `depth` (0: main, 1: a loop's body)."""
    return sum(line.startswith(" " * (2 + 4 * depth) + "%") and " = gather " in line for line in ir.splitlines())


def _corners(m, x, tri, us):
    """Barycentric points of triangles of rows of x (a hand model's corners)."""
    a, b, c = (m.take(x, tri[:, k], axis=0) for k in range(3))
    return m.reshape(us[:, :1] * a + us[:, 1:] * b + (1.0 - us[:, :1] - us[:, 1:]) * c, (-1,))


def test_rows_are_read_in_the_loop():
    w = R.standard_normal((len(ROWS), 3))
    f = jitad.jit(lambda x: jitad.sin(jitad.take(x, ROWS, axis=0)) * 2.0 + w)
    np.testing.assert_allclose(f(X), np.sin(X[_clamped(ROWS, 7)]) * 2.0 + w, rtol=1e-15)
    assert _gathers(f.ir) == 0
    check_grads(lambda x: jitad.sum(jitad.sin(jitad.take(x, ROWS, axis=0)) * w), (X,), order=2)


def test_jacobian_of_corners_against_jax(monkeypatch):
    tri = R.integers(0, 7, size=(12, 3))
    us = R.random((12, 2))
    jac = jitad.jit(jitad.jacfwd(lambda x: _corners(jitad.numpy, x, tri, us)))
    want = jax.jacfwd(lambda x: _corners(jnp, x, tri, us))(X)
    np.testing.assert_allclose(jac(X), want, rtol=1e-14, atol=1e-15)
    assert _gathers(jac.ir, depth=1) == 0   # in the loop over directions (the primal's go to it too)
    monkeypatch.setattr(passes, "PIPELINE", [s for s in passes.PIPELINE if s[0] != "gathered_reads"])
    stored = jitad.jit(jitad.jacfwd(lambda x: _corners(jitad.numpy, x, tri, us)))
    np.testing.assert_array_equal(stored(X), jac(X))
    assert _gathers(stored.ir, depth=1) == 3   # the case the pass exists for


def test_rows_read_by_other_work_are_stored():
    m = R.standard_normal((3, 4))
    f = jitad.jit(lambda x: jitad.take(x, ROWS, axis=0) @ m + jitad.take(x[:, 0], ROWS)[:, None])   # a product; a vector's rows
    np.testing.assert_allclose(f(X), X[_clamped(ROWS, 7)] @ m + X[_clamped(ROWS, 7), 0][:, None], rtol=1e-14)
    assert _gathers(f.ir) == 2
