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

from .errors import ArgumentError, DeviceError, JitadError
from .ir.types import NUMPY, Type
from .pytree import flatten, unflatten

FLOAT = ("f64", "f32")
_counter = itertools.count()
_lock = threading.Lock()


def _need(module, extra="interop"):
    try:
        return __import__(module)
    except ImportError:
        raise JitadError(f"jitad.interop needs {module}, which is not installed: pip install 'jitad[{extra}]'") \
            from None


def _ir_dtype(dtype, where):
    name = np.dtype(dtype).name
    for ir, np_name in NUMPY.items():
        if np.dtype(np_name).name == name:
            return ir
    raise ArgumentError(f"{where}: arrays of dtype {name} cannot be passed to jitad; use float64, float32, "
                        "int64 or bool")


class _Flat:
    """`f` on flat leaves for one input structure: its compiled forms, made once."""

    def __init__(self, f, in_td, rebuild=None):
        import jitad
        rebuild = rebuild or (lambda leaves: unflatten(in_td, list(leaves)))
        self.f, self.in_td = f, in_td
        self.call = lambda *leaves: f(*rebuild(leaves))
        self.out_td = self.out_structure = None
        self.jit = jitad.jit(lambda *leaves: flatten(self.call(*leaves))[0])

    def out_types(self, types):
        """The flat output types for input `types` (and the output structure), from a trace."""
        from .staging import trace_program
        program, self.out_td, _ = trace_program(lambda *leaves: self.call(*leaves), None,
                                                flatten(tuple(range(len(types))))[1], list(types))
        self.out_structure = _structure_of(self.out_td)
        return program.main.out_types

    @functools.cached_property
    def pullback(self):
        """(leaves, cotangents) -> the cotangents of the float leaves, compiled."""
        import jitad

        def vjp(leaves, cts):
            outs, back = jitad.vjp(lambda *xs: tuple(flatten(self.call(*xs))[0]), *leaves)
            return back(tuple(cts))
        return jitad.jit(vjp)

    @functools.cached_property
    def pushforward(self):
        import jitad
        return jitad.jit(lambda leaves, tangents: jitad.jvp(lambda *xs: tuple(flatten(self.call(*xs))[0]),
                                                          tuple(leaves), tuple(tangents)))


# -- PyTorch ----------------------------------------------------------------------------

def to_torch(f):
    """`f` as a function of CPU `torch.Tensor`s (pytrees as `f` takes them), with its
    gradient registered: `loss.backward()` runs jitad's reverse mode.

    >>> g = jitad.interop.to_torch(lambda x: jitad.sum(jitad.sin(x) ** 2))
    >>> x = torch.tensor([0.5, 1.0], dtype=torch.float64, requires_grad=True)
    >>> g(x).backward(); x.grad                                # doctest: +SKIP
    tensor([0.8415, 0.9093], dtype=torch.float64)

    A `torch.library` custom op (`jitad::<name>_<k>`): usable eagerly and inside
    `torch.compile(fullgraph=True)`; tensors are passed to jitad as NumPy views (no
    copy), results come back as tensors over jitad's fresh result arrays.
    """
    torch = _need("torch")
    if not callable(f):
        raise ArgumentError(f"to_torch takes a function, got {type(f).__name__}")
    name = f"{_c_name(getattr(f, '__name__', 'f'))}_{next(_counter)}"

    def arrays(tensors):
        out = []
        for t in tensors:
            if t.device.type != "cpu":
                raise DeviceError(f"to_torch: a tensor on {t.device} was passed; jitad runs on the CPU: "
                                  "pass tensor.cpu()")
            _ir_dtype(_torch_dtype(t), "to_torch")
            out.append(t.detach().numpy())
        return out

    @torch.library.custom_op(f"jitad::{name}", mutates_args=())
    def op(tensors: list[torch.Tensor], structure: int) -> list[torch.Tensor]:
        flat = _structures[structure]
        outs = flat.jit(*arrays(tensors))
        return [torch.from_numpy(np.asarray(o)) for o in outs]

    @op.register_fake
    def _(tensors, structure):
        flat = _structures[structure]
        types = [Type(_ir_dtype(_torch_dtype(t), "to_torch"), tuple(t.shape)) for t in tensors]
        return [tensors[0].new_empty(t.shape, dtype=getattr(torch, np.dtype(NUMPY[t.dtype]).name))
                if tensors else torch.empty(t.shape, dtype=getattr(torch, np.dtype(NUMPY[t.dtype]).name))
                for t in flat.out_types(types)]

    @torch.library.custom_op(f"jitad::{name}_pullback", mutates_args=())
    def pullback(tensors: list[torch.Tensor], cts: list[torch.Tensor], structure: int) -> list[torch.Tensor]:
        flat = _structures[structure]
        grads = flat.pullback(tuple(arrays(tensors)), tuple(arrays(cts)))
        return [torch.from_numpy(np.array(g, dtype=np.asarray(x).dtype, copy=True)) if _floating(x) else
                torch.zeros(x.shape, dtype=x.dtype) for g, x in zip(grads, tensors)]

    @pullback.register_fake
    def _(tensors, cts, structure):
        return [torch.empty_like(t) for t in tensors]

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs[0])
        ctx.structure = inputs[1]

    def backward(ctx, grads):
        tensors = list(ctx.saved_tensors)
        flat = _structures[ctx.structure]
        outs = op(tensors, ctx.structure) if any(g is None for g in grads) else None
        cts = [g if g is not None else torch.zeros_like(o) for g, o in zip(grads, outs or grads)]
        got = pullback(tensors, cts, ctx.structure)
        return [g if _floating(t) else None for g, t in zip(got, tensors)], None

    op.register_autograd(backward, setup_context=setup_context)

    @functools.wraps(f)
    def call(*args):
        # (torch.compile traces this: plain containers, constants, no locks)
        leaves, structure = _describe(args)
        key = key_of(structure)
        outs = op(leaves, key)   # (under torch.compile the fake kernel runs here and traces f)
        flat = _structures[key]
        if flat.out_structure is None:
            flat.out_types([Type(_ir_dtype(_torch_dtype(t), "to_torch"), tuple(t.shape)) for t in leaves])
        return _build(flat.out_structure, iter(outs))

    @torch._dynamo.assume_constant_result   # run while torch.compile traces: an int constant
    def key_of(structure):
        if structure not in keys:
            keys[structure] = _register(_Flat(f, None, lambda leaves: _build(structure, iter(leaves))))
        return keys[structure]
    keys = {}
    call.op = op
    return call


def _describe(x):
    """(leaves, structure) of a pytree of tensors, the structure as nested tuples."""
    if isinstance(x, (tuple, list)):
        parts = [_describe(v) for v in x]
        return [leaf for p in parts for leaf in p[0]], (type(x).__name__, tuple(p[1] for p in parts))
    if isinstance(x, dict):
        keys = tuple(x)
        parts = [_describe(x[k]) for k in keys]
        return [leaf for p in parts for leaf in p[0]], ("dict", keys, tuple(p[1] for p in parts))
    if x is None:
        return [], "none"
    return [x], "leaf"


def _build(structure, leaves):
    if structure == "leaf":
        return next(leaves)
    if structure == "none":
        return None
    if structure[0] == "dict":
        return {k: _build(s, leaves) for k, s in zip(structure[1], structure[2])}
    items = [_build(s, leaves) for s in structure[1]]
    return items if structure[0] == "list" else tuple(items)


def _structure_of(td):
    """A jitad treedef as `_describe`'s nested tuples (namedtuples become tuples)."""
    if td.kind == "leaf":
        return "leaf"
    if td.kind == "none":
        return "none"
    if td.kind == "dict":
        return ("dict", tuple(td.keys), tuple(map(_structure_of, td.children)))
    return ("list" if td.kind == "list" else "tuple", tuple(map(_structure_of, td.children)))


_structures = {}   # int -> _Flat: custom ops take ints, not Python objects


def _register(flat):
    with _lock:
        key = len(_structures)
        _structures[key] = flat
        return key


def _torch_dtype(t):
    return str(t.dtype).replace("torch.", "")


def _floating(t):
    return getattr(t, "is_floating_point", lambda: np.asarray(t).dtype.kind == "f")()


def _c_name(name):
    import re
    cleaned = re.sub(r"\W", "_", name)
    return cleaned if cleaned and not cleaned[0].isdigit() else "f_" + cleaned
