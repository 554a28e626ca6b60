"""Hand-written gradients compiled with numba: the practical limit jitad is measured against.

Each returns `(value, gradient)` shaped like jitad's `value_and_grad`. They are written
the way a careful person would by hand: straight-line adjoints for the small cases, a
forward loop that stores what the reverse loop needs (and nothing it does not) for loops.
"""
import math

import numba
import numpy as np

from .functions import DT, K, REST

njit = numba.njit(cache=False, fastmath=False)


@njit
def mul(x, y):
    return x * y


@njit
def mul4(a, b, c, d):
    return a * b + c * d


@njit
def scalar_mult(x, y):
    return x * y, (y, x)


@njit
def rotate(v, q):
    """sum(v + 2 r×(r×v + w v)) and its gradient w.r.t. v and q = (w, r)."""
    v0, v1, v2 = v
    w, r0, r1, r2 = q
    c0 = r1 * v2 - r2 * v1 + w * v0          # c = r×v + w v
    c1 = r2 * v0 - r0 * v2 + w * v1
    c2 = r0 * v1 - r1 * v0 + w * v2
    d0 = r1 * c2 - r2 * c1                    # d = r×c
    d1 = r2 * c0 - r0 * c2
    d2 = r0 * c1 - r1 * c0
    value = (v0 + 2.0 * d0) + (v1 + 2.0 * d1) + (v2 + 2.0 * d2)
    g = 2.0                                   # adjoint of each d_k
    gr0, gr1, gr2 = c1 * g - c2 * g, c2 * g - c0 * g, c0 * g - c1 * g     # c × gd
    gc0, gc1, gc2 = g * r2 - g * r1, g * r0 - g * r2, g * r1 - g * r0     # gd × r
    gr0 += v1 * gc2 - v2 * gc1                # v × gc
    gr1 += v2 * gc0 - v0 * gc2
    gr2 += v0 * gc1 - v1 * gc0
    gv0 = 1.0 + gc1 * r2 - gc2 * r1 + w * gc0   # gc × r + w gc
    gv1 = 1.0 + gc2 * r0 - gc0 * r2 + w * gc1
    gv2 = 1.0 + gc0 * r1 - gc1 * r0 + w * gc2
    gw = gc0 * v0 + gc1 * v1 + gc2 * v2
    return value, ((gv0, gv1, gv2), (gw, gr0, gr1, gr2))


@njit
def chain(x, n):
    """x_i = 0.5 x_{i-1} + 0.5 x_{i-1}: the adjoint recurrence needs no stored values."""
    for _ in range(n):
        x = 0.5 * x + 0.5 * x
    g = 1.0
    for _ in range(n):
        g = 0.5 * g + 0.5 * g
    return x, g


@njit
def halving(x):
    t, g = x, 1.0
    while t > 1.0:
        t, g = t * 0.5, g * 0.5
    return t, g


@njit
def tree_product(x, left, right, value):
    """TREE(t, x, l * r * value) and d/dx; nodes are numbered with children after
    parents (pre-order), so a backward sweep is a post-order evaluation."""
    n = left.shape[0]
    vals = np.empty(n)
    for i in range(n - 1, -1, -1):
        lv = vals[left[i]] if left[i] >= 0 else x
        rv = vals[right[i]] if right[i] >= 0 else x
        vals[i] = lv * rv * value[i]
    adj = np.zeros(n)
    adj[0] = 1.0
    gx = 0.0
    for i in range(n):
        lv = vals[left[i]] if left[i] >= 0 else x
        rv = vals[right[i]] if right[i] >= 0 else x
        gl, gr = adj[i] * rv * value[i], adj[i] * lv * value[i]
        if left[i] >= 0:
            adj[left[i]] += gl
        else:
            gx += gl
        if right[i] >= 0:
            adj[right[i]] += gr
        else:
            gx += gr
    return vals[0], gx


@njit
def particles(state, steps):
    """Final energy after `steps` explicit-Euler steps of 4 particles joined by springs,
    and its gradient w.r.t. the 16 initial coordinates (positions then velocities).
    The forward loop stores the positions; the reverse loop runs the adjoint step
    ax_t = ax_{t+1} + DT Jᵀ av_{t+1},  av_t = av_{t+1} + DT ax_{t+1}  (J = ∂F/∂x, symmetric)."""
    xs, v, f = np.empty((steps + 1, 8)), np.empty(8), np.empty(8)
    for k in range(8):
        xs[0, k], v[k] = state[k], state[8 + k]
    for t in range(steps):
        f[:] = 0.0
        for i in range(4):
            for j in range(i + 1, 4):
                dx, dy = xs[t, 2 * i] - xs[t, 2 * j], xs[t, 2 * i + 1] - xs[t, 2 * j + 1]
                s = -K * (1.0 - REST / math.sqrt(dx * dx + dy * dy))
                f[2 * i] += s * dx
                f[2 * i + 1] += s * dy
                f[2 * j] -= s * dx
                f[2 * j + 1] -= s * dy
        for k in range(8):
            xs[t + 1, k] = xs[t, k] + DT * v[k]
            v[k] += DT * f[k]
    e = 0.0
    for k in range(8):
        e += v[k] * v[k]
    e *= 0.5
    ax, av = np.zeros(8), v.copy()            # dE/dv = v
    for i in range(4):
        for j in range(i + 1, 4):
            dx, dy = xs[steps, 2 * i] - xs[steps, 2 * j], xs[steps, 2 * i + 1] - xs[steps, 2 * j + 1]
            d = math.sqrt(dx * dx + dy * dy)
            e += 0.5 * K * (d - REST) * (d - REST)
            s = K * (d - REST) / d
            ax[2 * i] += s * dx
            ax[2 * i + 1] += s * dy
            ax[2 * j] -= s * dx
            ax[2 * j + 1] -= s * dy
    g = np.empty(8)
    for t in range(steps - 1, -1, -1):
        g[:] = ax
        for i in range(4):
            for j in range(i + 1, 4):
                dx, dy = xs[t, 2 * i] - xs[t, 2 * j], xs[t, 2 * i + 1] - xs[t, 2 * j + 1]
                d2 = dx * dx + dy * dy
                d = math.sqrt(d2)
                ux, uy = av[2 * i] - av[2 * j], av[2 * i + 1] - av[2 * j + 1]
                a = -K * DT * (1.0 - REST / d)        # DT J u = a u + b δ
                b = -K * DT * REST / (d2 * d) * (dx * ux + dy * uy)
                gx, gy = a * ux + b * dx, a * uy + b * dy
                g[2 * i] += gx
                g[2 * i + 1] += gy
                g[2 * j] -= gx
                g[2 * j + 1] -= gy
        for k in range(8):
            av[k] += DT * ax[k]
            ax[k] = g[k]
    grad = np.empty(16)
    grad[:8], grad[8:] = ax, av
    return e, grad
