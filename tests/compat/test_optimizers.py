"""The optimizers of JAX's example libraries and of autograd under jitad's names, run
side by side with the originals on small problems: the same trajectories to 1e-10.
Also `ravel_pytree`, autograd's `flatten` and `elementwise_grad`."""
import numpy as np
import pytest

import jitad
from jitad.example_libraries import optimizers, stax
from jitad.flatten_util import ravel_pytree
from jitad.misc import flatten
from jitad.misc import optimizers as misc_optimizers

jax = pytest.importorskip("jax")
jnp = jax.numpy

RNG = np.random.default_rng(0)
X, Y = RNG.standard_normal((6, 3)), RNG.standard_normal((6, 2))
P0 = {"W": RNG.standard_normal((3, 2)) * 0.5, "b": np.zeros(2)}


def _loss(m):
    return lambda p: m.mean((X @ p["W"] + p["b"] - Y) ** 2) + 0.1 * m.sum(p["W"] ** 4)


def _close(a, b, tol=1e-10):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


JAX_OPTS = [("sgd", (0.1,)), ("momentum", (0.05, 0.9)), ("nesterov", (0.05, 0.9)), ("adagrad", (0.3,)),
            ("rmsprop", (0.01,)), ("rmsprop_momentum", (0.01,)), ("adam", (0.05,)), ("adamax", (0.05,)),
            ("adam", ("exponential_decay",))]


@pytest.mark.parametrize("name,args", JAX_OPTS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(JAX_OPTS)])
def test_jax_optimizers_follow_jaxs_trajectory(name, args):
    from jax.example_libraries import optimizers as jopt
    mine = lambda lib: (lib.exponential_decay(0.1, 5, 0.5),) if args == ("exponential_decay",) else args
    init, update, get = getattr(optimizers, name)(*mine(optimizers))
    jinit, jupdate, jget = getattr(jopt, name)(*mine(jopt))
    grad, jgrad = jitad.grad(_loss(jitad)), jax.jit(jax.grad(_loss(jnp)))
    step = jitad.jit(lambda i, s: update(i, grad(get(s)), s))
    with jax.enable_x64(True):
        state, staged, jstate = init(P0), init(P0), jinit(jax.tree_util.tree_map(jnp.asarray, P0))
        for i in range(8):
            state, staged = update(i, grad(get(state)), state), step(i, staged)
            jstate = jupdate(i, jgrad(jget(jstate)), jstate)
            _close(get(state), jget(jstate))
            _close(get(staged), get(state), 1e-12)
    assert _loss(np)(get(state)) < _loss(np)(P0)


def test_stax_init_and_training_match_jax():
    from jax.example_libraries import optimizers as jopt
    from jax.example_libraries import stax as jstax
    layers = lambda s: s.serial(s.Dense(5), s.Tanh, s.Dense(4), s.Relu, s.Dense(3), s.LogSoftmax)
    init, apply = layers(stax)
    x, labels = RNG.standard_normal((7, 4)), np.eye(3)[RNG.integers(0, 3, 7)]
    loss = lambda apply_fn, m: lambda p: -m.mean(m.sum(apply_fn(p, x) * labels, axis=1))
    with jax.enable_x64(True):
        jinit, japply = layers(jstax)
        shape, params = init(jitad.random.key(3), (-1, 4))
        jparams = jax.jit(lambda k: jinit(k, (-1, 4))[1])(jax.random.PRNGKey(3))   # one XLA compile
        assert shape == (-1, 3)
        _close(params, jparams, 1e-12)                 # jitad.random draws JAX's numbers
        _close(apply(params, x), jax.jit(japply)(jparams, x))
        oi, ou, og = optimizers.momentum(0.1, 0.9)
        joi, jou, jog = jopt.momentum(0.1, 0.9)
        step = jitad.jit(lambda i, s: ou(i, jitad.grad(loss(apply, jitad))(og(s)), s))
        jstep = jax.jit(lambda i, s: jou(i, jax.grad(loss(japply, jnp))(jog(s)), s))
        state, jstate = oi(params), joi(jparams)
        for i in range(5):
            state, jstate = step(i, state), jstep(i, jstate)
        _close(og(state), jog(jstate))


def test_stax_layers_shapes_and_dropout():
    init, apply = stax.serial(stax.Conv(3, (3, 3), padding="SAME"), stax.Relu, stax.Flatten, stax.Dense(2),
                              stax.Dropout(0.5))
    shape, params = init(jitad.random.key(0), (2, 5, 5, 1))
    assert shape == (2, 2) and params[0][0].shape == (3, 3, 1, 3)
    x = RNG.standard_normal((2, 5, 5, 1))
    a, b = apply(params, x, rng=jitad.random.key(1)), apply(params, x, rng=jitad.random.key(2))
    assert a.shape == (2, 2) and not np.array_equal(a, b)
    np.testing.assert_allclose(jitad.jit(lambda p, x, k: apply(p, x, rng=k))(params, x, jitad.random.key(1)), a,
                               rtol=1e-12)
    with pytest.raises(jitad.ArgumentError, match="rng=key"):
        apply(params, x)


@pytest.mark.parametrize("name,kwargs", [("adam", {"step_size": 0.05}), ("sgd", {"step_size": 0.1}),
                                         ("rmsprop", {"step_size": 0.01})])
def test_autograd_optimizers_follow_autograds_trajectory(name, kwargs):
    ag = pytest.importorskip("autograd")
    import autograd.numpy as anp
    from autograd.misc import optimizers as aopt
    x0 = {"W": P0["W"], "b": [P0["b"], 0.5]}

    def objective(m):
        return lambda p, i: m.sum((X @ p["W"] + p["b"][0] - Y) ** 2) * (1 + 0.1 * i) + p["b"][1] ** 2

    seen, aseen = [], []
    out = getattr(misc_optimizers, name)(jitad.grad(objective(jitad)), x0, num_iters=12,
                                         callback=lambda x, i, g: seen.append(flatten(x)[0]), **kwargs)
    aout = getattr(aopt, name)(ag.grad(objective(anp)), x0, num_iters=12,
                               callback=lambda x, i, g: aseen.append(ag.misc.flatten(x)[0]), **kwargs)
    np.testing.assert_allclose(np.array(seen), np.array(aseen), rtol=1e-10, atol=1e-10)
    _close(out, aout)
    assert isinstance(out["b"], list) and out["W"].shape == (3, 2)


def test_flatten_and_ravel_pytree_match_the_originals():
    ag = pytest.importorskip("autograd")
    from jax.flatten_util import ravel_pytree as jravel
    tree = {"b": (np.arange(3.0), 2.0), "a": [np.ones((2, 2))]}
    flat, unflatten = flatten(tree)
    aflat, aunflatten = ag.misc.flatten(tree)
    np.testing.assert_array_equal(flat, aflat)
    _close(unflatten(flat * 2), aunflatten(aflat * 2))
    with jax.enable_x64(True):
        jflat, junravel = jravel(tree)
        rflat, unravel = ravel_pytree(tree)
        np.testing.assert_array_equal(rflat, jflat)
        _close(unravel(rflat + 1), junravel(jflat + 1))
    # staged: flatten inside a differentiated function (an L2 penalty over all parameters)
    penalty = lambda p: jitad.sum(flatten(p)[0] ** 2)
    g = jitad.grad(penalty)({"w": np.ones((2, 2)), "c": 3.0})
    assert g["c"] == 6.0 and np.array_equal(g["w"], 2 * np.ones((2, 2)))
    with pytest.raises(jitad.ArgumentError, match="flat vector of shape"):
        unflatten(np.zeros(3))


def test_elementwise_grad_matches_autograd():
    ag = pytest.importorskip("autograd")
    import autograd.numpy as anp
    x = np.linspace(-2.0, 2.0, 7)
    f = lambda m: lambda x, y: m.tanh(x) * y + x ** 3
    np.testing.assert_allclose(jitad.elementwise_grad(f(jitad))(x, 2.0), ag.elementwise_grad(f(anp))(x, 2.0),
                               rtol=1e-14)
    np.testing.assert_allclose(jitad.elementwise_grad(f(jitad), 1)(x, np.full(7, 2.0)),
                               ag.elementwise_grad(f(anp), 1)(x, np.full(7, 2.0)), rtol=1e-14)
    second = jitad.elementwise_grad(jitad.elementwise_grad(jitad.tanh))
    np.testing.assert_allclose(second(x), ag.elementwise_grad(ag.elementwise_grad(anp.tanh))(x), rtol=1e-12)
