"""Programs of JAX's examples that use its optimizers (`example_libraries.optimizers`),
ported by renaming `jax` to `jitad` in their imports only (plotting cut, sizes and iteration
counts small), each compared with its original run through JAX (the same text with the rename
undone). (autograd's examples are in the corpus, `tests/corpus/autograd/`.)"""
import importlib.util

import numpy as np
import pytest
from .porting import run

jax = pytest.importorskip("jax", reason="the original programs run through JAX (the test extra installs it)")
jax.config.update("jax_enable_x64", True)


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
