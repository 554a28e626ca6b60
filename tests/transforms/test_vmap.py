"""jitad.vmap: batching as an IR transformation, against JAX's vmap and a Python loop
over the batch (values, shapes, derivatives), through IF/WHILE/FOR/FUN, composed with
jit/grad/jvp/vjp and itself, and its errors."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jitad
from jitad import FOR, FUN, IF, WHILE
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)

rng = np.random.default_rng(0)
B = 5


def close(a, b, rtol=1e-10):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        assert np.shape(x) == np.shape(y)
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=1e-12)


# (name, function of a numpy namespace, args, in_axes, out_axes)
CASES = [
    ("elementwise", lambda N, x, y: N.sin(x) * y + N.exp(-x), (rng.random((B, 3)), rng.random((B, 3))), 0, 0),
    ("broadcast scalar", lambda N, x, y: x * y + 1.0, (rng.random(B), rng.random((4, 3))), (0, None), 0),
    ("reductions", lambda N, x: (N.sum(x, axis=0), N.max(x, axis=1), N.mean(x)), (rng.random((B, 3, 4)),), 0, 0),
    ("matmul left", lambda N, a, b: a @ b, (rng.random((B, 3, 4)), rng.random((4, 2))), (0, None), 0),
    ("matmul right", lambda N, a, b: a @ b, (rng.random((3, 4)), rng.random((B, 4, 2))), (None, 0), 0),
    ("matmul both", lambda N, a, b: a @ b.T, (rng.random((B, 3, 4)), rng.random((B, 2, 4))), 0, 0),
    ("matvec", lambda N, w, x: N.tanh(w @ x), (rng.random((3, 4)), rng.random((B, 4))), (None, 0), 0),
    ("reshape transpose", lambda N, x: N.reshape(x, (6, 2)).T, (rng.random((B, 3, 4)),), 0, 0),
    ("slices", lambda N, x: x[1:, ::2] * 2.0, (rng.random((B, 3, 4)),), 0, 0),
    ("concat", lambda N, x, y: N.concatenate([x, y, x]), (rng.random((B, 3)), rng.random(2)), (0, None), 0),
    ("where", lambda N, x, y: N.where(x > 0.5, x, y), (rng.random((B, 3)), rng.random(3)), (0, None), 0),
    ("index batched array", lambda N, x, i: x[i], (rng.random((B, 4, 2)), 2), (0, None), 0),
    ("index batched index", lambda N, x, i: x[i], (rng.random((4, 2)), np.array([0, 3, 1, 2, 3])), (None, 0), 0),
    ("index both", lambda N, x, i: x[i], (rng.random((B, 4, 2)), np.array([0, 3, 1, 2, -1])), 0, 0),
    ("gather both", lambda N, x, i: x[i] * 1.0, (rng.random((B, 4)), np.array([[0, 1], [3, 3], [1, 0], [2, 2], [0, 3]])), 0, 0),
    ("gather batched array", lambda N, x, i: x[i], (rng.random((B, 4, 3)), np.array([3, 0, 0])), (0, None), 0),
    ("in axis 1", lambda N, x: N.cos(x).sum(axis=0), (rng.random((3, B)),), 1, 0),
    ("negative axes", lambda N, x, y: x * y, (rng.random((3, B)), rng.random((B, 3))), (-1, 0), 1),
    ("out axes pytree", lambda N, x: (x * 2.0, x.sum()), (rng.random((B, 3)),), 0, (1, 0)),
    ("in axes dict", lambda N, p, x: p["w"] @ x + p["b"], ({"w": rng.random((2, 3)), "b": rng.random((B, 2))},
                                                           rng.random((B, 3))), ({"w": None, "b": 0}, 0), 0),
    ("unbatched output", lambda N, x, y: (x * 2.0, y + 1.0), (rng.random((B, 3)), rng.random(2)), (0, None), (0, None)),
]


@pytest.mark.parametrize("name,fn,args,in_axes,out_axes", CASES, ids=[c[0] for c in CASES])
def test_against_jax(name, fn, args, in_axes, out_axes):
    got = jitad.vmap(lambda *a: fn(jitad, *a), in_axes=in_axes, out_axes=out_axes)(*args)
    want = jax.vmap(lambda *a: fn(jnp, *a), in_axes=in_axes, out_axes=out_axes)(*jax.tree_util.tree_map(jnp.asarray, args))
    close(got, want)


def mlp_loss(N, p, x, y):
    h = N.tanh(p["W1"] @ x + p["b1"])
    z = p["W2"] @ h + p["b2"]
    return N.sum((z - y) ** 2)


def test_per_example_gradients_against_jax_and_loop():
    p = {"W1": rng.standard_normal((6, 4)), "b1": rng.standard_normal(6), "W2": rng.standard_normal((3, 6)),
         "b2": rng.standard_normal(3)}
    X, Y = rng.standard_normal((8, 4)), rng.standard_normal((8, 3))
    per_example = jitad.vmap(jitad.grad(lambda p, x, y: mlp_loss(jitad, p, x, y)), in_axes=(None, 0, 0))
    got = per_example(p, X, Y)
    want = jax.vmap(jax.grad(lambda p, x, y: mlp_loss(jnp, p, x, y)), in_axes=(None, 0, 0))(p, X, Y)
    close(got, want)
    g = jitad.grad(lambda p, x, y: mlp_loss(jitad, p, x, y))
    for i in range(len(X)):
        close({k: v[i] for k, v in got.items()}, g(p, X[i], Y[i]))


def test_per_example_gradients_are_batched_code():
    """No per-lane loop and no deferred node: one batched forward and reverse pass."""
    loss = lambda w, x: jitad.sum(jitad.tanh(w @ x))   # noqa: E731
    text = str(jitad.trace(jitad.vmap(jitad.grad(loss), in_axes=(None, 0)), np.ones((3, 4)), np.ones((B, 4))))
    assert "deferred_vjp" not in text and "for " not in text and "call" not in text
    assert f"ref<f64[{B},3,4]>" in text   # the per-example gradient slot


def cf_loss(N, w, x):
    """A loss with IF, WHILE, FOR and a recursive FUN on batched values."""
    h = N.tanh(w @ x)
    s = N.sum(h)
    a = IF(s > 0.0, lambda: s * s, lambda: -s) if N is jitad else N.where(s > 0.0, s * s, -s)
    if N is jitad:
        t = WHILE(lambda c: c[0] < 3.0, lambda c: (c[0] + 1.0 + c[1] * 0.0, c[1] * 1.5), (a * 0.0, s))[1]
        u = FOR(0, 3, lambda i, c: c * 0.5 + h[i], 0.0)
    else:
        t = s * 1.5 ** 3
        u = 0.0
        for i in range(3):
            u = u * 0.5 + h[i]
    return a + t + u


@pytest.mark.parametrize("batched_while", [False, True])
def test_vmap_grad_control_flow(batched_while):
    w, X = rng.standard_normal((3, 4)), rng.standard_normal((B, 4))
    got = jitad.vmap(jitad.grad(lambda w, x: cf_loss(jitad, w, x)), in_axes=(None, 0))(w, X)
    want = jax.vmap(jax.grad(lambda w, x: cf_loss(jnp, w, x)), in_axes=(None, 0))(w, X)
    close(got, want)
    if batched_while:   # trip counts that differ per lane: x * 2 until above 10
        f = lambda x: WHILE(lambda t: t < 10.0, lambda t: t * 2.0, x) * x   # noqa: E731
        xs = np.array([0.3, 1.0, 4.0, 20.0, 2.5])
        got = jitad.vmap(jitad.grad(f))(xs)
        want = [jitad.grad(f)(x) for x in xs]
        close(got, np.array(want))


@FUN(out=0.0)
def power_rec(x, n):
    return IF(n <= 0, lambda: 1.0 + 0.0 * x, lambda: x * power_rec(x, n - 1))


def test_recursive_fun_with_batched_predicate():
    xs, ns = np.array([1.5, 2.0, 0.5, 3.0, 1.1]), np.array([0, 3, 5, 2, 1])
    got = jitad.vmap(lambda x, n: power_rec(x, n))(xs, ns)
    close(got, xs ** ns)
    grads = jitad.vmap(jitad.grad(lambda x, n: power_rec(x, n)))(xs, ns)
    close(grads, np.where(ns > 0, ns * xs ** np.maximum(ns - 1, 0), 0.0))


def test_batched_for_bounds_and_tree():
    ns = np.array([0, 1, 4, 2, 3])
    got = jitad.vmap(lambda n, x: FOR(0, n, lambda i, s: s * x + i, 1.0), in_axes=(0, None))(ns, 2.0)
    want = []
    for n in ns:
        s = 1.0
        for i in range(n):
            s = s * 2.0 + i
        want.append(s)
    close(got, np.array(want))
    tree = jitad.Tree.from_nested((1.0, (2.0, None, None), (3.0, None, None)))
    f = lambda t, x: jitad.TREE(t, 0.0, lambda nd, l, r: nd.value * x + l + r)   # noqa: E731
    close(jitad.vmap(f, in_axes=(None, 0))(tree, np.arange(B) * 1.0), 6.0 * np.arange(B))


def test_while_inside_batched_branch_stops_with_its_lanes():
    """Lanes that do not take the branch are masked: the loop inside ends when the
    lanes that take it are done (here the other lanes would never finish)."""
    def f(x):
        return IF(x > 0.0, lambda: WHILE(lambda t: t < 100.0, lambda t: t * 2.0 + x, x), lambda: x)
    xs = np.array([1.0, -1.0, 3.0, 0.0, -5.0])
    close(jitad.vmap(f)(xs), np.array([f(x) for x in xs]))


def test_nested_vmap_and_compositions():
    X = rng.random((3, 4, 2))
    f = lambda x: jitad.sin(x) * x.sum()   # noqa: E731
    got = jitad.vmap(jitad.vmap(f))(X)
    close(got, jax.vmap(jax.vmap(lambda x: jnp.sin(x) * x.sum()))(X))
    # vmap of vmap of grad: per-example gradients of a batch of batches
    loss = lambda w, x: jitad.sum(jitad.tanh(w * x))   # noqa: E731
    w = rng.random(2)
    got = jitad.vmap(jitad.vmap(jitad.grad(loss), in_axes=(None, 0)), in_axes=(None, 0))(w, X)
    want = jax.vmap(jax.vmap(jax.grad(lambda w, x: jnp.sum(jnp.tanh(w * x))), in_axes=(None, 0)), in_axes=(None, 0))(w, X)
    close(got, want)
    # jit and grad of vmap, jvp of vmap, vmap of jvp and of vjp
    g = jitad.jit(lambda X: jitad.vmap(f)(X).sum())
    close(g(X[0]), jnp.sum(jax.vmap(lambda x: jnp.sin(x) * x.sum())(X[0])))
    gv = jitad.grad(lambda X: jitad.vmap(f)(X).sum())(X[0])
    close(gv, jax.grad(lambda X: jax.vmap(lambda x: jnp.sin(x) * x.sum())(X).sum())(X[0]))
    V = rng.random((4, 2))
    close(jitad.jvp(jitad.vmap(f), (X[0],), (V,)), jax.jvp(jax.vmap(lambda x: jnp.sin(x) * x.sum()), (X[0],), (V,)))
    jv = jitad.vmap(lambda x, v: jitad.jvp(f, (x,), (v,))[1])(X[0], V)
    close(jv, jax.vmap(lambda x, v: jax.jvp(lambda x: jnp.sin(x) * x.sum(), (x,), (v,))[1])(X[0], V))
    vj = jitad.vmap(lambda x, c: jitad.vjp(f, x)[1](c)[0])(X[0], V)
    close(vj, jax.vmap(lambda x, c: jax.vjp(lambda x: jnp.sin(x) * x.sum(), x)[1](c)[0])(X[0], V))


def test_derivatives_of_vmapped_function():
    w = rng.random((3, 2))
    X = rng.random((4, 2))

    def total(w, X):
        return jitad.sum(jitad.vmap(lambda x: IF(jitad.sum(x) > 1.0, lambda: jitad.tanh(w @ x), lambda: w @ x * x[0]))(X))
    check_grads(total, (w, X), order=2, modes=("fwd", "rev"))


def test_fallback_per_lane():
    """An op without a batching rule (a linear solve) runs once per lane."""
    A = rng.random((B, 3, 3)) + 3 * np.eye(3)
    b = rng.random((B, 3))
    close(jitad.vmap(jitad.linalg.solve)(A, b), np.linalg.solve(A, b[..., None])[..., 0])
    A10 = rng.random((10, 3, 3)) + 3 * np.eye(3)   # past the unrolled sizes: a staged loop
    close(jitad.vmap(jitad.linalg.det)(A10), np.linalg.det(A10))


# -- Hypothesis: random small programs under vmap against a Python loop ---------------

UNARY = ["jitad.sin({})", "jitad.tanh({})", "({} * {})", "jitad.exp(-jitad.abs({}))", "({}.sum() + {})"]
BINARY = ["({} + {})", "({} * {})", "jitad.maximum({}, {})", "jitad.where({} > {}, 1.0, 2.0)"]


@st.composite
def programs(draw, depth=3):
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from(["x", "y", "(0.5 + 0.0 * y)", "(x[1:].sum() + x)", "(x * y)"]))
    kind = draw(st.sampled_from(["unary", "binary", "if", "while", "for"]))
    a = draw(programs(depth=depth - 1))
    if kind == "unary":
        return draw(st.sampled_from(UNARY)).replace("{}", a)
    b = draw(programs(depth=depth - 1))
    if kind == "binary":
        return draw(st.sampled_from(BINARY)).format(a, b)
    if kind == "if":
        return f"IF(jitad.sum({a}) > 0.3, lambda: {a} * 1.0, lambda: {b} * 1.0)"
    if kind == "while":
        return f"WHILE(lambda t: jitad.sum(t) < 4.0, lambda t: t * 1.5 + 0.1 + 0.0 * ({a}), {b} * 0.0 + 0.2)"
    return f"FOR(0, 3, lambda i, s: s * 0.5 + {a}, {b} * 1.0)"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.sampled_from([(0, 0), (0, None), (None, 0)]))
def test_random_programs_against_loop(src, in_axes):
    fn = eval(f"lambda x, y: jitad.sum(({src}) * 1.0) + x * 0.0",
              {"jitad": jitad, "IF": IF, "WHILE": WHILE, "FOR": FOR})
    xs, ys = rng.random((4, 3)), rng.random((4, 3))
    args = [a if ax == 0 else a[0] for a, ax in zip((xs, ys), in_axes)]
    got = jitad.vmap(fn, in_axes=in_axes)(*args)
    single = jitad.jit(fn)
    want = np.stack([single(*[a[i] if ax == 0 else a for a, ax in zip(args, in_axes)]) for i in range(4)])
    close(got, want, rtol=1e-9)


# -- errors ---------------------------------------------------------------------------

def test_errors():
    x = np.ones((3, 2))
    with pytest.raises(jitad.ArgumentError, match="in_axes has 1 entries but the function got 2"):
        jitad.vmap(lambda a, b: a + b, in_axes=(0,))(x, x)
    with pytest.raises(jitad.ArgumentError, match="different sizes: 3 and 4"):
        jitad.vmap(lambda a, b: a)(x, np.ones((4, 2)))
    with pytest.raises(jitad.ArgumentError, match="batches no argument"):
        jitad.vmap(lambda a: a, in_axes=None)(x)
    with pytest.raises(jitad.ArgumentError, match="axis 2 for argument leaf 0"):
        jitad.vmap(lambda a: a, in_axes=2)(x)
    with pytest.raises(jitad.ArgumentError, match="out_axes is None for output leaf 0"):
        jitad.vmap(lambda a: a * 2.0, out_axes=None)(x)
    with pytest.raises(jitad.ArgumentError, match="out_axes gives axis 3"):
        jitad.vmap(lambda a: a * 2.0, out_axes=3)(x)
    with pytest.raises(jitad.ArgumentError, match="give one axis per entry"):
        jitad.vmap(lambda p: p["a"], in_axes=({"b": 0},))({"a": x})
    with pytest.raises(jitad.ArgumentError, match="cannot be batched"):
        jitad.vmap(lambda t: t, in_axes=0)(jitad.Tree.from_nested((1.0, None, None)))
    assert issubclass(jitad.ArgumentError, jitad.JitadError)


def test_jacobians_and_hessians_under_vmap():
    """jacrev/jacfwd batch as programs; hessian and hvp (forward over reverse-mode code
    made inside) run the function once per lane."""
    X = rng.random((10, 3))
    f = lambda x: jitad.sin(x) * x.sum()   # noqa: E731
    fj = lambda x: jnp.sin(x) * x.sum()   # noqa: E731
    close(jitad.vmap(jitad.jacrev(f))(X[:4]), jax.vmap(jax.jacrev(fj))(X[:4]))
    close(jitad.vmap(jitad.jacfwd(f))(X[:4]), jax.vmap(jax.jacfwd(fj))(X[:4]))
    g = lambda x: jitad.sum(f(x))   # noqa: E731
    gj = lambda x: jnp.sum(fj(x))   # noqa: E731
    close(jitad.vmap(jitad.hessian(g))(X[:4]), jax.vmap(jax.hessian(gj))(X[:4]))
    close(jitad.vmap(jitad.hvp(g))(X, X), jax.vmap(lambda x, v: jax.jvp(jax.grad(gj), (x,), (v,))[1])(X, X))


SCALE = 2.0


def test_a_library_function_is_vmapped_once_per_process_and_a_users_each_time():
    keys = jitad.random.split(jitad.random.key(0), 3)
    first = jitad.vmap(jitad.random.normal)
    assert jitad.vmap(jitad.random.normal) is first   # (a program run again makes it again)
    assert jitad.vmap(jitad.random.normal, in_axes=(0,)) is not first
    np.testing.assert_array_equal(first(keys), np.stack([jitad.random.normal(k) for k in keys]))
    assert jitad.vmap(jitad.numpy.dot, in_axes=(0, None)) is jitad.vmap(jitad.numpy.dot, in_axes=(0, None))

    def scaled(x):   # a user's function reads what may change between two vmaps of it
        return SCALE * x
    assert jitad.vmap(scaled) is not jitad.vmap(scaled)
    global SCALE
    before, SCALE = SCALE, 3.0
    try:
        np.testing.assert_array_equal(jitad.vmap(scaled)(np.arange(3.0)), 3.0 * np.arange(3.0))
    finally:
        SCALE = before
