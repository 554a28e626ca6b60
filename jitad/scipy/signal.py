"""`jitad.scipy.signal`: SciPy's `convolve` of 1-D and 2-D arrays, staged and differentiable."""
import itertools

import numpy as np

from .. import numeric as N
from .. import numpy_api as A
from ..errors import ArgumentError, ShapeError

__all__ = ["convolve", "correlate", "convolve2d", "correlate2d", "fftconvolve", "detrend"]


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def convolve(in1, in2, mode="full", method="auto", precision=None, *, axes=None, dot_axes=None):
    """The discrete convolution of two 1-D or two 2-D arrays, as SciPy's `convolve`:
    `mode` 'full' (every overlap), 'same' (the size of `in1`, centred) or 'valid' (full
    overlaps only). Each output is one gather of `in1` times `in2`, summed:
    O(output size x `in2` size).

    >>> convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]))
    array([0. , 1. , 2.5, 4. , 1.5])

    autograd's form convolves arrays of any rank over chosen axes and contracts others:
    `axes=(axes of in1, axes of in2)` are convolved pairwise, `dot_axes=(.., ..)` summed over
    in pairs; the result's axes are in1's other axes, in2's other axes, then the convolved
    ones ('same': as long as `in1` on each, centred):

    >>> images, filters = np.ones((2, 3, 6, 6)), np.ones((3, 4, 3, 3))   # (batch, colour, y, x)
    >>> convolve(images, filters, axes=([2, 3], [2, 3]), dot_axes=([1], [0]), mode="valid").shape
    (2, 4, 4, 4)
    """
    if axes is not None or dot_axes is not None:
        return _convolve_axes(in1, in2, axes, dot_axes, mode)
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


def _flip(x):
    return N.getitem(x, tuple(slice(None, None, -1) for _ in _shape(x)))


def correlate(in1, in2, mode="full", method="auto", precision=None):
    """The cross-correlation of two real 1-D or 2-D arrays, as SciPy's: `in1` convolved
    with `in2` reversed on every axis."""
    return convolve(in1, _flip(in2), mode)


def _check_2d(who, in1, in2, boundary, fillvalue):
    if len(_shape(in1)) != 2 or len(_shape(in2)) != 2:
        raise ShapeError(f"`{who}`: shapes {_shape(in1)} and {_shape(in2)}; give two 2-D arrays")
    if boundary != "fill" or fillvalue != 0:
        raise ArgumentError(f"`{who}`: boundary={boundary!r}, fillvalue={fillvalue!r}; jitad (as JAX) pads with "
                            "zeros only: boundary='fill', fillvalue=0")


def _convolve_axes(a, b, axes, dot_axes, mode):
    """autograd's tensor convolution: `b` slides under the flipped `a` (the smaller on the
    convolved axes), one tensordot per position of `a`'s window."""
    sa, sb = _shape(a), _shape(b)
    axes = [list(x) for x in (axes if axes is not None else (range(len(sa)), range(len(sb))))]
    dots = [list(x) for x in (dot_axes if dot_axes is not None else ((), ()))]
    if mode not in ("valid", "full", "same"):
        raise ArgumentError(f"`convolve` with axes: mode={mode!r}; use 'valid', 'full' or 'same'")
    if len(axes[0]) != len(axes[1]) or len(dots[0]) != len(dots[1]):
        raise ShapeError(f"`convolve`: axes={axes}, dot_axes={dots}; give the same number of axes of each array")
    if mode == "same":   # the full result's middle, as long as `a` on each convolved axis
        full = _convolve_axes(a, b, axes, dots, "full")
        conv = [slice((sb[j] - 1) // 2, (sb[j] - 1) // 2 + sa[i]) for i, j in zip(*axes)]
        return N.getitem(full, (slice(None),) * (len(_shape(full)) - len(conv)) + tuple(conv))
    if any(sb[j] < sa[i] for i, j in zip(*axes)) and (mode == "valid" or all(sb[j] <= sa[i] for i, j in zip(*axes))):   # the smaller is the window
        if mode == "valid" and not all(sb[j] <= sa[i] for i, j in zip(*axes)):
            raise ShapeError(f"`convolve`: shapes {sa} and {sb}; mode='valid' needs one array at least as "
                             "large as the other on every convolved axis")
        out = _convolve_axes(b, a, axes[::-1], dots[::-1], mode)
        kb, ka = len(sb) - len(axes[1]) - len(dots[1]), len(sa) - len(axes[0]) - len(dots[0])
        return N.transpose(out, [*range(kb, kb + ka), *range(kb), *range(kb + ka, kb + ka + len(axes[0]))])
    if mode == "full":
        widths = [(sa[i] - 1, sa[i] - 1) if k in axes[1] else (0, 0)
                  for k, i in ((k, axes[0][axes[1].index(k)] if k in axes[1] else None) for k in range(len(sb)))]
        b, sb = A.pad(b, widths), tuple(n + 2 * w[0] for n, w in zip(sb, widths))
    out_len = [sb[j] - sa[i] + 1 for i, j in zip(*axes)]
    kept_a = [k for k in range(len(sa)) if k not in axes[0]]
    kept_b = [k for k in range(len(sb)) if k not in axes[1] + dots[1]] + axes[1]   # the order of the result
    total = None
    for offsets in itertools.product(*(range(sa[i]) for i in axes[0])):
        ia, ib = [slice(None)] * len(sa), [slice(None)] * len(sb)
        for i, j, k, n in zip(*axes, offsets, out_len):
            ia[i], ib[j] = sa[i] - 1 - k, slice(k, k + n)
        window = N.transpose(N.getitem(b, tuple(ib)), kept_b + dots[1])
        term = A.tensordot(N.getitem(a, tuple(ia)), window,
                           axes=([kept_a.index(d) for d in dots[0]], list(range(len(kept_b), len(kept_b) + len(dots[1])))))
        total = term if total is None else total + term
    return total


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """The 2-D convolution of two 2-D arrays (zero padding), as SciPy's `convolve2d`."""
    _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    return convolve(in1, in2, mode)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """The 2-D cross-correlation of two 2-D arrays (zero padding), as SciPy's `correlate2d`."""
    _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    if mode != "same":
        return correlate(in1, in2, mode)
    (n0, n1), (m0, m1) = _shape(in1), _shape(in2)   # SciPy centres this one at m // 2
    return N.getitem(correlate(in1, in2, "full"), (slice(m0 // 2, m0 // 2 + n0), slice(m1 // 2, m1 // 2 + n1)))


def fftconvolve(in1, in2, mode="full", axes=None):
    """SciPy's `fftconvolve` of real arrays, computed directly (the same values without
    the FFT's rounding): `axes` must be None (every axis)."""
    if axes is not None:
        raise ArgumentError("`fftconvolve`: axes must be None in jitad (every axis is convolved)")
    return convolve(in1, in2, mode)


def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=None):
    """`data` less its mean (`type='constant'`) or its least-squares line (`'linear'`)
    along `axis`, as SciPy's (one segment: bp=0)."""
    if type not in ("linear", "constant"):
        raise ArgumentError(f"`detrend`: type={type!r}; use 'linear' or 'constant'")
    if not (isinstance(bp, (int, np.integer)) and bp == 0):
        raise ArgumentError("`detrend`: jitad fits one segment; bp must be 0")
    axis = axis % len(_shape(data))
    x = N.NUMPY_API["moveaxis"](data, axis, -1)
    mean = N.sum(x, -1, keepdims=True) / _shape(x)[-1]
    if type == "constant":
        return N.NUMPY_API["moveaxis"](x - mean, -1, axis)
    n = _shape(x)[-1]
    t = np.arange(n, dtype=np.float64) - (n - 1) / 2.0   # centred: slope and intercept separate
    slope = N.sum(x * t, -1, keepdims=True) / max(float(np.sum(t * t)), 1.0)
    return N.NUMPY_API["moveaxis"](x - mean - slope * t, -1, axis)


# -- the helpers autograd's `scipy.signal` defines or imports ---------------------------

from numpy.lib.stride_tricks import as_strided  # noqa: E402,F401  (NumPy's, as autograd imports it)

from ._special_rules import defvjp, primitive  # noqa: E402,F401


def compute_conv_size(a_size, b_size, mode):
    """The length of a convolution of lengths `a_size` and `b_size` in `mode`:
    `compute_conv_size(5, 3, "valid") == 3`."""
    sizes = {"full": a_size + b_size - 1, "same": a_size, "valid": abs(a_size - b_size) + 1}
    if mode not in sizes:
        raise ArgumentError(f"compute_conv_size: mode={mode!r}; use 'full', 'same' or 'valid'")
    return sizes[mode]


def flipped_idxs(ndim, axes):
    """The index that reverses an array of `ndim` axes along `axes`:
    `x[flipped_idxs(2, [1])]` is `x[:, ::-1]`."""
    return tuple(slice(None, None, -1) if d in axes else slice(None) for d in range(ndim))


def parse_axes(a_shape, b_shape, conv_axes, dot_axes, mode):
    """autograd's description of `convolve(A, B, axes=conv_axes, dot_axes=dot_axes)`:
    `(axes, shapes)`, each a dict for "A" and "B" (their "conv", "dot" and "ignore" axes, or
    those axes' lengths) and "out" (the result's "ignore_A", "ignore_B" and "conv" axes).

    >>> parse_axes((2, 5), (3,), ([1], [0]), ([], []), "full")[1]["out"]["ignore_A"]
    (2,)
    """
    if conv_axes is None:
        conv_axes = (tuple(range(len(a_shape))),) * 2
    axes = {}
    for key, shape, conv, dot in (("A", a_shape, conv_axes[0], dot_axes[0]), ("B", b_shape, conv_axes[1], dot_axes[1])):
        axes[key] = {"conv": tuple(conv), "dot": tuple(dot),
                     "ignore": tuple(i for i in range(len(shape)) if i not in conv and i not in dot)}
    if len(axes["A"]["dot"]) != len(axes["B"]["dot"]) or len(axes["A"]["conv"]) != len(axes["B"]["conv"]):
        raise ShapeError(f"parse_axes: conv axes {conv_axes} and dot axes {dot_axes} do not pair up")
    n_a, n_b, n_conv = len(axes["A"]["ignore"]), len(axes["B"]["ignore"]), len(axes["A"]["conv"])
    axes["out"] = {"ignore_A": tuple(range(n_a)), "ignore_B": tuple(range(n_a, n_a + n_b)),
                   "conv": tuple(range(n_a + n_b, n_a + n_b + n_conv))}
    shapes = {key: {part: tuple(shape[i] for i in ax) for part, ax in axes[key].items()}
              for key, shape in (("A", a_shape), ("B", b_shape))}
    shapes["out"] = {"ignore_A": shapes["A"]["ignore"], "ignore_B": shapes["B"]["ignore"],
                     "conv": tuple(compute_conv_size(a_shape[i], b_shape[j], mode)
                                   for i, j in zip(axes["A"]["conv"], axes["B"]["conv"]))}
    return axes, shapes


def einsum_tensordot(a, b, axes):
    """`tensordot(a, b, axes)` written as one `einsum`: the axes `axes[0]` of `a` summed
    against `axes[1]` of `b`, the others kept (a's, then b's)."""
    a_idx, b_idx = list(range(len(_shape(a)))), list(range(len(_shape(a)), len(_shape(a)) + len(_shape(b))))
    for k, (i, j) in enumerate(zip(*axes)):
        a_idx[i] = b_idx[j] = len(a_idx) + len(b_idx) + k
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    a_sub, b_sub = ("".join(letters[i] for i in idx) for idx in (a_idx, b_idx))
    out = "".join(c for c in a_sub + b_sub if (a_sub + b_sub).count(c) == 1)
    return A.einsum(f"{a_sub},{b_sub}->{out}", a, b)


def grad_convolve(argnum, ans, a, b, axes=None, dot_axes=((), ()), mode="full"):
    """The VJP maker of autograd's `convolve(a, b, axes, dot_axes, mode)` in argument
    `argnum` (0 or 1): `g -> the cotangent of that argument`."""
    if argnum not in (0, 1):
        raise ArgumentError(f"grad_convolve: argnum={argnum!r}; convolve has arguments 0 and 1")
    from .. import api

    def conv(x):
        args = (x, b) if argnum == 0 else (a, x)
        return convolve(*args, axes=axes, dot_axes=dot_axes, mode=mode)
    return lambda g: api.vjp(conv, (a, b)[argnum])[1](g)[0]
