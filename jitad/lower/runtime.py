"""The process-wide JIT: MCJIT engines in generations (so that code nobody can call any
more is freed), symbol registration, the object-code disk cache, and turning entry
addresses into Python callables."""
import contextlib
import ctypes
import hashlib
import os
import queue
import re
import signal
import stat
import sys
import tempfile
import threading
import weakref

import llvmlite
import llvmlite.binding as llvm
import llvmlite.ir as llvm_ir
import numpy as np

from ..errors import ConfigError, ResourceError, env_int
from ..ir import float_checks
from ..ir.ops import LLVM
from ..ir.types import NUMPY
from ..timing import note_cache, stage
from . import parallel
from .llvm import INTERRUPTED, alloca
from .entry import (POOL, PY_API, PY_DATA, TB_BASE, TB_END, TB_LIMIT, TB_MAIN, TB_RELEASABLE, TB_SAVED, TB_SEEN,
                    THREAD_WORDS)

CACHE_FORMAT = 3   # 2: entries hold their key and fingerprint; 3: keyed by the program, list their symbols
BLAS_GEMMS = ("scipy_cblas_dgemm64_", "scipy_cblas_sgemm64_")
# A BLAS product in compiled code runs on OpenBLAS's threads only when it has at least this
# many multiply-adds (m·n·k, about 128³) and no other compiled call runs without the GIL at
# that moment (threads calling compiled code are the parallelism then); else on one thread
BLAS_THREADED_WORK = 1 << 21
OPENBLAS_ONE_THREAD = 1 << 18   # OpenBLAS's own bound (m·n·k) for products it keeps on one thread
# ... and only while the machine has an idle core: with the load average (1 minute) at
# BLAS_BUSY_LOAD cores short of all of them or above, OpenBLAS's workers wait for a core and
# spin (k-means' 16 x 10^4 x 1000 product on 2 cores under load 10: 3x the CPU time, 10x the
# wall time of one thread). The load is read again after BLAS_LOAD_CYCLES cycles (~0.1-0.5 s)
BLAS_BUSY_LOAD = 0.5
BLAS_LOAD_CYCLES = 1 << 28
MAX_CACHE_ENTRY = 256 << 20   # bytes; a larger cache file is ignored
DEEP_STACK = 512 << 20     # stack of the thread that retries deep recursions
STACK_MARGIN = 128 << 10   # kept free below compiled code's stack limit: a recursive frame and
                           # what it calls between two checks (kernels, BLAS, libm)
STATS = {"compiled": 0, "loaded": 0, "engines": 0, "disposed": 0}   # modules compiled here / loaded
# from the disk cache; engines (generations) started / disposed with their machine code
GENERATION_MODULES = 64   # programs an engine takes before a fresh one takes the new ones

_lock = threading.RLock()
_engine = None
_modules = {}       # cache key -> (weak reference to its `Generation`, the symbol prefix of its code there)
_retired = []       # what generations nothing references any more leave to free at the next compile
_texts = weakref.WeakValueDictionary()   # cache key -> its optimized IR while a Compiled holds it


def libm_symbols():
    """The libm functions declarations name as their LLVM lowering, with float variants."""
    return [spec + suffix for spec in LLVM.declared.values() if isinstance(spec, str) for suffix in ("", "f")]


_libm_bound = set()


def bind_libm():
    """Give compiled code the libm functions declarations name, those of primitives
    declared since the last call included (before each compile: looked up when used)."""
    names = [name for name in libm_symbols() if name not in _libm_bound]
    if names:
        libm = ctypes.CDLL("libm.so.6")
        for name in names:
            llvm.add_symbol(name, ctypes.cast(getattr(libm, name), ctypes.c_void_p).value)
        _libm_bound.update(names)


def _bind_python_objects():
    """The CPython API functions and objects compiled code calls and builds results of."""
    for name in PY_API:
        llvm.add_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value)
    for pyname, symbol in PY_DATA.items():
        llvm.add_symbol(symbol, id({"float": float, "int": int, "bool": bool, "True": True,
                                    "tuple": tuple, "dict": dict, "None": None, "list": list}[pyname]))
    llvm.add_symbol("jitad_ndarray_type", id(np.ndarray))
    llvm.add_symbol("jitad_ndarray_subtype", id(_ARRAY_SUBTYPE[0]))
    from ..forest import Tree
    llvm.add_symbol("jitad_tree_type", id(Tree))
    for dtype, np_dtype in NUMPY.items():   # the builtin descriptor singletons
        llvm.add_symbol(f"jitad_descr_{dtype}", id(np.dtype(np_dtype)))
    llvm.add_symbol("jitad_PyArray_New", _numpy_c_api(93))
    llvm.add_symbol("jitad_PyArray_Scalar", _numpy_c_api(60))


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
        self.machines = [self.tm] + [machine() for _ in range(parallel.THREADS - 1)]   # one per thread
        self.fast_machines = [target.create_target_machine(cpu=self.cpu, features=self.features, opt=0, jit=True)
                              for _ in self.machines]   # for code LLVM's pipeline cannot improve
        self.new_machine = machine
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine())  # owns its machine;
        # holds what lives as long as the process (the MPI helpers); programs go to generations
        self.generation = None   # the `Generation` taking new programs
        self.fingerprint = "|".join([str(CACHE_FORMAT), llvmlite.__version__, str(llvm.llvm_version_info),
                                     llvm.get_process_triple(), self.cpu, self.features,
                                     sys.implementation.cache_tag, _source_digest()])
        _bind_python_objects()
        bind_libm()
        mb = env_int("JITAD_ARENA_MB", 1024, 1)
        self.arena_bytes = mb << 20   # each thread's (`enter_thread`)
        self.arena = new_arena(self.arena_bytes)   # the first thread's, made here to fail early
        self._bind_words()
        self._bind_blas()
        from .sort import numpy_qsort_symbols
        for name, address in numpy_qsort_symbols().items():   # NumPy's vectorized sort (lower/sort.py)
            llvm.add_symbol(name, address)
            self.fingerprint += "|" + name
        self.constants = {}   # symbol -> array kept alive for compiled code

    def _bind_words(self):
        """The words compiled code shares with the runtime: Ctrl-C's counter and the C
        handler it chains to, the deep-stack thread's stop word, the stack limit's key."""
        self.sigints = np.zeros(1, dtype=np.int64)   # SIGINTs counted by `on_sigint` (`_gil_helpers`)
        llvm.add_symbol("jitad_sigints", self.sigints.ctypes.data)
        for name in ("PyEval_SaveThread", "PyEval_RestoreThread", "PyErr_SetInterruptEx"):
            llvm.add_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value)
        llvm.add_symbol("sigaction", ctypes.cast(_libc.sigaction, ctypes.c_void_p).value)
        self.stop = np.zeros(1, dtype=np.int64)   # nonzero: the deep-stack thread's compiled code stops
        llvm.add_symbol("jitad_stop", self.stop.ctypes.data)
        self.prev_sigint = np.zeros(1, dtype=np.uint64)   # the C handler `on_sigint` chains to
        llvm.add_symbol("jitad_prev_sigint", self.prev_sigint.ctypes.data)
        # compiled code finds its thread's stack limit under this pthread key (`enter_thread`)
        self.stack_key = np.zeros(1, dtype=np.uint32)
        if _libc.pthread_key_create(self.stack_key.ctypes.data, None):
            raise ResourceError("jitad: no pthread key left for the stack limit")
        llvm.add_symbol("jitad_stack_key", self.stack_key.ctypes.data)
        llvm.add_symbol("pthread_getspecific", ctypes.cast(_libc.pthread_getspecific, ctypes.c_void_p).value)

    def _bind_blas(self):
        """OpenBLAS's GEMMs (called through wrappers that set its thread count) and the
        words the wrappers read."""
        blas = _numpy_openblas()
        self.blas = [name for name in BLAS_GEMMS if blas is not None and hasattr(blas, name)]
        for name in self.blas:   # compiled code calls them through `_blas_threads`' wrappers
            llvm.add_symbol("jitad_real_" + name, ctypes.cast(getattr(blas, name), ctypes.c_void_p).value)
        self.blas_threads = np.ones(1, dtype=np.int64)   # OpenBLAS's own thread count
        self.gil_free = np.zeros(1, dtype=np.int64)   # compiled calls running without the GIL now
        # whether the machine is busy (no idle core: one thread), and the cycle count it was read at
        self.blas_busy = np.zeros(2, dtype=np.int64)
        llvm.add_symbol("jitad_blas_threads", self.blas_threads.ctypes.data)
        llvm.add_symbol("jitad_blas_busy", self.blas_busy.ctypes.data)
        llvm.add_symbol("jitad_getloadavg", ctypes.cast(_libc.getloadavg, ctypes.c_void_p).value)
        llvm.add_symbol("jitad_gil_free", self.gil_free.ctypes.data)
        if self.blas:
            self.blas_threads[0] = blas.scipy_openblas_get_num_threads64_()
            llvm.add_symbol("jitad_blas_set_threads",
                            ctypes.cast(blas.scipy_openblas_set_num_threads64_, ctypes.c_void_p).value)

    def optimize(self, ir_text):
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=2)
        pto.loop_vectorization = pto.slp_vectorization = True
        pb = llvm.create_pass_builder(self.tm, pto)
        mpm = pb.getModulePassManager()
        try:
            with remainder_vectors():   # (the same code as `_compile` made)
                mpm.run(mod, pb)
        finally:   # llvmlite 0.50 never frees a ModulePassManager (ObjectRef._dispose shadows
            llvm.newpassmanagers.NewPassManager._dispose(mpm)   # its own): ~90 KiB a module
            mpm.detach()
        return mod


def _source_digest():
    """A digest of jitad's own source: the disk cache is keyed by programs, not by their
    LLVM IR, so a change to how jitad lowers them must miss it (~2 ms, once a process)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    h = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(f for f in files if f.endswith(".py")):
            with open(os.path.join(folder, name), "rb") as f:
                h.update(os.path.relpath(os.path.join(folder, name), root).encode() + b"\0" + f.read())
    return h.hexdigest()[:32]


def _numpy_c_api(index):
    """Entry `index` of numpy's C-API function table (93 is PyArray_New, 60 PyArray_Scalar)."""
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


def new_arena(nbytes):
    """A tensor arena of `nbytes` (address space: pages are committed when touched)."""
    try:
        return np.empty(nbytes + 64, dtype=np.uint8)   # (+ the high-water word)
    except MemoryError:
        mb = nbytes >> 20
        raise ConfigError(f"JITAD_ARENA_MB={mb}: this machine cannot reserve {mb} MiB for jitad's arena; "
                          "set a smaller size (default 1024)", where=False) from None


class _ThreadBlock:
    """A thread's block for compiled code (`entry.THREAD_WORDS`: its stack limit, tensor
    arena and GIL state), alive while the thread's Python state is (a `threading.local`
    holds it); then it unsets the pthread key if it dies in its own thread."""

    def __init__(self, arena, main):
        self.arena, self.words = arena, np.zeros(THREAD_WORDS, dtype=np.uint64)
        self.words[TB_MAIN] = main
        bottom = _stack_bottom()
        base = (arena.ctypes.data + 63) & ~63
        self.words[TB_LIMIT] = bottom + STACK_MARGIN if bottom else 2 ** 64 - 1   # unknown: no recursion
        self.words[TB_BASE] = base
        self.words[TB_END] = base + ((arena.size - 64 - (base - arena.ctypes.data)) & ~63)
        self.words[TB_SAVED] = self.words[TB_SEEN] = self.words[TB_RELEASABLE] = 0
        self.peak = ctypes.c_uint64.from_address(int(self.words[TB_END]))   # the high-water word
        self.peak.value = base
        self.owner = _libc.pthread_self()
        _libc.pthread_setspecific(int(jit().stack_key[0]), self.words.ctypes.data)
        with _lock:
            _blocks.add(self)

    def __del__(self):
        if _engine is not None and _libc.pthread_self() == self.owner:   # (a thread's state may be
            _libc.pthread_setspecific(int(_engine.stack_key[0]), None)   # cleared by another)

    def used(self):
        return self.peak.value - int(self.words[TB_BASE])


_blocks = weakref.WeakSet()   # every live thread's block (for `arena_high_water`)
_thread = threading.local()


def enter_thread():
    """Make the calling thread's block for compiled code (its stack limit, its own tensor
    arena): an entry called in a thread for the first time forwards here, then runs. (A
    thread-specific value, read natively by every entry: threads of any stack size,
    forked children and threads jitad never saw get their own.) The main thread's first
    call also puts jitad's SIGINT counter in front of Python's handler."""
    j = jit()
    main = threading.current_thread() is threading.main_thread()
    if getattr(_thread, "block", None) is None:
        with _lock:   # the arena made with the JIT goes to one thread at a time
            taken = any(b.arena is j.arena for b in _blocks)
            _thread.block = _ThreadBlock(j.arena if not taken else new_arena(j.arena_bytes), main)
    else:   # a forked child's thread, or a block unset by a thread state another thread cleared
        _libc.pthread_setspecific(int(j.stack_key[0]), _thread.block.words.ctypes.data)
    if main:
        _count_sigints()


_DATA_SYMBOLS = {}   # stem -> the Python objects given under it (alive as long as code may read them)
_EQUAL_DATA = {}   # (stem, type, object) -> the first object given under stem equal to it


def data_symbol(stem, obj):
    """The name of a data symbol at Python object `obj` (a dict key the entry looks up, a
    namedtuple class it compares with, a registered class's aux data): `stem_<k>`, `obj`
    being the k-th object this process gave under `stem` (so names are stable across
    processes, for the disk cache, and a symbol never moves: machine code keeps the address
    it was linked with). A hashable `obj` equal to one given before (same type) shares its
    symbol: code traced again for a new but equal aux data (a program run afresh) finds the
    code compiled before, and builds its results with the first one, as JAX's do."""
    with _lock:
        try:
            obj = _EQUAL_DATA.setdefault((stem, type(obj), obj), obj)
        except Exception:   # (unhashable, or an `==` that does not answer a bool): by identity
            pass
        seen = _DATA_SYMBOLS.setdefault(stem, [])
        k = next((i for i, o in enumerate(seen) if o is obj), len(seen))
        if k == len(seen):
            seen.append(obj)
            llvm.add_symbol(f"{stem}_{k}", id(obj))
    return f"{stem}_{k}"


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
            _thread_helpers()
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


class _Text(str):
    """Optimized IR text (a str that can be referenced weakly)."""


def _read_regular_file(path):
    """The bytes of `path` if it is a regular file of at most `MAX_CACHE_ENTRY` bytes
    (not a link, FIFO, device or directory, which could block or never end), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_CACHE_ENTRY:
            return None
        chunks, left = [], info.st_size
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _pack(fields):
    return b"".join(len(f).to_bytes(8, "little") + f for f in fields)


def _unpack(payload):
    fields, at = [], 0
    while at + 8 <= len(payload):
        n = int.from_bytes(payload[at:at + 8], "little")
        fields.append(payload[at + 8:at + 8 + n])
        at += 8 + n
    return fields if at == len(payload) else None


def _read_cache(path, key, fingerprint, names):
    """(object code, optimized IR text, external symbols) of the entry for `key`, or None
    unless the file holds exactly that: its checksum matches, it names this key and
    fingerprint (a file renamed or swapped names another), and its object code mentions
    the entry symbols `names`."""
    blob = _read_regular_file(path)
    if blob is None or hashlib.sha256(blob[32:]).digest() != blob[:32]:
        return None
    fields = _unpack(blob[32:])
    if fields is None or len(fields) < 5 or fields[:2] != [key.encode(), fingerprint.encode()]:
        return None
    text, obj, symbols = fields[2:5]
    if not all(name.encode() + b"\0" in obj for name in names):
        return None
    try:
        return [obj] + fields[5:], text.decode(), symbols.decode().split()
    except UnicodeDecodeError:
        return None


def _write_cache(path, key, fingerprint, objects, text, symbols):
    payload = _pack([key.encode(), fingerprint.encode(), text.encode(), objects[0], " ".join(symbols).encode()]
                    + objects[1:])
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(hashlib.sha256(payload).digest() + payload)
        os.replace(tmp, path)   # atomic: concurrent writers each replace a whole file
    except OSError:
        pass   # an unwritable cache (or a directory in the entry's place) only costs a recompile


class Generation:
    """An MCJIT engine holding the machine code of up to `GENERATION_MODULES` programs.
    MCJIT cannot unload one program, but a whole engine can go: every Python callable
    made from code in it (`python_function`) holds its generation, and once none does the
    engine and its memory are freed (at the next compile, under the lock). A program's
    code only calls itself and process-wide symbols (`llvm.add_symbol`), never code of
    another program, so engines are independent. The result arrays its entries keep for
    reuse (`entry._result_array`) are let go too."""

    def __init__(self, j):
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), j.new_machine())
        self.modules, self.keys = 0, []   # programs loaded; their cache keys
        self.pools, self.method_defs = [], []   # addresses of its entries' result pools and PyMethodDefs
        weakref.finalize(self, _retired.append, (self.engine, self.keys, self.pools, self.method_defs))
        STATS["engines"] += 1   # (the finalizer may run in any thread: it calls no LLVM)

    def add_pools(self, text, prefix):
        """Note the result pools that the optimized IR `text` of the code under `prefix` defines."""
        self.pools += [self.engine.get_global_value_address(name) for name in _POOL_NAME.findall(text)
                       if name.startswith(prefix)]


_POOL_NAME = re.compile(r'^@"?(\w+_pool\d+)"? = ', re.M)


def _generation(j):
    """The generation taking new code: a fresh one once the current holds `GENERATION_MODULES`
    programs (the old one lives on while its callables do)."""
    if j.generation is None or j.generation.modules >= GENERATION_MODULES:
        j.generation = Generation(j)
    return j.generation


def _dispose_retired():
    """Free the engines of generations nobody references (under `_lock`)."""
    while _retired:
        engine, keys, pools, method_defs = _retired.pop()
        for key in keys:
            if key in _modules and _modules[key][0]() is None:
                del _modules[key]
        for address in pools:   # the arrays the pools hold (they may be a user's too)
            slots = (ctypes.c_void_p * POOL).from_address(address)
            for i, obj in enumerate(slots):
                if obj:
                    slots[i] = None
                    _decref(obj)
        for block in method_defs:   # read by entries until their deallocation, which is over
            _raw_free(block)
        engine.close()
        STATS["disposed"] += 1


_decref = ctypes.pythonapi.Py_DecRef
_decref.argtypes = [ctypes.c_void_p]


def _load(generation, objects, names):
    """Add object code to `generation`'s engine; the addresses of `names`, or None if one
    is missing."""
    engine = generation.engine
    for obj in objects:
        engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    generation.modules += 1
    addresses = [engine.get_function_address(name) for name in names]
    return addresses if all(addresses) else None


def _external_symbols(modules, prefix):
    """The symbols optimized `modules` take from the process (not LLVM intrinsics, not
    each other's functions, named by `prefix`)."""
    return sorted({g.name for mod in modules for g in list(mod.functions) + list(mod.global_variables)
                   if g.is_declaration and not g.name.startswith(("llvm.", prefix))})


def _compile(j, ir_text, prefix):
    """(optimized modules, their object code) of a program's LLVM IR: a large one as
    up to `parallel.PARTS` modules compiled on `parallel.THREADS` threads, its kernels
    dealt out between them."""
    parts = parallel.PARTS if len(ir_text) >= parallel.MIN_SPLIT_BYTES else 1
    fast = _fast_functions(ir_text, prefix)   # straight code LLVM's pipeline cannot improve
    segmented = f'@"{prefix}glue' in ir_text   # a long program (llvm.Lowerer.lower_segments)
    texts = parallel.split_module(ir_text, parts, lambda name: name.startswith((prefix + "kernel", prefix + "segment")),
                                  fast.__contains__ if fast else None) \
        if parts > 1 or fast else [ir_text]
    texts = [t if isinstance(t, tuple) else (t, False) for t in texts]
    if parts > 1 and not segmented:   # the parts after the first hold kernels: no loop unrolling (`parallel.
        texts = [(t, f, f or k == 0) for k, (t, f) in enumerate(texts)]   # compile_part`); a segmented program's
        # compile time is its glue's, and unrolling its kernels measured 1-2% faster runs (fluidsim port)
    with remainder_vectors():
        compiled = parallel.compile_parts(texts, j.machines, j.fast_machines)
    return [mod for mod, _ in compiled], [obj for _, obj in compiled]


FAST_ENTRY_LINES = 2000   # an entry point longer than this is compiled without LLVM's pipeline


def _fast_functions(ir_text, prefix):
    """The functions of a program's LLVM IR compiled without LLVM's pass pipeline: a long
    program's glue (`llvm.Lowerer.lower_segments`: straight code calling kernels) and a
    long entry point (`entry.add_entries`' body: a program taking or returning many arrays
    checks and boxes each in straight code, once a call; at O2 it was most of a large
    model's LLVM time)."""
    fast = set()
    for m in re.finditer(r'^define [^@]*@"([^"]+)"', ir_text, re.M):
        name = m.group(1)
        if name.startswith(prefix + "glue"):
            fast.add(name)
        elif name in (prefix + "body", prefix + "entry", prefix + "deep"):
            end = ir_text.find("\n}\n", m.end())
            if ir_text.count("\n", m.end(), end) > FAST_ENTRY_LINES:
                fast.add(name)
    return fast


# The remainder of a vectorized loop (8 doubles a vector) runs as vectors of 2 before any scalar
# code: a row of 50 or 26 is then 6 or 3 vectors of 8 and one of 2, not 2 scalar iterations,
# which cost as much as a vector each (a char-RNN step's tanh and exp kernels; LLVM's default
# vectorizes remainders only behind loops of 16 lanes or more)
EPILOGUE_VF = 2


@contextlib.contextmanager
def remainder_vectors():
    """LLVM's option for `EPILOGUE_VF` while jitad's code is optimized: the option is
    process-wide, so LLVM's default comes back for others (numba) afterwards."""
    llvm.set_option("", f"-epilogue-vectorization-force-VF={EPILOGUE_VF}")
    try:
        yield
    finally:
        llvm.set_option("", "-epilogue-vectorization-force-VF=1")


def _resolvable(symbols, constants):
    """Whether every symbol object code needs is known here; registers the large constants
    it names from `constants()` ({symbol: array} of the program) first. Code from the disk
    cache skipped lowering, which registers symbols (constants, LAPACK, MPI) as it goes."""
    wanted = [name for name in symbols if name.startswith("jitad_const_") and name not in jit().constants]
    if wanted:
        found = constants()
        register_constants({name: found[name] for name in wanted if name in found})
    return all(llvm.address_of_symbol(name) for name in symbols)


def _found_in_process(j, key, full_key, path, prefix, generation, lower, placeholder, entries):
    """`compile_module`'s answer for code this process's engine holds already. Where no
    Compiled holds its optimized IR text any more, the answer gives a function that reads
    or derives the text again (an LLVM optimization of the whole program: done only if
    someone asks for the text, not on every retrace that finds the code)."""
    note_cache("process")
    text = _texts.get(key)
    if text is None:
        def text():
            with _lock:
                found = _texts.get(key)
                if found is None:
                    cached = _read_cache(path, full_key, j.fingerprint, ()) if path else None
                    found = _Text(cached[1] if cached else str(j.optimize(lower().replace(placeholder, prefix))))
                    _texts[key] = found
                return found
    return [generation.engine.get_function_address(prefix + e) for e in entries], text, False, generation


def compile_module(program_text, lower, placeholder, entries, constants):
    """The compiled code of a program: loaded from this process's engine or the disk cache
    by the key `program_text` (the program as `jitad.ir.printer.program_key_text` prints
    it, and its entries' layouts), else `lower()` (LLVM IR whose symbol names start with
    `placeholder`) is optimized and compiled. `constants()` gives the {symbol: array} of
    the program's large constants. Returns (addresses of the functions
    `placeholder + entry` for each of `entries`, optimized IR text (or a function giving
    it, for code found in this process), loaded_from_disk, the `Generation` holding the
    code: whatever calls the addresses must keep it)."""
    j = jit()
    bind_libm()
    with stage("ir_text"):
        full_key = hashlib.sha256((j.fingerprint + "\n" + program_text).encode()).hexdigest()
    key = full_key[:32]
    directory = cache_dir()
    path = os.path.join(directory, key + ".jitobj") if directory else None
    with _lock:
        _dispose_retired()
        found = _modules.get(key)
        generation = found[0]() if found else None
        if generation is not None:   # compiled before in this process, and its engine is still there
            return _found_in_process(j, key, full_key, path, found[1], generation, lower, placeholder, entries)
        generation = _generation(j)
        prefix = f"jitad_{key}_"
        names = [prefix + e for e in entries]
        with stage("cache_load"):
            cached = _read_cache(path, full_key, j.fingerprint, names) if path else None
            usable = cached is not None and _resolvable(cached[2], constants)
        with stage("link"):
            addresses = _load(generation, cached[0], names) if usable else None
        loaded = addresses is not None
        if loaded:
            text = cached[1]
            STATS["loaded"] += 1
            note_cache("disk")
        else:
            if cached:   # unusable or without its entries: compile under another prefix
                prefix = f"jitad_{key}_again_"
                names = [prefix + e for e in entries]
                with contextlib.suppress(OSError):
                    os.unlink(path)
            modules, objects = _compile(j, lower().replace(placeholder, prefix), prefix)
            with stage("codegen"):
                text = "\n".join(map(str, modules))
            if path and not cached:
                with stage("cache_store"):
                    _write_cache(path, full_key, j.fingerprint, objects, text, _external_symbols(modules, prefix))
            with stage("link"):
                addresses = _load(generation, objects, names)
            assert addresses, "compiled object code lacks its entry points"
            STATS["compiled"] += 1
            note_cache("miss" if path else "off")
        _modules[key] = weakref.ref(generation), prefix
        generation.keys.append(key)
        generation.add_pools(text, prefix)
        _texts[key] = text = _Text(text)
        return addresses, text, loaded, generation


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_void_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_void_p)]


_METH_FASTCALL_KEYWORDS = 0x80 | 0x02
_new_cfunction = ctypes.pythonapi.PyCFunction_NewEx
_new_cfunction.restype = ctypes.py_object
_new_cfunction.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.py_object]
_raw_malloc = ctypes.pythonapi.PyMem_RawMalloc
_raw_malloc.restype, _raw_malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
_raw_free = ctypes.pythonapi.PyMem_RawFree
_raw_free.argtypes = [ctypes.c_void_p]


def _method_def(addr, name):
    """A PyMethodDef in memory of its own: a builtin function reads it until its very end,
    which at interpreter exit can come after every module is torn down. (Its generation
    frees it with the code, once no entry is left.)"""
    encoded = name.encode() + b"\0"
    block = _raw_malloc(ctypes.sizeof(_MethodDef) + len(encoded))
    if not block:
        raise MemoryError("jitad: no memory for an entry point")
    ctypes.memmove(block + ctypes.sizeof(_MethodDef), encoded, len(encoded))
    md = _MethodDef.from_address(block)
    md.ml_name, md.ml_meth, md.ml_flags, md.ml_doc = block + ctypes.sizeof(_MethodDef), addr, \
        _METH_FASTCALL_KEYWORDS, None
    return block


def python_function(addr, name, fallback, on_exhausted, checks=(), owner=None):
    """A builtin function object calling the entry at `addr`; its `self` holds the
    handlers the entry forwards to: (dispatcher, stack exhausted, arena exhausted,
    Ctrl-C, stopped, first call in this thread, then one per failed-check message:
    `checks`), and last `owner`, the `Generation` of the code (alive while the function is)."""
    again = _Interrupted()
    first_call_in_thread = _FirstCall()
    block = _method_def(addr, name)
    if owner is not None:
        owner.method_defs.append(block)
    fn = _new_cfunction(block, (fallback, on_exhausted, arena_exhausted, again, stopped, first_call_in_thread)
                        + tuple(checks) + (owner,), None)
    again.entry = first_call_in_thread.entry = weakref.ref(fn)   # (no cycle: freed when unreferenced)
    return fn


class _FirstCall:
    """An entry's handler for its first call in a thread: stores the thread's stack limit,
    then calls the entry again."""
    __slots__ = ("entry",)

    def __call__(self, *args):
        enter_thread()
        return self.entry()(*args)


_trip = ctypes.pythonapi.PyErr_SetInterruptEx
_trip.argtypes = [ctypes.c_int]
_run_signal_handlers = ctypes.pythonapi.PyErr_CheckSignals   # (pythonapi raises what a handler raised)


_raised = threading.local()   # what a signal handler raised in a callback from compiled code


def interrupted_by(exc):
    """A callback from compiled code (`jitad.debug.print`) ran a signal handler that raised
    `exc`: the code unwinds with status INTERRUPTED, and its caller raises `exc`."""
    _raised.exc = exc


class _Interrupted:
    """An entry's handler for Ctrl-C: its compiled code found SIGINT at a poll (which
    consumed the signal's flag) and unwound, so its arena space is free. The signal is
    tripped again and Python's handler runs here, raising KeyboardInterrupt by default; a
    handler that returns gets the call run again from the start (compiled code has no
    side effects). Handlers never run inside compiled code, so one that calls jitad
    functions cannot disturb the arena of the call it interrupted; only a `debug.print`
    callback runs Python there, and what a handler raised in it is raised here. Ctrl-C
    stops the calls of other threads too (those running without the GIL): each raises
    KeyboardInterrupt while SIGINT's handler is Python's default, else runs again."""
    __slots__ = ("entry",)

    def __call__(self, *args):
        exc = _raised.__dict__.pop("exc", None)
        if exc is not None:   # the handler ran already, in a callback
            raise exc
        if threading.current_thread() is not threading.main_thread():   # (handlers run in the main thread)
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                raise KeyboardInterrupt
            return self.entry()(*args)
        _trip(signal.SIGINT)
        _run_signal_handlers()
        return self.entry()(*args)


class CheckFailed:
    """An entry's handler for a failed `check`: raises RuntimeCheckError with its message
    (`where=False` on the deep-stack thread, whose frames are none of the user's)."""
    __slots__ = ("message", "where")

    def __init__(self, message, where=True):
        self.message, self.where = message, where

    def __call__(self, *args):
        raise float_checks.error_class(self.message)(self.message, where=self.where)


class _Stopped(Exception):
    """The deep-stack thread's compiled code stopped: its caller got Ctrl-C."""


def stopped(*args):
    raise _Stopped()


class _SigAction(ctypes.Structure):   # glibc's struct sigaction (Linux)
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16), ("flags", ctypes.c_int),
                ("restorer", ctypes.c_void_p)]


_SA_SIGINFO = 4
_on_sigint = None   # address of the C-level SIGINT handler below (`_gil_helpers`)
_count_sigints_now = None   # `_sigint_counter`'s function, called from Python


class _HelperModule:
    """An LLVM module of functions jitad's runtime gives compiled code, and the process
    symbols they use."""
    PREFIX = "jitad_helper_"

    def __init__(self, name):
        self.module = new_module(name)
        self.names = []

    def extern(self, name, fnty=None):
        """A process function (given its type) or 64-bit word (without)."""
        if name in self.module.globals:
            return self.module.globals[name]
        if fnty is not None:
            return llvm_ir.Function(self.module, fnty, name=name)
        g = llvm_ir.GlobalVariable(self.module, llvm_ir.IntType(64), name=name)
        g.linkage = "external"
        return g

    def define(self, name, fnty):
        fn = llvm_ir.Function(self.module, fnty, name=self.PREFIX + name)
        self.names.append(name)
        return fn, llvm_ir.IRBuilder(fn.append_basic_block("entry"))

    def compile(self):
        """{name: address}, in the process's engine (a few ms: not worth the disk cache,
        which holds programs only)."""
        engine = jit().engine
        engine.add_module(llvm.parse_assembly(str(self.module)))
        engine.finalize_object()
        return {name: engine.get_function_address(self.PREFIX + name) for name in self.names}


def _thread_helpers():
    """Compile the functions compiled code calls for threads and bind them (once a
    process, from `jit()`): `_gil_helpers`, `_blas_threads`' wrappers."""
    global _on_sigint
    h = _HelperModule("jitad_threads")
    _gil_helpers(h)
    _blas_threads(h, jit().blas)
    addresses = h.compile()
    _on_sigint = addresses.pop("on_sigint")
    global _count_sigints_now
    _count_sigints_now = ctypes.CFUNCTYPE(None)(addresses.pop("count_sigints"))
    for name, address in addresses.items():
        llvm.add_symbol(name if name in BLAS_GEMMS else "jitad_" + name, address)


def _gil_helpers(h):
    """Each `tb` below is the calling thread's block (`entry.THREAD_WORDS`):
    - `void jitad_release_gil(tb)`: let the GIL go (PyEval_SaveThread), first asking
      Python whether SIGINT is pending (then the call's first poll stops it);
    - `void jitad_acquire_gil(tb, i32 *status)`: take it back (PyEval_RestoreThread);
    - `i32 jitad_poll_signals()`, the polls' question "Ctrl-C?": holding the GIL, Python's
      answer (`PyOS_InterruptOccurred`, the main thread only), and the GIL goes if the call
      may let it; without it, whether `jitad_sigints` moved since the call started;
    - `void on_sigint(int)`, the C-level SIGINT handler (`_count_sigints`)."""
    ir, i32, i64, ptr, void = llvm_ir, llvm_ir.IntType(32), llvm_ir.IntType(64), llvm_ir.PointerType(), llvm_ir.VoidType()
    sigints, prev, key, gil_free = map(h.extern, ("jitad_sigints", "jitad_prev_sigint", "jitad_stack_key",
                                                  "jitad_gil_free"))
    occurred = h.extern("PyOS_InterruptOccurred", ir.FunctionType(i32, []))
    save, restore = h.extern("PyEval_SaveThread", ir.FunctionType(ptr, [])), \
        h.extern("PyEval_RestoreThread", ir.FunctionType(void, [ptr]))
    getspecific = h.extern("pthread_getspecific", ir.FunctionType(ptr, [i32]))
    trip = h.extern("PyErr_SetInterruptEx", ir.FunctionType(i32, [i32]))
    word = lambda b, tb, k: b.gep(tb, [i64(k)], source_etype=i64)

    count_sigints = _sigint_counter(h, _on_sigint(h, sigints, prev), prev)

    release, b = h.define("release_gil", ir.FunctionType(void, [ptr]))
    tb = release.args[0]
    with b.if_then(b.icmp_unsigned("!=", b.load(word(b, tb, TB_MAIN), typ=i64), i64(0))):
        b.call(count_sigints, [])   # (a handler set since may have displaced the counter)
    pending = b.zext(b.icmp_signed("!=", b.call(occurred, []), i32(0)), i64)   # (consumed: count it unseen)
    b.store(b.sub(b.load(word(b, tb, TB_SEEN), typ=i64), pending), word(b, tb, TB_SEEN))
    b.atomic_rmw("add", gil_free, i64(1), "monotonic")
    b.store(b.ptrtoint(b.call(save, []), i64), word(b, tb, TB_SAVED))
    b.ret_void()

    acquire, b = h.define("acquire_gil", ir.FunctionType(void, [ptr, ptr]))
    tb, status = acquire.args
    b.atomic_rmw("sub", gil_free, i64(1), "monotonic")
    b.call(restore, [b.inttoptr(b.load(word(b, tb, TB_SAVED), typ=i64), ptr)])
    b.store(i64(0), word(b, tb, TB_SAVED))
    moved = b.icmp_unsigned("!=", b.load_atomic(sigints, "acquire", 8, typ=i64), b.load(word(b, tb, TB_SEEN), typ=i64))
    with b.if_then(moved, likely=False):   # consume Python's flag, as a poll holding the GIL does,
        tripped = b.icmp_signed("!=", b.call(occurred, []), i32(0))   # so that its handler runs once
        stopped = b.icmp_unsigned("==", b.load(status, typ=i32), i32(INTERRUPTED))
        with b.if_then(b.and_(tripped, b.not_(stopped))):   # the call ended first: leave it to Python
            b.call(trip, [i32(signal.SIGINT)])
    b.ret_void()

    poll, b = h.define("poll_signals", ir.FunctionType(i32, []))
    tb = b.call(getspecific, [b.load(key, typ=i32)])
    with b.if_then(b.icmp_unsigned("==", tb, ptr(None)), likely=False):   # (not in an entry's call)
        b.ret(b.call(occurred, []))
    with b.if_then(b.icmp_unsigned("==", b.load(word(b, tb, TB_SAVED), typ=i64), i64(0))):   # holding the GIL
        asked = b.call(occurred, [])
        with b.if_then(b.icmp_signed("!=", asked, i32(0)), likely=False):
            b.ret(asked)
        left = b.load(word(b, tb, TB_RELEASABLE), typ=i64)   # polls until the GIL goes (0: never)
        with b.if_then(b.icmp_unsigned("!=", left, i64(0))):
            b.store(left := b.sub(left, i64(1)), word(b, tb, TB_RELEASABLE))
            with b.if_then(b.icmp_unsigned("==", left, i64(0))):
                b.call(release, [tb])
            b.ret(i32(0))
    moved = b.icmp_unsigned("!=", b.load_atomic(sigints, "acquire", 8, typ=i64), b.load(word(b, tb, TB_SEEN), typ=i64))
    b.ret(b.zext(moved, i32))


def _on_sigint(h, sigints, prev):
    """`void on_sigint(int)`: the C-level SIGINT handler; Python's handler first (a call
    that sees the count finds the signal tripped, and its handler runs once), then the count."""
    ir, i32, i64, ptr = llvm_ir, llvm_ir.IntType(32), llvm_ir.IntType(64), llvm_ir.PointerType()
    on_sigint, b = h.define("on_sigint", ir.FunctionType(ir.VoidType(), [i32]))
    handler = b.load(prev, typ=ptr)
    handler.type = ir.FunctionType(ir.VoidType(), [i32]).as_pointer()   # lets llvmlite emit the indirect call
    b.call(handler, on_sigint.args)
    b.atomic_rmw("add", sigints, i64(1), "release")
    b.ret_void()
    return on_sigint


def _sigint_counter(h, on_sigint, prev):
    """`void count_sigints()`: put `on_sigint` in front of SIGINT's handler if that is
    Python's (a plain handler, neither SIG_DFL nor SIG_IGN, nor ours), chaining to it: a
    call running without the GIL cannot ask Python whether Ctrl-C came, so its polls read
    the count instead; Python's handler still runs, as before. (Only the main thread calls
    it, the only one Python changes handlers in: nothing races with it.)"""
    ir, i32, i64, ptr = llvm_ir, llvm_ir.IntType(32), llvm_ir.IntType(64), llvm_ir.PointerType()
    action_t = ir.ArrayType(i64, ctypes.sizeof(_SigAction) // 8)
    sigaction = h.extern("sigaction", ir.FunctionType(i32, [i32, ptr, ptr]))
    fn, b = h.define("count_sigints", ir.FunctionType(ir.VoidType(), []))
    action = alloca(b, action_t)
    with b.if_then(b.icmp_signed("!=", b.call(sigaction, [i32(signal.SIGINT), ptr(None), action]), i32(0))):
        b.ret_void()
    handler = b.load(action, typ=i64)
    ours = b.ptrtoint(on_sigint, i64)
    flags = b.load(b.gep(action, [i64(_SigAction.flags.offset)], source_etype=ir.IntType(8)), typ=i32)
    is_pythons = b.and_(b.icmp_unsigned(">", handler, i64(1)), b.icmp_unsigned("!=", handler, ours))
    is_pythons = b.and_(is_pythons, b.icmp_signed("==", b.and_(flags, i32(_SA_SIGINFO)), i32(0)))
    with b.if_then(is_pythons):
        b.store(handler, prev)
        b.store(ours, action)
        b.call(sigaction, [i32(signal.SIGINT), action, ptr(None)])
    b.ret_void()
    return fn


def _blas_threads(h, gemms):
    """Wrappers of OpenBLAS's cblas_?gemm (the symbols compiled code calls) choosing its
    thread count per product: OpenBLAS's own for one of `BLAS_THREADED_WORK` multiply-adds
    or more while no other compiled call runs without the GIL, else one (set around the
    call: the count is process-wide, and NumPy's products use it too)."""
    ir, i32, i64, ptr = llvm_ir, llvm_ir.IntType(32), llvm_ir.IntType(64), llvm_ir.PointerType()
    if not gemms:
        return
    own, gil_free = h.extern("jitad_blas_threads"), h.extern("jitad_gil_free")
    set_threads = h.extern("jitad_blas_set_threads", ir.FunctionType(ir.VoidType(), [i32]))
    busy = _machine_busy(h)
    for name in gemms:
        real = ir.FloatType() if name.startswith("scipy_cblas_s") else ir.DoubleType()
        fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, i64, i64, i64, real, ptr, i64, ptr, i64, real, ptr, i64])
        gemm = h.extern("jitad_real_" + name, fnty)
        fn, b = h.define(name, fnty)
        m, n, k = fn.args[3:6]
        work = b.mul(b.mul(m, n), k)
        small = b.icmp_signed("<", work, i64(BLAS_THREADED_WORK))
        crowded = b.icmp_signed(">", b.load_atomic(gil_free, "monotonic", 8, typ=i64), i64(1))
        split = b.and_(b.icmp_signed(">", b.load(own, typ=i64), i64(1)),   # (OpenBLAS runs one of up to
                       b.icmp_signed(">", work, i64(OPENBLAS_ONE_THREAD)))   # 2^18 on one thread itself)
        with b.if_then(b.and_(split, b.not_(b.or_(small, crowded)))):   # a threaded product: is a core idle?
            b.call(busy, [])
        loaded = b.icmp_unsigned("!=", b.load(h.extern("jitad_blas_busy"), typ=i64), i64(0))
        with b.if_else(b.and_(split, b.or_(b.or_(small, crowded), loaded))) as (one, threads):
            with one:
                b.call(set_threads, [i32(1)])
                b.call(gemm, fn.args)
                b.call(set_threads, [b.trunc(b.load(own, typ=i64), i32)])
            with threads:
                b.call(gemm, fn.args)
        b.ret_void()


def _machine_busy(h):
    """`void jitad_blas_refresh_load()`: sets the word `jitad_blas_busy` to whether the load average
    leaves no core idle (within BLAS_BUSY_LOAD), read again once BLAS_LOAD_CYCLES cycles
    passed since the cycle count in the next word."""
    ir, i32, i64, f64, ptr = llvm_ir, llvm_ir.IntType(32), llvm_ir.IntType(64), llvm_ir.DoubleType(), llvm_ir.PointerType()
    words = h.extern("jitad_blas_busy")
    loadavg = h.extern("jitad_getloadavg", ir.FunctionType(i32, [ptr, i32]))
    cycles = h.extern("llvm.readcyclecounter", ir.FunctionType(i64, []))
    fn, b = h.define("blas_refresh_load", ir.FunctionType(ir.VoidType(), []))
    now, read_at = b.call(cycles, []), b.gep(words, [i64(1)], source_etype=i64)
    with b.if_then(b.icmp_unsigned(">", b.sub(now, b.load(read_at, typ=i64)), i64(BLAS_LOAD_CYCLES))):
        b.store(now, read_at)
        load = alloca(b, f64)
        got = b.call(loadavg, [load, i32(1)])
        busy = b.and_(b.icmp_signed("==", got, i32(1)),
                      b.fcmp_ordered(">=", b.load(load, typ=f64), f64((os.cpu_count() or 1) - BLAS_BUSY_LOAD)))
        b.store(b.zext(busy, i64), words)
    b.ret_void()
    return fn


def _count_sigints():
    """Put jitad's SIGINT counter in front of Python's handler (see `_sigint_counter`):
    at the main thread's first call and each time one of its calls lets the GIL go."""
    _count_sigints_now()


@contextlib.contextmanager
def _sigint_stops_worker():
    """While the main thread waits for the deep-stack thread, SIGINT is counted, so that
    the worker's compiled code (which runs without the GIL) stops at its next poll, and
    Python's handler raises KeyboardInterrupt in the waiting thread."""
    if threading.current_thread() is threading.main_thread():
        _count_sigints()   # (back in front of Python's, if a handler set since displaced it)
    yield


class _DeepStackWorker:
    """One long-lived thread with a `DEEP_STACK`-byte stack that runs deep recursions
    (its stack pages stay mapped, so repeated deep calls do not fault them in again)."""

    def __init__(self):
        self.jobs = queue.SimpleQueue()
        self.lock = threading.Lock()   # one job at a time
        self.idle = threading.Event()
        self.idle.set()
        self.thread = threading.Thread(target=self._serve, name="jitad-deep-stack", daemon=True)
        old = threading.stack_size(DEEP_STACK)   # read when the thread starts
        try:
            self.thread.start()
        finally:
            threading.stack_size(old)

    def _serve(self):
        while True:
            fn, args, result = self.jobs.get()
            try:
                result.append(("value", fn(*args)))
            except _StackExhausted:
                result.append(("deep", None))
            except _Stopped:
                result.append(("stopped", None))
            except BaseException as e:   # re-raised in the caller's thread
                result.append(("error", e))
            self.idle.set()

    def run(self, fn, args):
        if threading.current_thread() is self.thread:
            stack_exhausted()
        stop = jit().stop
        with self.lock:
            kind = "stopped"
            while kind == "stopped":   # stopped by Ctrl-C whose handler returned: run it again
                self.idle.wait()   # a job stopped by Ctrl-C may still be unwinding
                stop[0] = 0
                self.idle.clear()
                result = []
                try:
                    with _sigint_stops_worker():
                        self.jobs.put((fn, args, result))
                        self.idle.wait()
                except BaseException:   # KeyboardInterrupt from SIGINT's handler
                    stop[0] = 1   # the job's compiled code stops at its next poll
                    raise
                kind, value = result[0]
        if kind == "deep":   # raised here, so the error points at the caller's code
            stack_exhausted()
        if kind == "error":
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
    last reset), the fullest thread's; `arena_high_water(reset=True)` returns it and starts
    a new measurement."""
    with _lock:
        blocks = list(_blocks)
    used = max((b.used() for b in blocks), default=0)
    if reset:
        for b in blocks:
            b.peak.value = int(b.words[TB_BASE])
    return used


_ARRAY_SUBTYPE = [np.ndarray]   # one subclass of ndarray the native entry takes as an ndarray


def taken_as_ndarray(x):
    """Whether a compiled entry takes `x` as it is, as an ndarray: a plain one, or an
    instance of the subclass registered by `native_array_subclass` (not another one)."""
    return type(x) is np.ndarray or type(x) is _ARRAY_SUBTYPE[0]


def native_array_subclass(cls):
    """Let compiled entries take instances of `cls`, a Python subclass of `np.ndarray`
    with no fields of its own (`jitad.numpy.Array`), as they take ndarrays: without it
    they go through the slower dispatcher. Call before the first compile."""
    assert issubclass(cls, np.ndarray) and cls.__basicsize__ == np.ndarray.__basicsize__, cls
    _ARRAY_SUBTYPE[0] = cls
    llvm.add_symbol("jitad_ndarray_subtype", id(cls))


def arena_exhausted(*args):
    raise ResourceError(
        f"the compiled function needed more tensor memory than the {jit().arena.size >> 20} MiB "
        "arena holds; set JITAD_ARENA_MB to a larger size (before importing jitad) or use "
        "smaller batches; a gradient through a long FOR/WHILE/scan keeps a tape entry per "
        "iteration: give the loop `checkpoints=` (e.g. 64) to bound it")


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
