"""autograd's `autograd.util`: small helpers, and `quick_grad_check`.

>>> from jitad.util import subval
>>> subval((1, 2, 3), 1, 9)
(1, 9, 3)
"""
import numpy as np

from .builtins import subvals  # noqa: F401
from .extend import vspace


def subval(x, i, v):
    """The tuple `x` with `v` at position `i`."""
    out = list(x)
    out[i] = v
    return tuple(out)


def func(f):
    """`f` itself (autograd's helper to name the function of a bound method)."""
    return f


def toposort(end_node, parents=lambda node: node.parents):
    """The nodes reachable from `end_node` through `parents`, each after every node
    that has it as a parent (`end_node` first)."""
    children = {}
    stack, seen = [end_node], {id(end_node)}
    while stack:
        node = stack.pop()
        for p in parents(node):
            children[id(p)] = children.get(id(p), 0) + 1
            if id(p) not in seen:
                seen.add(id(p))
                stack.append(p)
    ready, order = [end_node], []
    while ready:
        node = ready.pop()
        order.append(node)
        for p in parents(node):
            children[id(p)] -= 1
            if children[id(p)] == 0:
                ready.append(p)
    return order


def quick_grad_check(fun, arg0, extra_args=(), kwargs=None, verbose=True, eps=1e-4, rtol=1e-4, atol=1e-6,
                     rs=None):
    """Check `grad(fun)` at `arg0` along a random direction against central differences
    (through `jitad.testing.check_grads`); AssertionError when they disagree."""
    from .testing import check_grads
    kwargs = kwargs or {}
    check_grads(lambda x: fun(x, *extra_args, **kwargs), (arg0,), order=1, modes=("rev",), eps=eps,
                rtol=rtol, atol=atol, seed=0 if rs is None else int(np.asarray(rs.randint(1 << 30))))
    if verbose:
        print(f"Gradient projection OK (space of size {vspace(arg0).size})")
