"""Compiling one program's LLVM IR on several cores: the module is split into parts
(`split_module`) that LLVM optimizes and turns into object code on threads of their own
(`compile_parts`); the JIT links the objects by symbol name.

llvmlite holds one process-wide lock around every call into LLVM, so its threads take
turns (measured: two modules on two threads took as long as one after the other). The
two long calls of a compile (the pass pipeline and code generation) are therefore made
without that lock, on modules each parsed into an LLVM context of its own, which LLVM
allows; ctypes releases the GIL around them.
"""
import ctypes
import os
import re
import threading

import llvmlite.binding as llvm

from ..timing import stage

THREADS = min(2, len(os.sched_getaffinity(0)))   # threads compiling one program (more: not measured)
PARTS = 4 if THREADS > 1 else 1   # modules a large program is compiled as: the threads take
                                  # the next part when done (the first part holds `main`)
MIN_SPLIT_BYTES = 64 << 10   # smaller IR is compiled as one module (a part costs ~2 ms)
LEAF_WEIGHT = 3   # LLVM time per line of a kernel / of other code (measured 2-4: loops vectorize)
_DEFINE = re.compile(r'define (internal )?(.*?)@"([^"]+)"(\(.*\))')


def _unlocked(name):
    """llvmlite's C function `name`, called without llvmlite's process-wide lock."""
    return getattr(llvm.ffi.lib, name)._cfn


def split_module(text, parts, is_leaf, is_glue=None):
    """LLVM IR text as at most `parts` module texts. Functions for which `is_leaf(name)`
    holds (kernels: called, calling nothing but declarations and each other) are dealt
    out, the largest first, to the part of least estimated LLVM time (lines, a kernel's
    weighing `LEAF_WEIGHT`) among all but the first; the rest make the first part. Every part
    keeps the module-level lines (declarations, globals, metadata); a function defined in
    one part and used in another is made external there and declared in the other.

    With `is_glue`, the functions for which it holds (straight code calling kernels, which
    LLVM's pipeline cannot make faster) are dealt to up to `GLUE_PARTS` parts of their own,
    and the result is [(text, glue)]: compile the glue parts with `fast=True`."""
    if is_glue is not None:
        glue, rest = _take_glue(text, is_glue)
        texts = split_module(rest, parts, is_leaf)
        return [(t, False) for t in texts] + [(t, True) for t in glue]
    lines = text.split("\n")
    header, functions, current = [], [], None
    for line in lines:
        if current is None and line.startswith("define"):
            current = [line]
        elif current is not None:
            current.append(line)
            if line == "}":
                functions.append(current)
                current = None
        else:
            header.append(line)
    names = [_DEFINE.match(f[0]).group(3) for f in functions]
    owner, sizes = {}, [0] * parts
    for k in sorted(range(len(functions)), key=lambda k: (is_leaf(names[k]), -len(functions[k]))):
        leaf = is_leaf(names[k])
        part = 1 + sizes[1:].index(min(sizes[1:])) if leaf and parts > 1 else 0   # (one part: all in it)
        owner[names[k]] = part
        sizes[part] += len(functions[k]) * (LEAF_WEIGHT if leaf else 1)
    bodies = [[] for _ in range(parts)]
    for name, f in zip(names, functions):
        bodies[owner[name]].append(f)
    texts = ["\n".join(f for body in b for f in body) for b in bodies]
    shared = {name for name in names
              if any(f'@"{name}"' in texts[p] for p in range(parts) if p != owner[name])}
    out = []
    for p in (p for p in range(parts) if bodies[p]):
        declares = []
        for name, f in zip(names, functions):
            if name in shared and owner[name] != p:
                m = _DEFINE.match(f[0])
                declares.append(f'declare {m.group(2)}@"{name}"{m.group(4)}')
        body = "\n".join("\n".join([_external(f[0]) if _DEFINE.match(f[0]).group(3) in shared else f[0]] + f[1:])
                         for f in bodies[p])
        out.append("\n".join(header + declares + [body]))
    return out


GLUE_PARTS = 2


def _take_glue(text, is_glue):
    """(glue part texts, the rest of `text`): the glue functions moved out, each part with
    the module-level lines and the declarations of what it calls."""
    header, functions, glue, current = [], [], [], None
    for line in text.split("\n"):
        if current is None and line.startswith("define"):
            current = [line]
        elif current is not None:
            current.append(line)
            if line == "}":
                (glue if is_glue(_DEFINE.match(current[0]).group(3)) else functions).append(current)
                current = None
        else:
            header.append(line)
    if not glue:
        return [], text
    defines = [_DEFINE.match(f[0]) for f in functions + glue]
    declares = {m.group(3): f'declare {m.group(2)}@"{m.group(3)}"{m.group(4)}' for m in defines}
    moved = {_DEFINE.match(f[0]).group(3) for f in glue}
    rest_body = "\n".join("\n".join(f) for f in functions)
    rest = "\n".join(header + [declares[n] for n in moved if f'@"{n}"' in rest_body] + [rest_body])
    shares = [[] for _ in range(min(GLUE_PARTS, len(glue)))]
    for k, f in enumerate(glue):   # in program order, one run of functions per part
        shares[k * len(shares) // len(glue)].append(f)
    texts = []
    for share in shares:
        body = "\n".join("\n".join([_external(f[0])] + f[1:]) for f in share)
        mine = {_DEFINE.match(f[0]).group(3) for f in share}
        wanted = [declares[n] for n in declares if n not in mine and f'@"{n}"' in body]
        texts.append("\n".join(header + wanted + [body]))
    rest_defined = {_DEFINE.match(f[0]).group(3) for f in functions}
    return texts, _externalize(rest, {n for n in rest_defined if any(f'@"{n}"' in t for t in texts)})


def _externalize(text, names):
    """`text` with the functions `names` defined external (other modules call them)."""
    out = []
    for line in text.split("\n"):
        m = _DEFINE.match(line) if line.startswith("define internal") else None
        out.append(_external(line) if m and m.group(3) in names else line)
    return "\n".join(out)


def _external(define_line):
    return define_line.replace("define internal ", "define ", 1)


def _emit_object(tm, mod):
    with llvm.ffi.OutputString() as err:
        buf = _unlocked("LLVMPY_TargetMachineEmitToMemory")(tm, mod, 1, err)
        if not buf:
            raise RuntimeError(str(err))
    try:
        return ctypes.string_at(llvm.ffi.lib.LLVMPY_GetBufferStart(buf), llvm.ffi.lib.LLVMPY_GetBufferSize(buf))
    finally:
        llvm.ffi.lib.LLVMPY_DisposeMemoryBuffer(buf)


def compile_part(ir_text, tm, speed_level=2, fast=False, unroll=True):
    """(optimized module, object code) of LLVM IR text, in an LLVM context of its own;
    `fast`: no pass pipeline (`tm` then should be a machine of codegen level 0, LLVM's
    fast instruction selection and register allocation); `unroll=False`: the pipeline
    without loop unrolling (for the kernel parts of a large program: their loops are
    vectorized already, and unrolling them cost 15% of LLVM's time for no measured speed)."""
    with stage("optimize"):
        mod = llvm.parse_assembly(ir_text, llvm.create_context())
        mod.verify()
        if fast:
            with stage("codegen"):
                return mod, _emit_object(tm, mod)
        pto = llvm.create_pipeline_tuning_options(speed_level=speed_level)
        pto.loop_vectorization = pto.slp_vectorization = True
        pto.loop_unrolling = unroll
        pb = llvm.create_pass_builder(tm, pto)
        mpm = pb.getModulePassManager()
        try:
            _unlocked("LLVMPY_RunNewModulePassManager")(mpm, mod, pb)
        finally:   # llvmlite 0.50 never frees a ModulePassManager (ObjectRef._dispose shadows
            llvm.newpassmanagers.NewPassManager._dispose(mpm)   # its own): ~90 KiB a module
            mpm.detach()
    with stage("codegen"):
        return mod, _emit_object(tm, mod)


def compile_parts(texts, machines, fast_machines=None):
    """[(optimized module, object code)] of module texts, compiled by `len(machines)`
    threads (the calling thread and helpers; thread k uses target machine k), each taking
    the next text when it is done. A text may be a pair (text, fast): a fast one is
    compiled by `compile_part(..., fast=True)` on thread k's `fast_machines[k]`; or a
    triple (text, fast, unroll)."""
    texts = [t + (True,) * (3 - len(t)) if isinstance(t, tuple) else (t, False, True) for t in texts]
    results, errors, todo = [None] * len(texts), [], iter(range(len(texts)))
    take = threading.Lock()

    def work(thread):
        while not errors:
            with take:
                k = next(todo, None)
            if k is None:
                return
            text, fast, unroll = texts[k]
            try:
                fast = fast and fast_machines is not None and thread < len(fast_machines)
                results[k] = compile_part(text, fast_machines[thread] if fast else machines[thread], fast=fast,
                                          unroll=unroll)
            except BaseException as e:   # re-raised on the calling thread
                errors.append(e)
    helpers = [threading.Thread(target=work, args=(k,), daemon=True)
               for k in range(1, min(len(machines), len(texts)))]
    for t in helpers:
        t.start()
    work(0)
    with stage("wait"):
        for t in helpers:
            t.join()
    if errors:
        raise errors[0]
    return results
