"""Second derivatives under every nesting of the two modes, on random programs.

Hypothesis writes the source of a random scalar function `f(x, y)` (arithmetic, `**`
with int, integer-valued float, fractional and staged exponents, exp, log and sqrt of
positive values, sin, tanh, `where` and `IF` on comparisons, `FOR`/`WHILE` loops and
`FUN` calls), and one
compiled program computes d²f/dx² four ways: rev∘rev (grad of grad), rev∘fwd (grad of
a jvp's tangent), fwd∘rev (jvp of grad) and fwd∘fwd (jvp of a jvp's tangent). `y` is a
staged input held fixed (its tangent is zero), so operands that carry no derivative
are staged values too. The four must agree with each other, and with central
differences of the first derivative; the first derivatives (grad and jvp) with central
differences of `f`. A failing example prints a program that can be pasted and rerun.
"""
import math

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import jitad
from jitad import FOR, FUN, IF, WHILE

NESTINGS = ("rev∘rev", "rev∘fwd", "fwd∘rev", "fwd∘fwd")
FUNCTIONS = ["jitad.sin", "jitad.tanh", "jitad.exp"]
POSITIVE = ["(1.0 + {a} * {a})", "(2.0 + jitad.sin({a}))", "(0.5 + jitad.exp(jitad.tanh({a})))"]


class Gen:
    """Draws the source text of one expression over the names in scope."""

    def __init__(self, draw):
        self.draw, self.loops = draw, 2

    def pick(self, options):
        return self.draw(st.sampled_from(options))

    def expr(self, depth, scope):
        kinds = ["var", "var", "const"]
        if depth > 0:
            kinds += ["arith"] * 4 + ["pow"] * 3 + ["fn"] * 2 + ["log", "sqrt", "div", "where", "if"]
            kinds += ["for", "while", "fun"] if self.loops > 0 else []
        return getattr(self, "_" + self.pick(kinds))(depth - 1, scope)

    def positive(self, depth, scope):
        return self.pick(POSITIVE).format(a=self.expr(depth, scope))

    def _var(self, depth, scope):
        return self.pick(scope)

    def _const(self, depth, scope):
        return self.pick(["0.5", "(-1.5)", "2.0", "0.0"])

    def _arith(self, depth, scope):
        return f"({self.expr(depth, scope)} {self.pick(['+', '-', '*'])} {self.expr(depth, scope)})"

    def _div(self, depth, scope):
        return f"({self.expr(depth, scope)} / {self.positive(depth, scope)})"

    def _pow(self, depth, scope):
        kind = self.pick(["int", "int", "integral float", "negative int", "fraction", "staged"])
        if kind == "int":             # any base, negative ones included
            return f"({self.expr(depth, scope)} ** {self.pick(['0', '1', '2', '3', '4'])})"
        if kind == "integral float":
            return f"({self.expr(depth, scope)} ** {self.pick(['0.0', '2.0', '3.0'])})"
        if kind == "negative int":
            return f"({self.positive(depth, scope)} ** {self.pick(['-1', '-2'])})"
        if kind == "fraction":
            return f"({self.positive(depth, scope)} ** {self.pick(['0.5', '1.5', '2.5', '0.0'])})"
        return f"({self.positive(depth, scope)} ** jitad.tanh({self.expr(depth, scope)}))"

    def _fn(self, depth, scope):
        return f"{self.pick(FUNCTIONS)}({self.expr(depth, scope)})"

    def _log(self, depth, scope):
        return f"jitad.log({self.positive(depth, scope)})"

    def _sqrt(self, depth, scope):
        return f"jitad.sqrt({self.positive(depth, scope)})"

    def compare(self, depth, scope):
        return f"({self.expr(depth, scope)} {self.pick(['<', '>='])} {self.expr(depth, scope)})"

    def _where(self, depth, scope):
        return f"jitad.where({self.compare(depth, scope)}, {self.expr(depth, scope)}, {self.expr(depth, scope)})"

    def _if(self, depth, scope):
        return (f"IF({self.compare(depth, scope)}, lambda: {self.expr(depth, scope)}, "
                f"lambda: {self.expr(depth, scope)})")

    def _for(self, depth, scope):
        self.loops -= 1
        s = f"s{self.loops}"
        body = self.expr(depth, scope + [s, s])   # the state is drawn more often
        return f"FOR(0, {self.pick(['0', '1', '3'])}, lambda i, {s}: jitad.tanh({body}), {self.expr(depth, scope)})"

    def _while(self, depth, scope):
        self.loops -= 1
        s = f"s{self.loops}"
        body = self.expr(depth, scope + [f"{s}[1]"] * 2)
        return (f"WHILE(lambda {s}: {s}[0] < {self.pick(['1', '2'])}, lambda {s}: ({s}[0] + 1, jitad.tanh({body})), "
                f"(0, {self.expr(depth, scope)}))[1]")

    def _fun(self, depth, scope):
        self.loops -= 1
        u = f"u{self.loops}"
        return f"FUN(lambda {u}: {self.expr(depth, scope + [u, u])})({self.expr(depth, scope)})"


@st.composite
def programs(draw):
    return "lambda x, y: " + Gen(draw).expr(draw(st.integers(1, 4)), ["x", "x", "y"])


def derivatives(f):
    """One compiled program: f, its first derivative in x by each mode, and its second
    by each nesting (y held fixed)."""
    d_fwd = lambda x, y: jitad.jvp(f, (x, y), (1.0, 0.0))[1]
    d_rev = jitad.grad(f)

    def all_of(x, y):
        return (f(x, y), d_rev(x, y), d_fwd(x, y),
                jitad.grad(d_rev)(x, y), jitad.grad(d_fwd)(x, y),
                jitad.jvp(d_rev, (x, y), (1.0, 0.0))[1], jitad.jvp(d_fwd, (x, y), (1.0, 0.0))[1])
    return jitad.jit(all_of)


def smooth_slope(fn, x, scale, h=1e-6):
    """The slope of `fn` at x by central differences, or None where the one-sided slopes
    differ: a switching point of a `where`/`IF` (a kink) lies within h of x. (A kink at
    x ± h itself leaves both sides on one smooth piece.)"""
    left, right = (fn(x) - fn(x - h)) / h, (fn(x + h) - fn(x)) / h
    if not (math.isfinite(left) and math.isfinite(right)) or not close(left, right, scale, 1e-5):
        return None
    return (left + right) / 2


def close(a, b, scale, rtol):
    return abs(a - b) <= rtol * (1.0 + scale)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs(), st.sampled_from([0.0, 1.0, -1.0, -2.5]) | st.floats(-2.0, 2.0), st.floats(-2.0, 2.0))
def test_second_derivatives_agree_under_all_nestings(source, x, y):
    f = eval(source, {"jitad": jitad, "IF": IF, "FOR": FOR, "WHILE": WHILE, "FUN": FUN})
    run = derivatives(f)
    value, d_rev, d_fwd, *second = run(x, y)
    assume(all(math.isfinite(v) and abs(v) < 1e6 for v in (value, d_rev, d_fwd)))   # a moderate f
    # the scale of the tolerances; f'' enters the kink test (one-sided slopes differ by
    # about h f''), by its smallest value so that a wrong, huge one cannot loosen a check
    scale = max(abs(value), abs(d_rev), abs(d_fwd))
    fd1 = smooth_slope(lambda t: run(t, y)[0], x, scale + min(abs(v) if math.isfinite(v) else 0 for v in second))
    assume(fd1 is not None)
    assert close(d_rev, d_fwd, scale, 1e-10), (source, x, y, d_rev, d_fwd)
    assert close(d_rev, fd1, scale, 1e-5), (source, x, y, d_rev, fd1)
    fd2 = smooth_slope(lambda t: run(t, y)[1], x, scale)
    assume(fd2 is not None)
    scale = max(scale, abs(fd2))
    for name, v in zip(NESTINGS, second):
        assert close(v, second[0], scale, 1e-9), (source, x, y, name, v, dict(zip(NESTINGS, second)))
        assert close(v, fd2, scale, 1e-5), (source, x, y, name, v, fd2)
