"""Timings of `grad` called from Python against autograd on the same programs (not a
test: run it by hand, `python -m bench.grad_semantics`). Each line gives jitad's time
and autograd's side by side, the first call's time of each (where a case starts cold),
and jitad's traces, paths (programs traced) and LLVM compiles during the case. Times are
this process's CPU time (`time.process_time`): on a shared machine, wall-clock times
measure the neighbours.

    python -m bench.grad_semantics                 # each idiom once, jitad's default tiers
    python -m bench.grad_semantics --tiers 5       # the idioms that start cold, 5 rounds, each round
                                                   # under jitad_tiering "compile" and "auto" in turn
"""
import argparse
import contextlib
import statistics
import functools
import io
import time
import warnings

import autograd
import autograd.misc.optimizers as aopt
import autograd.numpy as anp
import autograd.scipy.special as aspecial
import autograd.scipy.stats.multivariate_normal as amvn
from autograd.misc.flatten import flatten_func as aflatten_func
import numpy as np
import scipy.optimize

import jitad
import jitad.misc.optimizers as jopt
import jitad.scipy.special as jspecial
import jitad.scipy.stats.multivariate_normal as jmvn
from jitad import dispatch
from jitad.lower import runtime
from jitad.misc.flatten import flatten_func as jflatten_func


def compiles():
    return runtime.STATS["compiled"] + runtime.STATS["loaded"]


@contextlib.contextmanager
def counted():
    """`counts`: jitad's traces (the function alone or transformed) and LLVM compiles
    (or disk-cache loads) while the block runs."""
    counts, before, trace_program, code = {}, compiles(), dispatch.trace_program, dispatch.Code
    traces, paths = [], []
    dispatch.trace_program = lambda *a, **k: traces.append(1) or trace_program(*a, **k)
    dispatch.Code = lambda *a, **k: paths.append(1) or code(*a, **k)
    try:
        yield counts
    finally:
        dispatch.trace_program, dispatch.Code = trace_program, code
        counts.update(traces=len(traces), paths=len(paths), compiles=compiles() - before)


def call_timed(fn, times):
    """`fn`, appending the seconds of each call to `times`."""
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        t0 = time.process_time()
        out = fn(*args, **kwargs)
        times.append(time.process_time() - t0)
        return out
    return timed


def per_call(fn, n):
    t0 = time.process_time()
    for i in range(n):
        fn(i)
    return (time.process_time() - t0) / n


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
    return {"jitad": t_fresh * n, "autograd": t_auto * n}


def alternating(n=2000):
    def f(m):
        def g(x):
            return m.sin(x) * x if x > 0 else -3.0 * x ** 2
        return g
    gj, ga = jitad.grad(f(jitad)), autograd.grad(f(anp))
    xs = [(-1.0) ** i * (0.5 + i / n) for i in range(n)]
    with counted() as counts:
        t0 = time.process_time()
        gj(xs[0])
        t_first = time.process_time() - t0
        tj = per_call(lambda i: gj(xs[i]), n)
    ta = per_call(lambda i: ga(xs[i]), n)
    print(f"alternating branches, {n} steps from cold: jitad {tj * 1e6:.1f} us a step (first call "
          f"{t_first * 1e3:.1f} ms), autograd {ta * 1e6:.1f} us; traces {counts['traces']}, paths "
          f"{counts['paths']}, LLVM compiles {counts['compiles']}")
    return {"jitad": tj * n + t_first, "autograd": ta * n, "first": t_first, **counts}


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
    with counted() as counts:
        t0 = time.process_time()
        pj = pj - 0.01 * gj(pj, 0)
        t_first = time.process_time() - t0
        for i in range(1, n):
            pj = pj - 0.01 * gj(pj, i)
        tj = time.process_time() - t0
    t0 = time.process_time()
    for i in range(n):
        pa = pa - 0.01 * ga(pa, i)
    ta = time.process_time() - t0
    print(f"mini-batch loop, {n} steps: jitad {tj:.2f} s ({t_first:.2f} s first call, "
          f"{(tj - t_first) / (n - 1) * 1e6:.0f} us a step after), autograd {ta:.2f} s ({ta / n * 1e6:.0f} us a step); "
          f"traces {counts['traces']}, paths {counts['paths']}, LLVM compiles {counts['compiles']}; "
          f"max |difference| {np.max(np.abs(pj - pa)):.2e}")
    return {"jitad": tj, "autograd": ta, "first": t_first, **counts}


# -- autograd's examples/neural_net.py idiom: adam(grad(objective), params) ---------------------

IMAGES = np.random.RandomState(3).rand(600, 64)
LABELS = np.eye(10)[np.random.RandomState(4).randint(0, 10, 600)]
MLP_BATCH = 32
MLP_BATCHES = int(np.ceil(len(IMAGES) / MLP_BATCH))   # (the last batch is short: 600 = 18 * 32 + 24)


def mlp_objective(m, special):
    def predict(params, inputs):
        for W, b in params:
            outputs = m.dot(inputs, W) + b
            inputs = m.tanh(outputs)
        return outputs - special.logsumexp(outputs, axis=1, keepdims=True)

    def objective(params, iter):
        idx = iter % MLP_BATCHES
        idx = slice(idx * MLP_BATCH, (idx + 1) * MLP_BATCH)
        log_prior = -0.5 * sum(m.sum(W ** 2) + m.sum(b ** 2) for W, b in params)
        return -(log_prior + m.sum(predict(params, IMAGES[idx]) * LABELS[idx]) / MLP_BATCH * len(IMAGES))
    return objective


def adam_minibatch(n=500):
    rs = np.random.RandomState(0)
    params = [(0.1 * rs.randn(a, b), 0.1 * rs.randn(b)) for a, b in ((64, 32), (32, 10))]
    tj_first, ta_first = [], []
    with counted() as counts:
        t0 = time.process_time()
        pj = jopt.adam(call_timed(jitad.grad(mlp_objective(jitad.numpy, jspecial)), tj_first), params,
                       step_size=0.001, num_iters=n)
        tj = time.process_time() - t0
    t0 = time.process_time()
    pa = aopt.adam(call_timed(autograd.grad(mlp_objective(anp, aspecial)), ta_first), params,
                   step_size=0.001, num_iters=n)
    ta = time.process_time() - t0
    diff = max(np.max(np.abs(np.asarray(x) - y)) for pj_l, pa_l in zip(pj, pa) for x, y in zip(pj_l, pa_l))
    print(f"adam(grad(objective)) as in neural_net.py, {n} steps: jitad {tj:.2f} s (first call {tj_first[0]:.2f} s, "
          f"median gradient {np.median(tj_first) * 1e6:.0f} us), autograd {ta:.2f} s (first call "
          f"{ta_first[0] * 1e3:.1f} ms, median gradient {np.median(ta_first) * 1e6:.0f} us); traces "
          f"{counts['traces']}, paths {counts['paths']}, LLVM compiles {counts['compiles']} (the short last batch "
          f"is a second path); max |difference| {diff:.1e}")
    return {"jitad": tj, "autograd": ta, "first": tj_first[0], **counts}


# -- autograd's examples/hmm_em.py idiom: a fresh value_and_grad per EM step --------------------

def hmm(m, special):
    def normalize(a):
        return a / np.where(a.sum(-1, keepdims=True) > 0.0, a.sum(-1, keepdims=True), 1.0)

    def log_partition_function(natural_params, data):
        if isinstance(data, list):
            return sum(map(functools.partial(log_partition_function, natural_params), data))
        log_pi, log_A, log_B = natural_params
        log_alpha = log_pi
        for y in data:
            log_alpha = special.logsumexp(log_alpha[:, None] + log_A, axis=0) + log_B[:, y]
        return special.logsumexp(log_alpha)

    def em_update(params, data, vgrad):
        natural_params = list(map(m.log, params))
        loglike, stats = vgrad(log_partition_function)(natural_params, data)   # E step
        return float(loglike), [normalize(np.asarray(s)) for s in stats]   # M step
    return em_update, normalize


def em_fresh_vgrad(steps=20):
    rs = np.random.RandomState(0)
    data = [rs.randint(0, 6, 12) for _ in range(4)]
    em_j, normalize = hmm(jitad.numpy, jspecial)
    em_a, _ = hmm(anp, aspecial)
    init = [normalize(rs.rand(3)), normalize(rs.rand(3, 3)), normalize(rs.rand(3, 6))]

    def run(em, vgrad):
        params, lls, t0, first = init, [], time.process_time(), None
        for _ in range(steps):
            ll, params = em(params, data, vgrad)
            lls.append(ll)
            first = first or time.process_time() - t0
        return lls, time.process_time() - t0, first
    with counted() as counts:
        llj, tj, fj = run(em_j, jitad.value_and_grad)
    lla, ta, fa = run(em_a, autograd.value_and_grad)
    print(f"EM with a fresh value_and_grad per step as in hmm_em.py, {steps} steps: jitad {tj:.2f} s (first step "
          f"{fj:.2f} s, {(tj - fj) / (steps - 1) * 1e6:.0f} us a step after), autograd {ta:.2f} s (first step "
          f"{fa * 1e3:.1f} ms, {ta / steps * 1e6:.0f} us a step); traces {counts['traces']}, paths "
          f"{counts['paths']}, LLVM compiles {counts['compiles']}; max |log-likelihood difference| "
          f"{np.max(np.abs(np.subtract(llj, lla))):.1e}")
    return {"jitad": tj, "autograd": ta, "first": fj, **counts}


# -- autograd's examples/gmm.py idiom: scipy.optimize.minimize(f, x0, jac=grad(f)) --------------

def gmm(m, special, mvn, flatten_func):
    rs = np.random.RandomState(0)
    data = np.concatenate([rs.randn(60, 2) * 0.3 + c for c in ((1.0, 0.0), (-1.0, 0.5), (0.0, -1.0))])
    init = {"log proportions": rs.randn(4) * 0.1, "means": rs.randn(4, 2) * 0.1,
            "lower triangles": np.zeros((4, 2, 2)) + np.eye(2)}

    def log_likelihood(params):
        proportions = params["log proportions"] - special.logsumexp(params["log proportions"])
        cluster = [p + mvn.logpdf(data, mean, m.dot(c.T, c))
                   for p, mean, c in zip(proportions, params["means"], params["lower triangles"])]
        return m.sum(special.logsumexp(m.vstack(cluster), axis=0))
    flat, _, x0 = flatten_func(lambda params: -log_likelihood(params), init)
    return flat, np.asarray(x0, float)


def scipy_minimize():
    fj, x0 = gmm(jitad.numpy, jspecial, jmvn, jflatten_func)
    fa, _ = gmm(anp, aspecial, amvn, aflatten_func)
    tj_first, ta_first = [], []
    with counted() as counts:
        t0 = time.process_time()
        rj = scipy.optimize.minimize(fj, x0, jac=call_timed(jitad.grad(fj), tj_first), method="BFGS")
        tj = time.process_time() - t0
    t0 = time.process_time()
    ra = scipy.optimize.minimize(fa, x0, jac=call_timed(autograd.grad(fa), ta_first), method="BFGS")
    ta = time.process_time() - t0
    print(f"scipy.optimize.minimize(f, jac=grad(f)) as in gmm.py: jitad {tj:.2f} s ({rj.njev} gradients, first "
          f"{tj_first[0]:.2f} s, median {np.median(tj_first) * 1e6:.0f} us), autograd {ta:.2f} s ({ra.njev} "
          f"gradients, first {ta_first[0] * 1e3:.1f} ms, median {np.median(ta_first) * 1e6:.0f} us); "
          f"traces {counts['traces']}, paths {counts['paths']}, LLVM compiles {counts['compiles']}; minimum "
          f"{rj.fun:.6f} against {ra.fun:.6f}")
    return {"jitad": tj, "autograd": ta, "first": tj_first[0], **counts}


COLD = {"alternating branches (1000 steps)": lambda: alternating(1000), "mini-batch loop (1000 steps)": minibatch,
        "adam, neural_net.py (500 steps)": adam_minibatch, "EM, hmm_em.py (20 steps)": em_fresh_vgrad,
        "BFGS, gmm.py": scipy_minimize}


def compare_tiers(rounds):
    """Each idiom that starts cold, `rounds` times under each `jitad_tiering` setting in
    turn (the order alternating by round; the setting change forgets every path, so each
    run traces and compiles afresh; the process keeps machine code it compiled before, so
    the "compile" runs after the first find their code without LLVM's optimizer): medians
    and min-max of jitad's seconds, autograd's beside them, and the counts of the last run."""
    tiers = ("compile", "auto")
    lines = ["| idiom | autograd s | jitad s, compile first | jitad s, tiered | first call, compile first | "
             "first call, tiered | traces / paths / LLVM compiles, tiered |", "|---|---|---|---|---|---|---|"]
    for name, run in COLD.items():
        got = {tier: [] for tier in tiers}
        for r in range(rounds):
            for tier in tiers if r % 2 == 0 else tiers[::-1]:
                jitad.config.update("jitad_tiering", tier)
                with contextlib.redirect_stdout(io.StringIO()):
                    got[tier].append(run())

        def spread(tier, what):
            v = [x[what] for x in got[tier]]
            return f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})"
        last = got["auto"][-1]
        lines.append(f"| {name} | {spread('auto', 'autograd')} | {spread('compile', 'jitad')} | {spread('auto', 'jitad')} | "
                     f"{spread('compile', 'first')} | {spread('auto', 'first')} | "
                     f"{last['traces']} / {last['paths']} / {last['compiles']} |")
        print(lines[-1], flush=True)
    jitad.config.update("jitad_tiering", "auto")
    print("\n".join(lines))


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    ap = argparse.ArgumentParser(prog="python -m bench.grad_semantics", description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiers", type=int, metavar="ROUNDS", help="compare the tiers over ROUNDS rounds")
    args = ap.parse_args()
    if args.tiers:
        compare_tiers(args.tiers)
    else:
        fresh_closure()
        alternating()
        minibatch()
        adam_minibatch()
        em_fresh_vgrad()
        scipy_minimize()
