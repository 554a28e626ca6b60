"""CPython entry points for compiled programs, written in LLVM IR.

`PyObject *entry(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)`
is a METH_FASTCALL|METH_KEYWORDS function: it checks the exact type of each argument,
unboxes, runs `main` with a stack budget, and boxes the results (nested tuples built
here). On a type mismatch or keywords it forwards the call to `self[0]` (the Python
dispatcher); when the stack budget ran out it forwards to `self[1]` (which retries on
a thread with a larger stack, or raises `ResourceError`), and when the tensor arena
ran out, to `self[2]`.

Tensors and trees arrive as addresses (Python ints, checked by the dispatcher); a
tensor result is copied into an output buffer whose address follows the inputs.
"""
import llvmlite.ir as ir

from ..ir.types import TreeType
from .llvm import ARENA_EXHAUSTED, CTX, ELEMENT_BYTES, F32, F64, I1, I8, I32, I64, PTR, alloca, ret_type

C_INT = ir.IntType(32)
PY_API = {
    "PyFloat_AsDouble": ir.FunctionType(F64, [PTR]),
    "PyFloat_FromDouble": ir.FunctionType(PTR, [F64]),
    "PyLong_AsLongLong": ir.FunctionType(I64, [PTR]),
    "PyLong_FromLongLong": ir.FunctionType(PTR, [I64]),
    "PyBool_FromLong": ir.FunctionType(PTR, [I64]),
    "PyErr_Occurred": ir.FunctionType(PTR, []),
    "PyTuple_New": ir.FunctionType(PTR, [I64]),
    "PyTuple_SetItem": ir.FunctionType(C_INT, [PTR, I64, PTR]),
    "PyTuple_GetItem": ir.FunctionType(PTR, [PTR, I64]),
    "PyObject_Vectorcall": ir.FunctionType(PTR, [PTR, PTR, I64, PTR]),
}
PY_DATA = {"float": "PyFloat_Type", "int": "PyLong_Type", "bool": "PyBool_Type", "True": "_Py_TrueStruct"}
_EXPECTED = {"f64": "float", "f32": "float", "i64": "int", "bool": "bool"}


def _api(module, name):
    try:
        return module.get_global(name)
    except KeyError:
        if name in PY_API:
            return ir.Function(module, PY_API[name], name=name)
        g = ir.GlobalVariable(module, I8, name=name)
        g.linkage = "external"
        return g


def _by_address(t):
    return isinstance(t, TreeType) or bool(t.shape)


def add_entry(module, main, in_types, out_types, layout, name, stack_budget):
    """Define the entry `name` calling `main`; `layout` nests the indices of the scalar
    results in lists (tuples)."""
    tensor_outs = [k for k, t in enumerate(out_types) if t.shape]
    in_types = list(in_types) + [out_types[k] for k in tensor_outs]   # output buffers
    fn = ir.Function(module, ir.FunctionType(PTR, [PTR, PTR, I64, PTR]), name=name)
    self_, args, nargs, kwnames = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    api = lambda n: _api(module, n)
    fallback = fn.append_basic_block("fallback")

    def forward(slot):
        handler = b.call(api("PyTuple_GetItem"), [self_, I64(slot)])
        b.ret(b.call(api("PyObject_Vectorcall"), [handler, args, nargs, kwnames]))

    ok = b.and_(b.icmp_unsigned("==", kwnames, PTR(None)), b.icmp_signed("==", nargs, I64(len(in_types))))
    objs = []
    for k, t in enumerate(in_types):
        nxt = fn.append_basic_block(f"arg{k}")
        b.cbranch(ok, nxt, fallback)
        b.position_at_end(nxt)
        obj = b.load(b.gep(args, [I64(k)], source_etype=PTR), typ=PTR)
        ob_type = b.load(b.gep(obj, [I64(8)], source_etype=I8), typ=PTR)
        expected = "int" if _by_address(t) else _EXPECTED[t.dtype]
        ok = b.icmp_unsigned("==", ob_type, api(PY_DATA[expected]))
        objs.append(obj)
    unbox = fn.append_basic_block("unbox")
    b.cbranch(ok, unbox, fallback)
    b.position_at_end(fallback)
    forward(0)

    b.position_at_end(unbox)
    values = []
    for obj, t in zip(objs, in_types):
        if _by_address(t) or t.dtype == "i64":
            v = b.call(api("PyLong_AsLongLong"), [obj])
            failed = b.and_(b.icmp_signed("==", v, I64(-1)),
                            b.icmp_unsigned("!=", b.call(api("PyErr_Occurred"), []), PTR(None)))
            with b.if_then(failed, likely=False):
                b.ret(PTR(None))   # OverflowError is set
            values.append(b.inttoptr(v, PTR) if _by_address(t) else v)
        elif t.dtype == "bool":
            values.append(b.icmp_unsigned("==", obj, api(PY_DATA["True"])))
        else:
            v = b.call(api("PyFloat_AsDouble"), [obj])
            values.append(b.fptrunc(v, F32) if t.dtype == "f32" else v)

    ctx, out = alloca(b, CTX), alloca(b, ret_type(out_types))
    frameaddress = module.get_global("llvm.frameaddress.p0") if "llvm.frameaddress.p0" in module.globals \
        else ir.Function(module, ir.FunctionType(PTR, [I32]), name="llvm.frameaddress.p0")
    sp = b.ptrtoint(b.call(frameaddress, [I32(0)]), I64)
    field = lambda k: b.gep(ctx, [I32(0), I32(k)], source_etype=CTX)
    b.store(b.sub(sp, I64(stack_budget)), field(0))
    b.store(I32(0), field(1))
    arena = _api(module, "jitad_arena")   # {base, end}, set up by the runtime
    for k in (0, 1):
        b.store(b.load(b.gep(arena, [I64(8 * k)], source_etype=I8), typ=PTR), field(2 + k))
    n_in = len(in_types) - len(tensor_outs)
    b.call(main, [ctx] + values[:n_in] + [out])
    status = b.load(field(1), typ=I32)
    with b.if_then(b.icmp_unsigned("!=", status, I32(0)), likely=False):
        with b.if_else(b.icmp_unsigned("==", status, I32(ARENA_EXHAUSTED))) as (arena_full, deep):
            with arena_full:
                forward(2)
            with deep:
                forward(1)

    rt = ret_type(out_types)
    leaves = [b.load(b.gep(out, [I32(0), I32(k)], source_etype=rt), typ=rt.elements[k])
              for k in range(len(out_types))]
    memcpy = _api(module, "llvm.memcpy.p0.p0.i64") if "llvm.memcpy.p0.p0.i64" in module.globals else \
        ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I1]), name="llvm.memcpy.p0.p0.i64")
    for dst, k in zip(values[n_in:], tensor_outs):
        t = out_types[k]
        nbytes = int(__import__("numpy").prod(t.shape, dtype="int64")) * ELEMENT_BYTES[t.dtype]
        b.call(memcpy, [dst, leaves[k], I64(nbytes), I1(0)])

    def box(node):
        if isinstance(node, int):
            v, t = leaves[node], out_types[node]
            if t.dtype == "bool":
                return b.call(api("PyBool_FromLong"), [b.zext(v, I64)])
            if t.dtype == "i64":
                return b.call(api("PyLong_FromLongLong"), [v])
            return b.call(api("PyFloat_FromDouble"), [b.fpext(v, F64) if t.dtype == "f32" else v])
        tup = b.call(api("PyTuple_New"), [I64(len(node))])
        for k, child in enumerate(node):
            b.call(api("PyTuple_SetItem"), [tup, I64(k), box(child)])
        return tup

    b.ret(box(layout))
    return fn
