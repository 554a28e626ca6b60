"""Deterministic synthetic data of the shapes of BENCHMARKS.md's models (no downloads).

Every function takes a seed and returns the same arrays on every machine (NumPy's PCG64
`default_rng`, no global state):

>>> chars = char_batches(10)               # int64 (10, 21, 20): 10 batches of 21 steps x 20 streams
>>> trees = sst_trees(1101)                # 1101 jitad.Tree, fields word/label, mean ~19 words
>>> E = embeddings()                        # float64 (20000, 300), fixed (not trained)
>>> images, labels = mnist_like(300)       # float64 (300, 1, 28, 28), int64 (300,)
"""
import numpy as np

VOCAB_CHARS = 26
VOCAB_WORDS = 20000
EMBED_DIM = 300
CLASSES_SST = 5
CLASSES_MNIST = 10
MAX_WORDS = 50
NO_WORD = -1   # the `word` of an internal tree node


def char_text(length, vocab=VOCAB_CHARS, seed=0):
    """`length` symbols of a random bigram Markov chain over `vocab` symbols (each symbol
    has a few likely successors, so a char-RNN's loss falls as it learns)."""
    rng = np.random.default_rng(seed)
    trans = rng.dirichlet(np.full(vocab, 0.2), size=vocab)   # sparse-ish rows
    cdf = np.cumsum(trans, axis=1)
    u = rng.random(length)
    text = np.empty(length, np.int64)
    c = 0
    for t in range(length):
        c = min(int(np.searchsorted(cdf[c], u[t])), vocab - 1)
        text[t] = c
    return text


def char_batches(n_batches, seq_len=20, batch=20, vocab=VOCAB_CHARS, seed=0):
    """int64 (n_batches, seq_len + 1, batch): stream b of batch i is the text from
    `b * stride + i * seq_len` on, seq_len + 1 symbols (inputs are steps 0..seq_len-1,
    targets steps 1..seq_len), as min-char-rnn cuts its text."""
    stride = n_batches * seq_len + 1
    text = char_text(batch * stride, vocab, seed)
    starts = np.arange(batch)[None, :] * stride + np.arange(n_batches)[:, None] * seq_len
    return text[starts[:, None, :] + np.arange(seq_len + 1)[None, :, None]]


def sentence_lengths(n, seed=0):
    """SST-like sentence lengths: 1..50 words, mean ~19 (a gamma law, rounded and clipped)."""
    rng = np.random.default_rng(seed)
    return np.clip(np.rint(rng.gamma(3.2, 19.3 / 3.2, n)), 1, MAX_WORDS).astype(np.int64)


def random_parse(n_words, rng, vocab=VOCAB_WORDS, classes=CLASSES_SST):
    """A random binary bracketing of `n_words` words: arrays left, right, word, label of
    its 2 n_words - 1 nodes in pre-order (root 0; -1 = no child; internal nodes have
    word NO_WORD; every node has a label in 0..classes-1)."""
    n = 2 * n_words - 1
    left, right = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    word = np.full(n, NO_WORD, np.int64)
    label = rng.integers(0, classes, n)
    words = rng.integers(0, vocab, n_words)
    stack = [(0, 0, n_words)]                  # (node, first word, end word)
    while stack:
        k, lo, hi = stack.pop()
        if hi - lo == 1:
            word[k] = words[lo]
            continue
        split = int(rng.integers(lo + 1, hi))
        left[k], right[k] = k + 1, k + 2 * (split - lo)   # pre-order: the left subtree first
        stack += [(left[k], lo, split), (right[k], split, hi)]
    return left, right, word, label


def sst_parses(n=1101, seed=0):
    """`n` random parses (see `random_parse`) with SST-like lengths."""
    rng = np.random.default_rng(seed + 1)
    return [random_parse(int(w), rng) for w in sentence_lengths(n, seed)]


def sst_trees(n=1101, seed=0):
    """`n` `jitad.Tree`s with fields `word` and `label` (see `random_parse`)."""
    import jitad
    return [jitad.Tree(left, right, word=word, label=label)
            for left, right, word, label in sst_parses(n, seed)]


def embeddings(vocab=VOCAB_WORDS, dim=EMBED_DIM, seed=0):
    """Fixed word vectors, float64 (vocab, dim), entries N(0, 0.3^2) (GloVe-like norms)."""
    return np.random.default_rng(seed + 2).standard_normal((vocab, dim)) * 0.3


def mnist_like(n, seed=0):
    """`n` 28x28 one-channel images of 10 classes (a smooth random template per class
    plus noise, normalized as torchvision's MNIST example does): float64 (n, 1, 28, 28)
    and int64 labels (n,)."""
    rng = np.random.default_rng(seed + 3)
    yy, xx = np.mgrid[0:28, 0:28] / 27.0
    templates = np.zeros((CLASSES_MNIST, 28, 28))
    for c in range(CLASSES_MNIST):          # three Gaussian blobs per class
        for cy, cx, s in rng.uniform([0.2, 0.2, 0.08], [0.8, 0.8, 0.2], (3, 3)):
            templates[c] += np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s * s))
    labels = rng.integers(0, CLASSES_MNIST, n)
    images = np.clip(templates[labels] + 0.3 * rng.standard_normal((n, 28, 28)), 0.0, 1.0)
    return ((images - 0.1307) / 0.3081)[:, None], labels
