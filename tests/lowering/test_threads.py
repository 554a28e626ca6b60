"""Threads calling compiled functions: the calls run in parallel (without the GIL) and
every result is the one the same call gives alone; concurrent compiles of one
signature compile it once; Ctrl-C stops a long call in the main thread or in another."""
import textwrap
import threading

import numpy as np

import jitad
from jitad import FOR, WHILE
from jitad.lower import entry, runtime

from ..reliability.test_interrupt import _interrupt

THREADS, ROUNDS = 6, 12


def _elementwise(x):
    for _ in range(4):
        x = jitad.sin(x) * 0.9 + 0.1
    return x


def _damped_sum(x, n):   # a scalar WHILE loop of n steps (thousands: lets the GIL go at its first poll)
    return WHILE(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * 0.999 + x), (0, 0.0))[1]


def _layer_loss(w, x):
    return jitad.sum(jitad.tanh(x @ w) ** 2)


FUNCTIONS = {   # name -> (function, inputs for call k, NumPy's answer)
    "elementwise": (jitad.jit(_elementwise),
                    lambda k: (np.linspace(-3.0, 3.0, 9000) + k,),
                    lambda x: _np_elementwise(x)),
    "while": (jitad.jit(_damped_sum), lambda k: (0.5 + k, 5000 + 700 * k), lambda x, n: _py_damped_sum(x, n)),
    "matmul": (jitad.jit(lambda a, b: a @ b), lambda k: (_mat(k, (70, 60)), _mat(k + 1, (60, 50))),
               lambda a, b: a @ b),
    "gradient": (jitad.jit(jitad.grad(_layer_loss)), lambda k: (_mat(k, (40, 30)) * 0.1, _mat(k + 2, (20, 40))),
                 lambda w, x: x.T @ (2 * np.tanh(x @ w) * (1 - np.tanh(x @ w) ** 2))),
}


def _mat(seed, shape):
    return np.random.default_rng(seed).standard_normal(shape)


def _np_elementwise(x):
    for _ in range(4):
        x = np.sin(x) * 0.9 + 0.1
    return x


def _py_damped_sum(x, n):
    s = 0.0
    for _ in range(n):
        s = s * 0.999 + x
    return s


def _run_threads(work, count=THREADS):
    """Run `work(t)` on `count` threads started together; re-raise the first error."""
    errors, start = [], threading.Barrier(count)

    def run(t):
        try:
            start.wait()
            work(t)
        except BaseException as e:   # reported in the test's thread
            errors.append(e)
    threads = [threading.Thread(target=run, args=(t,)) for t in range(count)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]


def _alone(name, k):
    fn, inputs, _ = FUNCTIONS[name]
    return fn(*inputs(k))


def test_single_thread_results_match_numpy():
    for name, (fn, inputs, reference) in FUNCTIONS.items():
        for k in (0, 3):
            np.testing.assert_allclose(fn(*inputs(k)), reference(*inputs(k)), rtol=1e-12, atol=1e-12, err_msg=name)


def _entry_text(llvm_ir):
    """The optimized IR of a program's entry (not of its deep-stack twin)."""
    return next(chunk for chunk in llvm_ir.split("\ndefine ") if chunk.split("(")[0].endswith(('_entry"', "_entry")))


def test_gil_modes():
    """The elementwise, matmul and gradient programs let the GIL go for the whole call, the
    scalar loop at its first poll; every entry takes the GIL back."""
    for name, (fn, inputs, _) in FUNCTIONS.items():
        fn(*inputs(0))
        text = _entry_text(fn.llvm_ir)
        assert ("jitad_release_gil" in text) == (name != "while"), name
        assert "jitad_acquire_gil" in text, name
    assert entry.RELEASE_WORK > 9000 * 2   # (the elementwise one passes it by its chain of nodes)


def _check_many(names):
    expected = {(n, k): _alone(n, k) for n in names for k in range(THREADS)}
    kept = []

    def work(t):
        for r in range(ROUNDS):
            name = names[(t + r) % len(names)]
            k = (t + r) % THREADS
            got = _alone(name, k)
            assert np.array_equal(got, expected[name, k]), (name, k)
            if r % 3 == 0:   # keep some results: the result pool must not hand them out again
                kept.append((name, k, got))
    _run_threads(work)
    for name, k, got in kept:
        assert np.array_equal(got, expected[name, k]), (name, k)


def test_threads_call_one_function():
    _check_many(["elementwise"])


def test_threads_call_different_functions():
    _check_many(list(FUNCTIONS))


def test_concurrent_compiles_compile_each_signature_once():
    traced = []

    def f(x):
        traced.append(np.shape(x))
        return jitad.cos(x) * 2.0
    g = jitad.jit(f)
    shapes = [(3,), (4,), (3,), (4,), (3,), (5,)]
    results = [None] * len(shapes)

    def work(t):
        results[t] = g(np.full(shapes[t], float(t)))
    _run_threads(work, len(shapes))
    assert sorted(traced) == [(3,), (4,), (5,)]
    for t, shape in enumerate(shapes):
        np.testing.assert_array_equal(results[t], np.cos(np.full(shape, float(t))) * 2.0)


def test_thread_blocks_go_with_their_threads():
    """Each thread calling compiled code gets its own block and tensor arena, freed when
    the thread ends (30 short-lived threads leave none behind); results stay exact."""
    fn, inputs, _ = FUNCTIONS["gradient"]
    want = fn(*inputs(1))
    before = len(runtime._blocks)
    for _ in range(3):
        _run_threads(lambda t: [np.testing.assert_array_equal(fn(*inputs(1)), want) for _ in range(2)], 10)
    import gc
    gc.collect()
    assert len(runtime._blocks) == before


def test_python_runs_while_another_thread_computes():
    """A thread's long scalar loop (~0.6 s of CPU) lets the GIL go at its first poll: the
    main thread runs a Python loop of ~0.05 s meanwhile and finishes it while the call still
    runs. (Were the GIL held, the main thread would run only in the switch interval Python
    takes at the loop's start, in the `debug.print` callback, and then after the call.)"""
    inside = threading.Event()

    def body(x, n):
        jitad.debug.print("started {}", x)   # a callback into Python, before the loop
        return FOR(0, n, lambda i, s: s * 0.999 + x * 1e-3, x)
    long_loop = jitad.jit(body)
    done = []

    def work():
        done.append(long_loop(1.0, 3 * 10 ** 8))
    import builtins
    real_print = builtins.print

    def noting_print(*args, **kwargs):   # debug.print's callback prints with it
        inside.set()
    builtins.print = noting_print
    try:
        long_loop(1.0, 10)
        inside.clear()
        t = threading.Thread(target=work)
        t.start()
        inside.wait()
        n = 0
        for _ in range(10 ** 6):
            n += 1
        finished_first = not done
        t.join()
    finally:
        builtins.print = real_print
    assert finished_first
    assert abs(done[0] - 1.0) < 1e-12   # (the loop's fixed point)


def test_blas_products_put_openblas_thread_count_back():
    """A transposed product (BLAS's) of 100*80*60 multiply-adds runs on one OpenBLAS thread
    (set around the call); OpenBLAS's count is its own again after calls from one thread
    and from several, and every result is exact."""
    j = runtime.jit()
    assert j.blas, "numpy's OpenBLAS was not found"
    blas = runtime._numpy_openblas()
    own = blas.scipy_openblas_get_num_threads64_()
    f = jitad.jit(lambda a, b: a.T @ b)
    inputs = [(_mat(k, (100, 80)), _mat(k + 9, (100, 60))) for k in range(THREADS)]
    alone = [f(a, b) for a, b in inputs]
    for (a, b), got in zip(inputs, alone):
        np.testing.assert_allclose(got, a.T @ b, rtol=1e-12, atol=1e-12)
    assert blas.scipy_openblas_get_num_threads64_() == own

    def work(t):
        for r in range(ROUNDS):
            k = (t + r) % THREADS
            assert np.array_equal(f(*inputs[k]), alone[k])
    _run_threads(work)
    assert blas.scipy_openblas_get_num_threads64_() == own


def test_threaded_blas_products_wait_for_an_idle_core():
    """Whether a large product may take OpenBLAS's threads follows the load average: the
    compiled check marks the machine busy when it leaves no core idle, reads the load
    again only once its last reading is stale, and a large product's result is exact
    either way."""
    import ctypes
    import os

    import llvmlite.binding as llvm
    j = runtime.jit()
    refresh = ctypes.CFUNCTYPE(None)(llvm.address_of_symbol("jitad_blas_refresh_load"))
    words = j.blas_busy
    saved = words.copy()
    try:
        words[:] = (7, 0)   # stale (read at cycle 0): read now
        refresh()
        busy = os.getloadavg()[0] >= os.cpu_count() - runtime.BLAS_BUSY_LOAD
        assert words[1] > 0 and words[0] in ((1,) if busy else (0, 1))   # (the load may rise in between)
        words[0] = 7   # fresh: kept
        refresh()
        assert words[0] == 7
        f = jitad.jit(lambda a, b: a.T @ b)   # 200*160*160 multiply-adds: past BLAS_THREADED_WORK
        a, b = _mat(1, (160, 200)), _mat(2, (160, 160))
        for flag in (0, 1):
            words[:] = (flag, words[1])
            np.testing.assert_allclose(f(a, b), a.T @ b, rtol=1e-12, atol=1e-12)
    finally:
        words[:] = saved


CTRL_C = """
import os, signal, threading, time
import jitad
from jitad import FOR
f = jitad.jit(lambda x, n: FOR(0, n, lambda i, s: s * 0.5 + x, x))
assert f(1.0, 100) == 2.0
outcome = []

def endless():   # stopped by Ctrl-C only
    try:
        f(1.0, 2 ** 62)
        outcome.append("finished")
    except KeyboardInterrupt:
        outcome.append("interrupted")

def wait_for_outcome():   # (not Thread.join: interrupted, Python 3.11's marks the thread done)
    while not outcome:
        time.sleep(0.01)
    return outcome.pop()

# 1. a long call in another thread while the main thread waits: Ctrl-C from outside
t = threading.Thread(target=endless)
t.start()
print("ready", flush=True)
try:
    while not outcome:
        time.sleep(0.01)
    time.sleep(1.0)   # (a KeyboardInterrupt still pending is raised here)
    print("main not interrupted", flush=True)
except KeyboardInterrupt:
    print("main interrupted", flush=True)
print("thread", wait_for_outcome(), flush=True)
assert f(1.0, 100) == 2.0

# 2. a long call in the main thread while another thread runs one too: Ctrl-C from a timer
t = threading.Thread(target=endless)
t.start()
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    f(1.0, 2 ** 62)
    print("main finished", flush=True)
except KeyboardInterrupt:
    print("main interrupted", flush=True)
print("thread", wait_for_outcome(), flush=True)

# 3. a handler set after jitad's first call (as ipykernel does for each cell) displaced
# jitad's C-level counter: the main thread's next call puts it back
signal.signal(signal.SIGINT, signal.default_int_handler)
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    f(1.0, 2 ** 62)
    print("main finished", flush=True)
except KeyboardInterrupt:
    print("main interrupted", flush=True)
print(f(1.0, 100), flush=True)
"""


def test_ctrl_c_stops_long_calls_in_every_thread():
    """Ctrl-C raises KeyboardInterrupt in the main thread, as Python does, and stops the
    long compiled calls running in other threads (each raises KeyboardInterrupt there),
    also after `signal.signal` set a handler; then compiled functions work as before."""
    out = _interrupt(textwrap.dedent(CTRL_C), delay=0.5)
    assert out.split("\n")[:-1] == ["main interrupted", "thread interrupted"] * 2 + ["main interrupted", "2.0"], out
