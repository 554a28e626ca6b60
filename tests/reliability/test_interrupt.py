"""Ctrl-C stops compiled code: a SIGINT during a long compiled loop raises
KeyboardInterrupt in the caller within a fraction of a second, and jitad stays usable
(the next call is right and starts with the arena empty). Each case runs in a subprocess
that the test interrupts with a real signal."""
import os
import select
import signal
import subprocess
import sys
import textwrap
import time

import pytest

PRELUDE = """
import signal, sys, time
import numpy as np
import jitad
from jitad import FOR, FUN, IF, WHILE
from jitad.lower import runtime

layer = jitad.jit(lambda a: jitad.tanh(a @ a) @ a)   # its intermediate lives in the arena
a = np.full((40, 40), 0.01)
want = np.tanh(a @ a) @ a
def check_usable():
    runtime.arena_high_water(reset=True)
    assert np.allclose(layer(a), want)
    return runtime.arena_high_water()   # bytes from the arena's base: where every call starts
before = check_usable()
assert before > 0
"""

EPILOGUE = """
print("ready", flush=True)
start = time.perf_counter()
try:
    long_call()
    print("finished", flush=True)
except KeyboardInterrupt:
    print("interrupted after %.3f s" % (time.perf_counter() - start), flush=True)
after = check_usable()
assert after == before, (before, after)
check_again()
print("usable", flush=True)
"""

CASES = {
    "while": """
        f = jitad.jit(lambda x: WHILE(lambda s: s > -1.0, lambda s: s * 0.5 + 1.0, x))
        g = jitad.jit(lambda x: WHILE(lambda s: s < 10.0, lambda s: s + 1.0, x))
        long_call = lambda: f(1.0)
        def check_again():
            assert g(0.0) == 10.0
    """,
    "for_2_62": """
        f = jitad.jit(lambda x, n: FOR(0, n, lambda i, s: s * 0.5 + x, x))
        expected = f(1.0, 10)
        long_call = lambda: f(1.0, 2 ** 62)
        def check_again():
            assert f(1.0, 10) == expected
    """,
    "grad_while": """
        def h(x, n, m):   # reverse mode keeps a frame per iteration: runs on the deep-stack thread
            def step(s):   # m inner steps: the long call's stack grows slowly, so SIGINT comes first
                return FOR(0, m, lambda i, t: jitad.sin(t) * 0.999 + x, s[0]), s[1] + 1
            return WHILE(lambda s: s[1] < n, step, (x, 0))[0]
        f = jitad.jit(jitad.grad(h))
        expected = f(0.1, 10 ** 5, 1)
        long_call = lambda: f(0.1, 10 ** 9, 100)
        def check_again():
            assert f(0.1, 10 ** 5, 1) == expected   # deep again: the worker still serves
    """,
    "recursive_fun": """
        @FUN(out=0.0)
        def fib(n):
            return IF(n < 2, lambda: n * 1.0, lambda: fib(n - 1) + fib(n - 2))
        f = jitad.jit(lambda n: fib(n))
        long_call = lambda: f(60)
        def check_again():
            assert f(20) == 6765.0
    """,
    "fused_tensor_loop": """
        def body(x):
            for _ in range(200):
                x = jitad.sin(x) * 0.9 + 0.1
            return x
        f = jitad.jit(body)
        x = np.linspace(0.0, 1.0, 10 ** 7)
        expected = f(x[:100])
        long_call = lambda: f(x)
        def check_again():
            assert np.array_equal(f(x[:100]), expected)
    """,
    "debug_print_loop": """
        # the printing callback runs Python, where the signal lands: it must still stop the loop
        f = jitad.jit(lambda x, n: FOR(0, n, lambda i, s: (jitad.debug.print("{}", s), s * 0.5 + x)[1], x))
        def long_call():
            sys.stdout = open("/dev/null", "w")
            try:
                f(1.0, 2 ** 62)
            finally:
                sys.stdout = sys.__stdout__
        def check_again():
            assert layer(a).shape == (40, 40)
    """,
    "sort_in_loop": """
        xs = np.random.default_rng(0).standard_normal(1000)
        f = jitad.jit(lambda x, n: FOR(0, n, lambda i, s: s + jitad.sort(x * s)[0] * 1e-9, 1.0))
        expected = f(xs, 3)
        long_call = lambda: f(xs, 2 ** 62)
        def check_again():
            assert f(xs, 3) == expected
    """,
}


# The child starts as a process started from a terminal does: SIGINT unblocked, Python's
# handler installed. (A child inherits its parent's signal mask and an ignored SIGINT; a
# long pytest run is not a terminal: a command a non-interactive shell starts in the
# background with `&`, as a CI script may, starts with SIGINT ignored, and so would each
# child, which then never stops.) What it inherited goes to stderr for the failure report.
CHILD_SIGNALS = """
import signal, sys
print("inherited SIGINT:", signal.getsignal(signal.SIGINT), "blocked:",
      signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []), file=sys.stderr, flush=True)
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
signal.signal(signal.SIGINT, signal.default_int_handler)
"""


def _interrupt(script, delay=0.3, timeout=60):
    """Run `script`, send SIGINT `delay` s after it prints "ready"; its output."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-c", CHILD_SIGNALS + script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        # (a child stuck before "ready" fails the test instead of hanging the run)
        assert select.select([proc.stdout], [], [], timeout)[0], f"not ready after {timeout} s"
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise AssertionError(f"no stop {timeout} s after SIGINT; stdout: {out!r}; stderr: {err[-2000:]}") from None
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_sigint_stops_compiled_code(case):
    out = _interrupt(PRELUDE + textwrap.dedent(CASES[case]) + EPILOGUE)
    line, usable = out.splitlines()
    assert line.startswith("interrupted after"), out
    assert float(line.split()[2]) < 2.0, out   # the signal came 0.3 s in
    assert usable == "usable"


def test_handler_that_returns_gets_the_call_rerun():
    """A Python SIGINT handler that does not raise runs, and the call still returns its
    value (it starts over: compiled code has no side effects)."""
    script = textwrap.dedent("""
        import signal, jitad
        from jitad import FOR
        seen = []
        signal.signal(signal.SIGINT, lambda *a: seen.append(1))
        f = jitad.jit(lambda x, n: FOR(0, n, lambda i, s: s * 0.5 + x, x))
        n = 1
        while True:   # about a second of work
            import time; t = time.perf_counter(); f(1.0, n)
            if time.perf_counter() - t > 0.5: break
            n *= 2
        print("ready", flush=True)
        print(f(1.0, 2 * n), seen)
    """)
    assert _interrupt(script).split() == ["2.0", "[1]"]
