"""Complex values in staged code (pairs of real parts, `jitad.staging.Complex`): each
function against NumPy's values and JAX's gradients (x64 on) on the same inputs, under
`jit`, `grad`, `vmap` and control flow; the gradient convention (df/dx - i df/dy) against
JAX and autograd; `holomorphic`, `vjp` and `jvp` with complex cotangents and tangents.
(`test_fft.py` holds the transforms.)"""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.errors import ArgumentError, UnsupportedError
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
JNP = jax.numpy

RNG = np.random.default_rng(0)
Z = RNG.normal(size=4) + 1j * RNG.normal(size=4)          # no zeros, off the branch cuts
Z[0] = -1.3 + 1e-3j                                        # near the cut of log and sqrt, above it
M = RNG.normal(size=(3, 3)) + 1j * RNG.normal(size=(3, 3))
X = RNG.normal(size=(3, 3))

ELEMENTWISE = ["exp", "log", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "square", "reciprocal",
               "abs", "angle", "real", "imag", "conj", "conjugate", "log10", "expm1", "log1p", "negative", "exp2",
               "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh"]


def _close(ours, theirs, what, rtol=1e-11, atol=1e-12):
    assert np.shape(ours) == np.shape(theirs), what
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol, err_msg=what)


def _weights(shape):
    return (np.cos(np.arange(int(np.prod(shape)))) + 0.5j).reshape(shape)


def _loss(m, out):
    """A real function of a result, for its gradient: Re <w, out>."""
    return m.sum(m.real(m.asarray(out) * _weights(np.shape(out))))


# JAX's derivative of arccosh has the wrong sign where Re z < -1 (its rule is 1/sqrt(z^2 - 1),
# not the derivative 1/(sqrt(z - 1) sqrt(z + 1)) of the principal branch it computes); jitad's
# is checked against central differences instead (test_check_grads_...)
JAX_GRADIENT_DIFFERS = {"arccosh"}


def _compare(fns, args, rtol=1e-11):
    """Each `fn(m, *args)` (m: jitad.numpy or jax.numpy) against NumPy's values (m = numpy)
    and JAX's, and its gradients with respect to every argument against JAX's: one compiled
    program for all values and one for all gradients."""
    def program(m, transform):
        def run(*a):
            def grad(fn):
                return transform(lambda *b: _loss(m, fn(m, *b)), argnums=tuple(range(len(a))))(*a)
            return [fn(m, *a) for fn in fns.values()], [grad(fn) for fn in fns.values()]
        return run
    values, grads = jitad.jit(program(jnp, jitad.grad))(*args)
    jax_values, jax_grads = jax.jit(program(JNP, jax.grad))(*args)
    for name, value, grad, jax_value, jax_grad in zip(fns, values, grads, jax_values, jax_grads):
        fn = fns[name]
        assert np.asarray(value).dtype == np.asarray(fn(np, *args)).dtype, name
        _close(value, fn(np, *args), f"{name}: NumPy's value", rtol)
        _close(value, jax_value, f"{name}: JAX's value", rtol)
        for k, (g, t) in enumerate(zip(grad, jax_grad)):
            if name not in JAX_GRADIENT_DIFFERS:
                _close(g, t, f"{name}: JAX's gradient for argument {k}", rtol)


def test_elementwise_functions_match_numpy_and_jax():
    _compare({name: lambda m, z, name=name: getattr(m, name)(z) for name in ELEMENTWISE}, (Z,))


def test_arithmetic_with_real_and_complex_operands():
    x = RNG.normal(size=4)
    _compare({"z*x": lambda m, z, x: z * x, "x/z": lambda m, z, x: x / z, "z/z": lambda m, z, x: z / (z * z + 1),
              "1j*x": lambda m, z, x: 1j * x + (2 - 1j), "z-x": lambda m, z, x: x - z + 3,
              "z**3": lambda m, z, x: z ** 3, "z**-2": lambda m, z, x: z ** -2, "z**0.5j": lambda m, z, x: z ** (0.5 + 0.25j),
              "x**z": lambda m, z, x: m.abs(x) ** z, "z**z": lambda m, z, x: z ** z, "power": lambda m, z, x: m.power(z, 2),
              "-z": lambda m, z, x: -z, "where": lambda m, z, x: m.where(x > 0, z, x * 1j)}, (Z, x))


@pytest.mark.slow   # (several seconds: many products, compiled by jitad and XLA)
def test_reductions_products_and_shapes():
    v = RNG.normal(size=3) + 1j * RNG.normal(size=3)
    _compare({
        "sum": lambda m, a, v: m.sum(a, axis=0), "mean": lambda m, a, v: m.mean(a), "prod": lambda m, a, v: m.prod(a, 1),
        "prod-all": lambda m, a, v: m.prod(a), "var": lambda m, a, v: m.var(a, axis=1), "std": lambda m, a, v: m.std(a),
        "dot": lambda m, a, v: m.dot(a, v), "matmul": lambda m, a, v: a @ a.T, "einsum": lambda m, a, v: m.einsum("ij,j,jk->ik", a, v, a),
        "tensordot": lambda m, a, v: m.tensordot(a, a, axes=([1], [0])), "inner": lambda m, a, v: m.inner(v, v),
        "outer": lambda m, a, v: m.outer(v, v.real), "vdot": lambda m, a, v: m.vdot(v, a[0]), "kron": lambda m, a, v: m.kron(v, v),
        "reshape": lambda m, a, v: a.reshape(9)[::2], "transpose": lambda m, a, v: m.transpose(a).T[1],
        "index": lambda m, a, v: a[1:, [0, 2]], "concatenate": lambda m, a, v: m.concatenate([a, a.real], axis=1),
        "stack": lambda m, a, v: m.stack([v, v * 2, v.imag]), "array": lambda m, a, v: m.array([v[0], 2.0, 1j * v[1]]),
        "norm": lambda m, a, v: m.linalg.norm(a), "norm-axis": lambda m, a, v: m.linalg.norm(a, axis=0),
        "norm-3": lambda m, a, v: m.linalg.norm(v, 3), "norm-inf": lambda m, a, v: m.linalg.norm(a, np.inf),
        "norm-2": lambda m, a, v: m.linalg.norm(a, 2), "cumsum": lambda m, a, v: m.cumsum(v),
        "max": lambda m, a, v: m.max(a, axis=0), "min": lambda m, a, v: m.min(v),
    }, (M, v))


@pytest.mark.slow   # (several seconds: many products, compiled by jitad and XLA)
def test_linear_algebra_of_complex_matrices():
    b = RNG.normal(size=3) + 1j * RNG.normal(size=3)
    hermitian = M @ M.conj().T + 3 * np.eye(3)
    _compare({"inv": lambda m, a, b: m.linalg.inv(a), "solve": lambda m, a, b: m.linalg.solve(a, b),
              "solve-matrix": lambda m, a, b: m.linalg.solve(a, a.T), "det": lambda m, a, b: m.linalg.det(a),
              "slogdet-sign": lambda m, a, b: m.linalg.slogdet(a)[0], "slogdet-log": lambda m, a, b: m.linalg.slogdet(a)[1],
              "cholesky": lambda m, a, b: m.linalg.cholesky(a @ a.conj().T + 3 * m.eye(3))}, (M, b), rtol=1e-9)
    assert np.allclose(jitad.jit(jnp.linalg.det)(np.stack([M, hermitian])), np.linalg.det(np.stack([M, hermitian])))
    with pytest.raises(UnsupportedError, match="linalg.qr"):
        jitad.jit(jnp.linalg.qr)(hermitian)


@pytest.mark.slow   # (several seconds: many products, compiled by jitad and XLA)
def test_check_grads_to_second_order_in_both_modes():
    check_grads(lambda z: jnp.exp(z) * jnp.sin(z) / (z + 2) + jnp.sqrt(z) * jnp.log(z), (Z,), order=2,
                modes=("fwd", "rev"))
    check_grads(lambda a: jnp.linalg.inv(a) @ a.T + jnp.abs(jnp.linalg.det(a)), (M,), order=2, modes=("fwd", "rev"))
    check_grads(lambda x: jnp.tanh(x * (1 + 2j)).imag, (X,), order=2, modes=("fwd", "rev"))
    check_grads(lambda z: jnp.arccosh(z) * jnp.arcsin(z), (Z,), order=1, modes=("fwd", "rev"))


def test_gradient_convention_is_jaxs_and_autograds():
    f = lambda m: lambda z: m.abs(z ** 2 + 3j * z) ** 2   # noqa: E731
    ours = jitad.grad(f(jnp))(0.7 + 0.4j)
    assert np.isclose(ours, jax.grad(f(JNP))(0.7 + 0.4j)) and np.isclose(ours, 17.78 - 14.06j)
    autograd = pytest.importorskip("autograd")
    assert np.isclose(ours, autograd.grad(f(autograd.numpy))(0.7 + 0.4j))
    g = jitad.grad(lambda z: jnp.sum(jnp.abs(z) ** 2))(Z)   # of an array: 2 conj... no: 2 z
    _close(g, jax.grad(lambda z: JNP.sum(JNP.abs(z) ** 2))(Z), "|z|^2")
    assert jitad.grad(lambda x: jnp.real(x * 1j))(2.0) == 0.0 and isinstance(jitad.grad(jnp.real)(2.0), float)


def test_holomorphic_vjp_and_jvp_follow_jax():
    f = lambda m: lambda z: m.sin(z) * z ** 2   # noqa: E731
    z0, t, ct = 0.3 + 0.8j, 0.5 - 1.5j, 2.0 + 0.25j
    assert np.isclose(jitad.grad(f(jnp), holomorphic=True)(z0), jax.grad(f(JNP), holomorphic=True)(z0))
    assert np.isclose(jitad.holomorphic_grad(f(jnp))(z0), jax.grad(f(JNP), holomorphic=True)(z0))
    assert np.allclose(jitad.value_and_grad(f(jnp), holomorphic=True)(z0), jax.value_and_grad(f(JNP), holomorphic=True)(z0))
    out, pullback = jitad.vjp(f(jnp), z0)
    jout, jpullback = jax.vjp(f(JNP), z0)
    assert np.isclose(out, jout) and np.isclose(pullback(ct)[0], jpullback(ct)[0])
    ours, theirs = jitad.jvp(f(jnp), (z0,), (t,)), jax.jvp(f(JNP), (z0,), (t,))
    assert np.allclose(ours, theirs)
    v, g = jitad.value_and_grad(lambda z: jnp.abs(jnp.sum(z * z)))(Z)
    jv, jg = jax.value_and_grad(lambda z: JNP.abs(JNP.sum(z * z)))(Z)
    assert np.isclose(v, jv) and np.allclose(g, jg)
    staged = jitad.jit(lambda z: jitad.vjp(f(jnp), z)[1](ct)[0])(z0)   # inside a trace too
    assert np.isclose(staged, jpullback(ct)[0])
    with pytest.raises(ArgumentError, match="holomorphic=True"):
        jitad.grad(f(jnp))(z0)
    with pytest.raises(ArgumentError, match="complex result"):
        jitad.grad(jnp.abs, holomorphic=True)(z0)


def test_jit_vmap_and_loops_carry_complex_values():
    f = jitad.jit(lambda z, x: (z * x, jnp.sum(z), x + 1.0))
    out = f(Z, 2.0)
    assert type(out[0]) is jnp.Array and out[0].dtype == np.complex128 and out[2] == 3.0
    _close(out[0], Z * 2.0, "z * x")
    assert f(Z.astype(np.complex64), np.float32(2.0))[0].dtype == np.complex64
    made = jitad.jit(lambda x: (x.astype(np.complex64), jnp.asarray(x, dtype=jnp.complex128), x * 1j))(X.astype(np.float32))
    assert [m.dtype for m in made] == [np.complex64, np.complex128, np.complex64] and np.allclose(made[2], X * 1j)
    _close(jitad.vmap(lambda z: jnp.dot(z, z.conj()))(M), np.einsum("ij,ij->i", M, M.conj()), "vmap")
    _close(jitad.jit(lambda a: a[(0, 2), (1, 1)])(M), M[(0, 2), (1, 1)], "a tuple in the index: an index array")
    _close(jitad.vmap(lambda z, x: z * x, in_axes=(0, None))(M, 2j), M * 2j, "vmap with a complex constant")

    def rotate(z, n):
        return jitad.lax.fori_loop(0, n, lambda i, w: w * jnp.exp(0.25j) + 1.0, z)
    _close(jitad.jit(rotate)(Z, 3), jax.jit(lambda z: jax.lax.fori_loop(0, 3, lambda i, w: w * JNP.exp(0.25j) + 1.0, z))(Z),
           "fori_loop")
    step = lambda m: lambda c, x: (c * x + 1.0, c.real)   # noqa: E731  (a complex constant carry)
    _close(jitad.jit(lambda z: jitad.lax.scan(step(jnp), 1.0 + 0j, z)[0])(Z),
           jax.jit(lambda z: jax.lax.scan(step(JNP), 1.0 + 0j, z)[0])(Z), "scan")
    g = jitad.grad(lambda z: jnp.abs(rotate(z, 3)).sum())(Z)
    _close(g, jax.grad(lambda z: JNP.abs(jax.lax.fori_loop(0, 3, lambda i, w: w * JNP.exp(0.25j) + 1.0, z)).sum())(Z),
           "grad through fori_loop")


def test_plain_complex_arrays_keep_numpys_results():
    _close(jnp.exp(Z), np.exp(Z), "exp")
    _close(jnp.dot(M, M), M @ M, "dot")
    assert jnp.iscomplexobj(Z) and jnp.isrealobj(X) and not jnp.iscomplexobj(jitad.jit(lambda x: jnp.abs(x))(Z))
    assert jnp.real_if_close(np.array([1.0 + 0j])).dtype == np.float64


def test_what_complex_values_do_not_do_raises_a_jitad_error():
    with pytest.raises(UnsupportedError, match="no order"):
        jitad.jit(lambda z: z < 1.0)(Z)
    with pytest.raises(UnsupportedError, match="decision"):
        jitad.jit(lambda z: jitad.IF(z[0], lambda: 1.0, lambda: 2.0))(Z)
    with pytest.raises(UnsupportedError, match="complex value"):
        jitad.jit(lambda z: jnp.maximum(z, 1.0))(Z)
    with pytest.raises(UnsupportedError, match="astype"):
        jitad.jit(lambda z: z.astype(np.float64))(Z)
    with pytest.raises(ArgumentError, match="holomorphic"):
        jitad.jacfwd(jnp.sin, holomorphic=True)


def test_complex_arguments_meet_the_real_arguments_rules():
    """A complex argument too large to copy is refused as a real one is (ResourceError, not
    NumPy's MemoryError while splitting it), and `jitad.trace` takes what `jit` takes."""
    huge = np.broadcast_to(np.complex128(0.5 + 1j), (2 ** 45,))
    with pytest.raises(jitad.errors.ResourceError, match="contiguous copy"):
        jitad.jit(lambda x: x[0])(huge)
    assert "mul" in str(jitad.trace(lambda t: t[1] * 2.0, (0.0, 1j)))
    assert jitad.jit(lambda t: t[1] * 2.0)((0.0, 1j)) == 2j
