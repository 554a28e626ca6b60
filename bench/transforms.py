"""JAX's transformations in jitad: `python -m bench.transforms [--quick]`.

Per-example gradients of the mlp of bench/tensors.py (50→100→50, batch 64):
`jitad.vmap(jitad.grad(loss), in_axes=(None, 0))` against a Python loop of jitad `grad`
calls and against JAX's `jit(vmap(grad))`, side by side in one process. Every
comparator's gradients must equal jitad's before anything is timed. Then the cost of a
call whose arguments are a dict or a namedtuple against the same call with a flat tuple,
beside JAX's dispatch of the same. Then the gradient of a scan (an RNN step on
16-vectors) over 1000 and 4000 steps, against JAX's `lax.scan`: the time per step must
stay flat (reverse mode keeps one step's values per step, not the stacked outputs).
"""
import argparse
import sys

import numpy as np

from . import harness
from .tensors import _mlp



def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="one repeat (a smoke test)")
    opts = parser.parse_args(argv)
    repeats, target = (1, 0.002) if opts.quick else (9, 0.2)
    mods, versions = harness.load_comparators()
    import jitad
    rng = np.random.default_rng(0)
    batch = 8 if opts.quick else 64
    p = (rng.standard_normal((100, 50)) * 0.1, rng.standard_normal(100) * 0.1,
         rng.standard_normal((50, 100)) * 0.1, rng.standard_normal(50) * 0.1)
    X = rng.standard_normal((batch, 50))
    loss = lambda p, x: _mlp(jitad, *p, x)   # noqa: E731
    per_example = jitad.vmap(jitad.grad(loss), in_axes=(None, 0))
    one = jitad.grad(loss)
    runners = {"jitad vmap(grad)": (per_example, (p, X)),
               "jitad loop of grad": (lambda p, X: tuple(np.stack(g) for g in zip(*[one(p, x) for x in X])), (p, X))}
    if mods["jax"] is not None:
        jax = mods["jax"]
        f = jax.jit(jax.vmap(jax.grad(lambda p, x: _mlp(jax.numpy, *p, x)), in_axes=(None, 0)))
        runners["JAX jit(vmap(grad))"] = (lambda p, X: jax.block_until_ready(f(p, X)), (p, X))
    want = per_example(p, X)
    for name, (fn, args) in runners.items():
        harness.check_same("per-example gradients", name, fn(*args), want)
    res = harness.measure(runners, repeats, target)
    info = harness.run_info(versions, {"repeats": repeats, "target_s": target, "quick": opts.quick})
    base = res["jitad vmap(grad)"]["median_us"]
    lines = ["# jitad transformations", "", f"{info['date']} · load {info['load_average'][0]} · median of "
             f"{repeats} repeats, interleaved · µs per call from Python", "",
             f"Per-example gradients of the mlp (50→100→50), batch {batch}:", "",
             "| comparator | median µs | spread | × jitad vmap(grad) |", "|---|---|---|---|"]
    for name, r in res.items():
        lines.append(f"| {name} | {harness.fmt_us(r['median_us'])} | {harness.fmt_us(r['min_us'])}–"
                     f"{harness.fmt_us(r['max_us'])} | {r['median_us'] / base:.2f} |")
    goals = []
    if "JAX jit(vmap(grad))" in res:
        r = res["JAX jit(vmap(grad))"]["median_us"] / base
        goals.append(f"{'✓' if r >= 1 else '✗'} per-example gradients: {r:.2f}× JAX's speed (goal: faster than JAX)")
    r = res["jitad loop of grad"]["median_us"] / base
    goals.append(f"{'✓' if r >= 1 else '✗'} per-example gradients: {r:.2f}× a loop of grad calls (goal: faster)")
    lines += _pytree_calls(jitad, mods, repeats, target, goals)
    lines += _scan_grads(jitad, mods, repeats, target, goals, (50, 200) if opts.quick else (1000, 4000))
    lines += ["", "## Goals", ""] + [f"- {g}" for g in goals]
    harness.save_markdown("transforms_quick" if opts.quick else "transforms", "\n".join(lines) + "\n")
    return 0


def _pytree_calls(jitad, mods, repeats, target, goals):
    """A call with five small arrays as a flat tuple, a dict and a namedtuple, in jitad
    and JAX's dispatch; returns the table's lines."""
    import collections
    P = collections.namedtuple("P", "a b c d e")
    arrays = [np.full(3, float(k)) for k in range(5)]
    d, nt = dict(zip("abcde", arrays)), P(*arrays)
    body = lambda N, a, b, c, d, e: a * b + c - d * e   # noqa: E731
    flat = jitad.jit(lambda *xs: body(jitad, *xs))
    by_key = jitad.jit(lambda p: body(jitad, *(p[k] for k in "abcde")))
    by_field = jitad.jit(lambda p: body(jitad, *p))
    runners = {"jitad flat tuple": (flat, arrays), "jitad dict": (by_key, (d,)), "jitad namedtuple": (by_field, (nt,))}
    if mods["jax"] is not None:
        jax = mods["jax"]
        jf = jax.jit(lambda *xs: body(jax.numpy, *xs))
        jd = jax.jit(lambda p: body(jax.numpy, *(p[k] for k in "abcde")))
        runners["JAX jit flat tuple"] = (lambda *xs: jax.block_until_ready(jf(*xs)), arrays)
        runners["JAX jit dict"] = (lambda p: jax.block_until_ready(jd(p)), (d,))
    want = flat(*arrays)
    for name, (fn, args) in runners.items():
        harness.check_same("pytree call", name, fn(*args), want)
    res = harness.measure(runners, repeats, target)
    base = res["jitad flat tuple"]["median_us"]
    lines = ["", "Calls with five arrays of 3 floats (`a * b + c - d * e`), as a flat tuple, a dict or a namedtuple:",
             "", "| comparator | median µs | spread | × jitad flat |", "|---|---|---|---|"]
    for name, r in res.items():
        lines.append(f"| {name} | {harness.fmt_us(r['median_us'])} | {harness.fmt_us(r['min_us'])}–"
                     f"{harness.fmt_us(r['max_us'])} | {r['median_us'] / base:.2f} |")
    r = res["jitad dict"]["median_us"] / base
    goals.append(f"{'✓' if r <= 2 else '✗'} a dict call takes {r:.2f}× the flat call (goal ≤ 2×)")
    if "JAX jit dict" in res:
        r = res["JAX jit dict"]["median_us"] / res["jitad dict"]["median_us"]
        goals.append(f"{'✓' if r >= 1 else '✗'} a dict call: {r:.1f}× faster than JAX's dispatch of the same dict")
    return lines


def _scan(N, scan, W, xs):
    def step(c, x):
        c = N.tanh(W @ c + x)
        return c, c
    c, ys = scan(step, N.zeros(W.shape[0]), xs)
    return N.sum(c) + N.sum(ys * ys)


def _scan_grads(jitad, mods, repeats, target, goals, lengths):
    """grad of `_scan` w.r.t. W and xs at each length, jitad and JAX; returns the table's lines."""
    rng = np.random.default_rng(0)
    W = rng.standard_normal((16, 16)) * 0.3
    runners = {}
    for n in lengths:
        xs = rng.standard_normal((n, 16))
        g = jitad.grad(lambda W, xs: _scan(jitad, jitad.scan, W, xs), argnums=(0, 1))
        runners[f"jitad grad, {n} steps"] = (g, (W, xs))
        if mods["jax"] is not None:
            jax = mods["jax"]
            f = jax.jit(jax.grad(lambda W, xs: _scan(jax.numpy, jax.lax.scan, W, xs), argnums=(0, 1)))
            runners[f"JAX jit(grad), {n} steps"] = (lambda W, xs, f=f: jax.block_until_ready(f(W, xs)), (W, xs))
            harness.check_same("scan gradients", f"JAX, {n} steps", runners[f"JAX jit(grad), {n} steps"][0](W, xs),
                               runners[f"jitad grad, {n} steps"][0](W, xs))
    res = harness.measure(runners, repeats, target)
    lines = ["", "Gradient of a scan (`c = tanh(W @ c + x)`, y = c, 16-vectors) w.r.t. W and xs:", "",
             "| comparator | median µs | spread | ns per step |", "|---|---|---|---|"]
    for name, r in res.items():
        n = int(name.split(", ")[1].split()[0])
        lines.append(f"| {name} | {harness.fmt_us(r['median_us'])} | {harness.fmt_us(r['min_us'])}–"
                     f"{harness.fmt_us(r['max_us'])} | {r['median_us'] / n * 1e3:.0f} |")
    per_step = [res[f"jitad grad, {n} steps"]["median_us"] / n for n in lengths]
    r = per_step[1] / per_step[0]
    goals.append(f"{'✓' if r <= 1.5 else '✗'} scan gradient: {r:.2f}× the time per step at {lengths[1]} steps "
                 f"as at {lengths[0]} (goal ≤ 1.5×: linear in the length)")
    return lines


if __name__ == "__main__":
    sys.exit(main())
