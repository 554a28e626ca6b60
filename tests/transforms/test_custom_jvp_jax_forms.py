"""JAX's other ways to give a `custom_jvp` its rule: `defjvps` (one rule per argument,
summed) and `nondiff_argnums` (a function or setting passed to the rule first), checked
against JAX's derivatives of the same definitions."""
from functools import partial

import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.errors import ArgumentError

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)


def per_argument(lib, np_):
    f = lib.custom_jvp(lambda x, y: np_.sin(x) * y)
    f.defjvps(lambda x_dot, out, x, y: 3.0 * x_dot * y,   # not the true derivative: the rule must be used
              lambda y_dot, out, x, y: np_.sin(x) * y_dot)
    return f


def with_function_argument(lib, np_):
    @partial(lib.custom_jvp, nondiff_argnums=(0,))
    def apply(g, x):
        return g(x)

    @apply.defjvp
    def apply_jvp(g, primals, tangents):
        (x,), (t,) = primals, tangents
        return apply(g, x), 2.0 * t * x
    return lambda x: apply(np_.tanh, x) * x


@pytest.mark.parametrize("build", [per_argument, with_function_argument])
def test_rule_forms_give_jax_derivatives(build):
    mine, theirs = build(jitad, jnp), build(jax, jax.numpy)
    args = (0.7, 1.3) if build is per_argument else (0.7,)
    nums = tuple(range(len(args)))
    np.testing.assert_allclose(jitad.grad(mine, argnums=nums)(*args), jax.grad(theirs, argnums=nums)(*args),
                               rtol=1e-12)
    tangents = tuple(0.5 + i for i in nums)
    np.testing.assert_allclose(jitad.jvp(mine, args, tangents), jax.jvp(theirs, args, tangents), rtol=1e-12)
    np.testing.assert_allclose(jitad.jit(mine)(*args), jax.jit(theirs)(*args), rtol=1e-12)


def test_defjvps_with_nondiff_argnums_is_refused():
    f = jitad.custom_jvp(lambda g, x: g(x), nondiff_argnums=(0,))
    with pytest.raises(ArgumentError, match="defjvps"):
        f.defjvps(lambda t, out, g, x: t)
