"""Dtypes the differential fuzzer found handled unlike JAX: `sign` of bools and `.at`
`add`/`multiply` into bools raise a TypeError (a `JitadError`), `rint` of ints and bools
gives floats, `lax.div` of ints rounds toward zero, and `.at` on a plain int32 array
keeps int32 (wrapping as JAX's does), in and out of staged code."""
import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import jitad
import jitad.lax as lax
import jitad.numpy as jnp
from jitad.errors import JitadError

jax.config.update("jax_enable_x64", True)
B = np.array([True, False, True])
EAGER_AND_JIT = [pytest.param(lambda f: f, id="eager"), pytest.param(jitad.jit, id="jit")]


REFUSED = {"sign": lambda m: m.sign, "lax.sign": lambda m: (lax if m is jnp else jax.lax).sign,
           "at.multiply": lambda m: lambda b: m.asarray(b).at[0].multiply(True),
           "at.add": lambda m: lambda b: m.asarray(b).at[np.array([1, 1])].add(True)}


@pytest.mark.parametrize("wrap", EAGER_AND_JIT)
@pytest.mark.parametrize("name", sorted(REFUSED))
def test_bool_arithmetic_jax_refuses_raises_a_type_error(wrap, name):
    with pytest.raises(TypeError):
        REFUSED[name](jjnp)(B)
    with pytest.raises(JitadError) as e:
        wrap(REFUSED[name](jnp))(B)
    assert isinstance(e.value, TypeError) and "bool" in str(e.value) and "int" in str(e.value)


@pytest.mark.parametrize("wrap", EAGER_AND_JIT)
def test_bool_updates_jax_takes_still_work(wrap):
    for how in ("set", "min", "max"):
        f = lambda b, m: getattr(m.asarray(b).at[np.array([1, 2])], how)(True)
        np.testing.assert_array_equal(wrap(lambda b: f(b, jnp))(B), f(B, jjnp))


@pytest.mark.parametrize("wrap", EAGER_AND_JIT)
@pytest.mark.parametrize("x", [np.array([-3, 0, 7], np.int64), np.array([2**31 - 1, -2**31], np.int32), B],
                         ids=["int64", "int32", "bool"])
def test_rint_of_ints_and_bools_is_float_as_jax(wrap, x):
    out = wrap(jnp.rint)(x)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, jjnp.rint(x))
    np.testing.assert_array_equal(wrap(jnp.rint)(np.array([0.5, 1.5, -2.5, np.inf, -0.0])), [0.0, 2.0, -2.0, np.inf, -0.0])
    assert jnp.round(np.array([1, 2])).dtype.kind == "i"   # (`round` keeps ints, as NumPy's)


def test_lax_div_and_rem_of_ints_round_toward_zero_as_jax():
    x, y = np.array([7, -7, 7, -7, 0, 2**62]), np.array([2, 2, -2, -2, 3, -5])
    for f, g in ((lax.div, jax.lax.div), (lax.rem, jax.lax.rem)):
        for wrap in (lambda f: f, jitad.jit):
            out = wrap(f)(x, y)
            assert out.dtype.kind == "i"
            np.testing.assert_array_equal(out, g(x, y))


@pytest.mark.parametrize("how", ["multiply", "min", "max", "add", "set"])
def test_at_on_a_plain_int32_array_keeps_int32_as_jax(how):
    x = np.array([2**31 - 1, 5, -2**31, 1], np.int32)
    idx = np.array([0, 2, 9])   # (9: out of range, dropped)
    out = getattr(jnp.asarray(x).at[idx], how)(2)
    want = getattr(jjnp.asarray(x).at[idx], how)(2)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("name", ["shift_left", "shift_right_logical", "shift_right_arithmetic", "population_count",
                                  "clz"])
def test_bit_operations_on_plain_int32_are_32_bit_as_jax(name):
    x = np.array([-2**31, -1, 1, 7, 2**31 - 1, 0, -8, 12345], np.int32)
    args = (x,) if name in ("population_count", "clz") else (x, np.arange(8, dtype=np.int32) * 5)
    out, want = getattr(lax, name)(*args), getattr(jax.lax, name)(*args)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, want)
    staged = jitad.jit(getattr(lax, name))(*args)   # (staged code computes in int64, as documented)
    np.testing.assert_array_equal(staged, getattr(jax.lax, name)(*[a.astype(np.int64) for a in args]))


@pytest.mark.parametrize("wrap", EAGER_AND_JIT)
@pytest.mark.parametrize("x, y", [(np.array([2, 3]), -1), (B, 2), (B, 0)], ids=["int-negative", "bool", "bool-0"])
def test_integer_pow_jax_refuses_raises_a_type_error(wrap, x, y):
    with pytest.raises(TypeError):
        jax.lax.integer_pow(x, y)
    with pytest.raises(JitadError) as e:
        wrap(lambda v: lax.integer_pow(v, y))(x)
    assert isinstance(e.value, TypeError) and "float" in str(e.value)
    np.testing.assert_array_equal(wrap(lambda v: lax.integer_pow(v, 3))(np.array([2, -3])), [8, -27])


def test_a_fill_read_of_a_plain_int32_array_keeps_int32():
    # (a fuzz finding) `take`/`.at[].get(mode="fill")` out of range on a plain int32 array gave
    # int64 and int64's lowest int; JAX: int32 and int32's
    x = np.array([[1, -7, 2]], dtype=np.int32)
    for f in (lambda m: m.take(x, np.array([1, 0]), axis=0), lambda m: m.asarray(x).at[np.array([3])].get(mode="fill")):
        got, want = np.asarray(f(jnp)), np.asarray(f(jjnp))
        assert got.dtype == want.dtype == np.int32
        np.testing.assert_array_equal(got, want)
