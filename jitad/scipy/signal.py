"""`jitad.scipy.signal`: SciPy's `convolve` of 1-D and 2-D arrays, staged and differentiable."""
import numpy as np

from .. import numeric as N
from ..errors import ArgumentError, ShapeError

__all__ = ["convolve"]


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def convolve(in1, in2, mode="full", method="auto"):
    """The discrete convolution of two 1-D or two 2-D arrays, as SciPy's `convolve`:
    `mode` 'full' (every overlap), 'same' (the size of `in1`, centred) or 'valid' (full
    overlaps only). Each output is one gather of `in1` times `in2`, summed:
    O(output size x `in2` size).

    >>> convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]))
    array([0. , 1. , 2.5, 4. , 1.5])
    """
    s1, s2 = _shape(in1), _shape(in2)
    if len(s1) != len(s2) or len(s1) not in (1, 2):
        raise ShapeError(f"`convolve`: shapes {s1} and {s2}; give two 1-D or two 2-D arrays")
    if mode not in ("full", "same", "valid"):
        raise ArgumentError(f"`convolve`: mode={mode!r}; use 'full', 'same' or 'valid'")
    if mode == "valid":
        if all(a >= b for a, b in zip(s2, s1)) and s1 != s2:   # SciPy swaps so in1 is the larger
            in1, in2, s1, s2 = in2, in1, s2, s1
        elif not all(a >= b for a, b in zip(s1, s2)):
            raise ShapeError(f"`convolve`: mode='valid' needs one of {s1}, {s2} at least as large as the "
                             "other on every axis")
    nd = len(s1)
    pads = [(m - 1, m - 1) for m in s2]
    padded = N.NUMPY_API["pad"](in1, pads)
    index = []
    for d, (n, m) in enumerate(zip(s1, s2)):
        full = n + m - 1
        start, length = {"full": (0, full), "same": ((m - 1) // 2, n), "valid": (m - 1, n - m + 1)}[mode]
        out_pos = np.arange(start, start + length)[:, None] - np.arange(m)[None, :] + m - 1   # (length, m)
        shape = [1] * (2 * nd)
        shape[d], shape[nd + d] = length, m
        index.append(out_pos.reshape(shape))
    windows = N.getitem(padded, tuple(index))   # (out..., in2...)
    return N.sum(windows * in2, tuple(range(nd, 2 * nd)))
