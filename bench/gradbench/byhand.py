"""GradBench's evals with hand-derived derivatives in numba: the practical limit.

`particle` carries the derivative w.r.t. w through the Euler loop by hand (forward
tangents, second derivatives of the potential written out); in `saddle` the inner
argmax does not depend on the outer point, so the outer gradient is 2·p1 exactly, as
every AD mode computes it; the solver is GradBench's, with value and gradient from one
pass (as the other implementations here). Scalar code: the particle/saddle loops touch
no arrays. gmm: one pass over points and components with the gradient written out;
lstm: forward keeping every gate, then backpropagation through time. ba: per observation,
the rotation's tangents carried by hand along its 9 directions, the rest written out."""
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



# -- gmm: the log posterior and its gradient, per point and component ------------------

def _gmm_constant(n, d, k, m, gamma):
    from .arrays import log_gamma_d
    nw = d + m + 1
    return (-n * d * 0.5 * math.log(2 * math.pi)
            + k * (nw * d * math.log(gamma / math.sqrt(2)) - log_gamma_d(0.5 * nw, d)))


@njit
def _gmm(alpha, mu, q, l, x, m, gamma, const, want_grad):
    """The objective and (when want_grad) its gradient: with w_ic = softmax_c(beta_ic),
    ∂/∂alpha_c = Σ_i w_ic − n softmax(alpha)_c; ∂/∂μ_c = Σ_i w_ic Q_cᵀ qx_ic;
    ∂/∂q_cj = Σ_i w_ic (1 − qx_icj e^q_cj xc_icj) − γ² e^2q_cj + m;
    ∂/∂L_c[r, s] = −Σ_i w_ic qx_icr xc_ics − γ² L_c[r, s]; qx_ic = Q_c (x_i − μ_c)."""
    n, d = x.shape
    k = alpha.shape[0]
    qd = np.exp(q)
    sq = np.zeros(k)
    for c in range(k):
        for j in range(d):
            sq[c] += q[c, j]
    da, dmu, dq, dl = np.zeros(k), np.zeros((k, d)), np.zeros((k, d)), np.zeros(l.shape)
    xc, qx, beta = np.empty((k, d)), np.empty((k, d)), np.empty(k)
    total = 0.0
    for i in range(n):
        for c in range(k):
            for j in range(d):
                xc[c, j] = x[i, j] - mu[c, j]
            for j in range(d):
                qx[c, j] = qd[c, j] * xc[c, j]
            pos = 0
            for s in range(d):              # L_c is filled column by column
                for r in range(s + 1, d):
                    qx[c, r] += l[c, pos] * xc[c, s]
                    pos += 1
            b = alpha[c] + sq[c]
            for j in range(d):
                b -= 0.5 * qx[c, j] * qx[c, j]
            beta[c] = b
        mx = np.max(beta)
        se = 0.0
        for c in range(k):
            se += math.exp(beta[c] - mx)
        total += mx + math.log(se)
        if not want_grad:
            continue
        for c in range(k):
            w = math.exp(beta[c] - mx) / se
            da[c] += w
            pos = 0
            for j in range(d):
                dq[c, j] += w * (1.0 - qx[c, j] * qd[c, j] * xc[c, j])
                dmu[c, j] += w * qd[c, j] * qx[c, j]          # the diagonal of Q_cᵀ qx
            for s in range(d):
                for r in range(s + 1, d):
                    dl[c, pos] -= w * qx[c, r] * xc[c, s]
                    dmu[c, s] += w * l[c, pos] * qx[c, r]     # the lower part of Q_cᵀ qx
                    pos += 1
    ma = np.max(alpha)
    sa = 0.0
    for c in range(k):
        sa += math.exp(alpha[c] - ma)
    prior = 0.0
    for c in range(k):
        for j in range(d):
            prior -= 0.5 * gamma * gamma * qd[c, j] * qd[c, j]
        for j in range(l.shape[1]):
            prior -= 0.5 * gamma * gamma * l[c, j] * l[c, j]
        prior += m * sq[c]
    value = const + total - n * (ma + math.log(sa)) + prior
    if want_grad:
        for c in range(k):
            da[c] -= n * math.exp(alpha[c] - ma) / sa
            for j in range(d):
                dq[c, j] += m - gamma * gamma * qd[c, j] * qd[c, j]
            for j in range(l.shape[1]):
                dl[c, j] -= gamma * gamma * l[c, j]
    return value, da, dmu, dq, dl


def gmm_objective(alpha, mu, q, l, x, m, gamma):
    const = _gmm_constant(x.shape[0], x.shape[1], alpha.shape[0], m, gamma)
    return _gmm(alpha, mu, q, l, x, float(m), gamma, const, False)[0]


def gmm_jacobian(alpha, mu, q, l, x, m, gamma):
    const = _gmm_constant(x.shape[0], x.shape[1], alpha.shape[0], m, gamma)
    return _gmm(alpha, mu, q, l, x, float(m), gamma, const, True)[1:]


# -- lstm: forward keeping every gate, then backpropagation through time ---------------

@njit
def _sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v))


@njit
def _lstm(main, extra, state, seq, want_grad):
    """The objective and (when want_grad) its gradient in (main, extra). Gates of layer i
    at step t: f = σ(inp w_f + b_f), g = σ(h w_i + b_i), o = σ(inp w_o + b_o),
    z = tanh(h w_c + b_c); cell' = cell f + g z; h' = o tanh(cell'); the next layer's inp is h'."""
    layers = state.shape[0] // 2
    steps, b = seq.shape[0] - 1, seq.shape[1]
    hs = np.empty((steps + 1, layers, b))        # hs[t]: the h entering step t
    cs = np.empty((steps + 1, layers, b))
    gates = np.empty((steps, layers, 4, b))      # f, g, o, z
    inps = np.empty((steps, layers + 1, b))      # the input of each layer; [layers]: the top h
    for i in range(layers):
        hs[0, i] = state[2 * i]
        cs[0, i] = state[2 * i + 1]
    total = 0.0
    ypred = np.empty(b)
    for t in range(steps):
        for j in range(b):
            inps[t, 0, j] = seq[t, j] * extra[0, j]
        for i in range(layers):
            w, bias = main[2 * i], main[2 * i + 1]
            for j in range(b):
                inp, h = inps[t, i, j], hs[t, i, j]
                f = _sigmoid(inp * w[j] + bias[j])
                g = _sigmoid(h * w[b + j] + bias[b + j])
                o = _sigmoid(inp * w[2 * b + j] + bias[2 * b + j])
                z = math.tanh(h * w[3 * b + j] + bias[3 * b + j])
                cell = cs[t, i, j] * f + g * z
                gates[t, i, 0, j], gates[t, i, 1, j], gates[t, i, 2, j], gates[t, i, 3, j] = f, g, o, z
                cs[t + 1, i, j] = cell
                hs[t + 1, i, j] = o * math.tanh(cell)
                inps[t, i + 1, j] = hs[t + 1, i, j]
        se = 0.0
        for j in range(b):
            ypred[j] = inps[t, layers, j] * extra[1, j] + extra[2, j]
            se += math.exp(ypred[j])
        lg = math.log(se + 2.0)
        for j in range(b):
            total += seq[t + 1, j] * (ypred[j] - lg)
    scale = -1.0 / (steps * b)
    dmain, dextra = np.zeros(main.shape), np.zeros(extra.shape)
    if not want_grad:
        return total * scale, dmain, dextra
    dh_next, dc_next = np.zeros((layers, b)), np.zeros((layers, b))   # from step t + 1
    dinp = np.empty(b)
    for t in range(steps - 1, -1, -1):
        se, ssum = 0.0, 0.0
        for j in range(b):
            ypred[j] = inps[t, layers, j] * extra[1, j] + extra[2, j]
            se += math.exp(ypred[j])
            ssum += seq[t + 1, j]
        for j in range(b):
            dy = scale * (seq[t + 1, j] - ssum * math.exp(ypred[j]) / (se + 2.0))
            dextra[1, j] += dy * inps[t, layers, j]
            dextra[2, j] += dy
            dinp[j] = dy * extra[1, j]
        for i in range(layers - 1, -1, -1):
            w = main[2 * i]
            for j in range(b):
                f, g, o, z = gates[t, i, 0, j], gates[t, i, 1, j], gates[t, i, 2, j], gates[t, i, 3, j]
                inp, h, cell = inps[t, i, j], hs[t, i, j], cs[t + 1, i, j]
                dh = dinp[j] + dh_next[i, j]
                tc = math.tanh(cell)
                do = dh * tc
                dc = dc_next[i, j] + dh * o * (1.0 - tc * tc)
                daf = dc * cs[t, i, j] * f * (1.0 - f)
                dag = dc * z * g * (1.0 - g)
                dao = do * o * (1.0 - o)
                daz = dc * g * (1.0 - z * z)
                dmain[2 * i, j] += daf * inp
                dmain[2 * i, b + j] += dag * h
                dmain[2 * i, 2 * b + j] += dao * inp
                dmain[2 * i, 3 * b + j] += daz * h
                dmain[2 * i + 1, j] += daf
                dmain[2 * i + 1, b + j] += dag
                dmain[2 * i + 1, 2 * b + j] += dao
                dmain[2 * i + 1, 3 * b + j] += daz
                dc_next[i, j] = dc * f
                dh_next[i, j] = dag * w[b + j] + daz * w[3 * b + j]
                dinp[j] = daf * w[j] + dao * w[2 * b + j]      # into the layer below
        for j in range(b):
            dextra[0, j] += dinp[j] * seq[t, j]
    return total * scale, dmain, dextra


def lstm_objective(main, extra, state, sequence):
    return _lstm(main, extra, state, sequence, False)[0]


def lstm_jacobian(main, extra, state, sequence):
    return _lstm(main, extra, state, sequence, True)[1:]


# -- ba: the rotation's tangents carried by hand, the projection's derivative written out --

@njit
def _ba_rotate(r, xo, dr, dxo, out, dout):
    """Rodrigues' rotation xc of xo by the angle-axis r, and its tangent along (dr, dxo)."""
    sq = r[0] * r[0] + r[1] * r[1] + r[2] * r[2]
    if sq == 0.0:
        for i in range(3):
            j, k = (i + 1) % 3, (i + 2) % 3
            out[i] = xo[i] + r[j] * xo[k] - r[k] * xo[j]
            dout[i] = (dxo[i] + dr[j] * xo[k] - dr[k] * xo[j] + r[j] * dxo[k] - r[k] * dxo[j])
        return
    theta = math.sqrt(sq)
    dtheta = (r[0] * dr[0] + r[1] * dr[1] + r[2] * dr[2]) / theta
    c, s = math.cos(theta), math.sin(theta)
    dc, ds = -s * dtheta, c * dtheta
    a0, a1, a2 = r[0] / theta, r[1] / theta, r[2] / theta
    da0, da1, da2 = (dr[0] - a0 * dtheta) / theta, (dr[1] - a1 * dtheta) / theta, (dr[2] - a2 * dtheta) / theta
    dot = a0 * xo[0] + a1 * xo[1] + a2 * xo[2]
    ddot = da0 * xo[0] + da1 * xo[1] + da2 * xo[2] + a0 * dxo[0] + a1 * dxo[1] + a2 * dxo[2]
    tmp, dtmp = dot * (1.0 - c), ddot * (1.0 - c) - dot * dc
    a, da = (a0, a1, a2), (da0, da1, da2)
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        cross = a[j] * xo[k] - a[k] * xo[j]
        dcross = da[j] * xo[k] - da[k] * xo[j] + a[j] * dxo[k] - a[k] * dxo[j]
        out[i] = xo[i] * c + cross * s + a[i] * tmp
        dout[i] = dxo[i] * c + xo[i] * dc + dcross * s + cross * ds + da[i] * tmp + a[i] * dtmp


@njit
def _ba(cams, X, w, feats, obs, jacobian):
    p = w.shape[0]
    err, vals = np.empty(2 * p), np.empty(31 * p if jacobian else 0)
    xo, xc, dxc = np.empty(3), np.empty(3), np.empty(3)
    zero, e = np.zeros(3), np.zeros(3)
    for i in range(p):
        cam, pt, wi = cams[obs[i, 0]], X[obs[i, 1]], w[i]
        for k in range(3):
            xo[k] = pt[k] - cam[3 + k]
        _ba_rotate(cam[0:3], xo, zero, zero, xc, dxc)
        u, v = xc[0] / xc[2], xc[1] / xc[2]
        rsq = u * u + v * v
        L = 1.0 + cam[9] * rsq + cam[10] * rsq * rsq
        f = cam[6]
        px, py = u * L * f + cam[7] - feats[i, 0], v * L * f + cam[8] - feats[i, 1]
        err[2 * i], err[2 * i + 1] = wi * px, wi * py
        if not jacobian:
            continue
        row = vals[30 * i:30 * i + 30]
        dL = cam[9] + 2.0 * cam[10] * rsq
        for col in range(9):        # rotation (dr = e), centre (dxo = −e), point (dxo = e)
            e[:] = 0.0
            e[col % 3] = -1.0 if 3 <= col < 6 else 1.0
            if col < 3:
                _ba_rotate(cam[0:3], xo, e, zero, xc, dxc)
            else:
                _ba_rotate(cam[0:3], xo, zero, e, xc, dxc)
            du, dv = (dxc[0] - u * dxc[2]) / xc[2], (dxc[1] - v * dxc[2]) / xc[2]
            dl = dL * 2.0 * (u * du + v * dv)
            at = col if col < 6 else col + 5          # the point's columns follow the camera's 11
            row[at], row[15 + at] = wi * f * (du * L + u * dl), wi * f * (dv * L + v * dl)
        row[6], row[21] = wi * u * L, wi * v * L                 # f
        row[7], row[22], row[8], row[23] = wi, 0.0, 0.0, wi      # u0, v0
        row[9], row[24] = wi * f * u * rsq, wi * f * v * rsq     # k1
        row[10], row[25] = wi * f * u * rsq * rsq, wi * f * v * rsq * rsq   # k2
        row[14], row[29] = px, py                                # w
    if jacobian:
        vals[30 * p:] = -2.0 * w
    return err, vals


def ba_objective(cams, X, w, feats, obs):
    return _ba(cams, X, w, feats, obs, False)[0], 1.0 - w * w


def ba_jacobian(cams, X, w, feats, obs):
    return _ba(cams, X, w, feats, obs, True)[1]


def functions(name):
    if name == "particle":
        return {"by hand": particle}
    if name == "saddle":
        return {"by hand": saddle}
    table = {"lse": {"primal": lse, "gradient": lse_gradient},
             "llsq": {"primal": llsq, "gradient": llsq_gradient},
             "ode": {"primal": ode, "gradient": ode_gradient},
             "kmeans": {"cost": kmeans_cost, "dir": kmeans_dir},
             "gmm": {"objective": gmm_objective, "jacobian": gmm_jacobian},
             "lstm": {"objective": lstm_objective, "jacobian": lstm_jacobian},
             "ba": {"objective": ba_objective, "jacobian": ba_jacobian}}
    return table.get(name, {})
