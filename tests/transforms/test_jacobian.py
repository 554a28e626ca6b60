"""jacfwd / jacrev / hessian against JAX: values, shapes, pytree nesting."""
import collections

import numpy as np
import pytest

import jitad

P = collections.namedtuple("P", "w b")
X = np.linspace(0.1, 1.0, 12).reshape(3, 4)


def f(x, p):
    return {"y": jitad.tanh(p.w @ x.T) + p.b, "s": jitad.sum(x * x) * p.b[0]}


def g(x, y):
    return jitad.sum(jitad.sin(x) * y[0]) + jitad.sum(x) * jitad.sum(y * y)


PARAMS = P(np.arange(8.0).reshape(2, 4) / 10, np.array([0.3, -0.2]))


def _fd_jac(fn, x, eps=1e-6):
    cols = []
    for e in range(x.size):
        d = np.zeros(x.size)
        d[e] = eps
        cols.append((np.asarray(fn(x + d.reshape(x.shape))) - np.asarray(fn(x - d.reshape(x.shape)))) / (2 * eps))
    return np.stack(cols, -1).reshape(np.shape(fn(x)) + x.shape)


@pytest.mark.parametrize("jac", [jitad.jacfwd, jitad.jacrev])
def test_against_finite_differences_and_each_other(jac):
    fn = lambda x: jitad.sin(x) * jitad.sum(x ** 2)
    for x in (np.linspace(0.1, 1, 5), np.linspace(0.1, 1, 12).reshape(3, 4)):   # unrolled and looped
        J = jac(fn)(x)
        assert J.shape == x.shape + x.shape
        np.testing.assert_allclose(J, _fd_jac(lambda x: np.sin(x) * np.sum(x ** 2), x), rtol=1e-6, atol=1e-8)


def test_pytree_structure_and_tuple_argnums_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    def fj(x, p):
        return {"y": jnp.tanh(p.w @ x.T) + p.b.reshape(2, 1), "s": jnp.sum(x * x) * p.b[0]}

    def fi(x, p):
        return {"y": jitad.tanh(p.w @ x.T) + jitad.reshape(p.b, (2, 1)), "s": jitad.sum(x * x) * p.b[0]}
    for jac, jjac in ((jitad.jacfwd, jax.jacfwd), (jitad.jacrev, jax.jacrev)):
        for argnums in (0, 1, (0, 1), (1,)):
            got, want = jac(fi, argnums)(X, PARAMS), jjac(fj, argnums)(X, PARAMS)
            lg, tg = jitad.tree_util.tree_flatten(got)
            lw, tw = jax.tree_util.tree_flatten(want)
            assert len(lg) == len(lw)
            for a, b in zip(lg, lw):
                assert np.shape(a) == b.shape
                np.testing.assert_allclose(a, np.asarray(b), rtol=1e-10, atol=1e-14)
            if argnums == (0, 1):
                assert isinstance(got["y"], tuple) and type(got["y"][1]) is P


def test_hessian_blocks_against_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    gj = lambda x, y: jnp.sum(jnp.sin(x) * y[0]) + jnp.sum(x) * jnp.sum(y * y)
    x, y = np.linspace(0.2, 1.0, 3), np.array([0.5, -1.0])
    for argnums in (0, 1, (0, 1)):
        got, want = jitad.hessian(g, argnums)(x, y), jax.hessian(gj, argnums)(x, y)
        if argnums == (0, 1):
            for i in range(2):
                for j in range(2):
                    np.testing.assert_allclose(got[i][j], want[i][j], rtol=1e-12, atol=1e-14)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    big = np.linspace(0.1, 1.0, 20)   # looped rows (more than UNROLL basis vectors)
    np.testing.assert_allclose(jitad.hessian(lambda x: jitad.sum(jitad.sin(x) * x[0]) ** 2)(big),
                               jax.hessian(lambda x: jnp.sum(jnp.sin(x) * x[0]) ** 2)(big), rtol=1e-11)


def test_scalars_has_aux_and_old_hessian():
    assert jitad.jacrev(lambda x, y: x * y, argnums=(0, 1))(2.0, 3.0) == (3.0, 2.0)
    assert jitad.hessian(lambda x, y: x * x * y)(3.0, 2.0) == 4.0
    J, aux = jitad.jacfwd(lambda x: (x * x, x + 1.0), has_aux=True)(np.array([1.0, 2.0]))
    np.testing.assert_allclose(J, np.diag([2.0, 4.0]))
    np.testing.assert_allclose(aux, [2.0, 3.0])


def test_errors():
    with pytest.raises(jitad.ArgumentError, match="argnums"):
        jitad.jacfwd(lambda x: x, argnums=1.5)
    with pytest.raises(jitad.ArgumentError, match="argnums=2"):
        jitad.jacrev(lambda x, y: x * y, argnums=2)(1.0, 2.0)
    with pytest.raises(jitad.ArgumentError, match="float"):
        jitad.jacfwd(lambda x, n: x * n, argnums=1)(1.0, 2)
    with pytest.raises(jitad.ArgumentError, match="repeats"):
        jitad.hessian(lambda x: x, argnums=(0, 0))


def test_each_arguments_columns_run_its_own_tangent_code():
    """jacfwd over several arguments: a direction of the bias runs no product (its
    columns branch away from the weights' tangent code in the loop over directions, and
    need none unrolled); more leaves than LEAF_BRANCHES share one body. Against JAX."""
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jitad.transforms import jacobians
    x = np.linspace(-1.0, 1.0, 20).reshape(4, 5)

    def layer(m, w, b, *more):
        return m.tanh(w @ x + b[:, None]) * (1.0 + sum(m.sum(v) for v in more))
    w, b = np.linspace(-0.5, 0.5, 12).reshape(3, 4), np.array([0.1, -0.2, 0.3])
    more = tuple(np.full(2, 0.1 * k) for k in range(1, 4))
    for args in ((w, b), (w[:1], b[:1]), (w, b) + more):   # looped with branches; unrolled; one body
        nums = tuple(range(len(args)))
        jac = jitad.jit(jitad.jacfwd(lambda *a: layer(jitad.numpy, *a), argnums=nums))
        for got, want in zip(jac(*args), jax.jacfwd(lambda *a: layer(jnp, *a), argnums=nums)(*args)):
            np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)
        branches = sum(" = if " in line for line in jac.ir.splitlines())
        assert branches == (1 if len(args) == 2 and w.size == args[0].size else 0)
    assert len((w, b) + more) > jacobians.LEAF_BRANCHES
