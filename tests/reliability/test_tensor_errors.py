"""Bad and unusual tensor inputs: shape errors name the op and both shapes at
trace time; any array layout or convertible dtype gives the result of its contiguous
float64 (int64) copy; unsupported dtypes are `ArgumentError`s; empty arrays, NaN/inf and
out-of-range staged indices behave as documented and never crash or misread memory.
"""
import operator
import os
import warnings

import numpy as np
import pytest

import jitad
from jitad.ir.interpret import interpret

pytestmark = pytest.mark.llvm

THIS_FILE = os.path.basename(__file__)


def arr(*shape):
    return np.arange(1.0, 1.0 + np.prod(shape, dtype=int)).reshape(shape) / 7.0


# -- shapes that do not broadcast or multiply: ShapeError at trace time ------------

BAD_SHAPES = [
    # (id, fn, argument shapes, op name the message must give)
    *[(name, lambda x, y, f=f: f(x, y), [(2, 3), (4,)], name)
      for name, f in [("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                      ("div", operator.truediv), ("pow", operator.pow), ("mod", operator.mod),
                      ("floordiv", operator.floordiv), ("lt", operator.lt), ("eq", operator.eq)]],
    ("add[3x1,4x2]", lambda x, y: x + y, [(3, 1), (4, 2)], "add"),
    ("maximum", lambda x, y: jitad.maximum(x, y), [(2, 3), (4,)], "maximum"),
    ("minimum", lambda x, y: jitad.minimum(x, y), [(5,), (4,)], "minimum"),
    ("matmul", lambda x, y: x @ y, [(2, 3), (4, 2)], "matmul"),
    ("matmul[vec,mat]", lambda x, y: x @ y, [(3,), (4, 2)], "matmul"),
    ("matmul[mat,vec]", lambda x, y: jitad.matmul(x, y), [(2, 3), (4,)], "matmul"),
    ("matmul[3d]", lambda x, y: x @ y, [(2, 2, 3), (4, 2)], "matmul"),   # (batch axes are fine: NumPy)
    ("matmul[batch]", lambda x, y: x @ y, [(2, 2, 3), (3, 3, 2)], "matmul"),
    ("dot", lambda x, y: jitad.dot(x, y), [(3,), (4,)], "dot"),
    ("dot[mat]", lambda x, y: jitad.dot(x, y), [(2, 3), (2, 3)], "matmul"),
    ("concatenate", lambda x, y: jitad.concatenate([x, y], 0), [(2, 3), (2, 4)], "concatenate"),
    ("mul[in sum]", lambda x, y: jitad.sum(x * y), [(2, 3), (3, 2)], "mul"),
    ("where", lambda x, y: jitad.where(x > 0, x, y), [(2, 3), (4,)], "where"),
    ("stack", lambda x, y: jitad.stack([x, y]), [(2, 3), (3, 2)], "stack"),
    ("conv2d", lambda x, w: jitad.conv2d(x, w), [(1, 2, 4, 4), (3, 3, 2, 2)], "conv2d"),
    ("cross_entropy", lambda x, y: jitad.cross_entropy(x, y.astype(np.int64)), [(4, 5), (3,)],
                 "cross_entropy"),
]


def _ids(cases):
    return [c.values[0] if hasattr(c, "values") else c[0] for c in cases]


@pytest.mark.parametrize("name, fn, shapes, op", BAD_SHAPES, ids=_ids(BAD_SHAPES))
def test_shape_error_at_trace_time(name, fn, shapes, op):
    args = [arr(*s) for s in shapes]
    with pytest.raises(jitad.ShapeError) as info:
        jitad.trace(fn, *args)            # tracing alone raises: nothing is compiled
    msg = str(info.value)
    what, _, where = msg.partition("\n  at ")     # "<what went wrong>\n  at <file>:<line>: <source>"
    assert isinstance(info.value, ValueError) and isinstance(info.value, jitad.JitadError)
    assert f"`{op}`" in what, f"the message does not name the op `{op}`: {msg}"
    for s in shapes:
        assert str(tuple(s)) in what, f"the message does not give the shape {tuple(s)}: {msg}"
    assert THIS_FILE in where, f"the message does not point at the user's line: {msg}"


@pytest.mark.parametrize("call", ["jit", "grad"])
def test_shape_error_from_jit_and_grad(call):
    f = lambda x, y: jitad.sum(x * y)     # noqa: E731
    g = jitad.jit(f) if call == "jit" else jitad.grad(f)
    with pytest.raises(jitad.ShapeError, match=r"\(2, 3\).*\(4,\)"):
        g(arr(2, 3), arr(4))


def test_shape_error_for_a_captured_constant():
    with pytest.raises(jitad.ShapeError, match=r"\(2, 3\).*\(4,\)"):
        jitad.jit(lambda x: x + np.ones(4))(arr(2, 3))


@pytest.mark.parametrize("fn", [lambda x: x.reshape((4, 2)), lambda x: jitad.reshape(x, (5, -1)),
                                lambda x: jitad.broadcast_to(x, (3, 2)), lambda x: jitad.sum(x, 2),
                                lambda x: jitad.max(x[:0])],
                         ids=["reshape", "reshape[-1]", "broadcast_to", "sum[axis]", "max[empty]"])
def test_other_shape_errors(fn):
    with pytest.raises(jitad.ShapeError):
        jitad.trace(fn, arr(2, 3))


def test_broadcast_to_names_both_shapes():
    with pytest.raises(jitad.ShapeError, match=r"broadcast_to.*\(4,\).*\(3, 2\)"):
        jitad.trace(lambda x: jitad.broadcast_to(x, (3, 2)), arr(4))


@pytest.mark.parametrize("axes", [(0, 0), (0,), (0, 1, 2), (0, 2)])
def test_transpose_with_bad_axes_raises(axes):
    with pytest.raises(jitad.JitadError):
        jitad.jit(lambda x: jitad.transpose(x, axes))(arr(2, 3))


def test_eager_shape_mismatch_is_a_value_error():
    with pytest.raises(ValueError):
        jitad.maximum(arr(2, 3), arr(4))


# -- layouts and convertible dtypes read as their contiguous copy ----------------------

def _unaligned(x):
    buf = np.zeros(x.nbytes + 1, np.uint8)
    out = np.frombuffer(buf.data, x.dtype, count=x.size, offset=1).reshape(x.shape)
    out[...] = x
    return out


def _matrix(x):
    with warnings.catch_warnings(action="ignore"):   # np.matrix is pending deprecation
        return np.asmatrix(x)


def _readonly(x):
    x = x.copy()
    x.flags.writeable = False
    return x


BASE = arr(3, 4)
W34 = np.linspace(-1.0, 2.0, 12).reshape(3, 4)
LAYOUTS = {
    "strided x[:, ::2]": np.repeat(BASE, 2, axis=1)[:, ::2],
    "transposed x.T": np.ascontiguousarray(BASE.T).T,
    "fortran": np.asfortranarray(BASE),
    "reversed x[::-1]": np.ascontiguousarray(BASE[::-1])[::-1],
    "offset view x[1:]": np.concatenate([np.zeros((1, 4)), BASE])[1:],
    "zero stride": np.broadcast_to(BASE[1], (3, 4)),
    "big-endian": BASE.astype(">f8"),
    "float16": BASE.astype(np.float16),
    "longdouble": BASE.astype(np.longdouble),
    "int32": np.arange(12, dtype=np.int32).reshape(3, 4),
    "int16 fortran": np.asfortranarray(np.arange(12, dtype=np.int16).reshape(3, 4)),
    "uint8": np.arange(12, dtype=np.uint8).reshape(3, 4),
    "bool": (np.arange(12) % 3 == 0).reshape(3, 4),
    "readonly": _readonly(BASE),
    "matrix subclass": _matrix(BASE),
    "unaligned": _unaligned(BASE),
}

_elementwise = jitad.jit(lambda x: x * 2.0 + 1.0)
_reduction = jitad.jit(lambda x: jitad.sum(jitad.exp(x * 0.1) * W34))
_gradient = jitad.grad(lambda x: jitad.sum(jitad.exp(x * 0.1) * W34))


def _contiguous_copy(x):
    x = np.asarray(x)
    if x.dtype.kind == "f":
        return np.ascontiguousarray(x, np.float32 if x.dtype == np.float32 else np.float64)
    return np.ascontiguousarray(x, np.bool_ if x.dtype == np.bool_ else np.int64)


@pytest.mark.parametrize("x", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_layouts_and_dtypes_read_as_the_contiguous_copy(x):
    c = _contiguous_copy(x)
    for _ in range(2):   # the first call runs the dispatcher, later ones the native entry
        for f in (_elementwise, _reduction):
            got, want = f(x), f(c)
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(f(BASE), BASE * 2.0 + 1.0 if f is _elementwise else f(BASE.copy()))
    np.testing.assert_allclose(_elementwise(x), np.asarray(c, np.float64) * 2.0 + 1.0, rtol=1e-15)
    if c.dtype == np.float64:   # (a float16 argument's gradient is float16, as JAX's: computed in float64, then rounded)
        want = _gradient(c).astype(x.dtype) if x.dtype == np.float16 else _gradient(c)
        np.testing.assert_array_equal(_gradient(x), want)
        assert _gradient(x).dtype == (np.float16 if x.dtype == np.float16 else np.float64)
        np.testing.assert_allclose(_gradient(x), 0.1 * np.exp(c * 0.1) * W34, rtol=1e-3 if x.dtype == np.float16 else 1e-13)


INDEX_LAYOUTS = {
    "int32": np.array([3, 0, 0, 2], dtype=np.int32),
    "uint8": np.array([3, 0, 0, 2], dtype=np.uint8),
    "int16 strided": np.array([3, 9, 0, 9, 0, 9, 2, 9], dtype=np.int16)[::2],
    "int64 reversed": np.array([2, 0, 0, 3])[::-1],
    "big-endian": np.array([3, 0, 0, 2], dtype=">i8"),
}
_gather = jitad.jit(lambda e, i: e[i] * 1.0)


@pytest.mark.parametrize("idx", INDEX_LAYOUTS.values(), ids=INDEX_LAYOUTS.keys())
def test_index_arrays_of_any_int_dtype_or_layout(idx):
    E = arr(4, 3)
    want = E[np.asarray(idx, np.int64)]
    np.testing.assert_array_equal(_gather(E, idx), want)
    np.testing.assert_array_equal(_gather(E.T.copy().T, idx), want)   # and a Fortran-order table


def test_uint64_beyond_int64_is_refused_or_exact():
    x = np.array([2 ** 63 + 4096, 3], dtype=np.uint64)
    try:
        out = jitad.jit(lambda i: i * 1.0)(x)
    except (jitad.ArgumentError, OverflowError):
        return
    np.testing.assert_array_equal(out, x.astype(np.float64))


def test_arrays_of_new_shapes_recompile_and_stay_correct():
    f = jitad.jit(lambda x: jitad.sum(x * x, 0))
    for shape in [(3, 4), (4, 3), (12,), (3, 4), (1, 1), (0, 2), (3, 4)]:
        x = arr(*shape)
        np.testing.assert_allclose(f(x), np.sum(x * x, 0), rtol=1e-14)
        np.testing.assert_allclose(f(x.astype(np.float32)), np.sum(x * x, 0), rtol=1e-6)


def test_a_0d_array_is_a_scalar():
    f = jitad.jit(lambda s, x: s * x)
    np.testing.assert_array_equal(f(np.array(2.0), BASE), 2.0 * BASE)
    np.testing.assert_array_equal(f(2.0, BASE), 2.0 * BASE)


# -- unsupported dtypes: ArgumentError ----------------------------------------------

BAD_DTYPES = {   # (complex arrays are taken: tests/numpy/test_complex.py)
    "object": np.array([1.0, None]),
    "str": np.array(["a", "b"]),
    "bytes": np.array([b"a"]),
    "datetime": np.array(["2020-01-01"], dtype="datetime64[D]"),
    "structured": np.zeros(2, dtype=[("a", "f8")]),
}


@pytest.mark.parametrize("x", BAD_DTYPES.values(), ids=BAD_DTYPES.keys())
@pytest.mark.parametrize("how", ["jit", "grad", "trace"])
def test_unsupported_array_dtypes_raise_argument_error(x, how):
    f = lambda a: jitad.sum(a * 2.0)      # noqa: E731
    call = {"jit": jitad.jit(f), "grad": jitad.grad(f), "trace": lambda a: jitad.trace(f, a)}[how]
    with pytest.raises(jitad.ArgumentError, match="dtype") as info:
        call(x)
    assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("x", ["a string", object()], ids=["str", "object"])
def test_unsupported_scalar_arguments_raise_argument_error(x):
    with pytest.raises(jitad.ArgumentError):
        jitad.jit(lambda a: a * 2.0)(x)


@pytest.mark.parametrize("x", ["a string", object()], ids=["str", "object"])
def test_unsupported_scalar_argument_message_names_the_type(x):
    with pytest.raises(jitad.ArgumentError, match=type(x).__name__):
        jitad.jit(lambda a: a * 2.0)(x)


# -- empty arrays ---------------------------------------------------------------------

E0, E03 = np.ones((0,)), np.ones((0, 3))


@pytest.mark.parametrize("fn, args, want", [
    (lambda x: x * 2.0 + 1.0, (E0,), np.zeros(0)),
    (lambda x: jitad.exp(x) - x, (E03,), np.zeros((0, 3))),
    (lambda x, b: x + b, (E03, np.ones(3)), np.zeros((0, 3))),
    (lambda x, b: jitad.maximum(x, b), (E03, np.ones((1, 3))), np.zeros((0, 3))),
    (lambda x: jitad.sum(x), (E0,), 0.0),
    (lambda x: jitad.sum(x), (E03,), 0.0),
    (lambda x: jitad.sum(x, 0), (E03,), np.zeros(3)),
    (lambda x: jitad.sum(x, 1), (E03,), np.zeros(0)),
    (lambda x: x.sum(0, keepdims=True), (E03,), np.zeros((1, 3))),
    (lambda x: jitad.mean(x), (E0,), np.nan),
    (lambda a, b: a @ b, (E03, np.ones((3, 2))), np.zeros((0, 2))),
    (lambda a, b: a @ b, (np.ones((2, 0)), np.ones((0, 3))), np.zeros((2, 3))),
    (lambda a, b: a @ b, (np.ones((40, 0)), np.ones((0, 40))), np.zeros((40, 40))),   # the BLAS path
    (lambda a, b: jitad.concatenate([a, b]), (E03, np.ones((2, 3))), np.ones((2, 3))),
    (lambda x: jitad.softmax(x), (np.ones((0, 5)),), np.zeros((0, 5))),
    (lambda x: jitad.reshape(x, (3, 0)), (E03,), np.zeros((3, 0))),
    (lambda x: x.T, (E03,), np.zeros((3, 0))),
    (lambda e, i: e[i], (np.ones((4, 3)), np.zeros(0, np.int64)), np.zeros((0, 3))),
], ids=["vec", "exp", "bcast", "maximum", "sum(0,)", "sum(0,3)", "sum axis0", "sum axis1", "keepdims",
        "mean nan", "matmul n=0", "matmul k=0", "matmul k=0 blas", "concatenate", "softmax", "reshape", "T",
        "gather none"])
def test_empty_arrays(fn, args, want):
    with np.errstate(all="ignore"):
        got = jitad.jit(fn)(*args)
        np.testing.assert_array_equal(got, want)
        assert np.shape(got) == np.shape(want)
        out = interpret(jitad.trace(fn, *args), list(args))[0]
        np.testing.assert_array_equal(out, want)


def test_gradient_through_empty_arrays():
    g = jitad.grad(lambda x, y: jitad.sum(x * 2.0) + jitad.sum(y @ y.T), argnums=(0, 1))(E03, np.ones((2, 0)))
    assert g[0].shape == (0, 3) and g[1].shape == (2, 0)


@pytest.mark.parametrize("index", [1, np.array([0, 1])], ids=["E[i]", "E[idx]"])
def test_indexing_an_empty_table_never_reads_outside_it(index):
    table = np.ones((0, 3))
    try:
        out = jitad.jit(lambda e, i: e[i])(table, index)
    except jitad.JitadError:
        return
    np.testing.assert_array_equal(out, np.zeros(np.shape(index) + (3,)))


# -- out-of-range staged indices clamp ------------------------------------------
# (a negative index first counts from the end, as in NumPy: tests/reliability/test_indexing.py)

E43 = arr(4, 3)
OUT_OF_RANGE = [-100, 4, 10 ** 9, 2 ** 63 - 1, -2 ** 63]


def _clamped(i):
    return min(max(i + 4 if i < 0 else i, 0), 3)


@pytest.mark.parametrize("i", OUT_OF_RANGE)
def test_out_of_range_staged_index_clamps(i):
    f = lambda e, k: e[k] * 1.0           # noqa: E731
    want = E43[_clamped(i)]
    np.testing.assert_array_equal(jitad.jit(f)(E43, i), want)
    np.testing.assert_array_equal(interpret(jitad.trace(f, E43, 0), [E43, i])[0], want)
    g = jitad.grad(lambda e, k: jitad.sum(e[k] * np.array([1.0, 2.0, 3.0])))(E43, i)
    expected = np.zeros((4, 3))
    expected[_clamped(i)] = [1.0, 2.0, 3.0]
    np.testing.assert_array_equal(g, expected)


def test_out_of_range_gather_clamps_and_its_adjoint_adds_into_the_clamped_rows():
    idx = np.array(OUT_OF_RANGE + [2])
    clamped = np.array([_clamped(int(i)) for i in idx])
    np.testing.assert_array_equal(jitad.jit(lambda e, k: e[k])(E43, idx), E43[clamped])
    g = jitad.grad(lambda e, k: jitad.sum(e[k]))(E43, idx)
    np.testing.assert_array_equal(g, np.bincount(clamped, minlength=4)[:, None] * np.ones((1, 3)))


# -- NaN and inf propagate as IEEE and NumPy say -----------------------------------------

nan, inf = np.nan, np.inf
SPECIAL = np.array([nan, 1.0, -inf, inf, 0.0, -0.5, 2.0])
REVERSED = SPECIAL[::-1].copy()     # a captured constant
NAN_CASES = {
    "exp": (lambda m, x: m.exp(x), SPECIAL),
    "log": (lambda m, x: m.log(x), SPECIAL),
    "log1p": (lambda m, x: m.log1p(x - 0.5), SPECIAL),
    "expm1": (lambda m, x: m.expm1(x), SPECIAL),
    "sqrt": (lambda m, x: m.sqrt(x), SPECIAL),
    "sin": (lambda m, x: m.sin(x), SPECIAL),
    "cos": (lambda m, x: m.cos(x), SPECIAL),
    "tanh": (lambda m, x: m.tanh(x), SPECIAL),
    "sigmoid": (lambda m, x: 1.0 / (1.0 + m.exp(-x)) if m is np else m.sigmoid(x), SPECIAL),
    "relu": (lambda m, x: m.maximum(x, 0.0) if m is np else m.relu(x), SPECIAL),
    "abs": (lambda m, x: m.abs(x), SPECIAL),
    "square": (lambda m, x: m.square(x), SPECIAL),
    "maximum": (lambda m, x: m.maximum(x, REVERSED), SPECIAL),
    "minimum": (lambda m, x: m.minimum(REVERSED, x), SPECIAL),
    "clip": (lambda m, x: m.clip(x, -1.0, 1.0), SPECIAL),
    "where": (lambda m, x: m.where(x > 0.5, x, -x), SPECIAL),
    "div": (lambda m, x: x / REVERSED, SPECIAL),
    "div0": (lambda m, x: x / 0.0, SPECIAL),
    "mod0": (lambda m, x: x % 0.0, SPECIAL),
    "floordiv0": (lambda m, x: x // 0.0, SPECIAL),
    "pow": (lambda m, x: x ** 2.5, SPECIAL),   # (NumPy turns x ** 0.5 into sqrt; C99 pow(-inf, 0.5) is +inf)
    "rpow": (lambda m, x: 2.0 ** x, SPECIAL),
    "sum": (lambda m, x: m.sum(x[1:]), SPECIAL),
    "sum nan": (lambda m, x: m.sum(x), SPECIAL),
    "max nan first": (lambda m, x: m.max(x), SPECIAL),
    "max nan last": (lambda m, x: m.max(x), REVERSED),
    "min nan middle": (lambda m, x: m.min(m.reshape(x[1:], (2, 3)), 1), SPECIAL),
    "max axis": (lambda m, x: m.max(m.reshape(x[:6], (3, 2)), 1), SPECIAL),
    "mean": (lambda m, x: m.mean(x), SPECIAL),
    "matmul": (lambda m, x: m.reshape(x[1:], (2, 3)) @ m.ones((3, 2)), SPECIAL),
    "dot": (lambda m, x: m.dot(x, m.ones(7)), SPECIAL),
    "softmax": (lambda m, x: m.exp(x - m.max(x)) / m.sum(m.exp(x - m.max(x))) if m is np else m.softmax(x),
                np.array([1.0, nan, 2.0])),
    "max_pool2d": (lambda m, x: np.max(x.reshape(2, 2), axis=(0, 1)).reshape(1, 1, 1, 1) if m is np
                   else m.max_pool2d(m.reshape(x, (1, 1, 2, 2)), 2), np.array([1.0, nan, 0.0, 2.0])),
}


@pytest.mark.parametrize("case", NAN_CASES.values(), ids=NAN_CASES.keys())
def test_nan_and_inf_propagate(case):
    fn, x = case
    with np.errstate(all="ignore"):
        want = fn(np, x)
    got = jitad.jit(lambda a: fn(jitad, a))(x)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0, equal_nan=True)   # inf == inf, nan == nan


@pytest.mark.parametrize("x, want", [pytest.param(np.array([inf, 1.0]), inf, id="+inf"),
                                     pytest.param(np.array([-inf, -inf]), -inf, id="all -inf"),
                                     pytest.param(np.array([-inf, 0.0]), 0.0, id="one -inf")])
def test_logsumexp_of_infinities(x, want):
    assert jitad.jit(lambda a: jitad.logsumexp(a))(x) == want


def test_cross_entropy_with_a_masked_logit():
    logits = np.array([[-inf, 0.0, 1.0]])
    want = -(0.0 - np.log(np.exp(0.0) + np.exp(1.0)))
    assert jitad.jit(lambda x, y: jitad.cross_entropy(x, y))(logits, np.array([1])) == pytest.approx(want)


# -- gradients w.r.t. ints are refused -------------------------------------------------------

@pytest.mark.parametrize("x", [np.arange(3), np.arange(3, dtype=np.int32), np.array([True, False]), 3],
                         ids=["int64", "int32", "bool", "python int"])
@pytest.mark.parametrize("how", ["grad", "value_and_grad", "pytree"])
def test_gradient_wrt_int_array_raises_argument_error(x, how):
    f = lambda a: jitad.sum(a * 2.0)      # noqa: E731
    call = {"grad": jitad.grad(f), "value_and_grad": jitad.value_and_grad(f),
            "pytree": lambda a: jitad.grad(lambda p: f(p["i"]) + jitad.sum(p["w"]))({"i": a, "w": np.ones(2)})}[how]
    with pytest.raises(jitad.ArgumentError, match="differentiate") as info:
        call(x)
    assert isinstance(info.value, TypeError)


def test_int_arguments_outside_argnums_are_fine():
    g = jitad.grad(lambda w, i: jitad.sum(w[i] * 2.0))(np.ones((4, 2)), np.array([0, 0, 3]))
    np.testing.assert_array_equal(g, [[4.0, 4.0], [0.0, 0.0], [0.0, 0.0], [2.0, 2.0]])
