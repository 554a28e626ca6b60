# source: https://github.com/jax-ml/jax/blob/cec06d116c05f0d52adfceee3d3b730fdbcb0ce5/docs/higher-order.md
# ruff: noqa (kept as its authors wrote it)
# licence: Apache-2.0, Copyright the JAX Authors (JAX's documentation; full text: jax/LICENSE)
# edits: the page's code cells in order; a cell shown raising an error in try/except Exception; IPython % lines cut; plotting cut
# compare: delta_theta rtol=1e-10, s_grad rtol=1e-10, J rtol=1e-10, J_dict rtol=1e-10, H rtol=1e-9 atol=1e-12, batched_theta rtol=1e-10
# x64: on (it draws JAX's random numbers, 64-bit: its 32-bit types need float32 defaults jitad lacks yet)
# Copyright the JAX Authors (JAX documentation).

import jitad

def hessian(f):
  return jitad.jacfwd(jitad.grad(f))

import jitad.numpy as jnp

def f(x):
  return jnp.dot(x, x)

hessian(f)(jnp.array([1., 2., 3.]))

# Value function and initial parameters
value_fn = lambda theta, state: jnp.dot(theta, state)
theta = jnp.array([0.1, -0.1, 0.])

# An example transition.
s_tm1 = jnp.array([1., 2., -1.])
r_t = jnp.array(1.)
s_t = jnp.array([2., 1., 0.])

def td_loss(theta, s_tm1, r_t, s_t):
  v_tm1 = value_fn(theta, s_tm1)
  target = r_t + value_fn(theta, s_t)
  return -0.5 * ((target - v_tm1) ** 2)

td_update = jitad.grad(td_loss)
delta_theta = td_update(theta, s_tm1, r_t, s_t)

delta_theta

def td_loss(theta, s_tm1, r_t, s_t):
  v_tm1 = value_fn(theta, s_tm1)
  target = r_t + value_fn(theta, s_t)
  return -0.5 * ((jitad.lax.stop_gradient(target) - v_tm1) ** 2)

td_update = jitad.grad(td_loss)
delta_theta = td_update(theta, s_tm1, r_t, s_t)

delta_theta

s_grad = jitad.grad(value_fn)(theta, s_tm1)
delta_theta_original_calculation = (r_t + value_fn(theta, s_t) - value_fn(theta, s_tm1)) * s_grad

delta_theta_original_calculation # [1.2, 2.4, -1.2], same as `delta_theta`

def f(x):
  return jnp.round(x)  # non-differentiable

def straight_through_f(x):
  # Create an exactly-zero expression with Sterbenz lemma that has
  # an exactly-one gradient.
  zero = x - jitad.lax.stop_gradient(x)
  return zero + jitad.lax.stop_gradient(f(x))

print("f(x): ", f(3.2))
print("straight_through_f(x):", straight_through_f(3.2))

print("grad(f)(x):", jitad.grad(f)(3.2))
print("grad(straight_through_f)(x):", jitad.grad(straight_through_f)(3.2))

perex_grads = jitad.jit(jitad.vmap(jitad.grad(td_loss), in_axes=(None, 0, 0, 0)))

# Test it:
batched_s_tm1 = jnp.stack([s_tm1, s_tm1])
batched_r_t = jnp.stack([r_t, r_t])
batched_s_t = jnp.stack([s_t, s_t])

perex_grads(theta, batched_s_tm1, batched_r_t, batched_s_t)

dtdloss_dtheta = jitad.grad(td_loss)

dtdloss_dtheta(theta, s_tm1, r_t, s_t)

almost_perex_grads = jitad.vmap(dtdloss_dtheta)

batched_theta = jnp.stack([theta, theta])
almost_perex_grads(batched_theta, batched_s_tm1, batched_r_t, batched_s_t)

inefficient_perex_grads = jitad.vmap(dtdloss_dtheta, in_axes=(None, 0, 0, 0))

inefficient_perex_grads(theta, batched_s_tm1, batched_r_t, batched_s_t)

perex_grads = jitad.jit(inefficient_perex_grads)

perex_grads(theta, batched_s_tm1, batched_r_t, batched_s_t)



def hvp(f, x, v):
    return jitad.grad(lambda x: jnp.vdot(jitad.grad(f)(x), v))(x)

from jitad import jacfwd, jacrev

# Define a sigmoid function.
def sigmoid(x):
    return 0.5 * (jnp.tanh(x / 2) + 1)

# Outputs probability of a label being true.
def predict(W, b, inputs):
    return sigmoid(jnp.dot(inputs, W) + b)

# Build a toy dataset.
inputs = jnp.array([[0.52, 1.12,  0.77],
                   [0.88, -1.08, 0.15],
                   [0.52, 0.06, -1.30],
                   [0.74, -2.49, 1.39]])

# Initialize random model coefficients
key = jitad.random.key(0)
key, W_key, b_key = jitad.random.split(key, 3)
W = jitad.random.normal(W_key, (3,))
b = jitad.random.normal(b_key, ())

# Isolate the function from the weight matrix to the predictions
f = lambda W: predict(W, b, inputs)

J = jacfwd(f)(W)
print("jacfwd result, with shape", J.shape)
print(J)

J = jacrev(f)(W)
print("jacrev result, with shape", J.shape)
print(J)

def predict_dict(params, inputs):
    return predict(params['W'], params['b'], inputs)

J_dict = jitad.jacrev(predict_dict)({'W': W, 'b': b}, inputs)
for k, v in J_dict.items():
    print("Jacobian from {} to logits is".format(k))
    print(v)

def hessian(f):
    return jitad.jacfwd(jitad.jacrev(f))

H = hessian(f)(W)
print("hessian, with shape", H.shape)
print(H)
