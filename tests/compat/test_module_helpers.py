"""The helper names autograd's `scipy.stats.norm`/`multivariate_normal`, `scipy.signal`,
`scipy.integrate` and `numpy.random` modules define or import, and `poisson.entropy`: each
against its reference on the same inputs."""
import numpy as np
import pytest

import jitad
import jitad.extend
import jitad.numpy as jnp
import jitad.numpy.random as jnpr
import jitad.scipy.integrate as jint
import jitad.scipy.signal as jsig
import jitad.scipy.stats.multivariate_normal as jmvn
import jitad.scipy.stats.norm as jnorm
from jitad.scipy.stats import poisson

pytest.importorskip("autograd")
import autograd.numpy as anp  # noqa: E402
import autograd.numpy.random as anpr  # noqa: E402
import autograd.scipy.integrate as aint  # noqa: E402
import autograd.scipy.signal as asig  # noqa: E402
import autograd.scipy.stats.multivariate_normal as amvn  # noqa: E402
import autograd.scipy.stats.norm as anorm  # noqa: E402

RNG = np.random.default_rng(0)


def test_names_that_are_other_names_are_the_same_objects():
    for module in (jnorm, jmvn, jsig):
        assert module.primitive is jitad.extend.primitive and module.defvjp is jitad.extend.defvjp
    assert jint.primitive is jitad.extend.primitive and jint.make_vjp is jitad.make_vjp
    assert jint.defvjp_argnums is jitad.extend.defvjp_argnums and jint.tuple is tuple
    assert jsig.as_strided is asig.as_strided
    assert jnpr.get_bit_generator is np.random.get_bit_generator   # (autograd wraps NumPy's namespace)
    assert anpr.get_bit_generator() is jnpr.get_bit_generator()
    assert jnpr.set_bit_generator is np.random.set_bit_generator and jnpr.test is np.random.test
    assert jnpr.wrap_namespace is jnp.wrap_namespace


def test_mvn_helpers_agree_with_autograd():
    x, mean, c = RNG.normal(size=(4, 3)), RNG.normal(size=3), RNG.normal(size=(3, 3))
    cov = c @ c.T + np.eye(3)
    for xs in (x, x[0]):
        np.testing.assert_allclose(jmvn.covgrad(xs, mean, cov), amvn.covgrad(xs, mean, cov), rtol=1e-12)
        np.testing.assert_allclose(jmvn.generalized_outer_product(xs), amvn.generalized_outer_product(xs), rtol=1e-12)
    for singular in (False, True):
        np.testing.assert_allclose(jmvn.solve(singular)(cov, x.T), amvn.solve(singular)(cov, x.T), rtol=1e-10)
    with pytest.raises(jitad.errors.ArgumentError, match="singular"):
        jmvn.covgrad(x, mean, cov, allow_singular=True)
    target, g = np.ones((1, 3)), RNG.normal(size=(4, 3))
    np.testing.assert_allclose(jnorm.unbroadcast_f(target, lambda g: 2 * g)(g),
                               anorm.unbroadcast_f(target, lambda g: 2 * g)(g))


def test_signal_helpers_agree_with_autograd():
    a, b = RNG.normal(size=(2, 5, 4)), RNG.normal(size=(3, 4, 6))
    axes, dot_axes = ([1], [0]), ([2], [1])
    ours, theirs = jsig.parse_axes(a.shape, b.shape, axes, dot_axes, "valid"), \
        asig.parse_axes(a.shape, b.shape, axes, dot_axes, "valid")
    assert ours[0] == theirs[0]
    theirs[1]["out"]["conv"] = tuple(theirs[1]["out"]["conv"])   # (autograd's is a generator)
    assert ours[1] == theirs[1]
    np.testing.assert_allclose(jsig.einsum_tensordot(a, b, dot_axes), asig.einsum_tensordot(a, b, dot_axes), rtol=1e-12)
    assert jsig.flipped_idxs(3, [0, 2]) == asig.flipped_idxs(3, [0, 2])
    assert [jsig.compute_conv_size(5, 3, m) for m in ("full", "same", "valid")] == \
        [asig.compute_conv_size(5, 3, m) for m in ("full", "same", "valid")]
    for mode, k in (("full", 0), ("valid", 1)):
        ans = asig.convolve(a, b, axes=axes, dot_axes=dot_axes, mode=mode)
        g = RNG.normal(size=ans.shape)
        np.testing.assert_allclose(jsig.grad_convolve(k, ans, a, b, axes=axes, dot_axes=dot_axes, mode=mode)(g),
                                   asig.grad_convolve(k, ans, a, b, axes=axes, dot_axes=dot_axes, mode=mode)(g),
                                   rtol=1e-10)


@pytest.mark.slow
def test_grad_odeint_agrees_with_autograd():
    y0, t, args = np.array([1.0, 0.5]), np.array([0.0, 0.5, 1.0]), (np.array(0.7),)
    yt = aint.odeint(lambda y, t, k: -k * y * anp.cos(t), y0, t, args)
    g = RNG.normal(size=yt.shape)
    theirs = aint.grad_odeint(yt, lambda y, t, k: -k * y * anp.cos(t), y0, t, args)(g)
    ours = jint.grad_odeint(yt, lambda y, t, k: -k * y * jnp.cos(t), y0, t, args, rtol=1e-10, atol=1e-10)(g)
    assert ours[0] is None and theirs[0] is None
    for mine, ref in zip(ours[1:3] + ours[3], theirs[1:3] + theirs[3]):
        np.testing.assert_allclose(mine, ref, rtol=1e-6)
    rule = jint.argnums_unpack(lambda ans, x, y: lambda g: (2 * g, 3 * g))
    assert rule((1,), None, (1.0, 2.0), {})(1.5) == [4.5]


def test_poisson_entropy_agrees_with_scipy_and_jax():
    scipy_stats = pytest.importorskip("scipy.stats")
    mu = np.array([0.01, 0.5, 1.0, 5.0, 10.0, 50.0, 99.9, 100.0, 150.0, 1000.0])
    np.testing.assert_allclose(poisson.entropy(mu), scipy_stats.poisson.entropy(mu), rtol=1e-9)
    assert np.isnan(poisson.entropy(np.array([0.0, -1.0]))).all()
    assert np.shape(poisson.entropy(np.ones(3), np.zeros((2, 1)))) == (2, 3)
    mu = np.array([0.7, 20.0, 250.0])   # (the derivative of each element: one compiled gradient)
    h = 1e-4 * mu
    central = (scipy_stats.poisson.entropy(mu + h) - scipy_stats.poisson.entropy(mu - h)) / (2 * h)
    np.testing.assert_allclose(jitad.grad(lambda m: jnp.sum(poisson.entropy(m)))(mu), central, rtol=1e-6)
