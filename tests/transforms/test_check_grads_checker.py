"""The gradient checker's own parts: its closeness test is NumPy's `isclose` on floats, its
kept seeded generators draw what a freshly seeded one draws, also when nested, and a 0-d
array result is checked as the number it is, as strictly."""
import itertools

import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad import test_util, testing
from jitad.extend import defvjp, primitive
from jitad.testing import check_grads


def test_close_is_numpys_isclose_on_floats():
    edge = [0.0, -0.0, 1.0, -1.0, 1.0 + 1e-6, 1.0 + 1e-4, 1e-8, -1e-8, 1e300, -1e300, np.inf, -np.inf, np.nan, 5e-324]
    for a, b in itertools.product(edge, repeat=2):
        for rtol, atol in ((1e-5, 1e-7), (0.0, 0.0), (1e-2, 0.0)):
            assert testing._close(a, b, rtol, atol) == bool(np.isclose(a, b, rtol=rtol, atol=atol)), (a, b, rtol, atol)


def test_kept_generators_draw_as_freshly_seeded_ones():
    for seed in (0, 1, 1000, 7):
        expected = np.random.default_rng(seed).standard_normal(20)
        for _ in range(3):   # kept, set back, taken again
            rng, kept = testing._generator(seed)
            first = rng.standard_normal(8)
            nested, nested_kept = testing._generator(seed)   # (one in use: another, its own)
            assert nested is not rng
            np.testing.assert_array_equal(nested.standard_normal(20), expected)
            np.testing.assert_array_equal(np.concatenate([first, rng.standard_normal(12)]), expected)
            testing._hand_back(nested_kept)
            testing._hand_back(kept)


def test_checker_still_finds_a_wrong_rule_each_time():
    @jitad.custom_vjp
    def f(x):
        return jitad.numpy.sin(x).sum()
    f.defvjp(lambda x: (f(x), x), lambda x, g: (g * jitad.numpy.cos(x) * 1.001,))
    x = np.linspace(0.1, 0.9, 5)
    for _ in range(3):
        with pytest.raises(AssertionError, match="directional derivative"):
            check_grads(f, (x,))
    check_grads(lambda x: jitad.numpy.sin(x).sum(), (x,), order=2, modes=("fwd", "rev"))


def _summed_logsumexp(factor):
    """`y -> sum(logsumexp(y ** 2))` through an @primitive whose VJP is `factor` times the
    right one: its result is a 0-d array (`jnp.sum` of a 0-d array), not a float."""
    @primitive
    def logsumexp(x):
        m = jnp.max(x)
        return m + jnp.log(jnp.sum(jnp.exp(x - m)))
    defvjp(logsumexp, lambda ans, x: lambda g: factor * jnp.full(x.shape, g) * jnp.exp(x - jnp.full(x.shape, ans)))
    return lambda y: jnp.sum(logsumexp(y ** 2))


def test_a_0d_array_result_is_checked_as_strictly_as_a_float():
    x = np.linspace(-1.0, 1.0, 6)
    right, wrong = _summed_logsumexp(1.0), _summed_logsumexp(1.001)
    assert isinstance(right(x), np.ndarray) and right(x).shape == ()
    test_util.check_grads(right, modes=["rev"])(x)   # (both orders: the VJP checked as a function too)
    check_grads(right, (x,), order=2, modes=("fwd", "rev"))
    with pytest.raises(AssertionError, match="VJP"):
        test_util.check_grads(wrong, modes=["rev"])(x)
    with pytest.raises(AssertionError, match="directional derivative"):
        check_grads(wrong, (x,))
    with pytest.raises(AssertionError, match="VJP"):   # one argument of two checked (a closure over the other)
        test_util.check_grads(lambda a, b: wrong(a * b), modes=["rev"], argnum=0)(x, 0.5)
