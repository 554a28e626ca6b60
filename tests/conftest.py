"""Test settings: verify the IR after every pass, and use a private disk cache."""
import os
import tempfile

os.environ.setdefault("JITAD_VERIFY", "1")
os.environ.setdefault("JITAD_CACHE_DIR", tempfile.mkdtemp(prefix="jitad-test-cache-"))
# GPU tests run on numba-cuda's CUDA simulator unless a run asks for the real GPU
# (NUMBA_ENABLE_CUDASIM=0); numba reads this when it is first imported.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


# Tests `make test` leaves to `make test-all` (measured: each takes tens of seconds of CPU or
# repeats what a faster test checks on more cases). A test marks itself `@pytest.mark.slow`
# where that reads better; these are whole files and the slowest single tests, by path.
SLOW = (
    "compat/test_port_",                 # ported programs, run to N steps
    "corpus/",                           # the corpus of public programs, each run twice
    "reliability/test_nesting.py",       # every nesting of the transformations
    "reliability/test_hostile_arguments.py",   # Hypothesis: hostile arguments
    "reliability/test_random_programs.py",     # Hypothesis: random staged programs
    "benchmarks/",                       # the benchmarks' smoke runs
    "lowering/test_compile_long.py",     # compile time of long unrolled programs
    "architecture/test_types.py",        # pyright over the public API (~20 s)
)


# Table-driven tests (one case per op, dtype, keyword combination, ...): `make test` runs a
# fixed sample of each such test function, every k-th case from an offset that depends on the
# function's name (so the functions that share a table keep different rows); `make test-all`
# runs every case. Path -> k.
SAMPLED = {}


def pytest_collection_modifyitems(config, items):
    import pytest
    import zlib
    seen = {}
    for item in items:
        path = item.nodeid.replace("tests/", "", 1)
        if path.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
            continue
        k = SAMPLED.get(path.split("::")[0])
        if k and hasattr(item, "callspec"):
            function = item.nodeid.split("[")[0]
            index = seen[function] = seen.get(function, -1) + 1
            if index % k != zlib.crc32(function.encode()) % k:
                item.add_marker(pytest.mark.slow)
