"""The process-wide JIT: one MCJIT engine, symbol registration, the object-code disk
cache, and turning entry addresses into Python callables."""
import ctypes
import hashlib
import os
import queue
import sys
import tempfile
import threading

import llvmlite
import llvmlite.binding as llvm
import llvmlite.ir as llvm_ir
import numpy as np

from ..errors import ResourceError
from ..ir.types import NUMPY
from .entry import PY_API, PY_DATA

CACHE_FORMAT = 1
DEEP_STACK = 512 << 20     # stack of the thread that retries deep recursions
STACK_MARGIN = 128 << 10   # kept free below compiled code's stack limit: a recursive frame and
                           # what it calls between two checks (kernels, BLAS, libm)
STATS = {"compiled": 0, "loaded": 0}   # modules compiled here / loaded from the disk cache

_lock = threading.RLock()
_engine = None
_modules = {}       # cache key -> True once its object code is in the engine


class _Jit:
    def __init__(self):
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        target = llvm.Target.from_triple(llvm.get_process_triple())
        self.cpu, self.features = llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
        if "+avx512f" in self.features:   # LLVM's tuning for these CPUs keeps loops to 256-bit
            self.features += ",-prefer-256-bit"   # vectors; at 512 a tanh loop ran 6.6 -> 4.2 ns/element

        def machine():
            return target.create_target_machine(cpu=self.cpu, features=self.features, opt=3, jit=True)
        self.tm = machine()
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine())  # owns its machine
        self.fingerprint = "|".join([str(CACHE_FORMAT), llvmlite.__version__, str(llvm.llvm_version_info),
                                     llvm.get_process_triple(), self.cpu, self.features,
                                     sys.implementation.cache_tag])
        for name in PY_API:
            llvm.add_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value)
        for pyname, symbol in PY_DATA.items():
            llvm.add_symbol(symbol, id({"float": float, "int": int, "bool": bool, "True": True,
                                        "tuple": tuple}[pyname]))
        llvm.add_symbol("jitad_ndarray_type", id(np.ndarray))
        from ..tree import Tree
        llvm.add_symbol("jitad_tree_type", id(Tree))
        for dtype, np_dtype in NUMPY.items():   # the builtin descriptor singletons
            llvm.add_symbol(f"jitad_descr_{dtype}", id(np.dtype(np_dtype)))
        llvm.add_symbol("jitad_PyArray_New", _numpy_c_api(93))
        libm = ctypes.CDLL("libm.so.6")
        for name in ("log1p", "expm1", "log1pf", "expm1f"):
            llvm.add_symbol(name, ctypes.cast(getattr(libm, name), ctypes.c_void_p).value)
        mb = int(os.environ.get("JITAD_ARENA_MB", "1024"))
        self.arena = np.empty(mb << 20, dtype=np.uint8)   # pages are committed when touched
        base = self.arena.ctypes.data   # {base, end, high-water mark}
        self.arena_bounds = np.array([base, base + self.arena.size, base], dtype=np.uint64)
        llvm.add_symbol("jitad_arena", self.arena_bounds.ctypes.data)
        # compiled code finds its thread's stack limit under this pthread key (`enter_thread`)
        self.stack_key = np.zeros(1, dtype=np.uint32)
        if _libc.pthread_key_create(self.stack_key.ctypes.data, None):
            raise ResourceError("jitad: no pthread key left for the stack limit")
        llvm.add_symbol("jitad_stack_key", self.stack_key.ctypes.data)
        llvm.add_symbol("pthread_getspecific", ctypes.cast(_libc.pthread_getspecific, ctypes.c_void_p).value)
        blas = _numpy_openblas()
        for name in ("scipy_cblas_dgemm64_", "scipy_cblas_sgemm64_"):
            if blas is not None and hasattr(blas, name):
                llvm.add_symbol(name, ctypes.cast(getattr(blas, name), ctypes.c_void_p).value)
        self.constants = {}   # symbol -> array kept alive for compiled code

    def optimize(self, ir_text):
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=2)
        pto.loop_vectorization = pto.slp_vectorization = True
        pb = llvm.create_pass_builder(self.tm, pto)
        pb.getModulePassManager().run(mod, pb)
        return mod


def _numpy_c_api(index):
    """Entry `index` of numpy's C-API function table (93 is PyArray_New)."""
    from numpy._core import _multiarray_umath
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = get(_multiarray_umath._ARRAY_API, None)
    return ctypes.c_void_p.from_address(table + 8 * index).value


def _numpy_openblas():
    """numpy's bundled OpenBLAS (loaded privately by numpy; found by its file name)."""
    import glob
    libs = os.path.join(os.path.dirname(os.path.dirname(np.__file__)), "numpy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "libscipy_openblas64_*.so*"))):
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


_libc = ctypes.CDLL(None)
_libc.pthread_self.restype = ctypes.c_ulong
_libc.pthread_key_create.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
_libc.pthread_getattr_np.argtypes = [ctypes.c_ulong, ctypes.c_void_p]
_libc.pthread_attr_getstack.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                        ctypes.POINTER(ctypes.c_size_t)]
_libc.pthread_attr_destroy.argtypes = [ctypes.c_void_p]
_libc.pthread_setspecific.argtypes = [ctypes.c_uint, ctypes.c_void_p]


def _stack_bottom():
    """The lowest usable address of the calling thread's stack, or None if unknown. The
    main thread's stack under `ulimit -s unlimited` is reported as the whole gap below
    it: it counts as `DEEP_STACK` bytes."""
    attr = ctypes.create_string_buffer(128)   # a pthread_attr_t (56 bytes on 64-bit glibc)
    if _libc.pthread_getattr_np(_libc.pthread_self(), attr):
        return None
    try:
        low, size = ctypes.c_void_p(), ctypes.c_size_t()
        if _libc.pthread_attr_getstack(attr, ctypes.byref(low), ctypes.byref(size)) or not low.value:
            return None
    finally:
        _libc.pthread_attr_destroy(attr)
    return low.value + max(0, size.value - DEEP_STACK)


def enter_thread():
    """Store the calling thread's stack limit for compiled code: an entry called in a
    thread for the first time forwards here, then runs. (A thread-specific value, read
    natively by every entry of a recursive program: threads of any stack size, forked
    children and threads jitad never saw get their own.)"""
    bottom = _stack_bottom()
    limit = bottom + STACK_MARGIN if bottom else 2 ** 64 - 1   # unknown: no recursion
    _libc.pthread_setspecific(int(jit().stack_key[0]), limit)


def register_constants(constants):
    """Point the symbols of large constant arrays at their data (in every process)."""
    j = jit()
    with _lock:
        for name, array in constants.items():
            if name not in j.constants:
                j.constants[name] = array
                llvm.add_symbol(name, array.ctypes.data)


def jit():
    global _engine
    with _lock:
        if _engine is None:
            _engine = _Jit()
        return _engine


def new_module(name):
    module = llvm_ir.Module(name=name)
    module.triple = llvm.get_process_triple()
    return module


def cache_dir():
    """`$JITAD_CACHE_DIR`, else `$XDG_CACHE_HOME/jitad` or `~/.cache/jitad`; '' disables."""
    path = os.environ.get("JITAD_CACHE_DIR")
    if path is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "jitad")
    return path or None


def _read_cache(path):
    """(object code, LLVM IR text) from a cache file, or None if absent or damaged."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError:
        return None
    digest, payload = blob[:32], blob[32:]
    if len(blob) < 40 or hashlib.sha256(payload).digest() != digest:
        return None
    n = int.from_bytes(payload[:8], "little")
    try:
        return payload[8 + n:], payload[8:8 + n].decode()
    except UnicodeDecodeError:
        return None


def _write_cache(path, obj, ir_text):
    text = ir_text.encode()
    payload = len(text).to_bytes(8, "little") + text + obj
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(hashlib.sha256(payload).digest() + payload)
        os.replace(tmp, path)   # atomic: concurrent writers each replace a whole file
    except OSError:
        pass   # an unwritable cache only costs a recompile


def compile_module(ir_text, placeholder):
    """Compile (or load from the disk cache) LLVM IR whose symbol names start with
    `placeholder`; return (prefix that replaced it, optimized IR text, loaded_from_disk)."""
    j = jit()
    key = hashlib.sha256((j.fingerprint + "\n" + ir_text).encode()).hexdigest()[:32]
    prefix = f"jitad_{key}_"
    with _lock:
        if key in _modules:
            return prefix, _modules[key], False
        directory = cache_dir()
        path = os.path.join(directory, key + ".jitobj") if directory else None
        cached = _read_cache(path) if path else None
        if cached is None:
            mod = j.optimize(ir_text.replace(placeholder, prefix))
            optimized = str(mod)
            obj = j.tm.emit_object(mod)
            if path:
                _write_cache(path, obj, optimized)
            STATS["compiled"] += 1
        else:
            obj, optimized = cached
            STATS["loaded"] += 1
        j.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        j.engine.finalize_object()
        _modules[key] = optimized
        return prefix, optimized, cached is not None


def address(name):
    j = jit()
    with _lock:
        return j.engine.get_function_address(name)


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_void_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_void_p)]


_METH_FASTCALL_KEYWORDS = 0x80 | 0x02
_new_cfunction = ctypes.pythonapi.PyCFunction_NewEx
_new_cfunction.restype = ctypes.py_object
_new_cfunction.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]
_raw_malloc = ctypes.pythonapi.PyMem_RawMalloc
_raw_malloc.restype, _raw_malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]


def _method_def(addr, name):
    """A PyMethodDef in memory that is never freed: a builtin function reads it until
    its very end, which at interpreter exit can come after every module is torn down."""
    encoded = name.encode() + b"\0"
    block = _raw_malloc(ctypes.sizeof(_MethodDef) + len(encoded))
    if not block:
        raise MemoryError("jitad: no memory for an entry point")
    ctypes.memmove(block + ctypes.sizeof(_MethodDef), encoded, len(encoded))
    md = _MethodDef.from_address(block)
    md.ml_name, md.ml_meth, md.ml_flags, md.ml_doc = block + ctypes.sizeof(_MethodDef), addr, \
        _METH_FASTCALL_KEYWORDS, None
    return block


def python_function(addr, name, fallback, on_exhausted):
    """A builtin function object calling the entry at `addr`; its `self` holds the
    handlers the entry forwards to: (dispatcher, stack exhausted, arena exhausted, first
    call in this thread)."""
    def first_call_in_thread(*args):
        enter_thread()
        return entry(*args)
    entry = _new_cfunction(_method_def(addr, name),
                           (fallback, on_exhausted, arena_exhausted, first_call_in_thread), None)
    return entry


class _DeepStackWorker:
    """One long-lived thread with a `DEEP_STACK`-byte stack that runs deep recursions
    (its stack pages stay mapped, so repeated deep calls do not fault them in again)."""

    def __init__(self):
        self.jobs = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="jitad-deep-stack", daemon=True)
        old = threading.stack_size(DEEP_STACK)   # read when the thread starts
        try:
            self.thread.start()
        finally:
            threading.stack_size(old)

    def _serve(self):
        while True:
            fn, args, result, done = self.jobs.get()
            try:
                result.append((True, fn(*args)))
            except _StackExhausted:
                result.append((None, None))
            except BaseException as e:   # re-raised in the caller's thread
                result.append((False, e))
            done.set()

    def run(self, fn, args):
        if threading.current_thread() is self.thread:
            stack_exhausted()
        result, done = [], threading.Event()
        self.jobs.put((fn, args, result, done))
        done.wait()
        ok, value = result[0]
        if ok is None:   # raised here, so the error points at the caller's code
            stack_exhausted()
        if not ok:
            raise value
        return value


_worker = None


def run_with_deep_stack(fn, *args):
    """Call `fn(*args)` on the deep-stack thread and return its result."""
    global _worker
    with _lock:
        if _worker is None:
            _worker = _DeepStackWorker()
    return _worker.run(fn, args)


_llvm_lock = llvm.ffi.lib._lock   # llvmlite serializes every call into LLVM with this lock


def _before_fork():
    """Wait for the locks: no compile (or LLVM call) is half done in the child."""
    _lock.acquire()
    _llvm_lock.__enter__()


def _after_fork_in_parent():
    _llvm_lock.__exit__()
    _lock.release()


def _after_fork_in_child():
    """The child has only the forking thread: no deep-stack thread, and no lock held by
    another."""
    global _lock, _worker
    _llvm_lock.__exit__()
    _lock, _worker = threading.RLock(), None


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                    after_in_child=_after_fork_in_child)


def arena_high_water(reset=False):
    """Bytes of tensor arena in use at the fullest point of the calls so far (or since the
    last reset); `arena_high_water(reset=True)` returns it and starts a new measurement."""
    bounds = jit().arena_bounds
    used = int(bounds[2] - bounds[0])
    if reset:
        bounds[2] = bounds[0]
    return used


def arena_exhausted(*args):
    raise ResourceError(
        f"the compiled function needed more tensor memory than the {jit().arena.size >> 20} MiB "
        "arena holds; set JITAD_ARENA_MB to a larger size (before importing jitad) or use "
        "smaller batches")


class _StackExhausted(Exception):
    """The deep-stack thread ran out too (turned into ResourceError in the caller)."""


def deep_stack_exhausted(*args):
    raise _StackExhausted()


def stack_exhausted(*args):
    raise ResourceError(
        f"the compiled function recursed deeper than its {DEEP_STACK >> 20} MiB stack allows "
        "(a FUN or TREE recursion too deep or endless, or reverse mode through a WHILE/FOR "
        "loop with more iterations than fit: each iteration keeps a stack frame); "
        "reduce the recursion depth or restructure it as a WHILE loop")
