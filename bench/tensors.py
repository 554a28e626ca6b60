"""The tensor microbenchmarks of BENCHMARKS.md: `python -m bench.tensors [--quick]`.

dot, sum_mat_vec and mlp against hand-written numba gradients and JAX; a large
elementwise gradient against the memory-bandwidth time of a NumPy copy of its input; and
the cost of a Hessian-vector product relative to a gradient (mlp, a small TreeLSTM).
Every comparator's value and gradient must equal jitad's before anything is timed.
"""
import argparse
import os
import sys

import numpy as np

from . import harness

HERE = os.path.dirname(os.path.abspath(__file__))


def _mlp(N, W1, b1, W2, b2, x):
    h = N.relu(W1 @ x + b1) if N.__name__ != "jax.numpy" else N.maximum(W1 @ x + b1, 0.0)
    z = W2 @ h + b2
    e = N.exp(z - N.max(z))
    return N.sum(e / N.sum(e) * np.arange(50.0))


H, D, C, V = 16, 16, 5, 30


def _treelstm_data(rng, nodes):
    """A random binary tree with word and label fields, and TreeLSTM parameters."""
    import jitad
    tree = jitad.Tree.random(nodes, seed=0, word=rng.integers(0, V, nodes), label=rng.integers(0, C, nodes))
    params = {"E": rng.standard_normal((V, D)) * 0.5, "W": rng.standard_normal((5 * H, D + 2 * H)) * 0.2,
              "b": np.zeros(5 * H), "U": rng.standard_normal((C, H)) * 0.3}
    return tree, params


def _treelstm_loss(p, tree):
    """A binary TreeLSTM with a cross-entropy loss at every node, summed."""
    import jitad

    def combine(node, left, right):
        (hl, cl, ll), (hr, cr, lr) = left, right
        z = p["W"] @ jitad.concatenate([p["E"][node.word], hl, hr]) + p["b"]
        i, fl, fr, o, u = (z[k * H:(k + 1) * H] for k in range(5))
        c = jitad.sigmoid(i) * jitad.tanh(u) + jitad.sigmoid(fl) * cl + jitad.sigmoid(fr) * cr
        h = jitad.sigmoid(o) * jitad.tanh(c)
        logits = p["U"] @ h
        return h, c, ll + lr + jitad.logsumexp(logits, 0) - jitad.sum(logits * jitad.one_hot(node.label, C))
    return jitad.TREE(tree, (np.zeros(H), np.zeros(H), 0.0), combine)[2]


def _numba_cases(numba):
    @numba.njit(cache=False)
    def dot(a, b):
        return (a * b).sum(), (b.copy(), a.copy())

    @numba.njit(cache=False)
    def sum_mat_vec(A, v):
        n, m = A.shape
        s = 0.0
        for i in range(n):
            for j in range(m):
                s += A[i, j] * v[j]
        gA = np.empty_like(A)
        for i in range(n):
            gA[i, :] = v
        return s, (gA, A.sum(axis=0))

    @numba.njit(cache=False)
    def mlp(W1, b1, W2, b2, x):
        a = W1 @ x + b1
        h = np.maximum(a, 0.0)
        z = W2 @ h + b2
        e = np.exp(z - z.max())
        p = e / e.sum()
        c = np.arange(50.0)
        gz = p * (c - (p * c).sum())
        ga = (W2.T @ gz) * (a > 0)
        return (p * c).sum(), (np.outer(ga, x), ga, np.outer(gz, h), gz)
    import importlib.util
    if importlib.util.find_spec("scipy") is None:   # numba's matrix products need scipy's BLAS
        return {"dot": dot, "sum_mat_vec": sum_mat_vec}
    return {"dot": dot, "sum_mat_vec": sum_mat_vec, "mlp": mlp}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repeat (a smoke test)")
    opts = parser.parse_args(argv)
    repeats, target = (1, 0.002) if opts.quick else (7, 0.1)
    mods, versions = harness.load_comparators()
    import jitad
    rng = np.random.default_rng(0)
    n_dot, side, n_big = (100, 10, 10 ** 4) if opts.quick else (1000, 100, 10 ** 6)
    W1, b1 = rng.standard_normal((100, 50)) * 0.1, rng.standard_normal(100) * 0.1
    W2, b2 = rng.standard_normal((50, 100)) * 0.1, rng.standard_normal(50) * 0.1
    cases = {
        "dot": (lambda N, a, b: N.sum(a * b), (rng.standard_normal(n_dot), rng.standard_normal(n_dot))),
        "sum_mat_vec": (lambda N, A, v: N.sum(A @ v), (rng.standard_normal((side, side)), rng.standard_normal(side))),
        "mlp": (_mlp, (W1, b1, W2, b2, rng.standard_normal(50))),
    }
    byhand = _numba_cases(mods["numba"]) if mods["numba"] else {}
    rows, goals = [], []
    for name, (fn, args) in cases.items():
        nums = tuple(range(len(args) - (1 if name == "mlp" else 0)))
        runners = {"jitad": (jitad.value_and_grad(lambda *a, fn=fn: fn(jitad, *a), argnums=nums), args)}
        want = runners["jitad"][0](*args)
        if name in byhand:
            runners["numba"] = (byhand[name], args)
        if mods["jax"] is not None:
            jax, jnp = mods["jax"], mods["jax"].numpy
            f = jax.jit(jax.value_and_grad(lambda *a, fn=fn: fn(jnp, *a), argnums=nums))
            runners["jax"] = (lambda *a, f=f: jax.block_until_ready(f(*a)), args)
        for other, (f, a) in runners.items():
            harness.check_same(name, other, f(*a), want)
        res = harness.measure(runners, repeats, target)
        rows.append({"case": name, "results": {k: res.get(k, harness.NOT_INSTALLED if k == "jax" else "—")
                                               for k in ("jitad", "numba", "jax")}})
        if "numba" in res:
            r = res["jitad"]["median_us"] / res["numba"]["median_us"]
            goals.append(f"{'✓' if r <= 1.5 else '✗'} {name}: {r:.2f}× numba by hand (goal ≤ 1.5×)")
        if "jax" in res:
            r = res["jax"]["median_us"] / res["jitad"]["median_us"]
            goals.append(f"{'✓' if r >= 10 else '✗'} {name}: {r:.1f}× faster than JAX jit (goal ≥ 10×)")

    x = rng.standard_normal(n_big)
    bandwidth = jitad.grad(lambda x: jitad.sum(0.5 * x * x + 3.0 * x))   # reads x, writes x + 3
    np.testing.assert_allclose(bandwidth(x), x + 3.0, rtol=1e-15)
    compute = jitad.grad(lambda x: jitad.sum(jitad.tanh(x) * x))   # tanh bound, for reference
    np.testing.assert_allclose(compute(x), np.tanh(x) + x * (1 - np.tanh(x) ** 2), rtol=1e-13)
    res = harness.measure({"jitad": (bandwidth, (x,)), "tanh": (compute, (x,)), "numpy copy": (np.copy, (x,)),
                           "numpy tanh": (np.tanh, (x,))}, repeats, target)
    r = res["jitad"]["median_us"] / res["numpy copy"]["median_us"]
    rows.append({"case": f"grad sum(x²/2 + 3x), n={n_big}", "results": {"jitad": res["jitad"], "numpy copy": res["numpy copy"]}})
    rows.append({"case": f"grad sum(tanh(x)·x), n={n_big}", "results": {"jitad": res["tanh"], "numpy tanh (forward only)": res["numpy tanh"]}})
    goals.append(f"{'✓' if r <= 1.5 else '✗'} elementwise gradient n={n_big}: {r:.2f}× a NumPy copy of x "
                 "(both read 8 and write 8 bytes per element; goal ≤ 1.5×)")

    tree, tree_params = _treelstm_data(rng, nodes=10 if opts.quick else 40)
    pairs = {"mlp": (lambda p, x: _mlp(jitad, *p, x), ((W1, b1, W2, b2), cases["mlp"][1][-1]),
                     ((W1 * 0 + 1e-3, b1 * 0 + 1e-3, W2 * 0 + 1e-3, b2 * 0 + 1e-3),)),
             "TreeLSTM": (_treelstm_loss, (tree_params, tree),
                          ({k: np.full(np.shape(v), 1e-3) for k, v in tree_params.items()},))}
    for name, (f, args, v) in pairs.items():
        grad, hvp = jitad.grad(f), jitad.hvp(f)
        res = harness.measure({"grad": (grad, args), "hvp": (hvp, args + v)}, repeats, target)
        r = res["hvp"]["median_us"] / res["grad"]["median_us"]
        rows.append({"case": f"hvp vs grad ({name})", "results": {"jitad": res["hvp"], "grad": res["grad"]}})
        goals.append(f"{'✓' if r <= 4 else '✗'} hvp of {name}: {r:.2f}× a gradient (goal ≤ 4×)")

    info = harness.run_info(versions, {"repeats": repeats, "target_s": target, "quick": opts.quick})
    lines = ["# jitad tensor microbenchmarks", "", f"{info['date']} · load {info['load_average'][0]} · "
             f"median of {repeats} repeats, interleaved · µs per call from Python", "",
             "| case | jitad µs | spread | comparators (median µs) |", "|---|---|---|---|"]
    for row in rows:
        j = row["results"]["jitad"]
        others = ", ".join(f"{k} {harness.cell(v)}" for k, v in row["results"].items() if k != "jitad")
        lines.append(f"| {row['case']} | {harness.fmt_us(j['median_us'])} | {harness.fmt_us(j['min_us'])}–"
                     f"{harness.fmt_us(j['max_us'])} | {others} |")
    lines += ["", "## Goals", ""] + [f"- {g}" for g in goals]
    text = "\n".join(lines) + "\n"
    stem = os.path.join(HERE, "results", "tensors_quick" if opts.quick else "tensors")
    os.makedirs(os.path.dirname(stem), exist_ok=True)
    with open(stem + ".md", "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
