"""Generated cases: functions of `jitad.numpy` on generated shapes (empty and size-1 axes
included), dtypes (float64, float32, int64, bool) and values holding 0, -0.0, +-inf and
NaN, against `jax.numpy` (x64). The default run takes a fixed sample of the cases (plain,
then all of them in one compiled program); `-m slow` runs every case."""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp_ours

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp_ref = jax.numpy

SHAPES = [(0,), (1,), (5,), (1, 3), (3, 1), (2, 3), (2, 0)]
DTYPES = [np.float64, np.float32, np.int64, np.bool_]
EDGES = np.array([0.0, -0.0, np.inf, -np.inf, np.nan])

# name, fn(m, x), dtypes it takes, whether empty arrays are in its domain
FUNCS = [
    ("median[-1]", lambda m, x: m.median(x, axis=-1), (np.float64, np.float32, np.int64), False),
    ("quantile[0]", lambda m, x: m.quantile(x, 0.25, axis=0, method="midpoint"), (np.float64, np.float32), False),
    ("nanmedian", lambda m, x: m.nanmedian(x, axis=-1, keepdims=True), (np.float64,), False),
    ("nanmax[-1]", lambda m, x: m.nanmax(x, axis=-1), (np.float64, np.float32, np.int64), False),
    ("nansum", lambda m, x: m.nansum(x, axis=0), (np.float64, np.float32, np.int64, np.bool_), True),
    ("nanmean", lambda m, x: m.nanmean(x, axis=-1), (np.float64, np.float32), False),
    ("nancumsum", lambda m, x: m.nancumsum(x, axis=-1), (np.float64, np.float32, np.int64), True),
    ("sum[where,initial]", lambda m, x: m.sum(x, axis=-1, where=x != 0, initial=1), DTYPES, True),
    ("max[initial]", lambda m, x: m.max(x, axis=0, initial=-5), (np.float64, np.float32, np.int64), True),
    ("mean[dtype]", lambda m, x: m.mean(x, axis=-1, dtype=np.float64), DTYPES, False),
    ("var[ddof]", lambda m, x: m.var(x, axis=0, ddof=1), (np.float64, np.float32, np.int64), False),
    ("ptp", lambda m, x: m.ptp(x, axis=-1), (np.float64, np.float32, np.int64), False),
    ("cumulative_sum", lambda m, x: m.cumulative_sum(x, axis=-1, include_initial=True), DTYPES[:3], True),
    ("isposinf_isneginf", lambda m, x: (m.isposinf(x), m.isneginf(x)), (np.float64, np.float32), True),
    ("signbit", lambda m, x: m.signbit(x), (np.float64, np.float32, np.int64), True),
    ("copysign", lambda m, x: m.copysign(1.5, x), (np.float64, np.float32), True),
    ("heaviside", lambda m, x: m.heaviside(x, 0.5), (np.float64, np.float32), True),
    ("isclose[equal_nan]", lambda m, x: m.isclose(x, x * 1.0000001, equal_nan=True), (np.float64,), True),
    ("bitwise_xor", lambda m, x: m.bitwise_xor(x, 6), (np.int64, np.bool_), True),
    ("flip_insert", lambda m, x: m.insert(m.ravel(x), 0, 7), DTYPES, True),
    ("delete", lambda m, x: m.delete(x, np.array([0]), axis=0), DTYPES, False),
    ("isin", lambda m, x: m.isin(x, np.array([0, 1])), DTYPES, True),
    ("take[fill]", lambda m, x: m.take(m.ravel(x), np.array([0, 3, -1, 40])), (np.float64, np.float32), False),
    ("unique[size]", lambda m, x: m.unique(x, size=4), (np.float64, np.int64), False),
    ("nonzero[size]", lambda m, x: m.nonzero(x, size=3), DTYPES, True),
    ("cov", lambda m, x: m.cov(x), (np.float64,), False),
]


def value(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-3, 3, shape)
    if dtype in (np.float64, np.float32) and x.size:
        flat = x.reshape(-1)
        picks = rng.choice(flat.size, size=min(2, flat.size), replace=False)
        flat[picks] = rng.choice(EDGES, size=len(picks))
    if dtype == np.bool_:
        return x > 0
    return np.round(x).astype(dtype) if dtype == np.int64 else x.astype(dtype)


CASES = [(f, shape, dtype) for f in FUNCS for shape in SHAPES for dtype in f[2]
         if (f[3] or 0 not in shape)]
SAMPLE = CASES[::9]


def _id(case):
    (name, *_), shape, dtype = case
    return f"{name}-{'x'.join(map(str, shape))}-{np.dtype(dtype).name}"


def leaves(tree):
    return [leaf for t in tree for leaf in leaves(t)] if isinstance(tree, (tuple, list)) else [tree]


def check(got, want, name):
    for g, w in zip(leaves(got), leaves(want), strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"{name}: shape {g.shape}, JAX's {w.shape}"
        assert g.dtype == w.dtype or (g.dtype.kind == w.dtype.kind == "i"), f"{name}: {g.dtype}, JAX's {w.dtype}"
        rtol = 1e-5 if w.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=rtol,
                                   equal_nan=True, err_msg=name)


def run_plain(case, seed=0):
    (_, fn, _, _), shape, dtype = case
    x = value(shape, dtype, seed)
    with np.errstate(all="ignore"):
        got = fn(jnp_ours, x)
    check(got, jax.jit(lambda x: fn(jnp_ref, x))(x), _id(case))


@pytest.mark.parametrize("case", SAMPLE, ids=[_id(c) for c in SAMPLE])
def test_sample_plain(case):
    run_plain(case)


def test_sample_staged_in_one_program():
    xs = [value(shape, dtype, 0) for _, shape, dtype in SAMPLE]
    outs = jitad.jit(lambda *xs: tuple(c[0][1](jnp_ours, x) for c, x in zip(SAMPLE, xs)))(*xs)
    for case, x, got in zip(SAMPLE, xs, outs):
        check(got, jax.jit(lambda x, fn=case[0][1]: fn(jnp_ref, x))(x), _id(case) + " (jit)")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_every_case_plain_and_staged(case):
    run_plain(case, seed=1)
    (_, fn, _, _), shape, dtype = case
    x = value(shape, dtype, 1)
    check(jitad.jit(lambda x: fn(jnp_ours, x))(x), jax.jit(lambda x: fn(jnp_ref, x))(x), _id(case) + " (jit)")
