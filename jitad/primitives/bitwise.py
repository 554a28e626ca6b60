"""Bit operations on 64-bit integers: exclusive or, the three shifts, population count and
leading-zero count (`jitad.lax`'s `bitwise_xor`, `shift_*`, `population_count`, `clz`).
A shift by a negative amount or by 64 or more gives what XLA gives: 0, or the sign bits
for the arithmetic right shift (LLVM's own shifts are undefined there, so the rules clamp)."""
import llvmlite.ir as ir
import numpy as np

from ..ir.ops import declare, elementwise_type, logical
from .rules import zero_gradient

BITS = 64
CHEAP = "elementwise cheap"


def _ints(rule):
    """A type rule for i64 operands only."""
    def check(op, types, attrs, bodies):
        assert all(t.dtype == "i64" for t in types), f"{op.name} takes int64 operands"
        return elementwise_type(op, types, attrs, bodies)
    return check


def _in_range(s):
    return (s >= 0) & (s < BITS)


def _np_shift_left(x, s):
    x, s = np.int64(x), np.int64(s)
    return np.int64(np.uint64(x.view(np.uint64)) << np.uint64(s)).view(np.int64) if _in_range(s) else np.int64(0)


def _np_shift_right_logical(x, s):
    x, s = np.int64(x), np.int64(s)
    return (x.view(np.uint64) >> np.uint64(s)).view(np.int64) if _in_range(s) else np.int64(0)


def _np_shift_right_arithmetic(x, s):
    x, s = np.int64(x), np.int64(s)
    return x >> (s if _in_range(s) else np.int64(BITS - 1))


def _np_popcount(x):
    return np.int64(bin(int(np.int64(x).view(np.uint64))).count("1"))


def _np_clz(x):
    return np.int64(BITS - int(np.int64(x).view(np.uint64)).bit_length())


def _elementwise(fn):
    """A scalar NumPy meaning mapped over arrays."""
    def impl(*args):
        out = np.vectorize(fn, otypes=[np.int64])(*args)
        return out[()] if out.ndim == 0 else out
    return impl


def _guarded(shift, fallback):
    """An LLVM shift with XLA's result where the amount is out of range."""
    def rule(lo, node, ins):
        x, s = ins
        ok = lo.b.icmp_unsigned("<", s, ir.Constant(s.type, BITS))
        return [lo.b.select(ok, getattr(lo.b, shift)(x, s), fallback(lo, x))]
    return rule


def _count(name):
    def rule(lo, node, ins):
        t = ins[0].type
        if name == "llvm.ctlz":   # its second operand: is zero poison? no (ctlz(0) is 64)
            fn = lo.module.declare_intrinsic(name, [t], ir.FunctionType(t, [t, ir.IntType(1)]))
            return [lo.b.call(fn, [ins[0], ir.Constant(ir.IntType(1), 0)])]
        return [lo.b.call(lo.module.declare_intrinsic(name, [t]), ins)]
    return rule


declare("xor", logical, np.bitwise_xor, arity=2, flags=CHEAP, vjp=zero_gradient,
        llvm=lambda lo, node, ins: [lo.b.xor(*ins)], cuda="({0} ^ {1})")
declare("shift_left", _ints(elementwise_type), _elementwise(_np_shift_left), arity=2, flags=CHEAP,
        vjp=zero_gradient, llvm=_guarded("shl", lambda lo, x: ir.Constant(x.type, 0)),
        cuda="(({0} << {1}) if 0 <= {1} < 64 else 0)")
declare("shift_right_logical", _ints(elementwise_type), _elementwise(_np_shift_right_logical), arity=2,
        flags=CHEAP, vjp=zero_gradient, llvm=_guarded("lshr", lambda lo, x: ir.Constant(x.type, 0)),
        cuda="(((({0} + (1 << 64)) % (1 << 64)) >> {1}) if 0 <= {1} < 64 else 0)")
declare("shift_right_arithmetic", _ints(elementwise_type), _elementwise(_np_shift_right_arithmetic), arity=2,
        flags=CHEAP, vjp=zero_gradient, llvm=_guarded("ashr", lambda lo, x: lo.b.ashr(x, ir.Constant(x.type, 63))),
        cuda="({0} >> ({1} if 0 <= {1} < 64 else 63))")
declare("population_count", _ints(elementwise_type), _elementwise(_np_popcount), arity=1, flags=CHEAP,
        vjp=zero_gradient, llvm=_count("llvm.ctpop"), cuda="bin({0} % (1 << 64)).count('1')")
declare("clz", _ints(elementwise_type), _elementwise(_np_clz), arity=1, flags=CHEAP,
        vjp=zero_gradient, llvm=_count("llvm.ctlz"), cuda="(64 - int({0} % (1 << 64)).bit_length())")


# -- bitcast: the bits of a float read as an integer and back --------------------------
# attrs: dtype (the result's), width (32: an f32 and the int32 or uint32 in an i64; 64:
# f64 and i64) and unsigned (a uint32 read zero-extends).

def _bitcast_rule(op, types, attrs, bodies):
    return [type(types[0])(attrs["dtype"], types[0].shape)]


def _bitcast_numpy(x, dtype, width, unsigned):
    x = np.asarray(x)
    if dtype == "i64":
        ints = x.astype(np.float32 if width == 32 else np.float64).view(
            (np.uint32 if unsigned else np.int32) if width == 32 else np.int64)
        return ints.astype(np.int64)[()]
    word = np.int32 if width == 32 else np.int64
    return x.astype(np.int64).astype(word).view(np.float32 if width == 32 else np.float64)[()]


def _bitcast_llvm(lo, node, ins):
    b, a = lo.b, node.attrs
    word = ir.IntType(a["width"])
    if a["dtype"] == "i64":
        bits = b.bitcast(ins[0], word)
        if a["width"] == 32:
            bits = b.zext(bits, ir.IntType(64)) if a["unsigned"] else b.sext(bits, ir.IntType(64))
        return [bits]
    bits = b.trunc(ins[0], word) if a["width"] == 32 else ins[0]
    return [b.bitcast(bits, ir.FloatType() if a["width"] == 32 else ir.DoubleType())]


declare("bitcast", _bitcast_rule, _bitcast_numpy, arity=1, flags=CHEAP, vjp=zero_gradient,
        llvm=_bitcast_llvm)
