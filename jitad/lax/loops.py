"""`lax`'s control flow on jitad's staged combinators (`FOR`, `WHILE`, `IF`, `scan`) and
its implicitly differentiated solvers (`custom_root`, `custom_linear_solve`). Reverse mode
goes through all of them, `while_loop` included (JAX refuses that one)."""
import numpy as np

from .. import numeric as N
from ..transforms.control import scan as _scan, switch as _switch
from ..errors import ArgumentError
from ..pytree import tree_map
from ..staging import FOR, IF, WHILE, is_staged


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """`val = body_fun(i, val)` for `i` in `range(lower, upper)`; returns `val` (a `FOR`;
    `unroll` changes nothing in the result, jitad's LLVM unrolls by itself):
    `lax.fori_loop(0, 4, lambda i, s: s + i, 0) == 6`."""
    return FOR(lower, upper, body_fun, init_val)


def while_loop(cond_fun, body_fun, init_val):
    """`val = body_fun(val)` while `cond_fun(val)`; returns `val` (a `WHILE`, reverse
    differentiable): `lax.while_loop(lambda x: x < 5, lambda x: x + 2, 0) == 6`."""
    return WHILE(cond_fun, body_fun, init_val)


def scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
    """`f(carry, x) -> (carry, y)` over `xs`' leading axis; returns `(carry, ys)`
    (`jitad.scan`; `unroll` changes nothing in the result):
    `lax.scan(lambda c, x: (c + x, c), 0.0, np.arange(3.0))`."""
    return _scan(f, init, xs, length, reverse)


def _pred(pred, who):
    if is_staged(pred):
        if pred.shape:
            raise ArgumentError(f"`lax.{who}`: the predicate must be a scalar, got shape {pred.shape}")
        return pred if pred.ir_dtype == "bool" else pred != 0
    if np.ndim(pred):
        raise ArgumentError(f"`lax.{who}`: the predicate must be a scalar, got shape {np.shape(pred)}")
    return bool(pred)


def cond(pred, true_fun, false_fun, *operands, operand=None):
    """`true_fun(*operands)` if `pred` else `false_fun(*operands)` (an `IF`; `pred` a
    scalar bool or number): `lax.cond(x > 0, lambda x: x, lambda x: -x, x)`."""
    if operand is not None:
        operands = operands + (operand,)
    return IF(_pred(pred, "cond"), true_fun, false_fun, *operands)


def switch(index, branches, *operands, operand=None):
    """`branches[index](*operands)`, `index` clamped into range (as JAX):
    `lax.switch(i, [f, g, h], x)`."""
    if operand is not None:
        operands = operands + (operand,)
    return _switch(index, branches, *operands)


def map(f, xs, *, batch_size=None):
    """`f` applied to each slice of `xs` along its leading axis, the results stacked
    (a `scan` without carry; `batch_size` changes nothing in the result): `lax.map(jnp.sum, xs)`."""
    return _scan(lambda carry, x: (carry, f(x)), (), xs)[1]


def optimization_barrier(operand):
    """`operand` unchanged (jitad schedules the program itself): `lax.optimization_barrier(x)`."""
    return operand


def _tangent_correction(value, correction):
    """`value`, with the derivative of `correction` (whose value is ignored)."""
    return tree_map(lambda v, c: v + (c - N.stop_gradient(c)), value, correction)


def custom_root(f, initial_guess, solve, tangent_solve, has_aux=False):
    """The root `x` of `f(x) = 0` that `solve(f, initial_guess)` finds, differentiated by
    the implicit function theorem instead of through `solve` (which may be any iteration):
    dx = -(df/dx)^-1 df/dparams, the inverse applied by `tangent_solve(g, y)` for the linear
    map `g`. `lax.custom_root(lambda x: x * x - a, 1.0, newton, lambda g, y: y / g(1.0))`."""
    from ..api import jvp
    out = solve(f, initial_guess)
    root, aux = out if has_aux else (out, None)
    root = tree_map(N.stop_gradient, root)
    fixed = tree_map(N.stop_gradient, root)

    def linear(v):   # df/dx at the root; its own derivative meets f(root) == 0 only
        return jvp(f, (fixed,), (v,))[1]
    correction = tree_map(lambda t: -t, tangent_solve(linear, f(fixed)))
    root = _tangent_correction(root, correction)
    return (root, tree_map(N.stop_gradient, aux)) if has_aux else root


def custom_linear_solve(matvec, b, solve, transpose_solve=None, symmetric=False, has_aux=False):
    """The `x` with `matvec(x) == b` that `solve(matvec, b)` finds, differentiated
    implicitly (dx = A^-1 (db - dA x)) instead of through the iterations of `solve`:
    `lax.custom_linear_solve(lambda x: A @ x, b, lambda mv, b: jnp.linalg.solve(A, b))`."""
    out = solve(matvec, tree_map(N.stop_gradient, b))
    x, aux = out if has_aux else (out, None)
    x = tree_map(N.stop_gradient, x)
    residual = tree_map(lambda bb, ax: bb - ax, b, matvec(x))   # zero; its derivative is db - dA x
    step = solve(matvec, residual)
    step = step[0] if has_aux else step
    x = _tangent_correction(x, step)
    return (x, aux) if has_aux else x
