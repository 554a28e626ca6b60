"""A slot whose first write is a fused loop's region add (the adjoint of a shift,
`concatenate([c, y[:-1]])`) is stored by that add and zeroed only outside the region
(`region_stores` in jitad.ir.passes): gradients equal JAX's and the pipeline's without
the pass, bit for bit, and the complement boxes cover exactly what the region leaves."""
import itertools

import numpy as np
import pytest

import jitad
from jitad.ir import passes
from jitad.ir.regions import _outside
from jitad.testing import check_grads

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


def rk4_last(m, x, steps=2):
    """GradBench's ode: RK4 on y0' = x0, yi' = xi y(i-1), the last state's last element."""
    h, one = 2.0 / steps, m.ones(1)
    f = lambda y: x * m.concatenate([one, y[:-1]])
    y = m.zeros_like(x)
    for _ in range(steps):
        k1 = f(y)
        k2 = f(y + h / 2 * k1)
        k3 = f(y + h / 2 * k2)
        y = y + h / 6 * (k1 + 2.0 * k2 + 2.0 * k3 + f(y + h * k3))
    return y[-1]


def shifted(m, axis):
    def f(a, w):
        first = a[:1] if axis == 0 else a[:, :1]
        rest = a[:-1] if axis == 0 else a[:, :-1]
        return m.sum(m.sin(w * m.concatenate([m.ones_like(first), rest], axis=axis)) ** 2)
    return f


def _compiled(f, *args):
    g = jitad.jit(jitad.grad(f))
    return np.asarray(g(*args)), g.ir


CASES = [(lambda m: (lambda x: rk4_last(m, x)), (np.linspace(0.5, 1.5, 23),)),
         (lambda m: shifted(m, 0), (np.linspace(0.1, 0.9, 7 * 11).reshape(7, 11), np.full((7, 11), 0.7))),
         (lambda m: shifted(m, 1), (np.linspace(0.1, 0.9, 7 * 11).reshape(7, 11), np.full((7, 11), 0.7)))]


@pytest.mark.parametrize("make, args", CASES, ids=["ode", "rows", "columns"])
def test_shift_adjoints_store_and_zero_only_the_rest(make, args, monkeypatch):
    got, ir = _compiled(make(jitad), *args)
    assert "zero_boxes" in ir
    np.testing.assert_allclose(got, jax.grad(make(jnp))(*args), rtol=1e-13, atol=1e-15)
    monkeypatch.setattr(passes, "PIPELINE", [s for s in passes.PIPELINE if s[0] != "region_stores"])
    without, ir = _compiled(make(jitad), *args)
    assert "zero_boxes" not in ir
    np.testing.assert_array_equal(got, without)


def test_shifted_gradients_check():
    check_grads(jitad.jit(shifted(jitad, 1)), modes=["rev"], order=1)(*CASES[2][1])


@pytest.mark.parametrize("shape, starts, stops", [((5,), (0,), (4,)), ((5,), (1,), (5,)), ((6, 4), (1, 0), (6, 3)),
                                                  ((3, 4, 5), (1, 1, 0), (2, 3, 5)), ((4,), (0,), (4,))])
def test_outside_boxes_cover_the_rest_once(shape, starts, stops):
    count = np.zeros(shape, int)
    count[tuple(slice(a, b) for a, b in zip(starts, stops))] += 1
    for lo, hi in _outside(shape, starts, stops):
        count[tuple(slice(a, b) for a, b in zip(lo, hi))] += 1
    assert (count == 1).all()
    assert all(len(box) == 2 for box in _outside(shape, starts, stops))
    assert list(itertools.chain(*_outside((4,), (0,), (4,)))) == []
