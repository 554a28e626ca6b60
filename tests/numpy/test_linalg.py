"""`jitad.linalg`: values against NumPy/SciPy, derivatives against JAX and finite
differences, failures (singular, not positive definite), control flow, a Gaussian
process, an implicit layer, and the GPU backend's refusal."""
import numpy as np
import pytest
import scipy.linalg

import jitad
import jitad.linalg as la
from jitad import FOR, IF
from jitad.testing import check_grads

jax = pytest.importorskip("jax", reason="JAX is the derivative reference (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

rng = np.random.default_rng(0)
A = rng.normal(size=(4, 4)) + 4 * np.eye(4)            # well conditioned
B = rng.normal(size=(4, 2))
SPD = A @ A.T
TALL = rng.normal(size=(6, 4))
W = rng.normal(size=(6, 6))
AB = rng.normal(size=(2, 3, 4, 4)) + 4 * np.eye(4)     # batched
BB = rng.normal(size=(2, 3, 4, 2))
SPDB = AB @ np.swapaxes(AB, -1, -2)
TALLB = rng.normal(size=(3, 5, 3))


def sym(m, x):
    """x's symmetric part: cholesky and eigh read one triangle, their derivatives (as
    JAX's) are those of the symmetric part, so finite differences need it too."""
    return 0.5 * (x + m.swapaxes(x, -1, -2)) if m is jnp else 0.5 * (x + la._swap(x))


def weights(shape):
    return np.random.default_rng(len(shape) + int(np.prod(shape))).normal(size=shape)


# (name, function of a namespace `m` (jitad.linalg or jax.numpy.linalg-like) -> scalar program, args)
def _lin(m):
    return la if m is not jnp else jnp.linalg


def _tri(m):
    return la.solve_triangular if m is not jnp else jax.scipy.linalg.solve_triangular


def _sum(m, x, shape_of=None):
    return (x * weights(x.shape)).sum() if m is jnp else jitad.sum(x * weights(x.shape))


PROGRAMS = [
    ("solve", lambda m: lambda a, b: _sum(m, _lin(m).solve(a, b)), (A, B)),
    ("solve_vector", lambda m: lambda a, b: _sum(m, _lin(m).solve(a, b[:, 0])), (A, B)),
    ("solve_batched", lambda m: lambda a, b: _sum(m, _lin(m).solve(a, b)), (AB, BB)),
    ("inv", lambda m: lambda a: _sum(m, _lin(m).inv(a)), (A,)),
    ("inv_batched", lambda m: lambda a: _sum(m, _lin(m).inv(a)), (AB,)),
    ("slogdet", lambda m: lambda a: _lin(m).slogdet(a)[1], (A,)),
    ("slogdet_batched", lambda m: lambda a: _sum(m, _lin(m).slogdet(a)[1]), (AB,)),
    ("det", lambda m: lambda a: _lin(m).det(a), (A,)),
    ("det_batched", lambda m: lambda a: _sum(m, _lin(m).det(a)), (AB,)),
    ("cholesky", lambda m: lambda a: _sum(m, _lin(m).cholesky(sym(m, a))), (SPD,)),
    ("cholesky_batched", lambda m: lambda a: _sum(m, _lin(m).cholesky(sym(m, a))), (SPDB,)),
    ("solve_triangular_lower", lambda m: lambda a, b: _sum(m, _tri(m)(a, b, lower=True)), (A, B)),
    ("solve_triangular_upper_t", lambda m: lambda a, b: _sum(m, _tri(m)(a, b, trans=1)), (A, B)),
    ("solve_triangular_batched", lambda m: lambda a, b: _sum(m, _tri(m)(a, b, lower=True)), (AB, BB)),
    ("eigh", lambda m: lambda a: _sum(m, _lin(m).eigh(sym(m, a))[0]) + _sum(m, _lin(m).eigh(sym(m, a))[1] ** 2),
     (SPD,)),
    ("eigh_batched", lambda m: lambda a: _sum(m, _lin(m).eigh(sym(m, a))[0]), (SPDB,)),
    ("qr_tall", lambda m: lambda a: _sum(m, _lin(m).qr(a)[0]) + _sum(m, _lin(m).qr(a)[1]), (TALL,)),
    ("qr_batched", lambda m: lambda a: _sum(m, _lin(m).qr(a)[1]), (TALLB,)),
    ("svd_tall", lambda m: lambda a: _sum(m, _lin(m).svd(a, full_matrices=False)[1])
     + _sum(m, _lin(m).svd(a, full_matrices=False)[0] ** 2) + _sum(m, _lin(m).svd(a, full_matrices=False)[2] ** 2),
     (TALL,)),
    ("svd_wide", lambda m: lambda a: _sum(m, _lin(m).svd(a, full_matrices=False)[0] ** 2)
     + _sum(m, _lin(m).svd(a, full_matrices=False)[2] ** 2), (TALL.T.copy(),)),
    ("svd_values_batched", lambda m: lambda a: _sum(m, _lin(m).svd(a, compute_uv=False)), (TALLB,)),
    ("pinv", lambda m: lambda a: _sum(m, _lin(m).pinv(a)), (TALL,)),
    ("norm_fro", lambda m: lambda a: _lin(m).norm(a), (TALL,)),
    ("norm_2", lambda m: lambda a: _lin(m).norm(a, 2), (TALL,)),
    ("norm_nuc", lambda m: lambda a: _lin(m).norm(a, "nuc"), (TALL,)),
    ("norm_1_inf", lambda m: lambda a: _lin(m).norm(a, 1) + _lin(m).norm(a, np.inf), (TALL,)),
    ("norm_vector_p", lambda m: lambda a: _lin(m).norm(a[0], 3) + _lin(m).norm(a[1], 1), (TALL,)),
]
IDS = [p[0] for p in PROGRAMS]


@pytest.mark.parametrize("name,program,args", PROGRAMS, ids=IDS)
def test_values_and_gradients_match_jax(name, program, args):
    fx, fj = program(la), program(jnp)
    want = float(fj(*args))
    assert jitad.jit(fx)(*args) == pytest.approx(want, rel=1e-10)
    assert fx(*args) == pytest.approx(want, rel=1e-10)   # eager: NumPy/SciPy
    argnums = tuple(range(len(args)))
    got = jitad.grad(fx, argnums=argnums)(*args)
    ref = jax.grad(fj, argnums=argnums)(*args)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, np.asarray(r), rtol=1e-8, atol=1e-10)
    tangents = tuple(weights(np.shape(x)) * 0.1 + 0.05 for x in args)
    _, t = jitad.jvp(fx, args, tangents)
    assert t == pytest.approx(float(jax.jvp(fj, args, tangents)[1]), rel=1e-8, abs=1e-10)


SECOND_ORDER = ["solve", "inv_batched", "slogdet", "det", "cholesky", "solve_triangular_lower",
                "solve_triangular_upper_t", "eigh", "qr_tall", "svd_tall", "pinv", "norm_2"]


@pytest.mark.parametrize("name", SECOND_ORDER)
def test_check_grads_second_order(name):
    _, program, args = PROGRAMS[IDS.index(name)]
    check_grads(program(la), args, order=2, modes=("fwd", "rev"), rtol=1e-4, atol=1e-6)


def test_hessian_of_logdet_matches_jax():
    f = lambda m: (lambda a: _lin(m).slogdet(a)[1])
    h = jitad.hessian(f(la))(A)
    np.testing.assert_allclose(h, np.asarray(jax.hessian(f(jnp))(A)), rtol=1e-8, atol=1e-10)


# -- values, dtypes and shapes --------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_values_match_numpy_and_scipy(dtype):
    a, b, spd, tall = (x.astype(dtype) for x in (AB, BB, SPDB, TALL))
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-12)
    cases = [
        (la.solve, (a, b), np.linalg.solve),
        (la.inv, (a,), np.linalg.inv),
        (la.det, (a,), np.linalg.det),
        (lambda x: la.slogdet(x)[1], (a,), lambda x: np.linalg.slogdet(x)[1]),
        (la.cholesky, (spd,), np.linalg.cholesky),
        (lambda x, y: la.solve_triangular(x, y, lower=True), (a[0, 0], b[0, 0]),
         lambda x, y: scipy.linalg.solve_triangular(x, y, lower=True)),
        (lambda x: la.eigh(x)[0], (spd,), lambda x: np.linalg.eigh(x)[0]),
        (lambda x: la.qr(x)[1], (tall,), lambda x: np.linalg.qr(x)[1]),
        (lambda x: la.svd(x)[1], (tall,), lambda x: np.linalg.svd(x)[1]),
        (lambda x: la.svd(x)[0], (tall,), lambda x: np.linalg.svd(x)[0]),   # full_matrices=True
        (la.pinv, (tall,), np.linalg.pinv),
        (lambda x: la.norm(x, axis=-1), (tall,), lambda x: np.linalg.norm(x, axis=-1)),
        (lambda x: la.norm(x, -np.inf, axis=(0, 1), keepdims=True), (tall,),
         lambda x: np.linalg.norm(x, -np.inf, axis=(0, 1), keepdims=True)),
    ]
    for fn, args, ref in cases:
        got = jitad.jit(fn)(*args)
        want = ref(*args)
        assert np.asarray(got).dtype == np.asarray(want).dtype, fn
        np.testing.assert_allclose(got, want, **tol)


def test_eigenvectors_and_qr_reconstruct():
    w, v = jitad.jit(la.eigh)(SPDB)
    np.testing.assert_allclose(v @ (w[..., None] * np.swapaxes(v, -1, -2)), SPDB, rtol=1e-10, atol=1e-10)
    assert np.all(np.diff(w, axis=-1) > 0)
    q, r = jitad.jit(la.qr)(TALLB)
    np.testing.assert_allclose(q @ r, TALLB, atol=1e-12)
    np.testing.assert_allclose(r, np.triu(r))


def test_int_operands_become_float64():
    out = jitad.jit(la.solve)(np.array([[2, 0], [0, 4]]), np.array([2, 2]))
    np.testing.assert_allclose(out, [1.0, 0.5])


def test_shape_errors_name_the_function():
    with pytest.raises(jitad.ShapeError, match="linalg.solve"):
        jitad.jit(la.solve)(TALL, B)
    with pytest.raises(jitad.ShapeError, match="linalg.cholesky"):
        jitad.jit(la.cholesky)(np.ones(3))


# -- failures ---------------------------------------------------------------------

SINGULAR = np.array([[1.0, 2.0], [2.0, 4.0]])
NOT_PD = np.array([[1.0, 2.0], [2.0, 1.0]])


def test_singular_and_not_positive_definite_give_nan_when_staged():
    assert np.isnan(jitad.jit(la.solve)(SINGULAR, np.ones(2))).all()
    assert np.isnan(jitad.jit(la.inv)(SINGULAR)).all()
    assert np.isnan(jitad.jit(la.cholesky)(NOT_PD)).all()
    assert np.isnan(jitad.jit(lambda a, b: la.solve_triangular(a, b))(np.zeros((2, 2)), np.ones(2))).all()
    assert jitad.jit(la.slogdet)(SINGULAR) == (0.0, -np.inf)
    assert jitad.jit(la.det)(SINGULAR) == 0.0
    # per matrix of a batch: the good one is unaffected
    out = jitad.jit(la.cholesky)(np.stack([NOT_PD, SPD[:2, :2]]))
    assert np.isnan(out[0]).all()
    np.testing.assert_allclose(out[1], np.linalg.cholesky(SPD[:2, :2]))


def test_check_raises_eagerly():
    with pytest.raises(la.LinAlgError, match="singular"):
        la.solve(SINGULAR, np.ones(2), check=True)
    with pytest.raises(np.linalg.LinAlgError):   # also NumPy's
        la.cholesky(NOT_PD, check=True)
    with pytest.raises(jitad.JitadError):
        la.inv(SINGULAR, check=True)
    assert np.isnan(la.solve(SINGULAR, np.ones(2))).all()   # without check: NaN, as staged
    assert np.isnan(la.cholesky(NOT_PD)).all()


def test_ill_conditioned_matches_numpy():
    h = scipy.linalg.hilbert(8)   # condition number ~1e10
    b = np.ones(8)
    np.testing.assert_allclose(jitad.jit(la.solve)(h, b), np.linalg.solve(h, b), rtol=1e-5)
    np.testing.assert_allclose(jitad.jit(la.slogdet)(h)[1], np.linalg.slogdet(h)[1], rtol=1e-8)   # LU of h^T: other rounding


# -- staged code: control flow, applications ---------------------------------------

def test_inside_for_and_if():
    def f(a, b):
        x = FOR(0, 3, lambda i, x: la.solve(a, x + b), b)     # x <- a^-1 (x + b), three times
        return IF(jitad.sum(x) > 0.0, lambda: la.det(a) * jitad.sum(x), lambda: -jitad.sum(x))

    def ref(m, a, b):
        x = b
        for _ in range(3):
            x = m.linalg.solve(a, x + b)
        return m.where(x.sum() > 0, m.linalg.det(a) * x.sum(), -x.sum())
    b = B[:, 0]
    assert jitad.jit(f)(A, b) == pytest.approx(float(ref(np, A, b)), rel=1e-10)
    ga, gb = jitad.grad(f, argnums=(0, 1))(A, b)
    ja, jb = jax.grad(lambda a, b: ref(jnp, a, b), argnums=(0, 1))(A, b)
    np.testing.assert_allclose(ga, ja, rtol=1e-8)
    np.testing.assert_allclose(gb, jb, rtol=1e-8)


def gp_nll(m, log_ls, log_noise, x, y):
    """A Gaussian process's negative log marginal likelihood (RBF kernel)."""
    lin = la if m is not jnp else jnp.linalg
    tri = la.solve_triangular if m is not jnp else jax.scipy.linalg.solve_triangular
    d = x[:, None, :] - x[None, :, :] if m is jnp else jitad.reshape(x, (20, 1, 2)) - jitad.reshape(x, (1, 20, 2))
    sq = (d * d).sum(-1) if m is jnp else jitad.sum(d * d, axis=2)
    k = m.exp(-0.5 * sq / m.exp(2 * log_ls)) + m.exp(log_noise) * np.eye(20)
    L = lin.cholesky(k)
    alpha = tri(L, y, lower=True)
    diag = (L * np.eye(20)).sum(-1) if m is jnp else jitad.sum(L * np.eye(20), axis=1)
    total = (alpha * alpha).sum() if m is jnp else jitad.sum(alpha * alpha)
    logs = m.log(diag).sum() if m is jnp else jitad.sum(jitad.log(diag))
    return 0.5 * total + logs + 10 * np.log(2 * np.pi)


def test_gaussian_process_marginal_likelihood_and_gradient_match_jax():
    x = rng.uniform(-2, 2, size=(20, 2))
    y = np.sin(x[:, 0]) + 0.1 * rng.normal(size=20)
    args = (0.1, -2.0, x, y)
    f = lambda *a: gp_nll(jitad, *a)
    fj = lambda *a: gp_nll(jnp, *a)
    assert jitad.jit(f)(*args) == pytest.approx(float(fj(*args)), rel=1e-10)
    got = jitad.grad(f, argnums=(0, 1, 2, 3))(*args)
    ref = jax.grad(fj, argnums=(0, 1, 2, 3))(*args)
    for g, r in zip(got, ref):
        np.testing.assert_allclose(g, np.asarray(r), rtol=1e-7, atol=1e-10)


def test_implicit_layer_solve_inside_fixed_point():
    """z* = tanh(W z* + solve(A, x)): the gradient w.r.t. A and x by the implicit function
    theorem, against JAX unrolling the same iteration to convergence."""
    w = 0.3 * rng.normal(size=(4, 4)) / 2
    x = rng.normal(size=4)

    def layer(a, x):
        u = la.solve(a, x)
        z = jitad.fixed_point(lambda z: jitad.tanh(jitad.matmul(w, z) + u), jitad.zeros(4) * jitad.sum(x),
                              tol=1e-13)
        return jitad.sum(z * z)

    def ref(a, x):
        u = jnp.linalg.solve(a, x)
        z = jnp.zeros(4)
        for _ in range(200):
            z = jnp.tanh(w @ z + u)
        return (z * z).sum()
    assert jitad.jit(layer)(A, x) == pytest.approx(float(ref(A, x)), rel=1e-10)
    ga, gx = jitad.grad(layer, argnums=(0, 1))(A, x)
    ja, jx = jax.grad(ref, argnums=(0, 1))(A, x)
    np.testing.assert_allclose(ga, ja, rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(gx, jx, rtol=1e-7, atol=1e-12)


def test_cuda_device_error_names_the_function():
    with pytest.raises(jitad.DeviceError, match="linalg.cholesky.*CPU backend"):
        jitad.jit(la.cholesky, device="cuda")(SPD)
    with pytest.raises(jitad.DeviceError, match="linalg.solve_triangular"):
        jitad.grad(lambda a: jitad.sum(la.solve_triangular(a, B)), device="cuda")(A)


def test_no_python_in_the_compiled_code():
    """The LAPACK calls are by symbol from the LLVM IR, not Python callbacks."""
    f = jitad.jit(lambda a, b: la.solve(a, b))
    f(A, B)
    assert "jitad_lapack_dgetrf" in f.llvm_ir and "jitad_lapack_dgetrs" in f.llvm_ir
