# source: https://github.com/HIPS/autograd/blob/master/examples/fixed_points.py
# licence: MIT, (c) the President and Fellows of Harvard University (HIPS autograd)
# edits: none but the rename
# compare: sqrt(2.0) rtol=1e-13, grad(sqrt)(2.0) rtol=1e-13, grad(grad(sqrt))(2.0) rtol=3e-3
# steps: 3
# note: the second derivative agrees to the solver's tolerance (tol 1e-4, contraction 0.86) only: jitad
# takes grad of grad by forward mode, and a `primitive` with only a `defvjp` rule gets its tangent from its
# body (the iterations), where autograd differentiates the rule itself (the implicit function theorem)
# ruff: noqa (the program as its authors wrote it, with the edits above)

import jitad.numpy as np
from jitad import grad
from jitad.misc.fixed_points import fixed_point


def newton_sqrt_iter(a):
    return lambda x: 0.5 * (x + a / x)


def grad_descent_sqrt_iter(a):
    return lambda x: x - 0.05 * (x**2 - a)


def sqrt(a, guess=10.0):
    # return fixed_point(newton_sqrt_iter, a, guess, distance, 1e-4)
    return fixed_point(grad_descent_sqrt_iter, a, guess, distance, 1e-4)


def distance(x, y):
    return np.abs(x - y)


print(np.sqrt(2.0))
print(sqrt(2.0))
print()
print(grad(np.sqrt)(2.0))
print(grad(sqrt)(2.0))
print()
print(grad(grad(np.sqrt))(2.0))
print(grad(grad(sqrt))(2.0))
print()
