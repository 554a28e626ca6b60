"""Concatenations written in place: the fused loops making a concatenation's pieces
(through reshapes and nested concatenations) store them straight into the result, so
no piece and no intermediate concatenation is materialized and copied."""
import numpy as np
import pytest

import jitad
from jitad.ir.ops import Op

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)


def outside_fused(program):
    return [n.op for n in program.main.nodes]


def flat_stores(program):
    return [b for n in program.main.nodes if n.op == Op.FUSED for b in n.bodies[0].nodes
            if b.op == Op.SLOT_ADD_SLICE and "flat" in b.attrs]


def compiled_program(f, *args):
    f(*args)
    return f._latest("ir").program


def blocks(np_, x, y, extra):
    """Columns stacked as rows of a block matrix, flattened, then joined to more values
    (a compressed Jacobian's layout): one column repeated, one an input."""
    a, b, c = np_.sin(x) * y, x * x + y, np_.cos(y) - x
    block = np_.stack([a, b, c, a, extra], axis=1)
    return np_.concatenate([np_.reshape(block, (-1,)), b * 2.0, extra])


def test_stacked_columns_are_stored_in_place():
    rng = np.random.default_rng(0)
    x, y, extra = rng.standard_normal(37), rng.standard_normal(37), rng.standard_normal(37)
    f = jitad.jit(lambda x, y, e: blocks(jitad, x, y, e))
    np.testing.assert_allclose(f(x, y, extra), blocks(np, x, y, extra), rtol=1e-14)
    program = compiled_program(f, x, y, extra)
    ops = outside_fused(program)
    assert Op.CONCAT not in ops and Op.SLOT_GET in ops
    # a, b, c and b * 2 from the loop that computes them (a twice), extra by a copy loop (twice)
    assert len(flat_stores(program)) == 7


def test_two_dimensional_pieces_and_a_piece_used_elsewhere():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3))

    def f(np_, x):
        s = np_.exp(x)
        joined = np_.concatenate([s, x * 3.0, np_.transpose(x) @ x], axis=0)
        return joined, np_.sum(s)
    got = jitad.jit(lambda x: f(jitad, x))(x)
    want = f(np, x)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-14)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-14)


def test_integer_and_bool_pieces():
    x = np.arange(-5, 7)

    def f(np_, x):
        return (np_.concatenate([np_.stack([x * 2, x + 1], axis=1).reshape(-1), x]),
                np_.concatenate([np_.reshape(np_.stack([x > 0, x < 3], axis=1), (-1,)), x == 1]))
    for got, want in zip(jitad.jit(lambda x: f(jitad, x))(x), f(np, x)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_inside_a_loop_and_under_jvp_match_jax():
    rng = np.random.default_rng(2)
    x, y, extra = rng.standard_normal(11), rng.standard_normal(11), rng.standard_normal(11)
    tx = rng.standard_normal(11)
    got = jitad.jit(lambda x, t: jitad.jvp(lambda x: blocks(jitad, x, y, extra), (x,), (t,)))(x, tx)
    want = jax.jvp(lambda x: blocks(jnp, x, y, extra), (x,), (tx,))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-13)

    def loop(np_, fori):
        return fori(0, 3, lambda i, s: blocks(np_, s[:11], y, extra)[:11 * 6][::6] + s[11:22].sum(),
                    np_.concatenate([x, x]))
    got = jitad.jit(lambda: loop(jitad, lambda lo, hi, body, init: jitad.FOR(
        lo, hi, lambda i, s: jitad.concatenate([body(i, s), s[11:]]), init)))()
    want = jax.jit(lambda: loop(jnp, lambda lo, hi, body, init: jax.lax.fori_loop(
        lo, hi, lambda i, s: jnp.concatenate([body(i, s), s[11:]]), init)))()
    np.testing.assert_allclose(got, want, rtol=1e-13)
