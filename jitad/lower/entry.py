"""CPython entry points for compiled programs, written in LLVM IR.

`PyObject *entry(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)`
is a METH_FASTCALL|METH_KEYWORDS function. It checks each argument exactly — a float,
int or bool object; a NumPy array of the expected dtype and shape, C-contiguous and
aligned; a tree's address as an int — unboxes, runs `main` with a stack budget and a
fresh tensor arena, and boxes the results (nested tuples and new NumPy arrays are
built here). On any mismatch or keywords it forwards the call to `self[0]` (the Python
dispatcher, which converts what it can); when `main` stopped with a status, to
`self[status]`: 1, the stack ran out (a retry on a thread with a larger stack, or
`ResourceError`); 2, the tensor arena ran out; 3, Ctrl-C; 4, told to stop (see
`runtime.python_function`); 6 + k, the program's k-th `check` message failed
(`RuntimeCheckError`). The stack limit of a recursive program is the calling
thread's own, kept in the thread's block under a pthread key; a thread's first call
forwards to `self[5]`, which makes the block.

Threads: each thread has a block of its own (`THREAD_WORDS` words under the pthread key
`jitad_stack_key`, made by `runtime.enter_thread`): its stack limit, its tensor arena and
its GIL state. A call whose program is worth it (`gil_release`) runs `main` without the
GIL: from the start, or from its first interrupt poll (a loop that keeps running); other
Python threads run meanwhile, and nothing in `main` touches a Python object.
"""
import ctypes
import math
import sysconfig
import weakref

import llvmlite.ir as ir
import numpy as np

from ..ir.graph import walk
from ..ir.types import TreeType
from ..forest import SLOT_OFFSETS, type_code
from .llvm import CTX, ELEMENT_BYTES, POLL_ITERATIONS, F32, F64, I1, I8, I32, I64, PTR, alloca, ret_type

C_INT = ir.IntType(32)
PY_API = {
    "PyFloat_AsDouble": ir.FunctionType(F64, [PTR]),
    "PyFloat_FromDouble": ir.FunctionType(PTR, [F64]),
    "PyLong_AsLongLong": ir.FunctionType(I64, [PTR]),
    "PyLong_FromLongLong": ir.FunctionType(PTR, [I64]),
    "PyBool_FromLong": ir.FunctionType(PTR, [I64]),
    "PyErr_Occurred": ir.FunctionType(PTR, []),
    "PyErr_Clear": ir.FunctionType(ir.VoidType(), []),
    "PyTuple_New": ir.FunctionType(PTR, [I64]),
    "PyTuple_SetItem": ir.FunctionType(C_INT, [PTR, I64, PTR]),
    "PyTuple_GetItem": ir.FunctionType(PTR, [PTR, I64]),
    "PyDict_GetItemWithError": ir.FunctionType(PTR, [PTR, PTR]),
    "_PyDict_NewPresized": ir.FunctionType(PTR, [I64]),
    "PyDict_SetItem": ir.FunctionType(C_INT, [PTR, PTR, PTR]),
    "PyList_New": ir.FunctionType(PTR, [I64]),
    "PyType_GenericAlloc": ir.FunctionType(PTR, [PTR, I64]),
    "PyObject_Call": ir.FunctionType(PTR, [PTR, PTR, PTR]),
    "PyObject_Vectorcall": ir.FunctionType(PTR, [PTR, PTR, I64, PTR]),
    "Py_DecRef": ir.FunctionType(ir.VoidType(), [PTR]),
    "Py_IncRef": ir.FunctionType(ir.VoidType(), [PTR]),
    "PyOS_InterruptOccurred": ir.FunctionType(C_INT, []),
}
# numpy's PyArray_New(subtype, nd, dims, typenum, strides, data, itemsize, flags, obj)
ARRAY_NEW = ir.FunctionType(PTR, [PTR, C_INT, PTR, C_INT, PTR, PTR, C_INT, C_INT, PTR])
PY_DATA = {"float": "PyFloat_Type", "int": "PyLong_Type", "bool": "PyBool_Type", "True": "_Py_TrueStruct",
           "tuple": "PyTuple_Type", "dict": "PyDict_Type", "None": "_Py_NoneStruct",
           "list": "PyList_Type"}
_EXPECTED = {"f64": "float", "f32": "float", "i64": "int", "bool": "bool"}
NPY_TYPENUM = {"bool": 0, "i64": 7, "f32": 11, "f64": 12}
# Field offsets of CPython's objects and NumPy's PyArrayObject (checked below)
OB_TYPE, TUPLE_SIZE, TUPLE_ITEMS, DICT_USED, LIST_ITEMS = 8, 16, 24, 16, 24
ARRAY_DATA, ARRAY_ND, ARRAY_DIMS, ARRAY_DESCR, ARRAY_FLAGS = 16, 24, 32, 56, 64
ARRAY_WEAKLIST = np.ndarray.__weakrefoffset__   # the array's weak references (NULL when none)
C_CONTIGUOUS_ALIGNED = 0x0001 | 0x0100
OWNDATA_WRITEABLE = 0x0004 | 0x0400


def _check_layout():
    """The entries read objects at the offsets above: compare them with a real tuple and
    array here, so that another CPython or NumPy layout is an error, not a crash."""
    a, t, d, lst = np.zeros((2, 3)), (None, 7), dict.fromkeys("abc"), [7]
    read = lambda obj, offset, c=ctypes.c_int64: c.from_address(id(obj) + offset).value
    flags = C_CONTIGUOUS_ALIGNED | OWNDATA_WRITEABLE
    seen = [read(t, OB_TYPE) == id(tuple), read(t, TUPLE_SIZE) == 2, read(t, TUPLE_ITEMS) == id(None),
            read(d, OB_TYPE) == id(dict), read(d, DICT_USED) == 3, read(lst, TUPLE_SIZE) == 1,
            read(a, OB_TYPE) == id(np.ndarray), read(a, ARRAY_DATA) == a.ctypes.data,
            read(a, ARRAY_ND, ctypes.c_int) == 2, read(a, ARRAY_DESCR) == id(a.dtype),
            read(a, ARRAY_FLAGS, ctypes.c_int) & flags == flags, read(a, ARRAY_WEAKLIST) == 0]
    ref = weakref.ref(a)
    seen.append(read(a, ARRAY_WEAKLIST) != 0 and ref() is a)
    if all(seen):   # then the dims and item pointers can be followed
        seen.append((ctypes.c_int64 * 2).from_address(read(a, ARRAY_DIMS))[:] == [2, 3])
        seen.append(ctypes.c_int64.from_address(read(lst, LIST_ITEMS)).value == id(7))
    if not all(seen):
        raise ImportError(f"jitad: the object layout of this Python or NumPy {np.__version__} is not the one "
                          f"jitad's compiled entries read (checks passed: {seen}); please report it")


_check_layout()
# Result arrays kept per tensor output for reuse (see `_result_array`), up to this size each;
# a pooled array is reused only when nothing else holds it, not even a weak reference;
# the check reads ob_refcnt, so not on free-threaded builds. (A fresh array of tens of MB
# faults in its pages on every call: ht's 34 MB Jacobian spent 4.5 ms a call in the kernel.)
POOL, POOL_MAX_BYTES = 2, 64 << 20
POOLING = not sysconfig.get_config_var("Py_GIL_DISABLED")


# The calling thread's block, one uint64 word each: stack limit, arena base, arena end (the
# arena's high-water mark is the word at its end), the PyThreadState saved while this thread's
# call runs without the GIL (0: it holds it), the SIGINT count at the call's start, whether
# the running call may let the GIL go at a poll, whether the thread is the main thread
TB_LIMIT, TB_BASE, TB_END, TB_SAVED, TB_SEEN, TB_RELEASABLE, TB_MAIN = range(7)
# a call below the work threshold lets the GIL go at its 8th interrupt poll (after about 8 x 16
# heavy or 8 x 1024 scalar loop iterations), so a short loop keeps its cost (the release and
# re-acquire cost ~0.2 us: a 50-step scan gradient's call went 1.50 -> 1.69 us releasing at the first)
POLLS_BEFORE_RELEASE = 8
THREAD_WORDS = 8
# A call gives the GIL up for all of `main` when its program's estimated work reaches this
# (about 10 µs): the elements its nodes read or write (times the ops of a fused loop; a
# product's multiply-adds). A smaller one gives it up at its first interrupt poll (after 2^10
# iterations of a scalar loop, 2^16 elements of a loop nest), if it gets there. Releasing and
# taking back an uncontended GIL costs ~0.1 µs.
RELEASE_WORK = 1 << 15
GIL_MODES = ("entry", "poll", "never")
PRODUCTS = ("matmul", "matmul_add", "bmm", "table_gemm_add")


def gil_release(program):
    """When a call of `program` lets the GIL go: "entry", "poll" or "never" (a program with
    MPI collectives, which MPI's default thread level allows in one thread only)."""
    graphs = [program.main] + [f.body for f in program.funs]
    work = 0
    for node in (n for g in graphs for n in walk(g)):
        if node.op.name in ("allreduce", "bcast"):
            return "never"
        sizes = [math.prod(v.type.shape) for v in node.inputs + node.outputs if getattr(v.type, "shape", ())]
        if node.op.name in PRODUCTS and len(sizes) >= 3:   # m*k, k*n, m*n elements: m*n*k multiply-adds
            work += math.isqrt(math.prod(sizes[:2]) * sizes[-1])
        else:   # (times a fused loop's ops)
            work += max(sizes, default=0) * (1 + sum(len(body.nodes) for body in node.bodies))
    return "entry" if work >= RELEASE_WORK else "poll"


def _api(module, name, fnty=None):
    try:
        return module.get_global(name)
    except KeyError:
        if fnty is not None or name in PY_API:
            return ir.Function(module, fnty or PY_API[name], name=name)
        g = ir.GlobalVariable(module, I8, name=name)
        g.linkage = "external"
        return g


def _field(b, obj, offset, typ):
    return b.load(b.gep(obj, [I64(offset)], source_etype=I8), typ=typ)


def _array_matches(b, module, obj, t):
    """An i1: `obj` is an ndarray of exactly dtype/shape `t`, C-contiguous and aligned."""
    ok = b.icmp_unsigned("==", _field(b, obj, ARRAY_DESCR, PTR), _api(module, f"jitad_descr_{t.dtype}"))
    ok = b.and_(ok, b.icmp_signed("==", _field(b, obj, ARRAY_ND, C_INT), C_INT(len(t.shape))))
    flags = _field(b, obj, ARRAY_FLAGS, C_INT)
    ok = b.and_(ok, b.icmp_unsigned("==", b.and_(flags, C_INT(C_CONTIGUOUS_ALIGNED)), C_INT(C_CONTIGUOUS_ALIGNED)))
    dims = _field(b, obj, ARRAY_DIMS, PTR)
    for d, n in enumerate(t.shape):
        got = b.load(b.gep(dims, [I64(d)], source_etype=I64), typ=I64)
        ok = b.and_(ok, b.icmp_signed("==", got, I64(n)))
    return ok


def _bools_clean(module):
    """`i1 clean(i8 *bytes, int64 n)`: every byte is 0 or 1. A bool array made by
    `.view(bool)` may hold others, which compiled code (reading one bit) would misread."""
    name = "jitad_bools_clean"
    if name in module.globals:
        return module.globals[name]
    fn = ir.Function(module, ir.FunctionType(I1, [PTR, I64]), name=name)
    fn.linkage = "internal"
    data, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    pre, loop, done = b.block, fn.append_basic_block("byte"), fn.append_basic_block("done")
    b.cbranch(b.icmp_signed(">", n, I64(0)), loop, done)
    b.position_at_end(loop)
    i, acc = b.phi(I64), b.phi(I8)
    acc_next = b.or_(acc, b.load(b.gep(data, [i], source_etype=I8), typ=I8))   # LLVM vectorizes this
    i_next = b.add(i, I64(1))
    i.add_incoming(I64(0), pre)
    i.add_incoming(i_next, loop)
    acc.add_incoming(I8(0), pre)
    acc.add_incoming(acc_next, loop)
    b.cbranch(b.icmp_signed("<", i_next, n), loop, done)
    b.position_at_end(done)
    seen = b.phi(I8)
    seen.add_incoming(I8(0), pre)
    seen.add_incoming(acc_next, loop)
    b.ret(b.icmp_unsigned("<=", seen, I8(1)))
    return fn


def _pool_take(module):
    """`PyObject *take(PyObject *pool[POOL + 1], descr, int nd, int64 dims[nd])`: a pooled
    array only the pool references, of that dtype and shape, still C-contiguous, aligned,
    writeable and owning its data, with a new reference; else NULL. (Slot POOL holds the
    index of the oldest entry.)"""
    name = "jitad_pool_take"
    if name in module.globals:
        return module.globals[name]
    fn = ir.Function(module, ir.FunctionType(PTR, [PTR, PTR, C_INT, PTR]), name=name)
    fn.linkage = "internal"
    pool, descr, nd, dims = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    for s_ in range(POOL):
        obj = b.load(b.gep(pool, [I64(s_)], source_etype=PTR), typ=PTR)
        with b.if_then(b.icmp_unsigned("!=", obj, PTR(None))):
            ok = b.icmp_signed("==", b.load(obj, typ=I64), I64(1))   # ob_refcnt: only the pool's
            ok = b.and_(ok, b.icmp_unsigned("==", _field(b, obj, ARRAY_WEAKLIST, PTR), PTR(None)))   # no weakref
            ok = b.and_(ok, b.icmp_unsigned("==", _field(b, obj, ARRAY_DESCR, PTR), descr))
            ok = b.and_(ok, b.icmp_signed("==", _field(b, obj, ARRAY_ND, C_INT), nd))
            flags = C_CONTIGUOUS_ALIGNED | OWNDATA_WRITEABLE
            ok = b.and_(ok, b.icmp_unsigned("==", b.and_(_field(b, obj, ARRAY_FLAGS, C_INT), C_INT(flags)),
                                            C_INT(flags)))
            with b.if_then(ok):
                memcmp = _api(module, "memcmp", ir.FunctionType(C_INT, [PTR, PTR, I64]))
                nbytes = b.mul(b.sext(nd, I64), I64(8))
                differ = b.call(memcmp, [dims, _field(b, obj, ARRAY_DIMS, PTR), nbytes])
                with b.if_then(b.icmp_signed("==", differ, C_INT(0))):
                    b.call(_api(module, "Py_IncRef"), [obj])
                    b.ret(obj)
    b.ret(PTR(None))
    return fn


def _pool_put(module):
    """`void put(PyObject *pool[POOL + 1], PyObject *arr)`: `arr` (a new reference kept
    by the pool) replaces the oldest entry."""
    name = "jitad_pool_put"
    if name in module.globals:
        return module.globals[name]
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR]), name=name)
    fn.linkage = "internal"
    pool, arr = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    oldest_at = b.gep(pool, [I64(POOL)], source_etype=PTR)
    oldest = b.ptrtoint(b.load(oldest_at, typ=PTR), I64)
    victim = b.gep(pool, [oldest], source_etype=PTR)
    old = b.load(victim, typ=PTR)
    with b.if_then(b.icmp_unsigned("!=", old, PTR(None))):
        b.call(_api(module, "Py_DecRef"), [old])
    b.call(_api(module, "Py_IncRef"), [arr])
    b.store(arr, victim)
    b.store(b.inttoptr(b.urem(b.add(oldest, I64(1)), I64(POOL)), PTR), oldest_at)
    b.ret_void()
    return fn


def _never(module):
    """A stop word that stays zero (for entries nobody stops but Ctrl-C)."""
    name = "jitad_never_stop"
    if name not in module.globals:
        g = ir.GlobalVariable(module, I64, name=name)
        g.linkage, g.global_constant, g.initializer = "internal", True, I64(0)
    return module.globals[name]


def _forward(b, module, slot):
    """Return what the handler `self[slot]` returns for this call's arguments."""
    self_, args, nargs, kwnames = b.function.args[:4]   # (an entry's, or its body's first four)
    slot = slot if isinstance(slot, ir.Value) else I64(slot)
    handler = b.call(_api(module, "PyTuple_GetItem"), [self_, slot])
    b.ret(b.call(_api(module, "PyObject_Vectorcall"), [handler, args, nargs, kwnames]))


class DictArg(tuple):
    """A dict argument the entry takes apart: `(key symbols, children)`, in the sorted
    keys' order, each key a data symbol at the (interned) string."""
    __slots__ = ()
    keys = property(lambda self: self[0])
    children = property(lambda self: self[1])


class ClassArg(tuple):
    """A namedtuple argument: `(class symbol, children)`; read as a tuple once its class
    (the data symbol) matches."""
    __slots__ = ()
    symbol = property(lambda self: self[0])
    children = property(lambda self: self[1])


class ListArg(tuple):
    """A list argument: its children, read from the list's item array."""
    __slots__ = ()

    def __repr__(self):   # (part of the cache key)
        return f"ListArg{tuple.__repr__(self)}"


class NoneArg(tuple):
    """A None argument (no leaves): the entry checks it is None."""
    __slots__ = ()

    def __repr__(self):
        return "NoneArg()"


def key_symbol(key):
    return "jitad_key_" + key.encode("utf-8", "surrogatepass").hex()


def _check_arguments(b, module, in_types, arg_layout, fallback):
    """Check the arguments exactly, going to `fallback` at the first mismatch; return
    each leaf's object. The builder ends where every check held."""
    _, args, nargs, kwnames = b.function.args[:4]
    api = lambda n: _api(module, n)
    objs = [None] * len(in_types)

    def check(holds):
        nxt = b.function.append_basic_block("arg")
        b.cbranch(holds, nxt, fallback)
        b.position_at_end(nxt)

    def walk(node, obj):   # a (nested) tuple, namedtuple, list or dict argument: its type and size, then its leaves
        if isinstance(node, int):
            objs[node] = obj
            return
        if isinstance(node, DictArg):   # exactly a dict with these keys
            check(b.icmp_unsigned("==", _field(b, obj, OB_TYPE, PTR), api("PyDict_Type")))
            check(b.icmp_signed("==", _field(b, obj, DICT_USED, I64), I64(len(node.keys))))
            for key, child in zip(node.keys, node.children):
                item = b.call(api("PyDict_GetItemWithError"), [obj, api(key)])   # (no error with str keys)
                check(b.icmp_unsigned("!=", item, PTR(None)))
                walk(child, item)
            return
        if isinstance(node, NoneArg):
            check(b.icmp_unsigned("==", obj, api("_Py_NoneStruct")))
            return
        if isinstance(node, ListArg):   # exactly a list of this length
            check(b.and_(b.icmp_unsigned("==", _field(b, obj, OB_TYPE, PTR), api("PyList_Type")),
                         b.icmp_signed("==", _field(b, obj, TUPLE_SIZE, I64), I64(len(node)))))
            items = _field(b, obj, LIST_ITEMS, PTR)
            for k, child in enumerate(node):
                walk(child, b.load(b.gep(items, [I64(k)], source_etype=PTR), typ=PTR))
            return
        cls, children = (node.symbol, node.children) if isinstance(node, ClassArg) else ("PyTuple_Type", node)
        check(b.and_(b.icmp_unsigned("==", _field(b, obj, OB_TYPE, PTR), api(cls)),
                     b.icmp_signed("==", _field(b, obj, TUPLE_SIZE, I64), I64(len(children)))))
        for k, child in enumerate(children):
            walk(child, _field(b, obj, TUPLE_ITEMS + 8 * k, PTR))

    check(b.and_(b.icmp_unsigned("==", kwnames, PTR(None)), b.icmp_signed("==", nargs, I64(len(arg_layout)))))
    for k, node in enumerate(arg_layout):
        walk(node, b.load(b.gep(args, [I64(k)], source_etype=PTR), typ=PTR))
    for obj, t in zip(objs, in_types):
        ob_type = _field(b, obj, OB_TYPE, PTR)
        if isinstance(t, TreeType):   # a jitad.Tree whose field types match
            check(b.icmp_unsigned("==", ob_type, api("jitad_tree_type")))
            code = b.call(api("PyLong_AsLongLong"), [_field(b, obj, SLOT_OFFSETS[1], PTR)])
            check(b.icmp_signed("==", code, I64(type_code(t))))
        elif t.shape:   # an ndarray, or jitad.numpy's subclass of it (the same layout)
            check(b.or_(b.icmp_unsigned("==", ob_type, api("jitad_ndarray_type")),
                        b.icmp_unsigned("==", ob_type, api("jitad_ndarray_subtype"))))
            check(_array_matches(b, module, obj, t))
            if t.dtype == "bool":   # (the dispatcher makes a clean copy)
                clean = _bools_clean(module)
                check(b.call(clean, [_field(b, obj, ARRAY_DATA, PTR), I64(int(np.prod(t.shape)))]))
        else:
            check(b.icmp_unsigned("==", ob_type, api(PY_DATA[_EXPECTED[t.dtype]])))
    return objs


def _unbox(b, module, obj, t):
    api = lambda n: _api(module, n)
    if isinstance(t, TreeType):
        return b.inttoptr(b.call(api("PyLong_AsLongLong"), [_field(b, obj, SLOT_OFFSETS[0], PTR)]), PTR)
    if t.shape:
        return _field(b, obj, ARRAY_DATA, PTR)
    if t.dtype == "bool":
        return b.icmp_unsigned("==", obj, api(PY_DATA["True"]))
    if t.dtype == "i64":
        v = b.call(api("PyLong_AsLongLong"), [obj])
        failed = b.and_(b.icmp_signed("==", v, I64(-1)),
                        b.icmp_unsigned("!=", b.call(api("PyErr_Occurred"), []), PTR(None)))
        with b.if_then(failed, likely=False):   # too big for 64 bits: the dispatcher explains
            b.call(api("PyErr_Clear"), [])
            _forward(b, module, 0)
        return v
    v = b.call(api("PyFloat_AsDouble"), [obj])
    return b.fptrunc(v, F32) if t.dtype == "f32" else v


class Built(tuple):
    """A result node the entry builds: `(kind, symbols, children)`, children being
    nodes or leaf indices. Kinds: 'tuple', 'list', 'none'; 'dict' (symbols: the keys,
    in the order the function built them); 'namedtuple' (symbols: the class, allocated
    as a tuple of that class); 'call' (the class called with the children: a namedtuple
    class with its own `__new__`); 'custom' (symbols: a registered class's unflatten
    function and aux data, called with them and a list of the children)."""
    __slots__ = ()
    kind = property(lambda self: self[0])
    symbols = property(lambda self: self[1])
    children = property(lambda self: self[2])


def _box(b, module, v, t):
    """A new Python object for scalar result `v` of type `t` (NULL: no memory)."""
    api = lambda n: _api(module, n)
    if t.dtype == "bool":
        return b.call(api("PyBool_FromLong"), [b.zext(v, I64)])
    if t.dtype == "i64":
        return b.call(api("PyLong_FromLongLong"), [v])
    if t.dtype == "f64":
        return b.call(api("PyFloat_FromDouble"), [v])
    data = alloca(b, F32)   # an f32 scalar stays one, as in NumPy: an np.float32 made from its bytes
    b.store(v, data)
    return b.call(_api(module, "jitad_PyArray_Scalar", ir.FunctionType(PTR, [PTR, PTR, PTR])),
                  [data, api("jitad_descr_f32"), PTR(None)])


def _build_result(b, module, layout, leaves, out_types, arrays):
    """The result object of `layout` (a leaf index or a `Built` node), built container
    first, then its items. Every object not yet inside the result is held in a slot of
    its own (the tensor results from the start); a failure (no memory, a user's
    unflatten raising) releases what the slots hold and returns NULL with the error set."""
    api = lambda n, fnty=None: _api(module, n, fnty)
    nodes = []

    def count(node):
        nodes.append(node)
        for child in (node.children if isinstance(node, Built) else ()):
            count(child)
    count(layout)
    slots = alloca(b, ir.ArrayType(PTR, len(nodes)))
    slot = lambda k: b.gep(slots, [I64(k)], source_etype=PTR)
    for k in range(len(nodes)):
        b.store(PTR(None), slot(k))
    fail = b.function.append_basic_block("result_failed")
    with b.goto_block(fail):
        for k in range(len(nodes)):
            b.call(api("Py_DecRef"), [b.load(slot(k), typ=PTR)])   # (NULL-safe)
        b.ret(PTR(None))
    leaf_slot = {node: k for k, node in enumerate(nodes) if isinstance(node, int)}
    for leaf, arr in arrays.items():
        b.store(arr, slot(leaf_slot[leaf]))

    def made(obj, k):   # `obj` is new: held by slot k, or the failure path if NULL
        ok = b.function.append_basic_block("made")
        b.cbranch(b.icmp_unsigned("==", obj, PTR(None)), fail, ok)
        b.position_at_end(ok)
        b.store(obj, slot(k))
        return obj

    counter = iter(range(len(nodes)))

    def build(node):   # a new reference, held by the node's slot
        k = next(counter)
        if isinstance(node, int):
            if out_types[node].shape:
                return arrays[node]   # main wrote the result into it
            return made(_box(b, module, leaves[node], out_types[node]), k)
        kind, symbols, children = node
        n = I64(len(children))
        if kind == "none":
            none = api("_Py_NoneStruct")
            b.call(api("Py_IncRef"), [none])
            b.store(none, slot(k))
            return none
        if kind in ("tuple", "call"):
            obj = made(b.call(api("PyTuple_New"), [n]), k)
        elif kind == "namedtuple":
            obj = made(b.call(api("PyType_GenericAlloc"), [api(symbols[0]), n]), k)
        elif kind in ("list", "custom"):
            obj = made(b.call(api("PyList_New"), [n]), k)
        else:
            obj = made(b.call(api("_PyDict_NewPresized"), [n]), k)
        child_slot = k + 1   # (slots are numbered in the order `build` visits the nodes)
        for i, child in enumerate(children):
            item = build(child)
            if kind == "dict":   # (PyDict_SetItem takes its own reference)
                failed = b.call(api("PyDict_SetItem"), [obj, api(symbols[i]), item])
                ok = b.function.append_basic_block("set")
                b.cbranch(b.icmp_signed("!=", failed, C_INT(0)), fail, ok)
                b.position_at_end(ok)
                b.call(api("Py_DecRef"), [item])
            elif kind in ("list", "custom"):   # PyList_SET_ITEM: ob_item[i] = item
                items = _field(b, obj, LIST_ITEMS, PTR)
                b.store(item, b.gep(items, [I64(i)], source_etype=PTR))
            else:   # PyTuple_SET_ITEM, for a tuple or a namedtuple alike
                b.store(item, b.gep(obj, [I64(TUPLE_ITEMS + 8 * i)], source_etype=I8))
            b.store(PTR(None), slot(child_slot))   # now the container's
            child_slot += _size(child)
        if kind in ("call", "custom"):
            if kind == "call":
                result = b.call(api("PyObject_Call"), [api(symbols[0]), obj, PTR(None)])
            else:
                argv = alloca(b, ir.ArrayType(PTR, 2))
                b.store(api(symbols[1]), b.gep(argv, [I64(0)], source_etype=PTR))
                b.store(obj, b.gep(argv, [I64(1)], source_etype=PTR))
                result = b.call(api("PyObject_Vectorcall"), [api(symbols[0]), argv, I64(2), PTR(None)])
            ok = b.function.append_basic_block("called")
            b.cbranch(b.icmp_unsigned("==", result, PTR(None)), fail, ok)
            b.position_at_end(ok)
            b.call(api("Py_DecRef"), [obj])
            b.store(result, slot(k))
            obj = result
        return obj
    return build(layout)


def _size(node):
    """Nodes in `node`'s subtree (itself included)."""
    return 1 + (sum(map(_size, node.children)) if isinstance(node, Built) else 0)


def _new_array(b, module, t):
    """A new result array of type `t`, of the ndarray subclass results are made of
    (`jitad.numpy.Array`, registered by `runtime.native_array_subclass`): JAX's array
    methods at no cost per call."""
    dims = alloca(b, ir.ArrayType(I64, max(len(t.shape), 1)))
    for d, n in enumerate(t.shape):
        b.store(I64(n), b.gep(dims, [I64(d)], source_etype=I64))
    arr = b.call(_api(module, "jitad_PyArray_New", ARRAY_NEW), [
        _api(module, "jitad_ndarray_subtype"), C_INT(len(t.shape)), dims, C_INT(NPY_TYPENUM[t.dtype]),
        PTR(None), PTR(None), C_INT(0), C_INT(0), PTR(None)])
    with b.if_then(b.icmp_unsigned("==", arr, PTR(None)), likely=False):
        b.ret(PTR(None))   # MemoryError is set
    return arr


def _result_array(b, module, name, k, t):
    """A result array of a previous call that nobody else references any more (its
    only reference is the pool's, and it still has its shape, dtype and flags), or a
    new one that joins the pool in place of the oldest. A training loop that drops
    last step's arrays gets them back: no allocation, no page faults."""
    if not POOLING or int(np.prod(t.shape)) * ELEMENT_BYTES[t.dtype] > POOL_MAX_BYTES:
        return _new_array(b, module, t)
    pool = ir.GlobalVariable(module, ir.ArrayType(PTR, POOL + 1), name=f"{name}_pool{k}")   # exported: the
    pool.initializer = ir.Constant(ir.ArrayType(PTR, POOL + 1), [PTR(None)] * (POOL + 1))   # runtime empties it
    dims = ir.GlobalVariable(module, ir.ArrayType(I64, max(len(t.shape), 1)), name=f"{name}_dims{k}")
    dims.linkage, dims.global_constant = "internal", True
    dims.initializer = ir.Constant(dims.value_type, list(t.shape) or [0])
    found = b.call(_pool_take(module), [pool, _api(module, f"jitad_descr_{t.dtype}"), C_INT(len(t.shape)), dims])
    result = alloca(b, PTR)
    b.store(found, result)
    with b.if_then(b.icmp_unsigned("==", found, PTR(None))):
        arr = _new_array(b, module, t)
        b.call(_pool_put(module), [pool, arr])
        b.store(arr, result)
    return b.load(result, typ=PTR)


def _thread_block(b, module):
    """The calling thread's block (forwarding to handler 5, which makes it, on a thread's
    first call); one load and a call: pthread_getspecific reads the thread's own data."""
    getspecific = _api(module, "pthread_getspecific", ir.FunctionType(PTR, [C_INT]))
    tb = b.call(getspecific, [b.load(_api(module, "jitad_stack_key"), typ=C_INT)])
    with b.if_then(b.icmp_unsigned("==", tb, PTR(None)), likely=False):
        _forward(b, module, 5)
    return tb


def _word(b, tb, k):
    return b.gep(tb, [I64(k)], source_etype=I64)


def _run_main(b, module, main, args, tb, gil, release=None):
    """Call `main` with the thread's GIL state set for it: without the GIL from the start
    (gil="entry", or "poll" where the i1 value `release` is true), from its
    POLLS_BEFORE_RELEASE-th poll ("poll") or never. The GIL is held again on return;
    the words a nested call (from a `debug.print` callback) changes are restored after it."""
    kept = [(k, b.load(_word(b, tb, k), typ=I64)) for k in (TB_SAVED, TB_SEEN, TB_RELEASABLE)]
    b.store(I64(0), _word(b, tb, TB_SAVED))
    b.store(b.load_atomic(_api(module, "jitad_sigints"), "monotonic", 8, typ=I64), _word(b, tb, TB_SEEN))
    b.store(I64(POLLS_BEFORE_RELEASE if gil != "never" else 0), _word(b, tb, TB_RELEASABLE))
    if gil == "entry" or (gil == "poll" and release is not None):
        with b.if_then(I1(1) if gil == "entry" else release):
            b.call(_api(module, "jitad_release_gil", ir.FunctionType(ir.VoidType(), [PTR])), [tb])
    b.call(main, args)
    if gil != "never":
        with b.if_then(b.icmp_unsigned("!=", b.load(_word(b, tb, TB_SAVED), typ=I64), I64(0))):
            status = b.gep(args[0], [I32(0), I32(1)], source_etype=CTX)
            b.call(_api(module, "jitad_acquire_gil", ir.FunctionType(ir.VoidType(), [PTR, PTR])), [tb, status])
    for k, value in kept:
        b.store(value, _word(b, tb, k))


ENTRY_TYPE = ir.FunctionType(PTR, [PTR, PTR, I64, PTR])   # METH_FASTCALL|METH_KEYWORDS


def add_entries(module, main, in_types, out_types, layout, prefix, arg_layout=None, gil="poll"):
    """Define the entries `{prefix}entry` and `{prefix}deep` calling `main`; `layout`
    nests result indices in lists (tuples), and `arg_layout` the argument leaves likewise
    (default: flat leaves). `gil`: when the call lets the GIL go (`gil_release`). The
    deep entry (the deep-stack thread's, see `runtime.run_with_deep_stack`) also stops
    when the runtime's stop word is set (its caller waits on it) and lets the GIL go from
    the start. Both are a call to one body, `{prefix}body`, which takes the stop word and
    whether to let the GIL go at once as two more arguments: a program taking many arrays
    checks and boxes each in straight code, which lowering and LLVM then see once."""
    assert gil in GIL_MODES, gil
    body = ir.Function(module, ir.FunctionType(PTR, list(ENTRY_TYPE.args) + [PTR, I1]), name=f"{prefix}body")
    body.linkage = "internal"
    body.attributes.add("alwaysinline")   # into the entry: the call costs nothing more (a long body is
    # compiled in a module of its own without LLVM's pipeline, `runtime._fast_functions`: called there)
    _entry_body(module, body, main, in_types, out_types, layout, arg_layout, gil)
    for suffix, deep in (("entry", False), ("deep", True)):
        fn = ir.Function(module, ENTRY_TYPE, name=f"{prefix}{suffix}")
        if deep:   # runs only to retry a recursion too deep for its caller's stack: no optimization
            fn.attributes.add("optnone")
            fn.attributes.add("noinline")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        stop = _api(module, "jitad_stop") if deep else _never(module)
        b.ret(b.call(body, list(fn.args) + [stop, I1(deep and gil != "never")]))


def _entry_body(module, fn, main, in_types, out_types, layout, arg_layout, gil):
    """`add_entries`' body: an entry's code with the stop word and the i1 "let the GIL go
    at once" as its fifth and sixth arguments."""
    recursive = "llvm.frameaddress.p0" in module.globals   # declared by the stack checks
    arg_layout = list(range(len(in_types))) if arg_layout is None else arg_layout
    stop, release = fn.args[4:]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    api = lambda n, fnty=None: _api(module, n, fnty)
    fallback = fn.append_basic_block("fallback")
    objs = _check_arguments(b, module, in_types, arg_layout, fallback)
    with b.goto_block(fallback):   # (a user's key __eq__ may have raised in a dict lookup)
        b.call(api("PyErr_Clear"), [])
        _forward(b, module, 0)
    values = [_unbox(b, module, obj, t) for obj, t in zip(objs, in_types)]

    ctx, out = alloca(b, CTX), alloca(b, ret_type(out_types))
    field = lambda k: b.gep(ctx, [I32(0), I32(k)], source_etype=CTX)
    tb = _thread_block(b, module)
    b.store(b.load(_word(b, tb, TB_LIMIT), typ=I64) if recursive else I64(0), field(0))
    # result arrays first: compiled code writes tensor results straight into them
    arrays = {k: _result_array(b, module, fn.name, k, t) for k, t in enumerate(out_types) if t.shape}
    destinations = [_field(b, arrays[k], ARRAY_DATA, PTR) for k in sorted(arrays)]
    b.store(I32(0), field(1))
    for k, word in ((2, TB_BASE), (3, TB_END)):   # the thread's own arena
        b.store(b.load(_word(b, tb, word), typ=PTR), field(k))
    b.store(stop, field(4))
    b.store(I64(POLL_ITERATIONS), field(5))
    _run_main(b, module, main, [ctx] + values + [out] + destinations, tb, gil, release)
    status = b.load(field(1), typ=I32)
    with b.if_then(b.icmp_unsigned("!=", status, I32(0)), likely=False):
        for arr in arrays.values():
            b.call(api("Py_DecRef"), [arr])
        _forward(b, module, b.zext(status, I64))

    rt = ret_type(out_types)
    leaves = [b.load(b.gep(out, [I32(0), I32(k)], source_etype=rt), typ=rt.elements[k])
              for k in range(len(out_types))]
    b.ret(_build_result(b, module, layout, leaves, out_types, arrays))
