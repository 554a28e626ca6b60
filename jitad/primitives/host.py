"""`host_call`: a pure Python function called from compiled code (`jitad.pure_callback`).

The node's operands are the call's array arguments; its result is the result `index` of
the function registered under `call` in `HOST_FUNCTIONS` (one node per result: a pure
function may be called more than once), of the static type `out` (dtype, shape). The LLVM
rule is the lowerer's `host_call` (`jitad/lower/debug.py`: a call back into Python, as
`debug_print`'s), the NumPy meaning calls the function directly. It has no derivative,
as JAX's `pure_callback` has none; `vmap_method` says how `vmap` batches it (JAX's
meanings: "sequential" runs it once per lane, "expand_dims" calls it once with the
batched operands and size-1 axes on the others, "broadcast_all" with every operand
broadcast to the batch)."""
import numpy as np

from ..errors import ArgumentError, UnsupportedError
from ..ir.ops import declare
from ..ir.types import Type
from .rules import N

HOST_FUNCTIONS = {}   # `call` key -> fn(*operand values) -> list of results (kept: compiled code may call it)
VMAP_METHODS = (None, "sequential", "sequential_unrolled", "expand_dims", "broadcast_all")
_NUMPY = {"f64": np.float64, "f32": np.float32, "i64": np.int64, "bool": np.bool_}


def result(value, out, call):
    """`value` as a NumPy array of the static type `out`, or an ArgumentError naming the mismatch."""
    dtype, shape = out
    value = np.asarray(value)
    if value.shape != tuple(shape):
        raise ArgumentError(f"pure_callback: `{call.split('@')[0]}` returned shape {value.shape} where "
                            f"result_shape_dtypes gives {tuple(shape)}")
    return value.astype(_NUMPY[dtype], copy=False)


def _impl(*xs, call, index, out, vmap_method):
    return result(HOST_FUNCTIONS[call](*xs)[index], out, call)


def _no_derivative(*args, **kwargs):
    raise UnsupportedError("pure_callback has no derivative (JAX's has none either): give the function one with "
                           "jitad.custom_jvp or jitad.custom_vjp around the pure_callback call, or compute it "
                           "in jitad")


def _batch(node, ins, size, mask):
    method, (dtype, shape) = node.attrs["vmap_method"], node.attrs["out"]
    if method in (None, "sequential", "sequential_unrolled"):
        return None   # once per lane
    if method == "expand_dims":
        args = [x if b else N.reshape(x, (1,) + tuple(N._shape(x))) for x, b in ins]
    else:
        args = [x if b else N.broadcast_to(x, (size,) + tuple(N._shape(x))) for x, b in ins]
    return [(N.bind(node.op, *args, **{**node.attrs, "out": (dtype, (size,) + tuple(shape))}), True)]


declare("host_call", lambda op, types, attrs, bodies: [Type(attrs["out"][0], tuple(attrs["out"][1]))], _impl,
        flags="pure", vjp=_no_derivative, jvp=_no_derivative, batch=_batch,
        llvm=lambda lo, node, ins: lo.host_call(node, ins))
