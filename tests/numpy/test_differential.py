"""`jitad.numpy` against `jax.numpy` (x64) on the table of numpy_specs.py: every row on
plain inputs; per topic, the staged rows in one compiled program and the differentiable
rows' gradients in one compiled gradient (compiles are few: one or two per topic). JAX's
values come from one `jax.jit` per topic too (its op-by-op dispatch compiles every
primitive: minutes for the table), computed once per session."""
import functools

import numpy as np
import pytest

import jitad
import jitad.numpy as jnp_ours
from jitad.testing import check_grads

from .numpy_specs import ALL, ARRAYS, BITS, LINALG, POLY, REDUCTIONS, SETS, STATS

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
jnp_ref = jax.numpy

GROUPS = {"stats": STATS, "reductions": REDUCTIONS, "arrays": ARRAYS, "bits": BITS, "sets": SETS, "poly": POLY,
          "linalg": LINALG}


def leaves(tree):
    if isinstance(tree, (tuple, list)):
        return [leaf for t in tree for leaf in leaves(t)]
    return [tree]


def assert_agrees(got, want, spec, where):
    got, want = leaves(got), leaves(want)
    assert len(got) == len(want), f"{spec.name} ({where}): {len(got)} results, JAX has {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        g_arr = np.asarray(g)
        msg = f"{spec.name} ({where}), result {k}"
        assert g_arr.shape == w.shape, f"{msg}: shape {g_arr.shape}, JAX's {w.shape}"
        if spec.check_dtype:
            assert g_arr.dtype == w.dtype, f"{msg}: dtype {g_arr.dtype}, JAX's {w.dtype}"
        if w.dtype.kind in "biu" and g_arr.dtype.kind in "biu":
            np.testing.assert_array_equal(g_arr, w, err_msg=msg)
        else:
            np.testing.assert_allclose(g_arr.astype(np.float64), w.astype(np.float64), rtol=spec.rtol,
                                       atol=spec.rtol, equal_nan=True, err_msg=msg)


@pytest.mark.parametrize("spec", ALL, ids=[s.name for s in ALL])
def test_plain_inputs_agree_with_jax(spec):
    got = spec.fn(jnp_ours, *spec.inputs)
    want = reference(spec)
    assert_agrees(got, want, spec, "plain")
    for leaf in leaves(got):   # plain results are jitad.numpy Arrays (or Python/NumPy scalars)
        assert not isinstance(leaf, np.ndarray) or isinstance(leaf, jnp_ours.Array), \
            f"{spec.name}: a plain {type(leaf).__name__} result"


def reference(spec):
    if spec.ref == "numpy":
        return spec.fn(np, *spec.inputs)
    if not spec.staged:
        return spec.fn(jnp_ref, *spec.inputs)
    group = next(g for g, specs in GROUPS.items() if spec in specs)
    return _jax_values(group)[spec.name]


@functools.lru_cache(maxsize=None)
def _jax_values(group):
    """{row name: JAX's result} for a topic's staged rows, from one jax.jit."""
    specs = [s for s in GROUPS[group] if s.staged and s.ref != "numpy"]
    flat = [x for s in specs for x in s.inputs]
    outs = jax.jit(_staged_program(specs, jnp_ref))(*flat)
    return {s.name: jax.tree_util.tree_map(np.asarray, o) for s, o in zip(specs, outs)}


def _staged_program(specs, m=jnp_ours):
    def program(*flat):
        outs, k = [], 0
        for spec in specs:
            args = flat[k:k + len(spec.inputs)]
            k += len(spec.inputs)
            try:
                outs.append(spec.fn(m, *args))
            except Exception as e:
                raise AssertionError(f"{spec.name} failed to stage: {type(e).__name__}: {e}") from e
        return tuple(outs)
    return program


@pytest.mark.parametrize("group", GROUPS)
def test_staged_agree_with_jax(group):
    specs = [s for s in GROUPS[group] if s.staged]
    flat = [x for s in specs for x in s.inputs]
    outs = jitad.jit(_staged_program(specs))(*flat)
    for spec, got in zip(specs, outs):
        assert_agrees(got, reference(spec), spec, "jit")


def _loss(m, specs, weights):
    """sum over rows of sum(weights * result), a function of the rows' float inputs."""
    def loss(*floats):
        total, k = 0.0, 0
        for spec, ws in zip(specs, weights):
            args = []
            for x in spec.inputs:
                if np.asarray(x).dtype.kind == "f":
                    args.append(floats[k])
                    k += 1
                else:
                    args.append(x)
            for w, leaf in zip(ws, leaves(spec.fn(m, *args))):
                if np.asarray(w).dtype.kind == "f" and w.size:
                    total = total + m.sum(m.asarray(leaf) * w)
        return total
    return loss


def _grad_setup(group):
    specs = [s for s in GROUPS[group] if s.grad]
    rng = np.random.default_rng(7)
    weights = [[rng.uniform(-1, 1, np.shape(np.asarray(r))) if np.asarray(r).dtype.kind == "f"
                else np.zeros(0) for r in leaves(reference(s))] for s in specs]
    floats = [np.asarray(x, np.float64) for s in specs for x in s.inputs if np.asarray(x).dtype.kind == "f"]
    owners = [s.name for s in specs for x in s.inputs if np.asarray(x).dtype.kind == "f"]
    return specs, weights, floats, owners


@pytest.mark.parametrize("group", [g for g in GROUPS if any(s.grad for s in GROUPS[g])])
def test_gradients_agree_with_jax(group):
    specs, weights, floats, owners = _grad_setup(group)
    argnums = tuple(range(len(floats)))
    got = jitad.grad(_loss(jnp_ours, specs, weights), argnums)(*floats)
    want = jax.jit(jax.grad(_loss(jnp_ref, specs, weights), argnums))(*floats)
    for name, g, w in zip(owners, got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-8, atol=1e-8, equal_nan=True,
                                   err_msg=f"gradient of {name}")


SAMPLE = ["median", "quantile[linear,axis=None]", "interp", "cov", "insert[list,axis]", "vander", "polyfit",
          "lstsq", "copysign[grad]"]


@pytest.mark.parametrize("name", SAMPLE)
def test_check_grads_sample(name):
    spec = next(s for s in ALL if s.name == name)
    floats = [np.asarray(x, np.float64) for x in spec.inputs]

    def f(*xs):
        return jnp_ours.sum(jnp_ours.asarray(leaves(spec.fn(jnp_ours, *xs))[0]) ** 2)
    check_grads(f, tuple(floats), order=1, modes=("rev",))
