"""Fused loops over short rows (fewer than `tensor.SHORT_ROW` elements) run each row
unrolled: elementwise work with row and column broadcasts, row sums and maxima (with
NaN and ties), column sums and stored results give NumPy's values at every short width,
and a longer row (a rolled loop) the same."""
import numpy as np
import pytest

import jitad
from jitad.lower import tensor


def _program(m):
    def f(x, r, c):
        y = m.tanh(x * r + c)
        return y, m.max(y * 3.0, axis=1), m.sum(y * x, axis=1), m.sum(m.exp(-x * x) * c, axis=0)
    return f


@pytest.mark.parametrize("width", [3, 10, tensor.SHORT_ROW - 1, 33])
def test_short_rows_unrolled(width):
    rng = np.random.default_rng(width)
    x, r, c = rng.standard_normal((41, width)), rng.standard_normal((41, 1)), rng.standard_normal((1, width))
    x[3, 0] = np.nan                       # a row maximum and sum of NaN
    x[5] = 0.25                            # ties in a row maximum
    got = jitad.jit(_program(jitad))(x, r, c)
    for g, want in zip(got, _program(np)(x, r, c)):
        np.testing.assert_allclose(g, want, rtol=1e-13, atol=1e-15)
