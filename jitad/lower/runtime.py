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
from ..ir.ops import PRIMITIVES
from ..ir.types import NUMPY
from ..timing import note_cache, stage
from . import parallel
from .entry import POOL, PY_API, PY_DATA

CACHE_FORMAT = 3   # 2: entries hold their key and fingerprint; 3: keyed by the program, list their symbols
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
    return [op.llvm + suffix for op in PRIMITIVES.values() if isinstance(op.llvm, str) for suffix in ("", "f")]


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
        for name in PY_API:
            llvm.add_symbol(name, ctypes.cast(getattr(ctypes.pythonapi, name), ctypes.c_void_p).value)
        for pyname, symbol in PY_DATA.items():
            llvm.add_symbol(symbol, id({"float": float, "int": int, "bool": bool, "True": True,
                                        "tuple": tuple, "dict": dict, "None": None, "list": list}[pyname]))
        llvm.add_symbol("jitad_ndarray_type", id(np.ndarray))
        llvm.add_symbol("jitad_ndarray_subtype", id(_ARRAY_SUBTYPE[0]))
        from ..tree import Tree
        llvm.add_symbol("jitad_tree_type", id(Tree))
        for dtype, np_dtype in NUMPY.items():   # the builtin descriptor singletons
            llvm.add_symbol(f"jitad_descr_{dtype}", id(np.dtype(np_dtype)))
        llvm.add_symbol("jitad_PyArray_New", _numpy_c_api(93))
        llvm.add_symbol("jitad_PyArray_Scalar", _numpy_c_api(60))
        bind_libm()
        mb = env_int("JITAD_ARENA_MB", 1024, 1)
        try:
            self.arena = np.empty(mb << 20, dtype=np.uint8)   # pages are committed when touched
        except MemoryError:
            raise ConfigError(f"JITAD_ARENA_MB={mb}: this machine cannot reserve {mb} MiB for jitad's arena; "
                              "set a smaller size (default 1024)", where=False) from None
        base = self.arena.ctypes.data   # {base, end, high-water mark}
        self.arena_bounds = np.array([base, base + self.arena.size, base], dtype=np.uint64)
        llvm.add_symbol("jitad_arena", self.arena_bounds.ctypes.data)
        self.stop = np.zeros(1, dtype=np.int64)   # nonzero: the deep-stack thread's compiled code stops
        llvm.add_symbol("jitad_stop", self.stop.ctypes.data)
        self.prev_sigint = np.zeros(1, dtype=np.uint64)   # the C handler `_sigint_stops_worker` chains to
        llvm.add_symbol("jitad_prev_sigint", self.prev_sigint.ctypes.data)
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
        from .sort import numpy_qsort_symbols
        for name, address in numpy_qsort_symbols().items():   # NumPy's vectorized sort (lower/sort.py)
            llvm.add_symbol(name, address)
            self.fingerprint += "|" + name
        self.constants = {}   # symbol -> array kept alive for compiled code

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


def enter_thread():
    """Store the calling thread's stack limit for compiled code: an entry called in a
    thread for the first time forwards here, then runs. (A thread-specific value, read
    natively by every entry of a recursive program: threads of any stack size, forked
    children and threads jitad never saw get their own.)"""
    bottom = _stack_bottom()
    limit = bottom + STACK_MARGIN if bottom else 2 ** 64 - 1   # unknown: no recursion
    _libc.pthread_setspecific(int(jit().stack_key[0]), limit)


_DATA_SYMBOLS = {}   # stem -> the Python objects given under it (alive as long as code may read them)


def data_symbol(stem, obj):
    """The name of a data symbol at Python object `obj` (a dict key the entry looks up, a
    namedtuple class it compares with): `stem_<k>`, `obj` being the k-th object this
    process gave under `stem` (so names are stable across processes, for the disk cache,
    and a symbol never moves: machine code keeps the address it was linked with)."""
    with _lock:
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
    glue = f'@"{prefix}glue' in ir_text   # a long program's straight code (llvm.Lowerer.lower_segments)
    texts = parallel.split_module(ir_text, parts, lambda name: name.startswith((prefix + "kernel", prefix + "segment")),
                                  (lambda name: name.startswith(prefix + "glue")) if glue else None) \
        if parts > 1 or glue else [ir_text]
    if parts > 1 and not glue:   # the parts after the first hold kernels: no loop unrolling (`parallel.
        texts = [(t, False, k == 0) for k, t in enumerate(texts)]   # compile_part`); a segmented program's
        # compile time is its glue's, and unrolling its kernels measured 1-2% faster runs (fluidsim port)
    with remainder_vectors():
        compiled = parallel.compile_parts(texts, j.machines, j.fast_machines)
    return [mod for mod, _ in compiled], [obj for _, obj in compiled]


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


def compile_module(program_text, lower, placeholder, entries, constants):
    """The compiled code of a program: loaded from this process's engine or the disk cache
    by the key `program_text` (the program as `jitad.ir.printer.program_key_text` prints
    it, and its entries' layouts), else `lower()` (LLVM IR whose symbol names start with
    `placeholder`) is optimized and compiled. `constants()` gives the {symbol: array} of
    the program's large constants. Returns (addresses of the functions
    `placeholder + entry` for each of `entries`, optimized IR text, loaded_from_disk,
    the `Generation` holding the code: whatever calls the addresses must keep it)."""
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
            prefix = found[1]
            note_cache("process")
            text = _texts.get(key)
            if text is None:   # no Compiled holds the text any more: read or derive it again
                cached = _read_cache(path, full_key, j.fingerprint, ()) if path else None
                text = _Text(cached[1] if cached else str(j.optimize(lower().replace(placeholder, prefix))))
                _texts[key] = text
            return [generation.engine.get_function_address(prefix + e) for e in entries], text, False, generation
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
    callback runs Python there, and what a handler raised in it is raised here."""
    __slots__ = ("entry",)

    def __call__(self, *args):
        exc = _raised.__dict__.pop("exc", None)
        if exc is not None:   # the handler ran already, in a callback
            raise exc
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
_on_sigint = None   # address of the C-level SIGINT handler below, compiled on first use
_on_sigint_code = None   # its `Generation`, kept for the process


def _sigint_handler():
    """`void on_sigint(int)`: set the stop word, then call the handler it displaced."""
    global _on_sigint, _on_sigint_code
    if _on_sigint is None:
        module = new_module("jitad_on_sigint")
        stop = llvm_ir.GlobalVariable(module, llvm_ir.IntType(64), name="jitad_stop")
        prev = llvm_ir.GlobalVariable(module, llvm_ir.PointerType(), name="jitad_prev_sigint")
        stop.linkage = prev.linkage = "external"
        fnty = llvm_ir.FunctionType(llvm_ir.VoidType(), [llvm_ir.IntType(32)])
        fn = llvm_ir.Function(module, fnty, name="PLACEHOLDER_on_sigint")
        b = llvm_ir.IRBuilder(fn.append_basic_block("entry"))
        b.store_atomic(llvm_ir.IntType(64)(1), stop, "monotonic", 8)
        handler = b.load(prev, typ=llvm_ir.PointerType())
        handler.type = fnty.as_pointer()   # lets llvmlite emit the indirect call
        b.call(handler, fn.args)
        b.ret_void()
        text = str(module)   # keyed by its own IR: it is no program
        (_on_sigint,), _, _, _on_sigint_code = compile_module(text, lambda: text, "PLACEHOLDER_", ("on_sigint",),
                                                              dict)
    return _on_sigint


@contextlib.contextmanager
def _sigint_stops_worker():
    """While the main thread waits for the deep-stack thread, SIGINT also sets the stop
    word. (Python's handler cannot run before the worker's compiled code returns: it
    needs the GIL, which compiled code holds.) A C-level handler goes in front of
    Python's for the wait; nothing can change SIGINT's handler meanwhile, as only the
    main thread may and it is waiting."""
    libc = ctypes.CDLL(None)
    old = _SigAction()
    if threading.current_thread() is not threading.main_thread() \
            or libc.sigaction(signal.SIGINT, None, ctypes.byref(old)) != 0 \
            or old.handler in (None, 1) or old.flags & _SA_SIGINFO:   # SIG_DFL, SIG_IGN or not Python's
        yield
        return
    jit().prev_sigint[0] = old.handler
    new = _SigAction.from_buffer_copy(old)
    new.handler = _sigint_handler()
    libc.sigaction(signal.SIGINT, ctypes.byref(new), None)
    try:
        yield
    finally:
        libc.sigaction(signal.SIGINT, ctypes.byref(old), None)


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
                    with _sigint_stops_worker():   # before the job starts: then it holds the GIL
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
    last reset); `arena_high_water(reset=True)` returns it and starts a new measurement."""
    bounds = jit().arena_bounds
    used = int(bounds[2] - bounds[0])
    if reset:
        bounds[2] = bounds[0]
    return used


_ARRAY_SUBTYPE = [np.ndarray]   # one subclass of ndarray the native entry takes as an ndarray


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
