"""Deep recursion on any thread's stack, forked children, threads calling one
compiled function, and sizes whose byte counts overflow 64 bits — each completes or
raises `jitad.ResourceError`, never a signal or a hang. Every case runs in a child
process (with a timeout), so a crash or a hang fails the test instead of the run."""
import os
import shlex
import subprocess
import sys
import textwrap

import pytest


def run_python(*pieces, ulimit_s=None, timeout=300):
    """Run the code `pieces` in a fresh interpreter (under `ulimit -s ulimit_s` if given);
    it must exit normally. Return its stdout."""
    command = [sys.executable, "-c", "\n".join(textwrap.dedent(p) for p in pieces)]
    if ulimit_s is not None:
        command = ["bash", "-c", f"ulimit -s {ulimit_s} && exec {shlex.join(command)}"]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, (f"the child exited with {proc.returncode} (negative: killed by "
                                  f"a signal)\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc.stdout


DEEP = """
    import threading
    import numpy as np
    import jitad
    from jitad import FUN, IF, TREE, WHILE

    @FUN(out=0.0)
    def halves(n):   # a frame per level: LLVM cannot turn it into a loop (no fast-math)
        return IF(n <= 0, lambda: 0.0, lambda: 0.5 * halves(n - 1) + 1.0)

    def halves_ref(n):
        x = 0.0
        for _ in range(n):
            x = 0.5 * x + 1.0
        return x

    fun = jitad.jit(lambda n: halves(n))
    rev_while = jitad.grad(lambda x, n: WHILE(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * 1.0), (0, x))[1])
    tree = jitad.jit(lambda t: TREE(t, 0.0, lambda node, l, r: l + r + node.value))

    def chain(n):   # node k's only child is k + 1
        return jitad.Tree(np.r_[np.arange(1, n), -1], np.full(n, -1), value=np.ones(n))

    def work():
        for depth in (10, 10 ** 5):
            for name, call, want in (("fun", lambda: fun(depth), halves_ref(depth)),
                                     ("while", lambda: rev_while(1.0, depth), 1.0),
                                     ("tree", lambda: tree(chain(depth)), float(depth))):
                try:
                    print(name, depth, "ok" if call() == want else "wrong", flush=True)
                except jitad.ResourceError:
                    print(name, depth, "resource", flush=True)
"""


def _check_deep(out):
    lines = out.split("\n")
    assert lines[:3] == ["fun 10 ok", "while 10 ok", "tree 10 ok"], out
    for name, line in zip(("fun", "while", "tree"), lines[3:6]):
        assert line in (f"{name} 100000 ok", f"{name} 100000 resource"), out
    assert lines[6] == "done", out


@pytest.mark.parametrize("ulimit_s, thread_stack", [
    (None, 256 * 1024),      # a thread made with threading.stack_size(256 KiB)
    (1024, None),            # a 1 MiB main thread
    (1024, 0),               # a thread of the default size under a 1 MiB limit
    ("unlimited", None),     # the main thread's stack reported as the whole gap below it
    ("unlimited", 0),        # threads then get glibc's fixed default
])
def test_deep_recursion_uses_the_calling_threads_real_stack(ulimit_s, thread_stack):
    run = "work()" if thread_stack is None else f"""
        threading.stack_size({thread_stack})
        t = threading.Thread(target=work)
        t.start()
        t.join()"""
    _check_deep(run_python(DEEP, run, "print('done')", ulimit_s=ulimit_s))


def test_recursion_that_fits_stays_on_the_calling_thread():
    out = run_python(DEEP, """
        print(fun(10 ** 4) == halves_ref(10 ** 4))   # ~1 MiB of an 8 MiB stack
        print([t.name for t in threading.enumerate() if t.name == "jitad-deep-stack"])
        print(fun(10 ** 6) == halves_ref(10 ** 6))   # deeper: retried on that thread
        print([t.name for t in threading.enumerate() if t.name == "jitad-deep-stack"])
    """, ulimit_s=8192)
    assert out.split("\n")[:4] == ["True", "[]", "True", "['jitad-deep-stack']"], out


def test_threads_call_one_compiled_function_concurrently():
    out = run_python(DEEP, """
        import sys
        sys.setswitchinterval(1e-5)   # switch threads often
        results, errors = [], []

        def caller(k):
            try:
                for _ in range(30):
                    depth = 10 + 20000 * (k % 3)
                    results.append(fun(depth) == halves_ref(depth) and rev_while(2.0, depth) == 1.0)
            except BaseException as e:
                errors.append(e)
        threads = []
        for k, size in enumerate([0, 256 * 1024, 1 << 20, 0, 64 * 1024, 8 << 20]):
            threading.stack_size(size)   # read when a thread starts
            threads.append(threading.Thread(target=caller, args=(k,)))
            threads[-1].start()
        for t in threads:
            t.join()
        print(len(results), all(results), errors)
    """)
    assert out.strip() == "180 True []", out


FORK = """
    import os
    depth = 10 ** 6   # deeper than the main thread's stack: runs on the deep-stack thread

    def child_exit(ok):
        os._exit(0 if ok else 3)

    def fork_and_wait(child):
        pid = os.fork()
        if pid == 0:
            try:
                child_exit(child())
            finally:
                os._exit(4)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)
"""


def test_forked_child_makes_deep_calls_after_the_parent_did():
    out = run_python(DEEP, FORK, """
        import faulthandler
        faulthandler.dump_traceback_later(60, exit=True)   # a hung child fails the test
        assert fun(depth) == halves_ref(depth)
        print(fork_and_wait(lambda: fun(depth) == halves_ref(depth)
                                    and rev_while(3.0, 10 ** 5) == 1.0))
    """, timeout=120)
    assert out.strip() == "0", out


def test_fork_while_another_thread_compiles():
    out = run_python(DEEP, FORK, """
        import faulthandler, time
        stop = False

        def compile_forever():
            k = 0
            while not stop:
                k += 1
                jitad.jit(lambda x, k=k: x * k + 1.0)(float(k))   # a new function: compiled

        t = threading.Thread(target=compile_forever)
        t.start()
        codes = []
        for trial in range(10):
            time.sleep(0.02)

            def child():
                faulthandler.dump_traceback_later(60, exit=True)   # a hung child fails
                g = jitad.jit(lambda x: x * 3.0 + trial)
                return g(2.0) == 6.0 + trial and fun(depth) == halves_ref(depth)
            codes.append(fork_and_wait(child))
        stop = True
        t.join()
        print(codes)
    """, timeout=240)
    assert out.strip() == str([0] * 10), out


def test_sizes_whose_byte_counts_overflow_raise_resource_error():
    out = run_python("""
        import numpy as np
        import jitad
        from jitad import FOR

        def attempt(name, fn, *args):
            try:
                print(name, fn(*args))
            except jitad.ResourceError:
                print(name, "resource")

        g = jitad.grad(lambda x, n: FOR(0, n, lambda i, s: s * s * 0.5 + x, x))
        for n in (2 ** 60, 2 ** 61, 2 ** 63 - 1):   # the tape's n * 8 bytes wraps from 2^61
            attempt(n, g, 0.1, n)
        attempt("wrapped trips", jitad.grad(lambda x: FOR(-2 ** 62, 2 ** 62, lambda i, s: s * s * 0.5 + x, x)), 0.1)
        attempt("empty", jitad.grad(lambda x: FOR(2 ** 62, -2 ** 62, lambda i, s: s * 0.5 + x, x)), 0.1)
        gt = jitad.grad(lambda x, n: jitad.sum(FOR(0, n, lambda i, s: s * s * 0.5 + x, x)))
        attempt("tensor", gt, np.full(1000, 0.1), 2 ** 55)   # 2^55 * 8000 bytes wraps
        attempt("staged", jitad.jit(lambda x: jitad.broadcast_to(x, (2 ** 61,))), np.ones(1))
        attempt("staged sum", jitad.jit(lambda x: jitad.sum(jitad.broadcast_to(x, (2 ** 30, 2 ** 30)))), np.ones(1))
        attempt("after", g, 0.5, 3)
    """)
    assert out.split("\n")[:-1] == [
        "1152921504606846976 resource", "2305843009213693952 resource", "9223372036854775807 resource",
        "wrapped trips resource", "empty 1.0", "tensor resource", "staged resource", "staged sum resource",
        f"after {jitad_grad_after()}"], out


def jitad_grad_after():
    """d/dx of three steps of s -> s * s / 2 + x from s = x = 0.5."""
    s, ds = 0.5, 1.0
    for _ in range(3):
        s, ds = s * s * 0.5 + 0.5, s * ds + 1.0
    return ds


def test_reverse_loop_of_more_than_2_63_trips_without_a_tape_runs_not_returns():
    """A linear body needs no tape: the backward loop then runs all 2^63 iterations (it
    used to run none, returning the initial adjoint at once)."""
    code = textwrap.dedent("""
        import jitad
        from jitad import FOR
        g = jitad.grad(lambda x, lo, hi: FOR(lo, hi, lambda i, s: s * 0.5 + x, x))
        print(g(0.1, 0, 3), flush=True)   # compiled: the call below starts at once
        print(g(0.1, -2 ** 62, 2 ** 62), flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "1.875\n"
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=2)
    finally:
        proc.kill()
        proc.wait()



def test_threads_compile_the_same_functions_at_once():
    """Six threads make their first calls of the same jitted functions together (one
    compile wins, the others find its code or compile their own), with evictions from a
    small signature cache, and two compile their own copies meanwhile: every result right.
    (In this process: what could go wrong here is an exception, not a crash.)"""
    import threading

    import numpy as np

    import jitad
    from jitad import FOR, WHILE

    def make():
        fs = [jitad.jit(lambda x: jitad.sum(jitad.tanh(x) * x)),
              jitad.jit(jitad.grad(lambda x, n: FOR(0, n, lambda i, s: s * jitad.cos(s) + jitad.sum(x), 1.0))),
              jitad.jit(jitad.vmap(jitad.grad(lambda x: jitad.sum(x * x)))),
              jitad.grad(lambda x: WHILE(lambda s: s[1] < 5, lambda s: (s[0] * 1.5, s[1] + 1), (x, 0))[0]),
              jitad.jit(lambda d: d["a"] * 2.0 + d["b"])]
        for f in fs[:3] + fs[4:]:
            f.max_signatures = 2
        return fs
    shared, errors, barrier = make(), [], threading.Barrier(6)

    def check(fs, k, rep):
        x = np.linspace(0.1, 1.0, 1 + (k + rep) % 3)
        assert np.isclose(fs[0](x), np.sum(np.tanh(x) * x))
        np.testing.assert_allclose(fs[1](x, 0), np.zeros_like(x))
        np.testing.assert_allclose(fs[2](np.stack([x, 2 * x])), np.stack([2 * x, 4 * x]))
        assert fs[3](1.0) == 1.5 ** 5
        assert fs[4]({"a": 1.0, "b": float(k)}) == 2.0 + k

    def work(k):
        try:
            barrier.wait()
            for rep in range(3):
                check(shared, k, rep)
            if k < 2:
                check(make(), k, 0)
        except BaseException as e:
            errors.append(repr(e))
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)   # switch threads often
    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
