"""A vanilla character-level RNN, trained twice: step by step from Python, then as one
compiled training loop.

The text is synthetic: words drawn from a random 30-word lexicon over a-z, written
without spaces, so the model has to learn spelling (and word boundaries) to do well.
Guessing uniformly scores log(26) = 3.26 nats per character; the best possible is
about 0.64 (each word is a free choice among 30, log(30) nats over its ~5.3 letters).

    h_t = tanh(Wxh[x_t] + h_{t-1} @ Whh + bh),   logits_t = h_t @ Why + by

(`Wxh[x_t]`, a row gather, is one_hot(x_t) @ Wxh without the multiplication.)

Run: .venv/bin/python examples/char_rnn.py
"""
import time

import numpy as np
from tqdm import tqdm

import jitad
from jitad import FOR

VOCAB, HIDDEN, SEQ, BATCH = 26, 50, 20, 20
STEPS, LR, CLIP = 1500, 0.1, 5.0

# -- data: BATCH parallel streams of text, cut into windows of SEQ characters --------
rng = np.random.default_rng(0)
lexicon = ["".join(chr(ord("a") + c) for c in rng.integers(0, VOCAB, rng.integers(3, 8)))
           for _ in range(30)]
text = "".join(rng.choice(lexicon, 130_000))
chars = np.array([ord(c) - ord("a") for c in text], dtype=np.int64)
streams = chars[:BATCH * (SEQ * STEPS + 1)].reshape(BATCH, -1)
# inputs[k] and targets[k] are window k, time-major: (SEQ, BATCH) int labels
inputs = np.stack([streams[:, k * SEQ:(k + 1) * SEQ].T for k in range(STEPS)])
targets = np.stack([streams[:, k * SEQ + 1:(k + 1) * SEQ + 1].T for k in range(STEPS)])
print(f"text: {text[:60]}...  ({len(text)} characters)")

params = {"Wxh": rng.standard_normal((VOCAB, HIDDEN)) * 0.01,
          "Whh": rng.standard_normal((HIDDEN, HIDDEN)) * 0.01,
          "Why": rng.standard_normal((HIDDEN, VOCAB)) * 0.01,
          "bh": np.zeros(HIDDEN), "by": np.zeros(VOCAB)}


def loss(p, xs, ys):
    """Mean cross-entropy per character over one (SEQ, BATCH) window."""
    def tick(t, carry):                       # a staged loop over time steps
        h, total = carry
        h = jitad.tanh(p["Wxh"][xs[t]] + h @ p["Whh"] + p["bh"])   # Wxh[x_t]: a gather
        return h, total + jitad.cross_entropy(h @ p["Why"] + p["by"], ys[t])
    _, total = FOR(0, SEQ, tick, (jitad.zeros((BATCH, HIDDEN)), 0.0))
    return total / SEQ


opt = jitad.optim.adagrad(LR)

# -- 1. a compiled (loss, grads) step, called from a Python loop ----------------------
step = jitad.jit_grad(loss)
p, state = params, opt.init(params)
losses, start = [], time.perf_counter()
with tqdm(range(STEPS), desc="python loop") as bar:
    for k in bar:
        value, grads = step(p, inputs[k], targets[k])
        p, state = opt.update(p, jitad.optim.clip_by_value(grads, CLIP), state)
        losses.append(value)
        if k % 100 == 99:
            bar.set_postfix(loss=f"{np.mean(losses[-100:]):.3f}")
print(f"python loop: mean loss over the first 100 steps {np.mean(losses[:100]):.3f}, "
      f"over the last 100 {np.mean(losses[-100:]):.3f} ({time.perf_counter() - start:.1f} s)")
python_params = p


# -- 2. the same training as one compiled function: FOR over steps, grad inside -------
@jitad.jit
def train(p, inputs, targets):
    def body(k, carry):
        p, state = carry
        grads = jitad.grad(loss)(p, inputs[k], targets[k])
        return opt.update(p, jitad.optim.clip_by_value(grads, CLIP), state)
    return FOR(0, STEPS, body, (p, opt.init(p)))[0]


start = time.perf_counter()
staged_params = train(params, inputs, targets)
print(f"staged loop: {STEPS} steps in one call, {time.perf_counter() - start:.1f} s "
      f"(of which tracing and compiling {train.compile_seconds:.1f} s)")

diff = max(np.abs(staged_params[k] - python_params[k]).max() for k in params)
print(f"largest difference between the two trainings' parameters: {diff:.1e}")
evaluate = jitad.jit(loss)
final = np.mean([evaluate(staged_params, inputs[k], targets[k]) for k in range(-100, 0)])
print(f"final loss of the trained model on its last 100 windows: {final:.3f} nats/char")
