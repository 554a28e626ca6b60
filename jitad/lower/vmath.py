"""exp and tanh written in LLVM IR (no calls), so loops over them vectorize.

The process's libm is called one element at a time and this LLVM has no vector math
library. Both reduce the argument by ln 2 (y = k ln 2 + r, |r| <= ln 2 / 2) and take
e^r - 1 from its Taylor polynomial, evaluated with fused multiply-adds: no division for
exp and one for tanh = (e^2|x| - 1) / (e^2|x| + 1). Every branch is computed and one is
selected, which keeps loops branch-free.

Each works in its operand's own type, so a float32 loop runs twice the lanes of a double
one: a double takes the polynomial to degree 13 (truncation below 1e-17 relative; exp 1
ulp against a 40-digit reference, tanh 3 ulp), a float to degree 7 (below 1e-9; within
2 ulp of the correctly rounded float, `tests/lowering/test_elementwise_ulp.py`).
"""
import math

import llvmlite.ir as ir

F32, F64, I32, I64 = ir.FloatType(), ir.DoubleType(), ir.IntType(32), ir.IntType(64)


class _Kind:
    """The constants of one float type: its Taylor degree, ln 2 split so that k ln2_hi is
    exact, the range where exp neither overflows nor underflows to 0, and its bits."""

    def __init__(self, degree, ln2_hi, ln2_lo, maxlog, minlog, int_type, mantissa, bias, k_clamp, tanh_clip):
        self.taylor = tuple(1.0 / math.factorial(n + 1) for n in range(degree))   # (e^r - 1) / r = sum c_n r^n
        self.ln2_hi, self.ln2_lo, self.maxlog, self.minlog = ln2_hi, ln2_lo, maxlog, minlog
        self.int_type, self.mantissa, self.bias = int_type, mantissa, bias
        self.k_clamp, self.tanh_clip = k_clamp, tanh_clip


KINDS = {
    F64: _Kind(13, 6.93145751953125e-1, 1.42860682030941723212e-6, 7.09782712893383996843e2,
               -7.45133219101941108420e2, I64, 52, 1023, 2000.0, 40.0),
    # ln2_hi has 9 significant bits: k ln2_hi is exact for |k| < 2^15
    F32: _Kind(8, 0.693359375, -2.12194440e-4, 88.72283935546875, -103.972084045410, I32, 23, 127, 200.0, 20.0),
}


def _declared(module, name, t, arg_count):
    """A float-valued intrinsic llvmlite's `declare_intrinsic` types wrongly."""
    return module.globals.get(name) or ir.Function(module, ir.FunctionType(t, [t] * arg_count), name=name)


def _suffix(t):
    return "f32" if t == F32 else "f64"


def _expm1_reduced(b, module, y):
    """(k, e^r - 1) with y = k ln 2 + r: k as a float, nearest to y / ln 2."""
    t = y.type
    kind = KINDS[t]
    floor = module.declare_intrinsic("llvm.floor", [t])
    fma = _declared(module, f"llvm.fmuladd.{_suffix(t)}", t, 3)
    k = b.call(floor, [b.fadd(b.fmul(y, t(1.4426950408889634073599)), t(0.5))])
    r = b.fsub(b.fsub(y, b.fmul(k, t(kind.ln2_hi))), b.fmul(k, t(kind.ln2_lo)))
    return k, b.fmul(_estrin(b, fma, r, [t(c) for c in kind.taylor]), r)


def _estrin(b, fma, x, coeffs):
    """sum coeffs[n] x^n by Estrin's scheme: pairs c0 + c1 x, then pairs of those with x^2,
    with x^4, ...: a dependency chain of log2(degree) multiply-adds instead of Horner's
    degree (a loop over this then keeps many elements in flight)."""
    power = x
    while len(coeffs) > 1:
        coeffs = [b.call(fma, [hi, power, lo]) for lo, hi in zip(coeffs[::2], coeffs[1::2])] \
            + coeffs[len(coeffs) - len(coeffs) % 2:]
        power = b.fmul(power, power)
    return coeffs[0]


def _pow2(b, n, t):
    """2.0**n in type `t` for an integer n (of `t`'s integer width) in its normal exponent range."""
    kind = KINDS[t]
    it = kind.int_type
    return b.bitcast(b.shl(b.add(n, it(kind.bias)), it(kind.mantissa)), t)


def exp(b, module, x):
    t = x.type
    kind = KINDS[t]
    it = kind.int_type
    k, em1 = _expm1_reduced(b, module, x)
    e = b.fadd(em1, t(1.0))
    clamp = t(kind.k_clamp)
    clamped = b.select(b.fcmp_ordered("<", k, b.fneg(clamp)), b.fneg(clamp),
                       b.select(b.fcmp_ordered(">", k, clamp), clamp, k))
    n = b.fptosi(b.select(b.fcmp_unordered("uno", k, k), t(0.0), clamped), it)
    half = b.ashr(n, it(1))   # two steps keep each factor a normal number (subnormal results)
    e = b.fmul(b.fmul(e, _pow2(b, half, t)), _pow2(b, b.sub(n, half), t))
    e = b.select(b.fcmp_ordered(">", x, t(kind.maxlog)), t(float("inf")), e)
    e = b.select(b.fcmp_ordered("<", x, t(kind.minlog)), t(0.0), e)
    return b.select(b.fcmp_unordered("uno", x, x), x, e)


# tanh(x) = x + x u Q(u), u = x^2, for float |x| < TANH32_SMALL: Q fitted by least squares on
# Chebyshev nodes, weighted for relative error (0.05 ulp); the quotient below loses 2-3 ulp there
TANH32_SMALL = 0.625
TANH32_Q = (-0.3333333134651184, 0.13333211839199066, -0.05394745245575905, 0.021703999489545822,
            -0.008184662088751793, 0.0021489840000867844)


def tanh(b, module, x):
    """sign(x) (e^y - 1) / (e^y + 1) with y = 2 min(|x|, clip), e^y - 1 = 2^k (e^r - 1) + 2^k - 1
    (no cancellation near 0; 2^k stays a normal number); a float near 0 takes `TANH32_Q`."""
    t = x.type
    kind = KINDS[t]
    fabs = module.declare_intrinsic("llvm.fabs", [t])
    copysign = _declared(module, f"llvm.copysign.{_suffix(t)}", t, 2)
    z = b.call(fabs, [x])
    y = b.fmul(t(2.0), b.select(b.fcmp_ordered(">", z, t(kind.tanh_clip)), t(kind.tanh_clip), z))
    k, em1 = _expm1_reduced(b, module, y)
    scale = _pow2(b, b.fptosi(b.select(b.fcmp_unordered("uno", k, k), t(0.0), k), kind.int_type), t)
    em1 = b.fadd(b.fmul(scale, em1), b.fsub(scale, t(1.0)))
    out = b.call(copysign, [b.fdiv(em1, b.fadd(em1, t(2.0))), x])
    if t == F32:
        fma = _declared(module, "llvm.fmuladd.f32", t, 3)
        u = b.fmul(x, x)
        small = b.call(fma, [b.fmul(z, u), _estrin(b, fma, u, [t(c) for c in TANH32_Q]), z])
        out = b.select(b.fcmp_ordered("<", z, t(TANH32_SMALL)), b.call(copysign, [small, x]), out)
    return b.select(b.fcmp_unordered("uno", x, x), x, out)
