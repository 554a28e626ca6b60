"""A program taking and returning many arrays (a model's parameters and optimizer state):
its CPython entry points' body, straight code checking and boxing every array, is emitted
once for both entries, compiled without LLVM's pass pipeline once it is long, and still
checks every argument."""
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
    defined = {m for t in fast for m in re.findall(r'^define [^@]*@"[^"]*_(body|entry|deep)"', t, re.M)}
    assert defined == {"body"}, "the entries' body went through LLVM's pipeline"   # (the entries call it)
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


def test_both_entries_share_one_body(tmp_path, monkeypatch):
    """The entry and the deep-stack entry call one body: the argument checks are lowered once."""
    monkeypatch.setenv("JITAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(runtime, "FAST_ENTRY_LINES", 200)
    texts, real = [], runtime._compile
    monkeypatch.setattr(runtime, "_compile", lambda j, text, prefix: texts.append(text) or real(j, text, prefix))
    p = _tree(5, np.random.default_rng(1))
    step = jitad.jit(lambda p: jitad.tree_util.tree_map(lambda a: a * 2.0, p))
    out = step(p)
    np.testing.assert_array_equal(out["w4"], p["w4"] * 2)
    sizes = {m.group(1): m.end() for m in re.finditer(r'^define [^@]*@"[^"]*_(body|entry|deep)"', texts[0], re.M)}
    assert set(sizes) == {"body", "entry", "deep"}
    wrappers = [texts[0][sizes[k]:texts[0].index("\n}\n", sizes[k])] for k in ("entry", "deep")]
    assert all(w.count("\n") < 6 for w in wrappers), wrappers   # a call each, not a copy
