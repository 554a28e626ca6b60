"""jitad.scipy.optimize.minimize (BFGS) against JAX's and SciPy's: the same minima on
smooth problems, JAX's result fields, `args` and options, eager and staged."""
import numpy as np
import pytest
import scipy.optimize as so

import jitad
import jitad.numpy as jnp
from jitad.errors import JitadError
from jitad.scipy.optimize import OptimizeResults, minimize

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.scipy.optimize as jo  # noqa: E402


def rosen(m):
    return lambda x: m.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2)


def quad(m):
    a = np.array([[3.0, 0.5, 0.0], [0.5, 2.0, 0.3], [0.0, 0.3, 1.0]])
    return lambda x, b: 0.5 * m.dot(x, m.dot(a, x)) - m.dot(b, x)


B = np.array([1.0, -2.0, 0.5])


def test_same_minimum_as_jax_and_scipy():
    # JAX's own line search gives up (status 3) on Rosenbrock from (-1.2, 1): SciPy only there
    for f, x0, args, jax_solves in ((rosen, np.array([-1.2, 1.0]), (), False), (quad, np.zeros(3), (B,), True),
                                    (rosen, np.array([0.5, 0.8, 1.3]), (), True)):
        mine = minimize(f(jnp), x0, args, method="BFGS")
        ref = so.minimize(f(np), x0, args, method="BFGS", jac=jax.grad(f(jax.numpy)))
        assert isinstance(mine, OptimizeResults) and int(mine.status) == 0 and bool(mine.success)
        if jax_solves:
            theirs = jo.minimize(f(jax.numpy), x0, args, method="BFGS")
            assert int(theirs.status) == 0
            np.testing.assert_allclose(mine.x, theirs.x, atol=2e-5)
        np.testing.assert_allclose(mine.x, ref.x, atol=2e-5)
        np.testing.assert_allclose(mine.fun, f(np)(mine.x, *args), rtol=1e-14)
        np.testing.assert_allclose(mine.jac, jax.grad(f(jax.numpy))(mine.x, *args), rtol=1e-10, atol=1e-14)
        assert np.max(np.abs(mine.jac)) < 1e-5 and mine.nit > 0 and mine.nfev >= mine.nit
    a = np.array([[3.0, 0.5, 0.0], [0.5, 2.0, 0.3], [0.0, 0.3, 1.0]])
    np.testing.assert_allclose(minimize(quad(jnp), np.zeros(3), (B,), method="bfgs").x, np.linalg.solve(a, B),
                               atol=1e-6)


def test_staged_and_options():
    x0 = np.array([-1.2, 1.0])
    eager = minimize(rosen(jnp), x0, method="BFGS")
    staged = jitad.jit(lambda x: minimize(rosen(jnp), x, method="BFGS"))(x0)
    np.testing.assert_allclose(staged.x, eager.x, rtol=1e-12)
    assert int(staged.nit) == int(eager.nit)
    capped = minimize(rosen(jnp), x0, method="BFGS", options={"maxiter": 3})
    assert int(capped.status) == 1 and not bool(capped.success) and int(capped.nit) == 3
    loose = minimize(rosen(jnp), x0, method="BFGS", tol=1e-2)
    assert np.max(np.abs(loose.jac)) < 1e-2 and loose.nit <= eager.nit


def test_bad_arguments_name_the_fix():
    with pytest.raises(JitadError, match="BFGS"):
        minimize(rosen(jnp), np.zeros(2), method="Nelder-Mead")
    with pytest.raises(JitadError, match="1-D"):
        minimize(rosen(jnp), np.zeros((2, 2)), method="BFGS")
    with pytest.raises(JitadError, match="unknown options"):
        minimize(rosen(jnp), np.zeros(2), method="BFGS", options={"disp": True})
