"""Slices and concatenations inside fused loops: a shift `concatenate([1, y[:-1]])` is
read through its index map where it is used, and its adjoint (a region of a fused
result added into a slot) is added from inside the loop: no slice or concatenation
copy is left, forward or backward."""
import numpy as np
import pytest

import jitad
from jitad import FOR
from jitad.ir.graph import walk
from jitad.ir.ops import Op
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)

COPIES = (Op.SLICE, Op.CONCAT, Op.SLOT_ADD_SLICE, Op.UNSLICE)


def shifted(np_, y):
    return np_.concatenate([np_.ones(1), y[:-1]])


def ode(np_, loop):
    """RK4 on y0' = x0, yi' = xi y(i-1) (GradBench's ode), in jitad (`FOR`) or JAX."""
    def run(x, steps=2):
        h = 2.0 / steps

        def rk4(i, y):
            k1 = x * shifted(np_, y)
            k2 = x * shifted(np_, y + h / 2 * k1)
            k3 = x * shifted(np_, y + h / 2 * k2)
            k4 = x * shifted(np_, y + h * k3)
            return y + h / 6 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        return loop(0, steps, rk4, np_.zeros_like(x))[-1]
    return run


def jax_loop(lo, hi, body, init):
    return jax.lax.fori_loop(lo, hi, body, init)


def outside_fused(graph):
    """The ops of `graph` and its control-flow bodies, not those inside fused loops."""
    def nodes(graph):
        for n in graph.nodes:
            yield n
            if n.op != Op.FUSED:
                for body in n.bodies:
                    yield from nodes(body)
    return [n.op for n in nodes(graph)]


def compiled_program(f, *args):
    f(*args)
    return f._latest("ir").program


def test_ode_gradient_shift_is_fused_and_matches_jax():
    x = np.random.default_rng(0).random(9)
    f = jitad.jit(jitad.grad(ode(jitad, FOR)))
    got = f(x)
    np.testing.assert_allclose(got, jax.grad(ode(jnp, jax_loop))(x), rtol=1e-12)
    program = compiled_program(f, x)
    loops = [n for n in program.main.nodes if n.op == Op.FOR]
    assert len(loops) == 2   # forward and backward
    for loop in loops:   # (the main graph's `slot_add_slice` is the adjoint of `[-1]`)
        ops = outside_fused(loop.bodies[0])
        assert not [op for op in ops if op in COPIES], ops
    # the stages, each read shifted by the next, are recomputed where read: one loop a
    # step forward, and backward one per stage's adjoint (no stage stored and read back)
    assert [n.op for n in loops[0].bodies[0].nodes].count(Op.FUSED) == 1
    assert [n.op for n in loops[1].bodies[0].nodes].count(Op.FUSED) == 4
    inner = [op for n in walk(program.main) if n.op == Op.FUSED for op in
             (b.op for b in n.bodies[0].nodes)]
    assert inner.count(Op.SLOT_ADD_SLICE) == 4 and inner.count(Op.CONCAT) >= 8   # 4 shifts a step, twice
    check_grads(ode(jitad, FOR), (x,), order=1, modes=("rev",))


def test_adjoint_of_a_shift_is_one_loop():
    def f(x):
        return jitad.sum(jitad.sin(x) * jitad.concatenate([jitad.ones(1), jitad.cos(x)[:-1]]))

    def fj(x):
        return jnp.sum(jnp.sin(x) * jnp.concatenate([jnp.ones(1), jnp.cos(x)[:-1]]))
    x = np.linspace(-1.0, 2.0, 11)
    g = jitad.jit(jitad.grad(f))
    np.testing.assert_allclose(g(x), jax.grad(fj)(x), rtol=1e-13)
    ops = outside_fused(compiled_program(g, x).main)
    assert not [op for op in ops if op in COPIES], ops
    assert ops.count(Op.FUSED) <= 3, ops   # forward, the shift's adjoint, the rest
    check_grads(f, (x,), order=1, modes=("rev",))


def test_strided_and_two_dimensional_pieces():
    def f(x):   # a step-2 slice and a concatenation along axis 1 read in the loop
        y = jitad.concatenate([x[:, 2:], x[:, :2]], axis=1)
        return jitad.sum(jitad.exp(x[:, ::2]) * y[:, ::2]) + jitad.sum(y * x)

    def fj(x):
        y = jnp.concatenate([x[:, 2:], x[:, :2]], axis=1)
        return jnp.sum(jnp.exp(x[:, ::2]) * y[:, ::2]) + jnp.sum(y * x)
    x = np.random.default_rng(1).random((3, 8))
    np.testing.assert_allclose(jitad.jit(f)(x), fj(x), rtol=1e-13)
    np.testing.assert_allclose(jitad.jit(jitad.grad(f))(x), jax.grad(fj)(x), rtol=1e-13)
    check_grads(f, (x,), order=1, modes=("rev",))


def test_a_returned_concatenation_is_still_made():
    def f(x):
        c = jitad.concatenate([jitad.zeros(1), x[1:]])
        return c, c * x

    x = np.arange(1.0, 6.0)
    c, d = jitad.jit(f)(x)
    expected = np.concatenate([[0.0], x[1:]])
    np.testing.assert_array_equal(c, expected)
    np.testing.assert_array_equal(d, expected * x)


@pytest.mark.parametrize("writes", [False, True])
def test_a_slice_of_a_slot_the_loop_writes_is_copied_first(writes):
    from jitad.ir.graph import Graph, Node, Var
    from jitad.ir.regions import indexed_reads
    from jitad.ir.types import RefType, Type
    t4, t3 = Type("f64", (4,)), Type("f64", (3,))
    s, other = Var(RefType("f64", (4,))), Var(RefType("f64", (3,)))
    v, w = Var(t4), Var(t3)
    target = s if writes else other
    p_w, p_s, e = Var(t3), Var(target.type), Var(Type("f64"))
    body = Graph([p_w, p_s], [Node(Op.EXP, (p_w,), (e,)), Node(Op.SLOT_ADD, (p_s, e), ())], [])
    nodes = [Node(Op.SLOT_GET, (s,), (v,)), Node(Op.SLICE, (v,), (w,), {"starts": (1,), "stops": (4,), "steps": (1,)}),
             Node(Op.FUSED, (w, target), (), {"shape": (3,)}, (body,))]
    ops = [n.op for n in indexed_reads(nodes, [])]
    assert (Op.SLICE in ops) == writes   # (a view of slot s: read in the loop only when nothing writes s)


def fused_loops(program):
    return [n for n in walk(program.main) if n.op == Op.FUSED]


def test_stages_read_shifted_are_recomputed_along_both_axes():
    def f(x):   # three stages, each read shifted by the next: rows down, columns left
        u = x * x + 1.0
        v = x * jitad.concatenate([u[:, 1:], u[:, :1]], axis=1) - u
        w = 0.5 * x + jitad.concatenate([jitad.zeros((2, x.shape[1])), v[:-2]], axis=0)
        return w * jitad.concatenate([jitad.ones((x.shape[0], 1)), u[:, :-1]], axis=1)

    def fj(x):
        u = x * x + 1.0
        v = x * jnp.concatenate([u[:, 1:], u[:, :1]], axis=1) - u
        w = 0.5 * x + jnp.concatenate([jnp.zeros((2, x.shape[1])), v[:-2]], axis=0)
        return w * jnp.concatenate([jnp.ones((x.shape[0], 1)), u[:, :-1]], axis=1)
    x = np.random.default_rng(2).random((5, 7))
    primal = jitad.jit(f)
    np.testing.assert_allclose(primal(x), fj(x), rtol=1e-13)
    assert len(fused_loops(compiled_program(primal, x))) == 1
    g = jitad.jit(jitad.grad(lambda x: jitad.sum(jitad.sin(f(x)))))
    np.testing.assert_allclose(g(x), jax.grad(lambda x: jnp.sum(jnp.sin(fj(x))))(x), rtol=1e-12)
    check_grads(f, (x,), order=1, modes=("rev",))


def test_a_shift_by_more_than_one_and_a_chain_in_a_loop():
    def step(i, y, np_, x):
        a = x * np_.concatenate([y[2:], np_.zeros(2)]) + y
        b = a * np_.concatenate([np_.ones(3), a[:-3]]) + 0.5 * x
        return y + 0.1 * np_.concatenate([b[1:], b[:1]])

    def f(x):
        return jitad.sum(FOR(0, 3, lambda i, y: step(i, y, jitad, x), x))

    def fj(x):
        return jnp.sum(jax.lax.fori_loop(0, 3, lambda i, y: step(i, y, jnp, x), x))
    for n in (3, 4, 13):
        x = np.random.default_rng(n).random(n)
        primal = jitad.jit(f)
        np.testing.assert_allclose(primal(x), fj(x), rtol=1e-13)
        assert len(fused_loops(compiled_program(primal, x))) == 1   # the three stages: one loop
        np.testing.assert_allclose(jitad.jit(jitad.grad(f))(x), jax.grad(fj)(x), rtol=1e-12)


@pytest.mark.parametrize("fresh", [False, True])
def test_a_stage_is_recomputed_only_where_its_inputs_are_unchanged(fresh):
    """A recomputed stage reads its inputs later, in the reader: a param of the graph that
    a write through a ref (a slot from outside) might change keeps the stage stored."""
    from jitad.ir.graph import Graph, Node, Var
    from jitad.ir.regions import recompute_shifted
    from jitad.ir.types import RefType, Type
    t4, t1, s = Type("f64", (4,)), Type("f64", (1,)), Type("f64")
    x, one, u, r = Var(t4), Var(t1), Var(t4), Var(RefType("f64", (4,)))
    px, pu, po, pr, e, sl, c, m = Var(t4), Var(t4), Var(t1), Var(r.type), Var(s), Var(s), Var(s), Var(s)
    first = Graph([px], [Node(Op.MUL, (px, px), (e,))], [e])
    second = Graph([pu, po, pr], [
        Node(Op.SLICE, (pu,), (sl,), {"starts": (0,), "stops": (3,), "steps": (1,)}),
        Node(Op.CONCAT, (po, sl), (c,), {"axis": 0, "sizes": (1, 3)}),
        Node(Op.MUL, (c, c), (m,)), Node(Op.SLOT_ADD, (pr, m), ())], [])
    nodes = [Node(Op.FUSED, (x,), (u,), {"shape": (4,)}, (first,)),
             Node(Op.FUSED, (u, one, r), (), {"shape": (4,)}, (second,))]
    out = recompute_shifted(nodes, [], fresh={x} if fresh else set())
    assert len(out) == (1 if fresh else 2)
    if fresh:
        assert x in out[0].inputs and u not in out[0].inputs


def test_row_maximum_of_a_concatenation_reads_its_pieces():
    """A loop taking row maxima (`row_reductions`) runs its rows in one nest, so a
    concatenation it reads stays a tensor: forward mode over `max(axis=1)` of a stacked
    matrix compiled into such a loop."""
    def f(x):
        return jitad.numpy.max(jitad.numpy.array([[x, x], [x, 0.5]]), axis=1)

    def f_jax(x):
        return jnp.max(jnp.array([[x, x], [x, 0.5]]), axis=1)
    for x in (1.0, -1.0, 0.25):
        _, tangent = jitad.jvp(f, (x,), (1.0,))
        np.testing.assert_allclose(tangent, jax.jvp(f_jax, (x,), (1.0,))[1])
        np.testing.assert_allclose(jitad.jacobian(f)(x), jax.jacobian(f_jax)(x))
