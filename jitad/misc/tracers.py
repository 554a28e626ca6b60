"""autograd's `autograd.misc.tracers`: `const_graph`, a function whose graph is traced
once and then reused (in jitad: compiled once per signature).

>>> from jitad.misc.tracers import const_graph
>>> f = const_graph(lambda x, y: x * y, 3.0)
>>> f(4.0)
12.0
"""
import functools

from ..api import jit

__all__ = ["const_graph", "const_graph_unary"]


def const_graph_unary(fun):
    """`fun` of one argument, traced and compiled once per signature of that argument."""
    return jit(fun)


def const_graph(fun, *args, **kwargs):
    """`fun` with `args` and `kwargs` bound first, compiled: calls with new values of the
    remaining arguments reuse the traced program."""
    bound = functools.partial(fun, *args, **kwargs)
    compiled = jit(lambda rest: bound(*rest))

    @functools.wraps(fun)
    def call(*rest):
        return compiled(rest)
    return call
