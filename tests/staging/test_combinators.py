"""Staged control flow: each combinator alone and nested, compiled vs Python.

Every compiled result is compared with plain Python (NumPy semantics for scalar
arithmetic) written by hand or, where the combinators run eagerly on Python values
(IF, FUN, TREE), with the same function called outside of `jit`; most checks also run
the staged IR through the reference interpreter (`jitad.ir.interpret`).
"""
import itertools
import math
import re

import numpy as np
import pytest

import jitad
from jitad import FOR, FUN, IF, TREE, WHILE, ShapeDtype, Tree
from jitad.ir.interpret import interpret
from jitad.pytree import flatten

# -- helpers ---------------------------------------------------------------------

_JITTED = {}


def compiled(fn):
    """One `jit` per Python function, so parametrized cases share compiled signatures."""
    if fn not in _JITTED:
        _JITTED[fn] = jitad.jit(fn)
    return _JITTED[fn]


def py(x):
    """A NumPy scalar as the Python number a compiled function returns."""
    return x.item() if isinstance(x, np.generic) else x


def assert_same(got, want, rel=1e-12, abs_=1e-12):
    """Same pytree structure, same Python type per leaf (bool/int/float), equal values."""
    g_leaves, g_td = flatten(got)
    w_leaves, w_td = flatten(want)
    assert g_td == w_td, f"structure: got {got!r}, want {want!r}"
    for a, b in zip(g_leaves, w_leaves):
        a, b = py(a), py(b)
        assert type(a) is type(b), f"type: got {a!r} in {got!r}, want {b!r} in {want!r}"
        if isinstance(b, float) and math.isnan(b):
            assert math.isnan(a), f"got {got!r}, want {want!r}"
        elif isinstance(b, float) and not math.isinf(b):
            assert a == pytest.approx(b, rel=rel, abs=abs_), f"got {got!r}, want {want!r}"
        else:
            assert a == b, f"got {got!r}, want {want!r}"


def check(fn, args, want, interp=True, **tol):
    """`jit(fn)(*args)` and the reference interpreter on `trace(fn, *args)` both give `want`."""
    assert_same(compiled(fn)(*args), want, **tol)
    if interp:
        outs = interpret(jitad.trace(fn, *args), flatten(args)[0])
        assert_same([py(o) for o in outs], flatten(want)[0], **tol)


def np_scalar(x):
    """The NumPy scalar a staged argument stands for (Python bool/int/float -> bool_/int64/float64)."""
    if isinstance(x, np.generic):
        return x
    return {bool: np.bool_, int: np.int64, float: np.float64}[type(x)](x)


def numpy_ref(fn, *args):
    """`fn` run on NumPy scalars: the promotion and integer semantics jitad follows."""
    with np.errstate(all="ignore"):
        out = fn(*map(np_scalar, args))
    return jitad.tree_map(py, out)


# -- scalar arithmetic: operators, promotion, Python constants --------------------

INTS = [-7, -2, 0, 3, 5]
FLOATS = [-7.5, -0.5, 0.0, 2.0, 3.25]
BOOLS = [False, True]
VALUES = {"i": INTS, "f": FLOATS, "b": BOOLS}

BINARY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
          "/": lambda a, b: a / b, "%": lambda a, b: a % b, "//": lambda a, b: a // b,
          "**": lambda a, b: a ** b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
          ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, "==": lambda a, b: a == b,
          "!=": lambda a, b: a != b, "&": lambda a, b: a & b, "|": lambda a, b: a | b}



def _binary_cases():
    for op, (ka, kb) in itertools.product(BINARY, itertools.product("ifb", repeat=2)):
        if op in ("&", "|") and "f" in (ka, kb):
            continue            # logical ops take bools and ints only (tested below)
        if op == "-" and ka == kb == "b":
            continue            # NumPy refuses bool - bool
        yield pytest.param(op, ka, kb, id=f"{ka}{op}{kb}")


@pytest.mark.parametrize("op,ka,kb", list(_binary_cases()))
def test_binary_operator_matches_numpy(op, ka, kb):
    """Every operator on every (int, float, bool) mix: NumPy's dtype and value."""
    fn = BINARY[op]
    for a, b in itertools.product(VALUES[ka], VALUES[kb]):
        if op == "**" and "f" not in (ka, kb) and b < 0:
            continue        # NumPy raises on an integer to a negative integer power
        assert_same(compiled(fn)(a, b), numpy_ref(fn, a, b))


CONSTANT_CASES = [
    ("float+int", lambda x: x + 1, (2.5,)),
    ("int+float", lambda n: n + 1.5, (3,)),
    ("int*int-int", lambda n: n * 2 - 7, (-4,)),
    ("bool+int", lambda b: b + 1, (True,)),
    ("bool*float", lambda b: b * 2.5, (True,)),
    ("int-bool", lambda n: n - True, (3,)),
    ("rsub", lambda x: 1 - x, (0.25,)),
    ("int/int", lambda n: 1 / n, (4,)),
    ("rpow int", lambda n: 2 ** n, (10,)),
    ("rpow float", lambda n: 2.0 ** n, (-3,)),
    ("pow const", lambda x: x ** 2, (-1.5,)),
    ("int pow const", lambda n: n ** 3, (-3,)),
    ("float pow half", lambda n: n ** 0.5, (9,)),
    ("rmod pos", lambda n: 7 % n, (3,)),
    ("rmod neg", lambda n: 7 % n, (-3,)),
    ("neg rmod", lambda n: -7 % n, (3,)),
    ("rfloordiv", lambda n: -7 // n, (2,)),
    ("rfloordiv neg", lambda n: -7 // n, (-2,)),
    ("floordiv const", lambda n: n // -3, (7,)),
    ("mod const neg", lambda n: n % -3, (7,)),
    ("mod const neg2", lambda n: n % -3, (-7,)),
    ("cmp int float", lambda n: (n < 2.5, n == 3, 3 >= n, n != 3.0), (3,)),
    ("cmp bool", lambda b: (b == True, b < 1, b > 0.5), (True,)),  # noqa: E712
    ("logic const", lambda b: (b & True, b | False, True & b, False | b, ~b), (True,)),
    ("int logic const", lambda n: (n & 6, n | 1, ~n, 12 & n, 1 | n), (13,)),
    ("int and bool", lambda n, b: (n & b, n | b), (12, True)),
    ("chain", lambda x, n, b: x * n + b - n // 2 + (x > n), (1.5, 7, True)),
    ("unary float", lambda x: (-x, abs(x), +x), (-2.5,)),
    ("unary int", lambda n: (-n, abs(n), +n), (-4,)),
    ("unary bool", lambda b: (~b, ~(~b)), (False,)),
    ("f32 weak consts", lambda a: a * 1.5 + 1, (np.float32(0.7),)),
    # (a float32 with a Python number passed as an argument: weak, as in JAX, so float32;
    # checked against JAX in tests/staging/test_weak_types.py)
    ("numpy int arg", lambda n: n * 3 + 1, (np.int32(5),)),
]


@pytest.mark.parametrize("fn,args", [pytest.param(f, a, id=name) for name, f, a in CONSTANT_CASES])
def test_python_constants_and_promotion(fn, args):
    """Python numbers are weakly typed constants; int + float -> float, as NumPy (NEP 50)."""
    check(fn, args, numpy_ref(fn, *args))


def test_int_float_promotion_is_visible_in_the_ir():
    text = str(jitad.trace(lambda n, x: n + x, 1, 2.0))
    assert "convert[dtype=f64]" in text and "add" in text


def test_division_and_modulo_corner_cases_of_ints():
    """Python/NumPy floor semantics on negative operands; x // 0 == x % 0 == 0 as NumPy."""
    f = compiled(lambda a, b: (a // b, a % b))
    for a, b in itertools.product([-9, -7, -1, 0, 1, 7, 9], [-4, -3, -1, 1, 3, 4]):
        assert f(a, b) == (a // b, a % b)
    assert f(7, 0) == (0, 0) and f(-7, 0) == (0, 0)
    assert f(-2**63, -1) == (-2**63, 0)     # wraps as NumPy, never traps


@pytest.mark.parametrize("a,b", [(7.5, 2.0), (-7.5, 2.0), (7.5, -2.0), (-7.5, -2.0), (0.5, 0.25),
                                 (1e300, 3.0), (-1e-300, 7.0), (math.inf, 2.0), (5.0, math.inf),
                                 (-5.0, math.inf), (3.0, 0.0), (-3.0, 0.0)])
def test_float_floor_division_and_modulo(a, b):
    """Python's floor semantics for floats (NumPy's divmod), IEEE results for inf and zero divisors."""
    fn = lambda a, b: (a // b, a % b)
    want = numpy_ref(fn, a, b)
    if b != 0.0 and not math.isinf(a):
        assert want == (a // b, a % b)        # Python agrees where it does not raise
    check(fn, (a, b), want)


def test_logical_ops_refuse_floats():
    with pytest.raises(jitad.ArgumentError, match="compare first"):
        jitad.jit(lambda x, y: x & y)(1.0, 2.0)
    with pytest.raises(jitad.ArgumentError):
        jitad.jit(lambda x: ~x)(1.0)


@pytest.mark.parametrize("x,y", [(1.0, 0.0), (-1.0, 0.0), (0.0, 0.0), (math.inf, 1.0),
                                 (math.inf, math.inf), (math.nan, 1.0)])
def test_ieee_special_values_propagate(x, y):
    fn = lambda x, y: (x / y, x - y, x < y, x == y, x != y, jitad.maximum(x, y), jitad.minimum(x, y))
    check(fn, (x, y), numpy_ref(fn, x, y))


# -- the scalar math functions of jitad.numeric -------------------------------------

UNARY_REFERENCE = {
    "exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1, "sqrt": np.sqrt,
    "sin": np.sin, "cos": np.cos, "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-np.float64(x))),
    "relu": lambda x: np.maximum(x, 0) if not np.isnan(x) else x,
    "abs": np.abs, "square": lambda x: x * x,
}
UNARY_INPUTS = [-1.5, -0.25, 0.0, 0.5, 2.0, 30.0, -4, 0, 3]


@pytest.mark.parametrize("name", sorted(UNARY_REFERENCE))
@pytest.mark.parametrize("x", UNARY_INPUTS, ids=repr)
def test_unary_math_function(name, x):
    """Float functions promote ints to f64; abs/square/relu keep ints; eager == compiled."""
    fn = getattr(jitad, name)
    with np.errstate(all="ignore"):
        want = py(np.asarray(UNARY_REFERENCE[name](np_scalar(x)))[()])
        eager = py(fn(x))
    check(fn, (x,), want, rel=1e-14, abs_=0.0)
    assert_same(eager, want, rel=1e-14, abs_=0.0)


@pytest.mark.parametrize("name", ["exp", "sin", "tanh", "sigmoid"])
def test_float_function_of_a_staged_bool_promotes_to_f64(name):
    fn = getattr(jitad, name)
    assert_same(compiled(fn)(True), py(UNARY_REFERENCE[name](np.float64(1.0))), rel=1e-14)


@pytest.mark.parametrize("name", ["exp", "sigmoid"])
def test_float_function_of_a_python_bool_eagerly_matches_compiled(name):
    fn = getattr(jitad, name)
    assert_same(py(fn(True)), compiled(fn)(True), rel=1e-14)


@pytest.mark.parametrize("a,b", [(3, 2.5), (2.5, 3), (-1, -2), (1.0, math.nan), (math.nan, 1.0), (True, 0)])
def test_maximum_minimum(a, b):
    fn = lambda a, b: (jitad.maximum(a, b), jitad.minimum(a, b))
    want = numpy_ref(lambda a, b: (np.maximum(a, b), np.minimum(a, b)), a, b)
    check(fn, (a, b), want)


def test_maximum_minimum_of_bools():
    check(lambda a, b: (jitad.maximum(a, b), jitad.minimum(a, b)), (False, True), (True, False))


@pytest.mark.parametrize("x,n", [(2.0, 3), (-2.0, 3), (0.0, -1)])
def test_where_promotes_its_branches(x, n):
    fn = lambda x, n: (jitad.where(x > 0, x, 0.0), jitad.where(x > 0, n, x), jitad.where(n > 0, n, 0))
    check(fn, (x, n), (x if x > 0 else 0.0, float(n) if x > 0 else x, n if n > 0 else 0))


@pytest.mark.parametrize("x", [-2.5, -1.0, 0.3, 1.0, 7.0])
def test_clip(x):
    check(lambda x: (jitad.clip(x, -1, 1), jitad.clip(x, 0.0, 5.0)), (x,),
          (min(max(x, -1.0), 1.0), min(max(x, 0.0), 5.0)))
    n = int(x * 3)
    check(lambda n: jitad.clip(n, 0, 10), (n,), min(max(n, 0), 10))
    assert jitad.clip(x, -1, 1) == min(max(x, -1.0), 1.0)     # eager


def _to_int(x):
    return 0 if math.isnan(x) else max(min(math.trunc(x), 2**63 - 1), -2**63)


@pytest.mark.parametrize("x", [-2.7, -0.5, 0.0, 2.7, 1e30, -1e30, math.nan])
def test_convert_float(x):
    """float -> i64 truncates toward zero, saturates at the int64 range, NaN -> 0; -> bool is x != 0."""
    fn = lambda x: (jitad.convert(x, "i64"), jitad.convert(x, "bool"), jitad.convert(x, "f64"))
    assert_same(compiled(fn)(x), (_to_int(x), x != 0, x))


@pytest.mark.parametrize("x", [-2.7, 0.0, 2.7, -1e30, math.nan])
def test_convert_float_eager_and_interpreter(x):
    check(lambda x: jitad.convert(x, "i64"), (x,), _to_int(x))
    assert_same(jitad.convert(x, "i64"), _to_int(x))


def test_convert_large_float_eager_matches_compiled():
    f = compiled(lambda x: jitad.convert(x, "i64"))
    assert jitad.convert(1e30, "i64") == f(1e30)
    assert py(interpret(jitad.trace(lambda x: jitad.convert(x, "i64"), 1e30), [1e30])[0]) == f(1e30)


@pytest.mark.parametrize("v", [-3, 0, 5, True, False])
def test_convert_int_and_bool(v):
    fn = lambda v: (jitad.convert(v, "f64"), jitad.convert(v, "i64"), jitad.convert(v, "bool"))
    check(fn, (v,), (float(v), int(v), bool(v)))


# -- IF ---------------------------------------------------------------------------

def piecewise(x):
    return IF(x < -1.0, lambda: -x * 2.0,
              lambda: IF(x < 1.0, lambda: x * x, lambda: jitad.sqrt(x) + 1.0))


def piecewise_ref(x):
    return -x * 2.0 if x < -1.0 else x * x if x < 1.0 else math.sqrt(x) + 1.0


@pytest.mark.parametrize("x", [-3.0, -1.0, -0.5, 0.0, 0.99, 1.0, 4.0])
def test_if_nested(x):
    check(piecewise, (x,), piecewise_ref(x))
    assert piecewise(x) == piecewise_ref(x)      # eager: a Python bool picks the branch


def if_operands(x, y):
    return IF(x > y, lambda a, b: a - b, lambda a, b: (b - a) * 2.0, x, y)


@pytest.mark.parametrize("x,y", [(3.0, 1.0), (1.0, 3.0), (2.0, 2.0)])
def test_if_with_operands(x, y):
    check(if_operands, (x, y), x - y if x > y else (y - x) * 2.0)


def if_captures(x, y, z):
    return IF(x > 0, lambda: x * y + 1.0, lambda: z - x)


@pytest.mark.parametrize("x", [-2.0, 0.0, 2.0])
def test_if_branches_capture_different_values(x):
    check(if_captures, (x, 3.0, 5.0), x * 3.0 + 1.0 if x > 0 else 5.0 - x)


LITERAL_BRANCHES = [
    ("int,int", lambda x: IF(x > 0, lambda: 1, lambda: 2), lambda x: 1 if x > 0 else 2),
    ("int,float", lambda x: IF(x > 0, lambda: 1, lambda: 2.5), lambda x: 1.0 if x > 0 else 2.5),
    ("bool,bool", lambda x: IF(x > 0, lambda: True, lambda: False), lambda x: x > 0),
    ("staged float,int", lambda x: IF(x > 0, lambda: x * 2, lambda: 0), lambda x: x * 2 if x > 0 else 0.0),
    ("int,staged float", lambda x: IF(x > 0, lambda: 7, lambda: x - 1), lambda x: 7.0 if x > 0 else x - 1),
]


@pytest.mark.parametrize("fn,ref", [pytest.param(f, r, id=n) for n, f, r in LITERAL_BRANCHES])
@pytest.mark.parametrize("x", [-1.5, 2.0])
def test_if_literal_branches_promote(fn, ref, x):
    check(fn, (x,), ref(x))


def test_if_int_literal_branch_against_staged_int():
    fn = lambda n: IF(n > 0, lambda: n * 2, lambda: 0)
    for n in (-3, 0, 4):
        check(fn, (n,), n * 2 if n > 0 else 0)


@pytest.mark.parametrize("pred,x", [(0, 2.0), (3, 2.0), (-1, 2.0), (0.0, 1.0), (0.5, 1.0), (True, 1.0)])
def test_if_predicate_of_any_dtype_means_nonzero(pred, x):
    check(lambda p, x: IF(p, lambda: x + 1.0, lambda: x - 1.0), (pred, x), x + 1.0 if pred else x - 1.0)


def test_if_python_bool_picks_a_branch_at_trace_time():
    fn = lambda x: IF(True, lambda: x + 1.0, lambda: x - 1.0) * IF(1 > 2, lambda: x, lambda: 2.0)
    check(fn, (3.0,), 8.0)
    assert " if " not in str(jitad.trace(fn, 3.0))


def if_pytree(x, n):
    return IF(x > n,
              lambda: ((x, n + 1), {"flag": x > 0, "k": n * 2, "v": 1.0}, [x * 0.5], None),
              lambda: ((-x, n - 1), {"flag": False, "k": 7, "v": x}, [x + 0.5], None))


@pytest.mark.parametrize("x,n", [(3.0, 1), (-3.0, 1), (0.5, 0)])
def test_if_returns_pytrees_of_mixed_types(x, n):
    if x > n:
        want = ((x, n + 1), {"flag": x > 0, "k": n * 2, "v": 1.0}, [x * 0.5], None)
    else:
        want = ((-x, n - 1), {"flag": False, "k": 7, "v": x}, [x + 0.5], None)
    check(if_pytree, (x, n), want)


def test_if_branches_of_different_types_raise_staging_error():
    with pytest.raises(jitad.StagingError, match="IF branches return different types"):
        jitad.jit(lambda x, n: IF(x > 0, lambda: x * 1.0, lambda: n + 1))(1.0, 2)


def test_if_branches_of_different_structures_raise_staging_error():
    with pytest.raises(jitad.StagingError, match="different structures"):
        jitad.jit(lambda x: IF(x > 0, lambda: (x, x), lambda: x))(1.0)


def test_python_if_on_a_staged_value_names_the_combinator():
    def f(x):
        if x > 0:
            return x
        return -x
    with pytest.raises(jitad.StagingError, match="IF"):
        jitad.jit(f)(1.0)
    with pytest.raises(jitad.StagingError):
        jitad.jit(lambda x, y: (x > 0) and (y > 0))(1.0, 2.0)


@pytest.mark.parametrize("x", [-1.0, 2.0])
def test_if_branch_returning_a_captured_value(x):
    check(lambda x: IF(x > 0, lambda: x, lambda: 0.0), (x,), max(x, 0.0))


# -- WHILE -------------------------------------------------------------------------

def halve(x):
    return WHILE(lambda t: t > 1.0, lambda t: t * 0.5, x)


@pytest.mark.parametrize("x", [10.0, 1.0, 0.5, 1e6, -3.0])
def test_while_basic_and_zero_trips(x):
    t = x
    while t > 1.0:
        t *= 0.5
    check(halve, (x,), t)


def while_tuple(n):
    return WHILE(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * 2 + s[0]), (0, 1))


@pytest.mark.parametrize("n", [0, 1, 5, 20])
def test_while_tuple_state(n):
    k, v = 0, 1
    while k < n:
        k, v = k + 1, v * 2 + k
    check(while_tuple, (n,), (k, v))


def while_dict(x, tol):
    return WHILE(lambda s: s["go"],
                 lambda s: {"x": s["x"] * 0.5, "k": s["k"] + 1, "go": s["x"] * 0.5 > tol},
                 {"x": x, "k": 0, "go": x > tol})


@pytest.mark.parametrize("x", [100.0, 0.01, 3.0])
def test_while_dict_state_with_a_bool(x):
    s = {"x": x, "k": 0, "go": x > 0.1}
    while s["go"]:
        s = {"x": s["x"] * 0.5, "k": s["k"] + 1, "go": s["x"] * 0.5 > 0.1}
    check(while_dict, (x, 0.1), s)


def collatz(n):
    return WHILE(lambda s: s[0] != 1,
                 lambda s: (IF(s[0] % 2 == 0, lambda: s[0] // 2, lambda: 3 * s[0] + 1), s[1] + 1),
                 (n, 0))


@pytest.mark.parametrize("n", [1, 2, 7, 27, 97])
def test_while_with_if_inside(n):
    k, steps = n, 0
    while k != 1:
        k, steps = (k // 2 if k % 2 == 0 else 3 * k + 1), steps + 1
    check(collatz, (n,), (1, steps))


def newton_sqrt(a):
    return WHILE(lambda x: jitad.abs(x * x - a) > 1e-12 * a, lambda x: 0.5 * (x + a / x), a + 1.0)


@pytest.mark.parametrize("a", [2.0, 10.0, 1e-3, 12345.0])
def test_while_cond_and_body_capture(a):
    x = a + 1.0
    while abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    check(newton_sqrt, (a,), x)


def gcd_by_subtraction(a, b):
    return WHILE(lambda s: s[1] != 0,
                 lambda s: (s[1], WHILE(lambda r: r >= s[1], lambda r: r - s[1], s[0])),
                 (a, b))


@pytest.mark.parametrize("a,b", [(12, 18), (7, 5), (100, 10), (1, 1), (9, 0)])
def test_while_nested_inner_captures_outer_state(a, b):
    s = (a, b)
    while s[1] != 0:
        r = s[0]
        while r >= s[1]:
            r -= s[1]
        s = (s[1], r)
    check(gcd_by_subtraction, (a, b), s)
    assert s[0] == math.gcd(a, b)


def test_while_python_literal_init_and_long_loop():
    check(lambda x: WHILE(lambda s: s < x, lambda s: s + 0.75, 0.0), (10.0,), 10.5)
    n = 10**6
    f = compiled(lambda n: WHILE(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] + s[0]), (0, 0)))
    assert f(n) == (n, n * (n - 1) // 2)


def test_while_state_type_change_raises_staging_error():
    with pytest.raises(jitad.StagingError, match="WHILE body"):
        jitad.jit(lambda x: WHILE(lambda t: t < 10, lambda t: t + x, 0))(0.5)
    with pytest.raises(jitad.StagingError, match="different structures"):
        jitad.jit(lambda x: WHILE(lambda t: t[0] < 10.0, lambda t: (t[0] + x,), (x, x)))(0.5)


def test_while_cond_is_a_captured_value():
    fn = lambda x, go: WHILE(lambda s: go & (s < 10.0), lambda s: s + x, 0.0)
    check(fn, (1.5, True), 10.5)
    check(fn, (1.5, False), 0.0)
    check(lambda x: WHILE(lambda s: False, lambda s: s + x, x), (1.5,), 1.5)


def test_python_while_on_a_staged_value_names_the_combinator():
    def f(x):
        while x > 1.0:
            x = x * 0.5
        return x
    with pytest.raises(jitad.StagingError, match="WHILE"):
        jitad.jit(f)(10.0)


def test_while_body_returning_a_captured_value():
    check(lambda x, y: WHILE(lambda s: s < y, lambda s: y, x), (0.5, 3.0), 3.0)




def test_while_runs_eagerly_outside_jit():
    assert WHILE(lambda t: t > 1.0, lambda t: t * 0.5, 10.0) == 0.625


# -- FOR ---------------------------------------------------------------------------

def sum_squares(a, b):
    return FOR(a, b, lambda i, s: s + i * i, 0)


@pytest.mark.parametrize("a,b", [(0, 5), (-3, 4), (5, 5), (5, 2), (-10, -7), (0, 1000)])
def test_for_staged_bounds(a, b):
    check(sum_squares, (a, b), sum(i * i for i in range(a, b)))


def horner(x):
    return FOR(0, 5, lambda i, s: s * x + i, 1.0)


@pytest.mark.parametrize("x", [0.0, 1.0, -2.0, 0.5])
def test_for_python_bounds(x):
    s = 1.0
    for i in range(0, 5):
        s = s * x + i
    check(horner, (x,), s)


@pytest.mark.parametrize("n", [0, 3, 10])
def test_for_mixed_and_numpy_bounds(n):
    check(lambda n: FOR(n, 12, lambda i, s: s + i, 0), (n,), sum(range(n, 12)))
    check(lambda n: FOR(np.int64(-2), n, lambda i, s: s * 2 + i, np.int32(1)), (n,),
          _for_ref(-2, n, lambda i, s: s * 2 + i, 1))


def _for_ref(lo, hi, body, s):
    for i in range(lo, hi):
        s = body(i, s)
    return s


@pytest.mark.parametrize("n", [0, 1, 7])
def test_for_index_promotes_to_float(n):
    check(lambda n: FOR(0, n, lambda i, s: s + i * 0.5 + i / 4, 0.0), (n,),
          _for_ref(0, n, lambda i, s: s + i * 0.5 + i / 4, 0.0))


def fib_for(n):
    return FOR(0, n, lambda i, s: (s[1], s[0] + s[1]), (0, 1))


@pytest.mark.parametrize("n", [0, 1, 2, 10, 90])
def test_for_tuple_state(n):
    check(fib_for, (n,), _for_ref(0, n, lambda i, s: (s[1], s[0] + s[1]), (0, 1)))


def running_stats(n, x):
    return FOR(0, n, lambda i, s: {"sum": s["sum"] + jitad.sin(i * x),
                                   "max": jitad.maximum(s["max"], jitad.sin(i * x)),
                                   "pos": s["pos"] + (jitad.sin(i * x) > 0)},
               {"sum": 0.0, "max": -2.0, "pos": 0})


@pytest.mark.parametrize("n,x", [(0, 1.0), (10, 0.7), (50, 1.3)])
def test_for_dict_state(n, x):
    s = {"sum": 0.0, "max": -2.0, "pos": 0}
    for i in range(n):
        v = math.sin(i * x)
        s = {"sum": s["sum"] + v, "max": max(s["max"], v), "pos": s["pos"] + (v > 0)}
    check(running_stats, (n, x), s)


def triangle(n):
    return FOR(0, n, lambda i, s: FOR(0, i, lambda j, t: t + i * j, s), 0)


@pytest.mark.parametrize("n", [0, 1, 6, 30])
def test_for_nested_inner_bound_is_outer_index(n):
    check(triangle, (n,), sum(i * j for i in range(n) for j in range(i)))


def fizz(n):
    return FOR(1, n + 1, lambda i, s: IF((i % 3 == 0) | (i % 5 == 0), lambda: (s[0] + 1, s[1]),
                                         lambda: (s[0], s[1] + i)), (0, 0))


@pytest.mark.parametrize("n", [0, 15, 100])
def test_for_with_if_inside(n):
    hits = [i for i in range(1, n + 1) if i % 3 == 0 or i % 5 == 0]
    check(fizz, (n,), (len(hits), sum(range(1, n + 1)) - sum(hits)))


def for_inside_if(n, x):
    return IF(n > 0, lambda: FOR(0, n, lambda i, s: s * x + 1.0, 0.0),
              lambda: FOR(n, 0, lambda i, s: s - i * x, 0.0))


@pytest.mark.parametrize("n", [-4, 0, 5])
def test_for_inside_if(n):
    want = (_for_ref(0, n, lambda i, s: s * 1.5 + 1.0, 0.0) if n > 0
            else _for_ref(n, 0, lambda i, s: s - i * 1.5, 0.0))
    check(for_inside_if, (n, 1.5), want)


@pytest.mark.parametrize("bound", [3.0, True, np.float64(2.0)], ids=repr)
def test_for_bounds_must_be_ints(bound):
    with pytest.raises(jitad.StagingError, match="FOR bounds"):
        jitad.jit(lambda x: FOR(0, bound, lambda i, s: s + x, 0.0))(1.0)


def test_for_staged_float_bound_raises_staging_error():
    with pytest.raises(jitad.StagingError, match="FOR bounds"):
        jitad.jit(lambda x: FOR(0, x, lambda i, s: s + 1.0, 0.0))(3.0)


def test_python_range_on_a_staged_value_names_the_combinator():
    def f(n):
        s = 0
        for i in range(n):
            s = s + i
        return s
    with pytest.raises(jitad.StagingError, match="FOR"):
        jitad.jit(f)(5)


def test_for_body_returning_a_captured_value():
    check(lambda x, n: FOR(0, n, lambda i, s: x, 0.0), (2.5, 3), 2.5)


def test_for_runs_eagerly_outside_jit():
    assert FOR(0, 5, lambda i, s: s + i, 0) == 10


# -- FUN ---------------------------------------------------------------------------

@FUN
def sq(x):
    return x * x


@FUN
def quad(x):
    return sq(sq(x))


@pytest.mark.parametrize("x", [3.0, -1.5, 2])
def test_fun_nested_calls(x):
    check(lambda x: quad(x) + sq(x), (x,), x ** 4 + x * x)
    assert quad(x) + sq(x) == x ** 4 + x * x          # eager outside jit


def test_fun_emits_call_nodes_one_definition_per_signature():
    text = str(jitad.trace(lambda x, n: (quad(x), sq(x), sq(n)), 1.5, 2))
    assert len(re.findall(r"= call @sq %", text)) == 3        # twice in quad, once in main
    assert len(re.findall(r"= call @quad %", text)) == 1
    assert "fun @sq(%0:f64) -> (f64)" in text and "fun @sq2(" in text   # one per signature
    check(lambda x, n: (quad(x), sq(x), sq(n)), (1.5, 2), (1.5 ** 4, 2.25, 4))


def test_fun_functional_form_with_pytrees():
    stats = FUN(lambda d: {"s": d["a"] + d["b"], "p": (d["a"] * d["b"], d["a"] > d["b"])})
    check(lambda x: stats({"a": x, "b": 2.0}), (3.0,), {"s": 5.0, "p": (6.0, True)})


@FUN(out=0)
def fact(n):
    return IF(n <= 1, lambda: 1, lambda: n * fact(n - 1))


@pytest.mark.parametrize("n", [0, 1, 5, 20])
def test_fun_recursive_factorial(n):
    check(lambda n: fact(n), (n,), math.factorial(max(n, 0)))
    assert fact(n) == math.factorial(n)           # eager


@FUN(out=ShapeDtype((), "f64"))
def power(x, n):
    return IF(n == 0, lambda: 1.0, lambda: x * power(x, n - 1))


@pytest.mark.parametrize("x,n", [(1.5, 0), (1.5, 5), (-2.0, 7)])
def test_fun_recursive_with_shape_dtype_out(x, n):
    check(lambda x, n: power(x, n), (x, n), _for_ref(0, n, lambda i, s: s * x, 1.0))


@FUN(out=(0, 0.0))
def harmonic(n, x):
    return IF(n <= 0, lambda: (0, 0.0),
              lambda: (lambda r: (r[0] + 1, r[1] + x / n))(harmonic(n - 1, x)))


@pytest.mark.parametrize("n", [0, 1, 4, 30])
def test_fun_recursive_pytree_out(n):
    want = (0, 0.0)
    for k in range(1, n + 1):
        want = (want[0] + 1, want[1] + 12.0 / k)
    check(lambda n, x: harmonic(n, x), (n, 12.0), want)


@FUN(out=False)
def is_even(n):
    return IF(n == 0, lambda: True, lambda: is_odd(n - 1))


@FUN(out=False)
def is_odd(n):
    return IF(n == 0, lambda: False, lambda: is_even(n - 1))


@pytest.mark.parametrize("n", [0, 1, 10, 77])
def test_fun_mutual_recursion(n):
    check(lambda n: (is_even(n), is_odd(n)), (n,), (n % 2 == 0, n % 2 == 1))


@FUN(out=0)
def ackermann(m, n):
    return IF(m == 0, lambda: n + 1,
              lambda: IF(n == 0, lambda: ackermann(m - 1, 1),
                         lambda: ackermann(m - 1, ackermann(m, n - 1))))


@pytest.mark.parametrize("m,n,want", [(0, 0, 1), (1, 5, 7), (2, 3, 9), (3, 3, 61)])
def test_fun_nested_recursive_calls(m, n, want):
    check(lambda m, n: ackermann(m, n), (m, n), want, interp=False)


@FUN(out=0)
def gcd(a, b):
    return IF(b == 0, lambda x, y: x, lambda x, y: gcd(y, x % y), a, b)


@pytest.mark.parametrize("a,b", [(12, 18), (17, 5), (0, 7), (7, 0), (-12, 18), (1071, 462)])
def test_fun_recursive_with_if_operands(a, b):
    x, y = a, b
    while y != 0:
        x, y = y, x % y
    check(lambda a, b: gcd(a, b), (a, b), x)
    assert gcd(a, b) == x          # eager


def geometric(x, n):
    @FUN(out=0.0)
    def g(k):
        return IF(k <= 0, lambda: 1.0, lambda: x * g(k - 1) + 1.0)
    return g(n)


@pytest.mark.parametrize("x,n", [(2.0, 0), (2.0, 4), (0.5, 10)])
def test_fun_recursive_closure_over_outer_staged_value(x, n):
    check(geometric, (x, n), sum(x ** j for j in range(n + 1)))


def if_in_while_in_fun(x, n):
    @FUN(out=0.0)
    def h(y):
        s = WHILE(lambda st: st[1] < n,
                  lambda st: (IF(st[0] > 10.0, lambda: st[0] / 3.0, lambda: st[0] * 2.0 + x), st[1] + 1),
                  (y, 0))
        return s[0]
    return h(x) + h(x * 2.0)


def if_in_while_in_fun_ref(x, n):
    def h(y):
        v, k = y, 0
        while k < n:
            v, k = (v / 3.0 if v > 10.0 else v * 2.0 + x), k + 1
        return v
    return h(x) + h(x * 2.0)


@pytest.mark.parametrize("x,n", [(1.5, 0), (1.5, 7), (-2.0, 5), (30.0, 3)])
def test_fun_with_while_with_if(x, n):
    check(if_in_while_in_fun, (x, n), if_in_while_in_fun_ref(x, n))


@FUN(out=0)
def count_down(k):
    return IF(k <= 0, lambda: 0, lambda: 1 + count_down(k - 1))


def test_fun_deep_recursion_completes_or_raises_resource_error():
    f = compiled(lambda k: count_down(k))
    try:
        assert f(100_000) == 100_000
    except jitad.ResourceError:
        pass
    assert f(10) == 10      # still usable afterwards


def fun_at_several_levels(x, n):
    scale = FUN(lambda v: v * x + 1.0)
    return scale(x) + FOR(0, n, lambda i, s: s + scale(s * 0.5), 0.0) + IF(
        x > 0, lambda: scale(-x), lambda: scale(x * 2.0))


def fun_at_several_levels_ref(x, n):
    scale = lambda v: v * x + 1.0
    s = 0.0
    for _ in range(n):
        s = s + scale(s * 0.5)
    return scale(x) + s + (scale(-x) if x > 0 else scale(x * 2.0))


@pytest.mark.parametrize("x,n", [(0.5, 3), (-1.0, 4)])
def test_fun_called_at_several_nesting_levels_with_captures(x, n):
    check(fun_at_several_levels, (x, n), fun_at_several_levels_ref(x, n))


def test_fun_recursion_without_out_raises_staging_error():
    @FUN
    def loop(n):
        return IF(n <= 1, lambda: 1, lambda: n * loop(n - 1))
    with pytest.raises(jitad.StagingError, match="out="):
        jitad.jit(lambda n: loop(n))(5)


def test_fun_out_structure_mismatch_raises_staging_error():
    @FUN(out=(0.0, 0.0))
    def pair(x):
        return x * 2.0
    with pytest.raises(jitad.StagingError):
        jitad.jit(lambda x: pair(x))(1.0)


@FUN(out=0)
def fib_fun(n):
    return IF(n < 2, lambda: n, lambda: fib_fun(n - 1) + fib_fun(n - 2))


@pytest.mark.parametrize("n", [1, 10])
def test_fun_recursive_fibonacci_returning_its_argument(n):
    check(lambda n: fib_fun(n), (n,), _for_ref(0, n, lambda i, s: (s[1], s[0] + s[1]), (0, 1))[0])


# -- TREE nested with the other combinators ----------------------------------------

SMALL_TREE = Tree.from_nested((5.0, (3.0, None, (2.0, None, None)), (4.0, (1.0, None, None), None)))


def tree_if(t, x):
    return TREE(t, x, lambda node, l, r: IF(node.is_leaf, lambda: node.value * 2.0, lambda: l * 0.5 + r + node.value))


def tree_pytree(t, w):
    return TREE(t, (0, 0.0, False),
                lambda node, l, r: (l[0] + r[0] + 1, jitad.tanh(w * node.value + l[1] - r[1]),
                                    l[2] | r[2] | (node.value > 4.5)))


@pytest.mark.parametrize("fn,args", [(tree_if, (SMALL_TREE, 0.25)), (tree_pytree, (SMALL_TREE, 0.3))],
                         ids=["if-in-combine", "pytree-state-capture"])
def test_tree_compiled_matches_eager(fn, args):
    check(fn, args, fn(*args))        # TREE and IF run eagerly on a Tree and Python values


def tree_while(t):
    return TREE(t, 0.0, lambda node, l, r: WHILE(lambda s: s < node.value * 3.0, lambda s: s + 1.25, l + r))


def tree_while_ref(t, k):
    if k < 0:
        return 0.0
    s = tree_while_ref(t, t.left[k]) + tree_while_ref(t, t.right[k])
    while s < t.fields["value"][k] * 3.0:
        s += 1.25
    return s


def test_tree_with_while_in_combine():
    check(tree_while, (SMALL_TREE,), tree_while_ref(SMALL_TREE, SMALL_TREE.root))


def test_tree_inside_for_if_and_fun():
    t = SMALL_TREE
    total = 15.0                   # sum of the values; 6 empty subtrees
    check(lambda t, k: FOR(0, k, lambda i, s: s + TREE(t, 0.0, lambda n, l, r: l + r + n.value * i), 0.0),
          (t, 3), total * 3)
    check(lambda t, x: IF(x > 0, lambda: TREE(t, x, lambda n, l, r: l + r + n.value), lambda: -x),
          (t, 1.0), total + 6.0)
    check(lambda t, x: IF(x > 0, lambda: TREE(t, x, lambda n, l, r: l + r + n.value), lambda: -x),
          (t, -1.0), 1.0)

    def in_fun(t, x):
        g = FUN(lambda y: TREE(t, y, lambda n, l, r: l + r + n.value))
        return g(x) + g(x * 2.0)
    check(in_fun, (t, 1.0), (total + 6.0) + (total + 12.0))


def test_fun_and_tree_inside_tree_combine():
    t = SMALL_TREE
    check(lambda t: TREE(t, 0, lambda n, l, r: l + r + count_down(n.index)), (t,),
          sum(range(t.size)), interp=False)
    check(lambda t: TREE(t, 0.0, lambda n, l, r: l + r + TREE(t, 0.0, lambda m, l2, r2: l2 + r2 + n.value * m.value)),
          (t,), 15.0 * 15.0)


def test_tree_combine_returning_captured_and_child_values():
    t = SMALL_TREE
    check(lambda t, x: TREE(t, 0.0, lambda n, l, r: x), (t, 0.5), 0.5)
    check(lambda t, x: TREE(t, x, lambda n, l, r: l), (t, 0.5), 0.5)
    leafy = lambda t, x: TREE(t, x, lambda n, l, r: IF(n.is_leaf, lambda: x, lambda: l + r))
    check(leafy, (t, 0.5), 2.0)
    assert leafy(t, 0.5) == 2.0        # eager


def test_two_trees_in_one_function():
    a = SMALL_TREE
    b = Tree.from_nested((2.0, (0.5, None, None), None))
    fn = lambda a, b: TREE(a, 0.0, lambda n, l, r: l + r + n.value) * TREE(b, 1.0, lambda n, l, r: l * r * n.value)
    check(fn, (a, b), 15.0 * 1.0)


# -- closures at several nesting levels ---------------------------------------------

def two_levels(x, y, n):
    def body(i, s):
        return IF(s > y, lambda: s - x * i, lambda: FOR(0, i, lambda j, u: u + x + y * j, s))
    return FOR(0, n, body, 0.0)


def two_levels_ref(x, y, n):
    s = 0.0
    for i in range(n):
        if s > y:
            s = s - x * i
        else:
            for j in range(i):
                s = s + x + y * j
    return s


@pytest.mark.parametrize("x,y,n", [(0.5, 3.0, 8), (2.0, -1.0, 5), (0.1, 100.0, 12)])
def test_closures_two_levels(x, y, n):
    check(two_levels, (x, y, n), two_levels_ref(x, y, n))


def four_levels(x, y, n):
    @FUN
    def g(a):
        def body(s):
            return IF(s[0] % 2 == 0,
                      lambda: (s[0] + 1, FOR(0, s[0], lambda i, t: t + a * i + x, s[1])),
                      lambda: (s[0] + 1, s[1] - y))
        return WHILE(lambda s: s[0] < n, body, (0, a))
    return g(x * 2.0)


def four_levels_ref(x, y, n):
    a = x * 2.0
    k, v = 0, a
    while k < n:
        if k % 2 == 0:
            t = v
            for i in range(k):
                t = t + a * i + x
            k, v = k + 1, t
        else:
            k, v = k + 1, v - y
    return (k, v)


@pytest.mark.parametrize("x,y,n", [(0.5, 1.0, 0), (0.5, 1.0, 7), (-1.5, 2.5, 10)])
def test_closures_four_levels_fun_while_if_for(x, y, n):
    """The FOR body uses a FUN param, the WHILE state and main's args: captured at every level."""
    check(four_levels, (x, y, n), four_levels_ref(x, y, n))


def deep_capture(a, b, c, n):
    return FOR(0, n, lambda i, s: WHILE(lambda t: t[0] < a * (i + 1),
                                        lambda t: (t[0] + IF(t[1], lambda: b * 1.0, lambda: c + 0.0), ~t[1]),
                                        s),
               (0.0, True))


def deep_capture_ref(a, b, c, n):
    s = (0.0, True)
    for i in range(n):
        while s[0] < a * (i + 1):
            s = (s[0] + (b if s[1] else c), not s[1])
    return s


@pytest.mark.parametrize("n", [0, 1, 3])
def test_closures_captured_through_for_while_if(n):
    check(deep_capture, (10.0, 1.0, 2.0, n), deep_capture_ref(10.0, 1.0, 2.0, n))


def test_staged_value_leaking_out_of_its_body_raises_staging_error():
    leaked = []

    def f(x):
        IF(x > 0, lambda: leaked.append(x * 2.0) or x * 1.0, lambda: x * 1.0)
        return leaked[0] + 1.0
    with pytest.raises(jitad.StagingError, match="outside the function or combinator body"):
        jitad.jit(f)(1.0)
