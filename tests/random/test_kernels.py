"""Eager draws run as compiled block kernels (`jitad.random.kernels`): the same bits as
JAX's for every size (blocks of each size, a partial last block, an empty draw), floats
within the samplers' tolerance of JAX's and of the NumPy meaning of the same words, and
the staged and traced paths unchanged."""
import numpy as np
import pytest

import jitad
from jitad import random as R
from jitad.config import own_arithmetic
from jitad.random import core, kernels

jax = pytest.importorskip("jax")
jr = jax.random

# 0, under one small block, several small blocks and a partial one, every size and a partial one
SIZES = (0, 1, 3 * kernels.BLOCKS[0] + 5, kernels.BLOCKS[2] + kernels.BLOCKS[1] + 2 * kernels.BLOCKS[0] + 7)


def test_blocks_cover_every_index_once():
    for n in (*SIZES, kernels.BLOCKS[1], 2 * kernels.BLOCKS[2] - 1):
        covered = [i for offset, size in kernels._blocks(n) for i in range(offset, min(offset + size, n))]
        assert covered == list(range(n))
        assert len(list(kernels._blocks(n))) <= n // kernels.BLOCKS[-1] + 16 * (len(kernels.BLOCKS) - 1)


@pytest.mark.parametrize("seed", (0, 2 ** 32 - 1))
def test_bits_and_split_are_jaxs_at_every_size(seed):
    with jax.enable_x64(True):
        key, jkey = R.key(seed), jr.PRNGKey(seed)
        for n in SIZES:
            np.testing.assert_array_equal(R.bits(key, (n,), np.uint32), jr.bits(jkey, (n,), np.uint32), str(n))
        np.testing.assert_array_equal(R.bits(key, (3, 7), np.uint64), jr.bits(jkey, (3, 7), np.uint64))
        np.testing.assert_array_equal(R.bits(key, (9,), np.uint8), jr.bits(jkey, (9,), np.uint8))
        np.testing.assert_array_equal(R.key_data(R.split(key, (2, 3))), jr.split(jkey, (2, 3)))


def _ulps(mine, theirs):
    scale = np.maximum(np.abs(theirs.astype(np.float64)), 1.0) * np.finfo(theirs.dtype).eps
    return np.max(np.abs(mine.astype(np.float64) - theirs) / scale, initial=0.0)


@pytest.mark.parametrize("dtype", (np.float64, np.float32))
def test_floats_are_jaxs_and_the_words_numpy_meaning(dtype):
    name = "f64" if dtype == np.float64 else "f32"
    key, n = R.key(0), SIZES[-1]
    with own_arithmetic():
        words = core._words(key, (n,), "test")
        numpy_normal, numpy_uniform = core._normal_of(words, name), core._uniform_of(words, name, -2.0, 5.0)
    with jax.enable_x64(dtype == np.float64):
        normal, uniform = R.normal(key, (n,), dtype), R.uniform(key, (n,), dtype, -2, 5.0)
        assert normal.dtype == uniform.dtype == dtype
        assert _ulps(normal, numpy_normal) <= 4 and _ulps(uniform, numpy_uniform) == 0
        jkey = jr.PRNGKey(0)   # (other keys meet draws where XLA's log differs by more ulps)
        np.testing.assert_array_equal(uniform, jr.uniform(jkey, (n,), dtype, -2, 5.0))
        assert _ulps(normal[:64], np.asarray(jr.normal(jkey, (64,), dtype))) <= 4
        assert R.normal(key, (2, 0, 3), dtype).shape == (2, 0, 3)


def test_staged_and_traced_draws_match_the_kernels():
    key = R.key(11)
    eager = R.normal(key, (4, 5))
    staged = jitad.jit(lambda k: R.normal(k, (4, 5)))(key)
    constant = jitad.jit(lambda x: x + R.normal(R.key(11), (4, 5)))(np.zeros((4, 5)))   # a key known when tracing
    assert _ulps(staged, eager) <= 2 and _ulps(constant, eager) <= 2
    with jitad.disable_jit():
        np.testing.assert_array_equal(R.normal(key, (4, 5)), eager)
    np.testing.assert_array_equal(eager, R.normal(key, (4, 5)))   # a result is not overwritten by the next


def test_array_bounds_take_the_numpy_path():
    low = np.array([0.0, 1.0, -3.0])
    draw = R.uniform(R.key(0), (2, 3), np.float64, low, 4.0)
    with own_arithmetic():
        want = core._uniform_of(core._words(R.key(0), (2, 3), "test"), "f64", low, 4.0)
    np.testing.assert_array_equal(draw, want)
