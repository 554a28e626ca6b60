"""The lowerer's sorting kernel `sort_rows` (a `Lowerer` service), which the LLVM rules of
`sort` and `argsort` (jitad/primitives/sort.py) call: row by row along the last axis.

`argsort` is a stable bottom-up merge sort of (key, index) pairs: an insertion sort of
runs of RUN entries, then branch-free merges between two buffers, the last pass landing
in the result. `sort` calls NumPy's vectorized quicksort (x86-simd-sort, C++ in the numpy
library this process has loaded; no Python runs) on a copy of each row where that library
exports it for this CPU, else it runs the same merge sort on the keys alone. Both order
NaNs after every number, as NumPy.
"""
import ctypes

import llvmlite.ir as ir
import numpy as np

from ..ir.types import FLOATS, Type
from .llvm import I64, LL, PTR, alloca, service

RUN = 16   # entries sorted by insertion before the merges


def numpy_qsort_symbols():
    """{our symbol: address} of NumPy's vectorized quicksort for f64 and f32, for the
    best instruction set this CPU has (empty where this numpy lacks them)."""
    core = np._core._multiarray_umath
    features = getattr(core, "__cpu_features__", {})
    level = "V4" if features.get("AVX512_SKX") else "V3" if features.get("AVX2") else None
    if level is None:
        return {}
    try:
        lib = ctypes.CDLL(core.__file__)
        return {f"jitad_np_qsort_{dtype}": ctypes.cast(getattr(lib, f"_ZN2np10qsort_simd12QSort_X86_{level}I{c}EEvPT_l"),
                                                        ctypes.c_void_p).value
                for dtype, c in (("f64", "d"), ("f32", "f"))}
    except (OSError, AttributeError):
        return {}


FAST_SORT = set(numpy_qsort_symbols())   # (the runtime binds these names; jitad/lower/runtime.py)


def _less(b, a, c, dtype):
    """a < c, NaNs after every number (NumPy's order)."""
    if dtype in FLOATS:
        return b.or_(b.fcmp_ordered("<", a, c), b.and_(b.fcmp_unordered("uno", c, c), b.fcmp_ordered("ord", a, a)))
    return b.icmp_signed("<", a, c)


class _Row:
    """The merge sort of one row: keys (and indices) between buffers a and b."""

    def __init__(self, lo, dtype, n, with_index):
        self.lo, self.b, self.t, self.dtype, self.n, self.with_index = lo, lo.b, LL[dtype], dtype, n, with_index

    def at(self, buf, i, t=None):
        return self.b.gep(buf, [i], source_etype=t or self.t)

    def load(self, buf, i, t=None):
        return self.b.load(self.at(buf, i, t), typ=t or self.t)

    def var(self, value):
        slot = alloca(self.b, value.type)
        self.b.store(value, slot)
        return slot

    def insertion_runs(self, src, keys, index):
        """keys/index[s:e] = src[s:e] sorted, for each run [s, e) of RUN entries."""
        lo, b, n = self.lo, self.b, self.n

        def run(r):
            s = b.mul(r, I64(RUN))
            e = b.select(b.icmp_signed("<", b.add(s, I64(RUN)), I64(n)), b.add(s, I64(RUN)), I64(n))

            def insert(k):
                i = b.add(s, k)
                key = self.load(src, i)
                j = self.var(i)
                head, body, done = (lo.func.append_basic_block(x) for x in ("ins", "insbody", "insdone"))
                b.branch(head)
                b.position_at_end(head)
                jv = b.load(j, typ=I64)
                more = b.icmp_signed(">", jv, s)
                prev = b.select(more, b.sub(jv, I64(1)), jv)   # (in range when j == s too)
                b.cbranch(b.and_(more, _less(b, key, self.load(keys, prev), self.dtype)), body, done)
                b.position_at_end(body)
                b.store(self.load(keys, prev), self.at(keys, jv))
                if self.with_index:
                    b.store(self.load(index, prev, I64), self.at(index, jv, I64))
                b.store(prev, j)
                b.branch(head)
                b.position_at_end(done)
                b.store(key, self.at(keys, jv))
                if self.with_index:
                    b.store(i, self.at(index, jv, I64))
            lo.counted_loop(b.sub(e, s), insert)
        lo.counted_loop(I64(-(-n // RUN)), run)

    def merge_pass(self, width, keys, index, keys_to, index_to):
        """Merge neighbouring sorted runs of `width` from keys/index into keys_to/index_to."""
        lo, b, n = self.lo, self.b, self.n
        lesser = lambda u, v: b.select(b.icmp_signed("<", u, v), u, v)

        def pair(p):
            start = b.mul(p, I64(2 * width))
            mid, hi = lesser(b.add(start, I64(width)), I64(n)), lesser(b.add(start, I64(2 * width)), I64(n))
            i, j = self.var(start), self.var(mid)
            last_left, last = b.sub(mid, I64(1)), b.sub(hi, I64(1))

            def step(k):   # branch free: both heads are read (clamped into range), one is taken
                iv, jv = b.load(i, typ=I64), b.load(j, typ=I64)
                ic, jc = lesser(iv, last_left), lesser(jv, last)
                left, right = self.load(keys, ic), self.load(keys, jc)
                right_first = b.and_(b.icmp_signed("<", jv, hi),
                                     b.or_(b.icmp_signed(">", iv, last_left), _less(b, right, left, self.dtype)))
                at = b.add(start, k)
                b.store(b.select(right_first, right, left), self.at(keys_to, at))
                if self.with_index:
                    b.store(b.select(right_first, self.load(index, jc, I64), self.load(index, ic, I64)),
                            self.at(index_to, at, I64))
                step_right = b.zext(right_first, I64)
                b.store(b.add(jv, step_right), j)
                b.store(b.add(iv, b.sub(I64(1), step_right)), i)
            lo.counted_loop(b.sub(hi, start), step)
        lo.counted_loop(I64(-(-n // (2 * width))), pair)

    def sort(self, src, keys, index, keys_tmp, index_tmp):
        """Sort row `src` into keys/index (by way of keys_tmp/index_tmp)."""
        widths = []
        w = RUN
        while w < self.n:
            widths.append(w)
            w *= 2
        bufs = [(keys, index), (keys_tmp, index_tmp)]
        first = len(widths) % 2   # so that the last pass writes keys/index
        self.insertion_runs(src, *bufs[first])
        for k, w in enumerate(widths):
            self.merge_pass(w, *bufs[(first + k) % 2], *bufs[(first + k + 1) % 2])


@service("sort_rows")
def _sort_rows(lo, out, x, t, indices=False):
    """out = each row of x (type `t`) along the last axis sorted, or with `indices` its
    stable argsort (i64), in arena scratch released after."""
    n, rows = t.shape[-1], int(np.prod(t.shape[:-1], dtype=np.int64))
    if n == 0 or rows == 0:
        return
    mark = lo.mark()
    (_argsort if indices else _sort)(lo, out, x, t, n, rows)
    lo.release(mark)


def _argsort(lo, out, x, t, n, rows):
    keys, keys_tmp = (lo.alloc(Type(t.dtype, (n,))) for _ in range(2))
    index_tmp = lo.alloc(Type("i64", (n,)))
    row = _Row(lo, t.dtype, n, True)
    lo.loop_nest((rows,), lambda r: row.sort(row.at(x, lo.b.mul(r[0], I64(n))), keys,
                                             row.at(out, lo.b.mul(r[0], I64(n)), I64), keys_tmp, index_tmp),
                 work=n * max(n.bit_length(), 1))


def _sort(lo, out, x, t, n, rows):
    symbol = f"jitad_np_qsort_{t.dtype}"
    row = _Row(lo, t.dtype, n, False)
    if symbol in FAST_SORT:
        lo.copy(out, x, t)
        qsort = lo.extern(symbol, ir.FunctionType(ir.VoidType(), [PTR, I64]))
        lo.loop_nest((rows,), lambda r: lo.b.call(qsort, [row.at(out, lo.b.mul(r[0], I64(n))), I64(n)]),
                     work=n * max(n.bit_length(), 1))
        return
    keys_tmp = lo.alloc(Type(t.dtype, (n,)))
    lo.loop_nest((rows,), lambda r: row.sort(row.at(x, lo.b.mul(r[0], I64(n))),
                                             row.at(out, lo.b.mul(r[0], I64(n))), None, keys_tmp, None),
                 work=n * max(n.bit_length(), 1))
