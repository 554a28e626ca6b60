"""NumPy's polynomial functions on coefficient arrays (highest power first), as
`jax.numpy` has them: sums, products, division, derivatives, integrals, evaluation and
least-squares fits, composed from jitad's array operations (differentiable)."""
import numpy as np

from .. import numeric as N
from ..errors import ArgumentError, ShapeError
from ..numpy_api import _float
from ._common import jnp as _jnp, any_staged, wrap

__all__ = ["poly", "polyadd", "polysub", "polymul", "polydiv", "polyder", "polyint", "polyval", "polyfit", "roots"]


def _coeffs(p, who):
    jnp = _jnp()
    p = jnp.atleast_1d(jnp.asarray(p))
    if jnp.ndim(p) != 1:
        raise ShapeError(f"`jnp.{who}`: coefficients must be 1-D, got shape {jnp.shape(p)}")
    return p


def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with the given roots (1-D; a square matrix
    gives its characteristic polynomial, plain values only): `jnp.poly([1.0, 2.0])` is `[1, -3, 2]`."""
    jnp = _jnp()
    if not any_staged(seq_of_zeros):
        return wrap(np.asarray(np.poly(seq_of_zeros)).real)
    z = jnp.asarray(seq_of_zeros)
    if jnp.ndim(z) != 1:
        raise ShapeError("`jnp.poly` of a staged matrix: its eigenvalues may be complex; pass the roots (1-D)")
    c = jnp.ones((1,), jnp.result_type(_float(z)))
    for k in range(jnp.shape(z)[0]):
        c = jnp.concatenate([c, jnp.zeros((1,))]) - z[k] * jnp.concatenate([jnp.zeros((1,)), c])
    return c


def _aligned(a1, a2, who):
    jnp = _jnp()
    a1, a2 = _coeffs(a1, who), _coeffs(a2, who)
    n = max(jnp.shape(a1)[0], jnp.shape(a2)[0])
    return (jnp.pad(a1, (n - jnp.shape(a1)[0], 0)), jnp.pad(a2, (n - jnp.shape(a2)[0], 0)))


def polyadd(a1, a2):
    """The sum of two polynomials: `jnp.polyadd([1, 2], [1])` is `[1, 3]`."""
    a, b = _aligned(a1, a2, "polyadd")
    return a + b


def polysub(a1, a2):
    """The difference of two polynomials: `jnp.polysub([1, 2], [1])` is `[1, 1]`."""
    a, b = _aligned(a1, a2, "polysub")
    return a - b


def polymul(a1, a2, *, trim_leading_zeros=False):
    """The product of two polynomials: `jnp.polymul([1, 1], [1, -1])` is `[1, 0, -1]`."""
    jnp = _jnp()
    a, b = _coeffs(a1, "polymul"), _coeffs(a2, "polymul")
    if jnp.shape(a)[0] == 0 or jnp.shape(b)[0] == 0:
        return jnp.zeros((0,), jnp.result_type(a, b))
    return jnp.convolve(a, b)


def polydiv(u, v, *, trim_leading_zeros=False):
    """`(quotient, remainder)` of polynomial division (the remainder keeps `u`'s length, as
    JAX's): `jnp.polydiv([1.0, 0.0, -1.0], [1.0, 1.0])`."""
    jnp = _jnp()
    u, v = _float(_coeffs(u, "polydiv")), _float(_coeffs(v, "polydiv"))
    n, m = jnp.shape(u)[0], jnp.shape(v)[0]
    if m == 0:
        raise ArgumentError("`jnp.polydiv` by an empty polynomial")
    q = []
    r = u
    for k in range(max(n - m + 1, 0)):
        d = r[k] / v[0]
        q.append(d)
        r = r - jnp.concatenate([jnp.zeros((k,)), d * v, jnp.zeros((n - m - k,))])
    q = jnp.stack(q) if q else jnp.zeros((1,))
    if trim_leading_zeros:
        if any_staged(r):
            raise N.data_dependent_shape("`jnp.polydiv` with trim_leading_zeros=True")
        r = np.trim_zeros(np.asarray(r), "f")
        r = wrap(r if len(r) else np.zeros(1))
    return q, r


def polyder(p, m=1):
    """The `m`-th derivative of a polynomial: `jnp.polyder([1, 1, 1])` is `[2, 1]`."""
    jnp = _jnp()
    if m < 0:
        raise ArgumentError(f"`jnp.polyder`: m={m}; the order must be non-negative")
    p = _coeffs(p, "polyder")
    for _ in range(m):
        n = jnp.shape(p)[0]
        p = p[:-1] * np.arange(n - 1, 0, -1) if n > 1 else jnp.zeros((0,), jnp.result_type(p))
    return p


def polyint(p, m=1, k=None):
    """The `m`-th antiderivative of a polynomial, integration constants `k` (zeros by
    default): `jnp.polyint([3.0, 2.0])` is `[1, 1, 0]`."""
    jnp = _jnp()
    if m < 0:
        raise ArgumentError(f"`jnp.polyint`: m={m}; the order must be non-negative")
    p = _float(_coeffs(p, "polyint"))
    ks = jnp.zeros((m,)) if k is None else jnp.broadcast_to(jnp.ravel(jnp.asarray(k)), (m,)) * 1.0
    for i in range(m):
        n = jnp.shape(p)[0]
        p = jnp.concatenate([p / np.arange(n, 0, -1), ks[i:i + 1]])
    return p


def polyval(p, x, *, unroll=16):
    """The polynomial `p` at `x` (Horner's scheme): `jnp.polyval([1, 0, -1], 3) == 8`."""
    jnp = _jnp()
    if not any_staged(p, x):
        return wrap(np.asarray(np.polyval(np.asarray(p), x)))
    p = _coeffs(p, "polyval")
    x = jnp.asarray(x)
    out = jnp.zeros_like(x * p[0]) if jnp.shape(p)[0] else jnp.zeros_like(x)
    for i in range(jnp.shape(p)[0]):
        out = out * x + p[i]
    return out


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """The least-squares polynomial of degree `deg` through the points `(x, y)` (`y` 1-D
    or one column per fit; `w` weights the residuals): `jnp.polyfit(x, y, 1)`."""
    jnp = _jnp()
    from .. import linalg
    if full or cov:
        raise ArgumentError("`jnp.polyfit`: full= and cov= are not supported; fit, then compute the "
                            "residuals with `jnp.polyval`")
    x, y = _float(jnp.asarray(x)), _float(jnp.asarray(y))
    if jnp.ndim(x) != 1 or jnp.ndim(y) not in (1, 2) or jnp.shape(y)[0] != jnp.shape(x)[0]:
        raise ShapeError(f"`jnp.polyfit`: x must be 1-D and y 1-D or 2-D of the same length, got "
                         f"{jnp.shape(x)} and {jnp.shape(y)}")
    order = deg + 1
    a = jnp.vander(x, order)
    if w is not None:
        w = _float(jnp.asarray(w))
        a = a * w[:, None]
        y = y * (w if jnp.ndim(y) == 1 else w[:, None])
    rcond = len(np.asarray(jnp.shape(x))) and (jnp.shape(x)[0] * np.finfo(np.float64).eps) if rcond is None else rcond
    scale = N.sqrt(jnp.sum(a * a, axis=0))
    c = linalg.lstsq(a / scale, y, rcond)[0]
    return (c.T / scale).T


def roots(p, *, strip_zeros=True):
    """The roots of a polynomial (complex where they are: plain values only, as staged
    code has no complex dtype): `jnp.roots([1.0, -3.0, 2.0])`."""
    if any_staged(p):
        raise ArgumentError("`jnp.roots` of staged coefficients: its roots may be complex, which staged code "
                            "does not have; call it on plain values")
    return wrap(np.roots(p))
