"""The model-shaped profile of the differential fuzzer (`fuzz_models.py`): a few fixed cases
agree with JAX on values and gradients with every path compiled, and its oracle catches what
it must."""
import collections

import numpy as onp
import pytest

from jitad.ir import rows

from . import fuzz_models
from .fuzz_models import Model, check, compare, program

FAST = [85, 144]   # small cases: a one-hot product and a gather (masked row adds, gathered reads read apart);
#                   a 3-step FOR, a fori_loop and a tiled concatenation in float32 (leaving state tables)
SLOW = [11, 36, 53, 79, 95, 113, 126, 188]   # cases of every regime, the gathers, scatters and loops among
#                   them (tens of seconds each)


@pytest.mark.parametrize("seed", FAST)
def test_fixed_model_cases_agree_with_jax(seed):
    model = program(seed)
    assert check(model, ["value_and_grad", "vmap"]) == [], model.source()


@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW)
def test_more_model_cases_agree_with_jax_under_every_transformation(seed):
    model = program(seed)
    assert check(model) == [], model.source()


def test_cases_are_their_seeds():
    a, b = program(7), program(7)
    assert a.source() == b.source() and all(onp.array_equal(x, y) for x, y in zip(a.args, b.args))
    assert program(8).source() != a.source()


def test_the_oracle_sees_nan_and_wrong_gradients():
    ok, names = [onp.ones(3), onp.arange(3.0)], ["value", "d/dx0"]
    assert compare(ok, [onp.ones(3), onp.arange(3.0) + 1e-12], "float64") == ""
    assert "NaN" in compare([onp.ones(3), onp.array([0.0, onp.nan, 2.0])], ok, "float64")
    assert "d/dx0" in compare([onp.ones(3), onp.array([0.0, 1.0, 2.5])], ok, "float64", names)
    assert compare([onp.ones(3, onp.float32), onp.arange(3.0, dtype=onp.float32) * (1 + 1e-6)], ok, "float32") == ""
    assert "shape" in compare([onp.ones(2)], ok, "float64")


def test_a_wrong_engine_result_is_a_finding(monkeypatch):
    """jitad's side computing something else (its `tanh` a `sin`) disagrees under every transformation."""
    model = Model("float64", [onp.linspace(-1.0, 1.0, 12).reshape(3, 4)], [("v0", "np.tanh(x0) * x0", (3, 4))], "v0")
    assert check(model, ["jit", "value_and_grad"]) == []
    monkeypatch.setitem(fuzz_models.SIDES, "jitad", fuzz_models.SIDES["jitad"][:1] + (_Sin(),)
                        + fuzz_models.SIDES["jitad"][2:])
    assert [t for t, _ in check(model, ["jit", "value_and_grad"])] == ["jit", "value_and_grad"]


class _Sin:
    def __getattr__(self, name):
        import jitad.numpy
        return jitad.numpy.sin if name == "tanh" else getattr(jitad.numpy, name)


def test_pass_coverage_counts_the_passes_that_change_a_program():
    fired = collections.Counter()
    with fuzz_models.pass_coverage(fired):
        model = Model("float64", [onp.linspace(-1.0, 1.0, 40).reshape(5, 8)],
                      [("v0", "np.tanh(x0) * 2.0 + 1.0", (5, 8))], "v0")
        assert check(model, ["jit"]) == []
    assert fired["fuse"] >= 1


def test_coverage_sees_attribute_rewrites_and_the_lowering():
    """A gather read in a loop (a pass changing only attributes: `apart_reads`), a loop last
    whose results the gradient does not read (its last step dropped) and its leaving states."""
    fired = collections.Counter()
    x = onp.linspace(-1.0, 1.0, 40).reshape(5, 8)
    model = Model("float64", [x, onp.array([4, 0, -1, 2, 2]), x * 0.5],
                  [("v0", "np.tanh(x0[x1]) * 2.0 + x0", (5, 8)),
                   ("v1", "FOR(0, 3, lambda i, c: c + 0.1 * (x2 * c - c * c * c), v0, checkpoints=None)", (5, 8))],
                  "v1")
    pipeline, scratch = list(fuzz_models.passes.PIPELINE), rows._scratch
    with fuzz_models.pass_coverage(fired):
        assert check(model, ["jit_grad"]) == []
    for name in ("gathered_reads", "apart_reads", "dead_last_steps", "state_tables_leaving"):
        assert fired[name] >= 1, (name, fired)
    assert fuzz_models.passes.PIPELINE == pipeline and rows._scratch is scratch   # all put back


def test_float32_is_judged_against_jax_in_float64():
    truth = [onp.array([1.0, 2.0]), onp.array([0.0, 0.0])]   # a value, and a gradient that is 0 exactly
    jax32 = [truth[0] + 1e-7, onp.array([1e-5, 0.0])]
    names = ["value", "d/dx0"]
    assert fuzz_models._beyond_float32([truth[0] + 2e-7, onp.array([-2e-5, 0.0])], jax32, truth, names) == ""
    assert "d/dx0" in fuzz_models._beyond_float32([truth[0], onp.array([0.5, 0.0])], jax32, truth, names)
    assert "value" in fuzz_models._beyond_float32([truth[0] * 1.01, truth[1]], jax32, truth, names)
