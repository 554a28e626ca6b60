"""GradBench per input: `python -m bench.gradbench.per_input EVAL [--repeats 5] [--max-n N]`.

```
python -m bench.gradbench.per_input ht --hands 8 11 --repeats 3
python -m bench.gradbench.per_input ba --files 1 3
python -m bench.gradbench.native --eval ode --tool jitad --record /tmp/inputs --repeats 1
python -m bench.gradbench.per_input ode --recorded /tmp/inputs/ode.jsonl --only "n=100000"
```

Each of the eval's inputs (GradBench's generator for kmeans, seed 31337, k in 10, 100, 1000,
n in 1000, 10000 (`--max-n`), d in 8, 16; ht: the big model's hand files given by `--hands`;
ba: GradBench's data files given by `--files`; any eval: the evaluate messages a harness
session recorded, `native.py --record`) is timed, per function, side by side:

- jitad: this package's GradBench tool's compiled function on the tool's prepared
  arguments, in this process, timed as the tool's `evaluate` times it (the call alone);
- JAX: GradBench's JAX tool's module for the eval, where it has one (its jitted
  function on its prepared input, one thread), in this process;
- GradBench's C++ tools (`--native`, default manual and codipack: hand-written derivatives
  and CoDiPack; `make gradbench-native` builds them in build/gradbench), where built, each
  in a process of its own.

Every tool is timed the same way, in the steady state of many runs in a row (at least
MANY, and MANY_SECONDS of them), as manual's own `evaluate` loop runs: the median of the
single calls' clock times, and the CPU time per call (jitad and JAX: the batch's CPU time
over its runs; manual: a process doing many runs less one doing one, over the difference
in runs, so parsing and output cancel). A single call after the other tools ran finds
its data and code out of the caches (kmeans k = 10, n = 1000: 75 µs against 39 in a
loop); manual's numbers never include that, so the in-process tools' must not either.
Under load the clocks run ahead of the CPU times, so the CPU columns are the fair match.

Repeats alternate the tools; the table gives medians (min–max) in ms and the ratios of the
medians, and jitad's CPU time over the fastest native tool's and over JAX's. Every output is
compared with manual's (or JAX's) before it counts.
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
GRADBENCH = os.path.join(ROOT, "build", "gradbench")   # (--gradbench)
NATIVE = ("manual", "codipack")
ANALYTIC_MANUAL = {"ode"}   # manual's derivative is an analytic shortcut no AD tool takes (native.py)


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


def ba_inputs(files):
    """GradBench's ba inputs: data file i holds one camera, point, weight and feature, repeated
    to its n, m, p (`inputs.BA_FILES`)."""
    for index in files:
        yield "ba{}: n,m,p={},{},{}".format(index, *inputs.BA_FILES[index]), inputs.generate("ba", {"file": index})


def recorded_inputs(path, only):
    """The distinct inputs of the evaluate messages a harness session recorded
    (`native.py --record`), whose description contains `only`."""
    seen = set()
    with open(path) as f:
        for line in f:
            message = json.loads(line)
            label = message.get("description", "") or f"message {message['id']}"
            if only in label and label not in seen:
                seen.add(label)
                yield label, message["input"]


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


def _runs(seconds):
    """Runs in a row for a CPU time per call by difference: at least MANY, and 5·MANY_SECONDS
    of them (a process's start costs milliseconds of CPU, which the difference must dwarf)."""
    return int(min(10 ** 6, max(MANY, 5 * MANY_SECONDS / max(seconds, 1e-7))))


def _native_process(name, module, function, inp, runs):
    """One process of a C++ tool doing `runs` evaluations: (its stdout's messages, its CPU seconds)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as tmp:
        json.dump(inp | {"min_runs": runs, "min_seconds": 0}, tmp)
        tmp.flush()
        start = _children_cpu()
        done = subprocess.run([os.path.join(GRADBENCH, "tools", name, "bin", module), tmp.name, function],
                              capture_output=True, text=True, check=True)
        return [json.loads(line) for line in done.stdout.splitlines()], _children_cpu() - start


def _native(name, module, function, inp):
    """A C++ tool's median `evaluate` time (ms, its own clock) and its CPU time per `evaluate`
    (ms: a process doing many runs less one doing MANY, over the difference in runs; the
    count from the few runs' median time, which one slow first run does not skew), and its output."""
    few, cpu_few = _native_process(name, module, function, inp, MANY)
    seconds = float(np.median([m["nanoseconds"] for m in few[1:] if m["name"] == "evaluate"])) / 1e9
    runs = MANY + _runs(seconds)
    many, cpu_many = _native_process(name, module, function, inp, runs)
    times = [m["nanoseconds"] for m in many[1:] if m["name"] == "evaluate"]
    return float(np.median(times)) / 1e6, (cpu_many - cpu_few) / (runs - MANY) * 1e3, many[0]


def _jax_module(module):
    """GradBench's JAX tool's module for the eval, or None where it has none."""
    jax_dir = os.path.join(GRADBENCH, "python", "gradbench", "gradbench", "tools", "jax")
    if not os.path.exists(os.path.join(jax_dir, module + ".py")):
        return None
    import importlib
    import jax
    jax.config.update("jax_enable_x64", True)
    for path in (jax_dir, os.path.join(GRADBENCH, "python", "gradbench")):
        if path not in sys.path:
            sys.path.append(path)
    from gradbench import wrap
    if not hasattr(wrap, "unblocked_runs"):   # each timed call waits for its result (as native.py's)
        wrap.unblocked_runs = wrap.multiple_runs
        wrap.multiple_runs = lambda **kw: lambda f: wrap.unblocked_runs(**kw)(lambda x: jax.block_until_ready(f(x)))
    return importlib.import_module(module)


def _jax_runner(module, function, inp):
    """GradBench's JAX function for the eval, timed as `_steady` times jitad: its own
    preparation of the input once (the `pre` of GradBench's `wrap`), then the jitted call
    alone, blocking on each result, in this process."""
    mod = _jax_module(module)
    if mod is None or not hasattr(mod, function):
        return _bundled_jax_runner(module, function, inp)
    wrapped = getattr(mod, function)
    cells = dict(zip(wrapped.wrapped.__code__.co_freevars, (c.cell_contents for c in wrapped.wrapped.__closure__)))
    prepared = cells["pre"](inp)
    output = wrapped.wrapped(inp | {"min_runs": 1, "min_seconds": 0})["output"]   # (compiles)

    def run():
        ms, cpu_ms, _ = _steady(lambda: wrapped.function(prepared))   # (GradBench's function, made blocking)
        return ms, cpu_ms, output
    return run


def _bundled_jax_runner(module, function, inp):
    """kmeans without a GradBench checkout: `with_jax`'s copy of GradBench's JAX definition."""
    if module != "kmeans":
        return None
    import jax
    from . import with_jax
    jax.config.update("jax_enable_x64", True)
    f = jax.jit({"cost": with_jax.kmeans_cost, "dir": with_jax.kmeans_dir}[function])
    args = inputs.prepare(module, inp)
    f(*args).block_until_ready()

    def run():
        ms, cpu_ms, out = _steady(lambda: f(*args).block_until_ready())
        return ms, cpu_ms, np.asarray(out).tolist()
    return run


def measure(module, label, inp, repeats, native=NATIVE, functions=None):
    """Rows (label, function, {tool: [(ms, cpu ms)]}) for one input."""
    rows = []
    for function in functions or inputs.FUNCTIONS[module]:
        runners = {"jitad": _jitad_runner(module, function, inp)}
        jax_run = _jax_runner(module, function, inp)
        if jax_run:
            runners["jax"] = jax_run
        for name in native:
            if os.path.exists(os.path.join(GRADBENCH, "tools", name, "bin", module)):
                runners[name] = lambda name=name: _native(name, module, function, inp)
        times, outputs = {t: [] for t in runners}, {}
        for _ in range(repeats):
            for name, run in runners.items():
                ms, cpu, outputs[name] = run()
                times[name].append((ms, cpu))
        reference = outputs.get("manual", outputs.get("jax"))
        for name, out in outputs.items():   # every tool against the reference, jitad first of all
            if reference is not None and name != "manual":
                _check(out, reference, f"{label} {function}: {name}")
        rows.append((label, function, times))
    return rows


def _leaves(out):
    """An output's numbers in order (ba's dicts, gmm's dicts of lists, nested lists)."""
    if isinstance(out, dict):
        return [v for key in sorted(out) for v in _leaves(out[key])]
    if isinstance(out, (list, tuple)):
        return [v for item in out for v in _leaves(item)]
    return [float(out)]


def _check(out, reference, what):
    got, want = np.asarray(_leaves(out)), np.asarray(_leaves(reference))
    # (absolute at least 1e-9: an output that is rounding noise around 0, such as kmeans'
    # cost with a centroid on every point, differs in sign between tools)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * max(float(np.max(np.abs(want), initial=0)), 1.0),
                               err_msg=what)


def table(rows, module=None):
    """Markdown: CPU times (medians, and the clock's median where only one repeat ran the
    others), the fastest native tool, jitad's CPU time over its and over JAX's (medians of the
    repeats' ratios, min–max), a ratio over 1.5 against the native tool or over 1 against JAX in bold
    (`module` ode: manual's analytic derivative is left out of the fastest, as in native.py)."""
    tools = [t for t in ("jitad", "jax", *NATIVE) if any(t in times for _, _, times in rows)]
    natives = [t for t in tools if t in NATIVE]
    head = ["input", "function", *[f"{t} CPU ms" for t in tools], "fastest native",
            "jitad / fastest native, CPU", *(["jitad / jax, CPU"] if "jax" in tools else [])]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for label, function, times in rows:
        cpu = {t: [c for _, c in v] for t, v in times.items()}
        cells = [f"{np.median(cpu[t]):,.3f}" if t in cpu else "—" for t in tools]
        have = [t for t in natives if t in cpu and not (t == "manual" and module in ANALYTIC_MANUAL)]
        best = min(have, key=lambda t: np.median(cpu[t])) if have else None
        ratios = [_ratio(cpu["jitad"], cpu[best], 1.5) if best else "—"]
        if "jax" in tools:
            ratios.append(_ratio(cpu["jitad"], cpu["jax"], 1.0) if "jax" in cpu else "—")
        lines.append("| " + " | ".join([label, function, *cells, best or "—", *ratios]) + " |")
    return "\n".join(lines)


def _ratio(mine, theirs, limit):
    """The median of the repeats' ratios (min–max), in bold over `limit`."""
    r = np.array(mine) / np.maximum(np.array(theirs), 1e-6)
    med = float(np.median(r))
    text = f"{med:.2f}" + (f" ({r.min():.2f}–{r.max():.2f})" if len(r) > 1 else "")
    return f"**{text}**" if med > limit else text


def cases(a):
    """(label, input) pairs for the chosen eval."""
    if a.recorded:
        return recorded_inputs(a.recorded, a.only or "")
    if a.module == "kmeans":
        return kmeans_inputs(a.max_n)
    if a.module == "ht":
        return ht_inputs(a.hands)
    if a.module == "ba":
        return ba_inputs(a.files)
    raise SystemExit(f"{a.module}: give its inputs with --recorded (native.py --record DIR writes them)")


def main(argv=None):
    global GRADBENCH, MANY_SECONDS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("module", choices=sorted(inputs.FUNCTIONS))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-n", type=int, default=10000, help="kmeans: the largest n timed (GradBench's: 100000)")
    ap.add_argument("--hands", type=int, nargs="+", default=[1, 5, 9, 10, 11], help="ht: the big model's hand files")
    ap.add_argument("--files", type=int, nargs="+", default=[1, 2, 3], help="ba: GradBench's data files")
    ap.add_argument("--recorded", metavar="JSONL", help="the inputs a harness session recorded (native.py --record)")
    ap.add_argument("--only", help="--recorded: only the inputs whose description contains this")
    ap.add_argument("--function", action="append", help="only this function (default: both)")
    ap.add_argument("--native", action="append", choices=NATIVE, help="the C++ tools timed (default: all built)")
    ap.add_argument("--gradbench", default=GRADBENCH, help="GradBench checkout with its tools built")
    ap.add_argument("--many-seconds", type=float, default=MANY_SECONDS,
                    help="seconds of runs in a row for one timing (a native tool's CPU: five times this)")
    a = ap.parse_args(argv)
    GRADBENCH, MANY_SECONDS = a.gradbench, a.many_seconds
    load = os.getloadavg()[0]
    rows = []
    for label, inp in cases(a):
        rows += measure(a.module, label, inp, a.repeats, tuple(a.native or NATIVE), a.function)
        print(f"{label}: done", file=sys.stderr, flush=True)
    print(table(rows, a.module))
    print(f"\nCPU ms per call, median of {a.repeats} alternating repeats; load average {load:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after, {os.cpu_count()} cores.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
