"""`python -m bench.gradbench [--eval particle] [--quick]`: GradBench's evals in jitad,
side by side with JAX jit, PyTorch eager and numba by hand.

Every comparator's output must equal jitad's to rtol 1e-9 before anything is timed
(`particle`/`saddle` also GradBench's expected outputs); a mismatch fails the run (exit
status 1). Writes bench/results/gradbench.md (+ .json, .png); --quick writes
gradbench_quick.* at the smallest sizes with one repeat.
"""
import argparse
import os
import sys
import time

import bench  # noqa: F401  (single-thread settings before numpy/jax/torch)

import numpy as np

from bench.harness import (LABELS, NoBar, GradientMismatch, check_same, first_call_seconds, fmt_us,
                           measure, run_info)

from . import inputs

EVALS = ("particle", "saddle", "lse", "llsq", "ode", "kmeans", "gmm", "lstm", "ba", "ht", "det")
NESTED = ("particle", "saddle")
OTHERS = ("jax", "torch", "numba")
SLOW_CALL_S = 2.0     # a comparator whose checked call took longer is timed by that call alone


def load(name):
    """The comparator's module of implementations, or the reason there is none."""
    try:
        if name == "jax":
            from . import with_jax as mod
        elif name == "torch":
            from . import with_torch as mod
            import torch
            torch.set_num_threads(1)
        else:
            from . import byhand as mod
        return mod, None
    except Exception as e:   # an optional comparator: say why it is missing
        return None, f"not installed ({type(e).__name__}: {e})"


def jitad_functions(name):
    from . import arrays, det, jacobians, nested
    if name == "det":
        return det.compiled()
    if name in NESTED:
        return {v: nested.compiled(name, v) for v in nested.VARIANTS}
    if name in jacobians.EVALS:
        return jacobians.compiled(name)
    return arrays.compiled(name)


def check_expected(name, fname, out):
    want = inputs.EXPECTED.get(name)
    if want is not None:
        check_same(f"{name} {fname}", "GradBench's expected output", out, want)


def one_line(e):
    return " ".join(str(e).split())[:160]


def run_case(name, size, mods, args_ns, bar):
    """Every function of one eval at one size: `[row]`."""
    args = inputs.prepare(name, inputs.generate(name, size))
    mine = jitad_functions(name)
    theirs = {}
    for other, (mod, reason) in mods.items():
        if mod is None:
            theirs[other] = reason
            continue
        try:
            theirs[other] = mod.functions(name)
        except Exception as e:
            theirs[other] = f"error ({one_line(e)})"
    rows = []
    for fname, fn in mine.items():
        bar.set_postfix_str(f"{name} {inputs.describe(size)} {fname}")
        compile_s, want = first_call_seconds(fn, args)
        check_expected(name, fname, want)
        row = {"eval": name, "size": inputs.describe(size), "function": fname,
               "compile_s": {"jitad": compile_s}, "results": {}}
        runners = {"jitad": (fn, args)}
        for other, fns in theirs.items():
            if isinstance(fns, str):
                row["results"][other] = fns
                continue
            key = "by hand" if other == "numba" and name in NESTED else fname
            if key not in fns:
                row["results"][other] = "not written"
                continue
            if other == "torch" and name in NESTED and fname != "rr" and not args_ns.all_torch:
                row["results"][other] = "skipped (minutes a call: --all-torch)"
                continue
            try:
                seconds, got = first_call_seconds(fns[key], args)
            except Exception as e:
                row["results"][other] = f"refuses: {one_line(e)}"
                continue
            check_same(f"{name} {inputs.describe(size)} {fname}", LABELS[other], got, want)
            row["compile_s"][other] = seconds
            if other != "torch" and seconds > SLOW_CALL_S:   # it compiled: time a second call
                seconds = first_call_seconds(fns[key], args)[0]
            if seconds > SLOW_CALL_S:     # a call of seconds: that call is the measurement
                row["results"][other] = {"median_us": seconds * 1e6, "min_us": seconds * 1e6,
                                         "max_us": seconds * 1e6, "repeats": 1, "calls_per_repeat": 1}
            else:
                runners[other] = (fns[key], args)
        row["results"].update(measure(runners, args_ns.repeats, args_ns.target))
        rows.append(row)
        bar.update(1)
    return rows


def cell(entry):
    if not isinstance(entry, dict):
        return entry
    s = fmt_us(entry["median_us"])
    if entry["repeats"] > 1:
        s += f" ({fmt_us(entry['min_us'])}–{fmt_us(entry['max_us'])})"
    return s + (" ¹" if entry["repeats"] == 1 and entry["calls_per_repeat"] == 1 else "")


def ratio(row, other):
    a, b = row["results"].get(other), row["results"]["jitad"]
    return f"{a['median_us'] / b['median_us']:.2f}" if isinstance(a, dict) else "—"


def markdown(info, rows, quick):
    out = ["# GradBench evals: jitad against JAX, PyTorch and numba by hand", "",
           f"{info['date']} · {info['platform']} · {info['cpu_count']} CPUs (load average "
           f"{info['load_average'][0]} at start: the machine is shared, timings are noisy) · single thread · "
           f"float64 · median (min–max) of {info['settings']['repeats']} repeats, interleaved across comparators"
           + (" · **QUICK MODE (smallest sizes, not a measurement)**" if quick else ""), "",
           "Versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()), "",
           "µs per call from Python. Ratios are the comparator's time over jitad's (> 1: jitad faster). "
           "Every output equals jitad's to rtol 1e-9 (particle/saddle: also GradBench's expected "
           "outputs). numba by hand has one version of particle/saddle (hand-derived tangents), "
           "compared with every variant. ¹ one call (its check), a call taking seconds. "
           "Compile s: first call (jitad: trace + LLVM, disk cache off; JAX: trace + XLA).", "",
           "| eval | size | function | jitad | JAX jit | PyTorch eager | numba by hand | JAX/jitad | "
           "PyTorch/jitad | numba/jitad | compile s jitad | compile s JAX |",
           "|" + "---|" * 12]
    for r in rows:
        res, cs = r["results"], r["compile_s"]
        out.append("| " + " | ".join([
            r["eval"], r["size"], r["function"], cell(res["jitad"]),
            *(cell(res.get(o, "—")) for o in OTHERS), *(ratio(r, o) for o in OTHERS),
            f"{cs['jitad']:.2f}", f"{cs['jax']:.2f}" if "jax" in cs else "—"]) + " |")
    return "\n".join(out) + "\n"


def chart(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    labels = [f"{r['eval']} {r['function']}\n{r['size']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 0.55 * len(rows)), 5))
    width = 0.27
    for k, other in enumerate(OTHERS):
        vals = [r["results"][other]["median_us"] / r["results"]["jitad"]["median_us"]
                if isinstance(r["results"].get(other), dict) else np.nan for r in rows]
        ax.bar(np.arange(len(rows)) + (k - 1) * width, vals, width, label=LABELS[other])
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("comparator time / jitad time (> 1: jitad faster)")
    ax.set_xticks(np.arange(len(rows)), labels, rotation=90, fontsize=7)
    ax.legend()
    ax.set_title("GradBench evals: speed relative to jitad")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--eval", action="append", choices=EVALS, help="run only these (repeatable)")
    p.add_argument("--quick", action="store_true", help="smallest sizes, one repeat")
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--target", type=float, default=0.1, help="seconds per repeat")
    p.add_argument("--size", type=int, default=1, help="index into each eval's sizes (0: smallest)")
    p.add_argument("--all-torch", action="store_true", help="time every PyTorch particle/saddle variant")
    p.add_argument("--keep-cache", action="store_true", help="keep jitad's disk cache (default: off)")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "results"))
    a = p.parse_args(argv)
    if not a.keep_cache:
        os.environ["JITAD_CACHE_DIR"] = ""
    a.repeats = a.repeats or (1 if a.quick else 5)
    if a.quick:
        a.size, a.target = 0, 0.01
    evals = a.eval or EVALS
    mods = {o: load(o) for o in OTHERS}
    import jitad
    versions = {"jitad": jitad.__version__}
    for o, (mod, reason) in mods.items():
        lib = {"jax": "jax", "torch": "torch", "numba": "numba"}[o]
        versions[lib] = reason or sys.modules[lib].__version__
    info = run_info(versions, {"repeats": a.repeats, "target_s": a.target, "quick": a.quick})
    cases = [(e, inputs.SIZES[e][min(a.size, len(inputs.SIZES[e]) - 1)]) for e in evals]
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = NoBar
    rows, failed = [], []
    with tqdm(total=sum(len(inputs.FUNCTIONS[e]) for e in evals), unit="fn") as bar:
        for name, size in cases:
            try:
                rows += run_case(name, size, mods, a, bar)
            except GradientMismatch as e:
                failed.append(str(e))
                print(f"\nMISMATCH: {e}", file=sys.stderr)
    stem = os.path.join(a.out, "gradbench_quick" if a.quick else "gradbench")
    os.makedirs(a.out, exist_ok=True)
    md = markdown(info, rows, a.quick)
    if failed:
        md += "\n**FAILED (outputs differ):**\n\n" + "\n".join(f"- {f}" for f in failed) + "\n"
    with open(stem + ".md", "w") as f:
        f.write(md)
    import json
    with open(stem + ".json", "w") as f:
        json.dump({"info": info, "rows": rows, "failed": failed}, f, indent=1)
    chart(rows, stem + ".png")
    print(md)
    return 1 if failed else 0


if __name__ == "__main__":
    start = time.perf_counter()
    status = main()
    print(f"{time.perf_counter() - start:.0f} s", file=sys.stderr)
    sys.exit(status)
