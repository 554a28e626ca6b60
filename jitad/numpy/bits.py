"""Bitwise operations on ints and bools, and the float-format functions (`frexp`,
`ldexp`, `modf`, `nextafter`, `spacing`, `copysign`, `signbit`) of `jitad.numpy`, from
integer and float arithmetic (jitad's staged ints are int64)."""
import numpy as np

from .. import numeric as N
from ..errors import ArgumentError
from ..numpy_api import _float, exp2
from ..staging import result_dtype
from ._common import jnp as _jnp, any_staged, wrap

__all__ = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_invert", "invert",
           "bitwise_left_shift", "bitwise_right_shift", "left_shift", "right_shift", "bitwise_count",
           "copysign", "signbit", "frexp", "ldexp", "modf", "nextafter", "spacing", "gcd", "lcm", "heaviside"]


def _ints(who, *xs):
    jnp = _jnp()
    xs = [jnp.asarray(x) for x in xs]
    kind = jnp.result_type(*xs).kind
    if kind not in "biu":
        raise ArgumentError(f"`jnp.{who}` takes int or bool operands, got {jnp.result_type(*xs)}")
    return xs


def _binary(name, staged):
    def fn(x1, x2, /):
        if not any_staged(x1, x2):
            return wrap(np.asarray(getattr(np, name)(x1, x2)))
        return staged(*_ints(name, x1, x2))
    fn.__name__ = fn.__qualname__ = name
    return fn


bitwise_and = _binary("bitwise_and", lambda a, b: a & b)
bitwise_and.__doc__ = "Bitwise and of ints (logical and of bools): `jnp.bitwise_and(12, 10) == 8`."
bitwise_or = _binary("bitwise_or", lambda a, b: a | b)
bitwise_or.__doc__ = "Bitwise or of ints (logical or of bools): `jnp.bitwise_or(12, 10) == 14`."
bitwise_xor = _binary("bitwise_xor", lambda a, b: (a | b) & ~(a & b))
bitwise_xor.__doc__ = "Bitwise exclusive or of ints (bools): `jnp.bitwise_xor(12, 10) == 6`."


def bitwise_not(x, /):
    """Bitwise not (`~x`: -x - 1 for ints, logical not for bools): `jnp.bitwise_not(0) == -1`."""
    if not any_staged(x):
        return wrap(np.asarray(np.invert(x)))
    return ~_ints("bitwise_not", x)[0]


bitwise_invert = invert = bitwise_not

_MIN = np.int64(np.iinfo(np.int64).min)


def _pow2(b):
    """2**b for int64 0 <= b <= 62 (clipped), as an int64."""
    return N.convert(exp2(N.convert(N.clip(b, 0, 62), "f64")), "i64")


def _left(a, b):
    a, b = _ints("left_shift", a, b)
    shifted = a * _pow2(b) * N.where(b == 63, np.int64(2), np.int64(1))
    return N.where((b < 0) | (b >= 64), np.int64(0), shifted)


def _right(a, b):
    a, b = _ints("right_shift", a, b)
    sign = N.where(a < 0, np.int64(-1), np.int64(0))
    return N.where((b < 0) | (b >= 63), sign, a // _pow2(b))


left_shift = bitwise_left_shift = _binary("left_shift", _left)
left_shift.__doc__ = "`x1` shifted left by `x2` bits (int64 wraps; 0 from 64 bits on): `jnp.left_shift(1, 3) == 8`."
right_shift = bitwise_right_shift = _binary("right_shift", _right)
right_shift.__doc__ = "`x1` shifted right by `x2` bits, the sign kept: `jnp.right_shift(-8, 2) == -2`."


def bitwise_count(x, /):
    """The number of 1 bits in `|x|`: `jnp.bitwise_count(7) == 3`."""
    if not any_staged(x):
        return wrap(np.asarray(np.bitwise_count(x)))
    (x,) = _ints("bitwise_count", x)
    if x.dtype == np.bool_:
        return N.convert(x, "i64")
    v = N.where(x == _MIN, np.int64(0), abs(x))
    count = N.convert(x == _MIN, "i64")
    for _ in range(63):
        count = count + v % 2
        v = v // 2
    return count


def signbit(x, /):
    """True where the sign bit of `x` is set (-0.0 included): `jnp.signbit(-0.0)`."""
    jnp = _jnp()
    if not any_staged(x):
        return wrap(np.asarray(np.signbit(x)))
    x = jnp.asarray(x)
    if x.dtype.kind != "f":
        return x < 0
    return (x < 0) | ((x == 0) & (1.0 / N.where(x == 0, x, 1.0) < 0))


def copysign(x1, x2, /):
    """`|x1|` with the sign of `x2`: `jnp.copysign(1.0, -0.0) == -1.0`."""
    jnp = _jnp()
    if not any_staged(x1, x2):
        return wrap(np.asarray(np.copysign(x1, x2)))
    x1 = x1 if isinstance(x1, (int, float)) else _float(jnp.asarray(x1))   # Python numbers stay weakly typed
    x2 = jnp.asarray(x2)
    dtype = result_dtype(x1, x2)
    dtype = dtype if dtype in ("f32", "f64") else "f64"
    return N.convert(N.where(signbit(x2), -abs(x1), abs(x1)), dtype)


def _exp2_int(e):
    """2.0**e for an int64 `e` in [-1100, 1100], exact (two factors, no overflow on the way)."""
    h = e // 2
    return exp2(N.convert(h, "f64")) * exp2(N.convert(e - h, "f64"))


def _scaled(x, e):
    """x * 2**e for int64 `e`, in two steps (neither factor overflows)."""
    h = e // 2
    return x * exp2(N.convert(h, "f64")) * exp2(N.convert(e - h, "f64"))


def frexp(x, /):
    """`(m, e)` with `x == m * 2**e` and 0.5 <= |m| < 1 (0, inf and NaN give themselves and 0):
    `jnp.frexp(8.0)` is `(0.5, 4)`."""
    jnp = _jnp()
    if not any_staged(x):
        m, e = np.frexp(x)
        return wrap(np.asarray(m)), wrap(np.asarray(e, np.int64))
    x = _float(jnp.asarray(x))
    special = (x == 0) | ~jnp.isfinite(x)
    ax = N.where(special, 1.0, abs(x))
    e = N.convert(jnp.floor(jnp.log2(ax)), "i64") + 1
    for _ in range(2):   # log2's rounding: move e until 0.5 <= |m| < 1
        m = _scaled(ax, -e)
        e = e + N.where(m >= 1.0, np.int64(1), np.int64(0)) - N.where(m < 0.5, np.int64(1), np.int64(0))
    m = N.where(special, x, N.where(x < 0, -1.0, 1.0) * _scaled(ax, -e))
    return N.convert(m, x.ir_dtype), N.where(special, np.int64(0), e)


def ldexp(x1, x2, /):
    """`x1 * 2**x2` (`x2` ints): `jnp.ldexp(0.5, 4) == 8.0`."""
    jnp = _jnp()
    if not any_staged(x1, x2):
        return wrap(np.asarray(np.ldexp(x1, x2)))
    x1 = _float(jnp.asarray(x1))
    x2 = jnp.asarray(x2)
    if x2.dtype.kind not in "biu":
        raise ArgumentError(f"`jnp.ldexp`: the exponents must be ints, got {x2.dtype}")
    e = N.clip(N.convert(x2, "i64"), -2200, 2200)
    h = e // 2
    return _scaled(_scaled(x1, h), e - h)


def modf(x, /, out=None):
    """`(fractional part, integral part)`, both with `x`'s sign: `jnp.modf(-2.5)` is `(-0.5, -2.0)`."""
    jnp = _jnp()
    if out is not None:
        raise ArgumentError("`jnp.modf`: out= is not supported; use the returned pair")
    if not any_staged(x):
        f, i = np.modf(x)
        return wrap(np.asarray(f)), wrap(np.asarray(i))
    x = _float(jnp.asarray(x))
    whole = jnp.trunc(x)
    frac = N.where(jnp.isinf(x), copysign(0.0, x), x - whole)
    return copysign(frac, x), whole


def _ulp_bits(dtype):
    return (53, -1074) if dtype == np.float64 else (24, -149)


def nextafter(x1, x2, /):
    """The next representable float after `x1` toward `x2`: `jnp.nextafter(1.0, 2.0) - 1.0 == jnp.finfo(float).eps`."""
    jnp = _jnp()
    if not any_staged(x1, x2):
        return wrap(np.asarray(np.nextafter(x1, x2)))
    x1, x2 = jnp.asarray(x1), jnp.asarray(x2)
    dt = jnp.result_type(x1, x2)
    dt = dt if dt.kind == "f" else np.dtype(np.float64)
    x1, x2 = N.convert(x1, dt.name), N.convert(x2, dt.name)
    bits, tiny_e = _ulp_bits(dt)
    m, e = frexp(x1)
    up = x2 > x1   # toward +inf
    away = up == (x1 > 0)   # the magnitude grows
    step_e = N.maximum(e - bits, tiny_e)
    shrink_at_power = (abs(m) == 0.5) & ~away
    step_e = N.maximum(step_e - N.where(shrink_at_power, np.int64(1), np.int64(0)), tiny_e)
    step = N.convert(_exp2_int(step_e), dt.name)
    moved = x1 + N.where(up, step, -step)
    tiny = N.convert(_exp2_int(np.int64(tiny_e)), dt.name)
    moved = N.where(x1 == 0, N.where(up, tiny, -tiny), moved)
    moved = N.where(jnp.isinf(x1), N.where(up == (x1 > 0), x1, N.where(x1 > 0, jnp.finfo(dt).max,
                                                                         -jnp.finfo(dt).max)), moved)
    out = N.where(x1 == x2, x2, moved)
    return N.where(jnp.isnan(x1) | jnp.isnan(x2), np.nan, out)


def spacing(x, /):
    """The distance from `x` to the next float away from zero (negative for negative `x`):
    `jnp.spacing(1.0) == jnp.finfo(float).eps`."""
    jnp = _jnp()
    if not any_staged(x):
        return wrap(np.asarray(np.spacing(x)))
    x = _float(jnp.asarray(x))
    away = N.convert(N.where(signbit(x), -np.inf, np.inf), x.ir_dtype)
    return nextafter(x, away) - x


_GCD_STEPS = 93   # Euclid on int64 ends within the Fibonacci bound


def gcd(x1, x2, /):
    """The greatest common divisor of ints (non-negative; gcd(0, 0) == 0): `jnp.gcd(12, 18) == 6`."""
    if not any_staged(x1, x2):
        return wrap(np.asarray(np.gcd(x1, x2)))
    a, b = _ints("gcd", x1, x2)
    a, b = abs(N.convert(a, "i64")), abs(N.convert(b, "i64"))
    a, b = a + 0 * b, b + 0 * a
    for _ in range(_GCD_STEPS):
        zero = b == 0
        a, b = N.where(zero, a, b), N.where(zero, b, a % N.where(zero, np.int64(1), b))
    return a


def lcm(x1, x2, /):
    """The least common multiple of ints (0 when either is 0): `jnp.lcm(4, 6) == 12`."""
    if not any_staged(x1, x2):
        return wrap(np.asarray(np.lcm(x1, x2)))
    a, b = _ints("lcm", x1, x2)
    g = gcd(a, b)
    return N.where(g == 0, np.int64(0), abs(a // N.where(g == 0, np.int64(1), g) * b))


def heaviside(x1, x2, /):
    """The step function: 0 below zero, 1 above, `x2` at zero (NaN stays NaN):
    `jnp.heaviside(0.0, 0.5) == 0.5`."""
    jnp = _jnp()
    if not any_staged(x1, x2):
        return wrap(np.asarray(np.heaviside(x1, x2)))
    x1 = _float(jnp.asarray(x1))
    x2 = x2 if isinstance(x2, (int, float)) else jnp.asarray(x2)   # Python numbers stay weakly typed
    dtype = result_dtype(x1, x2)
    dtype = dtype if dtype in ("f32", "f64") else "f64"
    out = N.where(x1 < 0, 0.0, N.where(x1 > 0, 1.0, x2 * 1.0))
    return N.convert(N.where(jnp.isnan(x1), np.nan, out), dtype)
