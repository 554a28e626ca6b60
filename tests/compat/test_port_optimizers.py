"""Programs of autograd's examples that use its optimizers (`misc.optimizers` and
`misc.flatten`) and `elementwise_grad`, ported by renaming `autograd` to `jitad` in their
imports only (plotting cut, sizes and iteration counts small), each compared with its
original run through autograd (the same text with the rename undone). JAX's `kernel_lsq`
example, once here, is in the corpus (`tests/corpus/jax/`)."""
import importlib.util

import numpy as np
import pytest
from .porting import run

import jitad

pytest.importorskip("autograd", reason="the original programs run through autograd (the test extra installs it)")


def _needs(module):
    return pytest.mark.skipif(importlib.util.find_spec(module) is None, reason=f"{module} is not in this jitad")


NEURAL_NET_REGRESSION = '''
import itertools

import jitad.numpy as np
import jitad.numpy.random as npr
from jitad import grad
from jitad.misc import flatten
from jitad.misc.optimizers import adam
from jitad.scipy.stats import norm


def init_random_params(scale, layer_sizes, rs=None):
    """Build a list of (weights, biases) tuples, one for each layer."""
    rs = rs if rs is not None else npr.RandomState(0)
    return [
        (
            rs.randn(insize, outsize) * scale,  # weight matrix
            rs.randn(outsize) * scale,
        )  # bias vector
        for insize, outsize in itertools.pairwise(layer_sizes)
    ]


def nn_predict(params, inputs, nonlinearity=np.tanh):
    for W, b in params:
        outputs = np.dot(inputs, W) + b
        inputs = nonlinearity(outputs)
    return outputs


def log_gaussian(params, scale):
    flat_params, _ = flatten(params)
    return np.sum(norm.logpdf(flat_params, 0, scale))


def logprob(weights, inputs, targets, noise_scale=0.1):
    predictions = nn_predict(weights, inputs)
    return np.sum(norm.logpdf(predictions, targets, noise_scale))


def build_toy_dataset(n_data=80, noise_std=0.1):
    rs = npr.RandomState(0)
    inputs = np.concatenate([np.linspace(0, 3, num=n_data // 2), np.linspace(6, 8, num=n_data // 2)])
    targets = np.cos(inputs) + rs.randn(n_data) * noise_std
    inputs = (inputs - 4.0) / 2.0
    inputs = inputs[:, np.newaxis]
    targets = targets[:, np.newaxis] / 2.0
    return inputs, targets


if __name__ == "__port__":
    init_scale = 0.1
    weight_prior_variance = 10.0
    init_params = init_random_params(init_scale, layer_sizes=[1, 4, 4, 1])

    inputs, targets = build_toy_dataset()

    def objective(weights, t):
        return -logprob(weights, inputs, targets) - log_gaussian(weights, weight_prior_variance)

    print(grad(objective)(init_params, 0))

    def callback(params, t, g):
        print(f"Iteration {t} log likelihood {-objective(params, t)}")

        # Plot data and functions.
        plot_inputs = np.reshape(np.linspace(-7, 7, num=300), (300, 1))
        outputs = nn_predict(params, plot_inputs)

    print("Optimizing network parameters...")
    optimized_params = adam(grad(objective), init_params, step_size=0.01, num_iters=100, callback=callback)
'''


@_needs("jitad.misc")
def test_neural_net_regression():
    mine, theirs = run(NEURAL_NET_REGRESSION, "jitad"), run(NEURAL_NET_REGRESSION, "autograd")
    for (w, b), (w2, b2) in zip(mine["optimized_params"], theirs["optimized_params"]):
        np.testing.assert_allclose(w, w2, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(b, b2, rtol=1e-9, atol=1e-12)


TANH = '''
import jitad.numpy as np
from jitad import elementwise_grad as egrad

"""
Mathematically we can only take gradients of scalar-valued functions, but
autograd's elementwise_grad function also handles numpy's familiar vectorization
of scalar functions, which is used in this example.
"""


def tanh(x):
    return (1.0 - np.exp(-2 * x)) / (1.0 + np.exp(-(2 * x)))


x = np.linspace(-7, 7, 20)   # the original plots 700 points
curves = [tanh(x), egrad(tanh)(x), egrad(egrad(tanh))(x)]   # and the 3rd and 4th derivatives
'''


@pytest.mark.skipif(not hasattr(jitad, "elementwise_grad"), reason="no elementwise_grad in this jitad")
def test_tanh_derivatives():
    # egrad nested three deep does not finish in minutes here (each level of grad-of-grad
    # runs one forward pass per input element), so the port stops at the second derivative
    mine, theirs = run(TANH, "jitad"), run(TANH, "autograd")
    for k, (a, b) in enumerate(zip(mine["curves"], theirs["curves"])):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=f"derivative {k}")
