"""Values that were wrong at the edges: vmap keeping custom derivative rules, batched IF
gradients per lane, aliasing (pullbacks, weakly referenced results, jvp and globals),
linear algebra at degenerate points, libm-exact elementwise functions, pad's checks.
Each is compared with JAX, NumPy or the per-lane program."""
import gc
import weakref

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import jitad

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy

X = np.array([0.5, -1.0, 2.0])


# -- vmap keeps custom_vjp / custom_jvp rules ----------------------------------------

@jitad.custom_vjp
def triple(x, w):   # the rule is not the body's derivative: 3 g w and g x / 2
    return x * w


triple.defvjp(lambda x, w: (triple(x, w), (x, w)), lambda r, g: (3.0 * g * r[1], 0.5 * g * r[0]))


@jax.custom_vjp
def j_triple(x, w):
    return x * w


j_triple.defvjp(lambda x, w: (j_triple(x, w), (x, w)), lambda r, g: (3.0 * g * r[1], 0.5 * g * r[0]))


@jitad.custom_jvp
def twice_sin(x):   # tangent 2 cos(x) t
    return jitad.sin(x)


@twice_sin.defjvp
def _twice_sin_jvp(primals, tangents):
    return twice_sin(primals[0]), 2.0 * jitad.cos(primals[0]) * tangents[0]


@jax.custom_jvp
def j_twice_sin(x):
    return jnp.sin(x)


@j_twice_sin.defjvp
def _j_twice_sin_jvp(primals, tangents):
    return j_twice_sin(primals[0]), 2.0 * jnp.cos(primals[0]) * tangents[0]


def _transforms(m, f, g):
    """grad(vmap), vmap(grad), jacrev(vmap) of f(x) (x batched), and the cotangent of an
    unbatched argument through g(x, w) (w shared by the lanes)."""
    return {
        "grad_vmap": m.grad(lambda x: (m.sum if m is jitad else jnp.sum)(m.vmap(f)(x))),
        "vmap_grad": m.vmap(m.grad(f)),
        "jacrev_vmap": m.jacrev(m.vmap(f)),
        "shared_w": m.grad(lambda x, w: (m.sum if m is jitad else jnp.sum)(m.vmap(g, in_axes=(0, None))(x, w)),
                           argnums=(0, 1)),
    }


JITAD_T = {"vjp": _transforms(jitad, lambda x: triple(x, 2.0), triple),
           "jvp": _transforms(jitad, twice_sin, lambda x, w: twice_sin(x * w))}
JAX_T = {"vjp": _transforms(jax, lambda x: j_triple(x, 2.0), j_triple),
         "jvp": _transforms(jax, j_twice_sin, lambda x, w: j_twice_sin(x * w))}


@settings(max_examples=8, deadline=None)
@given(st.lists(st.floats(-3, 3), min_size=3, max_size=3), st.floats(-2, 2),
       st.sampled_from(["vjp", "jvp"]), st.sampled_from(["grad_vmap", "vmap_grad", "jacrev_vmap", "shared_w"]))
def test_vmap_keeps_custom_rules_as_jax(xs, w, kind, how):
    x = np.array(xs)
    args = (x, w) if how == "shared_w" else (x,)
    got, want = JITAD_T[kind][how](*args), JAX_T[kind][how](*args)
    for a, b in zip(*(r if how == "shared_w" else (r,) for r in (got, want))):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-12, atol=1e-14)


def test_vmap_grad_of_softplus_uses_its_rule():
    assert np.array_equal(jitad.vmap(jitad.grad(jitad.nn.softplus))(np.array([0.0, 1000.0])), [0.5, 1.0])


def test_vmap_custom_rule_inside_a_batched_branch_and_nested_vmaps():
    def f(x):
        return jitad.IF(x > 1.0, lambda: triple(x, 1.0), lambda: x)
    assert np.array_equal(jitad.vmap(jitad.grad(f))(np.array([0.0, 2.0, 3.0])), [1.0, 3.0, 3.0])
    nested = jitad.vmap(jitad.vmap(jitad.grad(lambda x: triple(x, 2.0))))(np.zeros((2, 3)))
    assert np.array_equal(nested, np.full((2, 3), 6.0))
    hess = jitad.vmap(jitad.grad(jitad.grad(twice_sin)))(X)
    np.testing.assert_allclose(hess, -2.0 * np.sin(X), rtol=1e-13)
    out, tangent = jitad.jvp(jitad.vmap(twice_sin), (X,), (np.ones(3),))
    np.testing.assert_allclose(tangent, np.asarray(jax.jvp(jax.vmap(j_twice_sin), (X,), (np.ones(3),))[1]), rtol=1e-14)


def _closing_rules(w):
    """A custom_vjp and a custom_jvp function closing over `w` and over a per-lane value."""
    def vjp_lane(x):
        y = 2.0 * x

        @jitad.custom_vjp
        def f(z):
            return w * y * z

        def bwd(z, g):   # the rule's own cotangent for z, and w's through a vjp of a closure
            _, pull = jitad.vjp(lambda z: w * z, z)
            return (3.0 * g + 0.0 * pull(g)[0],)
        f.defvjp(lambda z: (f(z), z), bwd)
        return f(x)

    def jvp_lane(x):
        @jitad.custom_jvp
        def f(z):
            return w * jitad.sin(z)
        f.defjvp(lambda p, t: (f(p[0]), 5.0 * t[0]))
        return f(x)
    return vjp_lane, jvp_lane


def test_vmap_keeps_rules_whose_function_closes_over_staged_values():
    xs = np.array([0.5, -1.0, 2.0])
    for k in range(2):
        def batched(w, xs):
            return jitad.sum(jitad.vmap(_closing_rules(w)[k])(xs))

        def looped(w, xs):
            return sum(_closing_rules(w)[k](xs[i]) for i in range(3))
        got, want = jitad.grad(batched, argnums=(0, 1))(1.5, xs), jitad.grad(looped, argnums=(0, 1))(1.5, xs)
        np.testing.assert_allclose(got[1], [3.0, 3.0, 3.0] if k == 0 else [5.0, 5.0, 5.0], rtol=0)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-13)
        per_lane = jitad.vmap(jitad.grad(lambda x: _closing_rules(1.5)[k](x)))(xs)
        np.testing.assert_allclose(per_lane, got[1], rtol=1e-13)
        jac = jitad.jacrev(lambda xs: jitad.vmap(_closing_rules(1.5)[k])(xs))(xs)
        np.testing.assert_allclose(jac, np.diag(got[1]), rtol=1e-13)


def test_vmap_of_a_checkpoint_stays_a_checkpoint():
    block = jitad.checkpoint(lambda h, w: jitad.tanh(w @ h))
    program = str(jitad.trace(lambda h, w: jitad.vmap(block, in_axes=(0, None))(h, w), np.ones((4, 3)), np.eye(3)))
    assert "checkpoint @" in program


# -- vmap of IF with a batched predicate: each lane's gradient is its own program's ------

def branchy(x, w):   # the branch not taken is NaN or inf in some lanes (sqrt, log of <= 0)
    return jitad.IF(x > 0.5, lambda: jitad.sqrt(x) + jitad.log(w * x), lambda: w * x * x)


BATCHED = jitad.jit(jitad.grad(lambda x, w: jitad.sum(jitad.vmap(branchy, in_axes=(0, None))(x, w)),
                               argnums=(0, 1)))
VMAP_GRAD = jitad.vmap(jitad.grad(branchy, argnums=(0, 1)), in_axes=(0, None))
LANE = jitad.jit(jitad.grad(branchy, argnums=(0, 1)))


@settings(max_examples=10, deadline=None)
@given(st.lists(st.sampled_from([0.0, -0.0, -1.0, 0.25, 0.5, 0.75, 2.0, -3.5]), min_size=4, max_size=4),
       st.sampled_from([0.0, 1.5, -2.0]))
def test_batched_if_gradients_equal_the_per_lane_loop(xs, w):
    x = np.array(xs)
    lanes = [LANE(xi, w) for xi in x]
    gx, gw = BATCHED(x, w)
    np.testing.assert_array_equal(gx, [g for g, _ in lanes])
    np.testing.assert_allclose(gw, sum(g for _, g in lanes), rtol=1e-14)
    vx, vw = VMAP_GRAD(x, w)
    np.testing.assert_array_equal(vx, [g for g, _ in lanes])
    np.testing.assert_array_equal(vw, [g for _, g in lanes])


def test_batched_while_and_for_bounds_gradients_per_lane():
    def f(x):   # a lane leaves the loop before log meets its 0
        return jitad.WHILE(lambda s: s[0] > 1.0, lambda s: (s[0] - 1.0, s[1] + jitad.log(s[0] - 1.0)), (x, 0.0))[1]
    xs = np.array([0.5, 3.0, 2.0])
    batched = jitad.grad(lambda x: jitad.sum(jitad.vmap(f)(x)))(xs)
    np.testing.assert_array_equal(batched, [jitad.grad(f)(x) for x in xs])
    assert np.isfinite(batched).all()


# -- aliasing --------------------------------------------------------------------------

def test_pullback_uses_the_primal_as_it_was_at_vjp_time():
    x = np.array([1.0, 2.0])
    out, pullback = jitad.vjp(lambda x: jitad.sum(x * x), x)
    x[0] = 10.0
    assert out == 5.0
    np.testing.assert_array_equal(pullback(1.0)[0], [2.0, 4.0])


def test_a_weakly_referenced_result_is_not_overwritten():
    f = jitad.jit(lambda x: x * 2.0)
    x = np.arange(3.0)
    for _ in range(3):   # fill the result pool
        f(x)
    ref = weakref.ref(f(x))
    f(x + 10.0)
    f(x + 20.0)
    assert ref() is None or np.array_equal(ref(), [0.0, 2.0, 4.0])
    kept = weakref.WeakValueDictionary({"a": f(x)})
    f(x + 30.0)
    f(x + 40.0)
    gc.collect()
    assert "a" not in kept or np.array_equal(kept["a"], [0.0, 2.0, 4.0])


SCALE = 1.0


def _scaled(x):
    return x * SCALE


def test_jvp_sees_a_changed_global_as_jax_does():
    global SCALE
    try:
        SCALE = 1.0
        assert jitad.jvp(_scaled, (2.0,), (1.0,)) == (2.0, 1.0)
        SCALE = 5.0
        assert jitad.jvp(_scaled, (2.0,), (1.0,)) == (10.0, 5.0)
        assert tuple(map(float, jax.jvp(_scaled, (2.0,), (1.0,)))) == (10.0, 5.0)
    finally:
        SCALE = 1.0


# -- linear algebra at degenerate points, against JAX -----------------------------------

SINGULAR2 = np.array([[1.0, 2.0], [2.0, 4.0]])
RANK2 = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
RANK1 = np.outer([1.0, 2.0, 3.0], [1.0, -1.0, 2.0])
FUNCTIONS = {
    "det": (jitad.linalg.det, jnp.linalg.det),
    "eigvals_sq": (lambda a: jitad.sum(jitad.linalg.eigh(a)[0] ** 2), lambda a: jnp.sum(jnp.linalg.eigh(a)[0] ** 2)),
    "nuclear": (lambda a: jitad.linalg.norm(a, "nuc"), lambda a: jnp.linalg.norm(a, "nuc")),
    "spectral": (lambda a: jitad.linalg.norm(a, 2), lambda a: jnp.linalg.norm(a, 2)),
}
GRADS = {name: jitad.grad(ours) for name, (ours, _) in FUNCTIONS.items()}   # (compiled once per shape)


@pytest.mark.parametrize("name, a", [
    ("det", RANK2), ("det", RANK1), ("det", np.eye(3) + RANK1),
    ("eigvals_sq", np.eye(3)), ("eigvals_sq", np.diag([2.0, 2.0, -1.0])),
    ("nuclear", np.eye(3)), ("nuclear", np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])),
    ("spectral", np.eye(3)),
])
def test_linalg_gradients_at_degenerate_points_match_jax(name, a):
    ours, theirs = FUNCTIONS[name]
    got = GRADS[name](a)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, np.asarray(jax.grad(theirs)(jnp.asarray(a))), rtol=1e-10, atol=1e-12)


def test_det_gradient_batched():
    stack = np.stack([SINGULAR2, np.array([[2.0, 1.0], [0.5, 3.0]])])
    got = jitad.grad(lambda a: jitad.sum(jitad.linalg.det(a)))(stack)
    np.testing.assert_allclose(got, np.asarray(jax.grad(lambda a: jnp.sum(jnp.linalg.det(a)))(stack)), rtol=1e-12)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 3)])
@pytest.mark.parametrize("full", [True, False])
def test_svd_of_an_empty_matrix_is_numpys_without_lapack_errors(capfd, shape, full):
    a = np.zeros(shape)
    got = jitad.jit(lambda a: jitad.linalg.svd(a, full_matrices=full))(a)
    for g, want in zip(got, np.linalg.svd(a, full_matrices=full)):
        np.testing.assert_array_equal(g, want)
    assert "illegal value" not in "".join(capfd.readouterr())


# -- elementwise edges against NumPy and JAX --------------------------------------------

def _ulps(a, b):
    a, b = np.asarray(a), np.asarray(b)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    with np.errstate(invalid="ignore"):
        return np.where(same, 0.0, np.abs(a - b) / np.spacing(np.maximum(np.abs(a), np.abs(b))))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["sinh", "cosh", "exp2"])
def test_hyperbolic_and_exp2_near_overflow_as_numpy(name, dtype):
    edge = {"sinh": [710.0, -710.4, 711.0, 89.0, -89.5, 1e-20, 0.0],
            "cosh": [710.0, -710.4, 711.0, 89.0, -89.5, 1e-5, 0.0],
            "exp2": [1023.99, 1024.0, 127.9, 128.0, -1075.0, 0.5, 3.0]}[name]
    x = np.array(edge, dtype)
    with np.errstate(over="ignore"):
        want = getattr(np, name)(x)
    got = jitad.jit(getattr(jitad, name))(x)
    assert got.dtype == dtype
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    assert _ulps(got, want).max() <= 2


HYPOT_GRAD = jitad.grad(jitad.hypot, argnums=(0, 1))


def test_hypot_special_values_and_gradient_at_the_origin():
    a = np.array([np.inf, np.nan, -np.inf, 3.0, 0.0, 1e300, 1e-300])
    b = np.array([np.nan, np.inf, np.nan, 4.0, 0.0, 1e300, 1e-300])
    np.testing.assert_array_equal(jitad.jit(jitad.hypot)(a, b), np.hypot(a, b))
    for p in [(0.0, 0.0), (-0.0, 0.0), (3.0, -4.0), (0.0, 2.0)]:
        got = HYPOT_GRAD(*p)
        np.testing.assert_allclose(got, jax.grad(jnp.hypot, argnums=(0, 1))(*p), rtol=1e-15)


# -- pad's checks ----------------------------------------------------------------------

@pytest.mark.parametrize("width", [1.5, 1.0, ((1, 0.5),), "a", None])
def test_pad_refuses_a_non_integer_width(width):
    with pytest.raises(TypeError):
        np.pad(np.arange(3.0), width)
    with pytest.raises(jitad.errors.ArgumentError, match="pad_width"):
        jitad.jit(lambda x: jitad.pad(x, width))(np.arange(3.0))


@pytest.mark.parametrize("constant", [2.7, (2.7, -1.2), -0.5])
def test_pad_casts_the_constant_to_the_array_dtype(constant):
    x = np.arange(3)
    got = jitad.jit(lambda x: jitad.pad(x, 1, constant_values=constant))(x)
    want = np.pad(x, 1, constant_values=constant)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_batched_if_shared_value_meets_no_inf_from_a_lane_that_skips_the_branch():
    """A value computed before the branch (inf in a lane that does not take it) times a
    value shared by all lanes: the shared value's gradient is the sum of the lanes' own."""
    def f(x, w):
        big = jitad.exp(x * 1000.0)
        return jitad.IF(x < 0.5, lambda: big * w + x, lambda: w * x)
    xs = np.array([0.1, 1.0, 0.3, 2.0])
    _, gw = jitad.grad(lambda xs, w: jitad.sum(jitad.vmap(f, in_axes=(0, None))(xs, w)), argnums=(0, 1))(xs, 2.0)
    lanes = [jitad.grad(f, argnums=1)(x, 2.0) for x in xs]
    assert np.isfinite(gw) and gw == pytest.approx(sum(lanes), rel=1e-14)
    loop = jitad.jit(lambda xs, w: jitad.FOR(0, 4, lambda i, s: s + jitad.grad(f, argnums=1)(xs[i], w), 0.0))
    assert loop(xs, 2.0) == pytest.approx(gw, rel=1e-14)
