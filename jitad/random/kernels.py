"""Eager draws through compiled kernels: the bits and the float draws made from them
are elementwise in the flat index (element i is a function of the cipher of (key, i)),
so one kernel that draws a block of `size` elements from index `offset` on serves every
shape. A draw of n elements runs the largest blocks that fit, then one smaller block for
the rest, and copies them into one array. Each (sampler, statics, block size) is
compiled once per process (jitad's disk cache keeps the machine code across processes)
and no Python runs per element: a (32, 512) normal draw costs one kernel call instead
of a hundred NumPy operations over the array.

>>> import numpy as np
>>> from jitad.random import core, kernels
>>> w = kernels.draw(0, (3,), core._bits_of, (64,))
>>> bool(np.array_equal(w, kernels._threefry(0, np.arange(3))))
True
"""
import numpy as np

from ..ir.ops import Op
from ..primitives.bits import threefry_numpy
from ..staging import Staged, as_var, current_frame, emit, is_staged

BLOCKS = (64, 1024, 16384)   # the kernels' sizes: at most 15 calls of each smaller one per draw
_KERNELS = {}   # (transform, statics, size) -> the jitted block


def _threefry(key, count):
    """The cipher of int64 words `key` and `count` (broadcast): NumPy's, or staged."""
    if not (is_staged(key) or is_staged(count)):
        return threefry_numpy(key, count)
    return Staged(emit(Op.THREEFRY2X32, [as_var(key, "i64"), as_var(count, "i64")])[0])


def eager(key, values=()):
    """Whether a draw from `key` (with scalar arguments `values`) can run as a kernel: not
    while tracing (a trace takes the staged path or keeps a NumPy constant) and with every
    value a host scalar."""
    return current_frame() is None and not is_staged(key) and \
        all(not is_staged(v) and np.ndim(v) == 0 for v in values)


def _kernel(transform, statics, size):
    """The jitted block: `(key, offset, *values) -> transform(words, *statics, *values)` over
    the words of indices offset .. offset + size - 1."""
    from ..api import jit   # (imported when first needed: the api imports the front end's modules)
    found = _KERNELS.get((transform, statics, size))
    if found is None:
        def block(key, offset, *values):
            return transform(_threefry(key, offset + np.arange(size, dtype=np.int64)), *statics, *values)
        block.__name__ = f"random_{transform.__name__.strip('_')}_{size}"
        found = _KERNELS[(transform, statics, size)] = jit(block)
        found.eager_when_disabled = False   # disable_jit runs the user's code eagerly, not the PRNG's
    return found


def _blocks(n):
    """(offset, size) of the blocks that cover n elements: the largest that fit, then the
    smallest, its tail unused, for what is left."""
    offset = 0
    while offset < n:
        size = next((b for b in reversed(BLOCKS) if b <= n - offset), BLOCKS[0])
        yield offset, size
        offset += size


def draw(key, shape, transform, statics, values=()):
    """`transform(words, *statics, *values)` for the words of `shape` drawn from `key` (an
    int64 key word): the blocks' results copied into one array of `shape`."""
    n = int(np.prod(shape, dtype=np.int64))
    key, values = np.int64(key), tuple(values)
    out = None
    for offset, size in _blocks(n):
        part = np.asarray(_kernel(transform, statics, size)(key, np.int64(offset), *values))
        if out is None:
            if size >= n:
                return part[:n].reshape(shape)
            out = np.empty(n, part.dtype)
        out[offset:offset + size] = part[:n - offset]
    return (np.empty(0, np.asarray(transform(np.zeros(0, np.int64), *statics, *values)).dtype)
            if out is None else out).reshape(shape)
