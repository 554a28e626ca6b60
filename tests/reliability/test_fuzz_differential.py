"""The differential fuzzer's short deterministic profile (`fuzz.py`: programs over `np`
and `lax` run by jitad and by JAX under call, jit, grad, vmap and scan), and checks that
its oracle does catch what it must."""
import numpy as onp
import pytest
from hypothesis import HealthCheck, given, settings

import jitad
import jitad.numpy as jnp

from . import fuzz
from .fuzz import ORACLE, Program


@settings(derandomize=True, max_examples=10, deadline=None, database=None, phases=("generate",),
          suppress_health_check=list(HealthCheck))
@given(fuzz.programs(max_ops=4))
def test_jitad_agrees_with_jax_on_generated_programs(program):
    new = [f for f in fuzz.check(program) if not f.known]
    assert not new, "\n\n".join(f.reproducer() for f in new)


def program(lines, *args, result=None):
    p = Program([onp.asarray(a) for a in args])
    for k, text in enumerate(lines):
        p.lines.append((f"v{k} = {text}", f"v{k} = {text}", "exact", 1))
    p.result = result or f"v{len(lines) - 1}"
    return p


def test_the_oracle_sees_wrong_values_and_nan_places():
    budget, scale = 4, 1.0
    assert fuzz.compare(onp.array([1.0, onp.nan]), onp.array([1.0 + 1e-15, onp.nan]), budget, scale) == ""
    assert "NaN" in fuzz.compare(onp.array([1.0, 0.0]), onp.array([1.0, onp.nan]), budget, scale)
    assert "ulps" in fuzz.compare(onp.array([1.0]), onp.array([1.0 + 1e-12]), budget, scale)
    assert "dtype" in fuzz.compare(onp.array([1]), onp.array([1.0]), budget, scale)
    assert "shape" in fuzz.compare(onp.zeros(2), onp.zeros(3), budget, scale)
    assert fuzz.compare(onp.array([1.0, onp.inf]), onp.array([1.0, onp.inf]), budget, scale) == ""
    assert fuzz.compare(onp.array([onp.inf]), onp.array([-onp.inf]), budget, scale) != ""


def test_a_value_where_jax_raises_is_a_finding():
    p = program(["np.sin(x0)"], onp.ones(2))
    raised = ("error", TypeError("no"))
    assert "where JAX raises" in fuzz._judge(p, "jit", ("ok", onp.ones(2)), raised, 4, 1.0, None)
    assert fuzz._judge(p, "jit", ("error", fuzz.JitadError("refused", where=False)), raised, 4, 1.0, None) == ""
    # a non-jitad exception of another class than JAX's, in staged code, is a finding
    assert fuzz._judge(p, "jit", ("error", KeyError("x")), raised, 4, 1.0, None) != ""


def test_a_python_branch_must_raise_under_jit():
    p = program(["np.sin(x0)"], onp.ones(2))
    p.lines.append(("if float(np.sum(v0)) > 0:\n    v1 = v0\nelse:\n    v1 = -v0",) * 2 + ("exact", 1))
    assert "must raise StagingError" in fuzz._judge(p, "jit", ("ok", onp.ones(2)), ("error", TypeError()), 4, 1.0, None)


def test_programs_agree_end_to_end():
    p = program(["np.log(x0)", "np.sum(v0, axis=0, keepdims=True)", "v1 * x0"], onp.array([1.0, -1.0, 0.0, 2.0]))
    assert fuzz.check(p, ("jit", "grad")) == []
    # a wrong value is caught: the JAX side computes min where jitad computes max
    p.args = [onp.array([1.0, 2.0, 3.0])]
    p.lines[1] = ("v1 = np.max(v0, axis=0, keepdims=True)", "v1 = np.min(v0, axis=0, keepdims=True)", "exact", 1)
    assert [f.transform for f in fuzz.check(p, ("jit", "vmap"))] == ["jit", "vmap"]


def test_reproducers_run():
    p = program(["np.sqrt(x0)", "np.cumsum(v0, axis=0)"], onp.array([0.0, 4.0, onp.nan]))
    script = fuzz.Finding("jit", "example", p).reproducer()
    env = {}
    exec(compile(script, "<reproducer>", "exec"), env)
    onp.testing.assert_array_equal(env["f"](env["x0"]), [0.0, 2.0, onp.nan])



@pytest.mark.parametrize("transform", ["vmap", "scan_grad"])
def test_reproducers_of_transformations_run(transform):
    p = program(["np.sin(x0) * x1"], onp.array([0.5, 2.0]), onp.array(3.0))
    env = {}
    exec(compile(fuzz.Finding(transform, "example", p).reproducer(), "<reproducer>", "exec"), env)


def test_python_branches_end_to_end():
    # eagerly both take the branch; under jit and vmap jitad raises StagingError; under grad
    # the gradient of the branch taken, as JAX's (StagingError there is a finding)
    p = program(["np.sin(x0)"], onp.array([0.5, 2.0]))
    p.lines.append(("if float(np.sum(v0)) > 0:\n    v1 = v0 * 2.0\nelse:\n    v1 = -v0",) * 2 + ("exact", 1))
    p.result = "v1"
    assert fuzz.check(p, ("plain", "jit", "vmap", "grad")) == []
    assert fuzz.decisions_of(p) == [True]
    assert "if True:" in p.source("jax", [True])
    raised = ("error", fuzz.StagingError("no"))
    assert fuzz._judge(p, "grad", raised, ("ok", onp.ones(2)), 4, 1.0, [True]) != ""
    assert fuzz._judge(p, "scan_grad", raised, ("ok", onp.ones(2)), 4, 1.0, [True]) == ""


def test_subnormal_arguments_are_judged_again_flushed():
    # XLA flushes 5e-324 to 0 (a tie with 0.0 in `max`: gradient 0.5 each); jitad keeps it
    p = program(["np.maximum(x0, 0.0)"], onp.array([5e-324, 1.0]))
    assert fuzz._flushed(p).args[0].tolist() == [0.0, 1.0]
    assert fuzz._flushed(program(["x0"], onp.array([1.0]))) is None
    assert fuzz.check(p, ("grad",)) == []


def test_the_widened_generators_write_runnable_programs():
    # (each new kind of line: JAX's `.at` modes, a staged `.at` index, reduction keywords, lax ints)
    p = program(["np.asarray(x0).at[onp.array([0, 5], dtype='int64')].get(mode='fill', fill_value=2.0)",
                 "np.asarray(x0).at[onp.array([-4], dtype='int64')].add(1.0, mode='clip')",
                 "np.sum(x0, axis=None, where=onp.array([True, False, True]), initial=1.0, dtype=np.float32)",
                 "lax.rem(x1, np.full((3,), 0, dtype=x1.dtype))", "lax.clz(lax.shift_right_logical(x1, x1))",
                 "np.max(x0, axis=0, where=x0 > 1.0, initial=-1.0)", "lax.cummax(lax.population_count(x1), axis=0)",
                 "lax.reduce_max(lax.bitwise_xor(x1, v3), (0,))"],
                onp.array([1.0, 2.0, 3.0]), onp.array([7, -7, 2]))
    p.lines.append(("v8 = np.asarray(x0).at[x1].max(2.0)", "v8 = np.asarray(x0).at[np.where(x1 < 0, x1 + 3, x1)]"
                    ".max(2.0, mode='clip')", "sum", 3))
    p.features.add("staged_index")
    assert not fuzz.applies(p, "plain")
    for result in ("v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8"):
        p.result = result
        assert fuzz.check(p, ("jit", "vmap")) == [], result


def test_branch_decisions_stop_at_the_line_that_raises():
    # (a program that ends in an error: the decisions are those before it, not a fuzzer error)
    p = program(["np.cumsum(x0, axis=0)", "v0 @ onp.ones(1)"], onp.array([0.5, 2.0]), result="v0")
    p.lines.insert(0, ("if float(np.sum(x0)) > 0:\n    v9 = x0 * 2.0\nelse:\n    v9 = -x0",) * 2 + ("exact", 1))
    p.branches.append("float(np.sum(x0)) > 0")
    assert fuzz.decisions_of(p) == [True]
    assert fuzz.check(p, ("grad",)) == []


def test_hypots_derivative_is_judged_scaled():
    # (JAX's own is -inf at (1e-300, 1e-300), NaN at (1e-300, 0) and at (inf, 1))
    p = program(["np.hypot(x0, 0.0)", "np.hypot(x0, x0)"], onp.array([1e-300, onp.inf, 0.0, -2.0]), result="v1")
    p.lines = [(text, text.replace("np.hypot", "hypot_scaled"), kind, n) for text, _, kind, n in p.lines]
    assert fuzz.check(p, ("grad",)) == []
    p.result = "v0"
    assert fuzz.check(p, ("grad",)) == []
    assert fuzz.check(program(["np.hypot(x0, 0.0)"], onp.array([1e-300])), ("grad",)) != []   # JAX's NaN


def test_bool_arithmetic_without_updates_is_left_out():
    # JAX skips its bool check where no update is made (an empty array or index); jitad refuses
    # `.at[].add`/`.multiply` into bools always
    x = fuzz.Value("x0", (3,), "bool")
    assert fuzz._bool_arith_on_empty(x, "multiply", 0) and fuzz._bool_arith_on_empty(fuzz.Value("x0", (0,), "bool"), "add")
    assert not fuzz._bool_arith_on_empty(x, "multiply", 2) and not fuzz._bool_arith_on_empty(x, "max", 0)
    p = program(["np.asarray(x0).at[onp.array([], dtype='int64')].multiply(True)"], onp.array([True, False]))
    assert isinstance(fuzz.run("jitad", p, "jit")[1], fuzz.JitadError) and fuzz.run("jax", p, "jit")[0] == "ok"


def test_a_clipped_update_is_judged_at_the_clamped_position():
    # JAX's gradient of `.min(mode="clip")` treats a clamped position as not updated (1 at x[1]
    # here, where the result is the update); the JAX side is given the clamped indices
    p = program(["np.asarray(x0).at[onp.array([0, 5], dtype='int64')].min(-1.0, mode='clip')"],
                onp.array([onp.inf, 1.0]))
    assert fuzz.check(p, ("grad",)) != []
    text = p.lines[0][0]
    p.lines[0] = (text, text.replace("[0, 5]", "[0, 1]"), "sum", 2)
    assert fuzz.check(p, ("plain", "jit", "grad", "vmap")) == []


def test_take_from_an_empty_axis_is_judged_by_numpys_shape():
    # JAX's take returns the array's shape (0, 0, 1) here, NumPy's rule and jitad (3, 0, 0, 1)
    p = program(["np.take(x0, onp.array([], dtype='int64').reshape((3, 0)), axis=0)"], onp.zeros((0, 0, 1)))
    assert fuzz.check(p, ("jit",)) != []
    p.lines[0] = (p.lines[0][0], "v0 = x0[onp.array([], dtype='int64').reshape((3, 0))]", "exact", 1)
    assert fuzz.check(p, ("plain", "jit", "vmap")) == []


def test_jvp_findings_are_judged_in_the_programs_precision_and_as_eager_code():
    # (float32 rounding of JAX's tangent of a constant; the other argument indexed by NumPy
    # out of range: jvp called from Python leaves it a NumPy array)
    assert fuzz.check(program(["np.abs(x0)", "np.arctan2(v0, x0)"], onp.array(2.108, dtype="float32")), ("jvp",)) == []
    p = program(["x1[onp.array([0, 3], dtype='int64')]"], onp.array(-7.5), onp.array([1.0, 2.0], dtype="float32"))
    p.features.add("gather_out_of_range")
    assert fuzz.check(p, ("jvp",)) == []


def test_an_extremum_over_an_empty_axis_has_derivative_zero():
    # max(x, where=..., initial=1.0) over nothing is the constant 1.0: JAX's tangent is NaN (0 / 0)
    p = program(["np.max(x0, axis=0, where=onp.array([], dtype='bool'), initial=1.0)"], onp.zeros((0,)))
    assert fuzz.check(p, ("jvp",)) != []
    p.features.add("empty_extremum")
    assert fuzz.check(p, ("jvp", "grad", "jit")) == []


def test_arccosh_divide_and_square_are_judged_by_their_exact_derivatives():
    # JAX's derivative of arccosh is 0 past 1e154 (x² - 1 overflows; jitad's 1 / x survives a
    # factor 1e300) and a number below -1 (value NaN); of x / y in y, -x / y² is -inf at 1e-300;
    # of square in float32, g (2x) is NaN where 2x overflows and g is 0
    cases = [(["np.multiply(x0, 1e300)", "np.arccosh(v0)"], onp.array([2.0, -7.2, 1.0, onp.inf]), 1, "arccosh_exact",
              "v0"),
             (["np.divide(x0, x0)"], onp.array([1e-300, 1e300, 3.0]), 0, "divide_by_quotient", "x0, x0"),
             (["np.square(x0)", "np.arccosh(v0)"], onp.array([3.4e38, 2.0], dtype="float32"), 0, "square_as_product",
              "x0")]
    for lines, x, k, rule, operands in cases:
        p = program(lines, x)
        assert fuzz.check(p, ("grad",)) != [], rule
        text = ORACLE[rule].format(x=operands, a="x0", b="x0")
        p.lines[k] = (p.lines[k][0], f"v{k} = {text}", "math", 1)
        if rule == "square_as_product":
            p.lines[1] = (p.lines[1][0], "v1 = arccosh_exact(v0)", "math", 1)
        assert fuzz.check(p, ("grad", "jvp", "jit", "scan_grad")) == [], rule


def test_int32_math_is_judged_in_float64():
    # NumPy's sin of int32 is float64 (JAX's float32 rounds 2**31 - 1 to 2**31): the JAX side converts
    x = onp.array([1, 2147483647], dtype="int32")
    p = program(["np.sin(x0)"], x)
    assert fuzz.check(p, ("plain",)) != []
    p.lines[0] = (p.lines[0][0], "v0 = np.sin(x0.astype(np.float64))", "math", 1)
    assert fuzz.check(p, ("plain", "jit")) == []


def test_cumprods_derivatives_beyond_the_float_range_are_judged_narrowly():
    # cumprod's tangent at an overflowed running product: NaN where JAX's is -inf (the order of
    # a sum of infinite terms: ORACLE); the same program with finite values agrees, and a wrong
    # value is still a finding
    p = program(["np.cumprod(x0, axis=0)"], onp.array([-1.0, 3.4e38, -onp.inf], dtype="float32"))
    assert fuzz.check(p, ("jvp",)) != []
    p.features.add("cumprod")
    assert fuzz.check(p, ("jvp", "grad", "scan_grad")) == []
    p.args = [onp.array([-1.0, 3.0, 2.0], dtype="float32")]
    assert fuzz.check(p, ("jvp", "grad")) == []
    p.lines[0] = (p.lines[0][0], "v0 = np.cumsum(x0, axis=0)", "sum", 3)   # (a wrong value)
    assert [f.transform for f in fuzz.check(p, ("jit", "grad"))] == ["jit", "grad"]


def test_known_entries_are_reported_apart_under_their_exact_condition(monkeypatch):
    # (KNOWN is empty today: an entry names a program feature and a condition)
    p = program(["np.sin(x0)"], onp.array([0.5, 2.0]))
    p.lines[0] = (p.lines[0][0], "v0 = np.cos(x0)", "math", 1)
    p.features.add("sin")
    monkeypatch.setitem(fuzz.KNOWN, "sin", ("sin_grad", "a sin bug"))
    monkeypatch.setitem(fuzz.KNOWN_CONDITIONS, "sin_grad", lambda program, t, mine, theirs: t == "grad")
    assert [(f.transform, f.known) for f in fuzz.check(p, ("jit", "grad"))] == [("jit", ""), ("grad", "a sin bug")]


def test_a_tangent_where_the_value_is_nan_is_not_compared():
    # the variance of nothing is NaN; JAX's tangent there is 0, jitad's NaN
    assert fuzz.check(program(["np.var(x0, axis=None)"], onp.zeros((0, 1, 1))), ("jvp",)) == []


def test_debug_nans_must_name_the_primitive_and_line(monkeypatch):
    # log of -1: a NaN in the value and in the gradient; with jax_debug_nans on, jitad stops both
    p = program(["np.log(x0)", "np.sum(v0 * x0)"], onp.array([2.0, -1.0]))
    for t in fuzz.NAN_CHECKED:
        mine = fuzz.run("jitad", p, t)
        assert onp.isnan(mine[1]).any() and fuzz._debug_nans(p, t, mine) == ""
    assert not fuzz.jitad.config.read("jax_debug_nans")
    # a line of constants only runs eagerly under jit too, and its error names the line so
    p = program(["np.asarray(onp.array([2.0]))", "np.arccos(v0)"], onp.array([-0.0]))
    assert fuzz.check(p, ("jit",)) == []
    # a line after a Python `if` (four lines of the source) is still one of the program's
    p = program(["np.sin(x0)"], onp.array(-0.5))
    p.lines.append(("if float(np.sum(x0)) > 0:\n    v1 = x0 * 2.0\nelse:\n    v1 = -x0",) * 2 + ("exact", 1))
    p.lines.append(("v2 = np.power(x0, x0)", "v2 = np.power(x0, x0)", "pow", 1))
    p.branches, p.result = ["float(np.sum(x0)) > 0"], "v2"
    assert fuzz.check(p, ("grad",)) == []
    p = program(["np.asarray(onp.array([2.0]))", "np.arccos(v0)"], onp.array([-0.0]))
    # a call that returns the NaN, or raises without the line, is a finding
    mine = fuzz.run("jitad", p, "jit")
    monkeypatch.setattr(fuzz, "run", lambda *a: mine)
    assert "without raising" in fuzz._debug_nans(p, "jit", mine)
    monkeypatch.setattr(fuzz, "run", lambda *a: ("error", fuzz.NonFiniteError("`log` produced a NaN")))
    assert "naming the primitive" in fuzz._debug_nans(p, "jit", mine)


def test_extrema_select_their_cotangent_and_fmax_ties_split():
    # x · clip(x) at x = inf: JAX's clip multiplies the infinite cotangent by its 0 mask (NaN),
    # jitad's selects (0); fmax(x, 1.0) at the tie x = 1: jitad 0.5 (as maximum's), JAX 0
    p = program(["np.clip(x0, -2, 2)", "x0 @ v0"], onp.array([-8.4, onp.inf], dtype="float32"))
    assert fuzz.check(p, ("grad",)) != []
    p.features.add("clip")
    assert fuzz.check(p, ("grad", "jvp", "scan_grad")) == []
    p = program(["np.fmax(x0, 1.0)"], onp.array([1.0, onp.nan, 3.0]))
    assert fuzz.check(p, ("grad",)) != []
    p.lines[0] = (p.lines[0][0], "v0 = " + ORACLE["fmax_ties_split"].format(a="x0", b="1.0", extremum="maximum"),
                  "exact", 1)
    assert fuzz.check(p, ("grad", "jvp", "jit")) == []


def test_prod_has_derivative_zero_where_a_zero_meets_an_overflow():
    # the product of the others of 0.1 is 0 · -1.5 · 1.8e308: 0 (jitad), JAX's inf · 0 is NaN
    p = program(["np.prod(x0, axis=0, initial=0.0)"], onp.array([[-1.5], [0.1], [1.7976931348623157e308]]))
    assert fuzz.check(p, ("grad",)) != []
    p.features.add("prod")
    assert fuzz.check(p, ("grad", "jvp")) == []
    # in scan's second lane the other factors of 0.1 overflow beside the initial 0: jitad's 0, as JAX's
    assert fuzz.check(p, ("scan_grad", "vmap")) == []


def test_a_staged_index_is_plain_in_a_plain_call_and_in_jvp():
    # jvp from Python leaves the other arguments NumPy's: `.at[x1]` out of range is dropped there
    p = program(["np.asarray(x0).at[x1].set(0.5)"], onp.array([[89.0]]), onp.array(1, dtype="int32"))
    p.features.add("staged_index")
    assert [t for t in fuzz.TRANSFORMS if fuzz.applies(p, t)] == ["jit", "grad", "vmap", "scan", "scan_grad"]


def test_arguments_near_the_smallest_normal_are_judged_again_flushed():
    # JAX's derivative of arctan2(x, log x) at the smallest normal drops x * (1/x): its term
    # x / (x² + log² x) is subnormal and XLA flushes it; jitad's keeps it (exact: -0.0014136317078763544...)
    tiny = onp.finfo(onp.float64).tiny
    p = program(["np.log(x0)", "np.arctan2(x0, v0)"], onp.array([tiny]), result="v1")
    assert fuzz._flushed(p).args[0].tolist() == [0.0]
    assert fuzz._flushed(program(["x0"], onp.array([1e-300]))) is None   # (further off: compared as it is)
    assert fuzz.check(p, ("grad",)) == []
    assert abs(jitad.grad(lambda x: jnp.arctan2(x, jnp.log(x)))(tiny) / -0.0014136317078763544 - 1) < 1e-12
