"""`jnp.fft`: the shifts stage and differentiate (against NumPy's values and JAX's
gradients); the transforms give NumPy's values on plain arrays, and on staged ones (products
with DFT matrices) NumPy's values and JAX's gradients."""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

X = np.random.default_rng(0).normal(size=(5, 4))


@pytest.mark.parametrize("name", ["fftshift", "ifftshift"])
@pytest.mark.parametrize("axes", [None, 1, (-1, 0)])
def test_shifts_match_numpy_and_jax(name, axes):
    ours, theirs = getattr(jnp.fft, name), getattr(jax.numpy.fft, name)
    np.testing.assert_array_equal(ours(X, axes=axes), getattr(np.fft, name)(X, axes=axes))
    np.testing.assert_array_equal(jitad.jit(lambda x: ours(x, axes=axes))(X), theirs(X, axes=axes))
    w = np.arange(X.size, dtype=float).reshape(X.shape)
    g = jitad.grad(lambda x: jnp.sum(ours(x, axes=axes) * w))(X)
    np.testing.assert_array_equal(g, jax.grad(lambda x: jax.numpy.sum(theirs(x, axes=axes) * w))(X))


def test_shifts_check_grads_and_undo_each_other():
    check_grads(lambda x: jnp.fft.fftshift(jnp.sin(x)), (X,), order=2, modes=("fwd", "rev"))
    np.testing.assert_array_equal(jnp.fft.ifftshift(jnp.fft.fftshift(X)), X)


def test_frequencies_and_transforms_on_plain_arrays_are_numpys():
    np.testing.assert_array_equal(jnp.fft.fftfreq(5, 0.1), np.fft.fftfreq(5, 0.1))
    np.testing.assert_array_equal(jnp.fft.rfftfreq(6), np.fft.rfftfreq(6))
    np.testing.assert_allclose(jnp.fft.fft(X, axis=0), np.fft.fft(X, axis=0))
    np.testing.assert_allclose(jnp.fft.irfft(jnp.fft.rfft(X)), X, atol=1e-15)
    np.testing.assert_allclose(jnp.fft.fftn(X, s=(3, 6), axes=(0, 1)), np.fft.fftn(X, s=(3, 6), axes=(0, 1)))


# the transforms on staged values: (name, keywords, real input?) against NumPy and JAX
TRANSFORMS = [("fft", {}, False), ("fft", {"n": 7, "axis": 0, "norm": "ortho"}, True), ("ifft", {"n": 3}, False),
              ("fft2", {}, False), ("ifft2", {"s": (3, 6), "axes": (0, 1)}, False), ("fftn", {"norm": "forward"}, False),
              ("ifftn", {"axes": (0,)}, False), ("rfft", {}, True), ("rfft", {"n": 8, "norm": "ortho"}, True),
              ("irfft", {}, False), ("irfft", {"n": 7, "axis": 0}, False), ("rfft2", {}, True), ("irfft2", {}, False),
              ("rfftn", {"s": (3, 4), "axes": (0, 1)}, True), ("irfftn", {"s": (4, 6), "axes": (0, 1)}, False),
              ("hfft", {}, False), ("hfft", {"n": 5, "norm": "ortho"}, False), ("ihfft", {}, True)]
Z = X + 1j * np.random.default_rng(1).normal(size=X.shape)


def _input(real):
    return X if real else Z


def test_a_transform_and_its_inverse_in_staged_code():
    out, back = jitad.jit(lambda z: (jnp.fft.fft(z, axis=0), jnp.fft.irfft(z, n=6)))(Z)
    np.testing.assert_allclose(out, np.fft.fft(Z, axis=0), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(back, np.fft.irfft(Z, n=6), rtol=1e-12, atol=1e-13)
    loss = lambda m: lambda z: m.sum(m.abs(m.fft.fft(z, axis=0)) ** 2 * m.fft.irfft(z, n=6)[:, :4])   # noqa: E731
    np.testing.assert_allclose(jitad.grad(loss(jnp))(Z), jax.grad(loss(jax.numpy))(Z), rtol=1e-11)


@pytest.mark.slow   # (many transforms, compiled by jitad and XLA)
def test_transforms_of_staged_values_match_numpy_and_jax():
    transforms = [lambda x, name=name, kw=kw: getattr(jnp.fft, name)(x, **kw) for name, kw, _ in TRANSFORMS]
    outs = jitad.jit(lambda x, z: [f(x if real else z) for f, (_, _, real) in zip(transforms, TRANSFORMS)])(X, Z)
    for out, (name, kw, real) in zip(outs, TRANSFORMS):
        want = getattr(np.fft, name)(_input(real), **kw)
        assert out.shape == want.shape and out.dtype == want.dtype, (name, kw)
        np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12, err_msg=f"{name} {kw}")
    weights = {i: np.cos(np.arange(np.prod(np.shape(outs[i])))).reshape(np.shape(outs[i]))
               for i in range(len(TRANSFORMS))}

    def losses(m, x, z):   # a real function of each transform, for its gradient
        return [m.sum(m.real(getattr(m.fft, name)(x if real else z, **kw) * (1 + 2j) * weights[i]))
                for i, (name, kw, real) in enumerate(TRANSFORMS)]
    ours = jitad.jit(lambda x, z: [jitad.grad(lambda v, i=i: losses(jnp, *((v, z) if TRANSFORMS[i][2] else (x, v)))[i])(
        x if TRANSFORMS[i][2] else z) for i in range(len(TRANSFORMS))])(X, Z)
    theirs = jax.jit(lambda x, z: [jax.grad(lambda v, i=i: losses(jax.numpy, *((v, z) if TRANSFORMS[i][2] else (x, v)))[i])(
        x if TRANSFORMS[i][2] else z) for i in range(len(TRANSFORMS))])(X, Z)
    for i, (name, kw, real) in enumerate(TRANSFORMS):
        np.testing.assert_allclose(ours[i], theirs[i], rtol=1e-10, atol=1e-12, err_msg=f"{name} {kw}")


@pytest.mark.slow   # (second order in both modes)
def test_transforms_check_grads_batch_and_invert():
    check_grads(lambda z: jnp.fft.ifft(jnp.fft.fft(z, n=6) * jnp.exp(1j * z[..., :1])), (Z[:2],), order=2,
                modes=("fwd", "rev"))
    check_grads(lambda x: jnp.fft.irfft(jnp.fft.rfft(x) ** 2, n=4), (X,), order=1, modes=("fwd", "rev"))
    batched = jitad.vmap(lambda z: jnp.fft.fft2(z.reshape(2, 2)))(Z)
    np.testing.assert_allclose(batched, np.fft.fft2(Z.reshape(5, 2, 2)), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(jitad.jit(lambda x: jnp.fft.irfftn(jnp.fft.rfftn(x), s=x.shape))(X), X, atol=1e-14)


def test_transform_arguments_are_checked():
    with pytest.raises(jitad.ArgumentError, match="norm"):
        jitad.jit(lambda x: jnp.fft.fft(x, norm="both"))(X)
    with pytest.raises(jitad.ArgumentError, match="real input"):
        jitad.jit(lambda z: jnp.fft.rfft(z))(Z)
    with pytest.raises(jitad.ArgumentError, match="n=0"):
        jitad.jit(lambda x: jnp.fft.fft(x, n=0))(X)
