"""GradBench's evals with hand-derived derivatives in numba: the practical limit.

`particle` carries the derivative w.r.t. w through the Euler loop by hand (forward
tangents, second derivatives of the potential written out); in `saddle` the inner
argmax does not depend on the outer point, so the outer gradient is 2·p1 exactly, as
every AD mode computes it; the solver is GradBench's, with value and gradient from one
pass (as the other implementations here). Scalar code: the particle/saddle loops touch
no arrays."""
import math

import numpy as np
from numba import njit

from .nested import ETA0, TOL


# particle and saddle: scalars only (no arrays in the loops); `fg(x.., p..)` returns the
# value and the gradient, and the solver is GradBench's, written once per dimension.

@njit
def argmin1(fg, x, p):
    """GradBench's gradient descent in one dimension; fg(x, p) = (f(x), f'(x))."""
    fx, gx = fg(x, p)
    eta, i = ETA0, 0
    while True:
        if abs(gx) <= TOL:
            return x
        if i == 10:
            eta, i = 2 * eta, 0
            continue
        x1 = x - eta * gx
        if abs(x - x1) <= TOL:
            return x
        f1, g1 = fg(x1, p)
        if f1 < fx:
            x, fx, gx, i = x1, f1, g1, i + 1
        else:
            eta, i = eta / 2, 0


@njit
def argmin2(fg, x0, x1, p0, p1):
    """The same in two dimensions; fg(x0, x1, p0, p1) = (f, ∂f/∂x0, ∂f/∂x1)."""
    fx, g0, g1 = fg(x0, x1, p0, p1)
    eta, i = ETA0, 0
    while True:
        if math.sqrt(g0 * g0 + g1 * g1) <= TOL:
            return x0, x1
        if i == 10:
            eta, i = 2 * eta, 0
            continue
        y0, y1 = x0 - eta * g0, x1 - eta * g1
        if math.sqrt((x0 - y0) ** 2 + (x1 - y1) ** 2) <= TOL:
            return x0, x1
        f1, h0, h1 = fg(y0, y1, p0, p1)
        if f1 < fx:
            x0, x1, fx, g0, g1, i = y0, y1, f1, h0, h1, i + 1
        else:
            eta, i = eta / 2, 0


@njit
def _euler(w, _):
    """naive_euler(w) and its derivative: tangents dx, dv w.r.t. w ride along."""
    dt = 0.1
    x0, x1, v0, v1 = 0.0, 8.0, 0.75, 0.0
    dx0 = dx1 = dv0 = dv1 = 0.0
    while True:
        a0 = a1 = da0 = da1 = 0.0
        for c in range(2):
            cy, dcy = (10.0 - w, -1.0) if c == 0 else (0.0, 0.0)
            d0, d1 = x0 - 10.0, x1 - cy
            e0, e1 = dx0, dx1 - dcy
            r2 = d0 * d0 + d1 * d1
            r3 = r2 * math.sqrt(r2)
            dot = d0 * e0 + d1 * e1
            a0 += d0 / r3
            a1 += d1 / r3
            da0 += e0 / r3 - 3.0 * d0 * dot / (r3 * r2)
            da1 += e1 / r3 - 3.0 * d1 * dot / (r3 * r2)
        n0, n1 = x0 + dt * v0, x1 + dt * v1
        if not n1 > 0.0:
            break
        dx0, dx1 = dx0 + dt * dv0, dx1 + dt * dv1
        x0, x1 = n0, n1
        v0, v1, dv0, dv1 = v0 + dt * a0, v1 + dt * a1, dv0 + dt * da0, dv1 + dt * da1
    tf = -x1 / v1
    dtf = -(dx1 * v1 - x1 * dv1) / (v1 * v1)
    xf = x0 + tf * v0
    dxf = dx0 + dtf * v0 + tf * dv0
    return xf * xf, 2.0 * xf * dxf


@njit
def particle(w0):
    return argmin1(_euler, w0, 0.0)


@njit
def _neg_f_p2(a0, a1, p0, p1):
    """−f(p1, p2) as a function of p2 = (a0, a1), and its gradient."""
    return a0 * a0 + a1 * a1 - p0 * p0 - p1 * p1, 2.0 * a0, 2.0 * a1


@njit
def _max_f(p0, p1, s0, s1):
    """max over p2 of f(p1, p2) (by the inner solver from (s0, s1)) and its gradient in
    p1: the inner argmax does not depend on p1, so the gradient is 2·p1."""
    q0, q1 = argmin2(_neg_f_p2, s0, s1, p0, p1)
    return p0 * p0 + p1 * p1 - q0 * q0 - q1 * q1, 2.0 * p0, 2.0 * p1


@njit
def saddle(a, b):
    r0, r1 = argmin2(_max_f, a, b, a, b)
    q0, q1 = argmin2(_neg_f_p2, a, b, r0, r1)
    return np.array([r0, r1, q0, q1])


@njit
def lse(x):
    m = np.max(x)
    return m + math.log(np.sum(np.exp(x - m)))


@njit
def lse_gradient(x):
    e = np.exp(x - np.max(x))
    return e / np.sum(e)


@njit
def _llsq_residuals(x, t, s):
    m = x.shape[0]
    r = np.empty_like(t)
    for i in range(t.shape[0]):
        p = x[m - 1]
        for j in range(m - 2, -1, -1):
            p = p * t[i] + x[j]
        r[i] = s[i] - p
    return r


@njit
def llsq(x, t, s):
    r = _llsq_residuals(x, t, s)
    return 0.5 * np.sum(r * r)


@njit
def llsq_gradient(x, t, s):
    r = _llsq_residuals(x, t, s)
    g = np.zeros_like(x)
    for i in range(t.shape[0]):
        p = 1.0
        for j in range(x.shape[0]):
            g[j] -= r[i] * p
            p *= t[i]
    return g


@njit
def _f(x, y, out):
    out[0] = x[0]
    for i in range(1, x.shape[0]):
        out[i] = x[i] * y[i - 1]


@njit
def _f_adjoint(x, y, zbar, xbar, ybar):
    xbar[0] += zbar[0]
    for i in range(1, x.shape[0]):
        xbar[i] += zbar[i] * y[i - 1]
        ybar[i - 1] += zbar[i] * x[i]


@njit
def _rk4_stages(x, y, h, k1, k2, k3, k4, y2, y3, y4):
    _f(x, y, k1)
    y2[:] = y + h / 2 * k1
    _f(x, y2, k2)
    y3[:] = y + h / 2 * k2
    _f(x, y3, k3)
    y4[:] = y + h * k3
    _f(x, y4, k4)


@njit
def ode(x, steps):
    h = 2.0 / steps
    n = x.shape[0]
    y = np.zeros(n)
    k1, k2, k3, k4, y2, y3, y4 = np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    for _ in range(steps):
        _rk4_stages(x, y, h, k1, k2, k3, k4, y2, y3, y4)
        y += h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


@njit
def ode_gradient(x, steps):
    """d y_last / dx: the forward pass keeps y before each step, the backward pass
    recomputes the stages and runs their adjoints in reverse."""
    h = 2.0 / steps
    n = x.shape[0]
    ys = np.zeros((steps + 1, n))
    k1, k2, k3, k4, y2, y3, y4 = np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    for s in range(steps):
        _rk4_stages(x, ys[s], h, k1, k2, k3, k4, y2, y3, y4)
        ys[s + 1] = ys[s] + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    xbar, ybar = np.zeros(n), np.zeros(n)
    ybar[n - 1] = 1.0
    u = np.empty(n)
    for s in range(steps - 1, -1, -1):
        y = ys[s]
        _rk4_stages(x, y, h, k1, k2, k3, k4, y2, y3, y4)
        b1, b2, b3, b4 = h / 6 * ybar, h / 3 * ybar, h / 3 * ybar, h / 6 * ybar
        u[:] = 0.0
        _f_adjoint(x, y4, b4, xbar, u)        # k4 = f(y4), y4 = y + h k3
        ybar += u
        b3 += h * u
        u[:] = 0.0
        _f_adjoint(x, y3, b3, xbar, u)        # k3 = f(y3), y3 = y + h/2 k2
        ybar += u
        b2 += h / 2 * u
        u[:] = 0.0
        _f_adjoint(x, y2, b2, xbar, u)        # k2 = f(y2), y2 = y + h/2 k1
        ybar += u
        b1 += h / 2 * u
        _f_adjoint(x, y, b1, xbar, ybar)      # k1 = f(y)
    return xbar


@njit
def _nearest(points, centroids):
    n, k = points.shape[0], centroids.shape[0]
    pp = np.sum(points * points, axis=1)
    cc = np.sum(centroids * centroids, axis=1)
    d2 = pp.reshape(-1, 1) + cc.reshape(1, -1) - 2.0 * (points @ centroids.T)
    best = np.empty(n, dtype=np.int64)
    dist = np.empty(n)
    for i in range(n):
        j = 0
        for c in range(1, k):
            if d2[i, c] < d2[i, j]:
                j = c
        best[i], dist[i] = j, d2[i, j]
    return best, dist


@njit
def kmeans_cost(points, centroids):
    return np.sum(_nearest(points, centroids)[1])


@njit
def kmeans_dir(points, centroids):
    best, _ = _nearest(points, centroids)
    j = np.zeros_like(centroids)
    h = np.zeros_like(centroids)
    for i in range(points.shape[0]):
        c = best[i]
        j[c] += 2.0 * (centroids[c] - points[i])
        h[c] += 2.0
    return j / h


def functions(name):
    if name == "particle":
        return {"by hand": particle}
    if name == "saddle":
        return {"by hand": saddle}
    table = {"lse": {"primal": lse, "gradient": lse_gradient},
             "llsq": {"primal": llsq, "gradient": llsq_gradient},
             "ode": {"primal": ode, "gradient": ode_gradient},
             "kmeans": {"cost": kmeans_cost, "dir": kmeans_dir}}
    return table.get(name, {})
