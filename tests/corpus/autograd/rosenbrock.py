# source: https://github.com/HIPS/autograd/blob/master/examples/rosenbrock.py
# licence: MIT, (c) the President and Fellows of Harvard University (HIPS autograd)
# edits: none but the rename
# compare: result.x rtol=1e-12, result.fun rtol=1e-12 atol=1e-20
# steps: 42
# ruff: noqa (the program as its authors wrote it, with the edits above)

from scipy.optimize import minimize

import jitad.numpy as np
from jitad import value_and_grad


def rosenbrock(x):
    return 100 * (x[1] - x[0] ** 2) ** 2 + (1 - x[0]) ** 2


# Build a function that also returns gradients using jitad.
rosenbrock_with_grad = value_and_grad(rosenbrock)

# Optimize using conjugate gradients.
result = minimize(rosenbrock_with_grad, x0=np.array([0.0, 0.0]), jac=True, method="CG")
print(f"Found minimum at {result.x}")
