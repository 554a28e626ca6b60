"""`lax`'s reductions, cumulative operations, sorts, products and `associative_scan`."""
import operator

import numpy as np

from .. import numeric as N
from .. import numpy as jnp
from ..errors import ArgumentError, ShapeError
from ..ir.ops import Op
from ..numpy_api import _lowest, _of_nothing
from ..pytree import flatten, unflatten
from ..staging import is_staged, result_dtype
from . import elementwise as E
from .shapes import _array, _shape, concatenate, rev, slice_in_dim


def _axes(operand, axes):
    n = len(_shape(operand))
    return tuple(sorted(a % n for a in axes)) if n else ()


def reduce_sum(operand, axes):
    """The sum over `axes`: `lax.reduce_sum(x, (0,))`."""
    return N.sum(_array(operand), _axes(operand, axes)) if axes else _array(operand)


def reduce_prod(operand, axes):
    """The product over `axes`: `lax.reduce_prod(x, (0,))`."""
    return jnp.prod(_array(operand), _axes(operand, axes)) if axes else _array(operand)


def reduce_max(operand, axes):
    """The maximum over `axes` (over an empty axis the dtype's lowest value, -inf for floats):
    `lax.reduce_max(x, (1,))`."""
    return _extremum(operand, axes, True)


def reduce_min(operand, axes):
    """The minimum over `axes` (over an empty axis the dtype's highest value, inf for floats):
    `lax.reduce_min(x, (1,))`."""
    return _extremum(operand, axes, False)


def _extremum(operand, axes, largest):
    x, axes = _array(operand), _axes(operand, axes)
    if axes and not N.math._nonempty(x, axes):   # (the identity, as `lax`'s)
        return _of_nothing(x, axes, False, _lowest(np.dtype(x.dtype), largest))
    return (N.max if largest else N.min)(x, axes) if axes else x


def reduce_and(operand, axes):
    """True where every entry over `axes` is (for ints: the bitwise and of the entries)."""
    if result_dtype(operand) == "bool":
        return jnp.all(_array(operand), _axes(operand, axes)) if axes else _array(operand)
    return _fold(E.bitwise_and, _array(operand), _axes(operand, axes), -1)


def reduce_or(operand, axes):
    """True where some entry over `axes` is (for ints: the bitwise or of the entries)."""
    if result_dtype(operand) == "bool":
        return jnp.any(_array(operand), _axes(operand, axes)) if axes else _array(operand)
    return _fold(E.bitwise_or, _array(operand), _axes(operand, axes), 0)


def reduce_xor(operand, axes):
    """The exclusive or of the entries over `axes`."""
    return _fold(E.bitwise_xor, _array(operand), _axes(operand, axes), 0)


def _halves(fn, xs, axis):
    """`fn` folded over the entries along `axis` of the arrays `xs` by pairing halves
    (log2(n) applications of `fn` to whole arrays); the axis is kept with length 1."""
    n = _shape(xs[0])[axis]
    while n > 1:
        h = n // 2
        lo = [slice_in_dim(x, 0, h, 1, axis) for x in xs]
        hi = [slice_in_dim(x, h, 2 * h, 1, axis) for x in xs]
        rest = [slice_in_dim(x, 2 * h, n, 1, axis) for x in xs]
        xs = fn(lo, hi)
        if n % 2:
            xs = [concatenate([a, r], axis) for a, r in zip(xs, rest)]
        n = h + n % 2
    return xs


def _fold(fn, x, axes, identity):
    """`fn` (elementwise, associative, commutative) folded over `axes` of `x` (`identity` over
    an empty one)."""
    if not N.math._nonempty(x, axes):
        fn(x, x)   # (its check of the dtype: ints and bools only)
        return _of_nothing(x, axes, False, identity)
    for a in axes:
        x = _halves(lambda lo, hi: [fn(lo[0], hi[0])], [x], a)[0]
    return N.reshape(x, tuple(n for d, n in enumerate(_shape(x)) if d not in axes))


_MONOIDS = {E.add: reduce_sum, operator.add: reduce_sum, N.NUMPY_API.get("add"): reduce_sum,
            E.mul: reduce_prod, operator.mul: reduce_prod, N.NUMPY_API.get("multiply"): reduce_prod,
            E.max: reduce_max, N.maximum: reduce_max, E.min: reduce_min, N.minimum: reduce_min,
            E.bitwise_and: reduce_and, E.bitwise_or: reduce_or, E.bitwise_xor: reduce_xor}


def reduce(operands, init_values, computation, dimensions):
    """`computation` folded over `dimensions`, starting from `init_values`; operands and
    init values may be matching pytrees, `computation(acc, x)` taking and returning such
    pairs. Known monoids (`lax.add`, `lax.max`, ...) run as jitad's reductions; any other
    associative and commutative `computation` (made of elementwise operations) is applied
    to halves of the arrays, log2(n) times: `lax.reduce(x, 0.0, lax.add, (0,))`."""
    flat_ops, tree = flatten(operands)
    flat_init, init_tree = flatten(init_values)
    if len(flat_ops) != len(flat_init):
        raise ArgumentError(f"`lax.reduce`: {len(flat_ops)} operands but {len(flat_init)} init values")
    dims = _axes(flat_ops[0], dimensions)
    known = _MONOIDS.get(computation) if len(flat_ops) == 1 else None
    if known is not None:
        out = known(flat_ops[0], dims)
        init = flat_init[0]
        if not _is_identity(computation, known, init):
            out = computation(init, out)
        return out
    def step(a, b):
        return flatten(computation(unflatten(tree, a), unflatten(tree, b)))[0]
    xs = [_array(x) for x in flat_ops]
    for a in dims:
        xs = _halves(step, xs, a)
    keep = lambda x: N.reshape(x, tuple(n for d, n in enumerate(_shape(x)) if d not in dims))
    xs = [keep(x) for x in xs]
    if not all(n for d, n in enumerate(_shape(flat_ops[0])) if d in dims):
        return unflatten(tree, [N.broadcast_to(N.convert(i, result_dtype(x)), _shape(x))
                                if not is_staged(i) else N.broadcast_to(i, _shape(x))
                                for i, x in zip(flat_init, xs)])
    out = step([i for i in flat_init], xs)
    return unflatten(tree, out)


def _is_identity(computation, known, init):
    if is_staged(init):
        return False
    v = np.asarray(init)
    if known is reduce_sum:
        return v == 0
    if known is reduce_prod:
        return v == 1
    if known is reduce_max:
        return v == -np.inf or (v.dtype.kind in "iu" and v == np.iinfo(np.int64).min) or v.dtype == np.bool_ and not v
    if known is reduce_min:
        return v == np.inf or (v.dtype.kind in "iu" and v == np.iinfo(np.int64).max) or v.dtype == np.bool_ and v
    return False


def argmax(operand, axis, index_dtype):
    """The index of the first largest entry along `axis` (NaN counts as largest, as JAX):
    `lax.argmax(x, 0, np.int64)`."""
    return _arg(operand, axis, jnp.argmax)


def argmin(operand, axis, index_dtype):
    """The index of the first smallest entry along `axis` (NaN counts as smallest, as JAX)."""
    return _arg(operand, axis, jnp.argmin)


def _arg(operand, axis, pick):
    x = _array(operand)
    if result_dtype(x) in ("f32", "f64"):
        nan = x != x
        has_nan = jnp.any(nan, axis, keepdims=True)
        return N.where(N.reshape(has_nan, tuple(n for d, n in enumerate(_shape(has_nan)) if d != axis % len(_shape(x)))),
                       jnp.argmax(nan, axis), pick(x, axis))
    return pick(x, axis)


# -- running operations -------------------------------------------------------------

def _cumulative(op, x, axis, reverse):
    x = _array(x)
    if not _shape(x):
        raise ShapeError("`lax` cumulative operations need an operand with at least one axis")
    return N.bind(op, x, axis=axis % len(_shape(x)), reverse=bool(reverse))


def cumsum(operand, axis=0, reverse=False):
    """Running sums along `axis` (from the end with `reverse`): `lax.cumsum(x, 0)`."""
    return _cumulative(Op.CUMSUM, operand, axis, reverse)


def cumprod(operand, axis=0, reverse=False):
    """Running products along `axis` (from the end with `reverse`)."""
    return _cumulative(Op.CUMPROD, operand, axis, reverse)


def cumlogsumexp(operand, axis=0, reverse=False):
    """log(cumsum(exp(x))) along `axis`, without overflow."""
    return _cumulative(Op.LOGCUMSUMEXP, E._float(operand), axis, reverse)


def cummax(operand, axis=0, reverse=False):
    """Running maxima along `axis` (from the end with `reverse`)."""
    return associative_scan(N.maximum, _array(operand), reverse, axis)


def cummin(operand, axis=0, reverse=False):
    """Running minima along `axis` (from the end with `reverse`)."""
    return associative_scan(N.minimum, _array(operand), reverse, axis)


def associative_scan(fn, elems, reverse=False, axis=0):
    """The running `fn`-combination of `elems` (a pytree of arrays) along `axis`, for an
    associative `fn(a, b)` of elementwise operations: log2(n) rounds, each combining every
    entry with the one 2**k before it. `lax.associative_scan(lax.add, x)` is `cumsum`;
    with `reverse=True` it runs from the end."""
    if not callable(fn):
        raise ArgumentError("`lax.associative_scan` takes a function fn(a, b) as its first argument")
    leaves, tree = flatten(elems)
    leaves = [_array(x) for x in leaves]
    if not leaves:
        return elems
    ax = axis % max(len(_shape(leaves[0])), 1)
    n = _shape(leaves[0])[ax]
    if any(_shape(x)[ax] != n for x in leaves):
        raise ShapeError("`lax.associative_scan`: the arrays differ in length along the scanned axis")
    if reverse:
        leaves = [rev(x, (ax,)) for x in leaves]
    combine = lambda a, b: flatten(fn(unflatten(tree, a), unflatten(tree, b)))[0]
    shift = 1
    while shift < n:
        early = [slice_in_dim(x, 0, n - shift, 1, ax) for x in leaves]
        late = [slice_in_dim(x, shift, n, 1, ax) for x in leaves]
        head = [slice_in_dim(x, 0, shift, 1, ax) for x in leaves]
        leaves = [concatenate([h, c], ax) for h, c in zip(head, combine(early, late))]
        shift *= 2
    if reverse:
        leaves = [rev(x, (ax,)) for x in leaves]
    return unflatten(tree, leaves)


# -- sorting --------------------------------------------------------------------------

def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """`operand` sorted along `dimension` (NaNs last); a sequence of arrays is sorted
    together, lexicographically by the first `num_keys` of them:
    `keys, vals = lax.sort((k, v), num_keys=1)`."""
    single = not isinstance(operand, (tuple, list))
    ops = [_array(operand)] if single else [_array(x) for x in operand]
    if not 1 <= num_keys <= len(ops):
        raise ArgumentError(f"`lax.sort`: num_keys={num_keys} for {len(ops)} operands")
    if single:
        return jnp.sort(ops[0], dimension)
    axis = dimension % len(_shape(ops[0]))
    order = None
    for key in reversed(ops[:num_keys]):   # stable sorts from the last key to the first
        k = key if order is None else jnp.take_along_axis(key, order, axis)
        step = jnp.argsort(k, axis)
        order = step if order is None else jnp.take_along_axis(order, step, axis)
    return tuple(jnp.take_along_axis(x, order, axis) for x in ops)


def sort_key_val(keys, values, dimension=-1, is_stable=True):
    """`keys` sorted along `dimension` and `values` in the same order."""
    return sort((keys, values), dimension, is_stable, 1)


def top_k(operand, k, *, axis=-1):
    """The `k` largest entries along the last axis, in descending order, and their indices."""
    if axis not in (-1, len(_shape(operand)) - 1):
        x = jnp.moveaxis(_array(operand), axis, -1)
        vals, idx = jnp.top_k(x, k)
        return jnp.moveaxis(vals, -1, axis), jnp.moveaxis(idx, -1, axis)
    return jnp.top_k(_array(operand), k)


# -- products --------------------------------------------------------------------------

def _preferred(x, preferred_element_type):
    if preferred_element_type is None:
        return _array(x)
    return E.convert_element_type(_array(x), preferred_element_type)


def dot(lhs, rhs, precision=None, preferred_element_type=None, out_sharding=None):
    """The vector, matrix-vector or matrix product (`jnp.dot` on 1-D and 2-D arrays)."""
    return N.dot(_preferred(lhs, preferred_element_type), _preferred(rhs, preferred_element_type))


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, out_sharding=None):
    """The product contracting `lhs` and `rhs` over the paired axes of
    `dimension_numbers = ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))`; the result
    has the batch axes, then lhs's free axes, then rhs's:
    `lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,))))` is a batched matmul."""
    (lc, rc), (lb, rb) = dimension_numbers
    x, y = _preferred(lhs, preferred_element_type), _preferred(rhs, preferred_element_type)
    xs, ys = _shape(x), _shape(y)
    lc, rc, lb, rb = ([a % max(len(s), 1) for a in t] for t, s in ((lc, xs), (rc, ys), (lb, xs), (rb, ys)))
    if len(lc) != len(rc) or len(lb) != len(rb) or any(xs[a] != ys[b] for a, b in zip(lc + lb, rc + rb)):
        raise ShapeError(f"`lax.dot_general`: shapes {xs} and {ys} do not pair up along {dimension_numbers}")
    lf = [d for d in range(len(xs)) if d not in lc and d not in lb]
    rf = [d for d in range(len(ys)) if d not in rc and d not in rb]
    size = lambda s, ds: int(np.prod([s[d] for d in ds], dtype=np.int64))
    bshape = tuple(xs[d] for d in lb)
    a = N.reshape(N.transpose(x, tuple(lb + lf + lc)), bshape + (size(xs, lf), size(xs, lc)))
    b = N.reshape(N.transpose(y, tuple(rb + rc + rf)), bshape + (size(ys, rc), size(ys, rf)))
    if result_dtype(a) != result_dtype(b):
        a, b = N.convert(a, result_dtype(a, b)), N.convert(b, result_dtype(a, b))
    out = N.matmul(a, b)
    return N.reshape(out, bshape + tuple(xs[d] for d in lf) + tuple(ys[d] for d in rf))


def scaled_dot(lhs, rhs, *, lhs_scale=None, rhs_scale=None, dimension_numbers=None, preferred_element_type=None):
    """`dot_general(lhs * lhs_scale, rhs * rhs_scale)`, each scale repeated in blocks along the
    contracting axes (an axis of the operand `k` times its scale's length: blocks of `k`).
    The default `dimension_numbers` contract axis 1 with axis 0 (2-D), or 2 with 1 batched
    over 0 (3-D). jitad computes in the operands' float dtype (or `preferred_element_type`),
    not in JAX's bfloat16, so its results are the exact ones JAX's approximate:

    >>> lax.scaled_dot(np.ones((1, 4)), np.ones((4, 1)), lhs_scale=np.array([[1.0, 2.0]]),
    ...                rhs_scale=np.ones((2, 1))).tolist()
    [[6.0]]
    """
    nd = len(_shape(lhs))
    if dimension_numbers is None:
        if nd not in (2, 3):
            raise ShapeError(f"`lax.scaled_dot`: operands of rank {nd}; give dimension_numbers for ranks "
                             "other than 2 and 3")
        dimension_numbers = (((1,), (0,)), ((), ())) if nd == 2 else (((2,), (1,)), ((0,), (0,)))
    (lc, rc), _ = dimension_numbers
    lhs, rhs = (_scaled(x, scale, contracting) for x, scale, contracting in ((lhs, lhs_scale, lc), (rhs, rhs_scale, rc)))
    return dot_general(lhs, rhs, dimension_numbers, preferred_element_type=preferred_element_type)


def _scaled(x, scale, contracting):
    """`x` times `scale` repeated in blocks along the contracting axes (JAX's checks on the shapes)."""
    if scale is None:
        return x
    xs, ss = _shape(x), _shape(scale)
    if len(xs) != len(ss):
        raise ShapeError(f"`lax.scaled_dot`: an operand of shape {xs} and its scale of shape {ss}; give "
                         "them the same rank")
    for d, (n, m) in enumerate(zip(xs, ss)):
        if d in contracting and (n % m or n // m < 2):
            raise ShapeError(f"`lax.scaled_dot`: contracting axis {d} of length {n} is not a multiple (at "
                             f"least twice) of its scale's length {m}")
        if d not in contracting and n != m:
            raise ShapeError(f"`lax.scaled_dot`: axis {d} has length {n}, its scale {m}; they must agree")
    for d in contracting:
        scale = N.NUMPY_API["repeat"](scale, xs[d] // ss[d], axis=d)
    return x * scale


def batch_matmul(lhs, rhs, precision=None):
    """Matrix products over the shared leading batch axes: `lax.batch_matmul(a, b)`."""
    if len(_shape(lhs)) != len(_shape(rhs)) or len(_shape(lhs)) < 2:
        raise ShapeError(f"`lax.batch_matmul`: operands of shapes {_shape(lhs)} and {_shape(rhs)}; give "
                         "two arrays of the same rank >= 2")
    return N.matmul(_array(lhs), _array(rhs))
