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
poll. Matrix products use jitad's own loop nests, not BLAS, so the library links only
libc and libm, and the system's LAPACK and BLAS when the program does linear algebra
(`jitad.linalg`), which the header then names.
"""
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np

from .errors import ArgumentError, ExportError
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
INTERRUPT = "jitad_poll_signals"
LAPACK = "jitad_lapack_"   # + routine: LAPACK's and BLAS's Fortran routines, all arguments by reference   # the Ctrl-C poll: the adapter's stand-in says "no"


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
    void *const *out)` (0 on success, else a code `dot_error(code)` explains).
    """
    from .api import value_and_grad
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name in C_KEYWORDS:
        raise ArgumentError(f"export: name={name!r} must be a C identifier (letters, digits, _), "
                            "it names the library, its header and its functions")
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
    with tempfile.TemporaryDirectory() as tmp:
        objects, entries, lapack = [], [], {}
        for symbol, program in programs:
            _refuse_callbacks(program, symbol)
            obj, main, routines = _object(program, symbol, tmp)
            objects.append(obj)
            entries.append((symbol, program, main))
            lapack.update(routines)
        header = _header(name, inputs, entries, lapack)
        with open(os.path.join(path, name + ".h"), "w") as fh:
            fh.write(header)
        adapter = os.path.join(tmp, name + "_adapter.c")
        with open(adapter, "w") as fh:
            fh.write(_adapter(name, inputs, entries, lapack))
        script = os.path.join(tmp, "exports.map")
        with open(script, "w") as fh:
            fh.write("{ global: %s; local: *; };\n" % "; ".join([e[0] for e in entries] + [name + "_error"]))
        library = os.path.join(path, f"lib{name}.so")
        cmd = [cc, "-shared", "-fPIC", "-O2", "-o", library, "-I", path, adapter, *objects,
               f"-Wl,--version-script={script}"] + (["-llapack", "-lblas"] if lapack else []) + ["-lm", "-lpthread"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0 and lapack and ("-llapack" in done.stderr or "-lblas" in done.stderr):
            raise ExportError(f"export: the program calls LAPACK ({', '.join(sorted(lapack))}) and no LAPACK/BLAS "
                              "library was found to link (liblapack.so, libblas.so): install one (Debian: "
                              "apt-get install liblapack-dev)")
        if done.returncode != 0:
            raise ExportError(f"export: linking {library} failed:\n{done.stderr.strip()[-2000:]}")
    outs = [[Leaf(j, t.dtype, tuple(t.shape)) for j, t in enumerate(p.main.out_types)] for _, p, _ in entries]
    return Exported(name, os.path.abspath(library), os.path.abspath(os.path.join(path, name + ".h")), inputs,
                    outs[0], outs[1] if grad else None)


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


def _object(program, symbol, tmp):
    """Lower `program` with its main named `<symbol>_main`, optimize it, and write its
    position-independent object code; refuse what needs jitad's Python runtime."""
    # jitad's own loop nests for every product and sort (not NumPy's OpenBLAS and sort kernels)
    blas, tensor.BLAS, fast_sort, sort.FAST_SORT = tensor.BLAS, False, sort.FAST_SORT, set()
    try:
        module = runtime.new_module(symbol)
        main, constants = lower_program(module, program, f"jitad_{symbol}_")
    finally:
        tensor.BLAS, sort.FAST_SORT = blas, fast_sort
    main.linkage = "external"   # (internal in the JIT, where the entry calls it)
    lapack = {g.name[len(LAPACK):]: len(g.args) for g in module.globals.values()
              if isinstance(g, ir.Function) and g.name.startswith(LAPACK)}   # the adapter calls the system's
    for g in list(module.globals.values()):
        if isinstance(g, ir.Function) and not g.blocks and g.name.startswith("jitad_") \
                and not g.name.startswith(LAPACK) and g.name != INTERRUPT:
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
    return path, main.name, lapack


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


def _adapter(name, inputs, entries, lapack):
    messages, offsets = [], []
    for _, program, _ in entries:
        offsets.append(len(messages))
        messages += check_messages(program)
    checks = "".join(f"        case {CHECK_FAILED + k}: return {_c_string(m)};\n" for k, m in enumerate(messages))
    calls = "\n".join(_call_body(symbol, program, main, offset)
                      for (symbol, program, main), offset in zip(entries, offsets))
    return f"""/* The C adapter of the jitad export `{name}`: what compiled code expects from
   jitad's runtime, without Python. Generated; see {name}.h. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include "{name}.h"

{_lapack_calls(lapack)}

struct jitad_ctx {{      /* the layout `jitad.lower.llvm.CTX` */
    uint64_t stack_limit;
    int32_t status;
    char *arena_top, *arena_end;
    const int64_t *stop;
    int64_t polls_left;
}};

static const int64_t never_stop = 0;
static pthread_key_t arena_key;
static pthread_once_t arena_once = PTHREAD_ONCE_INIT;
static __thread char *arena_base, *arena_end;
static __thread uint64_t stack_limit;

static void make_key(void) {{ pthread_key_create(&arena_key, free); }}

static int jitad_enter(struct jitad_ctx *ctx) {{
    if (!arena_base) {{          /* this thread's tensor arena, freed when the thread exits */
        const char *mb = getenv("JITAD_ARENA_MB");
        long long size = (mb && atoll(mb) > 0 ? atoll(mb) : 256) << 20;
        pthread_once(&arena_once, make_key);
        arena_base = malloc((size_t)size);
        if (!arena_base) return {_ARENA_CODE};
        arena_end = arena_base + size - 64;   /* its last 64 bytes: the high-water word */
        pthread_setspecific(arena_key, arena_base);
        pthread_attr_t attr;   /* recursion stops (error {_STACK_CODE}) 256 KiB above the stack's end */
        void *low; size_t bytes;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {{
            if (pthread_attr_getstack(&attr, &low, &bytes) == 0) stack_limit = (uint64_t)low + (256 << 10);
            pthread_attr_destroy(&attr);
        }}
        if (!stack_limit) {{ char here; stack_limit = (uint64_t)&here - (1 << 20); }}
    }}
    ctx->stack_limit = stack_limit;
    ctx->status = 0;
    ctx->arena_top = (char *)(((uintptr_t)arena_base + 63) & ~(uintptr_t)63);
    ctx->arena_end = arena_end;
    ctx->stop = &never_stop;
    ctx->polls_left = 1 << 30;
    return 0;
}}

/* A tree's descriptor: size, root, left, right, the count and post-order of the nodes
   reachable from the root (made here, in the arena), then the fields. Error {_TREE_CODE}: not a
   tree (a child index out of range, a node reached twice). */
static int jitad_tree(struct jitad_ctx *ctx, const void *arg, int n_fields, int64_t *d) {{
    const int64_t *t = arg;
    int64_t n = t[0], root = t[1], count = 0, top = 0;
    const int64_t *left = (const int64_t *)t[2], *right = (const int64_t *)t[3];
    if (n < 0 || root < -1 || root >= n) return {_TREE_CODE};
    /* the order (n), a stack (each node pushed once by its parent, once as done: 3n + 1
       entries however many parents a node claims) and a byte per node */
    if ((uint64_t)n > ((uint64_t)(ctx->arena_end - ctx->arena_top) - 128) / 33) return {_ARENA_CODE};
    int64_t *order = (int64_t *)ctx->arena_top, *stack = order + n;
    unsigned char *seen = (unsigned char *)(stack + 3 * n + 1);
    ctx->arena_top += ((size_t)n * 33 + 8 + 63) & ~(size_t)63;
    for (int64_t v = 0; v < n; v++) seen[v] = 0;
    if (root >= 0) stack[top++] = root;
    while (top) {{             /* ~v: v's children are done */
        int64_t v = stack[--top];
        if (v < 0) {{ order[count++] = ~v; continue; }}
        if (seen[v]) return {_TREE_CODE};
        seen[v] = 1;
        stack[top++] = ~v;
        int64_t l = left[v], r = right[v];
        if (l < -1 || l >= n || r < -1 || r >= n) return {_TREE_CODE};
        if (r >= 0) stack[top++] = r;
        if (l >= 0) stack[top++] = l;
    }}
    d[0] = n; d[1] = root; d[2] = (int64_t)left; d[3] = (int64_t)right; d[4] = count; d[5] = (int64_t)order;
    for (int k = 0; k < n_fields; k++) d[{FIRST_FIELD} + k] = t[4 + k];
    return 0;
}}

const char *{name}_error(int code) {{
    switch (code) {{
        case 0: return "no error";
        case {_TREE_CODE}: return "a tree argument is not a tree (a child index out of range, or a node reached twice)";
        case {_STACK_CODE}: return "the stack ran out (recursion too deep for this thread's stack: run it on a thread with a larger stack)";
        case {_ARENA_CODE}: return "the tensor arena ran out (set JITAD_ARENA_MB to more than 256, in MiB, before the first call of a thread)";
{checks}        default: return code >= {CHECK_FAILED} ? "a runtime check of the program failed" : "unknown error code";
    }}
}}

{calls}
"""


_STACK_CODE, _ARENA_CODE, _TREE_CODE = 1, 2, 5   # the runtime's statuses; 5 is none of them


def _c_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _header(name, inputs, entries, lapack):
    needs = "libc, libm and libpthread" + (", and the system's LAPACK and BLAS (liblapack.so.3, libblas.so.3;\n"
                                          f"   it calls {', '.join(r + '_' for r in sorted(lapack))})" if lapack else "")
    lines = [f"/* {name}.h: generated by jitad.export. The library lib{name}.so needs only {needs}",
             "   (link with -L<dir> -l" + name + " -Wl,-rpath,<dir>).",
             "",
             f"   Each function takes `in`, an array of {len(inputs)} pointers, one per input below (a scalar is",
             "   a pointer to one value), and `out`, an array of pointers to buffers the caller allocated,",
             "   one per output below; arrays are C-contiguous. The pointer counts cannot be checked in C:",
             "   passing fewer pointers, or smaller buffers, than listed here is undefined behaviour.",
             "   Each returns 0 on success, else an error code that <name>_error(code) explains.",
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
              f"const char *{name}_error(int code);", "", "#ifdef __cplusplus", "}", "#endif", "#endif", ""]
    return "\n".join(lines)
