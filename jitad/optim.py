"""Optimizers as pure functions on pytrees, usable inside and outside staged code.

>>> params, grads = np.ones(3), np.full(3, 0.5)
>>> opt = jitad.optim.adam(1e-3)
>>> state = opt.init(params)
>>> params, state = opt.update(params, grads, state)
"""
from . import numeric as N
from .errors import ArgumentError
from .pytree import check_same_structure, tree_map


def _zeros(params):
    return tree_map(lambda p: N.zeros_like(p) * 1.0, params)


class sgd:
    """`p -= lr * g`, with heavy-ball momentum `v = momentum * v + g; p -= lr * v` (as PyTorch)."""

    def __init__(self, lr, momentum=0.0):
        self.lr, self.momentum = lr, momentum

    def init(self, params):
        return _zeros(params) if self.momentum else ()

    def update(self, params, grads, state):
        check_same_structure("sgd.update", {"params": params, "grads": grads, **({"state": state} if self.momentum else {})})
        if not self.momentum:
            return tree_map(lambda p, g: p - self.lr * g, params, grads), state
        velocity = tree_map(lambda v, g: self.momentum * v + g, state, grads)
        return tree_map(lambda p, v: p - self.lr * v, params, velocity), velocity


class adagrad:
    """`h += g**2; p -= lr * g / (sqrt(h) + eps)` (as PyTorch, eps=1e-10)."""

    def __init__(self, lr, eps=1e-10):
        self.lr, self.eps = lr, eps

    def init(self, params):
        return _zeros(params)

    def update(self, params, grads, state):
        check_same_structure("adagrad.update", {"params": params, "grads": grads, "state": state})
        acc = tree_map(lambda h, g: h + g * g, state, grads)
        return tree_map(lambda p, g, h: p - self.lr * g / (N.sqrt(h) + self.eps), params, grads, acc), acc


class adam:
    """Adam with bias correction (Kingma & Ba; PyTorch's defaults)."""

    def __init__(self, lr, b1=0.9, b2=0.999, eps=1e-8):
        self.lr, self.b1, self.b2, self.eps = lr, b1, b2, eps

    def init(self, params):
        return (_zeros(params), _zeros(params), 0.0)

    def update(self, params, grads, state):
        if not (isinstance(state, tuple) and len(state) == 3):
            raise ArgumentError("adam.update: state must be what adam.init(params) returned (m, v, t)")
        m, v, t = state
        check_same_structure("adam.update", {"params": params, "grads": grads, "state's first moments": m,
                                             "state's second moments": v})
        t = t + 1.0
        m = tree_map(lambda m, g: self.b1 * m + (1 - self.b1) * g, m, grads)
        v = tree_map(lambda v, g: self.b2 * v + (1 - self.b2) * g * g, v, grads)
        step = self.lr * N.sqrt(1 - self.b2 ** t) / (1 - self.b1 ** t)
        params = tree_map(lambda p, m, v: p - step * m / (N.sqrt(v) + self.eps * N.sqrt(1 - self.b2 ** t)),
                          params, m, v)
        return params, (m, v, t)


def clip_by_value(grads, c):
    """Clip every gradient into [-c, c]."""
    return tree_map(lambda g: N.clip(g, -c, c), grads)
