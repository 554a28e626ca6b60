"""The staged entry of each transformation: trace a Python function on the call's
arguments and emit its transformed program into the current trace. The user's API
(`jitad.api`) compiles these; the Jacobians build on them."""
import numpy as np

from .. import timing
from ..errors import ArgumentError, check_argnums
from ..ir.types import FLOATS, NUMPY, TreeType
from ..pytree import flatten, unflatten
from ..staging import Staged, StagedTree, trace_program, wrap
from .jvp import contains_effects
from ..ir.ops import Op
from ..staging.concrete import VALUE_RULES, NoValue, constant_values, frame_values, held_prints
from .vjp import value_and_grad_staged as value_and_grad_staged_program
from .pullback import deferred_trace, grad_by_forward_mode, leaf_type, positive_zero, reverse_ready, staged_arg
from .vmap import value_and_grad as _reverse_or_defer


def value_and_grad_staged(fn, args, argnums, has_aux, who):
    """Trace `fn(*args)` and emit its value and reverse-mode gradient into the current trace."""
    nums = check_argnums(argnums, who)
    for i in nums:
        if not 0 <= i < len(args):
            raise ArgumentError(f"{who}: argnums={argnums!r} but the function got {len(args)} "
                                "positional arguments")
    flat, wrt, wrt_tds = [], [], {}
    for i, a in enumerate(args):
        leaves, td = flatten(a)
        if i in nums:
            wrt_tds[i] = (len(wrt), len(leaves), td)
            wrt += range(len(flat), len(flat) + len(leaves))
        flat += leaves
    types = [leaf_type(x) for x in flat]
    for k in wrt:
        if isinstance(types[k], TreeType) or types[k].dtype not in FLOATS:
            raise ArgumentError(f"{who}: cannot differentiate with respect to a value of type "
                                f"{types[k]} (argument leaf {k}); only float arguments have gradients. "
                                "Pass it as a float, or leave it out of argnums")
    program, out_td, captured = _trace_for_reverse(fn, args, flatten(args)[1], types)
    value_td = out_td.children[0] if has_aux and out_td.kind == "tuple" and len(out_td.children) == 2 else out_td
    if has_aux and value_td is out_td:
        raise ArgumentError(f"{who}: with has_aux=True the function must return a pair (value, aux)")
    out_types = program.main.out_types
    if value_td.kind != "leaf" or out_types[0].shape != () or out_types[0].dtype not in FLOATS:
        got = out_types[0] if value_td.kind == "leaf" else "a pytree"
        raise ArgumentError(f"{who}: the function must return a float scalar to differentiate, got "
                            f"{got}; reduce it first (e.g. with a sum) or use jitad.vjp")
    staged = [staged_arg(x, t) for x, t in zip(flat, types)] + [wrap(v) for v in captured]
    if contains_effects(program):
        with timing.stage("ad"):
            outs, grads = grad_by_forward_mode(program, staged, wrt, who)
    else:
        with timing.stage("ad"):
            outs, grads = _reverse_or_defer(program, staged, wrt)
        grads = [positive_zero(g) for g in grads]
    value = outs[0]
    if has_aux:
        value = (value, unflatten(out_td.children[1], outs[1:]))
    per_arg = [unflatten(td, grads[start:start + n]) for start, n, td in map(wrt_tds.get, nums)]   # in the order asked
    return value, (per_arg[0] if isinstance(argnums, (int, np.integer)) else tuple(per_arg))


def _deferred_value(node, ins):
    """The values of a `deferred_vjp` node while tracing with values (a function deciding in
    Python on an inner gradient): its program's outputs and gradients, by the reference
    interpreter on the reverse-mode program of its program, traced apart (once a trace: the
    trace keeps the values)."""
    from ..ir.interpret import interpret
    program, wrt, seeds = node.attrs["program"], node.attrs["wrt"], node.attrs["seeds"]
    types = [v.type for v in node.inputs]
    if any(isinstance(t, TreeType) for t in types):
        raise NoValue(node.outputs[0])
    n = len(program.main.params)

    def both(*flat):
        outs, grads = value_and_grad_staged_program(program, list(flat[:n]), wrt, list(zip(seeds, flat[n:])))
        return tuple(outs) + tuple(grads)
    with constant_values():
        reverse = trace_program(both, tuple(ins), flatten(tuple(ins))[1], types)[0]
    return [np.asarray(v, NUMPY[var.type.dtype])[()] for v, var in zip(interpret(reverse, list(ins)), node.outputs)]


VALUE_RULES[Op.DEFERRED_VJP] = _deferred_value


def _trace_for_reverse(fn, args, td, types):
    """`fn` traced for reverse mode, `(program, out_td, captured)`: a function that takes
    gradients itself is traced with them deferred (`reverse_ready`), else reverse mode cannot
    reverse it. Traced from Python with the call's values, the deferred trace comes first, so
    that the function runs once (its prints, its host draws; a decision on an inner
    gradient's value computes it: `_deferred_value`); only where that trace does not serve
    (a deferred pass inside a body) is it traced again as it is, and the dispatcher's memo
    (`ConcreteTrace.memo`) keeps that for the function's later traces (another path, other
    shapes), which are traced as it is at once."""
    c = frame_values()
    if c is not None:
        memo = c.memo if c.memo is not None else {}
        place = ("deferred trace fails", getattr(fn, "__code__", type(fn)), tuple(g.key() for g in c.guards))
        if place in memo:
            return trace_program(fn, args, td, types)
        with held_prints() as held:   # (printed once the trace is kept)
            try:
                first = deferred_trace(fn, args, td, types)
            except Exception:   # (Python code that cannot take a deferred value: traced as it is below)
                first = None
        if first is not None:
            held.release()
            return first
        memo[place] = True
        return trace_program(fn, args, td, types)
    program, out_td, captured = trace_program(fn, args, td, types)
    if contains_effects(program):   # the function itself takes a gradient: defer it, else go forward
        program, captured = reverse_ready(fn, args, td, types) or (program, captured)
    return program, out_td, captured


def jvp_staged(fn, primals, tangents):
    from .jvp import jvp_graph
    flat, td = flatten(primals)
    flat_t, td_t = flatten(tangents)
    if td != td_t:
        raise ArgumentError("jvp: primals and tangents must have the same structure")
    types = [leaf_type(x) for x in flat]
    program, out_td, captured = trace_program(fn, primals, td, types)
    pairs = []
    for x, t, ty in zip(flat, flat_t, types):
        if isinstance(ty, TreeType) or ty.dtype not in FLOATS:
            pairs.append((staged_arg(x, ty), None))
        else:
            if np.shape(t) != ty.shape:
                raise ArgumentError(f"jvp: a tangent of shape {np.shape(t)} for a primal of shape {ty.shape}")
            pairs.append((staged_arg(x, ty), _tangent_as(staged_arg(t, ty), ty)))
    with timing.stage("ad"):
        result = jvp_graph(program.main, pairs + [(wrap(v), None) for v in captured])
    outs = [p for p, _ in result]
    tans = [t if t is not None else zero_tangent(v.type) for (_, t), v in zip(result, program.main.outputs)]
    return unflatten(out_td, outs), unflatten(out_td, tans)


def _tangent_as(tangent, ty):
    """A tangent in its primal's dtype (a float64 direction for a float32 primal is rounded)."""
    from ..ir.types import NUMPY
    if isinstance(tangent, Staged) and tangent.ir_dtype != ty.dtype:
        return tangent.astype(NUMPY[ty.dtype])
    return tangent


def zero_tangent(t):
    """The zero tangent of an output of type `t`; an int or bool output's is zeros of its
    own dtype (JAX's float0 has no jitad counterpart)."""
    from ..ir.types import NUMPY
    from .jvp import zeros
    return zeros(t) if t.dtype in FLOATS else np.zeros(t.shape, NUMPY[t.dtype])


def linearize_staged(fn, primals):
    """`(fn(*primals), tangent_fn)`: the primal emitted once; each `tangent_fn(*tangents)`
    call emits only the tangent computation (None or a constant zero for a tangent: no
    code for it). None when the program holds reverse-mode code (effects)."""
    from .jvp import linearize_graph
    flat, td = flatten(primals)
    types = [leaf_type(x) for x in flat]
    program, out_td, captured = trace_program(fn, primals, td, types)
    if contains_effects(program):
        return None
    with timing.stage("ad"):
        outs, tangents = linearize_graph(program.main, [staged_arg(x, t) for x, t in zip(flat, types)]
                                         + [wrap(v) for v in captured])

    def tangent_fn(*tans):
        flat_t, td_t = flatten(tans)
        if td_t != td:
            raise ArgumentError("linearize: the tangents must have the primals' structure")
        ts = []
        for t, ty in zip(flat_t, types):
            if isinstance(ty, TreeType) or ty.dtype not in FLOATS or is_constant_zero(t):
                ts.append(None)
            elif np.shape(t) != ty.shape:
                raise ArgumentError(f"linearize: a tangent of shape {np.shape(t)} for a primal of shape {ty.shape}")
            else:
                ts.append(_tangent_as(staged_arg(t, ty), ty))
        with timing.stage("ad"):
            out_t = tangents(ts + [None] * len(captured))
        return unflatten(out_td, [t if t is not None else zero_tangent(v.type) for t, v in zip(out_t, program.main.outputs)])
    return unflatten(out_td, outs), tangent_fn


def is_constant_zero(t):
    """A tangent known zero when staged (a NumPy or Python zero): it makes no code."""
    return not isinstance(t, (Staged, StagedTree)) and not np.any(np.asarray(t))
