"""A program traced again (a new function object, as a script run a second time makes)
finds the machine code this process compiled for it, and its optimized IR text is only
derived again when someone asks for it: a retrace costs no LLVM optimization."""
import gc

import numpy as np

import jitad
from jitad.lower import runtime


def _make():
    return jitad.jit(lambda x: jitad.numpy.sin(x) * 2.0 + 1.0)


def test_a_retrace_finds_its_code_and_derives_the_text_when_asked():
    x = np.linspace(0.0, 1.0, 7)
    f = _make()
    want, text = f(x), "" + f.llvm_ir   # (a copy: the text itself is only weakly kept)
    compiled = runtime.STATS["compiled"]
    del f
    gc.collect()   # no Compiled holds the text now; the engine still holds the code
    g = _make()
    np.testing.assert_array_equal(g(x), want)
    assert runtime.STATS["compiled"] == compiled
    latest = g._latest("llvm_ir")
    assert callable(latest._llvm_ir)   # not derived yet
    assert g.llvm_ir == text and isinstance(latest._llvm_ir, str)
