# source: https://github.com/jax-ml/jax/blob/cec06d116c05f0d52adfceee3d3b730fdbcb0ce5/docs/control-flow.md
# ruff: noqa (kept as its authors wrote it)
# licence: Apache-2.0, Copyright the JAX Authors (JAX's documentation; full text: jax/LICENSE)
# edits: the page's code cells in order; a cell shown raising an error in try/except Exception; IPython % lines cut; plotting cut
# compare: operand rtol=1e-6, x rtol=1e-6
# tolerance: float32 (JAX runs it with its 32-bit defaults, jitad with 64-bit)
# Copyright the JAX Authors (JAX documentation).

from jitad import grad, jit
import jitad.numpy as jnp

@jit
def f(x):
  for i in range(3):
    x = 2 * x
  return x

print(f(3))

@jit
def g(x):
  y = 0.
  for i in range(x.shape[0]):
    y = y + x[i]
  return y

print(g(jnp.array([1., 2., 3.])))

try:
    @jit
    def f(x):
      if x < 3:
        return 3. * x ** 2
      else:
        return -4 * x

    # This will fail!
    f(2)
except Exception as e:
    print(type(e).__name__, e)

try:
    @jit
    def g(x):
      return (x > 0) and (x < 3)

    # This will fail!
    g(2)
except Exception as e:
    print(type(e).__name__, e)

def f(x):
  if x < 3:
    return 3. * x ** 2
  else:
    return -4 * x

f = jit(f, static_argnames='x')

print(f(2.))

def f(x, n):
  y = 0.
  for i in range(n):
    y = y + x[i]
  return y

f = jit(f, static_argnames='n')

f(jnp.array([2., 3., 4.]), 2)

def example_fun(length, val):
  return jnp.ones((length,)) * val
# un-jit'd works fine
print(example_fun(5, 4))

try:
    bad_example_jit = jit(example_fun)
    # this will fail:
    bad_example_jit(10, 4)
except Exception as e:
    print(type(e).__name__, e)

# static_argnames tells JAX to recompile on changes at these argument positions:
good_example_jit = jit(example_fun, static_argnames='length')
# first compile
print(good_example_jit(10, 4))
# recompiles
print(good_example_jit(5, 4))

@jit
def f(x):
  print(x)
  y = 2 * x
  print(y)
  return y
f(2)

from jitad import lax

operand = jnp.array([0.])
lax.cond(True, lambda x: x+1, lambda x: x-1, operand)
# --> array([1.], dtype=float32)
lax.cond(False, lambda x: x+1, lambda x: x-1, operand)
# --> array([-1.], dtype=float32)

init_val = 0
cond_fun = lambda x: x < 10
body_fun = lambda x: x+1
lax.while_loop(cond_fun, body_fun, init_val)
# --> array(10, dtype=int32)

init_val = 0
start = 0
stop = 10
body_fun = lambda i,x: x+i
lax.fori_loop(start, stop, body_fun, init_val)
# --> array(45, dtype=int32)

def python_check_positive_even(x):
  is_even = x % 2 == 0
  # `and` short-circults, so when `is_even` is `False`, `x > 0` is not evaluated.
  return is_even and (x > 0)

@jit
def jax_check_positive_even(x):
  is_even = x % 2 == 0
  # `logical_and` does not short circuit, so `x > 0` is always evaluated.
  return jnp.logical_and(is_even, x > 0)

print(python_check_positive_even(24))
print(jax_check_positive_even(24))

x = jnp.array([-1, 2, 5])
print(jax_check_positive_even(x))

try:
    print(python_check_positive_even(x))
except Exception as e:
    print(type(e).__name__, e)

def f(x):
  if x < 3:
    return 3. * x ** 2
  else:
    return -4 * x

print(grad(f)(2.))  # ok!
print(grad(f)(4.))  # ok!
