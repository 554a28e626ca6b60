"""jitad.random: JAX's key API on Threefry-2x32. Bits, keys and samplers against JAX's
own (bit for bit where JAX's arithmetic is exact), staged against eager, and the
statistics of the streams: moments, independence of split and folded keys, no overlap
between neighbouring keys."""
import numpy as np
import pytest

import jitad
from jitad import random as R

jax = pytest.importorskip("jax")
jr = jax.random

SEEDS = (0, 42, 2 ** 32 - 1, 123456789)


@pytest.mark.parametrize("seed", SEEDS)
def test_keys_split_fold_in_and_bits_are_jaxs(seed):
    with jax.enable_x64(False):   # (JAX's 32-bit mode, whatever another test module left set)
        _keys_split_fold_in_and_bits_are_jaxs(seed)


def _keys_split_fold_in_and_bits_are_jaxs(seed):
    key, jkey = R.key(seed), jr.PRNGKey(seed)
    np.testing.assert_array_equal(R.key_data(key), jkey)
    np.testing.assert_array_equal(R.key_data(R.split(key, 5)), jr.split(jkey, 5))
    np.testing.assert_array_equal(R.key_data(R.split(key, (2, 3))), jr.split(jkey, (2, 3)))
    for data in (0, 7, 2 ** 31 + 5):
        np.testing.assert_array_equal(R.key_data(R.fold_in(key, data)), jr.fold_in(jkey, data))
    np.testing.assert_array_equal(R.bits(key, (3, 4)), jr.bits(jkey, (3, 4)))
    k1, k2 = R.split(key)                   # a JAX key array is accepted as it is
    np.testing.assert_array_equal(R.uniform(k2, (6,)), R.uniform(jr.split(jkey)[1], (6,)))


def _draws(r, key, dtype):
    """The same draws from jitad.random or jax.random (`r`)."""
    x = np.arange(15.0).reshape(5, 3)
    logits = np.log(np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]], dtype))
    p = np.array([0.1, 0.2, 0.3, 0.4], dtype)
    ints = np.int32 if dtype == np.float32 else np.int64
    return {"uniform": r.uniform(key, (5, 3), dtype), "uniform_ab": r.uniform(key, (7,), dtype, -2.0, 3.0),
            "randint": r.randint(key, (20,), 3, 17, ints), "randint_wide": r.randint(key, (20,), -5, 1000003, ints),
            "permutation": r.permutation(key, 12), "permutation_x": r.permutation(key, x),
            "choice": r.choice(key, 10, (4,), replace=False), "choice_replace": r.choice(key, 10, (2, 3)),
            "choice_p": r.choice(key, 4, (30,), p=p), "bernoulli": r.bernoulli(key, dtype(0.3), (50,)),
            "categorical": r.categorical(key, logits, shape=(4, 2)), "normal": r.normal(key, (200,), dtype),
            "truncated_normal": r.truncated_normal(key, -1.0, 2.0, (50,), dtype)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_samplers_match_jax(dtype):
    """Bit for bit, but for a * b + c that XLA may fuse and erfinv's last bits."""
    key = R.key(42)
    with jax.enable_x64(dtype == np.float64):
        theirs = jax.jit(lambda k: _draws(jr, k, dtype))(jr.PRNGKey(42))   # one XLA compile
    loose = {"uniform_ab": 3e-7 if dtype == np.float32 else 1e-15, "normal": 1e-6 if dtype == np.float32 else 1e-13,
             "truncated_normal": 1e-6 if dtype == np.float32 else 1e-13}
    for name, mine in _draws(R, key, dtype).items():
        if name == "choice_replace" and dtype == np.float32:
            continue   # randint's default int64 algorithm is JAX's with x64
        if name in loose:
            np.testing.assert_allclose(mine, theirs[name], rtol=loose[name], atol=loose[name], err_msg=name)
        else:
            np.testing.assert_array_equal(mine, theirs[name], err_msg=name)


def test_shapes_and_dtypes_as_jax():
    key = R.key(0)
    assert np.shape(key) == () and R.split(key).shape == (2,) and R.split(key, 4).shape == (4,)
    assert R.key_data(R.split(key, 4)).shape == (4, 2) and R.key_data(key).dtype == np.uint32
    assert R.uniform(key).shape == () and R.uniform(key, (2, 3)).dtype == np.float64
    assert R.uniform(key, 3, dtype=np.float32).dtype == np.float32
    assert R.normal(key, (2,), "float32").dtype == np.float32
    assert R.randint(key, (3,), 0, 5).dtype == np.int64 and R.bernoulli(key, 0.5, (3,)).dtype == np.bool_
    assert R.categorical(key, np.zeros((4, 3))).shape == (4,)
    assert R.categorical(key, np.zeros((4, 3)), axis=0).shape == (3,)
    assert R.choice(key, np.arange(12.0).reshape(4, 3), (5,), axis=0).shape == (5, 3)
    assert R.multivariate_normal(key, np.zeros(3), np.eye(3), (4,)).shape == (4, 3)
    assert R.bits(key, (2,)).dtype == np.uint32


def test_staged_keys_give_the_eager_values():
    key = R.key(5)
    fns = {
        "uniform": lambda k: R.uniform(R.split(k)[1], (4, 3)),
        "normal32": lambda k: R.normal(R.fold_in(k, 3), (6,), np.float32),
        "normal": lambda k: R.normal(k, (6,)),
        "randint": lambda k: R.randint(k, (5,), -3, 9),
        "permutation": lambda k: R.permutation(k, np.arange(7.0)),
        "categorical": lambda k: R.categorical(k, np.log(np.array([0.1, 0.7, 0.2])), shape=(6,)),
        "truncated": lambda k: R.truncated_normal(k, -0.5, 0.5, (5,)),
        "gamma": lambda k: R.gamma(k, np.array([0.4, 1.0, 3.0])),
        "mvn": lambda k: R.multivariate_normal(k, np.ones(2), np.array([[2.0, 0.5], [0.5, 1.0]]), (3,)),
    }
    for name, fn in fns.items():
        np.testing.assert_allclose(jitad.jit(fn)(key), fn(key), rtol=1e-14, atol=1e-15, err_msg=name)
    words = np.random.default_rng(0).integers(-2 ** 63, 2 ** 63 - 1, 64, dtype=np.int64)   # every bit pattern
    np.testing.assert_array_equal(jitad.jit(jitad.vmap(lambda k: R.split(k, 3)))(words),
                                  np.stack([R.split(k, 3) for k in words]))
    # a per-step key inside a compiled loop, and a seed given as a staged int
    loop = jitad.jit(lambda k: jitad.FOR(0, 10, lambda i, s: s + R.uniform(R.fold_in(k, i)), 0.0))
    assert loop(key) == pytest.approx(sum(R.uniform(R.fold_in(key, i)) for i in range(10)), rel=1e-14)
    np.testing.assert_array_equal(jitad.jit(lambda s: R.uniform(R.key(s), (3,)))(9), R.uniform(9, (3,)))


def test_vmap_over_keys_and_gradient_through_the_affine_map():
    keys = R.split(R.key(1), 4)
    np.testing.assert_array_equal(jitad.vmap(lambda k: R.normal(k, (3,)))(keys),
                                  np.stack([R.normal(k, (3,)) for k in keys]))
    g = jitad.grad(lambda lo: jitad.sum(R.uniform(keys[0], (5,), minval=lo, maxval=2.0)))(0.5)
    assert g == pytest.approx(np.sum(1.0 - R.uniform(keys[0], (5,))))


def _corr(a, b):
    return np.corrcoef(np.ravel(a), np.ravel(b))[0, 1]


def test_moments():
    n = 200_000
    u, z = R.uniform(R.key(3), (n,)), R.normal(R.key(4), (n,))
    assert abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / n) and abs(u.var() - 1 / 12) < 1e-3
    assert 0.0 <= u.min() and u.max() < 1.0
    assert abs(z.mean()) < 5 / np.sqrt(n) and abs(z.var() - 1.0) < 0.01
    assert abs(np.mean(z ** 3)) < 0.03 and abs(np.mean(z ** 4) - 3.0) < 0.06
    b = R.bernoulli(R.key(5), 0.3, (n,))
    assert abs(b.mean() - 0.3) < 5 * np.sqrt(0.21 / n)
    counts = np.bincount(R.randint(R.key(6), (n,), 0, 7), minlength=7)
    assert np.all(np.abs(counts / n - 1 / 7) < 5 * np.sqrt(1 / 7 / n))
    freq = np.bincount(R.categorical(R.key(7), np.log(np.array([0.1, 0.2, 0.7])), shape=(n,)), minlength=3) / n
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.7], atol=0.005)
    t = R.truncated_normal(R.key(8), -1.0, 0.5, (n,))
    assert -1.0 < t.min() and t.max() < 0.5
    cov = np.array([[2.0, 0.6], [0.6, 1.0]])
    m = R.multivariate_normal(R.key(9), np.array([1.0, -1.0]), cov, (n,))
    np.testing.assert_allclose(np.cov(m.T), cov, atol=0.03)
    np.testing.assert_allclose(m.mean(0), [1.0, -1.0], atol=0.02)
    m = 40_000   # gamma draws 12 proposals per sample: fewer samples
    for a in (0.5, 1.0, 4.0):   # mean and variance a
        g = R.gamma(R.key(10), a, (m,))
        assert g.min() > 0 and abs(g.mean() - a) < 5 * np.sqrt(a / m) and abs(g.var() / a - 1) < 0.1
    b = R.beta(R.key(12), 2.0, 5.0, (m,))
    assert abs(b.mean() - 2 / 7) < 0.004 and abs(b.var() - 10 / 392) < 0.001
    d = R.dirichlet(R.key(13), np.array([1.0, 2.0, 3.0]), (m // 10,))
    np.testing.assert_allclose(d.sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(d.mean(0), [1 / 6, 2 / 6, 3 / 6], atol=0.012)


def test_split_and_folded_keys_are_independent():
    n, bound = 4096, 5 / np.sqrt(4096)
    key = R.key(11)
    a, b = R.split(key)
    assert abs(_corr(R.uniform(a, (n,)), R.uniform(b, (n,)))) < bound
    assert abs(_corr(R.uniform(key, (n,)), R.uniform(a, (n,)))) < bound
    folded = np.stack([R.uniform(R.fold_in(key, i), (n,)) for i in range(4)])
    assert np.all(np.abs(np.corrcoef(folded)[np.triu_indices(4, 1)]) < bound)
    # the first draw of keys split from one key, across many keys: no pattern
    firsts = np.array([R.uniform(k) for k in R.split(key, n)])
    assert abs(_corr(firsts[:-1], firsts[1:])) < bound


def test_neighbouring_int_keys_do_not_overlap():
    """An int given as a key is a seed of the cipher, not an offset into one stream."""
    n = 40
    for k in (0, 1, 1000):
        assert not np.any(np.isin(R.uniform(k, (n,)), R.uniform(k + 1, (n,))))
    # JAX-style code making a key per step: lag-1 autocorrelation of the draws near 0
    steps = np.stack([R.uniform(t, (n,)) for t in range(400)])
    bound = 5 / np.sqrt(steps[1:].size)
    assert abs(_corr(steps[:-1], steps[1:])) < bound
    assert abs(_corr(steps[:-1, 1:], steps[1:, :-1])) < bound   # the shifted overlap of an offset stream


def test_bad_keys_are_refused():
    with pytest.raises(jitad.ArgumentError, match="a key is an int"):
        R.uniform(1.5, (2,))
    with pytest.raises(jitad.ArgumentError, match="one key"):
        R.uniform(R.split(R.key(0), 3), (2,))
    with pytest.raises(jitad.ArgumentError, match="float dtype"):
        R.uniform(R.key(0), (2,), dtype=np.int64)
    with pytest.raises(jitad.ArgumentError, match="without replacement"):
        R.choice(R.key(0), 3, (4,), replace=False)
    with pytest.raises(jitad.ArgumentError, match="data must be an int"):
        R.fold_in(R.key(0), 1.5)
    with pytest.raises(jitad.ArgumentError, match="a key is an int"):
        jitad.jit(lambda x: R.uniform(x, (2,)))(1.0)


# -- NumPy's and Python's generators while tracing: frozen numbers get a warning -----

_rs = np.random.RandomState(0)


def _bbvi_objective(params, t):
    """autograd's black-box VI style: noise drawn inside the differentiated function."""
    mean, log_std = params[:2], params[2:]
    samples = np.random.randn(5, 2) * jitad.exp(log_std) + mean
    return -jitad.mean(jitad.sum(samples ** 2, axis=1)) + jitad.sum(log_std)


def test_numpy_draws_while_tracing_warn_with_the_call_and_the_fix():
    params = np.zeros(4)
    with pytest.warns(jitad.JitadWarning, match=r"(?s)_bbvi_objective.*np\.random.*`randn`.*jitad\.random"):
        jitad.jit(jitad.grad(_bbvi_objective), static_argnums=1)(params, 0)   # (grad alone draws per call)
    with pytest.warns(jitad.JitadWarning, match="RandomState"):
        jitad.jit(lambda x: x * _rs.standard_normal())(1.0)
    gen = np.random.default_rng(0)
    with pytest.warns(jitad.JitadWarning, match="Generator"):
        jitad.jit(lambda x: x + gen.normal(size=3))(np.ones(3))
    import random
    with pytest.warns(jitad.JitadWarning, match="Python's `random`"):
        jitad.vmap(lambda x: x * random.random())(np.ones(3))


def test_keys_give_new_numbers_per_call_without_a_warning():
    import warnings

    def objective(params, key):
        samples = R.normal(key, (5, 2)) * jitad.exp(params[2:]) + params[:2]
        return -jitad.mean(jitad.sum(samples ** 2, axis=1)) + jitad.sum(params[2:])

    data = np.random.randn(4)   # NumPy outside the traced function: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", jitad.JitadWarning)
        step = jitad.jit(jitad.grad(objective))
        g1, g2 = step(data, R.key(1)), step(data, R.key(2))
    assert not np.allclose(g1, g2)
