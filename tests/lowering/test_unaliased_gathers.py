"""A fused loop reading vectors through an index (`gathered_reads`: a camera's or a
point's column at each observation) and its loads marked as not aliasing its stores
(`apart_reads`, `tensor._unaliased_gathers`), which lets LLVM vectorize it: values and
gradients against JAX in float32 and float64 at odd sizes with repeated, negative and
out-of-range indices; a loop that updates a slot one of its operands is a view of stays
unmarked (`apart_reads` on a node list), and its values right."""
import numpy as np
import pytest

import jitad
from jitad.ir.gathered_reads import apart_reads
from jitad.ir.graph import Graph, Node, Var
from jitad.ir.ops import Op
from jitad.ir.types import RefType, Type
from jitad.testing import check_grads

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

R = np.random.default_rng(7)
CAMS, PTS = R.standard_normal((5, 3)), R.standard_normal((11, 2))
IDX = np.stack([np.array([0, 4, 4, 2, -1, 1, 7, 3, -9, 0, 2, 2, 1]), np.arange(13) * 5 % 11], axis=1)   # repeats, clamped


def _residual(m, cams, pts, idx):
    """Per observation: columns of cams and pts read through idx, elementwise work."""
    c = [m.take(cams[:, k], idx[:, 0], mode="clip") for k in range(3)]
    p = [m.take(pts[:, k], idx[:, 1], mode="clip") for k in range(2)]
    return m.sin(c[0] * p[0]) + c[1] * m.cos(p[1]) - c[2] * c[2] * p[0] / (1.0 + p[1] * p[1])


def _jax_residual(cams, pts, idx):
    return _residual(jnp, cams, pts, idx)


def _reads_apart(f):
    return "reads_apart=True" in str(f.ir)


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-13), (np.float32, 2e-5)])
def test_values_and_gradients_against_jax(dtype, tol):
    cams, pts = CAMS.astype(dtype), PTS.astype(dtype)
    f = jitad.jit(lambda c, p: _residual(jitad.numpy, c, p, IDX))
    got = f(cams, pts)
    assert got.dtype == dtype and np.isfinite(got).all() and _reads_apart(f) and ".stores" in f.llvm_ir
    np.testing.assert_allclose(got, _jax_residual(cams, pts, IDX), rtol=tol, atol=tol)
    w = R.standard_normal(len(IDX)).astype(dtype)
    loss = lambda m: (lambda c, p: m.sum(_residual(m, c, p, IDX) * w))
    grads = jitad.jit(jitad.grad(loss(jitad.numpy), argnums=(0, 1)))(cams, pts)
    want = jax.grad(loss(jnp), argnums=(0, 1))(cams, pts)
    for g, h in zip(grads, want):
        np.testing.assert_allclose(g, h, rtol=tol * 10, atol=tol * 10)


def test_jacobian_and_check_grads():
    jac = jitad.jit(jitad.jacfwd(lambda c: _residual(jitad.numpy, c, PTS, IDX)))
    np.testing.assert_allclose(jac(CAMS), jax.jacfwd(lambda c: _jax_residual(c, PTS, IDX))(CAMS), rtol=1e-13, atol=1e-14)
    check_grads(lambda c, p: jitad.sum(_residual(jitad.numpy, c, p, IDX) ** 2), (CAMS, PTS), order=2)


def test_a_loop_gathering_from_the_carry_it_updates():
    """Each step reads the carry through the index and writes the next carry (its values
    against NumPy's, step by step)."""
    x0 = R.standard_normal(9)
    rows = np.array([8, 0, 0, 3, 5, 5, 1, 2, 7])
    step = lambda i, x: jitad.take(x, rows) * 0.5 + x * 0.25 + 1.0
    got = jitad.jit(lambda x: jitad.lax.fori_loop(0, 5, step, x))(x0)
    want = x0
    for _ in range(5):
        want = want[rows] * 0.5 + want * 0.25 + 1.0
    np.testing.assert_allclose(got, want, rtol=1e-14)


def _loop(ref):
    """A node list: a slot set to a tensor, a view of it, and a fused loop reading the view
    through an index (and, with `ref`, adding to the slot)."""
    t, rows_t = Type("f64", (6,)), Type("i64", (6,))
    x, rows = Var(t), Var(rows_t)
    slot = Node(Op.SLOT, (), (Var(RefType("f64", (6,))),), {"type": t})
    set_ = Node(Op.SLOT_SET, (slot.outputs[0], x), ())
    get = Node(Op.SLOT_GET, (slot.outputs[0],), (Var(t),))
    px, pr, out = Var(t), Var(rows_t), Var(t)
    params = [px, pr] + ([Var(RefType("f64", (6,)))] if ref else [])
    gather = Node(Op.GATHER, (px, pr), (out,))
    nodes = [gather]
    if ref:
        nodes.append(Node(Op.SLOT_ADD, (params[2], out), ()))
    fused = Node(Op.FUSED, (get.outputs[0], rows) + ((slot.outputs[0],) if ref else ()), (Var(t),), {"shape": (6,)},
                 (Graph(params, nodes, [out]),))
    return [slot, set_, get, fused], fused.outputs[0]


@pytest.mark.parametrize("ref", [False, True])
def test_a_loop_updating_what_it_gathers_from_stays_unmarked(ref):
    nodes, out = _loop(ref)
    marked = apart_reads(nodes, [out])[-1]
    assert marked.attrs.get("reads_apart", False) is (not ref)
