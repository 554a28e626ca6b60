"""NumPy's functions (jitad.numpy_api, jitad.nn): values against NumPy (eager and staged,
float32 and float64), derivatives against JAX, and check_grads(order=2).

One table row per use of a function. To keep compiling cheap, all rows of a dtype run in
one jitted program (and one gradient program); each row has its own inputs, so a wrong
value or gradient still names its row.
"""
import functools

import numpy as np
import pytest

import jitad
from jitad.testing import check_grads

jax = pytest.importorskip("jax", reason="JAX is the reference for derivatives (the test extra installs it)")
jax.config.update("jax_enable_x64", True)
jnp = jax.numpy


def nn_of(m):
    return jitad.nn if m is jitad else jax.nn


def _layer_norm_ref(m, x, s, b):
    mu = m.mean(x, -1, keepdims=True)
    return (x - mu) / m.sqrt(m.mean((x - mu) ** 2, -1, keepdims=True) + 1e-5) * s + b


class Row:
    def __init__(self, name, fn, *specs, ref=None, diff=True, numpy=True):
        self.name, self.fn, self.specs, self.diff = name, fn, specs, diff
        self.ref = ref or fn          # the same program over NumPy / jax.numpy
        self.numpy = numpy            # values against NumPy (else against jax.numpy)

    def inputs(self, dtype, seed):
        rng = np.random.default_rng(seed)
        out = []
        for shape, lo, hi in self.specs:
            out.append(rng.uniform(lo, hi, shape).astype(dtype))
        return out


U = (3, 4)
ROWS = [
    # elementwise
    Row("tan", lambda m, x: m.tan(x), (U, -1.2, 1.2)),
    Row("sinh", lambda m, x: m.sinh(x), (U, -3, 3)),
    Row("cosh", lambda m, x: m.cosh(x), (U, -3, 3)),
    Row("arcsinh", lambda m, x: m.arcsinh(x), (U, -5, 5)),
    Row("arccosh", lambda m, x: m.arccosh(x), (U, 1.1, 5)),
    Row("arctanh", lambda m, x: m.arctanh(x), (U, -0.9, 0.9)),
    Row("log2", lambda m, x: m.log2(x), (U, 0.1, 5)),
    Row("log10", lambda m, x: m.log10(x), (U, 0.1, 5)),
    Row("exp2", lambda m, x: m.exp2(x), (U, -3, 3)),
    Row("power", lambda m, x, y: m.power(x, y), (U, 0.5, 2), ((4,), -2, 2)),
    Row("power_int", lambda m, x: m.power(x, 3), (U, -2, 2)),
    Row("sign", lambda m, x: m.sign(x), (U, -2, 2)),
    Row("floor", lambda m, x: m.floor(x), (U, -5, 5)),
    Row("ceil", lambda m, x: m.ceil(x), (U, -5, 5)),
    Row("trunc", lambda m, x: m.trunc(x), (U, -5, 5)),
    Row("round", lambda m, x: m.round(x), (U, -5, 5)),
    Row("round_2", lambda m, x: m.round(x, 2), (U, -5, 5)),
    Row("reciprocal", lambda m, x: m.reciprocal(x), (U, 0.5, 3)),
    Row("hypot", lambda m, x, y: m.hypot(x, y), (U, -3, 3), (U, -3, 3)),
    Row("logaddexp", lambda m, x, y: m.logaddexp(x, y), (U, -3, 3), (U, -3, 3)),
    Row("logaddexp2", lambda m, x, y: m.logaddexp2(x, y), (U, -3, 3), (U, -3, 3)),
    Row("sinc", lambda m, x: m.sinc(x), (U, -2, 2)),
    Row("fmax", lambda m, x, y: m.fmax(x, y), (U, -3, 3), (U, -3, 3)),
    Row("fmin", lambda m, x, y: m.fmin(x, y), (U, -3, 3), (U, -3, 3)),
    Row("mod", lambda m, x, y: m.mod(x, y), (U, -5, 5), (U, 0.7, 2)),
    Row("remainder", lambda m, x, y: m.remainder(x, y), (U, -5, 5), (U, -2, -0.7)),
    Row("isnan", lambda m, x: m.isnan(m.log(x)), (U, -1, 1), diff=False),
    Row("isinf", lambda m, x: m.isinf(1.0 / m.floor(x)), (U, -1, 1), diff=False),
    Row("isfinite", lambda m, x: m.isfinite(m.log(x)), (U, -1, 1), diff=False),
    Row("nan_to_num", lambda m, x: m.nan_to_num(m.log(x) * x), (U, 0.1, 2)),
    Row("deg2rad", lambda m, x: m.deg2rad(x), (U, -180, 180)),
    Row("rad2deg", lambda m, x: m.rad2deg(x), (U, -3, 3)),
    Row("radians", lambda m, x: m.radians(x), (U, -180, 180)),
    Row("degrees", lambda m, x: m.degrees(x), (U, -3, 3)),
    # jitad.nn
    Row("gelu", lambda m, x: nn_of(m).gelu(x), (U, -3, 3), numpy=False),
    Row("silu", lambda m, x: nn_of(m).silu(x), (U, -3, 3), numpy=False),
    Row("elu", lambda m, x: nn_of(m).elu(x, 0.7), (U, -3, 3), numpy=False),
    Row("leaky_relu", lambda m, x: nn_of(m).leaky_relu(x, 0.1), (U, -3, 3), numpy=False),
    Row("log_sigmoid", lambda m, x: nn_of(m).log_sigmoid(x), (U, -30, 30), numpy=False),
    Row("softsign", lambda m, x: nn_of(m).soft_sign(x) if m is not jitad else jitad.nn.softsign(x),
        (U, -3, 3), numpy=False),
    Row("softplus", lambda m, x: nn_of(m).softplus(x), (U, -30, 30), numpy=False),
    Row("layer_norm", lambda m, x, s, b: jitad.nn.layer_norm(x, s, b) if m is jitad else _layer_norm_ref(m, x, s, b),
        ((4, 6), -2, 2), ((6,), 0.5, 2), ((6,), -1, 1), numpy=False),
    # reductions and scans
    Row("prod_axis", lambda m, x: m.prod(x, axis=1), ((3, 7), -2, 2)),
    Row("prod_all", lambda m, x: m.prod(x), ((2, 3), 0.5, 1.5)),
    Row("prod_keepdims", lambda m, x: m.prod(x, axis=(0, 2), keepdims=True), ((2, 3, 4), 0.5, 1.5)),
    Row("var_ddof", lambda m, x: m.var(x, axis=0, ddof=1), ((5, 3), -2, 2)),
    Row("var_keepdims", lambda m, x: m.var(x, axis=(0, -1), keepdims=True), ((2, 3, 4), -2, 2)),
    Row("std", lambda m, x: m.std(x, axis=-1), ((3, 5), -2, 2)),
    Row("argmax", lambda m, x: m.argmax(x, axis=1), ((4, 5), -2, 2), diff=False),
    Row("argmin", lambda m, x: m.argmin(x), ((4, 5), -2, 2), diff=False),
    Row("argmax_keepdims", lambda m, x: m.argmax(x, axis=-2, keepdims=True), ((4, 5), -2, 2), diff=False),
    Row("any", lambda m, x: m.any(x > 1.5, axis=0), ((4, 5), -2, 2), diff=False),
    Row("all", lambda m, x: m.all(x > -1.5, axis=1, keepdims=True), ((4, 5), -2, 2), diff=False),
    Row("count_nonzero", lambda m, x: m.count_nonzero(x > 0, axis=0), ((4, 5), -2, 2), diff=False),
    Row("cumsum", lambda m, x: m.cumsum(x, axis=1), ((3, 11), -2, 2)),
    Row("sort", lambda m, x: m.sort(x) * m.arange(1.0, 8.0), ((3, 7), -2, 2)),
    Row("sort_axis0", lambda m, x: m.sort(x, axis=0)[::-1] ** 2, ((5, 3), -2, 2)),
    Row("argsort", lambda m, x: m.argsort(x, axis=0), ((5, 3), -2, 2), diff=False),
    Row("top_k", lambda m, x: getattr(m, "top_k", jax.lax.top_k)(x, 3)[0] * m.arange(1.0, 4.0), ((4, 6), -2, 2),
        ref=lambda m, x: -m.sort(-x)[..., :3] * m.arange(1.0, 4.0)),
    Row("cumsum_flat", lambda m, x: m.cumsum(x), ((3, 4), -2, 2)),
    Row("cumprod", lambda m, x: m.cumprod(x, axis=0), ((6, 3), -1.5, 1.5)),
    # shapes
    Row("squeeze", lambda m, x: m.squeeze(x, axis=(0, 2)), ((1, 3, 1, 4), -1, 1)),
    Row("squeeze_all", lambda m, x: m.squeeze(x), ((1, 3, 1, 4), -1, 1)),
    Row("expand_dims", lambda m, x: m.expand_dims(x, (0, -1)), (U, -1, 1)),
    Row("ravel", lambda m, x: m.ravel(x), ((2, 3, 4), -1, 1)),
    Row("swapaxes", lambda m, x: m.swapaxes(x, 0, 2), ((2, 3, 4), -1, 1)),
    Row("moveaxis", lambda m, x: m.moveaxis(x, 0, -1), ((2, 3, 4), -1, 1)),
    Row("moveaxis_2", lambda m, x: m.moveaxis(x, (0, 1), (2, 0)), ((2, 3, 4), -1, 1)),
    Row("flip", lambda m, x: m.flip(x), ((2, 3, 4), -1, 1)),
    Row("flip_axis", lambda m, x: m.flip(x, -1), (U, -1, 1)),
    Row("fliplr", lambda m, x: m.fliplr(x), (U, -1, 1)),
    Row("flipud", lambda m, x: m.flipud(x), (U, -1, 1)),
    Row("roll", lambda m, x: m.roll(x, 5), (U, -1, 1)),
    Row("roll_axes", lambda m, x: m.roll(x, (1, -1), (0, 1)), (U, -1, 1)),
    Row("tile", lambda m, x: m.tile(x, (2, 1, 2)), ((2, 3), -1, 1)),
    Row("repeat", lambda m, x: m.repeat(x, 2, axis=1), ((2, 3), -1, 1)),
    Row("repeat_counts", lambda m, x: m.repeat(x, np.array([1, 0, 2]), axis=1), ((2, 3), -1, 1)),
    Row("repeat_flat", lambda m, x: m.repeat(x, 3), ((2, 3), -1, 1)),
    Row("split", lambda m, x: m.split(x, 2, axis=1), ((3, 4), -1, 1)),
    Row("split_at", lambda m, x: m.split(x, [1, 3]), ((5, 2), -1, 1)),
    Row("split_negative", lambda m, x: m.split(x, [1, -2]), ((5, 2), -1, 1), diff=False),
    Row("array_split", lambda m, x: m.array_split(x, 3), ((7,), -1, 1)),
    Row("hstack", lambda m, x, y: m.hstack([x, y]), ((3, 2), -1, 1), ((3, 1), -1, 1)),
    Row("vstack", lambda m, x, y: m.vstack([x, y]), ((3,), -1, 1), ((2, 3), -1, 1)),
    Row("column_stack", lambda m, x, y: m.column_stack([x, y]), ((3,), -1, 1), ((3, 2), -1, 1)),
    Row("pad", lambda m, x: m.pad(x, 1, constant_values=0.5), (U, -1, 1)),
    Row("pad_zero", lambda m, x: m.pad(x, ((0, 2), (1, 0))), (U, -1, 1)),
    Row("pad_reflect", lambda m, x: m.pad(x, ((1, 2), (0, 1)), mode="reflect"), (U, -1, 1)),
    Row("pad_edge", lambda m, x: m.pad(x, 2, mode="edge"), (U, -1, 1)),
    Row("pad_wrap", lambda m, x: m.pad(x, ((3, 1), (2, 2)), mode="wrap"), (U, -1, 1)),
    Row("diag", lambda m, x: m.diag(x, 1), ((3,), -1, 1)),
    Row("diag_2d", lambda m, x: m.diag(x, -1), (U, -1, 1)),
    Row("diagonal", lambda m, x: m.diagonal(x, 1, 2, 0), ((3, 4, 5), -1, 1)),
    Row("trace", lambda m, x: m.trace(x), ((4, 4), -1, 1)),
    Row("tril", lambda m, x: m.tril(x, -1), ((2, 3, 4), -1, 1)),
    Row("triu", lambda m, x: m.triu(x, 1), (U, -1, 1)),
    Row("linspace", lambda m, a, b: m.linspace(a, b, 5), ((), -1, 0), ((), 1, 2)),
    Row("linspace_vec", lambda m, a, b: m.linspace(a, b, 4, endpoint=False, axis=-1), ((2,), -1, 0),
        ((2,), 1, 2)),
    Row("meshgrid", lambda m, x, y: m.meshgrid(x, y), ((3,), -1, 1), ((4,), -1, 1)),
    Row("meshgrid_ij", lambda m, x, y, z: m.meshgrid(x, y, z, indexing="ij"), ((3,), -1, 1), ((4,), -1, 1),
        ((2,), -1, 1)),
    Row("atleast_3d", lambda m, x: m.atleast_3d(x), ((3,), -1, 1)),
    Row("atleast_2d", lambda m, x: m.atleast_2d(x), ((), -1, 1)),
    Row("kron", lambda m, x, y: m.kron(x, y), ((2, 3), -1, 1), ((3, 2), -1, 1)),
    Row("inner", lambda m, x, y: m.inner(x, y), (U, -1, 1), ((5, 4), -1, 1)),
    Row("cross", lambda m, x, y: m.cross(x, y), ((4, 3), -1, 1), ((4, 3), -1, 1)),
    Row("cross_2", lambda m, x, y: m.cross(x, y), ((4, 2), -1, 1), ((4, 2), -1, 1)),
    Row("tensordot", lambda m, x, y: m.tensordot(x, y), ((2, 3, 4), -1, 1), ((3, 4, 5), -1, 1)),
    Row("tensordot_axes", lambda m, x, y: m.tensordot(x, y, ([0], [1])), ((2, 3), -1, 1), ((4, 2), -1, 1)),
    Row("einsum_attention", lambda m, q, k: m.einsum("bhqd,bhkd->bhqk", q, k), ((2, 3, 4, 5), -1, 1),
        ((2, 3, 6, 5), -1, 1)),
    Row("einsum_ellipsis", lambda m, q, k: m.einsum("...qd,...kd->...qk", q, k), ((2, 4, 5), -1, 1),
        ((2, 6, 5), -1, 1)),
    Row("einsum_chain", lambda m, a, b, c: m.einsum("ij,jk,kl->il", a, b, c), ((2, 30), -1, 1),
        ((30, 40), -1, 1), ((40, 3), -1, 1)),
    Row("einsum_implicit", lambda m, a, b: m.einsum("ij,jk", a, b), ((2, 3), -1, 1), ((3, 4), -1, 1)),
    Row("einsum_trace", lambda m, a: m.einsum("ii", a), ((4, 4), -1, 1)),
    Row("einsum_diag", lambda m, a: m.einsum("iji->ij", a), ((3, 2, 3), -1, 1)),
    Row("einsum_sum_outer", lambda m, a, b: m.einsum("ij,k->jk", a, b), ((2, 3), -1, 1), ((4,), -1, 1)),
    Row("einsum_batch_bilinear", lambda m, x, W, y: m.einsum("bi,ij,bj->b", x, W, y), ((5, 3), -1, 1),
        ((3, 4), -1, 1), ((5, 4), -1, 1)),
    Row("matmul_broadcast", lambda m, a, b: m.matmul(a, b), ((2, 1, 3, 4), -1, 1), ((5, 4, 2), -1, 1)),
    Row("matmul_left_matrix", lambda m, a, b: a @ b, ((3, 4), -1, 1), ((2, 4, 5), -1, 1)),
    Row("matmul_vector", lambda m, a, b: m.matmul(a, b), ((2, 3, 4), -1, 1), ((4,), -1, 1)),
    Row("matmul_vector_left", lambda m, a, b: m.matmul(a, b), ((3,), -1, 1), ((2, 3, 4), -1, 1)),
    Row("dot_nd", lambda m, a, b: m.dot(a, b), ((2, 3, 4), -1, 1), ((5, 4, 2), -1, 1)),
    Row("dot_scalar", lambda m, a, b: m.dot(a, b), ((), -1, 1), ((3, 2), -1, 1)),
    Row("einsum_broadcast", lambda m, a, b: m.einsum("ij,jk->ik", a, b), ((3, 1), -1, 1), ((4, 5), -1, 1)),
    Row("einsum_broadcast_batch", lambda m, a, b: m.einsum("bij,bjk->bik", a, b), ((1, 2, 3), -1, 1),
        ((4, 3, 5), -1, 1)),
    # more of NumPy
    Row("diff", lambda m, x: m.diff(x, n=2, axis=0), ((5, 3), -1, 1)),
    Row("diff_prepend", lambda m, x: m.diff(x, prepend=0.5, append=x[:, :1]), ((3, 5), -1, 1)),
    Row("gradient", lambda m, x: m.gradient(x, 0.5), ((4, 5), -1, 1)),
    Row("gradient_1d", lambda m, x: m.gradient(x), ((6,), -1, 1)),
    Row("rollaxis", lambda m, x: m.rollaxis(x, 2, 1), ((2, 3, 4), -1, 1)),
    Row("r_", lambda m, x, y: m.r_[x, 1.0, y], ((3,), -1, 1), ((2,), -1, 1)),
    Row("c_", lambda m, x, y: m.c_[x, y], ((3,), -1, 1), ((3, 2), -1, 1)),
    Row("partition_kth", lambda m, x: m.partition(x, 2)[:, 2], ((3, 6), -1, 1)),
    Row("partition_below", lambda m, x: m.sum(m.partition(x, 2, axis=0)[:2], 0), ((5, 3), -1, 1)),
    Row("vsplit", lambda m, x: m.vsplit(x, 2), ((4, 3), -1, 1)),
    Row("hsplit", lambda m, x: m.hsplit(x, [1, 3]), ((2, 5), -1, 1)),
    Row("dsplit", lambda m, x: m.dsplit(x, 2), ((2, 3, 4), -1, 1)),
    Row("row_stack", lambda m, x, y: m.row_stack([x, y]) if m is jitad else m.vstack([x, y]), ((3,), -1, 1),
        ((2, 3), -1, 1)),
    Row("append", lambda m, x, y: m.append(x, y), ((2, 3), -1, 1), ((4,), -1, 1)),
    Row("append_axis", lambda m, x, y: m.append(x, y, axis=1), ((2, 3), -1, 1), ((2, 2), -1, 1)),
    Row("rot90", lambda m, x: m.rot90(x), ((2, 5), -1, 1)),
    Row("rot90_k3", lambda m, x: m.rot90(x, 3, axes=(2, 0)), ((2, 3, 4), -1, 1)),
    Row("select", lambda m, x: m.select([x < -0.5, x > 0.5], [x ** 2, m.sin(x)], x * 3), ((4, 5), -1, 1)),
    Row("real_imag", lambda m, x: m.real(x) * 2 + m.imag(x), ((4, 5), -1, 1)),
    Row("conj", lambda m, x: m.conj(x) * x, ((4, 5), -1, 1)),
    Row("angle", lambda m, x: m.angle(x) + m.angle(x, deg=True) + x, ((4, 5), -1, 1)),
]
IDS = [r.name for r in ROWS]
assert len(set(IDS)) == len(IDS)
DTYPES = [np.float64, np.float32]
TOL = {np.float64: dict(rtol=1e-10, atol=1e-12), np.float32: dict(rtol=2e-5, atol=2e-5)}


def _inputs(dtype):
    return [r.inputs(dtype, seed) for seed, r in enumerate(ROWS)]


def _leaves(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _reference(row, xs):
    if row.numpy:
        with np.errstate(all="ignore"):
            return [np.asarray(v) for v in _leaves(row.ref(np, *xs))]
    return [np.asarray(v) for v in _leaves(row.ref(jnp, *[jnp.asarray(x) for x in xs]))]


@pytest.fixture(scope="module", params=DTYPES, ids=["f64", "f32"])
def staged_outputs(request):
    """Every row's outputs from one jitted program, per dtype."""
    dtype = request.param
    inputs = _inputs(dtype)

    def program(*flat):
        outs, k = [], 0
        for row, xs in zip(ROWS, inputs):
            outs.append(tuple(_leaves(row.fn(jitad, *flat[k:k + len(xs)]))))
            k += len(xs)
        return tuple(outs)
    return dtype, inputs, jitad.jit(program)(*[x for xs in inputs for x in xs])


@pytest.mark.parametrize("i", range(len(ROWS)), ids=IDS)
def test_values_match_numpy_eager_and_staged(i, staged_outputs):
    dtype, inputs, staged = staged_outputs
    row, xs = ROWS[i], inputs[i]
    want = _reference(row, xs)
    with np.errstate(all="ignore"):
        eager = _leaves(row.fn(jitad, *xs))
    for label, got in (("eager", eager), ("staged", list(staged[i]))):
        assert len(got) == len(want), label
        for g, w in zip(got, want):
            g = np.asarray(g)
            assert g.shape == w.shape, (label, g.shape, w.shape)
            if row.numpy:
                assert g.dtype == w.dtype or (g.ndim == 0 and w.dtype.kind == g.dtype.kind), (label, g.dtype, w.dtype)
            else:   # jitad.nn keeps the input's float type
                assert g.dtype == dtype, (label, g.dtype)
            np.testing.assert_allclose(g, w, **TOL[dtype], err_msg=label)


def _weights(row, xs, seed):
    rng = np.random.default_rng(1000 + seed)
    return [rng.standard_normal(np.shape(w)) for w in _reference(row, xs)]


def _loss(m, row, ws):
    def loss(*xs):
        outs = _leaves(row.fn(m, *xs))
        return sum((m.sum(o * w) for o, w in zip(outs, ws)), 0.0)
    return loss


DIFF = [i for i, r in enumerate(ROWS) if r.diff]


@pytest.fixture(scope="module", params=DTYPES, ids=["f64", "f32"])
def staged_grads(request):
    """Every differentiable row's gradient from one program: the sum of the rows' losses."""
    dtype = request.param
    inputs = _inputs(dtype)
    weights = {i: _weights(ROWS[i], inputs[i], i) for i in DIFF}

    def total(*flat):
        acc, k = 0.0, 0
        for i in DIFF:
            n = len(inputs[i])
            acc = acc + _loss(jitad, ROWS[i], [w.astype(dtype) for w in weights[i]])(*flat[k:k + n])
            k += n
        return acc
    flat = [x for i in DIFF for x in inputs[i]]
    grads = jitad.grad(total, argnums=tuple(range(len(flat))))(*flat)
    out, k = {}, 0
    for i in DIFF:
        out[i] = grads[k:k + len(inputs[i])]
        k += len(inputs[i])
    return dtype, inputs, weights, out


@functools.lru_cache(maxsize=None)
def _jax_grads():
    """Every differentiable row's gradient in JAX, float64 (the reference for both dtypes),
    from one jitted program (op-by-op JAX would take 20 s)."""
    inputs = _inputs(np.float64)
    weights = {i: _weights(ROWS[i], inputs[i], i) for i in DIFF}

    def grads(flat):
        out, k = {}, 0
        for i in DIFF:
            xs = flat[k:k + len(inputs[i])]
            k += len(xs)
            out[i] = jax.grad(_loss(jnp, ROWS[i], weights[i]), argnums=tuple(range(len(xs))))(*xs)
        return out
    return jax.jit(grads)([jnp.asarray(x) for i in DIFF for x in inputs[i]])


@pytest.mark.parametrize("i", DIFF, ids=[IDS[i] for i in DIFF])
def test_gradients_match_jax(i, staged_grads):
    dtype, inputs, weights, grads = staged_grads
    want = _jax_grads()[i]
    tol = dict(rtol=1e-9, atol=1e-10) if dtype == np.float64 else dict(rtol=1e-3, atol=1e-4)
    for g, w in zip(grads[i], want):
        assert np.ndim(g) == 0 or np.asarray(g).dtype == dtype   # (a scalar's is a Python float)
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w), **tol)


def _upto(name):
    return IDS.index(name) + 1


GROUPS = {"elementwise": (0, _upto("layer_norm")), "reductions": (_upto("layer_norm"), _upto("cumprod")),
          "shapes": (_upto("cumprod"), _upto("pad_wrap")), "shapes_2": (_upto("pad_wrap"), _upto("kron")),
          "contractions": (_upto("kron"), _upto("einsum_diag")), "contractions_2": (_upto("einsum_diag"), len(ROWS))}


@pytest.mark.parametrize("group", GROUPS)
def test_check_grads_order_2(group):
    """Reverse mode, and forward-over-reverse, against central differences:
    one check per group (each row's inputs are their own arguments)."""
    lo, hi = GROUPS[group]
    rows = [i for i in DIFF if lo <= i < hi and ROWS[i].name not in ("floor", "ceil", "trunc", "round",
                                                                     "round_2", "mod", "remainder")]
    inputs = _inputs(np.float64)
    weights = {i: _weights(ROWS[i], inputs[i], i) for i in rows}

    def total(*flat):
        acc, k = 0.0, 0
        for i in rows:
            n = len(inputs[i])
            acc = acc + _loss(jitad, ROWS[i], weights[i])(*flat[k:k + n])
            k += n
        return acc
    flat = tuple(x if x.shape else float(x) for i in rows for x in inputs[i])
    check_grads(total, flat, order=2, rtol=1e-5, atol=1e-6)   # order 2 runs forward mode (over reverse)


# -- edge values -------------------------------------------------------------------

def test_prod_and_cumprod_are_exact_at_zeros_and_negatives():
    x = np.array([[2.0, 0.0, -3.0, 0.5], [1.0, -1.0, 0.0, 0.0]])
    assert np.array_equal(jitad.jit(lambda x: jitad.prod(x, 1))(x), np.prod(x, 1))
    want = jax.grad(lambda x: jnp.sum(jnp.prod(x, 1)))(x)
    assert np.allclose(jitad.grad(lambda x: jitad.sum(jitad.prod(x, 1)))(x), want)
    want = jax.grad(lambda x: jnp.sum(jnp.cumprod(x, 1) * jnp.arange(4.0)))(x)
    assert np.allclose(jitad.grad(lambda x: jitad.sum(jitad.cumprod(x, 1) * np.arange(4.0)))(x), want)
    assert jitad.jit(lambda x: jitad.prod(x[:, :0], 1))(x).tolist() == [1.0, 1.0]


def test_arg_best_takes_the_first_and_nan():
    x = np.array([[1.0, 3.0, 3.0, -1.0], [np.nan, 2.0, np.nan, 5.0]])
    for f in ("argmax", "argmin"):
        got = jitad.jit(lambda x: getattr(jitad, f)(x, axis=1))(x)
        assert got.tolist() == getattr(np, f)(x, axis=1).tolist()
    with pytest.raises(jitad.ShapeError, match="argmax"):
        jitad.argmax(np.zeros((2, 0)), axis=1)


def test_special_values_as_numpy():
    v = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e300, -1e-300, 0.5, 1.5, 2.5, -2.5])
    names = ["sign", "floor", "ceil", "trunc", "round", "isnan", "isinf", "isfinite", "nan_to_num", "sinh",
             "cosh", "arcsinh", "tan", "exp2", "log2", "sinc", "reciprocal"]
    outs = jitad.jit(lambda x: tuple(getattr(jitad, n)(x) for n in names))(v)
    with np.errstate(all="ignore"):
        for n, got in zip(names, outs):
            np.testing.assert_allclose(got, getattr(np, n)(v), rtol=1e-12, err_msg=n)
    pairs = [(-np.inf, -np.inf), (np.inf, np.inf), (np.nan, 1.0), (1.0, np.nan), (1e308, 1e308), (0.0, 0.0)]
    a, b = (np.array(p) for p in zip(*pairs))
    for n in ("logaddexp", "logaddexp2", "hypot", "fmax", "fmin"):
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(jitad.jit(getattr(jitad, n))(a, b), getattr(np, n)(a, b), err_msg=n)


def test_derivatives_at_the_points_compositions_get_wrong_without_care():
    # sinc at 0 (second derivative -pi^2/3), arcsinh at 0 and large x, ties in logaddexp
    for f, fj, x in [(jitad.sinc, jnp.sinc, 0.0), (jitad.arcsinh, jnp.arcsinh, 0.0),
                     (jitad.arcsinh, jnp.arcsinh, -1e10), (jitad.arccosh, jnp.arccosh, 1e10)]:
        assert jitad.grad(f)(x) == pytest.approx(float(jax.grad(fj)(x)), rel=1e-12)
        assert jitad.grad(jitad.grad(f))(x) == pytest.approx(float(jax.grad(jax.grad(fj))(x)), rel=1e-9, abs=1e-30)
    assert jitad.grad(jitad.logaddexp, argnums=(0, 1))(1.0, 1.0) == pytest.approx((0.5, 0.5))


def test_batched_matmul_paths():
    """Batched products of any size are one `bmm` (a GEMM per batch entry), gradients too."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 40, 50)), rng.standard_normal((3, 50, 40))
    w = rng.standard_normal((3, 40, 40))
    graph = str(jitad.trace(jitad.matmul, a, b))
    assert graph.count("bmm") == 1 and "matmul" not in graph
    assert np.allclose(jitad.jit(jitad.matmul)(a, b), a @ b)
    ga, gb = jitad.grad(lambda a, b: jitad.sum(jitad.matmul(a, b) * w), argnums=(0, 1))(a, b)
    assert np.allclose(ga, w @ np.swapaxes(b, 1, 2)) and np.allclose(gb, np.swapaxes(a, 1, 2) @ w)
    assert str(jitad.trace(jitad.matmul, a[:, :4, :5], b[:, :5, :4])).count("bmm") == 1


def test_einsum_and_matmul_at_a_large_batch_and_errors():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((100, 3, 4)), rng.standard_normal((100, 4, 2))   # past the unrolled size
    assert np.allclose(jitad.jit(jitad.matmul)(a, b), a @ b)
    with pytest.raises(jitad.ShapeError, match="einsum"):
        jitad.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((4, 5)))
    with pytest.raises(jitad.ShapeError, match="einsum"):
        jitad.einsum("ij->ik", np.ones((2, 3)))
    with pytest.raises(jitad.ShapeError, match="matmul"):
        jitad.matmul(np.ones((2, 3, 4)), np.ones((3, 5, 2)))


def test_argument_errors_name_the_function():
    with pytest.raises(jitad.ShapeError, match="`var`: axis 2"):
        jitad.var(np.ones((2, 3)), axis=2)
    with pytest.raises(jitad.ArgumentError, match="`repeat`"):
        jitad.jit(lambda x, r: jitad.repeat(x, r))(np.ones(3), 2)
    with pytest.raises(jitad.ShapeError, match="`split`"):
        jitad.split(np.ones(5), 2)
    with pytest.raises(jitad.ShapeError, match="`squeeze`"):
        jitad.squeeze(np.ones((2, 3)), 0)


def test_exact_gelu_matches_jax():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    x = np.linspace(-4.0, 4.0, 9)
    f = jitad.jit(lambda x: jitad.nn.gelu(x, approximate=False))
    np.testing.assert_allclose(f(x), jax.nn.gelu(x, approximate=False), rtol=1e-12, atol=1e-300)
    g = jitad.grad(lambda x: jitad.sum(jitad.nn.gelu(x, approximate=False)))(x)
    want = jax.grad(lambda x: jax.numpy.sum(jax.nn.gelu(x, approximate=False)))(x)
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-300)


def test_constants_as_numpy():
    assert np.array_equal(jitad.eye(3, 4, 1), np.eye(3, 4, 1))
    assert jitad.identity(2, "f32").dtype == np.float32
    assert np.array_equal(jitad.arange(2, 9, 3), np.arange(2, 9, 3))
    assert np.allclose(jitad.linspace(0.0, 1.0, 7), np.linspace(0.0, 1.0, 7))
    assert jitad.grad(lambda a: jitad.sum(jitad.linspace(a, 2.0 * a, 5)))(1.0) == pytest.approx(7.5)


def test_a_transformer_block_matches_jax():
    """layer_norm, attention through einsum and batched matmul, softmax, gelu: loss and gradients."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 8, 16)) * 0.5
    wq, wk, wv = (rng.standard_normal((16, 16)) * 0.3 for _ in range(3))
    w1, w2 = rng.standard_normal((16, 32)) * 0.3, rng.standard_normal((32, 16)) * 0.3

    def block(m, nn, ln, x, wq, wk, wv, w1, w2):
        h = ln(x)
        q, k, v = (m.reshape(h @ w, (2, 8, 4, 4)) for w in (wq, wk, wv))
        att = nn.softmax(m.einsum("bqhd,bkhd->bhqk", q, k) / 2.0, axis=-1)
        y = x + m.reshape(m.einsum("bhqk,bkhd->bqhd", att, v), (2, 8, 16))
        return m.mean(m.square(y + nn.gelu(ln(y) @ w1) @ w2))
    mine = lambda *a: block(jitad, jitad.nn, lambda t: jitad.nn.layer_norm(t), *a)
    ref = lambda *a: block(jnp, jax.nn, lambda t: _layer_norm_ref(jnp, t, 1.0, 0.0), *a)
    args = (x, wq, wk, wv, w1, w2)
    assert jitad.jit(mine)(*args) == pytest.approx(float(jax.jit(ref)(*args)), rel=1e-10)
    got = jitad.grad(mine, argnums=tuple(range(6)))(*args)
    want = jax.jit(jax.grad(ref, argnums=tuple(range(6))))(*args)   # (op by op: 5 s)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-10)


# -- the same rows on the CUDA backend (numba-cuda's simulator without a GPU) ----------

def test_rows_on_the_cuda_backend_match_the_cpu(staged_outputs, staged_grads):
    """Every row's value and every differentiable row's gradient, one program each, on
    `device="cuda"` against the CPU backend (float64 fixture runs only: the simulator is slow)."""
    dtype, inputs, cpu_values = staged_outputs
    if dtype != np.float64 or staged_grads[0] != np.float64:
        pytest.skip("the float32 fixtures check the CPU backend only")
    _, _, weights, cpu_grads = staged_grads
    flat = [x for xs in inputs for x in xs]

    def program(*flat):
        outs, k = [], 0
        for row, xs in zip(ROWS, inputs):
            outs.append(tuple(_leaves(row.fn(jitad, *flat[k:k + len(xs)]))))
            k += len(xs)
        return tuple(outs)
    gpu_values = jitad.jit(program, device="cuda")(*flat)
    for row, got, want in zip(ROWS, gpu_values, cpu_values):
        for g, w in zip(got, want):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12, atol=1e-13, err_msg=row.name)

    def total(*flat):
        acc, k = 0.0, 0
        for i in DIFF:
            n = len(inputs[i])
            acc = acc + _loss(jitad, ROWS[i], weights[i])(*flat[k:k + n])
            k += n
        return acc
    dflat = [x for i in DIFF for x in inputs[i]]
    grads = jitad.grad(total, argnums=tuple(range(len(dflat))), device="cuda")(*dflat)
    k = 0
    for i in DIFF:
        for g, w in zip(grads[k:k + len(inputs[i])], cpu_grads[i]):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-11, atol=1e-12, err_msg=ROWS[i].name)
        k += len(inputs[i])


# -- the rows over (3, 4) inputs again on empty and size-1 axes --------------------------

SHAPE_ROWS = [i for i, r in enumerate(ROWS) if all(shape == U for shape, _, _ in r.specs)]


@pytest.mark.parametrize("shape", [(0, 4), (1, 4), (3, 1)], ids=str)
def test_rows_on_empty_and_size_1_axes(shape):
    """Values against NumPy, gradients against JAX, one program per shape."""
    rows, inputs = [], []
    for k in SHAPE_ROWS:
        r = ROWS[k]
        rng = np.random.default_rng(k)
        xs = [rng.uniform(lo, hi, shape) for _, lo, hi in r.specs]
        try:
            _reference(r, xs)
        except ValueError:   # NumPy refuses (reflect-padding an empty axis): so must jitad
            with pytest.raises(jitad.JitadError, match=r.name.split("_")[0]):
                jitad.jit(lambda *xs: r.fn(jitad, *xs))(*xs)
            continue
        rows.append(r)
        inputs.append(xs)
    flat = [x for xs in inputs for x in xs]

    def split(flat):
        k = 0
        for r, xs in zip(rows, inputs):
            yield r, flat[k:k + len(xs)]
            k += len(xs)
    got = jitad.jit(lambda *flat: tuple(tuple(_leaves(r.fn(jitad, *xs))) for r, xs in split(flat)))(*flat)
    for r, xs, outs in zip(rows, inputs, got):
        for g, w in zip(outs, _reference(r, xs)):
            assert np.shape(g) == w.shape, r.name
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=r.name)

    diff = [(r, xs) for r, xs in zip(rows, inputs) if r.diff]
    for m in (jitad, jnp):
        def total(*flat, m=m):
            return sum((m.sum(o) for k, (r, _) in enumerate(diff)
                        for o in _leaves(r.fn(m, *flat[sum(len(x) for _, x in diff[:k]):][:len(diff[k][1])]))), 0.0)
        dflat = [x for _, xs in diff for x in xs]
        if m is jitad:
            mine = jitad.grad(total, argnums=tuple(range(len(dflat))))(*dflat)
        else:
            theirs = jax.jit(jax.grad(total, argnums=tuple(range(len(dflat)))))(*dflat)
    names = [r.name for r, xs in diff for _ in xs]
    for g, w, name in zip(mine, theirs, names):
        assert np.shape(g) == np.shape(w), name
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-9, atol=1e-12, err_msg=name)
