"""The lowerer's MPI service `collective` (the LLVM rules of `allreduce` and `bcast`,
jitad/primitives/collectives.py, call it; jitad.distributed).

Compiled programs call two helpers by name,
`jitad_mpi_allreduce(ptr send, ptr recv, i64 count, i32 dtype, i32 reduce)` and
`jitad_mpi_bcast(ptr buf, i64 count, i32 dtype, i32 root)`, with `dtype` and `reduce`
indices into `DTYPES` and `REDUCE`. The helpers are built once per process around the MPI
library mpi4py loaded: its functions (`MPI_Allreduce`, ...) found through mpi4py's
extension module, the communicator, datatype and operation handles asked of mpi4py, so
nothing specific to a process or an MPI build enters a program or the disk cache.
"""
import ctypes
from types import SimpleNamespace

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np

from ..ir.ops import Op
from . import runtime
from .llvm import F64, I32, I64, LL, PTR, alloca, service

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
    c = _declarations(module, h, MPI)
    c.comm = comm

    def define(name, args, call):
        f = c.fn(name, ir.VoidType(), args)
        b = ir.IRBuilder(f.append_basic_block())
        rc = call(b, *f.args)
        with b.if_then(b.icmp_signed("!=", rc, I32(0)), likely=False):   # end the job, not hang it
            b.call(c.abort, [comm, rc])
        b.ret_void()
    define("jitad_mpi_helper_allreduce", [PTR, PTR, I64, I32, I32], lambda b, send, recv, n, dt, op: b.call(
        c.allreduce, [send, recv, b.trunc(n, I32), _pick(b, dt, types, h), _pick(b, op, ops, h), comm]))
    define("jitad_mpi_helper_bcast", [PTR, I64, I32, I32], lambda b, buf, n, dt, root: b.call(
        c.bcast, [buf, b.trunc(n, I32), _pick(b, dt, types, h), root, comm]))
    define("jitad_mpi_helper_allreduce_within", [PTR, PTR, I64, I32, I32, F64],
           lambda b, send, recv, n, dt, op, timeout: _within(b, c, timeout, lambda req: b.call(c.iallreduce, [
               send, recv, b.trunc(n, I32), _pick(b, dt, types, h), _pick(b, op, ops, h), comm, req])))
    define("jitad_mpi_helper_bcast_within", [PTR, I64, I32, I32, F64],
           lambda b, buf, n, dt, root, timeout: _within(b, c, timeout, lambda req: b.call(c.ibcast, [
               buf, b.trunc(n, I32), _pick(b, dt, types, h), root, comm, req])))
    return str(module)


def _declarations(module, h, MPI):
    """The MPI and libc functions the helpers call, declared in `module`, and the message
    a timed-out collective writes."""
    fn = lambda name, ret, args: ir.Function(module, ir.FunctionType(ret, args), name=name)
    c = SimpleNamespace(fn=fn, MPI=MPI)
    c.allreduce = fn("MPI_Allreduce", I32, [PTR, PTR, I32, h, h, h])
    c.bcast = fn("MPI_Bcast", I32, [PTR, I32, h, I32, h])
    c.abort = fn("MPI_Abort", I32, [h, I32])
    c.iallreduce = fn("MPI_Iallreduce", I32, [PTR, PTR, I32, h, h, h, PTR])
    c.ibcast = fn("MPI_Ibcast", I32, [PTR, I32, h, I32, h, PTR])
    c.test = fn("MPI_Test", I32, [PTR, PTR, PTR])
    c.wtime = fn("MPI_Wtime", F64, [])
    c.write, c.usleep = fn("write", I64, [I32, PTR, I64]), fn("usleep", I32, [I32])
    text = bytearray(TIMED_OUT.encode())
    c.message = ir.GlobalVariable(module, ir.ArrayType(ir.IntType(8), len(text)), "jitad_mpi_timed_out")
    c.message.initializer, c.message.global_constant = ir.Constant(c.message.type.pointee, text), True
    c.message_length = len(text)
    return c


def _within(b, c, timeout, start):
    """Start a non-blocking collective, test it until done; past `timeout` seconds, say so
    on stderr and end the job (compiled code cannot raise; after `init()` an error would)."""
    request = b.alloca(ir.ArrayType(ir.IntType(8), c.MPI._sizeof(c.MPI.Request)))
    status = b.alloca(ir.ArrayType(ir.IntType(8), c.MPI._sizeof(c.MPI.Status)))
    flag = b.alloca(I32)
    rc = start(request)
    with b.if_then(b.icmp_signed("!=", rc, I32(0)), likely=False):
        b.call(c.abort, [c.comm, rc])
    t0 = b.call(c.wtime, [])
    loop, done = b.append_basic_block("wait"), b.append_basic_block("done")
    b.branch(loop)
    b.position_at_end(loop)
    rc = b.call(c.test, [request, flag, status])
    with b.if_then(b.icmp_signed("!=", rc, I32(0)), likely=False):
        b.call(c.abort, [c.comm, rc])
    with b.if_then(b.fcmp_ordered(">", b.fsub(b.call(c.wtime, []), t0), timeout), likely=False):
        b.call(c.write, [I32(2), c.message, I64(c.message_length)])
        b.call(c.usleep, [I32(500000)])   # mpiexec forwards output asynchronously
        b.call(c.abort, [c.comm, I32(1)])
    b.cbranch(b.icmp_signed("!=", b.load(flag, typ=I32), I32(0)), done, loop)
    b.position_at_end(done)
    return I32(0)


TIMED_OUT = ("jitad.distributed: a compiled collective waited longer than its timeout= for the other ranks "
             "(one failed, hangs or calls collectives in another order); ending the job\n")


def register():
    """Compile the helpers for this process and register them with the JIT (once)."""
    global _ready
    with runtime._lock:
        if _ready:
            return
        from mpi4py import MPI
        lib = ctypes.CDLL(MPI.__file__)   # dlsym searches its dependencies too: the libmpi it links
        for name in ("MPI_Allreduce", "MPI_Bcast", "MPI_Abort", "MPI_Iallreduce", "MPI_Ibcast", "MPI_Test",
                     "MPI_Wtime"):
            llvm.add_symbol(name, ctypes.cast(getattr(lib, name), ctypes.c_void_p).value)
        libc = ctypes.CDLL(None)
        for name in ("write", "usleep"):
            llvm.add_symbol(name, ctypes.cast(getattr(libc, name), ctypes.c_void_p).value)
        j = runtime.jit()
        j.engine.add_module(j.optimize(_helpers(MPI)))
        j.engine.finalize_object()
        for name in ("allreduce", "bcast", "allreduce_within", "bcast_within"):
            llvm.add_symbol(f"jitad_mpi_{name}", j.engine.get_function_address(f"jitad_mpi_helper_{name}"))
        _ready = True


@service("collective")
def _collective(lo, node, ins):
    """`node`'s collective (`allreduce` or `bcast`) through the process's MPI library."""
    register()
    t = node.outputs[0].type
    count, dtype = I64(int(np.prod(t.shape, dtype=np.int64))), I32(DTYPES.index(t.dtype))
    if t.shape:
        out = lo.result_buffer(node.outputs[0])
        src = ins[0]
    else:   # scalars go through stack slots
        out, src = alloca(lo.b, LL[t.dtype]), alloca(lo.b, LL[t.dtype])
        lo.b.store(ins[0], src)
    timeout = node.attrs.get("timeout")   # seconds: the helper that gives up (and ends the job) then
    within, extra = ("_within", [F64]) if timeout else ("", [])
    if node.op == Op.ALLREDUCE:
        helper = lo.extern(f"jitad_mpi_allreduce{within}",
                           ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I32, I32] + extra))
        args = [src, out, count, dtype, I32(REDUCE.index(node.attrs["reduce"]))]
    else:
        lo.copy(out, src, t)
        helper = lo.extern(f"jitad_mpi_bcast{within}", ir.FunctionType(ir.VoidType(), [PTR, I64, I32, I32] + extra))
        args = [out, count, dtype, I32(node.attrs["root"])]
    lo.b.call(helper, args + ([F64(timeout)] if timeout else []))
    return [out] if t.shape else [lo.b.load(out, typ=LL[t.dtype])]
