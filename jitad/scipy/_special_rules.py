"""The derivative rules `autograd.scipy.special` defines and exports, for code that builds on
them: the VJP and JVP of `logsumexp`, the VJP maker of the incomplete gamma functions in
their second argument, and the two array helpers they use. jitad's own functions need none
of these (it differentiates their staged code); they are ordinary functions of arrays.

>>> from jitad.scipy.special import make_grad_logsumexp
>>> x = np.array([0.0, np.log(3.0)])
>>> make_grad_logsumexp(np.log(4.0), x)(1.0).tolist()
[0.25, 0.75]
"""
import numpy as np

from .. import numeric as N
from .. import numpy_api as A
from ..extend import defjvp, defvjp, primitive  # noqa: F401  (autograd's module exports them)


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    return tuple(a % ndim for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))


def repeat_to_match_shape(g, shape, dtype, axis, keepdims):
    """`g`, the result of a reduction of an array of `shape` over `axis`, broadcast back to
    that shape, and how many elements each of its values stood for: `(g_full, count)`."""
    shape = tuple(shape)
    axes = _axes(axis, len(shape))
    if not keepdims:
        for a in sorted(axes):
            g = A.expand_dims(g, a)
    count = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    return N.broadcast_to(g if N.is_staged(g) else np.asarray(g), shape), count


def unbroadcast_f(target, f):
    """`g -> f(g)` summed down to the shape of `target` (what NumPy's broadcasting spread)."""
    shape = tuple(N._shape(target))

    def summed(g):
        out = f(g)
        extra = len(N._shape(out)) - len(shape)
        if extra > 0:
            out = N.sum(out, axis=tuple(range(extra)))
        kept = tuple(i for i, n in enumerate(shape) if n == 1 and N._shape(out)[i] != 1)
        return N.sum(out, axis=kept, keepdims=True) if kept else out
    return summed


def make_grad_logsumexp(ans, x, axis=None, b=1.0, keepdims=False):
    """The VJP maker of `logsumexp(x, axis, b, keepdims)`: `g -> g b exp(x - ans)`, g and ans
    broadcast back over the reduced axes."""
    shape, dtype = N._shape(x), None

    def vjp(g):
        g_full, _ = repeat_to_match_shape(g, shape, dtype, axis, keepdims)
        ans_full, _ = repeat_to_match_shape(ans, shape, dtype, axis, keepdims)
        return g_full * b * N.exp(x - ans_full)
    return vjp


def fwd_grad_logsumexp(g, ans, x, axis=None, b=1.0, keepdims=False):
    """The JVP of `logsumexp`: the sum over `axis` of g b exp(x - ans)."""
    ans_full, _ = repeat_to_match_shape(ans, N._shape(x), None, axis, keepdims)
    return N.sum(g * b * N.exp(x - ans_full), axis=axis, keepdims=keepdims)


def make_gammainc_vjp_arg1(sign):
    """The VJP maker of `gammainc` (sign 1) or `gammaincc` (sign -1) in x:
    `(ans, a, x) -> g -> sign g exp(-x) x**(a - 1) / Γ(a)`, summed to x's shape."""
    def gammainc_vjp_arg1(ans, a, x):
        coeffs = sign * N.exp(-x + (a - 1.0) * N.log(x) - N.lgamma(a))
        return unbroadcast_f(x, lambda g: g * coeffs)
    return gammainc_vjp_arg1
