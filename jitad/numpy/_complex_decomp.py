"""Eigen- and singular value decompositions of complex matrices (`eigh`, `svd`) and `eig` of
general square matrices, in staged code.

`eigh` and `svd` come from the real embedding Z = A + iB -> [[A, -B], [B, A]]: its
eigenvalues (singular values) are Z's, each twice, and a real eigenvector (singular vector)
[p; q] of a pair is the complex one p + iq. The real embedding's own derivative is useless
here (each value is repeated, so its eigenvector derivatives divide by zero), so the
derivatives are the complex perturbation formulas, written in complex staged operations
as `custom_jvp` rules (forward and reverse mode, and again for higher orders). `eig` of a
general matrix calls NumPy's LAPACK routine from the compiled code (`pure_callback`), its
derivative the same way from the perturbation formula.

Phases: a complex eigenvector or singular vector is defined up to a factor e^{it}. `eigh`
makes the first component (`UPLO="U"`: the last) of each eigenvector real and
non-negative, `svd` the first component of each left singular vector, on plain arrays and
in staged code alike (NumPy makes the same component real, with either sign). `eig` keeps
NumPy's: unit vectors whose largest component is real.
"""
import numpy as np

from ..staging import Staged
from ..staging.complex import make, parts
from ._common import jnp
from ._complex import R


def _j():
    return jnp()


def _H(z):
    """The conjugate transpose of the last two axes."""
    j = _j()
    return j.conj(j.swapaxes(z, -1, -2))


def _cx(z):
    """`z` (complex or real, staged or not) as a `Complex` of staged-or-array parts."""
    re, im = parts(z)
    return make(re, _zeros(re) if im is None else im)


def _sg(z):
    """`z` without derivatives (each part's `stop_gradient`)."""
    from ..numeric import stop_gradient
    re, im = parts(z)
    return stop_gradient(re) if im is None else make(stop_gradient(re), stop_gradient(im))


def _typed(dtype, *values):
    """`values` (real or complex) with parts of the real dtype `dtype` (a complex64 input's
    results are complex64, as NumPy's)."""
    from .. import numeric as N

    def cast(p):
        if isinstance(p, Staged):
            return N.convert(p, "f32" if dtype == np.float32 else "f64")
        return np.asarray(p).astype(dtype)
    out = []
    for x in values:
        re, im = parts(x)
        out.append(cast(re) if im is None else make(cast(re), cast(im)))
    return tuple(out)


def _zeros(x):
    return R["zeros_like"](x) if isinstance(x, Staged) else np.zeros_like(np.asarray(x, dtype=float))


def _gaps(w):
    """F[..., i, j] = 1 / (w_j - w_i) off the diagonal, 0 on it."""
    eye = np.eye(w.shape[-1])
    return 1.0 / (w[..., None, :] - w[..., :, None] + eye) - eye


def _embedding(z, axes=(-2, -1)):
    """The real (2m, 2n) form [[A, -B], [B, A]] of the complex (m, n) matrices A + iB along
    `axes` (moved last)."""
    j = _j()
    re, im = parts(z)
    im = j.zeros_like(re) if im is None else im
    re, im = (j.moveaxis(p, axes, (-2, -1)) for p in (re, im))
    return j.concatenate([j.concatenate([re, -im], axis=-1), j.concatenate([im, re], axis=-1)], axis=-2)


def _phase_fixed(v, row, others=()):
    """`v` with each column multiplied by the phase that makes its entry in `row` real and
    non-negative; the arrays `others` (rows of V^H) get the conjugate phase on their rows."""
    j = _j()
    pivot = v[..., row, :]
    size = j.sqrt(j.real(pivot) ** 2 + j.imag(pivot) ** 2)
    phase = j.conj(pivot) / j.where(size == 0.0, 1.0, size)
    phase = phase + j.where(size == 0.0, 1.0, 0.0)
    return (v * phase[..., None, :],) + tuple(o * j.conj(phase)[..., :, None] for o in others)


# -- Hermitian eigendecomposition -------------------------------------------------------------

def _heigh_values(re, im):
    """Eigenvalues and eigenvector parts of the Hermitian re + i im (some phase each)."""
    n = re.shape[-1]
    w, v = R["linalg.eigh"](_embedding(make(re, im)), symmetrize_input=False)
    return w[..., ::2], v[..., :n, ::2], v[..., n:, ::2]


def _heigh_jvp(primals, tangents):
    j = _j()
    w, vr, vi = _heigh(*primals)
    v = make(vr, vi)
    m = _H(v) @ (make(*tangents) @ v)
    dw = j.real(j.diagonal(m, axis1=-2, axis2=-1))
    dv = v @ (m * _gaps(w))
    return (w, vr, vi), (dw, j.real(dv), j.imag(dv))


def _heigh_rule():
    from ..transforms.custom import custom_jvp
    rule = custom_jvp(_heigh_values)
    rule.defjvp(_heigh_jvp)
    return rule


_RULES = {}


def _heigh(re, im):
    if "eigh" not in _RULES:
        _RULES["eigh"] = _heigh_rule()
    return _RULES["eigh"](re, im)


def eigh(a, UPLO="L", symmetrize_input=True):
    """Eigenvalues (ascending, real) and eigenvectors of a Hermitian complex matrix (of its
    Hermitian part (a + a^H) / 2 with `symmetrize_input`, as JAX's; else of the triangle
    `UPLO` names)."""
    j = _j()
    z = _cx(a)
    z = 0.5 * (z + _H(z)) if symmetrize_input else _from_triangle(z, UPLO)
    re, im = parts(z)
    if isinstance(re, Staged):
        w, vr, vi = _heigh(re, im)
        v = make(vr, vi)
    else:
        w, v = np.linalg.eigh(re + 1j * im)
        v = make(np.real(v), np.imag(v))
    v, = _phase_fixed(v, 0 if UPLO == "L" else -1)
    w, v = _typed(re.dtype, w, v)
    return (w if isinstance(w, Staged) else j.asarray(w)), v


def _from_triangle(z, UPLO):
    """The Hermitian matrix whose triangle `UPLO` is z's (the diagonal's real part)."""
    j = _j()
    tri = j.tril if UPLO == "L" else j.triu
    low = tri(z, -1 if UPLO == "L" else 1)
    return low + _H(low) + j.real(j.diagonal(z, axis1=-2, axis2=-1))[..., None] * np.eye(z.shape[-1])


def eigvalsh(a, UPLO="L", symmetrize_input=True):
    """The eigenvalues of a Hermitian complex matrix (see `eigh`)."""
    return eigh(a, UPLO, symmetrize_input)[0]


# -- singular value decomposition -------------------------------------------------------------

def _svd_values(re, im):
    """The reduced SVD's parts (u re, u im, s, vh re, vh im) of re + i im (some phase each)."""
    m, n = re.shape[-2:]
    u, s, vh = R["linalg.svd"](_embedding(make(re, im)), full_matrices=False)
    return u[..., :m, ::2], u[..., m:, ::2], s[..., ::2], vh[..., ::2, :n], -vh[..., ::2, n:]


def _svd_jvp(primals, tangents):
    """The reduced SVD's tangents: with dP = U^H dA V, ds = Re diag(dP); U^H dU and V^H dV
    off the diagonal from (s_j^2 - s_i^2) X_ij = (dP S + S dP^H)_ij and (S dP + dP^H S)_ij,
    U^H dU's diagonal i Im(dP_ii) / s_i (V^H dV's 0), and the parts of dA outside the
    spans of U and V through the columns the reduced factors leave out."""
    j = _j()
    ur, ui, s, vr, vi = out = _svd(*primals)
    u, v, da = make(ur, ui), _H(make(vr, vi)), make(*tangents)
    m, n = primals[0].shape[-2:]
    dp = _H(u) @ (da @ v)
    ds = j.real(j.diagonal(dp, axis1=-2, axis2=-1))
    f, si, inv = _gaps(s * s), s[..., None, :], 1.0 / s
    inner = make(0.0, j.imag(j.diagonal(dp, axis1=-2, axis2=-1)) * inv)
    du = u @ (f * (dp * si + _H(dp * si)) + inner[..., None, :] * np.eye(s.shape[-1]))
    dv = v @ (f * (j.swapaxes(si, -1, -2) * dp + _H(j.swapaxes(si, -1, -2) * dp)))
    if m > n:
        dav = da @ v
        du = du + (dav - u @ (_H(u) @ dav)) * inv[..., None, :]
    if n > m:
        dau = _H(da) @ u
        dv = dv + (dau - v @ (_H(v) @ dau)) * inv[..., None, :]
    dvh = _H(dv)
    return out, (j.real(du), j.imag(du), ds, j.real(dvh), j.imag(dvh))


def _svd(re, im):
    if "svd" not in _RULES:
        from ..transforms.custom import custom_jvp
        _RULES["svd"] = custom_jvp(_svd_values)
        _RULES["svd"].defjvp(_svd_jvp)
    return _RULES["svd"](re, im)


def svd(a, full_matrices=True, compute_uv=True):
    """`u, s, vh` of a complex matrix (NumPy's convention, `s` descending and real); the
    full factors of a matrix that is not square are plain arrays only."""
    j = _j()
    re, im = parts(_cx(a))
    m, n = re.shape[-2:]
    if not isinstance(re, Staged):
        out = np.linalg.svd(re + 1j * im, full_matrices=full_matrices, compute_uv=compute_uv)
        if not compute_uv:
            return j.asarray(out)
        u, vh = (make(np.real(x), np.imag(x)) for x in (out[0], out[2]))
        u, vh = _typed(re.dtype, *_phase_fixed(u, 0, (vh,)))
        return u, j.asarray(out[1]), vh
    if compute_uv and full_matrices and m != n:
        from ..errors import UnsupportedError
        raise UnsupportedError("jnp.linalg.svd of a complex staged matrix that is not square with "
                               "full_matrices=True is not provided; pass full_matrices=False (the reduced factors)")
    ur, ui, s, vr, vi = _svd(re, im)
    if not compute_uv:
        return s
    u, vh = _typed(re.dtype, *_phase_fixed(make(ur, ui), 0, (make(vr, vi),)))
    return u, s, vh


def svdvals(a):
    """The singular values (descending) of complex matrices."""
    return svd(a, full_matrices=False, compute_uv=False)


# -- eigendecomposition of a general square matrix --------------------------------------------

def _eig_host(re, im=None):
    """NumPy's `eig` of re + i im (of the real `re`, LAPACK's real routine, without `im`),
    packed: [..., 0 | 1 (real | imaginary part), 0 (values) or 1 + row (vectors), column]."""
    w, v = np.linalg.eig(np.asarray(re) if im is None else np.asarray(re) + 1j * np.asarray(im))
    packed = np.concatenate([w[..., None, :], v], axis=-2)
    return np.stack([packed.real, packed.imag], axis=-3)


_EIG_KEY = "jitad.numpy.linalg.eig"   # NumPy's eig, called back from compiled code (as `pure_callback`)


def _eig_values(*matrix):
    """(w re, w im, v re, v im) of the matrix with parts `matrix` (one part: a real matrix)."""
    from .. import numeric as N
    from ..ir.ops import Op
    from ..primitives.host import HOST_FUNCTIONS
    n = matrix[0].shape[-1]
    shape = tuple(matrix[0].shape[:-2]) + (2, n + 1, n)
    HOST_FUNCTIONS.setdefault(_EIG_KEY, lambda *values: [_eig_host(*values)])
    p = N.bind(Op.HOST_CALL, *matrix, call=_EIG_KEY, index=0, vmap_method="broadcast_all", out=("f64", shape))
    return p[..., 0, 0, :], p[..., 1, 0, :], p[..., 0, 1:, :], p[..., 1, 1:, :]


def _eig_jvp(primals, tangents):
    """dw = diag(V^-1 dA V); dV = V (F o V^-1 dA V), F_ij = 1 / (w_j - w_i) (0 on the
    diagonal): no change along each eigenvector itself (`eig` rescales afterwards)."""
    j = _j()
    wr, wi, vr, vi = out = _eig(*primals)
    w, v = make(wr, wi), make(vr, vi)
    m = j.linalg.solve(v, make(*tangents, *[None] * (2 - len(tangents))) @ v)
    dw = j.diagonal(m, axis1=-2, axis2=-1)
    dv = v @ (m * _gaps(w))
    return out, (j.real(dw), j.imag(dw), j.real(dv), j.imag(dv))


def _eig(*matrix):
    name = f"eig{len(matrix)}"
    if name not in _RULES:
        from ..transforms.custom import custom_jvp
        _RULES[name] = custom_jvp(_eig_values)
        _RULES[name].defjvp(_eig_jvp)
    return _RULES[name](*matrix)


def _normalized(v):
    """`v` itself, differentiated as NumPy's normalization: unit columns whose largest entry
    is real (the factor that would restore that is 1 at `v`; its derivative is kept)."""
    j = _j()
    size2 = j.real(v) ** 2 + j.imag(v) ** 2
    pick = j.swapaxes(j.one_hot(j.argmax(_sg(size2), axis=-2), v.shape[-2]), -1, -2)
    top = j.sum(v * pick, axis=-2)
    top_size = j.sqrt(j.sum(size2 * pick, axis=-2))
    factor = j.conj(top) / top_size * _sg(top / top_size)
    factor = factor * (_sg(j.sqrt(j.sum(size2, axis=-2))) / j.sqrt(j.sum(size2, axis=-2)))
    return v * (1.0 + (factor - _sg(factor)))[..., None, :]


def eig(a):
    """Eigenvalues and right eigenvectors (unit columns, the largest entry real, NumPy's) of a
    general square matrix in staged code: complex values from NumPy's LAPACK routine, called
    back from the compiled code, and their derivatives."""
    re, im = parts(a)
    if not isinstance(re, Staged) and im is not None:
        re, im = parts(_cx(a))
    wr, wi, vr, vi = _eig(re) if im is None else _eig(re, im)
    return _typed(re.dtype, make(wr, wi), _normalized(make(vr, vi)))


def eigvals(a):
    """The eigenvalues of a general square matrix in staged code (see `eig`)."""
    return eig(a)[0]
