"""A row max or sum of a lone elementwise op's result (logits: a product plus a bias) is
taken in the loop computing it, as for fused loops: one pass, not a second over the result."""
import numpy as np

import jitad
from jitad.ir.ops import Op


def test_the_row_max_of_a_sum_is_taken_in_its_loop_and_is_right():
    r = np.random.default_rng(4)
    z, b = r.normal(size=(20, 26)), r.normal(size=26)
    z[3, 5] = np.nan
    f = jitad.jit(lambda z, b: (jitad.max(z + b, axis=1), jitad.sum(z * b, axis=1, keepdims=True)))
    m, s = f(z, b)
    np.testing.assert_array_equal(m, np.max(z + b, axis=1))   # NaN in row 3 too
    np.testing.assert_allclose(s, np.sum(z * b, axis=1, keepdims=True), rtol=1e-14)
    ops = [n.op for n in f._last.program.main.nodes]
    assert Op.MAX not in ops and Op.SUM not in ops and Op.ADD not in ops and Op.MUL not in ops


def test_a_cross_entropy_of_logits_plus_a_bias_against_jax():
    r = np.random.default_rng(6)
    h, w, b, labels = r.normal(size=(20, 8)), r.normal(size=(8, 26)), r.normal(size=26), r.integers(0, 26, 20)
    loss = lambda w, b: jitad.cross_entropy(h @ w + b, labels)
    jitad.testing.check_grads(loss, (w, b))
    try:
        import jax
    except ImportError:
        return
    jax.config.update("jax_enable_x64", True)
    jl = lambda w, b: -jax.numpy.mean(jax.nn.log_softmax(h @ w + b)[np.arange(20), labels])
    for got, want in zip(jitad.jit(jitad.value_and_grad(loss, argnums=(0, 1)))(w, b)[1],
                         jax.grad(jl, argnums=(0, 1))(w, b)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)



def test_a_square_of_a_loops_result_stays_well_formed_when_that_loop_is_recomputed():
    """`y * y` reads one operand twice: its loop of one takes it once, so that inlining the
    loop making `y` into it (`recompute_cheap`) leaves no read of a dropped param."""
    from jitad.ir.fuse import row_reductions
    from jitad.ir.graph import Graph, Node, Var
    from jitad.ir.peephole import recompute_cheap
    from jitad.ir.types import Type
    t, e = Type("f64", (3, 4)), Type("f64")
    x, y, q, m, px, ex = Var(t), Var(t), Var(t), Var(Type("f64", (3, 1))), Var(t), Var(e)
    nodes = [Node(Op.FUSED, (x,), (y,), {"shape": (3, 4)}, (Graph([px], [Node(Op.ADD, (px, px), (ex,))], [ex]),)),
             Node(Op.MUL, (y, y), (q,)), Node(Op.MAX, (q,), (m,), {"axes": (1,), "keepdims": True})]
    out = recompute_cheap(row_reductions(nodes, [m]), [m])
    for n in out:
        if n.op == Op.FUSED:
            (body,) = n.bodies
            known = set(body.params) | {v for b in body.nodes for v in b.outputs}
            assert len(body.params) == len(n.inputs)
            assert all(v in known for b in body.nodes for v in b.inputs)
