# source: https://github.com/HIPS/autograd/blob/master/examples/tanh.py
# licence: MIT, (c) the President and Fellows of Harvard University (HIPS autograd)
# edits: plotting cut (the plotted curves kept as `curves`)
# compare: curves rtol=1e-9 atol=1e-12
# steps: 4
# ruff: noqa (the program as its authors wrote it, with the edits above)

import jitad.numpy as np
from jitad import elementwise_grad as egrad

"""
Mathematically we can only take gradients of scalar-valued functions, but
jitad's elementwise_grad function also handles numpy's familiar vectorization
of scalar functions, which is used in this example.

To be precise, elementwise_grad(fun)(x) always returns the value of a
vector-Jacobian product, where the Jacobian of fun is evaluated at x and the
vector is an all-ones vector with the same size as the output of fun. When
vectorizing a scalar-valued function over many arguments, the Jacobian of the
overall vector-to-vector mapping is diagonal, and so this vector-Jacobian
product simply returns the diagonal elements of the Jacobian, which is the
(elementwise) gradient of the function at each input value over which the
function is vectorized.
"""


def tanh(x):
    return (1.0 - np.exp(-2 * x)) / (1.0 + np.exp(-(2 * x)))


### Plotting
x = np.linspace(-7, 7, 700)
curves = [tanh(x), egrad(tanh)(x), egrad(egrad(tanh))(x), egrad(egrad(egrad(tanh)))(x), egrad(egrad(egrad(egrad(tanh))))(x)]
