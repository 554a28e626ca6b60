"""Train a small model in Python, then export its loss gradient as a C library.

A two-layer network fits y = sin(3x) on 256 synthetic points. jitad trains it for 200
steps, then `jitad.export` writes `build/libfit.so` and `build/fit.h`: `fit(in, out)`
gives the loss and `fit_grad(in, out)` the loss and its gradients w.r.t. the weights.
`main.c` goes on training from the weights saved here, with no Python in its process.

    make -C examples/export_c      # runs this, builds main.c against the library, runs it
"""
import os

import numpy as np

import jitad

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "build")


def loss(params, x, y):
    w1, b1, w2 = params
    h = jitad.tanh(x[:, None] * w1 + b1)
    return jitad.mean((h @ w2 - y) ** 2)


rng = np.random.default_rng(0)
x = np.linspace(-1.0, 1.0, 256)
y = np.sin(3.0 * x)
params = (rng.normal(size=16), rng.normal(size=16) * 0.1, rng.normal(size=16) * 0.1)
step = jitad.jit_grad(loss)
for it in range(200):
    value, grads = step(params, x, y)
    params = tuple(p - 0.2 * g for p, g in zip(params, grads))
print(f"python: loss after 200 steps {float(step(params, x, y)[0]):.6f}")

exported = jitad.export(loss, params, x, y, path=BUILD, name="fit", grad=True)
with open(os.path.join(BUILD, "inputs.bin"), "wb") as f:   # in[0..4]: w1, b1, w2, x, y
    for leaf in jitad.tree_leaves((params, x, y)):
        f.write(np.ascontiguousarray(leaf, dtype=np.float64).tobytes())
value, *grads = exported.call(params, x, y, grad=True)
print(f"python: the exported library gives loss {float(value):.6f} (jitad: {float(step(params, x, y)[0]):.6f})")
