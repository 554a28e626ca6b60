"""LLVM lowering of `debug_print` (jitad.debug.print and jitad.debug.callback): a call
back into Python.

The compiled code calls `jitad_debug_print(spec, n, values)`: `spec` points at a
NUL-terminated JSON constant in the module (format string, keyword names, each
value's dtype and shape), `values` at `n` pointers to the values (a tensor's data, or
a stack slot holding a scalar). The symbol is a ctypes callback registered with the JIT
at import, so programs loaded from the disk cache find it too. Python's signal handlers
run inside the callback: an exception one raises (KeyboardInterrupt on Ctrl-C), or one
printing raises (sys.stdout a closed pipe), leaves the callback's `done` flag unset, and
the compiled code unwinds as at a poll that saw Ctrl-C; the caller raises that exception.
"""
import contextlib
import ctypes
import json
import threading

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np

from ..ir.ops import Op
from ..primitives.host import HOST_FUNCTIONS, result
from . import runtime
from .llvm import I8, I32, I64, INTERRUPTED, LL, PTR, alloca, rule, service

_CTYPES = {"f64": ctypes.c_double, "f32": ctypes.c_float, "i64": ctypes.c_int64, "bool": ctypes.c_uint8}
_NUMPY = {"f64": np.float64, "f32": np.float32, "i64": np.int64, "bool": np.bool_}
_specs = {}   # spec bytes -> decoded spec
HOST_CALLS = {}   # `call` key of a spec -> the Python function jitad.debug.callback registered


class _Held(threading.local):
    lines = None   # while a `held()` block runs on this thread: the text printed, kept


_held = _Held()


@contextlib.contextmanager
def held():
    """Keep the `debug.print` output of the compiled code run inside (a list of lines,
    yielded) instead of printing it: the caller prints it once the call has succeeded (a
    call stopped by a failed guard and run again on another path prints once)."""
    saved, _held.lines = _held.lines, []
    try:
        yield _held.lines
    finally:
        _held.lines = saved


def print_lines(lines):
    for line in lines:
        print(line, flush=True)


def _value(ptr, dtype, shape):
    if not shape:
        v = _CTYPES[dtype].from_address(ptr).value
        return bool(v) if dtype == "bool" else v
    count = int(np.prod(shape, dtype=np.int64))
    raw = (_CTYPES[dtype] * count).from_address(ptr)
    return np.ctypeslib.as_array(raw).view(_NUMPY[dtype]).reshape(shape).copy()


def _callback(spec, n, values, done):
    """Print one `debug.print`; set `*done` when the compiled code may go on. A signal
    handler's exception (Ctrl-C) leaves it unset, even one raised as this function is
    entered (before its `try`: ctypes then ignores it), so the code unwinds either way."""
    try:
        decoded = _specs.get(spec)
        if decoded is None:
            decoded = _specs[spec] = json.loads(spec.decode())
        vals = [_value(values[k], dtype, tuple(shape)) for k, (dtype, shape) in enumerate(decoded["types"])]
        names = decoded["names"]
        args = [v for v, name in zip(vals, names) if name is None]
        kwargs = {name: v for v, name in zip(vals, names) if name is not None}
        if "call" in decoded:   # jitad.debug.callback: the user's function on the values
            HOST_CALLS[decoded["call"]](*args, **kwargs)
        else:
            text = decoded["fmt"].format(*args, **kwargs)
            if _held.lines is not None:
                _held.lines.append(text)
            else:
                print(text, flush=True)
        done[0] = 1
    except BaseException as e:   # cannot unwind through native code: the call stops, its caller raises `e`
        if isinstance(e, Exception):   # the output failed (a closed pipe, a stream that raises), the format, or a callback
            e.add_note("raised by jitad.debug.print or debug.callback while compiled code ran; the call stopped there")
        runtime.interrupted_by(e)   # (else a signal handler's: KeyboardInterrupt on Ctrl-C)
    return 0


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_char_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p),
                             ctypes.POINTER(ctypes.c_int32))(_callback)
llvm.add_symbol("jitad_debug_print", ctypes.cast(_CALLBACK, ctypes.c_void_p).value)


def _host_callback(spec, n, values, out, done):
    """One `host_call`: the registered function on the operands' values, its result `index`
    written where `out` points; `*done` set as `_callback` sets it."""
    try:
        decoded = _specs.get(spec)
        if decoded is None:
            decoded = _specs[spec] = json.loads(spec.decode())
        vals = [_value(values[k], dtype, tuple(shape)) for k, (dtype, shape) in enumerate(decoded["types"])]
        dtype, shape = decoded["out"]
        value = result(HOST_FUNCTIONS[decoded["call"]](*vals)[decoded["index"]], (dtype, shape), decoded["call"])
        count = max(int(np.prod(shape, dtype=np.int64)), 1)
        raw = (_CTYPES[dtype] * count).from_address(out)
        np.ctypeslib.as_array(raw)[:] = value.reshape(-1).view(np.uint8) if dtype == "bool" else value.reshape(-1)
        done[0] = 1
    except BaseException as e:   # (as `_callback`: the call stops, its caller raises `e`)
        if isinstance(e, Exception):
            e.add_note("raised by a pure_callback while compiled code ran; the call stopped there")
        runtime.interrupted_by(e)
    return 0


_HOST_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_char_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p),
                                  ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32))(_host_callback)
llvm.add_symbol("jitad_host_call", ctypes.cast(_HOST_CALLBACK, ctypes.c_void_p).value)


def _pointers(lo, node, ins):
    """A stack table of pointers to the operands' values (a tensor's data, or a stack slot
    holding a scalar)."""
    b = lo.b
    table = alloca(b, ir.ArrayType(PTR, max(len(ins), 1)))
    for k, (var, value) in enumerate(zip(node.inputs, ins)):
        if var.type.shape:
            ptr = value
        else:   # scalars go through stack slots
            ptr = alloca(b, LL[var.type.dtype] if var.type.dtype != "bool" else I8)
            b.store(value if var.type.dtype != "bool" else b.zext(value, I8), ptr)
        b.store(ptr, b.gep(table, [I64(0), I64(k)], source_etype=ir.ArrayType(PTR, max(len(ins), 1))))
    return table


def _call_back(lo, name, args):
    """Call the callback `name` with `args` and a `done` flag; unwind if it stayed unset."""
    b = lo.b
    fn = lo.extern(name, ir.FunctionType(I32, [PTR, I64, PTR, PTR, PTR][:len(args) + 1]))
    done = alloca(b, I32)   # the callback sets it when the code may go on (not after Ctrl-C)
    b.store(I32(0), done)
    b.call(fn, args + [done])
    with b.if_then(b.icmp_unsigned("==", b.load(done, typ=I32), I32(0)), likely=False):
        b.store(I32(INTERRUPTED), lo.status_ptr())
        b.branch(lo.bail_block())


@rule(Op.DEBUG_PRINT)
def _debug_print(lo, node, ins):
    spec = lo.constant_array(np.frombuffer(node.attrs["spec"].encode() + b"\0", np.uint8))
    _call_back(lo, "jitad_debug_print", [spec, I64(len(ins)), _pointers(lo, node, ins)])
    return []


@service("host_call")
def _host_call(lo, node, ins):
    """The `host_call` primitive's rule: a call back into Python writing the result."""
    out = node.outputs[0]
    attrs = node.attrs
    spec = json.dumps({"call": attrs["call"], "index": attrs["index"], "out": [out.type.dtype, list(out.type.shape)],
                       "types": [[v.type.dtype, list(v.type.shape)] for v in node.inputs]})
    spec = lo.constant_array(np.frombuffer(spec.encode() + b"\0", np.uint8))
    if out.type.shape:
        dest = lo.result_buffer(out)
    else:
        dest = alloca(lo.b, LL[out.type.dtype] if out.type.dtype != "bool" else I8)
    _call_back(lo, "jitad_host_call", [spec, I64(len(ins)), _pointers(lo, node, ins), dest])
    if out.type.shape:
        return [dest]
    value = lo.b.load(dest, typ=LL[out.type.dtype] if out.type.dtype != "bool" else I8)
    return [value if out.type.dtype != "bool" else lo.b.trunc(value, LL["bool"])]
