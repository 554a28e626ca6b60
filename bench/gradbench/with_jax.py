"""GradBench's evals in JAX (jit, float64): the comparator. Written here the way a JAX
user would, from the eval definitions; `particle`/`saddle` with `lax.while_loop`, whose
reverse-mode derivative JAX refuses (the variants whose outer mode is `r`)."""
import math

import jax
import numpy as np
import jax.numpy as jnp
from jax import lax

from .nested import ETA0, TOL

jax.config.update("jax_enable_x64", True)


def grad_r(f):
    return jax.value_and_grad(f)


def grad_f(f):
    """(f(x), ∇f(x)) by one `jvp` per coordinate, as nested.grad_f."""
    def vg(x):
        eye = jnp.eye(x.shape[0], dtype=x.dtype)
        pairs = [jax.jvp(f, (x,), (eye[i],)) for i in range(x.shape[0])]
        return pairs[0][0], jnp.stack([t for _, t in pairs])
    return vg


MODES = {"r": grad_r, "f": grad_f}


def argmin(grad, f, x0, fused=True):
    """nested.argmin; with fused=False GradBench's own order: f(x1), then ∇f(x1) only
    when the step is accepted (faster for JAX on saddle's fr/ff, see the README)."""
    vg = grad(f)

    def step(s):
        x, fx, gx, eta, i, _ = s

        def try_step(_):
            x1 = x - eta * gx

            def evaluate(_):
                f1, g1 = vg(x1) if fused else (f(x1), None)
                return lax.cond(f1 < fx, lambda _: (x1, f1, g1 if fused else vg(x1)[1], eta, i + 1, True),
                                lambda _: (x, fx, gx, eta / 2, 0, True), None)
            return lax.cond(jnp.linalg.norm(x - x1) <= TOL, lambda _: (x, fx, gx, eta, i, False), evaluate, None)

        return lax.cond(jnp.linalg.norm(gx) <= TOL, lambda _: (x, fx, gx, eta, i, False),
                        lambda _: lax.cond(i == 10, lambda _: (x, fx, gx, 2 * eta, 0, True), try_step, None), None)

    init = (x0, *vg(x0), jnp.float64(ETA0), 0, True)
    return lax.while_loop(lambda s: s[5], step, init)[0]


def naive_euler(grad, w):
    dt = 0.1
    charges = jnp.stack([jnp.array([10.0, 10.0 - w]), jnp.array([10.0, 0.0])])
    force = grad(lambda x: jnp.sum(1.0 / jnp.sqrt(jnp.sum((x - charges) ** 2, axis=1))))

    def step(s):
        x, v, _ = s
        a = -force(x)[1]
        x_new = x + dt * v
        return lax.cond(x_new[1] > 0, lambda _: (x_new, v + dt * a, True), lambda _: (x, v, False), None)

    x, v, _ = lax.while_loop(lambda s: s[2], step, (jnp.array([0.0, 8.0]), jnp.array([0.75, 0.0]), True))
    x_f = x[0] - x[1] / v[1] * v[0]
    return x_f * x_f


def particle(variant):
    outer, inner = MODES[variant[0]], MODES[variant[1]]
    return jax.jit(lambda w: argmin(outer, lambda ws: naive_euler(inner, ws[0]), jnp.array([w]))[0])


def saddle(variant):
    """The outer solver in GradBench's order (fused=False): with a forward-mode outer
    derivative JAX takes 5.2 ms fused against 0.64 ms so (the same iterates)."""
    g0, g1 = MODES[variant[0]], MODES[variant[1]]

    def f(p1, p2):
        return jnp.sum(p1 * p1) - jnp.sum(p2 * p2)

    def run(a, b):
        start = jnp.array([a, b])
        r1 = argmin(g0, lambda p1: f(p1, argmin(g1, lambda p2: -f(p1, p2), start)), start, fused=False)
        r2 = argmin(g0, lambda p2: -f(r1, p2), start, fused=False)
        return jnp.concatenate([r1, r2])
    return jax.jit(run)


def lse(x):
    a = jnp.max(x)
    return a + jnp.log(jnp.sum(jnp.exp(x - a)))


def llsq(x, t, s):
    m = x.shape[0]
    poly = lax.fori_loop(0, m - 1, lambda j, p: p * t + x[m - 2 - j], jnp.zeros_like(t) + x[m - 1])
    r = s - poly
    return 0.5 * jnp.sum(r * r)


def ode(x, steps):
    h = 2.0 / steps

    def f(y):
        return x * jnp.concatenate([jnp.ones(1), y[:-1]])

    def rk4(y, _):
        k1 = f(y)
        k2 = f(y + h / 2 * k1)
        k3 = f(y + h / 2 * k2)
        k4 = f(y + h * k3)
        return y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4), None
    return lax.scan(rk4, jnp.zeros_like(x), None, length=steps)[0]


def kmeans_cost(points, centroids):
    d2 = (jnp.sum(points ** 2, axis=1)[:, None] + jnp.sum(centroids ** 2, axis=1)[None, :]
          - 2 * points @ centroids.T)
    return jnp.sum(jnp.min(d2, axis=1))


def kmeans_dir(points, centroids):
    j, h = jax.jvp(jax.grad(lambda c: kmeans_cost(points, c)), (centroids,), (jnp.ones_like(centroids),))
    return j / h


def gmm_objective(alpha, mu, q, l, x, m, gamma):
    n, d = x.shape
    k = alpha.shape[0]
    qdiag = jnp.exp(q)
    sum_qs = jnp.sum(q, axis=1)
    cols, rows = np.triu_indices(d, 1)            # (col, row) pairs below the diagonal, column by column
    L = jnp.zeros((k, d, d)).at[:, rows, cols].set(l)
    xc = x[:, None, :] - mu[None]
    qx = qdiag[None] * xc + jnp.einsum("cij,ncj->nci", L, xc)
    beta = alpha + sum_qs - 0.5 * jnp.sum(qx * qx, axis=2)
    nw = d + m + 1
    prior = (-jnp.sum(0.5 * gamma ** 2 * (jnp.sum(qdiag ** 2, axis=1) + jnp.sum(l ** 2, axis=1)) - m * sum_qs)
             + k * (nw * d * math.log(gamma / math.sqrt(2)) - jax.scipy.special.multigammaln(0.5 * nw, d)))
    return (-n * d * 0.5 * math.log(2 * math.pi) + jnp.sum(jax.scipy.special.logsumexp(beta, axis=1))
            - n * jax.scipy.special.logsumexp(alpha) + prior)


def lstm_objective(main, extra, state, sequence):
    layers = state.shape[0] // 2
    c, b = sequence.shape

    def step(carry, t):
        hs, cells = carry
        inp = sequence[t] * extra[0]
        new_h, new_c = [], []
        for i in range(layers):
            w, bias = main[2 * i], main[2 * i + 1]
            gates = jnp.concatenate([inp, hs[i], inp, hs[i]]) * w + bias
            cell = cells[i] * jax.nn.sigmoid(gates[:b]) + jax.nn.sigmoid(gates[b:2 * b]) * jnp.tanh(gates[3 * b:])
            h = jax.nn.sigmoid(gates[2 * b:3 * b]) * jnp.tanh(cell)
            new_h.append(h)
            new_c.append(cell)
            inp = h
        ypred = inp * extra[1] + extra[2]
        ynorm = ypred - jnp.log(jnp.sum(jnp.exp(ypred)) + 2.0)
        return (tuple(new_h), tuple(new_c)), jnp.sum(sequence[t + 1] * ynorm)

    init = (tuple(state[0::2]), tuple(state[1::2]))
    return -jnp.sum(lax.scan(step, init, jnp.arange(c - 1))[1]) / ((c - 1) * b)


def ba_reproj(cam, x, w, feat):
    """One observation's reprojection error (2,): cam (11,), x (3,), w, feat (2,)."""
    rot, xo = cam[0:3], x - cam[3:6]
    sq = jnp.sum(rot * rot)
    turning = sq != 0.0
    theta = jnp.sqrt(jnp.where(turning, sq, 1.0))
    axis = rot / theta
    rotated = (xo * jnp.cos(theta) + jnp.cross(axis, xo) * jnp.sin(theta)
               + axis * jnp.dot(axis, xo) * (1.0 - jnp.cos(theta)))
    xc = jnp.where(turning, rotated, xo + jnp.cross(rot, xo))
    proj = xc[0:2] / xc[2]
    rsq = jnp.sum(proj * proj)
    proj = proj * (1.0 + cam[9] * rsq + cam[10] * rsq * rsq)
    return w * (proj * cam[6] + cam[7:9] - feat)


def ba_objective(cams, X, w, feats, obs):
    err = jax.vmap(ba_reproj)(cams[obs[:, 0]], X[obs[:, 1]], w, feats)
    return err.reshape(-1), 1.0 - w * w


def ba_jacobian(cams, X, w, feats, obs):
    """vmap of jacfwd of one observation's error: p blocks (2, 15) in GradBench's order."""
    jac = jax.vmap(jax.jacfwd(ba_reproj, argnums=(0, 1, 2)))(cams[obs[:, 0]], X[obs[:, 1]], w, feats)
    block = jnp.concatenate([jac[0], jac[1], jac[2][:, :, None]], axis=2)   # (p, 2, 15)
    return jnp.concatenate([block.reshape(-1), -2.0 * w])


def ht_pose_params(theta, bones):
    """GradBench's to_pose_params: (bones + 3, 3) rows: global rotation, scale, translation,
    then each bone's Euler angles (x, z, y)."""
    pose = jnp.zeros((bones + 3, 3)).at[0].set(theta[0:3]).at[1].set(1.0).at[2].set(theta[3:6])
    i_theta, row = 6, 5
    for _finger in range(5):
        for joint in range(3):
            pose = pose.at[row, 0].set(theta[i_theta])
            i_theta += 1
            if joint == 0:
                pose = pose.at[row, 1].set(theta[i_theta])
                i_theta += 1
            row += 1
        row += 1
    return pose


def ht_euler(xzy):
    tx, ty, tz = xzy[0], xzy[2], xzy[1]
    c, s = jnp.cos, jnp.sin
    rx = jnp.array([[1.0, 0.0, 0.0], [0.0, c(tx), -s(tx)], [0.0, s(tx), c(tx)]])
    ry = jnp.array([[c(ty), 0.0, s(ty)], [0.0, 1.0, 0.0], [-s(ty), 0.0, c(ty)]])
    rz = jnp.array([[c(tz), -s(tz), 0.0], [s(tz), c(tz), 0.0], [0.0, 0.0, 1.0]])
    return rz @ ry @ rx


def ht_angle_axis(r):
    n2 = jnp.sum(r * r)
    small = n2 < 1e-8
    n = jnp.sqrt(jnp.where(small, 1.0, n2))
    a = r / n
    k = jnp.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])
    rot = jnp.cos(n) * jnp.eye(3) + jnp.sin(n) * k + (1 - jnp.cos(n)) * jnp.outer(a, a)
    return jnp.where(small, jnp.eye(3), rot)


def ht_objective(theta, us, base_rel, inv_abs, base_pos, weights, points, corr, tri, parents):
    bones = len(parents)
    pose = ht_pose_params(theta, bones)
    absolutes = []
    for b, parent in enumerate(parents):
        rel = base_rel[b] @ jnp.eye(4).at[:3, :3].set(ht_euler(pose[3 + b]))
        absolutes.append(rel if parent < 0 else absolutes[parent] @ rel)
    transforms = jnp.stack([a @ inv_abs[b] for b, a in enumerate(absolutes)])      # (bones, 4, 4)
    keys = [corr] if us.shape[0] == 0 else [tri[:, k] for k in range(3)]   # each corner's vertex rows
    count = keys[0].shape[0]
    posed_rows = len(keys) * count < base_pos.shape[0]   # pose only the vertices used, where fewer
    if posed_rows:
        rows = jnp.concatenate(keys)
        base_pos, weights = base_pos[rows], weights[rows]
    skin = (weights[:, :, None] * base_pos[:, None, :]).reshape(base_pos.shape[0], -1)   # (V, 4 bones)
    skinned = skin @ jnp.transpose(transforms[:, :3, :], (0, 2, 1)).reshape(-1, 3)               # Σ_b w_vb T_b base_pos_v
    verts = skinned @ (ht_angle_axis(pose[0]) * pose[1][None, :]).T + pose[2]
    corners = [verts[k * count:(k + 1) * count] for k in range(len(keys))] if posed_rows else [verts[key] for key in keys]
    if us.shape[0] == 0:
        hand = corners[0]
    else:
        hand = us[:, 0:1] * corners[0] + us[:, 1:2] * corners[1] + (1 - us[:, 0:1] - us[:, 1:2]) * corners[2]
    return (points - hand).reshape(-1)


def ht_jacobian(theta, us, *rest):
    """jacfwd over theta; complicated: one jvp per barycentric coordinate of all points."""
    jt = jax.jacfwd(ht_objective)(theta, us, *rest)
    if us.shape[0] == 0:
        return jt
    du = [jax.jvp(lambda u: ht_objective(theta, u, *rest), (us,), (jnp.zeros_like(us).at[:, k].set(1.0),))[1]
          for k in range(2)]
    return jnp.concatenate([jnp.stack(du, axis=1), jt], axis=1)


def functions(name):
    """`{function name: callable}`, called like jitad's; each call waits for its result
    (`block_until_ready`: JAX dispatches asynchronously, so a bare call times nothing)."""
    return {k: _blocking(f) for k, f in _jitted(name).items()}


def _blocking(f):
    return lambda *args: jax.block_until_ready(f(*args))


def _jitted(name):
    if name == "particle":
        return {v: particle(v) for v in ("rr", "rf", "fr", "ff")}
    if name == "saddle":
        return {v: saddle(v) for v in ("rr", "rf", "fr", "ff")}
    if name == "lse":
        return {"primal": jax.jit(lse), "gradient": jax.jit(jax.grad(lse))}
    if name == "llsq":
        return {"primal": jax.jit(llsq), "gradient": jax.jit(jax.grad(llsq))}
    if name == "ode":
        return {"primal": jax.jit(ode, static_argnums=1),
                "gradient": jax.jit(jax.grad(lambda x, s: ode(x, s)[-1]), static_argnums=1)}
    if name == "kmeans":
        return {"cost": jax.jit(kmeans_cost), "dir": jax.jit(kmeans_dir)}
    if name == "gmm":
        return {"objective": jax.jit(gmm_objective, static_argnums=(5, 6)),
                "jacobian": jax.jit(jax.grad(gmm_objective, argnums=(0, 1, 2, 3)), static_argnums=(5, 6))}
    if name == "lstm":
        return {"objective": jax.jit(lstm_objective), "jacobian": jax.jit(jax.grad(lstm_objective, argnums=(0, 1)))}
    if name == "ba":
        return {"objective": jax.jit(ba_objective), "jacobian": jax.jit(ba_jacobian)}
    if name == "ht":
        return {"objective": jax.jit(ht_objective, static_argnums=9),
                "jacobian": jax.jit(ht_jacobian, static_argnums=9)}
    raise KeyError(name)
