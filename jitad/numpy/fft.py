"""`jitad.numpy.fft`: NumPy's discrete Fourier transforms under `jnp.fft`.

`fftshift` and `ifftshift` reorder real arrays and are jitad's own: they stage, compile
and differentiate (a roll along each axis). `fftfreq` and `rfftfreq` give NumPy's sample
frequencies. The transforms (`fft`, `rfft`, `irfft`, `fftn`, ...) compute with NumPy on
plain arrays; on a staged value (real, or complex: `jitad.staging.Complex`) each is a
product with the DFT's cosine and sine matrices, computed once in float64 per size, along
each transformed axis: O(n^2) per axis, which suits the sizes differentiable programs
transform, and it differentiates, batches and compiles as any product.

>>> import jitad.numpy as jnp
>>> jnp.fft.fftshift(np.arange(5.0))
Array([3., 4., 0., 1., 2.])
"""
import functools
import math

import numpy as np

from ..errors import ArgumentError
from ..staging import Complex, is_staged
from ._common import any_staged, jnp, wrap

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


# -- the transforms: NumPy's on plain arrays; in staged code products with DFT matrices ----------

_NORMS = {None: (1.0, "n"), "backward": (1.0, "n"), "ortho": ("sqrt", "sqrt"), "forward": ("n", 1.0)}


def _scale(norm, n, inverse):
    """The factor of an `n`-point transform (`inverse`: the one back) under `norm`."""
    if norm not in _NORMS:
        raise ArgumentError(f"fft: norm={norm!r}; use None, 'backward', 'ortho' or 'forward'")
    f = _NORMS[norm][1 if inverse else 0]
    return 1.0 if f == 1.0 else 1.0 / math.sqrt(n) if f == "sqrt" else 1.0 / n


@functools.lru_cache(maxsize=64)
def _dft(m, n, k_out, sign, scale, used=None, hermitian=False):
    """The (m, k_out) complex matrix taking m input samples (the first min(m, used) used,
    `used` n by default: zero rows beyond, so a longer input is cut and a shorter one padded)
    to the first k_out outputs of an n-point DFT with exponent sign `sign`, times `scale`; with
    `hermitian` (irfft's), the input is the half spectrum: each row counted twice except the
    0th and (even n) the n/2-th. The phases are exact multiples of 2 pi / n (j k reduced mod n
    first), in float64."""
    j = np.arange(m)[:, None]
    k = np.arange(k_out)[None, :]
    w = np.exp(sign * 2j * np.pi * ((j * k) % n) / n) * scale
    w[min(m, n if used is None else used):] = 0.0
    if hermitian:
        twice = (j > 0) & ~((n % 2 == 0) & (j == n // 2))
        w = w * np.where(twice, 2.0, 1.0)
    w.flags.writeable = False
    return w


def _along(x, axis, matrix, real_out=False):
    """`x` (real or complex) times `matrix` along `axis` (its length is the matrix's rows)."""
    j = jnp()
    x = j.moveaxis(x, axis, -1)
    out = j.matmul(x, matrix)
    if real_out:
        out = j.real(out)
    return j.moveaxis(out, -1, axis)


def _length(x, n, axis, who):
    m = np.shape(x)[axis]
    n = m if n is None else int(n)
    if n < 1:
        raise ArgumentError(f"jnp.fft.{who}: n={n}; give a positive number of points")
    return m, n


def _fft1(x, n, axis, norm, inverse, who):
    m, n = _length(x, n, axis, who)
    return _along(x, axis, _dft(m, n, n, 1 if inverse else -1, _scale(norm, n, inverse)))


def _rfft1(x, n, axis, norm):
    if jnp().iscomplexobj(x):
        raise ArgumentError("jnp.fft.rfft takes real input (JAX's rule; NumPy drops the imaginary part); "
                            "pass jnp.real(x) or use jnp.fft.fft")
    m, n = _length(x, n, axis, "rfft")
    return _along(x, axis, _dft(m, n, n // 2 + 1, -1, _scale(norm, n, False)))


def _irfft1(x, n, axis, norm):
    m = np.shape(x)[axis]
    n = 2 * (m - 1) if n is None else int(n)
    if n < 1:
        raise ArgumentError(f"jnp.fft.irfft: n={n}; give a positive number of output points")
    return _along(x, axis, _dft(m, n, n, 1, _scale(norm, n, True), n // 2 + 1, True), real_out=True)


def _axes_and_sizes(x, s, axes, real_inverse=False):
    """NumPy's defaults for the n-dimensional transforms: `axes` all (or the last len(s)),
    `s` the input's lengths there (for irfftn the last: 2 (m - 1))."""
    nd = len(np.shape(x))
    if axes is None:
        axes = tuple(range(nd - (len(s) if s is not None else nd), nd))
    axes = tuple(int(a) % nd for a in axes)
    if s is None:
        s = [np.shape(x)[a] for a in axes]
        if real_inverse:
            s[-1] = 2 * (s[-1] - 1)
    if len(s) != len(axes):
        raise ArgumentError(f"jnp.fft: s={tuple(s)} and axes={axes} differ in length")
    return axes, tuple(int(v) for v in s)


def _staged(*args):
    return any_staged(*args) or any(type(a) is Complex for a in args)


def _transform(name, staged_fn):
    """NumPy's `fft.name` on plain arrays; `staged_fn` on a staged (real or complex) value."""
    np_fn = getattr(np.fft, name)

    @functools.wraps(np_fn)
    def call(a, *args, **kwargs):
        if _staged(a):
            return staged_fn(a, *args, **kwargs)
        return wrap(np_fn(a, *args, **kwargs))
    call.__doc__ = (f"NumPy's `fft.{name}`: on plain arrays NumPy's; on a staged value a product with DFT "
                    f"matrices (O(n^2) per axis, differentiable): `jnp.fft.{name}(x)`.")
    call.__module__ = __name__
    return call


def _fft(a, n=None, axis=-1, norm=None):
    return _fft1(a, n, axis, norm, False, "fft")


def _ifft(a, n=None, axis=-1, norm=None):
    return _fft1(a, n, axis, norm, True, "ifft")


def _fftn_with(inverse):
    def fn(a, s=None, axes=None, norm=None):
        axes, s = _axes_and_sizes(a, s, axes)
        for ax, n in zip(axes, s):
            a = _fft1(a, n, ax, norm, inverse, "fftn")
        return a
    return fn


def _rfftn(a, s=None, axes=None, norm=None):
    axes, s = _axes_and_sizes(a, s, axes)
    a = _rfft1(a, s[-1], axes[-1], norm)
    for ax, n in zip(axes[:-1], s[:-1]):
        a = _fft1(a, n, ax, norm, False, "rfftn")
    return a


def _irfftn(a, s=None, axes=None, norm=None):
    axes, s = _axes_and_sizes(a, s, axes, real_inverse=True)
    for ax, n in zip(axes[:-1], s[:-1]):
        a = _fft1(a, n, ax, norm, True, "irfftn")
    return _irfft1(a, s[-1], axes[-1], norm)


def _two(fn):
    def two(a, s=None, axes=(-2, -1), norm=None):
        return fn(a, s, axes, norm)
    return two


_SWAPPED = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def _hfft(a, n=None, axis=-1, norm=None):
    return _irfft1(jnp().conj(a), n, axis, _SWAPPED.get(norm, norm))


def _ihfft(a, n=None, axis=-1, norm=None):
    return jnp().conj(_rfft1(a, n, axis, _SWAPPED.get(norm, norm)))


fft = _transform("fft", _fft)
ifft = _transform("ifft", _ifft)
fftn = _transform("fftn", _fftn_with(False))
ifftn = _transform("ifftn", _fftn_with(True))
fft2 = _transform("fft2", _two(_fftn_with(False)))
ifft2 = _transform("ifft2", _two(_fftn_with(True)))
rfft = _transform("rfft", lambda a, n=None, axis=-1, norm=None: _rfft1(a, n, axis, norm))
irfft = _transform("irfft", lambda a, n=None, axis=-1, norm=None: _irfft1(a, n, axis, norm))
rfftn = _transform("rfftn", _rfftn)
irfftn = _transform("irfftn", _irfftn)
rfft2 = _transform("rfft2", _two(_rfftn))
irfft2 = _transform("irfft2", _two(_irfftn))
hfft = _transform("hfft", _hfft)
ihfft = _transform("ihfft", _ihfft)


# -- autograd's helpers of `autograd.numpy.fft` --------------------------------------------
# A program that declares its own transforms as primitives reuses autograd's VJP makers and
# checks; jitad's transforms above carry their own derivatives and use none of these.

def check_no_repeated_axes(axes):
    """autograd's check: `NotImplementedError` where an axis is named twice (its FFT
    gradients do not take that): `check_no_repeated_axes([0, 1])` passes."""
    if len(set(axes)) != len(axes):
        raise NotImplementedError(f"an FFT gradient over a repeated axis ({list(axes)}) is not provided")


def check_even_shape(shape):
    """autograd's check that a real transform's last length is even (its real-FFT gradients
    need it; jitad's own take odd lengths): `check_even_shape([4, 6])` passes."""
    if shape[-1] % 2:
        raise NotImplementedError(f"autograd's real-FFT gradient takes an even last length, not {shape[-1]}")


def get_fft_args(a, d=None, axis=-1, norm=None, *args, **kwargs):
    """`(axes, sizes, norm)` of a one-axis transform's arguments: `get_fft_args(x, 8)` is
    `([-1], [8], None)`."""
    return [axis], None if d is None else [d], norm


def get_fft2_args(a, s=None, axes=(-2, -1), norm=None, *args, **kwargs):
    """`(axes, sizes, norm)` of a two-axis transform's arguments."""
    return axes, s, norm


def get_fftn_args(a, s=None, axes=None, norm=None, *args, **kwargs):
    """`(axes, sizes, norm)` of an n-axis transform's arguments (every axis by default)."""
    return (list(range(len(np.shape(a)))) if axes is None else axes), s, norm


def match_complex(target, x):
    """`x` as the vector space of `target` holds it: its real part where `target` is real."""
    real_target = not np.iscomplexobj(target) and type(target) is not Complex
    return jnp().real(x) if real_target and (np.iscomplexobj(x) or type(x) is Complex) else x


def truncate_pad(x, shape):
    """`x` cut to `shape`, or padded with zeros up to it, along each axis:
    `truncate_pad(np.ones(3), (5,))` is `[1, 1, 1, 0, 0]`."""
    pads = [(0, max(0, int(n) - int(m))) for n, m in zip(shape, np.shape(x))]
    return jnp().pad(x, pads)[tuple(slice(int(n)) for n in shape)]


def make_rfft_factors(axes, resshape, facshape, normshape, norm):
    """The weights of a real transform's gradient: 2 for the frequencies an `rfft` keeps once
    for two (1 for the zero one, and for the last where the full length is even), over the
    transform's size `prod(normshape)` unless `norm` is given. A NumPy array of `resshape`."""
    fac = np.full(tuple(resshape), 2.0)
    index = [slice(None)] * len(resshape)
    last = facshape[-1] - 1 if facshape[-1] <= resshape[axes[-1]] else 0
    index[axes[-1]] = sorted({0, last})
    fac[tuple(index)] = 1.0
    return fac / math.prod(normshape) if norm is None else fac


def fft_grad(get_args, fft_fun, ans, x, *args, **kwargs):
    """autograd's VJP maker of a complex transform `fft_fun` (linear and symmetric: its
    VJP applies it to the cotangent): `fft_grad(get_fft_args, fft, ans, x)(g)`."""
    axes, _, _ = get_args(x, *args, **kwargs)
    check_no_repeated_axes(axes)
    return lambda g: match_complex(x, truncate_pad(fft_fun(g, *args, **kwargs), np.shape(x)))


def _real_factors(get_args, x, real, spectrum, args, kwargs):
    """autograd's checks, and the weights `make_rfft_factors` gives, of a real transform
    between the array `real` (its full sizes) and the half spectrum `spectrum`."""
    axes, s, norm = get_args(x, *args, **kwargs)
    check_no_repeated_axes(axes)
    s = [np.shape(real)[i] for i in axes] if s is None else list(s)
    check_even_shape(s)
    return make_rfft_factors(axes, np.shape(spectrum), s[:-1] + [s[-1] // 2 + 1], s, norm)


def rfft_grad(get_args, irfft_fun, ans, x, *args, **kwargs):
    """autograd's VJP maker of a real-to-complex transform, through its inverse `irfft_fun`."""
    fac = _real_factors(get_args, x, x, ans, args, kwargs)
    return lambda g: match_complex(x, truncate_pad(irfft_fun(jnp().conj(g / fac), *args, **kwargs), np.shape(x)))


def irfft_grad(get_args, rfft_fun, ans, x, *args, **kwargs):
    """autograd's VJP maker of a complex-to-real transform, through the forward `rfft_fun`."""
    fac = _real_factors(get_args, x, ans, x, args, kwargs)
    return lambda g: jnp().conj(match_complex(x, truncate_pad(rfft_fun(g, *args, **kwargs), np.shape(x)))) * fac


test = np.fft.test   # NumPy's test runner of the module, as autograd's namespace carries it


def __getattr__(name):   # autograd's module carries its extension API too (imported late: it is a layer above)
    if name in ("primitive", "defvjp", "vspace"):
        from .. import extend
        return getattr(extend, name)
    if name == "wrap_namespace":
        from .numpy_names import wrap_namespace
        return wrap_namespace
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
