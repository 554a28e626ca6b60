"""`jitad.export`: a compiled function (and its gradient) as a C shared library that
needs neither Python nor jitad at run time.

The program is traced and lowered as `jitad.jit` does it; the LLVM module is compiled to
position-independent object code for this machine's CPU, and a small C adapter (written
here, compiled with the system's `cc`) gives it the C ABI

    int <name>(const void *const *in, void *const *out);

`in[i]` points to the i-th leaf of the flattened example arguments, `out[j]` to the
caller's buffer for the j-th flattened output. The adapter sets up what compiled code
expects from jitad's runtime: its context (status word, stack limit for recursion), a
tensor arena per calling thread (`JITAD_ARENA_MB`, 256 by default: address space,
committed as it is touched; freed when the thread exits), and a stand-in for the Ctrl-C
poll. Matrix products run jitad's own kernels where they beat BLAS (small products, as in
Python) and the system's BLAS beyond (OpenBLAS or BLIS, the first found, called through
the Fortran `dgemm_`/`sgemm_`), as jitad in Python calls NumPy's OpenBLAS; with neither
installed they all run jitad's kernels (a JitadWarning says so). The library links
libc and libm, that BLAS when a product calls it, and the system's LAPACK when the program
does linear algebra (`jitad.linalg`); the header names them.
"""
import functools
import os
import pathlib
import re
import shutil
import string
import subprocess
import tempfile
import warnings
from dataclasses import dataclass

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np

from .errors import ArgumentError, ExportError, JitadWarning
from .ir.ops import Op
from .ir.passes import run_passes
from .ir.types import FIRST_FIELD, NUMPY, TreeType
from .lower import runtime, sort, tensor
from .lower.llvm import CHECK_FAILED, check_messages, lower_program
from .pytree import flatten
from .staging import arg_type, trace_program

C_TYPES = {"f64": "double", "f32": "float", "i64": "int64_t", "bool": "bool"}
# what compiled code may call besides libm and LLVM's intrinsics, and why the rest is refused
REFUSED = {"jitad_debug_print": "`jitad.debug.print` (a call back into Python)",
           "jitad_mpi_": "an MPI collective (`jitad.distributed`)"}
C_KEYWORDS = set("""auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef union unsigned
    void volatile while bool true false main""".split())
INTERRUPT = "jitad_poll_signals"   # the Ctrl-C poll: the adapter's stand-in says "no"
LAPACK = "jitad_lapack_"   # + routine: LAPACK's and BLAS's Fortran routines, all arguments by reference
BLAS = "jitad_blas_"   # + dgemm/sgemm: the products jitad's lowering gives BLAS, the adapter's calls of the system's
GEMMS = {"f64": ("dgemm", "double"), "f32": ("sgemm", "float")}
# the system BLAS an export links: the first found. Not the generic libblas: where it is the
# reference implementation (Debian's default), an MLP's gradient runs 5x slower than jitad's loops
BLAS_LIBRARIES = ("openblas", "blis")


@dataclass
class Leaf:
    """One flattened input or output: its position, dtype and shape."""
    index: int
    dtype: str
    shape: tuple

    @property
    def c_type(self):
        return C_TYPES[self.dtype]

    def describe(self, name=None):
        if self.dtype == "tree":   # `shape` holds the tree's fields: (name, dtype) sorted by name
            return f"a `jitad.Tree`: struct {name}_tree_{self.index} (above)"
        what = f"{self.c_type}[{']['.join(map(str, self.shape))}]" if self.shape else f"one {self.c_type}"
        return f"{what} ({np.dtype(NUMPY[self.dtype]).name}, shape {self.shape})"


@dataclass
class Exported:
    """What `jitad.export` wrote: the library, its header, and the C functions' inputs
    and outputs in flattened order (`inputs`, `outputs`, and `grad_outputs` with
    grad=True)."""
    name: str
    library: str
    header: str
    inputs: list
    outputs: list
    grad_outputs: list = None

    def load(self):
        """The library opened with ctypes, with `call(*arrays)`-style helpers
        (`call` and `call_grad`) for tests and quick checks from Python."""
        import ctypes
        lib = ctypes.CDLL(self.library)
        for symbol in [self.name] + ([self.name + "_grad"] if self.grad_outputs is not None else []):
            getattr(lib, symbol).restype = ctypes.c_int
        getattr(lib, self.name + "_error").restype = ctypes.c_char_p
        return lib

    def call(self, *args, grad=False):
        """Call the exported function (or `<name>_grad`) through ctypes on NumPy inputs;
        return the outputs as NumPy arrays (0-d for scalars). For tests: no dispatch
        shortcuts, a fresh ctypes setup each call."""
        import ctypes
        leaves = flatten(args)[0]
        if len(leaves) != len(self.inputs):
            raise ArgumentError(f"{self.name}: {len(leaves)} input leaves, the library takes {len(self.inputs)}")
        keep = []

        def c_input(x, leaf):
            if leaf.dtype != "tree":
                keep.append(np.ascontiguousarray(x, dtype=NUMPY[leaf.dtype]).reshape(leaf.shape))
                return keep[-1]
            keep.extend([x.left, x.right] + [x.fields[n] for n, _ in leaf.shape])
            keep.append(np.array([x.size, x.root] + [a.ctypes.data for a in keep[-2 - len(leaf.shape):]],
                                 dtype=np.int64))   # the struct: size, root, then the arrays' addresses
            return keep[-1]
        ins = [c_input(x, leaf) for x, leaf in zip(leaves, self.inputs)]
        specs = self.grad_outputs if grad else self.outputs
        outs = [np.empty(leaf.shape, NUMPY[leaf.dtype]) for leaf in specs]
        pointers = lambda arrays: (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        lib = self.load()
        code = getattr(lib, self.name + ("_grad" if grad else ""))(pointers(ins), pointers(outs))
        if code:
            raise RuntimeError(f"{self.name}: error {code}: {getattr(lib, self.name + '_error')(code).decode()}")
        return outs


def export(f, *example_args, path, name, grad=False, argnums=0):
    """Compile `f` for arguments shaped like `example_args` into `path/lib<name>.so`
    with the header `path/<name>.h`; with `grad=True` also `<name>_grad`, whose outputs
    are f's value then the gradients w.r.t. `argnums`. Returns an `Exported`.

    >>> ex = jitad.export(lambda x, y: jitad.sum(x * y), np.ones(3), 2.0, path="out", name="dot", grad=True)
    >>> ex.call(np.arange(3.0), 2.0, grad=True)   # value, d/dx, d/dy   # doctest: +SKIP
    [array(6.), array([2., 2., 2.]), array(3.)]

    The library needs only libc and libm: from C, `int dot(const void *const *in,
    void *const *out)` (0 on success, else a code `dot_error(code)` explains: -1 for a
    NULL pointer). `dot_set_stop(&word)` makes calls poll `word` and stop (code 4) once it
    is nonzero, e.g. from a SIGINT handler. `name` must not be a C keyword or a function
    of the C library (`malloc`, `free`, ...): an ArgumentError says so before compiling.
    """
    from .api import value_and_grad
    _check_name(name, grad)
    if not callable(f):
        raise ArgumentError(f"export takes a function, got {type(f).__name__}")
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        raise ExportError("export: no C compiler found (`cc`, or $CC): it compiles the library's small C "
                          "adapter and links the library; install gcc or clang")
    os.makedirs(path, exist_ok=True)
    leaves, in_td = flatten(example_args)
    types = [arg_type(x) for x in leaves]
    if any(isinstance(t, TreeType) and t.forest for t in types):
        raise ExportError("export: a `jitad.Forest` argument cannot be exported; export the function of one "
                          "`jitad.Tree` and call it per tree")
    inputs = [Leaf(k, "tree", t.fields) if isinstance(t, TreeType) else Leaf(k, t.dtype, tuple(t.shape))
              for k, t in enumerate(types)]
    programs = [(name, _trace(f, example_args, in_td, types))]
    if grad:
        vg = value_and_grad(f, argnums=argnums)
        programs.append((name + "_grad", _trace(vg, example_args, in_td, types)))
    blas = _system_blas(cc)
    with tempfile.TemporaryDirectory() as tmp:
        objects, entries, lapack, gemms = [], [], {}, set()
        for symbol, program in programs:
            _refuse_callbacks(program, symbol)
            obj, main, routines, used = _object(program, symbol, tmp, blas)
            objects.append(obj)
            entries.append((symbol, program, main))
            lapack.update(routines)
            gemms |= used
        header = _header(name, inputs, entries, _blas_note(blas, gemms, lapack), bool(lapack or gemms))
        with open(os.path.join(path, name + ".h"), "w") as fh:
            fh.write(header)
        adapter = os.path.join(tmp, name + "_adapter.c")
        with open(adapter, "w") as fh:
            fh.write(_adapter(name, inputs, entries, lapack, gemms))
        library = _link(cc, path, name, grad, adapter, objects, lapack, blas if gemms else None, tmp)
    outs = [[Leaf(j, t.dtype, tuple(t.shape)) for j, t in enumerate(p.main.out_types)] for _, p, _ in entries]
    return Exported(name, os.path.abspath(library), os.path.abspath(os.path.join(path, name + ".h")), inputs,
                    outs[0], outs[1] if grad else None)


def _link(cc, path, name, grad, adapter, objects, lapack, blas, tmp):
    """Link the adapter and the objects into `path/lib<name>.so` (exporting only the
    library's own functions), with the system's LAPACK when the program calls it and the
    BLAS `blas` (a library name, or None) when its products do; its path."""
    script = os.path.join(tmp, "exports.map")
    with open(script, "w") as fh:
        fh.write("{ global: %s; local: *; };\n" % "; ".join(_symbols(name, grad)))
    library = os.path.join(path, f"lib{name}.so")
    libraries = (["-llapack"] if lapack else []) + [f"-l{b}" for b in dict.fromkeys(
        ([blas] if blas else []) + (["blas"] if lapack else []))]
    cmd = [cc, "-shared", "-fPIC", "-O2", "-o", library, "-I", path, adapter, *objects,
           f"-Wl,--version-script={script}"] + libraries + ["-lm", "-lpthread"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0 and lapack and ("-llapack" in done.stderr or "-lblas" in done.stderr):
        raise ExportError(f"export: the program calls LAPACK ({', '.join(sorted(lapack))}) and no LAPACK/BLAS "
                          "library was found to link (liblapack.so, libblas.so): install one (Debian: "
                          "apt-get install liblapack-dev)")
    if done.returncode != 0:
        raise ExportError(f"export: linking {library} failed:\n{done.stderr.strip()[-2000:]}")
    return library


def _symbols(name, grad):
    """The C functions a library named `name` exports."""
    return [name] + ([name + "_grad"] if grad else []) + [name + "_error", name + "_set_stop"]


def _check_name(name, grad):
    """ArgumentError unless `name` makes C identifiers that are no keyword, no name C
    reserves and no function of the C library (a library defining `malloc` or `free`
    would not compile, or would replace the process's own)."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name in C_KEYWORDS:
        raise ArgumentError(f"export: name={name!r} must be a C identifier (letters, digits, _) and no C keyword; "
                            "it names the library, its header and its functions")
    if re.match(r"_[A-Z_]", name):
        raise ArgumentError(f"export: name={name!r} starts with an underscore and a capital or another underscore, "
                            "which C reserves for the compiler and the C library; choose another name")
    taken = [symbol for symbol in _symbols(name, grad) if _in_c_library(symbol)]
    if taken:
        raise ArgumentError(f"export: name={name!r} would define {', '.join(taken)}, already a function or variable "
                            "of the C library (libc, libm, libpthread); choose another name, e.g. "
                            f"{'my_' + name!r}")


def _in_c_library(symbol):
    """Whether the C library defines `symbol` (looked up in libc, libm, libpthread, libdl)."""
    return any(hasattr(lib, symbol) for lib in _c_libraries())


@functools.lru_cache(maxsize=None)
def _c_libraries():
    import ctypes
    import ctypes.util
    found = []
    for path in filter(None, map(ctypes.util.find_library, ("c", "m", "pthread", "dl"))):
        try:
            found.append(ctypes.CDLL(path))
        except OSError:
            pass
    return tuple(found)


def _trace(f, example_args, in_td, types):
    program, _, captured = trace_program(f, example_args, in_td, types)
    run_passes(program)
    return program


def _refuse_callbacks(program, symbol):
    """ExportError for an operation that needs Python or MPI at run time."""
    def visit(graph):
        for node in graph.nodes:
            if node.op == Op.DEBUG_PRINT:
                raise ExportError(f"export `{symbol}`: the program calls `jitad.debug.print` "
                                  f"({node.attrs.get('fmt', '')!r}), a call back into Python; remove it to export")
            for body in node.bodies:
                visit(body)
    for graph in [fd.body for fd in program.funs] + [program.main]:
        visit(graph)


@functools.lru_cache(maxsize=None)
def _system_blas(cc=None):
    """The name (for `-l`) of the first BLAS of `BLAS_LIBRARIES` that the C compiler `cc`
    links and that defines `dgemm_` (a probe link, once a process), or None."""
    cc = cc or shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe.c")
        with open(probe, "w") as fh:
            fh.write("extern void dgemm_(void);\nvoid jitad_probe(void) { dgemm_(); }\n")
        for name in BLAS_LIBRARIES:
            done = subprocess.run([cc, "-shared", "-fPIC", "-o", os.path.join(tmp, "probe.so"), probe, f"-l{name}",
                                   "-Wl,--no-undefined"], capture_output=True)
            if done.returncode == 0:
                return name
    return None


def _lower(program, symbol, blas):
    """The LLVM module of `program` (main `<symbol>_main`) and its main and large constants:
    products beyond jitad's own kernels call `jitad_blas_?gemm` when `blas`, else jitad's
    loop nests run them all; sorts run jitad's loop nests (not NumPy's sort kernels)."""
    saved = tensor.BLAS, tensor.BLAS_SYMBOLS, sort.FAST_SORT
    tensor.BLAS, sort.FAST_SORT = blas, set()
    tensor.BLAS_SYMBOLS = {dtype: BLAS + routine for dtype, (routine, _) in GEMMS.items()}
    try:
        module = runtime.new_module(symbol)
        main, constants = lower_program(module, program, f"jitad_{symbol}_")
    finally:
        tensor.BLAS, tensor.BLAS_SYMBOLS, sort.FAST_SORT = saved
    return module, main, constants


def _called(module, prefix):
    """The functions `module` declares (calls, defined elsewhere) named `prefix` + a
    routine: {routine: argument count}."""
    return {g.name[len(prefix):]: len(g.args) for g in module.globals.values()
            if isinstance(g, ir.Function) and not g.blocks and g.name.startswith(prefix)}


def _object(program, symbol, tmp, blas):
    """Lower `program` with its main named `<symbol>_main`, optimize it, and write its
    position-independent object code; refuse what needs jitad's Python runtime. Its
    products call the system's BLAS `blas` where jitad's own would (None: no BLAS, a
    JitadWarning when a product is large enough to want one)."""
    module, main, constants = _lower(program, symbol, True)
    gemms = set(_called(module, BLAS))
    if gemms and blas is None:
        warnings.warn(f"export `{symbol}`: no BLAS library found to link ({' or '.join(f'lib{b}.so' for b in BLAS_LIBRARIES)}"
                      "); its large matrix products run jitad's own loop nests, slower than in Python: install one "
                      "(Debian: apt-get install libopenblas-dev)", JitadWarning, stacklevel=3)
        module, main, constants = _lower(program, symbol, False)
        gemms = set()
    main.linkage = "external"   # (internal in the JIT, where the entry calls it)
    lapack = _called(module, LAPACK)   # the adapter calls the system's
    for g in list(module.globals.values()):
        if isinstance(g, ir.Function) and not g.blocks and g.name.startswith("jitad_") \
                and not g.name.startswith((LAPACK, BLAS)) and g.name != INTERRUPT:
            for prefix, what in REFUSED.items():
                if g.name.startswith(prefix):
                    raise ExportError(f"export `{symbol}`: the program uses {what}, which the exported "
                                      "library cannot call without Python; leave it out of the exported function")
            raise ExportError(f"export `{symbol}`: the program calls jitad's runtime function `{g.name}`, "
                              "which an exported library does not have")
    for cname, data in constants.items():   # large constants: inside the library, not in the process
        g = module.globals[cname]
        raw = bytearray(data.astype(np.uint8) if data.dtype == np.bool_ else data.tobytes())
        g.value_type = ir.ArrayType(ir.IntType(8), len(raw))
        g.initializer = ir.Constant(g.value_type, raw)
        g.global_constant, g.linkage, g.align = True, "internal", 64
    if INTERRUPT in module.globals:   # the poll asks whether Ctrl-C arrived: a library never stops
        fn = module.globals[INTERRUPT]
        fn.linkage = "internal"
        ir.IRBuilder(fn.append_basic_block("entry")).ret(ir.Constant(ir.IntType(32), 0))
    text = str(module)
    j = runtime.jit()
    optimized = j.optimize(text)
    target = llvm.Target.from_triple(llvm.get_process_triple())
    machine = target.create_target_machine(cpu=j.cpu, features=j.features, opt=3, reloc="pic", codemodel="default")
    path = os.path.join(tmp, symbol + ".o")
    with open(path, "wb") as fh:
        fh.write(machine.emit_object(optimized))
    return path, main.name, lapack, gemms


def _main_signature(symbol, program, main):
    """The C prototype of the lowered main: (ctx, inputs..., results struct, tensor
    result buffers...), as `jitad.lower.llvm` lays them out."""
    params = ["struct jitad_ctx *"]
    for v in program.main.params:
        if isinstance(v.type, TreeType):
            params.append("const int64_t *")
        else:
            params.append(("const " + C_TYPES[v.type.dtype] + " *") if v.type.shape else C_TYPES[v.type.dtype])
    params.append(f"struct {symbol}_results *")
    params += [C_TYPES[t.dtype] + " *" for t in program.main.out_types if t.shape]
    return f"void {main}({', '.join(params)});"


def _results_struct(symbol, program):
    fields = []
    for k, t in enumerate(program.main.out_types):
        fields.append(f"    {'void *' if t.shape else C_TYPES[t.dtype] + ' '}r{k};")
    if not fields:
        fields.append("    char unused;")
    return f"struct {symbol}_results {{\n" + "\n".join(fields) + "\n};"


def _call_body(symbol, program, main, code_offset):
    """The C adapter of one exported function (its check codes shifted by `code_offset`,
    so that one `<name>_error` serves every function of the library)."""
    args, trees = ["&ctx"], []
    for k, v in enumerate(program.main.params):
        t = v.type
        if isinstance(t, TreeType):   # its descriptor (jitad.ir.types.DESCRIPTOR), with a post-order made here
            trees.append(f"    int64_t tree{k}[{FIRST_FIELD + len(t.fields)}];\n"
                         f"    if ((code = jitad_tree(&ctx, in[{k}], {len(t.fields)}, tree{k}))) return code;")
            args.append(f"tree{k}")
        else:
            args.append(f"(const {C_TYPES[t.dtype]} *)in[{k}]" if t.shape else f"*(const {C_TYPES[t.dtype]} *)in[{k}]")
    args.append("&res")
    stores = []
    for k, t in enumerate(program.main.out_types):
        if t.shape:
            args.append(f"({C_TYPES[t.dtype]} *)out[{k}]")
        else:
            stores.append(f"    *({C_TYPES[t.dtype]} *)out[{k}] = res.r{k};")
    return f"""{_results_struct(symbol, program)}
{_main_signature(symbol, program, main)}

int {symbol}(const void *const *in, void *const *out) {{
    if (jitad_null(in, {len(program.main.params)}) || jitad_null((const void *const *)out, {len(program.main.out_types)}))
        return {_NULL_CODE};
    struct jitad_ctx ctx;
    int code = jitad_enter(&ctx);
    if (code) return code;
{chr(10).join(trees)}
    struct {symbol}_results res;
    {main}({', '.join(args)});
    if (ctx.status) return ctx.status >= {CHECK_FAILED} ? ctx.status + {code_offset} : ctx.status;
{chr(10).join(stores)}
    return 0;
}}
"""


def _lapack_calls(lapack):
    """C functions `jitad_lapack_<r>` the compiled code calls, each calling the Fortran
    routine `<r>_` with three hidden string lengths of 1 appended: gfortran's ABI for
    CHARACTER arguments (a routine without them ignores the extra arguments)."""
    out = []
    for routine, n in sorted(lapack.items()):
        params = ", ".join(f"void *a{k}" for k in range(n))
        args = ", ".join(f"a{k}" for k in range(n))
        out.append(f"extern void {routine}_({', '.join(['void *'] * n)}, size_t, size_t, size_t);\n"
                   f"void {LAPACK}{routine}({params}) {{ {routine}_({args}, 1, 1, 1); }}")
    return "\n".join(out)


def _blas_calls(gemms):
    """C functions `jitad_blas_<r>gemm` the compiled code calls (cblas_?gemm's row-major
    arguments, 64-bit sizes) as calls of the system's Fortran `<r>gemm_`: row-major
    C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T (a size is below 2^31: the
    arena holds less than 2^31 doubles)."""
    out = [_BLAS_THREADS] if gemms else []
    for routine, real in (GEMMS[d] for d in sorted(GEMMS) if GEMMS[d][0] in gemms):
        out.append(f"""extern void {routine}_(const char *, const char *, const int *, const int *, const int *,
    const {real} *, const {real} *, const int *, const {real} *, const int *, const {real} *, {real} *, const int *,
    size_t, size_t);
void {BLAS}{routine}(int32_t order, int32_t ta, int32_t tb, int64_t m, int64_t n, int64_t k, {real} alpha,
                     const {real} *a, int64_t lda, const {real} *b, int64_t ldb, {real} beta, {real} *c, int64_t ldc) {{
    (void)order;   /* row-major (101) */
    const char op_b = tb == 112 ? 'T' : 'N', op_a = ta == 112 ? 'T' : 'N';
    const int rows = (int)n, cols = (int)m, depth = (int)k, ldb_ = (int)ldb, lda_ = (int)lda, ldc_ = (int)ldc;
    int threads = jitad_blas_threads(m * n * k);
    {routine}_(&op_b, &op_a, &rows, &cols, &depth, &alpha, b, &ldb_, a, &lda_, &beta, c, &ldc_, 1, 1);
    if (threads) openblas_set_num_threads(threads);
}}""")
    return "\n".join(out)


# OpenBLAS's thread count per product, as in Python (`jitad.lower.runtime`): one thread below
# BLAS_THREADED_WORK multiply-adds (OpenBLAS keeps those up to 2^18 on one itself) and while
# the load average leaves no core idle (read again every quarter second), its own otherwise
_BLAS_THREADS = f"""#include <time.h>
#include <unistd.h>
extern void openblas_set_num_threads(int) __attribute__((weak));
extern int openblas_get_num_threads(void) __attribute__((weak));
static int blas_own_threads = -1;   /* OpenBLAS's thread count when the first product ran; 0: not OpenBLAS */
static int64_t blas_busy, blas_load_read_at;   /* whether no core is idle; when that was read (ms) */

static int jitad_machine_busy(void) {{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    int64_t ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    if (ms - __atomic_load_n(&blas_load_read_at, __ATOMIC_RELAXED) > 250) {{
        double load;
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        __atomic_store_n(&blas_load_read_at, ms, __ATOMIC_RELAXED);
        __atomic_store_n(&blas_busy, getloadavg(&load, 1) == 1 && load >= cpus - {runtime.BLAS_BUSY_LOAD},
                         __ATOMIC_RELAXED);
    }}
    return (int)__atomic_load_n(&blas_busy, __ATOMIC_RELAXED);
}}

/* Before a product of `work` multiply-adds: the thread count to restore after it, or 0. */
static int jitad_blas_threads(int64_t work) {{
    int own = __atomic_load_n(&blas_own_threads, __ATOMIC_RELAXED);
    if (own < 0) {{
        own = openblas_get_num_threads && openblas_set_num_threads ? openblas_get_num_threads() : 0;
        __atomic_store_n(&blas_own_threads, own, __ATOMIC_RELAXED);
    }}
    if (own <= 1 || work <= {runtime.OPENBLAS_ONE_THREAD}) return 0;
    if (work >= {runtime.BLAS_THREADED_WORK} && !jitad_machine_busy()) return 0;
    openblas_set_num_threads(1);
    return own;
}}"""


def _adapter(name, inputs, entries, lapack, gemms):
    """The C adapter's source: `export_adapter.c` (the runtime support compiled code
    expects, without Python) with the export's names, error messages and entry bodies."""
    messages, offsets = [], []
    for _, program, _ in entries:
        offsets.append(len(messages))
        messages += check_messages(program)
    checks = "".join(f"        case {CHECK_FAILED + k}: return {_c_string(m)};\n" for k, m in enumerate(messages))
    calls = "\n".join(_call_body(symbol, program, main, offset)
                      for (symbol, program, main), offset in zip(entries, offsets))
    template = string.Template((pathlib.Path(__file__).parent / "export_adapter.c").read_text())
    return template.substitute(
        name=name, lapack_calls=_lapack_calls(lapack) + "\n" + _blas_calls(gemms), checks=checks, calls=calls, check_failed=CHECK_FAILED,
        first_field=FIRST_FIELD, stack_code=_STACK_CODE, arena_code=_ARENA_CODE, stop_code=_STOP_CODE,
        tree_code=_TREE_CODE, null_code=_NULL_CODE, margin_min_kib=_MARGIN_MIN_KIB, margin_kib=_MARGIN_KIB)


_STACK_CODE, _ARENA_CODE, _STOP_CODE, _TREE_CODE = 1, 2, 4, 5   # the runtime's statuses; 5 is none of them
_NULL_CODE = -1   # a NULL pointer argument (the positive codes are statuses and checks)
_MARGIN_MIN_KIB, _MARGIN_KIB = 8, 256   # the stack the adapter keeps free below a recursion (`jitad_margin`)


def _c_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _blas_note(blas, gemms, lapack):
    """The header's lines on the BLAS and LAPACK the library links."""
    lines = []
    if lapack:
        lines.append(f"   It calls the system's LAPACK and BLAS (liblapack.so.3, libblas.so.3): "
                     f"{', '.join(r + '_' for r in sorted(lapack))}.")
    if gemms:
        lines.append(f"   Its large matrix products call the system's BLAS (lib{blas}.so: "
                     f"{', '.join(sorted(g + '_' for g in gemms))}), as jitad in Python calls NumPy's.")
    elif blas is None:
        lines.append("   No BLAS was found when it was exported: its matrix products run jitad's own loop nests.")
    return lines


def _header(name, inputs, entries, blas_note, linked):
    """The header: the library's functions, their inputs and outputs, the libraries it needs
    (`linked`: the system's BLAS or LAPACK too, as `blas_note` says)."""
    needs = "libc, libm and libpthread" + (", and the system libraries below" if linked else "")
    lines = [f"/* {name}.h: generated by jitad.export. The library lib{name}.so needs only {needs}",
             "   (link with -L<dir> -l" + name + " -Wl,-rpath,<dir>).", *blas_note,
             "",
             f"   Each function takes `in`, an array of {len(inputs)} pointers, one per input below (a scalar is",
             "   a pointer to one value), and `out`, an array of pointers to buffers the caller allocated,",
             "   one per output below; arrays are C-contiguous. The pointer counts cannot be checked in C:",
             "   passing fewer pointers, or smaller buffers, than listed here is undefined behaviour.",
             "   Each returns 0 on success, else an error code that <name>_error(code) explains:",
             f"   {_NULL_CODE} when `in`, `out` or one of their entries is NULL (nothing is read or written).",
             f"   {name}_set_stop(word) makes running and later calls poll *word (an int64_t that, say, a",
             f"   SIGINT handler sets): nonzero stops them with error {_STOP_CODE}; NULL turns it off.",
             "   Calls may run from several threads at once; each thread gets its own tensor arena",
             "   (JITAD_ARENA_MB, 256 by default: address space, committed as it is touched).",
             "   Compiled for this machine's CPU. */",
             f"#ifndef JITAD_EXPORT_{name.upper()}_H", f"#define JITAD_EXPORT_{name.upper()}_H", "",
             "#include <stdint.h>", "#include <stdbool.h>", "",
             "#ifdef __cplusplus", 'extern "C" {', "#endif", "",
             ]
    for leaf in inputs:
        if leaf.dtype == "tree":
            lines += [f"/* in[{leaf.index}], a tree of n nodes (any n: one library serves every tree shape). left[v] and",
                      "   right[v] are v's children (-1: none); each field holds one value per node. */",
                      f"struct {name}_tree_{leaf.index} {{", "    int64_t size;   /* n */", "    int64_t root;   /* -1: empty */",
                      "    const int64_t *left, *right;"]
            lines += [f"    const {C_TYPES[dtype]} *{field};" for field, dtype in leaf.shape]
            lines += ["};", ""]
    lines.append("/* inputs (in[i]):")
    lines += [f"     in[{leaf.index}]: {leaf.describe(name)}" for leaf in inputs]
    lines.append("*/")
    for symbol, program, _ in entries:
        lines += ["", f"/* {symbol} outputs (out[j]):"]
        lines += [f"     out[{j}]: {Leaf(j, t.dtype, tuple(t.shape)).describe()}"
                  for j, t in enumerate(program.main.out_types)]
        lines += ["*/", f"int {symbol}(const void *const *in, void *const *out);"]
    lines += ["", "/* The message of an error code returned by the functions above. */",
              f"const char *{name}_error(int code);", "",
              "/* Calls stop (error " + str(_STOP_CODE) + ") once *word is nonzero; NULL: they never stop. */",
              f"void {name}_set_stop(const int64_t *word);", "", "#ifdef __cplusplus", "}", "#endif", "#endif", ""]
    return "\n".join(lines)
