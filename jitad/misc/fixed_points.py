"""autograd's `fixed_point(f, a, x0, distance, tol)`: the limit of `x = f(a)(x)` from
`x0`, iterated while `distance(x, x_prev) > tol`, differentiable with respect to `a`
by the implicit function theorem (the backward pass solves the adjoint equation with
the same iteration). Built with `jitad.extend`'s `primitive` and `defvjp`.

>>> from jitad.misc.fixed_points import fixed_point
>>> newton_sqrt = lambda a: lambda x: 0.5 * (x + a / x)
>>> distance = lambda x, y: jitad.abs(x - y)
>>> round(float(fixed_point(newton_sqrt, 2.0, 1.0, distance, 1e-12)), 12)
1.414213562373
"""
from .. import numeric as N
from ..differential_operators import make_vjp
from ..builtins import tuple  # noqa: F401,A001  (autograd's name in this module)
from ..extend import defvjp, primitive, vspace
from ..pytree import flatten, tree_map
from ..staging import WHILE, is_staged

__all__ = ["fixed_point", "fixed_point_vjp"]


def _iterate(step, x0, distance, tol):
    """`x = step(x)` from `x0` while `distance(x, x_prev) > tol`; staged as a WHILE loop
    when a value is staged."""
    x = step(x0)
    if not any(is_staged(v) for v in flatten((x, x0))[0]):
        prev = x0
        while distance(x, prev) > tol:
            x, prev = step(x), x
        return x
    return WHILE(lambda s: distance(s[0], s[1]) > tol, lambda s: (step(s[0]), s[0]), (x, x0))[0]


@primitive
def fixed_point(f, a, x0, distance, tol):
    """The fixed point of `f(a)` reached from `x0` (see the module)."""
    return _iterate(f(a), x0, distance, tol)


def fixed_point_vjp(ans, f, a, x0, distance, tol):
    """The cotangent of `a`: with x* = f(a)(x*), the adjoint u solves u = g + (df/dx)^T u
    (a fixed point too), and flows to `a` through (df/da)^T u."""
    # (jitad's rules pass cotangents on to staged values a function closes over: `a` is
    # held constant here, so that only vjp_a reaches it)
    vjp_x = make_vjp(f(tree_map(N.stop_gradient, a)))(ans)[0]
    vjp_a = make_vjp(lambda a_, x: f(a_)(x))(a, ans)[0]

    def adjoint(g):
        step = lambda u: tree_map(lambda p, q: p + q, g, vjp_x(u))   # noqa: E731
        return _iterate(step, vspace(ans).zeros(), distance, tol)
    return lambda g: vjp_a(adjoint(g))


defvjp(fixed_point, None, fixed_point_vjp, None)
