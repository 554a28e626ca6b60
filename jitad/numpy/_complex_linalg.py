"""`jnp.linalg` on complex matrices: norms from the moduli, and inverses and solves through
the real embedding Z = A + iB -> [[A, -B], [B, A]], a real matrix twice the size whose
products, inverse and singular values are Z's own in real form (each singular value twice).
Determinants come from Gaussian elimination with partial pivoting and Cholesky factors from
the column recurrence, written in complex staged operations (n steps, O(n^3) in all; the
pivot choice is piecewise constant)."""
import functools

import numpy as np

from ..errors import UnsupportedError
from ..staging import Staged
from ..staging.complex import Complex, is_complex, make, parts
from . import _complex_decomp as _decomp
from ._complex_decomp import _embedding
from ._common import jnp
from ._complex import R, _abs2, dispatcher


def _norm(x, ord=None, axis=None, keepdims=False):
    """NumPy's norms of complex values (the moduli's norms; 2, -2 and 'nuc' of matrices from
    their singular values)."""
    j, real_norm = jnp(), R["linalg.norm"]
    nd = len(np.shape(parts(x)[0]))
    axes = tuple(range(nd)) if axis is None else (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    matrix = len(axes) == 2 and (axis is not None or nd == 2)
    if ord is None or (ord == "fro" and matrix) or (ord == 2 and not matrix):
        return j.sqrt(j.sum(_abs2(x), axis=axes if axis is not None else None, keepdims=keepdims))
    if matrix and ord in (2, -2, "nuc"):
        re, im = parts(x)
        z = make(*(j.moveaxis(p, axes, (-2, -1)) for p in (re, j.zeros_like(re) if im is None else im)))
        s = _decomp.svd(z, compute_uv=False)
        out = j.sum(s, axis=-1) if ord == "nuc" else s[..., 0] if ord == 2 else s[..., -1]
        return j.expand_dims(out, tuple(sorted(a % nd for a in axes))) if keepdims else out
    return real_norm(j.abs(x), ord, axis, keepdims)


def _inv(a, check=False):
    n = np.shape(parts(a)[0])[-1]
    m = R["linalg.inv"](_embedding(a))
    return make(m[..., :n, :n], m[..., n:, :n])


def _solve(a, b, check=False):
    j = jnp()
    n = np.shape(parts(a)[0])[-1]
    br, bi = parts(b)
    bi = j.zeros_like(br) if bi is None else bi
    vector = len(np.shape(br)) == 1
    rhs = j.concatenate([br, bi], axis=-1 if vector else -2)
    u = R["linalg.solve"](_embedding(a), rhs)
    return make(u[..., :n], u[..., n:]) if vector else make(u[..., :n, :], u[..., n:, :])


def _pivots(a):
    """The pivots of Gaussian elimination with partial pivoting (by modulus) of the complex
    matrices `a` (..., n, n), and the sign of the row permutation (+1 or -1, real)."""
    j = jnp()
    z, pivots, sign = make(*parts(a)), [], 1.0
    if type(z) is not Complex:
        z = Complex(*parts(z))
    n = z.shape[-1]
    for k in range(n):
        m = n - k
        p = j.argmax(_abs2(z[..., :, 0]), axis=-1)
        e = j.one_hot(p, m) if m > 1 else j.ones(np.shape(p) + (1,))
        swap = (np.eye(m)[0] - e)[..., :, None]   # rows 0 and p exchanged (nothing where p == 0)
        row_p = (e[..., :, None] * z).sum(axis=-2)
        z = z + swap * (row_p - z[..., 0, :])[..., None, :]
        sign = sign * j.where(p == 0, 1.0, -1.0)
        pivot = z[..., 0, 0]
        pivots.append(pivot)
        if k < n - 1:
            factors = z[..., 1:, 0] / pivot[..., None]
            z = z[..., 1:, 1:] - factors[..., :, None] * z[..., 0, 1:][..., None, :]
    return pivots, sign


def _det(a):
    pivots, sign = _pivots(a)
    out = pivots[0] * sign
    for p in pivots[1:]:
        out = out * p
    return out


def _slogdet(a):
    j = jnp()
    pivots, sign = _pivots(a)
    logabs = sum(0.5 * j.log(_abs2(p)) for p in pivots)
    phase = make(sign, None)
    for p in pivots:
        phase = phase * (p / j.abs(p))
    return phase, logabs


def _cholesky(a, upper=False, *, symmetrize_input=True):
    """The lower Cholesky factor L (L L^H = Z) of the Hermitian positive-definite Z (of its
    Hermitian part (Z + Z^H) / 2, as JAX's), column by column."""
    j = jnp()
    z = make(*parts(a))
    if symmetrize_input:
        z = 0.5 * (z + j.conj(j.swapaxes(z, -1, -2)))
    n = z.shape[-1]
    columns = []
    for k in range(n):
        v = z[..., :, k]
        for i, col in enumerate(columns):
            v = v - col * j.conj(col[..., k:k + 1])
        d = j.sqrt(j.real(v[..., k:k + 1]))
        columns.append(v * (np.arange(n) >= k) / d)
    out = j.stack(columns, axis=-1)
    return j.conj(j.swapaxes(out, -1, -2)) if upper else out


def _refuse(name):
    def refuse(*args, **kwargs):
        raise UnsupportedError(f"jnp.linalg.{name} of a complex matrix in staged code is not provided (norm, inv, "
                               "solve, det, slogdet and cholesky are); work with the real embedding [[A, -B], [B, A]]")
    return refuse


_TABLE = {"norm": _norm, "inv": _inv, "solve": _solve, "det": _det, "slogdet": _slogdet, "cholesky": _cholesky,
          **{name: _refuse(name) for name in ("qr", "pinv",
                                              "lstsq", "matrix_power", "matrix_rank", "cond", "tensorsolve",
                                              "tensorinv")}}


# complex matrices (NumPy arrays too, for one phase convention) to these; real ones unchanged
_COMPLEX = {"eigh": _decomp.eigh, "eigvalsh": _decomp.eigvalsh, "svd": _decomp.svd}
_STAGED = {"eig": _decomp.eig, "eigvals": _decomp.eigvals}   # staged real matrices too: complex results


def _routed(real_fn, fn, take):
    """`fn` where `take(the matrix argument)`, else `real_fn`."""
    @functools.wraps(real_fn)
    def call(*args, **kwargs):
        a = args[0] if args else kwargs.get("a")
        return fn(*args, **kwargs) if take(a) else real_fn(*args, **kwargs)
    call.__complex__ = fn
    return call


def install(namespace):
    """Complex dispatchers in front of jitad.numpy.linalg's functions (its module globals)."""
    for name, fn in _TABLE.items():
        if name in namespace:
            R["linalg." + name] = namespace[name]
            namespace[name] = dispatcher(name, namespace[name], fn)
    for table, take in ((_COMPLEX, is_complex), (_STAGED, lambda a: isinstance(a, (Staged, Complex)))):
        for name, fn in table.items():
            R["linalg." + name] = namespace[name]
            namespace[name] = _routed(namespace[name], fn, take)
