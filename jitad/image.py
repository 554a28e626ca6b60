"""JAX's `jax.image`: resizing images (any number of axes) by resampling kernels.

Each resized axis is a matrix product with a weight matrix computed when tracing (the
shapes are static), so resizing is differentiable and compiles to products.

>>> jitad.image.resize(np.array([0.0, 1.0]), (4,), "linear")
Array([0.  , 0.25, 0.75, 1.  ])
"""
import enum
import math

import numpy as np

from . import numpy as jnp
from .errors import ArgumentError
from .staging import is_staged

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


class ResizeMethod(enum.Enum):
    """The resampling kernels: `NEAREST`, `LINEAR`, `LANCZOS3`, `LANCZOS5`, `CUBIC`,
    `CUBIC_PYTORCH` (OpenCV's cubic with edge padding when not antialiased), `AREA`."""
    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(name):
        """The method a name gives: 'nearest', 'linear' ('bilinear', 'trilinear',
        'triangle'), 'lanczos3', 'lanczos5', 'cubic' ('bicubic', 'tricubic'),
        'cubic-pytorch' ('bicubic-pytorch'), 'area'."""
        for method, names in _NAMES.items():
            if name in names:
                return method
        raise ArgumentError(f"unknown resize method {name!r}; give one of "
                            f"{', '.join(n for names in _NAMES.values() for n in names)}")


_NAMES = {ResizeMethod.NEAREST: ("nearest",), ResizeMethod.LINEAR: ("linear", "bilinear", "trilinear", "triangle"),
          ResizeMethod.LANCZOS3: ("lanczos3",), ResizeMethod.LANCZOS5: ("lanczos5",),
          ResizeMethod.CUBIC: ("cubic", "bicubic", "tricubic"),
          ResizeMethod.CUBIC_PYTORCH: ("cubic-pytorch", "bicubic-pytorch"), ResizeMethod.AREA: ("area",)}


# -- kernels: weight of an input sample at distance |d| (in output-sample units) -------

def _triangle(d):
    return np.maximum(0.0, 1.0 - d)


def _keys_cubic(d, a=-0.5):
    """The cubic convolution kernel with parameter `a` (Keys: -0.5, OpenCV: -0.75)."""
    near = ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0
    far = ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a
    return np.where(d >= 2.0, 0.0, np.where(d >= 1.0, far, near))


def _lanczos(radius):
    def kernel(d):
        with np.errstate(divide="ignore", invalid="ignore"):
            value = radius * np.sin(np.pi * d) * np.sin(np.pi * d / radius) / (np.pi ** 2 * d * d)
        return np.where(d > radius, 0.0, np.where(d > 1e-3, value, 1.0))
    return kernel


_KERNELS = {ResizeMethod.LINEAR: (1, _triangle), ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
            ResizeMethod.LANCZOS5: (5, _lanczos(5.0)), ResizeMethod.CUBIC: (2, _keys_cubic),
            ResizeMethod.CUBIC_PYTORCH: (2, lambda d: _keys_cubic(d, -0.75)), ResizeMethod.AREA: (1, None)}
_TINY = 1000.0 * float(np.finfo(np.float32).eps)   # a total weight below it counts as none


def _weights(n_in, n_out, scale, translation, method, antialias, edge_padding, radius):
    """The `(n_in, n_out)` matrix taking one axis of samples to the resampled axis."""
    inv = 1.0 / scale
    # the input coordinate of each output sample's center
    centers = (np.arange(n_out) + 0.5) * inv - translation * inv - 0.5
    if method is ResizeMethod.AREA:   # the overlap of each output pixel with each input pixel
        lo = np.arange(n_out) * inv - translation * inv
        starts = np.arange(n_in, dtype=np.float64)
        w = np.maximum(0.0, np.minimum(lo[None, :] + inv, starts[:, None] + 1.0) - np.maximum(lo[None, :],
                                                                                               starts[:, None]))
        return _normalized(w, centers, n_in, clip=True)
    # downsampling widens the kernel (a low-pass filter) when antialiasing
    width = max(inv, 1.0) if antialias else 1.0
    pad = (math.ceil(radius * width) if antialias else radius) if edge_padding else 0
    inputs = np.arange(-pad, n_in + pad, dtype=np.float64)
    w = _KERNELS[method][1](np.abs(centers[None, :] - inputs[:, None]) / width)
    if not edge_padding:
        return _normalized(w, centers, n_in, clip=True)
    folded = np.zeros((n_in, n_out))   # samples beyond an edge repeat the edge sample
    np.add.at(folded, np.clip(inputs.astype(np.int64), 0, n_in - 1), w)
    return _normalized(folded, centers, n_in, clip=False)


def _normalized(w, centers, n_in, clip):
    """Columns scaled to sum to one (zero where they sum to almost nothing); with `clip`,
    zero columns for output samples centered outside the input."""
    total = w.sum(axis=0, keepdims=True)
    w = np.where(np.abs(total) > _TINY, w / np.where(total != 0, total, 1.0), 0.0)
    if clip:
        w = np.where(((centers >= -0.5) & (centers <= n_in - 0.5))[None, :], w, 0.0)
    return w


def _shape_of(x):
    return tuple(x.shape) if is_staged(x) else np.shape(x)


def _float(image):
    if is_staged(image):
        return image if image.ir_dtype in ("f64", "f32") else jnp.asarray(image, np.float64)
    image = np.asarray(image)
    return image if image.dtype.kind == "f" else image.astype(np.float64)


def _method(method):
    if isinstance(method, ResizeMethod):
        return method
    if isinstance(method, str):
        return ResizeMethod.from_string(method)
    raise ArgumentError(f"resize method {method!r}: give a ResizeMethod or its name")


def _resample(image, shape, axes, scales, translations, method, antialias):
    out, in_shape = _float(image), _shape_of(image)
    if method is ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    radius = _KERNELS[method][0]
    for d, s, t in zip(axes, scales, translations):
        w = _weights(in_shape[d], shape[d], float(s), float(t), method, antialias,
                     method is ResizeMethod.CUBIC_PYTORCH, radius)
        dtype = np.float32 if (out.ir_dtype if is_staged(out) else out.dtype.name) in ("f32", "float32") else np.float64
        moved = jnp.moveaxis(out, d, -1)
        out = jnp.moveaxis(jnp.matmul(moved, w.astype(dtype)), -1, d)
    return out


def resize(image, shape, method, antialias=True, precision=None):
    """`image` resampled to `shape` (one entry per axis; axes whose size stays are left
    as they are). Ints are resized as float64. `antialias` widens the kernel when
    downsampling; `precision` is accepted (products run in the image's dtype)."""
    in_shape, shape = _shape_of(image), tuple(int(s) for s in shape)
    if len(shape) != len(in_shape):
        raise ArgumentError(f"resize: shape {shape} has {len(shape)} entries for an image of shape {in_shape}; "
                            "give one size per axis")
    method = _method(method)
    axes = [d for d in range(len(shape)) if shape[d] != in_shape[d]]
    if method is ResizeMethod.NEAREST:
        out = image
        for d in axes:   # the input sample whose cell holds each output sample's center
            index = np.floor(((np.arange(shape[d]) + 0.5) * in_shape[d] / shape[d]).astype(np.float32))
            out = jnp.take(out, index.astype(np.int64), axis=d)
        return out
    scales = [1.0 if shape[d] == 0 else shape[d] / in_shape[d] for d in axes]
    return _resample(image, shape, axes, scales, [0.0] * len(axes), method, antialias)


def scale_and_translate(image, shape, spatial_dims, scale, translation, method, antialias=True, precision=None):
    """`image` resampled so that input coordinate `x` lands at `x * scale + translation`
    along each axis of `spatial_dims` (the output of size `shape`)."""
    method = _method(method)
    if method is ResizeMethod.NEAREST:
        raise ArgumentError("scale_and_translate does not take 'nearest'; use a kernel method such as 'linear'")
    if any(is_staged(v) for v in list(np.ravel(scale)) + list(np.ravel(translation))):
        raise ArgumentError("scale_and_translate: scale and translation must be known when tracing")
    shape = tuple(int(s) for s in shape)
    axes = [d % len(shape) for d in spatial_dims]
    return _resample(image, shape, axes, np.ravel(scale), np.ravel(translation), method, antialias)
