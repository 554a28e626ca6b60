"""LLVM lowering of the collectives `allreduce` and `bcast` (jitad.distributed).

Compiled programs call two helpers by name,
`jitad_mpi_allreduce(ptr send, ptr recv, i64 count, i32 dtype, i32 reduce)` and
`jitad_mpi_bcast(ptr buf, i64 count, i32 dtype, i32 root)`, with `dtype` and `reduce`
indices into `DTYPES` and `REDUCE`. The helpers are built once per process around the MPI
library mpi4py loaded: its functions (`MPI_Allreduce`, ...) found through mpi4py's
extension module, the communicator, datatype and operation handles asked of mpi4py, so
nothing specific to a process or an MPI build enters a program or the disk cache.
"""
import ctypes

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np

from .. import distributed  # noqa: F401  (declares the collectives)
from ..ir.ops import Op
from . import runtime
from .llvm import I32, I64, LL, PTR, alloca, rule

DTYPES = ("f64", "f32", "i64")
REDUCE = ("sum", "max", "min")
_ready = False


def _pick(b, index, handles, ty):
    """handles[index] for a run-time `index` (a chain of selects)."""
    out = ty(handles[-1])
    for k in range(len(handles) - 2, -1, -1):
        out = b.select(b.icmp_signed("==", index, I32(k)), ty(handles[k]), out)
    return out


def _helpers(MPI):
    """The LLVM IR of the two helpers, for the MPI library mpi4py loaded."""
    sizes = {MPI._sizeof(t) for t in (MPI.Comm, MPI.Datatype, MPI.Op)}
    assert len(sizes) == 1, sizes
    h = ir.IntType(8 * sizes.pop())   # MPICH: int handles; pointer-sized ones pass the same way
    comm = h(MPI._handleof(MPI.COMM_WORLD))
    types = [MPI._handleof(t) for t in (MPI.DOUBLE, MPI.FLOAT, MPI.INT64_T)]
    ops = [MPI._handleof(o) for o in (MPI.SUM, MPI.MAX, MPI.MIN)]
    module = runtime.new_module("jitad_mpi")
    fn = lambda name, ret, args: ir.Function(module, ir.FunctionType(ret, args), name=name)
    mpi_allreduce = fn("MPI_Allreduce", I32, [PTR, PTR, I32, h, h, h])
    mpi_bcast = fn("MPI_Bcast", I32, [PTR, I32, h, I32, h])
    mpi_abort = fn("MPI_Abort", I32, [h, I32])

    def define(name, args, call):
        f = fn(name, ir.VoidType(), args)
        b = ir.IRBuilder(f.append_basic_block())
        rc = call(b, *f.args)
        with b.if_then(b.icmp_signed("!=", rc, I32(0)), likely=False):   # end the job, not hang it
            b.call(mpi_abort, [comm, rc])
        b.ret_void()
    define("jitad_mpi_helper_allreduce", [PTR, PTR, I64, I32, I32], lambda b, send, recv, n, dt, op: b.call(
        mpi_allreduce, [send, recv, b.trunc(n, I32), _pick(b, dt, types, h), _pick(b, op, ops, h), comm]))
    define("jitad_mpi_helper_bcast", [PTR, I64, I32, I32], lambda b, buf, n, dt, root: b.call(
        mpi_bcast, [buf, b.trunc(n, I32), _pick(b, dt, types, h), root, comm]))
    return str(module)


def register():
    """Compile the helpers for this process and register them with the JIT (once)."""
    global _ready
    with runtime._lock:
        if _ready:
            return
        from mpi4py import MPI
        lib = ctypes.CDLL(MPI.__file__)   # dlsym searches its dependencies too: the libmpi it links
        for name in ("MPI_Allreduce", "MPI_Bcast", "MPI_Abort"):
            llvm.add_symbol(name, ctypes.cast(getattr(lib, name), ctypes.c_void_p).value)
        j = runtime.jit()
        j.engine.add_module(j.optimize(_helpers(MPI)))
        j.engine.finalize_object()
        for name in ("allreduce", "bcast"):
            llvm.add_symbol(f"jitad_mpi_{name}", j.engine.get_function_address(f"jitad_mpi_helper_{name}"))
        _ready = True


@rule(Op.ALLREDUCE, Op.BCAST)
def _collective(lo, node, ins):
    register()
    t = node.outputs[0].type
    count, dtype = I64(int(np.prod(t.shape, dtype=np.int64))), I32(DTYPES.index(t.dtype))
    if t.shape:
        out = lo.result_buffer(node.outputs[0])
        src = ins[0]
    else:   # scalars go through stack slots
        out, src = alloca(lo.b, LL[t.dtype]), alloca(lo.b, LL[t.dtype])
        lo.b.store(ins[0], src)
    if node.op == Op.ALLREDUCE:
        helper = lo.extern("jitad_mpi_allreduce", ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I32, I32]))
        lo.b.call(helper, [src, out, count, dtype, I32(REDUCE.index(node.attrs["reduce"]))])
    else:
        lo.copy(out, src, t)
        helper = lo.extern("jitad_mpi_bcast", ir.FunctionType(ir.VoidType(), [PTR, I64, I32, I32]))
        lo.b.call(helper, [out, count, dtype, I32(node.attrs["root"])])
    return [out] if t.shape else [lo.b.load(out, typ=LL[t.dtype])]
