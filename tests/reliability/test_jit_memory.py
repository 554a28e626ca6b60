"""Machine code is freed again: a process that compiles many signatures stays flat in
memory, and code still referenced keeps working while engines come and go (the JIT
loads programs into engines in generations; `jitad.lower.runtime.Generation`)."""
import gc
import os
import subprocess
import sys
import textwrap
import threading
import weakref

import numpy as np
import pytest

import jitad
from jitad.lower import runtime


@pytest.fixture
def small_generations(monkeypatch):
    """Engines of two programs each, so that a few compiles turn generations over."""
    monkeypatch.setattr(runtime, "GENERATION_MODULES", 2)


def churn(count, start=0):
    """Compile `count` new signatures of a function that keeps one, and let them go."""
    f = jitad.jit(lambda x: jitad.sum(x * 3.0))
    f.max_signatures = 1
    for n in range(start + 1, start + count + 1):
        assert f(np.ones(n)) == 3.0 * n
    del f
    gc.collect()
    assert jitad.jit(lambda x: x - 1.0)(0.5) == -0.5   # engines nobody holds are freed at the next compile


RSS_CHILD = textwrap.dedent("""
    import os
    import numpy as np
    import jitad
    from jitad.lower import runtime
    runtime.GENERATION_MODULES = 8

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    f = jitad.jit(lambda x: jitad.sum(x * 2.0) + 1.0)
    f.max_signatures = 4
    for n in range(1, {total} + 1):
        assert f(np.ones(n)) == 2.0 * n + 1.0
        if n == {warm}:
            before = rss()
    print(rss() - before, runtime.STATS.get("disposed"))
""")


def test_memory_of_evicted_signatures_is_returned():
    """300 evicted signatures: MCJIT alone keeps ~24 KiB of each (7 MiB); the process
    must grow by less than a third of that."""
    warm, total = 60, 360
    env = dict(os.environ, JITAD_CACHE_DIR="", JITAD_VERIFY="0", OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", RSS_CHILD.format(warm=warm, total=total)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    growth, disposed = proc.stdout.split()
    assert int(disposed) >= (total - warm) // 8 - 2   # the engines went
    assert int(growth) < (total - warm) * 8 * 1024, f"{int(growth) >> 10} KiB for {total - warm} signatures"


def test_code_of_an_old_generation_runs_while_referenced(small_generations):
    old = jitad.jit(lambda x, y: x * y + jitad.sin(x))
    assert old(3.0, 4.0) == pytest.approx(12.0 + np.sin(3.0))
    entry = old.__call__   # the native entry, installed on the function
    disposed = runtime.STATS["disposed"]
    churn(12)
    assert runtime.STATS["disposed"] > disposed   # generations were freed meanwhile
    assert old(3.0, 4.0) == pytest.approx(12.0 + np.sin(3.0))
    assert entry(2.0, 5.0) == pytest.approx(10.0 + np.sin(2.0))
    del old
    gc.collect()
    churn(6, start=12)
    assert entry(2.0, 5.0) == pytest.approx(10.0 + np.sin(2.0))   # the entry alone keeps its code


def test_an_evicted_signature_compiles_again_after_its_engine_is_freed(small_generations):
    f = jitad.jit(lambda x: x * 2.0 - 1.0)
    f.max_signatures = 1
    loaded = runtime.STATS["loaded"]
    for round_ in range(3):   # each shape is evicted by the next, its engine freed and loaded again
        for n in (3, 5, 7):
            assert np.array_equal(f(np.full(n, float(round_))), np.full(n, 2.0 * round_ - 1.0))
            gc.collect()
    if runtime.cache_dir():   # (the tests' private disk cache) its object code went into new engines
        assert runtime.STATS["loaded"] >= loaded + 6


def test_a_freed_generation_lets_go_of_pooled_results(small_generations):
    f = jitad.jit(lambda x: x * 2.0 + 1.0)
    kept = f(np.ones(4))   # a result the caller keeps
    dropped = weakref.ref(f(np.zeros(4)))   # one only the entry's pool holds now
    assert dropped() is not None
    del f
    churn(6)
    assert dropped() is None
    assert np.array_equal(kept, np.full(4, 3.0))


def test_threads_compile_while_generations_turn_over(small_generations):
    def work(k, errors):
        try:
            first = jitad.jit(lambda x: x + float(k))
            assert first(1.0) == 1.0 + k
            f = jitad.jit(lambda x: jitad.sum(x) * float(k))
            f.max_signatures = 2
            for n in range(1, 9):
                assert f(np.ones(n)) == float(n * k)
                assert first(2.0) == 2.0 + k
                if n % 3 == 0:
                    gc.collect()
        except BaseException as e:   # reported by the main thread
            errors.append(e)
    errors = []
    threads = [threading.Thread(target=work, args=(k, errors)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
