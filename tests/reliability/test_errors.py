"""Errors: user mistakes raise `jitad.JitadError` subclasses that say what,
where (the user's source line) and what to do; nothing a user passes crashes the
process. The robustness checks run in a subprocess, so a crash fails the test
instead of killing the test run."""
import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitad
from jitad import FOR, FUN, IF, WHILE

INT_MIN, INT_MAX = -2**63, 2**63 - 1
HERE = os.path.abspath(__file__)


def raises(error, fn, *args):
    """`fn(*args)` must raise `error`; return its message (which must point here)."""
    with pytest.raises(error) as info:
        fn(*args)
    message = str(info.value)
    assert isinstance(info.value, jitad.JitadError)
    assert HERE in message, f"the message does not point at the user's source line:\n{message}"
    return message


# -- StagingError: Python control flow and conversions on staged values ----------------

def python_if(x):
    if x > 0:
        return x
    return -x


def python_while(x):
    while x > 1.0:
        x = x * 0.5
    return x


def python_and(x):
    return (x > 0) and (x < 1)


def python_or(x):
    return (x > 0) or (x < 1)


def python_not(x):
    return not (x > 0)


@pytest.mark.parametrize("fn, names", [
    (python_if, ["IF"]),
    (python_while, ["WHILE"]),
    (python_and, ["&"]),
    (python_or, ["|"]),
    (python_not, ["~"]),
    (lambda x: bool(x), ["IF"]),
    (lambda x: int(x), ["convert"]),
    (lambda x: float(x), ["convert"]),
], ids=["if", "while", "and", "or", "not", "bool", "int", "float"])
@pytest.mark.parametrize("how", ["trace", "jit"])
def test_python_control_flow_on_staged_values(fn, names, how):
    run = (lambda: jitad.trace(fn, 1.0)) if how == "trace" else (lambda: jitad.jit(fn)(1.0))
    message = raises(jitad.StagingError, run)
    for name in names:
        assert name in message
    assert jitad.jit(lambda x: x + 1.0)(1.0) == 2.0   # the failed trace left no state behind


def test_staging_error_names_the_offending_line():
    message = raises(jitad.StagingError, jitad.trace, python_if, 1.0)
    assert "if x > 0:" in message
    line = python_if.__code__.co_firstlineno + 1
    assert f"{HERE}:{line}" in message


def test_python_if_inside_a_combinator_body():
    def f(x):
        return WHILE(lambda t: t < 10.0, lambda t: python_if(t) + 1.0, x)
    message = raises(jitad.StagingError, jitad.trace, f, 1.0)
    assert "IF" in message
    assert jitad.jit(lambda x: IF(x > 0, lambda: x, lambda: -x))(-3.0) == 3.0


def test_python_if_inside_a_fun():
    message = raises(jitad.StagingError, jitad.trace, lambda x: FUN(python_if)(x), 1.0)
    assert "IF" in message


def test_recursion_without_out_says_to_pass_out():
    @FUN
    def fact(n):
        return IF(n <= 1, lambda: 1, lambda: n * fact(n - 1))
    message = raises(jitad.StagingError, jitad.trace, lambda n: fact(n), 5)
    assert "out=" in message
    message = raises(jitad.StagingError, lambda: jitad.jit(lambda n: fact(n))(5))
    assert "out=" in message


def test_mutual_recursion_without_out_says_to_pass_out():
    @FUN
    def even(n):
        return IF(n == 0, lambda: True, lambda: odd(n - 1))

    @FUN
    def odd(n):
        return IF(n == 0, lambda: False, lambda: even(n - 1))
    assert "out=" in raises(jitad.StagingError, jitad.trace, lambda n: even(n), 5)


@pytest.mark.parametrize("f", [
    lambda x, n: IF(x > 0, lambda: x, lambda: n),                # f64 vs i64
    lambda x, n: IF(x > 0, lambda: x > 1.0, lambda: x),          # bool vs f64
    lambda x, n: IF(x > 0, lambda: (x, n), lambda: (x, x)),      # inside a tuple
], ids=["f64-i64", "bool-f64", "in-tuple"])
def test_if_branches_of_different_types(f):
    message = raises(jitad.StagingError, jitad.trace, f, 1.0, 2)
    assert "IF" in message and "type" in message


@pytest.mark.parametrize("f", [
    lambda x: IF(x > 0, lambda: (x, x), lambda: x),
    lambda x: IF(x > 0, lambda: (x, x), lambda: [x, x]),
    lambda x: IF(x > 0, lambda: (x, x), lambda: (x, x, x)),
    lambda x: IF(x > 0, lambda: {"a": x}, lambda: {"b": x}),
    lambda x: IF(x > 0, lambda: x, lambda: None),
], ids=["tuple-value", "tuple-list", "2-3", "dict-keys", "value-none"])
def test_if_branches_of_different_structures(f):
    message = raises(jitad.StagingError, jitad.trace, f, 1.0)
    assert "IF" in message and "structure" in message


@pytest.mark.parametrize("f", [
    lambda x, n: WHILE(lambda s: s < 10, lambda s: s * 1.5, n),            # i64 state, f64 body
    lambda x, n: WHILE(lambda s: s[0] < 10, lambda s: s[0] + 1, (n, x)),  # structure
    lambda x, n: FOR(0, n, lambda i, s: s * 0.5, n),                        # i64 state, f64 body
    lambda x, n: FOR(0, n, lambda i, s: (s, s), x),                         # structure
], ids=["while-type", "while-structure", "for-type", "for-structure"])
def test_loop_bodies_must_keep_the_state_type(f):
    raises(jitad.StagingError, jitad.trace, f, 1.0, 3)


# -- ArgumentError: what the compiled function is called with --------------------------

def double_float(x):
    return x * 2.0


def double_int(n):
    return n * 2


GOOD = {double_float: (1.5, 3.0), double_int: (21, 42)}
BAD_CALLS = {
    "too-many": lambda good: (good, good),
    "too-few": lambda good: (),
    "str": lambda good: ("1.0",),
    "bytes": lambda good: (b"1",),
    "object": lambda good: (object(),),
    "list-of-str": lambda good: (["a", "b"],),
    "int-2**63": lambda good: (2**63,),
    "int-below-int64": lambda good: (INT_MIN - 1,),
    "int-2**64": lambda good: (2**64,),
    "uint64-max": lambda good: (np.uint64(2**64 - 1),),
}


def _bad_call_params():
    for fn in GOOD:
        for warm in (False, True):
            for name, make in BAD_CALLS.items():
                yield pytest.param(fn, make, warm,
                                   id=f"{fn.__name__}-{'compiled' if warm else 'fresh'}-{name}")


@pytest.mark.parametrize("fn, make_args, warm", list(_bad_call_params()))
def test_bad_arguments_raise_argument_error(fn, make_args, warm):
    good, expected = GOOD[fn]
    f = jitad.jit(fn)
    if warm:   # the call then goes through the compiled entry first
        assert f(good) == expected
    raises(jitad.ArgumentError, f, *make_args(good))
    assert f(good) == expected   # and the function still works


def test_argument_error_is_a_type_error():
    assert issubclass(jitad.ArgumentError, TypeError)
    assert issubclass(jitad.ArgumentError, jitad.JitadError)
    with pytest.raises(TypeError):
        jitad.jit(double_float)("x")


def test_int64_bounds_are_accepted():
    f = jitad.jit(lambda n: n + 0)
    assert f(INT_MAX) == INT_MAX and f(INT_MIN) == INT_MIN


# -- robustness: nothing crashes the process -------------------------------------------

def run_python(code, timeout=300):
    """Run `code` in a fresh interpreter; it must exit normally. Return its stdout."""
    env = dict(os.environ, JITAD_CACHE_DIR="", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, (f"the child exited with {proc.returncode} (negative: killed by "
                                  f"a signal)\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc.stdout


def test_deep_fun_recursion_completes_or_raises_resource_error():
    out = run_python("""
        import jitad
        from jitad import FUN, IF

        @FUN(out=0)
        def total(n):
            return IF(n <= 0, lambda: 0, lambda: n + total(n - 1))

        f = jitad.jit(lambda n: total(n))
        for depth in (10, 10**5, 10**7):
            try:
                print("ok", depth, f(depth) == depth * (depth + 1) // 2)
            except jitad.ResourceError:
                print("resource", depth)
    """)
    lines = out.split("\n")
    assert lines[0] == "ok 10 True"
    for depth, line in zip((10**5, 10**7), lines[1:]):
        assert line in (f"ok {depth} True", f"resource {depth}"), out


def test_deep_tree_recursion_completes_or_raises_resource_error():
    out = run_python("""
        import numpy as np
        import jitad
        from jitad import TREE

        f = jitad.jit(lambda t: TREE(t, 0.0, lambda node, l, r: l + r + node.value))
        for n in (10**5, 10**6):
            left = np.arange(1, n + 1)
            left[-1] = -1   # a chain: node k's only child is k + 1
            tree = jitad.Tree(left, np.full(n, -1), value=np.ones(n))
            try:
                print("ok", n, f(tree) == n)
            except jitad.ResourceError:
                print("resource", n)
    """)
    for n, line in zip((10**5, 10**6), out.split("\n")):
        assert line in (f"ok {n} True", f"resource {n}"), out


ENDLESS = """
    import json
    import jitad
    from jitad import FUN, IF

    @FUN(out=0.0)
    def forever(x):
        return IF(x != x, lambda: 0.0, lambda: forever(x + 1.0) + 1.0)

    f = jitad.jit(lambda x: forever(x))
    for attempt in range(2):
        try:
            print("returned", f(1.0))
        except jitad.ResourceError as e:
            print("ResourceError", json.dumps(str(e)))
    print("healthy", jitad.jit(lambda x: x + 1.0)(1.0))
"""


def test_endless_fun_recursion_raises_resource_error():
    lines = run_python(ENDLESS).strip().split("\n")
    assert [line.split()[0] for line in lines] == ["ResourceError", "ResourceError", "healthy"], lines
    assert lines[-1] == "healthy 2.0"
    message = json.loads(lines[0].split(" ", 1)[1])
    assert "recurs" in message


def test_resource_error_points_at_the_users_call():
    lines = run_python(ENDLESS).strip().split("\n")
    message = json.loads(lines[0].split(" ", 1)[1])
    assert "threading.py" not in message and "<string>" in message, message


def test_long_while_loop_completes():
    out = run_python("""
        import jitad
        from jitad import WHILE
        f = jitad.jit(lambda n: WHILE(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] + 1.0), (0, 0.0)))
        print(f(3 * 10**8))
    """)
    assert out.strip() == "(300000000, 300000000.0)"


# (name, source of a jitted function, arguments, expected result as NumPy computes it)
DIVISIONS = [
    ("float / 0", "lambda x, y: x / y", (1.0, 0.0), math.inf),
    ("-float / 0", "lambda x, y: x / y", (-1.0, 0.0), -math.inf),
    ("float / -0", "lambda x, y: x / y", (1.0, -0.0), -math.inf),
    ("0.0 / 0", "lambda x, y: x / y", (0.0, 0.0), math.nan),
    ("float % 0", "lambda x, y: x % y", (5.0, 0.0), math.nan),
    ("float // 0", "lambda x, y: x // y", (5.0, 0.0), math.inf),
    ("-float // 0", "lambda x, y: x // y", (-5.0, 0.0), -math.inf),
    ("int / 0", "lambda n, k: n / k", (3, 0), math.inf),
    ("int // 0", "lambda n, k: n // k", (7, 0), 0),
    ("-int // 0", "lambda n, k: n // k", (-7, 0), 0),
    ("int % 0", "lambda n, k: n % k", (7, 0), 0),
    ("0 // 0", "lambda n, k: n // k", (0, 0), 0),
    ("0 % 0", "lambda n, k: n % k", (0, 0), 0),
    ("int // constant 0", "lambda n: n // 0", (7,), 0),
    ("int % constant 0", "lambda n: n % 0", (7,), 0),
    ("int // (n - n)", "lambda n: n // (n - n)", (7,), 0),
    ("INT_MIN // -1", "lambda n, k: n // k", (INT_MIN, -1), INT_MIN),
    ("INT_MIN % -1", "lambda n, k: n % k", (INT_MIN, -1), 0),
    ("INT_MIN // constant -1", "lambda n: n // -1", (INT_MIN,), INT_MIN),
    ("INT_MIN % constant -1", "lambda n: n % -1", (INT_MIN,), 0),
    ("-INT_MIN", "lambda n: -n", (INT_MIN,), INT_MIN),
    ("INT_MAX + 1", "lambda n: n + 1", (INT_MAX,), INT_MIN),
]

NAN, INF = "float('nan')", "float('inf')"
NONFINITE = [
    ("nan + 1", "lambda x: x + 1.0", (NAN,), math.nan),
    ("inf - inf", "lambda x: x - x", (INF,), math.nan),
    ("inf * 0", "lambda x: x * 0.0", (INF,), math.nan),
    ("1 / inf", "lambda x: 1.0 / x", (INF,), 0.0),
    ("exp(inf)", "jitad.exp", (INF,), math.inf),
    ("exp(-inf)", "jitad.exp", ("-" + INF,), 0.0),
    ("exp(nan)", "jitad.exp", (NAN,), math.nan),
    ("log(0)", "jitad.log", ("0.0",), -math.inf),
    ("log(-1)", "jitad.log", ("-1.0",), math.nan),
    ("sqrt(-1)", "jitad.sqrt", ("-1.0",), math.nan),
    ("sqrt(inf)", "jitad.sqrt", (INF,), math.inf),
    ("tanh(inf)", "jitad.tanh", (INF,), 1.0),
    ("sigmoid(-inf)", "jitad.sigmoid", ("-" + INF,), 0.0),
    ("sigmoid(nan)", "jitad.sigmoid", (NAN,), math.nan),
    ("sin(inf)", "jitad.sin", (INF,), math.nan),
    ("abs(-inf)", "jitad.abs", ("-" + INF,), math.inf),
    ("relu(nan)", "jitad.relu", (NAN,), math.nan),
    ("maximum(nan, 1)", "jitad.maximum", (NAN, "1.0"), math.nan),
    ("maximum(1, nan)", "jitad.maximum", ("1.0", NAN), math.nan),
    ("minimum(nan, 1)", "jitad.minimum", (NAN, "1.0"), math.nan),
    ("minimum(1, nan)", "jitad.minimum", ("1.0", NAN), math.nan),
    ("clip(nan)", "lambda x: jitad.clip(x, 0.0, 1.0)", (NAN,), math.nan),
    ("pow(nan, 0)", "lambda x, y: x ** y", (NAN, "0.0"), 1.0),
    ("pow(1, nan)", "lambda x, y: x ** y", ("1.0", NAN), 1.0),
    ("pow(0, -1)", "lambda x, y: x ** y", ("0.0", "-1.0"), math.inf),
    ("pow(-8, 1/3)", "lambda x, y: x ** y", ("-8.0", "1.0 / 3.0"), math.nan),
    ("nan > 0", "lambda x: x > 0.0", (NAN,), False),
    ("nan == nan", "lambda x: x == x", (NAN,), False),
    ("nan != nan", "lambda x: x != x", (NAN,), True),
    ("inf > 1e308", "lambda x: x > 1e308", (INF,), True),
    ("IF on nan", "lambda x: IF(x > 0.0, lambda: 1.0, lambda: 2.0)", (NAN,), 2.0),
    ("where on nan", "lambda x: jitad.where(x == x, x, -1.0)", (NAN,), -1.0),
    ("nan to i64", "lambda x: jitad.convert(x, 'i64')", (NAN,), 0),
    ("nan to bool", "lambda x: jitad.convert(x, 'bool')", (NAN,), True),
    ("-inf to i64", "lambda x: jitad.convert(x, 'i64')", ("-" + INF,), INT_MIN),
    ("WHILE with nan", "lambda x: WHILE(lambda t: t > 1.0, lambda t: t * 0.5, x)", (NAN,), math.nan),
    ("FOR with inf", "lambda x: FOR(0, 5, lambda i, a: a * 2.0 + x, 1.0)", (INF,), math.inf),
    ("FOR with nan", "lambda x: FOR(0, 5, lambda i, a: a + x, 1.0)", (NAN,), math.nan),
]


def run_table(table):
    """Compile and call each entry of `table` in one child; return {name: result}."""
    rows = ",\n".join(f"({name!r}, {src}, ({', '.join(args)}{',' if args else ''}))"
                      for name, src, args, _ in table)
    out = run_python(f"""
        import json
        import jitad
        from jitad import FOR, IF, WHILE
        results = {{}}
        for name, fn, args in [
{textwrap.indent(rows, ' ' * 12)}
        ]:
            results[name] = jitad.jit(fn)(*args)
        print(json.dumps(results))
    """)
    return json.loads(out.strip().split("\n")[-1])


def check_table(table, results):
    wrong = []
    for name, _, _, expected in table:
        got = results[name]
        if isinstance(expected, float) and math.isnan(expected):
            ok = isinstance(got, float) and math.isnan(got)
        else:
            ok = got == expected and type(got) is type(expected)
            if ok and isinstance(expected, float) and expected == 0:
                ok = math.copysign(1, got) == math.copysign(1, expected)
        if not ok:
            wrong.append(f"{name}: got {got!r}, expected {expected!r}")
    assert not wrong, "\n".join(wrong)


def test_division_by_zero_and_int_overflow_do_not_crash():
    table = [(name, src, tuple(map(repr, args)), expected) for name, src, args, expected in DIVISIONS]
    check_table(table, run_table(table))


def test_expected_division_results_are_numpys():
    with np.errstate(all="ignore"):
        ops = {"/": np.true_divide, "//": np.floor_divide, "%": np.mod}
        for name, src, args, expected in DIVISIONS:
            if len(args) == 2 and src.startswith("lambda x, y") or src.startswith("lambda n, k"):
                op = ops[src.split()[-2]]
                dtype = np.float64 if isinstance(args[0], float) else np.int64
                got = op(dtype(args[0]), dtype(args[1]))
                assert (math.isnan(got) and math.isnan(expected)) or got == expected, name


def test_nan_and_inf_propagate():
    check_table(NONFINITE, run_table(NONFINITE))
