"""autograd's `autograd.wrap_util`: making a one-argument operator an n-argument one.

>>> from jitad.wrap_util import unary_to_nary
>>> @unary_to_nary
... def twice(f, x):
...     return 2.0 * f(x)
>>> twice(lambda a, b: a * b, 1)(3.0, 4.0)
24.0
"""
import functools

from .builtins import subvals  # noqa: F401
from .differential_operators import _unary


def get_name(f):
    """`f`'s name, or `[unknown name]`."""
    return getattr(f, "__name__", "[unknown name]")


def get_doc(f):
    """`f`'s docstring, or ''."""
    return getattr(f, "__doc__", "") or ""


def wraps(fun, namestr="{fun}", docstr="{doc}", **kwargs):
    """Decorator copying `fun`'s name and docstring, formatted by `namestr` and `docstr`."""
    def decorate(f):
        f.__name__ = namestr.format(fun=get_name(fun), **kwargs)
        f.__qualname__ = f.__name__
        f.__doc__ = docstr.format(fun=get_name(fun), doc=get_doc(fun), **kwargs)
        return f
    return decorate


def wrap_nary_f(fun, op, argnum):
    """Name the function `op` of `fun` makes (`grad_of_f_wrt_argnum_0`)."""
    return wraps(fun, namestr=f"{get_name(op)}_of_{{fun}}_wrt_argnum_{{argnum}}", argnum=argnum)


def unary_to_nary(unary_operator):
    """`op(f, x, ...)` of a one-argument `f` as `op(fun, argnum=0, ...)(*args)` of a
    many-argument `fun`: `argnum` picks the argument (a tuple of ints: a tuple of them)."""
    @functools.wraps(unary_operator)
    def nary_operator(fun, argnum=0, *op_args, **op_kwargs):
        @functools.wraps(fun)
        def nary_f(*args, **kwargs):
            f, x = _unary(functools.partial(fun, **kwargs) if kwargs else fun, argnum, args)
            return unary_operator(f, x, *op_args, **op_kwargs)
        return nary_f
    return nary_operator
