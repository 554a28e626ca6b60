"""`grad` and its kin called from Python mean what they mean under autograd (Python
decisions on the call's values, arguments of any type, host random numbers drawn at every
call, closures and globals read at every call), at compiled speed: checked against
autograd on the same programs, and the compiles counted."""
import random
import time
import warnings

import autograd
import autograd.numpy as anp
from autograd.tracer import getval
import numpy as np
import pytest

import jitad
from jitad import dispatch
from jitad.lower import runtime


def compiles():
    """LLVM compiles (and disk-cache loads) in this process so far."""
    return runtime.STATS["compiled"] + runtime.STATS["loaded"]


@pytest.fixture(autouse=True, params=["interpret", "compile"])
def tier(request):
    """Each test runs with paths interpreted (the first tier) and compiled before their first call."""
    jitad.config.update("jitad_tiering", request.param)
    yield request.param
    jitad.config.update("jitad_tiering", "auto")


def piecewise(m):
    def f(x):
        if x > 0:
            return m.sin(x) * x
        return -3.0 * x ** 2
    return f


def test_python_if_on_the_differentiated_value_at_both_signs():
    g, ga = jitad.grad(piecewise(jitad)), autograd.grad(piecewise(anp))
    for x in (1.5, -0.5, 0.0, 2.0, -2.0):   # one gradient object, both paths
        assert g(x) == pytest.approx(ga(x), rel=1e-12)
    before = compiles()
    for x in (0.3, -0.7, 1.1, -4.0, 0.9, -0.1):   # alternating after both are seen: no compile
        assert g(x) == pytest.approx(ga(x), rel=1e-12)
    assert compiles() == before
    jitad.testing.check_grads(piecewise(jitad), (0.7,), order=1, modes=["rev"])


def _data(n=40, d=3, seed=0):
    rng = np.random.RandomState(seed)
    return rng.randn(n, d), (rng.rand(n) > 0.5).astype(float)


TRAIN_X, TRAIN_Y = _data()
BATCH, N_BATCHES = 5, 8


def batch_indices(i):
    idx = i % N_BATCHES
    return slice(idx * BATCH, (idx + 1) * BATCH)


def objective(m):
    def loss(params, i):
        idx = batch_indices(i)
        logits = m.dot(TRAIN_X[idx], params)
        return m.sum(m.log1p(m.exp(-logits)) + (1 - TRAIN_Y[idx]) * logits)
    return loss


def test_an_int_argument_picking_the_mini_batch_compiles_once(monkeypatch):
    transformed = []   # programs transformed and through the passes (a cache hit or not)
    compile_program = dispatch.compile_program
    monkeypatch.setattr(dispatch, "compile_program", lambda *a, **k: transformed.append(1) or compile_program(*a, **k))
    g, ga = jitad.grad(objective(jitad)), autograd.grad(objective(anp))
    params = np.array([0.1, -0.2, 0.3])
    before = compiles()
    for i in range(12):
        step, ref = g(params, i), ga(params, i)
        np.testing.assert_allclose(step, ref, rtol=1e-12)
        params = np.asarray(params - 0.1 * step)   # (autograd takes plain arrays only)
    assert compiles() - before <= 1   # every batch is an argument of the same program
    assert len(transformed) <= 2   # from the third index on, the function's own trace finds the path


def test_range_from_an_argument_and_an_object_passed_through():
    def f(m):
        def series(x, n, act):
            total = 0.0
            for k in range(n):
                total = total + act(x) ** (k + 1)
            return total
        return series
    g, ga = jitad.grad(f(jitad)), autograd.grad(f(anp))
    for n in (1, 3, 2, 3):
        assert g(0.4, n, jitad.tanh) == pytest.approx(ga(0.4, n, anp.tanh), rel=1e-12)
    assert g(0.4, 2, jitad.sin) == pytest.approx(ga(0.4, 2, anp.sin), rel=1e-12)


def test_true_and_one_are_different_static_arguments():
    def f(x, flag):
        return x * 2.0 if flag is True else x * 3.0
    g = jitad.grad(f)
    assert (g(1.0, True), g(1.0, 1), g(1.0, "a"), g(1.0, None)) == (2.0, 3.0, 3.0, 3.0)


def test_float_of_an_intermediate_decides_a_scale():
    def f(m):
        to_float = float if m is jitad else getval   # (autograd's boxes refuse float(): its value)

        def scaled(w):
            total = m.sum(w ** 2)
            scale = 0.5 if to_float(total) > 1.0 else 2.0
            return scale * total * to_float(total)   # a float is a constant to differentiation
        return scaled
    g, ga = jitad.grad(f(jitad)), autograd.grad(f(anp))
    for w in ([0.1, 0.2], [1.0, 2.0], [0.3, 0.1], [3.0, -1.0]):
        np.testing.assert_allclose(g(np.array(w)), ga(np.array(w)), rtol=1e-12)


def _noisy(m, draw):
    def f(w):
        return m.sum((w + draw(3)) ** 2) * random.random()
    return f


def test_seeded_host_noise_is_drawn_at_every_call_bit_for_bit():
    w = np.array([0.5, -1.0, 2.0])

    def run(m, grad):
        np.random.seed(3)
        random.seed(4)
        rs = np.random.RandomState(5)
        g_global = grad(_noisy(m, lambda n: np.random.randn(n)))
        g_state = grad(_noisy(m, lambda n: rs.normal(size=n)))
        return [g_global(w) for _ in range(3)] + [g_state(w) for _ in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", jitad.JitadWarning)   # no trace-time warning any more
        ours = run(jitad, jitad.grad)
    theirs = run(anp, autograd.grad)
    for a, b in zip(ours, theirs):
        assert np.array_equal(a, b)
    assert not np.array_equal(ours[0], ours[1])


_THROUGH_A_GLOBAL = """
def build(m, rs):
    def elbo(w, t):
        return m.sum((w + rs.randn(3)) ** 2) * (t + 1)
    return elbo


def objective(w, t):
    return -elbo(w, t)
"""


def test_a_generator_held_by_a_function_called_through_a_global_is_drawn_at_every_call():
    # (a loss calling a module-level model whose closure holds the generator: each call,
    # a retrace included, draws as autograd does, and the generator ends where autograd's does)
    def run(m, grad):
        rs = np.random.RandomState(0)
        program = {}
        exec(_THROUGH_A_GLOBAL, program)
        program["elbo"] = program["build"](m, rs)
        g = grad(program["objective"])
        out = []
        for t in range(3):
            out += [g(np.array([0.5, -1.0, 2.0]), t), program["objective"](np.zeros(3), t)]
        return out + [rs.randn()]
    ours, theirs = run(jitad, jitad.grad), run(anp, autograd.grad)
    for a, b in zip(ours, theirs):
        assert np.array_equal(a, b)


_TWO_GENERATORS = """
def build(m, noise, mix):
    def elbo(w, t):
        return m.sum((w + noise.randn(3)) ** 2) * mix.uniform() * (t + 1)
    return elbo
"""


def _run_with_fresh_generators(m, grad, seeds):
    """A program run afresh (its text executed again, new generators of these seeds): the
    gradients of three steps, and where the generators end."""
    program = {}
    exec(_TWO_GENERATORS, program)
    noise, mix = (np.random.RandomState(s) for s in seeds)
    g = grad(program["build"](m, noise, mix))
    out = [g(np.array([0.5, -1.0, 2.0]), t) for t in range(3)]
    return out + [noise.randn(), mix.randn()]


def test_fresh_generators_of_a_program_run_again_are_drawn_from_without_a_trace(traces):
    # (the generators are keyed by their place among what the function reads, not their
    # identity: a run of the same text finds the paths, and draws from its own generators)
    theirs = [_run_with_fresh_generators(anp, autograd.grad, seeds) for seeds in ((0, 1), (0, 1), (1, 0))]
    ours = [_run_with_fresh_generators(jitad, jitad.grad, (0, 1))]
    first = len(traces)
    ours += [_run_with_fresh_generators(jitad, jitad.grad, seeds) for seeds in ((0, 1), (1, 0))]
    assert len(traces) == first   # (the swapped seeds too: each generator is drawn from at its own place)
    for mine, ref in zip(ours, theirs):
        for a, b in zip(mine, ref):
            assert np.array_equal(a, b)
    assert not np.array_equal(ours[1][0], ours[2][0])


_UNRECORDED = """
def build(m, rs):
    def f(w):
        return m.sum(w * rs.pareto(2.0, size=3))   # (a draw jitad does not record: a constant)
    return f
"""


def test_a_generator_whose_draws_are_not_recorded_is_keyed_by_identity():
    # (its draws are constants of the path: a fresh generator traces again, as autograd draws)
    def run(m, grad, rs):
        program = {}
        exec(_UNRECORDED, program)
        return grad(program["build"](m, rs))(np.ones(3)), rs.randn()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jitad.JitadWarning)
        ours = [run(jitad, jitad.grad, np.random.RandomState(seed)) for seed in (0, 1, 1)]
    theirs = [run(anp, autograd.grad, np.random.RandomState(seed)) for seed in (0, 1, 1)]
    for mine, ref in zip(ours, theirs):
        assert np.array_equal(mine[0], ref[0]) and mine[1] == ref[1]


_ONE_GENERATOR_TWO_NAMES = """
def build(m, rs):
    def f(w):
        return m.sum((w + rs.randn(3)) ** 2) + m.sum(w * g.randn(3))   # (`g` a global: the same generator)
    return f
"""


def test_a_generator_read_at_two_places_is_drawn_from_as_the_code_names_it():
    # (which name drew is not recorded: the path keeps to that object, a fresh one traces again)
    def run(m, grad, seeds):
        program = {}
        exec(_ONE_GENERATOR_TWO_NAMES, program)
        rs = program["g"] = np.random.RandomState(seeds[0])
        if seeds[1] != seeds[0]:   # (then two generators, one per name)
            program["g"] = np.random.RandomState(seeds[1])
        g = grad(program["build"](m, rs))
        return [g(np.ones(3)) for _ in range(2)] + [rs.randn(), program["g"].randn()]
    for seeds in ((0, 0), (1, 2), (3, 3)):
        for a, b in zip(run(jitad, jitad.grad, seeds), run(anp, autograd.grad, seeds)):
            assert np.array_equal(a, b)


def test_a_mutated_captured_array_and_a_changed_captured_number():
    c = np.array([1.0, 2.0])
    g = jitad.grad(lambda w: jitad.sum(w * c))
    np.testing.assert_array_equal(g(np.ones(2)), [1.0, 2.0])
    c[0] = 5.0
    np.testing.assert_array_equal(g(np.ones(2)), [5.0, 2.0])

    def step(lr):
        return jitad.grad(lambda w: lr * jitad.sum(w ** 2))(np.ones(2))
    np.testing.assert_allclose(step(0.1), [0.2, 0.2])
    np.testing.assert_allclose(step(0.01), [0.02, 0.02])


def _loss(w, batch):
    return np.sum((np.dot(batch, w) - 1.0) ** 2)


def test_a_fresh_closure_per_step_reuses_the_compiled_code():
    w = np.ones(3)
    rng = np.random.RandomState(0)
    batches = [rng.randn(4, 3) for _ in range(60)]

    def fresh(batch):
        return jitad.grad(lambda w: _loss(w, batch))(w)
    fresh(batches[0])
    reused = jitad.grad(_loss)
    reused(w, batches[0])
    before = compiles()
    t0 = time.process_time()
    for b in batches:
        out = fresh(b)
    t_fresh = time.process_time() - t0
    t0 = time.process_time()
    for b in batches:
        reused(w, b)
    t_reused = time.process_time() - t0
    assert compiles() == before
    ref = autograd.grad(lambda w: anp.sum((anp.dot(batches[-1], w) - 1.0) ** 2))(w)
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    assert t_fresh < 10 * t_reused + 0.02, (t_fresh, t_reused)   # no trace per step (a trace is ~ms of CPU)


def test_nested_grad_of_a_function_with_a_python_branch():
    def f(m):
        return lambda x: x ** 3 if x > 0 else -x ** 2
    for x in (2.0, -2.0, 0.5):
        assert jitad.grad(jitad.grad(f(jitad)))(x) == pytest.approx(autograd.grad(autograd.grad(f(anp)))(x))
    jitad.testing.check_grads(f(jitad), (0.8,), order=2)


def test_nested_grad_runs_the_function_once_as_autograd_does(capsys):
    def f(m):
        def g(x):
            print("f runs")
            return m.sin(x) * x ** 3 * np.random.randn()   # a print and a host draw, once per call
        return g
    np.random.seed(3)
    with pytest.warns(jitad.JitadWarning, match="print"):
        got = [jitad.grad(jitad.grad(f(jitad)))(x) for x in (0.7, -1.2)]
    got_state = np.random.rand()
    jitad_prints = capsys.readouterr().out.count("f runs")
    np.random.seed(3)
    want = [autograd.grad(autograd.grad(f(anp)))(x) for x in (0.7, -1.2)]
    assert np.random.rand() == got_state   # as many draws as autograd made
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert jitad_prints == 1 and capsys.readouterr().out.count("f runs") == 2   # traced once; autograd's per call


def test_a_decision_on_an_inner_gradient_prints_once(capsys):
    def f(m):
        def inner(x):
            print("inner runs")
            return m.sin(x) * x ** 3

        def outer(x):
            slope = m.grad(inner)(x) if m is jitad else autograd.grad(inner)(x)
            return slope * x if slope > 0 else -slope   # Python decides on the inner gradient
        return outer
    with pytest.warns(jitad.JitadWarning, match="print"):
        got = jitad.grad(f(jitad))(0.7)
    assert capsys.readouterr().out.count("inner runs") == 1   # (traced twice: the first trace's print held)
    assert got == pytest.approx(autograd.grad(f(anp))(0.7), rel=1e-12)


def test_a_decision_on_an_inner_gradient_runs_the_function_once_a_trace():
    """The deferred trace computes the inner gradient's value where Python decides on it (its
    reverse-mode program interpreted), so even the first trace runs the function once; a new
    path runs it alone, then transformed (a new outcome: `runs` counts the traces)."""
    import types
    runs = types.SimpleNamespace(n=0)   # (an object: keyed by identity, its count is no part of the key)

    def f(m):
        def outer(x):
            runs.n += 1
            slope = m.grad(m.sin)(x) if m is jitad else autograd.grad(anp.sin)(x)
            return x * slope if slope > 0 else -x * m.cos(x)
        return outer
    g = jitad.grad(f(jitad))
    counts = []
    for x in (0.5, 2.0, 0.7, 2.5):
        assert g(x) == pytest.approx(autograd.grad(f(anp))(x), rel=1e-12)
        runs.n -= 1   # (autograd's run)
        counts.append(runs.n)
    assert counts == [1, 3, 3, 3]   # 0.5: one trace; 2.0 (a new path): alone, then transformed


def test_a_function_the_deferred_trace_cannot_serve_is_remembered_for_the_next_traces():
    """A gradient taken inside a loop body stays no deferred pass at the top: the first trace
    runs the function twice (deferred, then as it is), and the dispatcher's memo makes its
    later traces (a new path: alone, then transformed) skip the deferred one."""
    import types
    runs = types.SimpleNamespace(n=0)

    def outer(x):
        runs.n += 1
        y = jitad.FOR(0, 2, lambda i, c: c + jitad.grad(jitad.sin)(c) * 0.5, x)
        return y * x if x > 0 else -y
    g = jitad.grad(outer)
    counts = []
    for x in (0.5, 2.0, -0.7, 2.5):
        got = g(x)
        counts.append(runs.n)
        y = x + 0.5 * np.cos(x)
        y = y + 0.5 * np.cos(y)
        dy = (1 - 0.5 * np.sin(x)) * (1 - 0.5 * np.sin(x + 0.5 * np.cos(x)))
        assert got == pytest.approx(y + x * dy if x > 0 else -dy, rel=1e-12)
    assert counts == [2, 2, 4, 4]


def test_effects_before_a_decision_on_an_inner_gradient_happen_once():
    """A list append and a host draw before the decision happen once in the trace, as under
    autograd; the gradient of a vector function deciding on its inner gradient is autograd's."""
    def f(m, seen):
        grad = jitad.grad if m is jitad else autograd.grad

        def outer(w):
            seen.append(len(seen))
            noise = np.random.randn(3)
            g = grad(lambda v: m.sum(m.tanh(v * noise)) ** 2)(w)
            scale = 2.0 if m.sum(g * w) > 0 else -0.5   # Python decides on the inner gradient
            return scale * m.sum(g * g) + m.sum(w ** 3)
        return outer
    w = np.array([0.3, -0.2, 0.5])
    mine, theirs = [], []
    np.random.seed(5)
    got = jitad.grad(f(jitad, mine))(w)
    state = np.random.rand()
    np.random.seed(5)
    want = autograd.grad(f(anp, theirs))(w)
    assert np.random.rand() == state and mine == theirs == [0]   # one trace: one append, one draw
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_a_decision_on_an_inner_gradient_of_many_inputs_is_one_reverse_pass():
    """Traced as it is, a function taking a gradient was differentiated one forward pass per
    input element (refused past 256); its deferred trace, which now decides, is one reverse pass."""
    def f(m, grad):
        def outer(w):
            g = grad(lambda v: m.sum(m.tanh(v)) ** 2)(w)
            return m.sum(g * w) if m.sum(g) > 0 else -m.sum(w ** 2)
        return outer
    w = np.linspace(-0.5, 1.0, 300)
    np.testing.assert_allclose(jitad.grad(f(jitad.numpy, jitad.grad))(w), autograd.grad(f(anp, autograd.grad))(w),
                               rtol=1e-12, atol=1e-13)


def test_jit_and_combinator_bodies_keep_the_staging_rule():
    with pytest.raises(jitad.errors.StagingError, match="IF"):
        jitad.jit(piecewise(jitad))(1.0)
    with pytest.raises(jitad.errors.StagingError, match="under `jit`"):   # a jit inside grad: jit's rule
        jitad.grad(jitad.jit(piecewise(jitad)))(1.0)
    with pytest.raises(jitad.errors.StagingError, match="under `jit`"):
        jitad.jit(jitad.grad(piecewise(jitad)))(1.0)
    with pytest.raises(jitad.errors.StagingError, match="inside the body of `IF`"):
        jitad.grad(lambda x: jitad.IF(x > 0, lambda y: y * 2.0 if y > 1 else y, lambda y: y, x))(2.0)
    with pytest.raises(jitad.errors.StagingError):   # vmap's lanes never share one lane's decision
        jitad.vmap(jitad.grad(piecewise(jitad)))(np.array([1.0, -1.0]))


def test_past_the_bound_of_paths_it_warns_and_stays_right(monkeypatch):
    monkeypatch.setattr(dispatch, "MAX_PATHS_PER_SITE", 3)

    def f(x, n_items):
        return x * float(int(n_items))   # int() of a staged value: one path per value

    def g(x, n):
        return x ** 2 * int(jitad.sum(n))
    grad = jitad.grad(g)
    with pytest.warns(jitad.JitadWarning, match="different outcomes"):
        for n in range(6):
            assert grad(3.0, np.array([n, 0])) == 6.0 * n


def test_explained_cache_misses_name_the_decision():
    jitad.config.update("jax_explain_cache_misses", True)
    try:
        g = jitad.grad(lambda x: x * 2.0 if x > 0 else x * 3.0)
        with pytest.warns(jitad.JitadWarning, match="new key"):
            g(1.0)
        with pytest.warns(jitad.JitadWarning, match=r"(?s)tracing again.*x > 0.*True"):
            assert g(-1.0) == 3.0
    finally:
        jitad.config.update("jax_explain_cache_misses", False)


def test_print_inside_warns_that_it_runs_at_trace(capsys):
    def f(x):
        print("value")
        return x * x
    g = jitad.grad(f)
    with pytest.warns(jitad.JitadWarning, match="print"):
        assert g(3.0) == 6.0
    assert g(4.0) == 8.0   # no new trace: nothing printed
    assert capsys.readouterr().out.count("value") == 1


def test_a_threshold_the_compiled_code_sees_an_ulp_away_never_retraces_forever(tier):
    from jitad.ir.interpret import interpret
    x = np.random.RandomState(2).randn(1000)
    total = jitad.jit(lambda x: jitad.sum(x * 1.1))
    threshold = float(interpret(jitad.trace(lambda x: jitad.sum(x * 1.1), x), [x])[0])   # NumPy's value
    assert total(x) < threshold   # the compiled sum is an ulp below: NumPy's trace decides otherwise

    def f(w):
        return jitad.sum(w * 1.1) * (2.0 if jitad.sum(w * 1.1) >= threshold else 3.0)
    g = jitad.grad(f)
    want = 3.3 if tier == "compile" else 2.2   # the compiled code's decision, or NumPy's (autograd's)
    np.testing.assert_allclose(g(x), np.full(1000, want))
    before = compiles()
    np.testing.assert_allclose(g(x), np.full(1000, want))
    assert compiles() == before


def test_draws_before_a_branch_are_never_made_twice_when_a_guard_fails():
    def f(m):
        def noisy(x):
            eps = np.random.randn()
            if x > 0:
                return m.sin(x) * eps
            return x * x * eps * np.random.rand()
        return noisy
    xs = (0.5, -1.0, 2.0, -0.3, 0.1, -2.0)

    def run(m, grad):
        np.random.seed(7)
        g = grad(f(m))
        return [g(x) for x in xs] + [np.random.rand()]   # the generator ends where autograd's does
    assert run(jitad, jitad.grad) == run(anp, autograd.grad)


def test_the_other_transformations_decide_on_values_too():
    def f(m):
        def branchy(x):
            return m.sum(x ** 3) if m.sum(x) > 0 else m.sum(m.sin(x) * x)
        return branchy

    def vec(m):
        return lambda x: x ** 2 if x[0] > 0 else m.sin(x) * 2.0
    for x in (np.array([0.5, 1.5]), np.array([-0.5, -1.5])):
        np.testing.assert_allclose(jitad.hessian(f(jitad))(x), autograd.hessian(f(anp))(x), rtol=1e-12)
        np.testing.assert_allclose(jitad.jacobian(vec(jitad))(x), autograd.jacobian(vec(anp))(x), rtol=1e-12)
        np.testing.assert_allclose(jitad.elementwise_grad(vec(jitad))(x),
                                   autograd.elementwise_grad(vec(anp))(x), rtol=1e-12)
        v = np.array([0.3, -0.2])
        np.testing.assert_allclose(jitad.hvp(f(jitad))(x, v), autograd.hessian(f(anp))(x) @ v, rtol=1e-12)
        out, pullback = jitad.vjp(vec(jitad), x)
        vjp_ref = autograd.make_vjp(vec(anp))(x)
        np.testing.assert_allclose(out, vjp_ref[1], rtol=1e-12)
        np.testing.assert_allclose(pullback(v)[0], vjp_ref[0](v), rtol=1e-12)
        _, tangent = jitad.jvp(vec(jitad), (x,), (v,))
        np.testing.assert_allclose(tangent, autograd.jacobian(vec(anp))(x) @ v, rtol=1e-12)


def test_explained_cache_misses_name_a_new_static_argument():
    jitad.config.update("jax_explain_cache_misses", True)
    try:
        g = jitad.grad(lambda x, k: x * k)
        with pytest.warns(jitad.JitadWarning, match=r"new key.*argument 1 = 7"):
            assert g(1.0, 7) == 7.0
    finally:
        jitad.config.update("jax_explain_cache_misses", False)


@pytest.mark.parametrize("name, f", [
    ("FOR", lambda x: jitad.FOR(0, 3, lambda i, s: s * 2.0 if s > 0 else s, x)),
    ("scan", lambda x: jitad.lax.scan(lambda c, _: (c * 2.0 if c > 0 else c, None), x, None, length=3)[0]),
    ("cond", lambda x: jitad.lax.cond(x > 0, lambda y: y * 2.0 if y > 1 else y, lambda y: y, x)),
    ("WHILE", lambda x: jitad.WHILE(lambda s: s < 10.0 if s > 0 else s < 5.0, lambda s: s * 2.0, x)),
    ("checkpoint", lambda x: jitad.checkpoint(lambda y: y * 2.0 if y > 0 else y)(x)),
    ("vmap", lambda x: jitad.sum(jitad.vmap(lambda y: y * 2.0 if y > 0 else y)(x * jitad.numpy.ones(2)))),
])
def test_a_decision_inside_a_combinator_body_names_the_combinator(name, f):
    with pytest.raises(jitad.errors.StagingError, match=f"inside the body of `{name}`"):
        jitad.grad(f)(1.0)


def test_a_debug_print_before_a_failing_guard_prints_once(capfd):
    def f(x):
        jitad.debug.print("x={}", x)
        if x > 0:
            return x * 2.0
        return x * 3.0
    g = jitad.grad(f)
    g(1.0), g(-1.0)   # both paths compiled
    capfd.readouterr()
    assert (g(2.0), g(-2.0), g(3.0)) == (2.0, 3.0, 2.0)   # each after a failed guard on the other path
    assert capfd.readouterr().out.split() == ["x=2.0", "x=-2.0", "x=3.0"]


def test_a_bound_method_reads_its_object_attributes_at_each_call():
    class Model:
        def __init__(self):
            self.scale, self.w = 2.0, np.array([1.0, 2.0])

        def loss(self, x):
            return self.scale * jitad.sum(self.w * x) if x[0] > 0 else jitad.sum(x)
    m = Model()
    g = jitad.grad(m.loss)
    np.testing.assert_array_equal(g(np.ones(2)), [2.0, 4.0])
    m.scale, m.w[0] = 3.0, 5.0
    np.testing.assert_array_equal(g(np.ones(2)), [15.0, 6.0])
    np.testing.assert_array_equal(g(-np.ones(2)), [1.0, 1.0])


_FACTOR = 2.0


def _scaled(x):
    return jitad.numpy.sin(x) * _FACTOR


def test_fresh_transformations_of_a_function_reuse_its_walk_while_its_reads_hold(traces):
    """`grad(f)(x)` made anew at each call (as in `check_grads` or an autograd loop) walks `f`
    once; a global or a cell it reads, changed, is seen at the next call."""
    global _FACTOR
    from jitad import dispatch
    try:
        for factor in (2.0, 2.0, 3.0, 3.0):
            _FACTOR = factor
            assert jitad.grad(_scaled)(0.5) == pytest.approx(np.cos(0.5) * factor, rel=1e-12)
        assert dispatch._WALKED[id(_scaled)].fn() is _scaled and len(traces) == 2   # (one per factor)
    finally:
        _FACTOR = 2.0
    cell = [1.0]

    def make(c):
        def f(x):
            return x * c
        return f
    f = make(cell[0])
    assert jitad.grad(f)(1.0) == 1.0
    f.__closure__[0].cell_contents = 5.0
    assert jitad.grad(f)(1.0) == 5.0

    def g(x):
        return x * np.ones(3)
    dispatch.function_key(g)
    key = id(g)
    assert dispatch._WALKED[key].fn() is g
    del g   # (its walk, which holds what it read, goes with it)
    assert key not in dispatch._WALKED


def test_a_program_executed_again_adds_nothing_to_the_walks_caches():
    """Each execution of a program's text makes new code objects (equal to the last run's)
    and a new namespace; what the walks cache of a function's code (the globals it reads)
    has one entry a code, so a program run again and again (the corpus, a notebook's cell)
    holds no more than one run's."""
    sizes = []
    for _ in range(12):
        space = {"jnp": jitad.numpy, "scale": 2.0}
        exec(compile("def f(x):\n    return jnp.sin(x) * scale\n", "<run again>", "exec"), space)
        assert jitad.grad(space["f"])(0.5) == pytest.approx(2.0 * np.cos(0.5))
        sizes.append(len(dispatch._global_names_cache))
    assert sizes[-1] == sizes[1]


def test_a_global_defined_while_another_goes_is_read_anew():
    """A name the function reads that its module lacked (deleted and another defined, so the
    module's size is unchanged) is read at the next call, and its changes after that too."""
    space = {"jnp": jitad.numpy, "other": 1.0}
    exec(compile("def f(x):\n    return jnp.sum(x * scale)\n", "<a module>", "exec"), space)
    g = jitad.grad(space["f"])
    with pytest.raises(NameError):
        g(np.ones(2))
    del space["other"]
    space["scale"] = 5.0
    np.testing.assert_array_equal(g(np.ones(2)), [5.0, 5.0])
    space["scale"] = 7.0
    np.testing.assert_array_equal(g(np.ones(2)), [7.0, 7.0])
    np.testing.assert_array_equal(jitad.grad(space["f"])(np.ones(2)), [7.0, 7.0])


def _helper(x):
    return _scaled(x) + _RS.randn()


_RS = np.random.RandomState(0)
_RS2 = np.random.RandomState(1)


def test_a_function_met_in_a_walk_takes_the_walk_kept_of_it(monkeypatch):
    """A fresh closure over functions walked before takes their kept walks (each walked once),
    with the same key as walking them there: places of functions met again and of host
    generators counted on; a kept walk meeting a function the walk met before is walked there."""
    def closure_over(*fns):
        def f(x):
            return _RS2.randn() + sum(fn(x) for fn in fns)
        return f
    cases = [(_scaled,), (_helper,), (_scaled, _helper), (_helper, _scaled), (_helper, _helper)]
    dispatch._WALKED.clear()
    fresh = [dispatch.function_key(closure_over(*fns))[0] for fns in cases]   # (each walked in place)
    for fn in (_scaled, _helper):
        dispatch.function_key(fn)   # kept
    walked = []
    python_function = dispatch._Reads._python_function
    monkeypatch.setattr(dispatch._Reads, "_python_function",
                        lambda self, fn, depth: walked.append(fn) or python_function(self, fn, depth))
    for fns, key in zip(cases, fresh):
        del walked[:]
        assert dispatch.function_key(closure_over(*fns))[0] == key
        assert _scaled not in walked and (_helper in walked) == (fns == (_scaled, _helper))   # (its walk met _scaled)


def test_vjp_of_the_same_function_again_keys_it_once_while_its_reads_hold(monkeypatch):
    global _FACTOR
    for _ in range(2):   # (the first call of `vjp`'s dispatcher object in a process remembers nothing)
        jitad.vjp(_scaled, 0.5)
    keyed = []
    static_key = dispatch.static_key
    monkeypatch.setattr(dispatch, "static_key", lambda x, *rest: keyed.append(x) or static_key(x, *rest))
    try:
        for factor in (2.0, 2.0, 3.0, 3.0, 3.0):
            _FACTOR = factor
            assert jitad.vjp(_scaled, 0.5)[0] == pytest.approx(np.sin(0.5) * factor, rel=1e-12)
    finally:
        _FACTOR = 2.0
    assert keyed.count(_scaled) == 1   # (the global it reads, changed: keyed again)
