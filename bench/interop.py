"""jitad inside JAX and PyTorch: `python -m bench.interop [--quick]`.

Side by side in one process, medians of interleaved rounds (µs per call):

1. Call overhead inside `jax.jit`: `jax.jit(to_jax(x + 1))` against JAX's own dispatch
   floor (`jax.jit(x + 1)`) and jitad's native call (`jitad.jit(x + 1)`); the goal is at
   most 3 µs above the sum of the two.
2. PyTorch eager: `to_torch(x + 1)` against a trivial `torch.library` custom op of the
   same arity (goal: at most 5 µs more).
3. A JAX training step whose model holds an iterative solver (a cube root by Newton's
   method, per example until converged): the solver as a jitad `WHILE` through
   `to_jax`, against the pure-JAX workaround (a `lax.scan` of the most iterations any
   example needs, converged examples frozen): time per `jit(grad)` step and the
   gradient's error against the exact gradient (implicit differentiation of x³ = a).
"""
import argparse
import sys
import timeit

import numpy as np


def _us(fn, number, rounds):
    return [min(timeit.repeat(fn, number=number, repeat=3)) / number * 1e6 for _ in range(rounds)]


def _interleaved(timers, number, rounds):
    samples = {k: [] for k in timers}
    for _ in range(rounds):
        for k, fn in timers.items():
            samples[k] += _us(fn, number, 1)
    return {k: (float(np.median(v)), min(v), max(v)) for k, v in samples.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    rounds, number = (1, 200) if args.quick else (7, 5000)
    import jax
    import jax.numpy as jnp
    import torch
    jax.config.update("jax_enable_x64", True)
    import jitad
    import jitad.interop
    lines = []

    # 1. inside jax.jit
    x = jnp.ones(4)
    xn = np.ones(4)
    via = jax.jit(jitad.interop.to_jax(lambda x: x + 1.0))
    floor = jax.jit(lambda x: x + 1.0)
    native = jitad.jit(lambda x: x + 1.0)
    for fn, arg in ((via, x), (floor, x), (native, xn)):
        fn(arg)
    r = _interleaved({"to_jax in jax.jit": lambda: via(x).block_until_ready(),
                      "jax.jit floor": lambda: floor(x).block_until_ready(),
                      "jitad native": lambda: native(xn)}, number, rounds)
    extra = r["to_jax in jax.jit"][0] - r["jax.jit floor"][0] - r["jitad native"][0]
    lines += ["## Call overhead", "", "| call | µs (min-max) |", "|---|---|"]
    lines += [f"| {k} | {m:.2f} ({lo:.2f}-{hi:.2f}) |" for k, (m, lo, hi) in r.items()]
    lines += ["", f"to_jax costs {extra:+.2f} µs beyond JAX's floor plus jitad's call (goal: at most +3).", ""]

    # 2. PyTorch eager
    @torch.library.custom_op("jitad_bench::plus_one", mutates_args=())
    def plus_one(xs: list[torch.Tensor], key: int) -> list[torch.Tensor]:
        return [torch.from_numpy(xs[0].numpy() + 1.0)]
    t = torch.ones(4, dtype=torch.float64)
    via_t = jitad.interop.to_torch(lambda x: x + 1.0)
    via_t(t)
    r = _interleaved({"to_torch": lambda: via_t(t), "trivial custom op": lambda: plus_one([t], 0)}, number, rounds)
    lines += ["| PyTorch eager | µs (min-max) |", "|---|---|"]
    lines += [f"| {k} | {m:.2f} ({lo:.2f}-{hi:.2f}) |" for k, (m, lo, hi) in r.items()]
    lines += ["", f"to_torch costs {r['to_torch'][0] - r['trivial custom op'][0]:+.2f} µs beyond a trivial custom "
              "op (goal: at most +5).", ""]

    # 3. a training step with a solver inside
    def cube_root(a):
        return jitad.WHILE(lambda x: jitad.abs(x ** 3 - a) > 1e-12 * a, lambda x: x - (x ** 3 - a) / (3 * x ** 2), a + 1.0)
    solve = jitad.interop.to_jax(cube_root)
    most = 64   # Newton from a + 1 needs up to ~40 steps for a in [1, 1000]

    def scan_cube_root(a):
        def step(x, _):
            done = jnp.abs(x ** 3 - a) <= 1e-12 * a
            return jnp.where(done, x, x - (x ** 3 - a) / (3 * x ** 2)), None
        return jax.lax.scan(step, a + 1.0, None, length=most)[0]
    rng = np.random.default_rng(0)
    xs = jnp.asarray(rng.uniform(1.0, 1000.0, size=256))
    ys = jnp.cbrt(2.0 * xs) + 0.01
    loss = lambda root: (lambda w: jnp.mean((jax.vmap(root)(w * xs) - ys) ** 2))
    exact = jax.grad(lambda w: jnp.mean((jnp.cbrt(w * xs) - ys) ** 2))(1.5)
    g_jitad, g_scan = jax.jit(jax.grad(loss(solve))), jax.jit(jax.grad(loss(scan_cube_root)))
    errors = {k: abs(float(g(1.5)) - float(exact)) / abs(float(exact)) for k, g in (("jitad WHILE", g_jitad),
                                                                                  ("JAX scan", g_scan))}
    r = _interleaved({"jitad WHILE": lambda: g_jitad(1.5).block_until_ready(),
                      "JAX scan": lambda: g_scan(1.5).block_until_ready()}, max(1, number // 50), rounds)
    lines += [f"## A training step with a solver inside (256 examples, `jit(grad)`; the scan runs {most} steps)", "",
              "| solver | µs per step (min-max) | relative gradient error |", "|---|---|---|"]
    lines += [f"| {k} | {m:,.1f} ({lo:,.1f}-{hi:,.1f}) | {errors[k]:.1e} |" for k, (m, lo, hi) in r.items()]
    lines.append(f"\njitad / scan: {r['jitad WHILE'][0] / r['JAX scan'][0]:.2f}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
