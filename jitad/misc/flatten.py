"""autograd's `flatten`: a nest of tuples, lists and dicts (keys sorted) of arrays as one
flat vector and the function that rebuilds it; eager or inside staged code.

>>> from jitad.misc import flatten
>>> flat, unflatten = flatten({"w": np.ones((2, 2)), "b": np.zeros(2)})
>>> flat.shape
(6,)
"""
from ..flatten_util import ravel_pytree


def flatten(value):
    """`(flat, unflatten)` of a nest of containers with arrays or scalars at the leaves."""
    return ravel_pytree(value)


def flatten_func(func, example):
    """`(flat_func, unflatten, flat_example)`: `func` of a pytree like `example` as a function
    of a flat vector (its extra arguments passed through)."""
    flat_example, unflatten = flatten(example)
    return (lambda x, *args: flatten(func(unflatten(x), *args))[0]), unflatten, flat_example

from ..builtins import type  # noqa: E402,F401,A001  (autograd's names in its module)
from ..differential_operators import make_vjp  # noqa: E402,F401
