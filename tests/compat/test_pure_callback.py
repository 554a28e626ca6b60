"""`jitad.pure_callback` inside compiled code, against `jax.pure_callback`: values under
`jit`, results of several dtypes, `vmap` by each `vmap_method` (what the callback sees, too),
and the errors (no derivative; a result of the wrong shape)."""
import numpy as np
import pytest

import jitad
from jitad.errors import ArgumentError, UnsupportedError

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402


def _both(fn, *args):
    """`fn(lib)(*args)` through jitad and JAX, with the shapes each callback saw."""
    out = []
    for lib in (jitad, jax):
        seen = []

        def host(a, b, seen=seen):
            seen.append((np.shape(a), np.shape(b)))
            return np.sin(a) * b, (a > 0.5).sum(-1)
        out.append((fn(lib, host)(*args), seen))
    return out


def _call(lib, host, x, y, method):
    shapes = (lib.ShapeDtypeStruct(np.shape(x), np.float64), lib.ShapeDtypeStruct(np.shape(x)[:-1], np.int64))
    return lib.pure_callback(host, shapes, x, y, vmap_method=method)


def test_under_jit_with_two_results():
    x, y = np.linspace(0.0, 1.0, 6).reshape(2, 3), 1.5
    (ours, seen), (theirs, jseen) = _both(lambda lib, host: lib.jit(lambda x: _call(lib, host, 2.0 * x, y, None)), x)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-15)
    np.testing.assert_array_equal(ours[1], theirs[1])
    assert seen[-1] == jseen[-1] == ((2, 3), ())


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
def test_vmap_methods_agree_with_jax(method):
    xs, y = np.linspace(0.0, 1.0, 12).reshape(4, 3), np.array([0.7, 1.1, 0.3])
    (ours, seen), (theirs, jseen) = _both(
        lambda lib, host: lib.jit(lib.vmap(lambda x: _call(lib, host, x, y, method))), xs)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-15)
    np.testing.assert_array_equal(ours[1], theirs[1])
    if method != "sequential":   # one call on the batch: the shapes JAX's callback sees
        assert seen[-1] == jseen[-1]


def test_no_derivative_and_checked_results():
    spec = jitad.ShapeDtypeStruct((), np.float64)
    with pytest.raises(UnsupportedError, match="no derivative"):
        jitad.grad(lambda x: jitad.pure_callback(np.sin, spec, x))(1.0)
    with pytest.raises(ValueError):   # (JAX's error, for comparison)
        jax.grad(lambda x: jax.pure_callback(np.sin, jax.ShapeDtypeStruct((), jnp.float64), x))(1.0)
    with pytest.raises(ArgumentError, match="returned shape"):
        jitad.jit(lambda x: jitad.pure_callback(lambda a: a[:2], jitad.ShapeDtypeStruct((3,), np.float64), x))(
            np.ones(3))
    with pytest.raises(ArgumentError, match="vmap_method"):
        jitad.pure_callback(np.sin, spec, 1.0, vmap_method="in_parallel")
    # a constant stop in front of it keeps the rest differentiable
    g = jitad.grad(lambda x: x * jitad.pure_callback(np.cos, spec, jitad.lax.stop_gradient(x)))(0.5)
    assert g == pytest.approx(np.cos(0.5))
