"""autograd's optimizers (`autograd.misc.optimizers`), same signatures and steps: each
takes `grad(x, i)` (the gradient at `x` in iteration `i`) and a starting point `x0` (a
pytree: nested tuples, lists, dicts of arrays), runs `num_iters` steps eagerly and
returns the final point shaped like `x0`; `callback(x, i, g)` sees each step.

>>> from jitad.misc.optimizers import adam
>>> x = adam(jitad.grad(lambda x, i: jitad.sum((x - 3.0) ** 2)), np.zeros(2), num_iters=500, step_size=0.1)
"""
import functools

import numpy as np

from ..wrap_util import wraps  # noqa: F401  (autograd's name in this module)
from .flatten import flatten

__all__ = ["adam", "rmsprop", "sgd", "unflatten_optimizer"]


def unflatten_optimizer(optimize):
    """An optimizer of flat vectors made one of pytrees (what autograd's decorator does)."""
    @functools.wraps(optimize)
    def on_trees(grad, x0, callback=None, *args, **kwargs):
        flat0, unflatten = flatten(x0)
        flat_grad = lambda x, i: np.asarray(flatten(grad(unflatten(x), i))[0], np.float64)
        flat_callback = None if callback is None else (lambda x, i, g: callback(unflatten(x), i, unflatten(g)))
        return unflatten(optimize(flat_grad, np.asarray(flat0, np.float64), flat_callback, *args, **kwargs))
    return on_trees


@unflatten_optimizer
def sgd(grad, x, callback=None, num_iters=200, step_size=0.1, mass=0.9):
    """Gradient descent with momentum: `v = mass * v - (1 - mass) * g; x += step_size * v`."""
    velocity = np.zeros(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        velocity = mass * velocity - (1.0 - mass) * g
        x = x + step_size * velocity
    return x


@unflatten_optimizer
def rmsprop(grad, x, callback=None, num_iters=100, step_size=0.1, gamma=0.9, eps=10**-8):
    """RMSProp: a running mean of squared gradients (starting at 1) scales each step."""
    avg_sq_grad = np.ones(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        avg_sq_grad = avg_sq_grad * gamma + g ** 2 * (1 - gamma)
        x = x - step_size * g / (np.sqrt(avg_sq_grad) + eps)
    return x


@unflatten_optimizer
def adam(grad, x, callback=None, num_iters=100, step_size=0.001, b1=0.9, b2=0.999, eps=10**-8):
    """Adam (Kingma & Ba) with bias-corrected moments, as autograd steps it."""
    m, v = np.zeros(len(x)), np.zeros(len(x))
    for i in range(num_iters):
        g = grad(x, i)
        if callback:
            callback(x, i, g)
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * g ** 2 + b2 * v
        m_hat, v_hat = m / (1 - b1 ** (i + 1)), v / (1 - b2 ** (i + 1))
        x = x - step_size * m_hat / (np.sqrt(v_hat) + eps)
    return x
