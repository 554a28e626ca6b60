"""The model benchmarks of BENCHMARKS.md: `python -m bench.models [--model rnn|lstm|treelstm|cnn] [--quick]`.

Each model trains from the same initial weights in every comparator:

- jitad (a) "step loop": a Python loop over a `jitad.jit_grad` step and a jitted
  optimizer update (clipping included);
- jitad (b) "staged loop": the whole loop as one `jitad.jit` (`FOR` over the steps with
  `value_and_grad` and the optimizer inside);
- PyTorch eager (one thread, `torch.optim`);
- JAX jit: a jitted step (grad + optimizer) called from a Python loop, and the whole
  loop in one jit (`fori_loop`); the RNN/LSTM scan over time with `lax.scan`. The
  TreeLSTM runs as per-node Python recursion under jit (one compile per tree shape) and
  as a padded `lax.scan` over the nodes in post-order.

The first call of every comparator compiles (its time is reported apart). The next
run trains `check` iterations: every comparator's losses must equal PyTorch's to 1e-6
relative (a staged loop returns the sum of its losses, compared with the sum), else the
run stops with `LossMismatch` (exit status 1); the vanilla RNN is checked at a smaller
learning rate (see `RNN_CHECK_LR`). Then `repeats` runs of the timed unit, interleaved
round-robin over the comparators; medians and min-max spreads. Results go to
bench/results/models.{md,json,png} (models_quick.* with --quick).

The builders read `size.get("device", "cpu")`: `bench.gpu` passes "cuda", which compiles
jitad's runners for the GPU (parameters and data as numba device arrays, see `on_device`);
PyTorch's tensors go to `size.get("torch_device", device)`. Neither is set by the CPU
benchmark, which is unchanged.
"""
import argparse
import functools
import json
import os
import statistics
import sys
import time

import numpy as np

from . import data, harness

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ("rnn", "lstm", "treelstm", "cnn")
TITLES = {"rnn": "char-RNN (vanilla)", "lstm": "char-LSTM", "treelstm": "TreeLSTM", "cnn": "CNN (MNIST shapes)"}
# The timed units are reduced so that the whole run takes ~10 minutes on two cores;
# the table also extrapolates to BENCHMARKS.md's units (5000 iterations, one epoch).
# tree_rec: trees timed for JAX's per-tree recursion (XLA compiles each tree shape, ~20 s
# per tree here); jax_loop: also time JAX with the whole loop in one jit; scan_buckets:
# the sizes JAX's padded TreeLSTM scan pads to (one XLA compile each).
FULL = dict(rnn_iters=300, tree_count=80, tree_rec=4, cnn_steps=4, check=100, cnn_check=100,
            tree_check=100, repeats=5, jax_loop=True, scan_buckets=(16, 32, 64, 2 * data.MAX_WORDS - 1))
QUICK = dict(rnn_iters=5, tree_count=4, tree_rec=0, cnn_steps=1, check=5, cnn_check=2, tree_check=4,
             repeats=1, jax_loop=False, scan_buckets=(2 * data.MAX_WORDS - 1,))
FULL_UNITS = {"rnn": 5000, "lstm": 5000, "treelstm": 1101, "cnn": 600}   # iterations per BENCHMARKS unit
LOSS_RTOL = 1e-6
TORCH = "torch"
LANTERN = {"rnn": "31× (1.49 s vs 46.5 s, 5000 iters)", "lstm": "11× (5.2 s vs 59 s)",
           "treelstm": "2.8× (8.3 s vs 23 s per epoch)", "cnn": "≈0.85–1.3× per epoch"}
SHORT = {"jax_step": "step loop", "jax_loop": "whole loop", "jax_rec": "per-tree recursion, compiled shapes",
         "jax_scan": "padded scan"}
GOALS = {"rnn": {"torch": 10.0, "jax": 3.0}, "lstm": {"torch": 10.0, "jax": 3.0},
         "treelstm": {"torch": 4.0, "jax": 2.0}, "cnn": {"torch": 1.0}}


class LossMismatch(AssertionError):
    pass


# -- model sizes and FLOP counts ----------------------------------------------------

# check_lr: the learning rate of the loss check (see `check_losses`); the timed runs use lr.
CHAR = dict(V=26, H=50, T=20, B=20, lr=0.1, check_lr=0.1, clip=5.0)
TREE = dict(D=300, H=150, C=5, lr=0.05, check_lr=0.05)
# side, c1, c2, hidden: the image side and layer widths (PyTorch's MNIST example; only
# bench.gpu's CUDA-simulator smoke run shrinks them, see `cnn_flat`).
CNN = dict(B=100, lr=0.01, check_lr=0.01, momentum=0.5, rate=0.5, key0=1000, side=28, c1=10, c2=20, hidden=50)
# At Adagrad lr 0.1 the vanilla RNN's training is chaotic: two float64 runs whose gradients
# differ by rounding (1e-12 relative) drift apart ~5x per step from step ~6 and differ by
# 1e-6 at step ~16, for every pair of implementations (JAX vs PyTorch too). Its loss check
# runs the same compiled code at lr 0.05, where all agree to 1e-15 over 100 steps; the
# report also gives how long the lr 0.1 runs agree.
RNN_CHECK_LR = 0.05


def mm(m, n, k):
    """FLOPs of an (m, k) @ (k, n) product."""
    return 2 * m * n * k


def char_flops(kind):
    """Matmul FLOPs of one char-RNN/LSTM training iteration, forward and backward: every
    product is counted once forward and, backward, once for the weight gradient and once
    for the input gradient where the input needs one (not for the one-hot inputs)."""
    V, H, T, B = (CHAR[k] for k in "VHTB")
    G = 4 * H if kind == "lstm" else H
    x_in, h_in, out = mm(B, G, V), mm(B, G, H), mm(B, V, H)
    return T * (x_in * 2 + h_in * 3 + out * 3)


def tree_flops(parses):
    """Matmul FLOPs of TreeLSTM training steps over `parses`: leaves (embedding @ W_leaf:
    forward and weight gradient; the embeddings are fixed), internal nodes ([hl; hr] @
    W_int, forward + both gradients), the output layer at every node (likewise)."""
    D, H, C = TREE["D"], TREE["H"], TREE["C"]
    total = 0
    for left, _, _, _ in parses:
        leaves = int(np.sum(left < 0))
        internal = len(left) - leaves
        total += leaves * 2 * mm(1, 3 * H, D) + internal * 3 * mm(1, 5 * H, 2 * H) \
            + len(left) * 3 * mm(1, C, H)
    return total


def dgemm_rate(repeats=5, n=1000):
    """FLOP/s of a single-thread n x n float64 numpy matmul (OpenBLAS dgemm), the median."""
    a, b = np.random.default_rng(0).standard_normal((2, n, n))
    a @ b
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - start)
    return 2 * n ** 3 / statistics.median(times)


# -- memory -------------------------------------------------------------------------

def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


class PeakRSS:
    """The growth of the process's peak resident set during a `with` block, in bytes.
    On Linux the kernel's peak (VmHWM) is reset on entry (`/proc/self/clear_refs` = 5), so
    this is `peak during the block - resident at entry`; elsewhere it is the growth of
    `ru_maxrss`, which only sees new process-wide peaks."""

    def __enter__(self):
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.mode, self.start = "vmhwm", _status_kib("VmRSS")
        except OSError:
            import resource
            self.mode, self.start = "ru_maxrss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return self

    def __exit__(self, *exc):
        if self.mode == "vmhwm":
            self.bytes = (_status_kib("VmHWM") - self.start) * 1024
        else:
            import resource
            self.bytes = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - self.start) * 1024
        return False


# -- comparators ----------------------------------------------------------------------

class Runner:
    """One comparator of one model. `run(n, check)` trains `n` iterations from the initial
    weights and returns their losses (a list of floats), or for a staged loop their sum
    (a float). `check=True` runs the loss check (its learning rate; PyTorch and JAX with
    jitad's dropout masks). `warm()` compiles (by default: one iteration); `compile_s` is
    then jitad's `compile_seconds`, JAX's first-call time, or None for PyTorch."""

    def __init__(self, label, run, warm=None, staged=False, jitad=False, compile_of=None, compiled=()):
        self.label, self.run, self.staged, self.jitad = label, run, staged, jitad
        self._warm, self._compile_of, self._first_s = warm, compile_of, None
        self.compiled = compiled   # jitad's compiled functions, whose compile reports add up
        self.iters = None   # a comparator too slow to compile for the whole unit runs fewer

    def warm(self):
        start = time.perf_counter()
        if self._warm is not None:
            self._warm()
        else:
            self.run(1, False)
        self._first_s = time.perf_counter() - start

    @property
    def compile_s(self):
        return self._compile_of() if self._compile_of else self._first_s

    def compile_stages(self):
        """jitad's compile seconds by stage (`compile_report()`), summed over its compiled
        functions; {} for the others."""
        stages = {}
        for f in self.compiled:
            report = getattr(f, "compile_report", dict)()   # {} from a jitad without reports
            for name, seconds in report.items():
                stages[name] = stages.get(name, 0.0) + seconds
        return stages


def _floats(losses):
    return [float(v) for v in losses]


def _lr(cfg, check):
    """The learning rate of a timed run, or of the loss check (see `check_lr`)."""
    return cfg["check_lr"] if check else cfg["lr"]


def on_device(device):
    """A function that places a nest (dicts, tuples, lists) of numpy arrays where jitad
    compiled for `device` reads them: itself for "cpu"; for "cuda", numba device arrays,
    each distinct array copied once (so parameters and data stay on the GPU, and a shared
    array such as the TreeLSTM's embeddings is not copied per batch)."""
    if device == "cpu":
        return lambda x: x
    from numba import cuda
    memo = {}

    def put(x):
        if isinstance(x, dict):
            return {k: put(v) for k, v in x.items()}
        if isinstance(x, (tuple, list)):
            return type(x)(put(v) for v in x)
        if isinstance(x, np.ndarray) and x.ndim:
            if id(x) not in memo:   # the array is kept in the memo, so its id stays unique
                memo[id(x)] = (x, cuda.to_device(np.ascontiguousarray(x)))
            return memo[id(x)][1]
        return x
    return put


def _jitad_runners(jitad, loss, make_opt, cfg, p0, batches, staged_batches, make_args, key_of=None,
                   device="cpu"):
    """(a) a Python loop over `jit_grad(loss)` and a jitted update; (b) one `jit` of the
    whole loop. `batches[i]` are step i's extra arguments (tuples), `staged_batches` the
    same stacked for the staged loop, and `make_args(all, i)` picks step i's there. The
    learning rate is a runtime argument, so the loss check runs the timed code. With
    device="cuda" both compile for the GPU and take parameters and data as device arrays."""
    step = jitad.jit_grad(loss, device=device)
    clip = cfg.get("clip")

    def update(p, g, s, lr):
        if clip:
            g = jitad.optim.clip_by_value(g, clip)
        return make_opt(lr).update(p, g, s)
    update = jitad.jit(update, device=device)
    put = on_device(device)
    p0, s0 = put(p0), put(make_opt(0.0).init(p0))
    batches, staged_batches = put(batches), put(staged_batches)

    def run_steps(n, check=False):
        p, s, losses, lr = p0, s0, [], _lr(cfg, check)
        for i in range(n):
            extra = batches[i] + ((key_of(i),) if key_of else ())
            value, g = step(p, *extra)
            p, s = update(p, g, s, lr)
            losses.append(value)
        return losses

    def train(p, all_batches, n, lr):
        opt = make_opt(lr)

        def body(i, carry):
            params, state, total = carry
            extra = make_args(all_batches, i) + ((key_of(i),) if key_of else ())
            value, g = jitad.value_and_grad(loss)(params, *extra)
            if clip:
                g = jitad.optim.clip_by_value(g, clip)
            params, state = opt.update(params, g, state)
            return params, state, total + value
        return jitad.FOR(0, n, body, (p, opt.init(p), 0.0))
    train = jitad.jit(train, device=device)

    def run_staged(n, check=False):
        return train(p0, staged_batches, n, _lr(cfg, check))[2]

    return {"jitad_step": Runner("jitad (a) step loop", run_steps, jitad=True,
                                 compile_of=lambda: step.compile_seconds + update.compile_seconds,
                                 compiled=(step, update)),
            "jitad_loop": Runner("jitad (b) staged loop", run_staged, staged=True, jitad=True,
                                 compile_of=lambda: train.compile_seconds, compiled=(train,))}


# -- char-RNN and char-LSTM -------------------------------------------------------------

def char_params(kind, seed=0):
    V, H = CHAR["V"], CHAR["H"]
    r = np.random.default_rng(seed)
    G = 4 * H if kind == "lstm" else H
    return {"Wx": r.standard_normal((V, G)) * 0.1, "Wh": r.standard_normal((H, G)) * 0.1,
            "b": np.zeros(G), "Wy": r.standard_normal((H, V)) * 0.1, "by": np.zeros(V)}


def _cell(kind, ops, p, x, h, c):
    """One time step: (h, c) from the input rows x (B, V) one-hot; `ops` = (tanh, sigmoid)."""
    tanh, sigmoid = ops
    H = CHAR["H"]
    z = x @ p["Wx"] + h @ p["Wh"] + p["b"]
    if kind == "rnn":
        return tanh(z), c
    i, f, o, g = sigmoid(z[:, :H]), sigmoid(z[:, H:2 * H]), sigmoid(z[:, 2 * H:3 * H]), tanh(z[:, 3 * H:])
    c = f * c + i * g
    return o * tanh(c), c


def char_model(kind, m, size):
    """Sum over the 20 time steps of the batch-mean cross-entropy of the next character;
    the hidden state starts at zero every iteration; Adagrad(0.1), gradients clipped to
    [-5, 5]."""
    V, H, T, B = (CHAR[k] for k in "VHTB")
    cfg = dict(CHAR, check_lr=RNN_CHECK_LR if kind == "rnn" else CHAR["lr"])
    n_data = max(size["rnn_iters"], size["check"])
    chars = data.char_batches(n_data, T, B, V)            # (n, T + 1, B)
    p0 = char_params(kind)
    runners = {}
    jitad = m["jitad"]
    ops = (jitad.tanh, jitad.sigmoid)

    def loss(p, seq):
        def body(t, carry):
            h, c, total = carry
            h, c = _cell(kind, ops, p, jitad.one_hot(seq[t], V), h, c)
            return h, c, total + jitad.cross_entropy(h @ p["Wy"] + p["by"], seq[t + 1])
        zeros = np.zeros((B, H))
        return jitad.FOR(0, T, body, (zeros, zeros, 0.0))[2]

    device = size.get("device", "cpu")
    runners.update(_jitad_runners(jitad, loss, jitad.optim.adagrad, cfg, p0,
                                  [(chars[i],) for i in range(n_data)], chars,
                                  lambda all_, i: (all_[i],), device=device))
    if kind == "rnn" and device == "cpu":
        runners.update(_char_user_style(jitad, kind, cfg, p0, chars, loss))
    if m["torch"]:
        runners[TORCH] = _char_torch(kind, m["torch"], cfg, p0, chars, size.get("torch_device", device))
    if m["jax"]:
        runners.update(_char_jax(kind, m["jax"], cfg, p0, chars))
        if not size["jax_loop"]:
            del runners["jax_loop"]
    return {"runners": runners, "iters": size["rnn_iters"], "check": size["check"],
            "flops_per_iter": char_flops(kind), "unit": f"{size['rnn_iters']} iterations",
            "lr": cfg["lr"], "check_lr": cfg["check_lr"] if cfg["check_lr"] != cfg["lr"] else None,
            "unit_name": "iteration",
            "notes": [f"{TITLES[kind]}: vocab {V}, hidden {H}, seq {T}, batch {B}; one-hot inputs "
                      f"@ W, {'tanh cell' if kind == 'rnn' else 'LSTM gates i, f, o, g'}; loss = sum "
                      "over the time steps of the batch-mean cross-entropy; hidden state zero at "
                      "each iteration; Adagrad lr 0.1 (eps 1e-10), gradients clipped to ±5; "
                      "synthetic text from a random bigram chain (bench/data.py). jitad and JAX "
                      "loop over time with FOR / lax.scan, PyTorch with a Python loop."
                      + (f" The loss check runs at lr {cfg['check_lr']:g}: at lr 0.1 this "
                         "RNN's training is chaotic (rounding-level differences grow ~5× per "
                         "step from step ~6, between any two implementations, JAX and PyTorch "
                         "included), so no two runs agree to 1e-6 past step ~16; the loss-check "
                         "section says for how many steps the lr 0.1 runs agree."
                         if cfg["check_lr"] != cfg["lr"] else "")]}


def _char_user_style(jitad, kind, cfg, p0, chars, scan_loss):
    """Two more jitad forms of the char model, each looped in Python with `float(loss)`
    every step: (u) as a PyTorch user writes it: a Python loop over time in the loss,
    `jit_grad(loss)` over the dict of parameters, then a jitted Adagrad update written out
    over dicts; (o) JAX's program: one jitted step, `value_and_grad` of the loss that
    loops with FOR (a scan) and the same update inside."""
    V, H, T, B, clip = (CHAR[k] for k in ("V", "H", "T", "B", "clip"))
    ops = (jitad.tanh, jitad.sigmoid)
    seqs = [np.ascontiguousarray(c) for c in chars]

    def loss(p, seq):
        h = c = np.zeros((B, H))
        total = 0.0
        for t in range(T):
            h, c = _cell(kind, ops, p, jitad.one_hot(seq[t], V), h, c)
            total = total + jitad.cross_entropy(h @ p["Wy"] + p["by"], seq[t + 1])
        return total

    def adagrad(p, g, s, lr):
        g = {k: jitad.clip(v, -clip, clip) for k, v in g.items()}
        s = {k: s[k] + g[k] * g[k] for k in s}
        return {k: p[k] - lr * g[k] / (jitad.sqrt(s[k]) + 1e-10) for k in p}, s

    step, update = jitad.jit_grad(loss), jitad.jit(adagrad)

    @jitad.jit
    def one_step(p, s, lr, seq):
        value, g = jitad.value_and_grad(scan_loss)(p, seq)
        p, s = adagrad(p, g, s, lr)
        return p, s, value

    s0 = {k: np.zeros_like(v) for k, v in p0.items()}

    def run_user(n, check=False):
        p, s, lr, losses = p0, s0, _lr(cfg, check), []
        for i in range(n):
            value, g = step(p, seqs[i])
            p, s = update(p, g, s, lr)
            losses.append(float(value))
        return losses

    def run_one(n, check=False):
        p, s, lr, losses = p0, s0, _lr(cfg, check), []
        for i in range(n):
            p, s, value = one_step(p, s, lr, seqs[i])
            losses.append(float(value))
        return losses

    return {"jitad_user": Runner("jitad (u) user-style loop", run_user, jitad=True, compiled=(step, update),
                                 compile_of=lambda: step.compile_seconds + update.compile_seconds),
            "jitad_onestep": Runner("jitad (o) one jitted step", run_one, jitad=True, compiled=(one_step,),
                                    compile_of=lambda: one_step.compile_seconds)}


def _char_torch(kind, torch, cfg, p0, chars, device="cpu"):
    F = torch.nn.functional
    V = CHAR["V"]
    seqs = [torch.from_numpy(np.ascontiguousarray(c)).to(device) for c in chars]
    ops = (torch.tanh, torch.sigmoid)

    def loss(p, seq):
        h = c = torch.zeros(CHAR["B"], CHAR["H"], dtype=torch.float64, device=device)
        total = 0.0
        for t in range(CHAR["T"]):
            h, c = _cell(kind, ops, p, F.one_hot(seq[t], V).double(), h, c)
            total = total + F.cross_entropy(h @ p["Wy"] + p["by"], seq[t + 1])
        return total

    def run(n, check=False):
        p = {k: torch.tensor(v, requires_grad=True, device=device) for k, v in p0.items()}
        opt = torch.optim.Adagrad(list(p.values()), lr=_lr(cfg, check), eps=1e-10)
        losses = []
        for i in range(n):
            opt.zero_grad()
            value = loss(p, seqs[i])
            value.backward()
            torch.nn.utils.clip_grad_value_(p.values(), CHAR["clip"])
            opt.step()
            losses.append(value.item())
        return losses
    return Runner("PyTorch eager", run, compile_of=lambda: None)


def _adagrad_jax(jax, clip):
    jnp = jax.numpy
    tm = jax.tree_util.tree_map

    def update(p, g, s, lr):
        if clip:
            g = tm(lambda g: jnp.clip(g, -clip, clip), g)
        s = tm(lambda h, g: h + g * g, s, g)
        return tm(lambda p, g, h: p - lr * g / (jnp.sqrt(h) + 1e-10), p, g, s), s
    return update, lambda p: tm(jnp.zeros_like, p)


def _jax_step_and_loop(jax, loss, update, init, cfg, p0, batches, stacked, pick, label):
    """A jitted step (value_and_grad + update) looped in Python, and the whole loop in one
    jit (`fori_loop` to a dynamic n)."""
    jnp = jax.numpy

    @jax.jit
    def step(p, s, lr, *batch):
        value, g = jax.value_and_grad(loss)(p, *batch)
        p, s = update(p, g, s, lr)
        return p, s, value

    @jax.jit
    def train(p, all_batches, n, lr):
        def body(i, carry):
            params, state, total = carry
            params, state, value = step(params, state, lr, *pick(all_batches, i))
            return params, state, total + value
        return jax.lax.fori_loop(0, n, body, (p, init(p), jnp.zeros((), jnp.float64)))

    pj = jax.tree_util.tree_map(jnp.asarray, p0)
    dev_batches = [tuple(jnp.asarray(b) for b in batch) for batch in batches]
    dev_stacked = jax.tree_util.tree_map(jnp.asarray, stacked)

    def run_steps(n, check=False):
        p, s, losses, lr = pj, init(pj), [], _lr(cfg, check)
        for i in range(n):
            p, s, value = step(p, s, lr, *dev_batches[i])
            losses.append(value)
        return _floats(jax.block_until_ready(losses))

    def run_loop(n, check=False):
        return float(jax.block_until_ready(train(pj, dev_stacked, n, _lr(cfg, check))[2]))

    return {"jax_step": Runner("JAX jit step loop" + (f" ({label})" if label else ""), run_steps),
            "jax_loop": Runner("JAX jit whole loop (fori_loop" + (f", {label})" if label else ")"),
                               run_loop, staged=True)}


def _char_jax(kind, jax, cfg, p0, chars):
    jnp = jax.numpy
    V = CHAR["V"]
    ops = (jnp.tanh, jax.nn.sigmoid)

    def loss(p, seq):
        def body(carry, t):
            h, c = carry
            h, c = _cell(kind, ops, p, jax.nn.one_hot(seq[t], V, dtype=jnp.float64), h, c)
            logp = jax.nn.log_softmax(h @ p["Wy"] + p["by"])
            return (h, c), -jnp.mean(jnp.take_along_axis(logp, seq[t + 1][:, None], 1))
        zeros = jnp.zeros((CHAR["B"], CHAR["H"]))
        _, losses = jax.lax.scan(body, (zeros, zeros), jnp.arange(CHAR["T"]))
        return jnp.sum(losses)

    update, init = _adagrad_jax(jax, CHAR["clip"])
    return _jax_step_and_loop(jax, loss, update, init, cfg, p0, [(c,) for c in chars], chars,
                              lambda all_, i: (all_[i],), "lax.scan over time")


# -- TreeLSTM ---------------------------------------------------------------------------

def tree_params(seed=0):
    D, H, C = TREE["D"], TREE["H"], TREE["C"]
    r = np.random.default_rng(seed)
    return {"Wl": r.standard_normal((D, 3 * H)) / np.sqrt(D), "bl": np.zeros(3 * H),
            "Wi": r.standard_normal((2 * H, 5 * H)) / np.sqrt(2 * H), "bi": np.zeros(5 * H),
            "Wo": r.standard_normal((H, C)) / np.sqrt(H), "bo": np.zeros(C)}


def _leaf(ops, p, e):
    """A leaf: gates i, o, u from the word's embedding e; (h, c)."""
    tanh, sigmoid = ops
    H = TREE["H"]
    z = e @ p["Wl"] + p["bl"]
    c = sigmoid(z[:H]) * tanh(z[2 * H:])
    return sigmoid(z[H:2 * H]) * tanh(c), c


def _internal(ops, concatenate, p, hl, cl, hr, cr):
    """An internal node (binary TreeLSTM, a forget gate per child); (h, c)."""
    tanh, sigmoid = ops
    H = TREE["H"]
    z = concatenate([hl, hr]) @ p["Wi"] + p["bi"]
    i, fl, fr, o = (sigmoid(z[k * H:(k + 1) * H]) for k in range(4))
    c = i * tanh(z[4 * H:]) + fl * cl + fr * cr
    return o * tanh(c), c


def _post_order(left, right):
    order, stack = [], [(0, False)]
    while stack:
        v, done = stack.pop()
        if done:
            order.append(v)
        else:
            stack += [(v, True)] + [(c, False) for c in (right[v], left[v]) if c >= 0]
    return order


def jitad_tree_loss(jitad, p, E, tree):
    """One tree's TreeLSTM loss in jitad: TREE with the leaf and internal formulas in an IF."""
    ops = (jitad.tanh, jitad.sigmoid)

    def combine(node, left, right):
        (hl, cl, ll), (hr, cr, lr_) = left, right
        h, c = jitad.IF(node.is_leaf, lambda: _leaf(ops, p, E[node.word]),
                        lambda: _internal(ops, jitad.concatenate, p, hl, cl, hr, cr))
        logits = h @ p["Wo"] + p["bo"]
        return h, c, ll + lr_ + (jitad.logsumexp(logits, 0) - logits[node.label])
    zeros = np.zeros(TREE["H"])
    return jitad.TREE(tree, (zeros, zeros, 0.0), combine)[2]


def tree_model(m, size):
    """Binary TreeLSTM over fixed 300-d embeddings; the loss of a tree is the sum over its
    nodes of the cross-entropy of a 5-class softmax on h; Adagrad(0.05), batch 1."""
    H, C, lr = TREE["H"], TREE["C"], TREE["lr"]
    n_data = max(size["tree_count"], size["tree_check"])
    parses = data.sst_parses(1101)
    all_nodes = sum(len(p[0]) for p in parses)
    mean_words = np.mean([(len(p[0]) + 1) / 2 for p in parses])
    distinct_shapes = len({(p[0].tobytes(), p[1].tobytes()) for p in parses})
    parses = parses[:n_data]
    E = data.embeddings(dim=TREE["D"])
    p0 = tree_params()
    jitad = m["jitad"]
    ops = (jitad.tanh, jitad.sigmoid)
    trees = [jitad.Tree(l, r, word=w, label=y) for l, r, w, y in parses]

    loss = functools.partial(jitad_tree_loss, jitad)

    # (b) cannot pick the i-th jitad.Tree inside staged code: it recurses with FUN over
    # the index arrays of all trees concatenated (a forest), one root per step.
    offsets = np.cumsum([0] + [len(p[0]) for p in parses])
    shift = lambda a, o: np.where(a >= 0, a + o, -1)
    forest = (np.concatenate([shift(l, o) for (l, _, _, _), o in zip(parses, offsets)]),
              np.concatenate([shift(r, o) for (_, r, _, _), o in zip(parses, offsets)]),
              np.concatenate([p[2] for p in parses]), np.concatenate([p[3] for p in parses]),
              offsets[:-1].astype(np.int64))
    state = jitad.ShapeDtype((H,), "f64")

    def forest_loss(p, E, forest, root):
        left, right, word, label, _ = forest

        @jitad.FUN(out=(state, state, 0.0))
        def node(k):
            def internal():
                hl, cl, ll = node(left[k])
                hr, cr, lr_ = node(right[k])
                return _internal(ops, jitad.concatenate, p, hl, cl, hr, cr) + (ll + lr_,)
            h, c, below = jitad.IF(left[k] < 0, lambda: _leaf(ops, p, E[word[k]]) + (0.0,), internal)
            logits = h @ p["Wo"] + p["bo"]
            return h, c, below + (jitad.logsumexp(logits, 0) - logits[label[k]])
        return node(root)[2]

    opt = jitad.optim.adagrad
    device = size.get("device", "cpu")
    runners = {"jitad_step": _jitad_runners(jitad, loss, opt, TREE, p0, [(E, t) for t in trees],
                                            None, None, device=device)["jitad_step"],
               "jitad_loop": _jitad_runners(jitad, forest_loss, opt, TREE, p0, None, (E, forest),
                                            lambda all_, i: (all_[0], all_[1], all_[1][4][i]),
                                            device=device)["jitad_loop"]}
    if m["torch"]:
        runners[TORCH] = _tree_torch(m["torch"], p0, E, parses, size.get("torch_device", device))
    if m["jax"]:
        runners.update(_tree_jax(m["jax"], p0, E, parses, size["tree_rec"], size["scan_buckets"]))
    n = size["tree_count"]
    timed_nodes = int(offsets[n])
    return {"runners": runners, "iters": n, "check": size["tree_check"],
            "flops_per_iter": tree_flops(parses[:n]) / n, "unit": f"{n} trees ({timed_nodes} nodes)",
            "unit_name": "tree", "full_scale": all_nodes / timed_nodes * n / 1101,
            "work": lambda k: int(offsets[k]),
            "distinct_shapes": distinct_shapes,
            "notes": [f"TreeLSTM: fixed 300-d embeddings (vocab 20 000, not trained), hidden {H}, "
                      f"{C} classes, cross-entropy at every node summed over the tree, Adagrad lr "
                      f"{lr}, batch 1; leaves: gates i, o, u from the embedding; internal nodes: "
                      "gates i, f_left, f_right, o, u from [h_left; h_right]. Random binary "
                      f"parses, SST-like lengths (1–50 words, mean {mean_words:.1f}); "
                      f"the first {n} trees are timed ({timed_nodes} nodes; the epoch has "
                      f"{all_nodes}). jitad (a) uses TREE over a jitad.Tree per sentence; (b) "
                      "cannot select a jitad.Tree by a staged index, so it recurses with FUN "
                      "over the index arrays of all trees concatenated."]}


def recursive_tree_loss(ops, concat, logsumexp, p, E, tree):
    """One tree's TreeLSTM loss by per-node Python recursion (PyTorch, JAX): `ops` =
    (tanh, sigmoid); `tree` = left, right, word, label (lists, tuples or arrays)."""
    left, right, word, label = tree

    def rec(k):
        if left[k] < 0:
            h, c = _leaf(ops, p, E[word[k]])
            below = 0.0
        else:
            hl, cl, ll = rec(left[k])
            hr, cr, lr_ = rec(right[k])
            h, c = _internal(ops, concat, p, hl, cl, hr, cr)
            below = ll + lr_
        logits = h @ p["Wo"] + p["bo"]
        return h, c, below + (logsumexp(logits, 0) - logits[label[k]])
    return rec(0)[2]


def torch_tree_loss(torch, p, Et, tree):
    return recursive_tree_loss((torch.tanh, torch.sigmoid), torch.cat, torch.logsumexp, p, Et, tree)


def _tree_torch(torch, p0, E, parses, device="cpu"):
    Et = torch.from_numpy(E).to(device)
    trees = [(l.tolist(), r.tolist(), w.tolist(), torch.from_numpy(y).to(device)) for l, r, w, y in parses]
    tree_loss = lambda p, tree: torch_tree_loss(torch, p, Et, tree)   # noqa: E731

    def run(n, check=False):
        p = {k: torch.tensor(v, requires_grad=True, device=device) for k, v in p0.items()}
        opt = torch.optim.Adagrad(list(p.values()), lr=_lr(TREE, check), eps=1e-10)
        losses = []
        for i in range(n):
            opt.zero_grad()
            value = tree_loss(p, trees[i])
            value.backward()
            opt.step()
            losses.append(value.item())
        return losses
    return Runner("PyTorch eager", run, compile_of=lambda: None)


def padded_post_order(batch, nb):
    """Trees (left, right, word, label) as padded post-order arrays of shape (5, trees, nb):
    kind (0 = padding, 1 = leaf, 2 = internal), word, label, and the children's positions
    (nb: the zero row)."""
    arrays = np.zeros((5, len(batch), nb), np.int64)
    arrays[3:] = nb
    for b, (left, right, word, label) in enumerate(batch):
        order = _post_order(left, right)
        pos = {v: k for k, v in enumerate(order)}
        for k, v in enumerate(order):
            arrays[0, b, k] = 1 if left[v] < 0 else 2
            arrays[1, b, k], arrays[2, b, k] = max(word[v], 0), label[v]
            if left[v] >= 0:
                arrays[3, b, k], arrays[4, b, k] = pos[left[v]], pos[right[v]]
    return arrays


def jax_scan_loss(jax, p, E, kind, word, label, lp, rp):
    """A padded tree's TreeLSTM loss in JAX: a `lax.scan` over its post-order nodes (kind
    0 = padding, 1 = leaf, 2 = internal; children as positions, row nb stays zero). Every
    step computes both the leaf and the internal formula and selects (jnp.where): with
    lax.switch instead, JAX's reverse pass is 7x slower here (it materializes zero
    cotangents of every weight for the branches not taken, padding steps included)."""
    jnp = jax.numpy
    ops = (jnp.tanh, jax.nn.sigmoid)
    X = E[word]

    def body(carry, k):
        hs, cs = carry
        h_leaf, c_leaf = _leaf(ops, p, X[k])
        h_int, c_int = _internal(ops, jnp.concatenate, p, hs[lp[k]], cs[lp[k]], hs[rp[k]], cs[rp[k]])
        h = jnp.where(kind[k] == 1, h_leaf, jnp.where(kind[k] == 2, h_int, 0.0))
        c = jnp.where(kind[k] == 1, c_leaf, jnp.where(kind[k] == 2, c_int, 0.0))
        logits = h @ p["Wo"] + p["bo"]
        loss = jnp.where(kind[k] > 0, jax.nn.logsumexp(logits, 0) - logits[label[k]], 0.0)
        return (hs.at[k].set(h), cs.at[k].set(c)), loss
    buf = jnp.zeros((kind.shape[0] + 1, TREE["H"]))
    return jnp.sum(jax.lax.scan(body, (buf, buf), jnp.arange(kind.shape[0]))[1])


def _tree_jax(jax, p0, E, parses, rec_trees_n, buckets):
    jnp = jax.numpy
    ops = (jnp.tanh, jax.nn.sigmoid)
    update, init = _adagrad_jax(jax, None)
    Ej = jnp.asarray(E)
    pj = jax.tree_util.tree_map(jnp.asarray, p0)

    # per-node Python recursion: the graph is specialized to the tree's shape
    def rec_loss(p, E, word, label, shape):
        return recursive_tree_loss(ops, jnp.concatenate, jax.nn.logsumexp, p, E, (*shape, word, label))

    # E is an argument: closed over, it would be a 48 MB constant in every XLA program
    @functools.partial(jax.jit, static_argnums=6)
    def rec_step(p, s, lr, E, word, label, shape):
        value, g = jax.value_and_grad(rec_loss)(p, E, word, label, shape)
        p, s = update(p, g, s, lr)
        return p, s, value

    rec_trees = [(jnp.asarray(w), jnp.asarray(y), (tuple(l.tolist()), tuple(r.tolist())))
                 for l, r, w, y in parses]
    seen = set()
    compile_s = [0.0]

    def run_rec(n, check=False):
        p, s, losses, lr = pj, init(pj), [], _lr(TREE, check)
        for i in range(n):
            word, label, shape = rec_trees[i]
            if shape in seen:
                p, s, value = rec_step(p, s, lr, Ej, word, label, shape)
            else:   # a new tree shape: JAX traces and compiles; timed apart
                start = time.perf_counter()
                p, s, value = jax.block_until_ready(rec_step(p, s, lr, Ej, word, label, shape))
                compile_s[0] += time.perf_counter() - start
                seen.add(shape)
            losses.append(value)
        return _floats(jax.block_until_ready(losses))
    # it compiles inside its first (the loss check's) run, once per tree shape
    rec_runner = Runner(f"JAX jit per-tree recursion (first {rec_trees_n} trees, scaled by nodes)",
                        run_rec, warm=lambda: None, compile_of=lambda: compile_s[0])
    rec_runner.iters = rec_trees_n

    # padded lax.scan over the nodes in post-order (`jax_scan_loss`), one compile per bucket of sizes
    def bucket(n):
        return next(b for b in buckets if b >= n)

    arrays = [tuple(padded_post_order([parse], bucket(len(parse[0])))[:, 0]) for parse in parses]

    scan_loss = functools.partial(jax_scan_loss, jax)

    @jax.jit
    def scan_step(p, s, lr, E, *arrs):
        value, g = jax.value_and_grad(scan_loss)(p, E, *arrs)
        p, s = update(p, g, s, lr)
        return p, s, value

    scan_trees = [tuple(jnp.asarray(a) for a in arrs) for arrs in arrays]

    def run_scan(n, check=False):
        p, s, losses, lr = pj, init(pj), [], _lr(TREE, check)
        for i in range(n):
            p, s, value = scan_step(p, s, lr, Ej, *scan_trees[i])
            losses.append(value)
        return _floats(jax.block_until_ready(losses))

    def warm_scan():   # one compile per bucket
        for b in buckets:
            k = next((i for i, a in enumerate(arrays) if len(a[0]) == b), None)
            if k is not None:
                jax.block_until_ready(scan_step(pj, init(pj), TREE["lr"], Ej, *scan_trees[k]))

    out = {"jax_scan": Runner("JAX jit padded lax.scan (buckets of "
                              + "/".join(map(str, buckets)) + " nodes)", run_scan, warm=warm_scan)}
    if rec_trees_n:
        out["jax_rec"] = rec_runner
    return out


# -- CNN ----------------------------------------------------------------------------------

def cnn_params(seed=0):
    r = np.random.default_rng(seed)

    def uniform(shape, fan_in):   # PyTorch's default initialization
        bound = 1 / np.sqrt(fan_in)
        return r.uniform(-bound, bound, shape)
    c1, c2, hidden, flat = CNN["c1"], CNN["c2"], CNN["hidden"], cnn_flat()
    return {"c1": uniform((c1, 1, 5, 5), 25), "cb1": uniform(c1, 25),
            "c2": uniform((c2, c1, 5, 5), c1 * 25), "cb2": uniform(c2, c1 * 25),
            "W1": uniform((flat, hidden), flat), "b1": uniform(hidden, flat),
            "W2": uniform((hidden, 10), hidden), "b2": uniform(10, hidden)}


def cnn_flat():
    """Features after the second pooling: 20 × 4 × 4 = 320 for 28×28 images."""
    f = ((CNN["side"] - 4) // 2 - 4) // 2
    return CNN["c2"] * f * f


def dropout_keep(i, shape):
    """jitad's dropout mask of step i (jitad.dropout(x, 0.5, key0 + i)), for the others."""
    from jitad.random import uniform
    return uniform(CNN["key0"] + i, shape) >= CNN["rate"]


def cnn_model(m, size):
    """conv 1→10 5×5, maxpool 2, relu, conv 10→20 5×5, maxpool 2, relu, linear 320→50,
    relu, dropout 0.5, linear 50→10, log_softmax + NLL; SGD lr 0.01 momentum 0.5."""
    B, rate = CNN["B"], CNN["rate"]
    steps = max(size["cnn_steps"], size["cnn_check"])
    images, labels = data.mnist_like(steps * B)
    side, flat = CNN["side"], cnn_flat()
    if side != 28:   # a crop (bench.gpu's simulator smoke run only)
        images = np.ascontiguousarray(images[:, :, :side, :side])
    images, labels = images.reshape(steps, B, 1, side, side), labels.reshape(steps, B)
    p0 = cnn_params()
    jitad = m["jitad"]

    def loss(p, x, y, key):
        h = jitad.relu(jitad.max_pool2d(jitad.conv2d(x, p["c1"], p["cb1"]), 2))
        h = jitad.relu(jitad.max_pool2d(jitad.conv2d(h, p["c2"], p["cb2"]), 2))
        h = jitad.relu(jitad.reshape(h, (B, flat)) @ p["W1"] + p["b1"])
        h = jitad.dropout(h, rate, key)
        return jitad.nll_loss(jitad.log_softmax(h @ p["W2"] + p["b2"]), y)

    runners = _jitad_runners(jitad, loss, lambda lr: jitad.optim.sgd(lr, CNN["momentum"]), CNN, p0,
                             [(images[i], labels[i]) for i in range(steps)], (images, labels),
                             lambda all_, i: (all_[0][i], all_[1][i]), key_of=lambda i: CNN["key0"] + i,
                             device=size.get("device", "cpu"))
    masks = [dropout_keep(i, (B, CNN["hidden"])) for i in range(size["cnn_check"])]
    if m["torch"]:
        runners[TORCH] = _cnn_torch(m["torch"], p0, images, labels, masks,
                                    size.get("torch_device", size.get("device", "cpu")))
    if m["jax"]:
        runners.update(_cnn_jax(m["jax"], p0, images, labels, masks))
        if not size["jax_loop"]:
            del runners["jax_loop"]
    n = size["cnn_steps"]
    return {"runners": runners, "iters": n, "check": size["cnn_check"], "flops_per_iter": None,
            "dropout": True,
            "unit": f"{n} steps ({n * B} images)", "unit_name": "step",
            "notes": ["CNN: MNIST shapes (synthetic 28×28 images of 10 classes, bench/data.py), "
                      "batch 100: conv 1→10 5×5, maxpool 2, relu, conv 10→20 5×5, maxpool 2, relu, "
                      "linear 320→50, relu (as PyTorch's MNIST example), dropout 0.5, linear "
                      "50→10, log_softmax + NLL; SGD lr 0.01, momentum 0.5. The loss check runs "
                      "PyTorch and JAX with jitad's dropout masks (jitad.random.uniform, eagerly); "
                      "timed runs use their own dropout (F.dropout, jax.random.bernoulli)."]}


def _cnn_torch(torch, p0, images, labels, masks, device="cpu"):
    F = torch.nn.functional
    X = [torch.from_numpy(x).to(device) for x in images]
    Y = [torch.from_numpy(y).to(device) for y in labels]
    M = [torch.from_numpy(k).to(device) for k in masks]

    def loss(p, x, y, keep):
        h = F.relu(F.max_pool2d(F.conv2d(x, p["c1"], p["cb1"]), 2))
        h = F.relu(F.max_pool2d(F.conv2d(h, p["c2"], p["cb2"]), 2))
        h = F.relu(h.reshape(CNN["B"], cnn_flat()) @ p["W1"] + p["b1"])
        if keep is None:
            h = F.dropout(h, CNN["rate"], training=True)
        else:
            h = torch.where(keep, h / (1.0 - CNN["rate"]), 0.0)
        return F.nll_loss(F.log_softmax(h @ p["W2"] + p["b2"], -1), y)

    def run(n, check=False):
        p = {k: torch.tensor(v, requires_grad=True, device=device) for k, v in p0.items()}
        opt = torch.optim.SGD(list(p.values()), lr=_lr(CNN, check), momentum=CNN["momentum"])
        losses = []
        for i in range(n):
            opt.zero_grad()
            value = loss(p, X[i], Y[i], M[i] if check else None)
            value.backward()
            opt.step()
            losses.append(value.item())
        return losses
    return Runner("PyTorch eager", run, compile_of=lambda: None)


def _cnn_jax(jax, p0, images, labels, masks):
    jnp, lax = jax.numpy, jax.lax
    tm = jax.tree_util.tree_map
    mom = CNN["momentum"]

    def conv_pool_relu(x, w, b):
        y = lax.conv_general_dilated(x, w, (1, 1), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW"))
        y = y + b[None, :, None, None]
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        return jax.nn.relu(y)

    def loss(p, x, y, keep):
        h = conv_pool_relu(conv_pool_relu(x, p["c1"], p["cb1"]), p["c2"], p["cb2"])
        h = jax.nn.relu(h.reshape(CNN["B"], cnn_flat()) @ p["W1"] + p["b1"])
        h = jnp.where(keep, h / (1.0 - CNN["rate"]), 0.0)
        logp = jax.nn.log_softmax(h @ p["W2"] + p["b2"])
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], 1))

    def update(p, g, v, lr):
        v = tm(lambda v, g: mom * v + g, v, g)
        return tm(lambda p, v: p - lr * v, p, v), v

    def native_loss(p, x, y, i):   # JAX's own dropout for the timed runs
        keep = jax.random.bernoulli(jax.random.fold_in(jax.random.key(0), i), 1.0 - CNN["rate"],
                                    (CNN["B"], CNN["hidden"]))
        return loss(p, x, y, keep)

    init = lambda p: tm(jnp.zeros_like, p)
    steps = len(images)
    timed = _jax_step_and_loop(jax, native_loss, update, init, CNN, p0,
                               [(images[i], labels[i], np.int64(i)) for i in range(steps)],
                               (images, labels), lambda all_, i: (all_[0][i], all_[1][i], i), "")
    checked = _jax_step_and_loop(jax, loss, update, init, CNN, p0,
                                 [(images[i], labels[i], masks[i]) for i in range(len(masks))],
                                 (images[:len(masks)], labels[:len(masks)], np.stack(masks)),
                                 lambda all_, i: (all_[0][i], all_[1][i], all_[2][i]), "")
    out = {}
    for name in ("jax_step", "jax_loop"):
        t, c = timed[name], checked[name]
        out[name] = Runner(t.label, lambda n, check, t=t, c=c: (c if check else t).run(n, check),
                           warm=lambda t=t: t.run(1), staged=t.staged)
    return out


BUILDERS = {"rnn": lambda m, s: char_model("rnn", m, s), "lstm": lambda m, s: char_model("lstm", m, s),
            "treelstm": tree_model, "cnn": cnn_model}


# -- running ---------------------------------------------------------------------------------

def check_losses(model, runners, results):
    """Every comparator's losses against PyTorch's (or jitad's step loop without PyTorch)."""
    ref_name = TORCH if TORCH in results else "jitad_step"
    ref = np.array(results[ref_name])
    lines = []
    for name, got in results.items():
        if name == ref_name:
            continue
        if runners[name].staged:
            want, have = float(np.sum(ref)), float(got)
            err = abs(have - want) / abs(want)
            what = f"sum of the first {len(ref)} losses"
        else:
            have = np.array(got)
            n = len(have)
            err = float(np.max(np.abs(have - ref[:n]) / np.abs(ref[:n])))
            what = f"first {n} losses"
        line = (f"{model}: {runners[name].label} vs {runners[ref_name].label}, {what}: "
                f"max relative difference {err:.1e}")
        if not err <= LOSS_RTOL:
            raise LossMismatch(line + f" > {LOSS_RTOL:g}")
        lines.append(line)
    return lines


def agreement(model, runners, losses, spec):
    """For information: over how many steps of a timed run (the timed learning rate, no
    shared dropout masks) each step loop's losses stay within 1e-6 of PyTorch's."""
    if TORCH not in losses or spec.get("dropout"):
        return []
    ref = np.array(losses[TORCH])
    lines = []
    for name, got in losses.items():
        if name == TORCH or runners[name].staged:
            continue
        got = np.array(got)
        bad = np.flatnonzero(np.abs(got - ref[:len(got)]) > LOSS_RTOL * np.abs(ref[:len(got)]))
        lines.append(f"{model} (information): at the timed learning rate, {runners[name].label}'s "
                     f"losses stay within 1e-6 of PyTorch's "
                     + (f"for all {len(got)} steps of a timed run" if not len(bad) else
                        f"for the first {bad[0]} steps of {len(got)}, max relative difference "
                        f"{np.max(np.abs(got - ref[:len(got)]) / np.abs(ref[:len(got)])):.1e}"))
    return lines


def run_model(model, m, size, bar):
    spec = BUILDERS[model](m, size)
    runners = spec["runners"]
    bar.total = (getattr(bar, "total", 0) or 0) + len(runners) * (2 + size["repeats"])
    getattr(bar, "refresh", lambda: None)()   # harness.NoBar has none
    jitad_rt = __import__("jitad.lower.runtime", fromlist=["arena_high_water"])
    # compile (first call), then the loss check, which is the warm-up
    first_rss = {}
    for name, r in runners.items():
        bar.set_postfix_str(f"{model}: compiling {name}")
        with PeakRSS() as mem:
            r.warm()
        first_rss[name] = mem.bytes
        bar.update(1)
    check = {}
    for name, r in runners.items():
        bar.set_postfix_str(f"{model}: loss check, {name}")
        with PeakRSS() as mem:
            check[name] = r.run(min(spec["check"], r.iters or spec["check"]), True)
        first_rss[name] = max(first_rss[name], mem.bytes)
        bar.update(1)
    check_lines = check_losses(model, runners, check)
    if spec.get("check_lr"):
        check_lines = [c + f" (at lr {spec['check_lr']:g}; the timed runs use lr {spec['lr']:g}: "
                       "see RNN_CHECK_LR)" for c in check_lines]
    samples = {name: [] for name in runners}
    rss = {name: [] for name in runners}
    arena, timed_losses = {}, {}
    for rep in range(size["repeats"]):
        for name, r in runners.items():
            bar.set_postfix_str(f"{model}: repeat {rep + 1}/{size['repeats']}, {name}")
            if r.jitad:
                jitad_rt.arena_high_water(reset=True)
            with PeakRSS() as mem:
                start = time.perf_counter()
                losses = r.run(r.iters or spec["iters"], False)
                samples[name].append(time.perf_counter() - start)
            timed_losses.setdefault(name, losses)
            rss[name].append(mem.bytes)
            if r.jitad:
                arena[name] = max(arena.get(name, 0), jitad_rt.arena_high_water())
            bar.update(1)
    check_lines += agreement(model, runners, timed_losses, spec)
    n = spec["iters"]
    full = FULL_UNITS[model] * spec.get("full_scale", 1.0) / n
    results = {}
    work = spec.get("work", lambda k: k)   # scales a comparator that ran fewer iterations
    for name, r in runners.items():
        scale = work(n) / work(r.iters) if r.iters else 1.0
        s = [t * scale for t in samples[name]]
        results[name] = {"label": r.label, "median_s": statistics.median(s), "min_s": min(s),
                         "max_s": max(s), "repeats": len(s), "samples_s": s,
                         "per_iter_us": statistics.median(s) / n * 1e6,
                         "full_unit_s": statistics.median(s) * full,
                         "compile_s": r.compile_s, "compile_stages": r.compile_stages(),
                         "peak_rss_bytes": max(rss[name]),
                         "first_rss_bytes": first_rss[name],
                         "arena_bytes": arena.get(name), "staged": r.staged}
    notes = list(spec["notes"])
    if "jax_rec" in results:
        per_tree = results["jax_rec"]["compile_s"] / runners["jax_rec"].iters
        notes.append(f"TreeLSTM, JAX per-tree recursion: XLA compiled each of the first "
                     f"{runners['jax_rec'].iters} tree shapes in {per_tree:.1f} s on average "
                     f"(trace and compile of value_and_grad + update, unrolled over the tree); "
                     f"its timed runs reuse those compiled programs, so its time is a steady "
                     f"state that a real epoch never reaches: the 1101 trees have "
                     f"{spec['distinct_shapes']} distinct shapes, ≈ {per_tree * spec['distinct_shapes'] / 3600:.1f} "
                     "hours of compiling per epoch at that rate.")
    return {"model": model, "title": TITLES[model], "unit": spec["unit"], "iters": n,
            "unit_name": spec["unit_name"], "check_steps": spec["check"],
            "flops_per_iter": spec["flops_per_iter"], "results": results,
            "check": check_lines, "notes": notes}


def _best(row, prefix):
    cands = {k: v for k, v in row["results"].items() if k.startswith(prefix)}
    if not cands:
        return None, None
    k = min(cands, key=lambda k: cands[k]["median_s"])
    return k, cands[k]


def summarize(row, dgemm):
    """Ratios (comparator / best jitad) and the FLOP rate, added to the row."""
    jk, j = _best(row, "jitad")
    row["best_jitad"] = jk
    ratios = {}
    for comp in ("torch", "jax"):
        ck, c = _best(row, comp)
        if c is not None:
            ratios[comp] = {"vs": ck, "ratio": c["median_s"] / j["median_s"],
                            "step": c["median_s"] / row["results"]["jitad_step"]["median_s"],
                            "loop": c["median_s"] / row["results"]["jitad_loop"]["median_s"]}
    row["ratios"] = ratios
    if row["flops_per_iter"]:
        flops = row["flops_per_iter"] * row["iters"]
        row["flop_rate"] = {k: flops / v["median_s"] for k, v in row["results"].items()}
        row["dgemm_fraction"] = row["flop_rate"][jk] / dgemm
    return row


def goals(rows):
    mark = lambda ok: "✓" if ok else "✗"
    out = []
    for row in rows:
        model = row["model"]
        label = row["results"][row["best_jitad"]]["label"]
        for comp, target in GOALS[model].items():
            r = row["ratios"].get(comp)
            if r is None:
                out.append(f"? {row['title']}: {comp} not installed (goal ≥ {target:g}×)")
                continue
            others = [f"{row['results'][k]['median_s'] / row['results'][row['best_jitad']]['median_s']:.2f}× "
                      f"{row['results'][k]['label']}" for k in row["results"]
                      if k.startswith(comp) and k != r["vs"]]
            out.append(f"{mark(r['ratio'] >= target)} {row['title']}: {label} is {r['ratio']:.2f}× "
                       f"{row['results'][r['vs']]['label']} (goal ≥ {target:g}×)"
                       + (f"; for information {', '.join(others)}" if others else ""))
        for k in ("jitad_step", "jitad_loop"):
            c = row["results"][k]["compile_s"]
            out.append(f"{mark(c <= 3.0)} {row['title']}: {row['results'][k]['label']} compiles in "
                       f"{c:.2f} s (goal ≤ 3 s)")
        if row.get("dgemm_fraction") is not None:
            f = row["dgemm_fraction"]
            out.append(f"{mark(f >= 1 / 3)} {row['title']}: {label} reaches {f:.3f} of the dgemm "
                       f"FLOP rate (goal ≥ 0.333)")
    return out


def _s(x):
    if x is None:
        return "—"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def _mb(b):
    return "—" if b is None else f"{b / 2 ** 20:.1f}"


def markdown(info, rows, goal_lines, notes):
    s = info["settings"]
    out = ["# jitad model benchmarks", "",
           f"{info['date']} · Python {info['python']} · {info['platform']} · {info['cpu_count']} CPUs "
           f"(load average {info['load_average'][0]} at start) · single thread · float64 · "
           f"median of {s['repeats']} repeats after warm-up, interleaved across comparators"
           + (" · **QUICK MODE (tiny sizes, not a measurement)**" if s.get("quick") else ""), "",
           "Versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()), "",
           f"Single-core dgemm (1000×1000 numpy matmul, median of 5): {info['dgemm_gflops']:.1f} GFLOP/s "
           f"at the start of this run, {info['dgemm_gflops_end']:.1f} at the end; the FLOP-rate "
           f"fractions divide by the higher, **{max(info['dgemm_gflops'], info['dgemm_gflops_end']):.1f} GFLOP/s**.", "",
           "## Summary", "",
           "Seconds for the timed unit (median); ratios are comparator time / jitad time, "
           "> 1 means jitad is faster; the best jitad variant and the best JAX variant are used.", "",
           "| model | timed unit | jitad (a) step loop s | jitad (b) staged loop s | PyTorch eager s "
           "| best JAX s | PyTorch / jitad | JAX / jitad | jitad compile s (a / b) | JAX compile s "
           "| jitad GFLOP/s | of dgemm | Lantern reported |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        r = row["results"]
        jx = _best(row, "jax")[1]
        ratio = lambda c: f"**{row['ratios'][c]['ratio']:.2f}**" if c in row["ratios"] else "—"
        fl = row.get("flop_rate", {}).get(row["best_jitad"])
        frac = row.get("dgemm_fraction")
        out.append(
            f"| {row['title']} | {row['unit']} | {_s(r['jitad_step']['median_s'])} | "
            f"{_s(r['jitad_loop']['median_s'])} | {_s(r.get('torch', {}).get('median_s'))} | "
            f"{_s(jx['median_s']) + ' (' + SHORT[_best(row, 'jax')[0]] + ')' if jx else '—'} | "
            f"{ratio('torch')} | {ratio('jax')} | "
            f"{_s(r['jitad_step']['compile_s'])} / {_s(r['jitad_loop']['compile_s'])} | "
            f"{_s(jx['compile_s']) if jx else '—'} | "
            f"{f'{fl / 1e9:.2f}' if fl else '—'} | "
            f"{f'{frac:.3f}' if frac is not None else '—'} | "
            f"{LANTERN[row['model']]} |")
    out += ["", "## Every comparator", "",
            "Median and min–max of the timed unit; µs per iteration (per tree for the TreeLSTM); "
            "the median scaled to BENCHMARKS.md's unit (5000 iterations; one epoch of 1101 trees, "
            "by node count; one epoch of 600 steps of 100 images): an extrapolation, not a "
            "measurement; compile / first-call seconds; peak memory.", "",
            "| model | comparator | median s | spread s | µs / iter | BENCHMARKS unit s (extrap.) "
            "| compile s | GFLOP/s | peak RSS growth MiB: timed / compile, check | jitad arena peak MiB |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        for k, v in row["results"].items():
            fl = row.get("flop_rate", {}).get(k)
            out.append(f"| {row['title']} | {v['label']} | {_s(v['median_s'])} | "
                       f"{_s(v['min_s'])}–{_s(v['max_s'])} | {v['per_iter_us']:,.0f} | "
                       f"{_s(v['full_unit_s'])} | {_s(v['compile_s'])} | "
                       f"{f'{fl / 1e9:.2f}' if fl else '—'} | {_mb(v['peak_rss_bytes'])} / "
                       f"{_mb(v['first_rss_bytes'])} | "
                       f"{_mb(v['arena_bytes'])} |")
    out += compile_stage_table(rows)
    out += ["", "## Goals (BENCHMARKS.md)", ""] + [f"- {g}" for g in goal_lines]
    out += ["", "## Loss check", ""] + [f"- {c}" for row in rows for c in row["check"]]
    out += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"


def compile_stage_table(rows):
    """jitad's compile seconds by stage (`compile_report()`; the step loop's are the step's
    plus the update's), as markdown lines."""
    stages = list(next((v["compile_stages"] for row in rows for v in row["results"].values()
                        if v.get("compile_stages")), {}))
    if not stages:
        return []
    out = ["", "## jitad compile time by stage", "",
           "Milliseconds (`compile_report()`; disk cache off unless --keep-cache); "
           "`python -m bench.compile` compares them with JAX's `jit` in the same process.", "",
           "| model | comparator | " + " | ".join(stages) + " | total |",
           "|---|---|" + "---|" * (len(stages) + 1)]
    for row in rows:
        for v in row["results"].values():
            if v.get("compile_stages"):
                out.append(f"| {row['title']} | {v['label']} | "
                           + " | ".join(f"{v['compile_stages'].get(k, 0.0) * 1e3:.0f}" for k in stages)
                           + f" | {v['compile_s'] * 1e3:.0f} |")
    return out


def plot(path, rows):
    """Bars: jitad's speedup (best variant) over each comparator, per model (log scale)."""
    plt = harness.pyplot()
    if plt is None:
        return None
    comps = [("torch", "PyTorch eager"), ("jax_step", "JAX jit step loop"),
             ("jax_loop", "JAX jit whole loop"), ("jax_rec", "JAX per-tree recursion"),
             ("jax_scan", "JAX padded scan")]
    fig, ax = plt.subplots(figsize=(7.5, 4))
    width = 0.8 / len(comps)
    for j, (k, label) in enumerate(comps):
        xs, ys = [], []
        for i, row in enumerate(rows):
            if k in row["results"]:
                xs.append(i + (j - len(comps) / 2 + 0.5) * width)
                ys.append(row["results"][k]["median_s"] / row["results"][row["best_jitad"]]["median_s"])
        if xs:
            bars = ax.bar(xs, ys, width, label=label)
            ax.bar_label(bars, fmt="%.1f", fontsize=6)
    for i, row in enumerate(rows):
        for comp, target in GOALS[row["model"]].items():
            ax.hlines(target, i - 0.4, i + 0.4, colors="k" if comp == "torch" else "grey",
                      linestyles="--", linewidth=0.8)
    ax.axhline(1.0, color="k", linewidth=0.5)
    ax.set_xticks(range(len(rows)), [row["title"] for row in rows], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("comparator time / jitad time (best jitad variant)")
    ax.set_title("jitad's speedup (dashed: goals vs PyTorch, black, and JAX, grey)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.models", description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", choices=MODELS,
                    help="run only this model (repeatable); default all")
    harness.add_common_options(ap, "the models", "models", "models_quick", "< 60 s")
    args = ap.parse_args(argv)
    size = harness.sizes_from(args, FULL, QUICK)
    models = args.model or list(MODELS)
    out = args.out or os.path.join(HERE, "results", "models_quick" if args.quick else "models")
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = harness.NoBar
    start = time.perf_counter()
    mods, versions = harness.load_comparators()
    if mods["jitad"] is None:
        print(f"jitad cannot be imported: {versions['jitad']}", file=sys.stderr)
        return 1
    for name in ("numba", "autograd"):
        mods.pop(name, None), versions.pop(name, None)
    info = harness.run_info(versions, {"quick": args.quick, "repeats": size["repeats"], "sizes": size})
    info["dgemm_gflops"] = dgemm_rate() / 1e9
    rows = []
    try:
        with tqdm(total=None, desc="bench.models", unit="run", file=sys.stderr) as bar:
            for model in models:
                bar.set_postfix_str(f"{model}: building")
                rows.append(run_model(model, mods, size, bar))
    except LossMismatch as e:
        print(f"LOSS MISMATCH: {e}", file=sys.stderr)
        return 1
    info["dgemm_gflops_end"] = dgemm_rate() / 1e9
    # the machine's peak is the better of the two (a busy machine lowers one of them)
    rows = [summarize(row, max(info["dgemm_gflops"], info["dgemm_gflops_end"]) * 1e9) for row in rows]
    info["wall_s"] = round(time.perf_counter() - start, 1)
    notes = [n for row in rows for n in row["notes"]]
    notes += [
        "Peak memory: 'peak RSS growth' is the process's peak resident set during one timed "
        "repeat minus the resident set at its start (Linux VmHWM, reset through "
        "/proc/self/clear_refs before each repeat), the largest over the repeats; memory the "
        "allocator kept from earlier runs is not counted again. jitad's arena peak is "
        "`jitad.lower.runtime.arena_high_water()`: bytes of its tensor arena at the fullest.",
        "Compile s: jitad's `compile_seconds` (trace + LLVM; disk cache off unless --keep-cache), "
        "for (a) the step plus the jitted optimizer update; JAX's first call (one iteration, "
        "tracing and XLA included); for the per-tree recursion, the sum of the first calls of "
        "every tree shape met (every tree of the loss check).",
        "FLOP rates count only matrix products (2·m·n·k, forward and backward; see "
        "`char_flops` and `tree_flops` in bench/models.py) and divide by the median time of "
        "the whole timed unit (optimizer, Python calls and all).",
        f"Wall time of this run: {info['wall_s']} s."]
    met = goals(rows)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".json", "w") as f:
        json.dump({"info": info, "rows": rows, "goals": met, "notes": notes}, f, indent=1, default=float)
    if rows and plot(out + ".png", rows):
        notes.append(f"The speedups are plotted in {os.path.basename(out)}.png.")
    text = markdown(info, rows, met, notes)
    with open(out + ".md", "w") as f:
        f.write(text)
    print(text)
    print(f"wrote {out}.md, .json and .png in {info['wall_s']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
