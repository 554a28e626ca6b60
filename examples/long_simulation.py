"""Differentiate a million-step simulation in bounded memory.

An explicit heat-equation integration over 1,000 grid points runs for 10^6 steps in a
`WHILE` loop. Reverse mode would keep every step (8 GB here); with `checkpoints=64` it
keeps at most 64 states and recomputes the rest (Revolve's binomial schedule). We fit
the diffusion coefficient `k` so the final profile matches a target, printing the time
of a gradient against the forward run and the tensor memory each used.

    python examples/long_simulation.py [steps]
"""
import sys
import time

import numpy as np

import jitad
from jitad import WHILE
from jitad.lower.runtime import arena_high_water

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
GRID = 1000


def final_profile(x0, k, checkpoints):
    def step(s):
        x, i = s
        return x + 1e-4 * k * (jitad.roll(x, 1) - 2 * x + jitad.roll(x, -1)), i + 1
    return WHILE(lambda s: s[1] < STEPS, step, (x0, 0), checkpoints=checkpoints)[0]


def loss(k, x0, target):
    return jitad.mean((final_profile(x0, k, 64) - target) ** 2)


x0 = np.sin(np.linspace(0.0, 3.0, GRID)) + 0.5 * np.sin(np.linspace(0.0, 40.0, GRID))
forward = jitad.jit(lambda k, x0: final_profile(x0, k, 64))
target = forward(1.5, x0)          # the profile a coefficient of 1.5 gives
step = jitad.jit_grad(loss)

k = 1.0
forward(k, x0), step(k, x0, target)   # compile both
for it in range(4):
    arena_high_water(reset=True)
    start = time.perf_counter()
    forward(k, x0)
    t_fwd, m_fwd = time.perf_counter() - start, arena_high_water(reset=True)
    start = time.perf_counter()
    value, g = step(k, x0, target)
    t_grad, m_grad = time.perf_counter() - start, arena_high_water(reset=True)
    print(f"k = {k:.6f}  loss = {value:.3e}  dloss/dk = {g:+.3e}  forward {t_fwd:.2f} s, {m_fwd / 2**20:.1f} MiB;"
          f"  gradient {t_grad:.2f} s ({t_grad / t_fwd:.1f}x), {m_grad / 2**20:.1f} MiB")
    k -= value / g if g else 0.0      # Newton toward loss = 0 (the target is reachable at k = 1.5)
