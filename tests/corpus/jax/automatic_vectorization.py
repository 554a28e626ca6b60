# source: https://github.com/jax-ml/jax/blob/cec06d116c05f0d52adfceee3d3b730fdbcb0ce5/docs/automatic-vectorization.md
# ruff: noqa (kept as its authors wrote it)
# licence: Apache-2.0, Copyright the JAX Authors (JAX's documentation; full text: jax/LICENSE)
# edits: the page's code cells in order; a cell shown raising an error in try/except Exception; IPython % lines cut; plotting cut
# compare: xs rtol=1e-6, auto_batch_convolve(xs,ws) rtol=1e-6, auto_batch_convolve_v2(xst,wst) rtol=1e-6, batch_convolve_v3(xs,w) rtol=1e-6, jitted_batch_convolve(xs,ws) rtol=1e-6
# tolerance: float32 (JAX runs it with its 32-bit defaults, jitad with 64-bit)
# Copyright the JAX Authors (JAX documentation).

import jitad
import jitad.numpy as jnp

x = jnp.arange(5)
w = jnp.array([2., 3., 4.])

def convolve(x, w):
  output = []
  for i in range(1, len(x)-1):
    output.append(jnp.dot(x[i-1:i+2], w))
  return jnp.array(output)

convolve(x, w)

xs = jnp.stack([x, x])
ws = jnp.stack([w, w])

def manually_batched_convolve(xs, ws):
  output = []
  for i in range(xs.shape[0]):
    output.append(convolve(xs[i], ws[i]))
  return jnp.stack(output)

manually_batched_convolve(xs, ws)

def manually_vectorized_convolve(xs, ws):
  output = []
  for i in range(1, xs.shape[-1] -1):
    output.append(jnp.sum(xs[:, i-1:i+2] * ws, axis=1))
  return jnp.stack(output, axis=1)

manually_vectorized_convolve(xs, ws)

auto_batch_convolve = jitad.vmap(convolve)

auto_batch_convolve(xs, ws)

auto_batch_convolve_v2 = jitad.vmap(convolve, in_axes=1, out_axes=1)

xst = jnp.transpose(xs)
wst = jnp.transpose(ws)

auto_batch_convolve_v2(xst, wst)

batch_convolve_v3 = jitad.vmap(convolve, in_axes=[0, None])

batch_convolve_v3(xs, w)

jitted_batch_convolve = jitad.jit(auto_batch_convolve)

jitted_batch_convolve(xs, ws)

def pairwise(f, xs):
  return jitad.vmap(lambda x: jitad.vmap(lambda y: f(x, y))(xs))(xs)
