"""jitad.debug.print: a callback from compiled code, in loop order, forward and under grad."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitad
from jitad import FOR, IF, WHILE


def lines(capsys):
    return capsys.readouterr().out.splitlines()


def test_prints_every_iteration_in_order(capsys):
    def body(i, s):
        jitad.debug.print("i={} s={:.1f} big={}", i, s, s > 1)
        return s + 1.0
    assert jitad.jit(lambda n: FOR(0, n, body, 0.0))(3) == 3.0
    assert lines(capsys) == ["i=0 s=0.0 big=False", "i=1 s=1.0 big=False", "i=2 s=2.0 big=True"]


def test_tensors_keywords_if_while(capsys):
    def f(x):
        jitad.debug.print("x={x} n={}", 7, x=x)
        y = IF(jitad.sum(x) > 0, lambda: (jitad.debug.print("then {}", x[0]), x * 2.0)[1],
               lambda: (jitad.debug.print("else"), x)[1])
        return WHILE(lambda s: s < 4.0, lambda s: (jitad.debug.print("s={}", s), s * 2.0)[1], jitad.sum(y))
    assert jitad.jit(f)(np.array([0.5, 0.5])) == 4.0
    assert lines(capsys) == ["x=[0.5 0.5] n=7", "then 0.5", "s=2.0"]


def test_under_grad_forward_pass_prints_once(capsys):
    def loss(w, xs):
        def body(i, s):
            jitad.debug.print("step {} s={:.4f}", i, s)
            return s + jitad.sin(xs[i] * w)
        return FOR(0, 3, body, 0.0)
    xs = np.arange(3.0)
    g = jitad.grad(loss)(0.5, xs)
    assert g == pytest.approx(np.sum(xs * np.cos(xs * 0.5)))
    s = np.cumsum(np.r_[0, np.sin(xs * 0.5)])
    assert lines(capsys) == [f"step {i} s={s[i]:.4f}" for i in range(3)]
    jitad.testing.check_grads(loss, (0.5, xs), order=2, modes=("rev", "fwd"))


def test_eager_prints_at_once(capsys):
    jitad.debug.print("eager {} {}", 1.5, np.array([1, 2]))
    assert lines(capsys) == ["eager 1.5 [1 2]"]
    with pytest.raises(jitad.ArgumentError, match="format string"):
        jitad.debug.print(3.0)


def test_loaded_from_disk_cache_still_prints(tmp_path):
    code = textwrap.dedent("""
        import jitad
        f = jitad.jit(lambda x: (jitad.debug.print("x={}", x), x + 1.0)[1])
        print(f(2.0), f._last.loaded_from_cache)
    """)
    env = dict(os.environ, JITAD_CACHE_DIR=str(tmp_path))
    outs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
            for _ in range(2)]
    assert [o.returncode for o in outs] == [0, 0], outs[1].stderr
    assert outs[0].stdout.split() == ["x=2.0", "3.0", "False"]
    assert outs[1].stdout.split() == ["x=2.0", "3.0", "True"]
