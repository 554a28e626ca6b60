"""The pullback `jitad.vjp` returns when called from Python: a function that may itself be
staged (`jit`, `vmap`), Python's decisions on the primals taken as the forward call took them,
compared with JAX's pullback on the same values."""
import numpy as np
import pytest

import jitad

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)


def branchy(np_):
    """A function with Python `if`s on its argument's values (one per element, and one on a sum)."""
    def f(x):
        s = 0.0
        for i in range(x.shape[0]):
            s = s + (np_.sin(x[i]) * x[0] if x[i] > 0 else x[i] ** 2)
        return s * x if np_.sum(x) < 5.0 else np_.exp(x)
    return f


@pytest.mark.parametrize("x", [np.array([1.0, -2.0, 3.0]), np.array([4.0, 2.0, 1.5])])
def test_jit_and_vmap_of_the_pullback_of_a_branching_function(x):
    _, ours = jitad.vjp(branchy(jitad.numpy), x)
    _, theirs = jax.vjp(branchy(jax.numpy), x)
    ct, cts = np.array([1.0, -0.5, 2.0]), np.array([[1.0, 0.0, 0.0], [0.5, 2.0, -1.0]])
    expected = theirs(ct)[0]
    np.testing.assert_allclose(ours(ct)[0], expected, rtol=1e-12)
    np.testing.assert_allclose(jitad.jit(ours)(ct)[0], expected, rtol=1e-12)
    np.testing.assert_allclose(jitad.jit(ours)(2.0 * ct)[0], 2.0 * expected, rtol=1e-12)
    np.testing.assert_allclose(jitad.vmap(ours)(cts)[0], jax.vmap(theirs)(cts)[0], rtol=1e-12)


def test_staged_pullback_keeps_the_primals_of_the_forward_call():
    x = np.array([2.0, 1.0])
    _, ours = jitad.vjp(lambda v: v * v if v[0] > v[1] else -v, x)
    x[:] = [0.0, 5.0]   # the pullback is at the values vjp saw
    np.testing.assert_allclose(jitad.jit(ours)(np.ones(2))[0], [4.0, 2.0])


def test_a_decision_on_the_cotangent_is_still_refused_under_jit():
    _, ours = jitad.vjp(lambda v: v * 3.0, 2.0)

    def uses_ct_in_python(ct):
        return ours(ct if ct > 0 else -ct)
    with pytest.raises(jitad.StagingError):
        jitad.jit(uses_ct_in_python)(1.0)


def test_pullback_at_is_the_pullback_applied_to_the_cotangent():
    """`pullback_at(f, primals, ct)` (one dispatched program from Python, `vjp`'s staged
    pullback inside a trace) gives what `vjp(f, *primals)[1](ct)` gives, and JAX's vjp."""
    from jitad.api import pullback_at
    x, y, ct = np.array([0.3, -0.7, 1.1]), 1.5, np.array([1.0, -2.0, 0.5])
    for _ in range(2):   # (the second call: the dispatcher's path for a call like the last)
        got = pullback_at(lambda a, b: jitad.numpy.sin(a) * b, (x, y), ct)
        expected = jax.vjp(lambda a, b: jax.numpy.sin(a) * b, x, y)[1](ct)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-14)
    inside = jitad.jit(lambda a, c: pullback_at(lambda u: jitad.numpy.sin(u) * y, (a,), c)[0])(x, ct)
    np.testing.assert_allclose(inside, expected[0], rtol=1e-14)
    z, w = 0.4 - 1.3j, 2.0 + 0.5j   # complex: the cotangent conjugated in and out, as `vjp`'s pullback
    got = pullback_at(lambda u: u * u * w, (z,), 1.0 - 0.5j)
    np.testing.assert_allclose(got[0], jitad.vjp(lambda u: u * u * w, z)[1](1.0 - 0.5j)[0], rtol=1e-14)
    np.testing.assert_allclose(got[0], jax.vjp(lambda u: u * u * w, z)[1](1.0 - 0.5j)[0], rtol=1e-14)
