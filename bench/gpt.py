"""A character-level GPT training step (nanoGPT's shape) in jitad, PyTorch and JAX.

`python -m bench.gpt [--large] [--repeats N] [--steps K] [--no-compile]` builds the same
model three times, as each framework's users write it:

- PyTorch: `torch.nn` modules and `torch.optim.AdamW`, eager and under `torch.compile`;
- JAX: `jax.numpy` / `jax.nn`, a `jax.jit`-ed step with `value_and_grad` and a hand AdamW;
- jitad: the JAX program with `jax` renamed to `jitad` (`gpt_program(jitad)` below is
  `gpt_program(jax)` with the other module passed in, nothing else).

All three start from the same float32 parameters and see the same batches (NumPy, fixed
seeds). It checks that losses agree after 3 steps and that gradients agree, then times the
steps interleaved (one process, one thread each) against the GEMM floor: the step's matrix
products alone, as NumPy float32 matmuls through the same OpenBLAS.
"""
import argparse
import ast
import math
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
_XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
if "xla_cpu_multi_thread_eigen" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _XLA_ONE_THREAD).strip()

import numpy as np  # noqa: E402

CONFIGS = {
    "tiny": dict(n_layer=1, n_embd=32, n_head=2, block=16, batch=2, vocab=65),
    "small": dict(n_layer=2, n_embd=64, n_head=4, block=64, batch=16, vocab=65),
    "large": dict(n_layer=4, n_embd=128, n_head=4, block=128, batch=16, vocab=65),
    "larger": dict(n_layer=6, n_embd=256, n_head=8, block=128, batch=8, vocab=65),
}
# the machine is shared: a step is timed by the process's CPU time (every thread of it), so
# waiting for a core does not count; `--wall` times by the wall clock instead
CLOCK = [time.process_time]
ADAMW = dict(lr=1e-3, b1=0.9, b2=0.95, eps=1e-8, wd=0.1)


# -- data and parameters (NumPy, shared by all three) --------------------------------

def synthetic_text(n_chars=20000, vocab=65, seed=0):
    """Token ids of a synthetic text: words drawn from a small random lexicon, so there is
    structure to learn (a fixed seed: every framework sees the same characters)."""
    rng = np.random.default_rng(seed)
    words = [rng.integers(1, vocab, size=rng.integers(2, 8)) for _ in range(300)]
    out, n = [], 0
    while n < n_chars:
        w = words[int(rng.zipf(1.5)) % len(words)]
        out += [*w.tolist(), 0]
        n += len(w) + 1
    return np.asarray(out[:n_chars], dtype=np.int32)


def batches(cfg, n, seed=1):
    """`n` (inputs, targets) pairs of int32[batch, block]: random windows of the text."""
    text = synthetic_text(vocab=cfg["vocab"])
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        start = rng.integers(0, len(text) - cfg["block"] - 1, size=cfg["batch"])
        idx = np.stack([text[s:s + cfg["block"]] for s in start])
        tgt = np.stack([text[s + 1:s + cfg["block"] + 1] for s in start])
        out.append((idx, tgt))
    return out


def init_params(cfg, seed=0):
    """GPT-2's initialization in float32: N(0, 0.02) weights (residual projections scaled by
    1/sqrt(2 n_layer)), zero biases, unit LayerNorm gains; the head is tied to `wte`.
    Linear weights are stored (in, out): `x @ w` (PyTorch's modules get the transpose)."""
    rng = np.random.default_rng(seed)
    C, V, L = cfg["n_embd"], cfg["vocab"], cfg["n_layer"]

    def normal(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    zeros, ones = (lambda n: np.zeros(n, np.float32)), (lambda n: np.ones(n, np.float32))
    proj_std = 0.02 / math.sqrt(2 * L)
    blocks = [dict(ln1_g=ones(C), ln1_b=zeros(C), attn_w=normal(C, 3 * C), attn_b=zeros(3 * C),
                   proj_w=normal(C, C, std=proj_std), proj_b=zeros(C), ln2_g=ones(C), ln2_b=zeros(C),
                   fc_w=normal(C, 4 * C), fc_b=zeros(4 * C), fc2_w=normal(4 * C, C, std=proj_std),
                   fc2_b=zeros(C)) for _ in range(L)]
    return dict(wte=normal(V, C), wpe=normal(cfg["block"], C), blocks=blocks, lnf_g=ones(C), lnf_b=zeros(C))


# -- the JAX program (jitad runs it with the module renamed) --------------------------

def gpt_program(jax, cfg, adamw=ADAMW):
    """`(loss, grads, step)` for the GPT, written as a JAX user writes it; `jax` is the module
    (`jax` or `jitad`). `step(params, m, v, t, idx, tgt) -> (params, m, v, t, loss)` is jitted."""
    jnp, nn, tree_map = jax.numpy, jax.nn, jax.tree_util.tree_map
    n_head = cfg["n_head"]

    def layer_norm(x, g, b, eps=1e-5):
        mu = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.var(x, axis=-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + eps) * g + b

    def attention(p, x):
        B, T, C = x.shape
        q, k, v = jnp.split(x @ p["attn_w"] + p["attn_b"], 3, axis=-1)
        heads = lambda a: a.reshape(B, T, n_head, C // n_head).transpose(0, 2, 1, 3)  # noqa: E731
        q, k, v = heads(q), heads(k), heads(v)
        att = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(C // n_head))
        causal = jnp.tril(jnp.ones((T, T), dtype=bool))
        att = nn.softmax(jnp.where(causal, att, -jnp.inf), axis=-1)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        return y @ p["proj_w"] + p["proj_b"]

    def mlp(p, x):
        return nn.gelu(x @ p["fc_w"] + p["fc_b"], approximate=True) @ p["fc2_w"] + p["fc2_b"]

    def loss_fn(params, idx, tgt):
        x = params["wte"][idx] + params["wpe"][: idx.shape[1]]
        for p in params["blocks"]:
            x = x + attention(p, layer_norm(x, p["ln1_g"], p["ln1_b"]))
            x = x + mlp(p, layer_norm(x, p["ln2_g"], p["ln2_b"]))
        logits = layer_norm(x, params["lnf_g"], params["lnf_b"]) @ params["wte"].T
        logp = nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, tgt[..., None], axis=-1))

    lr, b1, b2, eps, wd = (adamw[k] for k in ("lr", "b1", "b2", "eps", "wd"))

    def adamw_update(w, g, m, v, t):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        decay = wd if w.ndim >= 2 else 0.0
        return w * (1 - lr * decay) - lr * m_hat / (jnp.sqrt(v_hat) + eps), m, v

    @jax.jit
    def step(params, m, v, t, idx, tgt):
        loss, grads = jax.value_and_grad(loss_fn)(params, idx, tgt)
        t = t + 1
        new = tree_map(lambda w, g, mm, vv: adamw_update(w, g, mm, vv, t), params, grads, m, v)
        pick = lambda i: tree_map(lambda _, trip: trip[i], params, new)  # noqa: E731
        return pick(0), pick(1), pick(2), t, loss

    return loss_fn, jax.jit(jax.value_and_grad(loss_fn)), step


def zeros_like_tree(params):
    """AdamW's moments: zeros shaped like every parameter (NumPy float32)."""
    if isinstance(params, dict):
        return {k: zeros_like_tree(v) for k, v in params.items()}
    if isinstance(params, list):
        return [zeros_like_tree(v) for v in params]
    return np.zeros_like(params)


class FunctionalTrainer:
    """The JAX program's training loop, the same for `jax` and `jitad` (the module passed)."""

    def __init__(self, module, cfg, params):
        self.module = module
        self.loss_fn, self.value_and_grad, self.step_fn = gpt_program(module, cfg)
        self.state = (params, zeros_like_tree(params), zeros_like_tree(params), np.float32(0.0))

    def step(self, idx, tgt):
        p, m, v, t = self.state
        p, m, v, t, loss = self.step_fn(p, m, v, t, idx, tgt)
        self.state = (p, m, v, t)
        return loss

    def sync(self, loss):
        return float(np.asarray(loss))

    def grads(self, params, idx, tgt):
        loss, g = self.value_and_grad(params, idx, tgt)
        return float(np.asarray(loss)), flatten(g)


def flatten(tree, prefix=""):
    """`{path: float64 array}` of a parameter tree (JAX's or jitad's arrays, or NumPy)."""
    if isinstance(tree, dict):
        return {k2: v2 for k, v in tree.items() for k2, v2 in flatten(v, f"{prefix}{k}.").items()}
    if isinstance(tree, (list, tuple)):
        return {k2: v2 for i, v in enumerate(tree) for k2, v2 in flatten(v, f"{prefix}{i}.").items()}
    return {prefix[:-1]: np.asarray(tree, dtype=np.float64)}


# -- PyTorch, as its users write it ---------------------------------------------------

def torch_model(torch, cfg, params, compile_model=False):
    """A `torch.nn` GPT loaded with `params` and its `torch.optim.AdamW` (decay on matrices)."""
    nn, F = torch.nn, torch.nn.functional
    C, H = cfg["n_embd"], cfg["n_head"]

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.register_buffer("mask", torch.tril(torch.ones(cfg["block"], cfg["block"], dtype=torch.bool)))

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = self.c_attn(x).split(C, dim=2)
            q, k, v = (a.view(B, T, H, C // H).transpose(1, 2) for a in (q, k, v))
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
            att = F.softmax(att.masked_fill(~self.mask[:T, :T], float("-inf")), dim=-1)
            return self.c_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(C), Attention(), nn.LayerNorm(C)
            self.c_fc, self.c_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(cfg["vocab"], C), nn.Embedding(cfg["block"], C)
            self.h = nn.ModuleList([Block() for _ in range(cfg["n_layer"])])
            self.ln_f = nn.LayerNorm(C)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
            for block in self.h:
                x = block(x)
            logits = self.ln_f(x) @ self.wte.weight.T
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1).long())

    model = GPT()
    load_torch(torch, model, params)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([dict(params=decay, weight_decay=ADAMW["wd"]), dict(params=rest, weight_decay=0.0)],
                            lr=ADAMW["lr"], betas=(ADAMW["b1"], ADAMW["b2"]), eps=ADAMW["eps"])
    return (torch.compile(model) if compile_model else model), model, opt


def _torch_names(params):
    """`(torch parameter name, path in params, transpose?)` for every parameter."""
    names = [("wte.weight", "wte", False), ("wpe.weight", "wpe", False),
             ("ln_f.weight", "lnf_g", False), ("ln_f.bias", "lnf_b", False)]
    pairs = (("ln_1.weight", "ln1_g"), ("ln_1.bias", "ln1_b"), ("attn.c_attn.weight", "attn_w"),
             ("attn.c_attn.bias", "attn_b"), ("attn.c_proj.weight", "proj_w"), ("attn.c_proj.bias", "proj_b"),
             ("ln_2.weight", "ln2_g"), ("ln_2.bias", "ln2_b"), ("c_fc.weight", "fc_w"), ("c_fc.bias", "fc_b"),
             ("c_proj.weight", "fc2_w"), ("c_proj.bias", "fc2_b"))
    for i in range(len(params["blocks"])):
        names += [(f"h.{i}.{t}", f"blocks.{i}.{j}", t.endswith("weight") and j.endswith("_w")) for t, j in pairs]
    return names


def load_torch(torch, model, params):
    flat, named = flatten(params), dict(model.named_parameters())
    with torch.no_grad():
        for tname, path, transpose in _torch_names(params):
            a = flat[path].astype(np.float32)
            named[tname].copy_(torch.from_numpy(np.ascontiguousarray(a.T if transpose else a)))


class TorchTrainer:
    def __init__(self, torch, cfg, params, compile_model=False):
        self.torch = torch
        self.model, self.module, self.opt = torch_model(torch, cfg, params, compile_model)
        self.names = _torch_names(params)

    def step(self, idx, tgt):
        torch = self.torch
        self.opt.zero_grad(set_to_none=True)
        loss = self.model(torch.from_numpy(idx), torch.from_numpy(tgt))
        loss.backward()
        self.opt.step()
        return loss

    def sync(self, loss):
        return float(loss.detach())

    def grads(self, params, idx, tgt):
        torch = self.torch
        load_torch(torch, self.module, params)
        self.module.zero_grad(set_to_none=True)
        loss = self.model(torch.from_numpy(idx), torch.from_numpy(tgt))
        loss.backward()
        named = dict(self.module.named_parameters())
        out = {}
        for tname, path, transpose in self.names:
            g = named[tname].grad.numpy().astype(np.float64)
            out[path] = g.T if transpose else g
        return float(loss.detach()), out


# -- the GEMM floor -------------------------------------------------------------------

def gemm_shapes(cfg):
    """`(batch dims, m, k, n, transA, transB)` of every matrix product of one training step,
    forward and backward (the gradient of a product is two products)."""
    B, T, C, H, V = cfg["batch"], cfg["block"], cfg["n_embd"], cfg["n_head"], cfg["vocab"]
    BT, hs = B * T, C // H
    fwd = [((), BT, C, 3 * C), ((B, H), T, hs, T), ((B, H), T, T, hs), ((), BT, C, C),
           ((), BT, C, 4 * C), ((), BT, 4 * C, C)] * cfg["n_layer"] + [((), BT, C, V)]
    out = []
    for bd, m, k, n in fwd:
        out += [(bd, m, k, n, False, False), (bd, m, n, k, False, True), (bd, k, m, n, True, False)]
    return out


class GemmFloor:
    """The step's products alone, as a pseudo-trainer `time_steps` interleaves with the
    others: NumPy float32 matmuls, operands transposed in place where the backward pass
    reads them transposed (BLAS's flags, no copies)."""

    def __init__(self, cfg):
        rng = np.random.default_rng(0)
        self.calls = []
        for bd, m, k, n, ta, tb in gemm_shapes(cfg):
            a = rng.standard_normal((*bd, k, m) if ta else (*bd, m, k)).astype(np.float32)
            b = rng.standard_normal((*bd, n, k) if tb else (*bd, k, n)).astype(np.float32)
            a, b = (np.swapaxes(a, -1, -2) if ta else a), (np.swapaxes(b, -1, -2) if tb else b)
            self.calls.append((a, b, np.empty((*bd, m, n), np.float32)))

    def step(self, idx, tgt):
        for a, b, c in self.calls:
            np.matmul(a, b, out=c)

    def sync(self, loss):
        return 0.0


# -- checks and timing ----------------------------------------------------------------

def make_trainers(cfg, params, names, cache_dir=None):
    """`{name: trainer}` for the frameworks asked for, with each one's first-call seconds:
    `{name: (wall clock, CPU time of the process's threads)}`."""
    trainers, first = {}, {}
    data = batches(cfg, 1, seed=99)[0]
    for name in names:   # imported first: a first call is tracing and compiling, not importing
        _import("torch" if name.startswith("torch") else name, cache_dir)
    for name in names:
        t0, c0 = time.perf_counter(), time.process_time()
        trainers[name] = _make(name, cfg, params, cache_dir)
        trainers[name].sync(trainers[name].step(*data))
        first[name] = (time.perf_counter() - t0, time.process_time() - c0)
        trainers[name] = _make(name, cfg, params, cache_dir)   # fresh state: compiled code is kept
    return trainers, first


def _make(name, cfg, params, cache_dir):
    if name in ("jitad", "jax"):
        module = _import(name, cache_dir)
        return FunctionalTrainer(module, cfg, params)
    return TorchTrainer(_import("torch"), cfg, params, compile_model=name == "torch.compile")


_MODULES = {}


def _import(name, cache_dir=None):
    if name not in _MODULES:
        if name == "jitad" and cache_dir is not None:
            os.environ["JITAD_CACHE_DIR"] = cache_dir
        module = __import__(name)
        if name == "torch":
            module.set_num_threads(1)
        _MODULES[name] = module
    return _MODULES[name]


def check_agreement(cfg, params, trainers, steps=3, reference="jax"):
    """Largest relative differences from `reference`: losses after `steps` AdamW steps and
    the gradients at `params` (norm of the difference over the norm, per parameter)."""
    data = batches(cfg, steps)
    losses = {n: [tr.sync(tr.step(*b)) for b in data] for n, tr in trainers.items()}
    out = {}
    for name, tr in trainers.items():
        loss0, grads = tr.grads(params, *data[0])
        out[name] = dict(losses=losses[name], loss0=loss0, grads=grads)
    ref = out[reference]
    report = {}
    for name, r in out.items():
        dloss = max(abs(a - b) / abs(b) for a, b in zip(r["losses"], ref["losses"]))
        dgrad = max(np.linalg.norm(r["grads"][k] - g) / max(np.linalg.norm(g), 1e-30) for k, g in ref["grads"].items())
        report[name] = dict(loss=dloss, grad=float(dgrad), final_loss=r["losses"][-1])
    return report


def time_steps(trainers, cfg, repeats=7, steps=5):
    """`{name: [seconds per step, one per repeat]}`: the frameworks take turns, `steps` steps each."""
    data = batches(cfg, steps, seed=7)
    times = {n: [] for n in trainers}
    for _ in range(repeats):
        for name, tr in trainers.items():
            tr.sync(tr.step(*data[0]))
            t0 = CLOCK[0]()
            for b in data:
                loss = tr.step(*b)
            tr.sync(loss)
            times[name].append((CLOCK[0]() - t0) / steps)
    return times


def ab_steps(cfg, params, setups, rounds=9, steps=5):
    """`({name: [seconds per step, one per round]}, {name: trainer})`: jitad's step compiled once under each
    of `setups` (`{name: setup()}`, each setting the passes' or the lowering's switches its
    way before its trainer compiles), in alternating rounds (the order flips every round).
    Each setup's program is compiled under a cache key of its own: two setups whose
    programs print alike (a change in the lowering only) would otherwise share one code.
    The first setup's state is left in place."""
    import jitad
    from jitad.lower import runtime
    data, trainers, compile_module = batches(cfg, steps, seed=7), {}, runtime.compile_module
    tiering = jitad.config.read("jitad_tiering")
    jitad.config.update("jitad_tiering", "compile")   # not the interpreter first (a tiny program's):
    try:                                               # the code is made under the setup
        for name, setup in setups.items():
            setup()
            runtime.compile_module = lambda text, *rest, _tag=name: compile_module(f"{text}\n# setup {_tag}", *rest)
            trainers[name] = FunctionalTrainer(jitad, cfg, params)
            for _ in range(2):   # compiled now, under this setup: the first step takes NumPy arrays,
                trainers[name].sync(trainers[name].step(*data[0]))   # the next ones the arrays it returned
    finally:
        runtime.compile_module = compile_module
        jitad.config.update("jitad_tiering", tiering)
        next(iter(setups.values()))()
    times = {name: [] for name in trainers}
    for r in range(rounds):
        for name in (list(trainers) if r % 2 == 0 else list(trainers)[::-1]):
            times[name].append(time_steps({name: trainers[name]}, cfg, 1, steps)[name][0])
    return times, trainers


def _ab_setups(specs):
    """`--ab module.NAME=value` (given once or more): `{"as is": ..., "NAME=value ...": ...}`,
    the second setting every switch named."""
    switches = []
    for spec in [specs] if isinstance(specs, str) else specs:
        path, value = spec.split("=", 1)
        module_name, attr = path.rsplit(".", 1)
        module = __import__(module_name, fromlist=[attr])
        default = getattr(module, attr)
        switches.append((module, attr, default, type(default)(ast.literal_eval(value)), f"{attr}={value}"))
    return {"as is": lambda: [setattr(m, a, d) for m, a, d, _, _ in switches],
            " ".join(name for *_, name in switches): lambda: [setattr(m, a, v) for m, a, _, v, _ in switches]}


def ab_summary(times):
    """Each setup's median ms per step, and its ratio to the first's (median and range of
    the rounds' ratios: each round's steps ran back to back)."""
    (base, ref), lines = next(iter(times.items())), []
    for name, t in times.items():
        ratios = sorted(x / y for x, y in zip(t, ref))
        lines.append(f"{name:30s} {statistics.median(t) * 1e3:8.2f} ms   /{base}: {statistics.median(ratios):.3f} "
                     f"({ratios[0]:.3f}-{ratios[-1]:.3f})")
    return "\n".join(lines)


def summary(times, first):
    med = {n: statistics.median(t) for n, t in times.items()}
    lines = [f"{'':14s} {'median ms':>10s} {'spread ms':>14s} {'jitad/x':>8s} {'first call s':>13s} {'(CPU s)':>8s}"]
    for n, t in times.items():
        wall, cpu = first.get(n, (float("nan"), float("nan")))
        lines.append(f"{n:14s} {med[n] * 1e3:10.2f} {min(t) * 1e3:6.2f}-{max(t) * 1e3:6.2f} "
                     f"{med.get('jitad', float('nan')) / med[n]:8.2f} {wall:13.2f} {cpu:8.2f}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--large", action="store_true", help="add the larger config (6 layers, 256 wide)")
    ap.add_argument("--configs", default=None, help="comma-separated config names")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true", help="leave out torch.compile")
    ap.add_argument("--wall", action="store_true", help="time by the wall clock, not CPU time")
    ap.add_argument("--only", default=None, help="comma-separated frameworks")
    ap.add_argument("--ab", default=None, metavar="MODULE.NAME=VALUE", action="append",
                    help="jitad's step alone, as is against a switch set to VALUE (e.g. "
                         "jitad.ir.peephole.RECOMPUTE_STREAMS=0; given again, several switches at once), "
                         "in alternating rounds")
    args = ap.parse_args(argv)
    if args.wall:
        CLOCK[0] = time.perf_counter
    configs = args.configs.split(",") if args.configs else ["small", "large"] + (["larger"] if args.large else [])
    if args.ab:
        _import("jitad", tempfile.mkdtemp(prefix="jitad-gpt-cache-"))
        for c in configs:
            times, _ = ab_steps(CONFIGS[c], init_params(CONFIGS[c]), _ab_setups(args.ab), args.repeats, args.steps)
            print(f"\n== {c}: {CONFIGS[c]}\n" + ab_summary(times))
        return
    names = ["jitad", "jax", "torch", "torch.compile"]
    if args.no_compile:
        names.remove("torch.compile")
    if args.only:
        names = args.only.split(",")
    cache_dir = tempfile.mkdtemp(prefix="jitad-gpt-cache-")
    for c in configs:
        cfg = CONFIGS[c]
        params = init_params(cfg)
        trainers, first = make_trainers(cfg, params, names, cache_dir)
        ref = "jax" if "jax" in names else names[0]
        agree = check_agreement(cfg, params, trainers, reference=ref)
        times = time_steps({**trainers, "GEMM floor": GemmFloor(cfg)}, cfg, args.repeats, args.steps)
        print(f"\n== {c}: {cfg}")
        for n, a in agree.items():
            print(f"  {n:14s} loss after 3 steps {a['final_loss']:.6f}  max rel diff vs {ref}: "
                  f"loss {a['loss']:.1e}  grad {a['grad']:.1e}")
        print(summary(times, first))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
