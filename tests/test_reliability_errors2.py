"""Errors that were internal or misleading now name the problem and the fix (or the call
works, as in JAX/NumPy): leaked staged values, odd functions, environment variables,
malformed pytree registrations, keyword arguments, scan over constants and zero steps,
zero-size jacobians, np.linalg on staged values, collectives that disagree."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitad
from jitad.tree_util import register_pytree_node

pytestmark = pytest.mark.llvm


def child_stderr(code, **env):
    """Run `code` in a fresh interpreter with `env` added; return (returncode, stderr)."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, **env))
    return proc.returncode, proc.stderr


# -- staged values that escape, functions Python cannot describe --------------------

def test_leaked_staged_value_names_the_escape():
    leak = []

    def f(x):
        leak.append(x)
        return x * 2.0
    jitad.jit(f)(np.ones(3))
    for use in (lambda: leak[0] + 1.0, lambda: jitad.sin(leak[0]), lambda: leak[0][1], lambda: np.exp(leak[0])):
        with pytest.raises(jitad.StagingError, match="escaped the function that traced it"):
            use()


def test_builtin_and_odd_names_compile():
    assert jitad.jit(abs)(-2.0) == 2.0
    assert jitad.jit(pow)(2.0, 3.0) == 8.0
    with pytest.raises(jitad.StagingError, match="bool"):   # Python's max compares: as in JAX
        jitad.jit(max)(1.0, 2.0)

    def g(x):
        return x * x
    for name in ("a\0b", 'quote"\nnew line', "é"):
        g.__name__ = name
        assert jitad.jit(g)(3.0) == 9.0
        assert jitad.grad(g)(3.0) == 6.0
        np.testing.assert_array_equal(jitad.vmap(g)(np.arange(3.0)), [0.0, 1.0, 4.0])


@pytest.mark.parametrize("name, value", [("JITAD_ARENA_MB", "-5"), ("JITAD_ARENA_MB", "lots"),
                                         ("JITAD_MAX_SIGNATURES", "x")])
def test_bad_environment_variable_is_named(name, value):
    rc, err = child_stderr("import jitad; jitad.jit(lambda x: x + 1.0)(1.0)", **{name: value})
    assert rc == 1 and "jitad.errors.ConfigError" in err and name in err and "integer >=" in err, err


# -- pytree registrations -------------------------------------------------------------

class NotPair:
    def __init__(self, x):
        self.x = x


class ListAux:
    def __init__(self, x):
        self.x = x


register_pytree_node(NotPair, lambda p: 5, lambda aux, ch: NotPair(*ch))
register_pytree_node(ListAux, lambda p: ((p.x,), [1, 2]), lambda aux, ch: ListAux(*ch))


def test_flatten_returning_no_pair_names_the_class():
    for call in (lambda: jitad.jit(lambda p: p.x)(NotPair(1.0)), lambda: jitad.tree_leaves(NotPair(1.0))):
        with pytest.raises(jitad.ArgumentError, match="registered for the pytree class NotPair returned 5"):
            call()


def test_unhashable_aux_data_names_the_class_not_static_arguments():
    for t in (jitad.jit, jitad.grad, jitad.vmap):
        with pytest.raises(jitad.ArgumentError, match="pytree class ListAux flattens to aux_data \\[1, 2\\]"):
            t(lambda p: jitad.sum(p.x * 2.0))(ListAux(np.ones(2)))
    with pytest.raises(jitad.ArgumentError, match="static arguments must be hashable, got list"):
        jitad.jit(lambda a, b: a, static_argnums=1)(1.0, [1])
