"""Programs from HIPS autograd's examples, ported by renaming `autograd` to `jitad` in their
imports and nothing else: each runs here as written (plotting cut, sizes and iteration
counts made small, data synthetic where the original reads files) and gives the same
numbers as the original run through autograd itself (the same text with the rename undone)."""
import numpy as np
import pytest
from .porting import run

pytest.importorskip("autograd", reason="the original programs run through autograd (the test extra installs it)")
pytest.importorskip("scipy")


def both(source):
    return run(source, "jitad"), run(source, "autograd")


LOGISTIC_REGRESSION = '''
import jitad.numpy as np
from jitad import grad
from jitad.test_util import check_grads


def sigmoid(x):
    return 0.5 * (np.tanh(x) + 1)


def logistic_predictions(weights, inputs):
    # Outputs probability of a label being true according to logistic model.
    return sigmoid(np.dot(inputs, weights))


def training_loss(weights):
    # Training loss is the negative log-likelihood of the training labels.
    preds = logistic_predictions(weights, inputs)
    label_probabilities = preds * targets + (1 - preds) * (1 - targets)
    return -np.sum(np.log(label_probabilities))


# Build a toy dataset.
inputs = np.array([[0.52, 1.12, 0.77], [0.88, -1.08, 0.15], [0.52, 0.06, -1.30], [0.74, -2.49, 1.39]])
targets = np.array([True, True, False, True])

# Build a function that returns gradients of training loss using autograd.
training_gradient_fun = grad(training_loss)

# Check the gradients numerically, just to be safe.
weights = np.array([0.0, 0.0, 0.0])
check_grads(training_loss, modes=["rev"])(weights)

# Optimize weights using gradient descent.
print("Initial loss:", training_loss(weights))
for i in range(100):
    weights -= training_gradient_fun(weights) * 0.01

print("Trained loss:", training_loss(weights))
'''


def test_logistic_regression():
    mine, theirs = both(LOGISTIC_REGRESSION)
    np.testing.assert_allclose(mine["weights"], theirs["weights"], rtol=1e-12)
    assert mine["training_loss"](mine["weights"]) < mine["training_loss"](np.zeros(3))


ROSENBROCK = '''
from scipy.optimize import minimize

import jitad.numpy as np
from jitad import value_and_grad


def rosenbrock(x):
    return 100 * (x[1] - x[0] ** 2) ** 2 + (1 - x[0]) ** 2


# Build a function that also returns gradients using autograd.
rosenbrock_with_grad = value_and_grad(rosenbrock)

# Optimize using conjugate gradients.
result = minimize(rosenbrock_with_grad, x0=np.array([0.0, 0.0]), jac=True, method="CG")
print(f"Found minimum at {result.x}")
'''


def test_rosenbrock():
    mine, theirs = both(ROSENBROCK)
    np.testing.assert_allclose(mine["result"].x, theirs["result"].x, rtol=1e-10)
    np.testing.assert_allclose(mine["result"].x, [1.0, 1.0], rtol=1e-4)


SINUSOID = '''
import jitad.numpy as np
from jitad import grad


def fun(x):
    return np.sin(x)


d_fun = grad(fun)  # First derivative
dd_fun = grad(d_fun)  # Second derivative

x = np.linspace(-10, 10, 100)
curves = (list(map(fun, x)), list(map(d_fun, x)), list(map(dd_fun, x)))
'''


def test_sinusoid():
    mine, theirs = both(SINUSOID)
    np.testing.assert_allclose(np.array(mine["curves"]), np.array(theirs["curves"]), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(mine["curves"][2], -np.sin(mine["x"]), rtol=1e-13, atol=1e-15)


GAUSSIAN_PROCESS = '''
from scipy.optimize import minimize

import jitad.numpy as np
import jitad.numpy.random as npr
import jitad.scipy.stats.multivariate_normal as mvn
from jitad import value_and_grad
from jitad.numpy.linalg import solve


def make_gp_funs(cov_func, num_cov_params):
    """Functions that perform Gaussian process regression.
    cov_func has signature (cov_params, x, x')"""

    def unpack_kernel_params(params):
        mean = params[0]
        cov_params = params[2:]
        noise_scale = np.exp(params[1]) + 0.0001
        return mean, cov_params, noise_scale

    def predict(params, x, y, xstar):
        """Returns the predictive mean and covariance at locations xstar,
        of the latent function value f (without observation noise)."""
        mean, cov_params, noise_scale = unpack_kernel_params(params)
        cov_f_f = cov_func(cov_params, xstar, xstar)
        cov_y_f = cov_func(cov_params, x, xstar)
        cov_y_y = cov_func(cov_params, x, x) + noise_scale * np.eye(len(y))
        pred_mean = mean + np.dot(solve(cov_y_y, cov_y_f).T, y - mean)
        pred_cov = cov_f_f - np.dot(solve(cov_y_y, cov_y_f).T, cov_y_f)
        return pred_mean, pred_cov

    def log_marginal_likelihood(params, x, y):
        mean, cov_params, noise_scale = unpack_kernel_params(params)
        cov_y_y = cov_func(cov_params, x, x) + noise_scale * np.eye(len(y))
        prior_mean = mean * np.ones(len(y))
        return mvn.logpdf(y, prior_mean, cov_y_y)

    return num_cov_params + 2, predict, log_marginal_likelihood


# Define an example covariance function.
def rbf_covariance(kernel_params, x, xp):
    output_scale = np.exp(kernel_params[0])
    lengthscales = np.exp(kernel_params[1:])
    diffs = np.expand_dims(x / lengthscales, 1) - np.expand_dims(xp / lengthscales, 0)
    return output_scale * np.exp(-0.5 * np.sum(diffs**2, axis=2))


def build_toy_dataset(D=1, n_data=20, noise_std=0.1):
    rs = npr.RandomState(0)
    inputs = np.concatenate([np.linspace(0, 3, num=n_data // 2), np.linspace(6, 8, num=n_data // 2)])
    targets = (np.cos(inputs) + rs.randn(n_data) * noise_std) / 2.0
    inputs = (inputs - 4.0) / 2.0
    inputs = inputs.reshape((len(inputs), D))
    return inputs, targets


if __name__ == "__port__":
    D = 1

    # Build model and objective function.
    num_params, predict, log_marginal_likelihood = make_gp_funs(rbf_covariance, num_cov_params=D + 1)

    X, y = build_toy_dataset(D=D)
    objective = lambda params: -log_marginal_likelihood(params, X, y)

    def callback(params):
        print(f"Log likelihood {-objective(params)}")
        plot_xs = np.reshape(np.linspace(-7, 7, 300), (300, 1))
        pred_mean, pred_cov = predict(params, X, y, plot_xs)
        marg_std = np.sqrt(np.diag(pred_cov))

    # Initialize covariance parameters
    rs = npr.RandomState(0)
    init_params = 0.1 * rs.randn(num_params)

    print("Optimizing covariance parameters...")
    cov_params = minimize(value_and_grad(objective), init_params, jac=True, method="CG", callback=callback,
                          options={"maxiter": 8})
    pred = predict(cov_params.x, X, y, np.reshape(np.linspace(-7, 7, 30), (30, 1)))
'''


def test_gaussian_process():
    mine, theirs = both(GAUSSIAN_PROCESS)
    np.testing.assert_allclose(mine["cov_params"].x, theirs["cov_params"].x, rtol=1e-9)
    assert mine["cov_params"].fun == pytest.approx(theirs["cov_params"].fun, rel=1e-11)
    for a, b in zip(mine["pred"], theirs["pred"]):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-11)


ICA = '''
from scipy.optimize import minimize

import jitad.numpy as np
import jitad.numpy.random as npr
from jitad import value_and_grad
from jitad.scipy.stats import t


def make_ica_funs(observed_dimension, latent_dimension):
    """These functions implement independent component analysis.

    The model is:
    latents are drawn i.i.d. for each data point from a product of student-ts.
    weights are the same across all datapoints.
    each data = latents * weghts + noise."""

    def sample(weights, n_samples, noise_std, rs):
        latents = rs.randn(latent_dimension, n_samples)
        latents = np.array(sorted(latents.T, key=lambda a_entry: a_entry[0])).T
        noise = rs.randn(n_samples, observed_dimension) * noise_std
        observed = predict(weights, latents) + noise
        return latents, observed

    def predict(weights, latents):
        return np.dot(weights, latents).T

    def logprob(weights, latents, noise_std, observed):
        preds = predict(weights, latents)
        log_lik = np.sum(t.logpdf(preds, 2.4, observed, noise_std))
        return log_lik

    num_weights = observed_dimension * latent_dimension

    def unpack_weights(weights):
        return np.reshape(weights, (observed_dimension, latent_dimension))

    return num_weights, sample, logprob, unpack_weights


if __name__ == "__port__":
    observed_dimension = 10
    latent_dimension = 2
    true_noise_var = 1.0
    n_samples = 20

    num_weights, sample, logprob, unpack_weights = make_ica_funs(observed_dimension, latent_dimension)

    num_latent_params = latent_dimension * n_samples
    total_num_params = num_weights + num_latent_params + 1

    def unpack_params(params):
        weights = unpack_weights(params[:num_weights])
        latents = np.reshape(
            params[num_weights : num_weights + num_latent_params], (latent_dimension, n_samples)
        )
        noise_std = np.exp(params[-1])
        return weights, latents, noise_std

    rs = npr.RandomState(0)
    true_weights = np.zeros((observed_dimension, latent_dimension))
    for i in range(latent_dimension):
        true_weights[:, i] = np.sin(np.linspace(0, 4 + i * 3.2, observed_dimension))

    true_latents, data = sample(true_weights, n_samples, true_noise_var, rs)

    def objective(params):
        weight_matrix, latents, noise_std = unpack_params(params)
        return -logprob(weight_matrix, latents, noise_std, data) / n_samples

    # Initialize and optimize model.
    rs = npr.RandomState(0)
    init_params = rs.randn(total_num_params)
    result = minimize(value_and_grad(objective), init_params, jac=True, method="CG", options={"maxiter": 10})
'''


def test_ica():
    mine, theirs = both(ICA)
    assert mine["result"].fun == pytest.approx(theirs["result"].fun, rel=1e-10)
    np.testing.assert_allclose(mine["result"].x, theirs["result"].x, rtol=1e-8, atol=1e-10)
    assert mine["result"].fun < mine["objective"](mine["init_params"])

