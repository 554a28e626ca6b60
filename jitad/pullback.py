"""Reverse mode as a staged pullback: the cotangents of a function's arguments for a
cotangent of its output, emitted into the current trace (what `jitad.vjp`, custom rules
and Jacobians build on). Inside `vmap` the reverse pass is deferred (see
`jitad.batching.value_and_grad`)."""
import numpy as np

from . import timing
from .batching import value_and_grad as _reverse_or_defer
from .errors import ArgumentError, ShapeError
from .ir.types import TreeType
from .pytree import flatten, unflatten
from .staging import Staged, StagedTree, arg_type, as_var, is_staged, trace_program, wrap


def leaf_type(x):
    return x._var.type if isinstance(x, (Staged, StagedTree)) else arg_type(x)


def positive_zero(g):
    """A scalar gradient with -0.0 made 0.0: scalar adjoint slots start at -0.0
    (lower/llvm.py), so an input that no path reaches would otherwise read -0.0."""
    return g + 0.0 if is_staged(g) and g.shape == () else g


def staged_arg(x, t):
    if isinstance(x, (Staged, StagedTree)):
        return x
    return Staged(as_var(np.asarray(x) if t.shape else x, t.dtype))


def pullback_staged(fn, primals, ct, to_closure=True):
    """Emit the cotangents of `fn` at `primals` for output cotangent `ct`. When this runs
    inside a reverse pass (a custom rule) and `to_closure`, the cotangents of staged
    values `fn` closes over are added to their adjoints in that pass."""
    from .ad.reverse import adjoint_of, value_and_grad_staged
    flat, td = flatten(tuple(primals))
    types = [leaf_type(x) for x in flat]
    program, out_td, captured = trace_program(fn, tuple(primals), td, types)
    ct_leaves, ct_td = flatten(ct)
    if ct_td != out_td:
        raise ArgumentError("vjp: the cotangent must have the structure of the function's output")
    for k, (c, t) in enumerate(zip(ct_leaves, program.main.out_types)):
        shape = tuple(c.shape if is_staged(c) else np.shape(c))
        if shape != t.shape:
            raise ShapeError(f"vjp: a cotangent of shape {shape} for output {k} of shape {t.shape}; "
                             "the cotangent must have the output's shape")
    wrt = [k for k, t in enumerate(types) if not isinstance(t, TreeType) and t.dtype in ("f64", "f32")]
    closure = [len(flat) + j for j, v in enumerate(captured) if to_closure and adjoint_of(v) is not None]
    staged = [staged_arg(x, t) for x, t in zip(flat, types)] + [wrap(v) for v in captured]
    seeds = [(k, c) for k, c in enumerate(ct_leaves)]
    with timing.stage("ad"):
        _, grads = (_reverse_or_defer if not closure else value_and_grad_staged)(program, staged, wrt + closure, seeds)
    by_leaf = dict(zip(wrt, map(positive_zero, grads)))
    from .staging import slot_add
    for j, g in zip(closure, grads[len(wrt):]):
        slot_add(adjoint_of(captured[j - len(flat)]), g)
    cts = [by_leaf[k] if k in by_leaf else None for k in range(len(flat))]
    out = []
    start = 0
    for p in primals:
        n = len(flatten(p)[0])
        out.append(unflatten(flatten(p)[1], cts[start:start + n]))
        start += n
    return tuple(out)
