"""`jitad.nn` against `jax.nn` (x64): activations on edge values, softmax family with
`where=`, `logsumexp` with `b=` and `return_sign=`, `standardize`, `one_hot`, attention;
values and gradients; and `jitad.nn.initializers` drawing JAX's numbers for the same key."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.nn as jnn  # noqa: E402

import jitad  # noqa: E402
from jitad import nn  # noqa: E402
from jitad.testing import check_grads  # noqa: E402

EDGES = np.array([0.0, -0.0, 1.5, -2.5, 0.5, -0.5, np.inf, -np.inf, np.nan, 3.0, 7.0, -1.0, 1.0, 6.0, -3.0, 40.0])
ACTIVATIONS = ["relu", "relu6", "sigmoid", "softplus", "log_sigmoid", "silu", "swish", "hard_tanh", "hard_sigmoid",
               "hard_silu", "hard_swish", "elu", "celu", "selu", "leaky_relu", "soft_sign", "sparse_plus",
               "sparse_sigmoid", "squareplus", "mish", "identity", "tanh", "gelu"]


def same(got, want, rtol=1e-12, atol=0.0, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: {got.shape} != {want.shape}"
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def test_activations_on_edge_values():
    extra = [("gelu-exact", lambda m, x: m.gelu(x, approximate=False)), ("elu-alpha", lambda m, x: m.elu(x, 0.5)),
             ("celu-alpha", lambda m, x: m.celu(x, 2.0)), ("leaky-slope", lambda m, x: m.leaky_relu(x, 0.2)),
             ("squareplus-b", lambda m, x: m.squareplus(x, 1.0)), ("log1mexp", lambda m, x: m.log1mexp(x * x)),
             ("glu", lambda m, x: m.glu(x.reshape(4, 4), axis=0))]
    rows = [(n, lambda m, x, n=n: getattr(m, n)(x)) for n in ACTIVATIONS] + extra
    got = jitad.jit(lambda x: tuple(f(nn, x) for _, f in rows))(EDGES)
    wants = jax.jit(lambda x: tuple(f(jnn, x) for _, f in rows))(EDGES)
    for (name, f), g, want in zip(rows, got, wants):
        same(g, want, rtol=1e-12, atol=1e-300, what=name)
    same(nn.relu6(EDGES), jnn.relu6(EDGES), what="relu6 eager")


def test_activation_gradients_agree_with_jax():
    x = np.array([-2.5, -0.7, 0.3, 0.9, 2.0, 6.5])
    names = ["relu6", "hard_tanh", "hard_silu", "celu", "selu", "sparse_plus", "squareplus", "mish", "elu",
             "log_sigmoid", "soft_sign", "gelu"]
    grads = jitad.jit(lambda x: tuple(jitad.grad(lambda v, n=n: jitad.numpy.sum(getattr(nn, n)(v)))(x)
                                      for n in names))(x)
    wants = jax.jit(lambda x: tuple(jax.grad(lambda v, n=n: jax.numpy.sum(getattr(jnn, n)(v)))(x) for n in names))(x)
    for n, g, want in zip(names, grads, wants):
        same(g, want, rtol=1e-12, what=n)
    check_grads(lambda v: nn.mish(v) + nn.celu(v, 0.7) + nn.squareplus(v) + jitad.numpy.sum(nn.glu(v)), (x,), order=2)


def test_softmax_family_and_logsumexp():
    x = np.array([[0.5, -np.inf, 2.0, 1.0], [3.0, 3.0, -1.0, 0.0], [-np.inf, -np.inf, -np.inf, -np.inf]])
    w = np.array([[True, True, False, True], [False, True, True, True], [True, True, True, True]])
    b = np.array([[1.0, 2.0, -0.5, 1.0], [0.5, -1.0, 1.0, 2.0], [1.0, 1.0, 1.0, 1.0]])
    rows = [
        ("softmax", lambda m, x: m.softmax(x)), ("softmax0", lambda m, x: m.softmax(x[:2], axis=0)),
        ("softmax-where", lambda m, x: m.softmax(x[:2], where=w[:2])),
        ("log_softmax", lambda m, x: m.log_softmax(x[:2])),
        ("log_softmax-where", lambda m, x: m.log_softmax(x[:2], where=w[:2])),
        ("logsumexp", lambda m, x: m.logsumexp(x)), ("logsumexp-axis", lambda m, x: m.logsumexp(x, 1, keepdims=True)),
        ("logsumexp-b", lambda m, x: m.logsumexp(x[:2], axis=1, b=np.abs(b[:2]))),
        ("logsumexp-sign", lambda m, x: m.logsumexp(x[:2], axis=1, b=b[:2], return_sign=True)[0]),
        ("logsumexp-sign-s", lambda m, x: m.logsumexp(x[:2], axis=1, b=b[:2], return_sign=True)[1]),
        ("logsumexp-where", lambda m, x: m.logsumexp(x, axis=1, where=w)),
        ("logmeanexp", lambda m, x: m.logmeanexp(x[:2], axis=1)),
        ("logmeanexp-where", lambda m, x: m.logmeanexp(x[:2], axis=1, where=w[:2])),
        ("standardize", lambda m, x: m.standardize(b)), ("standardize0", lambda m, x: m.standardize(b, axis=0)),
        ("standardize-where", lambda m, x: m.standardize(b, where=w)),
        ("standardize-given", lambda m, x: m.standardize(b, mean=0.5, variance=2.0)),
    ]
    got = jitad.jit(lambda x: tuple(f(nn, x) for _, f in rows))(x)
    wants = jax.jit(lambda x: tuple(f(jnn, x) for _, f in rows))(x)
    for (name, f), g, want in zip(rows, got, wants):
        if name == "softmax-where":   # JAX leaves 0 * nan where masked: compare inside the mask
            g, want = np.where(w[:2], g, 0), np.where(w[:2], want, 0)
        same(g, want, rtol=1e-12, atol=1e-15, what=name)
    y = np.array([[0.3, -1.2, 2.0], [0.1, 0.4, -0.5]])
    ours = jitad.grad(lambda y: jitad.numpy.sum(nn.log_softmax(y) * b[:2, :3]) + nn.logsumexp(y, b=np.abs(b[:2, :3])))(y)
    theirs = jax.jit(jax.grad(lambda y: jax.numpy.sum(jnn.log_softmax(y) * b[:2, :3])
                              + jnn.logsumexp(y, b=np.abs(b[:2, :3]))))(y)
    same(ours, theirs, rtol=1e-12)
    check_grads(lambda y: (nn.softmax(y, where=w[:2, :3]), nn.standardize(y, axis=0)), (y,), order=1)


def test_one_hot():
    labels = np.array([[0, 2], [3, -1]])
    for kw in ({}, {"axis": 0}, {"dtype": np.int64}, {"dtype": np.bool_, "axis": 1}):
        same(jitad.jit(lambda l: nn.one_hot(l, 3, **kw))(labels), jnn.one_hot(labels, 3, **kw), what=str(kw))


def test_one_hot_called_eagerly_keeps_the_dtype_asked_for():
    labels = np.array([[0, 2], [3, -1]])
    for dtype in (np.int32, np.uint8, np.float32, np.float16, np.bool_):
        ours, theirs = nn.one_hot(labels, 3, dtype=dtype), jnn.one_hot(labels, 3, dtype=dtype)
        assert ours.dtype == theirs.dtype, dtype
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_dot_product_attention():
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((2, 6, 2, 5)), rng.standard_normal((2, 6, 2, 5))
    bias = rng.standard_normal((2, 4, 3, 6))
    mask = rng.random((2, 1, 3, 6)) > 0.3
    lengths = np.array([2, 3], np.int32)   # JAX asks for int32 lengths
    cases = [{}, {"is_causal": True}, {"mask": mask, "bias": bias}, {"scale": 0.3, "local_window_size": (1, 2)},
             {"query_seq_lengths": lengths, "key_value_seq_lengths": np.array([4, 6], np.int32)}]
    got = jitad.jit(lambda q, k, v: tuple(nn.dot_product_attention(q, k, v, **kw) for kw in cases))(q, k, v)
    wants = jax.jit(lambda q, k, v: tuple(jnn.dot_product_attention(q, k, v, **kw) for kw in cases))(q, k, v)
    for kw, g, want in zip(cases, got, wants):   # JAX rounds the softmax through float32
        same(g, want, rtol=1e-5, atol=1e-6, what=str(kw.keys()))
    same(nn.dot_product_attention(q[0], k[0], v[0]), jnn.dot_product_attention(q[0], k[0], v[0]), rtol=1e-5, atol=1e-6)
    loss = lambda m, np_: (lambda q, k, v: np_.sum(np_.sin(m.dot_product_attention(q, k, v, is_causal=True))))
    ours = jitad.grad(loss(nn, jitad.numpy), (0, 1, 2))(q, k, v)
    theirs = jax.jit(jax.grad(loss(jnn, jax.numpy), (0, 1, 2)))(q, k, v)
    for a, b in zip(ours, theirs):
        same(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(jitad.JitadError, match="groups"):
        nn.dot_product_attention(q, k[:, :, :1].repeat(3, 2), v[:, :, :1].repeat(3, 2))


INITS = [("glorot_uniform", ()), ("glorot_normal", ()), ("xavier_uniform", ()), ("xavier_normal", ()),
         ("he_uniform", ()), ("he_normal", ()), ("kaiming_uniform", ()), ("kaiming_normal", ()),
         ("lecun_uniform", ()), ("lecun_normal", ()), ("normal", (0.5,)), ("uniform", (2.0,)),
         ("truncated_normal", (0.3,)), ("orthogonal", (1.5,)), ("delta_orthogonal", ()),
         ("constant", (0.25,)), ("variance_scaling", (0.7, "fan_geo_avg", "uniform"))]


F32_INITS = [INITS[0], INITS[5], INITS[12], INITS[13]]


def _draw_all(module, key, shape, dtype, inits):
    return tuple(getattr(module.initializers, name)(*args)(key, shape, dtype) for name, args in inits)


@pytest.mark.parametrize("shape, dtype, inits", [
    ((6, 2), np.float32, F32_INITS),
    pytest.param((3, 3, 4, 5), np.float64, INITS, marks=pytest.mark.slow),   # JAX's draws: half a minute of XLA
])
def test_initializers_draw_jax_numbers(shape, dtype, inits):
    key, jkey = jitad.random.PRNGKey(7), jax.random.PRNGKey(7)
    got = jitad.jit(lambda key: _draw_all(nn, key, shape, dtype, inits))(key)   # one program for all of them
    want = jax.jit(lambda key: _draw_all(jnn, key, shape, dtype, inits))(jkey)   # (one XLA compile)
    names = [n for n, _ in inits]
    for name, ours, theirs in zip(names, got, want):
        assert np.asarray(ours).dtype == np.asarray(theirs).dtype, name
        same(ours, theirs, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-7, what=f"{name} {dtype}")
    same(nn.initializers.orthogonal()(key, (4, 3)), jnn.initializers.orthogonal()(jkey, (4, 3)), rtol=1e-12)
    for name in ("zeros", "ones"):
        same(getattr(nn.initializers, name)(key, shape), getattr(jnn.initializers, name)(jkey, shape))
    vs = nn.initializers.variance_scaling(2.0, "fan_out", "normal", in_axis=0, out_axis=(1,), batch_axis=())
    jvs = jnn.initializers.variance_scaling(2.0, "fan_out", "normal", in_axis=0, out_axis=(1,), batch_axis=())
    same(vs(key, shape), jvs(jkey, shape), rtol=1e-12)


def test_initializer_errors():
    with pytest.raises(jitad.JitadError, match="mode"):
        nn.initializers.variance_scaling(1.0, "fan_sum", "normal")
    with pytest.raises(jitad.JitadError, match="at least two axes"):
        nn.initializers.glorot_normal()(jitad.random.PRNGKey(0), (3,))
    with pytest.raises(jitad.JitadError, match="fan_in"):
        nn.initializers.delta_orthogonal()(jitad.random.PRNGKey(0), (3, 5, 2))


def test_scaled_products():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 4, 64)), rng.standard_normal((2, 3, 64))
    sa, sb = rng.random((2, 4, 2)), rng.random((2, 3, 4))
    want = np.einsum("bmk,bnk->bmn", a * np.repeat(sa, 32, -1), b * np.repeat(sb, 16, -1))   # JAX's definition
    got = jitad.jit(lambda a, b, sa, sb: nn.scaled_matmul(a, b, sa, sb, preferred_element_type=np.float64))(a, b, sa, sb)
    same(got, want, rtol=1e-12)
    assert nn.scaled_matmul(a, b, sa, sb).dtype == np.float32
    x, y = a.astype(np.float32), np.swapaxes(b, 1, 2).astype(np.float32)
    dn = (((2,), (1,)), ((0,), (0,)))
    ours = nn.scaled_dot_general(x, y, dn)
    assert ours.dtype == np.float32
    same(ours, jnn.scaled_dot_general(x, y, dn), rtol=1e-5, atol=1e-5)
    with pytest.raises(jitad.JitadError, match="configs=None"):
        nn.get_scaled_dot_general_config("mxfp8")


def _lines_with_infinities(shape, dtype):
    x = np.random.default_rng(3).standard_normal(shape).astype(dtype)
    x[1, 3] = np.inf                          # one +inf: the line is NaN
    x[2, 0], x[2, 5] = np.inf, np.inf         # two
    x[3, :] = -np.inf                         # all -inf: NaN (0 / 0)
    x[4, 1] = -np.inf                         # a -inf among finite values: exp gives 0 there
    x[5, 2], x[5, 4] = np.nan, np.inf         # NaN
    return x


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_softmax_family_of_lines_holding_infinities_agrees_with_jax(dtype):
    """A line holding +inf is NaN throughout under softmax and log_softmax (inf - inf), as
    JAX's; `logsumexp` stays +inf there. Small lines (whole loops) and lines the row loops
    take (64 KiB), jitted and eager, their gradients, and under vmap."""
    import jax.scipy.special as jss
    import jitad.scipy.special as special
    rows = [("nn.softmax", lambda m, x: m.nn.softmax(x)), ("nn.log_softmax", lambda m, x: m.nn.log_softmax(x)),
            ("nn.logsumexp", lambda m, x: m.nn.logsumexp(x, axis=-1)),
            ("log_softmax", lambda m, x: m.log_softmax(x) if m is jitad else m.nn.log_softmax(x)),
            ("special.softmax", lambda m, x: (special if m is jitad else jss).softmax(x, axis=-1)),
            ("special.log_softmax-all", lambda m, x: (special if m is jitad else jss).log_softmax(x[:6, :8], axis=None))]
    xs = [_lines_with_infinities(shape, dtype) for shape in [(6, 9), (256, 64)]]
    ws = [np.random.default_rng(4).standard_normal(x.shape).astype(dtype) for x in xs]

    lanes = np.stack([xs[0], xs[0][::-1]])

    def program(m):
        loss = lambda x, w: (m.nn.softmax(x) * w).sum() + (m.nn.log_softmax(x[:, :5]) * w[:, :5]).sum()  # noqa: E731
        return lambda xs, lanes: ([(*(f(m, x) for _, f in rows), m.grad(loss)(x, w)) for x, w in zip(xs, ws)],
                                  m.vmap(m.nn.log_softmax)(lanes))
    (got, got_lanes), (wants, want_lanes) = jitad.jit(program(jitad))(xs, lanes), jax.jit(program(jax))(xs, lanes)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for x, gs, ws_ in zip(xs, got, wants):
        for name, g, want in zip([n for n, _ in rows] + ["gradient"], gs, ws_):
            same(g, want, rtol=tol, atol=tol, what=f"{name} {x.shape}")
        same(nn.softmax(x), ws_[0], rtol=tol, atol=tol, what=f"eager softmax {x.shape}")
    same(got_lanes, want_lanes, rtol=tol, atol=tol, what="vmap")
