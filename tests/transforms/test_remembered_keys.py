"""A function passed as itself to `vjp` is keyed once while what it reads holds: the call
remembers the walk that keyed it, and the next call checks what that walk read. Each change
to what the function reads (a global, a closure cell, a default, a function it calls) is
seen, also a change the function makes itself while it runs, between keying and the end
of the call (as autograd, which reads them at each call). Values against NumPy's formulas."""
import numpy as np
import pytest

import jitad
from jitad import dispatch

_K = 2.0
_CALLS = []


def _inner(x):
    return jitad.numpy.sin(x)


def _other(x):
    return jitad.numpy.cos(x)


def _reads_global(x):
    return _inner(x) * _K


def _sets_its_global_once(x):
    global _K
    out = jitad.numpy.sin(x) * _K
    if not _CALLS:   # (its first run: read when keyed, changed before the call ends)
        _CALLS.append(x)
        _K = 7.0
    return out


@pytest.fixture(autouse=True)
def restored():
    global _K, _inner
    saved = _K, _inner
    yield
    _K, _inner = saved


def _vjp_value_and_slope(f, x):
    """`vjp(f, x)`'s value, and the slope by `grad` (a dispatcher object of its own: the
    `vjp` object's remembered call stays `vjp(f, x)`'s)."""
    value = float(jitad.vjp(f, x)[0])
    return value, float(jitad.grad(f)(x))


def _counting_keys(monkeypatch):
    keyed = []
    static_key = dispatch.static_key
    monkeypatch.setattr(dispatch, "static_key", lambda x, *rest: keyed.append(x) or static_key(x, *rest))
    return keyed


def test_a_rebound_global_and_a_rebound_called_function_are_seen(monkeypatch):
    global _K, _inner
    x = 0.7
    for _ in range(2):   # (the dispatcher object remembers from its second call on)
        _vjp_value_and_slope(_reads_global, x)
    keyed = _counting_keys(monkeypatch)
    assert _vjp_value_and_slope(_reads_global, x) == pytest.approx((2 * np.sin(x), 2 * np.cos(x)), rel=1e-13)
    assert keyed.count(_reads_global) == 0   # (remembered: not keyed again)
    _K = 5.0
    assert _vjp_value_and_slope(_reads_global, x) == pytest.approx((5 * np.sin(x), 5 * np.cos(x)), rel=1e-13)
    assert keyed.count(_reads_global) == 1
    _inner = _other
    assert _vjp_value_and_slope(_reads_global, x) == pytest.approx((5 * np.cos(x), -5 * np.sin(x)), rel=1e-13)
    assert keyed.count(_reads_global) == 2
    assert _vjp_value_and_slope(_reads_global, x) == pytest.approx((5 * np.cos(x), -5 * np.sin(x)), rel=1e-13)
    assert keyed.count(_reads_global) == 2


def _closure(scale):
    def f(x, power=2.0):
        return jitad.numpy.sin(x) ** power * scale[0]
    return f


@pytest.mark.parametrize("change", ["cell", "default"])
def test_a_changed_closure_cell_and_a_changed_default_are_seen(monkeypatch, change):
    x, scale = 0.4, [3.0]
    f = _closure(scale)
    f.__defaults__ = (2.0,)
    for _ in range(2):
        _vjp_value_and_slope(f, x)
    keyed = _counting_keys(monkeypatch)
    if change == "cell":
        f.__closure__[0].cell_contents = [4.0]
        want = (4 * np.sin(x) ** 2, 8 * np.sin(x) * np.cos(x))
    else:
        f.__defaults__ = (3.0,)
        want = (3 * np.sin(x) ** 3, 9 * np.sin(x) ** 2 * np.cos(x))
    assert _vjp_value_and_slope(f, x) == pytest.approx(want, rel=1e-13)
    assert keyed.count(f) == 1
    assert _vjp_value_and_slope(f, x) == pytest.approx(want, rel=1e-13)
    assert keyed.count(f) == 1   # (the new reads remembered)


def test_a_function_changing_what_it_reads_while_it_runs_is_keyed_again():
    """The walk remembered is the one that keyed the call (made before the function ran):
    the next call sees the global the function changed while it ran."""
    global _K
    x = 0.3
    for _ in range(2):
        _vjp_value_and_slope(_reads_global, x)   # (the `vjp` object remembers a call of `_reads_global`)
    del _CALLS[:]
    jitad.vjp(_sets_its_global_once, x)
    assert _K == 7.0
    for _ in range(3):
        assert _vjp_value_and_slope(_sets_its_global_once, x) == \
            pytest.approx((7 * np.sin(x), 7 * np.cos(x)), rel=1e-13)


def _over(value):
    def f(x):
        return x * len(str(value))
    return f


@pytest.mark.parametrize("make, other", [
    (lambda: (1, [2.0, "a"]), lambda: (1, [2.0, "b"])),                  # tuple and list, by their items
    (lambda: {"a": 1, "b": (2,)}, lambda: {"a": 1, "b": (3,)}),         # dict, by keys and values
    (lambda: np.zeros(3), lambda: np.zeros(4)),                          # array, by dtype and shape
    (lambda: np.zeros(3), lambda: np.zeros(3, np.float32)),
    (lambda: np.array([True, False]), lambda: np.array([True, True])),   # mask, by its value
    (lambda: [0.0] * 65, lambda: [0.0] * 65),                            # past 64 items: by identity
])
def test_a_fresh_closure_over_equal_values_keys_alike_and_over_other_values_not(make, other):
    same = dispatch.function_key(_over(make()))[0] == dispatch.function_key(_over(make()))[0]
    assert same is (len(make()) <= 64 if isinstance(make(), list) else True)
    assert dispatch.function_key(_over(make()))[0] != dispatch.function_key(_over(other()))[0]


_SOURCE = '''
import jitad
K = 2.0
done = []
def reads(x):
    return jitad.numpy.sin(x) * K
def sets_once(x):
    global K
    out = jitad.numpy.sin(x) * K
    if not done:
        done.append(1)
        K = 7.0
    return out
'''


def test_a_function_rebinding_its_global_on_a_miss_leaves_no_path_under_the_old_value():
    """With its signature traced before (by another function), a new function is first
    traced alone, then transformed: when that first run rebinds a global it reads, the
    transformed trace sees the new value, and its path must not serve the old value later."""
    g = {}
    exec(compile(_SOURCE, "<rebinding module>", "exec"), g)
    x = 0.3
    for _ in range(2):
        jitad.vjp(g["reads"], x)
    for _ in range(3):
        jitad.vjp(g["sets_once"], x)
    for k in (2.0, 7.0, 2.0):
        g["K"] = k
        np.testing.assert_allclose(jitad.vjp(g["sets_once"], x)[0], k * np.sin(x), rtol=1e-12)


def test_a_text_compiled_again_keys_its_functions_by_the_first_equal_code():
    """A program run again compiles its text afresh: its functions' code objects are equal to
    the last run's, not the same; their keys hold the first equal one (compared by identity
    at each look-up), and another text is another key."""
    import types

    def compiled(text):
        namespace = {}
        exec(compile(text, "<a program>", "exec"), namespace)
        return namespace["f"]
    text = "def f(x):\n    return x * 2.0 + 1.0\n"
    f1, f2 = compiled(text), compiled(text)
    assert f1.__code__ is not f2.__code__ and f1.__code__ == f2.__code__
    k1, k2 = dispatch.function_key(f1)[0], dispatch.function_key(f2)[0]
    assert k1 == k2
    code1, code2 = [[p for p in k if isinstance(p, types.CodeType)] for k in (k1, k2)]
    assert code1[0] is code2[0]
    assert dispatch.function_key(compiled(text.replace("2.0", "3.0")))[0] != k1
    assert jitad.grad(f2)(0.5) == jitad.grad(f1)(0.5) == 2.0
