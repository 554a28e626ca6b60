"""Reverse mode through long loops in bounded memory: `python -m bench.checkpoints [--quick]`.

The program: an explicit heat-equation integration, `x <- x + k h (roll(x, 1) - 2x +
roll(x, -1))`, over a state of 1,000 floats for n steps, as a `WHILE` whose trip count
the compiled code learns only at the end; the loss is `sum(x_n ** 2)`; the gradient is
taken w.r.t. the initial state and k.

- the forward loop alone (`jitad.jit`), the reference time;
- `jitad.grad` with `checkpoints=None` (every iteration kept: only at the smaller n) and
  `checkpoints=64`;
- JAX with Equinox's `checkpointed_while_loop` (`equinox.internal.while_loop(...,
  kind="checkpointed", checkpoints=64)`, online treeverse), `jit(grad)`.

Each comparator runs in a child process of its own (for its peak memory: the growth of
the child's maximum RSS from before its first call, compiling included, to the end) and
the rounds alternate the comparators; the table gives medians and min-max spreads.
A second table counts how many times the most-recomputed step runs forward under
`checkpoints=c` against the binomial bound.
"""
import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np

from . import harness

D = 1000


def _heat(np_, x, k, n, loop):
    def body(st):
        x, i = st
        return x + 1e-4 * k * (np_.roll(x, 1) - 2 * x + np_.roll(x, -1)), i + 1
    return np_.sum(loop(lambda st: st[1] < n, body, (x, 0))[0] ** 2)


def _child(kind, n, repeats):
    import resource
    import time
    x = np.sin(np.linspace(0.0, 3.0, D))
    if kind.startswith("jitad"):
        import jitad
        c = None if kind == "jitad grad, checkpoints=None" else 64
        loop = lambda cond, body, init: jitad.WHILE(cond, body, init, checkpoints=c)
        f = lambda x, k: _heat(jitad, x, k, n, loop)
        fn = jitad.jit(f) if kind == "jitad forward" else jitad.grad(f, argnums=(0, 1))
        call = lambda: fn(x, 1.0)
    else:
        import jax
        jax.config.update("jax_enable_x64", True)
        import equinox.internal as eqxi
        import jax.numpy as jnp
        loop = lambda cond, body, init: eqxi.while_loop(cond, body, init, kind="checkpointed", checkpoints=64)
        fn = jax.jit(jax.grad(lambda x, k: _heat(jnp, x, k, n, loop), argnums=(0, 1)))
        call = lambda: jax.block_until_ready(fn(jnp.asarray(x), 1.0))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = call()
        times.append(time.perf_counter() - start)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss
    g = out if kind == "jitad forward" else float(np.asarray(out[1]))
    print(json.dumps({"times": times, "rss_mib": grown / 1024, "check": float(np.asarray(g))}))


COMPARATORS = ["jitad forward", "jitad grad, checkpoints=None", "jitad grad, checkpoints=64",
               "JAX + Equinox checkpointed_while_loop (64)"]


def _run_child(kind, n, repeats):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", XLA_FLAGS="--xla_cpu_multi_thread_eigen=false")
    out = subprocess.run([sys.executable, "-m", "bench.checkpoints", "--child", kind, str(n), str(repeats)],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["failed"])[-1]
        return {"error": last[:120]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _recomputations(n, cs):
    """The most runs of one step's forward under `checkpoints=c` (prints counted: the
    recomputed steps are made to print again), against the bound t + 1."""
    import contextlib
    import io
    from collections import Counter

    import jitad
    from jitad.transforms import vjp as reverse
    original = reverse._ran_already
    reverse._ran_already = lambda body, rows: {id(r) for r in rows.values()}
    rows = []
    try:
        for c in cs:
            def f(x):
                def body(i, s):
                    jitad.debug.print("{}", i)
                    return s * 0.999 + 0.001
                return jitad.FOR(0, n, body, x, checkpoints=c)
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                jitad.grad(f)(1.0)
            runs = Counter(buf.getvalue().split())
            t = next(t for t in range(n + 1) if math.comb(c + t, t) >= n)
            rows.append((c, max(runs.values()), t + 1, sum(runs.values()) / n))
    finally:
        reverse._ran_already = original
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, one round (a smoke test)")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return _child(args.child[0], int(args.child[1]), int(args.child[2]))
    rounds, sizes = (1, [(300, 2), (3000, 1)]) if args.quick else (3, [(10_000, 5), (1_000_000, 1)])
    lines = ["# Long loops in bounded memory", "",
             f"Heat equation over {D} floats, `WHILE` of n steps, gradient w.r.t. the initial state and k;",
             "medians of the rounds' medians, (min-max), each comparator in its own process, rounds alternated.", ""]
    for n, repeats in sizes:
        results = {k: [] for k in COMPARATORS}
        for _ in range(rounds):
            for kind in COMPARATORS:
                if kind.endswith("None") and n > 10_000:
                    continue   # every iteration kept: 8 GB at 10^6 steps
                results[kind].append(_run_child(kind, n, repeats))
        fwd = [np.median(r["times"]) for r in results["jitad forward"] if "times" in r]
        lines += [f"## n = {n:,}", "", "| comparator | time | × forward | peak RSS growth |", "|---|---|---|---|"]
        for kind, rs in results.items():
            ok = [r for r in rs if "times" in r]
            if not rs:
                lines.append(f"| {kind} | not run at this n | | |")
                continue
            if not ok:
                lines.append(f"| {kind} | {rs[0]['error']} | | |")
                continue
            med = [np.median(r["times"]) for r in ok]
            t = np.median(med)
            lines.append(f"| {kind} | {t * 1e3:,.1f} ms ({min(med) * 1e3:,.1f}-{max(med) * 1e3:,.1f}) | "
                         f"{t / np.median(fwd):.1f} | {np.median([r['rss_mib'] for r in ok]):,.1f} MiB |")
        lines.append("")
    n = 200 if args.quick else 1000
    lines += [f"## Recomputation, n = {n}", "", "| checkpoints | most runs of a step | bound t + 1 | runs per step |",
              "|---|---|---|---|"]
    for c, most, bound, mean in _recomputations(n, [1, 4, 16, 64]):
        lines.append(f"| {c} | {most} | {bound} | {mean:.2f} |")
    text = "\n".join(lines)
    print(text)
    if not args.quick:
        harness.save_markdown("checkpoints", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
