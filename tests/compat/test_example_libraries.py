"""The names of `jax.example_libraries.stax` and `.optimizers` that jitad adds
(convolutions by layout, pooling, batch norm, SELU, the re-exported activations, SM3,
packing a state, the list helpers), against JAX's on the same parameters and inputs."""
import pickle

import numpy as np
import pytest

import jitad
from jitad.example_libraries import optimizers, stax

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
js = pytest.importorskip("jax.example_libraries.stax")
jo = pytest.importorskip("jax.example_libraries.optimizers")

RNG = np.random.default_rng(0)
IMAGES = RNG.standard_normal((2, 5, 6, 3))


def close(ours, theirs, rtol=1e-12, atol=1e-12):
    ol, tl = jitad.tree.leaves(ours), jax.tree.leaves(theirs)
    assert len(ol) == len(tl)
    for a, b in zip(ol, tl):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=rtol, atol=atol)


def run_layer(ours, theirs, params, x, shape, compiled=False):
    """Output shapes, parameter shapes and values (eager; with `compiled`, also through
    jit) agree; JAX's init is only traced (`eval_shape`: its random draws are slow)."""
    (init, apply), (jinit, japply) = ours, theirs
    out_shape, our_params = init(jitad.random.key(0), shape)
    jparams = jax.eval_shape(lambda k: jinit(k, shape)[1], jax.random.key(0))
    assert [np.shape(p) for p in jitad.tree.leaves(our_params)] == [p.shape for p in jax.tree.leaves(jparams)]
    expected = jax.jit(japply)(params, x)   # (one XLA compile: faster than JAX's eager ops)
    assert out_shape == expected.shape
    close(apply(params, x), expected)
    if compiled:
        close(jitad.jit(lambda p, v: apply(p, v))(params, x), expected)


@pytest.mark.parametrize("name,args", [("MaxPool", ((2, 2),)), ("SumPool", ((3, 2), (2, 1), "SAME")),
                                       ("AvgPool", ((2, 3), (1, 2), "SAME")), ("AvgPool", ((2, 2), None, "VALID")),
                                       ("MaxPool", ((2, 2), (2, 2), "SAME"))])
def test_pooling(name, args):
    run_layer(getattr(stax, name)(*args), getattr(js, name)(*args), (), IMAGES, IMAGES.shape, compiled=True)


def test_pooling_nchw_spec_and_gradient():
    x = np.transpose(IMAGES, (0, 3, 1, 2))
    run_layer(stax.MaxPool((2, 2), spec="NCHW"), js.MaxPool((2, 2), spec="NCHW"), (), x, x.shape)
    apply, japply = stax.AvgPool((2, 2), padding="SAME")[1], js.AvgPool((2, 2), padding="SAME")[1]
    close(jitad.grad(lambda v: jitad.sum(apply((), v) ** 2))(IMAGES),
          jax.grad(lambda v: jax.numpy.sum(japply((), v) ** 2))(IMAGES))
    with pytest.raises(jitad.ArgumentError, match="padding"):
        stax.MaxPool((2, 2), padding="FULL")[1]((), IMAGES)


@pytest.mark.parametrize("dims", [("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "NCHW"), ("NHWC", "OIHW", "NCHW")])
def test_general_conv_layouts(dims):
    x = np.transpose(IMAGES, tuple("NHWC".index(c) for c in dims[0]))
    ours, theirs = stax.GeneralConv(dims, 4, (3, 3), padding="SAME"), js.GeneralConv(dims, 4, (3, 3), padding="SAME")
    params = [RNG.standard_normal(np.shape(p)) for p in ours[0](jitad.random.key(1), x.shape)[1]]
    run_layer(ours, theirs, params, x, x.shape, compiled=dims[0] == "NCHW")
    conv = stax.Conv(2, (2, 3), strides=(1, 1))
    params = [RNG.standard_normal(np.shape(p)) for p in conv[0](jitad.random.key(2), IMAGES.shape)[1]]
    run_layer(conv, js.Conv(2, (2, 3), strides=(1, 1)), params, IMAGES, IMAGES.shape)
    with pytest.raises(jitad.ArgumentError, match="same stride"):
        stax.GeneralConv(dims, 4, (3, 3), strides=(1, 2))


def test_batch_norm_selu_and_activations():
    beta, gamma = RNG.standard_normal(3), RNG.standard_normal(3)
    run_layer(stax.BatchNorm(), js.BatchNorm(), (beta, gamma), IMAGES, IMAGES.shape, compiled=True)
    run_layer(stax.BatchNorm(axis=0, center=False), js.BatchNorm(axis=0, center=False),
              ((), RNG.standard_normal((5, 6, 3))), IMAGES, IMAGES.shape)
    run_layer(stax.Selu, js.Selu, (), IMAGES, IMAGES.shape)
    x = np.array([-np.inf, -2.0, -0.0, 0.0, 0.5, 3.0, np.inf])
    names = ("relu", "selu", "softplus", "sigmoid", "elu", "leaky_relu", "gelu")
    with np.errstate(invalid="ignore"):   # gelu(-inf) is NaN in both
        close([getattr(stax, n)(x) for n in names], jax.jit(lambda v: [getattr(js, n)(v) for n in names])(x),
              rtol=1e-7, atol=1e-15)
    finite = x[1:-1]
    names = ("log_softmax", "logsoftmax", "softmax", "standardize")
    close([getattr(stax, n)(finite) for n in names], jax.jit(lambda v: [getattr(js, n)(v) for n in names])(finite),
          rtol=1e-10)
    close(jitad.grad(lambda v: jitad.sum(stax.selu(v)))(finite), jax.grad(lambda v: jax.numpy.sum(js.selu(v)))(finite))
    assert stax.glorot is stax.glorot_normal and stax.randn is stax.normal
    assert stax.glorot()(jitad.random.key(0), (4, 3)).shape == (4, 3) and stax.randn(0.5)(jitad.random.key(0), (2,)).std() > 0


def test_shape_dependent():
    made = []

    def make(shape):
        made.append(shape)
        return stax.Dense(shape[-1] * 2)
    init, apply = stax.shape_dependent(make)
    out_shape, params = init(jitad.random.key(0), (3, 4))
    assert out_shape == (3, 8) and apply(params, np.ones((3, 4))).shape == (3, 8) and made == [(3, 4), (3, 4)]


def test_sm3_pack_unpack_and_helpers():
    params = {"w": np.arange(6.0).reshape(2, 3), "b": np.array(0.5), "v": np.ones(3)}
    grads = {"w": np.sin(np.arange(6.0)).reshape(2, 3), "b": np.array(0.3), "v": np.array([0.0, 1.0, -2.0])}
    init, update, get = optimizers.sm3(0.1, momentum=0.8)
    jinit, jupdate, jget = jo.sm3(0.1, momentum=0.8)
    state, jstate = init(params), jinit(params)
    step, jstep = jitad.jit(lambda i, s: update(i, grads, s)), jax.jit(lambda i, s: jupdate(i, grads, s))
    for i in range(3):
        state, jstate = step(i, state), jstep(i, jstate)
    close(get(state), jget(jstate))
    plain, jplain = optimizers.unpack_optimizer_state(state), jo.unpack_optimizer_state(jstate)
    assert sorted(plain) == sorted(jplain) and all(isinstance(plain[k], optimizers.JoinPoint) for k in plain)
    restored = optimizers.pack_optimizer_state(pickle.loads(pickle.dumps(plain)))
    close(get(restored), get(state))
    close(get(step(3, restored)), jget(jstep(3, jo.pack_optimizer_state(jplain))))
    with pytest.raises(jitad.ArgumentError, match="JoinPoint"):
        optimizers.pack_optimizer_state({"w": 1.0})
    assert optimizers.safe_zip([1, 2], "ab") == jo.safe_zip([1, 2], "ab")
    assert optimizers.safe_map(lambda a, b: a * b, [1, 2], [3, 4]) == jo.safe_map(lambda a, b: a * b, [1, 2], [3, 4])
    assert optimizers.map is optimizers.safe_map and optimizers.zip is optimizers.safe_zip
    assert optimizers.unzip2([(1, "a"), (2, "b")]) == jo.unzip2([(1, "a"), (2, "b")])
    with pytest.raises(jitad.ArgumentError, match="lengths"):
        optimizers.safe_zip([1], [1, 2])
    assert optimizers.annotations.compiler_flag == jo.annotations.compiler_flag
