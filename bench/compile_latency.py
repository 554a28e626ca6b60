"""Compile latency of long programs, jitad against JAX: `python -m bench.compile_latency
[--program NAME ...] [--repeats 3] [--quick] [--jitad DIR]`.

The programs are written the way users write them, with Python loops that unroll:

- `rnn_unrolled`: the char-RNN of bench/models.py (vocab 26, hidden 50, 20 steps, batch
  20) as a PyTorch user writes its loss: `for t in range(T)` over the time steps, a dict
  of parameters, `jitad.jit_grad(loss)`; JAX: `jax.jit(jax.value_and_grad(loss))` of the
  same unrolled loop;
- `rnn_scan`: the same model over time with `jitad.FOR` / `jax.lax.scan`;
- `lstm_port`: autograd's `examples/lstm.py` (128 characters, state 40, 30 steps, 50
  sequences, `concat_and_multiply` cells, log-likelihood through `logsumexp`) with
  synthetic one-hot text, its gradient through `jitad.value_and_grad` on NumPy calls;
- `fluid_port`: autograd's `examples/fluidsim/fluidsim.py` (a 50x50 grid, 20 steps of
  advection by bilinear gathers and a 10-sweep pressure projection by `np.roll`) from a
  synthetic smoke blob, the gradient of the distance to a target image;
- `cell_N`: a small recurrent cell (batch 4, hidden 16) unrolled N = 10, 100, 1000 steps:
  compile time must grow linearly in N.

Every measurement is a fresh Python process (cold: jitad's disk cache in a new empty
directory, JAX's persistent cache off) that first compiles a trivial function (LLVM and
XLA start-up not counted), then times the first call (trace, differentiation, compile,
one run), then the median of later calls (the run time). jitad and JAX alternate their
order over the repeats; both must agree on the value (rtol 1e-9). jitad's compile is
split by stage (`compile_report()`). Results: bench/results/compile_latency.{md,json}.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CELLS = (10, 100, 1000)
PROGRAMS = ("rnn_unrolled", "rnn_scan", "lstm_port", "fluid_port") + tuple(f"cell_{n}" for n in CELLS)
TITLES = {"rnn_unrolled": "char-RNN, Python loop over time (unrolled)", "rnn_scan": "char-RNN, FOR / lax.scan",
          "lstm_port": "autograd examples/lstm.py (30 steps unrolled)",
          "fluid_port": "autograd examples/fluidsim.py (20 steps unrolled)",
          **{f"cell_{n}": f"small cell unrolled {n} steps" for n in CELLS}}
STAGES = ("trace", "ad", "passes", "lower", "ir_text", "optimize", "codegen", "wait")
TIMEOUT_S = 900


# -- the programs: `xp` is numpy (jitad stages NumPy calls on its values) or jax.numpy ------

def _lse(fw):
    if fw == "jax":
        from jax.scipy.special import logsumexp
        return logsumexp
    import jitad
    return jitad.logsumexp


def char_rnn(fw, scan):
    """(loss, args) of the char-RNN: summed batch-mean cross-entropy of the next character."""
    from .data import char_batches
    from .models import CHAR, char_params
    V, H, T, B = (CHAR[k] for k in "VHTB")
    params, seq = char_params("rnn"), char_batches(1, T, B, V)[0]
    if fw == "jax":
        import jax
        jnp = jax.numpy
        one_hot, tanh = (lambda s: jax.nn.one_hot(s, V, dtype=jnp.float64)), jnp.tanh

        def xent(logits, labels):
            return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], 1))
    else:
        import jitad
        one_hot, tanh, xent = (lambda s: jitad.one_hot(s, V)), jitad.tanh, jitad.cross_entropy

    def step(p, seq, t, h):
        h = tanh(one_hot(seq[t]) @ p["Wx"] + h @ p["Wh"] + p["b"])
        return h, xent(h @ p["Wy"] + p["by"], seq[t + 1])

    def unrolled(p, seq):
        h, total = np.zeros((B, H)), 0.0
        for t in range(T):
            h, cost = step(p, seq, t, h)
            total = total + cost
        return total

    def scanned(p, seq):
        if fw == "jax":
            def body(h, t):
                return step(p, seq, t, h)
            return jax.numpy.sum(jax.lax.scan(body, jax.numpy.zeros((B, H)), jax.numpy.arange(T))[1])

        def body_j(t, carry):
            h, cost = step(p, seq, t, carry[0])
            return h, carry[1] + cost
        return jitad.FOR(0, T, body_j, (np.zeros((B, H)), 0.0))[1]
    return (scanned if scan else unrolled), (params, seq)


def lstm_port(fw, steps=30, chars=128, state=40, sequences=50):
    """autograd's examples/lstm.py on synthetic text: the negative mean log-likelihood of
    each next character under an LSTM run over `steps` one-hot characters."""
    xp = __import__("jax").numpy if fw == "jax" else np
    lse = _lse(fw)
    rs = np.random.RandomState(0)
    width = chars + state + 1
    params = {"init cells": rs.randn(1, state) * 0.01, "init hiddens": rs.randn(1, state) * 0.01,
              **{gate: rs.randn(width, state) * 0.01 for gate in ("change", "forget", "ingate", "outgate")},
              "predict": rs.randn(state + 1, chars) * 0.01}
    codes = np.random.default_rng(0).integers(32, 127, (steps, sequences))
    text = (codes[:, :, None] == np.arange(chars)).astype(np.float64)   # (steps, sequences, chars)

    def affine(w, *parts):   # [parts..., 1] @ w
        return xp.dot(xp.hstack(parts + (xp.ones((parts[0].shape[0], 1)),)), w)

    def log_probs(p, h):
        out = affine(p["predict"], h)
        return out - lse(out, axis=1, keepdims=True)

    def loss(p, text):
        h = xp.repeat(p["init hiddens"], text.shape[1], axis=0)
        c = xp.repeat(p["init cells"], text.shape[1], axis=0)
        outputs = [log_probs(p, h)]
        for x in text:
            g = 0.5 * (xp.tanh(affine(p["forget"], x, h)) + 1.0)
            i = 0.5 * (xp.tanh(affine(p["ingate"], x, h)) + 1.0)
            o = 0.5 * (xp.tanh(affine(p["outgate"], x, h)) + 1.0)
            c = c * g + i * xp.tanh(affine(p["change"], x, h))
            h = o * xp.tanh(c)
            outputs.append(log_probs(p, h))
        total = 0.0
        for t in range(text.shape[0]):
            total = total + xp.sum(outputs[t] * text[t])
        return -total / (text.shape[0] * text.shape[1])
    return loss, (params, text)


def fluid_port(fw, steps=20, n=50):
    """autograd's examples/fluidsim/fluidsim.py: smoke advected by a velocity field kept
    near divergence-free; the mean squared distance of the final smoke to a target,
    differentiated with respect to the initial velocities (one vector of 2 n^2)."""
    xp = __import__("jax").numpy if fw == "jax" else np

    def roll(a, shift, axis):
        return xp.roll(a, shift, axis=axis)

    def project(vx, vy):
        h = 1.0 / n
        div = -0.5 * h * (roll(vx, -1, 0) - roll(vx, 1, 0) + roll(vy, -1, 1) - roll(vy, 1, 1))
        p = np.zeros((n, n))
        for _ in range(10):   # Gauss-Seidel sweeps
            p = (div + roll(p, 1, 0) + roll(p, -1, 0) + roll(p, 1, 1) + roll(p, -1, 1)) / 4.0
        return (vx - 0.5 * (roll(p, -1, 0) - roll(p, 1, 0)) / h,
                vy - 0.5 * (roll(p, -1, 1) - roll(p, 1, 1)) / h)

    ys, xs = np.meshgrid(np.arange(n), np.arange(n))

    def advect(f, vx, vy):   # each cell takes the bilinear interpolation of f where its flow came from
        cx, cy = (xs - vx).ravel(), (ys - vy).ravel()
        left, top = xp.floor(cx).astype(int), xp.floor(cy).astype(int)
        wx, wy = cx - left, cy - top
        left, top = xp.mod(left, n), xp.mod(top, n)
        right, bottom = xp.mod(left + 1, n), xp.mod(top + 1, n)
        out = (1 - wx) * ((1 - wy) * f[left, top] + wy * f[left, bottom]) \
            + wx * ((1 - wy) * f[right, top] + wy * f[right, bottom])
        return xp.reshape(out, (n, n))

    grid = np.mgrid[0:n, 0:n] / n
    blob = lambda y, x: np.exp(-((grid[1] - x) ** 2 + (grid[0] - y) ** 2) * 30)
    smoke0, target = blob(0.3, 0.5), blob(0.7, 0.5)

    def loss(v, smoke, target):
        vx, vy = xp.reshape(v[:n * n], (n, n)), xp.reshape(v[n * n:], (n, n))
        for _ in range(steps):
            vx, vy = project(advect(vx, vx, vy), advect(vy, vx, vy))
            smoke = advect(smoke, vx, vy)
        return xp.mean((target - smoke) ** 2)
    return loss, (np.random.default_rng(0).normal(0.0, 0.1, 2 * n * n), smoke0, target)


def cell(fw, steps, batch=4, hidden=16):
    """h <- tanh(h W + x_t U + b) for `steps` steps, loss = sum of h_T^2."""
    xp = __import__("jax").numpy if fw == "jax" else np
    r = np.random.default_rng(0)
    params = (r.normal(0, 0.3, (hidden, hidden)), r.normal(0, 0.3, (hidden, hidden)), np.zeros(hidden))
    xs = r.normal(0, 1, (steps, batch, hidden))

    def loss(p, xs):
        W, U, b = p
        h = np.zeros((batch, hidden))
        for t in range(steps):
            h = xp.tanh(h @ W + xs[t] @ U + b)
        return xp.sum(h * h)
    return loss, (params, xs)


def build(name, fw):
    """(the function to time, its arguments): the jitted value and gradient of `name`."""
    if name.startswith("rnn"):
        loss, args = char_rnn(fw, name == "rnn_scan")
    elif name.startswith("cell_"):
        loss, args = cell(fw, int(name[5:]))
    else:
        loss, args = {"lstm_port": lstm_port, "fluid_port": fluid_port}[name](fw)
    if fw == "jax":
        import jax
        return jax.jit(jax.value_and_grad(loss)), args
    import jitad
    return (jitad.jit_grad(loss) if name.startswith("rnn") else jitad.value_and_grad(loss)), args


# -- measuring -----------------------------------------------------------------------------

def child(name, fw):
    """Compile and run `name` once cold in this process, time calls; print one JSON line."""
    from . import harness, models   # noqa: F401  (single-threaded BLAS, XLA on the CPU, as bench.models sets them)
    if fw == "jax":
        import jax
        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_enable_compilation_cache", False)
        jax.jit(lambda x: x + 1.0)(1.0)
        block = jax.block_until_ready
    else:
        import jitad
        jitad.jit(lambda x: x + 1.0)(1.0)
        block = lambda x: x
    f, args = build(name, fw)
    cpu, start = time.process_time(), time.perf_counter()
    value, _ = block(f(*args))
    first, cpu = time.perf_counter() - start, time.process_time() - cpu
    runs, spent = [], 0.0
    while len(runs) < 5 or (spent < 2.0 and len(runs) < 200):
        t = time.perf_counter()
        block(f(*args))
        runs.append(time.perf_counter() - t)
        spent += runs[-1]
    out = {"compile_s": first, "compile_cpu_s": cpu, "run_s": statistics.median(runs), "value": float(value)}
    if fw == "jitad":
        report = f.compile_report()
        out.update(compile_s=report.total, stages={s: report[s] for s in STAGES}, cache=report.cache)
    print(json.dumps(out))


def _spawn(name, fw, jitad_dir=None):
    with tempfile.TemporaryDirectory(prefix="jitad-latency-") as cache:
        # the compile is what is measured: `value_and_grad` from Python would interpret its first calls
        env = dict(os.environ, JITAD_CACHE_DIR=cache, OPENBLAS_NUM_THREADS="1", JITAD_TIERING="compile")
        cwd = os.path.dirname(HERE)
        if jitad_dir:   # another checkout's jitad with this bench package
            cwd = tempfile.mkdtemp(prefix="jitad-bench-")
            os.symlink(HERE, os.path.join(cwd, "bench"))
            env["PYTHONPATH"] = os.pathsep.join([jitad_dir, cwd])
        cmd = [sys.executable, "-m", "bench.compile_latency", "--child", name, "--framework", fw]
        try:
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=cwd, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return {"timeout": TIMEOUT_S}
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(names, repeats, frameworks=("jitad", "jax"), jitad_dir=None):
    results = {}
    for name in names:
        runs = {fw: [] for fw in frameworks}
        for rep in range(repeats):
            for fw in (frameworks if rep % 2 == 0 else frameworks[::-1]):
                runs[fw].append(_spawn(name, fw, jitad_dir if fw == "jitad" else None))
        values = [r["value"] for fw in frameworks for r in runs[fw] if "value" in r]
        if values and not np.allclose(values, values[0], rtol=1e-9, atol=0):
            raise RuntimeError(f"{name}: jitad and JAX disagree on the value: {values}")
        results[name] = runs
        print(f"{name}: " + ", ".join(f"{fw} {_fmt(_med(runs[fw], 'compile_s'))} s" for fw in frameworks),
              file=sys.stderr)
    return results


def _med(runs, key):
    values = [r[key] for r in runs if key in r]
    return (statistics.median(values), min(values), max(values)) if values else None


def _fmt(m, scale=1.0, digits=2):
    return "—" if m is None else f"{m[0] * scale:.{digits}f}"


def markdown(results, title):
    out = [f"# {title}", "",
           "Cold compile (first call: trace, differentiation, compile, one run), fresh process each, "
           "median (min–max) over the repeats, jitad and JAX alternating; run = median time of a "
           "later call. Ratio = jitad / JAX (wall). CPU s = the process's CPU time during the first "
           "call (all its threads: JAX compiles on several, jitad on two).", "",
           "| program | jitad compile s | JAX compile s | ratio | CPU s: jitad / JAX | jitad run ms | JAX run ms |",
           "|---|---|---|---|---|---|---|"]
    for name, runs in results.items():
        j, x = _med(runs.get("jitad", []), "compile_s"), _med(runs.get("jax", []), "compile_s")
        timeouts = [fw for fw in runs if any("timeout" in r for r in runs[fw])]
        cells = [f"{j[0]:.2f} ({j[1]:.2f}–{j[2]:.2f})" if j else "timeout" if "jitad" in timeouts else "—",
                 f"{x[0]:.2f} ({x[1]:.2f}–{x[2]:.2f})" if x else f"> {TIMEOUT_S}" if "jax" in timeouts else "—",
                 f"**{j[0] / x[0]:.2f}**" if j and x else "—",
                 f"{_fmt(_med(runs.get('jitad', []), 'compile_cpu_s'))} / {_fmt(_med(runs.get('jax', []), 'compile_cpu_s'))}",
                 _fmt(_med(runs.get("jitad", []), "run_s"), 1e3, 3), _fmt(_med(runs.get("jax", []), "run_s"), 1e3, 3)]
        out.append(f"| {TITLES[name]} | " + " | ".join(cells) + " |")
    out += ["", "jitad's compile by stage (ms, median):", "",
            "| program | " + " | ".join(STAGES) + " | total |", "|---|" + "---|" * (len(STAGES) + 1)]
    for name, runs in results.items():
        done = [r for r in runs.get("jitad", []) if "stages" in r]
        if done:
            out.append(f"| {TITLES[name]} | " + " | ".join(
                f"{statistics.median(r['stages'][s] for r in done) * 1e3:.0f}" for s in STAGES)
                + f" | {statistics.median(r['compile_s'] for r in done) * 1e3:.0f} |")
    cells = [n for n in results if n.startswith("cell_") and _med(results[n].get("jitad", []), "compile_s")]
    if len(cells) > 1:
        ns = [int(n[5:]) for n in cells]
        out += ["", f"jitad's compile time against the steps unrolled ({', '.join(map(str, ns))} steps): the "
                "log–log slope (1 = linear; a fixed part makes it less) and the cost of each added step between "
                "consecutive sizes (equal costs = linear growth, rising ones = worse):", ""]
        for key, what in (("compile_s", "wall"), ("compile_cpu_s", "CPU")):
            ts = [_med(results[n]["jitad"], key)[0] for n in cells]
            slope = np.polyfit(np.log(ns), np.log(ts), 1)[0]
            steps = ", ".join(f"{ns[i]}→{ns[i + 1]}: {(ts[i + 1] - ts[i]) / (ns[i + 1] - ns[i]) * 1e3:.2f} ms"
                              for i in range(len(ns) - 1))
            out.append(f"- {what}: slope **{slope:.2f}**; per added step {steps}")
    return "\n".join(out) + "\n"


def merge(paths):
    """The results of several runs' JSON files (later ones add repeats to earlier ones)."""
    results = {}
    for path in paths:
        with open(path) as f:
            for name, runs in json.load(f)["results"].items():
                for fw, rs in runs.items():
                    results.setdefault(name, {}).setdefault(fw, []).extend(rs)
    return results


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.compile_latency", description=__doc__.splitlines()[0])
    ap.add_argument("--program", action="append", choices=PROGRAMS, help="only this program (repeatable)")
    ap.add_argument("--repeats", type=int, default=3, help="cold processes per program and framework (default 3)")
    ap.add_argument("--quick", action="store_true", help="one repeat of rnn_unrolled and cell_10, cell_100: a smoke test")
    ap.add_argument("--no-jax", action="store_true", help="jitad only")
    ap.add_argument("--jitad", help="directory holding the jitad package to measure (default: this checkout's)")
    ap.add_argument("--out", help="results path without extension (default bench/results/compile_latency)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--framework", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child, args.framework)
        return 0
    names = ["rnn_unrolled", "cell_10", "cell_100"] if args.quick else (args.program or list(PROGRAMS))
    frameworks = ("jitad",) if args.no_jax else ("jitad", "jax")
    results = measure(names, 1 if args.quick else args.repeats, frameworks, args.jitad)
    out = args.out or os.path.join(HERE, "results", "compile_latency_quick" if args.quick else "compile_latency")
    from . import harness
    harness.save_results(out, results, markdown(results, "jitad compile latency on long programs, against JAX"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
