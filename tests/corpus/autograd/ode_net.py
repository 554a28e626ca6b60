# source: https://github.com/HIPS/autograd/blob/master/examples/ode_net.py
# licence: MIT, (c) the President and Fellows of Harvard University (HIPS autograd)
# edits: plotting cut (the callback's computations kept); num_iters 1000 -> 5
# compare: true_y rtol=1e-5 atol=1e-6, ode_pred(init_params,true_y0,t) rtol=0.01 atol=0.01, grad(train_loss)(init_params,0) rtol=0.01 atol=2e-3, optimized_params rtol=0 atol=5e-3
# steps: 5
# tolerances: jitad's odeint solves by adaptive Dormand-Prince, autograd's by SciPy's LSODA, so the two agree to the
#   solvers' tolerances, not to rounding. true_y is solved at odeint's default rtol=atol=1.5e-8 (measured: 2e-6
#   relative after 1.5 time units); the model's trajectory at rtol=0.01, the tolerance the program gives (measured:
#   0.5%); its loss gradient, through the adjoint solve at that tolerance, at rtol=0.01 with an atol of 1% of its
#   largest element (measured: 0.3% in norm, cosine 0.999995). Adam moves each parameter by about step_size=0.001
#   a step whatever the gradient's size, so where an element of the gradient is near zero the solvers' error decides
#   the direction of its steps: after 5 steps the parameters agree to 5 * step_size (measured: 2.5e-3), not relatively.
# ruff: noqa (the program as its authors wrote it, with the edits above)

# A demo of gradients through scipy.integrate.odeint,
# estimating the dynamics of a system given a trajectory.


import itertools

import numpy as npo

import jitad.numpy as np
import jitad.numpy.random as npr
from jitad import grad
from jitad.builtins import tuple
from jitad.misc.optimizers import adam
from jitad.scipy.integrate import odeint

N = 30  # Dataset size
D = 2  # Data dimension
max_T = 1.5


# Two-dimensional damped oscillator
def func(y, t0, A):
    return np.dot(y**3, A)


def nn_predict(inputs, t, params):
    for W, b in params:
        outputs = np.dot(inputs, W) + b
        inputs = np.maximum(0, outputs)
    return outputs


def init_nn_params(scale, layer_sizes, rs=None):
    """Build a list of (weights, biases) tuples, one for each layer."""
    rs = rs if rs is not None else npr.RandomState(0)
    return [
        (
            rs.randn(insize, outsize) * scale,  # weight matrix
            rs.randn(outsize) * scale,
        )  # bias vector
        for insize, outsize in itertools.pairwise(layer_sizes)
    ]


# Define neural ODE model.
def ode_pred(params, y0, t):
    return odeint(nn_predict, y0, t, tuple((params,)), rtol=0.01)


def L1_loss(pred, targets):
    return np.mean(np.abs(pred - targets))


if __name__ == "__main__":
    # Generate data from true dynamics.
    true_y0 = np.array([2.0, 0.0]).T
    t = np.linspace(0.0, max_T, N)
    true_A = np.array([[-0.1, 2.0], [-2.0, -0.1]])
    true_y = odeint(func, true_y0, t, args=(true_A,))

    def train_loss(params, iter):
        pred = ode_pred(params, true_y0, t)
        return L1_loss(pred, true_y)

    # Set up figure

    # Plots data and learned dynamics.
    def callback(params, iter, g):
        pred = ode_pred(params, true_y0, t)

        print(f"Iteration {iter:d} train loss {L1_loss(pred, true_y):.6f}")




        # vector field plot
        y, x = npo.mgrid[-2:2:21j, -2:2:21j]
        dydt = nn_predict(np.stack([x, y], -1).reshape(21 * 21, 2), 0, params).reshape(-1, 2)
        mag = np.sqrt(dydt[:, 0] ** 2 + dydt[:, 1] ** 2).reshape(-1, 1)
        dydt = dydt / mag
        dydt = dydt.reshape(21, 21, 2)



    # Train neural net dynamics to match data.
    init_params = init_nn_params(0.1, layer_sizes=[D, 150, D])
    optimized_params = adam(grad(train_loss), init_params, num_iters=5, callback=callback)
