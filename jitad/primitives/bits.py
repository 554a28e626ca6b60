"""Counter-based random bits: the Threefry-2x32 block cipher (20 rounds), as JAX's
default generator uses it. One elementwise primitive serves every random function
(`jitad/random.py`): a 64-bit key word and a 64-bit counter word in, 64 random bits out.
Each i64 word packs two 32-bit words, high then low (JAX's uint32 pairs)."""
import llvmlite.ir as ir
import numpy as np

from ..ir.ops import declare, elementwise_type

ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
PARITY = 0x1BD11BDA


def threefry_numpy(key, count):
    """The reference: uint32 arithmetic wraps as the cipher needs."""
    key, count = np.broadcast_arrays(np.asarray(key, np.int64), np.asarray(count, np.int64))
    shape = key.shape
    words = lambda a: ((np.atleast_1d(a).astype(np.uint64) >> np.uint64(32)).astype(np.uint32),
                       np.atleast_1d(a).astype(np.uint32))
    (k0, k1), (x0, x1) = words(key), words(count)
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(PARITY))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for i in range(5):
        for r in ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = ((x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r))) ^ x0
        x0, x1 = x0 + ks[(i + 1) % 3], x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return ((x0.astype(np.uint64) << np.uint64(32)) | x1).astype(np.int64).reshape(shape)[()]


def _threefry_llvm(lo, node, ins):
    b, i32 = lo.b, ir.IntType(32)
    c32 = lambda v: ir.Constant(i32, v)
    words = lambda v: (b.trunc(b.lshr(v, ir.Constant(v.type, 32)), i32), b.trunc(v, i32))
    (k0, k1), (x0, x1) = words(ins[0]), words(ins[1])
    ks = (k0, k1, b.xor(b.xor(k0, k1), c32(PARITY)))
    x0, x1 = b.add(x0, ks[0]), b.add(x1, ks[1])
    for i in range(5):
        for r in ROTATIONS[i % 2]:
            x0 = b.add(x0, x1)
            x1 = b.xor(b.or_(b.shl(x1, c32(r)), b.lshr(x1, c32(32 - r))), x0)
        x0, x1 = b.add(x0, ks[(i + 1) % 3]), b.add(b.add(x1, ks[(i + 2) % 3]), c32(i + 1))
    i64 = ins[0].type
    return [b.or_(b.shl(b.zext(x0, i64), ir.Constant(i64, 32)), b.zext(x1, i64))]


def _int_words(op, types, attrs, bodies):
    assert all(t.dtype == "i64" for t in types), "threefry2x32 takes i64 words"
    return elementwise_type(op, types, attrs, bodies)


declare("threefry2x32", _int_words, threefry_numpy, arity=2, flags="elementwise", llvm=_threefry_llvm,
        cuda="h_threefry({0}, {1})")
