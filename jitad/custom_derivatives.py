"""JAX's `jax.custom_derivatives`: the user-supplied derivative rules in one place.

>>> from jitad.custom_derivatives import custom_jvp, custom_vjp, custom_gradient
"""
from . import numeric as N
from .pytree import tree_map
from .toplevel import closure_convert, custom_gradient
from .transforms.custom import custom_jvp, custom_vjp

__all__ = ["closure_convert", "custom_gradient", "custom_jvp", "custom_vjp", "linear_call"]


def linear_call(fun, fun_transpose, residual_args, linear_args):
    """`fun(residual_args, linear_args)`, a function linear in `linear_args` whose
    transpose is `fun_transpose(residual_args, cotangent)`: reverse mode runs the transpose.

    >>> jitad.grad(lambda x: linear_call(lambda r, x: r * x, lambda r, t: r * t, 3.0, x))(1.0)
    3.0
    """
    rule = custom_vjp(lambda r, x: fun(r, x))
    rule.defvjp(lambda r, x: (fun(r, x), r),
                lambda r, ct: (tree_map(N.zeros_like, r), fun_transpose(r, ct)))
    return rule(residual_args, linear_args)

