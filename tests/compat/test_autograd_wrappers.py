"""autograd's wrappers as its programs call them: `argnum` given as a list, `where` by
keyword and on Python numbers, the deprecated rule methods of a primitive, and
`tensor_jacobian_product` with a tensor of fewer axes than the output. Each against
autograd itself on the same inputs."""
import warnings

import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.differential_operators import tensor_jacobian_product
from jitad.extend import primitive

autograd = pytest.importorskip("autograd")
anp = pytest.importorskip("autograd.numpy")
from autograd.differential_operators import tensor_jacobian_product as ag_tjp  # noqa: E402


def fun(m):
    return lambda a, b, c, d: a * m.sin(b) + m.cosh(c) * d ** 2


ARGS = (0.5, -0.3, 0.2, -1.1)


@pytest.mark.parametrize("argnum", [[3, 1], [0], [2, 0, 1]])
def test_argnum_as_a_list_is_a_tuple_of_gradients(argnum):
    got = jitad.grad(fun(jnp), argnum=argnum)(*ARGS)
    want = autograd.grad(fun(anp), argnum=argnum)(*ARGS)
    assert isinstance(got, tuple) and len(got) == len(argnum)
    np.testing.assert_allclose(got, want, rtol=1e-13)
    value, grads = jitad.value_and_grad(fun(jnp), argnums=list(argnum))(*ARGS)
    assert value == pytest.approx(fun(np)(*ARGS)) and grads == pytest.approx(got)
    assert jitad.hessian(fun(jnp), argnum=argnum)(*ARGS) == jitad.hessian(fun(jnp), argnums=tuple(argnum))(*ARGS)


@pytest.mark.parametrize("c, x, y", [(True, 1, 2), (False, 1, 2.0), (True, 3.0, 4), (0, True, 5)])
def test_where_on_python_numbers_gives_a_python_number(c, x, y):
    got, want = jnp.where(c, x, y), anp.where(c, x, y)
    assert type(got) is type(want) and got == want


def test_where_by_keyword_and_staged():
    c, x, y = [True, False, True], np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0])
    want = np.array([1.0, 5.0, 3.0])
    for got in (jnp.where(c, x, y), jnp.where(condition=c, x=x, y=y), jnp.where(c, x, y=y)):
        np.testing.assert_array_equal(got, want)
    g = jitad.grad(lambda v: jnp.sum(jnp.where(condition=v > 2.0, x=v * v, y=-v)))(x)
    np.testing.assert_array_equal(g, autograd.grad(lambda v: anp.sum(anp.where(v > 2.0, v * v, -v)))(x))
    with pytest.raises(jitad.errors.ArgumentError, match="condition alone"):
        jnp.where(c, x=x)


def test_deprecated_rule_methods_of_a_primitive():
    a, b = np.array([[1.0, 2.0], [3.0, -1.0]]), np.array([[0.5, -2.0], [1.5, 4.0]])
    made = []
    for style in ("defgrad", "defvjp", "defvjp_is_zero"):
        @primitive
        def mul(x, y):
            return x * y
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if style == "defgrad":
                mul.defgrad(lambda ans, x, y: lambda g: 2.0 * y * g)
                mul.defgrad(lambda ans, x, y: lambda g: 3.0 * x * g, argnum=1)
            elif style == "defvjp":
                mul.defvjp(lambda g, ans, vs, gvs, x, y: 2.0 * y * g * (vs.shape == gvs.shape))
                mul.defvjp(lambda g, ans, vs, gvs, x, y: 3.0 * x * g, argnum=1)
            else:
                mul.defvjp_is_zero([0, 1])
        assert any(issubclass(w.category, DeprecationWarning) for w in caught)
        made.append(jitad.grad(lambda x, y: jnp.sum(mul(x, y)), argnums=(0, 1))(a, b))
    for got in made[:2]:   # the rules as given (scaled to tell them from jitad's own derivative)
        np.testing.assert_array_equal(got[0], 2.0 * b)
        np.testing.assert_array_equal(got[1], 3.0 * a)
    assert all(np.all(g == 0.0) for g in made[2])


@pytest.mark.parametrize("v_shape", [(5, 4), (5,), (5, 4, 3)])
def test_tensor_jacobian_product_contracts_leading_axes(v_shape):
    rng = np.random.default_rng(1)
    a, v = rng.normal(size=(5, 4, 3)), rng.normal(size=v_shape)
    got = tensor_jacobian_product(lambda x: jnp.roll(jnp.sin(x), 1) * x)(a, v)
    want = ag_tjp(lambda x: anp.roll(anp.sin(x), 1) * x)(a, v)
    assert got.shape == want.shape == v_shape[:0] + (5, 4, 3)[len(v_shape):] + a.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_numpy_version_is_numpys():
    assert jnp.__version__ == np.__version__ == anp.__version__


def test_vspace_of_complex_values_is_autograds():
    from autograd.extend import vspace as ag_vspace

    from jitad.extend import vspace
    z = np.array([[1.0 + 2.0j], [0.5 - 1.0j]])
    ours, theirs = vspace(z), ag_vspace(z)
    assert ours.size == theirs.size == 4 and ours.iscomplex and theirs.iscomplex
    assert not vspace(np.ones(2)).iscomplex and not vspace(1.0).iscomplex
    w = z * 1j + 0.3
    assert ours.inner_prod(z, w) == pytest.approx(theirs.inner_prod(z, w), rel=1e-14)
    np.testing.assert_array_equal(ours.covector(z), theirs.covector(z))
    basis = list(ours.standard_basis())
    assert len(basis) == 4 and sum(basis).tolist() == ours.ones().tolist() == theirs.ones().tolist()
    assert all(ours.inner_prod(a, b) == (i == j) for i, a in enumerate(basis) for j, b in enumerate(basis))
    assert ours.randn().dtype == z.dtype and np.all(ours.randn().imag != 0.0)
