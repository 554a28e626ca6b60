"""What a call costs with pytrees: `python -m bench.calls [--quick]`.

Five 4×4 float64 arrays passed as a tuple, dict, namedtuple or list, and returned as
one (each leaf doubled), through `jitad.jit` and through `jax.jit` (waited for with
`block_until_ready`), plus a gradient step over the same parameters (`jitad.jit_grad`
against `jax.jit(jax.value_and_grad(...))`). Every case of one table is timed in the
same process, repeats interleaved round-robin; medians and min–max of the repeats, in
µs per call, both as wall-clock time and as the process's CPU time (the second is the
steadier one on a shared machine). Ratios: against the same call with tuples.
Writes bench/results/calls.md (calls_quick.md with --quick).
"""
import argparse
import collections
import statistics
import time

import numpy as np

from . import harness

Params = collections.namedtuple("Params", "a b c d e")
KEYS = Params._fields
KINDS = {"tuple": tuple, "dict": lambda xs: dict(zip(KEYS, xs)), "namedtuple": lambda xs: Params(*xs),
         "list": list}


def _leaves(p):
    return list(p.values()) if isinstance(p, dict) else list(p)


def _loss(N, p, x):
    a, b, c, d, e = _leaves(p)
    return N.sum((a * x + b - c * d + e) ** 2)


def cases(jitad, jax):
    """`{(what, kind): {"jitad": (fn, args), "jax": (fn, args)}}`."""
    r = np.random.default_rng(0)
    leaves = [r.standard_normal((4, 4)) for _ in KEYS]
    x = r.standard_normal((4, 4))
    out = {}
    for kind, make in KINDS.items():
        p = make(leaves)
        calls = {
            "argument": lambda p: tuple(2 * v for v in _leaves(p)),
            "result": lambda *xs, make=make: make([2 * v for v in xs]),
            "both": lambda p, make=make: make([2 * v for v in _leaves(p)]),
        }
        for what, fn in calls.items():
            args = tuple(leaves) if what == "result" else (p,)
            row = {"jitad": (jitad.jit(fn), args)}
            if jax is not None:
                jf = jax.jit(fn)
                jargs = jax.tree_util.tree_map(jax.numpy.asarray, args)
                row["jax"] = (lambda *a, jf=jf: jax.block_until_ready(jf(*a)), jargs)
            out[(what, kind)] = row
        row = {"jitad": (jitad.jit_grad(lambda p, x: _loss(jitad, p, x)), (p, x))}
        if jax is not None:
            jg = jax.jit(jax.value_and_grad(lambda p, x: _loss(jax.numpy, p, x)))
            jargs = jax.tree_util.tree_map(jax.numpy.asarray, (p, x))
            row["jax"] = (lambda *a, jg=jg: jax.block_until_ready(jg(*a)), jargs)
        out[("jit_grad", kind)] = row
    return out


def measure(runners, repeats, number):
    """`{name: {"wall": [µs], "cpu": [µs]}}`: per-call times of `number` calls, repeats
    interleaved round-robin."""
    samples = {name: {"wall": [], "cpu": []} for name in runners}
    for fn, args in runners.values():   # warm-up (compiles)
        for _ in range(3):
            fn(*args)
    for _ in range(repeats):
        for name, (fn, args) in runners.items():
            loop = range(number)
            w, c = time.perf_counter(), time.process_time()
            for _ in loop:
                fn(*args)
            c, w = time.process_time() - c, time.perf_counter() - w
            samples[name]["wall"].append(w / number * 1e6)
            samples[name]["cpu"].append(c / number * 1e6)
    return samples


def _cell(xs):
    m = statistics.median(xs)
    return f"{m:.2f} ({min(xs):.2f}–{max(xs):.2f})"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.calls", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one short repeat (a smoke test)")
    args = ap.parse_args(argv)
    repeats, number = (1, 20) if args.quick else (9, 3000)
    mods, versions = harness.load_comparators()
    jitad, jax = mods["jitad"], mods["jax"]
    table = cases(jitad, jax)
    runners = {(key, comp): r for key, row in table.items() for comp, r in row.items()}
    for (key, comp), (fn, a) in runners.items():   # every comparator agrees with jitad
        if comp != "jitad":
            harness.check_same(str(key), comp, fn(*a), table[key]["jitad"][0](*table[key]["jitad"][1]))
    samples = measure(runners, repeats, number)
    info = harness.run_info(versions, {"repeats": repeats, "calls_per_repeat": number, "quick": args.quick})
    lines = ["# Call cost with pytrees", "",
             f"{info['date']} · load {info['load_average'][0]} · median (min–max) of {repeats} interleaved "
             f"repeats of {number} calls · µs per call; cpu = the process's CPU time, wall = wall clock", "",
             "| call | container | jitad cpu µs | jitad wall µs | jitad / tuple (cpu) | JAX cpu µs | JAX wall µs "
             "| JAX / jitad (cpu) |", "|---|---|---|---|---|---|---|---|"]
    what_text = {"argument": "passed in, tuple out", "result": "tuple in, returned", "both": "in and out",
                 "jit_grad": "jit_grad over it"}
    for key in table:
        what, kind = key
        j = samples[(key, "jitad")]
        base = samples[((what, "tuple"), "jitad")]
        rel = statistics.median(a / b for a, b in zip(j["cpu"], base["cpu"]))
        x = samples.get((key, "jax"))
        vs = statistics.median(a / b for a, b in zip(x["cpu"], j["cpu"])) if x else None
        lines.append(f"| {what_text[what]} | {kind} | {_cell(j['cpu'])} | {_cell(j['wall'])} | {rel:.2f} | "
                     + (f"{_cell(x['cpu'])} | {_cell(x['wall'])} | {vs:.0f} |" if x else "— | — | — |"))
    text = "\n".join(lines) + "\n"
    harness.save_markdown("calls_quick" if args.quick else "calls", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
