"""`jitad.debug.print` under `vmap` (once per lane, as JAX 0.10 prints) and with an
output stream that fails (an exception from the call, never a killed process)."""
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as xnp
import numpy as np
import pytest

import jitad

jax.config.update("jax_enable_x64", True)


def _printed(capsys, run):
    capsys.readouterr()
    run()
    jax.effects_barrier()
    return capsys.readouterr().out.splitlines()


def _scaled(debug):
    return lambda x, y: (debug.print("x={} y={}", x, y), x * y)[1]


def _loop(debug, while_loop):
    def f(n):
        def body(s):
            debug.print("n={} s={}", n, s)
            return s + 1
        return while_loop(lambda s: s < n, body, 0)
    return f


@pytest.mark.parametrize("lanes", [3, 11])   # unrolled, and a loop over the lanes
def test_vmap_prints_every_lane_as_jax(capsys, lanes):
    x = np.arange(float(lanes))
    got = _printed(capsys, lambda: jitad.jit(jitad.vmap(_scaled(jitad.debug), in_axes=(0, None)))(x, 2.0))
    want = _printed(capsys, lambda: jax.jit(jax.vmap(_scaled(jax.debug), in_axes=(0, None)))(x, 2.0))
    assert got == want and len(got) == lanes


def test_vmap_of_a_loop_prints_every_lane_each_iteration_as_jax(capsys):
    n = np.array([1, 3])
    got = _printed(capsys, lambda: jitad.jit(jitad.vmap(_loop(jitad.debug, jitad.WHILE)))(n))
    want = _printed(capsys, lambda: jax.vmap(_loop(jax.debug, jax.lax.while_loop))(xnp.asarray(n)))
    assert got == want == ["n=1 s=0", "n=3 s=0", "n=1 s=1", "n=3 s=1", "n=1 s=1", "n=3 s=2"]


ENV = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _run(code, **kwargs):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, env=ENV, timeout=60,
                          **kwargs)


def test_a_failing_stream_raises_from_the_call():
    done = _run("""
        import io, sys, jitad
        class Failing(io.StringIO):
            def write(self, text):
                raise OSError("the stream is gone")
        f = jitad.jit(lambda x: (jitad.debug.print("x={}", x), x + 1.0)[1])
        out, sys.stdout = sys.stdout, Failing()
        try:
            f(1.0)
        except OSError as e:
            sys.stderr.write(f"raised: {e} | {e.__notes__}\\n")
        sys.stdout = out
        print(f(2.0))   # the next call prints and runs
    """)
    assert done.returncode == 0, done.stderr.decode()[-2000:]   # (killed by SIGINT, -2, before)
    assert "raised: the stream is gone | ['raised by jitad.debug.print" in done.stderr.decode()
    assert done.stdout.decode().split() == ["x=2.0", "3.0"]


def test_a_closed_pipe_does_not_kill_the_process():
    code = textwrap.dedent("""
        import sys, time, jitad
        f = jitad.jit(lambda x: (jitad.debug.print("x={}", x), x + 1.0)[1])
        time.sleep(0.5)   # the reader has closed the pipe by now
        try:
            f(1.0)
        except BrokenPipeError:
            sys.stderr.write("BrokenPipeError from the call\\n")
        sys.stdout = None   # (no flush of the broken stream at exit)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    p.stdout.close()
    try:
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 0, err.decode()[-2000:]   # (killed by SIGINT, -2, before)
    assert b"BrokenPipeError from the call" in err
