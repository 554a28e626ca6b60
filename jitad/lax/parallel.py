"""`lax`'s collectives over the named axis of `jitad.vmap(f, axis_name=...)`: each lane
sees the others' values (`psum`, `all_gather`, ...). Outside such a `vmap` the name is
unbound and they raise, as JAX does."""
import numpy as np

from ..errors import ArgumentError
from ..primitives.named import collective, lookup
from ..pytree import tree_map


def _names(axis_name):
    return axis_name if isinstance(axis_name, (tuple, list)) else (axis_name,)


def _one(axis_name, who):
    """A single axis name (a 1-tuple, as JAX's primitives carry it, is unwrapped)."""
    names = _names(axis_name)
    if len(names) != 1:
        raise ArgumentError(f"`lax.{who}` takes one axis name, got {axis_name!r}")
    return names[0]


def _over(kind, x, axis_name, who, **attrs):
    """`kind` over every axis in `axis_name` (a name or a tuple of names), on each leaf."""
    def one(leaf):
        for name in _names(axis_name):
            leaf = collective(kind, leaf, name, who, **attrs)
        return leaf
    return tree_map(one, x)


def _no_groups(axis_index_groups, who):
    if axis_index_groups is not None:
        raise ArgumentError(f"`lax.{who}`: axis_index_groups is not supported by jitad; split the vmap instead")


def psum(x, axis_name, *, axis_index_groups=None):
    """The sum over the lanes of the named axis, in every lane:
    `jitad.vmap(lambda v: v / lax.psum(v, 'i'), axis_name='i')(x)` normalizes x."""
    _no_groups(axis_index_groups, "psum")
    return _over("psum", x, axis_name, "psum")


def pmean(x, axis_name, *, axis_index_groups=None):
    """The mean over the lanes of the named axis: `lax.pmean(v, 'i')`."""
    _no_groups(axis_index_groups, "pmean")
    return _over("pmean", x, axis_name, "pmean")


def pmax(x, axis_name, *, axis_index_groups=None):
    """The maximum over the lanes of the named axis: `lax.pmax(v, 'i')`."""
    _no_groups(axis_index_groups, "pmax")
    return _over("pmax", x, axis_name, "pmax")


def pmin(x, axis_name, *, axis_index_groups=None):
    """The minimum over the lanes of the named axis: `lax.pmin(v, 'i')`."""
    _no_groups(axis_index_groups, "pmin")
    return _over("pmin", x, axis_name, "pmin")


def axis_index(axis_name):
    """This lane's index along the named axis: `lax.axis_index('i')`."""
    return lookup(_one(axis_name, "axis_index"), "axis_index")[1]


def axis_size(axis_name):
    """The number of lanes of the named axis (a Python int): `lax.axis_size('i')`."""
    size = 1
    for name in _names(axis_name):
        size *= lookup(name, "axis_size")[0]
    return size


def all_gather(x, axis_name, *, axis_index_groups=None, axis=0, tiled=False):
    """Every lane's value, stacked along a new `axis` (joined along `axis` with `tiled`):
    `lax.all_gather(v, 'i')`."""
    _no_groups(axis_index_groups, "all_gather")
    return tree_map(lambda v: _gather(v, axis_name, axis, tiled), x)


def _gather(v, axis_name, axis, tiled):
    rank = len(v.shape) if hasattr(v, "shape") else np.ndim(v)
    axis = axis % (rank + (0 if tiled else 1))
    return collective("all_gather", v, _one(axis_name, "all_gather"), "all_gather", axis=axis, tiled=bool(tiled))


def ppermute(x, axis_name, perm):
    """Lane `d` gets lane `s`'s value for each pair `(s, d)` of `perm`, zeros where no pair
    sends: `lax.ppermute(v, 'i', [(0, 1), (1, 0)])` swaps two lanes."""
    perm = tuple((int(s), int(d)) for s, d in perm)
    if len({d for _, d in perm}) != len(perm) or len({s for s, _ in perm}) != len(perm):
        raise ArgumentError(f"`lax.ppermute`: perm {perm} sends from or to a lane twice")
    return tree_map(lambda v: collective("ppermute", v, _one(axis_name, "ppermute"), "ppermute", perm=perm), x)


def pshuffle(x, axis_name, perm):
    """Lane `i` gets lane `perm[i]`'s value: `lax.pshuffle(v, 'i', [1, 0])`."""
    perm = tuple(int(p) for p in perm)
    if sorted(perm) != list(range(len(perm))):
        raise ArgumentError(f"`lax.pshuffle`: perm {perm} is not a permutation of the lanes")
    return tree_map(lambda v: collective("pshuffle", v, _one(axis_name, "pshuffle"), "pshuffle", perm=perm), x)


def pbroadcast(x, axis_name, source):
    """Every lane gets lane `source`'s value: `lax.pbroadcast(v, 'i', 0)`."""
    return tree_map(lambda v: collective("pbroadcast", v, _one(axis_name, "pbroadcast"), "pbroadcast",
                                         source=int(source)), x)


def psum_scatter(x, axis_name, *, scatter_dimension=0, axis_index_groups=None, tiled=False):
    """The sum over the lanes, cut along `scatter_dimension`: lane j keeps piece j (the
    axis, of length the lane count, dropped unless `tiled`): `lax.psum_scatter(v, 'i')`."""
    _no_groups(axis_index_groups, "psum_scatter")
    return tree_map(lambda v: collective("psum_scatter", v, _one(axis_name, "psum_scatter"), "psum_scatter",
                                         axis=scatter_dimension % len(v.shape), tiled=bool(tiled)), x)


def all_to_all(x, axis_name, split_axis, concat_axis, *, axis_index_groups=None, tiled=False):
    """Each lane cuts its value into lane-count pieces along `split_axis` and sends piece
    k to lane k, which joins what it gets along `concat_axis` (`tiled=False`: the split
    axis has the lane count as length and the pieces stack into `concat_axis`)."""
    _no_groups(axis_index_groups, "all_to_all")
    name = _one(axis_name, "all_to_all")

    def one(v):
        rank = len(v.shape)
        split, concat = split_axis % rank, concat_axis % rank
        if tiled:
            return collective("all_to_all", v, name, "all_to_all", split_axis=split, concat_axis=concat)
        # untiled: the split axis (length n) goes away and a new axis of length n appears at
        # `concat` of the result: a tiled exchange into an inserted length-1 axis
        from .shapes import expand_dims, squeeze
        new, old = (concat, split + 1) if concat <= split else (concat + 1, split)
        out = collective("all_to_all", expand_dims(v, (new,)), name, "all_to_all", split_axis=old,
                         concat_axis=new)
        return squeeze(out, (old,))
    return tree_map(one, x)


def pswapaxes(x, axis_name, axis, *, axis_index_groups=None):
    """The named axis swapped with positional `axis` (an untiled `all_to_all`)."""
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)


def pcast(x, axis_name, *, to):
    """`x` unchanged (JAX's cast between varying and invariant values over the axis)."""
    for name in _names(axis_name):
        lookup(name, "pcast")
    return x
