"""GradBench's Jacobian evals in jitad: ba (bundle adjustment), ht (hand tracking).

`ba`: every observation's reprojection error depends on its camera (11 numbers), its
point (3) and its weight (1) only, so the sparse Jacobian is p blocks of 2×15. jitad has
no `vmap` yet, and a staged `FOR` over observations writing one block a step would cost
O(p) a step (a select over the whole output: there is no dynamic row update), so the
error is written over all observations at once (columns of (p,) arrays) and its blocks
come from one `linearize` (the primal once) and 15 tangent evaluations, one per block
column, each seeding that parameter of every observation at once (the observations do
not interact, so one direction gives column k of all p blocks: the "compressed" forward
Jacobian; the other parameters' zero tangents make no code). The primal and the 15
directions are elementwise over the observations, so fusion makes them one loop, which
stores each value straight into GradBench's layout (`jitad/ir/placed.py`: the stack of
30 columns and the concatenation with the weights' derivatives are not copies); ba3's
Jacobian took 74 ms CPU with those copies, 24 ms without (load ≈ 3).

`ht`: the residuals (3 per point) depend on all 26 pose parameters: `jitad.jacfwd` over
theta. In the "complicated" variant point i also depends on its own barycentric pair
us[i]: the derivatives w.r.t. a shift of every pair alike (compressed again) are
GradBench's first two Jacobian columns, from the same `jacfwd` (argnums=(0, 1): one loop
over the 28 directions, the shift's two running only the barycentric part).
Only the vertices the points use are posed (each vertex is skinned on its own, so the
taken rows of `base_pos` and `weights` give the taken rows of the posed hand): with
GradBench's big model that is 3c ≤ 600 of 10,000 vertices, in the objective and in every
tangent direction (ht's Jacobian through GradBench's harness, big model, c = 100–200:
28 → 1.0–1.7 ms; every comparator here does the same). Linear blend skinning is one
product of the model's (V, 4·bones) rows w[v, b]·base_pos[v] (`ht_skinning_rows`) with
the bones' stacked transforms: each tangent direction reads those rows once and makes
(V, 3), where the product by bone and the weighted sum over bones stored (V, bones, 3)
and read it twice; with many points each triangle corner's rows are gathered on their
own, the (c, 3) arrays the barycentric loop reads (a (3c, 3) gather cut into corners was
copied once more). Both together, CPU time, same process: hand11's Jacobian 96 → 54 ms,
hand5's 7.0 → 2.8, hand11's objective 3.2 → 2.2 (the JAX and PyTorch versions do the same).

Measured (CPU time, 2-core machine under load 13–18, medians of 5, two alternating runs
against the previous per-direction `jvp`s): ht's Jacobian 2.2–2.4 → 1.3–1.7 ms, ba's
108 → 78–80 ms. `vmap` of the tangent function instead (every direction as one batched
tangent, JAX's way) was slower here: ht 2.6 ms against 1.0, ba 185 ms against 88.
"""

import jitad

EVALS = ("ba", "ht")
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
    """The camera and point columns of every observation (each column gathered on its
    own: a column of a gathered matrix would be one more copy)."""
    ci, pi = obs[:, 0], obs[:, 1]
    return [jitad.take(cams[:, k], ci) for k in range(NCAM)], [jitad.take(X[:, k], pi) for k in range(3)]


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

    _, err_jvp = jitad.linearize(lambda *p: ba_reproj(p[:NCAM], p[NCAM:NCAM + 3], p[-1], feat), *params)
    cols = [err_jvp(*[one if j == k else 0.0 for j in range(len(params))]) for k in range(len(params))]
    block = jitad.stack([c[0] for c in cols] + [c[1] for c in cols], axis=1)   # (p, 30): row x, row y
    w_d = jitad.jvp(lambda v: 1.0 - v * v, (w,), (one,))[1]
    return jitad.concatenate([jitad.reshape(block, (-1,)), w_d])


# -- ht: a skinned hand (22 bones, linear blend skinning), posed by 26 parameters ------

def ht_bone_angles():
    """{bone: (theta index of its x angle, of its z angle or None)}: GradBench's
    to_pose_params (theta 0–2 global rotation, 3–5 translation, then per finger 4 angles
    over its first three bones; the other bones stay unrotated, and every y angle is 0)."""
    table, i_theta, bone = {}, 6, 2
    for _finger in range(5):
        for joint in range(3):
            table[bone] = (i_theta, i_theta + 1 if joint == 0 else None)
            i_theta += 2 if joint == 0 else 1
            bone += 1
        bone += 1
    return table


def _euler_xz(tx, tz):
    """Rz·Ry·Rx with y = 0, as rows of scalars."""
    cx, sx, cz, sz = jitad.cos(tx), jitad.sin(tx), jitad.cos(tz), jitad.sin(tz)
    return ((cz, -sz * cx, sz * sx), (sz, cz * cx, -cz * sx), (0.0, sx, cx))


def _angle_axis(r):
    """The rotation by angle-axis r (identity when |r| < 1e-4), as rows of scalars."""
    norm2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2]
    small = norm2 < 1e-8
    n = jitad.sqrt(jitad.where(small, 1.0, norm2))
    x, y, z = r[0] / n, r[1] / n, r[2] / n
    s, c = jitad.sin(n), jitad.cos(n)
    rows = ((x * x + (1 - x * x) * c, x * y * (1 - c) - z * s, x * z * (1 - c) + y * s),
            (x * y * (1 - c) + z * s, y * y + (1 - y * y) * c, y * z * (1 - c) - x * s),
            (x * z * (1 - c) - y * s, z * y * (1 - c) + x * s, z * z + (1 - z * z) * c))
    return tuple(tuple(jitad.where(small, float(i == j), rows[i][j]) for j in range(3)) for i in range(3))


def ht_skinning_rows(base_pos, weights):
    """(V, 4·bones): row v holds w[v, b] · base_pos[v] for every bone b, so that linear
    blend skinning, Σ_b w[v, b] · T_b · base_pos[v], is one product with the bones'
    transforms stacked (4·bones, 3). It depends on the model only: `jacfwd`'s tangent code
    reads it, one product a direction, instead of storing (V, bones, 3) per direction."""
    verts, bones = weights.shape
    return jitad.reshape(jitad.reshape(weights, (verts, bones, 1)) * jitad.reshape(base_pos, (verts, 1, 4)),
                         (verts, bones * 4))


def ht_vertices(theta, base_rel, inv_abs, base_pos, weights, parents):
    """The posed hand's vertex positions (V, 3)."""
    angles = ht_bone_angles()
    absolutes, columns = [], []
    for b, parent in enumerate(parents):
        rel = base_rel[b]
        if b in angles:                      # rel[:, :3] · R, column by column
            ix, iz = angles[b]
            R = _euler_xz(theta[ix], theta[iz] if iz is not None else 0.0)
            rel = jitad.stack([rel[:, 0] * R[0][j] + rel[:, 1] * R[1][j] + rel[:, 2] * R[2][j] for j in range(3)]
                              + [rel[:, 3]], axis=1)
        absolutes.append(rel if parent < 0 else jitad.matmul(absolutes[parent], rel))
        columns.append(jitad.transpose(jitad.matmul(absolutes[b], inv_abs[b])[0:3, :]))   # (4, 3)
    skinned = jitad.matmul(ht_skinning_rows(base_pos, weights), jitad.concatenate(columns, axis=0))
    R = _angle_axis(theta[0:3])             # the global scale is 1 (to_pose_params), left out
    return jitad.stack([skinned[:, 0] * R[j][0] + skinned[:, 1] * R[j][1] + skinned[:, 2] * R[j][2] + theta[3 + j]
                        for j in range(3)], axis=1)


def ht_objective(theta, us, base_rel, inv_abs, base_pos, weights, points, corr, tri, parents):
    """The residuals points − hand points (3c,): the corresponding vertices (simple: `us`
    has no rows), or the barycentric points us of the corresponding triangles. Where the
    points use fewer rows than the model has vertices, only those are posed (each vertex is
    skinned on its own: posing the taken rows of `base_pos` and `weights` gives the taken
    rows of all posed vertices); else every vertex is posed once and each triangle corner's
    rows taken after (one gather per corner: the (c, 3) arrays the barycentric loop reads)."""
    keys = [corr] if us.shape[0] == 0 else [tri[:, k] for k in range(3)]   # each corner's vertex rows
    count = keys[0].shape[0]
    if len(keys) * count < base_pos.shape[0]:   # fewer rows used than the model has: pose those
        rows = keys[0] if len(keys) == 1 else jitad.concatenate(keys)
        verts = ht_vertices(theta, base_rel, inv_abs, jitad.take(base_pos, rows), jitad.take(weights, rows), parents)
        corners = [verts[k * count:(k + 1) * count] for k in range(len(keys))]
    else:   # many points share vertices: pose each vertex once, then take the rows
        verts = ht_vertices(theta, base_rel, inv_abs, base_pos, weights, parents)
        corners = [jitad.take(verts, key) for key in keys]
    if us.shape[0] == 0:
        hand = corners[0]
    else:
        u, v = us[:, 0:1], us[:, 1:2]
        hand = u * corners[0] + v * corners[1] + (1.0 - u - v) * corners[2]
    return jitad.reshape(points - hand, (-1,))


def ht_jacobian(theta, us, *rest):
    """GradBench's (3c, 26) Jacobian w.r.t. theta; complicated: (3c, 2 + 26), first the
    derivatives w.r.t. each point's own two barycentric coordinates: those of a shift of
    every pair alike (compressed: each residual depends on its own pair only), from the
    same `jacfwd` (the primal once; the shift's columns run only the barycentric part)."""
    if us.shape[0] == 0:
        return jitad.jacfwd(lambda th: ht_objective(th, us, *rest))(theta)
    d_shift, d_theta = jitad.jacfwd(lambda shift, th: ht_objective(th, us + shift, *rest), argnums=(0, 1))(
        jitad.zeros(2), theta)
    return jitad.concatenate([d_shift, d_theta], axis=1)


def compiled(name):
    if name == "ba":
        return {"objective": jitad.jit(ba_objective), "jacobian": jitad.jit(ba_jacobian)}
    if name == "ht":
        return {"objective": jitad.jit(ht_objective, static_argnums=(9,)),
                "jacobian": jitad.jit(ht_jacobian, static_argnums=(9,))}
    raise KeyError(name)
