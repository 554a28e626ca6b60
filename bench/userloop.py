"""The char-RNN training loop in the forms users write it: `python -m bench.userloop [--quick]`.

The char-RNN of bench/models.py (V=26, H=50, T=20, B=20, float64, Adagrad lr 0.1, clip 5)
as (u) a PyTorch user writes it with jitad (a Python loop over time in the loss,
`jit_grad` over a dict of parameters, a jitted Adagrad update over dicts, `float(loss)`
each step), (o) one jitted step (`value_and_grad` of the FOR loop over time, Adagrad
inside), (a) bench.models' step loop, against JAX's best program (its jitted `lax.scan`
step) and PyTorch eager, all in one process: the loss check of bench.models first, then
repeats interleaved round-robin. Reports per-iteration times (wall clock and the
process's CPU time, the steadier on a shared machine) and, per repeat, the ratios
comparator / jitad form; medians and min–max. Writes bench/results/userloop.md.
"""
import argparse
import statistics
import time

from . import harness, models

FORMS = ("jitad_user", "jitad_onestep", "jitad_step")
OTHERS = ("jax_step", "torch")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.userloop", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a few iterations, one repeat (a smoke test)")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    iters, repeats, check = (3, 1, 3) if args.quick else (args.iters, args.repeats, 100)
    mods, versions = harness.load_comparators()
    size = dict(models.FULL, rnn_iters=iters, check=check, repeats=repeats, jax_loop=False)
    spec = models.char_model("rnn", mods, size)
    runners = {k: r for k, r in spec["runners"].items() if k in FORMS + OTHERS}
    for r in runners.values():
        r.warm()
    checked = {k: r.run(check, True) for k, r in runners.items()}
    check_lines = models.check_losses("rnn", runners, checked)
    wall = {k: [] for k in runners}
    cpu = {k: [] for k in runners}
    for _ in range(repeats):
        for k, r in runners.items():
            w, c = time.perf_counter(), time.process_time()
            r.run(iters, False)
            cpu[k].append((time.process_time() - c) / iters * 1e6)
            wall[k].append((time.perf_counter() - w) / iters * 1e6)
    info = harness.run_info(versions, {"iters": iters, "repeats": repeats})
    cell = lambda xs: f"{statistics.median(xs):,.0f} ({min(xs):,.0f}–{max(xs):,.0f})"
    ratio = lambda a, b: [x / y for x, y in zip(a, b)]
    rcell = lambda xs: f"{statistics.median(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})"
    lines = ["# The char-RNN loop as users write it", "",
             f"{info['date']} · load {info['load_average'][0]} at start · {iters} iterations per repeat, "
             f"{repeats} repeats interleaved · µs per iteration, median (min–max)", "",
             "| program | cpu µs / iter | wall µs / iter | compile s |", "|---|---|---|---|"]
    for k, r in runners.items():
        c = r.compile_s
        lines.append(f"| {r.label} | {cell(cpu[k])} | {cell(wall[k])} | {'—' if c is None else f'{c:.2f}'} |")
    lines += ["", "Ratios, comparator time / jitad form time, per repeat (> 1: jitad faster); "
              "CPU time (wall clock in brackets):", "",
              "| jitad form | " + " | ".join(runners[o].label for o in OTHERS if o in runners) + " |",
              "|---|" + "---|" * sum(o in runners for o in OTHERS)]
    for f in FORMS:
        if f in runners:
            lines.append(f"| {runners[f].label} | " + " | ".join(
                f"{rcell(ratio(cpu[o], cpu[f]))} [{statistics.median(ratio(wall[o], wall[f])):.2f}]"
                for o in OTHERS if o in runners) + " |")
    if "jitad_user" in runners and "jitad_onestep" in runners:
        lines += ["", f"User-style / one-step: {rcell(ratio(cpu['jitad_user'], cpu['jitad_onestep']))} "
                  f"(CPU), {rcell(ratio(wall['jitad_user'], wall['jitad_onestep']))} (wall)."]
    lines += ["", "Loss check (lr 0.05, see bench/models.py):", ""] + [f"- {c}" for c in check_lines]
    harness.save_markdown("userloop_quick" if args.quick else "userloop", "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
