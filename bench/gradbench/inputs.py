"""GradBench's inputs, made as its evals make them (seed 31337), and turned into the
arguments every implementation here takes.

`generate(eval, size)` returns the JSON-able `input` of an evaluate message;
`prepare(eval, input)` the tuple of NumPy arguments (float64, C-contiguous) shared by
jitad and the comparators; `FUNCTIONS[eval]` the eval's (primal, derivative) names.
"""
import math
import os

import numpy as np

FUNCTIONS = {"particle": ("rr", "rf", "fr", "ff"), "saddle": ("rr", "rf", "fr", "ff"),
             "lse": ("primal", "gradient"), "llsq": ("primal", "gradient"),
             "ode": ("primal", "gradient"), "kmeans": ("cost", "dir"),
             "gmm": ("objective", "jacobian"), "lstm": ("objective", "jacobian"),
             "ba": ("objective", "jacobian"), "ht": ("objective", "jacobian"),
             "det": ("primal", "gradient")}

# sizes: the smallest first (the smoke test's), then the ones a default run times
SIZES = {"particle": [{}], "saddle": [{}],
         "lse": [{"n": 2500}, {"n": 40000}, {"n": 640000}],
         "llsq": [{"n": 16, "m": 128}, {"n": 1024, "m": 128}, {"n": 16392, "m": 128}],
         "ode": [{"n": 1000, "s": 1}, {"n": 1000, "s": 10}, {"n": 10000, "s": 100}],
         "kmeans": [{"k": 10, "n": 1000, "d": 8}, {"k": 100, "n": 1000, "d": 16}, {"k": 100, "n": 10000, "d": 16}],
         "gmm": [{"d": 2, "k": 5, "n": 1000}, {"d": 10, "k": 10, "n": 1000}, {"d": 20, "k": 25, "n": 1000}],
         "lstm": [{"l": 2, "c": 1024}, {"l": 2, "c": 4096}, {"l": 4, "c": 4096}],
         "ba": [{"file": 1}, {"file": 3}, {"file": 10}],
         "ht": [{"variant": "complicated", "file": 1}, {"variant": "complicated", "file": 5},
                {"variant": "simple", "file": 5}],
         "det": [{"ell": 5}, {"ell": 8}, {"ell": 10}]}

# GradBench's ba data files (evals/ba/data/ba{i}_n…_m…_p….txt): (n, m, p) per file, and
# the one camera, point, weight and feature every file holds (all twenty hold the same)
BA_FILES = {1: (49, 7776, 31843), 2: (21, 11315, 36455), 3: (161, 48126, 182072), 4: (372, 47423, 204472),
            5: (257, 65132, 225911), 6: (539, 65220, 277273), 7: (93, 61203, 287451), 8: (88, 64298, 383937),
            9: (810, 88814, 393775), 10: (1197, 126327, 563734)}
BA_CAM = [-0.758453, -1.109613, -0.845551, 34.556073, 39.676747, 53.881673, 419.194514, 5.864426, -8.518870,
          0.087812, 0.002739]
BA_X, BA_W, BA_FEAT = [7.203245, 0.001144, 3.023326], 0.417022, [271.760969, 834.209256]

DET_ELLS = (5, 6, 7, 8, 9, 10, 11)   # det's default sizes, drawn in this order from one seed

EXPECTED = {"particle": 0.2071918746486116, "saddle": [8.246324826140356e-06] * 4}


def describe(size):
    if "variant" in size:
        return f"{size['variant']} small hand{size['file']}: c=" + str(HT_FILES[size["file"]])
    if "file" in size:
        return f"ba{size['file']}:n,m,p=" + ",".join(map(str, BA_FILES[size["file"]]))
    return ",".join(f"{k}={v}" for k, v in size.items()) or "—"


def synthetic_text(count, seed=17):
    """A deterministic stand-in for GradBench's LSTM text file (not reachable here):
    lowercase words and spaces from a fixed random bigram chain, 7 bits a character."""
    rng = np.random.default_rng(seed)
    alphabet = np.array(list("abcdefghijklmnopqrstuvwxyz "))
    follow = rng.dirichlet(np.full(27, 0.3), size=27)
    out, cur = [], 26
    for _ in range(count):
        cur = rng.choice(27, p=follow[cur])
        out.append(alphabet[cur])
    return "".join(out)


def text_bits(text):
    bits = math.ceil(math.log2(max(ord(ch) for ch in text)))
    return np.array([[int(b) for b in format(ord(ch), f"0{bits}b")] for ch in text], dtype=np.float64)


def generate(name, size):
    if name == "particle":
        return {"w": 0.0}
    if name == "saddle":
        return {"start": [1.0, 1.0]}
    np.random.seed(31337)
    if name == "lse":
        return {"x": np.random.rand(size["n"]).tolist()}
    if name == "llsq":
        return {"x": np.random.rand(size["m"]).tolist(), "n": size["n"]}
    if name == "ode":
        return {"x": np.random.rand(size["n"]).tolist(), "s": size["s"]}
    if name == "kmeans":
        points = np.random.rand(size["n"], size["d"])
        return {"points": points.tolist(), "centroids": points[-size["k"]:].tolist()}
    if name == "gmm":
        d, k, n = size["d"], size["k"], size["n"]
        rng = np.random.default_rng(seed=31337)
        return {"d": d, "k": k, "n": n, "x": [list(rng.normal(size=d)) for _ in range(n)], "m": 0,
                "gamma": 1.0, "alpha": list(rng.normal(size=k)), "mu": [list(rng.uniform(size=d)) for _ in range(k)],
                "q": [list(rng.normal(size=d)) for _ in range(k)],
                "l": [list(rng.normal(size=d * (d - 1) // 2)) for _ in range(k)]}
    if name == "lstm":
        layers, chars = size["l"], size["c"]
        seq = text_bits(synthetic_text(chars))
        b = seq.shape[1]
        state = np.random.random((2 * layers, b))
        main = np.random.random((2 * layers, 4 * b))
        extra = np.random.random((3, b))
        return {"main_params": main.tolist(), "extra_params": extra.tolist(), "state": state.tolist(),
                "sequence": seq.tolist()}
    if name == "ht":
        return ht_input(size["variant"], size["file"])
    if name == "ba":
        n, m, p = BA_FILES[size["file"]]
        return {"n": n, "m": m, "p": p, "cam": BA_CAM, "x": BA_X, "w": BA_W, "feat": BA_FEAT}
    if name == "det":    # one seed, then a matrix per size in turn: the sizes before draw first
        ell = size["ell"]
        for before in DET_ELLS[:DET_ELLS.index(ell)] if ell in DET_ELLS else ():
            np.random.rand(before * before)
        return {"A": np.random.rand(ell * ell).tolist(), "ell": ell}
    raise KeyError(name)


def _a(v):
    return np.ascontiguousarray(np.asarray(v, dtype=np.float64))


def llsq_grid(n):
    t = -1.0 + np.arange(n) * 2.0 / (n - 1.0)
    return t, np.sign(t)


def prepare(name, inp):
    """The arguments of every implementation, from an evaluate message's input."""
    if name == "particle":
        return (float(inp["w"]),)
    if name == "saddle":
        return tuple(float(v) for v in inp["start"])
    if name == "lse":
        return (_a(inp["x"]),)
    if name == "llsq":
        return (_a(inp["x"]),) + llsq_grid(int(inp["n"]))
    if name == "ode":
        return _a(inp["x"]), int(inp["s"])
    if name == "kmeans":
        return _a(inp["points"]), _a(inp["centroids"])
    if name == "gmm":
        d, k = int(inp["d"]), int(inp["k"])
        l = _a(inp["l"]).reshape(k, d * (d - 1) // 2)
        return (_a(inp["alpha"]), _a(inp["mu"]).reshape(k, d), _a(inp["q"]).reshape(k, d), l,
                _a(inp["x"]).reshape(-1, d), int(inp["m"]), float(inp["gamma"]))
    if name == "lstm":
        return _a(inp["main_params"]), _a(inp["extra_params"]), _a(inp["state"]), _a(inp["sequence"])
    if name == "ht":
        model = inp["data"]["model"]
        corr = np.asarray(inp["data"]["correspondences"], dtype=np.int64)
        us = _a(inp["us"]).reshape(-1, 2)
        tri = np.asarray(model["triangles"], dtype=np.int64)[corr] if len(us) else np.zeros((0, 3), np.int64)
        return (_a(inp["theta"]), us, _a(model["base_relatives"]), _a(model["inverse_base_absolutes"]),
                _a(model["base_positions"]), _a(model["weights"]), _a(inp["data"]["points"]), corr,
                np.ascontiguousarray(tri), tuple(int(v) for v in model["parents"]))
    if name == "det":
        ell = int(inp["ell"])
        return (_a(inp["A"]).reshape(ell, ell),)
    if name == "ba":
        n, m, p = int(inp["n"]), int(inp["m"]), int(inp["p"])
        obs = np.ascontiguousarray(np.stack([np.arange(p) % n, np.arange(p) % m], axis=1).astype(np.int64))
        return (np.tile(_a(inp["cam"]), (n, 1)), np.tile(_a(inp["x"]), (m, 1)), np.full(p, float(inp["w"])),
                np.tile(_a(inp["feat"]), (p, 1)), obs)
    raise KeyError(name)


def ba_sparsity(n, m, obs):
    """GradBench's sparse ba Jacobian's structure (CSR: `rows` p·3 + 1 offsets, `cols` one
    column a value): observation i's rows 2i, 2i+1 hold camera, point, weight columns
    (15 each); row 2p + i holds weight i. The same for every implementation, computed
    once from the observations (it holds no derivative)."""
    p = obs.shape[0]
    rows = np.concatenate([np.arange(2 * p + 1) * 15, 30 * p + 1 + np.arange(p)])
    cam = NCAM * obs[:, :1] + np.arange(NCAM)
    pt = NCAM * n + 3 * obs[:, 1:] + np.arange(3)
    wcol = (NCAM * n + 3 * m + np.arange(p))[:, None]
    one_row = np.concatenate([cam, pt, wcol], axis=1)                 # (p, 15)
    cols = np.concatenate([np.repeat(one_row[:, None, :], 2, axis=1).reshape(-1), wcol[:, 0]])
    return rows, cols


NCAM = 11


# -- ht: GradBench's hand model and data files (ADBench's, MIT licence), the small model ------

HT_DIR = os.path.join(os.path.dirname(__file__), "data", "ht")
HT_FILES = {1: 100, 5: 800}   # hand{i}_t26_c{count}.txt: the ones kept in data/ht


def ht_model():
    """GradBench's HTModel from model/{bones,vertices,triangles}.txt (':'-separated): each
    bone's name, parent and 4×4 relative and inverse absolute transforms (row-major);
    each vertex's position and bone weights."""
    rows = [line.strip().split(":") for line in open(os.path.join(HT_DIR, "bones.txt")) if line.strip()]
    names, bones = [r[0] for r in rows], len(rows)
    numbers = np.array([[float(v) for v in r[2:34]] for r in rows])
    positions, weights = [], []
    for line in open(os.path.join(HT_DIR, "vertices.txt")):
        atoms = line.strip().split(":")
        if len(atoms) < 9:
            continue
        positions.append([float(v) for v in atoms[:3]] + [1.0])
        w = [0.0] * bones
        for k in range(int(atoms[8])):
            w[int(atoms[9 + 2 * k])] = float(atoms[10 + 2 * k])
        weights.append(w)
    triangles = [[int(v) for v in line.strip().split(":")]
                 for line in open(os.path.join(HT_DIR, "triangles.txt")) if line.strip()]
    return {"bone_count": bones, "bone_names": names, "parents": [int(r[1]) for r in rows],
            "base_relatives": numbers[:, :16].reshape(bones, 4, 4).tolist(),
            "inverse_base_absolutes": numbers[:, 16:].reshape(bones, 4, 4).tolist(),
            "base_positions": positions, "weights": weights, "triangles": triangles, "is_mirrored": False}


def ht_input(variant, index):
    """GradBench's HTInput for {variant}_small/hand{index}_t26_c….txt: correspondences and
    points, the barycentric `us` (complicated only; empty for simple), then theta."""
    path = os.path.join(HT_DIR, f"{variant}_small_hand{index}_t26_c{HT_FILES[index]}.txt")
    lines = [line.split() for line in open(path) if line.strip()]
    count, ntheta = int(lines[0][0]), int(lines[0][1])
    pts = lines[1:1 + count]
    rest = lines[1 + count:]
    us = [[float(v) for v in r] for r in rest[:count]] if variant == "complicated" else []
    theta = [float(r[0]) for r in rest[len(us):len(us) + ntheta]]
    return {"theta": theta, "us": us, "data": {"model": ht_model(), "correspondences": [int(r[0]) for r in pts],
                                               "points": [[float(v) for v in r[1:4]] for r in pts]}}
