"""Other libraries' array-likes (xarray's `DataArray`, or any class in NumPy's ufunc protocol)
holding differentiated values: operators and `jitad.numpy`'s ufuncs defer to them, as NumPy's
do, and they hand their contents back, so gradients flow through them as under autograd."""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.testing import check_grads


class Labelled(np.lib.mixins.NDArrayOperatorsMixin):
    """A minimal array-like of another library: a value and a label, applying NumPy's ufuncs to
    its contents (as xarray's containers do); its operators are those ufuncs."""

    def __init__(self, data, label="x"):
        self.data, self.label = data, label

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__":
            return NotImplemented
        data = [a.data if isinstance(a, Labelled) else a for a in inputs]
        return Labelled(ufunc(*data, **kwargs), self.label)


@pytest.mark.parametrize("build", [
    lambda x, base: x * Labelled(base),
    lambda x, base: Labelled(base) * x,
    lambda x, base: jnp.sin(Labelled(base) * x),
    lambda x, base: jnp.maximum(Labelled(base) * x, 1.0),
    lambda x, base: jnp.exp(x * Labelled(base)) / (1.0 + Labelled(base)),
])
def test_gradient_through_a_foreign_container(build):
    base = np.array([0.5, 1.0, 1.5])

    def f(x):
        out = build(x, base)
        assert isinstance(out, Labelled) and out.label == "x"
        return jnp.sum(out.data)

    def reference(x):
        return np.sum(build(x, base).data)

    assert np.isclose(jitad.grad(f)(0.7), (reference(0.7 + 1e-6) - reference(0.7 - 1e-6)) / 2e-6, rtol=1e-6)
    check_grads(f, modes=["rev"], order=1)(0.7)


def test_own_operands_do_not_defer():
    assert not jitad.staging.foreign_array(np.ones(2))
    assert not jitad.staging.foreign_array(jnp.ones(2))
    assert not jitad.staging.foreign_array(np.float32(1.0))
    assert jitad.staging.foreign_array(Labelled(1.0))


def test_xarray_dataarray():
    xr = pytest.importorskip("xarray")
    base = np.array([-1.0, -2.0, -3.0])

    def f(x):
        return jnp.sum(jnp.abs(xr.DataArray(base) * x).data)

    assert jitad.grad(f)(2.0) == -np.sum(base)
    assert jitad.grad(lambda x: jnp.sum((x * xr.DataArray(base)).data))(2.0) == np.sum(base)
