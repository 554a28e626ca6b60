"""The CNN of PyTorch's MNIST example, trained on synthetic MNIST-shaped digits.

No download: each of the 10 classes is a bright blob at its own place on a 28x28 image
(jittered by up to 2 pixels, with a fainter decoy blob and pixel noise), so the
class is learnable but not readable from one pixel.

    conv 1->10 5x5, maxpool 2, relu, conv 10->20 5x5, maxpool 2, relu,
    linear 320->50, relu, dropout 0.5, linear 50->10, log_softmax, nll_loss

Run: .venv/bin/python examples/mnist_cnn.py
(on a machine whose cores are busy with other work, OPENBLAS_NUM_THREADS=1, as `make`
sets it, keeps BLAS threads from waiting for each other; it can be 3x faster)
"""
import time

import numpy as np
from tqdm import tqdm

import jitad

N_TRAIN, N_TEST, BATCH, EPOCHS, LR, MOMENTUM = 1000, 200, 50, 8, 0.1, 0.5

# -- data ------------------------------------------------------------------------
rng = np.random.default_rng(0)
angles = 2 * np.pi * np.arange(10) / 10
centers = np.stack([14 + 9 * np.sin(angles), 14 + 9 * np.cos(angles)], 1)   # one per class
yy, xx = np.mgrid[0:28, 0:28]


def blob(center, width):
    return np.exp(-((yy - center[0]) ** 2 + (xx - center[1]) ** 2) / (2 * width ** 2))


def make_images(n):
    labels = rng.integers(0, 10, n)
    images = np.empty((n, 1, 28, 28))
    for k, c in enumerate(labels):
        distractor = centers[rng.integers(0, 10)]
        images[k, 0] = (blob(centers[c] + rng.uniform(-2, 2, 2), 2.5)
                        + 0.4 * blob(distractor + rng.uniform(-2, 2, 2), 2.5)
                        + 0.3 * rng.standard_normal((28, 28)))
    return images, labels


train_x, train_y = make_images(N_TRAIN)
test_x, test_y = make_images(N_TEST)

# -- the network (PyTorch's default initialization scale) -----------------------------


def init(fan_in, *shape):
    return rng.uniform(-1, 1, shape) / np.sqrt(fan_in)


params = {"conv1": init(25, 10, 1, 5, 5), "b1": np.zeros(10),     # OIHW, as PyTorch
          "conv2": init(250, 20, 10, 5, 5), "b2": np.zeros(20),
          "fc1": init(320, 320, 50), "bf1": np.zeros(50),         # (in, out): x @ W
          "fc2": init(50, 50, 10), "bf2": np.zeros(10)}


def logits(p, x, key, train):
    x = jitad.relu(jitad.max_pool2d(jitad.conv2d(x, p["conv1"], p["b1"]), 2))  # (N, 10, 12, 12)
    x = jitad.relu(jitad.max_pool2d(jitad.conv2d(x, p["conv2"], p["b2"]), 2))  # (N, 20, 4, 4)
    x = jitad.relu(x.reshape((x.shape[0], 320)) @ p["fc1"] + p["bf1"])
    if train:                                   # a Python bool: chosen at trace time
        x = jitad.dropout(x, 0.5, key)          # `key` is a staged int: new mask each call
    return x @ p["fc2"] + p["bf2"]


def loss(p, x, labels, key):
    return jitad.nll_loss(jitad.log_softmax(logits(p, x, key, True)), labels)


step = jitad.jit_grad(loss)
predict = jitad.jit(lambda p, x: logits(p, x, 0, False))


def accuracy(p, x, y):
    return np.mean(np.argmax(predict(p, x), -1) == y)


opt = jitad.optim.sgd(LR, momentum=MOMENTUM)
p, state = params, opt.init(params)
key = jitad.random.key(0)
print(f"test accuracy before training: {accuracy(p, test_x, test_y):.1%}")
start = time.perf_counter()
for epoch in range(EPOCHS):
    order, losses = rng.permutation(N_TRAIN), []
    for b in tqdm(range(0, N_TRAIN, BATCH), desc=f"epoch {epoch + 1}", leave=False):
        idx = order[b:b + BATCH]
        key, sub = jitad.random.split(key)
        value, grads = step(p, train_x[idx], train_y[idx], sub)
        p, state = opt.update(p, grads, state)
        losses.append(value)
    print(f"epoch {epoch + 1}: mean training loss {np.mean(losses):.3f}")
print(f"trained in {time.perf_counter() - start:.1f} s "
      f"(compiling the step took {step.compile_seconds:.1f} s)")
print(f"test accuracy after training:  {accuracy(p, test_x, test_y):.1%}")
