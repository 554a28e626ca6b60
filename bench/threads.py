"""Two Python threads calling compiled functions: `python -m bench.threads [--quick]`.

For each case (a scalar loop, an elementwise array function, the gradient of a
matmul-heavy function), the same number of calls is made by one thread, then split
between two threads; a thread's calls run without the GIL (`docs/threads.md`), so two
threads on two idle cores should reach twice one thread's throughput. Repeats are
interleaved (one thread, two threads, one thread, ...); the table gives the median
calls per second of each and their ratio, with the load average at the start and the
end: on a machine others load, the ratio is lower than the code allows.
"""
import argparse
import os
import statistics
import threading
import time

import numpy as np


def cases(jitad):
    """`{name: (compiled function, argument tuples, one per thread)}`, a call taking ~1 ms."""
    from jitad import FOR
    r = np.random.default_rng(0)
    loop = jitad.jit(lambda x, n: FOR(0, n, lambda i, s: s * 0.999 + x * 1e-3, x))

    def waves(x):
        for _ in range(8):
            x = jitad.sin(x) * 0.9 + 0.1
        return x
    elementwise = jitad.jit(waves)

    def loss(w1, w2, x):
        return jitad.sum(jitad.tanh(jitad.tanh(x @ w1) @ w2) ** 2)
    grad = jitad.jit(jitad.grad(loss, argnums=(0, 1)))
    mats = lambda: (r.standard_normal((128, 128)) * 0.1, r.standard_normal((128, 128)) * 0.1,
                    r.standard_normal((128, 128)))
    return {"scalar loop (FOR, 3e5 steps)": (loop, [(0.5, 300_000), (0.25, 300_000)]),
            "elementwise (8 sin, 2e4 elements)": (elementwise, [(r.standard_normal(20_000),) for _ in range(2)]),
            "gradient (2 matmuls 128x128, tanh)": (grad, [mats() for _ in range(2)])}


def _run(fn, args, calls):
    for _ in range(calls):
        fn(*args)


def throughput(fn, arg_sets, calls, threads):
    """(calls per second, CPU seconds per second) of `calls` calls split between `threads`
    threads. The second is the cores the process got: about 2 for two threads computing in
    parallel on idle cores, less on a busy machine (or where the scheduler gives each
    session a share, as Linux's autogroup does, whatever its thread count)."""
    per = calls // threads
    workers = [threading.Thread(target=_run, args=(fn, arg_sets[k], per)) for k in range(threads)]
    start, cpu = time.perf_counter(), time.process_time()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.perf_counter() - start
    return per * threads / wall, (time.process_time() - cpu) / wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--repeats", type=int, default=None)
    opts = parser.parse_args()
    import jitad
    repeats = opts.repeats or (3 if opts.quick else 9)
    load = os.getloadavg()[0]
    print(f"cores: {os.cpu_count()}, load average at the start: {load:.2f}")
    print(f"{'case':38} {'1 thread/s':>11} {'2 threads/s':>12} {'ratio':>6} {'cores used (1, 2)':>18}")
    for name, (fn, arg_sets) in cases(jitad).items():
        for args in arg_sets:   # compile and warm up
            fn(*args)
        start = time.perf_counter()
        _run(fn, arg_sets[0], 3)
        calls = max(8, int(0.2 / ((time.perf_counter() - start) / 3)) // 2 * 2)   # ~0.2 s of work
        one, two = [], []
        for _ in range(repeats):
            one.append(throughput(fn, arg_sets, calls, 1))
            two.append(throughput(fn, arg_sets, calls, 2))
        (m1, c1), (m2, c2) = [[statistics.median(col) for col in zip(*runs)] for runs in (one, two)]
        print(f"{name:38} {m1:11.0f} {m2:12.0f} {m2 / m1:6.2f} {c1:9.2f} {c2:8.2f}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
