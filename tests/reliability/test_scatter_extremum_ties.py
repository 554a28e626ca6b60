"""`.at[].min`/`.max` at ties (fuzz findings): the old value and every update equal to the
result share its gradient equally, as JAX's, whether the index is plain or staged and
however often a position repeats; a NaN result passes no gradient back; at ±inf ties too.
With mode="clip" the gradient is that of the update made at the clamped position (JAX's
treats that position as not updated)."""
import jax
import jax.numpy as xnp
import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.testing import check_grads

jax.config.update("jax_enable_x64", True)
inf, nan = np.inf, np.nan


def update(m, how, idx):
    """sum(x.at[idx].how(v)) with a plain index (idx given) or a staged one (passed)."""
    if idx is None:
        return lambda x, v, i: m.sum(getattr(m.asarray(x).at[i], how)(v))
    return lambda x, v: m.sum(getattr(m.asarray(x).at[np.array(idx)], how)(v))


CASES = [   # (how, x, v, idx): ties of the old value with 1, 2 and 3 equal updates, at infinities, NaNs
    ("min", [1.0, 1.0, 1.0], 1.0, [1, 1]),
    ("max", [1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1, 1, 1]),
    ("min", [2.0, 1.0, 0.5], [1.0, 1.0, 0.5, 0.5, 0.0, 3.0], [0, 1, 1, 2, 2, 2]),
    ("max", [-inf, -inf, 1.0], -inf, [0, 0, 1]),
    ("min", [inf, -inf, inf], [inf, 2.0, nan], [0, 0, 2]),
    ("max", [nan, 1.0, 2.0], [1.0, nan, 2.0], [0, 1, 2]),
]


@pytest.mark.parametrize("staged", [False, True])
@pytest.mark.parametrize("how, x, v, idx", CASES)
def test_ties_share_the_gradient_as_jax(how, x, v, idx, staged):
    x, v, i = np.array(x), np.array(v), np.array(idx, dtype=np.int64)
    args, plain = ((x, v, i), None) if staged else ((x, v), idx)
    got = jitad.grad(update(jnp, how, plain), argnums=(0, 1))(*args)
    want = jax.grad(update(xnp, how, plain), argnums=(0, 1))(*args)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-15)
    np.testing.assert_array_equal(update(jnp, how, plain)(*args), update(xnp, how, plain)(*args))


def test_ties_under_jit_and_vmap():
    f, g = update(jnp, "max", [2, 2, 0]), update(xnp, "max", [2, 2, 0])
    xs, v = np.array([[3.0, 0.0, 3.0], [1.0, 5.0, 1.0]]), np.array([3.0, 3.0, 1.0])
    got = jitad.jit(jitad.vmap(jitad.grad(f), in_axes=(0, None)))(xs, v)
    np.testing.assert_allclose(got, jax.vmap(jax.grad(g), in_axes=(0, None))(xs, v), rtol=1e-15)


def test_without_ties_the_gradient_is_the_derivative():
    x, v = np.array([0.3, -1.2, 2.5]), np.array([0.1, 0.4, -2.0])
    check_grads(update(jnp, "min", [1, 1, 0]), (x, v), order=1, modes=("rev",))


def test_a_clipped_update_takes_the_gradient_at_the_clamped_position():
    # index 5 clamps to the last position: min(1, -1) is the update there, so x[1] has none
    for m, grad in ((jnp, jitad.grad), (xnp, jax.grad)):
        f = lambda x: m.sum(m.asarray(x).at[np.array([0, 5])].min(-1.0, mode="clip"))   # noqa: E731
        assert f(np.array([inf, 1.0])) == -2.0
    g = jitad.grad(lambda x: jnp.sum(jnp.asarray(x).at[np.array([0, 5])].min(-1.0, mode="clip")))
    np.testing.assert_array_equal(g(np.array([inf, 1.0])), [0.0, 0.0])
    np.testing.assert_array_equal(g(np.array([-inf, -3.0])), [1.0, 1.0])
