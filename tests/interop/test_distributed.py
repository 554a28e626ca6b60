"""jitad.distributed: the single-process identities here, and real jobs of 2 processes
started with `mpiexec -n 2` (skipped, with the reason shown, without the `mpi` extra)."""
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitad
from jitad import distributed as dist

MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
try:
    import mpi4py  # noqa: F401
    MISSING = None if MPIEXEC else "no mpiexec found (install the extra: pip install 'jitad[mpi]')"
except ImportError:
    MISSING = "mpi4py is not installed (install the extra: pip install 'jitad[mpi]')"
needs_mpi = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def mpirun(tmp_path, source, n=2, timeout=120):
    """Run `source` as `mpiexec -n n python script.py`; return (exit code, stdout + stderr)."""
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(source))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, str(script)], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=tmp_path)
    return done.returncode, done.stdout + done.stderr


# -- one process: size 1, identities -------------------------------------------------

def test_single_process_identities():
    assert dist.size() == 1 and dist.rank() == 0
    tree = {"a": 2.5, "b": np.arange(3.0), "c": (np.float32(1.5), 4)}
    for op in dist.OPS:
        out = dist.allreduce(tree, op=op)
        assert out["a"] == 2.5 and np.array_equal(out["b"], tree["b"]) and out["c"] == tree["c"]
    assert dist.broadcast(tree)["b"] is tree["b"]
    x = np.arange(6.0).reshape(3, 2)
    assert np.array_equal(dist.shard(x), x) and np.array_equal(dist.shard({"x": x}, axis=1)["x"], x)

    @jitad.jit
    def f(x, s):
        return dist.allreduce(x * 2.0, op="mean"), dist.broadcast(s + 1.0)
    y, t = f(np.arange(3.0), 1.0)
    assert np.array_equal(y, [0.0, 2.0, 4.0]) and t == 2.0
    assert np.allclose(jitad.grad(lambda x: jitad.sum(dist.allreduce(x) ** 2))(np.arange(3.0)), [0, 2, 4])


def test_argument_errors():
    with pytest.raises(jitad.ArgumentError, match="op='prod'"):
        dist.allreduce(1.0, op="prod")
    with pytest.raises(jitad.ArgumentError, match="root=1"):
        dist.broadcast(1.0, root=1)
    with pytest.raises(jitad.ArgumentError, match="dtype bool"):
        dist.allreduce(np.array([True]))


def run_python(code, **env):
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=ROOT, **env))
    return done.returncode, done.stdout + done.stderr


def test_init_without_mpi4py_names_the_extra():
    rc, out = run_python("""
        import sys
        sys.modules["mpi4py"] = None   # as if not installed
        import jitad
        assert jitad.distributed.size() == 1 and jitad.distributed.allreduce(3.0) == 3.0
        try:
            jitad.distributed.init()
        except jitad.DistributedError as e:
            print("raised:", e)
    """)
    assert rc == 0 and "raised:" in out and "pip install 'jitad[mpi]'" in out, out


def test_collective_under_mpiexec_without_init_is_refused():
    rc, out = run_python("""
        import jitad
        try:
            jitad.distributed.allreduce(1.0)
        except jitad.DistributedError as e:
            print("raised:", e)
    """, PMI_SIZE="2", PMI_RANK="0")
    assert rc == 0 and "raised:" in out and "init()" in out, out


# -- real jobs of two processes -----------------------------------------------------

TRAINING = """
    import numpy as np, jitad
    from jitad import FOR, distributed as dist
    dist.init()
    assert dist.size() == 2
    rng = np.random.default_rng(0)
    X = rng.standard_normal((32, 5))
    Y = np.sin(X @ rng.standard_normal((5, 2)))
    params = {"W1": rng.standard_normal((5, 16)) * 0.5, "b1": np.zeros(16),
              "W2": rng.standard_normal((16, 2)) * 0.5, "b2": np.zeros(2)}
    start = dist.broadcast(jitad.tree_map(lambda p: p + dist.rank(), params))   # rank 0's values
    assert all(np.array_equal(start[k], params[k]) for k in params)

    def loss(p, x, y):
        h = jitad.tanh(x @ p["W1"] + p["b1"])
        return jitad.mean((h @ p["W2"] + p["b2"] - y) ** 2)

    STEPS, opt = 40, jitad.optim.sgd(0.1)
    step = jitad.jit_grad(loss)

    def python_loop(x, y, average):
        p, state = start, opt.init(start)
        for _ in range(STEPS):
            _, g = step(p, x, y)
            p, state = opt.update(p, dist.allreduce(g, op="mean") if average else g, state)
        return p

    @jitad.jit
    def staged_loop(p, x, y):
        def body(k, carry):
            p, state = carry
            _, g = jitad.value_and_grad(loss)(p, x, y)
            return opt.update(p, dist.allreduce(g, op="mean"), state)
        return FOR(0, STEPS, body, (p, opt.init(p)))[0]

    xs, ys = dist.shard((X, Y))
    full = python_loop(X, Y, average=False)          # one process, the whole batch
    eager = python_loop(xs, ys, average=True)
    staged = staged_loop(start, xs, ys)
    alone = python_loop(xs, ys, average=False)       # what a rank learns without averaging
    rel = lambda a, b: max(np.abs(a[k] - b[k]).max() / np.abs(b[k]).max() for k in b)
    spread = dist.allreduce(staged, "max")
    spread = max(np.abs(spread[k] - dist.allreduce(staged, "min")[k]).max() for k in spread)
    print(f"rank {dist.rank()}: eager {rel(eager, full):.1e} staged {rel(staged, full):.1e} "
          f"alone {rel(alone, full):.1e} moved {rel(start, full):.1e} spread {spread:.1e}")
    assert rel(eager, full) < 1e-10 and rel(staged, full) < 1e-10 and spread == 0
    assert rel(alone, full) > 1e-4 and rel(start, full) > 1e-3   # the comparison can fail
    print(f"allreduce in the compiled code: {'jitad_mpi_allreduce' in staged_loop.llvm_ir}")
    print(f"OK-{dist.rank()}")
"""


@needs_mpi
def test_data_parallel_training_matches_full_batch(tmp_path):
    for run in range(2):   # the second run loads the compiled code from the disk cache
        rc, out = mpirun(tmp_path, TRAINING, timeout=240)
        assert rc == 0 and "OK-0" in out and "OK-1" in out, out
    assert "allreduce in the compiled code: True" in out


@needs_mpi
def test_collectives_and_their_derivatives(tmp_path):
    rc, out = mpirun(tmp_path, """
        import numpy as np, jitad
        from jitad import distributed as dist
        dist.init()
        r = dist.rank()
        # eager: Python numbers stay numbers, arrays arrays; every op
        out = dist.allreduce({"a": 1.0 + r, "b": np.arange(3.0) * (r + 1), "i": np.int64(r + 4)}, op="mean")
        assert out["a"] == 1.5 and np.array_equal(out["b"], [0, 1.5, 3]) and out["i"] == 4.5
        assert dist.allreduce(np.float32(r + 1)) == 3 and dist.allreduce(np.float32(1)).dtype == np.float32
        assert dist.allreduce([r, -r], op="max") == [1, 0] and dist.allreduce(r + 2.0, op="min") == 2.0
        mine = np.full(3, 10.0 + r)
        assert np.array_equal(dist.broadcast(mine, root=1), [11, 11, 11]) and mine[0] == 10 + r
        assert np.array_equal(dist.shard(np.arange(8.0).reshape(4, 2), axis=0), np.arange(4.0).reshape(2, 2) + 4 * r)

        @jitad.jit
        def f(x, s, i):
            return (dist.allreduce(x * (r + 1.0)), dist.allreduce(s, "max"), dist.allreduce(s, "mean"),
                    dist.broadcast(x + r, root=1), dist.allreduce(i, "min"), dist.allreduce(jitad.convert(x, "f32")))
        x, s, m, b, i, x32 = f(np.arange(4.0), 1.5 + r, 7 + r)
        assert np.array_equal(x, [0, 3, 6, 9]) and s == 2.5 and m == 2.0 and np.array_equal(b, [1, 2, 3, 4]) and i == 7
        assert x32.dtype == np.float32 and np.array_equal(x32, [0, 2, 4, 6])
        # the total loss is the ranks' sum: d/dx_r sum_q sum(S^2) with S = x_0 + x_1 is 2 * size * S
        g = jitad.grad(lambda x: jitad.sum(dist.allreduce(x) ** 2))(np.arange(3.0) + r)
        assert np.array_equal(g, [4, 12, 20]), g
        gb = jitad.grad(lambda x: jitad.sum(dist.broadcast(x, root=1) * (r + 1.0)))(np.ones(2))
        assert np.array_equal(gb, [0, 0] if r == 0 else [3, 3]), gb
        y, t = jitad.jvp(lambda x: dist.allreduce(x * x, op="mean"), (np.ones(2) * (r + 1),), (np.ones(2),))
        assert np.array_equal(y, [2.5, 2.5]) and np.array_equal(t, [3, 3]), (y, t)
        try:
            jitad.grad(lambda x: jitad.sum(dist.allreduce(x, op="max")))(np.ones(2))
        except jitad.DistributedError as e:
            assert "stop_gradient" in str(e)
        else:
            raise AssertionError("no error for the gradient of a max-allreduce")
        print(f"OK-{r}")
    """)
    assert rc == 0 and "OK-0" in out and "OK-1" in out, out


RAISES = """
    import numpy as np, jitad
    from jitad import distributed as dist
    dist.init()
    f = jitad.jit(lambda x: dist.allreduce(x * 2.0))
    f(np.ones(3))   # compiled on both ranks
    if dist.rank() == 1:
        raise RuntimeError("rank one fails on purpose")
    print("rank 0 waits", flush=True)
    {wait}
    print("rank 0 was not stopped")
"""


@needs_mpi
@pytest.mark.parametrize("wait", ["f(np.ones(3))", "dist.allreduce(np.ones(3))"], ids=["compiled", "eager"])
def test_an_error_on_one_rank_stops_the_job(tmp_path, wait):
    rc, out = mpirun(tmp_path, RAISES.replace("{wait}", wait), timeout=60)
    assert rc != 0 and "RuntimeError: rank one fails on purpose" in out and "was not stopped" not in out, out
