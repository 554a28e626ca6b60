"""How compiled loops hold their tensor state and how bool masks are read: a loop body's
new state made in the loop's spare buffer or kept in the table entry the body stored it
in (no copy per iteration, one copy when the loop ends), and bool elements read and
written as bytes. Values and derivatives must be those of the plain program, against
NumPy, central differences and JAX."""
import numpy as np
import pytest

import jitad
from jitad import FOR, WHILE
from jitad.testing import check_grads

RNG = np.random.default_rng(3)
W = RNG.normal(size=(5, 5)) * 0.4
XS = RNG.normal(size=(9, 4, 5))   # 9 steps of a (4, 5) input


def rnn_loss(W, xs, checkpoints=None):
    """The reverse loop's state (the adjoint of h) is a slot of its body; the forward
    loop stores each new h in its tape's table."""
    def body(t, carry):
        h, total = carry
        h = jitad.tanh(h @ W + xs[t])
        return h, total + jitad.sum(h * h * xs[t])
    h, total = FOR(0, xs.shape[0], body, (np.zeros((4, 5)), 0.0), checkpoints=checkpoints)
    return total + jitad.sum(jitad.sin(h))   # the final state is read after the loop


def rnn_loss_np(W, xs):
    h, total = np.zeros((4, 5)), 0.0
    for x in xs:
        h = np.tanh(h @ W + x)
        total += np.sum(h * h * x)
    return total + np.sum(np.sin(h))


@pytest.mark.parametrize("checkpoints", [None, 2])
def test_loop_state_gradients(checkpoints):
    loss = lambda W, xs: rnn_loss(W, xs, checkpoints)
    value, (gw, gx) = jitad.jit(jitad.value_and_grad(loss, argnums=(0, 1)))(W, XS)
    np.testing.assert_allclose(value, rnn_loss_np(W, XS), rtol=1e-12)
    check_grads(loss, (W, XS), order=1, modes=("rev",))
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def jloss(W, xs):
        def body(carry, x):
            h, total = carry
            h = jnp.tanh(h @ W + x)
            return (h, total + jnp.sum(h * h * x)), None
        (h, total), _ = jax.lax.scan(body, (jnp.zeros((4, 5)), 0.0), xs)
        return total + jnp.sum(jnp.sin(h))
    jw, jx = jax.grad(jloss, argnums=(0, 1))(W, XS)
    np.testing.assert_allclose(gw, jw, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gx, jx, rtol=1e-10, atol=1e-12)


def test_final_state_survives_later_writes():
    """The forward loop's final state lives in its tape entry until the loop ends; the
    value the loop returns is a copy: reading it after the backward pass (which rewrites
    nothing) and after a second loop over the same steps gives the same numbers."""
    def f(W, xs):
        g = jitad.grad(lambda W: rnn_loss(W, xs))(W)
        h = FOR(0, xs.shape[0], lambda t, h: jitad.tanh(h @ W + xs[t]), np.zeros((4, 5)))
        h2 = FOR(0, xs.shape[0], lambda t, h: jitad.tanh(h @ (W * 0.5) + xs[t]), h)
        return g, h, h2
    g, h, h2 = jitad.jit(f)(W, XS)
    hn = np.zeros((4, 5))
    for x in XS:
        hn = np.tanh(hn @ W + x)
    np.testing.assert_allclose(h, hn, rtol=1e-13)
    hn2 = hn
    for x in XS:
        hn2 = np.tanh(hn2 @ (W * 0.5) + x)
    np.testing.assert_allclose(h2, hn2, rtol=1e-13)


def test_state_updated_in_place_and_repeated_outputs():
    """A state written in place by a scatter, a state passed on unchanged, and one value
    returned as two states: none may alias another's buffer."""
    def f(x, n):
        def body(i, s):
            a, b, c, d = s
            a = a.at[i % 6].set(a[(i + 5) % 6] * 1.5 + 1.0)   # in place: the last reader of a
            e = jitad.sin(c) + a[0]
            return a, b, e, e
        return FOR(0, n, body, (x, x * 2.0, x + 1.0, x - 1.0))
    x = np.linspace(-1.0, 1.0, 6)
    a, b, c, d = jitad.jit(f)(x, 13)
    an, cn, dn = x.copy(), x + 1.0, x - 1.0
    for i in range(13):
        an[i % 6] = an[(i + 5) % 6] * 1.5 + 1.0
        cn = dn = np.sin(cn) + an[0]
    np.testing.assert_allclose(a, an, rtol=1e-13)
    np.testing.assert_allclose(b, x * 2.0)
    np.testing.assert_allclose(c, cn, rtol=1e-13)
    np.testing.assert_allclose(d, dn, rtol=1e-13)
    assert not np.shares_memory(c, d)


def test_while_gradient_through_slot_states():
    def f(x):
        def body(s):
            v, k = s
            return jitad.tanh(v * 1.3 + 0.1 * k), k + 1
        v, _ = WHILE(lambda s: s[1] < 7, body, (x, 0))
        return jitad.sum(v * v)
    x = RNG.normal(size=(3, 7))
    v = x.copy()
    for k in range(7):
        v = np.tanh(v * 1.3 + 0.1 * k)
    np.testing.assert_allclose(jitad.jit(f)(x), np.sum(v * v), rtol=1e-13)
    check_grads(f, (x,), order=1, modes=("rev",))


@pytest.mark.parametrize("shape", [(37,), (3, 21), (5, 1), (2, 3, 9)])
def test_bool_masks(shape):
    """Masks made, stored and read by loops (lengths off the vector width included)."""
    x, y = RNG.normal(size=shape), RNG.normal(size=shape)
    m = RNG.normal(size=shape) > 0
    f = jitad.jit(lambda m, x, y: (x > y, jitad.where(m, x, y * 2.0), jitad.where((x > 0) & ~m, x, 0.0),
                                   m != (x < y)))
    gt, picked, both, xor = f(m, x, y)
    assert gt.dtype == np.bool_ and xor.dtype == np.bool_
    np.testing.assert_array_equal(gt, x > y)
    np.testing.assert_array_equal(picked, np.where(m, x, y * 2.0))
    np.testing.assert_array_equal(both, np.where((x > 0) & ~m, x, 0.0))
    np.testing.assert_array_equal(xor, np.logical_xor(m, x < y))
    assert np.asarray(gt).view(np.uint8).max() <= 1   # stored as the bytes 0 and 1
    g = jitad.grad(lambda x: jitad.sum(jitad.where(m, jitad.sin(x), x * x)))(x)
    np.testing.assert_allclose(g, np.where(m, np.cos(x), 2 * x), rtol=1e-13)


LOOP_IR = """
define void @doubling(ptr %p) {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %n, %loop ]
  %q = getelementptr double, ptr %p, i64 %i
  %v = load double, ptr %q
  %w = fmul double %v, 2.0
  %n = add i64 %i, 1
  %r = getelementptr double, ptr %p, i64 %n
  store double %w, ptr %r
  %c = icmp ult i64 %n, 100
  br i1 %c, label %loop, label %done
done:
  ret void
}
"""


def test_kernel_parts_compile_without_unrolling():
    """`compile_part(..., unroll=False)` (a large program's kernel parts) keeps a loop (here
    a recurrence, which does not vectorize) one multiplication per iteration."""
    from jitad.lower import parallel, runtime
    tm = runtime.jit().machines[0]
    unrolled = str(parallel.compile_part(LOOP_IR, tm)[0])
    rolled = str(parallel.compile_part(LOOP_IR, tm, unroll=False)[0])
    assert unrolled.count("fmul") > 1 and rolled.count("fmul") == 1


def _copy_program(write_src_after):
    """src = slot; src += x; dst = slot; dst := src's value; [src += x]; y = dst's value."""
    from jitad.ir.graph import Node, Var
    from jitad.ir.ops import Op
    from jitad.ir.types import RefType, Type
    t = Type("f64", (4,))
    x, src, dst = Var(t), Var(RefType(t)), Var(RefType(t))
    value, y = Var(t), Var(t)
    nodes = [Node(Op.SLOT, (), (src,), {"type": t}), Node(Op.SLOT_ADD, (src, x), ()),
             Node(Op.SLOT, (), (dst,), {"type": t, "uninit": True}),
             Node(Op.SLOT_GET, (src,), (value,)), Node(Op.SLOT_SET, (dst, value), ())]
    if write_src_after:
        nodes.append(Node(Op.SLOT_ADD, (src, x), ()))
    nodes.append(Node(Op.SLOT_GET, (dst,), (y,)))
    return nodes, [y], src


@pytest.mark.parametrize("write_src_after", [False, True])
def test_forward_slot_copies(write_src_after):
    """A slot set to another slot's value and then only read reads that slot instead (no
    copy), but not when the source is written again before the read."""
    from jitad.ir.ops import Op
    from jitad.ir.peephole import forward_slot_copies
    nodes, outputs, src = _copy_program(write_src_after)
    out = forward_slot_copies(nodes, outputs)
    if write_src_after:
        assert out == nodes
    else:
        assert not any(n.op == Op.SLOT_SET for n in out) and out[-1].inputs == (src,)
        assert sum(n.op == Op.SLOT for n in out) == 1
