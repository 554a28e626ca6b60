"""Data-parallel scaling: `python -m bench.distributed [--quick]` starts itself under
`mpiexec -n 1` and `-n 2` and prints, for each,
- examples per second of a compute-bound training step (an MLP 256-1024-1024-10, global
  batch 512 split over the processes, the gradient averaged by an allreduce inside the
  compiled FOR loop),
- the time of one eager `allreduce` (sum of f64 arrays) against the message size.
Needs the `mpi` extra (`pip install 'jitad[mpi]'`).
"""
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

BATCH, WIDTH, STEPS = 2048, 1024, 10
SIZES = [8 << (2 * k) for k in range(11)]   # 8 B .. 8 MiB


def worker(quick):
    import jitad
    from jitad import FOR, distributed as dist
    dist.init()
    rank, size = dist.rank(), dist.size()
    rng = np.random.default_rng(0)
    sizes = [256, WIDTH, WIDTH, 10]
    params = [(rng.standard_normal((a, b)) / np.sqrt(a), np.zeros(b)) for a, b in zip(sizes, sizes[1:])]
    x, y = dist.shard((rng.standard_normal((BATCH, 256)), rng.standard_normal((BATCH, 10))))

    def loss(p, x, y):
        for w, b in p[:-1]:
            x = jitad.tanh(x @ w + b)
        return jitad.mean((x @ p[-1][0] + p[-1][1] - y) ** 2)

    @jitad.jit
    def train(p, x, y):
        def body(k, p):
            g = dist.allreduce(jitad.grad(loss)(p, x, y), op="mean")
            return jitad.tree_map(lambda w, g: w - 0.01 * g, p, g)
        return FOR(0, STEPS, body, p)

    train(params, x, y)   # compile
    times = []
    for _ in range(2 if quick else 5):
        dist.allreduce(0.0)   # start together
        start = time.perf_counter()
        train(params, x, y)
        times.append(time.perf_counter() - start)
    result = {"size": size, "examples_per_s": BATCH * STEPS / min(times), "allreduce_us": {}}
    for nbytes in SIZES[:7] if quick else SIZES:
        a = np.ones(nbytes // 8)
        repeats = max(5, min(1000, (1 << 24) // nbytes))
        dist.allreduce(a)
        dist.allreduce(0.0)
        start = time.perf_counter()
        for _ in range(repeats):
            dist.allreduce(a)
        result["allreduce_us"][nbytes] = (time.perf_counter() - start) / repeats * 1e6
    if rank == 0:
        print("RESULT " + json.dumps(result), flush=True)


def main(argv=()):
    mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
    if mpiexec is None:
        print("bench.distributed: no mpiexec; install the extra: pip install 'jitad[mpi]'")
        return 1
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # one core per process, as in `make bench`
    results = {}
    for n in (1, 2):
        done = subprocess.run([mpiexec, "-n", str(n), sys.executable, "-m", "bench.distributed", "--worker"]
                              + list(argv), capture_output=True, text=True, timeout=1800)
        line = [s for s in done.stdout.splitlines() if s.startswith("RESULT ")]
        if done.returncode or not line:
            print(done.stdout + done.stderr)
            return 1
        results[n] = json.loads(line[0][7:])
    one, two = results[1]["examples_per_s"], results[2]["examples_per_s"]
    print(f"MLP 256-{WIDTH}-{WIDTH}-10, global batch {BATCH}, {STEPS} steps per call "
          f"(on {os.cpu_count()} cores):")
    print(f"  1 process: {one:9.0f} examples/s\n  2 processes: {two:7.0f} examples/s  ({two / one:.2f}x)")
    print("allreduce of f64 arrays (sum), 2 processes:")
    for nbytes, us in results[2]["allreduce_us"].items():
        print(f"  {int(nbytes):>9} B: {us:9.1f} us  ({int(nbytes) / us / 1e3:6.2f} GB/s)")
    return 0


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker("--quick" in sys.argv)
    else:
        sys.exit(main(sys.argv[1:]))
