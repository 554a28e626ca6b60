"""Tracing, the passes and lowering hold the cyclic garbage collector off (a collection
during a large trace walks every node built so far) and give it back as they found it,
also when the traced function raises."""
import gc

import numpy as np
import pytest

import jitad
from jitad.errors import JitadError
from jitad.staging.tracer import paused_gc


def test_paused_gc_restores_the_state_it_found():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()   # the inner one leaves the outer's pause
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()   # a collector the caller had off stays off
    finally:
        gc.enable()


def test_grad_traces_with_the_collector_off_and_gives_it_back():
    seen = []

    def f(x):
        seen.append(gc.isenabled())
        return jitad.numpy.sum(jitad.numpy.sin(x) ** 2)

    g = jitad.grad(f)(np.linspace(0.0, 1.0, 5))
    np.testing.assert_allclose(g, np.sin(2 * np.linspace(0.0, 1.0, 5)), rtol=1e-13)
    assert seen and not any(seen) and gc.isenabled()

    def bad(x):
        raise ValueError("from the user's function")
    with pytest.raises((ValueError, JitadError)):
        jitad.grad(bad)(1.0)
    assert gc.isenabled()
