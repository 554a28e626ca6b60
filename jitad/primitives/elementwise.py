"""The elementwise primitives: arithmetic, math functions, comparisons, logic, select
and convert. Each is one `declare`: type rule, NumPy meaning, VJP, LLVM scalar rule
(looped over tensors by the backend), CUDA element expression, flags and, for the
public ones, the docstring of `jitad.<name>`. Forward mode derives their JVPs from
the VJPs (the Jacobian is diagonal)."""
import math

import numpy as np

from ..ir.ops import Op, broadcast_shapes, comparison, convert_value, declare, elementwise_type, floating, logical
from ..ir.types import FLOATS, Type
# N: jitad.numeric, the staged math the derivative rules are written in (see rules.N)
from .rules import N, by_dtype, elementwise_vjp, impl_float, in_double, instruction, intrinsic, is_float, \
    zero_gradient


# -- integer semantics shared with the LLVM lowering: no traps, NumPy's results ----

def _int_floordiv(a, b):
    a, b = np.int64(a), np.int64(b)
    if b == 0:
        return np.int64(0)
    if b == -1:
        return np.int64(0) - a   # wraps for INT_MIN, never traps
    return np.floor_divide(a, b)


def _int_mod(a, b):
    a, b = np.int64(a), np.int64(b)
    if b == 0 or b == -1:
        return np.int64(0)
    return np.mod(a, b)


def _int_pow(a, b):
    a, b = np.int64(a), int(b)
    if b < 0:
        return np.int64(0)
    result = np.int64(1)
    while b:
        if b & 1:
            result = result * a
        a = a * a
        b >>= 1
    return result


def _pick(int_fn, float_fn):
    def impl(a, b):
        if isinstance(a, (np.integer, int)) and not isinstance(a, (bool, np.bool_)):
            return int_fn(a, b)
        return float_fn(a, b)
    return impl


def _float_or(int_form, float_form):
    """A CUDA expression by operand dtype."""
    return lambda a, t: (int_form if t == "i64" else float_form).format(*a)


# -- arithmetic --------------------------------------------------------------------

ARITH = "elementwise arith cheap"
declare("add", elementwise_type, np.add, arity=2, flags=ARITH, vjp=lambda g, x, y, out: (g, g),
        llvm=by_dtype(instruction("fadd"), instruction("add")), cuda="({0} + {1})")
declare("sub", elementwise_type, np.subtract, arity=2, flags=ARITH, vjp=lambda g, x, y, out: (g, -g),
        llvm=by_dtype(instruction("fsub"), instruction("sub")), cuda="({0} - {1})")
declare("mul", elementwise_type, np.multiply, arity=2, flags=ARITH, vjp=lambda g, x, y, out: (g * y, g * x),
        llvm=by_dtype(instruction("fmul"), instruction("mul")), cuda="({0} * {1})")
declare("div", floating, np.true_divide, arity=2, flags="elementwise arith float_only",
        vjp=lambda g, x, y, out: (g / y, -g * out / y), llvm=instruction("fdiv"), cuda="({0} / {1})")


def _extremum(rel):
    def rule(lo, node, ins):
        a, b = ins
        if not is_float(node):
            return [lo.b.select(lo.b.icmp_signed(rel, a, b), a, b)]
        pick_a = lo.b.or_(lo.b.fcmp_ordered(rel, a, b), lo.b.fcmp_unordered("uno", a, a))
        return [lo.b.select(pick_a, a, b)]   # NaN in either operand propagates, as NumPy
    return rule


def _extremum_vjp(g, x, y, out):
    """The operand equal to the result takes the cotangent; a tie splits it evenly (as
    JAX: the subgradient in the middle); a NaN result passes none back."""
    half = N.where(x == y, 0.5 * g, 0.0)
    return N.where(x == out, N.where(y == out, half, g), 0.0), N.where(y == out, N.where(x == out, half, g), 0.0)


declare("maximum", elementwise_type, np.maximum, arity=2, flags=ARITH, vjp=_extremum_vjp,
        llvm=_extremum(">="), cuda="h_max({0}, {1})",
        doc="Elementwise maximum, NaN propagating as NumPy: `jitad.maximum(1.0, 2.0) == 2.0`.")
declare("minimum", elementwise_type, np.minimum, arity=2, flags=ARITH, vjp=_extremum_vjp,
        llvm=_extremum("<="), cuda="h_min({0}, {1})",
        doc="Elementwise minimum, NaN propagating as NumPy: `jitad.minimum(1.0, 2.0) == 1.0`.")


def _pow_vjp(g, x, y, out):
    """d/dx x**y = y * x**(y-1), 0 at x == y == 0 (there the exponent reads 1: no 0 * inf);
    d/dy x**y = log(x) * x**y, 0 at x == 0 (log reads 1 there). The selects take only
    those points, so the rule's own derivatives stay right elsewhere (a select on y == 0
    alone would cut d/dy y * x**(y-1) = 1/x at y == 0). As JAX: a negative x with a
    differentiated y is NaN (log of a negative), with a constant y it is not."""
    zero = x == 0.0
    return g * y * x ** N.where(zero & (y == 0.0), 1.0, y - 1.0), g * out * N.log(N.where(zero, 1.0, x))


def _divmod(lo, node, ins):
    div, mod = lo.float_divmod(*ins) if is_float(node) else lo.int_divmod(*ins)
    return [div if node.op.name == "floordiv" else mod]


declare("pow", elementwise_type, _pick(_int_pow, np.power), arity=2, flags="elementwise arith", vjp=_pow_vjp,
        llvm=by_dtype(intrinsic("llvm.pow"), lambda lo, node, ins: [lo.int_pow(*ins)]),
        cuda=_float_or("h_ipow({0}, {1})", "power({0}, {1})"))
declare("mod", elementwise_type, _pick(_int_mod, np.mod), arity=2, flags="elementwise arith",
        vjp=lambda g, x, y, out: (g, -g * (x // y)), llvm=_divmod,
        cuda=_float_or("h_imod({0}, {1})", "h_fmod({0}, {1})"))
def _fmod_vjp(g, x, y, out):
    """d/dx = 1, d/dy = -trunc(x / y), as JAX (an infinite quotient stays infinite)."""
    q = x / y
    whole = N.abs(q)
    whole = N.where(whole < np.inf, whole // 1.0, whole)
    return g, -g * N.where(q < 0.0, -whole, whole)


declare("fmod", floating, np.fmod, arity=2, flags="elementwise float_only", vjp=_fmod_vjp,
        llvm="fmod", cuda="fmod({0}, {1})")   # libm's: exact, the sign of x, as C and NumPy
declare("floordiv", elementwise_type, _pick(_int_floordiv, np.floor_divide), arity=2, flags="elementwise arith",
        vjp=zero_gradient, llvm=_divmod, cuda=_float_or("h_ifloordiv({0}, {1})", "h_ffloordiv({0}, {1})"))


# -- one operand ---------------------------------------------------------------------

def _relu(lo, node, ins):
    x = ins[0]
    neg = lo.b.fcmp_ordered("<", x, x.type(0)) if is_float(node) else lo.b.icmp_signed("<", x, x.type(0))
    return [lo.b.select(neg, x.type(0), x)]


def _int_abs(lo, node, ins):
    x = ins[0]
    return [lo.b.select(lo.b.icmp_signed("<", x, x.type(0)), lo.b.neg(x), x)]


CHEAP = "elementwise cheap"
declare("neg", elementwise_type, np.negative, arity=1, flags=CHEAP, vjp=lambda g, x, out: (-g,),
        llvm=by_dtype(instruction("fneg"), instruction("neg")), cuda="(-{0})")
declare("abs", elementwise_type, np.abs, arity=1, flags=CHEAP, vjp=lambda g, x, out: (N.where(x >= 0.0, g, -g),),
        llvm=by_dtype(intrinsic("llvm.fabs"), _int_abs), cuda="abs({0})",
        doc="Absolute value: `jitad.abs(-2.0) == 2.0`.")
declare("square", elementwise_type, lambda x: x * x, arity=1, flags=CHEAP, vjp=lambda g, x, out: (2.0 * g * x,),
        llvm=lambda lo, node, ins: [(lo.b.fmul if is_float(node) else lo.b.mul)(ins[0], ins[0])],
        cuda="({0} * {0})", doc="x * x: `jitad.square(3.0) == 9.0`.")
declare("relu", elementwise_type, lambda x: np.where(x < 0, x.dtype.type(0), x)[()], arity=1, flags=CHEAP,
        vjp=lambda g, x, out: (N.where(x > 0.0, g, 0.0),), llvm=_relu, cuda="({t}(0) if {0} < {t}(0) else {0})",
        doc="max(x, 0), NaN propagating: `jitad.relu(-2.0) == 0.0`.")
declare("stop_gradient", elementwise_type, lambda x: x, arity=1, flags=CHEAP,
        vjp=zero_gradient, llvm=lambda lo, node, ins: [ins[0]], cuda="{0}",   # no cotangent, no tangent
        doc="x, as a constant to differentiation: "
            "`jitad.grad(lambda x: x * jitad.stop_gradient(x))(3.0) == 3.0`.")

MATH = "elementwise float_only stored"   # reverse mode keeps their (costly) results in loops
declare("exp", floating, np.exp, arity=1, flags=MATH, vjp=lambda g, x, out: (g * out,),
        llvm=lambda lo, node, ins: [lo.math("exp", ins[0])], cuda="exp({0})",   # vectorizable, in IR, in its type
        doc="e**x, elementwise: `jitad.exp(1.0) == 2.718281828459045`.")
declare("log", floating, np.log, arity=1, flags=MATH, vjp=lambda g, x, out: (g / x,),
        llvm=intrinsic("llvm.log"), cuda="log({0})",
        doc="Natural logarithm: `jitad.log(jitad.exp(2.0)) == 2.0`.")
declare("log1p", floating, np.log1p, arity=1, flags=MATH, vjp=lambda g, x, out: (g / (1.0 + x),),
        llvm="log1p", cuda="log1p({0})",
        doc="log(1 + x), accurate for small x: `jitad.log1p(1e-20) == 1e-20`.")
declare("expm1", floating, np.expm1, arity=1, flags=MATH, vjp=lambda g, x, out: (g * (out + 1.0),),
        llvm="expm1", cuda="expm1({0})",
        doc="exp(x) - 1, accurate for small x: `jitad.expm1(1e-20) == 1e-20`.")
declare("sqrt", floating, np.sqrt, arity=1, flags=MATH, vjp=lambda g, x, out: (g * 0.5 / out,),
        llvm=intrinsic("llvm.sqrt"), cuda="sqrt({0})", doc="Square root: `jitad.sqrt(4.0) == 2.0`.")
declare("sin", floating, np.sin, arity=1, flags=MATH, vjp=lambda g, x, out: (g * N.cos(x),),
        llvm=intrinsic("llvm.sin"), cuda="sin({0})", doc="Sine: `jitad.sin(0.0) == 0.0`.")
declare("cos", floating, np.cos, arity=1, flags=MATH, vjp=lambda g, x, out: (-g * N.sin(x),),
        llvm=intrinsic("llvm.cos"), cuda="cos({0})", doc="Cosine: `jitad.cos(0.0) == 1.0`.")
declare("tanh", floating, np.tanh, arity=1, flags=MATH, vjp=lambda g, x, out: (g * (1.0 - out * out),),
        llvm=lambda lo, node, ins: [lo.math("tanh", ins[0])], cuda="tanh({0})",
        doc="Hyperbolic tangent: `jitad.tanh(0.0) == 0.0`.")
declare("sigmoid", floating, lambda x: x.dtype.type(1) / (x.dtype.type(1) + np.exp(-x)), arity=1, flags=MATH,
        vjp=lambda g, x, out: (g * out * (1.0 - out),),
        llvm=in_double(lambda lo, x: lo.b.fdiv(x.type(1.0), lo.b.fadd(x.type(1.0), lo.math("exp", lo.b.fneg(x))))),
        cuda="({t}(1) / ({t}(1) + exp(-{0})))", doc="1 / (1 + exp(-x)): `jitad.sigmoid(0.0) == 0.5`.")
declare("cbrt", floating, np.cbrt, arity=1, flags=MATH, vjp=elementwise_vjp(lambda x, out: 1.0 / (3.0 * out * out)),
        llvm="cbrt", cuda="cbrt({0})")   # libm's (as JAX on the CPU: within 3 ulp); the derivative is inf at 0
declare("erf", floating, impl_float(math.erf), arity=1, flags=MATH,
        vjp=elementwise_vjp(lambda x, out: (2.0 / math.sqrt(math.pi)) * N.exp(-x * x)),
        llvm="erf", cuda="erf({0})", doc="The error function: `jitad.erf(0.0) == 0.0`.")
declare("erfc", floating, impl_float(math.erfc), arity=1, flags=MATH,
        vjp=elementwise_vjp(lambda x, out: (-2.0 / math.sqrt(math.pi)) * N.exp(-x * x)),
        llvm="erfc", cuda="erfc({0})",
        doc="1 - erf(x), accurate where erf(x) is near 1: `jitad.erfc(0.0) == 1.0`.")
declare("arcsin", floating, np.arcsin, arity=1, flags=MATH,
        vjp=elementwise_vjp(lambda x, out: 1.0 / N.sqrt(1.0 - x * x)), llvm="asin", cuda="asin({0})",
        doc="Inverse sine on [-1, 1] (NaN outside): `jitad.arcsin(1.0) == math.pi / 2`.")
declare("arccos", floating, np.arccos, arity=1, flags=MATH,
        vjp=elementwise_vjp(lambda x, out: -1.0 / N.sqrt(1.0 - x * x)), llvm="acos", cuda="acos({0})",
        doc="Inverse cosine on [-1, 1] (NaN outside): `jitad.arccos(1.0) == 0.0`.")
declare("arctan", floating, np.arctan, arity=1, flags=MATH,
        vjp=elementwise_vjp(lambda x, out: 1.0 / (1.0 + x * x)), llvm="atan", cuda="atan({0})",
        doc="Inverse tangent: `jitad.arctan(1.0) == math.pi / 4`.")

# libm's, exact where NumPy is (log2 of a power of two, exp2 of an integer) and overflowing where
# the result does (no public name: the NumPy-style functions in numpy_api call them)
declare("sinh", floating, np.sinh, arity=1, flags=MATH, vjp=lambda g, x, out: (g * N.bind(Op.COSH, x),),
        llvm="sinh", cuda="sinh({0})")
declare("cosh", floating, np.cosh, arity=1, flags=MATH, vjp=lambda g, x, out: (g * N.bind(Op.SINH, x),),
        llvm="cosh", cuda="cosh({0})")
def _via_double(fn):
    """NumPy's `fn`, float32 through float64 (as libm's exact results: NumPy's float32 exp2
    misses 2**127 and its float32 log10 misses 100 by an ulp)."""
    return lambda x: fn(x.astype(np.float64)).astype(x.dtype)[()] if x.dtype == np.float32 else fn(x)


declare("exp2", floating, _via_double(np.exp2), arity=1, flags=MATH, vjp=lambda g, x, out: (g * out * math.log(2.0),),
        llvm="exp2", cuda="power({t}(2), {0})")
declare("log2", floating, np.log2, arity=1, flags=MATH, vjp=lambda g, x, out: (g / (x * math.log(2.0)),),
        llvm="log2", cuda="log2({0})")
declare("log10", floating, _via_double(np.log10), arity=1, flags=MATH, vjp=lambda g, x, out: (g / (x * math.log(10.0)),),
        llvm="log10", cuda="log10({0})")


def _hypot_vjp(g, x, y, out):
    """d/dx = x / r, d/dy = y / r, computed on the arguments scaled by m = max(|x|, |y|)
    (r itself may be subnormal or infinite where x / r is not: 1 / sqrt(2) at x = y = 5e-324,
    (1, 0) at (inf, 1), the limits); (1/2, 1/2) at the origin, as JAX."""
    m = N.maximum(N.abs(x), N.abs(y))
    zero = m == 0.0
    m = N.where(zero, 1.0, m)

    def scaled(v):   # v / m, and +-1 at +-inf (not inf / inf; m drops out of the derivatives)
        return N.where(N.abs(v) == np.inf, N.where(v < 0.0, -1.0, 1.0), v / m)
    xs, ys = scaled(x), scaled(y)
    r = N.bind(Op.HYPOT, xs, ys)   # (between 1 and sqrt(2), or NaN)
    return g * N.where(zero, 0.5, xs / r), g * N.where(zero, 0.5, ys / r)


declare("hypot", floating, np.hypot, arity=2, flags=MATH, vjp=_hypot_vjp, llvm="hypot", cuda="hypot({0}, {1})")


def _arctan2_vjp(g, y, x, out):
    """d/dy = x / r², d/dx = -y / r², on y and x divided by the larger magnitude s (r² is
    s² (ys² + xs²)), so they stay exact where r² underflows or overflows (and are exact
    negatives of each other where x == y); 0 at the origin (JAX gives NaN) and where one
    argument is infinite (the limit; JAX: NaN)."""
    s = N.maximum(N.abs(x), N.abs(y))
    s = N.where(s == 0.0, 1.0, s)
    xs, ys = (N.where(N.abs(v) == np.inf, N.where(v > 0.0, 1.0, -1.0), v / s) for v in (x, y))
    d = (xs * xs + ys * ys) * s
    d = N.where(d == 0.0, 1.0, d)
    return g * (xs / d), g * -(ys / d)


declare("arctan2", floating, np.arctan2, arity=2, flags=MATH, vjp=_arctan2_vjp, llvm="atan2",
        cuda="atan2({0}, {1})",
        doc="The angle of the point (x, y), `arctan2(y, x)` in [-pi, pi]: `jitad.arctan2(1.0, -1.0) == 3 * math.pi / 4`.")


# -- comparisons and logic -----------------------------------------------------------

def _compare(rel):
    def rule(lo, node, ins):
        if node.inputs[0].type.dtype == "bool":   # i1: True is 1, not -1
            return [lo.b.icmp_unsigned(rel, *ins)]
        if not is_float(node):
            return [lo.b.icmp_signed(rel, *ins)]
        if rel == "!=":   # NaN != NaN is true
            return [lo.b.fcmp_unordered(rel, *ins)]
        return [lo.b.fcmp_ordered(rel, *ins)]
    return rule


for _name, _impl, _rel in [("lt", np.less, "<"), ("le", np.less_equal, "<="), ("gt", np.greater, ">"),
                           ("ge", np.greater_equal, ">="), ("eq", np.equal, "=="), ("ne", np.not_equal, "!=")]:
    declare(_name, comparison, _impl, arity=2, flags=CHEAP, llvm=_compare(_rel), cuda=f"({{0}} {_rel} {{1}})")
declare("and", logical, np.bitwise_and, arity=2, flags=CHEAP, llvm=instruction("and_"),
        cuda=lambda a, t: f"({a[0]} and {a[1]})" if t == "bool" else f"({a[0]} & {a[1]})")
declare("or", logical, np.bitwise_or, arity=2, flags=CHEAP, llvm=instruction("or_"),
        cuda=lambda a, t: f"({a[0]} or {a[1]})" if t == "bool" else f"({a[0]} | {a[1]})")
declare("not", logical, np.invert, arity=1, flags=CHEAP, llvm=instruction("not_"),
        cuda=lambda a, t: f"(not {a[0]})" if t == "bool" else f"(~{a[0]})")


def _select_rule(op, types, attrs, bodies):
    cond, a, b = types
    assert cond.dtype == "bool" and a.dtype == b.dtype
    return [Type(a.dtype, broadcast_shapes(op, cond.shape, a.shape, b.shape))]


declare("select", _select_rule, lambda c, a, b: np.where(c, a, b)[()], arity=3, flags=CHEAP,
        vjp=lambda g, c, x, y, out: (None, N.where(c, g, 0.0), N.where(c, 0.0, g)),
        llvm=instruction("select"), cuda="({1} if {0} else {2})")   # (the CUDA dtype: the operands')
declare("convert", lambda op, types, attrs, bodies: [Type(attrs["dtype"], types[0].shape)], convert_value,
        arity=1, flags=CHEAP, vjp=lambda g, x, out, dtype: (N.convert(g, x.ir_dtype) if x.ir_dtype in FLOATS else None,),
        llvm=lambda lo, node, ins: [lo.convert(ins[0], node.inputs[0].type.dtype, node.attrs["dtype"])])
