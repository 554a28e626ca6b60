"""The benchmarks and the quick examples still run (tiny sizes; not measurements)."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*args, timeout=300):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=timeout, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("module", ["bench.micro", "bench.tensors", "bench.transforms"])
def test_benchmark_quick_mode(module):
    assert "Goals" in _run("-m", module, "--quick")


@pytest.mark.parametrize("script", ["examples/quickstart.py", "examples/walkthrough.py"])
def test_example_runs(script):
    out = _run(script)
    assert "MISMATCH" not in out and "Traceback" not in out


def test_gpu_benchmark_without_a_gpu_says_so():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, "-m", "bench.gpu", "--quick"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "not available" in out.stdout and "nothing measured" in out.stdout


@pytest.mark.slow
def test_forest_benchmark_quick_mode():
    out = _run("-m", "bench.forest", "--quick")
    assert "| jitad forest (width 32) |" in out and "| jitad per tree |" in out


def test_long_simulation_example_runs():
    out = _run("examples/long_simulation.py", "3000")
    lines = [line for line in out.splitlines() if line.startswith("k = ")]
    losses = [float(line.split("loss = ")[1].split()[0]) for line in lines]
    assert len(losses) == 4 and losses[-1] < losses[0] / 10   # the fit makes progress


@pytest.mark.slow
@pytest.mark.parametrize("module,expect", [("bench.calls", "jit_grad over it"), ("bench.userloop", "user-style")])
def test_call_cost_and_user_loop_quick_mode(module, expect):
    assert expect in _run("-m", module, "--quick", timeout=600)
