"""`jitad.experimental.ode.odeint`: JAX's adaptive Dormand-Prince solver, staged and
differentiable.

>>> from jitad.experimental.ode import odeint
>>> ys = odeint(lambda y, t, k: -k * y, np.array([1.0]), np.array([0.0, 1.0]), 2.0)

The steps, their error control and the dense output between steps follow JAX's
algorithm, so the solution agrees with `jax.experimental.ode.odeint` to the working
precision. Gradients (with respect to `y0`, the times `t` and the extra arguments) come
from the adjoint system, solved backwards between the output times by the same solver
with the same tolerances, as JAX's.
"""
import builtins
import functools

import numpy as np

from .. import lax
from ..api import vjp
from ..transforms.custom import custom_vjp
from .. import numeric as N
from .. import tree_util
from ..errors import ArgumentError
from ..flatten_util import ravel_pytree

__all__ = ["odeint", "runge_kutta_step", "interp_fit_dopri", "fit_4th_order_polynomial", "initial_step_size",
           "mean_error_ratio", "optimal_step_size", "abs2", "ravel_first_arg", "map", "zip", "safe_map", "safe_zip",
           "tree_leaves", "tree_map", "promote_dtypes_inexact"]

# The Dormand-Prince 5(4) tableau: nodes, stage weights, the 5th-order solution and the
# difference to the embedded 4th-order one, and the midpoint weights of the dense output.
_ALPHA = (1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
_BETA = ((1 / 5,), (3 / 40, 9 / 40), (44 / 45, -56 / 15, 32 / 9),
         (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
         (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
         (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84))
_SOLUTION = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
_ERROR = (35 / 384 - 1951 / 21600, 0.0, 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
          -2187 / 6784 + 12231 / 42400, 11 / 84 - 649 / 6300, -1.0 / 60.0)
_MIDPOINT = (6025192743 / 30085553152 / 2, 0.0, 51252292925 / 65400821598 / 2, -2691868925 / 45128329728 / 2,
             187940372067 / 1594534317056 / 2, -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2)


def _combine(weights, k):
    """sum of w_i k_i over the nonzero weights."""
    total = None
    for w, ki in zip(weights, k):
        if w != 0.0:
            total = w * ki if total is None else total + w * ki
    return total


def _rk_step(f, y0, f0, t0, dt):
    """One Dormand-Prince step: the new state, its derivative, the error estimate and the
    seven stage derivatives."""
    k = [f0]
    for alpha, beta in zip(_ALPHA, _BETA):
        k.append(f(y0 + dt * _combine(beta, k), t0 + dt * alpha))
    return y0 + dt * _combine(_SOLUTION, k), k[-1], dt * _combine(_ERROR, k), k


def _dense_output(y0, y1, k, dt):
    """The coefficients (highest first) of the quartic through the step, in its relative time."""
    y_mid = y0 + dt * _combine(_MIDPOINT, k)
    return N.stack(list(fit_4th_order_polynomial(y0, y1, y_mid, k[0], k[-1], dt)))


def _norm(v):
    return N.sqrt(N.sum(v * v))


def _solve(f, y0, ts, rtol, atol, mxstep, hmax):
    f0 = f(y0, ts[0])
    dt = N.clip(initial_step_size(f, ts[0], y0, 4, rtol, atol, f0), 0.0, hmax)
    coeff = N.stack([y0] * 5)

    def advance(carry, target):
        def more(state):
            i, _, _, t, dt, _, _ = state
            return (t < target) & (i < mxstep) & (dt > 0)

        def step(state):
            i, y, fy, t, dt, last_t, coeff = state
            y1, f1, err, k = _rk_step(f, y, fy, t, dt)
            ratio = mean_error_ratio(err, rtol, atol, y, y1)
            new_dt = N.clip(optimal_step_size(dt, ratio), 0.0, hmax)
            ok = ratio <= 1.0
            pick = lambda new, old: N.where(ok, new, old)
            return (i + 1, pick(y1, y), pick(f1, fy), pick(t + dt, t), new_dt, pick(t, last_t),
                    pick(_dense_output(y, y1, k, dt), coeff))
        _, y, fy, t, dt, last_t, coeff = lax.while_loop(more, step, (0,) + carry)
        s = (target - last_t) / (t - last_t)
        value = coeff[0]
        for row in range(1, 5):
            value = value * s + coeff[row]
        return (y, fy, t, dt, last_t, coeff), value
    _, ys = lax.scan(advance, (y0, f0, ts[0], dt, ts[0], coeff), ts[1:])
    return N.concatenate([N.reshape(y0, (1,) + N._shape(y0)), ys], axis=0)


def odeint(func, y0, t, *args, rtol=1.4e-8, atol=1.4e-8, mxstep=np.inf, hmax=np.inf):
    """The solution of dy/dt = func(y, t, *args) from y(t[0]) = y0 at each time of `t`
    (increasing), as `jax.experimental.ode.odeint`: adaptive Dormand-Prince steps with
    relative and absolute tolerances `rtol`, `atol`, at most `mxstep` steps between two
    output times and steps no longer than `hmax`. `y0` may be a pytree; the result has
    its structure with a leading axis of len(t).

    >>> odeint(lambda y, t: -y, 1.0, np.array([0.0, 1.0]))[1]   # exp(-1)
    """
    if N._shape(t) == () or len(N._shape(t)) != 1:
        raise ArgumentError(f"odeint: t must be a 1-D array of times, got shape {N._shape(t)}")
    if not N.is_staged(t) and np.asarray(t).dtype.kind != "f":
        raise ArgumentError("odeint: t must be an array of floats (np.linspace(0.0, 1.0, 11), not ints)")
    flat, unravel = ravel_pytree(y0)
    flat = flat if N.is_staged(flat) else np.asarray(flat, np.float64)
    rhs = lambda y, s, *a: ravel_pytree(func(unravel(y), s, *a))[0]
    ys = _odeint(rhs, rtol, atol, mxstep, hmax, flat, t, *args)
    n = N._shape(t)[0]
    if not isinstance(y0, (dict, list, tuple)):
        return N.reshape(ys, (n,) + N._shape(y0))
    return tree_util.tree_map(lambda *leaves: N.stack(leaves), *[unravel(ys[i]) for i in range(n)])


@functools.partial(custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4))
def _odeint(f, rtol, atol, mxstep, hmax, y0, ts, *args):
    return _solve(lambda y, t: f(y, t, *args), y0, ts, rtol, atol, mxstep, hmax)


def _odeint_fwd(f, rtol, atol, mxstep, hmax, y0, ts, *args):
    ys = _odeint(f, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _odeint_bwd(f, rtol, atol, mxstep, hmax, res, g):
    """The adjoint: between each pair of output times, backwards in time, the state with
    its cotangent, the start time's and the arguments' cotangents (y, a, t0_bar, args_bar)
    solved together; each output time's own cotangent is f(y_i, t_i) . g_i."""
    ys, ts, args = res

    def augmented(state, minus_t, *a):
        y, y_bar = state[0], state[1]
        y_dot, back = vjp(f, y, -minus_t, *a)
        return (-y_dot, *back(y_bar))

    def back_one(carry, i):
        y_bar, t0_bar, args_bar = carry
        t_bar = N.sum(f(ys[i], ts[i], *args) * g[i])
        state = (ys[i], y_bar, t0_bar - t_bar, args_bar)
        out = odeint(augmented, state, N.stack([-ts[i], -ts[i - 1]]), *args,
                     rtol=rtol, atol=atol, mxstep=mxstep, hmax=hmax)
        _, y_bar, t0_bar, args_bar = tree_util.tree_map(lambda v: v[1], out)
        return (y_bar + g[i - 1], t0_bar, args_bar), t_bar
    n = N._shape(ts)[0]
    zeros = tuple(tree_util.tree_map(N.zeros_like, a) for a in args)   # (an argument may be a pytree)
    (y_bar, t0_bar, args_bar), rev_t_bars = lax.scan(back_one, (g[-1], 0.0 * ts[0], zeros),
                                                      np.arange(n - 1, 0, -1))
    ts_bar = N.concatenate([N.reshape(t0_bar, (1,)), rev_t_bars[::-1]])
    return (y_bar, ts_bar, *args_bar)


_odeint.defvjp(_odeint_fwd, _odeint_bwd)


# -- JAX's helper names, at its signatures -------------------------------------------------------

def runge_kutta_step(func, y0, f0, t0, dt):
    """One Dormand-Prince step of dy/dt = func(y, t): (y1, f1, error estimate, the seven
    stage derivatives stacked), as JAX's helper."""
    y1, f1, err, k = _rk_step(func, y0, f0, t0, dt)
    return y1, f1, err, N.stack(k)


def fit_4th_order_polynomial(y0, y1, y_mid, dy0, dy1, dt):
    """The coefficients (a, b, c, d, e), highest first, of the quartic in the relative time
    through y0, y_mid, y1 with slopes dy0, dy1 at the ends."""
    a = -2.0 * dt * dy0 + 2.0 * dt * dy1 - 8.0 * y0 - 8.0 * y1 + 16.0 * y_mid
    b = 5.0 * dt * dy0 - 3.0 * dt * dy1 + 18.0 * y0 + 14.0 * y1 - 32.0 * y_mid
    c = -4.0 * dt * dy0 + dt * dy1 - 11.0 * y0 - 5.0 * y1 + 16.0 * y_mid
    return a, b, c, dt * dy0, y0


def interp_fit_dopri(y0, y1, k, dt):
    """The dense-output quartic of one step (k: the stage derivatives, stacked)."""
    return _dense_output(y0, y1, [k[i] for i in range(7)], dt)


def initial_step_size(fun, t0, y0, order, rtol, atol, f0):
    """Hairer's starting step for a method of order `order`."""
    scale = atol + N.abs(y0) * rtol
    d0, d1 = _norm(y0 / scale), _norm(f0 / scale)
    h0 = N.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / N.where(d1 > 0, d1, 1.0))
    d2 = _norm((fun(y0 + h0 * f0, t0 + h0) - f0) / scale) / h0
    big = N.maximum(d1, d2)
    h1 = N.where((d1 <= 1e-15) & (d2 <= 1e-15), N.maximum(1e-6, h0 * 1e-3),
                 (0.01 / N.where(big > 0, big, 1.0)) ** (1.0 / (order + 1.0)))
    return N.minimum(100.0 * h0, h1)


def abs2(x):
    """|x|² (real arrays: x * x)."""
    return x * x


def mean_error_ratio(error_estimate, rtol, atol, y0, y1):
    """The root-mean-square of the error estimate over the tolerance."""
    tol = atol + rtol * N.maximum(N.abs(y0), N.abs(y1))
    return N.sqrt(N.mean(abs2(error_estimate / tol)))


def optimal_step_size(last_step, mean_error_ratio, safety=0.9, ifactor=10.0, dfactor=0.2, order=5.0):
    """The next step from the last one and its error ratio."""
    floor = N.where(mean_error_ratio < 1, 1.0, dfactor)
    safe = N.where(mean_error_ratio > 0, mean_error_ratio, 1.0)
    factor = N.minimum(ifactor, N.maximum(safe ** (-1.0 / order) * safety, floor))
    return N.where(mean_error_ratio == 0, last_step * ifactor, last_step * factor)


def ravel_first_arg(f, unravel, debug_info=None):
    """`f` over a flat first argument: f(unravel(y), *args) raveled."""
    return lambda y, *args: ravel_pytree(f(unravel(y), *args))[0]


# The utilities JAX's ode module carries in its namespace.
map, zip = builtins.map, builtins.zip   # noqa: A001
tree_leaves, tree_map = tree_util.tree_leaves, tree_util.tree_map


def safe_map(f, *xs):
    """map over sequences of equal length (a length mismatch is an ArgumentError)."""
    return list(builtins.map(f, *_same_length("safe_map", xs)))


def safe_zip(*xs):
    """zip over sequences of equal length (a length mismatch is an ArgumentError)."""
    return list(builtins.zip(*_same_length("safe_zip", xs)))


def _same_length(who, xs):
    xs = [list(x) for x in xs]
    if len({len(x) for x in xs}) > 1:
        raise ArgumentError(f"{who}: lengths {[len(x) for x in xs]} differ; give sequences of one length")
    return xs


def promote_dtypes_inexact(*args):
    """The arguments as arrays of one float dtype (ints and bools to float64), as JAX's helper."""
    arrays = [a if N.is_staged(a) else np.asarray(a) for a in args]
    kinds = [np.dtype(N.NUMPY_OF[a.ir_dtype]) if N.is_staged(a) else a.dtype for a in arrays]
    dtype = np.result_type(*kinds, np.float32) if all(k == np.float32 for k in kinds) else np.float64
    name = "f32" if dtype == np.float32 else "f64"
    return [N.convert(a, name) if N.is_staged(a) else a.astype(dtype) for a in arrays]
