"""The table of `jitad.numpy` functions checked against `jax.numpy` (x64): each row names
the function, calls it through a module `m` (jitad.numpy or jax.numpy) on inputs from
the generators below, and says whether it is differentiable and whether it stages.

Inputs cover float64, float32 (with Python scalars), int and bool dtypes, empty and
size-1 axes, and the edge values 0, -0.0, +-inf and NaN."""
from collections import namedtuple

import numpy as np

Spec = namedtuple("Spec", "name fn inputs grad staged rtol check_dtype ref")

_RNG = np.random.default_rng(1234)


def F(*shape, dtype=np.float64, lo=-2.0, hi=2.0):
    return np.asarray(_RNG.uniform(lo, hi, shape), dtype)


def POS(*shape):
    return F(*shape, lo=0.5, hi=3.0)


def I(*shape, lo=-5, hi=6):  # noqa: E743 (short names keep the table readable)
    return _RNG.integers(lo, hi, shape).astype(np.int64)


def B(*shape):
    return _RNG.random(shape) < 0.5


EDGE = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 3.0])
EDGE_NONAN = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, 7.0, 3.0])
X34 = F(3, 4)
X34_NAN = X34.copy()
X34_NAN[1, 2] = np.nan
X34_NAN[2, :] = np.nan
V5 = F(5)
V6 = F(6)
V1 = F(1)
E0 = np.zeros((0,))
E03 = np.zeros((0, 3))
X1_4 = F(1, 4)
X32_F32 = F(3, 2, dtype=np.float32)
I6 = I(6)
I6_POS = I(6, lo=0, hi=5)
B34 = B(3, 4)
_A33 = F(3, 3)
SPD = _A33 @ _A33.T + 3 * np.eye(3)
M33 = F(3, 3) + 2 * np.eye(3)
M42 = F(4, 2)
XS = np.sort(F(6, lo=-3, hi=3))
REPEATS = np.array([3.0, 1.0, 2.0, 1.0, 3.0, np.nan, 0.0, np.nan])
REPEATS_I = np.array([4, 1, 4, 0, 2, 1, 1])


def S(name, fn, *inputs, grad=False, staged=True, rtol=1e-12, check_dtype=True, ref="jax"):
    """A row; `ref="numpy"` compares with NumPy where JAX's CPU backend flushes subnormals
    or departs from NumPy at an edge value (the row says which)."""
    return Spec(name, fn, inputs, grad, staged, rtol, check_dtype, ref)


STATS = [
    S("quantile[linear,axis=None]", lambda m, x: m.quantile(x, 0.3), X34, grad=True),
    S("quantile[q-array,axis=1,keepdims]", lambda m, x: m.quantile(x, np.array([0.0, 0.5, 1.0]), axis=1, keepdims=True),
      X34, grad=True),
    *[S(f"quantile[{meth}]", lambda m, x, meth=meth: m.quantile(x, np.array([0.1, 0.55, 0.75]), axis=0, method=meth),
        X34, grad=meth != "nearest") for meth in ("lower", "higher", "nearest", "midpoint")],
    S("quantile[nan]", lambda m, x: m.quantile(x, 0.5, axis=1), X34_NAN),
    S("quantile[int]", lambda m, x: m.quantile(x, 0.25), I6),
    S("quantile[f32]", lambda m, x: m.quantile(x, 0.25), X32_F32, rtol=1e-6),
    S("percentile", lambda m, x: m.percentile(x, np.array([10.0, 90.0]), axis=(0, 1)), X34, grad=True),
    S("median", lambda m, x: m.median(x), X34, grad=True),
    S("median[axis=0,keepdims]", lambda m, x: m.median(x, axis=0, keepdims=True), X34, grad=True),
    S("median[size-1]", lambda m, x: m.median(x, axis=0), X1_4, grad=True),
    S("median[edge]", lambda m, x: m.median(x), EDGE_NONAN),
    S("nanquantile", lambda m, x: m.nanquantile(x, np.array([0.2, 0.8]), axis=1), X34_NAN),
    S("nanpercentile", lambda m, x: m.nanpercentile(x, 40.0, axis=0), X34_NAN),
    S("nanmedian", lambda m, x: m.nanmedian(x, axis=1), X34_NAN),
    S("nanmedian[grad]", lambda m, x: m.nanmedian(x), X34, grad=True),
    S("nanmax", lambda m, x: m.nanmax(x, axis=1), X34_NAN),
    S("nanmin", lambda m, x: m.nanmin(x, axis=0), X34_NAN),
    S("nanmax[grad]", lambda m, x: m.nanmax(x, axis=0), X34, grad=True),
    S("nanargmax", lambda m, x: m.nanargmax(x, axis=0), X34_NAN),
    S("nanargmin", lambda m, x: m.nanargmin(x, axis=0), X34_NAN),
    S("nanprod", lambda m, x: m.nanprod(x, axis=1), X34_NAN),
    S("nancumsum", lambda m, x: m.nancumsum(x, axis=1), X34_NAN),
    S("nancumprod", lambda m, x: m.nancumprod(x, axis=0), X34_NAN),
    S("nanvar", lambda m, x: m.nanvar(x, axis=0, ddof=1), X34_NAN),
    S("nanstd", lambda m, x: m.nanstd(x, axis=1), X34_NAN),
    S("nanvar[grad]", lambda m, x: m.nanvar(x, axis=0), X34, grad=True),
    S("nansum", lambda m, x: m.nansum(x, axis=1, keepdims=True), X34_NAN),
    S("nanmean", lambda m, x: m.nanmean(x, axis=0), X34_NAN),
    S("cov", lambda m, x: m.cov(x), X34, grad=True),
    S("cov[rowvar=False,bias]", lambda m, x: m.cov(x, rowvar=False, bias=True), X34, grad=True),
    S("cov[y,ddof=0]", lambda m, x, y: m.cov(x, y, ddof=0), V5, F(5), grad=True),
    S("cov[fweights,aweights]", lambda m, x: m.cov(x, fweights=np.array([1, 2, 1, 3]),
                                               aweights=np.array([0.5, 1.0, 2.0, 1.0])), X34, grad=True),
    S("corrcoef", lambda m, x: m.corrcoef(x), X34, grad=True),
    S("corrcoef[x,y]", lambda m, x, y: m.corrcoef(x, y), V5, F(5), grad=True),
    S("digitize", lambda m, x, b: m.digitize(x, b), F(7, lo=-3, hi=3), XS, check_dtype=False),   # JAX: int32
    S("digitize[right]", lambda m, x, b: m.digitize(x, b, right=True), np.array([-1.0, 0.0, 1.0, 2.0]),
      np.array([0.0, 1.0, 2.0]), check_dtype=False),
    S("digitize[decreasing]", lambda m, x, b: m.digitize(x, b), np.array([-1.0, 0.5, 1.0, 3.0]),
      np.array([2.0, 1.0, 0.0]), check_dtype=False),
    S("bincount[length]", lambda m, x: m.bincount(x, length=6), I6_POS),
    S("bincount[weights,length]", lambda m, x, w: m.bincount(x, w, length=4), I6_POS, F(6)),
    S("histogram_bin_edges", lambda m, x: m.histogram_bin_edges(x, 4), V6),
    S("histogram", lambda m, x: m.histogram(x, 4), V6),
    S("histogram[range,weights,density]", lambda m, x, w: m.histogram(x, 3, range=(-1.0, 1.0), weights=w,
                                                                      density=True), V6, POS(6)),
    S("histogram[edges]", lambda m, x: m.histogram(x, np.array([-2.0, 0.0, 0.5, 2.0])), V6),
    S("histogram2d", lambda m, x, y: m.histogram2d(x, y, 3), V6, F(6)),
    S("histogramdd", lambda m, x: m.histogramdd(x, 2), F(6, 3)),
    S("interp", lambda m, x, xp, fp: m.interp(x, xp, fp), F(7, lo=-4, hi=4), XS, F(6), grad=True),
    S("interp[left,right]", lambda m, x, xp, fp: m.interp(x, xp, fp, left=-9.0, right=9.0), F(7, lo=-4, hi=4), XS,
      F(6), grad=True),
    S("interp[period]", lambda m, x, xp, fp: m.interp(x, xp, fp, period=2.0), F(5, lo=-3, hi=3),
      np.array([0.1, 0.7, 1.5]), np.array([1.0, 3.0, 2.0]), grad=True),
]

REDUCTIONS = [
    S("sum[dtype=f32]", lambda m, x: m.sum(x, dtype=np.float32), I6, rtol=1e-6),
    S("sum[where,initial]", lambda m, x, w: m.sum(x, axis=1, where=w, initial=1.5), X34, B34, grad=True),
    S("sum[bool]", lambda m, x: m.sum(x, axis=0), B34),
    S("sum[empty]", lambda m, x: m.sum(x, axis=0), E03),
    S("mean[where]", lambda m, x, w: m.mean(x, axis=0, where=w), X34, B34 | np.eye(3, 4, dtype=bool), grad=True),
    S("mean[keepdims]", lambda m, x: m.mean(x, axis=(0, 1), keepdims=True), X34, grad=True),
    S("max[initial,where]", lambda m, x, w: m.max(x, axis=1, initial=-1.0, where=w), X34, B34, grad=True),
    S("min[initial]", lambda m, x: m.min(x, axis=0, initial=0.0), X34, grad=True),
    S("max[empty,initial]", lambda m, x: m.max(x, axis=0, initial=3.0), E03),
    S("amax[int]", lambda m, x: m.amax(x), I6),
    S("prod[where,initial]", lambda m, x, w: m.prod(x, axis=0, where=w, initial=2.0), X34, B34, grad=True),
    S("prod[tuple]", lambda m: m.prod(np.array((2, 3)))),
    S("var[ddof,where]", lambda m, x, w: m.var(x, axis=1, ddof=1, where=w), X34, B34 | np.eye(3, 4, dtype=bool),
      grad=True),
    S("var[correction]", lambda m, x: m.var(x, axis=0, correction=1), X34, grad=True),
    S("std[keepdims]", lambda m, x: m.std(x, axis=1, keepdims=True), X34, grad=True),
    S("any[where]", lambda m, x, w: m.any(x > 0, axis=1, where=w), X34, B34),
    S("all[where]", lambda m, x, w: m.all(x > -1, axis=0, where=w), X34, B34),
    S("argmax[keepdims]", lambda m, x: m.argmax(x, axis=1, keepdims=True), X34),
    S("argmin[edge]", lambda m, x: m.argmin(x), EDGE),
    S("cumsum[dtype]", lambda m, x: m.cumsum(x, dtype=np.float64), I6),
    S("cumprod", lambda m, x: m.cumprod(x, axis=1), X34, grad=True),
    S("cumulative_sum", lambda m, x: m.cumulative_sum(x, axis=1, include_initial=True), X34, grad=True),
    S("cumulative_prod", lambda m, x: m.cumulative_prod(x), V5, grad=True),
    S("count_nonzero", lambda m, x: m.count_nonzero(x, axis=0), EDGE),
    S("ptp", lambda m, x: m.ptp(x, axis=1), X34, grad=True),
]

ARRAYS = [
    S("insert[int]", lambda m, x: m.insert(x, 2, 9.0), V5, grad=True),
    S("insert[list,axis]", lambda m, x, v: m.insert(x, np.array([0, 3, 3]), v, axis=1), X34, F(3, 3), grad=True),
    S("insert[slice]", lambda m, x: m.insert(x, slice(1, 3), -1.0), V5, grad=True),
    S("insert[int,block]", lambda m, x, v: m.insert(x, 1, v, axis=0), X34, F(4), grad=True),
    S("delete", lambda m, x: m.delete(x, np.array([0, 2])), V5, grad=True),
    S("delete[axis,slice]", lambda m, x: m.delete(x, slice(0, 2), axis=1), X34, grad=True),
    S("fill_diagonal", lambda m, x: m.fill_diagonal(x, 5.0, inplace=False), X34, grad=True),
    S("fill_diagonal[vals]", lambda m, x, v: m.fill_diagonal(x, v, inplace=False), F(7, 3), F(2), grad=True),
    S("block", lambda m, a, b, c: m.block([[a, b], [c]]), F(2, 2), F(2, 1), F(1, 3), grad=True),
    S("block[1d]", lambda m, a, b: m.block([a, b]), V5, V1, grad=True),
    S("dstack", lambda m, a, b: m.dstack([a, b]), X34, X34, grad=True),
    S("apply_along_axis", lambda m, x: m.apply_along_axis(lambda r: m.sum(r * r), 1, x), X34, grad=True),
    S("apply_along_axis[vector]", lambda m, x: m.apply_along_axis(lambda r: r[::-1] * 2.0, 0, x), X34, grad=True),
    S("apply_over_axes", lambda m, x: m.apply_over_axes(m.sum, x, [0, 1]), X34, grad=True),
    S("array_equiv", lambda m, a, b: m.array_equiv(a, b), X34, X34[0]),
    S("array_equiv[false]", lambda m, a, b: m.array_equiv(a, b), X34, V5, staged=False),
    S("windows", lambda m: (m.bartlett(5), m.blackman(6), m.hamming(4), m.hanning(5), m.kaiser(6, 2.5)), staged=False),
    S("kaiser[staged beta]", lambda m, b: m.kaiser(6, b), np.float64(2.5), grad=True, rtol=1e-10),
    S("i0", lambda m, x: m.i0(x), np.array([0.0, -1.5, 3.0, 19.9, 20.1, 45.0, -60.0]), grad=True, rtol=1e-11),
    S("choose[clip]", lambda m, a, x, y: m.choose(a, [x, y], mode="clip"), I(3, 4, lo=-1, hi=3), X34, X34 * 2,
      grad=True),
    S("choose[wrap]", lambda m, a, x, y: m.choose(a, [x, y], mode="wrap"), I(3, 4, lo=-3, hi=4), X34, 1.0),
    S("diag_indices_from", lambda m, x: m.diag_indices_from(x), M33),
    S("tril_indices_from", lambda m, x: m.tril_indices_from(x, -1), X34),
    S("triu_indices_from", lambda m, x: m.triu_indices_from(x, 1), X34),
    S("ediff1d", lambda m, x: m.ediff1d(x, to_end=np.array([9.0]), to_begin=-1.0), X34, grad=True),
    S("fromfunction", lambda m: m.fromfunction(lambda i, j: i * 2 + j, (2, 3)), staged=False),
    S("geomspace", lambda m, a, b: m.geomspace(a, b, 5), np.float64(2.0), np.float64(50.0), grad=True),
    S("geomspace[negative]", lambda m: m.geomspace(-1.0, -1000.0, 4, endpoint=False), staged=False),
    S("mgrid_ogrid", lambda m: (m.mgrid[0:2, 0:3], m.ogrid[0:3], m.mgrid[0:1:5j]), staged=False),
    S("lexsort", lambda m, a, b: m.lexsort((a, b)), I(8, lo=0, hi=3), I(8, lo=0, hi=3)),
    S("mask_indices", lambda m: m.mask_indices(3, m.triu, 1), staged=False),
    S("matrix_transpose", lambda m, x: m.matrix_transpose(x), F(2, 3, 4), grad=True),
    S("matvec", lambda m, a, v: m.matvec(a, v), F(2, 3, 4), F(4), grad=True),
    S("vecmat", lambda m, v, a: m.vecmat(v, a), F(3), F(2, 3, 4), grad=True),
    S("vecdot", lambda m, a, b: m.vecdot(a, b, axis=0), X34, X34, grad=True),
    S("piecewise", lambda m, x: m.piecewise(x, [x < -0.5, x > 0.5], [lambda t: t * t, lambda t: -t, 0.25]),
      F(7), grad=True),
    S("place", lambda m, x, v: m.place(x, x > 0, v, inplace=False), X34, F(3), grad=True),
    S("put[clip]", lambda m, x, v: m.put(x, np.array([0, 5, 30, -1]), v, mode="clip", inplace=False), X34, F(4),
      grad=True),
    S("put[wrap]", lambda m, x: m.put(x, np.array([13, -2]), 7.0, mode="wrap", inplace=False), X34),
    S("put_along_axis", lambda m, x, v: m.put_along_axis(x, np.array([[0], [2], [3]]), v, axis=1, inplace=False),
      X34, F(3, 1), grad=True),
    S("resize", lambda m, x: m.resize(x, (3, 3)), V5, grad=True),
    S("resize[static]", lambda m: m.resize(np.zeros(0), (2,)), staged=False),
    S("tri", lambda m: m.tri(3, 4, 1), staged=False, check_dtype=False),   # JAX: float32
    S("trim_zeros", lambda m, x: m.trim_zeros(x), np.array([0.0, 0.0, 1.0, 0.0, 2.0, 0.0]), staged=False),
    S("unstack", lambda m, x: m.unstack(x, axis=1), X34, grad=True),
    S("unwrap", lambda m, x: m.unwrap(x), np.cumsum(F(8, lo=-3, hi=3)), grad=True),
    S("vander", lambda m, x: m.vander(x, 4), V5, grad=True),
    S("vander[increasing,zero]", lambda m, x: m.vander(x, increasing=True), np.array([0.0, 2.0, -1.0])),
    S("vander[increasing]", lambda m, x: m.vander(x, increasing=True), np.array([0.5, 2.0, -1.0]), grad=True),
    S("vectorize", lambda m, a, b: m.vectorize(lambda s, t: s * t + 1.0)(a, b), X34, V5[:4], grad=True),
    S("vectorize[signature]", lambda m, a: m.vectorize(lambda r: m.sum(r) * r, signature="(n)->(n)")(a), X34,
      grad=True),
    S("isneginf_isposinf", lambda m, x: (m.isneginf(x), m.isposinf(x)), EDGE),
    S("isreal", lambda m, x: (m.isreal(x), m.isrealobj(x)), X34),
    S("packbits", lambda m, x: m.packbits(x, axis=1), B34, check_dtype=False),
    S("unpackbits", lambda m, x: m.unpackbits(x, count=10), np.array([160, 7], np.uint8), staged=False),
    S("take[fill]", lambda m, x: m.take(x, np.array([0, 4, -1, -6])), V5, grad=True),
    S("take[fill_value,axis]", lambda m, x: m.take(x, np.array([1, 7]), axis=1, fill_value=-3.0), X34, grad=True),
    S("take[clip,wrap]", lambda m, x: (m.take(x, np.array([9, -9]), mode="clip"),
                                       m.take(x, np.array([9, -9]), mode="wrap")), V5, grad=True),
    S("isclose[equal_nan]", lambda m, a, b: (m.isclose(a, b, equal_nan=True), m.isclose(a, b)), EDGE,
      EDGE + np.array([1e-9, 0, 0, 1e-3, 0, 0, 0, 0])),
    S("allclose", lambda m, a: m.allclose(a, a * (1 + 1e-9)), X34),
    S("array_equal[equal_nan]", lambda m, a: (m.array_equal(a, a, equal_nan=True), m.array_equal(a, a)), EDGE),
    S("fix", lambda m, x: m.fix(x), EDGE, ref="numpy"),   # JAX has deprecated fix
]

BITS = [
    S("bitwise", lambda m, a, b: (m.bitwise_and(a, b), m.bitwise_or(a, b), m.bitwise_xor(a, b), m.bitwise_not(a),
                                  m.invert(b), m.bitwise_invert(a)), I(6, lo=-40, hi=40), I(6, lo=-40, hi=40)),
    S("bitwise[bool]", lambda m, a, b: (m.bitwise_and(a, b), m.bitwise_xor(a, b), m.bitwise_not(a)), B(5), B(5)),
    S("shifts", lambda m, a, s: (m.left_shift(a, s), m.right_shift(a, s), m.bitwise_left_shift(a, 3),
                                 m.bitwise_right_shift(a, 2)), I(6, lo=-1000, hi=1000), np.array([0, 1, 5, 62, 63, 64])),
    S("bitwise_count", lambda m, a: m.bitwise_count(a), np.array([0, 1, 7, -1, -8, 2 ** 40 + 3]), check_dtype=False),
    S("signbit_copysign", lambda m, x, y: (m.signbit(x), m.copysign(x, y)), EDGE, EDGE[::-1]),
    S("copysign[grad]", lambda m, x, y: m.copysign(x, y), V5, F(5), grad=True),
    S("frexp", lambda m, x: m.frexp(x), np.array([0.0, -0.0, 1.0, 8.0, -3.0, 1.7e308, np.inf, np.nan, 0.75]),
      check_dtype=False),   # JAX: int32 exponents
    S("frexp[subnormal]", lambda m, x: m.frexp(x), np.array([1e-310, -5e-324]), check_dtype=False, ref="numpy"),
    S("ldexp", lambda m, x, e: m.ldexp(x, e), np.array([0.5, -1.5, 3.0, 1e-300, 2.0, 0.0]),
      np.array([4, -2, 1000, -30, -1075, 3]), grad=False),
    S("ldexp[grad]", lambda m, x: m.ldexp(x, np.array([1, -2, 3, 0, 2])), V5, grad=True),
    S("modf", lambda m, x: m.modf(x), np.array([0.0, 2.5, -2.5, 1e20, np.nan])),
    S("modf[inf,-0]", lambda m, x: m.modf(x), np.array([-0.0, np.inf, -np.inf]), ref="numpy"),   # JAX: NaN, +0
    S("modf[grad]", lambda m, x: m.modf(x)[0], V5 * 3, grad=True),
    S("nextafter", lambda m, x, y: m.nextafter(x, y), np.array([0.0, 1.0, 1.0, -1.0, 0.5, 1e-320, 3.0, np.inf, 2.0]),
      np.array([1.0, 2.0, 0.0, -2.0, 0.0, 0.0, 3.0, 0.0, np.nan])),
    S("spacing", lambda m, x: m.spacing(x), np.array([1.0, -1.0, 0.0, 1e10, -3e-5, 0.5])),
    S("spacing[f32]", lambda m, x: m.spacing(x), np.array([1.0, -1.0, 1e10], np.float32)),
    S("gcd_lcm", lambda m, a, b: (m.gcd(a, b), m.lcm(a, b)), np.array([12, -8, 0, 7, 0, 48, 1071]),
      np.array([18, 12, 5, 0, 0, -36, 462])),
    S("heaviside", lambda m, x: m.heaviside(x, 0.5), EDGE),
]

SETS = [
    S("unique[size]", lambda m, x: m.unique(x, size=8), REPEATS),
    S("unique[size,all,int]", lambda m, x: m.unique(x, return_index=True, return_inverse=True, return_counts=True,
                                                    size=6), REPEATS_I),
    S("unique[size,fill]", lambda m, x: m.unique(x, size=9, fill_value=-1.0), REPEATS),
    S("unique[plain]", lambda m, x: m.unique(x, return_counts=True, return_inverse=True), REPEATS_I, staged=False),
    S("unique_all", lambda m, x: tuple(m.unique_all(x, size=5)), REPEATS_I),
    S("unique_counts_inverse_values", lambda m, x: (tuple(m.unique_counts(x, size=5)),
                                                     tuple(m.unique_inverse(x, size=5)), m.unique_values(x, size=5)),
      REPEATS_I),
    S("union1d", lambda m, a, b: m.union1d(a, b, size=9), REPEATS_I, np.array([9, 1, -3])),
    S("intersect1d", lambda m, a, b: m.intersect1d(a, b, size=4), REPEATS_I, np.array([9, 1, 4, 4])),
    S("setdiff1d", lambda m, a, b: m.setdiff1d(a, b, size=5), REPEATS_I, np.array([9, 1])),
    S("setxor1d", lambda m, a, b: m.setxor1d(a, b, size=6, fill_value=-7), REPEATS_I, np.array([9, 1, 1])),
    S("setops[plain]", lambda m, a, b: (m.union1d(a, b), m.intersect1d(a, b), m.setdiff1d(a, b), m.setxor1d(a, b)),
      REPEATS_I, np.array([9, 1, -3]), staged=False),
    S("isin", lambda m, a, b: (m.isin(a, b), m.isin(a, b, invert=True)), X34.round(), np.array([0.0, 1.0, -2.0])),
    S("nonzero[size]", lambda m, x: m.nonzero(x, size=5), B34),
    S("nonzero[fill]", lambda m, x: m.nonzero(x, size=12, fill_value=-1), B34),
    S("flatnonzero_argwhere", lambda m, x: (m.flatnonzero(x, size=4), m.argwhere(x, size=3, fill_value=9)), B34),
    S("nonzero[plain]", lambda m, x: (m.nonzero(x), m.flatnonzero(x), m.argwhere(x)), B34, staged=False),
    S("extract", lambda m, c, x: m.extract(c, x, size=3), B34, X34),
    S("where[size]", lambda m, x: m.where(x > 0, size=5, fill_value=-1), X34),
    S("where[x,y]", lambda m, c, x: m.where(c, x, 0.5), B34, X34, grad=True),
    S("compress", lambda m, x: m.compress(np.array([True, False, True]), x, axis=0, size=2), X34, grad=True),
]

POLY = [
    S("poly", lambda m, r: m.poly(r), F(3), grad=True),
    S("polyadd_sub", lambda m, a, b: (m.polyadd(a, b), m.polysub(b, a)), F(3), F(5), grad=True),
    S("polymul", lambda m, a, b: m.polymul(a, b), F(3), F(4), grad=True),
    S("polydiv", lambda m, a, b: m.polydiv(a, b), F(5), F(2) + np.array([2.0, 0.0]), grad=True),
    S("polyder", lambda m, p: (m.polyder(p), m.polyder(p, 2)), F(5), grad=True),
    S("polyint", lambda m, p: (m.polyint(p), m.polyint(p, 2, k=np.array([1.0, 2.0]))), F(4), grad=True),
    S("polyval", lambda m, p, x: m.polyval(p, x), F(4), F(5), grad=True),
    S("polyfit", lambda m, x, y: m.polyfit(x, y, 2), np.linspace(-1, 1, 7) + 0.05, F(7), grad=True, rtol=1e-10),
    S("polyfit[w]", lambda m, x, y, w: m.polyfit(x, y, 1, w=w), np.linspace(-1, 1, 6), F(6), POS(6), grad=True,
      rtol=1e-10),
    S("roots", lambda m, p: m.sort(m.roots(p).real), np.array([1.0, -6.0, 11.0, -6.0]), staged=False, rtol=1e-9),
]

LINALG = [
    S("lstsq", lambda m, a, b: m.linalg.lstsq(a, b), M42, F(4), grad=True, rtol=1e-10, check_dtype=False),
    S("lstsq[2d]", lambda m, a, b: m.linalg.lstsq(a, b)[0], M42, F(4, 2), grad=True, rtol=1e-10),
    S("matrix_power", lambda m, a: (m.linalg.matrix_power(a, 3), m.linalg.matrix_power(a, 0),
                                    m.linalg.matrix_power(a, -2)), M33, grad=True, rtol=1e-10),
    S("matrix_rank", lambda m, a: (m.linalg.matrix_rank(a), m.linalg.matrix_rank(np.ones((3, 3)))), M33),
    S("cond", lambda m, a: (m.linalg.cond(a), m.linalg.cond(a, 1), m.linalg.cond(a, np.inf),
                            m.linalg.cond(a, "fro")), M33, grad=True, rtol=1e-10),
    S("svdvals", lambda m, a: m.linalg.svdvals(a), M42, grad=True, rtol=1e-10),
    S("matrix_norm", lambda m, a: (m.linalg.matrix_norm(a), m.linalg.matrix_norm(a, ord=1),
                                   m.linalg.matrix_norm(a, ord="nuc", keepdims=True)), M33, grad=True, rtol=1e-10),
    S("vector_norm", lambda m, x: (m.linalg.vector_norm(x), m.linalg.vector_norm(x, ord=1, axis=1),
                                   m.linalg.vector_norm(x, ord=np.inf, keepdims=True)), X34, grad=True),
    S("multi_dot", lambda m, a, b, c: m.linalg.multi_dot([a, b, c]), F(3), M33, M33, grad=True),
    S("tensorinv", lambda m, a: m.linalg.tensorinv(a, ind=1), np.eye(4).reshape(4, 2, 2) * 2.0 + 0.1, grad=True,
      rtol=1e-10),
    S("tensorsolve", lambda m, a, b: m.linalg.tensorsolve(a, b), (np.eye(6) * 3 + F(6, 6) * 0.1).reshape(2, 3, 6),
      F(2, 3), grad=True, rtol=1e-10),
    S("linalg_misc", lambda m, a, b: (m.linalg.cross(a[:, :3], b[:, :3]), m.linalg.diagonal(a),
                                      m.linalg.matmul(a, b.T), m.linalg.matrix_transpose(a), m.linalg.outer(a[0], b[1]),
                                      m.linalg.tensordot(a, b, axes=2), m.linalg.trace(a[:, :3]),
                                      m.linalg.vecdot(a, b)), X34, F(3, 4), grad=True),
    S("slogdet_eigh", lambda m, a: (m.linalg.slogdet(a), m.linalg.eigh(a)[0]), SPD, grad=True, rtol=1e-10),
]

ALL = STATS + REDUCTIONS + ARRAYS + BITS + SETS + POLY + LINALG
