"""`lax`'s elementwise operations: arithmetic with C's integer division, rounding, powers,
math functions, comparisons, bit operations and dtype conversions."""
import enum
import math

import numpy as np

from .. import numeric as N
from .. import numpy as jnp
from ..config import x64_enabled
from ..dtypes import narrowed
from ..transforms.custom import custom_jvp
from ..errors import ArgumentError
from ..ir.ops import Op
from ..ir.types import FLOATS
from ..numeric import (abs, cos, erf, erfc, exp, expm1, lgamma, log, log1p, polygamma, sin,  # noqa: F401
                       sqrt, square, tanh, stop_gradient)
from ..numeric import maximum as max, minimum as min  # noqa: F401
from ..numpy import (arccos as acos, arccosh as acosh, arcsin as asin, arcsinh as asinh,  # noqa: F401
                         arctan as atan, arctan2 as atan2, arctanh as atanh, cbrt, ceil, cosh, exp2, floor,
                         sign, sinh, tan)
from ..staging import is_staged, result_dtype
from ..staging.values import by_squaring


def _dtype(x):
    return result_dtype(x)


def _is_int(x):
    return _dtype(x) == "i64"


def _float(x):
    return x if _dtype(x) in FLOATS else N.convert(x, "f64")


def add(x, y):
    """x + y: `lax.add(1.0, 2.0) == 3.0`."""
    return x + y


def sub(x, y):
    """x - y: `lax.sub(1.0, 2.0) == -1.0`."""
    return x - y


def mul(x, y):
    """x * y: `lax.mul(2.0, 3.0) == 6.0`."""
    return x * y


def neg(x):
    """-x: `lax.neg(2.0) == -2.0`."""
    return -x


def _trunc_div(x, y):
    """Integer x / y rounded toward zero (C's division); x / 0 is -1, as XLA's."""
    safe = N.where(y == 0, 1, y)
    q = x // safe
    fix = (x - q * safe != 0) & ((x < 0) != (safe < 0))
    q = N.where(fix, q + 1, q)
    return N.where(y == 0, -1, q)


def div(x, y):
    """x / y; for integers rounded toward zero as C (not Python's floor):
    `lax.div(-7, 2) == -3`."""
    if _is_int(x) and _is_int(y):
        return _trunc_div(x, y)
    return x / y


def rem(x, y):
    """The remainder of `div`, with the sign of x (C's fmod): `lax.rem(-7, 2) == -1`."""
    if _is_int(x) and _is_int(y):
        return N.where(y == 0, x, x - _trunc_div(x, y) * y)
    r = jnp.fmod(x, y)
    r = N.where(jnp.isinf(y) & jnp.isfinite(x), x, r)   # a finite x is its own remainder by ±inf
    return N.where(r == 0, x * 0.0, r)                   # a zero remainder has x's sign


def reciprocal(x):
    """1 / x: `lax.reciprocal(4.0) == 0.25`."""
    return 1.0 / _float(x)


def pow(x, y):
    """x ** y (a float base; an integer exponent array is allowed, as JAX):
    `lax.pow(2.0, 3.0) == 8.0`."""
    return jnp.power(x, y)


def integer_pow(x, y):
    """x ** y for a static Python int y (products; negative y gives 1 / x ** -y):
    `lax.integer_pow(3.0, 2) == 9.0`."""
    if not isinstance(y, (int, np.integer)):
        raise ArgumentError(f"`lax.integer_pow`: the exponent must be a Python int, got {type(y).__name__}; "
                            "use `lax.pow` for an array exponent")
    y = int(y)
    if _dtype(x) == "bool" or (y < 0 and _is_int(x)):
        raise ArgumentError(f"`lax.integer_pow`: {_dtype(x)} to the power {y} is not defined (as in JAX): "
                            "convert the base to a float first (`x.astype(float)`)")
    if y == 0:
        return N.ones_like(x) if is_staged(x) else np.ones_like(x)
    return by_squaring(x if y > 0 else 1.0 / _float(x), abs(y), lambda a, b: a * b)


def rsqrt(x):
    """1 / sqrt(x), with JAX's derivative -0.5 * rsqrt(x) / x (-inf at -0.0, as 1 / x
    there): `lax.rsqrt(4.0) == 0.5`."""
    return _rsqrt(_float(x))


@custom_jvp
def _rsqrt(x):
    return 1.0 / N.sqrt(x)


@_rsqrt.defjvp
def _rsqrt_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    out = _rsqrt(x)
    return out, t * (-0.5 * out / x)


def logistic(x):
    """1 / (1 + exp(-x)): `lax.logistic(0.0) == 0.5`."""
    return N.sigmoid(_float(x))


def digamma(x):
    """The logarithmic derivative of the gamma function (NaN at its poles 0, -1, ..., as
    JAX): `lax.digamma(1.0) == -0.5772156649015329`."""
    x = _float(x)
    return N.where(x == 0, np.nan, N.digamma(x))


def is_finite(x):
    """True where x is neither infinite nor NaN: `lax.is_finite(np.inf) == False`."""
    return jnp.isfinite(x)


def clamp(min, x, max):  # noqa: F811 (JAX's parameter names)
    """x limited to [min, max] (note the order of the arguments, as JAX):
    `lax.clamp(0.0, 5.0, 1.0) == 1.0`."""
    return N.minimum(N.maximum(x, min), max)


class RoundingMethod(enum.IntEnum):
    """How `lax.round` treats halves: away from zero (JAX's default) or to even."""
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
    """x rounded to the nearest integer, halves away from zero unless
    `rounding_method=RoundingMethod.TO_NEAREST_EVEN`: `lax.round(2.5) == 3.0`."""
    method = RoundingMethod(rounding_method)
    if method == RoundingMethod.TO_NEAREST_EVEN:
        return jnp.round(x)
    a = N.abs(x)
    f = jnp.floor(a)
    r = N.where(a - f >= 0.5, f + 1.0, f)
    return N.where(x < 0, -r, N.where(x == 0, x, r))   # -0.0 stays -0.0


def _erf_inv_value(y):
    """erf^-1(y): Giles' single-precision approximation, then two Newton steps on erf."""
    w = -N.log((1.0 - y) * (1.0 + y))
    small = w < 5.0
    ws = N.where(small, w - 2.5, N.sqrt(N.where(small, 5.0, w)) - 3.0)
    coef_small = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                  -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
    coef_big = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)
    p = N.where(small, coef_small[0], coef_big[0])
    for a, b in zip(coef_small[1:], coef_big[1:]):
        p = N.where(small, a, b) + p * ws
    x = p * y
    for _ in range(2):
        x = x - (N.erf(x) - y) / ((2.0 / math.sqrt(math.pi)) * N.exp(-x * x))
    x = N.where(N.abs(y) == 1.0, y * np.inf, x)
    return N.where(N.abs(y) > 1.0, np.nan, x)


@custom_jvp
def _erf_inv(y):
    return _erf_inv_value(y)


@_erf_inv.defjvp
def _erf_inv_jvp(primals, tangents):
    (y,), (t,) = primals, tangents
    x = _erf_inv(y)
    return x, t * (math.sqrt(math.pi) / 2.0) * N.exp(x * x)


def erf_inv(x):
    """The inverse of erf on (-1, 1) (±inf at ±1, NaN outside): `lax.erf_inv(0.0) == 0.0`."""
    return _erf_inv(_float(x))


def nextafter(x1, x2):
    """The next float after x1 toward x2 (x2 when equal, NaN with a NaN):
    `lax.nextafter(1.0, 2.0) == 1.0 + 2**-52`."""
    x1, x2 = jnp.broadcast_arrays(_float(x1), _float(x2)) if not (is_staged(x1) or is_staged(x2)) \
        else (x1, x2)
    dtype = _dtype(x1)
    tiny = float(np.finfo(N.NUMPY_OF[dtype]).smallest_subnormal)
    bits = bitcast_convert_type(x1, np.int64 if dtype == "f64" else np.int32)
    step = N.where((x1 < x2) == (x1 > 0), 1, -1)
    moved = bitcast_convert_type(bits + step, N.NUMPY_OF[dtype])
    out = N.where(x1 == 0, N.where(x2 > 0, tiny, -tiny), moved)
    out = N.where(x1 == x2, x2, out)
    return N.where((x1 != x1) | (x2 != x2), x1 + x2, out)


# -- comparisons and bits -----------------------------------------------------------

def eq(x, y):
    """x == y: `lax.eq(1.0, 1.0)`."""
    return x == y


def ne(x, y):
    """x != y: `lax.ne(1.0, 2.0)`."""
    return x != y


def lt(x, y):
    """x < y: `lax.lt(1.0, 2.0)`."""
    return x < y


def le(x, y):
    """x <= y: `lax.le(1.0, 1.0)`."""
    return x <= y


def gt(x, y):
    """x > y: `lax.gt(2.0, 1.0)`."""
    return x > y


def ge(x, y):
    """x >= y: `lax.ge(1.0, 1.0)`."""
    return x >= y


def _bits_operand(x, who):
    if _dtype(x) in FLOATS:
        raise ArgumentError(f"`lax.{who}` takes integers or booleans, got {_dtype(x)}; convert with "
                            "`lax.convert_element_type` or reinterpret with `lax.bitcast_convert_type`")


def _bind_bits(op, who, *xs):
    for x in xs:
        _bits_operand(x, who)
    narrow = getattr(xs[0], "dtype", None)
    if any(map(is_staged, xs)) or narrow is None or narrow.kind not in "iu" or narrow.itemsize == 8:
        return N.bind(op, *[N.convert(x, "i64") for x in xs])
    # a plain int32 (or narrower) array: its own width's bits, as JAX (staged code has int64 only)
    bits = 8 * narrow.itemsize
    first = np.asarray(xs[0]).astype(np.int64)
    if op in (Op.SHIFT_RIGHT_LOGICAL, Op.POPULATION_COUNT, Op.CLZ):
        first = first & ((1 << bits) - 1)   # zero-extended: no copies of the sign bit
    out = np.asarray(N.bind(op, first, *[np.asarray(y).astype(np.int64) for y in xs[1:]]))
    return (out - (64 - bits) if op == Op.CLZ else out).astype(narrow)


def bitwise_and(x, y):
    """Bitwise (for booleans logical) and: `lax.bitwise_and(6, 3) == 2`."""
    _bits_operand(x, "bitwise_and"), _bits_operand(y, "bitwise_and")
    return x & y


def bitwise_or(x, y):
    """Bitwise (for booleans logical) or: `lax.bitwise_or(6, 3) == 7`."""
    _bits_operand(x, "bitwise_or"), _bits_operand(y, "bitwise_or")
    return x | y


def bitwise_not(x):
    """Bitwise (for booleans logical) not: `lax.bitwise_not(0) == -1`."""
    _bits_operand(x, "bitwise_not")
    return ~x


def bitwise_xor(x, y):
    """Bitwise (for booleans logical) exclusive or: `lax.bitwise_xor(6, 3) == 5`."""
    if _dtype(x) == "bool" and _dtype(y) == "bool":
        return x != y
    return _bind_bits(Op.XOR, "bitwise_xor", x, y)


def shift_left(x, y):
    """x shifted left by y bits (0 for y outside [0, 64)): `lax.shift_left(1, 3) == 8`."""
    return _bind_bits(Op.SHIFT_LEFT, "shift_left", x, y)


def _bits32(op, who, x, *rest):
    """`op` on an int's 32 bits where `jax_enable_x64` is off (ints are int32 then; the IR's
    are 64 bits wide): on them as a non-negative int64, the result as int32 (clz counts
    from bit 31); None where the setting is on."""
    if x64_enabled():
        return None
    _bits_operand(x, who)
    x = x if is_staged(x) else np.asarray(x, np.int64)
    out = _bind_bits(op, who, N.convert(x, "i64") & 0xFFFFFFFF, *rest)
    if op == Op.CLZ:
        out = out - 32
    out = N.where(out >= 2 ** 31, out - 2 ** 32, out)
    return out if is_staged(out) else narrowed(out)


def shift_right_logical(x, y):
    """x shifted right by y bits, zeros in from the left: `lax.shift_right_logical(8, 3) == 1`."""
    out = _bits32(Op.SHIFT_RIGHT_LOGICAL, "shift_right_logical", x, y)
    return _bind_bits(Op.SHIFT_RIGHT_LOGICAL, "shift_right_logical", x, y) if out is None else out


def shift_right_arithmetic(x, y):
    """x shifted right by y bits, copies of the sign bit in from the left:
    `lax.shift_right_arithmetic(-8, 1) == -4`."""
    return _bind_bits(Op.SHIFT_RIGHT_ARITHMETIC, "shift_right_arithmetic", x, y)


def population_count(x):
    """The number of 1 bits of each 64-bit integer (32-bit where `jax_enable_x64` is off):
    `lax.population_count(7) == 3`."""
    out = _bits32(Op.POPULATION_COUNT, "population_count", x)
    return _bind_bits(Op.POPULATION_COUNT, "population_count", x) if out is None else out


def clz(x):
    """The number of leading 0 bits of each 64-bit integer (32-bit where `jax_enable_x64` is
    off): `lax.clz(1) == 63`."""
    out = _bits32(Op.CLZ, "clz", x)
    return _bind_bits(Op.CLZ, "clz", x) if out is None else out


# -- dtypes ---------------------------------------------------------------------------

def convert_element_type(operand, new_dtype):
    """`operand` as `new_dtype` (floats to ints round toward zero):
    `lax.convert_element_type(2.7, np.int64) == 2`."""
    d = np.dtype(new_dtype)
    name = "bool" if d == np.bool_ else "i64" if d.kind in "iu" else "f32" if d == np.float32 else "f64"
    if d.kind == "c":
        raise ArgumentError("`lax.convert_element_type`: complex dtypes are not supported by jitad")
    return N.convert(operand, d if d.name in ("int32", "int64") else name)   # (int32 where x64 is off)


def bitcast_convert_type(operand, new_dtype):
    """The bits of each element read as `new_dtype` of the same width (float64 <-> int64,
    float32 <-> int32/uint32): `lax.bitcast_convert_type(1.0, np.int64) == 0x3FF0000000000000`."""
    new = np.dtype(new_dtype)
    old = np.dtype(N.NUMPY_OF[_dtype(operand)]) if _dtype(operand) != "i64" or is_staged(operand) \
        else np.asarray(operand).dtype
    if not is_staged(operand):
        return np.asarray(operand).astype(old).view(new)[()] if old.itemsize == new.itemsize else \
            _width_error(old, new)
    if _dtype(operand) == "f32" and new.kind in "iu" and new.itemsize == 4:
        return N.bind(Op.BITCAST, operand, dtype="i64", width=32, unsigned=new.kind == "u")
    if _dtype(operand) == "f64" and new.kind in "iu" and new.itemsize == 8:
        return N.bind(Op.BITCAST, operand, dtype="i64", width=64, unsigned=False)
    if _dtype(operand) == "i64" and new in (np.float32, np.float64):
        return N.bind(Op.BITCAST, operand, dtype="f32" if new == np.float32 else "f64",
                      width=new.itemsize * 8, unsigned=False)
    if _dtype(operand) == "i64" and new.kind in "iu":
        return operand
    return _width_error(np.dtype(N.NUMPY_OF[_dtype(operand)]), new)


def _width_error(old, new):
    raise ArgumentError(f"`lax.bitcast_convert_type`: {old} to {new} changes the element width; "
                        "jitad reinterprets between types of the same width only")


def reduce_precision(operand, exponent_bits, mantissa_bits):
    """`operand` rounded (to nearest, ties to even) to a float with `exponent_bits` and
    `mantissa_bits`, kept in its own dtype; overflow gives ±inf and underflow ±0, as XLA:
    `lax.reduce_precision(x, 8, 7)` is x rounded to bfloat16."""
    x = _float(operand)
    wide = _dtype(x) == "f64"
    mant, expo = (52, 11) if wide else (23, 8)
    if not (0 <= mantissa_bits and 1 <= exponent_bits):
        raise ArgumentError(f"`lax.reduce_precision`: exponent_bits={exponent_bits}, mantissa_bits={mantissa_bits}; "
                            "give at least 1 exponent bit and 0 or more mantissa bits")
    bits = bitcast_convert_type(x, np.int64 if wide else np.int32)
    if mantissa_bits < mant:
        last = 1 << (mant - mantissa_bits)                 # the lowest mantissa bit kept
        kept_lsb = shift_right_logical(bits & last, mant - mantissa_bits)
        bits = (bits + (kept_lsb + (last >> 1) - 1)) & ~(last - 1)
    if exponent_bits < expo:
        sign, exp_mask = np.int64(-1) << (mant + expo), ((1 << expo) - 1) << mant
        bias, reduced = (1 << (expo - 1)) - 1, (1 << (exponent_bits - 1)) - 1
        exponent = bits & exp_mask
        signed_zero = bits & sign
        bits = N.where(exponent > ((bias + reduced) << mant), signed_zero | exp_mask,
                       N.where(exponent <= ((bias - reduced) << mant), signed_zero, bits))
    out = bitcast_convert_type(bits, N.NUMPY_OF[_dtype(x)])
    return N.where(x != x, x, out)   # NaN stays NaN
