"""`grad` called from Python with an int argument (autograd's `grad(objective)(params, i)`)
traces the int as a symbol: one program serves every value, slices of the arrays the
function reads are arguments computed at each call, and every decision on the int is
guarded. And a reused gradient object does not key its function again while what it reads
stays the same. Checked against autograd on the same programs, traces counted (not timed)."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest

import jitad
from jitad import dispatch

from .test_grad_semantics import tier  # noqa: F401  (each test in both tiers)

X = np.random.RandomState(0).randn(42, 3)
Y = (np.random.RandomState(1).rand(42) > 0.5) * 1.0
B = 5   # 42 rows: the ninth batch has 2


def batches(i):
    idx = i % int(np.ceil(len(X) / B))
    return slice(idx * B, (idx + 1) * B)


def _agree(f, n, w=(0.1, -0.2, 0.3), *extra):
    g, ga = jitad.grad(f(jitad)), autograd.grad(f(anp))
    w = np.array(w)
    for i in range(n):
        np.testing.assert_allclose(g(w, i, *extra), ga(w, i, *extra), rtol=1e-12, atol=1e-14)


@pytest.fixture
def walks(monkeypatch):
    """The walks of a function to key it (see `dispatch._Reads`) made from now on."""
    made = []
    init = dispatch._Known.__init__
    monkeypatch.setattr(dispatch._Known, "__init__", lambda self, *args: made.append(1) or init(self, *args))
    return made


def test_every_mini_batch_index_runs_one_program_and_the_short_batch_another(traces, walks):
    def objective(m):
        def loss(w, i):
            idx = batches(i)
            logits = m.dot(X[idx], w)
            return m.sum(m.log1p(m.exp(-logits)) + (1 - Y[idx]) * logits)
        return loss
    _agree(objective, 30)
    # the first trace; the short batch: the function alone, then transformed; nothing after
    assert len(traces) == 3
    assert len(walks) == 2   # one gradient object: its function keyed twice (the first call records nothing)


def test_arithmetic_comparisons_and_element_reads_stay_symbolic(traces):
    def f(m):
        def loss(w, i):
            out = m.sum(m.dot(X[batches(i)], w) ** 2) * (i + 1)   # the int in staged math
            if i % 3 == 0:   # a decision on the int: a guard of the path
                out = out * 2.0
            return out + X[(2 * i) % 42, 1] * m.sum(w)   # an element read at the int
        return loss
    _agree(f, 24)
    assert len(traces) <= 7   # 2 outcomes x 2 batch shapes, each new path at most twice


def test_a_plain_int_use_is_guarded_by_its_value(traces):
    def f(m):
        def loss(w, i, k):
            out = m.sum(w ** 2)
            for _ in range(i % 3 + k):   # `range` takes the int: a path per value of `i % 3 + k`
                out = out * m.sum(w)
            return out + np.arange(10.0)[i % 3] * w[0]   # an index of an array it does not read
        return loss
    _agree(f, 9, (0.5, 0.25, -0.5), 1)
    assert len(traces) == 1 + 2 * 2   # a path per value of `i % 3` (the function alone, then in full)


def test_an_int_of_many_values_used_plainly_is_keyed_by_value(monkeypatch):
    monkeypatch.setattr(dispatch, "MAX_PATHS_PER_SITE", 1)   # (keyed by value after 2 such paths)

    def f(m):
        return lambda w, i: m.sum(w[:i] ** 2) * float(i)   # its value shapes the program
    _agree(f, 4, (1.0, 2.0, 3.0, 4.0))

    def tree(m):   # (the same with a pytree argument: the arguments keyed in full)
        return lambda p, i: m.sum(p["w"][:i] ** 2) * float(i)
    g, ga = jitad.grad(tree(jitad)), autograd.grad(tree(anp))
    p = {"w": np.arange(1.0, 5.0)}
    for i in (1, 2, 3, 1, 3):
        np.testing.assert_allclose(g(p, i)["w"], ga(p, i)["w"], rtol=1e-12)


def test_a_seed_from_the_int_draws_autograds_numbers():
    def f(m):
        def loss(w, i):
            return m.sum(w * np.random.RandomState(i).randn(3)) + m.sum(m.dot(X[batches(i)], w))
        return loss
    _agree(f, 5)


def test_the_other_transformations_take_a_symbolic_int(traces):
    def f(m):
        return lambda w, i: m.sum(m.dot(X[batches(i)], w) ** 3)
    w = np.array([0.1, -0.2, 0.3])
    h, ha = jitad.hessian(f(jitad)), autograd.hessian(f(anp))
    vg, vga = jitad.value_and_grad(f(jitad)), autograd.value_and_grad(f(anp))
    for i in (0, 1, 2, 3):
        np.testing.assert_allclose(h(w, i), ha(w, i), rtol=1e-12)
        for a, b in zip(vg(w, i), vga(w, i)):
            np.testing.assert_allclose(a, b, rtol=1e-12)
    assert len(traces) == 2


def test_a_symbolic_trace_that_fails_is_traced_again_with_the_int():
    def f(m):
        def loss(w, i):
            if type(i) is not int:   # (a symbol passes `isinstance(i, int)`, not this)
                raise TypeError("an int please")
            assert isinstance(i, int)
            return m.sum(w ** 2) * i
        return loss
    _agree(f, 4)


def test_a_reused_gradient_object_keys_its_function_twice_while_nothing_changes(walks):
    scale = np.array([1.0, 2.0, 3.0])
    g = jitad.grad(lambda w, b: jitad.sum((w * scale - b) ** 2))
    w, b = np.ones(3), np.zeros(3)
    for _ in range(20):
        g(w, b)
    assert len(walks) == 2   # (the first call of an object records nothing: a fresh closure's only call)


def test_a_reused_gradient_object_sees_every_change_of_what_it_reads():
    settings = {"lr": 1.0}
    sizes = [2.0]
    c = np.array([1.0, 2.0])

    def loss(w):
        return settings["lr"] * sizes[0] * jitad.sum(w * c) + OFFSET * jitad.sum(w)
    g = jitad.grad(loss)
    for step in range(3):
        expected = settings["lr"] * sizes[0] * c + OFFSET
        np.testing.assert_allclose(g(np.ones(2)), expected)
        if step == 0:
            settings["lr"], sizes[0] = 0.5, 3.0   # a dict and a list changed in place
        else:
            c[1] = 7.0   # an array changed in place
            globals()["OFFSET"] = 10.0   # a global bound again
    c.shape = (2, 1)   # (an array reshaped in place: another program)
    np.testing.assert_allclose(g(np.ones(2)), np.full(2, 1.5 * c.sum() + 10.0))


OFFSET = 0.0


STATE = np.array([1.0, 2.0, 3.0])


def test_a_global_array_the_function_binds_again_keeps_the_new_value():
    def f(m):
        def loss(w, i):
            global STATE
            out = m.sum(w * STATE[i % 3])
            STATE = np.asarray(STATE) * 1.0 + 0.0   # (a new array, bound while tracing)
            return out
        return loss
    g, before = jitad.grad(f(jitad)), STATE
    np.testing.assert_array_equal(g(np.ones(2), 1), [2.0, 2.0])
    assert STATE is not before and type(STATE) is np.ndarray   # the function's own new array stays bound


ROWS = jitad.numpy.asarray(np.arange(6.0).reshape(3, 2))   # a jitad array: its reads past the end clamp


def test_iterating_a_global_array_under_a_symbolic_int_stops_at_its_last_row():
    def loss(w, i):
        total = 0.0
        for _, row in zip(range(10), ROWS):   # (bounded, so a missing end shows as 10 rows, not a hang)
            total = total + jitad.numpy.sum(row * w) * (i + 1)
        return total
    np.testing.assert_allclose(jitad.grad(loss)(np.ones(2), 1), 2 * np.asarray(ROWS).sum(0))
