"""`jitad.test_util`: the gradient checks of JAX (`jax.test_util.check_grads(f, args,
order, modes)`) and autograd (`autograd.test_util.check_grads(f, modes=..., order=...)(*args)`,
`check_vjp`, `check_jvp`, `combo_check`), all through the one checker,
`jitad.testing.check_grads`.

>>> from jitad.test_util import check_grads, check_vjp
>>> check_grads(jitad.sin, modes=["rev"])(0.3)
>>> check_vjp(jitad.tanh, np.array([0.1, 0.2]))
"""
import itertools

import numpy as np

from . import testing
from .differential_operators import make_jvp, make_vjp  # noqa: F401
from .extend import vspace  # noqa: F401
from .wrap_util import get_name, unary_to_nary  # noqa: F401

__all__ = ["EPS", "RTOL", "TOL", "check_equivalent", "check_grads", "check_jvp", "check_vjp", "combo_check",
           "get_name", "make_jvp", "make_numerical_jvp", "make_vjp", "scalar_close", "unary_to_nary", "vspace"]

TOL = 1e-6    # autograd's default tolerances
RTOL = 1e-6
EPS = 1e-6


def check_grads(fun, args=None, order=2, modes=None, atol=None, rtol=None, eps=None, *, argnum=0):
    """JAX's form when `args` is a tuple or list of arguments: `check_grads(loss, (W, b),
    order=2)`; otherwise autograd's: `check_grads(loss, modes=["rev"])(weights)` (`args`
    is then autograd's `argnum`: the argument checked, an int or a list of ints)."""
    modes = tuple(modes or ("fwd", "rev"))
    tolerances = {k: v for k, v in (("atol", atol), ("rtol", rtol), ("eps", eps)) if v is not None}
    if isinstance(args, (tuple, list)) and not _all_ints(args):
        testing.check_grads(fun, tuple(args), order=order, modes=modes, **tolerances)
        return None
    nums = argnum if args is None else args
    nums = tuple(nums) if isinstance(nums, (tuple, list)) else (nums,)

    def check(*call_args, **call_kwargs):
        def f(*xs):
            full = list(call_args)
            for i, x in zip(nums, xs):
                full[i] = x
            return fun(*full, **call_kwargs)
        if not call_kwargs and nums == tuple(range(len(call_args))):
            f = fun   # (every argument checked: the function itself, one function for all the checks' calls)
        xs = tuple(call_args[i] for i in nums)
        for mode in modes:   # one at a time, so that a failure names its mode and function, as autograd's
            try:
                testing.check_grads(f, xs, order=order if mode == "fwd" else 1, modes=(mode,), **tolerances)
            except AssertionError as e:
                raise AssertionError(f"({'VJP' if mode == 'rev' else 'JVP'}) check of {get_name(fun)} failed: {e}") \
                    from None
        if "rev" in modes and order > 1:   # the VJP itself, of (x, cotangent), as autograd checks it
            vjp_f = _vjp_function(f, get_name(fun))
            v = vspace(f(*xs)).randn()
            check_grads(vjp_f, modes=modes, order=order - 1, argnum=list(range(len(xs) + 1)), **tolerances)(*xs, v)
    return check


def _vjp_function(f, name):
    """`(*xs, v) -> the cotangents of f's arguments at xs for the output cotangent v`, named
    `vjp_<name>` (what autograd's second-order reverse check differentiates)."""
    from .api import pullback_at

    def vjp_f(*a):
        cts = pullback_at(f, a[:-1], a[-1])
        return cts[0] if len(cts) == 1 else cts
    vjp_f.__name__ = f"vjp_{name}"
    return vjp_f


def _all_ints(values):
    return bool(values) and all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def check_vjp(f, x):
    """Reverse mode of `f` at `x` against central differences (AssertionError if not)."""
    testing.check_grads(f, (x,), order=1, modes=("rev",))


def check_jvp(f, x):
    """Forward mode of `f` at `x` against central differences (AssertionError if not)."""
    testing.check_grads(f, (x,), order=1, modes=("fwd",))


def make_numerical_jvp(f, x):
    """`jvp(v) == (f(x + EPS/2 v) - f(x - EPS/2 v)) / EPS`: the directional derivative by
    central differences, item by item for containers (to compare with `make_jvp`)."""
    out_space, in_space = vspace(f(x)), vspace(x)

    def jvp(v):
        plus = f(in_space.add(x, in_space.scalar_mul(v, EPS / 2)))
        minus = f(in_space.add(x, in_space.scalar_mul(v, -EPS / 2)))
        return out_space.scalar_mul(out_space.add(plus, out_space.scalar_mul(minus, -1.0)), 1.0 / EPS)
    return jvp


def scalar_close(a, b):
    """Whether two numbers agree within autograd's tolerances."""
    return abs(a - b) < TOL or abs(a - b) / abs(a + b) < RTOL


def check_equivalent(x, y):
    """AssertionError unless `x` and `y` (pytrees of numbers and arrays) have the same
    structure and values within autograd's tolerances."""
    from .pytree import flatten
    (xs, tx), (ys, ty) = flatten(x), flatten(y)
    assert tx == ty, f"different structures: {tx} vs {ty}"
    for a, b in zip(xs, ys):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=RTOL, atol=TOL)


def combo_check(fun, *args, **kwargs):
    """`combo_check(f, argnum, modes=...)(xs, ys, kw=[...])`: `check_grads` of `f` at every
    combination of the given argument values and keyword values."""
    def check_all(*arg_choices, **kwarg_choices):
        keyword_items = [[(k, v) for v in values] for k, values in kwarg_choices.items()]
        for call_args in itertools.product(*arg_choices):
            for call_kwargs in itertools.product(*keyword_items):
                check_grads(fun, *args, **kwargs)(*call_args, **dict(call_kwargs))
    return check_all
