"""`jitad.linalg` speed: `python -m bench.linalg [--sizes 8 64 512]`.

solve, cholesky and slogdet, forward against NumPy (and SciPy's LAPACK wrapper called
directly), gradient against JAX (jit(grad)), at each size, side by side in one process.
Every comparator's value must equal jitad's before anything is timed. Times are the
best of several repeats, in microseconds per call.
"""
import argparse
import time

import numpy as np


def best(fn, *args, budget=0.3):
    fn(*args)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < budget / 3:
        fn(*args)
        n += 1
    reps = max(1, n)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn(*args)
        times.append((time.perf_counter() - t0) / reps)
    return min(times) * 1e6


def cases(n, rng):
    import jax
    import jax.numpy as jnp
    import scipy.linalg
    import jitad
    import jitad.linalg as la
    a = rng.normal(size=(n, n)) + n ** 0.5 * 2 * np.eye(n)
    spd = a @ a.T
    b = rng.normal(size=n)
    w = rng.normal(size=(n, n))
    return [
        ("solve", (a, b), jitad.jit(la.solve), np.linalg.solve,
         lambda a, b: scipy.linalg.lapack.dgesv(a, b)[2],
         jitad.grad(lambda a, b: jitad.sum(la.solve(a, b) * b), argnums=(0, 1)),
         jax.jit(jax.grad(lambda a, b: (jnp.linalg.solve(a, b) * b).sum(), argnums=(0, 1)))),
        ("cholesky", (spd,), jitad.jit(la.cholesky), np.linalg.cholesky,
         lambda s: scipy.linalg.lapack.dpotrf(s, lower=1)[0],
         jitad.grad(lambda s: jitad.sum(la.cholesky(s) * w)),
         jax.jit(jax.grad(lambda s: (jnp.linalg.cholesky(s) * w).sum()))),
        ("slogdet", (a,), jitad.jit(lambda a: la.slogdet(a)[1]), lambda a: np.linalg.slogdet(a)[1],
         lambda a: scipy.linalg.lapack.dgetrf(a)[0],
         jitad.grad(lambda a: la.slogdet(a)[1]),
         jax.jit(jax.grad(lambda a: jnp.linalg.slogdet(a)[1]))),
    ]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--sizes", type=int, nargs="*", default=[8, 64, 512])
    opts = p.parse_args(argv)
    import jax
    jax.config.update("jax_enable_x64", True)
    rng = np.random.default_rng(0)
    print(f"{'op':9} {'n':>4} | {'jitad':>9} {'numpy':>9} {'lapack':>9} | {'jitad grad':>10} {'jax grad':>10}   (us)")
    for n in opts.sizes:
        for name, args, fx, fnp, flapack, gx, gj in cases(n, rng):
            np.testing.assert_allclose(fx(*args), fnp(*args), rtol=1e-8, atol=1e-8)
            wrap = (lambda g: [g]) if len(args) == 1 else list
            for mine, ref in zip(wrap(gx(*args)), wrap(gj(*args))):
                np.testing.assert_allclose(mine, np.asarray(ref), rtol=1e-6, atol=1e-8)
            row = [best(f, *args) for f in (fx, fnp, flapack, gx, gj)]
            print(f"{name:9} {n:>4} | {row[0]:9.1f} {row[1]:9.1f} {row[2]:9.1f} | {row[3]:10.1f} {row[4]:10.1f}")


if __name__ == "__main__":
    main()
