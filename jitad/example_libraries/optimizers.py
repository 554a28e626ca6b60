"""JAX's `jax.example_libraries.optimizers` on jitad: an optimizer is a triple
`(init_fun, update_fun, get_params)` over pytrees of arrays, usable eagerly and inside
staged code (its state is a pytree, so it passes through `jitad.jit`).

>>> from jitad.example_libraries import optimizers
>>> opt_init, opt_update, get_params = optimizers.adam(1e-2)
>>> state = opt_init({"w": np.zeros(3)})
>>> state = opt_update(0, {"w": np.ones(3)}, state)
>>> get_params(state)["w"]          # each entry -0.01

`step_size` is a number or a schedule `i -> step size` (`constant`,
`exponential_decay`, `inverse_time_decay`, `polynomial_decay`, `piecewise_constant`).
`unpack_optimizer_state` makes a state plain nested containers (to pickle) and
`pack_optimizer_state` makes them a state again (JAX's names).
"""
from __future__ import annotations   # (JAX's module has the name `annotations` too)

import builtins
import functools
from collections import namedtuple

import numpy as np

from .. import numeric as N
from ..errors import ArgumentError
from ..pytree import flatten, register_pytree_node, unflatten
from ..staging import is_staged

Optimizer = namedtuple("Optimizer", ["init_fn", "update_fn", "params_fn"])


class OptimizerState:
    """The state of every parameter leaf (a tuple of arrays each) and the parameters'
    pytree structure; a pytree itself."""

    def __init__(self, states, treedef):
        self.states, self.treedef = tuple(states), treedef

    def __repr__(self):
        return f"OptimizerState({len(self.states)} leaves of {self.treedef})"


register_pytree_node(OptimizerState, lambda s: (s.states, s.treedef), lambda td, states: OptimizerState(states, td))


def _array(x):
    return x if is_staged(x) else np.asarray(x, np.float64 if isinstance(x, (int, float)) else None)


def optimizer(opt_maker):
    """Turn a maker of `(init, update, get_params)` on one array into one on pytrees."""
    @functools.wraps(opt_maker)
    def tree_opt_maker(*args, **kwargs):
        init, update, get_params = opt_maker(*args, **kwargs)

        def init_fun(x0_tree):
            leaves, treedef = flatten(x0_tree)
            return OptimizerState([init(_array(x)) for x in leaves], treedef)

        def update_fun(i, grad_tree, opt_state):
            if not isinstance(opt_state, OptimizerState):
                raise ArgumentError(f"update_fun: the state must be what init_fun returned, got "
                                    f"{type(opt_state).__name__}")
            leaves, treedef = flatten(grad_tree)
            if treedef != opt_state.treedef:
                raise ArgumentError(f"update_fun: the gradients have structure {treedef}, the parameters "
                                    f"{opt_state.treedef}")
            return OptimizerState([update(i, g, s) for g, s in zip(leaves, opt_state.states)], treedef)

        def params_fun(opt_state):
            return unflatten(opt_state.treedef, [get_params(s) for s in opt_state.states])
        return Optimizer(init_fun, update_fun, params_fun)
    return tree_opt_maker


def _first(state):
    return state[0]


@optimizer
def sgd(step_size):
    """`x -= step_size(i) * g`."""
    step_size = make_schedule(step_size)
    return (lambda x0: (x0,)), (lambda i, g, s: (s[0] - step_size(i) * g,)), _first


@optimizer
def momentum(step_size, mass):
    """Heavy ball: `v = mass * v + g; x -= step_size(i) * v`."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * velocity, velocity
    return (lambda x0: (x0, N.zeros_like(x0))), update, _first


@optimizer
def nesterov(step_size, mass):
    """Nesterov momentum: `v = mass * v + g; x -= step_size(i) * (mass * v + g)`."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * (mass * velocity + g), velocity
    return (lambda x0: (x0, N.zeros_like(x0))), update, _first


@optimizer
def adagrad(step_size, momentum=0.9):
    """Adagrad with momentum on the normalized gradient."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, g_sq, m = state
        g_sq = g_sq + g * g
        inv = N.where(g_sq > 0, 1.0 / N.sqrt(N.where(g_sq > 0, g_sq, 1.0)), 0.0)
        m = (1.0 - momentum) * (g * inv) + momentum * m
        return x - step_size(i) * m, g_sq, m
    return (lambda x0: (x0, N.zeros_like(x0), N.zeros_like(x0))), update, _first


@optimizer
def rmsprop(step_size, gamma=0.9, eps=1e-8):
    """RMSProp: `a = gamma * a + (1 - gamma) * g**2; x -= step_size(i) * g / sqrt(a + eps)`."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, avg_sq = state
        avg_sq = avg_sq * gamma + g * g * (1.0 - gamma)
        return x - step_size(i) * g / N.sqrt(avg_sq + eps), avg_sq
    return (lambda x0: (x0, N.zeros_like(x0))), update, _first


@optimizer
def rmsprop_momentum(step_size, gamma=0.9, eps=1e-8, momentum=0.9):
    """RMSProp whose steps accumulate in a momentum term."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, avg_sq, mom = state
        avg_sq = avg_sq * gamma + g * g * (1.0 - gamma)
        mom = momentum * mom + step_size(i) * g / N.sqrt(avg_sq + eps)
        return x - mom, avg_sq, mom
    return (lambda x0: (x0, N.zeros_like(x0), N.zeros_like(x0))), update, _first


@optimizer
def adam(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adam (Kingma & Ba) with bias-corrected moments; step `i` counts from 0."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * (g * g) + b2 * v
        m_hat, v_hat = m / (1 - b1 ** (i + 1)), v / (1 - b2 ** (i + 1))
        return x - step_size(i) * m_hat / (N.sqrt(v_hat) + eps), m, v
    return (lambda x0: (x0, N.zeros_like(x0), N.zeros_like(x0))), update, _first


@optimizer
def adamax(step_size, b1=0.9, b2=0.999, eps=1e-8):
    """Adamax: Adam with the infinity norm of past gradients."""
    step_size = make_schedule(step_size)

    def update(i, g, state):
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = N.maximum(b2 * u, N.abs(g))
        return x - (step_size(i) / (1 - b1 ** (i + 1))) * m / (u + eps), m, u
    return (lambda x0: (x0, N.zeros_like(x0), N.zeros_like(x0))), update, _first


@optimizer
def sm3(step_size, momentum=0.9):
    """SM3 (Anil et al.): one accumulator per index of each axis; a step divides by the
    square root of the smallest accumulator covering the entry plus its squared gradient."""
    step_size = make_schedule(step_size)

    def init(x0):
        sizes = np.shape(x0) if not is_staged(x0) else tuple(x0.shape)
        return (x0, N.zeros_like(x0)) + tuple(N.zeros((n,), dtype=x0.dtype) for n in sizes or (1,))

    def update(i, g, state):
        x, m, *vs = state
        shape = N._shape(x)
        if not shape:   # a scalar: one accumulator
            accum = vs[0][0] + g * g
        else:
            along = [N.reshape(v, tuple(n if d == k else 1 for d, n in enumerate(shape))) for k, v in enumerate(vs)]
            accum = functools.reduce(N.minimum, along) + g * g
        positive = accum > 0
        scaled = N.where(positive, g / N.sqrt(N.where(positive, accum, 1.0)), 0.0)
        m = (1.0 - momentum) * scaled + momentum * m
        x = x - step_size(i) * m
        if not shape:
            return (x, m, N.reshape(accum, (1,)))
        others = lambda k: tuple(d for d in range(len(shape)) if d != k)   # noqa: E731
        return (x, m) + tuple(N.max(accum, axis=others(k)) if len(shape) > 1 else accum for k in range(len(shape)))
    return init, update, _first


# -- packing a state into plain containers ----------------------------------------------

class JoinPoint:
    """Marks where one parameter's state (a tuple of arrays) sits in a packed state."""

    def __init__(self, subtree):
        self.subtree = subtree

    def __iter__(self):
        yield self.subtree

    def __repr__(self):
        return f"JoinPoint({self.subtree!r})"


def unpack_optimizer_state(opt_state):
    """The state as plain containers (to pickle): the parameters' pytree with a
    `JoinPoint`, holding that parameter's state, at each leaf."""
    if not isinstance(opt_state, OptimizerState):
        raise ArgumentError(f"unpack_optimizer_state takes an optimizer state, got {type(opt_state).__name__}")
    return unflatten(opt_state.treedef, [JoinPoint(s) for s in opt_state.states])


def pack_optimizer_state(marked_pytree):
    """The optimizer state `unpack_optimizer_state` made plain containers of."""
    joins, treedef = flatten(marked_pytree)
    if not all(isinstance(j, JoinPoint) for j in joins):
        raise ArgumentError("pack_optimizer_state takes what unpack_optimizer_state returned (JoinPoints at "
                            "the leaves)")
    return OptimizerState([j.subtree for j in joins], treedef)


# -- JAX's list helpers, as this module has them ---------------------------------------

def safe_zip(*args):
    """`zip` of sequences of one length, as a list (ArgumentError on different lengths)."""
    lengths = {len(a) for a in args}
    if len(lengths) > 1:
        raise ArgumentError(f"safe_zip: sequences of lengths {[len(a) for a in args]}; give equal lengths")
    return list(builtins.zip(*args))


def safe_map(f, *args):
    """`map` over sequences of one length, as a list (ArgumentError on different lengths)."""
    return [f(*xs) for xs in safe_zip(*args)]


def unzip2(xys):
    """A sequence of pairs as two tuples."""
    xs, ys = [], []
    for x, y in xys:
        xs.append(x)
        ys.append(y)
    return tuple(xs), tuple(ys)


map, zip = safe_map, safe_zip   # noqa: A001 (JAX's module rebinds both)


# -- schedules: i -> step size ---------------------------------------------------------

def constant(step_size):
    """The same step size at every step."""
    return lambda i: step_size


def exponential_decay(step_size, decay_steps, decay_rate):
    """`step_size * decay_rate ** (i / decay_steps)`."""
    return lambda i: step_size * decay_rate ** (i / decay_steps)


def inverse_time_decay(step_size, decay_steps, decay_rate, staircase=False):
    """`step_size / (1 + decay_rate * i / decay_steps)` (the ratio floored with `staircase`)."""
    if staircase:
        return lambda i: step_size / (1 + decay_rate * N.floor(i / decay_steps))
    return lambda i: step_size / (1 + decay_rate * i / decay_steps)


def polynomial_decay(step_size, decay_steps, final_step_size, power=1.0):
    """From `step_size` to `final_step_size` over `decay_steps` steps, as `(1 - t)**power`."""
    def schedule(i):
        t = N.minimum(i, decay_steps) / decay_steps
        return (1 - t) ** power * (step_size - final_step_size) + final_step_size
    return schedule


def piecewise_constant(boundaries, values):
    """`values[k]` for steps after `k` of the `boundaries`."""
    boundaries, values = np.asarray(boundaries), np.asarray(values)
    if not boundaries.ndim == values.ndim == 1 or boundaries.shape[0] != values.shape[0] - 1:
        raise ArgumentError("piecewise_constant: boundaries and values are sequences, with one value "
                            "more than boundaries")
    return lambda i: values[N.sum(i > boundaries)] if is_staged(i) else values[np.sum(i > boundaries)]


def make_schedule(scalar_or_schedule):
    """A schedule from a schedule or a number."""
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if np.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise ArgumentError(f"a step size is a number or a schedule (i -> number), got {scalar_or_schedule!r}")


def l2_norm(tree):
    """The l2 norm of all the leaves together."""
    return N.sqrt(sum(N.sum(x * x) for x in flatten(tree)[0]))


def clip_grads(grad_tree, max_norm):
    """The gradients scaled down to l2 norm `max_norm` when above it."""
    norm = l2_norm(grad_tree)
    leaves, treedef = flatten(grad_tree)
    return unflatten(treedef, [N.where(norm < max_norm, g, g * (max_norm / norm)) for g in leaves])
