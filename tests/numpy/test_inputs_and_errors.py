"""What `jitad.numpy` takes and refuses: plain lists, tuples and scalars as jax.numpy takes
them (results are `Array`s a staged index can read), staged values inside lists as
autograd's boxes, `.at[...]` modes, the `size=` rule, `out=` and `inplace=`, shape errors
that are also TypeErrors (as JAX's), NumPy's own names, and autograd's linalg helpers."""
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.errors import ArgumentError, JitadError, ShapeError, StagingError
from jitad.numpy import numpy_names
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
autograd = pytest.importorskip("autograd")
import autograd.numpy as anp  # noqa: E402
import autograd.numpy.linalg as alinalg  # noqa: E402

JNP = jax.numpy


# -- plain inputs ---------------------------------------------------------------------

def test_plain_lists_tuples_and_scalars_give_arrays_as_jax():
    for got, want in [(jnp.prod((2, 3)), JNP.prod(np.array((2, 3)))), (jnp.sum([1.0, 2.5]), 3.5),
                      (jnp.maximum([1, 5], 3), np.array([3, 5])), (jnp.median([3.0, 1.0, 2.0]), 2.0),
                      (jnp.cumsum((1, 2, 3)), np.array([1, 3, 6])), (jnp.mean(2.0), 2.0)]:
        assert isinstance(got, jnp.Array)
        np.testing.assert_array_equal(got, want)
    assert jnp.prod((2, 3)).dtype == np.int64 and jnp.sum([True, True]).dtype == np.int64


def test_a_plain_stack_is_read_at_a_staged_index():
    A = jnp.stack(3 * (jnp.eye(2),))
    assert isinstance(A, jnp.Array)
    np.testing.assert_array_equal(jitad.jit(lambda t: A[t])(1), np.eye(2))
    np.testing.assert_array_equal(jitad.jit(lambda t: jnp.sum(A[t]))(2), 2.0)


def test_staged_values_in_lists_stage_as_autograds_boxes():
    def ours(x, y):
        v = jnp.array([x, y, 1.0])
        return (jnp.sum(v * v) + jnp.mean([x, y]) + jnp.sum(jnp.append([x, y], 3.0) ** 2)
                + jnp.sum(jnp.vstack([x * np.ones(2), [1.0, y]])) + jnp.sum(jnp.hstack([[x], [y, y]])))

    def theirs(x, y):
        v = anp.array([x, y, 1.0])
        return (anp.sum(v * v) + anp.mean(anp.array([x, y])) + anp.sum(anp.append(anp.array([x, y]), 3.0) ** 2)
                + anp.sum(anp.vstack([x * np.ones(2), anp.array([1.0, y])])) + anp.sum(anp.hstack([[x], [y, y]])))
    args = (0.7, -1.3)
    assert jitad.jit(ours)(*args) == pytest.approx(theirs(*args), rel=1e-14)
    for k in (0, 1):
        assert jitad.grad(ours, k)(*args) == pytest.approx(autograd.grad(theirs, k)(*args), rel=1e-13)


def test_einsum_sublist_form_as_autograd():
    a, b = np.arange(6.0).reshape(2, 3), np.linspace(-1, 1, 12).reshape(3, 4)

    def ours(a):
        return jnp.sum(jnp.einsum(a, [0, 1], b, [1, 2], [2, 0]) ** 2)

    def theirs(a):
        return anp.sum(anp.einsum(a, [0, 1], b, [1, 2], [2, 0]) ** 2)
    np.testing.assert_allclose(jnp.einsum(a, [0, 1], b, [1, 2]), a @ b)
    np.testing.assert_allclose(jitad.jit(ours)(a), theirs(a))
    np.testing.assert_allclose(jitad.grad(ours)(a), autograd.grad(theirs)(a), rtol=1e-13)


# -- .at[...] modes -------------------------------------------------------------------

@pytest.mark.parametrize("staged", [False, True])
def test_at_modes_agree_with_jax(staged):
    x = np.arange(12.0).reshape(3, 4)
    i = np.array([5, -1, -4, 2])

    def run(m, x, i):
        a = m.asarray(x)
        return (a.at[i].get(mode="fill", fill_value=-7.0), a.at[i].get(mode="fill"), a.at[i].get(mode="clip"),
                a.at[i].get(), a.at[i].set(9.0, mode="drop"), a.at[i, 1].add(1.0, mode="clip"),
                a.at[:, i].multiply(2.0, mode="drop"), a.at[1, np.array([0, 9])].max(100.0),
                a.at[-1].min(-1.0, mode="drop"), a.at[0, 0].get())
    got = jitad.jit(run, static_argnums=0)(jnp, x, i) if staged else run(jnp, x, i)
    for g, w in zip(got, run(JNP, x, i)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_at_default_drops_plain_out_of_range_updates_and_trusts_staged_indices():
    x = np.arange(4.0)
    np.testing.assert_array_equal(jnp.asarray(x).at[np.array([1, 9])].set(-1.0), JNP.asarray(x).at[np.array([1, 9])]
                                  .set(-1.0))
    got = jitad.jit(lambda x, i: x.at[i].add(10.0))(x, np.array([1, 3]))
    np.testing.assert_array_equal(got, [0.0, 11.0, 2.0, 13.0])
    got = jitad.jit(lambda x, i: x.at[i].add(10.0, mode="drop"))(x, np.array([1, 9]))
    np.testing.assert_array_equal(got, [0.0, 11.0, 2.0, 3.0])


def test_at_update_gradients_agree_with_jax():
    x = np.linspace(-1.0, 1.0, 6)
    i = np.array([7, 1, -2, 1])

    def loss(m, x):
        y = m.asarray(x).at[i].set(x[0] * 3.0, mode="drop").at[i].add(x[1:5] ** 2)
        return m.sum(y * y) + m.sum(m.asarray(x).at[i].get(mode="fill", fill_value=2.0) ** 3)
    np.testing.assert_allclose(jitad.grad(lambda x: loss(jnp, x))(x), jax.grad(lambda x: loss(JNP, x))(x),
                               rtol=1e-13)
    check_grads(lambda x: loss(jnp, x), (x,), order=1, modes=("rev",))


def test_at_refuses_an_unknown_mode():
    with pytest.raises(ArgumentError, match="mode="):
        jnp.zeros(3).at[0].set(1.0, mode="wrap")


# -- the size= rule, out=, inplace= ------------------------------------------------------

@pytest.mark.parametrize("call", [lambda x: jnp.unique(x), lambda x: jnp.nonzero(x), lambda x: jnp.argwhere(x),
                                  lambda x: jnp.flatnonzero(x), lambda x: jnp.setdiff1d(x, x),
                                  lambda x: jnp.union1d(x, x), lambda x: jnp.bincount(jnp.asarray(x, int)),
                                  lambda x: jnp.extract(x > 0, x), lambda x: jnp.delete(x, jnp.argmax(x))])
def test_value_dependent_shapes_need_size_in_staged_code(call):
    x = np.array([1.0, 0.0, 2.0, 2.0])
    call(x)   # plain values: the shape follows the values
    with pytest.raises(StagingError, match="size="):
        jitad.jit(call)(x)


def test_out_other_than_none_is_refused():
    for call in (lambda: jnp.sum(np.ones(3), out=np.zeros(())), lambda: jnp.median(np.ones(3), out=np.zeros(())),
                 lambda: jnp.take(np.ones(3), 0, out=np.zeros(())), lambda: jnp.einsum("i->", np.ones(2), out=1)):
        with pytest.raises(ArgumentError, match="out="):
            call()
    assert jnp.sum(np.ones(3), out=None) == 3.0


def test_inplace_functions_write_plain_arrays_as_numpy_and_refuse_staged_ones():
    a, b = np.zeros((3, 3)), np.zeros((3, 3))
    assert jnp.fill_diagonal(a, 2.0) is None
    np.fill_diagonal(b, 2.0)
    np.testing.assert_array_equal(a, b)
    c = np.arange(6.0)
    assert jnp.put(c, [0, 2], -1.0) is None and c[2] == -1.0
    d = np.arange(4.0)
    jnp.place(d, d > 1, [9.0])
    np.testing.assert_array_equal(d, [0.0, 1.0, 9.0, 9.0])
    for fn in (lambda x: jnp.fill_diagonal(x, 1.0), lambda x: jnp.put(x, [0], 1.0), lambda x: jnp.place(x, x > 0, 1.0)):
        with pytest.raises(ArgumentError, match="inplace=False"):
            jitad.jit(fn)(np.ones((2, 2)))


# -- errors ----------------------------------------------------------------------------

@pytest.mark.parametrize("call", [lambda a, b: jnp.dot(a, b), lambda a, b: jnp.matmul(a, b), lambda a, b: a + b,
                                  lambda a, b: jnp.maximum(a, b)])
def test_shape_mismatches_are_type_errors_as_in_jax(call):
    a, b = np.ones((2, 3)), np.ones((4, 5))
    with pytest.raises(TypeError):
        jitad.jit(call)(a, b)
    with pytest.raises(ShapeError):
        jitad.jit(call)(a, b)
    assert issubclass(ShapeError, TypeError) and issubclass(ShapeError, ValueError)


def test_bad_arguments_raise_jitad_errors_naming_the_fix():
    with pytest.raises(JitadError, match="method="):
        jnp.quantile(np.ones(3), 0.5, method="magic")
    with pytest.raises(JitadError, match="int or bool"):
        jitad.jit(lambda x: jnp.bitwise_and(x, x))(np.ones(2))
    with pytest.raises(JitadError, match="empty"):
        jnp.median(np.ones((0, 2)), axis=0)
    with pytest.raises(JitadError, match="size="):
        jnp.unique(np.ones(3), size=-1)
    with pytest.raises(JitadError, match="exponent"):
        jnp.linalg.matrix_power(np.eye(2), 1.5)


def test_vander_and_polyval_derivatives_are_finite_at_zero():
    x = np.array([0.0, 0.5, -2.0])
    check_grads(lambda x: jnp.sum(jnp.vander(x, 4) ** 2), (x,), order=2, modes=("rev", "fwd"))
    g = jitad.grad(lambda x: jnp.sum(jnp.vander(x, 3)))(x)
    np.testing.assert_allclose(g, 2 * x + 1)


# -- NumPy's own names, autograd's helpers --------------------------------------------------

def test_numpys_names_are_numpys_objects_as_autograd_hands_them_on():
    for name in numpy_names.TYPES + numpy_names.FUNCTIONS:
        if hasattr(np, name):
            assert getattr(jnp, name) is getattr(np, name), name
            ref = getattr(anp, name, None)
            if isinstance(ref, type):   # autograd subclasses NumPy's int types
                assert issubclass(ref, getattr(np, name)), name
    assert jnp.binary_repr(5) == anp.binary_repr(5) == "101"
    assert jnp.base_repr(255, 16) == anp.base_repr(255, 16)
    assert jnp.array2string(np.arange(3)) == anp.array2string(np.arange(3))
    assert jnp.min_scalar_type(300) == anp.min_scalar_type(300)
    assert jnp.mintypecode("fd") == anp.mintypecode("fd")
    assert jnp.iterable([1]) and not jnp.iterable(1.0)
    assert jnp.isdtype(np.float64, "real floating") and jnp.typename("d") == anp.typename("d")
    assert jnp.metadata(np.zeros((2, 3))) == anp.metadata(np.zeros((2, 3)))
    seen = []
    jitad.jit(lambda x: seen.append(isinstance(x, jnp.Box)) or x)(1.0)
    assert seen == [True] and not isinstance(1.0, jnp.Box)


def test_autograd_linalg_helpers_agree_with_autograd():
    rng = np.random.default_rng(3)
    a = rng.normal(size=(3, 3)) + 3 * np.eye(3)
    s = a @ a.T
    b = rng.normal(size=(3,))
    g = rng.normal(size=(3, 3))
    la = jnp.linalg
    np.testing.assert_allclose(la.T(a), alinalg.T(a))
    np.testing.assert_allclose(la.add2d(b), alinalg.add2d(b))
    inv = np.linalg.inv(a)
    np.testing.assert_allclose(la.grad_inv(inv, a)(g), alinalg.grad_inv(inv, a)(g), rtol=1e-12)
    pinv = np.linalg.pinv(a)
    np.testing.assert_allclose(la.grad_pinv(pinv, a)(g), alinalg.grad_pinv(pinv, a)(g), rtol=1e-10)
    x = np.linalg.solve(a, b)
    for argnum in (0, 1):
        np.testing.assert_allclose(la.grad_solve(argnum, x, a, b)(b), alinalg.grad_solve(argnum, x, a, b)(b),
                                   rtol=1e-12)
    L = np.linalg.cholesky(s)
    gl = np.tril(g)
    np.testing.assert_allclose(la.grad_cholesky(L, s)(gl), alinalg.grad_cholesky(L, s)(gl), rtol=1e-10)
    w, v = np.linalg.eigh(s)
    gw = rng.normal(size=3)
    np.testing.assert_allclose(la.grad_eigh((w, v), s)((gw, np.zeros((3, 3)))),
                               alinalg.grad_eigh((w, v), s)((gw, np.zeros((3, 3)))), rtol=1e-10)
    usv = np.linalg.svd(a)
    np.testing.assert_allclose(la.grad_svd(usv[1], a, compute_uv=False)(gw),
                               alinalg.grad_svd(usv[1], a, compute_uv=False)(gw), rtol=1e-10)
    n = np.linalg.norm(a)
    np.testing.assert_allclose(la.norm_vjp(n, a)(1.5), alinalg.norm_vjp(n, a)(1.5), rtol=1e-12)
    np.testing.assert_allclose(la.norm_jvp(g, n, a), alinalg.norm_jvp(g, n, a), rtol=1e-12)
    space = la.wrap_namespace({"sum": np.sum, "_x": 1, "nothing_here": 2}, {})
    assert space == {"sum": jnp.sum}


def test_autograd_numpy_helpers_agree_with_autograd():
    a, b = np.arange(3.0), np.arange(4.0, 6.0)
    np.testing.assert_array_equal(jnp.concatenate_args(0, a, b), anp.concatenate_args(0, a, b))
    np.testing.assert_array_equal(jnp.array_from_args((), {}, 1.0, 2.0), anp.array_from_args((), {}, 1.0, 2.0))
    d = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(jnp.make_diagonal(d, 0, -1, -2), anp.make_diagonal(d, 0, -1, -2))
    got = jitad.grad(lambda x, y: jnp.sum(jnp.make_diagonal(jnp.array_from_args((), {}, x, y), 0, -1, -2)
                                         * jnp.concatenate_args(0, [x], [y])))(1.5, 2.0)
    assert got == pytest.approx(3.0)
    got, want = jnp.parse_einsum_input("ij,jk", d, d.T), anp.parse_einsum_input("ij,jk", d, d.T)
    assert got[:2] == want[:2] == ("ij,jk", "ik")
    for g, w in zip(got[2], want[2]):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(jnp.r_class()[a, 0.0, b], anp.r_class()[a, 0.0, b])
    np.testing.assert_array_equal(jnp.c_class()[a, a], anp.c_class()[a, a])
    np.testing.assert_allclose(jitad.jit(lambda x: jnp.r_class()[x, 0.0, x])(a), np.r_[a, 0.0, a])
    assert jnp.poly1d([1.0, 2.0])(3.0) == anp.poly1d([1.0, 2.0])(3.0) == 5.0
    space = jnp.wrap_namespace({"exp": np.exp, "_private": 1, "not_a_name_here": 2}, {})
    assert space == {"exp": jnp.exp}
    with pytest.raises(ArgumentError, match="offset=0"):
        jnp.make_diagonal(d)


def test_autograd_defvjp_and_defjvp_on_jitad_custom_functions():
    from autograd.extend import primitive
    from autograd.numpy.linalg import defjvp as a_defjvp, defvjp as a_defvjp

    def body(x, y):
        return x * x * y

    ours = jitad.custom_vjp(body)
    jnp.linalg.defvjp(ours, lambda ans, x, y: lambda g: g * 3.0 * x, lambda ans, x, y: lambda g: g * ans)
    theirs = primitive(body)
    a_defvjp(theirs, lambda ans, x, y: lambda g: g * 3.0 * x, lambda ans, x, y: lambda g: g * ans)
    for k in (0, 1):
        assert jitad.grad(ours, k)(1.5, 2.0) == pytest.approx(autograd.grad(theirs, k)(1.5, 2.0))
    ours_f = jitad.custom_jvp(lambda x: x * x)
    jnp.linalg.defjvp(ours_f, lambda g, ans, x: g * 5.0)
    theirs_f = primitive(lambda x: x * x)
    a_defjvp(theirs_f, lambda g, ans, x: g * 5.0)
    from autograd import make_jvp
    assert jitad.jvp(ours_f, (2.0,), (1.0,))[1] == make_jvp(theirs_f)(2.0)(1.0)[1] == 5.0
    with pytest.raises(ArgumentError, match="custom_vjp"):
        jnp.linalg.defvjp(body, lambda ans, x, y: lambda g: g)


def test_grad_eig_is_declined_naming_eigh():
    with pytest.raises(ArgumentError, match="grad_eigh"):
        jnp.linalg.grad_eig(None, np.eye(2))


@pytest.mark.parametrize("staged", [False, True])
def test_argpartition_partitions_as_jax(staged):
    x = np.array([[3.0, -1.0, 2.5, 0.0, 7.0, 2.5], [1.0, 1.0, -4.0, 9.0, 0.5, -2.0]])
    for kth in (0, 2, 5):
        fn = (lambda x, kth=kth: jnp.argpartition(x, kth, axis=1))
        idx = np.asarray(jitad.jit(fn)(x) if staged else fn(x))
        want = np.asarray(JNP.argpartition(x, kth, axis=1))
        part = np.take_along_axis(x, idx, 1)
        np.testing.assert_array_equal(part[:, kth], np.take_along_axis(x, want, 1)[:, kth])
        assert np.all(part[:, :kth] <= part[:, kth:kth + 1]) and np.all(part[:, kth + 1:] >= part[:, kth:kth + 1])
        np.testing.assert_array_equal(np.sort(idx, 1), np.tile(np.arange(6), (2, 1)))


def test_plain_only_functions_behave_as_numpys(tmp_path):
    a, b = np.arange(6.0).reshape(2, 3), np.arange(3.0)
    assert jnp.einsum_path("ij,j->i", a, b)[0] == np.einsum_path("ij,j->i", a, b)[0]
    assert jnp.einsum_path("ij,j->i", a, b)[0][1:] == JNP.einsum_path("ij,j->i", a, b)[0]   # NumPy's path form
    assert jnp.index_exp[1:2] == JNP.index_exp[1:2] and jnp.s_[::2] == JNP.s_[::2]
    for fn in (jnp.asanyarray, jnp.ascontiguousarray, jnp.asfortranarray, jnp.require, jnp.asarray_chkfinite):
        got = fn([1.0, 2.0])
        assert isinstance(got, jnp.Array) and got.tolist() == [1.0, 2.0]
    with pytest.raises(ValueError):
        jnp.asarray_chkfinite([1.0, np.nan])
    dst = np.zeros(3)
    jnp.copyto(dst, [1.0, 2.0, 3.0], where=[True, False, True])
    np.testing.assert_array_equal(dst, [1.0, 0.0, 3.0])
    jnp.putmask(dst, dst > 2, -1.0)
    np.testing.assert_array_equal(dst, [1.0, 0.0, -1.0])
    with pytest.raises(ArgumentError, match="jnp.where"):
        jitad.jit(lambda x: jnp.copyto(x, 1.0))(np.ones(2))
    np.testing.assert_array_equal(jnp.sort_complex([3.0, 1.0]), np.sort_complex([3.0, 1.0]))
    np.testing.assert_array_equal(jnp.fromiter(range(3), float), [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(jnp.frombuffer(np.arange(2.0).tobytes()), [0.0, 1.0])
    np.testing.assert_array_equal(jnp.from_dlpack(np.arange(3.0)), np.arange(3.0))
    jnp.save(tmp_path / "a.npy", a)
    np.testing.assert_array_equal(jnp.load(tmp_path / "a.npy"), a)
    jnp.savez(tmp_path / "b.npz", a=a)
    jnp.savez_compressed(tmp_path / "c.npz", a=a)
    np.testing.assert_array_equal(jnp.load(tmp_path / "c.npz")["a"], a)
    jnp.savetxt(tmp_path / "d.txt", a)
    np.testing.assert_array_equal(jnp.loadtxt(tmp_path / "d.txt"), a)
    np.testing.assert_array_equal(jnp.genfromtxt(tmp_path / "d.txt"), a)
    a.tofile(tmp_path / "e.bin")
    np.testing.assert_array_equal(jnp.fromfile(tmp_path / "e.bin").reshape(2, 3), a)
    assert jnp.busday_count("2024-01-01", "2024-01-08") == 5 and jnp.is_busday("2024-01-06") == np.False_
    assert str(jnp.busday_offset("2024-01-05", 1)) == "2024-01-08"
    assert jnp.datetime_as_string(jnp.datetime64("2024-01-02")) == "2024-01-02"
    assert jnp.datetime_data(np.dtype("datetime64[s]")) == ("s", 1)
    assert jnp.isnat(jnp.datetime64("NaT")) and jnp.format_float_positional(0.5) == "0.5"
    assert jnp.format_float_scientific(1500.0) == np.format_float_scientific(1500.0)
    assert jnp.may_share_memory(a, a[0]) and not jnp.shares_memory(a, b)
    assert list(jnp.ndindex(2, 1)) == [(0, 0), (1, 0)] and len(list(jnp.ndenumerate(a))) == 6
    assert jnp.common_type(a) is np.float64 and not jnp.isfortran(a) and jnp.ufunc is np.ufunc
    assert jnp.frompyfunc(lambda s: s + 1, 1, 1)(np.arange(2)).tolist() == [1, 2]
    assert jnp.fromregex is np.fromregex and jnp.fromstring("1 2", sep=" ").tolist() == [1.0, 2.0]


@pytest.mark.parametrize("a, b", [((2, 3), (2, 3)), ((3,), (4,))])
def test_the_at_operator_on_mismatched_arrays_raises_shape_error_eager_and_staged(a, b):
    # JAX raises TypeError; NumPy's `@` on a jitad array raised its bare ValueError
    for left, right in [(jnp.ones(a), jnp.ones(b)), (np.ones(a), jnp.ones(b)), (jnp.ones(a), np.ones(b))]:
        for run in (lambda f: f(), lambda f: jitad.jit(f)()):
            with pytest.raises(ShapeError, match="do not multiply") as caught:
                run(lambda: left @ right)
            assert isinstance(caught.value, TypeError)
    x = jnp.ones((2, 3))
    with pytest.raises(ShapeError):
        x @= jnp.ones((2, 3))
    np.testing.assert_array_equal(np.ones((2, 3)) @ jnp.ones((3, 2)), np.full((2, 2), 3.0))


def test_joining_the_rows_of_one_array_as_numpy_and_jax():
    """`vstack(x)`, `hstack(x)`, ... of one array join its rows, as NumPy's and JAX's do (autograd's
    suite stacks a single array); eagerly, compiled, and differentiated."""
    import jax.numpy as jjnp
    x = np.arange(6.0).reshape(2, 3)
    for name in ("vstack", "hstack", "column_stack", "stack", "concatenate", "dstack"):
        np.testing.assert_array_equal(getattr(jnp, name)(x), getattr(jjnp, name)(x), err_msg=name)
        np.testing.assert_array_equal(jitad.jit(getattr(jnp, name))(x), getattr(np, name)(x), err_msg=name)
    np.testing.assert_array_equal(jitad.grad(lambda x: jnp.sum(jnp.vstack(x) ** 2))(x), 2 * x)
    with pytest.raises(jitad.ArgumentError, match="at least one axis"):
        jnp.vstack(np.float64(1.0))


def test_where_on_lists_of_numbers_gives_a_list_as_autograd():   # (JAX refuses lists)
    for args in ((True, [1, 2], [3, 4]), ([True, False], [1.0, 2.0], [3.0, 4.0]), (False, (1, 2), [3, 4])):
        ours, theirs = jnp.where(*args), anp.where(*args)
        assert type(ours) is type(theirs) is list and ours == theirs
    assert isinstance(jnp.where(True, [1, 2], np.array([3, 4])), np.ndarray)   # an array among them: an array


# -- eager shape functions: NumPy's at once on plain arrays -------------------------------

@pytest.mark.parametrize("call", [
    lambda m, x: m.reshape(x, (3, -1)), lambda m, x: m.reshape(x, [12]), lambda m, x: m.reshape(x, 12),
    lambda m, x: m.expand_dims(x, 1), lambda m, x: m.expand_dims(x, (0, -1)), lambda m, x: m.ravel(x),
    lambda m, x: m.reshape(x.T, (2, 6)), lambda m, x: m.ravel(x[:, ::2])])
def test_eager_shape_functions_on_plain_arrays_are_numpy_and_jax(call):
    x = np.arange(12.0).reshape(4, 3)
    for arg in (x, jnp.asarray(x), x.astype(np.int32), x > 5):
        got, want = call(jnp, arg), call(JNP, arg)
        assert isinstance(got, jnp.Array) and got.dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(got, want)
        assert np.shares_memory(got, arg) == np.shares_memory(call(np, arg), arg)   # (NumPy's view or copy)
    staged = jitad.jit(lambda v: call(jnp, v) * 2.0)(x)   # (inside a trace: jitad's own, staged)
    np.testing.assert_array_equal(staged, call(np, x) * 2.0)


def test_eager_shape_functions_refused_by_numpy_raise_jitads_errors():
    x = np.arange(6.0)
    for bad in (lambda: jnp.reshape(x, (4, -1)), lambda: jnp.reshape(x, (-1, -1)), lambda: jnp.expand_dims(x, 3),
                lambda: jnp.expand_dims(x, (0, 0))):
        with pytest.raises(ShapeError):
            bad()
    np.testing.assert_array_equal(jnp.reshape(x, (np.int64(2), 3)), x.reshape(2, 3))   # (NumPy ints: jitad's path)
