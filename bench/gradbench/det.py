"""GradBench's `det`: the determinant of an ell×ell matrix by expansion by minors, and its
gradient.

The expansion along the first ell - 4 rows is written as one sum (GradBench's eval notes
this non-recursive form: every product of the recursion, in one loop): a `FOR` over the
ell!/4! ways to pick a column for each of those rows, each term the product of the picked
entries, its sign, and the 4×4 minor left over, expanded by minors along its first row
with the recursion unrolled at trace time. Iteration i picks, for row r, the d-th of the
columns still free, d the r-th digit of i in the mixed radix (ell, ell - 1, ...); the set
of free columns is a bit mask and `nth[mask * ell + d]` the position of its d-th set bit.
Each sub-minor of the unrolled 4×4 minor finds its own columns from its own mask, so no
minor is shared or memoized: the reference's O(ell!) products (the picked entries'
product is formed per term, ell - 5 multiplications more a term than the recursion's).

Why this shape (measured here, CPU time, ell = 8 / 9): the recursion as a staged `FUN`
with a `FOR` over each minor's columns is as fast forward (0.11 / 1.0 ms, a 4×4 minor
written out) but its gradient recomputes each level's subtree in the backward pass (the
`FOR` keeps no sub-minor tape), so it costs about ell - 1 primal evaluations: 0.64 / 7.2
ms, against 0.25 / 2.3 ms for this loop, whose backward pass recomputes nothing nested.
A (the input) is read as a flat row-major array, `flat[i * ell + j]`, as the reference
does: `a[i, j]` with a staged j copies row i for every read, and its cotangent is a
row-sized slot per read (6–7× slower gradient here).
"""
import math

import numpy as np

import jitad
from jitad import FOR
from jitad.numeric import where

BASE = 4   # the size of the minors written out


def det(a, base=BASE):
    """Determinant of the square matrix `a` by expansion by minors.

    >>> jitad.jit(det)(np.array([[1.0, 2.0], [3.0, 4.0]]))   # -2.0
    """
    n = a.shape[0]
    if n == 1:
        return a[0, 0]
    base = max(2, min(base, n))
    flat = jitad.reshape(a, (n * n,))
    column = np.zeros(1 << n, dtype=np.int64)       # column[1 << j] = j
    column[1 << np.arange(n)] = np.arange(n)
    bit = 1 << np.arange(n, dtype=np.int64)
    nth = np.zeros((1 << n) * n, dtype=np.int64)    # nth[mask * n + d]: mask's d-th set bit
    for mask in range(1 << n):
        for d, j in enumerate(j for j in range(n) if mask >> j & 1):
            nth[mask * n + d] = j

    def minor(mask, m):
        """The minor of the last m rows and the m columns in `mask`, by expansion along
        its first row, unrolled (each sub-minor finds its columns from its own mask)."""
        row = n - m
        low = mask & (0 - mask)                      # the lowest kept column's bit
        if m == 2:
            j0, j1 = jitad.take(column, low), jitad.take(column, mask - low)
            return flat[row * n + j0] * flat[(row + 1) * n + j1] - flat[row * n + j1] * flat[(row + 1) * n + j0]
        total, rest = 0.0, mask
        for j in range(m):
            low = rest & (0 - rest)
            term = flat[row * n + jitad.take(column, low)] * minor(mask - low, m - 1)
            total, rest = (total + term if j % 2 == 0 else total - term), rest - low
        return total

    full, top = (1 << n) - 1, n - base
    if top == 0:
        return minor(full, n)

    def term(i, total):
        mask, parity, picked, rest = full, 0, 1.0, i
        for r in range(top):
            d = rest % (n - r)
            rest = rest // (n - r)
            col = jitad.take(nth, mask * n + d)
            picked = picked * flat[r * n + col]
            parity = parity + d
            mask = mask - jitad.take(bit, col)
        value = picked * minor(mask, base)
        return total + where(parity % 2 == 0, value, -value)
    return FOR(0, math.factorial(n) // math.factorial(base), term, 0.0)


def compiled():
    """`{"primal": ..., "gradient": ...}`, each called on the ell×ell matrix."""
    return {"primal": jitad.jit(det), "gradient": jitad.jit(jitad.grad(det))}
