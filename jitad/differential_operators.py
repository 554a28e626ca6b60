"""autograd's differential operators, at autograd's signatures, built on jitad's
transformations (so they compile, and nest inside staged code).

Each takes `fun` and `argnum` (an int, or a tuple of ints: the argument is then the
tuple of those arguments) and returns a function of `fun`'s arguments.

>>> from jitad.differential_operators import make_vjp, deriv
>>> vjp, value = make_vjp(lambda x, y: x * y)(3.0, 4.0)
>>> vjp(1.0)
4.0
>>> deriv(jitad.sin)(0.0)
1.0
"""
import collections
import functools
import inspect

import numpy as np

from . import api
from . import numeric as N
from . import numpy_api
from .errors import ArgumentError
from .pytree import tree_map
from .staging.complex import parts

__all__ = ["deriv", "grad_and_aux", "grad_named", "hessian_tensor_product", "hessian_vector_product",
           "holomorphic_grad", "make_ggnvp", "make_hvp", "make_jvp", "make_vjp", "multigrad_dict",
           "tensor_jacobian_product", "vector_jacobian_product"]


def _unary(fun, argnum, args):
    """`(f, x)`: `fun` as a function of the argument(s) `argnum` alone, and its value at `args`."""
    if isinstance(argnum, (list, tuple)):
        nums = tuple(i % len(args) for i in argnum)
        x = tuple(args[i] for i in nums)
    elif isinstance(argnum, (int, np.integer)) and not isinstance(argnum, bool):
        nums, x = None, args[argnum]
    else:
        raise ArgumentError(f"argnum={argnum!r}; give an int or a tuple of ints")

    def f(value):
        new = list(args)
        if nums is None:
            new[argnum] = value
        else:
            for i, v in zip(nums, value):
                new[i] = v
        return fun(*new)
    return f, x


def _ones_like(x):
    return tree_map(lambda v: np.ones(np.shape(v)) if np.shape(v) else 1.0, x)


def make_vjp(fun, argnum=0):
    """`make_vjp(fun)(*args) == (vjp, fun(*args))`, `vjp(g)` the cotangent of argument `argnum`."""
    api.check_callable(fun, "make_vjp")

    def at(*args, **kwargs):
        f, x = _unary(functools.partial(fun, **kwargs) if kwargs else fun, argnum, args)
        out, pullback = api.vjp(f, x)
        return (lambda g: pullback(g)[0]), out
    return at


def make_jvp(fun, argnum=0):
    """`make_jvp(fun)(*args)(v) == (fun(*args), J v)`: the forward-mode derivative along `v`."""
    api.check_callable(fun, "make_jvp")

    def at(*args, **kwargs):
        f, x = _unary(functools.partial(fun, **kwargs) if kwargs else fun, argnum, args)
        return lambda v: api.jvp(f, (x,), (v,))
    return at


def make_hvp(fun, argnum=0):
    """`make_hvp(fun)(*args) == (hvp, gradient)`, `hvp(v)` the Hessian (of the scalar `fun`)
    times `v`."""
    api.check_callable(fun, "make_hvp")
    return make_vjp(api.grad(fun, argnums=argnum if not isinstance(argnum, list) else tuple(argnum)), argnum)


def tensor_jacobian_product(fun, argnum=0):
    """`tensor_jacobian_product(fun)(*args, v)`: `v` contracted with the Jacobian over
    `fun`'s output axes (a vector-Jacobian product); a `v` of fewer axes than the output
    is contracted with its leading ones, the rest kept before the argument's axes.

    >>> tensor_jacobian_product(lambda x: x * x)(np.array([1.0, 2.0]), np.array([1.0, 1.0]))
    Array([2., 4.])
    """
    api.check_callable(fun, "tensor_jacobian_product")

    def product(*args, **kwargs):
        *xs, v = args
        vjp, out = make_vjp(fun, argnum)(*xs, **kwargs)
        if np.ndim(v) >= np.ndim(out):
            return vjp(v)
        contracted = lambda *ys: numpy_api.tensordot(v, fun(*ys, **kwargs), axes=np.ndim(v))   # noqa: E731
        return api.jacobian(contracted, argnums=argnum)(*xs)
    return product


vector_jacobian_product = tensor_jacobian_product


def hessian_tensor_product(fun, argnum=0):
    """`hessian_tensor_product(fun)(*args, v)`: the Hessian of the scalar `fun` contracted
    with `v` over the argument's axes."""
    api.check_callable(fun, "hessian_tensor_product")
    if not isinstance(argnum, (int, np.integer)) or isinstance(argnum, bool):
        return tensor_jacobian_product(api.grad(fun, argnums=argnum), argnum)
    product = api.hvp(fun, argnums=argnum)   # (the Hessian is symmetric: forward-over-reverse, one pass)

    def contracted(*args, **kwargs):
        if kwargs:
            return api.hvp(functools.partial(fun, **kwargs), argnums=argnum)(*args)
        return product(*args)
    return contracted


hessian_vector_product = hessian_tensor_product


def deriv(fun, argnum=0):
    """The derivative of `fun` along a tangent of ones (for a scalar argument, `df/dx`)."""
    api.check_callable(fun, "deriv")

    def derivative(*args, **kwargs):
        return make_jvp(fun, argnum)(*args, **kwargs)(_ones_like(args[argnum]))[1]
    return derivative


def grad_and_aux(fun, argnum=0):
    """For `fun` returning `(value, aux)`: `(gradient of value, aux)`."""
    api.check_callable(fun, "grad_and_aux")
    return api.grad(fun, argnums=argnum, has_aux=True)


def make_ggnvp(f, g=lambda x: 0.5 * N.sum(x ** 2, axis=-1), f_argnum=0):
    """Generalized Gauss-Newton products for `g(f(x))`: `make_ggnvp(f, g)(*args)(v) ==
    J_f^T H_g J_f v` (by default `g` is half the squared norm, `J_f^T J_f v`)."""
    api.check_callable(f, "make_ggnvp")

    def at(*args):
        fx_fn, x = _unary(f, f_argnum, args)

        def ggnvp(v):
            fx, jv = api.jvp(fx_fn, (x,), (v,))
            hjv = api.jvp(api.grad(g), (fx,), (jv,))[1]
            return api.vjp(fx_fn, x)[1](hjv)[0]
        return ggnvp
    return at


def multigrad_dict(fun):
    """The gradient with respect to every named argument at once: an `OrderedDict` of
    argument name to gradient, in the signature's order (defaults included)."""
    api.check_callable(fun, "multigrad_dict")
    signature = inspect.signature(fun)
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ArgumentError(f"multigrad_dict: {fun.__name__} takes *{p.name}; give it named arguments only")

    def gradients(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        names = list(bound.arguments)
        values = api.grad(lambda *a: fun(**dict(zip(names, a))), argnums=tuple(range(len(names))))(
            *bound.arguments.values())
        return collections.OrderedDict(zip(names, values))
    return gradients


def grad_named(fun, argname):
    """The gradient with respect to the argument named `argname`."""
    api.check_callable(fun, "grad_named")
    names = list(inspect.signature(fun).parameters)
    if argname not in names:
        raise ArgumentError(f"grad_named: {getattr(fun, '__name__', 'the function')} has no argument "
                            f"{argname!r}; its arguments are {names}")
    return api.grad(fun, argnums=names.index(argname))


def holomorphic_grad(fun, argnum=0):
    """autograd's `holomorphic_grad`: the complex derivative f'(z) of a holomorphic `fun`
    (`jitad.grad(fun, holomorphic=True)`).

    >>> holomorphic_grad(lambda z: z * z)(1.0 + 2.0j)
    (2+4j)
    """
    def real_part(*args, **kwargs):   # autograd's definition: the gradient of Re f, conjugated as any
        return parts(fun(*args, **kwargs))[0]
    return api.grad(real_part, argnums=argnum)
