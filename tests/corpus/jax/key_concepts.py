# source: https://github.com/jax-ml/jax/blob/cec06d116c05f0d52adfceee3d3b730fdbcb0ce5/docs/key-concepts.md
# ruff: noqa (kept as its authors wrote it)
# licence: Apache-2.0, Copyright the JAX Authors (JAX's documentation; full text: jax/LICENSE)
# edits: the page's code cells in order; a cell shown raising an error in try/except Exception; IPython % lines cut; plotting cut
# compare: x rtol=1e-6, result rtol=1e-5 atol=1e-6, y rtol=1e-6
# tolerance: float32 (JAX runs it with its 32-bit defaults, jitad with 64-bit)
# Copyright the JAX Authors (JAX documentation).

import jitad
import jitad.numpy as jnp

def selu(x, alpha=1.67, lambda_=1.05):
  return lambda_ * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)

selu_jit = jitad.jit(selu)
print(selu_jit(1.0))

@jitad.jit
def selu(x, alpha=1.67, lambda_=1.05):
  return lambda_ * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)

@jitad.jit
def f(x):
  print(x)
  return x + 1

x = jnp.arange(5)
result = f(x)

def selu(x, alpha=1.67, lambda_=1.05):
  return lambda_ * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)

x = jnp.arange(5.0)
jitad.make_jaxpr(selu)(x)

# (nested) list of parameters
params = [1, 2, (jnp.arange(3), jnp.ones(2))]

print(jitad.tree.structure(params))
print(jitad.tree.leaves(params))

# Dictionary of parameters
params = {'n': 5, 'W': jnp.ones((2, 2)), 'b': jnp.zeros(2)}

print(jitad.tree.structure(params))
print(jitad.tree.leaves(params))

# Named tuple of parameters
from typing import NamedTuple

class Params(NamedTuple):
  a: int
  b: float

params = Params(1, 5.0)
print(jitad.tree.structure(params))
print(jitad.tree.leaves(params))

import jitad.numpy as jnp
jnp.add(1, 1.0)  # jitad.numpy API implicitly promotes mixed types.

try:
    from jitad import lax
    lax.add(1, 1.0)  # jitad.lax API requires explicit type promotion.
except Exception as e:
    print(type(e).__name__, e)

lax.add(jnp.float32(1), 1.0)

x = jnp.array([1, 2, 1])
y = jnp.ones(10)
jnp.convolve(x, y)

from jitad import lax
result = lax.conv_general_dilated(
    x.reshape(1, 1, 3).astype(float),  # note: explicit promotion
    y.reshape(1, 1, 10),
    window_strides=(1,),
    padding=[(len(y) - 1, len(y) - 1)])  # equivalent of padding='full' in NumPy
result[0, 0]
