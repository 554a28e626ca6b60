"""Programs of JAX's and autograd's examples that use their optimizers (JAX's
`example_libraries.optimizers`, autograd's `misc.optimizers` and `misc.flatten`) and
`elementwise_grad`, ported by renaming `jax`/`autograd` to `jitad` in their imports only
(plotting cut, sizes and iteration counts small), each compared with its original run
through JAX or autograd (the same text with the rename undone)."""
import importlib.util

import numpy as np
import pytest
from .porting import run

import jitad

jax = pytest.importorskip("jax", reason="the original programs run through JAX (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
pytest.importorskip("autograd", reason="the original programs run through autograd (the test extra installs it)")


def _needs(module):
    return pytest.mark.skipif(importlib.util.find_spec(module) is None, reason=f"{module} is not in this jitad")


KERNEL_LSQ = '''
from functools import partial

import numpy.random as npr

import jitad.numpy as jnp
from jitad.example_libraries import optimizers
from jitad import grad, jit, vmap, lax


def gram(kernel, xs):
  \'\'\'Compute a Gram matrix from a kernel and an array of data points.

  Args:
    kernel: callable, maps pairs of data points to scalars.
    xs: array of data points, stacked along the leading dimension.

  Returns:
    A 2d array `a` such that `a[i, j] = kernel(xs[i], xs[j])`.
  \'\'\'
  return vmap(lambda x: vmap(lambda y: kernel(x, y))(xs))(xs)


def minimize(f, x, num_steps=10000, step_size=0.000001, mass=0.9):
  opt_init, opt_update, get_params = optimizers.momentum(step_size, mass)

  @jit
  def update(i, opt_state):
    x = get_params(opt_state)
    return opt_update(i, grad(f)(x), opt_state)

  opt_state = opt_init(x)
  for i in range(num_steps):
    opt_state = update(i, opt_state)
  return get_params(opt_state)


def train(kernel, xs, ys, regularization=0.01):
  gram_ = jit(partial(gram, kernel))
  gram_mat = gram_(xs)
  n = xs.shape[0]

  def objective(v):
    risk = .5 * jnp.sum((jnp.dot(gram_mat, v) - ys) ** 2.0)
    reg = regularization * jnp.sum(v ** 2.0)
    return risk + reg

  v = minimize(objective, jnp.zeros(n), num_steps=300)

  def predict(x):
    prods = vmap(lambda x_: kernel(x, x_))(xs)
    return jnp.sum(v * prods)

  return jit(vmap(predict))


if __name__ == "__port__":
  n = 100
  d = 20

  # linear kernel

  linear_kernel = lambda x, y: jnp.dot(x, y, precision=lax.Precision.HIGH)
  npr.seed(0)
  truth = npr.randn(d)
  xs = npr.randn(n, d)
  ys = jnp.dot(xs, truth)

  predict = train(linear_kernel, xs, ys)

  print('MSE:', jnp.sum((predict(xs) - ys) ** 2.))
  mse = jnp.sum((predict(xs) - ys) ** 2.)

  rbf_kernel = lambda x, y: jnp.exp(-jnp.sum((x - y) ** 2))
  rbf_gram = jit(partial(gram, rbf_kernel))(xs)
'''


@_needs("jitad.example_libraries")
def test_kernel_least_squares():
    mine, theirs = run(KERNEL_LSQ, "jitad"), run(KERNEL_LSQ, "jax")
    assert float(mine["mse"]) == pytest.approx(float(theirs["mse"]), rel=1e-10)
    np.testing.assert_allclose(mine["predict"](mine["xs"]), theirs["predict"](theirs["xs"]), rtol=1e-10)
    np.testing.assert_allclose(mine["rbf_gram"], theirs["rbf_gram"], rtol=1e-12)


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
