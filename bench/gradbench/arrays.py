"""The array evals of GradBench in jitad: lse, llsq, ode, kmeans, gmm, lstm.

Each `EVALS[name]` gives `(primal, derivative)`: two functions of the prepared inputs
(`inputs.py`) that are jitted once per shape. The derivatives are jitad's `grad`
(`kmeans`: forward over reverse, `jvp` of `grad`), never hand-derived.
"""
import math

import numpy as np

import jitad
from jitad import FOR


# -- lse: log-sum-exp with the maximum subtracted --------------------------------------

def lse(x):
    a = jitad.max(x)
    return a + jitad.log(jitad.sum(jitad.exp(x - a)))


# -- llsq: 0.5 Σ_i (s_i − Σ_j x_j t_i^j)², the polynomial by Horner's rule ---------------

def llsq(x, t, s):
    m = x.shape[0]
    poly = FOR(0, m - 1, lambda j, p: p * t + x[m - 2 - j], jitad.zeros_like(t) + x[m - 1])
    r = s - poly
    return 0.5 * jitad.sum(r * r)


# -- ode: RK4 on y0' = x0, yi' = xi y(i−1), y(0) = 0, to t = 2 in `steps` steps ----------

def ode(x, steps):
    h = 2.0 / steps
    one = jitad.ones(1)

    def f(y):
        return x * jitad.concatenate([one, y[:-1]])

    def rk4(i, y):
        k1 = f(y)
        k2 = f(y + (h / 2) * k1)
        k3 = f(y + (h / 2) * k2)
        k4 = f(y + h * k3)
        return y + (h / 6) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)

    return FOR(0, steps, rk4, jitad.zeros_like(x))


def ode_last(x, steps):
    return ode(x, steps)[-1]


# -- kmeans: Σ_i min_j |C_j − P_i|², and the Newton direction J / diag(H) ---------------

def kmeans_cost(points, centroids):
    d2 = (jitad.sum(points * points, axis=1, keepdims=True)
          + jitad.reshape(jitad.sum(centroids * centroids, axis=1), (1, -1))
          - 2.0 * jitad.matmul(points, jitad.transpose(centroids)))
    return jitad.sum(jitad.min(d2, axis=1))


def kmeans_dir(points, centroids):
    gradient = jitad.grad(kmeans_cost, argnums=1)
    j, h = jitad.jvp(lambda c: gradient(points, c), (centroids,), (jitad.ones_like(centroids),))
    return j / h


# -- gmm: the log posterior of a Gaussian mixture with a Wishart prior -----------------

def _lower_index(d, k):
    """Indices into `concatenate([l.ravel(), [0]])` that lay out, as a (d, k·d) matrix,
    the transposes of the k strictly lower triangular matrices (filled column by column
    from each row of `l`), side by side; the last slot (a zero) fills the rest."""
    lsz = d * (d - 1) // 2
    idx = np.full((d, k, d), k * lsz, dtype=np.int64)
    for c in range(k):
        pos = c * lsz
        for col in range(d):
            for row in range(col + 1, d):
                idx[col, c, row] = pos        # L_c[row, col] sits at (L_c^T)[col, row]
                pos += 1
    return idx.reshape(-1)


def log_gamma_d(a, d):
    """log of the multivariate gamma function Γ_d(a)."""
    return d * (d - 1) / 4 * math.log(math.pi) + sum(math.lgamma(a + (1 - j) / 2) for j in range(1, d + 1))


def gmm_objective(alpha, mu, q, l, x, m, gamma):
    n, d = x.shape
    k = alpha.shape[0]
    qdiag = jitad.exp(q)                                            # (k, d)
    sum_qs = jitad.sum(q, axis=1)                                   # (k,)
    l_ext = jitad.concatenate([jitad.reshape(l, (-1,)), jitad.zeros(1)])
    lt = jitad.reshape(jitad.take(l_ext, _lower_index(d, k)), (d, k * d))   # [L_1^T ... L_k^T]
    xl = jitad.reshape(jitad.matmul(x, lt), (n, k, d))              # x_i L_c^T
    mul = jitad.sum(jitad.reshape(jitad.transpose(mu), (d, k, 1)) * jitad.reshape(lt, (d, k, d)), axis=0)
    xc = jitad.reshape(x, (n, 1, d)) - jitad.reshape(mu, (1, k, d))
    qx = jitad.reshape(qdiag, (1, k, d)) * xc + xl - jitad.reshape(mul, (1, k, d))   # Q_c (x_i − μ_c)
    beta = alpha + sum_qs - 0.5 * jitad.sum(qx * qx, axis=2)         # (n, k)
    slse = jitad.sum(jitad.logsumexp(beta, axis=1))
    nw = d + m + 1
    prior = (-jitad.sum(0.5 * gamma * gamma * (jitad.sum(qdiag * qdiag, axis=1) + jitad.sum(l * l, axis=1))
                        - m * sum_qs)
             + k * (nw * d * math.log(gamma / math.sqrt(2)) - log_gamma_d(0.5 * nw, d)))
    return -n * d * 0.5 * math.log(2 * math.pi) + slse - n * jitad.logsumexp(alpha, axis=0) + prior


def gmm_jacobian(alpha, mu, q, l, x, m, gamma):
    """The gradient w.r.t. (alpha, mu, q, l); m and gamma are static (Python numbers)."""
    return jitad.grad(lambda *p: gmm_objective(*p, x, m, gamma), argnums=(0, 1, 2, 3))(alpha, mu, q, l)


# -- lstm: ADBench's LSTM with diagonal weights over a character sequence ----------------

def lstm_objective(main, extra, state, sequence):
    layers = state.shape[0] // 2
    c, b = sequence.shape

    def layer(w, bias, h, cell, inp):
        forget = jitad.sigmoid(inp * w[0:b] + bias[0:b])
        ingate = jitad.sigmoid(h * w[b:2 * b] + bias[b:2 * b])
        outgate = jitad.sigmoid(inp * w[2 * b:3 * b] + bias[2 * b:3 * b])
        change = jitad.tanh(h * w[3 * b:] + bias[3 * b:])
        cell = cell * forget + ingate * change
        return outgate * jitad.tanh(cell), cell

    def step(t, carry):
        hs, cells, total = carry
        inp = sequence[t] * extra[0]
        new_h, new_c = [], []
        for i in range(layers):
            h, cell = layer(main[2 * i], main[2 * i + 1], hs[i], cells[i], inp)
            new_h.append(h)
            new_c.append(cell)
            inp = h
        ypred = inp * extra[1] + extra[2]
        ynorm = ypred - jitad.log(jitad.sum(jitad.exp(ypred)) + 2.0)
        return tuple(new_h), tuple(new_c), total + jitad.sum(sequence[t + 1] * ynorm)

    init = (tuple(state[2 * i] for i in range(layers)), tuple(state[2 * i + 1] for i in range(layers)), 0.0)
    total = FOR(0, c - 1, step, init)[2]
    return -total / ((c - 1) * b)


# -- the compiled functions --------------------------------------------------------------

def compiled(name):
    """`{function name: jitted callable}` for one eval, called on `inputs.prepare`'s args."""
    if name == "lse":
        return {"primal": jitad.jit(lse), "gradient": jitad.jit(jitad.grad(lse))}
    if name == "llsq":
        return {"primal": jitad.jit(llsq), "gradient": jitad.jit(jitad.grad(llsq))}
    if name == "ode":
        return {"primal": jitad.jit(ode, static_argnums=(1,)),
                "gradient": jitad.jit(jitad.grad(ode_last), static_argnums=(1,))}
    if name == "kmeans":
        return {"cost": jitad.jit(kmeans_cost), "dir": jitad.jit(kmeans_dir)}
    if name == "gmm":
        return {"objective": jitad.jit(gmm_objective, static_argnums=(5, 6)),
                "jacobian": jitad.jit(gmm_jacobian, static_argnums=(5, 6))}
    if name == "lstm":
        return {"objective": jitad.jit(lstm_objective),
                "jacobian": jitad.jit(jitad.grad(lstm_objective, argnums=(0, 1)))}
    raise KeyError(name)
