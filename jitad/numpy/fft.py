"""`jitad.numpy.fft`: NumPy's discrete Fourier transforms under `jnp.fft`.

`fftshift` and `ifftshift` reorder real arrays and are jitad's own: they stage, compile
and differentiate (a roll along each axis). `fftfreq` and `rfftfreq` give NumPy's sample
frequencies. The transforms (`fft`, `rfft`, `irfft`, `fftn`, ...) compute with NumPy on
plain arrays; their results (or, for `irfft`, their inputs) are complex, which staged
code has no dtype for, so on a staged value they raise `UnsupportedError` (a
`NotImplementedError`).

>>> import jitad.numpy as jnp
>>> jnp.fft.fftshift(np.arange(5.0))
Array([3., 4., 0., 1., 2.])
"""
import numpy as np

from ..staging import is_staged
from ._common import jnp, plain_only, wrap

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
           "hfft", "ihfft", "fftshift", "ifftshift", "fftfreq", "rfftfreq"]


def _shifted(x, axes, sign):
    """`x` rolled by `sign * (n // 2)` along each of `axes` (all by default)."""
    x = x if is_staged(x) else np.asarray(x)
    ndim = len(x.shape)
    axes = range(ndim) if axes is None else (axes,) if isinstance(axes, (int, np.integer)) else axes
    axes = [int(a) % ndim for a in axes]
    return jnp().roll(x, [sign * (x.shape[a] // 2) for a in axes], axes) if axes else x


def fftshift(x, axes=None):
    """The zero frequency moved to the middle: `x` rolled by `n // 2` along `axes` (all by
    default), as NumPy's: `jnp.fft.fftshift(jnp.fft.fftfreq(4))` is `[-0.5, -0.25, 0., 0.25]`."""
    return wrap(_shifted(x, axes, 1))


def ifftshift(x, axes=None):
    """`fftshift` undone: `x` rolled by `-(n // 2)` along `axes`:
    `jnp.fft.ifftshift(jnp.fft.fftshift(x))` is `x`."""
    return wrap(_shifted(x, axes, -1))


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of an `n`-point transform with spacing `d` (NumPy's):
    `jnp.fft.fftfreq(4)` is `[0., 0.25, -0.5, -0.25]`."""
    out = np.fft.fftfreq(n, d)
    return wrap(out if dtype is None else out.astype(dtype))


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies of `rfft`'s result (NumPy's): `jnp.fft.rfftfreq(4)` is `[0., 0.25, 0.5]`."""
    out = np.fft.rfftfreq(n, d)
    return wrap(out if dtype is None else out.astype(dtype))


def _transform(name):
    return plain_only(
        getattr(np.fft, name), f"jnp.fft.{name}",
        "its values are complex, and staged code has no complex dtype. Call it on plain arrays (outside jit "
        "and grad), or write the transform you need as a product with the cosine and sine matrices "
        "(`jnp.cos`, `jnp.sin` of an outer product)",
        f"NumPy's `fft.{name}` on plain arrays (complex results); a staged value raises `UnsupportedError`: "
        f"`jnp.fft.{name}(x)`.")


fft = _transform("fft")
ifft = _transform("ifft")
fft2 = _transform("fft2")
ifft2 = _transform("ifft2")
fftn = _transform("fftn")
ifftn = _transform("ifftn")
rfft = _transform("rfft")
irfft = _transform("irfft")
rfft2 = _transform("rfft2")
irfft2 = _transform("irfft2")
rfftn = _transform("rfftn")
irfftn = _transform("irfftn")
hfft = _transform("hfft")
ihfft = _transform("ihfft")
