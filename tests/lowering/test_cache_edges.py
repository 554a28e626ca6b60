"""The disk cache never trusts a file's name: an entry whose content does not
belong to its key — swapped, relabelled, garbage with a valid checksum, or not a regular
file at all — is ignored and recompiled, and the process neither crashes nor hangs.
The in-memory caches (signatures per jitted function, functions `jvp` compiled) are bounded.

Each case runs the child of test_cache.py (it compiles `f`, and `g` when asked) in a
fresh process with a timeout, on a private copy of a warm cache.
"""
import gc
import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
import weakref

import numpy as np
import pytest

import jitad
from jitad.lower import runtime
from .test_cache import CHILD, F_RESULTS, G_RESULT, cache_files, child_env, report

FG_RESULTS = F_RESULTS + [G_RESULT]


def run(cache_dir, *args):
    proc = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True,
                          env=child_env(cache_dir), timeout=60)   # a hang fails here
    return report(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """(a cache holding the entries of `f` and `g`, path of f's entry, path of g's entry)."""
    only_f = tmp_path_factory.mktemp("only-f")
    assert run(only_f)["compiled"] == 1
    both = shutil.copytree(only_f, tmp_path_factory.mktemp("f-and-g") / "cache")
    assert run(both, "g") == {"results": FG_RESULTS, "compiled": 1, "loaded": 1}
    [f_entry] = [os.path.relpath(p, only_f) for p in cache_files(only_f)]
    [g_entry] = [os.path.relpath(p, both) for p in cache_files(both) if os.path.relpath(p, both) != f_entry]
    return both, f_entry, g_entry


@pytest.fixture
def cache(pristine, tmp_path):
    """(a private copy of the warm cache, f's entry, g's entry)."""
    directory, f_entry, g_entry = pristine
    copy = shutil.copytree(directory, tmp_path / "cache")
    return copy, copy / f_entry, copy / g_entry


def fields(path):
    blob = path.read_bytes()
    assert hashlib.sha256(blob[32:]).digest() == blob[:32]
    return runtime._unpack(blob[32:])


def write_with_valid_checksum(path, payload):
    path.write_bytes(hashlib.sha256(payload).digest() + payload)


def test_swapped_entries_are_recompiled_and_repaired(cache):
    directory, f_entry, g_entry = cache
    f_blob, g_blob = f_entry.read_bytes(), g_entry.read_bytes()
    f_entry.write_bytes(g_blob)
    g_entry.write_bytes(f_blob)
    assert run(directory, "g") == {"results": FG_RESULTS, "compiled": 2, "loaded": 0}
    assert run(directory, "g") == {"results": FG_RESULTS, "compiled": 0, "loaded": 2}


def _relabelled_g(f_fields, g_fields):   # g's valid entry claiming to be f's
    return runtime._pack(f_fields[:2] + g_fields[2:])


def _relabelled_g_naming_f(f_fields, g_fields):
    """g's object code with f's entry names appended: it passes the check before loading
    and lacks f's entry points once loaded."""
    names = f_fields[0][:32].decode()
    extra = b"".join(f"jitad_{names}_{e}\0".encode() for e in ("shallow", "deep"))
    return runtime._pack(f_fields[:2] + [g_fields[2], g_fields[3] + extra])


FIXED_CHECKSUM = {   # f's entry changed, its checksum recomputed
    "garbage": lambda f, g: os.urandom(5000),
    "garbage_after_the_key": lambda f, g: runtime._pack(f[:2]) + os.urandom(5000),
    "other_key": lambda f, g: runtime._pack([f[0][:-1] + b"0" if f[0][-1:] != b"0" else f[0][:-1] + b"1"] + f[1:]),
    "other_fingerprint": lambda f, g: runtime._pack([f[0], f[1] + b"|other"] + f[2:]),
    "relabelled": _relabelled_g,
    "relabelled_naming_the_entries": _relabelled_g_naming_f,
    "truncated_object": lambda f, g: runtime._pack(f[:3] + [f[3][:len(f[3]) // 2]]),
}


@pytest.mark.parametrize("forge", FIXED_CHECKSUM.values(), ids=FIXED_CHECKSUM.keys())
def test_a_forged_entry_with_a_valid_checksum_is_recompiled(cache, forge):
    directory, f_entry, g_entry = cache
    write_with_valid_checksum(f_entry, forge(fields(f_entry), fields(g_entry)))
    assert run(directory) == {"results": F_RESULTS, "compiled": 1, "loaded": 0}
    if run(directory)["loaded"] == 0:   # an entry that passed the symbol check was removed
        assert run(directory) == {"results": F_RESULTS, "compiled": 0, "loaded": 1}


def _link_to_a_valid_entry(path, blob):   # a link is not followed, even to good content
    elsewhere = path.parent.parent / "elsewhere"
    elsewhere.write_bytes(blob)
    os.symlink(elsewhere, path)


def _sparse(path, blob):
    with open(path, "wb") as f:
        f.truncate(runtime.MAX_CACHE_ENTRY * 32)   # 8 GiB of holes: reading it would take the memory


NOT_AN_ENTRY = {
    "fifo": lambda path, blob: os.mkfifo(path),
    "link_to_dev_zero": lambda path, blob: os.symlink("/dev/zero", path),
    "link_to_a_valid_entry": _link_to_a_valid_entry,
    "directory": lambda path, blob: os.mkdir(path),
    "empty": lambda path, blob: path.write_bytes(b""),
    "huge_sparse": _sparse,
}


@pytest.mark.parametrize("make", NOT_AN_ENTRY.values(), ids=NOT_AN_ENTRY.keys())
def test_an_entry_that_is_not_a_small_regular_file_is_never_read(cache, make):
    directory, f_entry, _ = cache
    blob = f_entry.read_bytes()
    os.unlink(f_entry)
    make(f_entry, blob)
    assert run(directory) == {"results": F_RESULTS, "compiled": 1, "loaded": 0}
    if os.path.isdir(f_entry):   # cannot be replaced: every process compiles, none fails
        assert run(directory) == {"results": F_RESULTS, "compiled": 1, "loaded": 0}
    else:                        # replaced by a valid entry
        assert f_entry.is_file() and not f_entry.is_symlink()
        assert run(directory) == {"results": F_RESULTS, "compiled": 0, "loaded": 1}


# -- bounded in-memory caches ------------------------------------

def test_a_jitted_function_keeps_a_bounded_number_of_signatures():
    f = jitad.jit(lambda x: jitad.sum(x * 2.0))
    f.max_signatures = 8
    compiles = []
    compile_signature = f._compile
    f._compile = lambda *a: compiles.append(a[2][0].shape) or compile_signature(*a)
    for n in range(1, 9):
        assert f(np.ones(n)) == 2.0 * n
    assert f(np.ones(1)) == 2.0 and f(np.ones(9)) == 18.0   # shape 1 was used: shape 2 goes
    assert len(f._compiled) == 8 and compiles == [(n,) for n in range(1, 10)]
    assert f(np.ones(1)) == 2.0 and f(np.ones(2)) == 4.0 and compiles[-1] == (2,)
    for n in range(1, 41):   # evicted signatures come back compiled again, with right values
        for m in (n, 41 - n):
            assert f(np.ones(m)) == 2.0 * m
            assert len(f._compiled) <= 8
            installed = type(f).__dict__.get("__call__")   # the native fast path, if any,
            assert installed in (None, jitad.api.Jitted.__call__) or \
                any(installed is c.entry for c in f._compiled.values())   # is a kept signature's


@pytest.mark.parametrize("disk_cache", [True, False])
def test_recompiling_an_evicted_signature_gives_its_llvm_ir_again(monkeypatch, tmp_path, disk_cache):
    monkeypatch.setenv("JITAD_CACHE_DIR", str(tmp_path) if disk_cache else "")
    f = jitad.jit(lambda x: x * 3.5 + 0.25)
    f.max_signatures = 1
    f(1.0)
    text = f.llvm_ir
    assert f(1) == 3.75 and f(2.0) == 7.25   # the float signature was evicted, then recompiled
    assert f.llvm_ir == text and "fmul" in text


def test_jvp_keeps_no_function_alive():
    functions = []
    for k in range(300):
        fn = lambda x, k=k: x * float(k)   # noqa: E731  (a new function object each time)
        assert jitad.jvp(fn, (2.0,), (1.0,)) == (2.0 * k, float(k))
        functions.append(weakref.ref(fn))
    del fn
    gc.collect()
    assert sum(ref() is not None for ref in functions) == 0


RSS_CHILD = textwrap.dedent("""
    import gc, os
    import numpy as np
    import jitad

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    f = jitad.jit(lambda x, k: jitad.sum(x * k), static_argnums=1)
    x = np.ones(3)
    for k in range(40):   # warm up and fill the cache
        f(x, k)
    gc.collect()
    before = rss()
    for k in range(40, 240):
        assert f(x, k) == 3.0 * k
    gc.collect()
    print(len(f._compiled), (rss() - before) / 200)
""")


def test_memory_per_evicted_signature_is_bounded():
    """200 signatures beyond the kept 16: the Python side of each is freed (105 KiB a
    signature before: the IR text and llvmlite's never-freed pass managers); the bound is
    generous. Its machine code goes with its engine's generation: that is measured
    tighter in tests/reliability/test_jit_memory.py."""
    env = child_env("", JITAD_MAX_SIGNATURES="16")
    proc = subprocess.run([sys.executable, "-c", RSS_CHILD], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    kept, per_signature = proc.stdout.split()
    assert int(kept) == 16
    assert float(per_signature) < 64 * 1024
