"""`jitad.scipy.optimize`: `minimize(fun, x0, method='BFGS')` as JAX's: BFGS with its
inverse-Hessian update, staged (a WHILE over iterations, another over each line
search), returning JAX's `OptimizeResults`."""
from typing import NamedTuple

import numpy as np

from .. import numeric as N
from ..api import value_and_grad
from ..errors import ArgumentError
from ..staging import WHILE

__all__ = ["OptimizeResults", "minimize"]


class OptimizeResults(NamedTuple):
    """The result of `minimize`: the solution `x`, `success`, `status` (0 converged,
    1 out of iterations, 3 the line search failed), the final `fun` and `jac`, the inverse
    Hessian estimate `hess_inv`, and the counts `nfev`, `njev`, `nit`."""
    x: object
    success: object
    status: object
    fun: object
    jac: object
    hess_inv: object
    nfev: object
    njev: object
    nit: object


def _norm(g, order):
    return N.max(N.abs(g)) if order == np.inf else N.sum(N.abs(g) ** order) ** (1.0 / order)


def _line_search(f_and_g, x, p, f0, g0, f_before, maxiter, c1=1e-4, c2=0.9):
    """A step length with the weak Wolfe conditions (sufficient decrease, curvature) by
    bracketing and bisection, from the first trial step JAX's search takes (the last
    decrease extrapolated, at most 1): (step, f, g, evaluations, failed)."""
    d0 = N.sum(g0 * p)
    first = 1.01 * 2.0 * (f0 - f_before) / N.where(d0 != 0, d0, -1.0)
    first = N.where((first > 0) & (first < 1.0), first, 1.0)

    def more(s):
        return ~s[0] & (s[1] < maxiter)

    def trial(s):
        _, i, a, lo, hi, _, _ = s
        fa, ga = f_and_g(x + a * p)
        long_ = ~(fa <= f0 + c1 * a * d0)   # NaN counts as too long
        short = ~long_ & (N.sum(ga * p) < c2 * d0)
        hi = N.where(long_, a, hi)
        lo = N.where(short, a, lo)
        nxt = N.where(hi < np.inf, 0.5 * (lo + hi), 2.0 * lo)
        done = ~long_ & ~short
        return done, i + 1, N.where(done, a, nxt), lo, hi, N.where(done, fa, f0), N.where(done, ga, g0)
    init = (N.sum(g0 * 0.0) != 0.0, 0, first, 0.0 * f0, np.inf + 0.0 * f0, f0, g0)
    done, evals, a, _, _, fa, ga = WHILE(more, trial, init)
    return a, fa, ga, evals, ~done


def _bfgs(fun, x0, maxiter, gtol, order, ls_maxiter):
    f_and_g = value_and_grad(fun)
    f0, g0 = f_and_g(x0)
    d = N._shape(x0)[0]
    eye = np.eye(d)

    def more(s):
        k, _, _, _, _, converged, failed = s[:7]
        return ~converged & ~failed & (k < maxiter)

    def step(s):
        k, x, f, g, h, _, _, nfev, f_before = s
        p = -N.matmul(h, g)
        a, f1, g1, evals, failed = _line_search(f_and_g, x, p, f, g, f_before, ls_maxiter)
        sk = a * p
        yk = g1 - g
        rho = 1.0 / N.sum(yk * sk)
        w = eye - rho * sk[:, None] * yk[None, :]
        h1 = N.matmul(N.matmul(w, h), N.transpose(w)) + rho * sk[:, None] * sk[None, :]
        h1 = N.where(N.abs(rho) < np.inf, h1, h)
        return (k + 1, N.where(failed, x, x + sk), N.where(failed, f, f1), N.where(failed, g, g1),
                N.where(failed, h, h1), _norm(g1, order) < gtol, failed, nfev + evals, f)
    init = (0, x0, f0, g0, eye + 0.0 * N.sum(x0), _norm(g0, order) < gtol, N.sum(x0 * 0.0) != 0.0, 1,
            f0 + N.sqrt(N.sum(g0 * g0)) / 2.0)
    k, x, f, g, h, converged, failed, nfev, _ = WHILE(more, step, init)
    status = N.where(converged, 0, N.where(failed, 3, 1))
    return OptimizeResults(x=x, success=converged & ~failed, status=status, fun=f, jac=g, hess_inv=h,
                           nfev=nfev, njev=nfev, nit=k)


def minimize(fun, x0, args=(), *, method, tol=None, options=None):
    """Minimize `fun(x, *args)` over a 1-D `x` from `x0`, as `jax.scipy.optimize.minimize`:
    `method='BFGS'` (the one JAX has), `tol` the gradient norm to stop at (else
    options['gtol'], 1e-5), options `maxiter` (200 per dimension), `norm` (inf),
    `line_search_maxiter` (20: the search bisects).

    >>> minimize(lambda x: jitad.numpy.sum((x - 2.0) ** 2), np.zeros(2), method="BFGS").x
    """
    if not isinstance(args, tuple):
        raise ArgumentError(f"minimize: args must be a tuple, got {type(args).__name__}")
    if method.lower() != "bfgs":
        raise ArgumentError(f"minimize: method={method!r}; jitad (as JAX) implements 'BFGS'")
    if len(N._shape(x0)) != 1:
        raise ArgumentError(f"minimize: x0 must be 1-D (shape {N._shape(x0)}); ravel it and reshape inside fun")
    options = dict(options or {})
    unknown = set(options) - {"maxiter", "norm", "gtol", "line_search_maxiter"}
    if unknown:
        raise ArgumentError(f"minimize: unknown options {sorted(unknown)}; BFGS takes maxiter, norm, gtol, "
                            "line_search_maxiter")
    gtol = tol if tol is not None else options.get("gtol", 1e-5)
    x0 = x0 if N.is_staged(x0) else np.asarray(x0, np.float64)
    return _bfgs(lambda x: fun(x, *args), x0, options.get("maxiter", N._shape(x0)[0] * 200), gtol,
                 options.get("norm", np.inf), options.get("line_search_maxiter", 20))
