"""Sorting along the last axis: `sort` (the values, NaNs last) and `argsort` (the stable
permutation, as NumPy's kind='stable'). Both backends sort rows with the kernel their
lowerer / runner offers (`sort_rows`: natively a merge sort, or NumPy's vectorized
quicksort for `sort` where the process has it; on the GPU a thread per row). The public
`jitad.sort`/`argsort`/`top_k` are in jitad/numpy_api.py."""
import numpy as np

from ..ir.ops import Op, declare, shape_rule
from ..ir.types import Type
# N: jitad.numeric, the staged math the derivative rules are written in (see rules.N)
from .rules import N, batch_stacked, zero_gradient


def _along_last(v, index):
    # numpy_api's take_along_axis, found through numeric: its index arithmetic (broadcast,
    # negative indices, clamp) is written once, there
    return N.NUMPY_API["take_along_axis"](v, index, -1)


def _sort_vjp(g, x, out):
    """The cotangent goes back through the permutation: entry `perm[j]` of x receives g[j],
    a gather of g by the inverse permutation (the argsort of the permutation)."""
    return (_along_last(g, N.bind(Op.ARGSORT, N.bind(Op.ARGSORT, x))),)


def _sort_jvp(node, tangents, primals, out):
    return _along_last(tangents[0], N.bind(Op.ARGSORT, primals[0]))


def _sort_llvm(lo, node, ins):   # (argsort too: the permutation instead of the values)
    out = lo.result_buffer(node.outputs[0])
    lo.sort_rows(out, ins[0], node.inputs[0].type, indices=node.op == Op.ARGSORT)
    return [out]


def _sort_cuda(rt, node, ins):
    out = rt.alloc(node.outputs[0].type)
    rt.sort_rows(node, out, ins[0], node.inputs[0].type.shape, indices=node.op == Op.ARGSORT)
    return [out]


declare("sort", shape_rule(lambda types: types[0].shape), lambda x: np.sort(x, axis=-1),
        arity=1, flags="pure kernel", vjp=_sort_vjp, jvp=_sort_jvp, batch=batch_stacked,
        llvm=_sort_llvm, cuda=_sort_cuda)   # (along the last axis)
declare("argsort", lambda op, types, attrs, bodies: [Type("i64", types[0].shape)],
        lambda x: np.argsort(x, axis=-1, kind="stable"), arity=1, flags="pure kernel", vjp=zero_gradient,
        batch=batch_stacked, llvm=_sort_llvm, cuda=_sort_cuda)
