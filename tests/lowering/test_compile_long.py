"""Long unrolled programs (Python loops over staged values): the main graph is lowered as
bounded functions (`Lowerer.lower_segments`), so compile work grows linearly with the
steps unrolled; the values and gradients are those of the same program rolled in `FOR`."""
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitad
from jitad.ir.peephole import _first_close
from jitad.lower import llvm as lowering


def _cell_loss(steps, salt):
    def loss(p, xs):
        W, U, b, scale = p
        h = jitad.zeros((4, 8))
        total = 0.0
        for t in range(steps):
            h = jitad.tanh(h @ W + xs[t] @ U + b * salt)
            total = total + scale * jitad.sum(h * h)   # a scalar accumulated every step
        return total
    return loss


def _rolled_loss(steps, salt):
    def loss(p, xs):
        W, U, b, scale = p

        def body(t, carry):
            h, total = carry
            h = jitad.tanh(h @ W + xs[t] @ U + b * salt)
            return h, total + scale * jitad.sum(h * h)
        return jitad.FOR(0, steps, body, (jitad.zeros((4, 8)), 0.0))[1]
    return loss


def _params(steps):
    r = np.random.default_rng(1)
    return (r.normal(0, 0.4, (8, 8)), r.normal(0, 0.4, (8, 8)), r.normal(0, 0.1, 8), 0.75), \
        r.normal(0, 1, (steps, 4, 8))


def _function_lines(ir_text):
    """{function name: lines} of LLVM IR text."""
    sizes, name = {}, None
    for line in ir_text.split("\n"):
        if line.startswith("define"):
            name = re.search(r'@"?([^"(\s]+)"?\(', line).group(1)
            sizes[name] = 0
        elif name is not None:
            sizes[name] += 1
            if line == "}":
                name = None
    return sizes


def test_a_200_step_unrolled_program_compiles_in_bounded_functions_growing_linearly():
    """Counting work, not timing it: the LLVM IR of 200 steps is about 4x that of 50 steps,
    no function grows with the steps, and the values and gradients are the rolled loop's."""
    salt = 1.0 + float(np.random.default_rng().random()) * 1e-3   # a program no other run compiled
    sizes = {}
    for steps in (50, 200):
        p, xs = _params(steps)
        long = jitad.jit_grad(_cell_loss(steps, salt))
        value, grads = long(p, xs)
        sizes[steps] = _function_lines(long.llvm_ir)
    assert long.compile_seconds < 120.0   # generous: ~1 s on a free core
    expected, expected_grads = jitad.jit_grad(_rolled_loss(200, salt))(p, xs)
    assert value == pytest.approx(expected, rel=1e-11)
    for g, e in zip(grads, expected_grads):
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-12)
    assert sum(1 for n in sizes[200] if re.search(r"_(segment|glue)\d+$", n)) >= 8, sorted(sizes[200])
    total = {n: sum(s.values()) for n, s in sizes.items()}
    # 4x the steps: ~4x the lines, less a fixed part (kernels every step calls: ~3x today)
    assert 2.5 < total[200] / total[50] < 4.6, total
    assert max(sizes[200].values()) < 2 * max(sizes[50].values()) + 200, \
        (max(sizes[50].values()), max(sizes[200].values()))
    assert max(sizes[200].values()) < 0.1 * total[200]


def test_segments_are_cut_where_no_closure_is_live_and_cover_every_node():
    from jitad.ir.graph import Graph, Node, Var
    from jitad.ir.ops import Op
    from jitad.ir.types import ContType, Type
    f64 = Type("f64")
    x = Var(f64)
    nodes, prev = [], x
    for k in range(40):
        out = Var(ContType((f64,))) if k == 10 else Var(f64)
        nodes.append(Node(Op.ADD, (prev, prev), (out,)) if k != 10 else Node(Op.CLOSURE, (prev,), (out,)))
        if k == 10:
            closure = out
            continue
        prev = out
    nodes.append(Node(Op.APPLY, (closure, prev), ()))   # read at the end: no cut in between
    graph = Graph(params=[x], nodes=nodes, outputs=[prev])
    spans = lowering._segments(graph, size=4)
    assert spans[0][0] == 0 and spans[-1][1] == len(nodes)
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert not any(10 < stop < len(nodes) for _, stop in spans[:-1]), spans   # the closure spans to the end
    assert len(lowering._segments(graph, size=1000)) == 1


def test_first_close_finds_the_innermost_enclosing_scope():
    r = np.random.default_rng(0)
    for _ in range(300):
        n = int(r.integers(0, 25))
        scopes = []
        for _ in range(int(r.integers(0, 6))):
            m = int(r.integers(-1, n + 1))
            scopes.append((m, int(r.integers(m, n + 3))))
        closes = _first_close(scopes, n)
        for born in range(n):
            for last in range(n + 3):
                assert (closes[born] <= last) == any(m < born < r_ <= last for m, r_ in scopes)


SEGMENTED_CHILD = textwrap.dedent("""
    import json
    import numpy as np
    import jitad
    from jitad.lower import llvm
    llvm.SEGMENT_NODES = 6   # even this small program is lowered in spans

    def loss(w, s, xs):
        h, total = np.zeros(3), 0.0
        for t in range(6):
            h = jitad.tanh(xs[t] @ w + h * s)
            total = total + jitad.IF(jitad.sum(h) > 0.0, lambda a: a * s, lambda a: -a, jitad.sum(h * h))
        return total + s * s
    step = jitad.value_and_grad(loss, argnums=(0, 1))
    w, xs = np.linspace(-1, 1, 12).reshape(4, 3), np.linspace(-2, 2, 48).reshape(6, 2, 4)[:, 0]
    value, (gw, gs) = step(w, 0.7, xs)
    names = [n for n in ("segment", "glue") if f"_{n}" in step.llvm_ir]
    print(json.dumps({"value": value, "gw": gw.tolist(), "gs": gs, "cache": step.compile_report().cache,
                      "names": names}))
""")


def test_a_segmented_program_with_branches_and_scalar_slots_is_right_and_cached(tmp_path):
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    env = dict(os.environ, JITAD_CACHE_DIR=str(tmp_path), OPENBLAS_NUM_THREADS="1")
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", SEGMENTED_CHILD], capture_output=True, text=True,
                              env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))

    def loss(w, s, xs):
        h, total = jnp.zeros(3), 0.0
        for t in range(6):
            h = jnp.tanh(xs[t] @ w + h * s)
            total = total + jnp.where(jnp.sum(h) > 0.0, jnp.sum(h * h) * s, -jnp.sum(h * h))
        return total + s * s
    w, xs = np.linspace(-1, 1, 12).reshape(4, 3), np.linspace(-2, 2, 48).reshape(6, 2, 4)[:, 0]
    value, (gw, gs) = jax.value_and_grad(loss, argnums=(0, 1))(w, 0.7, xs)
    for run in runs:
        assert run["value"] == pytest.approx(float(value), rel=1e-12)
        np.testing.assert_allclose(run["gw"], np.asarray(gw), rtol=1e-11, atol=1e-13)
        assert run["gs"] == pytest.approx(float(gs), rel=1e-11)
        assert run["names"], "no segments were made"
    assert runs[0]["cache"] == "miss" and runs[1]["cache"] == "disk"


@pytest.mark.slow
def test_compile_latency_benchmark_runs_a_program(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, "-m", "bench.compile_latency", "--program", "cell_10", "--repeats", "1",
                           "--no-jax", "--out", str(tmp_path / "c")], cwd=root, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| small cell unrolled 10 steps |" in proc.stdout and "compile by stage" in proc.stdout
    result = json.loads((tmp_path / "c.json").read_text())["results"]
    assert set(result) == {"cell_10"}
    assert all(r["cache"] == "miss" for runs in result.values() for r in runs["jitad"])


def test_products_in_a_loop_are_shared_kernels_and_right():
    """A loop over time with matrix products (the char-RNN's shape): main calls each product
    shape as one kernel instead of carrying the register tiles inline (LLVM's time on main
    grows faster than its length); values and gradients stay those of JAX."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    r = np.random.default_rng(3)
    p = (r.normal(0, 0.3, (20, 20)), r.normal(0, 0.3, (20, 12)), r.normal(0, 0.1, 20))
    xs = r.normal(0, 1, (5, 16, 20))

    def loss(p, xs):
        W, V, b = p

        def body(t, carry):
            h, total = carry
            h = jitad.tanh(h @ W + xs[t] + b)
            return h, total + jitad.sum(jitad.tanh(h @ V))
        return jitad.FOR(0, 5, body, (jitad.zeros((16, 20)), 0.0))[1]

    def reference(p, xs):
        W, V, b = p
        h, total = jnp.zeros((16, 20)), 0.0
        for t in range(5):
            h = jnp.tanh(h @ W + xs[t] + b)
            total = total + jnp.sum(jnp.tanh(h @ V))
        return total
    step = jitad.value_and_grad(loss)
    value, grads = step(p, xs)
    want, want_grads = jax.value_and_grad(reference)(p, xs)
    assert value == pytest.approx(float(want), rel=1e-12)
    for g, w in zip(grads, want_grads):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-10, atol=1e-12)
    names = _function_lines(step.llvm_ir)
    assert any(re.search(r"_kernel\d+_matmul$", n) for n in names), sorted(names)
    assert any(re.search(r"_kernel\d+_matmul_add$", n) for n in names), sorted(names)
    assert not any(re.search(r"_(segment|glue)\d+$", n) for n in names), "a short program is not segmented"
