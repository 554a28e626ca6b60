"""GradBench's Jacobian evals in jitad: ba (bundle adjustment), ht (hand tracking).

`ba`: every observation's reprojection error depends on its camera (11 numbers), its
point (3) and its weight (1) only, so the sparse Jacobian is p blocks of 2×15. jitad has
no `vmap` yet, and a staged `FOR` over observations writing one block a step would cost
O(p) a step (a select over the whole output: there is no dynamic row update), so the
error is written over all observations at once (columns of (p,) arrays) and its blocks
come from 15 `jvp`s, one per block column, each seeding that parameter of every
observation at once (the observations do not interact, so one `jvp` gives column k of
all p blocks: the "compressed" forward Jacobian).
"""
import numpy as np

import jitad

EVALS = ("ba",)
NCAM = 11   # rotation (3, angle-axis), centre (3), focal length, principal point (2), distortion (2)


def _cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def ba_reproj(cam, pt, w, feat):
    """The reprojection errors of p observations: `cam` a list of 11 (p,) columns,
    `pt` of 3, `w` and `feat` (p,) and a pair of (p,) columns; returns (err_x, err_y)."""
    rot = cam[0:3]
    x = [pt[i] - cam[3 + i] for i in range(3)]
    sq = rot[0] * rot[0] + rot[1] * rot[1] + rot[2] * rot[2]
    turning = sq != 0.0
    theta = jitad.sqrt(jitad.where(turning, sq, 1.0))   # Rodrigues' formula; rot ≈ 0: X + rot × X
    cos, sin = jitad.cos(theta), jitad.sin(theta)
    axis = [r / theta for r in rot]
    ax_x = _cross(axis, x)
    tmp = (axis[0] * x[0] + axis[1] * x[1] + axis[2] * x[2]) * (1.0 - cos)
    rot_x = _cross(rot, x)
    xc = [jitad.where(turning, x[i] * cos + ax_x[i] * sin + axis[i] * tmp, x[i] + rot_x[i]) for i in range(3)]
    u, v = xc[0] / xc[2], xc[1] / xc[2]
    rsq = u * u + v * v
    distort = 1.0 + cam[9] * rsq + cam[10] * rsq * rsq
    return (w * (u * distort * cam[6] + cam[7] - feat[0]),
            w * (v * distort * cam[6] + cam[8] - feat[1]))


def _gathered(cams, X, obs):
    """The camera and point columns of every observation."""
    cam = jitad.take(cams, obs[:, 0])
    pt = jitad.take(X, obs[:, 1])
    return [cam[:, k] for k in range(NCAM)], [pt[:, k] for k in range(3)]


def ba_objective(cams, X, w, feats, obs):
    """(reprojection errors (2p,): x, y per observation; weight errors 1 − w² (p,))."""
    cam, pt = _gathered(cams, X, obs)
    ex, ey = ba_reproj(cam, pt, w, (feats[:, 0], feats[:, 1]))
    return jitad.reshape(jitad.stack([ex, ey], axis=1), (-1,)), 1.0 - w * w


def ba_jacobian(cams, X, w, feats, obs):
    """The nonzero values of GradBench's sparse Jacobian, in its order (`inputs.ba_sparsity`
    gives rows and columns): for each observation its two rows of 15 (camera, point,
    weight), then one value −2w per weight error."""
    cam, pt = _gathered(cams, X, obs)
    feat = (feats[:, 0], feats[:, 1])
    params = cam + pt + [w]
    one = jitad.ones_like(w)

    def column(k):
        def err(v):
            p = params[:k] + [v] + params[k + 1:]
            return ba_reproj(p[:NCAM], p[NCAM:NCAM + 3], p[-1], feat)
        return jitad.jvp(err, (params[k],), (one,))[1]

    cols = [column(k) for k in range(len(params))]
    block = jitad.stack([c[0] for c in cols] + [c[1] for c in cols], axis=1)   # (p, 30): row x, row y
    w_d = jitad.jvp(lambda v: 1.0 - v * v, (w,), (one,))[1]
    return jitad.concatenate([jitad.reshape(block, (-1,)), w_d])


def compiled(name):
    if name == "ba":
        return {"objective": jitad.jit(ba_objective), "jacobian": jitad.jit(ba_jacobian)}
    raise KeyError(name)
