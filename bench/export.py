"""The exported gradient called from C: `python -m bench.export [--quick]`.

For the micro cases of BENCHMARKS.md (scalar_mult, rotate_vec_by_quat, dot n=1000,
sum_mat_vec 100×100) and a batched MLP (128 examples, 64-128-10, tanh, cross-entropy:
products beyond jitad's own kernels, which the library sends to the system's BLAS), side
by side on one machine:

- C: `jitad.export(..., grad=True)`, `<name>_grad` called in a loop from a C program
  (no Python in the process): ns per call, the fastest of 5 rounds;
- jitad from Python: the same function's `jitad.jit(jitad.value_and_grad(...))`, called from Python;
- by hand: the hand-written gradients of `bench/byhand.py` and `bench/tensors.py` in
  numba, the MLP's in NumPy (its products on NumPy's OpenBLAS).

Every comparator's gradient is checked against jitad's before timing. Rounds alternate
the comparators (5 rounds; 1 with --quick); each gives the fastest of its repeats (wall
clock) and the CPU time of all of them per call (the C program's process, startup
included, or this one): on a shared machine, the CPU time is the steadier figure.
"""
import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
import timeit

import numpy as np

from . import byhand
from .functions import rotate

C_LOOP = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "NAME.h"
int main(int argc, char **argv) {
    static char buffers[NIN + NOUT][BYTES];
    FILE *f = fopen(argv[1], "rb");
    void *in[NIN + 1], *out[NOUT + 1];
    for (int i = 0; i < NIN; i++) { in[i] = buffers[i]; if (fread(in[i], 1, SIZE_i, f) == 0) return 3; }
    fclose(f);
    for (int j = 0; j < NOUT; j++) out[j] = buffers[NIN + j];
    long calls = atol(argv[2]);
    for (int round = 0; round < 5; round++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long k = 0; k < calls; k++)
            if (NAME_grad((const void *const *)in, out)) return 1;
        clock_gettime(CLOCK_MONOTONIC, &b);
        printf("%.3f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / calls);
    }
    return 0;
}
"""


def _mlp_loss(jitad):
    def loss(params, x, y):
        w1, b1, w2, b2 = params
        z = jitad.tanh(x @ w1 + b1) @ w2 + b2
        return -jitad.sum(y * (z - jitad.logsumexp(z, axis=1, keepdims=True))) / x.shape[0]
    return loss


def _mlp_by_hand(params, x, y):
    """The MLP's loss and gradients w.r.t. the parameters, in NumPy."""
    w1, b1, w2, b2 = params
    h = np.tanh(x @ w1 + b1)
    z = h @ w2 + b2
    z = z - z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=1, keepdims=True))
    gz = (np.exp(z - lse) * y.sum(axis=1, keepdims=True) - y) / x.shape[0]
    ga = (gz @ w2.T) * (1.0 - h * h)
    return -np.sum(y * (z - lse)) / x.shape[0], (x.T @ ga, ga.sum(axis=0), h.T @ gz, gz.sum(axis=0))


def cases(jitad, numba_cases):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=1000), rng.normal(size=1000)
    A, v = rng.normal(size=(100, 100)), rng.normal(size=100)
    v3, q4 = (1.0, 2.0, 3.0), (4.0, 5.0, 6.0, 7.0)
    mlp = ((rng.normal(size=(64, 128)) * 0.1, np.zeros(128), rng.normal(size=(128, 10)) * 0.1, np.zeros(10)),
           rng.normal(size=(128, 64)), np.eye(10)[rng.integers(0, 10, 128)])
    return {
        "scalar_mult": (lambda x, y: x * y, (3.0, 4.0), (0, 1), lambda: byhand.scalar_mult(3.0, 4.0)),
        "rotate_vec_by_quat": (rotate, (v3, q4), (0, 1), lambda: byhand.rotate(v3, q4)),
        "dot": (lambda a, b: jitad.sum(a * b), (a, b), (0, 1), lambda: numba_cases["dot"](a, b)),
        "sum_mat_vec": (lambda A, v: jitad.sum(A @ v), (A, v), (0, 1), lambda: numba_cases["sum_mat_vec"](A, v)),
        "mlp": (_mlp_loss(jitad), mlp, 0, lambda: _mlp_by_hand(*mlp)),
    }


def _c_timer(jitad, name, f, args, argnums, tmp, calls):
    ex = jitad.export(f, *args, path=tmp, name=name, grad=True, argnums=argnums)
    leaves = jitad.tree_leaves(args)
    data = os.path.join(tmp, name + ".bin")
    sizes = [np.asarray(x, dtype=np.float64).nbytes for x in leaves]
    with open(data, "wb") as fh:
        for x in leaves:
            fh.write(np.asarray(x, dtype=np.float64).tobytes())
    src = C_LOOP.replace("NAME", name).replace("NIN", str(len(ex.inputs))).replace("NOUT", str(len(ex.grad_outputs)))
    src = src.replace("BYTES", str(max(sizes + [8 * int(np.prod(o.shape)) for o in ex.grad_outputs])))
    src = src.replace("SIZE_i", "(size_t)(long[]){%s}[i]" % ", ".join(map(str, sizes)))
    c_file, exe = os.path.join(tmp, name + "_bench.c"), os.path.join(tmp, name + "_bench")
    with open(c_file, "w") as fh:
        fh.write(src)
    subprocess.run(["cc", "-O2", "-o", exe, c_file, f"-I{tmp}", f"-L{tmp}", f"-l{name}", f"-Wl,-rpath,{tmp}"],
                   check=True)
    got = ex.call(*args, grad=True)
    want_value, want_grads = jitad.value_and_grad(f, argnums=argnums)(*args)
    for x, y in zip(got, [want_value] + jitad.tree_leaves(want_grads)):
        np.testing.assert_allclose(np.ravel(x), np.ravel(y), rtol=1e-9, atol=1e-14)

    def run():
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run([exe, data, str(calls)], capture_output=True, text=True, check=True).stdout.split()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / (len(out) * calls) * 1e9
        return min(float(t) for t in out), cpu   # as Python's: the fastest round (the least disturbed)
    return run


def _py_timer(fn, number):
    def run():
        cpu = time.process_time()
        wall = min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e9
        return wall, (time.process_time() - cpu) / (5 * number) * 1e9
    return run


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    import jitad
    import numba

    from .tensors import _numba_cases
    numba_cases = _numba_cases(numba)
    rounds, calls = (1, 2000) if args.quick else (5, 200_000)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (f, fargs, argnums, byhand_fn) in cases(jitad, numba_cases).items():
            vg = jitad.jit(jitad.value_and_grad(f, argnums=argnums))
            vg(*fargs)
            byhand_fn()
            want = jitad.tree_leaves(vg(*fargs))
            np.testing.assert_allclose(np.concatenate([np.ravel(x) for x in jitad.tree_leaves(byhand_fn())]),
                                       np.concatenate([np.ravel(x) for x in want]), rtol=1e-9)
            heavy = {"dot": 20, "sum_mat_vec": 20, "mlp": 1000}.get(name, 1)
            timers = {"C (exported)": _c_timer(jitad, name, f, fargs, argnums, tmp, calls // heavy),
                      "jitad from Python": _py_timer(lambda: vg(*fargs), max(1, calls // (5 * heavy))),
                      "by hand": _py_timer(byhand_fn, max(1, calls // (5 * heavy)))}
            samples = {k: [] for k in timers}
            for _ in range(rounds):
                for k, t in timers.items():
                    samples[k].append(t())
            rows.append((name, {k: np.median(np.array(s), axis=0) for k, s in samples.items()},
                         {k: (min(w for w, _ in s), max(w for w, _ in s)) for k, s in samples.items()}))
    lines = ["| case | C (exported) ns | jitad from Python ns | by hand ns | C / Python | C / by hand "
             "| CPU ns: C, Python | C / Python (CPU) |", "|---|---|---|---|---|---|---|---|"]
    span = lambda s: f"({s[0]:,.0f}-{s[1]:,.0f})"
    for name, med, spread in rows:
        (c, c_cpu), (p, p_cpu), (n, _) = med["C (exported)"], med["jitad from Python"], med["by hand"]
        lines.append(f"| {name} | {c:,.0f} {span(spread['C (exported)'])} | {p:,.0f} {span(spread['jitad from Python'])} "
                     f"| {n:,.0f} | {c / p:.2f} | {c / n:.2f} | {c_cpu:,.0f}, {p_cpu:,.0f} | {c_cpu / p_cpu:.2f} |")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
