"""`jitad.lax`: JAX's `jax.lax` on jitad: elementwise operations with XLA's semantics,
shape operations, gathers and scatters, reductions and sorts, convolutions and window
reductions, control flow and JAX's primitive objects (`add_p.bind`). Each function runs
eagerly on NumPy values and staged inside `jit`/`grad`; reverse mode goes through all
of them, `while_loop` included (JAX refuses that one):

>>> from jitad import grad, lax
>>> grad(lambda x: lax.while_loop(lambda c: c < 10.0, lambda c: c * x, 1.0))(3.0)   # d/dx x**3
27.0

The collectives (`psum`, `axis_index`, `all_gather`, ...) work over the named axis of
`jitad.vmap(f, axis_name=...)`. See docs/lax.md.
"""
import builtins
import enum

import numpy as np

from .. import numeric as N
from ..errors import ArgumentError
from ..staging import is_staged, result_dtype
from ..staging.complex import conj_leaves as _complex_conj, is_complex as _is_complex, parts as _complex_parts
from . import linalg  # noqa: F401
from .dynamic import (dynamic_index_in_dim, dynamic_slice, dynamic_slice_in_dim,  # noqa: F401
                      dynamic_update_index_in_dim, dynamic_update_slice, dynamic_update_slice_in_dim)
from .elementwise import (abs, acos, acosh, add, asin, asinh, atan, atan2, atanh, bitcast_convert_type,  # noqa: F401
                          bitwise_and, bitwise_not, bitwise_or, bitwise_xor, cbrt, ceil, clamp, clz,
                          convert_element_type, cos, cosh, digamma, div, eq, erf, erf_inv, erfc, exp, exp2,
                          expm1, floor, ge, gt, integer_pow, is_finite, le, lgamma, log, log1p, logistic, lt,
                          max, min, mul, ne, neg, nextafter, polygamma, population_count, pow, reciprocal,
                          reduce_precision, rem, round, RoundingMethod, rsqrt, shift_left, shift_right_arithmetic,
                          shift_right_logical, sign, sin, sinh, sqrt, square, stop_gradient, sub, tan, tanh)
from .loops import (cond, custom_linear_solve, custom_root, fori_loop, map, optimization_barrier,  # noqa: F401
                    scan, switch, while_loop)
from .reductions import (argmax, argmin, associative_scan, batch_matmul, cumlogsumexp, cummax, scaled_dot,  # noqa: F401
                         cummin, cumprod, cumsum, dot, dot_general, reduce, reduce_and, reduce_max,
                         reduce_min, reduce_or, reduce_prod, reduce_sum, reduce_xor, sort, sort_key_val, top_k)
from .shapes import (GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers,  # noqa: F401
                     broadcast, broadcast_in_dim, broadcast_shapes, broadcast_to_rank, broadcasted_iota,
                     collapse, concatenate, empty as _empty_scalar, expand_dims, full, full_like, gather,
                     index_in_dim, index_take, iota, pad, padtype_to_pads, reshape, rev, scatter, scatter_add,
                     scatter_apply, scatter_max, scatter_min, scatter_mul, scatter_sub, select, select_n, slice,
                     slice_in_dim, split, squeeze, transpose, zeros_like_array)
from .special import (bessel_i0e, bessel_i1e, betainc, igamma, igamma_grad_a, igammac,  # noqa: F401
                      random_gamma_grad, zeta)
from .windows import (ConvDimensionNumbers, conv, conv_dimension_numbers, conv_general_dilated,  # noqa: F401
                      conv_general_dilated_local, conv_general_dilated_patches, conv_general_permutations, conv_general_shape_tuple,
                      conv_shape_tuple, conv_transpose, conv_transpose_shape_tuple, conv_with_general_padding,
                      reduce_window, reduce_window_max_named, reduce_window_min_named,
                      reduce_window_shape_tuple, reduce_window_sum_named, select_and_gather_add,
                      select_and_scatter_add)
from . import primitives as _prims


# -- settings JAX takes for XLA's speed and rounding choices ---------------------------

class Precision(enum.Enum):
    """The `precision=` of products and convolutions. jitad always computes in the
    operands' own precision, which is `HIGHEST` (and what JAX does on a CPU for any value)."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2


class DotAlgorithmPreset(enum.Enum):
    """Named product algorithms (`precision=` of a product). jitad runs every product in
    the operands' precision: `DEFAULT` and the presets with that storage type agree."""
    DEFAULT = 0
    ANY_F8_ANY_F8_F32 = 1
    ANY_F8_ANY_F8_F32_FAST_ACCUM = 2
    ANY_F8_ANY_F8_ANY = 3
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = 4
    F16_F16_F16 = 5
    F16_F16_F32 = 6
    BF16_BF16_BF16 = 7
    BF16_BF16_F32 = 8
    BF16_BF16_F32_X3 = 9
    BF16_BF16_F32_X6 = 10
    BF16_BF16_F32_X9 = 11
    TF32_TF32_F32 = 12
    TF32_TF32_F32_X3 = 13
    F32_F32_F32 = 14
    F64_F64_F64 = 15


class DotAlgorithm:
    """A product algorithm by its storage and accumulation types (a `precision=` value)."""

    def __init__(self, lhs_precision_type, rhs_precision_type, accumulation_type, lhs_component_count=1,
                 rhs_component_count=1, num_primitive_operations=1, allow_imprecise_accumulation=False):
        self.lhs_precision_type, self.rhs_precision_type = lhs_precision_type, rhs_precision_type
        self.accumulation_type = accumulation_type


class AccuracyMode(enum.Enum):
    """The accuracy request of a transcendental function; jitad's are all accurate to
    about one unit in the last place."""
    DEFAULT = 0
    HIGHEST = 1


class Tolerance:
    """An accuracy tolerance (`atol`, `rtol`, `ulps`) for a transcendental function."""

    def __init__(self, atol=0.0, rtol=0.0, ulps=0):
        self.atol, self.rtol, self.ulps = atol, rtol, ulps


class RandomAlgorithm(enum.Enum):
    """XLA's random bit generators (for `rng_bit_generator`, which jitad declines)."""
    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2


class RaggedDotDimensionNumbers:
    """The layout of a ragged product: its dot dimension numbers and the group axes."""

    def __init__(self, dot_dimension_numbers, lhs_ragged_dimensions, rhs_group_dimensions):
        self.dot_dimension_numbers = dot_dimension_numbers
        self.lhs_ragged_dimensions = lhs_ragged_dimensions
        self.rhs_group_dimensions = rhs_group_dimensions


# -- small helpers of JAX's ---------------------------------------------------------

def dtype(x):
    """The NumPy dtype of `x` (Python scalars: float64, int64, bool as JAX with x64):
    `lax.dtype(1.0) == np.float64`."""
    return np.dtype(N.NUMPY_OF[result_dtype(x)])


def stack(operands, axis=0):
    """The operands stacked along a new `axis`: `lax.stack([x, y])`."""
    return N.stack(list(operands), axis)


def unstack(x, axis=0):
    """The slices of `x` along `axis`, as a tuple: `a, b = lax.unstack(x)`."""
    n = (x.shape if is_staged(x) else np.shape(x))[axis]
    return tuple(index_in_dim(x, i, axis, keepdims=False) for i in range(n))


def tile(operand, reps):
    """`operand` repeated `reps` times along each axis: `lax.tile(x, (2, 1))`."""
    return N.NUMPY_API["tile"](operand, tuple(reps))


def empty(shape, dtype, *, out_sharding=None):
    """An array of `shape` and `dtype` whose values do not matter (zeros in jitad)."""
    return np.zeros(shape, np.dtype(dtype) if np.dtype(dtype).kind not in "iu" else np.int64)


def broadcast_like(arr, like_arr):
    """`arr` broadcast to the shape of `like_arr`: `lax.broadcast_like(1.0, x)`."""
    shape = tuple(like_arr.shape) if is_staged(like_arr) else np.shape(like_arr)
    return N.broadcast_to(arr if is_staged(arr) else np.asarray(arr), shape)


def shape_as_value(shape):
    """`shape` as an int64 array: `lax.shape_as_value((2, 3))`."""
    return np.asarray(shape, np.int64)


def stage(x):
    """`x` unchanged (a staging boundary in JAX's explicit-sharding mode)."""
    return x


def with_sharding_constraint(x, shardings):
    """`x` unchanged: one CPU process holds every value whole."""
    return x


def dce_sink(val, *, prevent_mlir_dce=False):
    """Nothing (keeps `val` alive in JAX's dead-code elimination; jitad needs no hint)."""
    return None


class Token:
    """An ordering token of side effects (jitad runs a program's effects in order)."""

    def __repr__(self):
        return "Token"


def create_token(_=None):
    """A new ordering token."""
    return Token()


def after_all(*operands):
    """A token ordered after `operands` (all tokens)."""
    if not all(isinstance(t, Token) for t in operands):
        raise ArgumentError("`lax.after_all` takes tokens (from `lax.create_token`)")
    return Token()


def composite(decomposition, name, version=0):
    """`decomposition` itself, marked as one composite operation named `name` in JAX's
    lowering (a hint for XLA; jitad compiles the decomposition):
    `lax.composite(lambda x: x * 2, 'double')(3.0) == 6.0`."""
    def call(*args, **kwargs):
        return decomposition(*args, **kwargs)
    call.__name__, call.__doc__ = getattr(decomposition, "__name__", name), decomposition.__doc__
    return call


def platform_dependent(*args, default=None, **per_platform):
    """The `cpu` branch applied to `args` (jitad compiles for the CPU), else `default`:
    `lax.platform_dependent(x, cpu=f, default=g)` is `f(x)`."""
    branch = per_platform.get("cpu", default)
    if branch is None:
        raise ArgumentError(f"`lax.platform_dependent`: no `cpu=` branch and no `default=` among "
                            f"{sorted(per_platform)}")
    return branch(*args)


def mulhi(x, y):
    """The high 64 bits of the 128-bit product of two int64s: `lax.mulhi(2**62, 8) == 2`."""
    # split each operand into 32-bit halves (hi signed, lo unsigned) and add the partial
    # products with their carries, as in "Hacker's Delight" (section 8-2)
    mask = np.int64(0xFFFFFFFF)
    x0, x1 = bitwise_and(x, mask), shift_right_arithmetic(x, 32)
    y0, y1 = bitwise_and(y, mask), shift_right_arithmetic(y, 32)
    w0 = x0 * y0
    t = x1 * y0 + shift_right_logical(w0, 32)
    w1, w2 = bitwise_and(t, mask), shift_right_arithmetic(t, 32)
    w1 = x0 * y1 + w1
    return x1 * y1 + w2 + shift_right_arithmetic(w1, 32)


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None, group_offset=None,
               out_sharding=None):
    """Row blocks of `lhs` (m, k) times their group's matrix of `rhs` (g, k, n): the first
    `group_sizes[0]` rows with `rhs[0]`, and so on; rows past the groups give zeros."""
    if group_offset is not None:
        raise ArgumentError("`lax.ragged_dot`: group_offset is not supported by jitad; slice `rhs` instead")
    m, g = lhs.shape[0] if is_staged(lhs) else np.shape(lhs)[0], (rhs.shape if is_staged(rhs) else np.shape(rhs))[0]
    ends = N.NUMPY_API["cumsum"](group_sizes)
    rows = np.arange(m)
    out = None
    for i in range(g):
        start = 0 if i == 0 else ends[i - 1]
        inside = N.reshape((rows >= start) & (rows < ends[i]), (m, 1))
        part = N.where(inside, dot(lhs, rhs[i], preferred_element_type=preferred_element_type), 0)
        out = part if out is None else out + part
    return out


# -- collectives over named axes ----------------------------------------------------

from .parallel import (all_gather, all_to_all, axis_index, axis_size, pbroadcast, pcast, pmax, pmean,  # noqa: E402,F401
                       pmin, ppermute, pshuffle, psum, psum_scatter, pswapaxes)


def _declined(name, alternative):
    def fn(*args, **kwargs):
        raise ArgumentError(f"`lax.{name}` is not provided by jitad: {alternative}")
    fn.__name__ = name
    fn.__doc__ = f"Declined: {alternative}"
    return fn


precv = _declined("precv", "point-to-point sends between devices have no meaning in one jitad process; "
                           "use `lax.ppermute` inside `vmap(axis_name=...)`")
psend = _declined("psend", "see `precv`; use `lax.ppermute`")
ragged_all_to_all = _declined("ragged_all_to_all", "ragged exchanges between devices are not supported; use "
                                                   "`lax.all_to_all` with padded pieces")
rng_bit_generator = _declined("rng_bit_generator", "XLA's generator bits depend on the backend; draw with "
                                                   "`jitad.random.bits(key, shape)` (JAX's threefry bits)")
rng_uniform = _declined("rng_uniform", "XLA's stateful generator has no fixed values; draw with "
                                       "`jitad.random.uniform(key, shape, minval=a, maxval=b)`")
def approx_max_k(operand, k, reduction_dimension=-1, recall_target=0.95, reduction_input_size_override=-1,
                 aggregate_to_topk=True):
    """The `k` largest entries along `reduction_dimension` and their indices, computed
    exactly (JAX's approximate search agrees with the exact one on a CPU)."""
    return top_k(operand, k, axis=reduction_dimension)


def approx_min_k(operand, k, reduction_dimension=-1, recall_target=0.95, reduction_input_size_override=-1,
                 aggregate_to_topk=True):
    """The `k` smallest entries along `reduction_dimension` and their indices, computed exactly."""
    values, indices = top_k(-operand if is_staged(operand) else -np.asarray(operand), k, axis=reduction_dimension)
    return -values, indices


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None):
    """`ragged_dot` in its general form, for the plain layout ((1,), (1,)) contraction with
    lhs rows ragged and rhs groups on axis 0 (the layout `ragged_dot` uses)."""
    dn = ragged_dot_dimension_numbers
    if tuple(dn.lhs_ragged_dimensions) != (0,) or tuple(dn.rhs_group_dimensions) != (0,) \
            or tuple(builtins.map(tuple, dn.dot_dimension_numbers[0])) != ((1,), (1,)):
        raise ArgumentError("`lax.ragged_dot_general`: jitad supports the `ragged_dot` layout only "
                            "(lhs (m, k) ragged on axis 0, rhs (g, k, n)); use `lax.ragged_dot`")
    return ragged_dot(lhs, rhs, group_sizes, precision, preferred_element_type, group_offset)


# -- JAX's primitive objects ---------------------------------------------------------------

_P = _prims.Primitive
_UNARY = ("abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "ceil", "clz", "cos", "cosh",
          "digamma", "erf", "erf_inv", "erfc", "exp", "exp2", "expm1", "floor", "is_finite", "lgamma", "log",
          "log1p", "logistic", "neg", "population_count", "rsqrt", "sign", "sin", "sinh", "sqrt", "square",
          "tan", "tanh", "stop_gradient", "real", "imag", "conj", "bessel_i0e", "bessel_i1e")
_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "rem": "rem", "pow": "pow", "max": "max",
           "min": "min", "atan2": "atan2", "nextafter": "nextafter", "eq": "eq", "ne": "ne", "lt": "lt",
           "le": "le", "gt": "gt", "ge": "ge", "and": "bitwise_and", "or": "bitwise_or",
           "xor": "bitwise_xor", "shift_left": "shift_left", "shift_right_logical": "shift_right_logical",
           "shift_right_arithmetic": "shift_right_arithmetic", "polygamma": "polygamma", "igamma": "igamma",
           "igammac": "igammac", "igamma_grad_a": "igamma_grad_a", "random_gamma_grad": "random_gamma_grad",
           "zeta": "zeta", "mulhi": "mulhi", "eq_to": "eq", "le_to": "le", "lt_to": "lt"}


def real(x):
    """The real part (`x` itself for a real value): `lax.real(2.0) == 2.0`."""
    return _complex_parts(x)[0] if _is_complex(x) else x


def imag(x):
    """The imaginary part (zeros for a real value): `lax.imag(2.0) == 0.0`."""
    if _is_complex(x):
        return _complex_parts(x)[1]
    return N.zeros_like(x) if is_staged(x) else np.zeros_like(x)


def conj(x):
    """The complex conjugate (`x` itself for a real value): `lax.conj(2.0) == 2.0`."""
    return _complex_conj(x) if _is_complex(x) else x


def _p(name, fn, **kw):
    globals()[name + "_p"] = _P(name, fn, **kw)


for _name in _UNARY:
    _p(_name, globals()[_name])
for _name, _fn in _BINARY.items():
    _p(_name, globals()[_fn])
_p("not", bitwise_not)
_p("clamp", clamp)
_p("select_n", select_n)
_p("integer_pow", integer_pow)
_p("round", round)
_p("reduce_precision", reduce_precision)
_p("regularized_incomplete_beta", betainc)
_p("stage", stage)
_p("sharding_constraint", lambda x, **params: x)
_p("approx_top_k", lambda x, k, reduction_dimension, recall_target, is_max_k, reduction_input_size_override,
   aggregate_to_topk: (approx_max_k if is_max_k else approx_min_k)(x, k, reduction_dimension),
   multiple_results=True)
_p("convert_element_type", lambda x, new_dtype: convert_element_type(x, new_dtype))
_p("bitcast_convert_type", bitcast_convert_type)
_p("copy", lambda x: x + 0 if is_staged(x) else np.array(x, copy=True))
_p("device_put", lambda *xs: xs, multiple_results=True)
_p("optimization_barrier", lambda *xs: xs, multiple_results=True)
_p("broadcast_in_dim", broadcast_in_dim)
_p("reshape", reshape)
_p("squeeze", squeeze)
_p("rev", rev)
_p("transpose", transpose)
_p("pad", pad)
_p("slice", slice)
_p("concatenate", concatenate, adapt=_prims._variadic("dimension"))
_p("dynamic_slice", lambda x, *starts, slice_sizes: dynamic_slice(x, starts, slice_sizes))
_p("dynamic_update_slice", lambda x, u, *starts: dynamic_update_slice(x, u, starts))
_p("iota", lambda dtype, shape, dimension: broadcasted_iota(dtype, shape, dimension))
_p("split", split, multiple_results=True)
_p("tile", tile)
_p("stack", stack, adapt=_prims._variadic("axis"))
_p("unstack", unstack, multiple_results=True)
_p("gather", gather)
for _name in ("scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max", "scatter_sub"):
    _p(_name, globals()[_name])
_p("sort", lambda *ops, dimension, is_stable, num_keys: (sort(ops[0], dimension, is_stable, num_keys),)
   if len(ops) == 1 else sort(ops, dimension, is_stable, num_keys), multiple_results=True)
_p("top_k", top_k, multiple_results=True)
_p("argmax", lambda x, axes, index_dtype: argmax(x, axes[0], index_dtype))
_p("argmin", lambda x, axes, index_dtype: argmin(x, axes[0], index_dtype))
for _name in ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "reduce_xor"):
    _p(_name, globals()[_name])
_p("reduce", lambda *args, computation, dimensions: reduce(args[:len(args) // 2], args[len(args) // 2:],
                                                            lambda a, b: computation(*a, *b), dimensions)
   if len(args) > 2 else reduce(args[0], args[1], computation, dimensions))
for _name in ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"):
    _p(_name, globals()[_name])
_p("dot_general", dot_general)
_p("select_and_scatter_add", select_and_scatter_add)
_p("select_and_gather_add", select_and_gather_add)
_p("conv_general_dilated", conv_general_dilated)
for _name in ("reduce_window_sum", "reduce_window_max", "reduce_window_min"):
    _p(_name, globals()[_name + "_named"])
for _name, _alt in (("cond", "`lax.cond`"), ("while", "`lax.while_loop`"), ("scan", "`lax.scan`"),
                    ("select_and_scatter", "`lax.reduce_window` and its gradient"),
                    ("reduce_window", "`lax.reduce_window` with a Python function"),
                    ("linear_solve", "`lax.custom_linear_solve`")):
    globals()[_name + "_p"] = _prims.Declined(_name + "_p", _alt)
_p("psum", lambda x, axes, axis_index_groups=None: psum(x, axes))
_p("pmax", lambda x, axes, axis_index_groups=None: pmax(x, axes))
_p("pmin", lambda x, axes, axis_index_groups=None: pmin(x, axes))
_p("ppermute", lambda x, axis_name, perm: ppermute(x, axis_name, perm))
_p("axis_index", lambda axis_name: axis_index(axis_name))
_p("all_gather", lambda x, all_gather_dimension, axis_name, axis_index_groups, axis_size, tiled:  # noqa: F811 (JAX's parameter names)
   all_gather(x, axis_name, axis=all_gather_dimension, tiled=tiled))
_p("all_to_all", lambda x, split_axis, concat_axis, axis_name, axis_index_groups, tiled:
   all_to_all(x, axis_name, split_axis, concat_axis, tiled=tiled))
ragged_all_to_all_p = _prims.Declined("ragged_all_to_all_p", "`lax.all_to_all` with padded pieces")
for _name in ("rng_bit_generator", "rng_uniform"):
    globals()[_name + "_p"] = _prims.Declined(_name + "_p", "jitad.random")
after_all_p = _P("after_all", after_all)
create_token_p = _P("create_token", lambda *a: create_token())
dce_sink_p = _P("dce_sink", lambda *xs: [], multiple_results=True)
del _name, _fn
