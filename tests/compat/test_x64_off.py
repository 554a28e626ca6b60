"""`jitad.config.update("jax_enable_x64", False)` gives JAX's 32-bit defaults: each check
runs the same program through jitad and through JAX with x64 off (`jax.enable_x64(False)`)
and compares dtypes, and values to float32's precision."""
import types
import warnings

import numpy as np
import pytest

import jitad
import jitad.lax
import jitad.nn
import jitad.numpy as tnp
import jitad.random
import jitad.scipy.special
from jitad.config import Config

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jsp = pytest.importorskip("jax.scipy.special")

J = types.SimpleNamespace(np=jnp, lax=jax.lax, nn=jax.nn, sp=jsp, random=jax.random,
                          jit=jax.jit, grad=jax.grad, vmap=jax.vmap)
T = types.SimpleNamespace(np=tnp, lax=jitad.lax, nn=jitad.nn, sp=jitad.scipy.special, random=jitad.random,
                          jit=jitad.jit, grad=jitad.grad, vmap=jitad.vmap)


@pytest.fixture
def x64_off():
    """jitad and JAX both with x64 off; jitad's setting restored after."""
    before = jitad.config.jax_enable_x64
    jitad.config.update("jax_enable_x64", False)
    try:
        with jax.enable_x64(False):
            yield
    finally:
        jitad.config.update("jax_enable_x64", before)


def same(mine, theirs, rtol=1e-6, atol=0.0):
    """Equal dtypes and values (floats to `rtol`), leaf by leaf."""
    mine, theirs = jitad.tree.leaves(mine), jax.tree_util.tree_leaves(theirs)
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        b = np.asarray(b)
        assert np.asarray(a).dtype == b.dtype, (a, b)
        np.testing.assert_allclose(np.asarray(a), b, rtol=rtol, atol=atol)


# -- creation functions and Python scalars -------------------------------------------------

CREATION = [
    lambda m: m.array(1.0), lambda m: m.array(1), lambda m: m.array(True), lambda m: m.array([1, 2]),
    lambda m: m.array([1.5, 2.0]), lambda m: m.asarray(np.arange(3)), lambda m: m.asarray(np.ones(2)),
    lambda m: m.asarray(np.float64(2.5)), lambda m: m.zeros(3), lambda m: m.ones((2, 2)),
    lambda m: m.full(3, 2), lambda m: m.full(3, 2.5), lambda m: m.eye(2), lambda m: m.identity(2),
    lambda m: m.arange(3), lambda m: m.arange(0.0, 1.0, 0.25), lambda m: m.linspace(0, 1, 5),
    lambda m: m.zeros_like(np.arange(3)), lambda m: m.ones_like(np.ones(2)), lambda m: m.empty(2),
    lambda m: m.ones(3, int), lambda m: m.zeros(3, float), lambda m: m.full((2,), 7, dtype=np.int32),
    lambda m: m.array([1, 2], dtype=bool), lambda m: m.zeros(2, np.float32) + 1,
]


@pytest.mark.parametrize("k", range(len(CREATION)))
def test_creation_functions(x64_off, k):
    same(CREATION[k](tnp), CREATION[k](jnp))


def test_explicit_64_bit_dtypes_are_32_bit_with_jax_warning(x64_off):
    for make in (lambda m: m.zeros(3, m.float64), lambda m: m.array([1, 2], dtype=m.int64),
                 lambda m: m.asarray(np.ones(2), m.float64), lambda m: m.ones(2).astype(m.float64)):
        for m in (tnp, jnp):
            with pytest.warns(UserWarning, match="Explicitly requested dtype"):
                out = make(m)
            assert out.dtype.itemsize == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # Python's float and int ask for the defaults: no warning
        assert tnp.zeros(2, float).dtype == np.float32 and tnp.arange(2).astype(int).dtype == np.int32
        staged = jitad.jit(lambda x: x.astype(float) * 2)(np.arange(3))
    assert staged.dtype == np.float32
    with pytest.warns(UserWarning, match="requested in convert"):
        assert jitad.jit(lambda x: x.astype(np.float64))(np.ones(2)).dtype == np.float32


# -- result dtypes of ~100 functions on float32, int32, bool and Python scalars --------------

# (name, fn(namespace, *args), kinds): f a float32 array, i an int32 array, b a bool array,
# F a Python float, I a Python int, k a PRNG key
UNARY = [("sin", "f"), ("sin", "i"), ("cos", "f"), ("tan", "f"), ("exp", "f"), ("exp", "i"), ("log", "f"),
         ("log1p", "f"), ("expm1", "f"), ("sqrt", "f"), ("sqrt", "i"), ("tanh", "f"), ("arctan", "f"),
         ("sinh", "f"), ("cosh", "f"), ("abs", "f"), ("abs", "i"), ("negative", "f"), ("negative", "i"),
         ("square", "f"), ("square", "i"), ("sign", "f"), ("sign", "i"), ("floor", "f"), ("ceil", "f"),
         ("round", "f"), ("exp2", "f"), ("log2", "f"), ("log10", "f"), ("cbrt", "f"), ("isnan", "f"),
         ("isfinite", "f"), ("reciprocal", "f"), ("deg2rad", "f"), ("logical_not", "b"), ("sum", "f"),
         ("sum", "i"), ("sum", "b"), ("mean", "f"), ("mean", "i"), ("prod", "f"), ("prod", "i"), ("max", "f"),
         ("max", "i"), ("min", "f"), ("argmax", "f"), ("argmin", "i"), ("cumsum", "f"), ("cumsum", "i"),
         ("cumprod", "f"), ("std", "f"), ("var", "f"), ("var", "i"), ("median", "f"), ("all", "b"),
         ("any", "b"), ("count_nonzero", "f"), ("transpose", "f"), ("ravel", "i"), ("sort", "f"),
         ("argsort", "f"), ("flip", "f"), ("diff", "f"), ("zeros_like", "f"), ("ones_like", "i"),
         ("nan_to_num", "f"), ("tril", "f"), ("trace", "f")]
BINARY = [("add", "ff"), ("add", "fF"), ("add", "iI"), ("add", "iF"), ("add", "if"), ("add", "bI"),
          ("subtract", "fi"), ("multiply", "iI"), ("multiply", "fF"), ("divide", "ii"), ("divide", "iI"),
          ("divide", "fI"), ("true_divide", "bb"), ("floor_divide", "ii"), ("floor_divide", "fF"),
          ("power", "fF"), ("power", "iI"), ("power", "fi"), ("mod", "ii"), ("mod", "fF"), ("maximum", "fF"),
          ("maximum", "iI"), ("minimum", "if"), ("arctan2", "ff"), ("hypot", "ff"), ("logaddexp", "ff"),
          ("equal", "iF"), ("less", "fI"), ("greater", "ii"), ("logical_and", "bb"), ("dot", "ff"),
          ("dot", "ii"), ("matmul", "ff"), ("outer", "if"), ("inner", "ff"), ("kron", "ii"),
          ("heaviside", "fF"), ("copysign", "fF"), ("bitwise_and", "ii"), ("left_shift", "iI")]


def _np_fn(name):
    return lambda ns, *xs: getattr(ns.np, name)(*xs)


def _mod_fn(module, name):
    return lambda ns, *xs: getattr(getattr(ns, module), name)(*xs)


SPECS = [
    *[(f"{n}[{k}]", _np_fn(n), k) for n, k in UNARY + BINARY],
    ("where[bf]", lambda ns, b, x: ns.np.where(b, x, 0.0), "bf"),
    ("where[bi]", lambda ns, b, n: ns.np.where(b, n, 0), "bi"),
    ("clip[f]", lambda ns, x: ns.np.clip(x, 0.0, 1.0), "f"),
    ("clip[i]", lambda ns, n: ns.np.clip(n, 0, 1), "i"),
    ("concatenate[fi]", lambda ns, x, n: ns.np.concatenate([x, n]), "fi"),
    ("stack[i]", lambda ns, n: ns.np.stack([n, n]), "i"),
    ("reshape[f]", lambda ns, x: ns.np.reshape(x, (-1,)), "f"),
    ("full_like[f]", lambda ns, x: ns.np.full_like(x, 2), "f"),
    ("linalg.norm[f]", lambda ns, x: ns.np.linalg.norm(x), "f"),
    ("linalg.det[f]", lambda ns, x: ns.np.linalg.det(x), "f"),
    ("einsum[f]", lambda ns, x: ns.np.einsum("ij,kj->ik", x, x), "f"),
    ("astype(float)[i]", lambda ns, n: n.astype(float), "i"),
    ("astype(int)[f]", lambda ns, x: x.astype(int), "f"),
    ("x * 2.0", lambda ns, x: x * 2.0, "f"),
    ("3 - n", lambda ns, n: 3 - n, "i"),
    ("n / 2", lambda ns, n: n / 2, "i"),
    ("n * 0.5", lambda ns, n: n * 0.5, "i"),
    ("b + 1.5", lambda ns, b: b + 1.5, "b"),
    ("x ** 2", lambda ns, x: x ** 2, "f"),
    ("x * np.float64", lambda ns, x: x * np.float64(2.0), "f"),
    ("n + np.int64", lambda ns, n: n + np.int64(1), "i"),
    ("n * np.float32", lambda ns, n: n * np.float32(2.0), "i"),
    *[(f"lax.{n}", _mod_fn("lax", n), "f") for n in
      ("exp", "sin", "rsqrt", "erf", "logistic", "square", "abs", "sign", "tanh", "lgamma", "erf_inv")],
    ("lax.add", lambda ns, x, n: ns.lax.add(x, ns.lax.convert_element_type(n, ns.np.float32)), "fi"),
    ("lax.integer_pow", lambda ns, x: ns.lax.integer_pow(x, 3), "f"),
    ("lax.max", lambda ns, x: ns.lax.max(x, x), "f"),
    ("lax.convert_element_type", lambda ns, x: ns.lax.convert_element_type(x, ns.np.int32), "f"),
    ("lax.select", lambda ns, b, x: ns.lax.select(b, x, x), "bf"),
    ("lax.dot", lambda ns, x: ns.lax.dot(x, x.T), "f"),
    ("lax.cumsum", lambda ns, n: ns.lax.cumsum(n), "i"),
    *[(f"nn.{n}", _mod_fn("nn", n), "f") for n in
      ("relu", "sigmoid", "softplus", "gelu", "silu", "log_softmax", "softmax", "logsumexp", "elu",
       "leaky_relu", "log_sigmoid", "relu6", "standardize")],
    ("nn.relu[i]", lambda ns, n: ns.nn.relu(n), "i"),
    ("nn.one_hot[i]", lambda ns, n: ns.nn.one_hot(n, 4), "i"),
    *[(f"special.{n}", _mod_fn("sp", n), "f") for n in
      ("erf", "erfc", "gammaln", "digamma", "expit", "logit", "ndtr", "ndtri", "logsumexp", "i0e", "entr")],
    ("special.expit[i]", lambda ns, n: ns.sp.expit(n), "i"),
    ("special.xlogy", lambda ns, x: ns.sp.xlogy(x, x), "f"),
    ("random.normal", lambda ns, k: ns.random.normal(k, (3,)), "k"),
    ("random.uniform", lambda ns, k: ns.random.uniform(k, (3,)), "k"),
    ("random.randint", lambda ns, k: ns.random.randint(k, (3,), 0, 10), "k"),
    ("random.bernoulli", lambda ns, k: ns.random.bernoulli(k, 0.5, (3,)), "k"),
    ("random.categorical", lambda ns, k: ns.random.categorical(k, np.zeros((2, 3), np.float32)), "k"),
    ("random.permutation", lambda ns, k: ns.random.permutation(k, 5), "k"),
    ("random.gamma", lambda ns, k: ns.random.gamma(k, 2.0, (3,)), "k"),
]
INPUTS = {"f": np.array([[0.2, 0.5, 0.7], [0.9, 0.1, 0.3], [0.4, 0.6, 0.8]], np.float32),
          "i": np.array([[1, 2, 3], [0, -1, 5], [2, 2, 7]], np.int32),
          "b": np.array([[True, False, True]] * 3), "F": 2.5, "I": 3}


def _inputs(kinds, mine):
    if mine:
        return [jitad.random.PRNGKey(0) if k == "k" else tnp.asarray(INPUTS[k]) if k in "fib" else INPUTS[k]
                for k in kinds]
    return [jax.random.PRNGKey(0) if k == "k" else INPUTS[k] for k in kinds]


def test_the_dtype_list_is_long_enough():
    assert len(SPECS) >= 100 and len({name for name, _, _ in SPECS}) == len(SPECS)


@pytest.mark.parametrize("spec", SPECS, ids=[s[0] for s in SPECS])
def test_result_dtype_as_jax(x64_off, spec):
    """Eager (on `jnp.Array`s, as a JAX program holds them) and staged (the traced value's
    dtype inside `jit`), the dtype JAX gives."""
    _, fn, kinds = spec
    want = jax.eval_shape(lambda *a: fn(J, *a), *_inputs(kinds, False)).dtype
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert np.asarray(fn(T, *_inputs(kinds, True))).dtype == want
        seen = []
        jitad.jit(lambda *a: seen.append(fn(T, *a).dtype) or 0).trace(*_inputs(kinds, True))
    assert seen == [want]


# -- jit, grad and vmap ---------------------------------------------------------------------

def _loss(ns, w, x, y):
    return ns.np.mean((ns.np.tanh(x @ w) - y) ** 2) + 0.5 * ns.np.sum(w ** 2)


def test_jit_grad_vmap_results_are_32_bit(x64_off):   # (the fast check; JAX's values: the next test)
    x = np.arange(6.0).reshape(2, 3)
    outs = (jitad.jit(lambda a: (a * 0.5, a.sum(), (a > 1).sum(), jitad.numpy.argmax(a)))(x),
            jitad.grad(lambda a: (a ** 2).sum())(x), jitad.vmap(lambda r: r * 2)(x),
            jitad.vmap(lambda n: n + 1)(np.arange(3)), jitad.jit(lambda n: n // 2)(7))
    dtypes = [np.asarray(leaf).dtype for leaf in jitad.tree.leaves(outs)]
    assert dtypes == [np.float32, np.float32, np.int32, np.int32, np.float32, np.float32, np.int32, np.int32]
    np.testing.assert_array_equal(outs[1], 2 * x.astype(np.float32))


@pytest.mark.slow
def test_jit_grad_vmap_take_float64_arguments_as_float32(x64_off):
    rng = np.random.default_rng(1)
    w, x, y = rng.normal(size=(3, 2)), rng.normal(size=(4, 3)), rng.normal(size=(4, 2))   # float64
    def run(ns):   # the same program through both
        loss = lambda *a: _loss(ns, *a)   # noqa: E731
        return (ns.jit(loss)(w, x, y), ns.grad(loss)(w, x, y), ns.jit(ns.grad(loss))(w, x, y),
                ns.vmap(lambda r: r * 2 + 1)(x), ns.jit(lambda n: n * 3 + 1)(np.arange(4)),
                ns.jit(lambda a, s: a * s)(x.astype(np.float32), 2.5))
    mine = run(T)
    same(mine, run(J), rtol=2e-6)
    assert all(np.asarray(leaf).dtype in (np.float32, np.int32) for leaf in jitad.tree.leaves(mine))


def test_int32_wraps_as_jax(x64_off):
    top = np.int32(2 ** 31 - 1)

    def run(ns):   # (one compiled program each)
        staged = ns.jit(lambda i, a, b: (i + 1, (i + 1) < 0, i * 65536, -i - 1, abs(-i - 1), (i + 1) // 3,
                                         a * 3, b.sum()))
        return (staged(top, np.array([7, -1]), np.arange(4)), ns.np.sum(ns.np.array([2 ** 30, 2 ** 30], ns.np.int32) * 2),
                ns.np.arange(3) * (2 ** 30), ns.np.asarray(np.arange(3)) + (2 ** 31 - 2))
    same(run(T), run(J))


def test_int32_bit_operations_as_jax(x64_off):
    n = np.array([-7, -1, 0, 1, 5, 2 ** 31 - 1, -2 ** 31], np.int32)

    def bits(ns, n):
        return (ns.np.right_shift(n, 2), ns.np.left_shift(n, 3), ns.np.invert(n), ns.np.bitwise_xor(n, 12345),
                ns.lax.shift_right_logical(n, np.int32(3)), ns.lax.population_count(n), ns.lax.clz(n),
                n * 65537, n // 3, n % 7)
    want = jax.jit(lambda n: bits(J, n))(n)   # (one compile, not one per op)
    same(bits(T, tnp.asarray(n)), want)
    same(jitad.jit(lambda n: bits(T, n))(n), want)


def test_an_int64_beyond_int32_is_kept_not_wrapped(x64_off):
    """jitad's difference: JAX keeps the low 32 bits of an int64 outside the int32 range;
    jitad keeps the value and its int64 dtype (its PRNG keys are such int64 words)."""
    big = np.array([2 ** 40 + 5, -1])
    assert jitad.jit(lambda a: a)(big).tolist() == big.tolist() and tnp.asarray(big).dtype == np.int64
    step = jitad.jit(lambda k: jitad.random.split(k))
    key = jitad.random.PRNGKey(3)
    keys = step(key)
    assert keys.tolist() == jitad.random.split(key).tolist()
    assert np.array_equal(jitad.random.key_data(keys), jax.random.split(jax.random.PRNGKey(3)))


def test_an_mlp_training_step_written_for_jax(x64_off):
    def train(ns, params, x, y, steps=3, lr=0.1):
        def predict(params, x):
            for w, b in params[:-1]:
                x = ns.nn.relu(x @ w + b)
            w, b = params[-1]
            return x @ w + b

        def loss(params):
            return ns.np.mean((predict(params, x) - y) ** 2)

        @ns.jit
        def step(params):
            grads = ns.grad(loss)(params)
            return [(w - lr * gw, b - lr * gb) for (w, b), (gw, gb) in zip(params, grads)], loss(params)
        losses = []
        for _ in range(steps):
            params, value = step(params)
            losses.append(value)
        return params, ns.np.stack(losses)
    rng = np.random.default_rng(0)
    params = [(rng.normal(size=(4, 8)) * 0.5, np.zeros(8)), (rng.normal(size=(8, 1)) * 0.5, np.zeros(1))]
    x, y = rng.normal(size=(16, 4)), rng.normal(size=(16, 1))
    same(train(T, params, x, y), train(J, params, x, y), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_random_draws_are_jax_bits(x64_off):
    def draws(ns, key):
        k1, k2, k3 = ns.random.split(key, 3)
        return (ns.random.uniform(k1, (5,)), ns.random.randint(k2, (5,), -3, 9), ns.random.bernoulli(k3, 0.3, (5,)),
                ns.random.normal(k1, (4,)))
    want, key = draws(J, jax.random.PRNGKey(7)), jitad.random.PRNGKey(7)
    same(draws(T, key), want, rtol=1e-6, atol=1e-7)
    same(jitad.jit(lambda k: draws(T, k))(key), want, rtol=1e-6, atol=1e-7)


# -- the setting ------------------------------------------------------------------------------

def test_switching_the_setting_never_reuses_the_other_code():
    f, g = jitad.jit(lambda x: x * 2.5), jitad.grad(lambda x: (x * x).sum())
    seen = []
    try:
        for on in (True, False, True, False):
            jitad.config.update("jax_enable_x64", on)
            seen.append((f(np.ones(2)).dtype, g(np.ones(2)).dtype, jitad.jit(lambda n: n + 1)(np.arange(2)).dtype))
    finally:
        jitad.config.update("jax_enable_x64", True)
    wide, narrow = (np.float64, np.float64, np.int64), (np.float32, np.float32, np.int32)
    assert seen == [wide, narrow, wide, narrow]


def test_switching_back_finds_the_code_compiled_under_each_setting():
    f = jitad.jit(lambda x: x * 2.5)
    reports = []
    try:
        for on in (True, True, False, True, False):
            jitad.config.update("jax_enable_x64", on)   # (the same value again changes nothing)
            assert f(np.ones(2)).dtype == (np.float64 if on else np.float32)
            reports.append(f.compile_report())
    finally:
        jitad.config.update("jax_enable_x64", True)
    assert reports[1] is reports[0] and reports[3] is reports[0] and reports[4] is reports[2]
    assert reports[2] is not reports[0]


@pytest.mark.parametrize("name, text, on", [("JAX_ENABLE_X64", "0", False), ("JAX_ENABLE_X64", "False", False),
                                            ("JITAD_ENABLE_X64", "0", False), ("JAX_ENABLE_X64", "1", True)])
def test_environment_variable_read_at_start(monkeypatch, name, text, on):
    monkeypatch.delenv("JAX_ENABLE_X64", raising=False)
    monkeypatch.delenv("JITAD_ENABLE_X64", raising=False)
    monkeypatch.setenv(name, text)
    assert Config().jax_enable_x64 is on


def test_context_manager_and_abstract_values():
    with jitad.enable_x64(False):   # jax.enable_x64's spelling
        assert tnp.zeros(2).dtype == np.float32
        assert jitad.eval_shape(lambda n: n + 1, np.arange(3)).dtype == np.int32
        assert jitad.eval_shape(lambda x: x * 2.0, np.ones(3)).dtype == np.float32
    assert jitad.config.jax_enable_x64 and tnp.zeros(2).dtype == np.float64


def test_initializers_and_stax_give_float32(x64_off):   # (the fast check; JAX's values: the next test)
    from jitad.example_libraries import stax
    draws = [jitad.nn.initializers.glorot_normal()(jitad.random.PRNGKey(0), (3, 4)),
             jitad.nn.initializers.zeros(None, (2,)), stax.serial(stax.Dense(4), stax.Relu)[0](
                 jitad.random.PRNGKey(1), (-1, 3))[1]]
    assert {np.asarray(leaf).dtype for leaf in jitad.tree.leaves(draws)} == {np.dtype(np.float32)}


@pytest.mark.slow
def test_initializers_and_stax_draw_jax_float32_values(x64_off):
    from jax.example_libraries import stax as jax_stax
    from jitad.example_libraries import stax
    for name in ("glorot_normal", "lecun_uniform", "normal"):
        mine = getattr(jitad.nn.initializers, name)()(jitad.random.PRNGKey(0), (3, 4))
        theirs = getattr(jax.nn.initializers, name)()(jax.random.PRNGKey(0), (3, 4))
        same(mine, theirs, atol=1e-7)
    init, apply = stax.serial(stax.Dense(4), stax.Relu, stax.Dense(2))
    jax_init, jax_apply = jax_stax.serial(jax_stax.Dense(4), jax_stax.Relu, jax_stax.Dense(2))
    params, jax_params = init(jitad.random.PRNGKey(1), (-1, 3))[1], jax_init(jax.random.PRNGKey(1), (-1, 3))[1]
    same(params, jax_params, atol=1e-7)
    same(apply(params, np.ones((5, 3))), jax_apply(jax_params, np.ones((5, 3))), rtol=1e-5)
