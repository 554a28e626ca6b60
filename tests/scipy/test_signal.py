"""jitad.scipy.signal against SciPy and JAX (x64): convolutions and correlations in every
mode (odd and even kernels, 1-D and 2-D), detrending, gradients against JAX's, staged."""
import numpy as np
import pytest
import scipy.signal as ss

import jitad
from jitad.errors import JitadError
from jitad.scipy import signal as S

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.scipy.signal as js  # noqa: E402

RNG = np.random.default_rng(0)
PAIRS = [(RNG.normal(size=7), RNG.normal(size=3)), (RNG.normal(size=6), RNG.normal(size=4)),
         (RNG.normal(size=(5, 4)), RNG.normal(size=(2, 3))), (RNG.normal(size=(4, 6)), RNG.normal(size=(3, 3)))]
MODES = ("full", "same", "valid")


@pytest.mark.parametrize("name", ["convolve", "correlate", "fftconvolve", "convolve2d", "correlate2d"])
def test_against_scipy_and_jax(name):
    for a, b in PAIRS:
        if name.endswith("2d") and a.ndim != 2:
            continue
        for mode in MODES:
            mine = getattr(S, name)(a, b, mode)
            np.testing.assert_allclose(mine, getattr(ss, name)(a, b, mode), rtol=1e-12, atol=1e-13, err_msg=mode)
            np.testing.assert_allclose(mine, getattr(js, name)(a, b, mode), rtol=1e-12, atol=1e-13, err_msg=mode)


def test_detrend():
    d = RNG.normal(size=(4, 6)) + np.arange(6.0)
    for axis in (0, 1, -1):
        for kind in ("linear", "constant"):
            mine = S.detrend(d, axis, kind)
            np.testing.assert_allclose(mine, ss.detrend(d, axis, kind), atol=1e-13)
            np.testing.assert_allclose(mine, js.detrend(d, axis, kind), atol=1e-13)


def test_gradients_and_staging():
    a, b = PAIRS[2]
    loss = lambda m, f: lambda x, k: m.sum(f(x, k, "same") ** 2)
    for name in ("correlate2d", "convolve2d"):
        mine = jitad.grad(loss(jitad.numpy, getattr(S, name)), argnums=(0, 1))(a, b)
        theirs = jax.grad(loss(jax.numpy, getattr(js, name)), argnums=(0, 1))(a, b)
        for got, want in zip(mine, theirs):
            np.testing.assert_allclose(got, want, rtol=1e-12)
    staged = jitad.jit(lambda x: S.detrend(x, 0) + 0.0)(PAIRS[3][0])
    np.testing.assert_allclose(staged, ss.detrend(PAIRS[3][0], 0), atol=1e-13)


def test_unsupported_settings_name_the_fix():
    a, b = PAIRS[2]
    with pytest.raises(JitadError, match="fill"):
        S.convolve2d(a, b, boundary="wrap")
    with pytest.raises(JitadError, match="linear"):
        S.detrend(a, type="quadratic")


# autograd's convolve(A, B, axes=..., dot_axes=..., mode=...): a LeNet layer, its swapped
# form, a 1-D contraction and a plain 2-D convolution, in 'valid' and 'full' modes
AXES_CASES = [((3, 1, 8, 7), (1, 4, 3, 2), ([2, 3], [2, 3]), ([1], [0])),
              ((1, 4, 3, 2), (3, 1, 8, 7), ([2, 3], [2, 3]), ([0], [1])),
              ((2, 5, 6), (5, 3), ([2], [1]), ([1], [0])),
              ((5, 6), (3, 2), ([0, 1], [0, 1]), ([], []))]


def test_autograds_axes_and_dot_axes_against_autograd():
    from autograd.scipy.signal import convolve as autograd_convolve
    import autograd
    from jitad.testing import check_grads
    for sa, sb, axes, dots in AXES_CASES:
        a, b = RNG.normal(size=sa), RNG.normal(size=sb)
        for mode in ("valid", "full"):
            mine = S.convolve(a, b, axes=axes, dot_axes=dots, mode=mode)
            np.testing.assert_allclose(mine, autograd_convolve(a, b, axes=axes, dot_axes=dots, mode=mode),
                                       rtol=1e-12, atol=1e-13)
    a, b = RNG.normal(size=AXES_CASES[0][0]), RNG.normal(size=AXES_CASES[0][1])
    loss = lambda conv: lambda a, b: (conv(a, b, axes=([2, 3], [2, 3]), dot_axes=([1], [0]), mode="valid") ** 2).sum()
    mine, theirs = jitad.grad(loss(S.convolve), (0, 1))(a, b), autograd.grad(loss(autograd_convolve), (0, 1))(a, b)
    for m, t in zip(mine, theirs):
        np.testing.assert_allclose(m, t, rtol=1e-11, atol=1e-12)
    check_grads(loss(S.convolve), modes=["rev"], order=1)(a, b)
    with pytest.raises(JitadError, match="mode='valid' needs"):
        S.convolve(np.ones((4, 2)), np.ones((2, 4)), axes=([0, 1], [0, 1]), mode="valid")


def test_autograds_same_mode_with_axes_against_autograd():   # (autograd's own 'same' fails with dot_axes)
    from autograd.scipy.signal import convolve as autograd_convolve
    for sa, sb, axes in (((4, 3), (3, 2), ([0], [0])), ((4, 3), (3, 2), ([1], [0])), ((4, 3), (3, 2), ([0, 1], [0, 1])),
                         ((4, 3), (2, 5), ([1, 0], [1, 0]))):
        a, b = RNG.normal(size=sa), RNG.normal(size=sb)
        np.testing.assert_allclose(S.convolve(a, b, axes=axes, mode="same"),
                                   autograd_convolve(a, b, axes=axes, mode="same"), rtol=1e-12, atol=1e-13)
    a, b = RNG.normal(size=(3, 5)), RNG.normal(size=(4, 5))
    np.testing.assert_allclose(S.convolve(a, b, axes=([0], [0]), dot_axes=([1], [1]), mode="same"),
                               ss.convolve(a, b[:, ::-1], mode="same")[:, 2], rtol=1e-12, atol=1e-13)
