"""Timing, gradient checks and the results files, shared by every benchmark."""
import datetime
import importlib
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
import timeit

import numpy as np

COMPARATORS = ("jitad", "numba", "jax", "torch", "autograd")
LABELS = {"jitad": "jitad", "numba": "numba by hand", "jax": "JAX jit", "torch": "PyTorch eager",
          "autograd": "autograd"}
NOT_INSTALLED = "not installed"


# -- comparators -----------------------------------------------------------------

def load_comparators():
    """`{name: module or None}` and `{name: version or reason}`; imports happen here, once."""
    mods, versions = {}, {}
    for name in ("jitad", "numba", "jax", "torch", "autograd"):
        try:
            mods[name] = importlib.import_module(name)
            versions[name] = getattr(mods[name], "__version__", None) or importlib.metadata.version(name)
        except Exception as e:   # an optional comparator: record why, never fake it
            mods[name], versions[name] = None, f"{NOT_INSTALLED} ({type(e).__name__}: {e})"
    if mods["jax"] is not None:
        mods["jax"].config.update("jax_enable_x64", True)
    if mods["torch"] is not None:
        mods["torch"].set_num_threads(1)
        try:
            mods["torch"].set_num_interop_threads(1)
        except RuntimeError:   # only settable before torch's first parallel work
            pass
    return mods, versions


def run_info(versions, settings):
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "python": sys.version.split()[0], "platform": platform.platform(),
            "cpu": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
            "numpy": np.__version__, "versions": versions, "settings": settings,
            "env": {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "XLA_FLAGS", "JITAD_BENCH_CLOCK",
                                                  "JITAD_CACHE_DIR")}}


# -- timing ------------------------------------------------------------------------

# JITAD_BENCH_CLOCK=cpu times calls by the process's CPU time instead of the wall clock:
# steadier on a shared machine, where waiting for a core would count as the call's time
CLOCK = time.process_time if os.environ.get("JITAD_BENCH_CLOCK") == "cpu" else time.perf_counter


def _timer(fn, args):
    """A `timeit.Timer` calling `fn(*args)` with the arguments bound as locals, so the
    loop costs the same for every comparator and no tuple is unpacked per call."""
    names = [f"a{i}" for i in range(len(args))]
    setup = f"f = _f; {', '.join(names)}{',' if len(names) == 1 else ''} = _args" if names else "f = _f"
    return timeit.Timer(f"f({', '.join(names)})", setup, timer=CLOCK, globals={"_f": fn, "_args": tuple(args)})


def _calibrate(timer, target):
    """Calls per repeat so that one repeat takes about `target` seconds (warms up too)."""
    number = 1
    while True:
        t = timer.timeit(number)
        if t >= target / 4 or number >= 10 ** 7:
            return max(1, int(number * target / max(t, 1e-9)))
        number *= 10 if t < target / 100 else 4


def measure(runners, repeats, target):
    """Per-call seconds of each `{name: (fn, args)}`, repeats interleaved round-robin so
    that the machine's drift hits every comparator alike; `{name: stats dict}`."""
    timers = {name: _timer(fn, args) for name, (fn, args) in runners.items()}
    numbers = {name: _calibrate(t, target) for name, t in timers.items()}
    samples = {name: [] for name in timers}
    for _ in range(repeats):
        for name, timer in timers.items():
            samples[name].append(timer.timeit(numbers[name]) / numbers[name])
    return {name: stats(s, numbers[name]) for name, s in samples.items()}


def stats(samples, number):
    us = [s * 1e6 for s in samples]
    return {"median_us": statistics.median(us), "min_us": min(us), "max_us": max(us),
            "repeats": len(us), "calls_per_repeat": number}


def first_call_seconds(fn, args):
    """Seconds of the first call (tracing and compilation for the JITs); its result."""
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


# -- gradient checks ---------------------------------------------------------------

def floats(x):
    """Every number in a nest of tuples/lists/dicts/arrays/tensors, flattened, in order."""
    if isinstance(x, dict):
        return [v for k in sorted(x) for v in floats(x[k])]
    if isinstance(x, (tuple, list)):
        return [v for c in x for v in floats(c)]
    if hasattr(x, "detach"):   # torch
        x = x.detach().numpy()
    return [float(v) for v in np.asarray(x, dtype=np.float64).ravel()]


class GradientMismatch(AssertionError):
    pass


def check_same(case, name, got, want, rtol=1e-9):
    """`got` (value, grads) must equal jitad's `want` to rtol; components that are zero up
    to rounding get an absolute tolerance of rtol * the largest gradient entry."""
    g, w = np.array(floats(got)), np.array(floats(want))
    if g.shape != w.shape:
        raise GradientMismatch(f"{case}: {name} returned {g.size} numbers, jitad {w.size}")
    atol = rtol * 1e-3 * np.max(np.abs(w), initial=0.0)
    if not np.allclose(g, w, rtol=rtol, atol=atol):
        bad = np.flatnonzero(~np.isclose(g, w, rtol=rtol, atol=atol))
        raise GradientMismatch(
            f"{case}: {name}'s value/gradient differs from jitad's at flat positions "
            f"{bad[:8].tolist()}: {name} {g[bad[:8]].tolist()} vs jitad {w[bad[:8]].tolist()} "
            f"(rtol {rtol})")


class NoBar:
    """Stands in for `tqdm` when it is not installed."""

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n=1):
        pass

    def set_postfix_str(self, s):
        pass


# -- results -------------------------------------------------------------------------

def fmt_us(us):
    if us is None:
        return "—"
    if us >= 100:
        return f"{us:,.0f}"
    if us >= 10:
        return f"{us:.1f}"
    if us >= 1:
        return f"{us:.2f}"
    return f"{us:.3f}"


def cell(entry):
    """A table cell: a median in µs, or the reason there is none."""
    return fmt_us(entry["median_us"]) if isinstance(entry, dict) else entry


def ratio(row, other):
    a, b = row["results"].get(other), row["results"].get("jitad")
    if isinstance(a, dict) and isinstance(b, dict):
        return f"{a['median_us'] / b['median_us']:.2f}"
    return "—"


def loglog_slope(ns, us):
    """The slope of log(time) against log(n), fitted with `numpy.polyfit`."""
    return float(np.polyfit(np.log(ns), np.log(us), 1)[0])


def save_results(stem, results, text):
    """Write `results` (with the machine's load) to `stem`.json and `text` to `stem`.md; print `text`."""
    os.makedirs(os.path.dirname(stem), exist_ok=True)
    with open(stem + ".json", "w") as f:
        json.dump({"load_average": os.getloadavg(), "results": results}, f, indent=1)
    with open(stem + ".md", "w") as f:
        f.write(text)
    print(text)


def save_markdown(name, text):
    """Write `text` to bench/results/<name>.md and print it."""
    stem = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", name)
    os.makedirs(os.path.dirname(stem), exist_ok=True)
    with open(stem + ".md", "w") as f:
        f.write(text)
    print(text)


def write_results(path_stem, info, rows, sweeps, notes, goals=()):
    os.makedirs(os.path.dirname(path_stem), exist_ok=True)
    with open(path_stem + ".json", "w") as f:
        json.dump({"info": info, "rows": rows, "sweeps": sweeps, "goals": list(goals), "notes": notes},
                  f, indent=1)
    with open(path_stem + ".md", "w") as f:
        f.write(markdown(info, rows, sweeps, notes, goals))


def markdown(info, rows, sweeps, notes, goals=()):
    s = info["settings"]
    out = ["# jitad microbenchmarks", "",
           f"{info['date']} · Python {info['python']} · {info['platform']} · {info['cpu_count']} CPUs "
           f"(load average {info['load_average'][0]} at start) · "
           f"single thread · float64 · median of {s['repeats']} repeats after warm-up "
           f"(≈{s['target_s']} s each), interleaved across comparators"
           + (" · **QUICK MODE (tiny sizes, not a measurement)**" if s.get("quick") else ""), "",
           "Versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()), "",
           "µs per call of value-and-gradient from Python (Python call included); spread is jitad's "
           "min–max. Ratios > 1 mean jitad is faster. Compile s: jitad's first call (trace + LLVM, "
           "disk cache off) and JAX's first call (trace + XLA).", "",
           "| case | jitad µs | spread | numba by hand | JAX jit | PyTorch eager | autograd "
           "| numba/jitad | jax/jitad | compile s | JAX compile s |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        r = row["results"]
        j = r["jitad"]
        out.append(
            f"| {row['case']} | {cell(j)} | {fmt_us(j['min_us'])}–{fmt_us(j['max_us'])} | "
            + " | ".join(cell(r.get(k, "—")) for k in COMPARATORS[1:])
            + f" | {ratio(row, 'numba')} | {ratio(row, 'jax')} | "
            f"{row['compile_s'].get('jitad', 0):.3f} | "
            + (f"{row['compile_s']['jax']:.3f}" if "jax" in row["compile_s"] else "—") + " |")
    for sw in sweeps:
        out += ["", f"## {sw['title']}", "", sw["description"], "",
                "| n | " + " | ".join(f"{LABELS[k]} µs | spread" for k in sw["comparators"])
                + " | numba/jitad | jitad compile s |",
                "|---|" + "---|---|" * len(sw["comparators"]) + "---|---|"]
        for p in sw["points"]:
            cells = [f"{fmt_us(p[k]['median_us'])} | {fmt_us(p[k]['min_us'])}–{fmt_us(p[k]['max_us'])}"
                     for k in sw["comparators"]]
            rr = (f"{p['numba']['median_us'] / p['jitad']['median_us']:.2f}" if "numba" in p else "—")
            out.append(f"| {p['n']} | " + " | ".join(cells) + f" | {rr} | "
                       + (f"{p['compile_s']:.3f}" if p.get("compile_s") is not None else "—") + " |")
        out += [""] + [f"- log–log slope of {LABELS[s['comparator']]} time vs n ({s['range']}): "
                       f"**{s['slope']:.3f}**" for s in sw["slopes"]]
    if goals:
        out += ["", "## Goals (BENCHMARKS.md)", ""] + [f"- {g}" for g in goals]
    if notes:
        out += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"


def pyplot():
    """matplotlib's pyplot on a file backend, or None when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def add_common_options(ap, what, default_out, quick_out, quick_limit):
    """The options every benchmark command takes: --quick, --repeats, --out, --keep-cache."""
    ap.add_argument("--quick", action="store_true",
                    help=f"tiny sizes, 1 repeat: a smoke test of {what} ({quick_limit}), not a measurement")
    ap.add_argument("--repeats", type=int, help="timed repeats per comparator")
    ap.add_argument("--out", help=f"results path without extension (default bench/results/{default_out}, "
                                  f"or bench/results/{quick_out} with --quick)")
    ap.add_argument("--keep-cache", action="store_true",
                    help="use jitad's disk cache (compile s then measures loading, not compiling)")


def sizes_from(args, full, quick):
    """The size settings the options select; turns jitad's disk cache off unless kept."""
    size = dict(quick if args.quick else full)
    if args.repeats:
        size["repeats"] = args.repeats
    if not args.keep_cache:
        os.environ["JITAD_CACHE_DIR"] = ""
    return size


def plot_sweeps(path, sweeps):
    """A log-log plot of every sweep (skipped when matplotlib is not installed)."""
    plt = pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for sw in sweeps:
        for comp in sw["comparators"]:
            ax.loglog([p["n"] for p in sw["points"]], [p[comp]["median_us"] for p in sw["points"]],
                      "o-" if comp == "jitad" else "s--", label=f"{LABELS[comp]}: {sw['title']}")
    ax.set_xlabel("n")
    ax.set_ylabel("µs per value_and_grad call")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
