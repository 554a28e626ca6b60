"""Random staged scalar programs: the compiled code must agree with the reference
interpreter (`jitad.ir.interpret`) on every input.

Hypothesis builds the *source text* of a Python function from a random typed
expression tree -- arithmetic on f64 and i64, comparisons, `& | ~`, the math
functions, `where`, `IF`, `WHILE` (a counter that strictly increases toward a small
bound), `FOR` with small bounds, `FUN` and bounded recursive `FUN`s, nested -- so a
failing example prints a program that can be pasted into a file and rerun.

Floats must agree within a relative 1e-12 (or both be NaN, or the same infinity).
NumPy's exp/log/pow/... may differ from libm's by an ulp, and an ulp can flip a later
comparison; so when the NumPy reference disagrees, the same interpreter is rerun with
those functions taken from libm (what the compiled code calls), and that must agree.
"""
import ctypes
import ctypes.util
import math
import os
import textwrap
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jitad
from jitad import FOR, FUN, IF, WHILE
from jitad.ir.interpret import interpret
from jitad.ir.ops import IMPLS, Op
from jitad.ir.passes import run_passes

INT_MIN, INT_MAX = -2**63, 2**63 - 1
PARAMS = (("x", "f64"), ("y", "f64"), ("n", "i64"), ("m", "i64"), ("p", "bool"))
RTOL = 1e-12

# Bugs the generator steers around until they are fixed, each with a strict xfail test
# at the end of this file; when one starts passing, delete its name here.
KNOWN_BUGS = set()

CONSTS = {
    "f64": ["0.0", "(-0.0)", "0.5", "1.0", "2.0", "(-1.5)", "3.0", "10.0", "1e-300", "1e300",
            "float('inf')", "(-float('inf'))", "float('nan')"],
    "i64": ["0", "1", "(-1)", "2", "3", "7", "(-7)", "64", str(INT_MAX), f"({INT_MIN})"],
    "bool": ["True", "False"],
}
LIBM_FUNCTIONS = ["exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tanh", "sigmoid",
                  "erf", "erfc", "arcsin", "arccos", "arctan"]
# NumPy-breadth functions built from primitives: the interpreter runs their expansion
COMPOSITES = ["sinh", "cosh", "tan", "floor", "ceil", "trunc", "round", "log2", "log10", "exp2",
              "sign"]
FLOAT_OPS = ["+", "-", "*", "/", "%", "//", "**"]
INT_OPS = ["+", "-", "*", "//", "%", "**", "&", "|"]
COMPARISONS = ["<", "<=", ">", ">=", "==", "!="]
COMPOUND = {   # repeated names are drawn more often
    "f64": ["arith"] * 4 + ["math"] * 3 + ["extremum", "where", "convert"],
    "i64": ["arith"] * 4 + ["int_unary", "extremum", "where", "convert"],
    "bool": ["compare"] * 3 + ["logic"] * 2 + ["where", "convert"],
}
LOOPS = ["while", "for", "fun", "rec"]   # costlier: at most 3 per program
EXAMPLE = {"f64": "0.0", "i64": "0", "bool": "False"}


class ProgramGen:
    """Draws one random program; `expr` returns (source, staged) where `staged` is
    False only if the value is certainly a plain Python/NumPy constant (Python's own
    operators on two constants would not go through jitad, so operators need one
    staged operand)."""

    def __init__(self, draw, control):
        self.draw, self.control = draw, control
        self.defs = []          # recursive FUN helpers, defined before `return`
        self.counter = 0
        self.loop_budget = 3 if control else 0

    def fresh(self, stem):
        self.counter += 1
        return f"{stem}{self.counter}"

    def pick(self, options):
        return self.draw(st.sampled_from(options))

    def expr(self, ty, depth, scope):
        kinds = ["var", "var", "const"]
        if depth > 0:
            kinds += COMPOUND[ty] + (["if"] if self.control else [])
            if self.loop_budget > 0:
                kinds += LOOPS
        kind = self.pick(kinds)
        if kind in LOOPS:
            self.loop_budget -= 1
        return getattr(self, "_" + kind)(ty, depth - 1, scope)

    def staged_pair(self, ta, tb, depth, scope):
        a, sa = self.expr(ta, depth, scope)
        b, sb = self.expr(tb, depth, scope)
        if not (sa or sb):
            b, _ = self._var(tb, depth, scope)
        return a, b

    def staged(self, ty, depth, scope):
        a, sa = self.expr(ty, depth, scope)
        return a if sa else self._var(ty, depth, scope)[0]

    # -- leaves ---------------------------------------------------------------------
    def _var(self, ty, depth, scope):
        return self.pick([name for name, t in scope if t == ty]), True

    def _const(self, ty, depth, scope):
        return self.pick(CONSTS[ty]), False

    # -- arithmetic, logic, functions ----------------------------------------------
    def _arith(self, ty, depth, scope):
        if ty == "i64":
            op, types = self.pick(INT_OPS), ("i64", "i64")
        else:
            op = self.pick(FLOAT_OPS)
            pairs = [("f64", "f64"), ("f64", "i64"), ("i64", "f64")] + ([("i64", "i64")] if op == "/" else [])
            types = self.pick(pairs)
        a, b = self.staged_pair(*types, depth, scope)
        return f"({a} {op} {b})", True

    def _math(self, ty, depth, scope):
        fn = self.pick(LIBM_FUNCTIONS + COMPOSITES + ["relu", "abs", "square", "neg"])
        if fn == "neg":
            return f"(-{self.staged('f64', depth, scope)})", True
        float_only = fn in ("relu", "abs", "square") or fn in COMPOSITES
        a, sa = self.expr("f64" if float_only else self.pick(["f64", "i64"]), depth, scope)
        return f"jitad.{fn}({a})", sa

    def _int_unary(self, ty, depth, scope):
        fn = self.pick(["neg", "invert", "abs", "square", "relu"])
        if fn in ("neg", "invert"):
            return f"({'-' if fn == 'neg' else '~'}{self.staged('i64', depth, scope)})", True
        a, sa = self.expr("i64", depth, scope)
        return f"jitad.{fn}({a})", sa

    def _extremum(self, ty, depth, scope):
        fn = self.pick(["maximum", "minimum", "clip"])
        a, sa = self.expr(ty, depth, scope)
        b, sb = self.expr(ty, depth, scope)
        if fn == "clip":
            src = f"jitad.clip({a}, {b}, {self.pick(CONSTS[ty][:8])})"
        else:
            src = f"jitad.{fn}({a}, {b})"
        # IEEE leaves max(+0, -0) unspecified; `+ 0.0` maps -0.0 to +0.0
        return (f"({src} + 0.0)" if ty == "f64" else src), sa or sb

    def _where(self, ty, depth, scope):
        c, sc = self.expr("bool", depth, scope)
        a, sa = self.expr(ty, depth, scope)
        b, sb = self.expr(ty, depth, scope)
        return f"jitad.where({c}, {a}, {b})", sc or sa or sb

    def _convert(self, ty, depth, scope):
        src_ty = self.pick([t for t in ("f64", "i64", "bool") if t != ty])
        a, sa = self.expr(src_ty, depth, scope)
        return f"jitad.convert({a}, '{ty}')", sa

    def _compare(self, ty, depth, scope):
        types = self.pick([("f64", "f64"), ("i64", "i64"), ("f64", "i64"), ("i64", "f64")])
        a, b = self.staged_pair(*types, depth, scope)
        return f"({a} {self.pick(COMPARISONS)} {b})", True

    def _logic(self, ty, depth, scope):
        op = self.pick(["&", "|", "~"])
        if op == "~":
            return f"(~{self.staged('bool', depth, scope)})", True
        a, b = self.staged_pair("bool", "bool", depth, scope)
        return f"({a} {op} {b})", True

    # -- control flow -----------------------------------------------------------------
    def _if(self, ty, depth, scope):
        c, sc = self.expr("bool", depth, scope)
        if self.draw(st.booleans()):   # the operand form: IF(pred, f, g, operand)
            v, tv = self.fresh("v"), self.pick(["f64", "i64", "bool"])
            operand, _ = self.expr(tv, depth, scope)
            inner = scope + [(v, tv)]
            a, b = self.expr(ty, depth, inner)[0], self.expr(ty, depth, inner)[0]
            return f"IF({c}, lambda {v}: {a}, lambda {v}: {b}, {operand})", sc
        a, b = self.expr(ty, depth, scope)[0], self.expr(ty, depth, scope)[0]
        return f"IF({c}, lambda: {a}, lambda: {b})", sc

    def _while(self, ty, depth, scope):
        s = self.fresh("s")
        inner = scope + [(f"{s}[0]", "i64"), (f"{s}[1]", ty)]
        bound, _ = self.expr("i64", depth, scope)
        start = self.pick(["0", f"jitad.clip({self.expr('i64', depth, scope)[0]}, -3, 3)"])
        init, _ = self.expr(ty, depth, scope)
        cond = f"({s}[0] < jitad.minimum({bound}, 6))"
        if self.draw(st.booleans()):   # a data-dependent early exit
            cond += f" & {self.expr('bool', depth, inner)[0]}"
        body, _ = self.expr(ty, depth, inner)
        step = self.pick(["1", "2"])
        return f"WHILE(lambda {s}: {cond}, lambda {s}: ({s}[0] + {step}, {body}), ({start}, {init}))[1]", True

    def _for(self, ty, depth, scope):
        i, a = self.fresh("i"), self.fresh("a")
        lo = self.pick(["0", f"jitad.clip({self.expr('i64', depth, scope)[0]}, -3, 3)"])
        hi = self.pick(["3", f"jitad.clip({self.expr('i64', depth, scope)[0]}, -3, 6)"])
        init, _ = self.expr(ty, depth, scope)
        body, _ = self.expr(ty, depth, scope + [(i, "i64"), (a, ty)])
        return f"FOR({lo}, {hi}, lambda {i}, {a}: {body}, {init})", True

    def _fun(self, ty, depth, scope):
        a, ta = self.fresh("a"), self.pick(["f64", "i64", "bool"])
        arg, _ = self.expr(ta, depth, scope)
        body, _ = self.expr(ty, depth, scope + [(a, ta)])   # may capture outer values
        if "fun_returns_capture" in KNOWN_BUGS:
            body = f"jitad.where(True, {body}, {EXAMPLE[ty]})"
        return f"FUN(lambda {a}: {body})({arg})", True

    def _rec(self, ty, depth, scope):
        r = self.fresh("r")
        k, a = f"{r}_k", f"{r}_acc"
        body, _ = self.expr(ty, depth, list(PARAMS) + [(k, "i64"), (a, ty)])
        done, _ = self.expr(ty, -1, [(a, ty)])
        self.defs.append(f"@FUN(out={EXAMPLE[ty]})\ndef {r}({k}, {a}):\n"
                         f"    return IF({k} <= 0, lambda: {done}, lambda: {r}({k} - 1, {body}))")
        trips, _ = self.expr("i64", depth, scope)
        init, _ = self.expr(ty, depth, scope)
        return f"{r}(jitad.clip({trips}, 0, 5), {init})", True


@st.composite
def programs(draw, control):
    """(source of `def f(x, y, n, m, p)`, output dtypes); with `control`, the program
    may use IF/WHILE/FOR/FUN, else it is straight-line code with more outputs."""
    gen = ProgramGen(draw, control)
    depth = draw(st.integers(1, 4 if control else 3))
    out_types = draw(st.lists(st.sampled_from(["f64", "i64", "bool"]), min_size=1, max_size=3 if control else 5))
    outs = [gen.expr(t, depth, list(PARAMS))[0] for t in out_types]
    ret = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ",)"
    body = "\n".join(gen.defs + [f"return {ret}"])
    return f"def f({', '.join(n for n, _ in PARAMS)}):\n{textwrap.indent(body, '    ')}\n", out_types


FLOATS = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, math.nan, math.inf, -math.inf, 1e308, -5e-324]),
    st.floats(-50, 50),
    st.floats(allow_nan=True, allow_infinity=True))
INTS = st.one_of(st.integers(-8, 8), st.sampled_from([INT_MIN, INT_MAX, INT_MIN + 1, -1, 0]),
                 st.integers(INT_MIN, INT_MAX))
ARGS = st.tuples(FLOATS, FLOATS, INTS, INTS, st.booleans())
N_ARG_SETS = 8   # inputs per program: calls are cheap next to compiling


# -- the libm variant of the reference interpreter -----------------------------------

_libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")


def _c_double(name, nargs=1):
    fn = getattr(_libm, name)
    fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_double] * nargs
    return lambda *xs: np.float64(fn(*map(float, xs)))


_c_exp, _c_pow, _numpy_pow = _c_double("exp"), _c_double("pow", 2), IMPLS[Op.POW]
LIBM_IMPLS = {getattr(Op, name.upper()): _c_double(name)
              for name in ["exp", "log", "log1p", "expm1", "sin", "cos", "tanh", "erf", "erfc"]}
LIBM_IMPLS.update({getattr(Op, name.upper()): _c_double(c_name)
                   for name, c_name in [("arcsin", "asin"), ("arccos", "acos"), ("arctan", "atan")]})
LIBM_IMPLS[Op.SIGMOID] = lambda x: np.float64(1.0) / (np.float64(1.0) + _c_exp(-x))
LIBM_IMPLS[Op.POW] = lambda a, b: _c_pow(a, b) if isinstance(a, np.floating) else _numpy_pow(a, b)


def interpret_libm(program, args):
    with mock.patch.dict(IMPLS, LIBM_IMPLS):
        return interpret(program, args)


def same(got, want, dtype):
    if dtype != "f64":
        return got == want
    g, w = float(got), float(want)
    if math.isnan(g) or math.isnan(w):
        return math.isnan(g) and math.isnan(w)
    if math.isinf(g) or math.isinf(w):
        return g == w
    return g == w or abs(g - w) <= RTOL * max(abs(g), abs(w))


PY_TYPE = {"f64": float, "i64": int, "bool": bool}
NAMESPACE = {"jitad": jitad, "IF": IF, "WHILE": WHILE, "FOR": FOR, "FUN": FUN}


@pytest.fixture(scope="module", autouse=True)
def fresh_cache_dir(tmp_path_factory):
    with mock.patch.dict("os.environ", {"JITAD_CACHE_DIR": str(tmp_path_factory.mktemp("jitad-cache"))}):
        yield


def check_program(program, arg_sets):
    """Compile `program` and run it on `arg_sets`; compare with the interpreter."""
    source, out_types = program
    namespace = dict(NAMESPACE)
    exec(compile(source, "<random program>", "exec"), namespace)
    f = namespace["f"]
    traced = jitad.trace(f, *arg_sets[0])
    assert [t.dtype for t in traced.main.out_types] == out_types
    compiled = jitad.jit(f)
    for args in arg_sets:
        got = compiled(*args)   # the first call compiles, the next ones take the native entry
        got = list(got) if isinstance(got, tuple) else [got]
        want = interpret(traced, list(args))
        assert [type(g) for g in got] == [PY_TYPE[t] for t in out_types], (source, got)
        if all(map(same, got, want, out_types)):
            continue
        want_libm = interpret_libm(traced, list(args))
        assert all(map(same, got, want_libm, out_types)), (
            f"compiled code disagrees with the interpreter\n{source}\nargs = {args!r}\n"
            f"compiled    = {got!r}\ninterpreter = {want!r} (libm: {want_libm!r})\n{traced}")
    run_passes(traced)   # `.ir` is the program after the passes (dead code dropped, ...)
    assert compiled.ir == str(traced)


random_programs = settings(max_examples=int(os.environ.get("JITAD_PROGRAMS", 100)), deadline=None, derandomize=True, database=None,
                           suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
ARG_SETS = st.lists(ARGS, min_size=N_ARG_SETS, max_size=N_ARG_SETS)


@random_programs
@given(programs(control=False), ARG_SETS)
def test_straight_line_programs(program, arg_sets):
    check_program(program, arg_sets)


@random_programs
@given(programs(control=True), ARG_SETS)
def test_control_flow_programs(program, arg_sets):
    check_program(program, arg_sets)


# -- bugs the random programs found, as minimal reproductions ---------------------------

# found by the random programs (since fixed): llvm.copysign was declared with one operand
@pytest.mark.parametrize("op", ["%", "//"])
def test_float_mod_and_floordiv_compile(op):
    f = eval(f"lambda x, y: x {op} y")
    program = jitad.trace(f, 1.0, 1.0)
    compiled = jitad.jit(f)
    values = [7.5, -7.5, 2.0, -2.0, 0.0, -0.0, 1e300, 5e-324, math.inf, -math.inf, math.nan]
    for a in values:
        for b in values:
            got, want = compiled(a, b), interpret(program, [a, b])[0]
            assert same(got, want, "f64") and math.copysign(1, got) == math.copysign(1, want), (a, b, got, want)


# found by the random programs (since fixed): the interpreter saturated at 2**63-1024
@pytest.mark.parametrize("x", [1e19, math.inf, 2.0**63])
def test_float_to_int_saturation_agrees(x):
    f = lambda v: jitad.convert(v, "i64")
    assert jitad.jit(f)(x) == interpret(jitad.trace(f, 1.0), [x])[0] == INT_MAX


def test_fun_may_return_captured_value():
    f = lambda x, y: FUN(lambda a: y)(x)
    assert jitad.jit(f)(1.0, 2.0) == interpret(jitad.trace(f, 1.0, 2.0), [1.0, 2.0])[0] == 2.0


def test_bodies_may_return_captured_values():
    for f in [lambda x, y, p: IF(p, lambda: x, lambda: y),
              lambda x, y, p: WHILE(lambda s: s[0] < 3, lambda s: (s[0] + 1, y), (0, x))[1],
              lambda x, y, p: FOR(0, 3, lambda i, a: y, x)]:
        assert jitad.jit(f)(1.0, 2.0, False) == interpret(jitad.trace(f, 1.0, 2.0, False), [1.0, 2.0, False])[0] == 2.0



@pytest.mark.parametrize("fn, reference", [
    (jitad.exp, math.exp), (jitad.tanh, math.tanh), (jitad.log1p, math.log1p),
    (lambda v: v ** 1.5, lambda v: math.pow(v, 1.5)),
], ids=["exp", "tanh", "log1p", "pow"])
def test_libm_reference_interpreter_calls_libm(fn, reference):
    program = jitad.trace(fn, 1.0)
    for x in (0.3, 1.7, 7.0):
        assert interpret_libm(program, [x])[0] == reference(x)   # CPython's math calls libm too
