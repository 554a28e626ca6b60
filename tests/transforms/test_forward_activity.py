"""Forward mode's activity analysis and one-primal Jacobians: values whose tangent is
structurally zero carry none (loop state, branches, calls, slots), `jacfwd` computes the
primal once and only tangent code per direction, `linearize` shares one primal between
directions. Values against JAX; structure by counting the staged program's nodes."""
import numpy as np
import pytest

import jitad
from jitad import FOR, FUN, IF, WHILE
from jitad.ir.graph import walk
from jitad.ir.ops import Op
from jitad.ir.passes import run_passes
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


def _nodes(program, op):
    graphs = [program.main] + [f.body for f in program.funs]
    return [n for g in graphs for n in walk(g) if n.op == op]


def _jvp_program(f, *args):
    return jitad.trace(lambda *a: jitad.jvp(f, a, tuple(1.0 for _ in a)), *args)


# -- activity: loop state, branches, calls -------------------------------------------

def for_fn(np_, loop):
    def f(x):
        # b (a float) and k never meet x: they carry no tangent
        return loop(0, 6, lambda i, s: (s[0] * np_.sin(x) + s[1], s[1] * 0.5 + 1.0, s[2] + 2.0), (x, 3.0, 0.0))
    return f


def test_for_state_without_tangent_is_not_carried():
    f = for_fn(jitad, FOR)
    (node,) = _nodes(_jvp_program(f, 0.7), Op.FOR)
    assert node.attrs["n_state"] == 4   # a, b, k and a's tangent (was 6: a tangent for each)
    got = jitad.jvp(f, (0.7,), (1.0,))
    want = jax.jvp(for_fn(jnp, lambda lo, hi, b, s: jax.lax.fori_loop(lo, hi, b, s)), (0.7,), (1.0,))
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_for_state_made_active_by_the_body_is_carried():
    # b starts as a constant, but the body adds x to it: its tangent is carried (a fixed point)
    def f(np_, loop):
        return lambda x: loop(0, 4, lambda i, s: (s[0] + s[1] * x, s[1] * 2.0 + x), (0.0, 1.0))[0]
    (node,) = _nodes(_jvp_program(f(jitad, FOR), 0.3), Op.FOR)
    assert node.attrs["n_state"] == 4
    want = jax.jvp(f(jnp, lambda lo, hi, b, s: jax.lax.fori_loop(lo, hi, b, s)), (0.3,), (1.0,))
    np.testing.assert_allclose(jitad.jvp(f(jitad, FOR), (0.3,), (1.0,)), want, rtol=1e-12)


def test_while_if_fun_without_tangent():
    @FUN(out=(0.0, 0.0))
    def scale(x, c):   # c never has a tangent here: neither has the second result
        return x * c, c + 1.0

    def f(x):
        def body(s):
            y, c, n = s
            y2, c2 = scale(y, c)
            return IF(y2 > 10.0, lambda: (y2 * 0.5, c2, n + 1.0), lambda: (y2 + x, c2, n + 1.0))
        return WHILE(lambda s: s[2] < 5.0, body, (x, 1.5, 0.0))[0]

    program = _jvp_program(f, 0.9)
    (loop,) = _nodes(program, Op.WHILE)
    assert loop.attrs["n_state"] == 4   # y, c, n and y's tangent
    (branch,) = _nodes(program, Op.IF)
    assert len(branch.outputs) == 4
    (call,) = _nodes(program, Op.CALL)
    assert len(call.outputs) == 3   # x*c, its tangent, c + 1

    def f_jax(x):
        def body(s):
            y, c, n = s
            y2, c2 = y * c, c + 1.0
            return jax.lax.cond(y2 > 10.0, lambda: (y2 * 0.5, c2, n + 1.0), lambda: (y2 + x, c2, n + 1.0))
        return jax.lax.while_loop(lambda s: s[2] < 5.0, body, (x, 1.5, 0.0))[0]
    np.testing.assert_allclose(jitad.jvp(f, (0.9,), (1.0,)), jax.jvp(f_jax, (0.9,), (1.0,)), rtol=1e-12)
    check_grads(f, (0.9,), order=2, modes=("fwd", "rev"))


def test_recursive_fun_activity():
    @FUN(out=(0.0, 0.0))
    def power(x, n):   # x ** n by recursion; the second result (a count) has no tangent
        return IF(n <= 0.0, lambda: (1.0, 0.0), lambda: _times(x, power(x, n - 1.0)))

    def _times(x, r):
        return x * r[0], r[1] + 1.0

    f = lambda x: power(x, 4.0)[0]
    assert jitad.jvp(f, (1.5,), (1.0,)) == pytest.approx((1.5 ** 4, 4 * 1.5 ** 3), rel=1e-12)
    calls = [n for n in _nodes(_jvp_program(f, 1.5), Op.CALL)]
    assert calls and all(len(n.outputs) == 3 for n in calls)


def test_scan_and_pytree_float32():
    def f(np_, scan):
        def g(p):
            def step(c, x):
                return (c[0] * p["w"] + x, c[1] + 1.0), c[0] * 2.0
            (c, k), ys = scan(step, (p["b"], np.float32(0.0)), p["xs"])
            return {"c": c, "ys": ys, "k": k}
        return g
    p = {"w": np.float32(0.9), "b": np.ones(3, np.float32), "xs": np.linspace(0, 1, 12, dtype=np.float32).reshape(4, 3)}
    t = jax.tree_util.tree_map(lambda x: np.full(np.shape(x), 0.5, np.float32), p)
    got = jitad.jvp(f(jitad, jitad.scan), (p,), (t,))
    want = jax.jvp(f(jnp, jax.lax.scan), (p,), (t,))
    for key in ("c", "ys", "k"):
        assert np.asarray(got[1][key]).dtype == np.float32
        np.testing.assert_allclose(got[1][key], want[1][key], rtol=1e-5, atol=1e-6)
    (node,) = _nodes(jitad.trace(lambda p, t: jitad.jvp(f(jitad, jitad.scan), (p,), (t,)), p, t), Op.FOR)
    plain = _nodes(jitad.trace(f(jitad, jitad.scan), p), Op.FOR)[0]
    assert node.attrs["n_state"] == plain.attrs["n_state"] + 2   # tangents of c and ys only, not of k


def test_unwritten_adjoint_slot_has_no_tangent():
    # jvp of grad of sum(min(P @ C^T)): the adjoint through the product depends on C only
    # through the argmin (a tangent-free mask), so no tangent matmul is made for it
    def cost(points, c):
        return jitad.sum(jitad.min(jitad.matmul(points, jitad.transpose(c)), axis=1))

    def hdiag(points, c):
        return jitad.jvp(lambda c: jitad.grad(cost, argnums=1)(points, c), (c,), (jitad.ones_like(c),))
    P, C = np.random.default_rng(0).normal(size=(20, 3)), np.random.default_rng(1).normal(size=(4, 3))
    program = run_passes(jitad.trace(hdiag, P, C))
    products = _nodes(program, Op.MATMUL) + _nodes(program, Op.MATMUL_ADD)
    assert len(products) == 2   # the primal and its adjoint (was 3)
    g, h = hdiag(P, C)
    jcost = lambda c: jnp.sum(jnp.min(P @ c.T, axis=1))
    want = jax.jvp(jax.grad(jcost), (C,), (np.ones_like(C),))
    np.testing.assert_allclose(g, want[0], rtol=1e-12)
    np.testing.assert_allclose(h, want[1], atol=1e-12)


# -- one primal for a Jacobian, linearize ----------------------------------------------

def _f(np_):
    return lambda x: np_.sin(x) * np_.sum(x * x) + np_.exp(x[0])   # (no sin in a tangent rule)


@pytest.mark.parametrize("n", [5, 20])   # unrolled and looped directions
def test_jacfwd_computes_the_primal_once(n):
    x = np.linspace(0.1, 1.0, n)
    program = jitad.trace(jitad.jacfwd(_f(jitad)), x)
    # the primal's sin: once for the output's structure, once for the linearization, none
    # per direction (was once per direction: the loop body, or n unrolled copies)
    assert len(_nodes(program, Op.SIN)) == 2
    for loop in _nodes(program, Op.FOR):
        assert not [m for m in walk(loop.bodies[0]) if m.op == Op.SIN]
    np.testing.assert_allclose(jitad.jacfwd(_f(jitad))(x), jax.jacfwd(_f(jnp))(x), rtol=1e-12)


def test_jacfwd_and_hessian_through_control_flow():
    def f(np_, loop, cond):
        def g(x):
            y = loop(0, 3, lambda i, s: s * np_.tanh(x) + x[::-1], x)
            return cond(y[0] > 0.0, lambda y: y * y, lambda y: -y, y)
        return g

    def unrolled(lo, hi, body, s):   # JAX's reference as straight-line code (quick to compile)
        for i in range(lo, hi):
            s = body(i, s)
        return s
    where = lambda p, a, b, y: jnp.where(p, a(y), b(y))
    x = np.linspace(-0.5, 0.8, 10)   # looped directions (the Hessian's: unrolled, smaller)
    np.testing.assert_allclose(jitad.jacfwd(f(jitad, FOR, IF))(x), jax.jacfwd(f(jnp, unrolled, where))(x),
                               rtol=1e-11, atol=1e-13)
    s = lambda np_, loop, cond: (lambda x: np_.sum(f(np_, loop, cond)(x) ** 2))
    np.testing.assert_allclose(jitad.hessian(s(jitad, FOR, IF))(x[:4]), jax.hessian(s(jnp, unrolled, where))(x[:4]),
                               rtol=1e-10, atol=1e-12)
    x32 = x.astype(np.float32)
    got = jitad.jacfwd(f(jitad, FOR, IF))(x32)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, jax.jacfwd(f(jnp, unrolled, where))(x32), rtol=1e-5, atol=1e-5)


def test_linearize_matches_jax_and_shares_the_primal():
    f = lambda x, y: jitad.sin(x) * y + jitad.exp(y)
    x, y = np.linspace(0, 1, 4), np.linspace(1, 2, 4)
    out, f_jvp = jitad.linearize(f, x, y)
    jout, jf_jvp = jax.linearize(lambda x, y: jnp.sin(x) * y + jnp.exp(y), x, y)
    np.testing.assert_allclose(out, jout, rtol=1e-12)
    v = np.full(4, 0.5)
    np.testing.assert_allclose(f_jvp(v, 2 * v), jf_jvp(v, 2 * v), rtol=1e-12)

    def two(x, y):   # staged: the primal's sin once; a zero tangent for y adds no exp
        _, lin = jitad.linearize(f, x, y)
        return lin(jitad.ones_like(x), 0.0), lin(0.0, jitad.ones_like(y))
    program = jitad.trace(two, x, y)
    assert len(_nodes(program, Op.SIN)) == 1 and len(_nodes(program, Op.EXP)) == 1
    a, b = jitad.jit(two)(x, y)
    np.testing.assert_allclose(a, jf_jvp(np.ones(4), np.zeros(4)), rtol=1e-12)
    np.testing.assert_allclose(b, jf_jvp(np.zeros(4), np.ones(4)), rtol=1e-12)
    with pytest.raises(jitad.ArgumentError, match="shape"):
        jitad.jit(lambda x, y: jitad.linearize(f, x, y)[1](np.ones(3), y))(x, y)
