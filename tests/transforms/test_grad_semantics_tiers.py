"""Tiered execution of `grad` called from Python: a path's first calls run its program
through the NumPy interpreter, LLVM compiles it once interpreting has cost about a compile;
both tiers give the same results (to a few ulps) with the same guards, draws and effects.
And what lets a fresh function of the same code skip the trace: jitad's own closures and
`primitive`s keyed by what they are, read arrays pinned by their values."""
import autograd
import autograd.numpy as anp
from autograd.extend import defvjp as adefvjp, primitive as aprimitive
import numpy as np
import pytest

import jitad
from jitad import dispatch
from jitad.extend import defvjp, primitive
from jitad.lower import runtime

from .test_grad_semantics import compiles


@pytest.fixture
def tiering():
    """Set `jitad_tiering` for the test; "auto" again after it."""
    yield lambda value: jitad.config.update("jitad_tiering", value)
    jitad.config.update("jitad_tiering", "auto")


def program(m):
    """Guards, a product, indexing (slot adds in reverse mode) and transcendental functions."""
    def f(w, x, idx):
        h = m.tanh(m.dot(x, w))
        if m.sum(h) > 0:
            h = h * 2.0
        return m.sum(m.log1p(h[idx] ** 2)) + m.sum(m.exp(-w ** 2))
    return f


X = np.random.RandomState(0).randn(6, 4)
IDX = np.array([0, 2, 2, 5])


@pytest.mark.parametrize("w", [np.array([0.3, -0.1, 0.2, 0.5]), np.array([-0.4, 0.1, -0.3, -0.2])])
def test_both_tiers_agree_with_autograd_and_each_other_to_a_few_ulps(tiering, w):
    want = autograd.grad(program(anp))(w, X, IDX)
    got = {}
    for tier in ("interpret", "compile"):
        tiering(tier)
        got[tier] = np.asarray(jitad.grad(program(jitad))(w, X, IDX))
        assert type(jitad.grad(program(jitad))(w, X, IDX)) is runtime._ARRAY_SUBTYPE[0]   # as compiled code gives
    np.testing.assert_allclose(got["interpret"], want, rtol=1e-13)
    assert np.max(np.abs(got["interpret"] - got["compile"]) / np.spacing(np.abs(want))) <= 8


def test_auto_interprets_first_then_compiles_once(tiering, monkeypatch):
    tiering("auto")
    monkeypatch.setattr(dispatch, "compile_budget", lambda program: 0.0)   # compile at the second call
    g = jitad.value_and_grad(program(jitad))
    w = np.array([0.3, -0.1, 0.2, 0.5])
    before = compiles()
    first = g(w, X, IDX)
    assert compiles() == before and g._last.compiled is None   # interpreted: nothing compiled
    second = g(w, X, IDX)
    assert g._last.compiled is not None
    third = g(w, X, IDX)
    assert compiles() - before <= 1
    assert type(first[0]) is type(second[0]) is float
    for a, b in zip(first, second):
        np.testing.assert_allclose(a, b, rtol=1e-14)
    np.testing.assert_array_equal(second[1], third[1])


def test_the_cleanup_passes_run_before_the_first_interpreted_call(tiering):
    # (a program run again, each path called once a run, pays them in its first run)
    tiering("auto")
    w = np.array([0.3, -0.1, 0.2, 0.5])
    g = jitad.grad(program(jitad))
    got = g(w, X, IDX)
    code = g._last.code
    assert code.compiled is None and code.cleaned and code.calls == 1
    np.testing.assert_allclose(got, autograd.grad(program(anp))(w, X, IDX), rtol=1e-13)


def test_the_budget_bounds_the_compiles_of_a_long_loop(tiering, monkeypatch):
    tiering("auto")
    monkeypatch.setattr(dispatch, "compile_budget", lambda program: 0.0)   # (each path compiles at its second call)

    def f(m):
        return lambda x: m.sin(x) * x if x > 0 else -3.0 * x ** 2
    g, ga = jitad.grad(f(jitad)), autograd.grad(f(anp))
    before = compiles()
    xs = [(-1.0) ** i * (0.5 + i / 1000) for i in range(1000)]
    np.testing.assert_allclose([g(x) for x in xs], [ga(x) for x in xs], rtol=1e-13)
    assert compiles() - before <= 2   # at most one per path
    assert all(p.compiled is not None for key, paths in dispatch._ENTRIES.items() for p in paths
               if key[2] == dispatch.function_key(f(jitad))[0])   # both were called enough to compile


def test_the_interpreter_never_writes_into_an_argument(tiering):
    tiering("interpret")
    x = np.arange(5.0)
    idx = np.array([1, 1, 3])

    def f(x):
        return jitad.sum(x[idx] ** 2) + jitad.sum(x)
    g = jitad.grad(f)(x)
    np.testing.assert_array_equal(x, np.arange(5.0))
    np.testing.assert_allclose(g, [1.0, 5.0, 1.0, 7.0, 1.0])


def test_auto_compiles_at_once_what_the_interpreter_should_not_run(tiering):
    tiering("auto")
    before = compiles()

    def loop(x):
        return jitad.FOR(0, 3, lambda i, s: s * x + 1.0, x)   # an iteration: a Python call per node
    assert jitad.grad(loop)(0.5) == pytest.approx(4 * 0.5 ** 3 + 2 * 0.5 + 1.0)   # d/dx (x^4 + x^2 + x + 1)
    assert compiles() > before


def test_the_setting_takes_its_three_values_only():
    with pytest.raises(jitad.errors.ConfigError, match="jitad_tiering"):
        jitad.config.update("jitad_tiering", "fast")
    assert jitad.config.jitad_tiering == "auto"


# -- a fresh function of the same code, found without a trace -----------------------------

def test_a_fresh_elementwise_grad_finds_its_path(traces):
    x = np.linspace(-2.0, 2.0, 7)
    tanh = lambda x: (1.0 - jitad.exp(-2 * x)) / (1.0 + jitad.exp(-(2 * x)))   # noqa: E731
    first = jitad.elementwise_grad(jitad.elementwise_grad(tanh))(x)
    made = len(traces)
    again = jitad.elementwise_grad(jitad.elementwise_grad(tanh))(x)   # fresh closures of jitad's wrapper
    assert len(traces) == made
    np.testing.assert_array_equal(first, again)
    atanh = lambda x: (1.0 - anp.exp(-2 * x)) / (1.0 + anp.exp(-(2 * x)))   # noqa: E731
    np.testing.assert_allclose(first, autograd.elementwise_grad(autograd.elementwise_grad(atanh))(x), rtol=1e-12)


def _primitive(m, defv, scale):
    @m
    def cube(x):
        return x ** 3
    defv(cube, lambda ans, x: lambda g: g * scale * x ** 2)   # (a wrong rule when scale != 3: told apart)
    return cube


def test_a_fresh_primitive_is_keyed_by_its_function_and_rules(traces):
    x = np.array([0.5, -1.0])
    grads = []
    for scale in (3.0, 3.0, 5.0):
        cube = _primitive(primitive, defvjp, scale)
        made = len(traces)
        grads.append(jitad.grad(lambda x: jitad.sum(cube(x)))(x))
        grads[-1] = (grads[-1], len(traces) - made)
    want = [autograd.grad(lambda x: anp.sum(c(x)))(x)
            for c in (_primitive(aprimitive, adefvjp, s) for s in (3.0, 3.0, 5.0))]
    for (got, _), w in zip(grads, want):
        np.testing.assert_allclose(got, w, rtol=1e-14)
    assert grads[1][1] == 0 and grads[2][1] > 0   # the same rules: no trace; another rule: traced


def test_a_read_array_is_pinned_by_its_values(traces):
    def model(data):
        return lambda r: jitad.sum(jitad.log(r + (data + 1)))   # `data + 1`: a constant computed from a read array
    data = np.arange(4.0)
    assert jitad.grad(model(data))(0.5) == pytest.approx(np.sum(1 / (1.5 + data)))
    made = len(traces)
    assert jitad.grad(model(np.arange(4.0)))(0.5) == pytest.approx(np.sum(1 / (1.5 + data)))   # equal values
    assert len(traces) == made
    data[2] = 10.0   # changed in place: its constant is stale, traced again
    assert jitad.grad(model(data))(0.5) == pytest.approx(np.sum(1 / (1.5 + data)))
    assert len(traces) > made
    made = len(traces)
    signed = np.array([-0.0, 1.0, 10.0, 3.0])   # equal values, other bytes (-0.0): compared as values
    assert jitad.grad(model(signed))(0.5) == pytest.approx(np.sum(1 / (1.5 + data)))
    assert len(traces) == made


def test_a_function_read_twice_keys_a_fresh_copy_alike(traces):
    def make():
        def helper(x):
            return jitad.sin(x) * x

        def square(x):
            return helper(x) ** 2
        return lambda x: helper(x) + square(x)   # `helper` met twice in the walk: in both closures
    assert jitad.grad(make())(0.4) == pytest.approx(autograd.grad(lambda x: anp.sin(x) * x + (anp.sin(x) * x) ** 2)(0.4))
    made = len(traces)
    jitad.grad(make())(0.5)
    assert len(traces) == made
