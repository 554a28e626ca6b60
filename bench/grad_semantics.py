"""Timings of `grad` called from Python against autograd on the same programs (not a
test: run it by hand, `python -m bench.grad_semantics`)."""
import time
import warnings

import autograd
import autograd.numpy as anp
import numpy as np

import jitad
from jitad.lower import runtime


def compiles():
    return runtime.STATS["compiled"] + runtime.STATS["loaded"]


def per_call(fn, n):
    t0 = time.perf_counter()
    for i in range(n):
        fn(i)
    return (time.perf_counter() - t0) / n


def fresh_closure(n=2000):
    rng = np.random.RandomState(0)
    batches = [rng.randn(16, 8) for _ in range(n)]
    w = np.ones(8)

    def loss(m):
        return lambda w, b: m.sum((m.dot(b, w) - 1.0) ** 2)
    lj, la = loss(jitad), loss(anp)
    jitad.grad(lambda w: lj(w, batches[0]))(w)
    reused = jitad.grad(lj)
    reused(w, batches[0])
    staged_jit = jitad.jit(jitad.grad(lj))
    staged_jit(w, batches[0])
    before = compiles()
    def fresh(i):
        batch = batches[i]
        return jitad.grad(lambda w: lj(w, batch))(w)
    t_fresh = per_call(fresh, n)
    t_reused = per_call(lambda i: reused(w, batches[i]), n)
    t_jit = per_call(lambda i: staged_jit(w, batches[i]), n)
    def fresh_autograd(i):
        batch = batches[i]
        return autograd.grad(lambda w: la(w, batch))(w)
    t_auto = per_call(fresh_autograd, n)
    print(f"fresh closure per step: jitad {t_fresh * 1e6:.1f} us, reused grad object {t_reused * 1e6:.1f} us, "
          f"jit(grad) {t_jit * 1e6:.1f} us, autograd {t_auto * 1e6:.1f} us; compiles {compiles() - before}")


def alternating(n=2000):
    def f(m):
        def g(x):
            return m.sin(x) * x if x > 0 else -3.0 * x ** 2
        return g
    gj, ga = jitad.grad(f(jitad)), autograd.grad(f(anp))
    gj(1.0), gj(-1.0)
    xs = [(-1.0) ** i * (0.5 + i / n) for i in range(n)]
    before = compiles()
    tj = per_call(lambda i: gj(xs[i]), n)
    ta = per_call(lambda i: ga(xs[i]), n)
    print(f"alternating branches after warm-up: jitad {tj * 1e6:.1f} us, autograd {ta * 1e6:.1f} us; "
          f"compiles {compiles() - before}")


TRAIN_X = np.random.RandomState(1).randn(1000, 20)
TRAIN_Y = (np.random.RandomState(2).rand(1000) > 0.5).astype(float)
BATCH, N_BATCHES = 50, 20


def batch_indices(i):
    idx = i % N_BATCHES
    return slice(idx * BATCH, (idx + 1) * BATCH)


def objective(m):
    def loss(params, i):
        idx = batch_indices(i)
        logits = m.dot(TRAIN_X[idx], params)
        return m.sum(m.log1p(m.exp(-logits)) + (1 - TRAIN_Y[idx]) * logits)
    return loss


def minibatch(n=1000):
    gj, ga = jitad.grad(objective(jitad)), autograd.grad(objective(anp))
    pj = pa = np.zeros(20)
    before = compiles()
    t0 = time.perf_counter()
    for i in range(n):
        pj = pj - 0.01 * gj(pj, i)
    tj = time.perf_counter() - t0
    n_compiles = compiles() - before
    t0 = time.perf_counter()
    for i in range(n):
        pa = pa - 0.01 * ga(pa, i)
    ta = time.perf_counter() - t0
    print(f"mini-batch loop, {n} steps: jitad {tj:.2f} s, autograd {ta:.2f} s; LLVM compiles {n_compiles}; "
          f"max |difference| {np.max(np.abs(pj - pa)):.2e}")


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    fresh_closure()
    alternating()
    minibatch()
