"""A binary TreeLSTM (Tai et al. 2015) classifying every node of random parse trees.

The data is a synthetic "sentiment treebank": each of 100 words has a score in
{-1, 0, +1} (most are neutral), and a node's label is the sum of its leaves' scores
clipped to [-2, 2], as one of 5 classes. Word embeddings are fixed random vectors, so
the model must learn which words matter and how the scores add up the tree.

    node inputs: x = E[word] (zero for inner nodes), (h_l, c_l), (h_r, c_r) from the children
    i, f_l, f_r, o, u = split(x @ W + h_l @ U_l + h_r @ U_r + b)
    c = sigmoid(i) * tanh(u) + sigmoid(f_l) * c_l + sigmoid(f_r) * c_r,  h = sigmoid(o) * tanh(c)

`TREE` runs the cell bottom-up over a `jitad.Tree` given as arrays, and its reverse
mode runs back down; the tree is an input of the compiled code, so one compiled step
serves trees of every shape.

Run: .venv/bin/python examples/treelstm.py
"""
import time

import numpy as np
from tqdm import tqdm

import jitad
from jitad import TREE

WORDS, DIM, HIDDEN, CLASSES = 100, 32, 32, 5
N_TREES, EPOCHS, LR = 300, 10, 0.05

# -- data ------------------------------------------------------------------------
rng = np.random.default_rng(0)
scores = rng.choice([-1, 0, 1], size=WORDS, p=[0.25, 0.5, 0.25])
embeddings = np.vstack([rng.standard_normal((WORDS, DIM)) / np.sqrt(DIM), np.zeros((1, DIM))])
NO_WORD = WORDS                                 # inner nodes read a zero embedding


def random_tree(n_leaves):
    """A random binary bracketing of `n_leaves` random words, every node labelled."""
    left, right, word, label = [], [], [], []

    def build(words):                           # returns (node index, sum of scores)
        k = len(left)
        left.append(-1), right.append(-1), word.append(NO_WORD), label.append(0)
        if len(words) == 1:
            word[k], total = words[0], scores[words[0]]
        else:
            cut = rng.integers(1, len(words))
            (left[k], a), (right[k], b) = build(words[:cut]), build(words[cut:])
            total = a + b
        label[k] = np.clip(total, -2, 2) + 2
        return k, total

    build(rng.integers(0, WORDS, n_leaves))
    return jitad.Tree(left, right, word=word, label=label)


trees = [random_tree(rng.integers(2, 16)) for _ in range(N_TREES)]
labels = np.concatenate([t.fields["label"] for t in trees])
print(f"{N_TREES} trees, {len(labels)} labelled nodes, sizes {min(t.size for t in trees)}.."
      f"{max(t.size for t in trees)}; always guessing the commonest label scores "
      f"{np.bincount(labels).max() / len(labels):.1%}")

params = {"W": rng.standard_normal((DIM, 5 * HIDDEN)) * 0.1,
          "Ul": rng.standard_normal((HIDDEN, 5 * HIDDEN)) * 0.1,
          "Ur": rng.standard_normal((HIDDEN, 5 * HIDDEN)) * 0.1,
          "b": np.zeros(5 * HIDDEN),
          "Wout": rng.standard_normal((HIDDEN, CLASSES)) * 0.1, "bout": np.zeros(CLASSES)}


def run_tree(p, emb, tree):
    """(summed loss, number of correct predictions) over all nodes of `tree`."""
    def cell(node, left, right):
        (hl, cl, loss_l, correct_l), (hr, cr, loss_r, correct_r) = left, right
        gates = emb[node.word] @ p["W"] + hl @ p["Ul"] + hr @ p["Ur"] + p["b"]
        i, fl, fr, o, u = (gates[k * HIDDEN:(k + 1) * HIDDEN] for k in range(5))
        c = jitad.sigmoid(i) * jitad.tanh(u) + jitad.sigmoid(fl) * cl + jitad.sigmoid(fr) * cr
        h = jitad.sigmoid(o) * jitad.tanh(c)
        logits = h @ p["Wout"] + p["bout"]
        loss = jitad.cross_entropy(logits, node.label)            # a loss at every node
        correct = jitad.convert(logits[node.label] >= jitad.max(logits), "f64")
        return h, c, loss_l + loss_r + loss, correct_l + correct_r + correct

    empty = (jitad.zeros(HIDDEN), jitad.zeros(HIDDEN), 0.0, 0.0)  # what an empty subtree gives
    _, _, loss, correct = TREE(tree, empty, cell)
    return loss, correct


def loss(p, emb, tree):
    return run_tree(p, emb, tree)[0]


step = jitad.jit_grad(loss)                     # (loss, grads w.r.t. p)
evaluate = jitad.jit(run_tree)


def accuracy(p):
    return sum(evaluate(p, embeddings, t)[1] for t in trees) / len(labels)


opt = jitad.optim.adagrad(LR)
p, state = params, opt.init(params)
print(f"accuracy before training: {accuracy(p):.1%}")
start = time.perf_counter()
for epoch in range(EPOCHS):
    total = 0.0
    for k in tqdm(rng.permutation(N_TREES), desc=f"epoch {epoch + 1}", leave=False):
        value, grads = step(p, embeddings, trees[k])
        p, state = opt.update(p, grads, state)
        total += value
    print(f"epoch {epoch + 1}: mean loss per node {total / len(labels):.3f}")
print(f"trained in {time.perf_counter() - start:.1f} s")
print(f"accuracy after training:  {accuracy(p):.1%}")
# `_compiled` holds one entry per input signature: a tree's shape is not part of it
print(f"compiled versions of the step for {N_TREES} trees of {len({t.size for t in trees})} sizes: "
      f"{len(step._compiled)}")

# -- the same model on mini-batches of 25 trees, packed as a jitad.Forest ------------
# `vmap` over a Forest runs every TREE level by level: the nodes of equal height of all
# 25 trees go through the cell together, so its products are GEMMs instead of rows. At
# this model's size (hidden 32) an epoch takes about as long either way (~25 ms; the times
# printed are mostly compiling); at hidden 150 the batched gradient is 2.3x faster per
# tree (`python -m bench.forest`). Fewer, larger updates per epoch learn more slowly here.
forests = [jitad.Forest([trees[k] for k in batch]) for batch in np.array_split(np.arange(N_TREES), N_TREES // 25)]
batch_step = jitad.jit_grad(lambda p, emb, forest: jitad.sum(jitad.vmap(loss, in_axes=(None, None, 0))(p, emb, forest)))
p, state = params, opt.init(params)
start = time.perf_counter()
for epoch in range(EPOCHS):
    total = 0.0
    for k in rng.permutation(len(forests)):
        value, grads = batch_step(p, embeddings, forests[k])
        p, state = opt.update(p, grads, state)
        total += value
    print(f"forest epoch {epoch + 1}: mean loss per node {total / len(labels):.3f}")
print(f"trained on {len(forests)} forests of 25 trees in {time.perf_counter() - start:.1f} s; "
      f"accuracy {accuracy(p):.1%}")
