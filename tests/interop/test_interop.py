"""jitad inside JAX and PyTorch: values and gradients across the boundary, under
jax.jit / grad / jvp / vmap and torch eager / torch.compile(fullgraph=True)."""
import subprocess
import sys

import numpy as np
import pytest

import jitad
import jitad.interop
from jitad import FOR, TREE, WHILE

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
jnp = jax.numpy
RNG = np.random.default_rng(11)


def _sqrt_solver(a):   # Newton's iteration for sqrt(a): a data-dependent WHILE (JAX refuses its gradient)
    return WHILE(lambda x: jitad.abs(x * x - a) > 1e-12 * a, lambda x: 0.5 * (x + a / x), a)


@pytest.fixture(autouse=True)
def x64():
    was = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", was)


# -- JAX ------------------------------------------------------------------------------

def test_jax_jit_grad_jvp_vmap_of_a_while_solver():
    solve = jitad.interop.to_jax(_sqrt_solver)
    a = jnp.array([4.0, 9.0, 2.0])
    np.testing.assert_allclose(jax.jit(jax.vmap(solve))(a), np.sqrt(a), rtol=1e-12)
    np.testing.assert_allclose(jax.grad(solve)(4.0), 0.25, rtol=1e-10)
    np.testing.assert_allclose(jax.jit(jax.grad(solve))(9.0), 1 / 6, rtol=1e-10)
    np.testing.assert_allclose(jax.vmap(jax.grad(solve))(a), 0.5 / np.sqrt(a), rtol=1e-10)
    value, tangent = jax.jvp(solve, (2.0,), (1.0,))
    np.testing.assert_allclose([value, tangent], [np.sqrt(2.0), 0.5 / np.sqrt(2.0)], rtol=1e-10)
    assert "custom_call" in jax.jit(solve).lower(2.0).as_text() and "jitad_call" in jax.jit(solve).lower(2.0).as_text()


def test_jax_pytrees_tensors_and_loops_against_jax_itself():
    def f(p, x, n):
        h = FOR(0, n, lambda i, h: jitad.tanh(p["w"] @ h + x), jitad.zeros(3))
        return {"h": h, "norm": jitad.sum(h * h) + p["b"]}

    def f_jax(p, x, n):
        h = jax.lax.fori_loop(0, n, lambda i, h: jnp.tanh(p["w"] @ h + x), jnp.zeros(3))
        return {"h": h, "norm": jnp.sum(h * h) + p["b"]}
    g = jitad.interop.to_jax(f)
    p, x = {"w": jnp.asarray(RNG.normal(size=(3, 3)) * 0.5), "b": jnp.float64(0.3)}, jnp.asarray(RNG.normal(size=3))
    out = jax.jit(g, static_argnums=())(p, x, 5)
    want = f_jax(p, x, 5)
    np.testing.assert_allclose(out["h"], want["h"], rtol=1e-12)
    loss = lambda fn: (lambda p, x: fn(p, x, 5)["norm"])
    got, ref = jax.grad(loss(g), argnums=(0, 1))(p, x), jax.grad(loss(f_jax), argnums=(0, 1))(p, x)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_allclose(a, b, rtol=1e-10)
    jvp_got = jax.jvp(loss(g), (p, x), (p, x))[1]
    np.testing.assert_allclose(jvp_got, jax.jvp(loss(f_jax), (p, x), (p, x))[1], rtol=1e-10)


def test_jax_errors():
    g = jitad.interop.to_jax(lambda x, n: x * n)
    with pytest.raises(jitad.ArgumentError, match="int32"):
        g(1.0, np.int32(3))


# -- PyTorch --------------------------------------------------------------------------

def test_torch_eager_backward_on_a_subset_and_a_pytree():
    def solve(p, n):
        return WHILE(lambda s: s[1] < n, lambda s: (s[0] * p["a"] + p["b"], s[1] + 1), (jitad.ones_like(p["a"]), 0))[0]
    g = jitad.interop.to_torch(solve)
    a = torch.tensor([0.5, 0.9], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([1.0, 2.0], dtype=torch.float64)   # no gradient wanted
    out = g({"a": a, "b": b}, torch.tensor(10))
    out.sum().backward()
    want = jitad.grad(lambda a: jitad.sum(solve({"a": a, "b": b.numpy()}, 10)))(a.detach().numpy())
    np.testing.assert_allclose(a.grad.numpy(), want, rtol=1e-12)
    assert b.grad is None


def test_torch_compile_fullgraph():
    g = jitad.interop.to_torch(lambda x: jitad.sum(jitad.sin(x) ** 2))
    step = torch.compile(lambda x: g(x) * 2 + x.sum(), fullgraph=True)
    x = torch.tensor([0.5, 1.0], dtype=torch.float64, requires_grad=True)
    step(x).backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.sin(2 * np.array([0.5, 1.0])) + 1, rtol=1e-12)


def test_torch_tree_lstm_cell_recursion_is_a_jitad_tree():
    def tree_loss(p, tree):
        h = TREE(tree, jitad.zeros(4), lambda node, l, r: jitad.tanh(p["W"] @ (l + r) + p["E"][node.word]))
        return jitad.sum(h ** 2)
    loss = jitad.interop.to_torch(tree_loss)
    p = {"W": torch.tensor(RNG.normal(size=(4, 4)) * 0.5, requires_grad=True),
         "E": torch.tensor(RNG.normal(size=(10, 4)), requires_grad=True)}
    for seed in (0, 1):   # one compiled op serves every tree
        tree = jitad.Tree.random(5 + 4 * seed, seed=seed, word=np.arange(5 + 4 * seed) % 10)
        p["W"].grad = p["E"].grad = None
        loss(p, tree).backward()
        want = jitad.grad(tree_loss)({k: v.detach().numpy() for k, v in p.items()}, tree)
        np.testing.assert_allclose(p["W"].grad.numpy(), want["W"], rtol=1e-12)
        np.testing.assert_allclose(p["E"].grad.numpy(), want["E"], rtol=1e-12)


def test_torch_errors():
    g = jitad.interop.to_torch(lambda x: x * 2)
    with pytest.raises(jitad.ArgumentError, match="int32"):
        g(torch.ones(2, dtype=torch.int32))
    with pytest.raises(jitad.DeviceError, match="CPU"):
        g(torch.ones(2, dtype=torch.float64, device="meta"))
    with pytest.raises(jitad.ArgumentError, match="tensors"):
        g(np.ones(2))


def test_without_the_frameworks_jitad_imports_and_names_the_extra():
    code = ("import sys; sys.modules['torch'] = None; sys.modules['jax'] = None\n"
            "import jitad, jitad.interop\n"
            "for to in (jitad.interop.to_torch, jitad.interop.to_jax):\n"
            "    try:\n        to(lambda x: x)\n    except jitad.JitadError as e:\n        print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("jitad[interop]") == 2


def test_jax_second_order():
    f = jitad.interop.to_jax(lambda x: jitad.sin(x) * x)
    want = 2 * np.cos(1.0) - np.sin(1.0)
    np.testing.assert_allclose(jax.grad(jax.grad(f))(1.0), want, rtol=1e-12)
    np.testing.assert_allclose(jax.jit(jax.hessian(f))(1.0), want, rtol=1e-12)
