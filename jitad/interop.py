"""jitad inside JAX and PyTorch programs, with gradients across the boundary.

- `to_torch(f)`: a `torch.library` custom op on CPU tensors (its fake kernel from a
  trace of `f` at the tensors' shapes, its backward jitad's reverse mode), sharing memory
  with the tensors; eager and `torch.compile(fullgraph=True)`.
- `to_jax(f)`: a JAX primitive whose CPU lowering is an XLA custom call through JAX's FFI:
  a small fixed C handler calls the C entry point of `f` compiled by `jitad.export`, so a
  call inside `jax.jit` runs no Python. Its JVP is jitad's forward mode, its transpose
  jitad's reverse mode, and `jax.vmap` runs jitad's `vmap` of `f` in one call.

Both take pytrees of arrays as `f` does (float64, float32, int64 and bool leaves).
"""
import functools
import itertools
import threading

import numpy as np

from . import api
from .errors import ArgumentError, DeviceError, JitadError
from .export import export
from .ir.types import FLOATS, NUMPY, Type
from .pytree import flatten, unflatten
from .forest import Tree

_counter = itertools.count()
_lock = threading.Lock()


def _need(module, extra="interop"):
    try:
        return __import__(module)
    except ImportError:
        raise JitadError(f"jitad.interop needs {module}, which is not installed: pip install 'jitad[{extra}]'") \
            from None


@functools.lru_cache(maxsize=None)
def _ir_dtype(dtype, where):
    try:
        name = np.dtype(dtype).name
    except TypeError:   # a dtype NumPy does not know (bfloat16 before ml_dtypes registers it)
        name = str(dtype)
    for ir, np_name in NUMPY.items():
        if np.dtype(np_name).name == name:
            return ir
    hint = " (JAX makes ints int32 unless jax_enable_x64 is set)" if name == "int32" and where == "to_jax" else ""
    raise ArgumentError(f"{where}: arrays of dtype {name} cannot be passed to jitad; use float64, float32, "
                        f"int64 or bool{hint}{_cast_hint(name, where)}")


def _cast_hint(name, where):
    if not name.startswith(("float", "bfloat")):
        return ""
    return "; cast it first: tensor.float()" if where == "to_torch" else "; cast it first: x.astype(jnp.float32)"


class _Flat:
    """`f` for one input structure (`_describe`'s): compiled forms made once."""

    def __init__(self, f, structure):
        self.f, self.structure = f, structure
        self.out_td = self.out_structure = None
        self.jit = api.jit(lambda *args: tuple(flatten(f(*args))[0]))   # (a tuple: the native entry's fast path)

    def out_types(self, types):
        """The flat output types for the flat input `types` (a Tree's: its TreeType), from
        a trace; sets the output structure."""
        from .staging import trace_program
        in_td = flatten(_build(self.structure, iter(range(len(types)))))[1]
        program, self.out_td, _ = trace_program(self.f, None, in_td, list(types))
        self.out_structure = _structure_of(self.out_td)
        return program.main.out_types

    def _of_floats(self, args):
        """`f` as a function of the float array leaves of `args` (the others held) to its
        float outputs, and those leaves."""
        leaves, td = flatten(args)
        wrt = [k for k, x in enumerate(leaves) if _is_float_leaf(x)]

        def of_floats(*xs):
            full = list(leaves)
            for k, x in zip(wrt, xs):
                full[k] = x
            return tuple(o for o in flatten(self.f(*unflatten(td, full)))[0] if _is_float_leaf(o))
        return of_floats, tuple(leaves[k] for k in wrt)

    @functools.cached_property
    def pullback(self):
        """(args, cotangents of the float outputs) -> cotangents of the float array
        leaves of args, in flattened order; compiled."""

        def pullback(args, cts):
            of_floats, at = self._of_floats(args)
            return api.vjp(of_floats, *at)[1](tuple(cts))
        return api.jit(pullback)

    @functools.cached_property
    def tangent(self):
        """(args, tangents of the float array leaves of args) -> tangents of the float
        outputs (jitad's forward mode); compiled."""

        def tangent(args, tangents):
            of_floats, at = self._of_floats(args)
            return api.jvp(of_floats, at, tuple(tangents))[1]
        return api.jit(tangent)


# -- PyTorch ----------------------------------------------------------------------------

def to_torch(f):
    """`f` as a function of CPU `torch.Tensor`s (pytrees of them and `jitad.Tree`s, as
    `f` takes them), its gradient registered: `loss.backward()` runs jitad's reverse mode.

    >>> g = jitad.interop.to_torch(lambda x: jitad.sum(jitad.sin(x) ** 2))   # doctest: +SKIP
    >>> x = torch.tensor([0.5, 1.0], dtype=torch.float64, requires_grad=True)   # doctest: +SKIP
    >>> g(x).backward(); x.grad                                # doctest: +SKIP
    tensor([0.8415, 0.9093], dtype=torch.float64)

    A `torch.library` custom op (`jitad::<name>_<k>`) with a fake kernel (the output
    shapes from a trace of `f`): usable eagerly and inside `torch.compile(fullgraph=True)`.
    Under torch.func, `jvp` and `jacfwd` run jitad's forward mode, `vjp`, `grad` and `jacrev`
    its reverse mode, and `vmap` calls `f` once per lane; second derivatives through PyTorch
    (`hessian`) are an error naming the fix: take them inside jitad (`to_torch(jitad.hessian(f))`).
    Tensors reach jitad as NumPy views (no copy); results are tensors over jitad's fresh
    result arrays. A tree travels as its arrays and is rebuilt for each call.
    """
    torch = _need("torch")
    if not callable(f):
        raise ArgumentError(f"to_torch takes a function, got {type(f).__name__}")
    name = f"{_c_name(getattr(f, '__name__', 'f'))}_{next(_counter)}"
    op = _call_op(torch, name)
    pullback = _pullback_op(torch, name)
    tangent = _tangent_op(torch, name, op)
    setup_context, backward = _autograd(torch, op, pullback)
    for custom in (op, pullback, tangent):
        custom.register_vmap(_lane_by_lane(torch, custom))
    transformed = _transformed_function(torch, op, setup_context, backward, _first_order(torch, pullback),
                                        _first_order(torch, tangent))

    @functools.wraps(f)
    def call(*args):
        # (torch.compile traces this: plain containers and constants only)
        tensors, structure = _describe(args)
        _check_tensors(torch, tensors, name)
        key = key_of(structure) if torch.compiler.is_compiling() else key_for(structure)
        if _transformed(torch):   # inside torch.func.jvp, jacfwd, vmap, ...
            outs = transformed.apply(key, *tensors)
        else:
            outs = op(tensors, key)   # (under torch.compile the fake kernel runs here: it traces f)
        flat = _structures[key]
        if flat.out_structure is None:
            flat.out_types(_types(tensors, structure))
        return _build(flat.out_structure, iter(outs))

    def key_for(structure):
        key = keys.get(structure)
        if key is None:
            key = keys[structure] = _register(_Flat(f, structure))
        return key
    key_of = torch._dynamo.assume_constant_result(key_for)   # run while torch.compile traces: a constant
    keys = {}
    call.op = op
    return call


def _torch_arguments(tensors, structure):
    """The call's arguments from the op's tensors: arrays (NumPy views) and trees."""
    arrays = []
    for t in tensors:   # (their devices: checked by `call`, before any kernel is chosen)
        _ir_dtype(_torch_dtype(t), "to_torch")
        arrays.append(t.detach().numpy())
    return _build(structure, iter(arrays), _rebuild_tree)


def _check_tensors(torch, tensors, name):
    """Tensors on the CPU of dtypes jitad takes; the error names the caller's line."""
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise ArgumentError(f"to_torch: {name} takes tensors and jitad.Trees (pytrees of them); got a "
                                f"{type(t).__name__}")
        if t.device.type != "cpu":
            raise DeviceError(f"to_torch: a tensor on {t.device} was passed; jitad runs on the CPU: pass "
                              "tensor.cpu()")
    if not torch.compiler.is_compiling():   # (the op checks again)
        for t in tensors:
            _ir_dtype(_torch_dtype(t), "to_torch")


def _call_op(torch, name):
    """The custom op `jitad::<name>`: the compiled call, with a fake kernel giving the
    output shapes from a trace (what torch.compile runs)."""
    @torch.library.custom_op(f"jitad::{name}", mutates_args=())
    def op(tensors: list[torch.Tensor], key: int) -> list[torch.Tensor]:
        flat = _structures[key]
        outs = flat.jit(*_torch_arguments(tensors, flat.structure))
        return [torch.from_numpy(np.asarray(o)) for o in outs]

    @op.register_fake
    def _(tensors, key):
        flat = _structures[key]
        return [torch.empty(t.shape, dtype=getattr(torch, np.dtype(NUMPY[t.dtype]).name))
                for t in flat.out_types(_types(tensors, flat.structure))]
    return op


def _pullback_op(torch, name):
    """The custom op `jitad::<name>_pullback`: jitad's reverse mode for the inputs."""
    @torch.library.custom_op(f"jitad::{name}_pullback", mutates_args=())
    def pullback(tensors: list[torch.Tensor], cts: list[torch.Tensor], key: int) -> list[torch.Tensor]:
        flat = _structures[key]
        args = _torch_arguments(tensors, flat.structure)
        grads = iter(flat.pullback(args, tuple(c.detach().numpy() for c in cts)))
        return [torch.from_numpy(np.array(next(grads))) if t.is_floating_point() and not tree else torch.zeros_like(t)
                for t, tree in zip(tensors, _tree_parts(flat.structure))]

    @pullback.register_fake
    def _(tensors, cts, key):
        return [torch.empty_like(t) for t in tensors]
    return pullback


def _tangent_op(torch, name, op):
    """The custom op `jitad::<name>_jvp`: jitad's forward mode, the float outputs' tangents."""
    @torch.library.custom_op(f"jitad::{name}_jvp", mutates_args=())
    def tangent(tensors: list[torch.Tensor], tangents: list[torch.Tensor], key: int) -> list[torch.Tensor]:
        flat = _structures[key]
        tans = tuple(d.detach().numpy() for d in tangents)
        return [torch.from_numpy(np.array(t)) for t in flat.tangent(_torch_arguments(tensors, flat.structure), tans)]

    @tangent.register_fake
    def _(tensors, tangents, key):
        return [torch.empty_like(o) for o in op(tensors, key) if o.is_floating_point()]
    return tangent


def _autograd(torch, op, pullback):
    """`op`'s autograd formula, registered: its backward runs `pullback` (a zero
    cotangent for an output no gradient reached). Returns (setup_context, backward)."""
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs[0])
        ctx.key, ctx.float_outputs = inputs[1], [o.is_floating_point() for o in output]

    def backward(ctx, grads, pull=pullback):
        tensors = list(ctx.saved_tensors)
        cts = [g if g is not None else torch.zeros(0) for g, k in zip(grads, ctx.float_outputs) if k]
        if any(g is None for g, k in zip(grads, ctx.float_outputs) if k):   # an output no gradient reached
            outs = [o for o, k in zip(op(tensors, ctx.key), ctx.float_outputs) if k]
            cts = [c if c.numel() or not o.numel() else torch.zeros_like(o) for c, o in zip(cts, outs)]
        got = pull(tensors, cts, ctx.key)
        return [g if t.is_floating_point() and not tree else None
                for g, t, tree in zip(got, tensors, _tree_parts(_structures[ctx.key].structure))], None

    op.register_autograd(backward, setup_context=setup_context)
    return setup_context, backward


def _transformed_function(torch, op, setup_context, backward, pull_once, tangent_once):
    """The op under torch.func's transformations, as an `autograd.Function`: `jvp`/`jacfwd`
    run jitad's forward mode, `vjp`/`grad`/`jacrev` its reverse mode, `vmap` the op once
    per lane."""
    class Transformed(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(key, *tensors):
            return tuple(op(list(tensors), key))

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_forward(*inputs[1:])
            setup_context(ctx, (inputs[1:], inputs[0]), output)

        @staticmethod
        def jvp(ctx, _, *tangents):
            tensors = list(ctx.saved_tensors)
            parts = _tree_parts(_structures[ctx.key].structure)
            tans = [torch.zeros_like(t) if d is None else d
                    for t, d, tree in zip(tensors, tangents, parts) if t.is_floating_point() and not tree]
            touts = iter(tangent_once(tensors, tans, ctx.key))
            return tuple(next(touts) if k else None for k in ctx.float_outputs)

        @staticmethod
        def backward(ctx, *grads):
            return (None, *backward(ctx, grads, pull_once)[0])
    return Transformed


_structures = {}   # int -> _Flat: custom ops take ints, not Python objects


def _transformed(torch):
    """Whether a torch.func transformation (jvp, vmap, grad, ...) is running this call."""
    if torch.compiler.is_compiling():
        return False
    from torch._C._functorch import peek_interpreter_stack
    return peek_interpreter_stack() is not None


def _first_order(torch, custom):
    """`custom(tensors, more_tensors, key)` (a pullback or a tangent map) as a function whose
    own derivatives, asked for by a nested torch.func transformation, are a clear error
    instead of a silent zero."""
    class FirstOrder(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(key, n, *tensors):
            return tuple(custom(list(tensors[:n]), list(tensors[n:]), key))

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, *grads):
            raise _second_order()

        @staticmethod
        def jvp(ctx, *tangents):
            raise _second_order()

    return lambda tensors, more, key: FirstOrder.apply(key, len(tensors), *tensors, *more)


def _second_order():
    return JitadError("to_torch: a function from to_torch is differentiated once by PyTorch (jvp, vjp, grad, "
                      "jacfwd, jacrev, vmap of those); for second derivatives (hessian, grad of grad) take them "
                      "inside jitad: to_torch(jitad.hessian(f)) or to_torch(jitad.grad(f))", where=False)


def _lane_by_lane(torch, custom):
    """A vmap rule for the custom op `custom`: one call per lane, the results stacked
    along a new first axis."""
    def rule(info, in_dims, *args):
        def lane(b):
            return custom(*[[t if d is None else t.select(d, b) for t, d in zip(a, dims or [None] * len(a))]
                            if isinstance(a, (list, tuple)) else a for a, dims in zip(args, in_dims)])
        lanes = [lane(b) for b in range(info.batch_size)]
        outs = [torch.stack(column) for column in zip(*lanes)]
        return outs, [0] * len(outs)
    return rule


def _register(flat):
    with _lock:
        key = len(_structures)
        _structures[key] = flat
        return key


def _describe(x):
    """(tensors, structure) of a pytree of tensors and trees; the structure is nested
    tuples of strings (dict keys sorted, as jitad and JAX flatten them); a tree becomes
    its arrays: left, right, root, then its fields by name."""
    if isinstance(x, (tuple, list)):
        if all(type(v).__name__ == "Tensor" for v in x):   # the common case, quickly
            return list(x), (type(x).__name__, ("leaf",) * len(x))
        parts = [_describe(v) for v in x]
        return [t for p in parts for t in p[0]], (type(x).__name__, tuple(p[1] for p in parts))
    if isinstance(x, dict):
        keys = tuple(sorted(x))
        parts = [_describe(x[k]) for k in keys]
        return [t for p in parts for t in p[0]], ("dict", keys, tuple(p[1] for p in parts))
    if x is None:
        return [], "none"
    if isinstance(x, Tree):
        import torch
        names = tuple(sorted(x.fields))
        arrays = [x.left, x.right, np.array(x.root)] + [x.fields[n] for n in names]
        return [torch.from_numpy(np.array(a)) for a in arrays], ("tree", names)
    return [x], "leaf"


def _build(structure, leaves, tree=None):
    """The pytree `structure` describes, its leaves from the iterator `leaves`; a tree's
    from `tree(left, right, root, fields)` (default: the next leaf stands for the tree)."""
    if structure == "leaf":
        return next(leaves)
    if structure == "none":
        return None
    if structure[0] == "tree":
        if tree is None:
            return next(leaves)
        left, right, root = next(leaves), next(leaves), next(leaves)
        return tree(left, right, root, {n: next(leaves) for n in structure[1]})
    if structure[0] == "dict":
        return {k: _build(s, leaves, tree) for k, s in zip(structure[1], structure[2])}
    items = [_build(s, leaves, tree) for s in structure[1]]
    return items if structure[0] == "list" else tuple(items)


def _rebuild_tree(left, right, root, fields):
    return Tree(left, right, root=int(root), **fields)


def _tree_parts(structure):
    """For each tensor of `structure`: whether it is an array of a tree."""
    if structure in ("leaf", "none"):
        return [False] * (structure == "leaf")
    if structure[0] == "tree":
        return [True] * (3 + len(structure[1]))
    return [t for s in structure[-1] for t in _tree_parts(s)]


def _types(tensors, structure):
    """The jitad types of the call's flat arguments (a tree is one, its TreeType)."""
    from .ir.types import TreeType

    def tree(left, right, root, fields):
        return TreeType(tuple((n, _ir_dtype(_torch_dtype(t), "to_torch")) for n, t in fields.items()))
    args = _build(structure, iter(tensors), tree)
    return [x if isinstance(x, TreeType) else Type(_ir_dtype(_torch_dtype(x), "to_torch"), tuple(x.shape))
            for x in flatten(args)[0]]


def _structure_of(td):
    """A jitad treedef as `_describe`'s nested tuples (namedtuples become tuples)."""
    if td.kind in ("leaf", "none"):
        return td.kind
    if td.kind == "dict":
        return ("dict", tuple(td.keys), tuple(map(_structure_of, td.children)))
    return ("list" if td.kind == "list" else "tuple", tuple(map(_structure_of, td.children)))


def _torch_dtype(t):
    return str(t.dtype).replace("torch.", "")


def _c_name(name):
    import re
    cleaned = re.sub(r"\W", "_", name)
    return cleaned if cleaned and not cleaned[0].isdigit() else "f_" + cleaned


# -- JAX --------------------------------------------------------------------------------

HANDLER_C = r"""
/* jitad's XLA FFI handler: calls a function with jitad.export's C ABI, whose address
   (and its error function's) the custom call carries as the attributes `fn` and `err`. */
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include "xla/ffi/api/c_api.h"

/* Ctrl-C: XLA runs the call on a thread of its own while Python's main thread waits, so
   Python's handler cannot stop it. A C handler put in front of Python's sets this word,
   which the exported functions poll (`<name>_set_stop`): the running call fails and JAX
   raises its error. That SIGINT stays from Python (a KeyboardInterrupt racing JAX's error
   would surface anywhere after it); one that comes when no call runs, a second one, or
   one the call finished before seeing, goes on to Python's handler. */
int64_t jitad_ffi_stop;
static int64_t in_flight;
static void (*python_sigint)(int);

static void on_sigint(int sig) {
    if (__atomic_load_n(&in_flight, __ATOMIC_RELAXED) > 0
            && !__atomic_exchange_n(&jitad_ffi_stop, 1, __ATOMIC_RELAXED)) return;
    if (python_sigint) python_sigint(sig);
}

/* 1 when on_sigint is (now) in front of SIGINT's handler; 0 when that handler is not a
   plain function (default, ignored, or an sa_sigaction one): then nothing changes. */
int jitad_ffi_watch_sigint(void) {
    struct sigaction old, now;
    if (sigaction(SIGINT, NULL, &old)) return 0;
    if (old.sa_handler == on_sigint) return 1;
    if (old.sa_handler == SIG_DFL || old.sa_handler == SIG_IGN || (old.sa_flags & SA_SIGINFO)) return 0;
    python_sigint = old.sa_handler;
    now = old;
    now.sa_handler = on_sigint;
    return sigaction(SIGINT, &now, NULL) == 0;
}

#define STOPPED 4   /* the exported functions' code for a stop (jitad.export) */
typedef int (*jitad_fn)(const void *const *, void *const *);
typedef const char *(*jitad_err)(int);

static XLA_FFI_Error *fail(const XLA_FFI_Api *api, const char *message, XLA_FFI_Error_Code errc) {
    XLA_FFI_Error_Create_Args args;
    memset(&args, 0, sizeof args);
    args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
    args.message = message;
    args.errc = errc;
    return api->XLA_FFI_Error_Create(&args);
}

XLA_FFI_Error *jitad_ffi_call(XLA_FFI_CallFrame *frame) {
    XLA_FFI_Extension_Base *ext = frame->extension_start;
    if (ext && ext->type == XLA_FFI_Extension_Metadata) {   /* XLA asks which API version we speak */
        XLA_FFI_Metadata *m = ((XLA_FFI_Metadata_Extension *)ext)->metadata;
        m->api_version.major_version = XLA_FFI_API_MAJOR;
        m->api_version.minor_version = XLA_FFI_API_MINOR;
        m->traits = 0;
        return NULL;
    }
    if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
    int64_t fn = 0, err = 0;
    for (int64_t i = 0; i < frame->attrs.size; i++) {
        if (frame->attrs.types[i] != XLA_FFI_AttrType_SCALAR) continue;
        XLA_FFI_ByteSpan *name = frame->attrs.names[i];
        int64_t value = *(int64_t *)((XLA_FFI_Scalar *)frame->attrs.attrs[i])->value;
        if (name->len == 2 && !memcmp(name->ptr, "fn", 2)) fn = value;
        if (name->len == 3 && !memcmp(name->ptr, "err", 3)) err = value;
    }
    if (!fn) return fail(frame->api, "jitad: the custom call carries no function", XLA_FFI_Error_Code_INTERNAL);
    const void *ins[frame->args.size + 1];
    void *outs[frame->rets.size + 1];
    for (int64_t i = 0; i < frame->args.size; i++) ins[i] = ((XLA_FFI_Buffer *)frame->args.args[i])->data;
    for (int64_t j = 0; j < frame->rets.size; j++) outs[j] = ((XLA_FFI_Buffer *)frame->rets.rets[j])->data;
    if (__atomic_fetch_add(&in_flight, 1, __ATOMIC_RELAXED) == 0) __atomic_store_n(&jitad_ffi_stop, 0, __ATOMIC_RELAXED);
    int code = ((jitad_fn)fn)(ins, outs);
    int last = __atomic_sub_fetch(&in_flight, 1, __ATOMIC_RELAXED) == 0;
    if (code == STOPPED)
        return fail(frame->api, "jitad: interrupted by Ctrl-C (SIGINT): the call stopped in a loop of the "
                                "jitad function; nothing was returned", XLA_FFI_Error_Code_CANCELLED);
    if (last && __atomic_exchange_n(&jitad_ffi_stop, 0, __ATOMIC_RELAXED) && python_sigint)
        python_sigint(SIGINT);   /* finished before it polled: the Ctrl-C is Python's after all */
    if (code) return fail(frame->api, err ? ((jitad_err)err)(code) : "jitad: the compiled function failed",
                          XLA_FFI_Error_Code_INTERNAL);
    return NULL;
}
"""
TARGET = "jitad_call"
_jax = {}   # the primitives, the handler's library, the libraries of exported functions


def _jax_setup():
    """The FFI handler (compiled once a process with `cc` against jaxlib's headers) and
    the two primitives: `jitad_call` (a flat jitad function) and `jitad_linear` (its
    JVP's tangent part, linear in the tangents, whose transpose is jitad's pullback)."""
    with _lock:
        if _jax:
            return _jax
        jax = _need("jax")
        import atexit
        import ctypes
        import os
        import shutil
        import subprocess
        import tempfile

        import jax.ffi   # noqa: F811 (the same module _need bound)
        from jax.extend.core import Primitive
        from jax.interpreters import ad, batching, mlir
        cc = shutil.which(os.environ.get("CC", "cc"))
        if cc is None:
            raise JitadError("jitad.interop.to_jax needs a C compiler (`cc`) for its XLA FFI handler")
        tmp = tempfile.mkdtemp(prefix="jitad-jax-")   # the handler and the exported libraries, this process's
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)   # (loaded libraries stay mapped until exit)
        src, lib = os.path.join(tmp, "handler.c"), os.path.join(tmp, "libjitad_ffi.so")
        with open(src, "w") as fh:
            fh.write(HANDLER_C)
        subprocess.run([cc, "-shared", "-fPIC", "-O2", "-I", jax.ffi.include_dir(), "-o", lib, src], check=True,
                       capture_output=True)
        handler = ctypes.CDLL(lib)
        if threading.current_thread() is threading.main_thread():   # (only the main thread sets handlers)
            handler.jitad_ffi_watch_sigint()
        jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(handler.jitad_ffi_call), platform="cpu")
        call_p, linear_p = Primitive("jitad_call"), Primitive("jitad_linear")
        for p, which in ((call_p, "call"), (linear_p, "tangent")):
            p.multiple_results = True
            p.def_abstract_eval(lambda *avals, fn, which=which: fn.part(which).out_avals(avals))
            p.def_impl(lambda *args, fn, which=which: fn.part(which).eager(args))
            mlir.register_lowering(p, lambda ctx, *args, fn, which=which: fn.part(which).lower(ctx, args),
                                   platform="cpu")
            batching.primitive_batchers[p] = lambda args, dims, fn, which=which: _batched(call_p, args, dims,
                                                                                           fn.part(which))

        def jvp(primals, tangents, fn):
            fn.out_avals([jax.typeof(x) for x in primals])   # (sets out_floats)
            outs = call_p.bind(*primals, fn=fn)
            ts = [ad.instantiate_zeros(t) for t, k in zip(tangents, fn.floats)]
            touts = iter(linear_p.bind(*primals, *[t for t, k in zip(ts, fn.floats) if k], fn=fn))
            return outs, [next(touts) if k else _zero_tangent(jax, ad, o) for o, k in zip(outs, fn.out_floats)]

        def transpose(cts, *args, fn):
            primals = args[:fn.n_in]
            fn.out_avals([jax.typeof(x) for x in primals])
            cts = [ad.instantiate_zeros(c) for c in cts]
            grads = iter(call_p.bind(*primals, *cts, fn=fn.pullback))
            return [None] * fn.n_in + [next(grads) for k in fn.floats if k]
        ad.primitive_jvps[call_p] = jvp
        ad.primitive_transposes[linear_p] = transpose
        _jax.update(call=call_p, linear=linear_p, jax=jax, tmp=tmp, handler=handler)
        return _jax


def _zero_tangent(jax, ad, out):
    """JAX's symbolic zero tangent of an int or bool output `out`, spelled as the installed
    JAX spells it (`Zero(aval.to_tangent_aval())`; some older releases: `Zero.from_primal_value`)."""
    if hasattr(ad.Zero, "from_primal_value"):
        return ad.Zero.from_primal_value(out)
    aval = jax.typeof(out) if hasattr(jax, "typeof") else jax.core.get_aval(out)
    return ad.Zero(aval.to_tangent_aval() if hasattr(aval, "to_tangent_aval") else aval.at_least_vspace())


def address_of_stop_word():
    """The address of the FFI handler's stop word, which SIGINT sets (see HANDLER_C)."""
    import ctypes
    return ctypes.addressof(ctypes.c_int64.in_dll(_jax_setup()["handler"], "jitad_ffi_stop"))


def _batched(call_p, args, dims, fn):
    """`jax.vmap`: one call of jitad's `vmap` of the function (the batch axis first in the results)."""
    axes = tuple(d if isinstance(d, int) else None for d in dims)   # (JAX: None or not_mapped)
    outs = call_p.bind(*args, fn=fn.vmapped(axes))
    return outs, [0] * len(outs)


class _JaxFn:
    """A flat jitad function (leaves -> tuple of leaves) as JAX's primitives see it: its
    output avals, its eager run, its custom-call lowering (a library from `jitad.export`
    per signature), and the functions derived from it (tangent part, pullback, vmap)."""

    def __init__(self, fn, name, floats):
        self.fn, self.name, self.floats, self.n_in = fn, name, tuple(floats), len(floats)
        self.jit = api.jit(lambda *leaves: tuple(fn(*leaves)))
        self.signatures, self.derived, self.out_floats = {}, {}, None

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other

    def _types(self, avals):
        return [Type(_ir_dtype(a.dtype, "to_jax"), tuple(a.shape)) for a in avals]

    def out_avals(self, avals):
        from jax.core import ShapedArray
        from .staging import trace_program
        types = self._types(avals)
        key = tuple(types)
        if key not in self.signatures:
            program, _, _ = trace_program(lambda *leaves: tuple(self.fn(*leaves)), None,
                                          flatten(tuple(range(len(types))))[1], types)
            self.signatures[key] = [ShapedArray(t.shape, np.dtype(NUMPY[t.dtype])) for t in program.main.out_types]
        outs = self.signatures[key]
        self.out_floats = tuple(a.dtype.kind == "f" for a in outs)
        return outs

    def eager(self, args):
        import jax.numpy as jnp
        return [jnp.asarray(o) for o in self.jit(*[np.asarray(a) for a in args])]

    def lower(self, ctx, args):
        import jax.ffi
        ex, lib, fn, err = self.library(ctx.avals_in)
        return jax.ffi.ffi_lowering(TARGET)(ctx, *args, fn=np.int64(fn), err=np.int64(err))

    def library(self, avals):
        """`jitad.export` of this function for `avals` (once per signature and process)."""
        import ctypes
        key = ("lib",) + tuple(self._types(avals))
        if key not in self.signatures:
            examples = [np.zeros(a.shape, a.dtype) for a in avals]
            name = f"{_c_name(self.name)}_{next(_counter)}"
            ex = export(lambda *leaves: tuple(self.fn(*leaves)), *examples, path=_jax_setup()["tmp"], name=name)
            lib = ctypes.CDLL(ex.library)
            address = lambda symbol: ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value
            getattr(lib, name + "_set_stop")(ctypes.c_void_p(address_of_stop_word()))
            self.signatures[key] = (ex, lib, address(name), address(name + "_error"))
        return self.signatures[key]

    def part(self, which):
        return self if which == "call" else self.tangent

    def _derive(self, key, make):
        with _lock:
            if key not in self.derived:
                self.derived[key] = make()
            return self.derived[key]

    @property
    def tangent(self):
        """(primals..., tangents of the float primals...) -> tangents of the float outputs."""

        def make():
            n = self.n_in

            def tangent(*args):
                of_floats, at = _of_floats(self, args[:n])
                return tuple(api.jvp(of_floats, at, tuple(args[n:]))[1])
            return _JaxFn(tangent, self.name + "_jvp", list(self.floats) + [True] * sum(self.floats))
        return self._derive("tangent", make)

    @property
    def pullback(self):
        """(primals..., cotangents of the float outputs...) -> cotangents of the float primals."""

        def make():
            n = self.n_in

            def pullback(*args):
                of_floats, at = _of_floats(self, args[:n])
                return tuple(api.vjp(of_floats, *at)[1](tuple(args[n:])))
            return _JaxFn(pullback, self.name + "_vjp", list(self.floats) + [True] * sum(self.out_floats))
        return self._derive("pullback", make)

    def vmapped(self, axes):

        def make():
            return _JaxFn(lambda *leaves: tuple(api.vmap(lambda *xs: tuple(self.fn(*xs)), in_axes=axes)(*leaves)),
                          self.name + "_vmap", self.floats)
        return self._derive(("vmap", axes), make)


def _of_floats(fn, primals):
    """`fn` as a function of its float arguments alone (the others held at `primals`) to
    its float outputs; and those float arguments' values."""
    float_pos = [k for k in range(len(primals)) if fn.floats[k]]

    def of_floats(*xs):
        full = list(primals)
        for k, x in zip(float_pos, xs):
            full[k] = x
        return tuple(o for o in fn.fn(*full) if _is_float_leaf(o))
    return of_floats, tuple(primals[k] for k in float_pos)


def _is_float_leaf(x):
    dtype = getattr(x, "ir_dtype", None) or np.asarray(x).dtype.name
    return dtype in ("f64", "f32", "float64", "float32")


def to_jax(f):
    """`f` as a function of JAX arrays (pytrees as `f` takes them) that `jax.jit`,
    `jax.grad`/`vjp`, `jax.jvp` and `jax.vmap` accept. Inside `jax.jit` a call is an XLA
    custom call (JAX's FFI) of `f` compiled by jitad: no Python runs per call. Ctrl-C
    stops a call that runs a loop: JAX raises its error ("interrupted by Ctrl-C").

    >>> solve = jitad.interop.to_jax(lambda a: jitad.WHILE(lambda x: x * x > a + 1e-12, lambda x: 0.5 * (x + a / x), a))
    >>> jax.grad(lambda a: solve(a))(4.0)   # d sqrt(a)/da through a data-dependent loop  # doctest: +SKIP
    Array(0.25, dtype=float32)
    """
    if not callable(f):
        raise ArgumentError(f"to_jax takes a function, got {type(f).__name__}")
    setup = _jax_setup()
    jax = setup["jax"]
    fns = {}

    @functools.wraps(f)
    def call(*args):
        leaves, treedef = jax.tree_util.tree_flatten(args)
        for x in leaves:
            if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) \
                    and any(d.platform != "cpu" for d in x.devices()):
                raise DeviceError("to_jax: an array on a GPU was passed; jitad runs on the CPU")
        dtypes = tuple(_ir_dtype(jax.numpy.result_type(x), "to_jax") for x in leaves)
        key = (treedef, dtypes)
        if key not in fns:
            structure = {}

            def flat(*xs):
                out = f(*jax.tree_util.tree_unflatten(treedef, list(xs)))
                out_leaves, structure["out"] = flatten(out)   # (the treedef keeps every container's type)
                return out_leaves
            fns[key] = (_JaxFn(flat, getattr(f, "__name__", "f"), [d in FLOATS for d in dtypes]), structure)
        fn, structure = fns[key]
        outs = setup["call"].bind(*leaves, fn=fn)
        return unflatten(structure["out"], list(outs))
    return call
