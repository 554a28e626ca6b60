"""Smoke test of bench/gradbench: every jitad eval at its smallest size, checked against
GradBench's expected outputs (particle, saddle) or NumPy references and central
differences. JAX/PyTorch are not needed (their part is skipped when absent)."""
import json
import math

import numpy as np
import pytest

import jitad

from bench.gradbench import arrays, inputs, nested


def args_of(name):
    return inputs.prepare(name, inputs.generate(name, inputs.SIZES[name][0]))


def central(f, x, idx, h=1e-6):
    """Central differences of scalar f at flat positions idx of array x."""
    out = []
    for i in idx:
        xp, xm = x.copy(), x.copy()
        xp.flat[i] += h
        xm.flat[i] -= h
        out.append((f(xp) - f(xm)) / (2 * h))
    return np.array(out)


@pytest.mark.parametrize("variant", nested.VARIANTS)
def test_particle_and_saddle_expected(variant):
    assert nested.compiled("particle", variant)(0.0) == pytest.approx(inputs.EXPECTED["particle"], rel=1e-12)
    got = nested.compiled("saddle", variant)(1.0, 1.0)
    np.testing.assert_allclose(got, inputs.EXPECTED["saddle"], rtol=1e-9)


def test_lse():
    (x,) = args_of("lse")
    f = arrays.compiled("lse")
    want = math.log(np.sum(np.exp(x)))
    assert f["primal"](x) == pytest.approx(want, rel=1e-12)
    np.testing.assert_allclose(f["gradient"](x), np.exp(x - want), rtol=1e-10)


def test_llsq():
    x, t, s = args_of("llsq")
    V = t[:, None] ** np.arange(x.size)[None, :]
    r = s - V @ x
    f = arrays.compiled("llsq")
    assert f["primal"](x, t, s) == pytest.approx(0.5 * r @ r, rel=1e-10)
    np.testing.assert_allclose(f["gradient"](x, t, s), -V.T @ r, rtol=1e-9, atol=1e-12)


def numpy_ode(x, steps):
    h, y = 2.0 / steps, np.zeros_like(x)
    f = lambda y: x * np.concatenate([[1.0], y[:-1]])
    for _ in range(steps):
        k1 = f(y); k2 = f(y + h / 2 * k1); k3 = f(y + h / 2 * k2); k4 = f(y + h * k3)   # noqa: E702 (RK4's stages)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return y


def test_ode():
    x, s = args_of("ode")
    f = arrays.compiled("ode")
    np.testing.assert_allclose(f["primal"](x, s), numpy_ode(x, s), rtol=1e-12)
    g = f["gradient"](x, s)
    idx = list(range(x.size - 6, x.size)) + [0, 10]
    np.testing.assert_allclose(g[idx], central(lambda z: numpy_ode(z, s)[-1], x, idx), rtol=1e-6, atol=1e-9)


def test_kmeans():
    points, centroids = args_of("kmeans")
    d2 = ((points[:, None, :] - centroids[None]) ** 2).sum(-1)
    best = d2.argmin(1)
    f = arrays.compiled("kmeans")
    assert f["cost"](points, centroids) == pytest.approx(d2.min(1).sum(), rel=1e-10)
    mean = np.array([points[best == c].mean(0) for c in range(len(centroids))])
    np.testing.assert_allclose(f["dir"](points, centroids), centroids - mean, rtol=1e-8, atol=1e-12)


def numpy_gmm(alpha, mu, q, l, x, m, gamma):
    n, d = x.shape
    k = alpha.size
    total = 0.0
    beta = np.empty((n, k))
    for c in range(k):
        Q = np.diag(np.exp(q[c]))
        Q[np.triu_indices(d, 1)[1], np.triu_indices(d, 1)[0]] = l[c]
        z = (x - mu[c]) @ Q.T
        beta[:, c] = alpha[c] + q[c].sum() - 0.5 * (z * z).sum(1)
        total += -0.5 * gamma ** 2 * (Q * Q).sum() + m * q[c].sum()
    lse = lambda v, ax=None: np.log(np.exp(v - v.max(ax, keepdims=True)).sum(ax)) + v.max(ax)
    nw = d + m + 1
    const = k * (nw * d * math.log(gamma / math.sqrt(2)) - arrays.log_gamma_d(0.5 * nw, d))
    return -n * d / 2 * math.log(2 * math.pi) + lse(beta, 1).sum() - n * lse(alpha) + total + const


def test_gmm():
    args = args_of("gmm")
    f = arrays.compiled("gmm")
    assert f["objective"](*args) == pytest.approx(numpy_gmm(*args), rel=1e-10)
    grads = f["jacobian"](*args)
    for p, g in enumerate(grads):
        def fp(z, p=p):
            a = list(args)
            a[p] = z
            return numpy_gmm(*a)
        idx = [0, args[p].size - 1]
        np.testing.assert_allclose(g.flat[idx], central(fp, args[p], idx), rtol=1e-5, atol=1e-6)


def numpy_lstm(main, extra, state, seq):
    layers, (c, b) = state.shape[0] // 2, seq.shape
    sig = lambda v: 1 / (1 + np.exp(-v))
    hs, cs, total = list(state[0::2]), list(state[1::2]), 0.0
    for t in range(c - 1):
        inp = seq[t] * extra[0]
        for i in range(layers):
            w, bias = main[2 * i], main[2 * i + 1]
            cs[i] = cs[i] * sig(inp * w[:b] + bias[:b]) + sig(hs[i] * w[b:2 * b] + bias[b:2 * b]) * np.tanh(hs[i] * w[3 * b:] + bias[3 * b:])
            hs[i] = sig(inp * w[2 * b:3 * b] + bias[2 * b:3 * b]) * np.tanh(cs[i])
            inp = hs[i]
        y = inp * extra[1] + extra[2]
        total += (seq[t + 1] * (y - np.log(np.exp(y).sum() + 2))).sum()
    return -total / ((c - 1) * b)


def test_lstm():
    main, extra, state, seq = args_of("lstm")
    seq = seq[:64]                      # a short sequence keeps the NumPy reference fast
    f = arrays.compiled("lstm")
    assert f["objective"](main, extra, state, seq) == pytest.approx(numpy_lstm(main, extra, state, seq), rel=1e-11)
    gm, ge = f["jacobian"](main, extra, state, seq)
    idx = [0, 5, main.size - 1]
    np.testing.assert_allclose(gm.flat[idx], central(lambda z: numpy_lstm(z, extra, state, seq), main, idx),
                               rtol=1e-5, atol=1e-8)
    idx = [0, extra.size - 1]
    np.testing.assert_allclose(ge.flat[idx], central(lambda z: numpy_lstm(main, z, state, seq), extra, idx),
                               rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("module", ["with_jax", "with_torch", "byhand"])
def test_comparators_agree_on_lse(module):
    """The comparators (when installed) give jitad's lse gradient to 1e-9."""
    pytest.importorskip({"with_jax": "jax", "with_torch": "torch", "byhand": "numba"}[module])
    import importlib
    mod = importlib.import_module(f"bench.gradbench.{module}")
    (x,) = args_of("lse")
    np.testing.assert_allclose(np.asarray(mod.functions("lse")["gradient"](x)),
                               arrays.compiled("lse")["gradient"](x), rtol=1e-9)


def test_tool_speaks_the_protocol():
    """`python -m bench.gradbench.tool` driven with GradBench's messages in a subprocess."""
    import json
    import os
    import subprocess
    import sys
    msgs = [{"id": 0, "kind": "start", "eval": "particle"},
            {"id": 1, "kind": "define", "module": "particle"},
            {"id": 2, "kind": "evaluate", "module": "particle", "function": "rf",
             "input": {"w": 0.0, "min_runs": 3, "min_seconds": 0}, "description": "w=0"},
            {"id": 3, "kind": "analysis", "of": 2, "valid": True},
            {"id": 4, "kind": "define", "module": "nosuch"},
            {"id": 5, "kind": "evaluate", "module": "lse", "function": "gradient",
             "input": {"x": [0.0, 1.0, 2.0], "min_runs": 1, "min_seconds": 0}},
            {"id": 6, "kind": "evaluate", "module": "gmm", "function": "jacobian",
             "input": inputs.generate("gmm", {"d": 2, "k": 3, "n": 4}) | {"min_runs": 1, "min_seconds": 0}},
            {"id": 7, "kind": "evaluate", "module": "lse", "function": "nosuch", "input": {"x": [1.0]}}]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, "-m", "bench.gradbench.tool"], cwd=root, timeout=120,
                          input="".join(json.dumps(m) + "\n" for m in msgs), capture_output=True, text=True,
                          env=os.environ | {"PYTHONPATH": root})
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["id"] for r in out] == list(range(8))
    assert out[0] == {"id": 0, "tool": "jitad"} and out[3] == {"id": 3}
    assert out[1]["success"] is True and out[4]["success"] is False
    assert out[2]["output"] == pytest.approx(inputs.EXPECTED["particle"], rel=1e-12)
    names = [t["name"] for t in out[2]["timings"]]
    assert names == ["compile", "evaluate", "evaluate", "evaluate"]
    assert all(t["nanoseconds"] > 0 for t in out[2]["timings"])
    e = np.exp([0.0, 1.0, 2.0])
    np.testing.assert_allclose(out[5]["output"], e / e.sum(), rtol=1e-12)
    assert sorted(out[6]["output"]) == ["alpha", "l", "mu", "q"] and np.shape(out[6]["output"]["mu"]) == (3, 2)
    assert out[7]["success"] is False and "nosuch" in out[7]["error"]


def test_byhand_nested_expected():
    """numba by hand (scalar solvers) reaches GradBench's expected outputs."""
    pytest.importorskip("numba")
    from bench.gradbench import byhand
    assert byhand.particle(0.0) == pytest.approx(inputs.EXPECTED["particle"], rel=1e-12)
    np.testing.assert_allclose(byhand.saddle(1.0, 1.0), inputs.EXPECTED["saddle"], rtol=1e-9)


@pytest.mark.parametrize("name", ["gmm", "lstm"])
def test_byhand_gmm_lstm_agree(name):
    """The hand-derived gmm/lstm objectives and gradients equal jitad's to 1e-9."""
    pytest.importorskip("numba")
    from bench.gradbench import byhand
    args = args_of(name)
    mine, theirs = arrays.compiled(name), byhand.functions(name)
    for fname in inputs.FUNCTIONS[name]:
        parts = lambda v: v if isinstance(v, tuple) else (v,)
        want, got = parts(mine[fname](*args)), parts(theirs[fname](*args))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12 * np.max(np.abs(w)))


def numpy_ba_reproj(cam, x, w, feat):
    """One observation's reprojection error, as GradBench's ba defines it (reference)."""
    rot, xo = cam[:3], x - cam[3:6]
    theta = np.sqrt(rot @ rot)
    if theta != 0:
        axis = rot / theta
        xo = xo * np.cos(theta) + np.cross(axis, xo) * np.sin(theta) + axis * (axis @ xo) * (1 - np.cos(theta))
    else:
        xo = xo + np.cross(rot, xo)
    proj = xo[:2] / xo[2]
    rsq = proj @ proj
    return w * (proj * (1 + cam[9] * rsq + cam[10] * rsq * rsq) * cam[6] + cam[7:9] - feat)


def test_ba():
    from bench.gradbench import jacobians
    cams, X, w, feats, obs = args_of("ba")
    n, m, p = cams.shape[0], X.shape[0], w.size
    cams = cams * (1 + 0.01 * np.arange(n))[:, None]      # distinct cameras and points (the files repeat one)
    X = X + 0.1 * np.sin(np.arange(m))[:, None]
    w = w + 0.01 * np.cos(np.arange(p))
    args = (cams, X, w, feats, obs)
    f = jacobians.compiled("ba")
    err, w_err = f["objective"](*args)
    rows, cols = inputs.ba_sparsity(n, m, obs)
    vals = f["jacobian"](*args)
    assert err.shape == (2 * p,) and vals.shape == cols.shape == (31 * p,) and rows.shape == (3 * p + 1,)
    np.testing.assert_allclose(w_err, 1 - w * w, rtol=1e-14)
    np.testing.assert_allclose(vals[30 * p:], -2 * w, rtol=1e-14)
    assert rows[-1] == 31 * p and rows[2 * p] == 30 * p and rows[1] == 15
    for i in (0, 1, p // 2, p - 1):
        c, o = obs[i]
        params = np.concatenate([cams[c], X[o], [w[i]]])
        ref = lambda z: numpy_ba_reproj(z[:11], z[11:14], z[14], feats[i])
        np.testing.assert_allclose(err[2 * i:2 * i + 2], ref(params), rtol=1e-10, atol=1e-10)  # proj − feat cancels
        block = vals[30 * i:30 * i + 30].reshape(2, 15)
        for k in range(15):
            h = 1e-6 * max(1.0, abs(params[k]))
            up, down = params.copy(), params.copy()
            up[k] += h
            down[k] -= h
            np.testing.assert_allclose(block[:, k], (ref(up) - ref(down)) / (2 * h), rtol=1e-5, atol=1e-5)
        want = [11 * c + np.arange(11), 11 * n + 3 * o + np.arange(3), [11 * n + 3 * m + i]]
        np.testing.assert_array_equal(cols[30 * i:30 * i + 15], np.concatenate(want))
        np.testing.assert_array_equal(cols[30 * i + 15:30 * i + 30], np.concatenate(want))


def test_ba_jacobian_is_one_pass_written_in_place():
    """ba's Jacobian: the primal and all 15 tangent directions in one fused loop over the
    observations, which stores every value straight into GradBench's layout (no stack
    or concatenation copies)."""
    from bench.gradbench import jacobians
    from jitad.ir.ops import Op
    args = inputs.prepare("ba", inputs.generate("ba", {"file": 1}) | {"n": 3, "m": 5, "p": 17})
    f = jitad.jit(jacobians.ba_jacobian)
    f(*args)
    main = f._latest("ir").program.main
    passes = [n for n in main.nodes if n.op == Op.FUSED and any(b.op == Op.COS for b in n.bodies[0].nodes)]
    assert len(passes) == 1
    stores = [b for b in passes[0].bodies[0].nodes if b.op == Op.SLOT_ADD_SLICE and "flat" in b.attrs]
    assert len(stores) >= 26   # the 30 values of a block, less the structural zeros
    assert not any(n.op in (Op.CONCAT, Op.SLOT_SET) for n in main.nodes)


def test_tool_ba_output():
    """The tool answers ba in GradBench's format: one observation's errors with their
    count; the first 30 and the last entries of the sparse Jacobian's rows, cols, vals."""
    from bench.gradbench import tool
    inp = inputs.generate("ba", {"file": 1}) | {"n": 2, "m": 3, "p": 11, "min_runs": 1, "min_seconds": 0}
    obj = tool.respond({"id": 1, "kind": "evaluate", "module": "ba", "function": "objective", "input": inp})
    out = obj["output"]
    assert out["reproj_error"]["repeated"] == 11 and out["w_err"]["repeated"] == 11
    assert out["w_err"]["element"] == pytest.approx(1 - inputs.BA_W ** 2, rel=1e-14)
    want = numpy_ba_reproj(np.array(inputs.BA_CAM), np.array(inputs.BA_X), inputs.BA_W, np.array(inputs.BA_FEAT))
    np.testing.assert_allclose(out["reproj_error"]["elements"], want, rtol=1e-10, atol=1e-10)
    jac = tool.respond({"id": 2, "kind": "evaluate", "module": "ba", "function": "jacobian", "input": inp})["output"]
    assert [len(jac[k]) for k in ("rows", "cols", "vals")] == [31, 31, 31]
    assert jac["rows"][:3] == [0, 15, 30] and jac["rows"][-1] == 31 * 11
    assert jac["cols"][:15] == list(range(11)) + [22, 23, 24, 22 + 9]
    assert jac["cols"][-1] == 22 + 9 + 10 and jac["vals"][-1] == pytest.approx(-2 * inputs.BA_W)
    assert jac["vals"][7] == pytest.approx(inputs.BA_W) and jac["vals"][8] == 0.0   # d err_x / d u0, d v0


def test_byhand_ba_agrees():
    """numba's hand-derived ba Jacobian equals jitad's to 1e-9 (distinct cameras, points, weights)."""
    pytest.importorskip("numba")
    from bench.gradbench import byhand, jacobians
    cams, X, w, feats, obs = inputs.prepare("ba", inputs.generate("ba", {"file": 1}) | {"n": 3, "m": 5, "p": 17})
    cams = cams * (1 + 0.05 * np.arange(3))[:, None]
    cams[2, :3] = 0.0                                      # a camera without rotation: the other branch
    args = (cams, X + 0.1 * np.arange(5)[:, None], w + 0.01 * np.arange(17), feats, obs)
    mine, theirs = jacobians.compiled("ba"), byhand.functions("ba")
    for got, want in zip(theirs["objective"](*args), mine["objective"](*args)):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(theirs["jacobian"](*args), mine["jacobian"](*args), rtol=1e-9, atol=1e-12)


def numpy_ht(theta, us, base_rel, inv_abs, base_pos, weights, points, corr, tri, parents):
    """GradBench's ht objective written plainly (reference): pose, bone chain, skinning,
    global transform, residuals."""
    pose = np.zeros((len(parents) + 3, 3))
    pose[0], pose[1], pose[2] = theta[0:3], 1.0, theta[3:6]
    i_theta, row = 6, 5
    for _finger in range(5):
        for joint in range(3):
            pose[row, 0] = theta[i_theta]
            if joint == 0:
                pose[row, 1] = theta[i_theta + 1]
            i_theta += 2 if joint == 0 else 1
            row += 1
        row += 1

    def euler(tx, tz, ty):
        c, s = np.cos, np.sin
        rx = np.array([[1, 0, 0], [0, c(tx), -s(tx)], [0, s(tx), c(tx)]])
        ry = np.array([[c(ty), 0, s(ty)], [0, 1, 0], [-s(ty), 0, c(ty)]])
        rz = np.array([[c(tz), -s(tz), 0], [s(tz), c(tz), 0], [0, 0, 1]])
        return rz @ ry @ rx

    absolutes, verts = [], np.zeros((base_pos.shape[0], 3))
    for b, parent in enumerate(parents):
        tr = np.eye(4)
        tr[:3, :3] = euler(*pose[3 + b])
        rel = base_rel[b] @ tr
        absolutes.append(rel if parent < 0 else absolutes[parent] @ rel)
        verts += weights[:, b:b + 1] * (base_pos @ (absolutes[b] @ inv_abs[b]).T)[:, :3]
    n = np.linalg.norm(pose[0])
    a = pose[0] / n
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    R = np.cos(n) * np.eye(3) + np.sin(n) * k + (1 - np.cos(n)) * np.outer(a, a) if n >= 1e-4 else np.eye(3)
    verts = verts @ R.T + pose[2]
    if len(us) == 0:
        return (points - verts[corr]).reshape(-1)
    u, v = us[:, :1], us[:, 1:]
    return (points - u * verts[tri[:, 0]] - v * verts[tri[:, 1]] - (1 - u - v) * verts[tri[:, 2]]).reshape(-1)


def test_ht_simple_objective():
    from bench.gradbench import jacobians
    args = inputs.prepare("ht", inputs.generate("ht", {"variant": "simple", "file": 1}))
    np.testing.assert_allclose(jacobians.compiled("ht")["objective"](*args), numpy_ht(*args), rtol=1e-10, atol=1e-13)


def test_ht_poses_only_the_vertices_used():
    """The skinning product's rows (of weights times base positions, one column per bone and
    coordinate) are the points' vertices, not all of the model's."""
    from bench.gradbench import jacobians
    from jitad.ir.graph import walk
    from jitad.ir.ops import Op
    args = inputs.prepare("ht", inputs.generate("ht", {"variant": "complicated", "file": 1}))
    f = jitad.jit(jacobians.ht_objective, static_argnums=(9,))
    f(*args)
    rows = {n.outputs[0].type.shape[0] for n in walk(f._latest("ir").program.main) if n.op == Op.MATMUL
            and n.inputs[0].type.shape[-1] == 4 * len(args[9])}
    assert rows == {3 * len(args[6])} and args[4].shape[0] > 3 * len(args[6])


def test_ht_complicated():
    """(The simple variant's Jacobian is the same jacfwd without the us columns; left out
    to keep this fast: LLVM's optimizer takes ~5 s per Jacobian program.)"""
    from bench.gradbench import jacobians
    args = inputs.prepare("ht", inputs.generate("ht", {"variant": "complicated", "file": 1}))
    theta, us = args[0], args[1]
    f = jacobians.compiled("ht")
    np.testing.assert_allclose(f["objective"](*args), numpy_ht(*args), rtol=1e-10, atol=1e-13)
    jac = f["jacobian"](*args)
    extra = 2
    assert jac.shape == (3 * len(args[6]), 26 + extra)
    for k in (0, 3, 6, 7, 25):            # global rotation, translation, a finger's two angles, the last
        def at(z, k=k):
            t = theta.copy()
            t[k] = z
            return numpy_ht(t, *args[1:])
        h = 1e-6
        np.testing.assert_allclose(jac[:, extra + k], (at(theta[k] + h) - at(theta[k] - h)) / (2 * h),
                                   rtol=1e-5, atol=1e-7)
    if extra:
        for k in range(2):                # each point's own barycentric coordinate: a block diagonal
            up, down = us.copy(), us.copy()
            up[:, k] += 1e-6
            down[:, k] -= 1e-6
            fd = (numpy_ht(theta, up, *args[2:]) - numpy_ht(theta, down, *args[2:])) / 2e-6
            np.testing.assert_allclose(jac[:, k], fd, rtol=1e-5, atol=1e-7)


def test_det():
    """det by expansion by minors at GradBench's smallest size: NumPy's det and its
    gradient, the cofactor matrix det(A)·A⁻ᵀ; central differences of jitad's own det."""
    from bench.gradbench import det
    (a,) = args_of("det")
    assert a.shape == (5, 5)
    f = det.compiled()
    want = np.linalg.det(a)
    assert f["primal"](a) == pytest.approx(want, rel=1e-12)
    np.testing.assert_allclose(f["gradient"](a), want * np.linalg.inv(a).T, rtol=1e-9, atol=1e-14)
    b = np.array([[2.0, -1.0, 0.5], [1.0, 3.0, -2.0], [0.0, 1.5, 4.0]])
    assert f["primal"](b) == pytest.approx(np.linalg.det(b), rel=1e-12)
    jitad_testing = pytest.importorskip("jitad.testing")
    jitad_testing.check_grads(det.det, (b,))
    c = np.random.default_rng(3).random((6, 6))   # four rows picked in the loop, a 2×2 minor left
    g = jitad.jit(jitad.grad(lambda x: det.det(x, base=2)))(c)
    np.testing.assert_allclose(g, np.linalg.det(c) * np.linalg.inv(c).T, rtol=1e-9, atol=1e-14)


def test_tool_det_output():
    """The tool's det messages: a float, and the gradient flat in row-major order."""
    from bench.gradbench import tool
    inp = inputs.generate("det", {"ell": 5}) | {"min_runs": 2, "min_seconds": 0}
    a = np.reshape(inp["A"], (5, 5))
    primal = tool.respond({"id": 1, "kind": "evaluate", "module": "det", "function": "primal", "input": inp})
    grad = tool.respond({"id": 2, "kind": "evaluate", "module": "det", "function": "gradient", "input": inp})
    assert primal["success"] and grad["success"], (primal.get("error"), grad.get("error"))
    assert primal["output"] == pytest.approx(np.linalg.det(a), rel=1e-12)
    assert len(grad["output"]) == 25
    np.testing.assert_allclose(grad["output"], np.ravel(np.linalg.det(a) * np.linalg.inv(a).T), rtol=1e-9)
    assert [t["name"] for t in grad["timings"]] == ["compile", "evaluate", "evaluate"]


def test_native_table():
    """The comparison table: medians of the repeats, failures shown, the ratio to the fastest
    AD tool (manual left out where its derivative is an analytic shortcut, finite always)."""
    from bench.gradbench import native
    run = lambda ms, **kw: {"ms": ms, "failed": kw.get("failed", []), "invalid": kw.get("invalid", [])}
    res = {"ode": {"jitad": [run(3.0), run(2.0), run(9.0)], "manual": [run(1.0)] * 3, "codipack": [run(4.0)] * 3,
                   "jax": [run(1.0, invalid=["mismatch"])], "finite": []},
           "ht": {"jitad": [run(6.0)], "manual": [run(2.0)], "codipack": [run(12.0)], "jax": [], "finite": [run(0.5)]}}
    md = native.table(["ode", "ht"], ["jitad", "manual", "codipack", "jax", "finite"], res,
                      {"ode": [1.0, 2.0], "ht": [3.0]}, {"ode": ["-n", "10"]})
    ode, ht = md.splitlines()[2:]
    assert "| ode -n 10 | 3.0 (2.0–9.0) | 1.0 (1.0–1.0) |" in ode and "INVALID: mismatch" in ode
    assert "**0.75×** codipack [0.50–2.25]" in ode and "has none" in ode
    assert "**3.00×** manual (0.50× codipack)" in ht and "| 3–3 |" in ht


def test_native_per_message_table():
    """The table per evaluate message: each tool's median over its valid sessions, jitad
    over the fastest other AD tool (manual's analytic ode left out) and over JAX, the
    misses in bold."""
    from bench.gradbench import native
    run = lambda *ms, **kw: {"ms": sum(ms), "per_message": [[f"f n={i}", m] for i, m in enumerate(ms)],
                             "failed": kw.get("failed", []), "invalid": []}
    res = {"lse": {"jitad": [run(1.0, 8.0), run(3.0, 6.0)], "manual": [run(1.0, 4.0)] * 2, "codipack": [],
                   "jax": [run(4.0, 6.0), run(9.0, 9.0, failed=["x"])]},
           "ode": {"jitad": [run(2.0)], "manual": [run(0.5)], "codipack": [run(1.0)], "jax": []}}
    md = native.per_message_table(["lse", "ode"], ["jitad", "manual", "codipack", "jax", "finite"], res)
    first, second, ode = md.splitlines()[2:]
    assert first == "| lse | f n=0 | 2.000 | 1.000 | — | 4.000 | manual | **2.00** | 0.50 |"
    assert second == "| lse | f n=1 | 7.000 | 4.000 | — | 6.000 | manual | **1.75** | **1.17** |"
    assert ode == "| ode | f n=0 | 2.000 | 0.500 | 1.000 | — | codipack | **2.00** | — |"


def test_per_input_table_checks_and_times_each_input(monkeypatch):
    """`bench.gradbench.per_input`: GradBench's kmeans inputs in its order (centroids the
    last k points), and one input's row: jitad's tool against JAX (checked equal first),
    each timed over a steady run of calls."""
    pytest.importorskip("jax")
    from bench.gradbench import per_input
    monkeypatch.setattr(per_input, "MANY_SECONDS", 0.0)
    label, inp = next(per_input.kmeans_inputs(1000))
    assert label == "k=10,n=1000,d=8" and inp["centroids"] == inp["points"][-10:]
    assert len(list(per_input.kmeans_inputs(1000))) == 6   # k = 10, 100, 1000 at n = 1000, d = 8 and 16
    points = np.random.default_rng(0).random((20, 2))
    rows = per_input.measure("kmeans", "k=3,n=20,d=2", {"points": points.tolist(), "centroids": points[-3:].tolist()}, 2)
    assert [(r[0], r[1]) for r in rows] == [("k=3,n=20,d=2", "cost"), ("k=3,n=20,d=2", "dir")]
    for _, _, times in rows:
        assert {"jitad", "jax"} <= set(times) and all(len(v) == 2 and v[0][0] > 0 for v in times.values())
    calls = []
    ms, cpu_ms, last = per_input._steady(lambda: calls.append(1) or len(calls))
    assert len(calls) == per_input.MANY + 1 and last == len(calls) and ms >= 0 and cpu_ms >= 0
    text = per_input.table(rows)
    assert text.count("\n") == 3 and "jitad / jax" in text


def test_per_input_recorded_inputs_and_native_table(tmp_path):
    """`per_input --recorded`: the distinct inputs of a recorded harness session, filtered
    by description; the table names the fastest native tool by CPU time and flags jitad
    over 1.5× it or over JAX."""
    from bench.gradbench import per_input
    path = tmp_path / "ode.jsonl"
    messages = [{"id": i, "kind": "evaluate", "module": "ode", "function": f, "description": d, "input": {"x": [i]}}
                for i, (f, d) in enumerate([("primal", "n=10,s=1"), ("gradient", "n=10,s=1"), ("primal", "n=20,s=1")])]
    path.write_text("".join(json.dumps(m) + "\n" for m in messages))
    assert list(per_input.recorded_inputs(str(path), "")) == [("n=10,s=1", {"x": [0]}), ("n=20,s=1", {"x": [2]})]
    assert list(per_input.recorded_inputs(str(path), "n=20")) == [("n=20,s=1", {"x": [2]})]
    rows = [("n=10", "primal", {"jitad": [(1, 3.0), (1, 2.0)], "manual": [(1, 2.0), (1, 2.0)],
                                "codipack": [(1, 1.0), (1, 1.0)], "jax": [(1, 4.0), (1, 4.0)]}),
            ("n=20", "primal", {"jitad": [(1, 1.0)], "manual": [(1, 2.0)]})]
    first, second = per_input.table(rows).splitlines()[2:]
    assert first == "| n=10 | primal | 2.500 | 4.000 | 2.000 | 1.000 | codipack | **2.50 (2.00–3.00)** | 0.62 (0.50–0.75) |"
    assert second == "| n=20 | primal | 1.000 | — | 2.000 | — | manual | 0.50 | — |"
    with pytest.raises(AssertionError):   # an output that differs from the reference's
        per_input._check({"a": [1.0, 2.0]}, {"a": [1.0, 2.1]}, "x")
