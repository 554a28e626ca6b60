"""User-supplied derivative rules, fixed points and checkpointing (SPEC §4).

All three are staged functions (`FUN`) whose call nodes carry a static attribute
that reverse mode reads: `custom` (run the user's fwd/bwd instead of differentiating
the body) or `checkpoint` (recompute the body during the backward pass).
"""
import numpy as np

from . import numeric as N
from .errors import ArgumentError
from .ir.ops import Op
from .pytree import flatten, tree_map
from .staging import FUN, WHILE, current_frame


class custom_vjp(FUN):
    """A function with a user-supplied VJP.

    >>> @jitad.custom_vjp
    ... def log1pexp(x):
    ...     return jitad.log(1 + jitad.exp(x))
    >>> log1pexp.defvjp(lambda x: (log1pexp(x), x), lambda x, g: (g * jitad.sigmoid(x),))

    `fwd(*args) -> (output, residuals)`; `bwd(residuals, g) -> tuple of cotangents,
    one per argument`. The rule runs as staged code inside the enclosing
    differentiation: it may call `jitad.vjp` on functions closing over staged values,
    and gradients flow to those values.
    """

    call_op = Op.CUSTOM_VJP

    def __init__(self, fn=None, out=None):
        super().__init__(fn, out)
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd):
        self.fwd, self.bwd = fwd, bwd
        return self

    def call_attrs(self, in_td):
        if self.fwd is None:
            raise ArgumentError(f"custom_vjp `{self.__name__}`: call defvjp(fwd, bwd) before using it")
        return {"custom": self, "in_td": in_td}

    def __repr__(self):
        return f"custom_vjp({self.__name__})"


class checkpoint(FUN):
    """`jitad.checkpoint(f)`: during reverse mode, run `f` without keeping its
    intermediate values, and recompute them when the backward pass reaches `f`
    (less memory, one more forward pass of `f`).

    >>> block = jitad.checkpoint(lambda h, W: jitad.tanh(W @ h))
    """
    call_op = Op.CHECKPOINT

    def __repr__(self):
        return f"checkpoint({self.__name__})"


def _norm(x):
    leaves = flatten(x)[0]
    return sum(N.sum(N.abs(leaf)) if np.ndim(leaf) or getattr(leaf, "shape", ()) else N.abs(leaf)
               for leaf in leaves)


def _iterate(f, x0, tol, max_iter):
    def cond(state):
        i, x, gap = state
        return (gap > tol) & (i < max_iter)

    def body(state):
        i, x, _ = state
        x_new = f(x)
        return i + 1, x_new, _norm(tree_map(lambda a, b: a - b, x_new, x))
    return WHILE(cond, body, (0, x0, np.inf))[1]


def fixed_point(f, x0, tol=1e-10, max_iter=1000):
    """Iterate `x = f(x)` from `x0` until `|f(x) - x| <= tol` (or `max_iter` steps).

    Differentiated by the implicit function theorem, with memory independent of the
    number of iterations, including gradients w.r.t. staged values `f` closes over:

    >>> sqrt_a = jitad.fixed_point(lambda x: 0.5 * (x + a / x), 1.0)   # Newton for sqrt(a)
    """
    if current_frame() is None:   # plain Python values: just iterate
        x = x0
        for _ in range(max_iter):
            x_new = f(x)
            if _norm(tree_map(lambda a, b: a - b, x_new, x)) <= tol:
                return x_new
            x = x_new
        return x

    def solve(x0):
        return _iterate(f, x0, tol, max_iter)

    def fwd(x0):
        x_star = solve(x0)
        return x_star, x_star

    def bwd(x_star, g):
        from .api import pullback_staged
        # u = g + (df/dx)^T u, solved by the same iteration; then u flows to what f closes over
        def step(u):
            (du,) = pullback_staged(f, (x_star,), u, to_closure=False)
            return tree_map(lambda a, b: a + b, g, du)
        u = _iterate(step, g, tol, max_iter)
        pullback_staged(f, (x_star,), u, to_closure=True)
        return (tree_map(lambda a: a * 0.0, x_star),)   # x* does not depend on x0

    solve_rule = custom_vjp(solve)
    solve_rule.__name__ = "fixed_point"
    solve_rule.defvjp(fwd, bwd)
    return solve_rule(x0)


def _softplus_rule():
    @custom_vjp
    def softplus(x):
        return N.log1p(N.exp(-N.abs(x))) + N.relu(x)
    softplus.defvjp(lambda x: (softplus(x), x), lambda x, g: (g * N.sigmoid(x),))
    return softplus


_softplus = _softplus_rule()


def softplus(x):
    """log(1 + exp(x)), stable for large |x|, with gradient sigmoid(x):
    `jitad.grad(jitad.softplus)(1000.0) == 1.0`."""
    if current_frame() is None and not isinstance(x, np.ndarray):
        return float(np.logaddexp(0.0, x))
    return _softplus(x)
