"""Native pytree calls: the compiled entry takes dicts (string keys) and namedtuples apart
itself; anything else it does not recognise goes the general way, with the same results."""
import collections
import threading

import numpy as np
import pytest

import jitad

P = collections.namedtuple("P", "w b")


def params():
    return {"w": np.arange(3.0), "b": 2.0, "inner": {"u": np.ones(3), "v": (1.5, np.full(3, 2.0))}}


def loss(p, x):
    return jitad.sum(p["w"] * x + p["b"] + p["inner"]["u"] * p["inner"]["v"][0] - p["inner"]["v"][1])


def want(p, x):
    return float(np.sum(p["w"] * x + p["b"] + p["inner"]["u"] * p["inner"]["v"][0] - p["inner"]["v"][1]))


def test_nested_dicts_take_the_native_entry():
    f = jitad.jit(loss)
    x = np.full(3, 0.5)
    assert f(params(), x) == pytest.approx(want(params(), x))
    assert type(f).__call__ is f._last.entry           # the native entry is installed
    p = params()
    p["w"] = np.arange(3.0) * 7                          # same keys and types, new values
    assert f(p, x) == pytest.approx(want(p, x))
    assert len(f._compiled) == 1


def test_keys_or_structure_that_differ_go_the_general_way():
    f = jitad.jit(loss)
    x = np.full(3, 0.5)
    f(params(), x)
    p = params()
    p["extra"] = 1.0                                     # more keys: a new signature, same answer
    assert f(p, x) == pytest.approx(want(params(), x))
    p = params()
    del p["b"]
    with pytest.raises(KeyError):                        # the user's function reads p["b"]
        f(p, x)
    p = collections.OrderedDict(params())                # a dict subclass: flattened in Python
    assert f(p, x) == pytest.approx(want(params(), x))
    p = params()
    p["b"] = np.float64(2.0)
    assert f(p, x) == pytest.approx(want(params(), x))
    p = params()
    p["inner"]["v"] = (1.5, np.full(4, 2.0))             # another shape: recompiles
    with pytest.raises(jitad.JitadError):
        f(p, x)


def test_namedtuples_and_results_keep_their_types():
    f = jitad.jit(lambda p, x: P(p.w * x, p.b + 1.0))
    out = f(P(np.ones(2), 3.0), np.full(2, 2.0))
    assert type(out) is P and out.b == 4.0 and np.array_equal(out.w, [2.0, 2.0])
    h = jitad.jit(lambda p, x: (p.w * x, p.b + 1.0))     # a namedtuple argument, tuple results
    assert h(P(np.ones(2), 3.0), np.full(2, 2.0))[1] == 4.0
    assert type(h).__call__ is h._last.entry
    Q = collections.namedtuple("P", "w b")               # same name, another class
    out = f(Q(np.ones(2), 1.0), np.full(2, 2.0))
    assert out.b == 2.0


def test_non_string_keys_and_grad_with_dict_params():
    f = jitad.jit(lambda d: d[1] * d[2])
    assert f({1: 2.0, 2: 3.0}) == 6.0
    g = jitad.jit(jitad.grad(loss))
    x = np.full(3, 0.5)
    grads = g(params(), x)
    assert set(grads) == {"w", "b", "inner"} and np.allclose(grads["w"], x) and grads["b"] == 3.0
    assert np.allclose(g(params(), 2 * x)["w"], 2 * x)


def test_threads_calling_with_dicts():
    f = jitad.jit(loss)
    x = np.full(3, 0.5)
    f(params(), x)
    errors = []

    def work(k):
        p = params()
        p["b"] = float(k)
        for _ in range(200):
            if f(p, x) != pytest.approx(want(p, x)):
                errors.append(k)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_jitad_numpy_arrays_take_the_native_entry():
    import jitad.numpy as jnp
    f = jitad.jit_grad(lambda p, x: jitad.sum(p["w"] * x))
    general = []
    slow = f._fallback
    f._fallback = lambda *a, **k: general.append(1) or slow(*a, **k)
    p, x = {"w": jnp.arange(3.0)}, jnp.ones(3)
    assert type(p["w"]) is jnp.Array
    value, g = f(p, x)                                 # compiles (the general way, once)
    calls = len(general)
    for _ in range(3):
        value, g = f(p, x)
    assert len(general) == calls                       # later calls: native
    assert value == 3.0 and np.array_equal(g["w"], np.ones(3))
    assert f(p, jnp.ones(3) * 2)[0] == 6.0 and len(general) == calls
