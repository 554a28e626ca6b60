"""Programs from JAX's examples and documentation, ported by renaming `jax` to `jitad` in
their module paths and nothing else: each runs here as written (plotting cut, sizes and
step counts made small, `jax.random` data replaced by NumPy data of the same shapes) and
gives the same numbers as the original run through JAX (the same text with the rename
undone, 64-bit floats enabled)."""
import numpy as np
import pytest
from .porting import run

jax = pytest.importorskip("jax", reason="the original programs run through JAX (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
pytest.importorskip("scipy")


def both(source):
    return run(source, "jitad"), run(source, "jax")


MNIST_FROM_SCRATCH = '''
import time

import numpy.random as npr

from jitad import jit, grad
from jitad.scipy.special import logsumexp
import jitad.numpy as jnp


def init_random_params(scale, layer_sizes, rng=npr.RandomState(0)):
  return [(scale * rng.randn(m, n), scale * rng.randn(n))
          for m, n, in zip(layer_sizes[:-1], layer_sizes[1:])]

def predict(params, inputs):
  activations = inputs
  for w, b in params[:-1]:
    outputs = jnp.dot(activations, w) + b
    activations = jnp.tanh(outputs)

  final_w, final_b = params[-1]
  logits = jnp.dot(activations, final_w) + final_b
  return logits - logsumexp(logits, axis=1, keepdims=True)

def loss(params, batch):
  inputs, targets = batch
  preds = predict(params, inputs)
  return -jnp.mean(jnp.sum(preds * targets, axis=1))

def accuracy(params, batch):
  inputs, targets = batch
  target_class = jnp.argmax(targets, axis=1)
  predicted_class = jnp.argmax(predict(params, inputs), axis=1)
  return jnp.mean(predicted_class == target_class)


if __name__ == "__port__":
  layer_sizes = [784, 32, 32, 10]
  param_scale = 0.1
  step_size = 0.001
  num_epochs = 2
  batch_size = 128

  data = npr.RandomState(1)   # MNIST's shapes: 784 pixels in [0, 1], one-hot labels of 10 classes
  train_images, test_images = data.rand(300, 784), data.rand(100, 784)
  train_labels, test_labels = (np.eye(10)[data.randint(0, 10, n)] for n in (300, 100))
  num_train = train_images.shape[0]
  num_complete_batches, leftover = divmod(num_train, batch_size)
  num_batches = num_complete_batches + bool(leftover)

  def data_stream():
    rng = npr.RandomState(0)
    while True:
      perm = rng.permutation(num_train)
      for i in range(num_batches):
        batch_idx = perm[i * batch_size:(i + 1) * batch_size]
        yield train_images[batch_idx], train_labels[batch_idx]
  batches = data_stream()

  @jit
  def update(params, batch):
    grads = grad(loss)(params, batch)
    return [(w - step_size * dw, b - step_size * db)
            for (w, b), (dw, db) in zip(params, grads)]

  params = init_random_params(param_scale, layer_sizes)
  for epoch in range(num_epochs):
    start_time = time.time()
    for _ in range(num_batches):
      params = update(params, next(batches))
    epoch_time = time.time() - start_time

    train_acc = accuracy(params, (train_images, train_labels))
    test_acc = accuracy(params, (test_images, test_labels))
    print(f"Epoch {epoch} in {epoch_time:0.2f} sec")
    print(f"Training set accuracy {train_acc}")
    print(f"Test set accuracy {test_acc}")
'''


def test_mnist_classifier_from_scratch():
    mine, theirs = both("import numpy as np\n" + MNIST_FROM_SCRATCH)
    for (w, b), (w2, b2) in zip(mine["params"], theirs["params"]):
        np.testing.assert_allclose(w, w2, rtol=1e-10, atol=1e-13)
        np.testing.assert_allclose(b, b2, rtol=1e-10, atol=1e-13)
    assert float(mine["train_acc"]) == pytest.approx(float(theirs["train_acc"]), rel=1e-6)   # JAX: a float32 mean


GP_REGRESSION = '''
from functools import partial

import jitad
from jitad import grad
from jitad import jit
from jitad import vmap
import jitad.numpy as jnp
import jitad.scipy as scipy


def main(unused_argv):

  numpts = 7
  eye = jnp.eye(numpts)

  def cov_map(cov_func, xs, xs2=None):
    """Compute a covariance matrix from a covariance function and data points.

    Args:
      cov_func: callable function, maps pairs of data points to scalars.
      xs: array of data points, stacked along the leading dimension.
    Returns:
      A 2d array `a` such that `a[i, j] = cov_func(xs[i], xs[j])`.
    """
    if xs2 is None:
      return vmap(lambda x: vmap(lambda y: cov_func(x, y))(xs))(xs)
    else:
      return vmap(lambda x: vmap(lambda y: cov_func(x, y))(xs))(xs2).T

  def softplus(x):
    return jnp.logaddexp(x, 0.)

  # Note, writing out the vectorized form of the identity
  # ||x-y||^2 = <x-y,x-y> = ||x||^2 + ||y||^2 - 2<x,y>
  # for computing squared distances would be more efficient (but less succinct).
  def exp_quadratic(x1, x2):
    return jnp.exp(-jnp.sum((x1 - x2)**2))

  def gp(params, x, y, xtest=None, compute_marginal_likelihood=False):
    noise = softplus(params['noise'])
    amp = softplus(params['amplitude'])
    ls = softplus(params['lengthscale'])
    ymean = jnp.mean(y)
    y = y - ymean
    x = x / ls
    train_cov = amp*cov_map(exp_quadratic, x) + eye * (noise + 1e-6)
    chol = scipy.linalg.cholesky(train_cov, lower=True)
    kinvy = scipy.linalg.solve_triangular(
        chol.T, scipy.linalg.solve_triangular(chol, y, lower=True))
    if compute_marginal_likelihood:
      log2pi = jnp.log(2. * 3.1415)
      ml = jnp.sum(
          -0.5 * jnp.dot(y.T, kinvy) -
          jnp.sum(jnp.log(jnp.diag(chol))) -
          (numpts / 2.) * log2pi)
      ml -= jnp.sum(-0.5 * jnp.log(2 * 3.1415) - jnp.log(amp) - 0.5 * jnp.log(amp)**2) # lognormal prior
      return -ml

    if xtest is not None:
      xtest = xtest / ls
    cross_cov = amp*cov_map(exp_quadratic, x, xtest)
    mu = jnp.dot(cross_cov.T, kinvy) + ymean
    v = scipy.linalg.solve_triangular(chol, cross_cov, lower=True)
    var = (amp * cov_map(exp_quadratic, xtest) - jnp.dot(v.T, v))
    return mu, var

  marginal_likelihood = partial(gp, compute_marginal_likelihood=True)
  predict = partial(gp, compute_marginal_likelihood=False)
  grad_fun = jit(grad(marginal_likelihood))

  # Covariance hyperparameters to be learned
  params = {"amplitude": jnp.zeros((1, 1)),
            "noise": jnp.zeros((1, 1)) - 5.,
            "lengthscale": jnp.zeros((1, 1))}
  momentums = {k: p * 0. for k, p in params.items()}
  scales = {k: p * 0. + 1. for k, p in params.items()}

  lr = 0.01  # Learning rate
  def train_step(params, momentums, scales, x, y):
    grads = grad_fun(params, x, y)
    for k in params:
      momentums[k] = 0.9 * momentums[k] + 0.1 * grads[k][0]
      scales[k] = 0.9 * scales[k] + 0.1 * grads[k][0]**2
      params[k] -= lr * momentums[k]/jnp.sqrt(scales[k] + 1e-5)
    return params, momentums, scales

  # Create a really simple toy 1D function (the original draws with jax.random)
  rs = np.random.RandomState(0)
  y_fun = lambda x: jnp.sin(x) + 0.1 * rs.randn(x.shape[0], 1)
  x = (rs.rand(numpts, 1) * 4.) + 1
  y = y_fun(x)
  xtest = jnp.linspace(0, 6., 200)[:, None]

  for i in range(100):
    params, momentums, scales = train_step(params, momentums, scales, x, y)
    if i % 50 == 0:
      ml = marginal_likelihood(params, x, y)
      print("Step: %d, neg marginal likelihood: %f" % (i, ml))

  print(params)
  mu, var = predict(params, x, y, xtest)
  std = jnp.sqrt(jnp.diag(var))
  return params, mu, std

if __name__ == "__port__":
  result = main(None)
'''


def test_gaussian_process_regression():
    mine, theirs = both("import numpy as np\n" + GP_REGRESSION)
    (params, mu, std), (params2, mu2, std2) = mine["result"], theirs["result"]
    for k in params:
        np.testing.assert_allclose(params[k], params2[k], rtol=1e-10)
    np.testing.assert_allclose(mu, mu2, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(std, std2, rtol=1e-8, atol=1e-10)


VMAPPED_LOG_PROBS = '''
import jitad
import jitad.numpy as jnp
import jitad.scipy as jsp
import numpy as np
import scipy as sp

np.random.seed(10009)

num_features = 10
num_points = 100

true_beta = np.random.randn(num_features).astype(jnp.float32)
all_x = np.random.randn(num_points, num_features).astype(jnp.float32)
y = (np.random.rand(num_points) < sp.special.expit(all_x.dot(true_beta))).astype(jnp.int32)

def log_joint(beta):
    result = 0.
    # Note that no `axis` parameter is provided to `jnp.sum`.
    result = result + jnp.sum(jsp.stats.norm.logpdf(beta, loc=0., scale=1.))
    result = result + jnp.sum(-jnp.log(1 + jnp.exp(-(2*y-1) * jnp.dot(all_x, beta))))
    return result

first = log_joint(np.random.randn(num_features))

def batched_log_joint(beta):
    result = 0.
    # Here (and below) `sum` needs an `axis` parameter. At best, forgetting to set axis
    # or setting it incorrectly yields an error; at worst, it silently changes the
    # semantics of the model.
    result = result + jnp.sum(jsp.stats.norm.logpdf(beta, loc=0., scale=1.),
                           axis=-1)
    # Note the multiple transposes. Getting this right is not rocket science,
    # but it's also not totally mindless. (I didn't get it right on the first
    # try.)
    result = result + jnp.sum(-jnp.log(1 + jnp.exp(-(2*y-1) * jnp.dot(all_x, beta.T).T)),
                           axis=-1)
    return result

batch_size = 10
batched_test_beta = np.random.randn(batch_size, num_features)

manual = batched_log_joint(batched_test_beta)

vmap_batched_log_joint = jitad.vmap(log_joint)
auto = vmap_batched_log_joint(batched_test_beta)

@jitad.jit
def log_joint(beta):
    result = 0.
    # Note that no `axis` parameter is provided to `jnp.sum`.
    result = result + jnp.sum(jsp.stats.norm.logpdf(beta, loc=0., scale=10.))
    result = result + jnp.sum(-jnp.log(1 + jnp.exp(-(2*y-1) * jnp.dot(all_x, beta))))
    return result

batched_log_joint = jitad.jit(jitad.vmap(log_joint))

def elbo(beta_loc, beta_log_scale, epsilon):
    beta_sample = beta_loc + jnp.exp(beta_log_scale) * epsilon
    return jnp.mean(batched_log_joint(beta_sample), 0) + jnp.sum(beta_log_scale - 0.5 * np.log(2*np.pi))

elbo = jitad.jit(elbo)
elbo_val_and_grad = jitad.jit(jitad.value_and_grad(elbo, argnums=(0, 1)))

def normal_sample(rs, shape):   # the original splits a jax.random key
    """Convenience function for quasi-stateful RNG."""
    return rs, rs.randn(*shape)

key = np.random.RandomState(10003)
beta_loc = jnp.zeros(num_features, jnp.float32)
beta_log_scale = jnp.zeros(num_features, jnp.float32)
step_size = 0.01
batch_size = 128
epsilon_shape = (batch_size, num_features)
for i in range(30):
    key, epsilon = normal_sample(key, epsilon_shape)
    elbo_val, (beta_loc_grad, beta_log_scale_grad) = elbo_val_and_grad(
        beta_loc, beta_log_scale, epsilon)
    beta_loc += step_size * beta_loc_grad
    beta_log_scale += step_size * beta_log_scale_grad
    if i % 10 == 0:
        print('{}\\t{}'.format(i, elbo_val))
'''


def test_vmapped_log_probs():
    mine, theirs = both(VMAPPED_LOG_PROBS)
    assert float(mine["first"]) == pytest.approx(float(theirs["first"]), rel=1e-6)   # float32 data
    np.testing.assert_allclose(mine["manual"], theirs["manual"], rtol=1e-6)
    np.testing.assert_allclose(mine["auto"], mine["manual"], rtol=1e-12)
    np.testing.assert_allclose(mine["beta_loc"], theirs["beta_loc"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mine["beta_log_scale"], theirs["beta_log_scale"], rtol=1e-5, atol=1e-6)
    assert mine["beta_loc"].dtype == theirs["beta_loc"].dtype


AUTODIFF_COOKBOOK = '''
import jitad.numpy as jnp
from jitad import grad, jit, vmap

rs = np.random.RandomState(0)   # the original draws with jax.random keys

grad_tanh = grad(jnp.tanh)
print(grad_tanh(2.0))

print(grad(grad(jnp.tanh))(2.0))
print(grad(grad(grad(jnp.tanh)))(2.0))
third = grad(grad(grad(jnp.tanh)))(2.0)

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
targets = jnp.array([True, True, False, True])

# Training loss is the negative log-likelihood of the training examples.
def loss(W, b):
    preds = predict(W, b, inputs)
    label_probs = preds * targets + (1 - preds) * (1 - targets)
    return -jnp.sum(jnp.log(label_probs))

# Initialize random model coefficients
W = rs.randn(3)
b = rs.randn()

# Differentiate `loss` with respect to the first positional argument:
W_grad = grad(loss, argnums=0)(W, b)
print('W_grad', W_grad)

# Since argnums=0 is the default, this does the same thing:
W_grad = grad(loss)(W, b)
print('W_grad', W_grad)

# But we can choose different values too, and drop the keyword:
b_grad = grad(loss, 1)(W, b)
print('b_grad', b_grad)

# Including tuple values
W_grad, b_grad = grad(loss, (0, 1))(W, b)
print('W_grad', W_grad)
print('b_grad', b_grad)

def loss2(params_dict):
    preds = predict(params_dict['W'], params_dict['b'], inputs)
    label_probs = preds * targets + (1 - preds) * (1 - targets)
    return -jnp.sum(jnp.log(label_probs))

print(grad(loss2)({'W': W, 'b': b}))
dict_grad = grad(loss2)({'W': W, 'b': b})

from jitad import value_and_grad
loss_value, Wb_grad = value_and_grad(loss, (0, 1))(W, b)
print('loss value', loss_value)
print('loss value', loss(W, b))

# Set a step size for finite differences calculations
eps = 1e-4

# Check b_grad with scalar finite differences
b_grad_numerical = (loss(W, b + eps / 2.) - loss(W, b - eps / 2.)) / eps
print('b_grad_numerical', b_grad_numerical)
print('b_grad_autodiff', grad(loss, 1)(W, b))

# Check W_grad with finite differences in a random direction
vec = rs.randn(*W.shape)
unitvec = vec / jnp.sqrt(jnp.vdot(vec, vec))
W_grad_numerical = (loss(W + eps / 2. * unitvec, b) - loss(W - eps / 2. * unitvec, b)) / eps
print('W_dirderiv_numerical', W_grad_numerical)
print('W_dirderiv_autodiff', jnp.vdot(grad(loss)(W, b), unitvec))

from jitad.test_util import check_grads
# check_grads(loss, (W, b), order=2) is cut: JAX's own takes most of this test's time

from jitad import jacfwd, jacrev

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

J_dict = jacrev(predict_dict)({'W': W, 'b': b}, inputs)
for k, v in J_dict.items():
    print("Jacobian from {} to logits is".format(k))
    print(v)

def hessian(f):
    return jacfwd(jacrev(f))

H = hessian(f)(W)
print("hessian, with shape", H.shape)
print(H)

from jitad import jvp

# Isolate the function from the weight matrix to the predictions
f = lambda W: predict(W, b, inputs)

v = rs.randn(*W.shape)

# Push forward the vector `v` along `f` evaluated at `W`
y, u = jvp(f, (W,), (v,))

from jitad import vjp

# Isolate the function from the weight matrix to the predictions
f = lambda W: predict(W, b, inputs)

y, vjp_fun = vjp(f, W)

u = rs.randn(*y.shape)

# Pull back the covector `u` along `f` evaluated at `W`
v = vjp_fun(u)

def vgrad(f, x):
  y, vjp_fn = vjp(f, x)
  return vjp_fn(jnp.ones(y.shape))[0]

print(vgrad(lambda x: 3*x**2, jnp.ones((2, 2))))

'''


def test_autodiff_cookbook():
    mine, theirs = both("import numpy as np\n" + AUTODIFF_COOKBOOK)
    for name in ["third", "W_grad", "b_grad", "loss_value", "b_grad_numerical", "W_grad_numerical", "J", "H",
                 "y", "u"]:
        np.testing.assert_allclose(mine[name], theirs[name], rtol=1e-10, atol=1e-13, err_msg=name)
    for k in ("W", "b"):
        np.testing.assert_allclose(mine["dict_grad"][k], theirs["dict_grad"][k], rtol=1e-12)
        np.testing.assert_allclose(mine["J_dict"][k], theirs["J_dict"][k], rtol=1e-12)
    np.testing.assert_allclose(mine["v"][0], theirs["v"][0], rtol=1e-12)
    np.testing.assert_allclose(mine["vgrad"](lambda x: 3 * x ** 2, np.ones((2, 2))), np.full((2, 2), 6.0))


CONTROL_FLOW = '''
import jitad.numpy as jnp
from jitad import lax

# lax.fori_loop
array = jnp.arange(10)
print(lax.fori_loop(0, 10, lambda i,x: x+array[i], 0)) # expected result 45
a = lax.fori_loop(0, 10, lambda i,x: x+array[i], 0)

# lax.scan
def func11(arr, extra):
    ones = jnp.ones(arr.shape)
    def body(carry, aelems):
        ae1, ae2 = aelems
        return (carry + ae1 * ae2 + extra, carry)
    return lax.scan(body, 0., (arr, ones))
b = func11(jnp.arange(16), 5.)

# lax.cond
array_operand = jnp.array([0.])
c = lax.cond(True, lambda x: x+1, lambda x: x-1, array_operand)

operand = jnp.array([0.])
lax.cond(True, lambda x: x+1, lambda x: x-1, operand)
# --> array([1.], dtype=float32)
d = lax.cond(False, lambda x: x+1, lambda x: x-1, operand)
# --> array([-1.], dtype=float32)

init_val = 0
cond_fun = lambda x: x < 10
body_fun = lambda x: x+1
e = lax.while_loop(cond_fun, body_fun, init_val)
# --> array(10, dtype=int32)

init_val = 0
start = 0
stop = 10
body_fun = lambda i,x: x+i
f = lax.fori_loop(start, stop, body_fun, init_val)
# --> array(45, dtype=int32)

from jitad import jit, grad

@jit
def g(x, n):   # the same loops staged, with traced bounds and predicates
    s = lax.fori_loop(0, n, lambda i, s: s + jnp.sin(x * i), 0.)
    t = lax.while_loop(lambda c: c[1] < n, lambda c: (c[0] * x, c[1] + 1), (1., 0))[0]
    return lax.cond(s > 0, lambda s, t: s * t, lambda s, t: s - t, s, t) + func11(x * jnp.arange(4.), x)[0]
h = [g(0.7, n) for n in range(5)]
dg = grad(lambda x: lax.fori_loop(0, 3, lambda i, s: s + jnp.sin(x * i), 0.))(0.7)
'''


def test_control_flow():
    mine, theirs = both(CONTROL_FLOW)
    for name in "acdef":
        np.testing.assert_allclose(mine[name], theirs[name], rtol=1e-14, err_msg=name)
    np.testing.assert_allclose(mine["b"][0], theirs["b"][0], rtol=1e-14)
    np.testing.assert_allclose(mine["b"][1], theirs["b"][1], rtol=1e-14)
    np.testing.assert_allclose(mine["h"], theirs["h"], rtol=1e-13)
    assert mine["dg"] == pytest.approx(float(theirs["dg"]), rel=1e-13)
