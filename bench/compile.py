"""Compile latency of the models' steps, jitad against JAX's `jit` in the same process:
`python -m bench.compile [--model rnn ...] [--repeats 3] [--quick]`.

Every repeat is a fresh Python process (a cold start for both: jitad's disk cache in a
new empty directory, JAX's persistent cache off) that builds each model of
bench/models.py and times the first call of every jitad and JAX runner: the jitad step
(`jit_grad` step + jitted update), jitad's staged loop, JAX's jitted step and whole
loop (the TreeLSTM: the padded `lax.scan` at one bucket). Both frameworks first compile a
trivial function, so process start-up (LLVM, XLA backend) is not counted. The order of
the two frameworks alternates between repeats. jitad's time is `compile_seconds` split
by stage (`compile_report()`); JAX's is its first call (trace, lowering, XLA, one step).

A second process then loads every jitad runner from the disk cache the first one wrote
(the warm-cache time, against that cold compile). Results: bench/results/compile.{md,json}.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ("rnn", "lstm", "treelstm", "cnn")
RUNNERS = ("jitad_step", "jitad_loop", "jax_step", "jax_loop", "jax_scan")
PAIRS = (("jitad_step", "jax_step"), ("jitad_loop", "jax_loop"), ("jitad_step", "jax_scan"))


def child(model, frameworks, order):
    """Time the first call of each runner of `model`; print one JSON line."""
    from . import harness, models   # noqa: F401 (imports bench first: single-threaded BLAS, XLA on the CPU)
    import jitad
    jitad.jit(lambda x: x + 1.0)(1.0)   # the LLVM engine's start
    m = {"jitad": jitad, "torch": None, "jax": None}
    if "jax" in frameworks:
        import jax
        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_enable_compilation_cache", False)
        jax.jit(lambda x: x + 1.0)(1.0)   # the XLA backend's start
        m["jax"] = jax
    size = dict(models.QUICK, jax_loop=True, tree_rec=0)
    runners = models.BUILDERS[model](m, size)["runners"]
    names = sorted((n for n in runners if n.split("_")[0] in frameworks),
                   key=lambda n: order.index(n.split("_")[0]))
    out = {}
    for name in names:
        r = runners[name]
        r.warm()
        out[name] = {"compile_s": r.compile_s, "stages": r.compile_stages(),
                     "cache": [f.compile_report().cache if hasattr(f, "compile_report") else "?"
                               for f in r.compiled]}
    print(json.dumps(out))


def _spawn(model, frameworks, order, cache_dir, jitad_dir=None):
    """Run `child` in a fresh process; with `jitad_dir`, on the jitad package found there
    (another checkout: a before/after comparison) and this bench package."""
    env = dict(os.environ, JITAD_CACHE_DIR=cache_dir)
    cwd = os.path.dirname(HERE)
    if jitad_dir:
        cwd = tempfile.mkdtemp(prefix="jitad-bench-")
        os.symlink(HERE, os.path.join(cwd, "bench"))
        env["PYTHONPATH"] = os.pathsep.join([jitad_dir, cwd])
    cmd = [sys.executable, "-m", "bench.compile", "--child", model, "--frameworks", ",".join(frameworks),
           "--order", ",".join(order)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=cwd)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(models, repeats, frameworks=("jitad", "jax"), jitad_dir=None):
    """{model: {"cold": [per repeat {runner: ...}], "warm": {runner: ...}, "cold_for_warm": ...}}."""
    results = {}
    for model in models:
        cold = []
        for rep in range(repeats):
            order = list(frameworks) if rep % 2 == 0 else list(reversed(frameworks))
            with tempfile.TemporaryDirectory(prefix="jitad-compile-") as d:
                cold.append(_spawn(model, frameworks, order, d, jitad_dir))
        with tempfile.TemporaryDirectory(prefix="jitad-compile-") as d:
            first = _spawn(model, ("jitad",), ("jitad",), d, jitad_dir)
            warm = _spawn(model, ("jitad",), ("jitad",), d, jitad_dir)
        results[model] = {"cold": cold, "cold_for_warm": first, "warm": warm}
        print(f"{model}: " + ", ".join(f"{n} {statistics.median(c[n]['compile_s'] for c in cold):.2f} s"
                                       for n in cold[0]) + "; warm "
              + ", ".join(f"{n} {warm[n]['compile_s'] * 1e3:.0f} ms" for n in warm), file=sys.stderr)
    return results


def _med(cold, name, key="compile_s"):
    values = [c[name][key] for c in cold if name in c]
    return (statistics.median(values), min(values), max(values)) if values else None


def markdown(results, title):
    from .models import TITLES
    from jitad.timing import STAGES
    out = [f"# {title}", "",
           "Seconds to compile each model's step, cold (fresh process, empty jitad disk cache, "
           "JAX's persistent cache off), median (min–max) over the repeats; jitad and JAX in "
           "the same process, their order alternating. Ratio = jitad / JAX (≤ 1: the goal).", "",
           "| model | jitad (a) step | JAX step | ratio | jitad (b) staged loop | JAX whole loop | ratio |",
           "|---|---|---|---|---|---|---|"]
    for model, r in results.items():
        cells = []
        for a, b in (("jitad_step", "jax_scan" if model == "treelstm" else "jax_step"), ("jitad_loop", "jax_loop")):
            ja, jb = _med(r["cold"], a), _med(r["cold"], b)
            cells += [f"{ja[0]:.2f} ({ja[1]:.2f}–{ja[2]:.2f})" if ja else "—",
                      f"{jb[0]:.2f} ({jb[1]:.2f}–{jb[2]:.2f})" if jb else "—",
                      f"**{ja[0] / jb[0]:.2f}**" if ja and jb else "—"]
        out.append(f"| {TITLES[model]} | " + " | ".join(cells) + " |")
    out += ["", "jitad's compile by stage (ms, median over the repeats; the step is the `jit_grad` "
            "step plus the jitted update):", "",
            "| model | runner | " + " | ".join(STAGES) + " | total |", "|---|---|" + "---|" * (len(STAGES) + 1)]
    for model, r in results.items():
        for name in ("jitad_step", "jitad_loop"):
            stages = {s: statistics.median(c[name]["stages"].get(s, 0.0) for c in r["cold"]) for s in STAGES}
            out.append(f"| {TITLES[model]} | {name} | " + " | ".join(f"{stages[s] * 1e3:.0f}" for s in STAGES)
                       + f" | {_med(r['cold'], name)[0] * 1e3:.0f} |")
    out += ["", "Warm disk cache: a second process loads the code the first compiled (ms; "
            "the goal is ≤ 5% of the cold compile):", "",
            "| model | runner | cold ms | warm ms | warm / cold | cache |", "|---|---|---|---|---|---|"]
    for model, r in results.items():
        for name in ("jitad_step", "jitad_loop"):
            c, w = r["cold_for_warm"][name]["compile_s"], r["warm"][name]["compile_s"]
            out.append(f"| {TITLES[model]} | {name} | {c * 1e3:.0f} | {w * 1e3:.1f} | **{w / c * 100:.1f}%** "
                       f"| {', '.join(r['warm'][name]['cache'])} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.compile", description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", choices=MODELS, help="only this model (repeatable)")
    ap.add_argument("--repeats", type=int, default=3, help="cold processes per model (default 3)")
    ap.add_argument("--quick", action="store_true", help="one repeat, RNN only: a smoke test")
    ap.add_argument("--out", help="results path without extension (default bench/results/compile)")
    ap.add_argument("--jitad", help="directory holding the jitad package to measure (default: this checkout's)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--frameworks", default="jitad,jax", help=argparse.SUPPRESS)
    ap.add_argument("--order", default="jitad,jax", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.frameworks.split(","), args.order.split(","))
        return 0
    models = ["rnn"] if args.quick else (args.model or list(MODELS))
    results = measure(models, 1 if args.quick else args.repeats, jitad_dir=args.jitad)
    out = args.out or os.path.join(HERE, "results", "compile_quick" if args.quick else "compile")
    from . import harness
    harness.save_results(out, results, markdown(results, "jitad compile latency against JAX"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
