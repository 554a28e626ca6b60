"""The primitives behind the tensor speed goals: `bmm` (batched matmul, einsum,
tensordot), `cumsum` (one sequential pass) and `scatter` (`.at[].set/add`, `scan`'s
stacked outputs, `jacfwd`/`jacrev` rows, in place in loops): values and gradients
against JAX, `check_grads`, the CUDA simulator, and the in-place loop update's cost."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitad
from jitad.ir.ops import Op
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)
rng = np.random.default_rng(14)


def close(got, want, rtol=1e-12, atol=1e-12):
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


# -- batched matmul ------------------------------------------------------------------

BMM_CASES = [("bhqd,bhkd->bhqk", (2, 3, 5, 4), (2, 3, 6, 4)), ("bhqk,bhkd->bhqd", (2, 3, 5, 6), (2, 3, 6, 4)),
             ("bqd,bkd->bqk", (4, 3, 2), (4, 5, 2)), ("bdq,bdk->bqk", (4, 3, 2), (4, 3, 5)),
             ("bij,bjk->bik", (1, 3, 2), (1, 2, 4)), ("ijb,jkb->bik", (3, 2, 4), (2, 5, 4))]


@pytest.mark.parametrize("sub,sa,sb", BMM_CASES)
def test_einsum_batched_values_and_gradients_match_jax(sub, sa, sb):
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    close(jitad.jit(lambda a, b: jitad.einsum(sub, a, b))(a, b), np.einsum(sub, a, b))
    loss = lambda N: (lambda a, b: N.sum(N.sin(N.einsum(sub, a, b))))
    close(jitad.grad(loss(jitad), argnums=(0, 1))(a, b), jax.grad(loss(jnp), argnums=(0, 1))(a, b))
    check_grads(loss(jitad), (a, b), order=2)


@pytest.mark.parametrize("sa,sb", [((2, 3, 4, 5), (2, 3, 5, 6)), ((3, 4, 5), (1, 5, 2)), ((2, 1, 4, 5), (3, 5, 2))])
def test_batched_matmul_with_broadcast_batch_matches_jax(sa, sb):
    a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    got = jitad.jit(jitad.matmul)(a, b)
    assert got.dtype == np.float32
    close(got, a @ b, rtol=1e-5, atol=1e-5)
    loss = lambda N: (lambda a, b: N.sum(N.tanh(N.matmul(a, b))))
    close(jitad.grad(loss(jitad), argnums=(0, 1))(a, b), jax.grad(loss(jnp), argnums=(0, 1))(a, b), 1e-4, 1e-5)


def test_batched_matmul_is_one_bmm_node_and_forward_mode_works():
    a, b = rng.standard_normal((8, 16, 16)), rng.standard_normal((8, 16, 16))
    ops = [n.op for n in jitad.trace(jitad.matmul, a, b).main.nodes]
    assert ops.count(Op.BMM) == 1 and Op.TRANSPOSE not in ops
    ops = [n.op for n in jitad.trace(lambda a, b: jitad.einsum("bqd,bkd->bqk", a, b), a, b).main.nodes]
    assert ops.count(Op.BMM) == 1 and Op.TRANSPOSE not in ops   # b is read transposed, not copied
    t = rng.standard_normal(a.shape)
    primal, tangent = jitad.jvp(lambda a: jitad.matmul(a, b), (a,), (t,))
    close((primal, tangent), (a @ b, t @ b))
    with pytest.raises(jitad.errors.ShapeError, match="batched"):
        jitad.jit(lambda a, b: jitad.numeric.bind(Op.BMM, a, b, ta=False, tb=False))(a, b[:, :3])


# -- cumsum --------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis", [((7,), 0), ((3, 7, 5), 1), ((3, 7, 5), -1), ((3, 7, 5), 0),
                                        ((3, 7, 5), None), ((0, 4), 1), ((4, 1), 1)])
def test_cumsum_matches_jax(shape, axis):
    x = rng.standard_normal(shape)
    close(jitad.jit(lambda x: jitad.cumsum(x, axis=axis))(x), np.cumsum(x, axis=axis))
    loss = lambda N: (lambda x: N.sum(N.sin(N.cumsum(x, axis=axis)) * N.cos(N.cumsum(x, axis=axis))))
    close(jitad.grad(loss(jitad))(x), jax.grad(loss(jnp))(x))
    if x.size:
        check_grads(loss(jitad), (x,), order=2)


def test_cumsum_is_sequential_like_numpy_and_keeps_ints():
    x = rng.standard_normal(10 ** 5) * 1e3   # a log-step scan rounds differently; NumPy's loop is sequential
    np.testing.assert_array_equal(jitad.jit(jitad.cumsum)(x), np.cumsum(x))
    got = jitad.jit(jitad.cumsum)(np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(got, np.cumsum(np.arange(6)))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(jitad.jit(lambda b: jitad.cumsum(b, 0))(np.array([True, False, True])), [1, 1, 2])
    f32 = jitad.jit(lambda x: jitad.cumsum(x, 0))(np.ones(4, np.float32))
    assert f32.dtype == np.float32


# -- scatter: .at[], scan, jacobians ---------------------------------------------------

@pytest.mark.parametrize("how", ["set", "add"])
@pytest.mark.parametrize("staged", [True, False])
def test_at_set_add_with_repeated_and_negative_indices_match_jax(how, staged):
    x, v = rng.standard_normal((6, 3)), rng.standard_normal((5, 3))
    idx = np.array([1, -1, 1, 3, 5])
    f = lambda N, i: (lambda x, v: N.sum(N.sin(getattr(x.at[i], how)(v)) * np.arange(18.0).reshape(6, 3)))
    j = lambda x, v, i: f(jitad, i)(x, v)
    got = jitad.jit(lambda x, v, i: getattr(x.at[i], how)(v))(x, v, idx)
    close(got, getattr(jnp.asarray(x).at[idx], how)(v))
    want = jax.grad(f(jnp, idx), argnums=(0, 1))(x, v)
    if staged:
        close(jitad.grad(j, argnums=(0, 1))(x, v, idx), want)
    else:
        close(jitad.grad(f(jitad, idx), argnums=(0, 1))(x, v), want)
    check_grads(lambda x, v: j(x, v, idx), (x, v), order=2)


def test_at_with_scalar_staged_index_and_ints():
    x = np.arange(5)
    np.testing.assert_array_equal(jitad.jit(lambda x, i: x.at[i].set(7))(x, np.int64(-2)), [0, 1, 2, 7, 4])
    np.testing.assert_array_equal(jitad.jit(lambda x, i: x.at[i].add(7))(x, np.int64(9)), [0, 1, 2, 3, 11])
    m = rng.standard_normal((4, 3))
    got = jitad.jit(lambda m, i, r: m.at[i].set(r))(m, np.int64(2), np.ones(3))
    close(got, np.asarray(jnp.asarray(m).at[2].set(1.0)))


def test_scatter_forward_mode_matches_jax():
    x, v = rng.standard_normal((5, 2)), rng.standard_normal((3, 2))
    idx = np.array([1, 1, 4])
    f = lambda x, v: x.at[idx].set(v) * x
    close(jitad.jacfwd(f, argnums=(0, 1))(x, v), jax.jacfwd(f, argnums=(0, 1))(x, v))
    close(jitad.jacrev(f, argnums=(0, 1))(x, v), jax.jacrev(f, argnums=(0, 1))(x, v))


def _step(N):
    def step(c, x):
        c = N.tanh(c * 0.9 + x)
        return c, (c * c, N.sum(c))
    return step


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_stacked_outputs_and_gradient_match_jax(reverse):
    xs = rng.standard_normal((40, 3))
    close(jitad.jit(lambda xs: jitad.scan(_step(jitad), np.zeros(3), xs, reverse=reverse))(xs),
          jax.lax.scan(_step(jnp), jnp.zeros(3), xs, reverse=reverse))
    loss = lambda N, scan: (lambda xs: N.sum(scan(_step(N), N.zeros(3), xs, reverse=reverse)[1][0] ** 2))
    close(jitad.grad(loss(jitad, jitad.scan))(xs), jax.grad(loss(jnp, jax.lax.scan))(xs))
    check_grads(loss(jitad, jitad.scan), (xs[:6],), order=2)


def test_jacobians_through_the_row_loop_match_jax():
    x = rng.standard_normal(20)   # more than jacobians.UNROLL rows: the staged FOR loop
    f = lambda N: (lambda x: N.sin(x) * x[0] + N.cumsum(x))
    close(jitad.jacfwd(f(jitad))(x), jax.jacfwd(f(jnp))(x))
    close(jitad.jacrev(f(jitad))(x), jax.jacrev(f(jnp))(x))
    close(jitad.hessian(lambda x: jitad.sum(jitad.sin(x) * x[0]))(x), jax.hessian(lambda x: jnp.sum(jnp.sin(x) * x[0]))(x))


def test_loop_state_scatter_is_in_place_and_other_loops_stay_correct():
    """A scan's stacked output is written in place: 4x the length costs far less than
    16x the time (a copy per step would be quadratic). A loop whose state is read
    besides the update copies it, so the old value stays intact."""
    import time

    def run(n):
        f = jitad.jit(lambda xs: jitad.scan(lambda c, x: (c + x, c * x), np.zeros(64), xs)[1])
        xs = np.ones((n, 64))
        f(xs)
        start = time.process_time()   # CPU time: a loaded machine stretches wall time unevenly
        for _ in range(5):
            f(xs)
        return (time.process_time() - start) / 5
    # both outputs past the caches (a smaller one runs from cache), 8x the length: linear ~8x,
    # a copy per step ~64x
    small, large = min(run(2000) for _ in range(3)), min(run(16000) for _ in range(3))
    assert large < 24 * small, (small, large)

    def body(i, state):
        acc, prev = state
        new = acc.at[i].set(jitad.sum(acc) + 1.0)
        return new, prev + acc[i]   # reads acc besides the update: no in-place write
    got = jitad.jit(lambda: jitad.FOR(0, 5, body, (np.zeros(5), 0.0)))()
    acc, prev = np.zeros(5), 0.0
    for i in range(5):
        new = acc.copy()
        new[i] = acc.sum() + 1.0
        acc, prev = new, prev + acc[i]
    close(got, (acc, prev))


# -- the CUDA simulator ------------------------------------------------------------------

GPU_SCRIPT = textwrap.dedent("""
    import numpy as np, jitad
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 4, 5)), rng.standard_normal((3, 6, 5))
    x, v, idx = rng.standard_normal((5, 2)), rng.standard_normal((3, 2)), np.array([1, -1, 1])
    cases = [
        (lambda a, b: jitad.einsum("bqd,bkd->bqk", a, b), (a, b)),
        (jitad.grad(lambda a, b: jitad.sum(jitad.sin(jitad.einsum("bqd,bkd->bqk", a, b))), argnums=(0, 1)), (a, b)),
        (lambda a: jitad.cumsum(a, axis=1), (a,)),
        (jitad.grad(lambda a: jitad.sum(jitad.sin(jitad.cumsum(a, axis=2)))), (a,)),
        (lambda x, v, i: (x.at[i].set(v), x.at[i].add(v), x.at[2].set(v[0])), (x, v, idx)),
        (jitad.grad(lambda x, v, i: jitad.sum(jitad.sin(x.at[i].set(v))), argnums=(0, 1)), (x, v, idx)),
        (lambda xs: jitad.scan(lambda c, x: (c + x, c * x), np.zeros(2), xs), (x,)),
    ]
    for k, (f, args) in enumerate(cases):
        got, want = jitad.jit(f, device="cuda")(*args), jitad.jit(f)(*args)
        for g, w in zip(jitad.pytree.flatten(got)[0], jitad.pytree.flatten(want)[0]):
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=str(k))
    print("gpu ok")
""")


@pytest.mark.gpu
def test_cuda_simulator_matches_cpu():
    pytest.importorskip("numba.cuda")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM=os.environ.get("NUMBA_ENABLE_CUDASIM", "1"))
    out = subprocess.run([sys.executable, "-c", GPU_SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "gpu ok" in out.stdout, out.stderr[-3000:]
