"""The collectives `allreduce` and `bcast` (MPI): declarations and derivative rules.

Effects: never removed or fused. `reduce` is "sum", "max" or "min" (staging makes "mean"
a sum and a division). The public functions, and the NumPy meaning (MPI's eager path,
beside the communicator), are in jitad/distributed.py. Compiled, they call the process's MPI
library through the lowerer's `collective` service; they run on the CPU backend only.
"""
from ..errors import DistributedError
from ..ir.ops import Op, declare, shape_rule
# N: jitad.numeric, the staged math the derivative rules are written in (see rules.N)
from .rules import N


def _not_differentiable(reduce):
    return DistributedError(f"allreduce(op={reduce!r}) has no derivative rule here; use "
                            "op='sum' or 'mean', or apply jitad.stop_gradient to its input")


def _rank():
    """This process's rank. A staged collective exists only in a job of several processes,
    after `jitad.distributed.init()` took mpi4py's COMM_WORLD as its communicator."""
    from mpi4py import MPI
    return MPI.COMM_WORLD.Get_rank()


def _timeout_attr(timeout):
    return {} if timeout is None else {"timeout": timeout}


def allreduce_vjp(g, reduce, timeout=None):
    """y = sum over ranks of x: each rank's cotangent is the sum of all ranks' cotangents."""
    if reduce != "sum":
        raise _not_differentiable(reduce)
    return N.bind(Op.ALLREDUCE, g, reduce="sum", **_timeout_attr(timeout))


def broadcast_vjp(g, root, timeout=None):
    """y = x on root: root's cotangent sums every rank's; the others' inputs get none (they
    still take part in the sum, a collective)."""
    total = N.bind(Op.ALLREDUCE, g, reduce="sum", **_timeout_attr(timeout))
    return total if _rank() == root else None


def _collective_jvp(node, tangents, primals, out):
    """Both collectives are linear (allreduce for op='sum'): the tangent goes through them."""
    if node.op == Op.ALLREDUCE and node.attrs["reduce"] != "sum":
        raise _not_differentiable(node.attrs["reduce"])
    return N.bind(node.op, tangents[0], **node.attrs)


def _collective_llvm(lo, node, ins):
    return lo.collective(node, ins)


declare("allreduce", shape_rule(lambda types, reduce, timeout=None: types[0].shape), arity=1, jvp=_collective_jvp,
        vjp=lambda g, x, out, reduce, timeout=None: (allreduce_vjp(g, reduce, timeout),), llvm=_collective_llvm)
declare("bcast", shape_rule(lambda types, root, timeout=None: types[0].shape), arity=1, jvp=_collective_jvp,
        vjp=lambda g, x, out, root, timeout=None: (broadcast_vjp(g, root, timeout),), llvm=_collective_llvm)
