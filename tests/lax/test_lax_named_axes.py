"""`lax`'s collectives over the named axis of `jitad.vmap(f, axis_name=...)` against
`jax.vmap` with the same name (x64): values, nested names, grad of vmap, vmap of grad,
and the errors of an unbound name."""
import numpy as np
import pytest

from .lax_reference import assert_same, jax, jlax

import jitad
from jitad import lax

RNG = np.random.default_rng(0)
X, Y = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 8))
CYCLE = [(0, 1), (1, 2), (2, 3), (3, 0)]

CASES = {
    "psum": lambda m, v, w: m.psum(v, "i"), "pmean": lambda m, v, w: m.pmean(v, "i"),
    "pmax": lambda m, v, w: m.pmax(v, "i"), "pmin": lambda m, v, w: m.pmin(w, "i"),
    "psum-tree": lambda m, v, w: m.psum((v, w), "i")[1], "psum-const": lambda m, v, w: m.psum(1.0, "i"),
    "axis_index": lambda m, v, w: m.axis_index("i"), "axis_size": lambda m, v, w: m.axis_size("i") + 0.0,
    "all_gather": lambda m, v, w: m.all_gather(v, "i"), "all_gather-1": lambda m, v, w: m.all_gather(v, "i", axis=1),
    "all_gather-tiled": lambda m, v, w: m.all_gather(w.reshape(2, 4), "i", axis=1, tiled=True),
    "ppermute": lambda m, v, w: m.ppermute(v, "i", CYCLE), "pshuffle": lambda m, v, w: m.pshuffle(v, "i", [3, 2, 0, 1]),
    "psum_scatter": lambda m, v, w: m.psum_scatter(w[:4], "i"),
    "psum_scatter-tiled": lambda m, v, w: m.psum_scatter(w, "i", tiled=True),
    "all_to_all-tiled": lambda m, v, w: m.all_to_all(w.reshape(4, 2), "i", 0, 1, tiled=True),
    "all_to_all-00": lambda m, v, w: m.all_to_all(w.reshape(4, 2), "i", 0, 0),
    "all_to_all-01": lambda m, v, w: m.all_to_all(w.reshape(4, 2), "i", 0, 1),
    "all_to_all-10": lambda m, v, w: m.all_to_all(w.reshape(2, 4), "i", 1, 0),
    "pswapaxes": lambda m, v, w: m.pswapaxes(w.reshape(2, 4), "i", 1),
    "pcast": lambda m, v, w: m.pcast(v, "i", to="varying") if m is lax else v,
}


def test_collectives_agree_with_jax_vmap():
    names = list(CASES)
    got = jitad.vmap(lambda v, w: tuple(CASES[n](lax, v, w) for n in names), axis_name="i")(X, Y)
    wants = jax.jit(jax.vmap(lambda v, w: tuple(CASES[n](jlax, v, w) for n in names), axis_name="i"))(X, Y)
    for name, g, want in zip(names, got, wants):
        assert_same(g, want, rtol=1e-12, what=name)


def _loss(m, np_):
    def per_lane(v):
        c = v - m.pmean(v, "i")
        return np_.sum(np_.sin(c) * m.psum(v * v, "i") + m.all_gather(v, "i")[2] * v
                       + m.ppermute(v, "i", CYCLE) * v + m.pshuffle(v, "i", [1, 2, 3, 0]) ** 2)
    return per_lane


BINDS = {
    "psum_p": lambda m, v: m.psum_p.bind(v, axes=("i",), axis_index_groups=None),
    "pmax_p": lambda m, v: m.pmax_p.bind(v, axes=("i",), axis_index_groups=None),
    "pmin_p": lambda m, v: m.pmin_p.bind(v, axes=("i",), axis_index_groups=None),
    "ppermute_p": lambda m, v: m.ppermute_p.bind(v, axis_name=("i",), perm=tuple(CYCLE)),
    "axis_index_p": lambda m, v: m.axis_index_p.bind(axis_name="i"),
    "all_gather_p": lambda m, v: m.all_gather_p.bind(v, all_gather_dimension=0, axis_index_groups=None,
                                                     axis_name=("i",), axis_size=4, tiled=False),
    "all_to_all_p": lambda m, v: m.all_to_all_p.bind(v[:1] * 0.0 + Y[:, :4], axis_index_groups=None, axis_name="i",
                                                     concat_axis=0, split_axis=1, tiled=True),
}


def test_primitive_objects_bind_as_jax():
    names = list(BINDS)
    got = jitad.vmap(lambda v: tuple(BINDS[n](lax, v) for n in names), axis_name="i")(X)
    for name, g in zip(names, got):
        assert_same(g, jax.vmap(lambda v: BINDS[name](jlax, v), axis_name="i")(X), rtol=1e-12, what=name)


def test_gradients_through_collectives():
    ours = jitad.grad(lambda x: jitad.numpy.sum(jitad.vmap(_loss(lax, jitad.numpy), axis_name="i")(x)))(X)
    theirs = jax.jit(jax.grad(lambda x: jax.numpy.sum(jax.vmap(_loss(jlax, jax.numpy), axis_name="i")(x))))(X)
    assert_same(ours, theirs, rtol=1e-12, what="grad of vmap")
    ours = jitad.vmap(jitad.grad(_loss(lax, jitad.numpy)), axis_name="i")(X)
    theirs = jax.jit(jax.vmap(jax.grad(_loss(jlax, jax.numpy)), axis_name="i"))(X)
    assert_same(ours, theirs, rtol=1e-12, what="vmap of grad")


def test_nested_names():
    y = RNG.standard_normal((2, 3, 4))

    def f(m):
        return lambda v: (m.psum(v, "a") * m.axis_index("b") + m.pmean(v, ("a", "b"))
                          + m.all_gather(v, "a").sum() + m.axis_size(("a", "b")))
    ours = jitad.vmap(jitad.vmap(f(lax), axis_name="b"), axis_name="a")(y)
    assert_same(ours, jax.vmap(jax.vmap(f(jlax), axis_name="b"), axis_name="a")(y), rtol=1e-12)


def test_unbound_names_and_declined_ones_raise():
    with pytest.raises(jitad.JitadError, match="unbound axis name 'z'"):
        jitad.jit(lambda v: lax.psum(v, "z"))(X)
    with pytest.raises(jitad.JitadError, match="unbound axis name 'j'"):
        jitad.vmap(lambda v: lax.axis_index("j"), axis_name="i")(X)
    with pytest.raises(jitad.JitadError, match="axis_index_groups"):
        jitad.vmap(lambda v: lax.psum(v, "i", axis_index_groups=[[0, 1], [2, 3]]), axis_name="i")(X)
    with pytest.raises(jitad.JitadError, match="ppermute"):
        lax.psend(X, "i", [(0, 1)])
