# source: https://github.com/jax-ml/jax/blob/cec06d116c05f0d52adfceee3d3b730fdbcb0ce5/docs/jit-compilation.md
# ruff: noqa (kept as its authors wrote it)
# licence: Apache-2.0, Copyright the JAX Authors (JAX's documentation; full text: jax/LICENSE)
# edits: the page's code cells in order; a cell shown raising an error in try/except Exception; IPython % lines cut; plotting cut
# compare: selu_jit(x) rtol=1e-6, f_jit_correct(10) rtol=1e-6, g_jit_correct(10,n=5) rtol=1e-6
# tolerance: float32 (JAX runs it with its 32-bit defaults, jitad with 64-bit)
# Copyright the JAX Authors (JAX documentation).

# This ensures that code cell tracebacks appearing below will be concise.

import jitad
import jitad.numpy as jnp

global_list = []

def log2(x):
  global_list.append(x)
  ln_x = jnp.log(x)
  ln_2 = jnp.log(2.0)
  return ln_x / ln_2

print(jitad.make_jaxpr(log2)(3.0))

def log2_with_print(x):
  print("printed x:", x)
  ln_x = jnp.log(x)
  ln_2 = jnp.log(2.0)
  return ln_x / ln_2

print(jitad.make_jaxpr(log2_with_print)(3.))

def log2_if_rank_2(x):
  if x.ndim == 2:
    ln_x = jnp.log(x)
    ln_2 = jnp.log(2.0)
    return ln_x / ln_2
  else:
    return x

print(jitad.make_jaxpr(log2_if_rank_2)(jitad.numpy.array([1, 2, 3])))

import jitad
import jitad.numpy as jnp

def selu(x, alpha=1.67, lambda_=1.05):
  return lambda_ * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)

x = jnp.arange(1000000)

selu_jit = jitad.jit(selu)

# Pre-compile the function before timing...
selu_jit(x).block_until_ready()


try:
    # Condition on value of x.

    def f(x):
      if x > 0:
        return x
      else:
        return 2 * x

    jitad.jit(f)(10)  # Raises an error
except Exception as e:
    print(type(e).__name__, e)

try:
    # While loop conditioned on x and n.

    def g(x, n):
      i = 0
      while i < n:
        i += 1
      return x + i

    jitad.jit(g)(10, 20)  # Raises an error
except Exception as e:
    print(type(e).__name__, e)

# While loop conditioned on x and n with a jitted body.

@jitad.jit
def loop_body(prev_i):
  return prev_i + 1

def g_inner_jitted(x, n):
  i = 0
  while i < n:
    i = loop_body(i)
  return x + i

g_inner_jitted(10, 20)

f_jit_correct = jitad.jit(f, static_argnums=0)
print(f_jit_correct(10))

g_jit_correct = jitad.jit(g, static_argnames=['n'])
print(g_jit_correct(10, 20))

@jitad.jit(static_argnames=['n'])
def g_jit_decorated(x, n):
  i = 0
  while i < n:
    i += 1
  return x + i

print(g_jit_decorated(10, 20))

from functools import partial

def unjitted_loop_body(prev_i):
  return prev_i + 1

def g_inner_jitted_partial(x, n):
  i = 0
  while i < n:
    # Don't do this! each time the partial returns
    # a function with different hash
    i = jitad.jit(partial(unjitted_loop_body))(i)
  return x + i

def g_inner_jitted_lambda(x, n):
  i = 0
  while i < n:
    # Don't do this!, lambda will also return
    # a function with a different hash
    i = jitad.jit(lambda x: unjitted_loop_body(x))(i)
  return x + i

def g_inner_jitted_normal(x, n):
  i = 0
  while i < n:
    # this is OK, since JAX can find the
    # cached, compiled function
    i = jitad.jit(unjitted_loop_body)(i)
  return x + i

print("jit called in a loop with partials:")

print("jit called in a loop with lambdas:")

print("jit called in a loop with caching:")
