"""GradBench per input: `python -m bench.gradbench.per_input kmeans|ht [--repeats 5] [--max-n N]`.

Each of the eval's inputs (GradBench's generator for kmeans, seed 31337, k in 10, 100, 1000,
n in 1000, 10000 (`--max-n`), d in 8, 16; ht: the big model's hand files given by `--hands`)
is timed, per function, side by side:

- jitad: this package's GradBench tool's compiled function on the tool's prepared
  arguments, in this process, timed as the tool's `evaluate` times it (the call alone);
- JAX (kmeans): GradBench's JAX definition (`with_jax`: the same cost and the same
  `jvp` of `grad`), jitted, one thread, in this process;
- manual: GradBench's hand-written C++ tool (`make gradbench-native` builds it in
  build/gradbench), where built, in a process of its own.

Every tool is timed the same way, in the steady state of many runs in a row (at least
MANY, and MANY_SECONDS of them), as manual's own `evaluate` loop runs: the median of the
single calls' clock times, and the CPU time per call (jitad and JAX: the batch's CPU time
over its runs; manual: a process doing many runs less one doing one, over the difference
in runs, so parsing and output cancel). A single call after the other tools ran finds
its data and code out of the caches (kmeans k = 10, n = 1000: 75 µs against 39 in a
loop); manual's numbers never include that, so the in-process tools' must not either.
Under load the clocks run ahead of the CPU times, so the CPU columns are the fair match.

Repeats alternate the tools; the table gives medians (min–max) in ms and the ratios of the
medians. Every output is compared with manual's (or JAX's) before it counts.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import bench  # noqa: F401  (single-thread settings before numpy/jax)

import numpy as np

from . import inputs, tool

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GRADBENCH = os.path.join(ROOT, "build", "gradbench")
FUNCTIONS = {"kmeans": ("cost", "dir"), "ht": ("objective", "jacobian")}


def kmeans_inputs(max_n):
    """GradBench's kmeans inputs in its order: points uniform in [0, 1)^d, the centroids
    the last k points."""
    rng = np.random.RandomState(31337)
    for k in (10, 100, 1000):
        for n in (1000, 10000, 100000):
            for d in (8, 16):
                points = rng.rand(n, d)
                if n <= max_n:
                    yield f"k={k},n={n},d={d}", {"points": points.tolist(), "centroids": points[-k:].tolist()}


def ht_inputs(hands):
    """GradBench's complicated ht inputs on the big hand model: `hands` (file numbers)."""
    big = os.path.join(GRADBENCH, "evals", "ht", "data", "complicated_big")
    inputs.HT_DIR = os.path.join(big, "model")   # (ht_model reads the model from there)
    model = inputs.ht_model()
    files = {int(f.split("_")[0][4:]): f for f in os.listdir(big) if f.startswith("hand")}
    for index in hands:
        lines = [line.split() for line in open(os.path.join(big, files[index])) if line.strip()]
        count, ntheta = int(lines[0][0]), int(lines[0][1])
        points, rest = lines[1:1 + count], lines[1 + count:]
        yield f"hand{index} c={count}", {
            "theta": [float(r[0]) for r in rest[count:count + ntheta]], "us": [[float(v) for v in r] for r in rest[:count]],
            "data": {"model": model, "correspondences": [int(r[0]) for r in points],
                     "points": [[float(v) for v in r[1:4]] for r in points]}}


MANY_SECONDS = 0.2   # runs in a row for one timing: this long, and ...
MANY = 11            # ... at least this many


def _steady(call):
    """`call()` run MANY times and for MANY_SECONDS in a row (after one untimed run): the
    median of the single calls' ms, the CPU ms per call, and the last result."""
    result, times, runs = call(), [], 0
    cpu, spent = time.process_time(), 0.0
    while runs < MANY or spent < MANY_SECONDS:
        result = None   # let go first, as the tool's `evaluate` does (a C++ tool overwrites its output)
        wall = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - wall)
        runs, spent = runs + 1, spent + times[-1]
    return float(np.median(times)) * 1e3, (time.process_time() - cpu) / runs * 1e3, result


def _jitad_runner(module, function, inp):
    """The tool's compiled function on the tool's prepared arguments, timed as the tool's
    `evaluate` times it (the call alone), in the steady state."""
    fn, args = tool._functions(module)[function], inputs.prepare(module, inp)
    fn(*args)   # compiles

    def run():
        ms, cpu_ms, result = _steady(lambda: fn(*args))
        return ms, cpu_ms, tool.output(module, function, result, args)
    return run


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _manual_process(module, function, inp, runs):
    """One process of manual's tool doing `runs` evaluations: (its stdout's messages, its CPU seconds)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as tmp:
        json.dump(inp | {"min_runs": runs, "min_seconds": 0}, tmp)
        tmp.flush()
        start = _children_cpu()
        done = subprocess.run([os.path.join(GRADBENCH, "tools", "manual", "bin", module), tmp.name, function],
                              capture_output=True, text=True, check=True)
        return [json.loads(line) for line in done.stdout.splitlines()], _children_cpu() - start


def _manual(module, function, inp):
    """manual's median `evaluate` time (ms, its own clock) and its CPU time per `evaluate`
    (ms: a process doing many runs less one doing one, over the difference in runs), and its output."""
    once, cpu_once = _manual_process(module, function, inp, 1)
    seconds = next(m["nanoseconds"] for m in once[1:] if m["name"] == "evaluate") / 1e9
    runs = min(5000, max(MANY, int(MANY_SECONDS / max(seconds, 1e-7))))
    many, cpu_many = _manual_process(module, function, inp, runs)
    times = [m["nanoseconds"] for m in many[1:] if m["name"] == "evaluate"]
    return float(np.median(times)) / 1e6, (cpu_many - cpu_once) / (runs - 1) * 1e3, many[0]


def _jax_runner(module, function, inp):
    if module != "kmeans":
        return None
    import jax
    from . import with_jax
    f = jax.jit({"cost": with_jax.kmeans_cost, "dir": with_jax.kmeans_dir}[function])
    args = inputs.prepare(module, inp)
    f(*args).block_until_ready()

    def run():
        ms, cpu_ms, out = _steady(lambda: f(*args).block_until_ready())
        return ms, cpu_ms, np.asarray(out).tolist()
    return run


def measure(module, label, inp, repeats):
    """Rows (label, function, {tool: [(ms, cpu ms)]}) for one input."""
    rows = []
    for function in FUNCTIONS[module]:
        runners = {"jitad": _jitad_runner(module, function, inp)}
        jax_run = _jax_runner(module, function, inp)
        if jax_run:
            runners["jax"] = jax_run
        if os.path.exists(os.path.join(GRADBENCH, "tools", "manual", "bin", module)):
            runners["manual"] = lambda: _manual(module, function, inp)
        times, outputs = {t: [] for t in runners}, {}
        for _ in range(repeats):
            for name, run in runners.items():
                ms, cpu, outputs[name] = run()
                times[name].append((ms, cpu))
        reference = outputs.get("manual", outputs.get("jax"))
        if reference is not None:
            np.testing.assert_allclose(np.asarray(outputs["jitad"], dtype=float), np.asarray(reference, dtype=float),
                                       rtol=1e-9, atol=1e-9 * max(float(np.max(np.abs(reference))), 1.0))
            # (absolute at least 1e-9: an output that is rounding noise around 0, such as kmeans'
            # cost with a centroid on every point, differs in sign between tools)
        rows.append((label, function, times))
    return rows


def table(rows):
    """Markdown: wall times (median (min–max)), CPU times (medians) and the ratios of the
    medians, wall and, against manual, CPU."""
    tools = [t for t in ("jitad", "jax", "manual") if any(t in times for _, _, times in rows)]
    head = ["input", "function", *[f"{t} ms" for t in tools], *[f"{t} CPU ms" for t in tools],
            *[f"jitad / {t}" for t in tools[1:]], *(["jitad / manual, CPU"] if "manual" in tools else [])]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for label, function, times in rows:
        med = {t: float(np.median([ms for ms, _ in v])) for t, v in times.items()}
        cpu = {t: float(np.median([c for _, c in v])) for t, v in times.items()}
        cells = [f"{med[t]:,.2f} ({min(m for m, _ in times[t]):,.2f}–{max(m for m, _ in times[t]):,.2f})"
                 if t in times else "—" for t in tools]
        cpus = [f"{cpu[t]:,.2f}" if t in cpu else "—" for t in tools]
        ratios = [f"{med['jitad'] / med[t]:.2f}" if t in med and med[t] else "—" for t in tools[1:]]
        if "manual" in tools:
            ratios.append(f"{cpu['jitad'] / cpu['manual']:.2f}" if cpu.get("manual", 0) > 0 else "—")
        lines.append("| " + " | ".join([label, function, *cells, *cpus, *ratios]) + " |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("module", choices=sorted(FUNCTIONS))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-n", type=int, default=10000, help="kmeans: the largest n timed (GradBench's: 100000)")
    ap.add_argument("--hands", type=int, nargs="+", default=[1, 5, 9, 10, 11], help="ht: the big model's hand files")
    a = ap.parse_args(argv)
    if a.module == "kmeans":
        import jax
        jax.config.update("jax_enable_x64", True)
    load = os.getloadavg()[0]
    cases = kmeans_inputs(a.max_n) if a.module == "kmeans" else ht_inputs(a.hands)
    rows = []
    for label, inp in cases:
        rows += measure(a.module, label, inp, a.repeats)
        print(f"{label}: done", file=sys.stderr, flush=True)
    print(table(rows))
    print(f"\nms per call, median (min–max) of {a.repeats} alternating repeats; load average {load:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after, {os.cpu_count()} cores.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
