"""Special functions: `lgamma` (libm's) and `polygamma(n, x)`, the n-th derivative of
digamma = lgamma'. polygamma's scalar algorithm is one plain Python function,
`polygamma_scalar`, run by every backend with its own meaning of `where`, `log`, `sin` and
`cos`: NumPy arrays (the NumPy meaning), LLVM values (the lowering) and numba on a GPU
(the CUDA helper `h_polygamma`)."""
import decimal
import math
import types

import numpy as np

from ..ir.ops import Op, declare, floating
# N: jitad.numeric, the staged math the derivative rules are written in (see rules.N)
from .rules import N, is_float

# B_2, B_4, ..., B_20: the Bernoulli numbers of the asymptotic series
BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798, -174611 / 330)
ROUND = 6755399441055744.0   # 1.5 * 2**52: (x + ROUND) - ROUND is x rounded to an integer (|x| < 2**51)


def polygamma_scalar(n, x):
    """psi^(n)(x) in float64, branch-free (`where` picks, both sides are computed).

    x >= 0: shift up by K = 10 + n with psi^(n)(x) = psi^(n)(x + K) + (-1)^(n+1) n! sum 1/(x+i)^(n+1),
    then the asymptotic series at z = x + K >= 10 + n (truncated below 1e-16 relative);
    near digamma's positive root, its Taylor series there.
    x < 0: reflection, psi(x) = psi(1 - x) - pi cot(pi x) and psi'(x) = pi^2 / sin^2(pi x) - psi'(1 - x);
    NaN for n >= 2; at the poles (0 and the negative integers) as SciPy's."""
    neg = x < 0.0
    y = where(neg, 1.0 - x, x)
    fact = 1.0   # n!
    for j in range(2, n + 1):
        fact = fact * j
    sign = 1.0 if n % 2 == 1 else -1.0   # (-1)^(n+1)
    s = 0.0
    for i in range(10 + n):
        t = 1.0 / (y + i) if i else 1.0 / y   # (y + 0 would lose the sign of -0.0)
        p = t
        for j in range(n):
            p = p * t
        s = s + p
    z = y + (10 + n)
    w = 1.0 / z
    zn = 1.0   # z^-n
    for j in range(n):
        zn = zn * w
    lead = log(z) if n == 0 else sign * (fact / n) * zn
    a = (fact * (n + 1) / 2.0) * zn * w * w   # (n+1)!/2! z^-(n+2)
    series = 0.0
    for k in range(1, len(BERNOULLI) + 1):
        series = series + BERNOULLI[k - 1] * a
        a = a * ((2 * k + n + 1) * (2 * k + n) / ((2 * k + 2) * (2 * k + 1))) * w * w
    right = lead + sign * (fact * s + fact * 0.5 * zn * w + series)
    if n >= 2:
        return where(neg, math.nan, right)
    r = x - ((x + ROUND) - ROUND)   # x less its nearest integer, in [-1/2, 1/2]
    r = where(abs(x) < 4503599627370496.0, r, 0.0)   # past 2**52 every float is an integer
    sn = sin(math.pi * r)
    if n == 0:
        d = (y - ROOT[0]) - ROOT[1]   # near the root, a Taylor series keeps the relative error small
        p = 0.0
        for k in range(len(ROOT_SERIES) - 1, -1, -1):
            p = (p + ROOT_SERIES[k]) * d
        right = where(abs(d) < 0.1, p, right)
        reflected = where(r == 0.0, math.nan, right - math.pi * cos(math.pi * r) / sn)
    else:
        reflected = where(r == 0.0, math.inf, math.pi * math.pi / (sn * sn) - right)
    return where(neg, reflected, right)


def backend(fn, **names):
    """`fn` with its global names (`where`, `log`, ...) read from `names` instead."""
    scope = dict(fn.__globals__, **names)
    return types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)


def _root():
    """digamma's positive root as a sum of two floats, and digamma's Taylor coefficients there
    (psi^(k)(root) / k!, from the series above: they need only n >= 1)."""
    root = decimal.Decimal("1.4616321449683623412626595423257213284681962040064463512959884085987864")
    hi = float(root)
    psi = backend(polygamma_scalar, where=np.where, log=np.log, sin=np.sin, cos=np.cos, ROOT=None, ROOT_SERIES=None)
    coefficients = [float(psi(k, np.float64(hi))) / math.factorial(k) for k in range(1, 17)]
    return (hi, float(root - decimal.Decimal(hi))), tuple(coefficients)


ROOT, ROOT_SERIES = _root()
_polygamma_np = backend(polygamma_scalar, where=np.where, log=np.log, sin=np.sin, cos=np.cos)


def _polygamma_impl(x, n):
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        return np.asarray(_polygamma_np(n, x.astype(np.float64)), dtype=x.dtype)[()]


class _Value:
    """A float64 LLVM value with Python's operators, to run `polygamma_scalar` on a builder."""

    def __init__(self, lo, v):
        self.lo, self.v = lo, v

    def _of(self, other):
        """`other` as an LLVM value of this value's type."""
        return other.v if isinstance(other, _Value) else self.v.type(float(other))

    def _op(name, swap=False):
        def fn(self, other):
            a, b = self.v, self._of(other)
            return _Value(self.lo, getattr(self.lo.b, name)(*((b, a) if swap else (a, b))))
        return fn

    __add__, __radd__ = _op("fadd"), _op("fadd", True)
    __sub__, __rsub__ = _op("fsub"), _op("fsub", True)
    __mul__, __rmul__ = _op("fmul"), _op("fmul", True)
    __truediv__, __rtruediv__ = _op("fdiv"), _op("fdiv", True)

    def _cmp(rel):
        return lambda self, other: _Value(self.lo, self.lo.b.fcmp_ordered(rel, self.v, self._of(other)))

    __lt__, __eq__ = _cmp("<"), _cmp("==")

    def __abs__(self):
        return self.call("llvm.fabs")

    def call(self, intrinsic):
        fn = self.lo.module.declare_intrinsic(intrinsic, [self.v.type])
        return _Value(self.lo, self.lo.b.call(fn, [self.v]))


def _llvm_where(c, a, b):
    v = a if isinstance(a, _Value) else b   # (one of them is a value)
    return _Value(c.lo, c.lo.b.select(c.v, v._of(a), v._of(b)))


_polygamma_llvm = backend(polygamma_scalar, where=_llvm_where, log=lambda x: x.call("llvm.log"),
                          sin=lambda x: x.call("llvm.sin"), cos=lambda x: x.call("llvm.cos"))


def _polygamma_rule(lo, node, ins):
    assert is_float(node)
    x = ins[0]
    out = _polygamma_llvm(node.attrs["n"], _Value(lo, lo.widen(x)))
    return [lo.narrow(out.v, x.type)]


def lgamma_impl(x):
    """log|Gamma(x)|, inf at the poles: SciPy's `gammaln` (vectorized: the interpreter runs
    it on whole arrays), in the argument's dtype."""
    import scipy.special   # (imported when first needed: jitad's import stays light)
    x = np.asarray(x)
    return np.asarray(scipy.special.gammaln(x), dtype=x.dtype)[()]


declare("lgamma", floating, lgamma_impl, arity=1, flags="elementwise float_only stored",
        vjp=lambda g, x, out: (g * N.bind(Op.POLYGAMMA, x, n=0),), llvm="lgamma", cuda="lgamma({0})",
        doc="log|Gamma(x)| (libm's; inf at the poles): `jitad.lgamma(1.0) == 0.0`.")
declare("polygamma", floating, _polygamma_impl, arity=1, flags="elementwise float_only stored",
        vjp=lambda g, x, out, n: (g * N.bind(Op.POLYGAMMA, x, n=n + 1),), llvm=_polygamma_rule,
        cuda="{t}(h_polygamma({n}, f64({0})))")
