"""Reverse mode as a staged pullback: the cotangents of a function's arguments for a
cotangent of its output, emitted into the current trace (what `jitad.vjp`, custom rules
and Jacobians build on). Inside `vmap` the reverse pass is deferred (see
`jitad.transforms.vmap.value_and_grad`)."""
import numpy as np

from .. import timing
from .jvp import contains_effects
from .vmap import deferring_reverse, value_and_grad as _reverse_or_defer
from ..errors import ArgumentError, JitadError, ShapeError
from ..ir.graph import walk
from ..ir.ops import Op
from ..ir.types import FLOATS, NUMPY, TreeType
from ..pytree import flatten, unflatten
from ..staging import Staged, StagedTree, arg_type, as_var, is_staged, trace_program, wrap


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
    from .vjp import adjoint_of, value_and_grad_staged
    flat, td = flatten(tuple(primals))
    types = [leaf_type(x) for x in flat]
    program, out_td, captured = trace_program(fn, tuple(primals), td, types)
    if contains_effects(program) and not (to_closure and adjoint_of_any(captured)):
        program, captured = reverse_ready(fn, tuple(primals), td, types) or (program, captured)
    ct_leaves, ct_td = flatten(ct)
    if ct_td != out_td:
        raise ArgumentError("vjp: the cotangent must have the structure of the function's output")
    for k, (c, t) in enumerate(zip(ct_leaves, program.main.out_types)):
        shape = tuple(c.shape if is_staged(c) else np.shape(c))
        if shape != t.shape:
            raise ShapeError(f"vjp: a cotangent of shape {shape} for output {k} of shape {t.shape}; "
                             "the cotangent must have the output's shape")
    wrt = [k for k, t in enumerate(types) if not isinstance(t, TreeType) and t.dtype in FLOATS]
    closure = [len(flat) + j for j, v in enumerate(captured) if to_closure and adjoint_of(v) is not None]
    staged = [staged_arg(x, t) for x, t in zip(flat, types)] + [wrap(v) for v in captured]
    seeds = [(k, c) for k, c in enumerate(ct_leaves)]
    with timing.stage("ad"):
        if contains_effects(program) and not closure:   # fn itself takes a gradient: go forward
            _, grads = grad_by_forward_mode(program, staged, wrt, "vjp", seeds)
        else:
            _, grads = (_reverse_or_defer if not closure else value_and_grad_staged)(program, staged, wrt + closure, seeds)
    by_leaf = dict(zip(wrt, map(positive_zero, grads)))
    from ..staging import slot_add
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


def adjoint_of_any(captured):
    from .vjp import adjoint_of
    return any(adjoint_of(v) is not None for v in captured)


def reverse_ready(fn, args, td, types):
    """`fn` traced again with the gradients it takes inside as `deferred_vjp` nodes (pure),
    which reverse mode differentiates by their own rule (forward-over-reverse: see
    `jitad.transforms.vjp`), so a function that takes gradients is differentiated in one
    reverse pass, not one forward pass per input element: `(program, captured)`, or None
    where reverse-mode code remains, a deferred pass sits inside a loop, branch or function
    body, or the trace needs a value a deferred pass has not computed yet."""
    traced = deferred_trace(fn, args, td, types)
    return None if traced is None else (traced[0], traced[2])


def deferred_trace(fn, args, td, types):
    """`reverse_ready`'s trace as `trace_program` gives it, `(program, out_td, captured)`, or None."""
    try:
        with deferring_reverse():
            program, out_td, captured = trace_program(fn, args, td, types)
    except JitadError:
        return None
    if contains_effects(program) or not _deferred_at_top(program):
        return None
    return program, out_td, captured


def _deferred_at_top(program):
    """Every `deferred_vjp` node of `program` (and of theirs) is a node of its main graph."""
    top = {id(n) for n in program.main.nodes}
    for graph in [program.main] + [f.body for f in program.funs]:
        for node in walk(graph):
            if node.op == Op.DEFERRED_VJP and (id(node) not in top or not _deferred_at_top(node.attrs["program"])):
                return False
    return True


MAX_FORWARD_DIRECTIONS = 256


def grad_by_forward_mode(program, args, wrt, who, seeds=((0, None),)):
    """The gradient of sum <seed, output> (by default output 0) as one forward-mode pass
    per input element: for programs that themselves contain reverse mode (grad of grad,
    grad or vjp of a function calling grad or vjp)."""
    from .. import numeric as N
    from .jvp import jvp_graph
    total = sum(max(1, int(np.prod(args[k].shape, dtype=np.int64))) for k in wrt)
    if total > MAX_FORWARD_DIRECTIONS:
        raise ArgumentError(f"{who}: differentiating a function that itself takes a gradient needs "
                            f"one forward pass per input element, and there are {total} (limit "
                            f"{MAX_FORWARD_DIRECTIONS}); use jitad.hvp or jitad.hessian (forward-over-reverse)")
    outs, grads = None, []
    for k in wrt:
        shape, dtype = args[k].shape, args[k].ir_dtype
        parts = []
        for e in range(max(1, int(np.prod(shape, dtype=np.int64)))):
            direction = np.zeros(shape, NUMPY[dtype])
            direction.reshape(-1)[e] = 1.0
            pairs = [(a, (staged_arg(direction if shape else 1.0, args[k]._var.type) if j == k else None))
                     for j, a in enumerate(args)]
            result = jvp_graph(program.main, pairs)
            outs = [p for p, _ in result]
            parts.append(_along(result, seeds))
        grads.append(N.reshape(N.stack([N.convert(p, dtype) if is_staged(p) else p for p in parts]), shape)
                     if shape else parts[0])
    return outs, grads


def _along(result, seeds):
    """sum_j <seed_j, tangent of output j> over jvp results (a None seed: the tangent
    itself; a None tangent: zero)."""
    from .. import numeric as N
    parts = []
    for j, c in seeds:
        t = result[j][1]
        if t is not None:
            parts.append(t if c is None else N.sum(t * c))
    return sum(parts[1:], parts[0]) if parts else 0.0
