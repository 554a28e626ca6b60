"""Row max/min over the last axis: the row loop vectorizes (NaN tracked apart from the
accumulator); values equal NumPy's, NaN and ±inf rows included."""
import numpy as np
import pytest

import jitad
from jitad.testing import check_grads

NAN, INF = np.nan, np.inf


def rows(cols, dtype):
    x = np.random.default_rng(cols).standard_normal((8, cols)).astype(dtype)
    x[1, cols // 2] = NAN                  # one NaN in a row
    x[2] = NAN                             # all NaN
    x[3] = -INF                            # all -inf: the max's start value
    x[4, 0], x[4, -1] = INF, -INF
    x[5, -1] = NAN                         # NaN last
    x[6] = 0.0
    x[6, ::2] = -0.0                       # signed zeros tie
    return x


@pytest.mark.parametrize("cols", [3, 8, 37])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row_max_min_equal_numpy(cols, dtype):
    x = rows(cols, dtype)
    for ours, theirs in ((jitad.max, np.max), (jitad.min, np.min)):
        got = jitad.jit(lambda x: ours(x, axis=1))(x)
        np.testing.assert_array_equal(got, theirs(x, axis=1))
        got = jitad.jit(lambda x: ours(x, axis=1, keepdims=True))(x[None])
        np.testing.assert_array_equal(got, theirs(x[None], axis=1, keepdims=True))   # a middle axis
        np.testing.assert_array_equal(jitad.jit(lambda x: ours(x, axis=-1))(x[None]), theirs(x[None], axis=-1))


def test_row_max_gradient():
    x = np.random.default_rng(0).permutation(40).reshape(4, 10) / 7.0   # no ties
    check_grads(lambda x: jitad.sum(jitad.max(x, axis=1) ** 2), (x,), order=1)
