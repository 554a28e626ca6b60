"""Test settings: verify the IR after every pass, and use a private disk cache."""
import os
import tempfile

os.environ.setdefault("JITAD_VERIFY", "1")
os.environ.setdefault("JITAD_CACHE_DIR", tempfile.mkdtemp(prefix="jitad-test-cache-"))
# GPU tests run on numba-cuda's CUDA simulator unless a run asks for the real GPU
# (NUMBA_ENABLE_CUDASIM=0); numba reads this when it is first imported.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

# Hypothesis draws the same examples on every run, so a test run's verdict depends on the
# tree and not on the luck of the draw; JITAD_HYPOTHESIS_RANDOM=1 explores new examples
# (the fuzzers, `make fuzz`, explore always).
try:
    from hypothesis import settings as _hypothesis_settings
    _hypothesis_settings.register_profile("fixed", derandomize=True, database=None)
    if not os.environ.get("JITAD_HYPOTHESIS_RANDOM"):
        _hypothesis_settings.load_profile("fixed")
except ImportError:   # the test extra is not installed: the tests that need Hypothesis skip
    pass


# Tests `make test` leaves to `make test-all` (measured: each takes tens of seconds of CPU or
# repeats what a faster test checks on more cases). A test marks itself `@pytest.mark.slow`
# where that reads better; these are whole files and the slowest single tests, by path.
SLOW = (
    "compat/test_port_",                 # ported programs, run to N steps
    "corpus/",                           # the corpus of public programs, each run twice
    "reliability/test_nesting.py",       # every nesting of the transformations
    "reliability/test_hostile_arguments.py",   # Hypothesis: hostile arguments
    "reliability/test_random_programs.py",     # Hypothesis: random staged programs
    "reliability/test_fuzz_differential.py",   # the fuzz profile (make fuzz runs it longer)
    "reliability/test_jit_memory.py",    # thousands of compiles to watch memory come back
    "benchmarks/",                       # the benchmarks' smoke runs
    "lowering/test_compile_long.py",     # compile time of long unrolled programs
    "lowering/test_compile_report.py::test_compile_benchmark_quick_mode",
    "lowering/test_cache_edges.py::test_jvp_keeps_no_function_alive",        # many compiles, then gc
    "lowering/test_cache_edges.py::test_memory_per_evicted_signature_is_bounded",
    "architecture/test_types.py",        # pyright over the public API (~20 s)
    # the CUDA simulator on every row of the NumPy table (lowering/test_gpu.py samples the ops)
    "numpy/test_functions.py::test_rows_on_the_cuda_backend_match_the_cpu",
    "numpy/test_functions.py::test_check_grads_order_2",      # second order of whole tables
    "random/test_random_draws.py::test_every_sampler_gives_jaxs_draws",   # (test_samplers_give_jaxs_draws: a few)
    "transforms/test_jacobian.py::test_pytree_structure_and_tuple_argnums_against_jax",
    "transforms/test_jacobian.py::test_hessian_blocks_against_jax",
    "transforms/test_derived_scan_rules.py::test_second_order_by_check_grads",
    "transforms/test_vmap.py::test_random_programs_against_loop",
    "staging/test_forest.py::test_random_forests_against_one_tree_at_a_time",
)


# Table-driven tests (one case per op, dtype, keyword combination, ...): `make test` runs a
# fixed sample of each such test function, every k-th case from an offset that depends on the
# function's name (so the functions that share a table keep different rows); `make test-all`
# runs every case. A function with fewer than 2k cases runs them all. Path -> k.
SAMPLED = {
    "lowering/test_ops.py": 4,
    "lowering/test_gpu.py": 6,
    "lowering/test_sort_indexing.py": 2,
    "numpy/test_functions.py": 3,
    "numpy/test_differential.py": 3,
    "numpy/test_generated.py": 2,
    "numpy/test_arrays_and_indexing.py": 2,
    "numpy/test_linalg.py": 2,
    "staging/test_combinators.py": 2,
    "scipy/test_special.py": 2,
    "scipy/test_stats.py": 3,
    "reliability/test_tensor_errors.py": 2,
}


# and the tests measured over 1 s of CPU (tests/cputime.py), but the cheapest of each file
MEASURED = os.path.join(os.path.dirname(__file__), "slow.txt")


def pytest_collection_modifyitems(config, items):
    import pytest
    import zlib
    with open(MEASURED) as f:
        measured = {line.strip() for line in f if line.strip() and not line.startswith("#")}
    cases = {}   # test function -> its parametrized items, in order
    for item in items:
        path = item.nodeid.replace("tests/", "", 1)
        if path.startswith(SLOW) or item.nodeid in measured:
            item.add_marker(pytest.mark.slow)
        elif SAMPLED.get(path.split("::")[0]) and hasattr(item, "callspec"):
            cases.setdefault(item.nodeid.split("[")[0], []).append(item)
    for function, group in cases.items():
        k = SAMPLED[function.replace("tests/", "", 1).split("::")[0]]
        if len(group) >= 2 * k:
            offset = zlib.crc32(function.encode()) % k
            for index, item in enumerate(group):
                if index % k != offset:
                    item.add_marker(pytest.mark.slow)
