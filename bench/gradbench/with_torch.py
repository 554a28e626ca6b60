"""GradBench's evals in PyTorch eager (float64, one thread): the comparator. `particle`
and `saddle` use `torch.func.grad`/`jvp` around Python loops and branches on tensor
values, which eager mode runs (all four variants)."""
import math

import numpy as np
import torch
from torch.func import grad, grad_and_value, jvp

from .nested import ETA0, TOL

torch.set_default_dtype(torch.float64)


def grad_r(f):
    def vg(x):
        g, v = grad_and_value(f)(x)
        return v, g
    return vg


def grad_f(f):
    """(f(x), ∇f(x)) by one `jvp` per coordinate, as nested.grad_f."""
    def vg(x):
        eye = torch.eye(x.shape[0], dtype=x.dtype)
        pairs = [jvp(f, (x,), (eye[i],)) for i in range(x.shape[0])]
        return pairs[0][0], torch.stack([t for _, t in pairs])
    return vg


MODES = {"r": grad_r, "f": grad_f}


def argmin(gradop, f, x):
    vg = gradop(f)
    (fx, gx), eta, i = vg(x), ETA0, 0
    while True:
        if torch.linalg.norm(gx) <= TOL:
            return x
        if i == 10:
            eta, i = 2 * eta, 0
            continue
        x1 = x - eta * gx
        if torch.linalg.norm(x - x1) <= TOL:
            return x
        f1, g1 = vg(x1)
        if f1 < fx:
            x, fx, gx, i = x1, f1, g1, i + 1
        else:
            eta, i = eta / 2, 0


def naive_euler(gradop, w):
    dt = 0.1
    charges = torch.stack([torch.stack([torch.tensor(10.0), 10.0 - w]),
                           torch.tensor([10.0, 0.0]).to(w.dtype)])
    force = gradop(lambda x: torch.sum(1.0 / torch.sqrt(torch.sum((x - charges) ** 2, dim=1))))
    x, v = torch.tensor([0.0, 8.0]), torch.tensor([0.75, 0.0])
    while True:
        a = -force(x)[1]
        x_new = x + dt * v
        if not x_new[1] > 0:
            break
        x, v = x_new, v + dt * a
    x_f = x[0] - x[1] / v[1] * v[0]
    return x_f * x_f


def particle(variant):
    outer, inner = MODES[variant[0]], MODES[variant[1]]
    return lambda w: float(argmin(outer, lambda ws: naive_euler(inner, ws[0]), torch.tensor([w]))[0])


def saddle(variant):
    g0, g1 = MODES[variant[0]], MODES[variant[1]]

    def f(p1, p2):
        return torch.sum(p1 * p1) - torch.sum(p2 * p2)

    def run(a, b):
        start = torch.tensor([a, b])
        r1 = argmin(g0, lambda p1: f(p1, argmin(g1, lambda p2: -f(p1, p2), start)), start)
        r2 = argmin(g0, lambda p2: -f(r1, p2), start)
        return torch.cat([r1, r2]).numpy()
    return run


def lse(x):
    a = torch.max(x)
    return a + torch.log(torch.sum(torch.exp(x - a)))


def llsq(x, t, s):
    m = x.shape[0]
    p = torch.zeros_like(t) + x[m - 1]
    for j in range(m - 2, -1, -1):
        p = p * t + x[j]
    r = s - p
    return 0.5 * torch.sum(r * r)


def ode(x, steps):
    h = 2.0 / steps
    one = torch.ones(1)

    def f(y):
        return x * torch.cat([one, y[:-1]])

    y = torch.zeros_like(x)
    for _ in range(steps):
        k1 = f(y)
        k2 = f(y + h / 2 * k1)
        k3 = f(y + h / 2 * k2)
        k4 = f(y + h * k3)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


def kmeans_cost(points, centroids):
    d2 = (torch.sum(points ** 2, dim=1)[:, None] + torch.sum(centroids ** 2, dim=1)[None, :]
          - 2 * points @ centroids.T)
    return torch.sum(torch.min(d2, dim=1).values)


def gmm_objective(alpha, mu, q, l, x, m, gamma):
    n, d = x.shape
    k = alpha.shape[0]
    qdiag = torch.exp(q)
    sum_qs = torch.sum(q, dim=1)
    cols, rows = np.triu_indices(d, 1)
    L = torch.zeros((k, d, d))
    L[:, rows, cols] = l
    xc = x[:, None, :] - mu[None]
    qx = qdiag[None] * xc + torch.einsum("cij,ncj->nci", L, xc)
    beta = alpha + sum_qs - 0.5 * torch.sum(qx * qx, dim=2)
    nw = d + m + 1
    log_gamma_d = d * (d - 1) / 4 * math.log(math.pi) + sum(math.lgamma(0.5 * nw + (1 - j) / 2) for j in range(1, d + 1))
    prior = (-torch.sum(0.5 * gamma ** 2 * (torch.sum(qdiag ** 2, dim=1) + torch.sum(l ** 2, dim=1)) - m * sum_qs)
             + k * (nw * d * math.log(gamma / math.sqrt(2)) - log_gamma_d))
    return (-n * d * 0.5 * math.log(2 * math.pi) + torch.sum(torch.logsumexp(beta, dim=1))
            - n * torch.logsumexp(alpha, dim=0) + prior)


def lstm_objective(main, extra, state, sequence):
    layers = state.shape[0] // 2
    c, b = sequence.shape
    hs, cells = list(state[0::2]), list(state[1::2])
    total = 0.0
    for t in range(c - 1):
        inp = sequence[t] * extra[0]
        for i in range(layers):
            w, bias = main[2 * i], main[2 * i + 1]
            gates = torch.cat([inp, hs[i], inp, hs[i]]) * w + bias
            cells[i] = cells[i] * torch.sigmoid(gates[:b]) + torch.sigmoid(gates[b:2 * b]) * torch.tanh(gates[3 * b:])
            hs[i] = torch.sigmoid(gates[2 * b:3 * b]) * torch.tanh(cells[i])
            inp = hs[i]
        ypred = inp * extra[1] + extra[2]
        ynorm = ypred - torch.log(torch.sum(torch.exp(ypred)) + 2.0)
        total = total + torch.sum(sequence[t + 1] * ynorm)
    return -total / ((c - 1) * b)


def _t(a):
    return torch.from_numpy(a) if isinstance(a, np.ndarray) else a


def _value(fn):
    """`fn` on NumPy arguments (converted to tensors per call), returning NumPy."""
    def run(*args):
        with torch.no_grad():
            return fn(*map(_t, args)).numpy()
    return run


def _gradient(fn, argnums):
    """The gradient of `fn` w.r.t. `argnums` by `torch.autograd.grad`, NumPy in and out."""
    def run(*args):
        args = [_t(a) for a in args]
        wrt = [args[i].detach().requires_grad_() for i in argnums]
        for i, a in zip(argnums, wrt):
            args[i] = a
        gs = torch.autograd.grad(fn(*args), wrt)
        return tuple(g.numpy() for g in gs) if len(gs) > 1 else gs[0].numpy()
    return run


def kmeans_dir(points, centroids):
    points, centroids = _t(points), _t(centroids)
    j, h = jvp(grad(lambda c: kmeans_cost(points, c)), (centroids,), (torch.ones_like(centroids),))
    return (j / h).numpy()


def ba_reproj(cam, x, w, feat):
    """One observation's reprojection error (2,), branch-free (`where`) so that vmap takes it."""
    rot, xo = cam[0:3], x - cam[3:6]
    sq = torch.sum(rot * rot)
    turning = sq != 0.0
    theta = torch.sqrt(torch.where(turning, sq, torch.ones_like(sq)))
    axis = rot / theta
    rotated = (xo * torch.cos(theta) + torch.linalg.cross(axis, xo) * torch.sin(theta)
               + axis * torch.dot(axis, xo) * (1.0 - torch.cos(theta)))
    xc = torch.where(turning, rotated, xo + torch.linalg.cross(rot, xo))
    proj = xc[0:2] / xc[2]
    rsq = torch.sum(proj * proj)
    proj = proj * (1.0 + cam[9] * rsq + cam[10] * rsq * rsq)
    return w * (proj * cam[6] + cam[7:9] - feat)


def ba_objective(cams, X, w, feats, obs):
    cams, X, w, feats, obs = map(_t, (cams, X, w, feats, obs))
    with torch.no_grad():
        err = torch.func.vmap(ba_reproj)(cams[obs[:, 0]], X[obs[:, 1]], w, feats)
        return err.reshape(-1).numpy(), (1.0 - w * w).numpy()


def ba_jacobian(cams, X, w, feats, obs):
    """vmap of jacfwd of one observation's error, as with_jax.ba_jacobian."""
    cams, X, w, feats, obs = map(_t, (cams, X, w, feats, obs))
    jac = torch.func.vmap(torch.func.jacfwd(ba_reproj, argnums=(0, 1, 2)))(cams[obs[:, 0]], X[obs[:, 1]], w, feats)
    block = torch.cat([jac[0], jac[1], jac[2][:, :, None]], dim=2)
    return torch.cat([block.reshape(-1), -2.0 * w]).detach().numpy()


def ht_pose_params(theta, bones):
    rows = [theta[0:3], torch.ones(3), theta[3:6]] + [torch.zeros(3)] * bones
    i_theta, row = 6, 5
    for _finger in range(5):
        for joint in range(3):
            z = theta[i_theta + 1] if joint == 0 else torch.zeros(())
            rows[row] = torch.stack([theta[i_theta], z, torch.zeros(())])
            i_theta += 2 if joint == 0 else 1
            row += 1
        row += 1
    return torch.stack(rows)


def ht_euler(xzy):
    tx, ty, tz = xzy[0], xzy[2], xzy[1]
    c, s, o, l = torch.cos, torch.sin, torch.zeros(()), torch.ones(())
    rx = torch.stack([torch.stack([l, o, o]), torch.stack([o, c(tx), -s(tx)]), torch.stack([o, s(tx), c(tx)])])
    ry = torch.stack([torch.stack([c(ty), o, s(ty)]), torch.stack([o, l, o]), torch.stack([-s(ty), o, c(ty)])])
    rz = torch.stack([torch.stack([c(tz), -s(tz), o]), torch.stack([s(tz), c(tz), o]), torch.stack([o, o, l])])
    return rz @ ry @ rx


def ht_angle_axis(r):
    n = torch.sqrt(torch.sum(r * r))
    if n < 1e-4:
        return torch.eye(3)
    a = r / n
    o = torch.zeros(())
    k = torch.stack([torch.stack([o, -a[2], a[1]]), torch.stack([a[2], o, -a[0]]), torch.stack([-a[1], a[0], o])])
    return torch.cos(n) * torch.eye(3) + torch.sin(n) * k + (1 - torch.cos(n)) * torch.outer(a, a)


def ht_objective(theta, us, base_rel, inv_abs, base_pos, weights, points, corr, tri, parents):
    pose = ht_pose_params(theta, len(parents))
    absolutes = []
    for b, parent in enumerate(parents):
        tr = torch.cat([torch.cat([ht_euler(pose[3 + b]), torch.zeros(3, 1)], 1), torch.eye(4)[3:]], 0)
        rel = base_rel[b] @ tr
        absolutes.append(rel if parent < 0 else absolutes[parent] @ rel)
    transforms = torch.stack([a @ inv_abs[b] for b, a in enumerate(absolutes)])
    keys = [corr] if us.shape[0] == 0 else [tri[:, k] for k in range(3)]   # each corner's vertex rows
    count = keys[0].shape[0]
    posed_rows = len(keys) * count < base_pos.shape[0]   # pose only the vertices used, where fewer
    if posed_rows:
        rows = torch.cat(keys)
        base_pos, weights = base_pos[rows], weights[rows]
    skin = (weights[:, :, None] * base_pos[:, None, :]).reshape(base_pos.shape[0], -1)   # (V, 4 bones)
    skinned = skin @ transforms[:, :3, :].permute(0, 2, 1).reshape(-1, 3)               # Σ_b w_vb T_b base_pos_v
    verts = skinned @ (ht_angle_axis(pose[0]) * pose[1][None, :]).T + pose[2]
    corners = [verts[k * count:(k + 1) * count] for k in range(len(keys))] if posed_rows else [verts[key] for key in keys]
    if us.shape[0] == 0:
        hand = corners[0]
    else:
        hand = us[:, 0:1] * corners[0] + us[:, 1:2] * corners[1] + (1 - us[:, 0:1] - us[:, 1:2]) * corners[2]
    return (points - hand).reshape(-1)


def _ht(fn):
    def run(*args):
        return fn(*[_t(a) for a in args[:-1]], args[-1]).detach().numpy()
    return run


def ht_jacobian(theta, us, *rest):
    """torch.func.jacfwd over theta; complicated: one jvp per barycentric coordinate."""
    jt = torch.func.jacfwd(ht_objective)(theta, us, *rest)
    if us.shape[0] == 0:
        return jt
    du = [jvp(lambda u: ht_objective(theta, u, *rest), (us,), (torch.zeros_like(us).index_fill(1, torch.tensor([k]), 1.0),))[1]
          for k in range(2)]
    return torch.cat([torch.stack(du, dim=1), jt], dim=1)


def functions(name):
    if name == "particle":
        return {v: particle(v) for v in ("rr", "rf", "fr", "ff")}
    if name == "saddle":
        return {v: saddle(v) for v in ("rr", "rf", "fr", "ff")}
    if name == "lse":
        return {"primal": _value(lse), "gradient": _gradient(lse, (0,))}
    if name == "llsq":
        return {"primal": _value(llsq), "gradient": _gradient(llsq, (0,))}
    if name == "ode":
        return {"primal": _value(ode), "gradient": _gradient(lambda x, s: ode(x, s)[-1], (0,))}
    if name == "kmeans":
        return {"cost": _value(kmeans_cost), "dir": kmeans_dir}
    if name == "gmm":
        return {"objective": _value(gmm_objective), "jacobian": _gradient(gmm_objective, (0, 1, 2, 3))}
    if name == "lstm":
        return {"objective": _value(lstm_objective), "jacobian": _gradient(lstm_objective, (0, 1))}
    if name == "ba":
        return {"objective": ba_objective, "jacobian": ba_jacobian}
    if name == "ht":
        return {"objective": _ht(ht_objective), "jacobian": _ht(ht_jacobian)}
    raise KeyError(name)
