"""`to_torch` and `to_jax` at their edges: PyTorch's forward mode and torch.func, JAX's
derivatives of functions with int and bool outputs, bfloat16 tensors, Ctrl-C inside
`jax.jit`, and the temporary files of `to_jax`. The crash and hang cases run in a
subprocess with a timeout."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import jax
import jax.numpy as xnp
import numpy as np
import pytest
import torch

import jitad
import jitad.numpy as jnp
from jitad.interop import to_jax, to_torch

jax.config.update("jax_enable_x64", True)
ENV = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _run(code, timeout=120, **env):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=dict(ENV, **env))


# -- PyTorch: torch.func ------------------------------------------------------------

def _pair(m, sin, argmax):
    return lambda x, y: (sin(x) * y, m.sum(x * x * y), argmax(x))


TORCH_F = to_torch(_pair(jnp, jnp.sin, jnp.argmax))
TORCH_REF = _pair(torch, torch.sin, torch.argmax)
X = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)
Y = torch.tensor([3.0, -1.0, 2.0], dtype=torch.float64)


def _same(got, want):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_torch_func_jvp_is_jitads_forward_mode():
    tangents = (torch.ones_like(X), torch.arange(3.0, dtype=torch.float64))
    got = torch.func.jvp(TORCH_F, (X, Y), tangents)
    want = torch.func.jvp(TORCH_REF, (X, Y), tangents)
    _same(got, want)
    assert float(got[1][0].abs().sum()) > 0   # (it was zero)


@pytest.mark.parametrize("transform", ["jacfwd", "jacrev"])
def test_torch_func_jacobians(transform):
    jac = getattr(torch.func, transform)
    _same(jac(lambda x, y: TORCH_F(x, y)[0], argnums=(0, 1))(X, Y),
          jac(lambda x, y: TORCH_REF(x, y)[0], argnums=(0, 1))(X, Y))


def test_torch_func_grad_and_vmap():
    _same(torch.func.grad(lambda x: TORCH_F(x, Y)[1])(X), torch.func.grad(lambda x: TORCH_REF(x, Y)[1])(X))
    xs = torch.stack([X, 2 * X, -X])
    _same(torch.func.vmap(lambda x: TORCH_F(x, Y)[:2])(xs), torch.func.vmap(lambda x: TORCH_REF(x, Y)[:2])(xs))
    _same(torch.func.vmap(torch.func.grad(lambda x: TORCH_F(x, Y)[1]))(xs),
          torch.func.vmap(torch.func.grad(lambda x: TORCH_REF(x, Y)[1]))(xs))


def test_torch_second_derivatives_are_an_error_not_zero():
    for nested in (torch.func.hessian, lambda f: torch.func.jacrev(torch.func.jacrev(f))):
        with pytest.raises(jitad.errors.JitadError, match="second derivatives"):
            nested(lambda x: TORCH_F(x, Y)[1])(X)
    hess = to_torch(jitad.hessian(lambda x, y: jnp.sum(x * x * y)))   # the way the message names
    _same(hess(X, Y), torch.func.hessian(lambda x: TORCH_REF(x, Y)[1])(X))


def test_plain_backward_still_works():
    x = X.clone().requires_grad_()
    TORCH_F(x, Y)[1].backward()
    _same(x.grad, 2 * X * Y)


def test_bfloat16_before_jax_is_imported_names_the_fix():
    done = _run("""
        import sys, torch, jitad
        f = jitad.interop.to_torch(lambda x: x * 2.0)
        try:
            f(torch.ones(2, dtype=torch.bfloat16))
        except jitad.errors.ArgumentError as e:
            print(type(e).__name__, "|", e)
        print("jax imported:", "jax" in sys.modules)
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ArgumentError | to_torch: arrays of dtype bfloat16" in done.stdout
    assert "tensor.float()" in done.stdout and "jax imported: False" in done.stdout


# -- JAX: int and bool outputs ------------------------------------------------------

def _mixed(m):
    return lambda x: (x * 2.0, m.argmax(x), x > 1.0, m.sum(x ** 2))


def test_jax_derivatives_with_int_and_bool_outputs():
    f, ref = to_jax(_mixed(jnp)), _mixed(xnp)
    x = np.array([1.0, 3.0, 0.5])
    got, want = jax.jvp(f, (x,), (np.ones(3),)), jax.jvp(ref, (x,), (np.ones(3),))
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype != jax.dtypes.float0:
            np.testing.assert_allclose(g, w, rtol=1e-14)
    loss = lambda f: lambda x: f(x)[0].sum() + f(x)[3] * f(x)[1] + xnp.where(f(x)[2], x, 0.0).sum()
    for wrap in (lambda g: g, jax.jit):
        np.testing.assert_allclose(wrap(jax.grad(loss(f)))(x), jax.grad(loss(ref))(x), rtol=1e-14)


# -- JAX: Ctrl-C and temporary files ------------------------------------------------

CTRL_C = """
import sys, time, jax, numpy as np, jitad
from jitad.interop import to_jax
jax.config.update("jax_enable_x64", True)
g = jax.jit(to_jax(lambda x: jitad.WHILE(lambda s: s < x, lambda s: s + 1.0, 0.0)))
print(float(g(10.0)), flush=True)
try:
    g(np.inf)   # never ends unless stopped
except Exception as e:
    print("stopped:", "Ctrl-C" in str(e), flush=True)
print(float(g(1000.0)), flush=True)   # later calls run as before
try:
    time.sleep(30)   # no jitad call runs: Python's own handler
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
g(np.inf)
"""


def test_ctrl_c_stops_a_loop_inside_jax_jit():
    p = subprocess.Popen([sys.executable, "-c", CTRL_C], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=ENV)
    try:
        assert p.stdout.readline().strip() == "10.0"
        for expect in ("stopped: True", "1000.0", "KeyboardInterrupt"):
            if expect != "1000.0":
                time.sleep(1.0)
                p.send_signal(signal.SIGINT)
            assert p.stdout.readline().strip() == expect
        time.sleep(1.0)
        p.send_signal(signal.SIGINT)   # uncaught: the process ends at once, with the error
        start = time.monotonic()
        _, err = p.communicate(timeout=20)
        assert time.monotonic() - start < 10
    finally:
        p.kill()
        p.wait()
    assert p.returncode == 1 and "interrupted by Ctrl-C" in err, err[-2000:]


def test_to_jax_leaves_no_temporary_directory(tmp_path):
    done = _run("""
        import glob, os, tempfile, jax, jitad
        from jitad.interop import to_jax
        g = jax.jit(to_jax(lambda x: x * 2.0))
        print(float(g(3.0)), len(glob.glob(os.path.join(tempfile.gettempdir(), "jitad-jax-*"))))
    """, TMPDIR=str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["6.0", "1"]   # there while the process runs
    assert not list(tmp_path.glob("jitad-jax-*"))
