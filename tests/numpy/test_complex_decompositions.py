"""Complex `eigh`, `svd`, `eig` and the nuclear norm in staged code: values against NumPy,
phases as documented (docs/complex.md), derivatives against JAX (x64) and, to the second
order, against central differences."""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.errors import UnsupportedError
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
xnp = jax.numpy

RNG = np.random.default_rng(11)


def _cplx(*shape):
    return RNG.normal(size=shape) + 1j * RNG.normal(size=shape)


def _close(a, b, tol=1e-9):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def _phased(v, row=0):
    """NumPy's eigenvectors (singular vectors) with the entry in `row` made real, non-negative."""
    pivot = np.take(v, [row], axis=-2)
    return v * np.conj(pivot) / np.abs(pivot)


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_of_the_hermitian_part(uplo):
    a = _cplx(4, 4)
    h = (a + a.conj().T) / 2
    w0, v0 = np.linalg.eigh(h, UPLO=uplo)
    row = 0 if uplo == "L" else -1
    for w, v in (jitad.jit(lambda x: jnp.linalg.eigh(x, UPLO=uplo))(a), jnp.linalg.eigh(a, UPLO=uplo)):
        _close(w, w0)
        _close(v, _phased(v0, row))
        assert np.all(np.abs(np.imag(v[row])) < 1e-12) and np.all(np.real(v[row]) >= 0)


@pytest.mark.slow   # (a second derivative compiled by jitad and by XLA: several seconds)
def test_eigh_gradients_agree_with_jax():
    a, c = _cplx(4, 4), RNG.normal(size=(4, 4))

    def loss(m):
        return lambda x: m.sum(m.linalg.eigh(x)[0] ** 3 * m.arange(1.0, 5.0)) + m.sum(m.abs(m.linalg.eigh(x)[1]) * c)
    _close(jitad.grad(loss(jnp))(a), jax.grad(loss(xnp))(a))
    t = _cplx(4, 4)
    second = lambda grad, m: lambda x: m.real(m.sum(grad(loss(m))(x) * t))   # noqa: E731
    _close(jitad.grad(second(jitad.grad, jnp))(a), jax.grad(second(jax.grad, xnp))(a), 1e-8)


@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 3, 3)])
def test_svd_values_and_phases(shape):
    a = _cplx(*shape)
    u0, s0, vh0 = np.linalg.svd(a, full_matrices=False)
    phase = _phased(u0)[..., :1, :] / u0[..., :1, :]
    for u, s, vh in (jitad.jit(lambda x: jnp.linalg.svd(x, full_matrices=False))(a),
                     jnp.linalg.svd(a, full_matrices=False)):
        _close(s, s0)
        _close(u, u0 * phase)
        _close(vh, vh0 * np.swapaxes(np.conj(phase), -1, -2))
    _close(jitad.jit(lambda x: jnp.linalg.svd(x, compute_uv=False))(a), s0)


@pytest.mark.slow   # (second derivatives compiled by jitad and by XLA: several seconds each)
@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5)])
def test_svd_gradients_agree_with_jax_to_the_second_order(shape):
    a, t = _cplx(*shape), _cplx(*shape)
    k = min(shape)
    cu, cv = RNG.normal(size=(shape[0], k)), RNG.normal(size=(k, shape[1]))

    def loss(m):
        def f(x):
            u, s, vh = m.linalg.svd(x, full_matrices=False)
            return m.sum(s ** 3 * m.arange(1.0, k + 1.0)) + m.sum(m.abs(u) * cu) + m.sum(m.abs(vh) * cv)
        return f
    second = lambda grad, m: lambda x: m.real(m.sum(grad(loss(m))(x) * t))   # noqa: E731
    _close(jitad.grad(loss(jnp))(a), jax.grad(loss(xnp))(a))
    _close(jitad.grad(second(jitad.grad, jnp))(a), jax.grad(second(jax.grad, xnp))(a), 1e-8)


@pytest.mark.slow   # (several seconds: compiled by jitad and by XLA)
def test_svd_and_eigh_first_derivatives_and_batches():
    a = _cplx(2, 4, 3)
    f = lambda m: lambda x: m.sum(m.abs(m.linalg.svd(x, full_matrices=False)[2]) ** 2 * m.arange(3.0))  # noqa: E731
    _close(jitad.grad(f(jnp))(a), jax.grad(f(xnp))(a))
    check_grads(lambda x: jnp.abs(jnp.linalg.svd(x, full_matrices=False)[0]), (a,), order=1, modes=("rev", "fwd"))
    h = _cplx(2, 3, 3)
    g = lambda m: lambda x: m.sum(m.linalg.eigh(x)[0] * m.arange(3.0)) + m.sum(m.abs(m.linalg.eigh(x)[1][..., 0]))  # noqa: E731
    _close(jitad.grad(g(jnp))(h), jax.grad(g(xnp))(h))


@pytest.mark.slow   # (several seconds: a second derivative)
def test_nuclear_and_spectral_norms_of_complex_matrices():
    a = _cplx(4, 3, 2)
    for ord_ in ("nuc", 2, -2):
        f = lambda m: lambda x: m.linalg.norm(x, ord=ord_, axis=(0, 1))   # noqa: E731
        _close(jitad.jit(f(jnp))(a), np.linalg.norm(a, ord=ord_, axis=(0, 1)))
        _close(jitad.grad(lambda x: jnp.sum(f(jnp)(x)))(a), jax.grad(lambda x: xnp.sum(f(xnp)(x)))(a))
    check_grads(lambda x: jnp.linalg.norm(x[..., 0], ord="nuc"), (a,), order=2, modes=("rev",))


@pytest.mark.parametrize("complex_input", [False, True])
def test_eig_is_numpys(complex_input):
    a = _cplx(4, 4) if complex_input else RNG.normal(size=(4, 4))
    w0, v0 = np.linalg.eig(a)
    w, v = jitad.jit(jnp.linalg.eig)(a)
    _close(w, w0, 1e-12)
    _close(v, v0, 1e-12)


@pytest.mark.slow   # (several seconds: compiled by jitad and by XLA)
@pytest.mark.parametrize("complex_input", [False, True])
def test_eig_gradients_agree_with_jax(complex_input):
    a = _cplx(4, 4) if complex_input else RNG.normal(size=(4, 4))
    c = RNG.normal(size=(4, 4))
    jax_eig = lambda x: jax.lax.linalg.eig(x, compute_left_eigenvectors=False, enable_eigvec_derivs=True)  # noqa: E731

    def loss(eig, m):
        return lambda x: m.sum(m.abs(eig(x)[0]) * m.arange(1.0, 5.0)) + m.sum(m.abs(eig(x)[1]) * c)
    _close(jitad.grad(loss(jnp.linalg.eig, jnp))(a), jax.grad(loss(jax_eig, xnp))(a), 1e-8)


@pytest.mark.slow   # (several seconds: second derivatives)
def test_eig_second_derivatives():
    check_grads(lambda x: jnp.linalg.eig(x)[1], (_cplx(3, 3),), order=2, modes=("rev",))
    check_grads(lambda x: jnp.abs(jnp.linalg.eig(x)[0]), (RNG.normal(size=(3, 3)),), order=2, modes=("rev",))


def test_eig_batched_and_eigvals():
    a = _cplx(3, 4, 4)
    _close(jitad.jit(jnp.linalg.eigvals)(a), np.linalg.eigvals(a), 1e-12)
    _close(jitad.vmap(jnp.linalg.eigvals)(a), np.linalg.eigvals(a), 1e-12)


def test_full_factors_of_a_complex_nonsquare_matrix_are_refused():
    with pytest.raises(UnsupportedError, match="full_matrices=False"):
        jitad.jit(jnp.linalg.svd)(_cplx(3, 4))


def test_complex64_stays_complex64():
    a = _cplx(3, 3).astype(np.complex64)
    for name in ("eigh", "svd", "eig"):
        want = [x.dtype for x in getattr(np.linalg, name)(a)]
        assert [x.dtype for x in jitad.jit(getattr(jnp.linalg, name))(a)] == want
    assert [x.dtype for x in jitad.jit(jnp.linalg.eig)(a.real)] == [np.complex64, np.complex64]
