"""jitad benchmarks: `python -m bench` (everything), `python -m bench.micro [--quick]`.

The protocol is /work/shared/BENCHMARKS.md (copied in spirit to bench/README.md): single
thread, medians of >= 5 repeats after warm-up with the min-max spread, every ratio
measured side by side in one process, missing comparators reported as "not installed".
"""
import os

# Single thread everywhere; these must be set before numpy, jax or torch is imported,
# which is why they live in the package's __init__ (run before any `bench.*` module).
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
