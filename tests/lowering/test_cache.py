"""The object-code disk cache (`$JITAD_CACHE_DIR`), observed from fresh processes.

Each check runs Python in a subprocess so that the in-memory caches start empty, and
asserts on `jitad.lower.runtime.STATS` (modules compiled here / loaded from disk),
never on wall time.
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

# A child compiles `f` (and, asked to, `g`), calls it and prints what happened as JSON.
CHILD = textwrap.dedent("""
    import json, os, sys, time
    import jitad
    from jitad import IF, WHILE
    from jitad.lower import runtime

    go = os.environ.get("TEST_GO_FILE")
    if go:   # the concurrent test's start line: say we are ready, wait for the signal
        open(os.environ["TEST_READY_FILE"], "w").close()
        while not os.path.exists(go):
            time.sleep(0.001)
    before = dict(runtime.STATS)
    f = jitad.jit(lambda x, n: IF(x > 0, lambda: x ** n, lambda: -x % 3.0))
    g = jitad.jit(lambda x: WHILE(lambda s: s[0] < 10, lambda s: (s[0] + 1, s[1] * x), (0, 1.0))[1])
    results = [f(2.0, 3), f(-4.0, 1)]
    if "g" in sys.argv[1:]:
        results.append(g(1.5))
    print(json.dumps({"results": results,
                      "compiled": runtime.STATS["compiled"] - before["compiled"],
                      "loaded": runtime.STATS["loaded"] - before["loaded"]}))
""")
F_RESULTS = [8.0, 1.0]
G_RESULT = 1.5 ** 10


def child_env(cache_dir, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEST_")}
    env.update(OPENBLAS_NUM_THREADS="1", **extra)
    if cache_dir is None:
        env.pop("JITAD_CACHE_DIR", None)
    else:
        env["JITAD_CACHE_DIR"] = str(cache_dir)
    return env


def report(returncode, stdout, stderr):
    """The child's JSON report; it must have exited normally (no crash, no exception)."""
    assert returncode == 0, f"child exited with {returncode}\n{stderr}"
    return json.loads(stdout.strip().splitlines()[-1])


def run_child(cache_dir, *args, **extra_env):
    proc = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True,
                          env=child_env(cache_dir, **extra_env), timeout=120)
    return report(proc.returncode, proc.stdout, proc.stderr)


def cache_files(directory):
    return sorted(os.path.join(root, name) for root, _, names in os.walk(directory) for name in names)


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """(cache dir written by one process compiling `f`, that process's report)."""
    directory = tmp_path_factory.mktemp("pristine-cache")
    return directory, run_child(directory)


@pytest.fixture
def warm_cache(first_run, tmp_path):
    """A private copy of the cache that `first_run` wrote."""
    return shutil.copytree(first_run[0], tmp_path / "cache")


def test_first_process_compiles_and_writes_the_cache(first_run):
    directory, first = first_run
    assert first == {"results": F_RESULTS, "compiled": 1, "loaded": 0}
    assert cache_files(directory), "nothing was written to the cache directory"


def test_second_process_loads_instead_of_compiling(warm_cache):
    assert run_child(warm_cache) == {"results": F_RESULTS, "compiled": 0, "loaded": 1}


def test_a_different_function_is_not_served_from_the_cache(warm_cache):
    both = run_child(warm_cache, "g")
    assert both == {"results": F_RESULTS + [G_RESULT], "compiled": 1, "loaded": 1}


def _truncate(blob):
    return blob[:len(blob) // 2]


def _flip_middle(blob):
    k = len(blob) // 2
    return blob[:k] + bytes(b ^ 0xFF for b in blob[k:k + 16]) + blob[k + 16:]


def _flip_last(blob):
    return blob[:-1] + bytes([blob[-1] ^ 0x01])


CORRUPTIONS = {
    "truncated": _truncate,
    "empty": lambda blob: b"",
    "flipped_header": lambda blob: bytes([blob[0] ^ 0xFF]) + blob[1:],
    "flipped_middle": _flip_middle,
    "flipped_last_bit": _flip_last,
}


def corrupt_all(directory, corrupt):
    files = cache_files(directory)
    assert files
    for path in files:
        with open(path, "rb") as fh:
            blob = fh.read()
        with open(path, "wb") as fh:
            fh.write(corrupt(blob))


@pytest.mark.parametrize("corrupt", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_corrupted_cache_file_is_recompiled(warm_cache, corrupt):
    corrupt_all(warm_cache, corrupt)
    again = run_child(warm_cache)   # must neither crash nor load the damaged code
    assert again == {"results": F_RESULTS, "compiled": 1, "loaded": 0}


def test_recompiling_repairs_a_corrupted_cache(warm_cache):
    corrupt_all(warm_cache, _flip_middle)
    run_child(warm_cache)
    assert run_child(warm_cache) == {"results": F_RESULTS, "compiled": 0, "loaded": 1}


def test_concurrent_processes_share_a_cache_dir(tmp_path):
    cache, go = tmp_path / "cache", tmp_path / "go"
    ready = [tmp_path / f"ready{k}" for k in range(3)]
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, "g"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env=child_env(cache, TEST_GO_FILE=str(go), TEST_READY_FILE=str(r)))
             for r in ready]
    deadline = time.monotonic() + 60
    while not all(r.exists() for r in ready):   # all have imported jitad: start them together
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
        time.sleep(0.01)
    go.touch()
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        got = report(proc.returncode, out, err)
        assert got["results"] == F_RESULTS + [G_RESULT]
        assert got["compiled"] + got["loaded"] == 2
    assert not [p for p in cache_files(cache) if p.endswith(".tmp")], "temporary files left behind"
    after = run_child(cache, "g")
    assert after == {"results": F_RESULTS + [G_RESULT], "compiled": 0, "loaded": 2}


def test_empty_cache_dir_disables_the_cache(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(home / "xdg")}
    for _ in range(2):
        assert run_child("", **env) == {"results": F_RESULTS, "compiled": 1, "loaded": 0}
    assert cache_files(home) == [], "JITAD_CACHE_DIR='' still wrote a cache"


def test_default_cache_dir_follows_xdg_cache_home(tmp_path):
    env = {"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert run_child(None, **env) == {"results": F_RESULTS, "compiled": 1, "loaded": 0}
    assert cache_files(tmp_path / "xdg" / "jitad")
    assert run_child(None, **env) == {"results": F_RESULTS, "compiled": 0, "loaded": 1}


def test_unusable_cache_dir_only_costs_a_recompile(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("a file where the cache directory should be")
    assert run_child(not_a_dir) == {"results": F_RESULTS, "compiled": 1, "loaded": 0}
    assert not_a_dir.read_text() == "a file where the cache directory should be"
