"""Parts of JAX's autodiff cookbook, ported by renaming `jax` to `jitad` and compared with
the same text run through JAX (64-bit floats enabled); the whole page, its section on
complex numbers included, runs in the corpus (`tests/corpus/jax/autodiff_cookbook.py`).
JAX's other programs that were ported here are in the corpus."""
import numpy as np
import pytest
from .porting import run

jax = pytest.importorskip("jax", reason="the original programs run through JAX (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
pytest.importorskip("scipy")


def both(source):
    return run(source, "jitad"), run(source, "jax")


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
