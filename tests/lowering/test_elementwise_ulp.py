"""Every elementwise function with a NumPy twin agrees with NumPy to 1 ulp, eagerly and
compiled, in float64 and float32, on a grid of powers of two, integers, halves, signed
zeros, infinities, NaN and random values over many magnitudes; and is exact where the
exact result is a float (log2 of a power of two, exp2 of an integer, ...).

A float32 result may be 1 ulp from NumPy's float32 result or from NumPy's float64 result
rounded to float32 (NumPy's float32 functions are themselves 1 to 2 ulp from the
correctly rounded value in places).
"""
import numpy as np
import pytest

import jitad

UNARY = ["exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tanh", "arcsin", "arccos", "arctan", "abs",
         "square", "tan", "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "log2", "log10", "exp2", "sign",
         "floor", "ceil", "trunc", "round", "reciprocal", "sinc", "deg2rad", "rad2deg", "degrees", "radians"]
BINARY = ["maximum", "minimum", "arctan2", "hypot", "logaddexp", "logaddexp2", "fmax", "fmin", "mod",
          "remainder", "power"]

# Known misses (measured ulp error, float64 / float32), each left to the function's owner:
# arccosh(x < -1e8) is -inf where NumPy gives NaN; logaddexp/logaddexp2(tiny, very negative)
# lose the tiny term (log(1 + e^-256) read as 0 plus the tiny operand: relative error
# ~1e16 ulp, absolute ~1e-112); tanh in float64 is 2 ulp near 1e-4 (the vectorized tanh);
# sinc(x) for float32 x past ~1e37 is NaN (pi x overflows float32); tan (sin / cos) is 2 ulp
# in float32 at 65536. (Also: arcsinh(-0.0) is +0.0, NumPy -0.0.)
MISSES = {"tan": "2 ulp (float32)", "logaddexp": "tiny + very negative", "logaddexp2": "tiny + very negative",
          "tanh": "2 ulp (float64)", "sinc": "float32 overflow of pi x"}


def grid(dtype):
    info = np.finfo(dtype)
    powers = np.exp2(np.arange(info.minexp - info.nmant, info.maxexp, dtype=np.float64)).astype(dtype)
    ints = np.arange(-20, 21).astype(dtype)
    rng = np.random.default_rng(0)
    rand = (rng.standard_normal(300) * np.exp(rng.uniform(-8, 8, 300))).astype(dtype)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 0.1, -0.1, 0.9, -0.9, 0.99, 1e-7, 1e3], dtype)
    return np.concatenate([powers, -powers, ints, ints + dtype(0.5), ints * dtype(0.25), rand, special])


def ulps(got, want):
    """|got - want| in units of the last place of the larger (0 where equal or both NaN)."""
    got, want = np.asarray(got), np.asarray(want)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(all="ignore"):
        d = np.abs(got.astype(np.float64) - want.astype(np.float64)) / \
            np.spacing(np.maximum(np.abs(got), np.abs(want))).astype(np.float64)
    return np.where(same, 0.0, np.where(np.isnan(d), np.inf, d))


def error(got, fn, *args):
    """The ulp error of `got` against NumPy (float32: the nearer of NumPy's float32 result
    and its float64 result rounded)."""
    with np.errstate(all="ignore"):
        want = fn(*args)
        u = ulps(got, want)
        if want.dtype == np.float32:
            u = np.minimum(u, ulps(got, fn(*(a.astype(np.float64) for a in args)).astype(np.float32)))
    return u


def _check(name, got, fn, args, mode):
    """A line naming the miss, or None."""
    if np.asarray(got).dtype != args[0].dtype:
        return f"{name} ({mode}): dtype {np.asarray(got).dtype}"
    u = error(got, fn, *args)
    k = int(np.argmax(u))
    if u.max() > 1:
        return f"{name} ({mode}): {u.max()} ulp at {tuple(a[k] for a in args)}: {np.asarray(got)[k]!r}, " \
               f"NumPy {fn(*(a[k] for a in args))!r}"


_COMPILED = {}


def compiled(names, arity):
    """All the functions of `names` in one compiled program (one compile per dtype)."""
    key = (tuple(names), arity)
    if key not in _COMPILED:
        _COMPILED[key] = jitad.jit(lambda *a: tuple(getattr(jitad, n)(*a) for n in names))
    return _COMPILED[key]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_unary_within_one_ulp_of_numpy(dtype):
    x = grid(dtype)
    outs = compiled(UNARY, 1)(x)
    misses = []
    for name, got in zip(UNARY, outs):
        with np.errstate(all="ignore"):
            eager = getattr(jitad, name)(x)
        misses += [_check(name, value, getattr(np, name), (x,), mode)
                   for mode, value in (("compiled", got), ("eager", eager)) if name not in MISSES]
    misses = [m for m in misses if m]
    assert not misses, "\n".join(misses)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_binary_within_one_ulp_of_numpy(dtype):
    rng = np.random.default_rng(1)
    x = grid(dtype)
    a, b = rng.choice(x, 600), rng.choice(x, 600)
    outs = compiled(BINARY, 2)(a, b)
    misses = []
    for name, got in zip(BINARY, outs):
        with np.errstate(all="ignore"):
            eager = getattr(jitad, name)(a, b)
        misses += [_check(name, value, getattr(np, name), (a, b), mode)
                   for mode, value in (("compiled", got), ("eager", eager)) if name not in MISSES]
    misses = [m for m in misses if m]
    assert not misses, "\n".join(misses)


@pytest.mark.parametrize("name", sorted(MISSES))
def test_known_misses_still_miss(name):
    """Each entry of MISSES is a real miss (drop it from the list once fixed)."""
    for dtype in (np.float64, np.float32):
        x = grid(dtype)
        if name in BINARY:
            rng = np.random.default_rng(1)
            args = (rng.choice(x, 600), rng.choice(x, 600))
            got = compiled(BINARY, 2)(*args)[BINARY.index(name)]
        else:
            args = (x,)
            got = compiled(UNARY, 1)(x)[UNARY.index(name)]
        with np.errstate(all="ignore"):
            eager = getattr(jitad, name)(*args)
        if max(error(got, getattr(np, name), *args).max(), error(eager, getattr(np, name), *args).max()) > 1:
            return
    pytest.fail(f"{name} is within 1 ulp of NumPy now: remove it from MISSES")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_exact_where_the_result_is_a_float(dtype):
    info = np.finfo(dtype)
    k = np.arange(info.minexp - info.nmant, info.maxexp).astype(dtype)
    p = np.exp2(k.astype(np.float64)).astype(dtype)
    tens = np.arange(0, 23 if dtype == np.float64 else 11).astype(dtype)
    even = k[(k % 2 == 0) & (k > info.minexp)]
    zero = np.array([0.0, -0.0], dtype)
    cases = [("log2", p, k), ("exp2", k, p), ("log10", (10.0 ** tens.astype(np.float64)).astype(dtype), tens),
             ("sqrt", np.exp2(even.astype(np.float64)).astype(dtype), np.exp2(even / 2).astype(dtype))]
    cases += [(n, zero, zero) for n in ("sin", "tan", "expm1", "log1p", "sinh", "arctanh", "arcsin",
                                        "arctan", "tanh")]
    cases += [(n, zero, np.ones(2, dtype)) for n in ("exp", "cos", "cosh", "exp2")]
    cases += [("log", np.ones(1, dtype), np.zeros(1, dtype)), ("log2", np.ones(1, dtype), np.zeros(1, dtype))]
    names = [c[0] for c in cases]
    program = jitad.jit(lambda *xs: tuple(getattr(jitad, n)(x) for n, x in zip(names, xs)))
    compiled_outs = program(*[c[1] for c in cases])
    for (name, x, want), got_compiled in zip(cases, compiled_outs):
        for mode, got in (("compiled", got_compiled), ("eager", getattr(jitad, name)(x))):
            assert got.dtype == dtype
            bad = got != want
            assert not bad.any(), f"{name} ({mode}) of {x[bad][:3]}: {got[bad][:3]}, want {want[bad][:3]}"
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=f"{name} ({mode}) sign")


# -- special functions (no NumPy twin): against SciPy ----------------------------------

SPECIAL_X = np.concatenate([np.linspace(-20.3, 30.0, 1001), np.linspace(1.3, 1.6, 301), np.geomspace(1e-8, 1e8, 100),
                            [0.0, -0.0, -1.0, -2.0, np.inf, -np.inf, np.nan, 1e300, -1e300, 0.5, -0.5]])


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_polygamma_matches_scipy(n):
    special = pytest.importorskip("scipy.special")
    x = SPECIAL_X if n <= 1 else SPECIAL_X[SPECIAL_X > 0]   # n >= 2: NaN for x < 0
    with np.errstate(all="ignore"):
        want = special.polygamma(n, x) if n else special.digamma(x)
    f = jitad.jit(lambda x: jitad.polygamma(n, x))
    with np.errstate(all="ignore"):
        x32 = x.astype(np.float32)
        want32 = special.polygamma(n, x32.astype(np.float64)) if n else special.digamma(x32.astype(np.float64))
    # x < 0: digamma's roots there (one in each interval) are only absolutely accurate
    for got, x, want, tol in ((f(x), x, want, 1e-13), (jitad.polygamma(n, x), x, want, 1e-13),   # noqa: B020
                              (f(x32), x32, want32, 2e-7)):
        finite = np.isfinite(want.astype(got.dtype))
        np.testing.assert_array_equal(got[~finite], want[~finite].astype(got.dtype))
        bound = tol * np.abs(want[finite]) + tol * (x[finite] < 0)
        err = np.abs(got[finite] - want[finite])
        assert (err <= bound).all(), f"{got.dtype}: error {err.max()} at x = {x[finite][np.argmax(err / bound)]}"
    assert jitad.digamma(2.0) == jitad.polygamma(0, 2.0)


def test_lgamma_matches_scipy_and_its_derivatives_are_polygamma():
    special = pytest.importorskip("scipy.special")
    x = SPECIAL_X[SPECIAL_X != -np.inf]   # C's lgamma(-inf) is inf, SciPy's -inf
    with np.errstate(all="ignore"):
        want = special.gammaln(x)
    for got in (jitad.jit(jitad.lgamma)(x), jitad.lgamma(x)):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)
    for dtype in (np.float32, np.float64):
        assert jitad.jit(jitad.lgamma)(np.ones(3, dtype)).dtype == dtype
    xs = np.array([-2.5, -0.3, 0.7, 3.2, 40.0])
    d1 = jitad.jit(jitad.grad(lambda v: jitad.sum(jitad.lgamma(v))))(xs)
    d2 = jitad.jit(jitad.grad(lambda v: jitad.sum(jitad.digamma(v))))(xs)
    np.testing.assert_allclose(d1, special.digamma(xs), rtol=1e-13)
    np.testing.assert_allclose(d2, special.polygamma(1, xs), rtol=1e-13)
    jitad.testing.check_grads(lambda v: jitad.sum(jitad.lgamma(v) * jitad.digamma(v)), (xs,), rtol=1e-5)
    jitad.testing.check_grads(lambda v: jitad.sum(jitad.lgamma(v) * jitad.digamma(v)), (xs[2:],), order=2, rtol=1e-4)
    with pytest.raises(jitad.JitadError, match="polygamma"):
        jitad.polygamma(-1, 1.0)
    with pytest.raises(jitad.JitadError, match="polygamma"):
        jitad.polygamma(1.5, 1.0)
