"""The tensor microbenchmarks of BENCHMARKS.md: `python -m bench.tensors [--quick]`.

dot, sum_mat_vec and mlp against hand-written numba gradients and JAX; a large
elementwise gradient against the memory-bandwidth time of a NumPy copy of its input; and
the cost of a Hessian-vector product relative to a gradient (mlp, a small TreeLSTM).
The tensor speed goals (`--speed` runs only these): einsum and batched matmul at
attention shapes against NumPy forward and JAX for the gradient, cumsum and var of 10^6
elements and sort of 1000 rows of 1000 against NumPy, and a float32 transformer block's gradient against JAX jit and
PyTorch eager. Every comparator's value and gradient must equal jitad's before anything
is timed.
"""
import argparse
import sys

import numpy as np

from . import harness



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


def _block(N, p, x, heads):
    """A pre-norm transformer block on x (batch, seq, d): layer norm, causal-free softmax
    attention with `heads` heads, a gelu MLP, both residual; the loss is a sum of squares."""
    def norm(v, g, b):
        mu = N.mean(v, axis=-1, keepdims=True)
        var = N.mean((v - mu) ** 2, axis=-1, keepdims=True)
        return (v - mu) / N.sqrt(var + 1e-5) * g + b

    def gelu(v):   # the tanh approximation, as jax.nn.gelu and torch's approximate="tanh"
        return 0.5 * v * (1.0 + N.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3)))
    B, T, D = x.shape
    h = norm(x, p["g1"], p["b1"])
    q, k, v = (N.transpose(N.reshape(h @ p[w], (B, T, heads, D // heads)), (0, 2, 1, 3)) for w in ("Wq", "Wk", "Wv"))
    s = q @ N.swapaxes(k, -1, -2) * (1.0 / np.sqrt(D // heads))
    e = N.exp(s - N.max(s, axis=-1, keepdims=True))
    a = e / N.sum(e, axis=-1, keepdims=True) @ v
    x = x + N.reshape(N.transpose(a, (0, 2, 1, 3)), (B, T, D)) @ p["Wo"]
    y = x + gelu(norm(x, p["g2"], p["b2"]) @ p["W1"] + p["c1"]) @ p["W2"] + p["c2"]
    return N.sum(y * y)


def _block_params(rng, d, dtype):
    shapes = {"g1": (d,), "b1": (d,), "Wq": (d, d), "Wk": (d, d), "Wv": (d, d), "Wo": (d, d),
              "g2": (d,), "b2": (d,), "W1": (d, 4 * d), "c1": (4 * d,), "W2": (4 * d, d), "c2": (d,)}
    return {k: (rng.standard_normal(s) * (1.0 if len(s) == 1 and k[0] == "g" else 0.1) + (k[0] == "g")).astype(dtype)
            for k, s in shapes.items()}


def _speed(mods, rng, repeats, target, quick, rows, goals):
    """The tensor speed cases (see the module docstring)."""
    import jitad
    jax, torch = mods["jax"], mods["torch"]
    B, Hh = (2, 2) if quick else (8, 4)
    for name, sub, shapes in [
            ("einsum bhqd,bhkd->bhqk T=64", "bhqd,bhkd->bhqk", [(B, Hh, 64, 64), (B, Hh, 64, 64)]),
            ("einsum bhqd,bhkd->bhqk T=128", "bhqd,bhkd->bhqk", [(B, Hh, 128, 64), (B, Hh, 128, 64)]),
            ("matmul (b,h,T,T)@(b,h,T,64) T=64", None, [(B, Hh, 64, 64), (B, Hh, 64, 64)]),
            ("matmul (b,h,T,T)@(b,h,T,64) T=128", None, [(B, Hh, 128, 128), (B, Hh, 128, 64)])]:
        args = tuple(rng.standard_normal(s) for s in shapes)
        fwd = (lambda N, a, b, sub=sub: N.einsum(sub, a, b)) if sub else (lambda N, a, b: N.matmul(a, b))
        jf = jitad.jit(lambda a, b, fwd=fwd: fwd(jitad, a, b))
        np_kw = {"optimize": True} if sub else {}
        npf = (lambda a, b, sub=sub: np.einsum(sub, a, b, optimize=True)) if sub else np.matmul
        harness.check_same(name, "numpy", npf(*args), jf(*args))
        res = harness.measure({"jitad": (jf, args), "numpy": (npf, args)}, repeats, target)
        r = res["jitad"]["median_us"] / res["numpy"]["median_us"]
        rows.append({"case": f"{name} forward", "results": {"jitad": res["jitad"], "numpy": res["numpy"]}})
        goals.append(f"{'✓' if r <= 1.5 else '✗'} {name} forward: {r:.2f}× NumPy{' optimize=True' * bool(np_kw)} "
                     "(goal ≤ 1.5×)")
        w = rng.standard_normal(np.shape(npf(*args)))
        loss = lambda N, a, b, fwd=fwd: N.sum(fwd(N, a, b) * w)
        jg = jitad.value_and_grad(lambda a, b: loss(jitad, a, b), argnums=(0, 1))
        runners = {"jitad": (jg, args)}
        if jax is not None:
            f = jax.jit(jax.value_and_grad(lambda a, b: loss(jax.numpy, a, b), argnums=(0, 1)))
            runners["jax"] = (lambda *a, f=f: jax.block_until_ready(f(*a)), args)
        want = jg(*args)
        for other, (f, a) in runners.items():
            harness.check_same(name, other, f(*a), want)
        res = harness.measure(runners, repeats, target)
        rows.append({"case": f"{name} gradient", "results": {"jitad": res["jitad"],
                                                              "jax": res.get("jax", harness.NOT_INSTALLED)}})
        if "jax" in res:
            r = res["jitad"]["median_us"] / res["jax"]["median_us"]
            goals.append(f"{'✓' if r <= 1.5 else '✗'} {name} gradient: {r:.2f}× JAX jit (goal ≤ 1.5×)")

    n = 10 ** 4 if quick else 10 ** 6
    x = rng.standard_normal(n)
    rows_of_1000 = rng.standard_normal((10 if quick else 1000, 1000))
    for name, jfn, npfn, x in [("cumsum", jitad.cumsum, np.cumsum, x), ("var", jitad.var, np.var, x),   # noqa: B020
                               ("sort rows of 1000", jitad.sort, np.sort, rows_of_1000)]:
        jf = jitad.jit(jfn)
        harness.check_same(name, "numpy", npfn(x), jf(x))
        res = harness.measure({"jitad": (jf, (x,)), "numpy": (npfn, (x,))}, repeats, target)
        r = res["jitad"]["median_us"] / res["numpy"]["median_us"]
        rows.append({"case": f"{name}, n={x.size}", "results": {"jitad": res["jitad"], "numpy": res["numpy"]}})
        goals.append(f"{'✓' if r <= 1.5 else '✗'} {name} n={x.size}: {r:.2f}× NumPy (goal ≤ 1.5×)")

    d, T = (16, 8) if quick else (64, 64)
    for batch in (1, 8):
        p = _block_params(np.random.default_rng(batch), d, np.float32)
        x = np.random.default_rng(10 + batch).standard_normal((batch, T, d)).astype(np.float32)
        case = f"transformer block f32 B={batch} T={T} d={d} grad"
        jg = jitad.value_and_grad(lambda p, x: _block(jitad, p, x, 4))
        want = jg(p, x)
        runners = {"jitad": (jg, (p, x))}
        if jax is not None:
            f = jax.jit(jax.value_and_grad(lambda p, x: _block(jax.numpy, p, x, 4)))
            runners["jax"] = (lambda p, x, f=f: jax.block_until_ready(f(p, x)), (p, x))
        if torch is not None:
            tp = {k: torch.tensor(v, requires_grad=True) for k, v in p.items()}
            tx = torch.tensor(x)

            def torch_step(tp, tx):
                for v in tp.values():
                    v.grad = None
                out = _block(_TorchNumpy(torch), tp, tx, 4)
                out.backward()
                return out.item(), {k: v.grad.numpy() for k, v in tp.items()}
            runners["torch"] = (torch_step, (tp, tx))
        for other, (f, a) in runners.items():
            harness.check_same(case, other, f(*a), want, rtol=2e-4)
        res = harness.measure(runners, repeats, target)
        rows.append({"case": case, "results": {"jitad": res["jitad"], "jax": res.get("jax", harness.NOT_INSTALLED),
                                               "torch": res.get("torch", harness.NOT_INSTALLED)}})
        for other in ("jax", "torch"):
            if other in res:
                r = res[other]["median_us"] / res["jitad"]["median_us"]
                goals.append(f"{'✓' if r > 1 else '✗'} transformer block B={batch}: {r:.2f}× faster than "
                             f"{other} (goal > 1×)")


class _TorchNumpy:
    """The few `numpy` names `_block` uses, on torch tensors."""

    def __init__(self, torch):
        self.t = torch

    def mean(self, v, axis, keepdims):
        return v.mean(dim=axis, keepdim=keepdims)

    def max(self, v, axis, keepdims):
        return v.amax(dim=axis, keepdim=keepdims)

    def sum(self, v, axis=None, keepdims=False):
        return v.sum() if axis is None else v.sum(dim=axis, keepdim=keepdims)

    def __getattr__(self, name):
        return {"sqrt": self.t.sqrt, "tanh": self.t.tanh, "exp": self.t.exp, "reshape": self.t.reshape,
                "transpose": lambda v, perm: v.permute(perm), "swapaxes": self.t.swapaxes}[name]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repeat (a smoke test)")
    parser.add_argument("--speed", action="store_true", help="only the tensor speed cases")
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
    _speed(mods, rng, repeats, target, opts.quick, rows, goals)
    for name, (fn, args) in ({} if opts.speed else cases).items():
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

    if not opts.speed:   # the bandwidth and hvp cases
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
    harness.save_markdown("tensors_quick" if opts.quick else "tensors", "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
