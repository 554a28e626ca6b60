"""Errors that were internal or misleading now name the problem and the fix (or the call
works, as in JAX/NumPy): leaked staged values, odd functions, environment variables,
malformed pytree registrations, keyword arguments, scan over constants and zero steps,
zero-size jacobians, np.linalg on staged values, collectives that disagree."""
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitad
from jitad.tree_util import register_pytree_node

pytestmark = pytest.mark.llvm
jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)


def child_stderr(code, **env):
    """Run `code` in a fresh interpreter with `env` added; return (returncode, stderr)."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, **env))
    return proc.returncode, proc.stderr


# -- staged values that escape, functions Python cannot describe --------------------

def test_leaked_staged_value_names_the_escape():
    leak = []

    def f(x):
        leak.append(x)
        return x * 2.0
    jitad.jit(f)(np.ones(3))
    for use in (lambda: leak[0] + 1.0, lambda: jitad.sin(leak[0]), lambda: leak[0][1], lambda: np.exp(leak[0])):
        with pytest.raises(jitad.StagingError, match="escaped the function that traced it"):
            use()


def test_builtin_and_odd_names_compile():
    assert jitad.jit(abs)(-2.0) == 2.0
    assert jitad.jit(pow)(2.0, 3.0) == 8.0
    with pytest.raises(jitad.StagingError, match="bool"):   # Python's max compares: as in JAX
        jitad.jit(max)(1.0, 2.0)
    assert jitad.jit(round)(2.5) == 2.0 and jitad.jit(lambda x: round(x, 1))(2.25) == round(2.25, 1)
    assert jitad.jit(divmod)(7.0, 2.0) == (3.0, 1.0) and jitad.jit(lambda x: divmod(7.5, x))(2.0) == (3.0, 1.5)

    def g(x):
        return x * x
    for name in ("a\0b", 'quote"\nnew line', "é"):
        g.__name__ = name
        assert jitad.jit(g)(3.0) == 9.0
        assert jitad.grad(g)(3.0) == 6.0
        np.testing.assert_array_equal(jitad.vmap(g)(np.arange(3.0)), [0.0, 1.0, 4.0])


@pytest.mark.parametrize("name, value, said", [("JITAD_ARENA_MB", "-5", "integer >= 1"),
                                               ("JITAD_MAX_SIGNATURES", "x", "integer >= 0"),
                                               ("JITAD_ARENA_MB", str(2 ** 40), "cannot reserve")])
def test_bad_environment_variable_is_named(name, value, said):
    rc, err = child_stderr("import jitad; jitad.jit(lambda x: x + 1.0)(1.0)", **{name: value})
    assert rc == 1 and "jitad.errors.ConfigError" in err and f"{name}=" in err and said in err, err


# -- pytree registrations -------------------------------------------------------------

class NotPair:
    def __init__(self, x):
        self.x = x


class ListAux:
    def __init__(self, x):
        self.x = x


register_pytree_node(NotPair, lambda p: 5, lambda aux, ch: NotPair(*ch))
register_pytree_node(ListAux, lambda p: ((p.x,), [1, 2]), lambda aux, ch: ListAux(*ch))


def test_flatten_returning_no_pair_names_the_class():
    for call in (lambda: jitad.jit(lambda p: p.x)(NotPair(1.0)), lambda: jitad.tree_leaves(NotPair(1.0))):
        with pytest.raises(jitad.ArgumentError, match="registered for the pytree class NotPair returned 5"):
            call()


def test_unhashable_aux_data_is_accepted_and_static_arguments_are_named():
    for t in (jitad.jit, jitad.grad, jitad.vmap):   # aux_data needs only ==, as in JAX
        out = t(lambda p: jitad.sum(p.x * 2.0))(ListAux(np.ones(2)))
        assert sum(np.sum(leaf) for leaf in jitad.tree_util.tree_leaves(out)) == 4.0
    with pytest.raises(jitad.ArgumentError, match="static arguments must be hashable, got list"):
        jitad.jit(lambda a, b: a, static_argnums=1)(1.0, [1])



# -- keyword arguments, as JAX takes them ----------------------------------------------

def scaled(x, *, scale=2.0):
    return x * scale


def with_options(x, **options):
    return x * options.get("s", 1.0)


def test_keyword_arguments_are_dynamic_in_jit_and_pass_through_grad():
    f = jitad.jit(scaled)
    assert f(3.0) == 6.0 and f(3.0, scale=4.0) == 12.0 and f(3.0, scale=5.0) == 15.0   # not baked in
    np.testing.assert_array_equal(f(np.ones(2), scale=np.arange(2.0)), [0.0, 1.0])
    assert jitad.jit(with_options)(3.0, s=4.0) == 12.0
    assert jitad.jit(lambda x, n, *, s: x * n * s, static_argnums=1)(3.0, 2, s=2.0) == 12.0
    with pytest.raises(jitad.ArgumentError, match="missing a required argument: 'scale'"):
        jitad.jit(lambda x, *, scale: x * scale)(3.0)
    # grad differentiates the positional arguments only; keywords pass through, as in JAX
    assert jitad.grad(scaled)(3.0, scale=4.0) == jax.grad(scaled)(3.0, scale=4.0) == 4.0
    assert jitad.grad(with_options)(3.0, s=4.0) == 4.0
    assert jitad.value_and_grad(scaled)(2.0, scale=3.0) == (6.0, 3.0)
    assert jitad.jit(lambda x, s: jitad.grad(scaled)(x, scale=s))(3.0, 5.0) == 5.0
    np.testing.assert_array_equal(jitad.jacrev(scaled)(np.ones(2), scale=3.0), 3.0 * np.eye(2))


def test_vmap_batches_keyword_arguments_along_axis_0():
    want = jax.vmap(scaled)(np.ones(3), scale=np.arange(3.0))
    np.testing.assert_array_equal(jitad.vmap(scaled)(np.ones(3), scale=np.arange(3.0)), want)
    np.testing.assert_array_equal(jitad.vmap(lambda x, y: x * y, in_axes=(0,))(np.ones(3), y=np.arange(3.0)),
                                  np.arange(3.0))
    both = jitad.vmap(lambda x, y, *, s: x * y * s, in_axes=[0, None])(np.ones(3), 2.0, s=np.arange(3.0))
    np.testing.assert_array_equal(both, 2.0 * np.arange(3.0))
    inside = jitad.jit(lambda x, s: jitad.vmap(scaled)(x, scale=s))(np.ones(3), np.arange(3.0))
    np.testing.assert_array_equal(inside, want)


# -- scan over NumPy constants and over zero steps, against JAX ------------------------

def step(c, x):
    return c * x + 1.0, (jnp if isinstance(c, jax.Array) else jitad).sin(c * x)


@pytest.mark.parametrize("xs, reverse", [(np.array([1.0, 2.0, 3.0]), False), (np.arange(6.0).reshape(3, 2), True),
                                         (np.zeros(0), False), (np.zeros((0, 2)), True)],
                         ids=["vector", "matrix-reverse", "empty", "empty-rows-reverse"])
def test_scan_over_numpy_constant_and_zero_steps_matches_jax(xs, reverse):
    c0 = 0.5 if xs.ndim == 1 else np.array([0.5, 0.3])

    def loss(lib, scan):
        def f(c):
            carry, ys = scan(step, c, xs, reverse=reverse)
            return lib.sum(carry) + lib.sum(ys * ys)
        return f
    carry, ys = jitad.jit(lambda c: jitad.scan(step, c, xs, reverse=reverse))(c0)
    carry_j, ys_j = jax.lax.scan(step, c0, xs, reverse=reverse)
    np.testing.assert_allclose(carry, carry_j, rtol=1e-12)
    assert np.shape(ys) == ys_j.shape
    np.testing.assert_allclose(ys, ys_j, rtol=1e-12)
    np.testing.assert_allclose(jitad.grad(loss(jitad, jitad.scan))(c0), jax.grad(loss(jnp, jax.lax.scan))(c0),
                               rtol=1e-10)


def test_scan_of_zero_staged_steps_has_a_gradient_for_each_argument():
    f = lambda c, x: jitad.sum(jitad.scan(lambda c, x: (c * x, c + x), c, x)[1]) + c
    gc, gx = jitad.grad(f, argnums=(0, 1))(1.0, np.zeros(0))
    assert gc == 1.0 and gx.shape == (0,)
    assert jitad.jit(lambda c: jitad.scan(lambda c, _: (c + 1.0, c), c, None, length=0))(2.0)[0] == 2.0


# -- zero sizes and broadcasting in jacobians and linalg --------------------------------

@pytest.mark.parametrize("which, make, x", [
    ("jacrev", lambda L: lambda x: x * 2.0, np.zeros(0)),
    ("jacfwd", lambda L: lambda x: x * 2.0, np.zeros(0)),
    ("jacrev", lambda L: lambda x: L.sum(x), np.zeros(0)),
    ("jacfwd", lambda L: lambda x: x * 2.0, np.zeros((0, 3))),
    ("jacrev", lambda L: lambda x: L.sum(x) * L.ones(3), np.zeros(0)),
    ("jacfwd", lambda L: lambda x: x[:0] * 1.0, np.ones(3)),
    ("jacrev", lambda L: lambda x: (x * 2.0, L.sum(x ** 2)), np.zeros(0))])
def test_zero_size_jacobian_has_jax_shape(make, x, which):
    ours = getattr(jitad, which)(make(jitad))(x)
    theirs = getattr(jax, which)(make(jnp))(x)
    assert jax.tree_util.tree_map(np.shape, ours) == jax.tree_util.tree_map(np.shape, theirs)


def test_pinv_of_zero_size_and_solve_of_batched_matrix_and_vector_match_numpy():
    for shape in [(0, 3), (3, 0)]:
        assert jitad.linalg.pinv(np.zeros(shape)).shape == np.linalg.pinv(np.zeros(shape)).shape
    z = np.zeros((2, 0, 3))
    assert jitad.jit(jitad.linalg.pinv)(z).shape == np.linalg.pinv(z).shape == (2, 3, 0)
    a = np.stack([np.eye(3) * (k + 1) + 0.1 * k for k in range(4)])
    b = np.arange(3.0)
    want = np.linalg.solve(a, b)
    assert want.shape == (4, 3)
    np.testing.assert_allclose(jitad.linalg.solve(a, b), want, rtol=1e-12)
    np.testing.assert_allclose(jitad.jit(jitad.linalg.solve)(a, b), want, rtol=1e-12)
    loss = lambda lib: lambda a, b: lib.sum(lib.linalg.solve(a, b) ** 2)
    for g, gj in zip(jitad.grad(loss(jitad), argnums=(0, 1))(a, b), jax.grad(loss(jnp), argnums=(0, 1))(a, b)):
        np.testing.assert_allclose(g, gj, rtol=1e-10)


def test_empty_reductions_name_themselves_and_softmax_is_empty_as_in_jax():
    for name in ("min", "max"):
        for fn in (getattr(jitad, name), jitad.jit(getattr(jitad, name))):
            with pytest.raises(jitad.ShapeError, match=f"^`{name}` of an empty axis"):
                fn(np.zeros(0))
    x = np.zeros((2, 0))
    for ours, theirs in [(jitad.softmax, jax.nn.softmax), (jitad.log_softmax, jax.nn.log_softmax),
                         (lambda x: jitad.logsumexp(x, axis=-1), lambda x: jax.nn.logsumexp(x, axis=-1))]:
        np.testing.assert_array_equal(ours(x), theirs(x))
        np.testing.assert_array_equal(jitad.jit(ours)(x[0]), theirs(x[0]))
    assert jitad.grad(jitad.logsumexp)(np.zeros(0)).shape == (0,)


# -- np.linalg on staged values, shard's axis -----------------------------------------

def test_numpy_linalg_on_staged_values_runs_jitad_linalg():
    a, b = np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([1.0, 2.0])
    np.testing.assert_allclose(jitad.jit(lambda a, b: np.linalg.solve(a, b))(a, b), np.linalg.solve(a, b))
    np.testing.assert_allclose(jitad.jit(lambda a: np.linalg.inv(a))(a), np.linalg.inv(a))
    np.testing.assert_allclose(jitad.grad(lambda a: np.linalg.det(a))(a), np.linalg.det(a) * np.linalg.inv(a).T)
    np.testing.assert_allclose(jitad.jit(lambda a: np.linalg.cond(a))(a), np.linalg.cond(a))   # jitad.numpy.linalg's
    with pytest.raises(jitad.StagingError, match="linalg.eig` on a staged value"):   # jitad.linalg's own refusal
        jitad.jit(lambda a: np.linalg.eigvals(a))(a)


def test_shard_with_a_bad_axis_names_the_axis():
    from jitad import distributed as dist
    for axis in (5, -3, 1.0):
        with pytest.raises(jitad.ArgumentError, match=f"shard: axis={axis!r} but leaf 0 .* shape \\(4, 2\\)"):
            dist.shard(np.ones((4, 2)), axis=axis)
    with pytest.raises(jitad.ArgumentError, match="leaf 1 of the batch is a scalar"):
        dist.shard((np.ones(4), 2.0))
    np.testing.assert_array_equal(dist.shard(np.arange(4.0), axis=-1), np.arange(4.0))


# -- eager collectives whose ranks disagree, and their timeout ------------------------

MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
try:
    import mpi4py  # noqa: F401
except ImportError:
    MPIEXEC = None
needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="needs the mpi extra: pip install 'jitad[mpi]'")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def mpirun(tmp_path, source, timeout=60):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(source))
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(script)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=tmp_path)
    return done.returncode, done.stdout + done.stderr


@needs_mpi
def test_ranks_passing_different_values_all_raise(tmp_path):
    rc, out = mpirun(tmp_path, """
        import numpy as np, jitad
        from jitad import distributed as dist
        dist.init()
        r = dist.rank()
        cases = [(lambda: dist.allreduce(np.ones(3) if r == 0 else np.ones(3, np.float32)), "float32[3]"),
                 (lambda: dist.allreduce(3.0 if r == 0 else 3), "int64[]"),
                 (lambda: dist.allreduce(np.ones(3 + r)), "float64[4]"),
                 (lambda: dist.allreduce({"a": 1.0} if r == 0 else {"b": 1.0}), "('b',)"),
                 (lambda: dist.allreduce(1.0, op="sum" if r == 0 else "max"), "op='max'"),
                 (lambda: dist.allreduce(1.0) if r == 0 else dist.broadcast(1.0), "broadcast(op=0)")]
        for k, (call, want) in enumerate(cases):
            try:
                call()
            except jitad.DistributedError as e:
                assert want in str(e) and "rank 0: allreduce" in str(e) and "rank 1: " in str(e), str(e)
            else:
                raise AssertionError(f"case {k}: no error")
        # agreeing ranks still combine, with or without a timeout
        assert dist.allreduce(np.ones(2) * r, op="mean", timeout=30).tolist() == [0.5, 0.5]
        assert dist.broadcast({"a": np.ones(2) * r}, root=1, timeout=30)["a"].tolist() == [1, 1]
        assert dist.allreduce((1.0, [np.int64(r)]), op="max") == (1.0, [1])
        print(f"OK-{r}", flush=True)
    """)
    assert rc == 0 and "OK-0" in out and "OK-1" in out, out


@needs_mpi
def test_compiled_collectives_compare_the_ranks_calls(tmp_path):
    rc, out = mpirun(tmp_path, """
        import numpy as np, jitad
        from jitad import distributed as dist
        dist.init()
        r = dist.rank()
        cases = [(lambda x: dist.allreduce(x if r == 0 else jitad.convert(x, "f32")), np.ones(3)),
                 (lambda x: dist.allreduce(x[: 2 + r]), np.ones(3)),
                 (lambda x: dist.allreduce(x, op="sum" if r == 0 else "max"), 1.0),
                 (lambda x: dist.allreduce(x) if r == 0 else dist.broadcast(x), 1.0),
                 (lambda x: jitad.FOR(0, 3, lambda i, s: s + jitad.sum(dist.allreduce(s[: 2 + r])), x), np.ones(3))]
        for k, (fn, x) in enumerate(cases):
            try:
                jitad.jit(fn)(x)
            except jitad.RuntimeCheckError as e:
                assert "the ranks make different collectives here" in str(e), str(e)
            else:
                raise AssertionError(f"case {k}: no error")
        # agreeing ranks, in a loop and in a gradient, still combine
        f = jitad.jit(lambda x: jitad.FOR(0, 3, lambda i, s: dist.allreduce(s) * 0.5, x))
        assert f(np.ones(2) * (r + 1)).tolist() == [1.5, 1.5]
        assert jitad.grad(lambda x: jitad.sum(dist.allreduce(x) ** 2))(np.ones(2)).tolist() == [8, 8]
        print(f"OK-{r}", flush=True)
    """)
    assert rc == 0 and "OK-0" in out and "OK-1" in out, out


@needs_mpi
@pytest.mark.parametrize("call, said", [
    ("dist.allreduce(np.ones(3), timeout=0.5)", "DistributedError: allreduce: rank 0 waited 0.5 s for the other ranks"),
    ("jitad.jit(lambda x: dist.allreduce(x, timeout=0.5))(np.ones(3))",
     "a compiled collective waited longer than its timeout=")], ids=["eager", "compiled"])
def test_collective_timeout_ends_the_job_instead_of_hanging(tmp_path, call, said):
    rc, out = mpirun(tmp_path, f"""
        import time, numpy as np, jitad
        from jitad import distributed as dist
        dist.init()
        # with every rank present, a timeout changes nothing, compiled or not
        f = jitad.jit(lambda x: dist.broadcast(x + dist.rank(), root=1, timeout=30))
        assert f(np.ones(2)).tolist() == [2, 2]
        g = jitad.grad(lambda x: jitad.sum(dist.allreduce(x, timeout=30.0) ** 2))(np.ones(2))
        assert g.tolist() == [8, 8], g
        if dist.rank() == 1:
            time.sleep(60)   # never joins: rank 0 must end the job
        {call}
        print("rank 0 was not stopped")
    """, timeout=60)
    assert rc != 0 and said in out and "not stopped" not in out, out


def test_timeout_argument_is_checked():
    from jitad import distributed as dist
    for bad in (-1, 0, "5", True):
        with pytest.raises(jitad.ArgumentError, match="give a number of seconds > 0"):
            dist.allreduce(1.0, timeout=bad)
    with pytest.raises(jitad.ArgumentError, match="broadcast: timeout=-1"):
        dist.broadcast(1.0, timeout=-1)
    assert dist.allreduce(2.0, timeout=1) == 2.0 and dist.broadcast(2.0, timeout=0.5) == 2.0   # one process
    assert jitad.jit(lambda x: dist.allreduce(x, timeout=5))(1.0) == 1.0
