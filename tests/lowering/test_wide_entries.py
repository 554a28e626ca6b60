"""A program taking and returning many arrays (a model's parameters and optimizer state):
its CPython entry points, straight code checking and boxing every array, are compiled
without LLVM's pass pipeline once they are long, and still check every argument."""
import re

import numpy as np
import pytest

import jitad
from jitad.lower import parallel, runtime


def _tree(n, r):
    return {f"w{k}": r.standard_normal((2, k + 1)).astype(np.float32) for k in range(n)}


def _fast_parts(monkeypatch):
    """The LLVM IR texts compiled without the pass pipeline, recorded as they are compiled."""
    texts, real = [], parallel.compile_part

    def recording(text, tm, speed_level=2, fast=False, unroll=True):
        if fast:
            texts.append(text)
        return real(text, tm, speed_level, fast, unroll)
    monkeypatch.setattr(parallel, "compile_part", recording)
    return texts


def test_a_long_entry_is_compiled_fast_and_still_checks_its_arguments(monkeypatch, tmp_path):
    monkeypatch.setenv("JITAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(runtime, "FAST_ENTRY_LINES", 200)   # this small program's entries count as long
    fast = _fast_parts(monkeypatch)
    r = np.random.default_rng(0)
    p, q = _tree(6, r), _tree(6, r)
    step = jitad.jit(lambda p, q, lr: jitad.tree_util.tree_map(lambda a, b: a - lr * jitad.tanh(b), p, q))
    out = step(p, q, np.float32(0.5))
    for k in p:
        np.testing.assert_allclose(out[k], p[k] - np.float32(0.5) * np.tanh(q[k]), rtol=1e-5, atol=1e-7)
        assert out[k].dtype == np.float32
    defined = {m for t in fast for m in re.findall(r'^define [^@]*@"[^"]*_(entry|deep)"', t, re.M)}
    assert defined == {"entry", "deep"}, "the entries went through LLVM's pipeline"
    p64 = {k: v.astype(np.float64) for k, v in p.items()}   # a new signature: compiled again, also right
    np.testing.assert_allclose(step(p64, q, np.float32(0.5))["w3"], p64["w3"] - 0.5 * np.tanh(q["w3"]),
                               rtol=1e-5, atol=1e-7)
    with pytest.raises(jitad.JitadError):   # a structure the function cannot take still fails clearly
        step({**p, "w2": np.ones((3, 3), np.float32)}, q, np.float32(0.5))


def test_a_short_entry_keeps_the_pipeline():
    text = 'define i32 @"p_entry"(ptr %".1") {\nentry:\n  ret i32 0\n}\n'
    glue = 'define void @"p_glue0"(ptr %".1") {\nentry:\n  ret void\n}\n'
    assert runtime._fast_functions(text + glue, "p_") == {"p_glue0"}
    long_entry = text.replace("  ret i32 0\n", "  ret i32 0\n" * (runtime.FAST_ENTRY_LINES + 1))
    assert runtime._fast_functions(long_entry, "p_") == {"p_entry"}
