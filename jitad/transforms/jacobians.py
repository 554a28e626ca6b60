"""Full Jacobians and Hessians: `jacfwd`, `jacrev`, `hessian` (JAX's signatures).

The function is seen as a map between flat vectors (the chosen arguments' leaves
concatenated, the output leaves concatenated). `jacfwd` computes the primal once
(`linearize`) and then the tangent code alone per input element, `jacrev` one `vjp` per
output element: unrolled for a few, else a staged `FOR` loop over the basis vectors that
writes one row per step in place (a `scatter`). JAX's jacfwd is `vmap` of `jvp`, all
directions as one batched tangent; in jitad that was measured slower than the loop
(ht's Jacobian: 2.6 ms against 1.0 ms; the batched tangents, 26 times the size of one,
leave the cache, and the products with a batched right operand need transposes). The
flat Jacobian is then cut into blocks shaped
`out.shape + in.shape`, nested as JAX nests them: the output's pytree outside, the
inputs' (a tuple of them for a tuple `argnums`) inside.
"""
import math

import numpy as np

from .. import numeric as N
from .staged import jvp_staged, linearize_staged
from .pullback import pullback_staged
from ..errors import ArgumentError, check_argnums
from ..pytree import flatten, unflatten
from ..staging import FOR, IF, is_staged

UNROLL = 8   # up to this many basis vectors the rows are unrolled (faster to compile and run)
LEAF_BRANCHES = 4   # up to this many input leaves, jacfwd's columns of a leaf run only its tangent code


def _shape(x):
    return tuple(x.shape) if is_staged(x) else np.shape(x)


def _dtype(x):
    return x.ir_dtype if is_staged(x) else ("f64" if isinstance(x, float) else str(np.asarray(x).dtype))


def _flat(leaves):
    parts = [N.reshape(leaf * 1.0, (-1,)) if _shape(leaf) else N.reshape(leaf * 1.0, (1,)) for leaf in leaves]
    return parts[0] if len(parts) == 1 else N.concatenate(parts)


def _rows(count, width, row_fn, dtype="f64", by_index=False):
    """The (count, width) matrix of `dtype` whose row e is `row_fn(basis vector e)`
    (`by_index`, in the loop: `row_fn(e)`)."""
    if count == 0:   # a zero-size input (jacfwd) or output (jacrev): an empty Jacobian, as JAX's
        return np.zeros((0, width))
    if count <= UNROLL:
        return N.stack([row_fn(np.eye(count)[e]) for e in range(count)])
    index = np.arange(count)

    def body(e, acc):
        row = row_fn(e) if by_index else row_fn(N.where(index == e, 1.0, 0.0))
        return N.bind(N.Op.SCATTER, acc, e, N.convert(N.reshape(row, (width,)), dtype), add=False)
    return FOR(0, count, body, N.zeros((count, width), dtype))


def _forward_columns(leaf_fn, flat_fn, leaves, x0, m, dtype):
    """The (m, n) Jacobian by forward mode: the primal once (`linearize`), then the
    tangent code alone per basis vector. With up to LEAF_BRANCHES input leaves a direction
    seeds its own leaf only, the others' tangents zero (no code: a bias's columns skip the
    weights' products; in the loop over directions, a branch per leaf); with more, every
    direction runs the whole tangent code. Reverse-mode code inside (a Hessian's gradient):
    a whole `jvp` per basis vector."""
    shapes = [_shape(x) for x in leaves]
    starts = [int(o) for o in np.cumsum([0] + [math.prod(s) for s in shapes])]
    lin = linearize_staged(leaf_fn, tuple(leaves))
    if lin is None:
        return N.transpose(_rows(starts[-1], m, lambda v: jvp_staged(flat_fn, (x0,), (v,))[1], dtype))
    groups = [(k, k + 1) for k in range(len(shapes))] if len(shapes) <= LEAF_BRANCHES else [(0, len(shapes))]

    def seeded(group, v):   # the tangent along v, a direction in the group's leaves laid end to end
        first, end = group
        return lin[1](*[N.reshape(v[starts[k] - starts[first]:starts[k + 1] - starts[first]], shapes[k])
                        if first <= k < end else np.zeros(shapes[k]) for k in range(len(shapes))])
    if 0 < starts[-1] <= UNROLL:   # unrolled: each basis vector a constant
        sizes = [starts[end] - starts[first] for first, end in groups]
        return N.transpose(N.stack([seeded(g, np.eye(size)[i]) for g, size in zip(groups, sizes) for i in range(size)]))

    def row(e, at=0):   # direction e: the branch of the group holding it
        first, end = groups[at]
        v = N.where(np.arange(starts[end] - starts[first]) == e - starts[first], 1.0, 0.0)
        if at == len(groups) - 1:
            return seeded(groups[at], v)
        return IF(e < starts[end], lambda: seeded(groups[at], v), lambda: row(e, at + 1))
    return N.transpose(_rows(starts[-1], m, row, dtype, by_index=True))


def jacobian_staged(fn, args, argnums, has_aux, forward, who):
    nums = check_argnums(argnums, who)
    for i in nums:
        if not 0 <= i < len(args):
            raise ArgumentError(f"{who}: argnums={argnums!r} but the function got {len(args)} positional "
                                "arguments; pass that argument or fix argnums")
    in_trees = [flatten(args[i]) for i in nums]
    in_leaves = [leaf for leaves, _ in in_trees for leaf in leaves]
    for k, leaf in enumerate(in_leaves):
        if _dtype(leaf) not in ("f64", "f32", "float64", "float32"):
            raise ArgumentError(f"{who}: argnums={argnums!r} selects a value of dtype {_dtype(leaf)} (leaf {k}); "
                                "only float arguments have derivatives: pass floats, or leave it out of argnums")
    in_shapes = [_shape(leaf) for leaf in in_leaves]
    in_sizes = [math.prod(s) for s in in_shapes]
    offsets = [int(o) for o in np.cumsum([0] + in_sizes)]
    out_info = {}

    def flat_fn(x):
        return leaf_fn(*[N.reshape(x[offsets[k]:offsets[k + 1]], s) for k, s in enumerate(in_shapes)])

    def leaf_fn(*leaves):
        new, start = list(args), 0
        for i, (arg_leaves, td) in zip(nums, in_trees):
            new[i] = unflatten(td, leaves[start:start + len(arg_leaves)])
            start += len(arg_leaves)
        out = fn(*new)
        if has_aux:
            if not (isinstance(out, tuple) and len(out) == 2):
                raise ArgumentError(f"{who}: with has_aux=True the function must return a pair (out, aux)")
            out, aux = out
            out_info.setdefault("aux", aux)   # from the first call, made in the caller's frame
        out_leaves, out_td = flatten(out)
        if not out_leaves:
            raise ArgumentError(f"{who}: the function returns no arrays ({out_td}); it must return a float "
                                "value or a pytree of them")
        out_info["td"], out_info["shapes"] = out_td, [_shape(y) for y in out_leaves]
        return _flat(out_leaves)

    x0 = _flat(in_leaves)
    y0 = flat_fn(x0)   # the output's structure (and aux)
    n, m = offsets[-1], _shape(y0)[0]
    if forward:
        jac = _forward_columns(leaf_fn, flat_fn, in_leaves, x0, m, "f32" if _dtype(x0) == _dtype(y0) == "f32" else "f64")
    else:
        jac = _rows(m, n, lambda u: pullback_staged(flat_fn, (x0,), u, to_closure=False)[0])
    out_shapes, blocks, row = out_info["shapes"], [], 0
    for so in out_shapes:
        size_o = math.prod(so)
        per_arg, start = [], 0
        for arg_leaves, td in in_trees:
            leaves = []
            for k in range(start, start + len(arg_leaves)):
                block = jac[row:row + size_o, offsets[k]:offsets[k + 1]]
                leaves.append(N.reshape(block, tuple(so) + tuple(in_shapes[k])))
            per_arg.append(unflatten(td, leaves))
            start += len(arg_leaves)
        blocks.append(per_arg[0] if isinstance(argnums, (int, np.integer)) else tuple(per_arg))
        row += size_o
    result = unflatten(out_info["td"], blocks)
    return (result, out_info["aux"]) if has_aux else result
