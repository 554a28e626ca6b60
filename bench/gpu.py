"""The GPU benchmarks: `python -m bench.gpu [--quick]`, jitad's CUDA backend against PyTorch CUDA.

Kernels: elementwise `tanh(x)·y + 1`, its gradient w.r.t. x (`grad(sum(tanh(x)·y))`), the
sum of a vector, and square matrix products, at n = 10^6, 10^7, 10^8 elements (matmul:
n×n with n² in that range). Inputs are made on the device before timing (numba device
arrays for jitad, CUDA tensors for PyTorch), so no host copy is timed. Models: the four
of bench/models.py (char-RNN, char-LSTM, TreeLSTM, CNN), jitad compiled with
device="cuda" (parameters and data as device arrays) and PyTorch on CUDA.

The protocol is the CPU benchmarks' (bench/README.md): every comparator's values (or
losses) are checked before anything is timed; medians and min-max spreads of repeats
interleaved round-robin between jitad and PyTorch in one process; ratios side by side.
Every timed call ends with a synchronization (`numba.cuda.synchronize()` after jitad,
`torch.cuda.synchronize()` after PyTorch), so a time is the whole GPU work of the call.

Without a GPU (or without PyTorch CUDA) the program says so and runs only what can run;
it never makes up a number. Under numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1, set
before numba is imported) it runs --quick only, every case at tiny sizes (tiny model
dimensions too), as a smoke check of the code path: not a performance measurement.
Results: bench/results/gpu.{md,json}, or gpu_quick.* with --quick.
"""
import argparse
import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import statistics
import sys
import time
import traceback

import numpy as np

from . import harness, models

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = ("elementwise", "elementwise_grad", "reduction", "matmul")
CASES = KERNELS + models.MODELS
FULL = dict(ns=(10 ** 6, 10 ** 7, 10 ** 8), sides=(1000, 3162, 10000), repeats=9, target_s=0.2,
            models=dict(models.FULL, rnn_iters=300, tree_count=80, cnn_steps=20, repeats=5))
QUICK = dict(ns=(64, 512), sides=(8, 16), repeats=1, target_s=0.002, models=dict(models.QUICK))
# Under the simulator every kernel launch runs each GPU thread as a Python thread
# (≈ 15 ms a launch): one iteration per phase, and the models shrunk (below).
SIM_MODELS = dict(models.QUICK, rnn_iters=1, check=1, tree_count=1, tree_check=1, cnn_steps=1,
                  cnn_check=1, repeats=1)
SIM_DIMS = {"CHAR": dict(V=5, H=3, T=2, B=2), "TREE": dict(D=3, H=2), "CNN": dict(B=1, side=16, c1=2, c2=2, hidden=4)}
MODEL_GOALS = {"rnn": 1.0, "treelstm": 1.0, "cnn": 0.7}   # PyTorch CUDA time / jitad time
KERNEL_GOALS = {"elementwise": 1.5, "reduction": 1.5}    # jitad time / PyTorch time at n = 10^8
GOAL_N = 10 ** 8
RTOL = {"float64": 1e-9, "float32": 1e-3}
TORCH_CUDA = "PyTorch CUDA"


# -- the device -----------------------------------------------------------------------

def _version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def detect():
    """What can run here: jitad on a GPU (or the simulator) and PyTorch CUDA; the device's
    name and details; honest reasons for whatever cannot."""
    dev = {"sim": False, "jitad_ok": False, "torch_ok": False, "name": "no GPU", "gpu": {},
           "versions": {"jitad": _version("jitad"), "numba": _version("numba"),
                        "numba-cuda": _version("numba-cuda"), "torch": _version("torch")}}
    try:
        from numba import config, cuda
        dev["sim"] = bool(config.ENABLE_CUDASIM)
        available = cuda.is_available()
    except Exception as e:   # numba-cuda missing or broken: say so
        cuda, available = None, False
        dev["jitad_why"] = f"numba.cuda cannot be used ({type(e).__name__}: {e})"
    if dev["sim"]:
        dev["name"] = "CUDA simulator (numba-cuda; not a GPU)"
    elif available:
        try:
            d = cuda.get_current_device()
            name = d.name.decode() if isinstance(d.name, bytes) else str(d.name)
            free, total = cuda.current_context().get_memory_info()
            dev["name"] = name
            dev["gpu"] = {"compute_capability": ".".join(map(str, d.compute_capability)),
                          "memory_gib": round(total / 2 ** 30, 1)}
            with contextlib.suppress(Exception):
                dev["gpu"]["driver"] = ".".join(map(str, cuda.cudadrv.driver.driver.get_version()))
            with contextlib.suppress(Exception):
                dev["gpu"]["cuda_runtime"] = ".".join(map(str, cuda.runtime.get_version()))
        except Exception as e:
            available = False
            dev["jitad_why"] = f"numba.cuda sees a GPU but cannot use it ({type(e).__name__}: {e})"
    elif "jitad_why" not in dev:
        dev["jitad_why"] = ("numba.cuda.is_available() is False: no usable CUDA GPU or driver "
                            f"(numba-cuda {dev['versions']['numba-cuda']})")
    if available or dev["sim"]:
        try:   # the backend itself, on a one-element array
            import jitad
            out = jitad.jit(lambda x: x + 1.0, device="cuda")(np.zeros(1))
            if float(out[0]) != 1.0:
                raise AssertionError(f"x + 1.0 at x = 0 gave {out[0]}")
            dev["jitad_ok"] = True
        except Exception as e:
            dev["jitad_why"] = f"jitad's GPU backend fails a one-element probe: {type(e).__name__}: {e}"
    try:
        import torch
        dev["torch_version"] = torch.__version__
        if torch.cuda.is_available():
            dev["torch_ok"] = True
            dev["torch_name"] = torch.cuda.get_device_name(0)
            dev["torch_cuda"] = torch.version.cuda
        else:
            dev["torch_why"] = f"not available (torch {torch.__version__}" + (
                ", built without CUDA)" if torch.version.cuda is None
                else f", CUDA {torch.version.cuda}: no usable GPU)")
    except Exception as e:
        dev["torch_version"] = None
        dev["torch_why"] = f"not installed ({type(e).__name__}: {e})"
    return dev


def device_lines(dev):
    if dev["sim"]:
        jl = ("jitad GPU backend: on numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1): "
              + ("works" if dev["jitad_ok"] else dev.get("jitad_why", "")))
    elif dev["jitad_ok"]:
        g = dev["gpu"]
        jl = (f"jitad GPU backend: {dev['name']} (compute capability {g.get('compute_capability')}, "
              f"{g.get('memory_gib')} GiB" + (f", driver {g['driver']}" if "driver" in g else "")
              + (f", CUDA runtime {g['cuda_runtime']}" if "cuda_runtime" in g else "") + ")")
    else:
        jl = f"jitad GPU backend: not available: {dev.get('jitad_why')}"
    if dev["torch_ok"]:
        tl = f"PyTorch CUDA: torch {dev['torch_version']} (CUDA {dev['torch_cuda']}) on {dev['torch_name']}"
    else:
        tl = f"PyTorch CUDA: {dev.get('torch_why')}"
    return [jl, tl]


def sync_functions(dev):
    """(jitad's synchronization, PyTorch's): each waits for all work queued before it."""
    js = ts = lambda: None
    if dev["jitad_ok"]:
        from numba import cuda
        js = cuda.synchronize
    if dev["torch_ok"]:
        import torch
        ts = torch.cuda.synchronize
    return js, ts


def synced(fn, sync):
    def call(*args):
        out = fn(*args)
        sync()
        return out
    return call


# -- errors ------------------------------------------------------------------------------

def describe(e):
    """An exception as a record: 'Type: message', the op the GPU backend was running (the
    innermost `run_graph` frame's node), the innermost jitad frame, the traceback's tail."""
    op, t = None, e.__traceback__
    while t is not None:
        if t.tb_frame.f_code.co_name == "run_graph" and "node" in t.tb_frame.f_locals:
            node = t.tb_frame.f_locals["node"]
            op = getattr(getattr(node, "op", None), "name", None) or str(getattr(node, "op", node))
        t = t.tb_next
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f"{os.sep}jitad{os.sep}" in f.filename]
    where = (f"{os.path.relpath(frames[-1].filename, os.path.dirname(HERE))}:{frames[-1].lineno} in "
             f"{frames[-1].name}") if frames else None
    tail = "".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip().splitlines()[-6:]
    return {"error": f"{type(e).__name__}: {str(e)[:600]}", "op": op, "where": where, "traceback_tail": tail}


def error_line(case, who, rec):
    return (f"{case}, {who}: {rec['error']}" + (f" (while running op {rec['op']})" if rec.get("op") else "")
            + (f" at {rec['where']}" if rec.get("where") else ""))


# -- kernels ----------------------------------------------------------------------------------

def kernel_specs(jitad):
    """name -> how to build, feed, check and count one kernel case."""
    def elementwise_ref(x, y):
        t = np.tanh(x) * y
        return t + 1.0, np.abs(t) + 1.0

    def grad_ref(x, y):
        t = np.tanh(x)
        return (1.0 - t * t) * y, np.abs(y) * (1.0 + t * t)

    return {
        "elementwise": dict(
            title="elementwise tanh(x)·y + 1", what="jitad.jit(lambda x, y: tanh(x) * y + 1.0)",
            make=lambda: jitad.jit(lambda x, y: jitad.tanh(x) * y + 1.0, device="cuda"),
            torch=lambda torch: (lambda x, y: torch.tanh(x) * y + 1.0),
            data=lambda rng, n, dt: (rng.standard_normal(n).astype(dt), rng.standard_normal(n).astype(dt)),
            ref=elementwise_ref, bytes=lambda n, b: 3 * n * b),
        "elementwise_grad": dict(
            title="gradient of sum(tanh(x)·y) w.r.t. x", what="jitad.grad(lambda x, y: sum(tanh(x) * y))",
            make=lambda: jitad.grad(lambda x, y: jitad.sum(jitad.tanh(x) * y), device="cuda"),
            torch=_torch_grad, ref=grad_ref, bytes=lambda n, b: 3 * n * b,
            data=lambda rng, n, dt: (rng.standard_normal(n).astype(dt), rng.standard_normal(n).astype(dt))),
        "reduction": dict(
            title="sum of a vector", what="jitad.jit(lambda x: sum(x)) (a Python float back)",
            make=lambda: jitad.jit(lambda x: jitad.sum(x), device="cuda"),
            torch=lambda torch: (lambda x: torch.sum(x).item()),
            data=lambda rng, n, dt: (rng.standard_normal(n).astype(dt),),
            ref=lambda x: (np.sum(x, dtype=np.float64), np.sum(np.abs(x), dtype=np.float64)),
            bytes=lambda n, b: n * b),
        "matmul": dict(
            title="matrix product A @ B (square)", what="jitad.jit(lambda a, b: a @ b)",
            make=lambda: jitad.jit(lambda a, b: a @ b, device="cuda"),
            torch=lambda torch: (lambda a, b: a @ b),
            data=lambda rng, side, dt: (rng.standard_normal((side, side)).astype(dt),
                                        rng.standard_normal((side, side)).astype(dt)),
            ref=None, flops=lambda side: 2 * side ** 3),
    }


def _torch_grad(torch):
    def g(x, y):
        leaf = x.detach().requires_grad_(True)
        return torch.autograd.grad(torch.sum(torch.tanh(leaf) * y), leaf)[0]
    return g


def _host(out):
    """A result (numba device array, CUDA tensor, number) as a float64 numpy array."""
    if hasattr(out, "copy_to_host"):
        out = out.copy_to_host()
    elif hasattr(out, "detach"):
        out = out.detach().cpu().numpy()
    return np.asarray(out, dtype=np.float64)


def record_check(point, who, bad):
    """Record a comparator's value check on `point`; True when it matched NumPy."""
    if bad:
        point["errors"][who] = {"error": f"value mismatch: {bad}", "mismatch": True}
        return False
    point["checks"][who] = "matches NumPy"
    return True


def check_kernel(name, spec, host_args, out, rtol, rng):
    """None, or why `out` is not the NumPy reference: |got - want| <= rtol * the magnitude of
    the terms (|tanh(x)·y| + 1, sum |x|, |A| @ |B|: sums and products round relative to those)."""
    if name == "matmul":
        a, b = host_args
        rows = np.sort(rng.choice(a.shape[0], min(8, a.shape[0]), replace=False))
        want = a[rows].astype(np.float64) @ b.astype(np.float64)
        scale = np.abs(a[rows]).astype(np.float64) @ np.abs(b).astype(np.float64)
        got = np.stack([_host(out[int(r)]) for r in rows])
        what = f"rows {rows.tolist()}"
    else:
        want, scale = spec["ref"](*(x.astype(np.float64) for x in host_args))
        got, what = _host(out), "all elements"
    if np.shape(got) != np.shape(want):
        return f"shape {np.shape(got)}, expected {np.shape(want)}"
    bad = np.abs(got - want) > rtol * scale + 1e-300
    if np.any(bad):
        k = np.flatnonzero(np.ravel(bad))[:4]
        return (f"differs from NumPy at {int(np.sum(bad))} of {np.size(bad)} checked values ({what}); "
                f"first: got {np.ravel(got)[k].tolist()}, want {np.ravel(want)[k].tolist()} (rtol {rtol:g})")
    return None


def run_kernel(name, spec, n, dev, ctx, bar):
    """One point: build inputs, first calls, checks, then jitad and PyTorch timed together."""
    dtype, rng = ctx["dtype"], np.random.default_rng(n)
    host_args = spec["data"](rng, n, dtype)
    elements = host_args[0].size
    point = {"case": name, "n": n, "elements": elements, "label": f"{n}×{n}" if name == "matmul" else f"{n:,}",
             "results": {}, "first_call_s": {}, "errors": {}, "checks": {}}
    js, ts = ctx["sync"]
    runners = {}
    if dev["jitad_ok"]:
        from numba import cuda
        bar.set_postfix_str(f"{name} n={point['label']}: jitad first call")
        try:
            if name not in ctx["jitad_fns"]:   # one jitted function per case, compiled per shape
                ctx["jitad_fns"][name] = spec["make"]()
            fn = ctx["jitad_fns"][name]
            args = tuple(cuda.to_device(x) for x in host_args)
            js()
            point["first_call_s"]["jitad"], out = harness.first_call_seconds(synced(fn, js), args)
            point["compile_s"] = fn.compile_seconds
            if record_check(point, "jitad", check_kernel(name, spec, host_args, out, ctx["rtol"], rng)):
                runners["jitad"] = (synced(fn, js), args)
            del out
        except Exception as e:
            point["errors"]["jitad"] = describe(e)
    else:
        point["results"]["jitad"] = "not available"
    if ctx["torch_timed"]:
        import torch
        bar.set_postfix_str(f"{name} n={point['label']}: PyTorch first call")
        try:
            fn = synced(spec["torch"](torch), ts)
            args = tuple(torch.from_numpy(x).to("cuda") for x in host_args)
            ts()
            point["first_call_s"]["torch"], out = harness.first_call_seconds(fn, args)
            if record_check(point, "torch", check_kernel(name, spec, host_args, out, ctx["rtol"], rng)):
                runners["torch"] = (fn, args)
            del out
        except Exception as e:
            point["errors"]["torch"] = describe(e)
    else:
        point["results"]["torch"] = ctx["torch_reason"]
    del host_args
    if runners:
        bar.set_postfix_str(f"{name} n={point['label']}: timing")
        point["results"].update(harness.measure(runners, ctx["repeats"], ctx["target_s"]))
    for k, rec in point["errors"].items():
        point["results"][k] = "mismatch" if rec.get("mismatch") else "error"
    per_call = lambda k: point["results"][k]["median_us"] * 1e-6
    for k in ("jitad", "torch"):
        if isinstance(point["results"].get(k), dict):
            if "bytes" in spec:
                point.setdefault("rate", {})[k] = spec["bytes"](elements, np.dtype(dtype).itemsize) / per_call(k) / 1e9
            else:
                point.setdefault("rate", {})[k] = spec["flops"](n) / per_call(k) / 1e9
    point["rate_unit"] = "GB/s" if "bytes" in spec else "GFLOP/s"
    runners.clear()
    if ctx["torch_timed"]:
        import torch
        torch.cuda.empty_cache()
    bar.update(1)
    return point


# -- models ------------------------------------------------------------------------------

@contextlib.contextmanager
def sim_dimensions(active):
    """Under the simulator, the models' dimensions shrunk (SIM_DIMS), restored on exit."""
    saved = {name: dict(getattr(models, name)) for name in SIM_DIMS}
    try:
        if active:
            for name, dims in SIM_DIMS.items():
                getattr(models, name).update(dims)
        yield
    finally:
        for name, d in saved.items():
            getattr(models, name).clear()
            getattr(models, name).update(d)


def run_model(model, dev, ctx, bar):
    """Build the model's jitad (GPU) and PyTorch runners, compile, check the losses against
    PyTorch's, time the repeats interleaved; one row (errors recorded, never raised)."""
    import jitad
    torch = None
    with contextlib.suppress(ImportError):
        import torch
    js, ts = ctx["sync"]
    size = dict(ctx["model_size"], device="cuda" if dev["jitad_ok"] else "cpu",
                torch_device="cuda" if ctx["torch_timed"] else "cpu")
    row = {"model": model, "title": models.TITLES[model] + (" (shrunk)" if ctx["sim"] else ""),
           "results": {}, "errors": {}, "check": [],
           "mismatch": False}
    bar.set_postfix_str(f"{model}: building")
    try:
        spec = models.BUILDERS[model]({"jitad": jitad, "torch": torch, "jax": None}, size)
    except Exception as e:
        row["errors"]["build"] = describe(e)
        bar.update(1)
        return row
    runners = spec["runners"]
    if not dev["jitad_ok"]:
        for k in [k for k in runners if k.startswith("jitad")]:
            row["results"][k] = "not available"
            del runners[k]
    timed = [k for k in runners if k != models.TORCH or ctx["torch_timed"]]
    if models.TORCH in runners:
        runners[models.TORCH].label = TORCH_CUDA if ctx["torch_timed"] else "PyTorch CPU (loss reference, not timed)"
    if not ctx["torch_timed"]:
        row["results"]["torch"] = ctx["torch_reason"]
    row.update(unit=spec["unit"], iters=spec["iters"], unit_name=spec["unit_name"], check_steps=spec["check"])
    bar.total = ((getattr(bar, "total", 0) or 0) + len(runners) * (1 + ctx["separate_warm"])
                 + len(timed) * ctx["model_size"]["repeats"])
    getattr(bar, "refresh", lambda: None)()

    def attempt(name, what, fn):
        try:
            return fn()
        except Exception as e:
            row["errors"][name] = dict(describe(e), phase=what)
            row["results"][name] = "error"
            runners.pop(name, None)
            if name in timed:
                timed.remove(name)
        return None

    # The first call compiles (jitad: trace, program, every kernel at its first launch);
    # under the simulator the loss check's run is the first call (each iteration costs).
    first, check = {}, {}
    for name in list(runners):
        sync = ts if name == models.TORCH else js
        start = time.perf_counter()
        if ctx["separate_warm"]:
            bar.set_postfix_str(f"{model}: compiling {name}")
            attempt(name, "first call", lambda: (runners[name].warm(), sync()))
            if name in runners:
                first[name] = time.perf_counter() - start
            bar.update(1)
        if name in runners:
            bar.set_postfix_str(f"{model}: loss check, {name}")
            out = attempt(name, "loss check", lambda: (runners[name].run(spec["check"], True), sync())[0])
            if name in runners:
                check[name] = out
                first.setdefault(name, time.perf_counter() - start)
        bar.update(1)
    ref = models.TORCH if models.TORCH in check else "jitad_step" if "jitad_step" in check else None
    for name in list(check):
        if name == ref:
            continue
        try:
            row["check"] += models.check_losses(model, {ref: runners[ref], name: runners[name]},
                                                {ref: check[ref], name: check[name]})
        except models.LossMismatch as e:
            row["errors"][name] = {"error": f"loss mismatch: {e}", "mismatch": True, "phase": "loss check"}
            row["results"][name] = "mismatch"
            row["mismatch"] = True
            if name in timed:
                timed.remove(name)
    if ref is None or len(check) < 2:
        row["check"].append(f"{model}: no loss check (fewer than two comparators ran)")
    samples = {name: [] for name in timed}
    for rep in range(ctx["model_size"]["repeats"]):
        for name in list(timed):
            bar.set_postfix_str(f"{model}: repeat {rep + 1}/{ctx['model_size']['repeats']}, {name}")
            sync = ts if name == models.TORCH else js

            def one(name=name, sync=sync):
                sync()
                start = time.perf_counter()
                runners[name].run(spec["iters"], False)
                sync()
                return time.perf_counter() - start
            t = attempt(name, "timed run", one)
            if t is not None:
                samples[name].append(t)
            bar.update(1)
    for name in timed:
        s, r = samples[name], runners[name]
        row["results"][name] = {
            "label": r.label, "median_s": statistics.median(s), "min_s": min(s), "max_s": max(s),
            "repeats": len(s), "samples_s": s, "per_iter_us": statistics.median(s) / spec["iters"] * 1e6,
            "first_call_s": first.get(name), "compile_s": r.compile_s if r.jitad else None}
    for name, r in runners.items():
        if name not in timed and name not in row["results"]:
            row["results"][name] = r.label
    jit = {k: v for k, v in row["results"].items() if k.startswith("jitad") and isinstance(v, dict)}
    tr = row["results"].get(models.TORCH)
    if jit:
        row["best_jitad"] = min(jit, key=lambda k: jit[k]["median_s"])
        if isinstance(tr, dict):
            row["ratio"] = tr["median_s"] / jit[row["best_jitad"]]["median_s"]
    return row


# -- goals and the report ------------------------------------------------------------------

def goals(points, rows, dev, quick):
    out = []
    mark = lambda ok: "✓" if ok else "✗"
    if dev["sim"]:
        return ["not evaluated: CUDA simulator (a smoke check of the code paths, not a measurement)"]
    why_not = None if dev["torch_ok"] else f"PyTorch CUDA {dev.get('torch_why')}"
    if not dev["jitad_ok"]:
        why_not = f"jitad's GPU backend is not available ({dev.get('jitad_why')})"
    for name, target in KERNEL_GOALS.items():
        pts = [p for p in points if p["case"] == name]
        if not pts:
            continue
        p = max(pts, key=lambda p: p["n"])
        j, t = p["results"].get("jitad"), p["results"].get("torch")
        head = f"{name} kernel at n = 10^8: jitad within {target:g}× PyTorch CUDA's time"
        if why_not:
            out.append(f"? {head}: not evaluated, {why_not}")
        elif not (isinstance(j, dict) and isinstance(t, dict)):
            out.append(f"✗ {head}: not measured (jitad {j if not isinstance(j, dict) else 'ok'}, "
                       f"PyTorch {t if not isinstance(t, dict) else 'ok'})")
        elif p["n"] != GOAL_N:
            r = j["median_us"] / t["median_us"]
            out.append(f"? {head}: not evaluated, this run's largest n is {p['n']:,} "
                       f"(there jitad takes {r:.2f}× PyTorch's time)")
        else:
            r = j["median_us"] / t["median_us"]
            out.append(f"{mark(r <= target)} {head}: jitad takes {r:.2f}× PyTorch CUDA's time "
                       f"({harness.fmt_us(j['median_us'])} vs {harness.fmt_us(t['median_us'])} µs; "
                       f"goal ≤ {target:g}×)")
    for row in rows:
        target = MODEL_GOALS.get(row["model"])
        head = f"{row['title']} training"
        if target is None:
            if "ratio" in row:
                out.append(f"· {head}: no goal set; PyTorch CUDA takes {row['ratio']:.2f}× jitad's time "
                           f"(for information)")
            continue
        head += f": jitad ≥ {target:g}× PyTorch CUDA (PyTorch time / jitad time)"
        if why_not:
            out.append(f"? {head}: not evaluated, {why_not}")
        elif "ratio" not in row:
            out.append(f"✗ {head}: not measured (see Errors)")
        else:
            best = row["results"][row["best_jitad"]]["label"]
            out.append(f"{mark(row['ratio'] >= target)} {head}: {row['ratio']:.2f}× with {best}"
                       + (" (quick run: tiny timed units, one repeat: indicative only)" if quick else ""))
    return out


def _s(x):
    return "—" if x is None else f"{x:.3f}" if x < 10 else f"{x:.1f}"


def _cell_s(entry):
    if not isinstance(entry, dict):
        return str(entry)
    return f"{_s(entry['median_s'])} ({_s(entry['min_s'])}–{_s(entry['max_s'])})"


def markdown(info, points, rows, goal_lines, notes, dev):
    s = info["settings"]
    out = ["# jitad GPU benchmarks", ""]
    if dev["sim"]:
        out += ["**CUDA simulator — not a performance measurement.** Every case ran at tiny sizes "
                "(tiny model dimensions too) on numba's CUDA simulator, as a smoke check of the code "
                "paths" + ("; PyTorch ran on the CPU as the models' loss reference only"
                           if dev["torch_version"] else "")
                + ". The times below are the simulator's (one Python thread per GPU thread).", ""]
    elif s["quick"]:
        out += ["**QUICK MODE (tiny sizes, 1 repeat): a smoke test, not a measurement.**", ""]
    out += [f"{info['date']} · device: **{info['device']}** · Python {info['python']} · {info['platform']} · "
            f"{info['cpu_count']} CPUs · kernels in {s['dtype']}, models in float64 · median of "
            f"{s['repeats']} repeats (kernels; {s['model_repeats']} for the models) after warm-up, "
            "interleaved between jitad and PyTorch", ""]
    out += [f"- {line}" for line in info["device_lines"]]
    out += ["", "Versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()), ""]
    if points:
        out += ["## Kernels", "",
                "µs per call from Python, each call followed by a synchronization; inputs are device "
                "arrays made before timing (no host copy is timed). jitad returns a fresh device array "
                "(its allocation and the copy out of jitad's arena are timed), a scalar as a Python "
                "float (PyTorch: `.item()`). Spread is the min–max over the repeats. PyTorch/jitad > 1 "
                "means jitad is faster. Rate: bytes read + written per second (the matmul: "
                "2n³ FLOP/s). First call: the jitad function's first call at this shape (trace, "
                "program, numba kernel compiles, the run).", "",
                "| case | n | jitad µs | spread | PyTorch CUDA µs | spread | PyTorch / jitad | jitad rate "
                "| PyTorch rate | jitad first call s |", "|---|---|---|---|---|---|---|---|---|---|"]
        for p in points:
            j, t = p["results"].get("jitad"), p["results"].get("torch")
            sp = lambda e: (f"{harness.fmt_us(e['min_us'])}–{harness.fmt_us(e['max_us'])}"
                            if isinstance(e, dict) else "—")
            ratio = (f"**{t['median_us'] / j['median_us']:.2f}**"
                     if isinstance(j, dict) and isinstance(t, dict) else "—")
            rate = lambda k: (f"{p['rate'][k]:,.1f} {p['rate_unit']}" if k in p.get("rate", {}) and not dev["sim"]
                              else "—")
            fc = p["first_call_s"].get("jitad")
            out.append(f"| {p['case']} | {p['label']} | {harness.cell(j) if j else '—'} | {sp(j)} | "
                       f"{harness.cell(t) if t else '—'} | {sp(t)} | {ratio} | {rate('jitad')} | {rate('torch')} | "
                       f"{_s(fc)} |")
    if rows:
        out += ["", "## Models", "",
                "Seconds for the timed unit: median (min–max); every run ends with a synchronization "
                "(the losses are read back each step in all comparators). jitad (a): a Python loop over "
                "a `jit_grad(device='cuda')` step and a jitted update; (b): the whole loop in one "
                "`jit(device='cuda')`. PyTorch / jitad uses the better jitad variant; > 1 means jitad "
                "is faster. First call s: the first iteration (jitad: trace, program and kernel "
                "compiles; in brackets jitad's `compile_seconds`, trace + program only).", "",
                "| model | timed unit | jitad (a) step loop s | jitad (b) staged loop s | PyTorch CUDA s "
                "| PyTorch / jitad | µs / iter (a / b / PyTorch) | first call s (a / b / PyTorch) |",
                "|---|---|---|---|---|---|---|---|"]
        for row in rows:
            r = row["results"]
            if "unit" not in row:
                out.append(f"| {row['title']} | — | error | error | — | — | — | — |")
                continue
            per = lambda k: f"{r[k]['per_iter_us']:,.0f}" if isinstance(r.get(k), dict) else "—"
            fc = lambda k: (_s(r[k]["first_call_s"])
                            + (f" [{_s(r[k]['compile_s'])}]" if r[k].get("compile_s") is not None else "")
                            if isinstance(r.get(k), dict) else "—")
            out.append(f"| {row['title']} | {row['unit']} | {_cell_s(r.get('jitad_step', '—'))} | "
                       f"{_cell_s(r.get('jitad_loop', '—'))} | {_cell_s(r.get('torch', '—'))} | "
                       + (f"**{row['ratio']:.2f}**" if "ratio" in row else "—")
                       + f" | {per('jitad_step')} / {per('jitad_loop')} / {per('torch')} | "
                       f"{fc('jitad_step')} / {fc('jitad_loop')} / {fc('torch')} |")
    out += ["", "## Goals (the GPU issue)", ""] + [f"- {g}" for g in goal_lines]
    checks = [f"{p['case']} n={p['label']}: " + ", ".join(f"{k} {v}" for k, v in p["checks"].items())
              for p in points if p["checks"]] + [c for row in rows for c in row.get("check", [])]
    if checks:
        out += ["", "## Value and loss checks", ""] + [f"- {c}" for c in checks]
    errors = [error_line(f"{p['case']} n={p['label']}", k, rec) for p in points for k, rec in p["errors"].items()]
    errors += [error_line(row["title"], k + (f" ({rec['phase']})" if rec.get("phase") else ""), rec)
               for row in rows for k, rec in row["errors"].items()]
    if errors:
        out += ["", "## Errors", "", "Cases that raised or computed wrong values; they are not timed "
                "(the traceback tails are in the .json).", ""] + [f"- {e}" for e in errors]
    if notes:
        out += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"


# -- the command -------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.gpu", description=__doc__.splitlines()[0])
    harness.add_common_options(ap, "the GPU code paths", "gpu", "gpu_quick",
                               "a few minutes on the CUDA simulator")
    ap.add_argument("--case", action="append", choices=CASES,
                    help="run only this case (repeatable); default all: " + ", ".join(CASES))
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                    help="dtype of the kernel cases (the models are float64); default float64")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    size = harness.sizes_from(args, FULL, QUICK)   # before jitad is imported: the disk cache setting
    dev = detect()
    lines = device_lines(dev)
    if dev["sim"] and not dev["jitad_ok"]:   # the smoke test's own failure: a jitad bug
        print("\n".join(lines) + "\njitad's GPU backend fails on the CUDA simulator: nothing run.")
        return 1
    if not dev["jitad_ok"] and not dev["torch_ok"]:
        print("\n".join(lines) + "\nNo GPU here, for jitad or for PyTorch: nothing measured, nothing "
              "written. (A smoke test of the code paths without a GPU: NUMBA_ENABLE_CUDASIM=1 "
              "python -m bench.gpu --quick; NUMBA_ENABLE_CUDASIM must be set before numba is imported.)")
        return 0
    for line in lines:
        print(line, file=sys.stderr)
    if dev["sim"] and not args.quick:
        print("CUDA simulator: only --quick runs there (one Python thread per GPU thread); running "
              "--quick", file=sys.stderr)
        args.quick = True
        size = harness.sizes_from(args, FULL, QUICK)
    model_size = dict(SIM_MODELS if dev["sim"] else size["models"])
    if args.repeats:
        model_size["repeats"] = args.repeats
    wanted = args.case or list(CASES)
    out = args.out or os.path.join(HERE, "results", "gpu_quick" if args.quick else "gpu")
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = harness.NoBar
    torch_timed = dev["torch_ok"] and not dev["sim"]
    if torch_timed:
        import torch
        torch.backends.cuda.matmul.allow_tf32 = False   # float32 matmuls in float32
        torch.backends.cudnn.allow_tf32 = False
    ctx = {"dtype": args.dtype, "rtol": RTOL[args.dtype], "repeats": size["repeats"],
           "target_s": size["target_s"], "sync": sync_functions(dev), "jitad_fns": {},
           "torch_timed": torch_timed, "model_size": model_size, "separate_warm": not dev["sim"], "sim": dev["sim"],
           "torch_reason": "not timed (CUDA simulator)" if dev["sim"] else dev.get("torch_why", "")}
    import jitad
    specs = kernel_specs(jitad)
    kernel_cases = [c for c in wanted if c in KERNELS]
    n_points = sum(len(size["sides"] if c == "matmul" else size["ns"]) for c in kernel_cases)
    points, rows = [], []
    with tqdm(total=n_points, desc="bench.gpu", unit="run", file=sys.stderr) as bar:
        for case in kernel_cases:
            for n in (size["sides"] if case == "matmul" else size["ns"]):
                points.append(run_kernel(case, specs[case], n, dev, ctx, bar))
            ctx["jitad_fns"].pop(case, None)   # frees its compiled programs' device memory
        with sim_dimensions(dev["sim"]):
            for model in [c for c in wanted if c in models.MODELS]:
                rows.append(run_model(model, dev, ctx, bar))
    info = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "device": dev["name"],
            "device_lines": lines, "gpu": dev["gpu"], "simulator": dev["sim"],
            "python": sys.version.split()[0], "platform": platform.platform(), "cpu_count": os.cpu_count(),
            "versions": {k: v for k, v in dev["versions"].items() if v},
            "settings": {"quick": args.quick, "dtype": args.dtype, "repeats": size["repeats"],
                         "target_s": size["target_s"], "ns": size["ns"], "sides": size["sides"],
                         "model_repeats": model_size["repeats"],
                         "model_sizes": {k: v for k, v in model_size.items()
                                         if k not in ("scan_buckets", "jax_loop", "tree_rec")},
                         "model_dims": ({k: getattr(models, k) for k in SIM_DIMS} if not dev["sim"] else
                                        {k: dict(getattr(models, k), **v) for k, v in SIM_DIMS.items()})}}
    info["wall_s"] = round(time.perf_counter() - start, 1)
    notes = [
        f"Kernels: {', '.join(specs[c]['what'] for c in kernel_cases)}, all with device='cuda'; PyTorch: "
        "the same expressions on CUDA tensors"
        + (" (the gradient with `torch.autograd.grad`)" if "elementwise_grad" in kernel_cases else "")
        + (" (the sum with `.item()`, as jitad returns a Python float)" if "reduction" in kernel_cases else "")
        + f". Values are checked against NumPy on the host before timing (rtol {ctx['rtol']:g} "
        "relative to the magnitude of the terms"
        + ("; the matmul on 8 sampled rows" if "matmul" in kernel_cases else "")
        + ")." if kernel_cases else None,
        "Models: bench/models.py's definitions and timed units "
        + ("(with the dimensions shrunk for the simulator: " + ", ".join(f"{k} {v}" for k, v in SIM_DIMS.items()) + ")"
           if dev["sim"] else f"({model_size['rnn_iters']} RNN/LSTM iterations, {model_size['tree_count']} "
           f"trees, {model_size['cnn_steps']} CNN steps of 100 images)")
        + "; jitad's parameters and data are numba device arrays made once (`models.on_device`), "
          "PyTorch's CUDA tensors; every comparator's losses over the loss check's "
          f"{model_size['check']} steps ({model_size['cnn_check']} for the CNN) must equal PyTorch's to "
          f"{models.LOSS_RTOL:g} relative (PyTorch on the CPU where it has no CUDA), else the "
          "comparator is reported as a mismatch and not timed. The CNN's timed runs use each "
          "one's own dropout; its loss check uses jitad's masks." if rows else None,
        "The TreeLSTM keeps its trees on the host (jitad's GPU backend walks them from Python, "
        "as PyTorch's recursion does); its kernels run per node." if "treelstm" in wanted else None,
        f"Wall time of this run: {info['wall_s']} s."]
    notes = [n for n in notes if n]
    met = goals(points, rows, dev, args.quick)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".json", "w") as f:
        json.dump({"info": info, "kernels": points, "models": rows, "goals": met, "notes": notes}, f,
                  indent=1, default=str)
    text = markdown(info, points, rows, met, notes, dev)
    with open(out + ".md", "w") as f:
        f.write(text)
    print(text)
    print(f"wrote {out}.md and {out}.json in {info['wall_s']} s", file=sys.stderr)
    mismatch = any(rec.get("mismatch") for p in points for rec in p["errors"].values()) or \
        any(row.get("mismatch") for row in rows)
    if mismatch:
        print("VALUE OR LOSS MISMATCH: see the Errors section", file=sys.stderr)
    return 1 if mismatch else 0


if __name__ == "__main__":
    sys.exit(main())
