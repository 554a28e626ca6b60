"""autograd's helpers of `autograd.numpy.fft` (the VJP makers and checks a program reuses
for its own transform primitives) at jitad's path give autograd's values."""
import numpy as np
import pytest

import jitad.numpy.fft as jf

af = pytest.importorskip("autograd.numpy.fft")
rng = np.random.default_rng(0)


@pytest.mark.parametrize("n", [6, 8])
@pytest.mark.parametrize("norm", [None, "ortho"])
def test_real_transform_vjp_makers_agree_with_autograd(n, norm):
    x = rng.normal(size=(3, n))
    ans = np.fft.rfft(x)
    g = rng.normal(size=ans.shape) + 1j * rng.normal(size=ans.shape)
    np.testing.assert_allclose(jf.rfft_grad(jf.get_fft_args, jf.irfft, ans, x, norm=norm)(g),
                               af.rfft_grad(af.get_fft_args, af.irfft, ans, x, norm=norm)(g), rtol=1e-12, atol=1e-12)
    back = np.fft.irfft(ans, n=n)
    h = rng.normal(size=back.shape)
    np.testing.assert_allclose(jf.irfft_grad(jf.get_fft_args, jf.rfft, back, ans, n, norm=norm)(h),
                               af.irfft_grad(af.get_fft_args, af.rfft, back, ans, n, norm=norm)(h), rtol=1e-12, atol=1e-12)
    x2 = rng.normal(size=(4, n))
    g2 = rng.normal(size=np.fft.rfft2(x2).shape) + 0j
    np.testing.assert_allclose(jf.rfft_grad(jf.get_fft2_args, jf.irfft2, np.fft.rfft2(x2), x2)(g2),
                               af.rfft_grad(af.get_fft2_args, af.irfft2, np.fft.rfft2(x2), x2)(g2), rtol=1e-12, atol=1e-12)


def test_complex_vjp_maker_pad_and_checks():
    x = rng.normal(size=(3, 4))
    g = rng.normal(size=(3, 4)) + 1j * rng.normal(size=(3, 4))
    np.testing.assert_allclose(jf.fft_grad(jf.get_fftn_args, jf.fftn, None, x)(g),
                               af.fft_grad(af.get_fftn_args, af.fftn, None, x)(g), rtol=1e-12)
    np.testing.assert_array_equal(jf.truncate_pad(np.ones((2, 3)), (3, 2)), af.truncate_pad(np.ones((2, 3)), (3, 2)))
    with pytest.raises(NotImplementedError):
        jf.check_no_repeated_axes([0, 0])
    with pytest.raises(NotImplementedError):
        jf.check_even_shape([4, 5])
    assert jf.get_fftn_args(x) == af.get_fftn_args(x)
    assert callable(jf.primitive) and callable(jf.defvjp) and callable(jf.wrap_namespace)
