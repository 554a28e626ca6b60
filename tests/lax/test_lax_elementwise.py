"""`jitad.lax`'s elementwise functions against `jax.lax` (x64) on edge values: zeros of
both signs, infinities, NaN, halves; one staged program per group."""
import numpy as np
import pytest

from .lax_reference import EDGES, INTS, INTS2, OTHER, assert_same, compare_group, jax, jlax

import jitad
from jitad import lax
from jitad.testing import check_grads

UNARY = ["abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "ceil", "cos", "cosh", "erf", "erfc",
         "erf_inv", "exp", "exp2", "expm1", "floor", "is_finite", "log", "log1p", "logistic", "neg", "rsqrt",
         "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh", "reciprocal", "lgamma", "digamma",
         "stop_gradient"]
BINARY = ["add", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "nextafter", "eq", "ne", "lt", "le",
          "gt", "ge"]
INT_BINARY = ["add", "sub", "mul", "div", "rem", "max", "min", "bitwise_and", "bitwise_or", "bitwise_xor",
              "shift_left", "shift_right_logical", "shift_right_arithmetic", "eq", "lt"]
LOOSE = {"erf_inv": 1e-9, "lgamma": 1e-10, "digamma": 1e-10, "tan": 1e-11, "cbrt": 1e-13}


def _table(names, ours=lax, theirs=jlax):
    return [(n, getattr(ours, n), getattr(theirs, n)) for n in names]


def test_unary_floats_on_edge_values():
    compare_group(_table(UNARY), (EDGES,), rtol=1e-9)
    x = np.array([0.25, -0.9, 0.999, -1.0, 1.0, 2.0, 1e-300])   # erf_inv's domain, more closely
    assert_same(jitad.jit(lax.erf_inv)(x), jlax.erf_inv(x), rtol=1e-12)


def test_unary_eagerly():
    compare_group(_table(["abs", "sign", "floor", "round", "is_finite", "logistic", "rsqrt"]), (EDGES,), jit=False)


def test_binary_floats_on_edge_values():
    compare_group(_table(BINARY), (EDGES, OTHER), rtol=1e-12)


def test_integer_arithmetic_and_bits():
    compare_group(_table(INT_BINARY), (INTS, INTS2))
    compare_group(_table(["population_count", "clz", "bitwise_not", "neg", "sign", "abs"]), (INTS,))
    b1, b2 = np.array([True, False, True, False]), np.array([True, True, False, False])
    compare_group(_table(["bitwise_and", "bitwise_or", "bitwise_xor"]), (b1, b2))
    compare_group(_table(["shift_left", "shift_right_logical", "shift_right_arithmetic"]),
                  (np.array([-8, 8, 1, -1, 5]), np.array([1, 63, 64, 70, -1])))


def test_integer_division_by_zero_is_xla_s():
    compare_group(_table(["div", "rem"]), (np.array([7, -7, 0]), np.array([0, 0, 0])))


def test_round_both_methods():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, -0.0, 0.0, 2.4, -2.6, np.inf, np.nan])
    table = [("away", lambda x: lax.round(x), lambda x: jlax.round(x)),
             ("even", lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
              lambda x: jlax.round(x, jlax.RoundingMethod.TO_NEAREST_EVEN)),
             ("even-int", lambda x: lax.round(x, 1), lambda x: jlax.round(x, 1))]
    compare_group(table, (x,))
    assert np.signbit(jitad.jit(lax.round)(np.array([-0.0, -0.3])) ).all()


def test_powers_clamp_and_conversions():
    x = np.array([0.0, -0.0, 1.5, -2.0, np.inf, np.nan])
    table = [(f"integer_pow{k}", lambda x, k=k: lax.integer_pow(x, k), lambda x, k=k: jlax.integer_pow(x, k))
             for k in (0, 1, 2, 3, -1, -2, 5)]
    table += [("clamp", lambda x: lax.clamp(-1.0, x, 1.0), lambda x: jlax.clamp(-1.0, x, 1.0)),
              ("to_int", lambda x: lax.convert_element_type(np.where(np.isfinite(x), x, 0), np.int64)
               if False else lax.convert_element_type(x * 0 + 2.7, np.int64),
               lambda x: jlax.convert_element_type(x * 0 + 2.7, np.int64)),
              ("to_f32", lambda x: lax.convert_element_type(x, np.float32), lambda x: jlax.convert_element_type(x, np.float32)),
              ("to_bool", lambda x: lax.convert_element_type(x, np.bool_), lambda x: jlax.convert_element_type(x, np.bool_)),
              ("bits64", lambda x: lax.bitcast_convert_type(x, np.int64), lambda x: jlax.bitcast_convert_type(x, np.int64)),
              ("bits_back", lambda x: lax.bitcast_convert_type(lax.bitcast_convert_type(x, np.int64), np.float64),
               lambda x: x)]
    compare_group(table, (x,))
    f32 = np.array([1.0, -0.0, 3.5], np.float32)
    for t in (np.int32, np.uint32):
        assert_same(jitad.jit(lambda v: lax.bitcast_convert_type(v, t))(f32), jlax.bitcast_convert_type(f32, t))
    assert_same(jitad.jit(lambda v: lax.nextafter(v, np.float32(5.0)))(f32), jlax.nextafter(f32, np.float32(5.0)))
    assert_same(lax.mulhi(np.array([2 ** 62, -5, 3 ** 30]), np.array([8, 7, 3 ** 20])),
                jlax.mulhi(np.array([2 ** 62, -5, 3 ** 30]), np.array([8, 7, 3 ** 20])))


def test_bad_operands_raise_jitad_errors():
    with pytest.raises(jitad.JitadError, match="integers or booleans"):
        lax.shift_left(1.5, 2)
    with pytest.raises(jitad.JitadError, match="Python int"):
        lax.integer_pow(2.0, np.array([1, 2]))
    with pytest.raises(jitad.JitadError, match="width"):
        lax.bitcast_convert_type(np.float64(1.0), np.int32)


SMOOTH = ["exp", "log1p", "tanh", "logistic", "erf_inv", "rsqrt", "cbrt", "atan", "sinh", "exp2"]


def test_gradients_agree_with_jax():
    x = np.array([0.3, 0.7, 0.45])
    ours = jitad.jit(lambda x: tuple(jitad.grad(lambda v: jitad.numpy.sum(getattr(lax, n)(v)))(x) for n in SMOOTH))(x)
    theirs = jax.jit(lambda x: tuple(jax.grad(lambda v: jax.numpy.sum(getattr(jlax, n)(v)))(x) for n in SMOOTH))(x)
    for name, o, t in zip(SMOOTH, ours, theirs):
        assert_same(o, t, rtol=1e-9, what=name)
    check_grads(lambda v: lax.erf_inv(v) * lax.integer_pow(v, 3) + lax.rem(v, 0.25) + lax.pow(v, 1.5),
                (x,), order=2)


def test_reduce_precision_matches_xla():
    x = np.array([1.0, 1.0009765625, 1.00048828125, 1.00146484375, 65504.0, 65520.0, 1e6, 6e-8, 1e-9, -3.3,
                  np.inf, -np.inf, np.nan, -0.0, 0.1])
    formats = [(5, 10), (8, 7), (11, 52), (3, 0), (4, 3)]
    table = [(f"e{e}m{m}", lambda v, e=e, m=m: lax.reduce_precision(v, e, m),
              lambda v, e=e, m=m: jlax.reduce_precision(v, e, m)) for e, m in formats]
    compare_group(table, (x,), rtol=0.0)
    compare_group(table[:2], (x.astype(np.float32),), rtol=0.0)


def _fd_a(f, a, x, h=1e-5):
    """d f(a, x) / da by central differences (SciPy has no derivative in a)."""
    return (f(a + h, x) - f(a - h, x)) / (2 * h)


def test_special_functions_on_edges():
    """Against SciPy, whose values on these edges are JAX's too (JAX's own igamma family
    takes XLA half a minute to compile); the a-derivatives against SciPy's differences."""
    sp = pytest.importorskip("scipy.special")
    a = np.array([0.5, 1.0, 3.0, 10.0, 0.0, -1.0, 2.0, 2.0, 2.0, np.nan, 1e-3, 40.0, 0.2, 150.0])
    x = np.array([0.3, 1.0, 5.0, 8.0, 1.0, 1.0, 0.0, np.inf, -1.0, 1.0, 1e-4, 45.0, 30.0, 140.0])
    zx = np.array([2.0, 1.0, 0.5, 3.5, 2.0, 2.0, 1.5, 1.0001, 30.0])
    zq = np.array([1.0, 1.0, 1.0, 0.3, -1.0, 0.0, 1e3, 2.0, 0.5])
    ba, bb = np.array([0.5, 2.0, 1.0, 3.0, 0.0, 2.0, 5.0, 30.0]), np.array([0.5, 3.0, 1.0, 0.5, 1.0, 2.0, 50., 20.0])
    bx = np.array([0.3, 0.7, 0.0, 1.0, 0.5, -0.1, 0.05, 0.6])
    z = np.array([0.0, -1.0, 5.0, 29.0, 31.0, 500.0, np.inf, -30.5, 1e-5, np.nan])
    ga, gx = np.array([0.7, 2.5, 6.0, 40.0]), np.array([0.4, 3.0, 9.0, 35.0])   # inside the domain
    got = jitad.jit(lambda: (lax.igamma(a, x), lax.igammac(a, x), lax.zeta(zx, zq), lax.betainc(ba, bb, bx),
                             lax.bessel_i0e(z), lax.bessel_i1e(z), lax.igamma_grad_a(ga, gx),
                             lax.random_gamma_grad(ga, gx)))()
    grad_a = _fd_a(sp.gammainc, ga, gx)
    want = (sp.gammainc(a, x), sp.gammaincc(a, x), sp.zeta(zx, zq), sp.betainc(ba, bb, bx), sp.i0e(z), sp.i1e(z),
            grad_a, -grad_a / np.exp((ga - 1) * np.log(gx) - gx - sp.gammaln(ga)))
    for name, g, w in zip(["igamma", "igammac", "zeta", "betainc", "i0e", "i1e", "igamma_grad_a", "random_gamma_grad"],
                          got, want):
        assert_same(g, w, rtol=1e-6 if "grad" in name else 1e-10, atol=1e-300, what=name)
    assert_same(lax.igamma_p.bind(2.0, 3.0), sp.gammainc(2.0, 3.0), rtol=1e-12)
    assert_same(lax.regularized_incomplete_beta_p.bind(2.0, 3.0, 0.4), sp.betainc(2.0, 3.0, 0.4), rtol=1e-12)


def test_special_function_gradients():
    sp = pytest.importorskip("scipy.special")
    a, x = np.array([0.7, 2.5, 6.0]), np.array([0.4, 3.0, 9.0])
    total = lambda f: (lambda a, x: jitad.numpy.sum(f(a, x)))
    grads = jitad.jit(lambda a, x: (
        jitad.grad(total(lax.igamma), (0, 1))(a, x), jitad.grad(total(lax.igammac), 1)(a, x),
        jitad.grad(total(lambda a, x: lax.betainc(a, 2.0, x / 10.0)), 1)(a, x),
        jitad.grad(total(lambda a, x: lax.zeta(a + 1.5, x)), 1)(a, x),
        jitad.grad(total(lambda a, x: lax.bessel_i0e(x - a)), 1)(a, x),
        jitad.grad(total(lambda a, x: lax.bessel_i1e(a - x)), 1)(a, x)))(a, x)
    (ia, ix), qx, bx, zq, i0, i1 = grads
    density = np.exp((a - 1) * np.log(x) - x - sp.gammaln(a))
    u = x / 10.0
    assert_same(ia, _fd_a(sp.gammainc, a, x), rtol=1e-6, what="igamma d/da")
    assert_same(ix, density, rtol=1e-10, what="igamma d/dx")
    assert_same(qx, -density, rtol=1e-10, what="igammac d/dx")
    assert_same(bx, u ** (a - 1) * (1 - u) / sp.beta(a, 2.0) / 10.0, rtol=1e-10, what="betainc d/dx")
    assert_same(zq, -(a + 1.5) * sp.zeta(a + 2.5, x), rtol=1e-10, what="zeta d/dq")
    v = x - a
    assert_same(i0, sp.i1e(v) - np.sign(v) * sp.i0e(v), rtol=1e-10, what="i0e'")
    w = a - x
    assert_same(i1, -(sp.i0e(w) - sp.i1e(w) * (np.sign(w) + 1 / w)), rtol=1e-10, what="i1e'")
