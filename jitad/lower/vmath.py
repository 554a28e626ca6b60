"""exp and tanh written in LLVM IR (no calls), so loops over them vectorize.

The process's libm is called one element at a time and this LLVM has no vector math
library; these follow Cephes' double-precision algorithms (peak relative error about
2e-16 over the whole range): range reduction by ln 2 and a Padé form for exp; a
rational function near zero and 1 - 2 / (exp(2|x|) + 1) elsewhere for tanh. Every
branch is computed and one is selected, which keeps loops branch-free.
"""
import llvmlite.ir as ir

F64, I64 = ir.DoubleType(), ir.IntType(64)
EXP_P = (1.26177193074810590878e-4, 3.02994407707441961300e-2, 9.99999999999999999910e-1)
EXP_Q = (3.00198505138664455042e-6, 2.52448340349684104192e-3, 2.27265548208155028766e-1,
         2.00000000000000000009e0)
LN2_HI, LN2_LO = 6.93145751953125e-1, 1.42860682030941723212e-6
MAXLOG, MINLOG = 7.09782712893383996843e2, -7.45133219101941108420e2
TANH_P = (-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3)
TANH_Q = (1.0, 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3)


def _poly(b, x, coeffs):
    acc = F64(coeffs[0])
    for c in coeffs[1:]:
        acc = b.fadd(b.fmul(acc, x), F64(c))
    return acc


def _pow2(b, n):
    """2.0**n for integer n in [-1022, 1023], from the exponent bits."""
    return b.bitcast(b.shl(b.add(n, I64(1023)), I64(52)), F64)


def exp(b, module, x):
    floor = module.declare_intrinsic("llvm.floor", [F64])
    k = b.call(floor, [b.fadd(b.fmul(x, F64(1.4426950408889634073599)), F64(0.5))])
    r = b.fsub(b.fsub(x, b.fmul(k, F64(LN2_HI))), b.fmul(k, F64(LN2_LO)))
    rr = b.fmul(r, r)
    px = b.fmul(r, _poly(b, rr, EXP_P))
    e = b.fadd(F64(1.0), b.fmul(F64(2.0), b.fdiv(px, b.fsub(_poly(b, rr, EXP_Q), px))))
    clamped = b.select(b.fcmp_ordered("<", k, F64(-2000.0)), F64(-2000.0),
                       b.select(b.fcmp_ordered(">", k, F64(2000.0)), F64(2000.0), k))
    n = b.fptosi(b.select(b.fcmp_unordered("uno", k, k), F64(0.0), clamped), I64)
    half = b.ashr(n, I64(1))   # two steps keep each factor a normal number (subnormal results)
    e = b.fmul(b.fmul(e, _pow2(b, half)), _pow2(b, b.sub(n, half)))
    e = b.select(b.fcmp_ordered(">", x, F64(MAXLOG)), F64(float("inf")), e)
    e = b.select(b.fcmp_ordered("<", x, F64(MINLOG)), F64(0.0), e)
    return b.select(b.fcmp_unordered("uno", x, x), x, e)


def tanh(b, module, x):
    fabs = module.declare_intrinsic("llvm.fabs", [F64])
    copysign = module.globals.get("llvm.copysign.f64") or ir.Function(
        module, ir.FunctionType(F64, [F64, F64]), name="llvm.copysign.f64")
    z = b.call(fabs, [x])
    s = exp(b, module, b.fmul(F64(2.0), b.select(b.fcmp_ordered(">", z, F64(40.0)), F64(40.0), z)))
    far = b.call(copysign, [b.fsub(F64(1.0), b.fdiv(F64(2.0), b.fadd(s, F64(1.0)))), x])
    xx = b.fmul(x, x)
    near = b.fadd(x, b.fmul(b.fmul(x, xx), b.fdiv(_poly(b, xx, TANH_P), _poly(b, xx, TANH_Q))))
    return b.select(b.fcmp_ordered(">=", z, F64(0.625)), far, near)   # NaN takes `near`: NaN
