"""The differential fuzzer's model-shaped profile: seeded programs shaped like the models the
newest passes are written for (dense layers and biases, attention's batched products over
reshaped and transposed views, softmax / log_softmax / logsumexp / normalizations over the
last axis and over axis 0, column sums, tanh-GELU and other elementwise chains, rolls and
shifts, slices and concatenations, small `fori_loop`/`scan` loops reading their weights),
at sizes crossing the passes' thresholds (rows of 1, odd, 15-17, 63-65, a few hundred;
float32 and float64). Each runs with `np, lax, nn = jitad.numpy, jitad.lax, jitad.nn` and
with JAX's (x64 on: the oracle), every path compiled (`jitad_tiering="compile"`), under
`jit`, `value_and_grad`, `jit(grad)` and `vmap` (and `vmap(grad)`); values and the gradients
of every argument must agree within the dtype's tolerance, NaN nowhere JAX has none.

    python -m tests.reliability.fuzz --profile models --minutes 10 [--seed 7]
    python -m tests.reliability.fuzz_models --case 1234          # one case, its source and verdict

A case is its seed: `program(seed)` makes the same program on every machine.
"""
import argparse
import collections
import contextlib
import dataclasses
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field

import numpy as onp

os.environ.setdefault("JITAD_VERIFY", "1")   # (the IR verifier after every pass, as under the tests)
import jax  # noqa: E402
import jax.numpy as jjnp  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jitad  # noqa: E402
import jitad.lax  # noqa: E402
import jitad.nn  # noqa: E402
import jitad.numpy  # noqa: E402
from jitad.ir import passes  # noqa: E402

# sizes by regime: tiny ones, those at the passes' thresholds (a row loop's 16 elements, a
# product's 64 rows, a column sum's 128 columns), and model-sized ones past them
REGIMES = {"tiny": ([1, 3, 5], [1, 2, 5, 8]),
           "threshold": ([15, 16, 17, 63, 64, 65], [7, 8, 9, 15, 16, 17, 63, 64, 65, 127, 128, 129]),
           "large": ([128, 200, 256, 300], [64, 128, 129, 200, 256])}
MAX_ELEMENTS = 1 << 15   # the largest activation drawn (a rare large case: `LARGE`)
LARGE = (4096, 8, 128)   # rows, input width, output width: a weight gradient's slot past 4 MiB (f64)
TOLERANCE = {"float64": (1e-9, 1e-10), "float32": (2e-3, 2e-4)}   # (relative, absolute times the scale)
TRANSFORMS = ["jit", "value_and_grad", "jit_grad", "vmap", "vmap_grad"]


@dataclass
class Model:
    """A program: its arguments (x0 the input, then the parameters), its lines and its result."""
    dtype: str
    args: list = field(default_factory=list)
    lines: list = field(default_factory=list)   # (name, text, shape)
    result: str = ""
    stages: list = field(default_factory=list)   # the stage of each line (for reports)
    wrt: tuple = None   # the arguments differentiated (None: every float one)
    debug_nans: bool = False   # run with `jax_debug_nans` on (both sides)

    def differentiated(self):
        """The arguments whose gradients are compared: `wrt`, or every float argument."""
        return self.wrt or tuple(k for k, a in enumerate(self.args) if a.dtype.kind == "f")

    def names(self, transform):
        """What each array `run` returns under `transform` is: the value, then each gradient."""
        grads = [f"d/dx{k}" for k in self.differentiated()]
        return grads if transform in ("jit_grad", "vmap_grad") else ["value"] + grads

    def source(self, lines=None, result=None):
        names = ", ".join(f"x{k}" for k in range(len(self.args)))
        body = [f"    {name} = {text}" for name, text, _ in (self.lines if lines is None else lines)]
        return "\n".join([f"def f({names}):"] + body + [f"    return {result or self.result}"])


class Generator:
    """Draws a model stage by stage from a seeded generator; `h` is the running activation."""

    def __init__(self, seed):
        self.rng = onp.random.default_rng(seed)
        self.m = Model(self.rng.choice(["float32", "float64"]))
        self.shapes, self.heads = {}, None   # (batch, time, heads, head width) of an attention input
        self.rows, self.widths = REGIMES[self.choice(["tiny", "threshold", "threshold", "large", "large"])]

    def choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def arg(self, shape, scale=1.0):
        name = f"x{len(self.m.args)}"
        a = self.rng.standard_normal(shape) * scale
        self.m.args.append(a.astype(self.m.dtype))
        self.shapes[name] = tuple(shape)
        return name

    def line(self, text, shape, stage):
        name = f"v{len(self.m.lines)}"
        self.m.lines.append((name, text, tuple(shape)))
        self.m.stages.append(stage)
        self.shapes[name] = tuple(shape)
        return name

    def index(self, shape, low, high):
        """An int64 index argument: entries drawn from [low, high), repeats likely."""
        name = f"x{len(self.m.args)}"
        self.m.args.append(self.rng.integers(low, high, size=shape).astype(onp.int64))
        self.shapes[name] = None   # (no stage reads it as an activation)
        return name

    def same_shape(self, h):
        pool = [n for n, s in self.shapes.items() if s == self.shapes[h] and n != h]
        return self.choice(pool) if pool else None

    def width(self, rows):
        fits = [w for w in self.widths if rows * w <= MAX_ELEMENTS]
        return self.choice(fits or [1])


def program(seed, stages=None):
    """The model of case `seed`: 2 to 6 stages (or `stages` ones) on an input of model shape."""
    g = Generator(seed)
    kind = g.rng.random()
    if kind < 0.04:   # a narrow input and a wide layer over many rows (column products)
        n, d, _ = LARGE
        h = g.arg((n, d))
        h = g.line(f"np.tanh({h} @ {g.arg((d, LARGE[2]), d ** -0.5)})", (n, LARGE[2]), "dense")
    elif kind < 0.3:
        h = attention_input(g)
    else:
        n = g.choice(g.rows)
        h = g.arg((n, g.width(n)))
    for _ in range(stages or int(g.rng.integers(2, 7))):
        h = g.choice(STAGES)(g, h) or h
    extra = onp.random.default_rng([seed, 1])
    if extra.random() < 0.15:   # a loop last (a loss linear in its result: its last step made for nothing)
        h = recurrence(g, h)
    parameters = tuple(k for k in range(1, len(g.m.args)) if g.m.args[k].dtype.kind == "f")
    if parameters and extra.random() < 0.5:
        g.m.wrt = parameters   # the input as data: its gradient not asked for
    g.m.result = scalar_loss(g, h) if extra.random() < 0.15 else h
    g.m.debug_nans = extra.random() < 0.1
    return g.m


def attention_input(g):
    b, t, heads, dh = g.choice([1, 2, 3]), g.choice([1, 5, 16, 17, 64, 65]), g.choice([1, 2, 3]), \
        g.choice([1, 4, 8, 16, 17])
    g.heads = (b, t, heads, dh)
    return g.arg((b * t, heads * dh))


# -- stages: each reads `h` (n, d) and returns the new activation (or None: nothing drawn) ---

def dense(g, h):
    n, d = g.shapes[h]
    w = g.width(n)
    weight = g.arg((d, w) if g.rng.random() < 0.7 else (w, d), d ** -0.5)
    product = f"{h} @ {weight}" if g.shapes[weight] == (d, w) else f"{h} @ {weight}.T"
    if g.rng.random() < 0.7:
        product += f" + {g.arg((w,), 0.1)}"
    return g.line(product, (n, w), "dense")


ACTIVATIONS = [
    "0.5 * {h} * (1.0 + np.tanh(0.7978845608 * ({h} + 0.044715 * {h} ** 3)))",
    "nn.gelu({h}, approximate=True)",
    "np.tanh({h})",
    "nn.relu({h})",
    "np.where({h} > 0, {h}, 0.01 * {h})",
    "nn.sigmoid({h}) * {h}",
    "np.exp(np.tanh({h}))",
    "np.log(1.0 + {h} * {h})",
]


def activation(g, h):
    return g.line(g.choice(ACTIVATIONS).format(h=h), g.shapes[h], "activation")


ROW_OPS = [   # over axis {a} (-1: the rows, 0: the columns)
    "nn.softmax({h}, axis={a})",
    "nn.log_softmax({h}, axis={a})",
    "{h} - nn.logsumexp({h}, axis={a}, keepdims=True)",
    "np.exp({h} - np.max({h}, axis={a}, keepdims=True)) / np.sum(np.exp({h} - np.max({h}, axis={a}, "
    "keepdims=True)), axis={a}, keepdims=True)",
    "({h} - np.mean({h}, axis={a}, keepdims=True)) / np.sqrt(np.var({h}, axis={a}, keepdims=True) + 1e-5)",
    "{h} / np.sqrt(np.mean({h} * {h}, axis={a}, keepdims=True) + 1e-6)",
    "({h} - np.mean({h}, axis={a}, keepdims=True)) * lax.rsqrt(np.var({h}, axis={a}, keepdims=True) + 1e-5)",
    "nn.standardize({h}, axis={a}, epsilon=1e-5)",
]


def normalize(g, h, axis):
    text = g.choice(ROW_OPS).format(h=h, a=axis)
    d = g.shapes[h][-1]
    if "sqrt(" in text and g.rng.random() < 0.7:   # LayerNorm's or batch normalization's gain and bias
        text = f"({text}) * {g.arg((d,), 0.5)} + {g.arg((d,), 0.1)}"
    return g.line(text, g.shapes[h], f"normalize axis {axis}")


def rows(g, h):
    return normalize(g, h, -1)


def columns(g, h):
    return normalize(g, h, 0)


def column_sum(g, h):
    n, d = g.shapes[h]
    text = g.choice(["{h} - np.sum({h}, axis=0) / {n}", "{h} * np.tanh(np.sum({h}, axis=0, keepdims=True))",
                     "{h} + np.sum(np.tanh({h}), axis=0) * {c}"])
    return g.line(text.format(h=h, n=float(n), c=g.arg((d,), 0.1)), (n, d), "column sum")


def residual(g, h):
    other = g.same_shape(h)
    if other is None:
        return None
    return g.line(f"{h} + {other}" if g.rng.random() < 0.5 else f"{h} * np.tanh({other})", g.shapes[h], "residual")


def shift(g, h):
    n, d = g.shapes[h]
    axis = int(g.rng.integers(2))
    k = int(g.rng.integers(1, 4)) % max(g.shapes[h][axis], 1)
    how = g.rng.random()
    if how < 0.5 or k == 0:
        return g.line(f"np.roll({h}, {k or 1}, axis={axis})", (n, d), "roll")
    cut = f"{h}[:-{k}]" if axis == 0 else f"{h}[:, :-{k}]"
    head = f"{h}[:{k}]" if axis == 0 else f"{h}[:, :{k}]"
    if how < 0.65:   # zeros shifted in, or (a recurrence's shift: its adjoint a region add) computed ones
        return g.line(f"np.concatenate([np.zeros_like({head}), {cut}], axis={axis})", (n, d), "shift")
    if how < 0.8:
        return g.line(f"np.concatenate([np.tanh({head}), np.tanh({cut})], axis={axis})", (n, d), "shift")
    return g.line(f"np.sin({g.arg((n, d))} * np.concatenate([np.ones_like({head}), {cut}], axis={axis}))", (n, d),
                  "shift")


def slice_concat(g, h):
    n, d = g.shapes[h]
    if d < 2:
        return None
    k = int(g.rng.integers(1, d))
    pieces = g.choice([f"[{h}[:, :{k}], np.tanh({h}[:, {k}:])]", f"[{h}[:, {k}:], {h}[:, :{k}]]",
                       f"[{h}, {h}[:, :{k}] * 2.0]", f"[np.tanh({h}[:, :{k}]) * 2.0, {h}[:, {k}:] * {h}[:, {k}:]]"])
    width = d + k if pieces.endswith("2.0]") else d
    return g.line(f"np.concatenate({pieces}, axis=1)", (n, width), "slice concat")


def attention(g, h):
    """Self-attention over heads: reshaped and transposed views, batched products, softmax."""
    if g.heads is None or g.shapes[h] != (g.heads[0] * g.heads[1], g.heads[2] * g.heads[3]):
        return None
    b, t, heads, dh = g.heads
    d = heads * dh
    qkv = g.line(f"{h} @ {g.arg((d, 3 * d), d ** -0.5)} + {g.arg((3 * d,), 0.1)}", (b * t, 3 * d), "attention")
    views = [g.line(f"{qkv}[:, {k * d}:{(k + 1) * d}].reshape({b}, {t}, {heads}, {dh}).transpose(0, 2, 1, 3)",
                    (b, heads, t, dh), "attention") for k in range(3)]
    q, k, v = views
    scale = g.rng.random()
    if scale < 0.3:   # the scale on the reshaped, transposed queries (an op before a reshape)
        q = g.line(f"{q} * {dh ** -0.5!r}", (b, heads, t, dh), "attention")
    if scale < 0.3 or g.rng.random() < 0.5:
        scores = f"{q} @ {k}.transpose(0, 1, 3, 2)" if scale < 0.3 else \
            f"np.einsum('bhtd,bhsd->bhts', {q}, {k}) / {math.sqrt(dh)!r}"
    else:
        scores = f"{q} @ {k}.transpose(0, 1, 3, 2) * {dh ** -0.5!r}"
    s = g.line(scores, (b, heads, t, t), "attention")
    if g.rng.random() < 0.5:
        s = g.line(f"np.where(np.tril(np.ones(({t}, {t}), dtype=bool)), {s}, -1e9)", (b, heads, t, t), "attention")
    p = g.line(g.choice(["nn.softmax({s}, axis=-1)", "np.exp(nn.log_softmax({s}, axis=-1))"]).format(s=s),
               (b, heads, t, t), "attention")
    out = g.line(f"({p} @ {v}).transpose(0, 2, 1, 3).reshape({b * t}, {d})", (b * t, d), "attention")
    return g.line(f"{h} + {out} @ {g.arg((d, d), d ** -0.5)}", (b * t, d), "attention")


def batched(g, h):
    """A batched product over a reshape of the rows: (b, t, d) with its transpose."""
    n, d = g.shapes[h]
    b = next((k for k in (4, 3, 2) if n % k == 0), 1)
    x = g.line(f"{h}.reshape({b}, {n // b}, {d})", (b, n // b, d), "batched")
    gram = g.line(f"np.einsum('btd,bsd->bts', {x}, {x}) * {d ** -0.5!r}", (b, n // b, n // b), "batched")
    mixed = g.line(f"np.tanh({gram}) @ {x}", (b, n // b, d), "batched")
    return g.line(f"{mixed}.reshape({n}, {d}) + {h}", (n, d), "batched")


def loop(g, h):
    """A loop of 0, 1, 2 or an odd number of steps: `fori_loop` or `scan` with a body reading a
    weight and a bias captured from outside (loop invariants), `scan` with an elementwise
    carry, or a `FOR` recurrence (`recurrence`)."""
    n, d = g.shapes[h]
    steps = g.choice([0, 1, 2, 3, 5])
    how = g.rng.random()
    if how < 0.25:
        w, c = g.arg((d, d), 0.5 * d ** -0.5), g.arg((d,), 0.1)
        return g.line(f"lax.fori_loop(0, {steps}, lambda i, c: np.tanh(c @ {w} + {c}) + 0.5 * c, {h})", (n, d),
                      "fori_loop")
    if how < 0.45:
        w, c = g.arg((d, d), 0.5 * d ** -0.5), g.arg((d,), 0.1)
        step = f"lambda c, x: (np.tanh(c @ {w}.T + x), c * x + {c})"
        return g.line(f"lax.scan({step}, np.zeros({d}, dtype={h}.dtype), {h})[1]", (n, d), "scan")
    if how < 0.6:   # a carry that no product reads as is; the stacked outputs
        w = g.arg((d,), 0.5)
        step = f"lambda c, x: (np.tanh(c * {w} + x), np.sin(c) * x)"
        return g.line(f"lax.scan({step}, np.zeros({d}, dtype={h}.dtype), {h})[1]", (n, d), "scan")
    return recurrence(g, h, steps)


def recurrence(g, h, steps=None):
    """A `FOR` recurrence of `steps` (drawn: 0 to 5), some checkpointed (`checkpoints=`: JAX's
    side a plain `fori_loop`): through a shift, arithmetic alone, through an index, or a
    product after a nonlinearity; its tensor state kept as each step leaves it in reverse mode."""
    n, d = g.shapes[h]
    steps = g.choice([0, 1, 2, 3, 5]) if steps is None else steps
    how = 0.45 + 0.55 * g.rng.random()
    checkpoints = g.choice([None, None, 1, 2])
    x = g.arg((n, d), 0.5)
    if how < 0.7 and n > 1:   # a recurrence through a shift (its adjoint a region add)
        body = g.choice([f"lambda i, c: c + 0.1 * np.sin({x} * np.concatenate([np.ones_like(c[:1]), c[:-1]]))",
                         f"lambda i, c: c * {x} + 0.5 * np.concatenate([np.ones_like(c[:1]), c[:-1]])"])
    elif how < 0.8:   # arithmetic alone: a step stores nothing but its state
        body = f"lambda i, c: c + 0.1 * ({x} * c - c * c * c)"
    elif how < 0.9:   # the state's rows, or a column's elements, read through an index
        i = g.index((n,), -n, n)
        body = g.choice([f"lambda i, c: c + 0.1 * np.sin(c[{i}] * {x})",
                         f"lambda i, c: c * 0.9 + np.take(c[:, 0], {i})[:, None] * {x}"])
    else:
        w = g.arg((d, d), 0.5 * d ** -0.5)
        body = f"lambda i, c: c + np.tanh(c) @ {w} * {x}"
    return g.line(f"FOR(0, {steps}, {body}, {h}, checkpoints={checkpoints})", (n, d), "FOR")


def gather(g, h):
    """Rows or elements read through an int64 index with repeats (negative entries count from
    the end): `x[idx]`, `take`, `take_along_axis`, an embedding table's rows, a column's
    elements gathered inside a fused loop."""
    n, d = g.shapes[h]
    how = int(g.rng.integers(5))
    if how == 0:
        return g.line(f"np.tanh({h}[{g.index((n,), -n, n)}]) * 2.0 + {h}", (n, d), "gather")
    if how == 1:
        col = int(g.rng.integers(d))
        return g.line(f"{h} * np.take({h}[:, {col}], {g.index((n,), -n, n)})[:, None] + {h}[:, {col}:{col + 1}]",
                      (n, d), "gather")
    if how == 2:
        return g.line(f"np.take_along_axis({h}, {g.index((n, d), 0, d)}, axis=1) * np.sin({h})", (n, d), "gather")
    if how == 3:   # vectors of parameters read through an index, in one loop (a camera's columns)
        m = g.choice(g.rows)
        a, b = g.arg((m,)), g.arg((m,))
        i = g.index((n,), -m, m)
        return g.line(f"{h} * np.sin({a}[{i}] * {b}[{i}])[:, None] + np.cos({b}[{i}])[:, None]", (n, d), "gather")
    m = g.choice(g.rows)
    table = g.arg((m, d))
    return g.line(f"{h} + np.take({table}, {g.index((n,), 0, m)}, axis=0)", (n, d), "embedding")


def scatter(g, h):
    """Sums over segments (`.at[].add` with repeated indices, `ops.segment_sum`, a loop adding
    one row a step), read back through the segment ids."""
    n, d = g.shapes[h]
    m = g.choice(g.rows)
    ids = g.index((n,), 0, m)
    how = int(g.rng.integers(3))
    if how == 0:
        sums = g.line(f"np.zeros(({m}, {d}), dtype={h}.dtype).at[{ids}].add(np.tanh({h}))", (m, d), "scatter")
    elif how == 1:
        sums = g.line(f"ops.segment_sum({h} * {h}, {ids}, {m})", (m, d), "segment_sum")
    else:
        steps = min(n, 17)
        sums = g.line(f"lax.fori_loop(0, {steps}, lambda j, a: a.at[{ids}[j]].add(np.sin({h}[j])), "
                      f"np.zeros(({m}, {d}), dtype={h}.dtype))", (m, d), "segment loop")
    return g.line(f"{h} * np.tanh({sums}[{ids}])", (n, d), "scatter")


def one_hot(g, h):
    """A one-hot product (an embedding written as a product), its labels partly outside the
    classes (rows of zeros)."""
    n, d = g.shapes[h]
    c = g.choice([3, 10, 17, 64])
    w = g.arg((c, d))
    return g.line(f"{h} + nn.one_hot({g.index((n,), -1, c + 1)}, {c}, dtype={h}.dtype) @ {w}", (n, d), "one-hot")


def tiled(g, h):
    """Slices that lay a tensor out again whole, joined (a Jacobian's blocks)."""
    n, d = g.shapes[h]
    axis = int(g.rng.integers(2))
    size = (n, d)[axis]
    if size < 2:
        return None
    cuts = sorted(set(int(c) for c in g.rng.integers(1, size, size=int(g.rng.integers(1, 3)))))
    bounds = [0] + cuts + [size]
    v = g.line(f"np.tanh({h}) * 2.0", (n, d), "tiled concat")
    pieces = [f"{v}[{a}:{b}]" if axis == 0 else f"{v}[:, {a}:{b}]" for a, b in zip(bounds, bounds[1:])]
    return g.line(f"np.concatenate([{', '.join(pieces)}], axis={axis}) + {h}", (n, d), "tiled concat")


def tied(g, h):
    """One weight in several layers (an unrolled recurrence; a layer and its transpose): the
    gradient reads it transposed in several products."""
    n, d = g.shapes[h]
    if g.rng.random() < 0.5:
        w = g.arg((d, g.width(n)), d ** -0.5)
        return g.line(f"np.tanh({h} @ {w}) @ {w}.T + {h}", (n, d), "tied")
    w = g.arg((d, d), d ** -0.5)
    return g.line(f"np.tanh(np.tanh(np.tanh({h} @ {w}) @ {w}) @ {w})", (n, d), "tied")


def division(g, h):
    """Divisions by values constant along the rows (a row's sum, a scalar): a product with the
    reciprocal in the loop, which may differ from the division in the last bit."""
    n, d = g.shapes[h]
    return g.line(g.choice([f"{h} / (1.0 + np.sum({h} * {h}, axis=-1, keepdims=True))",
                            f"np.tanh({h}) / (1.0 + np.mean({h} * {h}))",
                            f"{h} / (2.0 + np.cos({g.arg((n, 1))}))"]), (n, d), "division")


def scalar_loss(g, h):
    """A scalar result (its gradient's seed through constant factors)."""
    return g.line(g.choice([f"np.sum({h} * {h}) * 0.5", f"np.mean(nn.logsumexp({h}, axis=-1)) / 3.0",
                            f"-np.mean(nn.log_softmax({h}, axis=-1)[:, 0]) * 2.0"]), (), "loss")


STAGES = [dense, dense, activation, activation, rows, rows, columns, columns, column_sum, residual, shift,
          slice_concat, attention, attention, batched, loop, loop, gather, gather, scatter, one_hot, tiled, tied,
          division]


# -- running and judging ---------------------------------------------------------------------

SIDES = {"jitad": (jitad, jitad.numpy, jitad.lax, jitad.nn), "jax": (jax, jjnp, jax.lax, jax.nn)}
LOOPS = {"jitad": lambda lower, upper, body, init, checkpoints=None: jitad.FOR(lower, upper, body, init,
                                                                             checkpoints=checkpoints),
         "jax": lambda lower, upper, body, init, checkpoints=None: jax.lax.fori_loop(lower, upper, body, init)}
OPS = {"jitad": jitad.ops, "jax": jax.ops}


def _function(model, side, lines=None, result=None):
    _, np, lax, nn = SIDES[side]
    env = {"np": np, "lax": lax, "nn": nn, "ops": OPS[side], "FOR": LOOPS[side]}
    exec(model.source(lines, result), env)
    return env["f"]


def _cotangent(shape, dtype):
    return onp.cos(onp.arange(math.prod(shape)) * 0.7 + 0.3).reshape(shape).astype(dtype)


def _lanes(a):
    return onp.stack([a, onp.roll(a.ravel(), 1).reshape(a.shape)])


def run(model, side, transform, lines=None, result=None):
    """("ok", list of arrays) or ("error", exception): the program's value, or value and gradients."""
    t, np, _, _ = SIDES[side]
    f = _function(model, side, lines, result)
    args = [onp.array(a) for a in model.args] if side == "jitad" else [jjnp.asarray(a) for a in model.args]
    every = model.differentiated()
    shape = onp.shape(jax.eval_shape(_function(model, "jax", lines, result), *model.args))
    cot = _cotangent(shape, model.dtype)

    def loss(*a):
        return np.sum(f(*a) * cot)

    def lane_loss(x, *rest):
        return np.sum(f(x, *rest) * cot)
    try:
        if transform == "jit":
            out = [t.jit(f)(*args)]
        elif transform == "value_and_grad":
            value, grads = t.value_and_grad(loss, argnums=every)(*args)
            out = [value, *grads]
        elif transform == "jit_grad":
            out = list(t.jit(t.grad(loss, argnums=every))(*args))
        elif transform == "vmap":
            out = [t.vmap(f, in_axes=(0,) + (None,) * (len(args) - 1))(_lanes(model.args[0]), *args[1:])]
        else:
            out = list(t.vmap(t.grad(lane_loss, argnums=every), in_axes=(0,) + (None,) * (len(args) - 1))(
                _lanes(model.args[0]), *args[1:]))
        return "ok", [onp.asarray(v) for v in out]
    except Exception as e:   # noqa: BLE001 -- every outcome is compared
        return "error", e


def compare(mine, theirs, dtype, names=None):
    """'' where jitad's arrays match JAX's, else what differs (the first array that does,
    by its name in `names`)."""
    rel, scale_tol = TOLERANCE[dtype]
    for what, a, b in zip(names or [f"array {k}" for k in range(len(mine))], mine, theirs):
        a, b = onp.asarray(a, dtype=onp.float64), onp.asarray(b, dtype=onp.float64)
        if a.shape != b.shape:
            return f"{what}: shape {a.shape} vs JAX {b.shape}"
        if onp.isnan(a).any() and not onp.isnan(b).any():
            return f"{what}: NaN at {onp.argwhere(onp.isnan(a))[:3].tolist()} where JAX has none"
        finite = onp.isfinite(b)
        scale = max(1.0, float(onp.abs(b[finite]).max())) if finite.any() else 1.0
        with onp.errstate(all="ignore"):
            bad = ~(onp.abs(a - b) <= rel * onp.abs(b) + scale_tol * scale) & finite
        bad |= ~finite & (a != b) & ~(onp.isnan(a) & onp.isnan(b))
        if bad.any():
            at = tuple(onp.argwhere(bad)[0])
            return f"{what}: {int(bad.sum())} of {a.size} differ, first at {at}: jitad {a[at]!r}, JAX {b[at]!r}"
    return ""


def _expected(model, transform, cache, lines=None, result=None):
    """JAX's outcome for `transform`; one `value_and_grad` serves `value_and_grad` and `jit_grad`."""
    key = "value_and_grad" if transform == "jit_grad" else transform
    if key not in cache:
        cache[key] = run(model, "jax", key, lines, result)
    kind, out = cache[key]
    return (kind, out[1:]) if transform == "jit_grad" and kind == "ok" else (kind, out)


def verdict(model, transform, cache=None, lines=None, result=None):
    """'' where jitad agrees with JAX on `model` under `transform`, else what differs. A float32
    program's arrays that differ are judged again against JAX's in float64 on the same
    arguments (`_beyond_float32`): an ill-conditioned result is as far from it in JAX's float32."""
    theirs = _expected(model, transform, {} if cache is None else cache, lines, result)
    mine = run(model, "jitad", transform, lines, result)
    if theirs[0] == "error":
        return "" if mine[0] == "error" else f"JAX raised {theirs[1]!r}, jitad did not"
    if mine[0] == "error":
        return f"jitad raised {type(mine[1]).__name__}: {str(mine[1])[:400]}"
    names = model.names(transform)
    what = compare(mine[1], theirs[1], model.dtype, names)
    if what and model.dtype == "float32" and "NaN" not in what:
        wide = dataclasses.replace(model, dtype="float64", args=[a.astype(onp.float64) if a.dtype.kind == "f" else a
                                                                 for a in model.args])
        truth = _expected(wide, transform, {}, lines, result)
        if truth[0] == "ok":
            what = _beyond_float32(mine[1], theirs[1], truth[1], names, _largest_step(wide, lines),
                                   _result_size(model, lines, result))
    return what


def _beyond_float32(mine, theirs, truth, names, largest=0.0, terms=1, factor=4.0):
    """'' where each of jitad's float32 arrays is within `factor` times JAX's float32 error of
    the float64 result, or within the float32 tolerance of the largest magnitude of them all and
    of the program's steps, `largest` (a gradient that is 0 but for rounding, a bias's before a
    normalization, or the column sum of a normalized array, is noise of that size; the loss, a
    sum of `terms` such values, noise sqrt(terms) times that); else the first that is not."""
    _, scale_tol = TOLERANCE["float32"]
    truth = [onp.asarray(t, dtype=onp.float64) for t in truth]
    top = max([largest] + [float(onp.abs(t).max(initial=0.0)) for t in truth])
    for what, a, b, t in zip(names, mine, theirs, truth):
        with onp.errstate(all="ignore"):
            mine_err, jax_err = (float(onp.abs(onp.asarray(v, dtype=onp.float64) - t).max(initial=0.0))
                                 for v in (a, b))
        floor = scale_tol * top * (math.sqrt(terms) if what == "value" and not onp.ndim(t) else 1.0)
        if not mine_err <= max(factor * jax_err, floor):
            return f"{what}: float32 error {mine_err:.3g} of the float64 result, JAX's {jax_err:.3g} (largest {top:.3g})"
    return ""


def _result_size(model, lines=None, result=None):
    """The number of elements of the program's result (the terms of its loss)."""
    result = result or model.result
    shapes = {f"x{k}": a.shape for k, a in enumerate(model.args)}
    shapes.update((name, shape) for name, _, shape in (model.lines if lines is None else lines))
    return math.prod(shapes[result])


def _largest_step(model, lines=None):
    """The largest finite magnitude among the values `model`'s lines compute (JAX, eagerly)."""
    env = {"np": jjnp, "lax": jax.lax, "nn": jax.nn, "ops": jax.ops, "FOR": LOOPS["jax"],
           **{f"x{k}": a for k, a in enumerate(model.args)}}
    top = 0.0
    for name, text, _ in model.lines if lines is None else lines:
        env[name] = value = onp.asarray(eval(text, env), dtype=onp.float64)
        finite = onp.abs(value[onp.isfinite(value)])
        top = max(top, float(finite.max(initial=0.0)))
    return top


def check(model, transforms=TRANSFORMS):
    """[(transform, what differs)] for `model`, every path compiled."""
    with compiled(model):
        cache = {}
        return [(t, what) for t in transforms if (what := verdict(model, t, cache))]


@contextlib.contextmanager
def compiled(model):
    """While open, every jitad path compiles, and `jax_debug_nans` is on for both sides where
    `model` asks for it."""
    saved = jitad.config.read("jitad_tiering"), jitad.config.read("jax_debug_nans"), jax.config.jax_debug_nans
    jitad.config.update("jitad_tiering", "compile")
    jitad.config.update("jax_debug_nans", model.debug_nans)
    jax.config.update("jax_debug_nans", model.debug_nans)
    try:
        yield
    finally:
        jitad.config.update("jitad_tiering", saved[0])
        jitad.config.update("jax_debug_nans", saved[1])
        jax.config.update("jax_debug_nans", saved[2])


def minimize(model, transform):
    """A smaller program that still disagrees under `transform`: the result moved to an
    earlier value, then each line dropped (its readers reading an earlier value of its shape
    instead) while the finding persists. Returns (lines, result, what)."""
    with compiled(model):
        lines, result, what = model.lines, model.result, verdict(model, transform)
        for k in range(len(lines) - 1, 0, -1):
            if (found := verdict(model, transform, None, lines[:k], lines[k - 1][0])):
                lines, result, what = lines[:k], lines[k - 1][0], found
        for k in range(len(lines) - 2, -1, -1):
            smaller = _without(model, lines, k)
            if smaller and (found := verdict(model, transform, None, smaller, result)):
                lines, what = smaller, found
        return lines, result, what


def _without(model, lines, k):
    """`lines` without line k, its readers reading the latest earlier value (or argument) of
    its shape instead; None where there is none."""
    name, _, shape = lines[k]
    earlier = [f"x{j}" for j, a in enumerate(model.args) if a.shape == shape and a.dtype.kind == "f"] + \
        [n for n, _, s in lines[:k] if s == shape]
    if not earlier:
        return None
    pattern = re.compile(rf"\b{name}\b")
    return lines[:k] + [(n, pattern.sub(earlier[-1], text), s) for n, text, s in lines[k + 1:]]


def reproducer(seed, model, transform, what):
    lines, result, what = minimize(model, transform)
    shapes = ", ".join(f"x{k}: {a.dtype}{list(a.shape)}" for k, a in enumerate(model.args))
    nans = "# with jax_debug_nans on\n" if model.debug_nans else ""
    return (f"# case {seed} ({transform}): {what}\n{nans}# arguments: {shapes}\n"
            f"# stages: {', '.join(dict.fromkeys(model.stages))}\n"
            f"# rerun: python -m tests.reliability.fuzz_models --case {seed}\n{model.source(lines, result)}")


# what the lowering and reverse mode do past the pipeline's passes, seen by `pass_coverage`:
# (name, module, function, whether a call did it: fn(result, *args))
FEATURES = [
    ("row_scratch", "jitad.ir.rows", "_scratch", lambda out, *a: True),
    ("reciprocal_divisions", "jitad.ir.fuse", "reciprocal_divisions", lambda out, body, *a: len(out) != len(body.nodes)),
    ("prefetch", "jitad.lower.tensor", "_prefetch_ahead", lambda out, *a: True),
    ("state_tables_leaving", "jitad.transforms.vjp", "_StateTables", lambda out, *a: bool(out.leaving)),
]


@contextlib.contextmanager
def pass_coverage(fired):
    """While open, `fired[name]` counts the programs each pass of the pipeline changed
    (`passes.counting_changes`), and the calls in which each of `FEATURES` did its work."""
    saved = [(sys.modules[m], fn, getattr(sys.modules[m], fn)) for _, m, fn, _ in FEATURES]

    def seen(name, original, did):
        def call(*args, **kwargs):
            out = original(*args, **kwargs)
            if did(out, *args):
                fired[name] += 1
            return out
        return call
    try:
        for (name, _, _, did), (module, fn, original) in zip(FEATURES, saved):
            setattr(module, fn, seen(name, original, did))
        with passes.counting_changes(fired):
            yield fired
    finally:
        for module, fn, original in saved:
            setattr(module, fn, original)


# `--low-thresholds`: the passes' size thresholds (speed heuristics) lowered, so that small
# programs take the same rewrites model-sized ones do; (module, name, value)
LOW_THRESHOLDS = [("jitad.ir.rows", "MIN_BYTES", 0), ("jitad.ir.rows", "MIN_ROW", 4),
                  ("jitad.ir.column_products", "COLUMN_SLOT_BYTES", 0),
                  ("jitad.ir.column_products", "COLUMN_ROW", 8), ("jitad.ir.fuse", "COLUMN_SUM_ROW", 8),
                  ("jitad.ir.fuse", "PRODUCT_ROW", 8), ("jitad.lower.tensor", "COLUMN_STACK", 256)]


@contextlib.contextmanager
def low_thresholds():
    """While open, the passes take small programs too (`LOW_THRESHOLDS`)."""
    saved = [(sys.modules[m], name, getattr(sys.modules[m], name)) for m, name, _ in LOW_THRESHOLDS]
    try:
        for (module, name, _), (_, _, value) in zip(saved, LOW_THRESHOLDS):
            setattr(module, name, value)
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def fuzz(minutes, seed=None, out=sys.stdout, transforms=TRANSFORMS, fired=None):
    """Run cases from `seed` on for `minutes`; print each finding; return [(seed, transform, what)].
    With `fired` (a `pass_coverage` counter), print the cases each pass and feature changed."""
    start, covered = time.monotonic(), collections.Counter()
    case = seed if seed is not None else int(time.time()) % 10**6 * 1000
    found, count, report = [], 0, start + 300
    while time.monotonic() < start + 60 * minutes:
        if time.monotonic() > report:   # (progress, every 5 minutes)
            report += 300
            print(f"# {count} cases in {(time.monotonic() - start) / 60:.1f} minutes", file=out, flush=True)
        model, before = program(case), collections.Counter(fired or ())
        try:
            findings = check(model, transforms)
        except Exception as e:   # noqa: BLE001 -- the fuzzer's own bug: say so, go on
            print(f"\n# --- fuzzer error on case {case}: {type(e).__name__}: {e}", file=out, flush=True)
            findings = []
        count += 1
        covered.update(name for name in fired or () if fired[name] > before[name])
        for transform, what in findings[:1]:
            found.append((case, transform, what))
            print(f"\n# --- finding {len(found)}\n{reproducer(case, model, transform, what)}", file=out, flush=True)
            print("".join(f"# also {t}: {w[:200]}\n" for t, w in findings[1:]), file=out, flush=True)
        case += 1
    print(f"\n# {count} model cases checked (seeds {case - count} to {case - 1}), {len(found)} findings", file=out)
    if fired is not None:
        _print_coverage(covered, fired, out)
    return found


def _print_coverage(covered, fired, out):
    """The cases (and programs) each pass and feature changed, and those none did."""
    names = list(dict.fromkeys([name for name, _, _ in passes.PIPELINE] + [name for name, *_ in FEATURES]))
    print("# cases (programs) each pass or feature changed:", file=out)
    for name in sorted(names, key=lambda n: -covered[n]):
        print(f"#   {name:28} {covered[name]:5} ({fired[name]})", file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Differential fuzzing of jitad against JAX on model-shaped programs")
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--case", type=int, default=None, help="run this one case and print it")
    parser.add_argument("--coverage", action="store_true", help="count the programs each pass changed")
    parser.add_argument("--low-thresholds", action="store_true", help="the passes take small programs too")
    a = parser.parse_args(argv)
    fired = collections.Counter()
    with pass_coverage(fired) if a.coverage else contextlib.nullcontext(), \
            low_thresholds() if a.low_thresholds else contextlib.nullcontext():
        return _main(a, fired)


def _main(a, fired):
    if a.case is not None:
        model = program(a.case)
        print(model.source(), "\n# arguments:", [(x.dtype.name, x.shape) for x in model.args])
        findings = check(model)
        print("\n".join(f"# {t}: {w}" for t, w in findings) or "# agrees with JAX")
        return 1 if findings else 0
    found = fuzz(a.minutes, a.seed, fired=fired if a.coverage else None)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
