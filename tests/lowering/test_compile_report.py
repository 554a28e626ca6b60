"""`compile_report()`: compile seconds by stage, and the disk cache keyed by the program
(a warm process loads without lowering; different programs never share an entry)."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitad
from jitad.timing import STAGES, CompileReport, recording, stage


def _check_report(report, compile_seconds):
    assert isinstance(report, CompileReport)
    assert list(report) == list(STAGES)
    assert all(v >= 0.0 for v in report.values()), report
    assert report.total == compile_seconds
    assert sum(report.values()) == pytest.approx(report.total, rel=1e-9, abs=1e-9)
    assert report.cache in ("miss", "disk", "process", "off")


def test_jit_reports_every_stage_summing_to_compile_seconds():
    salt = float(np.random.default_rng().random())   # a program no other test compiled
    f = jitad.jit(lambda x: jitad.sum(jitad.tanh(x * salt) ** 2))
    f(np.ones(50))
    report = f.compile_report()
    _check_report(report, f.compile_seconds)
    assert report.cache in ("miss", "off")
    for name in ("trace", "passes", "lower", "optimize", "codegen"):
        assert report[name] > 0.0, name
    assert report["ad"] == 0.0   # no derivative here
    text = str(report)
    assert "optimize" in text and "total" in text and f"cache: {report.cache}" in text
    assert report.cpu > 0.0 and "cpu" in text   # (LLVM's work is CPU time of this process)


def test_report_counts_the_cpu_time_of_other_threads():
    """`.cpu` is the process's CPU time during the compile, a helper thread's included."""
    import threading

    def spin():
        t = __import__("time").thread_time()
        while __import__("time").thread_time() - t < 0.05:
            pass
    with recording() as report:
        helper = threading.Thread(target=spin)
        helper.start()
        helper.join()
    assert report.cpu >= 0.045 and report.total >= 0.045
    assert CompileReport().cpu == 0.0


@pytest.mark.parametrize("make", [
    lambda f: jitad.jit_grad(f), lambda f: jitad.grad(f), lambda f: jitad.value_and_grad(f)])
def test_gradient_functions_report_their_differentiation(make):
    salt = float(np.random.default_rng().random())
    g = make(lambda w, x: jitad.sum(jitad.sin(x @ w + salt)))
    g(np.ones((3, 2)), np.ones((4, 3)))
    report = g.compile_report()
    _check_report(report, g.compile_seconds)
    assert report["ad"] > 0.0 and report["trace"] > 0.0


def test_report_is_per_signature_and_needs_a_call():
    f = jitad.jit(lambda x: x + 1.5)
    with pytest.raises(AttributeError, match="after the first call"):
        f.compile_report()
    f(1.0)
    first = f.compile_report()
    f(np.ones(3))
    assert f.compile_report() is not first
    f(2.0)   # the scalar signature again: its own report
    assert f.compile_report() is first


def test_a_program_compiled_before_in_this_process_is_not_compiled_again():
    body = lambda x: jitad.exp(x) * 3.25
    jitad.jit(body)(np.ones(7))
    again = jitad.jit(body)   # a new jitted function, the same program
    again(np.ones(7))
    assert again.compile_report().cache == "process"
    assert again.compile_report()["optimize"] == again.compile_report()["codegen"] == 0.0


def test_nested_stages_pause_the_outer_one():
    with recording() as report:
        with stage("trace"):
            with stage("ad"):
                sum(range(20000))
    assert report["ad"] > 0.0 and report["trace"] >= 0.0
    assert sum(report.values()) == pytest.approx(report.total, rel=1e-9, abs=1e-9)


# A child compiles a few programs in a fresh process and prints how each was found.
CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jitad
    big = np.linspace(0.0, 1.0, 4096)   # 32 KiB: an external constant the runtime registers
    fs = {
        "plus": jitad.jit(lambda x: x * 2.0 + 1.0),
        "minus": jitad.jit(lambda x: x * 2.0 - 1.0),   # differs from "plus" only in a fused loop
        "const": jitad.jit(lambda x: jitad.sum(x * big)),
        "step": jitad.jit_grad(lambda w, x: jitad.sum(jitad.tanh(x @ w) ** 2)),
    }
    args = {"plus": (np.arange(5.0),), "minus": (np.arange(5.0),), "const": (np.ones(4096),),
            "step": (np.ones((3, 2)), np.ones((4, 3)))}
    out = {}
    for name in sys.argv[1:]:
        value = fs[name](*args[name])
        report = fs[name].compile_report()
        value = value[0] if isinstance(value, tuple) else value
        out[name] = {"value": np.asarray(value).tolist(), "cache": report.cache,
                     "stages": dict(report), "total": report.total}
    print(json.dumps(out))
""")


def run_child(cache_dir, *names):
    env = dict(os.environ, JITAD_CACHE_DIR=str(cache_dir), OPENBLAS_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", CHILD, *names], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_second_process_loads_from_the_disk_cache_without_lowering(tmp_path):
    first = run_child(tmp_path, "step", "const")
    second = run_child(tmp_path, "step", "const")
    for name in ("step", "const"):
        assert first[name]["cache"] == "miss" and second[name]["cache"] == "disk"
        assert second[name]["value"] == first[name]["value"]
        warm = second[name]["stages"]
        assert warm["lower"] == warm["optimize"] == warm["codegen"] == 0.0, warm
        assert warm["cache_load"] > 0.0 and warm["link"] > 0.0
    assert first["const"]["value"] == pytest.approx(float(np.linspace(0.0, 1.0, 4096).sum()))


def test_programs_that_differ_inside_a_fused_loop_do_not_share_an_entry(tmp_path):
    plus = run_child(tmp_path, "plus")
    both = run_child(tmp_path, "plus", "minus")
    assert plus["plus"]["value"] == both["plus"]["value"] == [1.0, 3.0, 5.0, 7.0, 9.0]
    assert both["plus"]["cache"] == "disk"
    assert both["minus"]["cache"] == "miss" and both["minus"]["value"] == [-1.0, 1.0, 3.0, 5.0, 7.0]


@pytest.mark.slow
def test_compile_benchmark_quick_mode(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, "-m", "bench.compile", "--quick", "--out", str(tmp_path / "c")],
                          cwd=root, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| char-RNN (vanilla) | jitad_step |" in proc.stdout and "Warm disk cache" in proc.stdout
    result = json.loads((tmp_path / "c.json").read_text())["results"]["rnn"]
    assert result["warm"]["jitad_step"]["cache"] == ["disk", "disk"]


# -- parallel compilation: a large program's IR is split into modules compiled on threads --

SPLIT_CHILD = textwrap.dedent("""
    import json
    import numpy as np
    import jitad
    from jitad.lower import parallel, runtime
    parallel.MIN_SPLIT_BYTES, parallel.PARTS = 0, 3   # split even a small program
    j = runtime.jit()
    if len(j.machines) < 2:   # a one-core machine: a target machine for the second thread
        import llvmlite.binding as llvm
        j.machines.append(llvm.Target.from_triple(llvm.get_process_triple()).create_target_machine(
            cpu=j.cpu, features=j.features, opt=3, jit=True))
    step = jitad.jit_grad(lambda w, x: jitad.sum(jitad.tanh(x @ w) ** 2 + jitad.exp(-x @ w)))
    w, x = np.linspace(-1, 1, 6).reshape(3, 2), np.linspace(0, 2, 12).reshape(4, 3)
    value, g = step(w, x)
    print(json.dumps({"value": value, "grad": g.tolist(), "cache": step.compile_report().cache,
                      "loaded": runtime.STATS["loaded"]}))
""")


def test_a_program_compiled_as_two_modules_on_two_threads_is_right_and_cached(tmp_path):
    env = dict(os.environ, JITAD_CACHE_DIR=str(tmp_path), OPENBLAS_NUM_THREADS="1")
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", SPLIT_CHILD], capture_output=True, text=True,
                              env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    w, x = np.linspace(-1, 1, 6).reshape(3, 2), np.linspace(0, 2, 12).reshape(4, 3)
    z = x @ w
    expected = np.sum(np.tanh(z) ** 2 + np.exp(-z))
    dz = 2 * np.tanh(z) * (1 - np.tanh(z) ** 2) - np.exp(-z)
    for run in runs:
        assert run["value"] == pytest.approx(expected, rel=1e-12)
        assert np.allclose(run["grad"], x.T @ dz, rtol=1e-12)
    assert runs[0]["cache"] == "miss" and runs[1]["cache"] == "disk"


def test_split_module_declares_what_it_moves():
    import llvmlite.binding as llvm
    from jitad.lower import runtime
    from jitad.lower.parallel import split_module
    runtime.jit()   # the native target is initialized
    text = textwrap.dedent('''
        @"g" = internal constant [1 x double] [double 2.0]
        define internal double @"p_kernel0_a"(double %".1") noinline
        {
        entry:
          %".3" = load double, ptr @"g"
          %".4" = fmul double %".1", %".3"
          ret double %".4"
        }
        define internal double @"p_kernel1_b"(double %".1") noinline
        {
        entry:
          %".3" = fadd double %".1", 1.0
          ret double %".3"
        }
        define double @"p_entry"(double %".1")
        {
        entry:
          %".3" = call double @"p_kernel0_a"(double %".1")
          %".4" = call double @"p_kernel1_b"(double %".3")
          ret double %".4"
        }
        ''')
    parts = split_module(text, 3, lambda name: name.startswith("p_kernel"))
    assert len(parts) == 3
    for part in parts:
        llvm.parse_assembly(part).verify()
    first = parts[0]
    assert 'define double @"p_entry"' in first and "define internal" not in first
    for name in ("p_kernel0_a", "p_kernel1_b"):   # one in each other part: external, declared
        assert sum(f'define double @"{name}"' in part for part in parts[1:]) == 1
        assert f'declare double @"{name}"(double %".1")' in first
    assert len(split_module(text, 4, lambda name: name.startswith("p_kernel"))) == 3   # no empty part
