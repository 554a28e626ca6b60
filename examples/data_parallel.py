"""The character-level LSTM of examples/lstm.py, trained data-parallel over MPI processes.

Every process takes its share of the batch's text streams, computes the gradient of its
share's loss, and the gradients are averaged across processes (`allreduce(op="mean")`)
inside the compiled training loop, so every process applies the same update: the
training equals the single-process one on the full batch, to rounding.

Run: .venv/bin/mpiexec -n 2 .venv/bin/python examples/data_parallel.py
     .venv/bin/python examples/data_parallel.py        (one process: the reference run)
(`pip install 'jitad[mpi]'` brings mpi4py and MPICH with `mpiexec`; on a cluster,
`mpiexec -hosts a,b -n 2 ...` with the same Python environment on every machine.)
"""
import time

import numpy as np
from tqdm import tqdm

import jitad
from jitad import FOR, distributed as dist

VOCAB, HIDDEN, SEQ, BATCH = 26, 50, 20, 20
STEPS, CHUNK, LR, CLIP = 400, 50, 0.1, 5.0   # CHUNK steps per call of the compiled loop

try:
    dist.init()
except jitad.DistributedError:   # no mpi4py: one process (under mpiexec the collectives refuse)
    pass
rank, size = dist.rank(), dist.size()

# -- data as in examples/lstm.py: BATCH streams of text, windows of SEQ characters -------
rng = np.random.default_rng(0)
lexicon = ["".join(chr(ord("a") + c) for c in rng.integers(0, VOCAB, rng.integers(3, 8)))
           for _ in range(30)]
text = "".join(rng.choice(lexicon, 130_000))
chars = np.array([ord(c) - ord("a") for c in text], dtype=np.int64)
streams = chars[:BATCH * (SEQ * STEPS + 1)].reshape(BATCH, -1)
inputs = np.stack([streams[:, k * SEQ:(k + 1) * SEQ].T for k in range(STEPS)])   # (STEPS, SEQ, BATCH)
targets = np.stack([streams[:, k * SEQ + 1:(k + 1) * SEQ + 1].T for k in range(STEPS)])
inputs, targets = dist.shard((inputs, targets), axis=2)   # this process's streams

params = {"Wx": rng.standard_normal((VOCAB, 4 * HIDDEN)) * 0.1,
          "Wh": rng.standard_normal((HIDDEN, 4 * HIDDEN)) * 0.1,
          "b": np.zeros(4 * HIDDEN),
          "Why": rng.standard_normal((HIDDEN, VOCAB)) * 0.1, "by": np.zeros(VOCAB)}
params = dist.broadcast(params)   # equal here already (same seed); the usual safeguard


def loss(p, xs, ys):
    """Mean cross-entropy per character over one (SEQ, streams) window."""
    def tick(t, carry):
        h, c, total = carry
        gates = p["Wx"][xs[t]] + h @ p["Wh"] + p["b"]
        i, f, o, g = (gates[:, k * HIDDEN:(k + 1) * HIDDEN] for k in range(4))
        c = jitad.sigmoid(f) * c + jitad.sigmoid(i) * jitad.tanh(g)
        h = jitad.sigmoid(o) * jitad.tanh(c)
        return h, c, total + jitad.cross_entropy(h @ p["Why"] + p["by"], ys[t])
    zeros = jitad.zeros((xs.shape[1], HIDDEN))
    _, _, total = FOR(0, SEQ, tick, (zeros, zeros, 0.0))
    return total / SEQ


opt = jitad.optim.adagrad(LR)


@jitad.jit
def train(p, state, inputs, targets):
    """CHUNK training steps in one compiled loop; returns the mean loss over them too."""
    def body(k, carry):
        p, state, total = carry
        value, grads = jitad.value_and_grad(loss)(p, inputs[k], targets[k])
        grads = dist.allreduce(grads, op="mean")          # MPI_Allreduce from the compiled code
        p, state = opt.update(p, jitad.optim.clip_by_value(grads, CLIP), state)
        return p, state, total + dist.allreduce(value, op="mean")
    p, state, total = FOR(0, inputs.shape[0], body, (p, state, 0.0))
    return p, state, total / inputs.shape[0]


p, state = params, opt.init(params)
start = time.perf_counter()
with tqdm(range(0, STEPS, CHUNK), desc=f"{size} process{'es' if size > 1 else ''}",
          disable=rank != 0) as bar:
    for k in bar:
        p, state, chunk_loss = train(p, state, inputs[k:k + CHUNK], targets[k:k + CHUNK])
        bar.set_postfix(loss=f"{chunk_loss:.3f}")
seconds = time.perf_counter() - start
if rank == 0:
    print(f"{STEPS} steps of {BATCH} streams x {SEQ} characters on {size} process(es): {seconds:.1f} s "
          f"(compiling {train.compile_seconds:.1f} s); last {CHUNK} steps' loss {chunk_loss:.12f} nats/char")
    print(f"checksum of the trained parameters: {sum(float(np.sum(v)) for v in p.values()):.12f}")
