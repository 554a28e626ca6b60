"""`lax`'s convolutions and window reductions with XLA's options (dimension numbers,
strides, padding, input and kernel dilation, feature and batch groups).

Both are built from static strided slices of the padded (and dilated) input, one per
window position ("tap"): a convolution concatenates its taps along the channel axis and
runs one matrix product (im2col); a window reduction folds its taps with the reducing
operation. Every step has its gradient in jitad (a slice's is an add into a region), so
reverse and forward mode come for free. A 2-D convolution without groups or kernel
dilation runs jitad's direct `conv2d` kernel instead (at a stride above 1, once per phase
of the strided input)."""
import itertools
import math
import operator
from typing import NamedTuple

import numpy as np

from .. import numeric as N
from ..errors import ArgumentError, ShapeError
from ..staging import is_staged, result_dtype
from . import elementwise as E
from .shapes import _array, _shape, pad, padtype_to_pads


class ConvDimensionNumbers(NamedTuple):
    """The axis layout of a convolution: for the input (batch, feature, spatial...), the
    kernel (out feature, in feature, spatial...) and the output (batch, feature, spatial...)."""
    lhs_spec: tuple
    rhs_spec: tuple
    out_spec: tuple


def conv_general_permutations(dimension_numbers):
    """The axis permutations the layout strings ('NHWC', 'HWIO', 'NHWC') mean, spatial
    axes in the kernel's order: `lax.conv_general_permutations(('NCHW', 'OIHW', 'NCHW'))`."""
    lhs, rhs, out = dimension_numbers
    pairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for spec, (a, b) in zip((lhs, rhs, out), pairs):
        if spec.count(a) != 1 or spec.count(b) != 1:
            raise ArgumentError(f"convolution layout {spec!r} needs one {a!r} and one {b!r}")
    if not set(lhs) - {"N", "C"} == set(rhs) - {"O", "I"} == set(out) - {"N", "C"}:
        raise ArgumentError(f"convolution layouts {dimension_numbers} name different spatial axes")

    def perm(spec, pair):
        spatial = [i for i, c in enumerate(spec) if c not in pair]
        if spec is not rhs:
            spatial.sort(key=lambda i: rhs.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1])) + tuple(spatial)
    return tuple(perm(s, p) for s, p in zip((lhs, rhs, out), pairs))


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers):
    """`ConvDimensionNumbers` from None (NCHW, OIHW, NCHW), layout strings or itself."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if len(lhs_shape) != len(rhs_shape):
        raise ShapeError(f"convolution input of shape {tuple(lhs_shape)} and kernel of shape "
                         f"{tuple(rhs_shape)}: they need the same number of axes")
    if dimension_numbers is None:
        iota = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    if len(dimension_numbers) != 3 or any(len(s) != len(lhs_shape) for s in dimension_numbers):
        raise ArgumentError(f"convolution dimension_numbers {dimension_numbers}: give three layout strings "
                            f"of {len(lhs_shape)} letters, e.g. ('NHWC', 'HWIO', 'NHWC')")
    return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))


def _dilate(n, d):
    return 0 if n == 0 else 1 + d * (n - 1)


def _window_out(n, k, s):
    return max(0, (n - k) // s + 1) if n >= k else 0


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1):
    """The output shape of an NC... convolution with explicit (low, high) pads."""
    spatial = [_window_out(n + lo + hi, k, s) for n, k, s, (lo, hi)
               in zip(lhs_shape[2:], rhs_shape[2:], strides, pads)]
    return (lhs_shape[0] // batch_group_count, rhs_shape[0]) + tuple(spatial)


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """The output shape of `conv_general_dilated` without dilation."""
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    lhs = tuple(np.take(lhs_shape, dn.lhs_spec))
    rhs = tuple(np.take(rhs_shape, dn.rhs_spec))
    pads = padtype_to_pads(lhs[2:], rhs[2:], window_strides, padding) if isinstance(padding, str) else padding
    out = conv_shape_tuple(lhs, rhs, window_strides, pads)
    return tuple(np.take(out, np.argsort(dn.out_spec)))


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """The output shape of `conv_transpose`."""
    dn = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    lhs = tuple(np.take(lhs_shape, dn.lhs_spec))
    rhs = tuple(np.take(rhs_shape, dn.rhs_spec))
    pads = [_transpose_pads(k, s, padding if isinstance(padding, str) else tuple(p))
            for k, s, p in zip(rhs[2:], window_strides, [padding] * len(rhs[2:]) if isinstance(padding, str)
                               else padding)]
    spatial = [_window_out(_dilate(n, s) + a + b, k, 1) for n, k, s, (a, b) in zip(lhs[2:], rhs[2:], window_strides, pads)]
    out = (lhs[0], rhs[0]) + tuple(spatial)
    return tuple(np.take(out, np.argsort(dn.out_spec)))


def _pads(padding, in_spatial, kernel_spatial, strides, lhs_dilation, rhs_dilation, who):
    if isinstance(padding, str):
        if any(d != 1 for d in lhs_dilation):
            raise ArgumentError(f"`lax.{who}`: string padding with lhs_dilation; give (low, high) pairs, "
                                "or use `lax.conv_transpose`")
        window = [_dilate(k, d) for k, d in zip(kernel_spatial, rhs_dilation)]
        return padtype_to_pads(in_spatial, window, strides, padding)
    pads = [tuple(int(v) for v in p) for p in padding]
    if len(pads) != len(in_spatial) or any(len(p) != 2 for p in pads):
        raise ArgumentError(f"`lax.{who}`: padding {padding!r}: give 'SAME', 'VALID' or one (low, high) "
                            f"pair per spatial axis ({len(in_spatial)})")
    return pads


def _taps(x, window, strides, dilation, out_sizes, first_spatial):
    """The strided slices of `x` (spatial axes from `first_spatial` on), one per window
    position, in row-major order of the window."""
    shape = _shape(x)
    for pos in itertools.product(*(range(k) for k in window)):
        starts, stops, steps = [0] * len(shape), list(shape), [1] * len(shape)
        for i, (p, s, d, o) in enumerate(zip(pos, strides, dilation, out_sizes)):
            a = first_spatial + i
            starts[a] = p * d
            stops[a] = p * d + (o - 1) * s + 1
            steps[a] = s
        yield N.slice_static(x, tuple(starts), tuple(stops), tuple(steps))


def _conv_nc(x, w, strides, pads, lhs_dilation, rhs_dilation, groups):
    """The convolution of x (N, C, S...) with w (O, C/groups, K...) -> (N, O, P...)."""
    nsp = len(_shape(x)) - 2
    x = pad(x, 0.0, [(0, 0, 0)] * 2 + [(lo, hi, d - 1) for (lo, hi), d in zip(pads, lhs_dilation)])
    (n, c), spatial = _shape(x)[:2], _shape(x)[2:]
    o, cg = _shape(w)[:2]
    window = _shape(w)[2:]
    out = [_window_out(sz, _dilate(k, d), s) for sz, k, d, s in zip(spatial, window, rhs_dilation, strides)]
    if c != cg * groups or o % groups:
        raise ShapeError(f"convolution: {c} input features and a kernel of {cg} input features and {o} outputs "
                         f"do not fit feature_group_count={groups}")
    if 0 in out or n == 0 or o == 0 or math.prod(window) == 0:
        return N.zeros((n, o) + tuple(out), result_dtype(x))
    if nsp == 2 and groups == 1 and all(d == 1 for d in rhs_dilation) and result_dtype(x) in ("f32", "f64"):
        return _direct_2d(x, w, strides, out)
    k = math.prod(window)
    xt = N.transpose(x, (0,) + tuple(range(2, 2 + nsp)) + (1,))          # (N, S..., C)
    taps = list(_taps(xt, window, strides, rhs_dilation, out, 1))          # each (N, P..., C)
    p = math.prod(out)
    cols = N.reshape(N.stack(taps, -2), (n * p, k, groups, cg))            # (N*P, K, G, Cg)
    og = o // groups
    wk = N.reshape(w, (groups, og, cg, k))
    if groups == 1:
        lhs = N.reshape(cols, (n * p, k * cg))
        rhs = N.transpose(N.reshape(wk, (og, cg, k)), (2, 1, 0))
        res = N.matmul(lhs, N.reshape(rhs, (k * cg, og)))                  # (N*P, O)
    else:
        lhs = N.reshape(N.transpose(cols, (2, 0, 1, 3)), (groups, n * p, k * cg))
        rhs = N.reshape(N.transpose(wk, (0, 3, 2, 1)), (groups, k * cg, og))
        res = N.reshape(N.transpose(N.matmul(lhs, rhs), (1, 0, 2)), (n * p, o))
    res = N.reshape(res, (n,) + tuple(out) + (o,))
    return N.transpose(res, (0, nsp + 1) + tuple(range(1, nsp + 1)))


def _direct_2d(x, w, strides, out):
    """A 2-D convolution by jitad's direct stride-1 kernel: at stride (sh, sw) the sum over
    the sh * sw phases of the input (rows a, a + sh, ...; columns likewise) of each phase
    convolved with the kernel taps of the same phase."""
    (n, c, _, _), (o, _, kh, kw), (sh, sw), (oh, ow) = _shape(x), _shape(w), strides, out
    if (sh, sw) == (1, 1):
        return N.conv2d_valid(x, w)
    total = None
    for a in range(min(sh, kh)):
        for b in range(min(sw, kw)):
            sub = N.slice_static(w, (0, 0, a, b), (o, c, kh, kw), (1, 1, sh, sw))
            th, tw = _shape(sub)[2:]
            phase = N.slice_static(x, (0, 0, a, b), (n, c, a + sh * (oh + th - 2) + 1, b + sw * (ow + tw - 2) + 1),
                                   (1, 1, sh, sw))
            part = N.conv2d_valid(phase, sub)
            total = part if total is None else total + part
    return total


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                         dimension_numbers=None, feature_group_count=1, batch_group_count=1,
                         precision=None, preferred_element_type=None):
    """The general N-d convolution (a cross-correlation, as XLA): `window_strides`,
    `padding` ('SAME', 'VALID', 'SAME_LOWER' or (low, high) pairs, negative ones cut),
    `lhs_dilation` (input dilation: a transposed convolution), `rhs_dilation` (atrous
    kernels), layouts by `dimension_numbers` (('NHWC', 'HWIO', 'NHWC') or
    `ConvDimensionNumbers`; default NCHW/OIHW), grouped by features or batch:

    >>> x, w = np.ones((1, 5, 5, 2)), np.ones((3, 3, 2, 4))
    >>> lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")).shape
    (1, 5, 5, 4)
    """
    x, w = _array(lhs), _array(rhs)
    if len(_shape(x)) < 2 or len(_shape(x)) != len(_shape(w)):
        raise ShapeError(f"`lax.conv_general_dilated`: input of shape {_shape(x)} and kernel of shape {_shape(w)}: "
                         "they need the same number (>= 2) of axes")
    dn = conv_dimension_numbers(_shape(x), _shape(w), dimension_numbers)
    nsp = len(_shape(x)) - 2
    strides = tuple(window_strides) if window_strides is not None else (1,) * nsp
    lhs_dilation = tuple(lhs_dilation or (1,) * nsp)
    rhs_dilation = tuple(rhs_dilation or (1,) * nsp)
    if len(strides) != nsp or len(lhs_dilation) != nsp or len(rhs_dilation) != nsp \
            or min(strides + lhs_dilation + rhs_dilation, default=1) < 1:
        raise ArgumentError(f"`lax.conv_general_dilated`: strides and dilations need {nsp} positive ints each")
    if preferred_element_type is not None:
        x, w = E.convert_element_type(x, preferred_element_type), E.convert_element_type(w, preferred_element_type)
    dtype = result_dtype(x, w)
    if dtype == "bool":
        raise ArgumentError("`lax.conv_general_dilated` of booleans: convert them to numbers first")
    x, w = N.convert(x, dtype), N.convert(w, dtype)
    x = N.transpose(x, tuple(dn.lhs_spec))
    w = N.transpose(w, tuple(dn.rhs_spec))
    pads = _pads(padding, _shape(x)[2:], _shape(w)[2:], strides, lhs_dilation, rhs_dilation, "conv_general_dilated")
    groups = operator.index(feature_group_count)
    batch_groups = operator.index(batch_group_count)
    if groups < 1 or batch_groups < 1 or (groups > 1 and batch_groups > 1):
        raise ArgumentError("`lax.conv_general_dilated`: feature_group_count and batch_group_count are >= 1, "
                            "and at most one of them above 1")
    if batch_groups == 1:
        out = _conv_nc(x, w, strides, pads, lhs_dilation, rhs_dilation, groups)
    else:
        out = _batch_grouped(x, w, strides, pads, lhs_dilation, rhs_dilation, batch_groups)
    return N.transpose(out, tuple(np.argsort(dn.out_spec)))


def _batch_grouped(x, w, strides, pads, lhs_dilation, rhs_dilation, groups):
    """Batch group g of the input (its g-th block of batch entries) with the g-th block of
    output features; the outputs' features side by side."""
    n, o = _shape(x)[0], _shape(w)[0]
    if n % groups or o % groups:
        raise ShapeError(f"`lax.conv_general_dilated`: batch {n} and {o} output features must both divide "
                         f"by batch_group_count={groups}")
    nb, ob = n // groups, o // groups
    blocks = [_conv_nc(_take(x, g * nb, nb), _take(w, g * ob, ob), strides, pads, lhs_dilation, rhs_dilation, 1)
              for g in range(groups)]
    return N.concatenate(blocks, 1)


def _take(x, start, size):
    shape = _shape(x)
    return N.slice_static(x, (start,) + (0,) * (len(shape) - 1), (start + size,) + shape[1:], (1,) * len(shape))


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """An NCHW/OIHW convolution with strides and padding ('SAME', 'VALID' or pairs)."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    """An NCHW/OIHW convolution with padding pairs and both dilations."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                precision=precision, preferred_element_type=preferred_element_type)


def _transpose_pads(k, s, padding):
    """The (low, high) padding of the dilated input that undoes a forward convolution's
    `padding` at stride `s` with a kernel of (dilated) length `k`."""
    if padding == "SAME":
        total = k + s - 2
        low = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        low = k - 1
    else:
        lo, hi = k - padding[0] - 1, k - padding[1] - 1
        return lo, hi
    return low, total - low


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None,
                   use_consistent_padding=False):
    """The transposed ("fractionally strided") convolution: the input dilated by `strides`
    and convolved at stride 1; 'SAME' gives `strides` times the input size. Layouts default
    to ('NHWC', 'HWIO', 'NHWC') by rank; `transpose_kernel=True` flips the kernel and swaps
    its feature axes (the gradient of a forward convolution)."""
    x, w = _array(lhs), _array(rhs)
    nd = len(_shape(x))
    if dimension_numbers is None:
        layouts = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                   5: ("NHWDC", "HWDIO", "NHWDC")}
        if nd not in layouts:
            raise ArgumentError(f"`lax.conv_transpose`: give dimension_numbers for {nd}-axis operands")
        dimension_numbers = layouts[nd]
    dn = conv_dimension_numbers(_shape(x), _shape(w), dimension_numbers)
    kernel = [int(_shape(w)[a]) for a in dn.rhs_spec[2:]]
    rhs_dilation = tuple(rhs_dilation or (1,) * (nd - 2))
    k_eff = [_dilate(k, d) for k, d in zip(kernel, rhs_dilation)]
    if isinstance(padding, str) or use_consistent_padding:
        per_axis = [padding] * len(k_eff) if isinstance(padding, str) else [tuple(p) for p in padding]
        pads = [_transpose_pads(k, s, p) for k, s, p in zip(k_eff, strides, per_axis)]
    else:
        pads = [tuple(p) for p in padding]
    if transpose_kernel:
        for a in dn.rhs_spec[2:]:
            w = N.NUMPY_API["flip"](w, a)
        perm = list(range(nd))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = dn.rhs_spec[1], dn.rhs_spec[0]
        w = N.transpose(w, tuple(perm))
    return conv_general_dilated(x, w, (1,) * (nd - 2), pads, tuple(strides), rhs_dilation, dn,
                                precision=precision, preferred_element_type=preferred_element_type)


def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation=None,
                                 rhs_dilation=None, dimension_numbers=None, precision=None,
                                 preferred_element_type=None):
    """The input's patches (each window position's values) as output features: C * prod(filter_shape)
    features, ordered feature-major then window position (as JAX)."""
    x = _array(lhs)
    nd = len(_shape(x))
    dn = conv_dimension_numbers(_shape(x), (1,) * nd, dimension_numbers)
    c = _shape(x)[dn.lhs_spec[1]]
    k = math.prod(filter_shape)
    eye = np.eye(k, dtype=N.NUMPY_OF[result_dtype(x)] if result_dtype(x) != "i64" else np.float64)
    # one group per input feature: output feature f * k + j is window position j of feature f
    kernel = np.tile(eye.reshape((k, 1) + tuple(filter_shape)), (c,) + (1,) * (len(filter_shape) + 1))
    kernel_nc = np.transpose(kernel, np.argsort(dn.rhs_spec))
    return conv_general_dilated(x, kernel_nc, window_strides, padding, lhs_dilation, rhs_dilation, dn,
                                feature_group_count=c, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape, lhs_dilation=None,
                               rhs_dilation=None, dimension_numbers=None, precision=None):
    """A locally connected layer: a convolution whose kernel differs at every output
    position. `rhs` has the output's spatial axes, then input features fused with the
    window positions (feature-major) and the output features, laid out by `dimension_numbers`."""
    x, w = _array(lhs), _array(rhs)
    dn = conv_dimension_numbers(_shape(x), _shape(w), dimension_numbers)
    patches = conv_general_dilated_patches(x, filter_shape, window_strides, padding, lhs_dilation, rhs_dilation, dn)
    p = N.transpose(patches, tuple(dn.out_spec))                      # (N, C*K, positions...)
    k = N.transpose(w, tuple(dn.rhs_spec))                            # (O, C*K, positions...)
    nsp = len(_shape(p)) - 2
    letters = "abcdefgh"[:nsp]
    out = N.NUMPY_API["einsum"](f"ni{letters},oi{letters}->no{letters}", p, k)
    return N.transpose(out, tuple(np.argsort(dn.out_spec)))


# -- window reductions ------------------------------------------------------------------

_WINDOW_INIT = {"sum": 0.0, "max": -np.inf, "min": np.inf}


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None):
    """The output shape of `reduce_window` with (low, high) padding pairs."""
    n = len(operand_shape)
    base = base_dilation or (1,) * n
    wdil = window_dilation or (1,) * n
    return tuple(_window_out(_dilate(s, b) + lo + hi, _dilate(k, d), st) for s, b, (lo, hi), k, d, st
                 in zip(operand_shape, base, padding, window_dimensions, wdil, window_strides))


def _known_window(computation):
    from .reductions import _MONOIDS, reduce_max, reduce_min, reduce_sum
    return {reduce_sum: "sum", reduce_max: "max", reduce_min: "min"}.get(_MONOIDS.get(computation))


def reduce_window(operand, init_value, computation, window_dimensions, window_strides, padding,
                  base_dilation=None, window_dilation=None):
    """`computation` folded over every window of `window_dimensions` (moved by
    `window_strides`; `padding` 'SAME', 'VALID' or (low, high) pairs filled with
    `init_value`; `base_dilation` spreads the input, `window_dilation` the window). The
    operand may be a pytree with matching init values. A 2x2 max pool of NHWC images:
    `lax.reduce_window(x, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), 'VALID')`."""
    from ..pytree import flatten, unflatten
    leaves, tree = flatten(operand)
    inits, _ = flatten(init_value)
    leaves = [_array(x) for x in leaves]
    shape = _shape(leaves[0])
    n = len(shape)
    window = tuple(int(k) for k in window_dimensions)
    strides = tuple(int(s) for s in window_strides) if window_strides is not None else (1,) * n
    base = tuple(base_dilation or (1,) * n)
    wdil = tuple(window_dilation or (1,) * n)
    if not len(window) == len(strides) == len(base) == len(wdil) == n:
        raise ShapeError(f"`lax.reduce_window`: an operand of shape {shape} needs {n} window dimensions, "
                         "strides and dilations")
    if isinstance(padding, str):
        pads = padtype_to_pads([_dilate(s, b) for s, b in zip(shape, base)],
                               [_dilate(k, d) for k, d in zip(window, wdil)], strides, padding)
    else:
        pads = [tuple(int(v) for v in p) for p in padding]
    out = reduce_window_shape_tuple(shape, window, strides, pads, base, wdil)
    padded = [pad(x, i, [(lo, hi, b - 1) for (lo, hi), b in zip(pads, base)]) for x, i in zip(leaves, inits)]
    if 0 in out or 0 in window:
        return unflatten(tree, [N.broadcast_to(N.convert(i, result_dtype(x)), out) for x, i in zip(leaves, inits)])
    taps = [list(_taps(x, window, strides, wdil, out, 0)) for x in padded]
    single = len(leaves) == 1
    combine = (lambda a, b: [computation(a[0], b[0])]) if single else \
        (lambda a, b: flatten(computation(unflatten(tree, a), unflatten(tree, b)))[0])
    acc = [t[0] for t in taps]
    for j in range(1, len(taps[0])):
        acc = combine(acc, [t[j] for t in taps])
    kind = _known_window(computation) if single else None
    if kind is None or is_staged(inits[0]) or np.asarray(inits[0]) != _WINDOW_INIT[kind]:
        acc = combine([N.convert(i, result_dtype(x)) if is_staged(i) else i for i, x in zip(inits, leaves)], acc)
    return unflatten(tree, acc)


def _reduce_window_named(kind, fn):
    def named(operand, window_dimensions, window_strides, padding, base_dilation=None, window_dilation=None):
        x = _array(operand)
        init = _WINDOW_INIT[kind] if result_dtype(x) != "i64" else \
            {"sum": 0, "max": np.iinfo(np.int64).min, "min": np.iinfo(np.int64).max}[kind]
        return reduce_window(x, init, fn, window_dimensions, window_strides, padding, base_dilation,
                             window_dilation)
    named.__doc__ = f"`reduce_window` of `lax.{'add' if kind == 'sum' else kind}` from its identity."
    return named


# (JAX names these only as primitives: `reduce_window_sum_p.bind(x, window_dimensions=...)`)
reduce_window_sum_named = _reduce_window_named("sum", E.add)
reduce_window_max_named = _reduce_window_named("max", E.max)
reduce_window_min_named = _reduce_window_named("min", E.min)


# -- the selections behind a max or min window's derivatives (JAX's primitives only) ------

def _selected(operand, select_prim, window, strides, padding, base, wdil):
    """Per window, the mask of the tap `select_prim` picks (`ge`: the first largest, `le`:
    the first smallest), one mask per tap, and the padded shape and the taps' slices."""
    kind = getattr(select_prim, "name", select_prim)
    if kind not in ("ge", "le", "gt", "lt"):
        raise ArgumentError(f"select_prim {kind!r}: jitad selects with ge, gt, le or lt")
    largest = kind in ("ge", "gt")
    x = _array(operand)
    shape = _shape(x)
    out = reduce_window_shape_tuple(shape, window, strides, padding, base, wdil)
    fill = -np.inf if largest else np.inf
    padded = pad(x, fill, [(lo, hi, b - 1) for (lo, hi), b in zip(padding, base)])
    taps = list(_taps(padded, window, strides, wdil, out, 0))
    best, masks = taps[0], [None] * len(taps)
    chosen = N.zeros(out, "i64")
    for k, t in enumerate(taps[1:], 1):
        better = (t > best) if largest else (t < best)   # strict: the first of equals stays
        chosen = N.where(better, k, chosen)
        best = N.where(better, t, best)
    masks = [chosen == k for k in range(len(taps))]
    return masks, _shape(padded), out


def select_and_scatter_add(source, operand, select_prim, window_dimensions, window_strides, padding):
    """Each window's `source` value added at the entry of `operand` that `select_prim`
    picks in that window (the transpose of a max or min window's selection)."""
    n = len(_shape(operand))
    window, strides = tuple(window_dimensions), tuple(window_strides)
    masks, padded_shape, out = _selected(operand, select_prim, window, strides, padding, (1,) * n, (1,) * n)
    src = _array(source)
    total = None
    for mask, pos in zip(masks, itertools.product(*(range(k) for k in window))):
        starts = tuple(p for p in pos)
        stops = tuple(p + (o - 1) * s + 1 for p, o, s in zip(pos, out, strides))
        placed = N.unslice(N.where(mask, src, N.zeros_like(src)), padded_shape, starts, stops, strides)
        total = placed if total is None else total + placed
    starts = tuple(lo for lo, _ in padding)
    return N.slice_static(total, starts, tuple(s + d for s, d in zip(starts, _shape(operand))), (1,) * n)


def select_and_gather_add(tangents, operand, select_prim, window_dimensions, window_strides, padding,
                          base_dilation, window_dilation):
    """Per window, the entry of `tangents` where `select_prim` picks in `operand` (the
    tangent of a max or min window)."""
    window, strides = tuple(window_dimensions), tuple(window_strides)
    base, wdil = tuple(base_dilation), tuple(window_dilation)
    masks, _, out = _selected(operand, select_prim, window, strides, padding, base, wdil)
    t = pad(_array(tangents), 0.0, [(lo, hi, b - 1) for (lo, hi), b in zip(padding, base)])
    total = None
    for mask, tap in zip(masks, _taps(t, window, strides, wdil, out, 0)):
        part = N.where(mask, tap, N.zeros_like(tap))
        total = part if total is None else total + part
    return total
