"""`jitad.nn`: JAX's `jax.nn` activations, normalizations and attention, and its
`initializers`, on jitad's staged math (each function runs eagerly on NumPy values and
staged inside `jit`/`grad`):

>>> jitad.nn.relu6(np.array([-1.0, 3.0, 9.0]))
array([0., 3., 6.])
"""
import math

import numpy as np

from .. import numeric as N
from .. import numpy as jnp
from ..transforms.custom import softplus
from ..errors import ArgumentError, ShapeError
from ..numeric import relu, sigmoid
from ..staging import is_staged, result_dtype
from . import initializers  # noqa: F401

__all__ = ["celu", "dot_product_attention", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish",
           "hard_tanh", "identity", "initializers", "layer_norm", "leaky_relu", "log1mexp", "log_sigmoid",
           "log_softmax", "logmeanexp", "logsumexp", "mish", "one_hot", "relu", "relu6", "selu", "sigmoid",
           "silu", "soft_sign", "softmax", "softplus", "softsign", "sparse_plus", "sparse_sigmoid", "squareplus",
           "standardize", "swish", "tanh"]


def _float(x):
    return x if result_dtype(x) in ("f32", "f64") else N.convert(x, "f64")


# -- activations ----------------------------------------------------------------------

def identity(x):
    """x itself: `jitad.nn.identity(2.0) == 2.0`."""
    return x


def tanh(x):
    """The hyperbolic tangent: `jitad.nn.tanh(0.0) == 0.0`."""
    return N.tanh(_float(x))


def relu6(x):
    """min(max(x, 0), 6) (gradient 0 at both kinks, as JAX): `jitad.nn.relu6(7.0) == 6.0`."""
    x = _float(x)
    return N.where(((x > 0) & (x < 6)) | (x != x), x, N.where(x >= 6, 6.0, 0.0))


def hard_tanh(x):
    """x clipped to [-1, 1]: `jitad.nn.hard_tanh(2.0) == 1.0`."""
    x = _float(x)
    return N.where(x > 1, 1.0, N.where(x < -1, -1.0, x))


def hard_sigmoid(x):
    """relu6(x + 3) / 6: `jitad.nn.hard_sigmoid(0.0) == 0.5`."""
    return relu6(_float(x) + 3.0) / 6.0


def hard_silu(x):
    """x * hard_sigmoid(x): `jitad.nn.hard_silu(3.0) == 3.0`."""
    x = _float(x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def gelu(x, approximate=True):
    """x * Phi(x), in its tanh form (JAX's default) or exactly through erf
    (`approximate=False`): `jitad.nn.gelu(0.0) == 0.0`."""
    x = _float(x)
    if not approximate:
        return 0.5 * x * (1.0 + N.erf(x * (1.0 / math.sqrt(2.0))))
    return 0.5 * x * (1.0 + N.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * (x * x * x))))


def silu(x):
    """x * sigmoid(x): `jitad.nn.silu(0.0) == 0.0`."""
    x = _float(x)
    return x * N.sigmoid(x)


swish = silu


def glu(x, axis=-1):
    """The first half of x along `axis` gated by the sigmoid of the second half:
    `jitad.nn.glu(np.array([1.0, 0.0]))` is `[0.5]`."""
    x = _float(x)
    shape = tuple(x.shape) if is_staged(x) else np.shape(x)
    axis = axis % len(shape)
    if shape[axis] % 2:
        raise ShapeError(f"`nn.glu`: axis {axis} of shape {shape} has odd length; it must split in two halves")
    a, b = jnp.split(x, 2, axis)
    return a * N.sigmoid(b)


def elu(x, alpha=1.0):
    """x for x > 0, alpha * (exp(x) - 1) below: `jitad.nn.elu(-1.0)`."""
    x = _float(x)
    pos = x > 0
    return N.where(pos, x, alpha * N.expm1(N.where(pos, 0.0, x)))


def celu(x, alpha=1.0):
    """max(x, 0) + alpha * min(exp(x / alpha) - 1, 0): `jitad.nn.celu(-1.0)`."""
    x = _float(x)
    return N.maximum(x, 0.0) + alpha * N.expm1(N.minimum(x, 0.0) / alpha)


def selu(x):
    """scale * elu(x, alpha) with the self-normalizing constants: `jitad.nn.selu(1.0)`."""
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    return scale * elu(x, alpha)


def leaky_relu(x, negative_slope=0.01):
    """x for x >= 0, negative_slope * x below: `jitad.nn.leaky_relu(-1.0) == -0.01`."""
    x = _float(x)
    return N.where(x >= 0, x, negative_slope * x)


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x), stable for large |x|: `jitad.nn.log_sigmoid(0.0) == -log(2)`."""
    return -softplus(-_float(x))


def soft_sign(x):
    """x / (1 + |x|): `jitad.nn.soft_sign(1.0) == 0.5`."""
    x = _float(x)
    return x / (1.0 + N.abs(x))


softsign = soft_sign


def sparse_plus(x):
    """0 below -1, (x + 1)**2 / 4 on [-1, 1], x above: `jitad.nn.sparse_plus(0.0) == 0.25`."""
    x = _float(x)
    return N.where(x <= -1.0, 0.0, N.where(x >= 1.0, x, (x + 1.0) ** 2 / 4.0))


def sparse_sigmoid(x):
    """0 below -1, (x + 1) / 2 on [-1, 1], 1 above (the derivative of `sparse_plus`)."""
    x = _float(x)
    return 0.5 * N.minimum(N.maximum(x + 1.0, 0.0), 2.0)


def squareplus(x, b=4):
    """(x + sqrt(x**2 + b)) / 2: `jitad.nn.squareplus(0.0) == 1.0`."""
    x = _float(x)
    return (x + N.sqrt(x * x + b)) / 2.0


def mish(x):
    """x * tanh(softplus(x)): `jitad.nn.mish(0.0) == 0.0`."""
    x = _float(x)
    return x * N.tanh(softplus(x))


def log1mexp(x):
    """log(1 - exp(-x)) for x > 0, accurate near 0 and for large x: `jitad.nn.log1mexp(np.log(2.0))`."""
    x = _float(x)
    near = x < math.log(2.0)
    return N.where(near, N.log(-N.expm1(-N.where(near, x, 1.0))), N.log1p(-N.exp(-N.where(near, 1.0, x))))


# -- normalizations over an axis ----------------------------------------------------

def _axes(x, axis):
    shape = tuple(x.shape) if is_staged(x) else np.shape(x)
    if axis is None:
        return tuple(range(len(shape)))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(sorted(a % len(shape) for a in axes))


def _max_where(x, axes, where, keep_inf=False):
    """The shift of the softmax family: the line's max, 0 where it is infinite (an all -inf
    or masked line). `keep_inf`: a +inf max is kept, so that line is NaN (inf - inf), as
    JAX's `softmax` and `log_softmax` give it (`logsumexp` gives +inf there)."""
    # the shift's gradient cancels exactly: stopped before the max, reverse mode emits no
    # VJP for it (after it, the max's tie counts ran on a zero cotangent every step)
    x = N.stop_gradient(x)
    masked = x if where is None else N.where(where, x, -np.inf)
    m = N.max(masked, axes, keepdims=True)
    return N.where((m > -np.inf) if keep_inf else (N.abs(m) < np.inf), m, 0.0)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """log(sum(b * exp(a))) over `axis` (all axes by default) without overflow; with
    `return_sign=True` also the sign of the sum (a negative `b` may make it negative), else
    a negative sum gives NaN; entries outside `where` count as absent:
    `jitad.nn.logsumexp(np.log([1.0, 2.0]))` is `log(3)`."""
    a = _float(a)
    axes = _axes(a, axis)
    if b is not None:
        a, b = jnp.broadcast_arrays(a, _float(b)) if not is_staged(a) and not is_staged(b) else (a, b)
        a = a + N.zeros_like(b) if is_staged(b) else a
    shift = _max_where(a, axes, where)
    terms = N.exp(a - shift)
    if b is not None:
        terms = terms * b
    if where is not None:
        terms = N.where(where, terms, 0.0)
    total = N.sum(terms, axes, keepdims=True)
    sign = jnp.sign(total)
    out = N.log(N.abs(total)) + shift if return_sign else N.log(total) + shift
    if not keepdims:
        out = N.reshape(out, tuple(n for d, n in enumerate(out.shape if is_staged(out) else np.shape(out))
                                   if d not in axes))
        sign = N.reshape(sign, out.shape if is_staged(out) else np.shape(out))
    return (out, sign) if return_sign else out


def logmeanexp(x, axis=None, where=None, keepdims=False):
    """log(mean(exp(x))) over `axis`, entries outside `where` left out of both the sum and
    the count: `jitad.nn.logmeanexp(np.log([1.0, 3.0]))` is `log(2)`."""
    x = _float(x)
    axes = _axes(x, axis)
    shape = tuple(x.shape) if is_staged(x) else np.shape(x)
    count = math.prod(shape[a] for a in axes) if where is None else \
        N.sum(N.convert(N.broadcast_to(where, shape), result_dtype(x)), axes, keepdims=keepdims)
    return logsumexp(x, axis, keepdims=keepdims, where=where) - N.log(count)


def softmax(x, axis=-1, where=None):
    """exp(x) / sum(exp(x)) over `axis`, without overflow; entries outside `where` are 0
    and left out of the sum; a line holding +inf is NaN, as JAX's:
    `jitad.nn.softmax(np.zeros(4))` is 0.25 each."""
    x = _float(x)
    axes = _axes(x, axis)
    shift = _max_where(x, axes, where, keep_inf=True)
    e = N.exp((x if where is None else N.where(where, x, -np.inf)) - shift)
    out = e / N.sum(e, axes, keepdims=True)
    return out if where is None else N.where(where, out, 0.0)


def log_softmax(x, axis=-1, where=None):
    """x - logsumexp(x) over `axis`; entries outside `where` are -inf; a line holding +inf
    is NaN, as JAX's: `jitad.nn.log_softmax(np.zeros(2))` is log(0.5) each."""
    x = _float(x)
    axes = _axes(x, axis)
    shifted = x - _max_where(x, axes, where, keep_inf=True)
    e = N.exp(shifted if where is None else N.where(where, shifted, -np.inf))
    out = shifted - N.log(N.sum(e, axes, keepdims=True))
    return out if where is None else N.where(where, out, -np.inf)


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *, algorithm="fast"):
    """(x - mean) / sqrt(variance + epsilon) over `axis` (the mean and variance computed
    there, over `where`, unless given): `jitad.nn.standardize(np.array([1.0, 3.0]))` is about [-1, 1]."""
    x = _float(x)
    axes = _axes(x, axis)
    if algorithm not in ("fast", "safe"):
        raise ArgumentError(f"`nn.standardize`: algorithm={algorithm!r}; give 'fast' or 'safe'")
    shape = tuple(x.shape) if is_staged(x) else np.shape(x)
    if where is None:
        count = math.prod(shape[a] for a in axes)
        avg = lambda v: N.sum(v, axes, keepdims=True) / count
    else:
        w = N.convert(N.broadcast_to(where, shape), result_dtype(x))
        count = N.sum(w, axes, keepdims=True)
        avg = lambda v: N.sum(N.where(where, v, 0.0), axes, keepdims=True) / count
    if mean is None:
        mean = avg(x)
    if variance is None:
        variance = avg(N.square(x - mean)) if algorithm == "safe" else \
            N.maximum(avg(N.square(x)) - N.square(mean), 0.0)
    return (x - mean) * (1.0 / N.sqrt(variance + epsilon))


def layer_norm(x, scale=None, bias=None, axis=-1, eps=1e-5):
    """(x - mean) / sqrt(var + eps) over `axis`, then `* scale + bias`:
    `jitad.nn.layer_norm(h, gamma, beta)`."""
    y = standardize(x, axis, epsilon=eps, algorithm="safe")
    if scale is not None:
        y = y * scale
    return y if bias is None else y + bias


def one_hot(x, num_classes, *, dtype=None, axis=-1):
    """1.0 where the new axis `axis` equals the entry of the int array `x`, else 0.0
    (out-of-range entries give all zeros): `jitad.nn.one_hot(np.array([0, 2]), 3)`."""
    shape = tuple(x.shape) if is_staged(x) else np.shape(x)
    axis = axis % (len(shape) + 1)
    dtype = np.dtype(np.float64 if dtype is None else dtype)
    if is_staged(x) and x.ir_dtype in ("i32", "i64") and axis == len(shape) and dtype in (np.float32, np.float64) \
            and isinstance(num_classes, (int, np.integer)) and num_classes >= 1:
        return N.one_hot(x, num_classes, "f32" if dtype == np.float32 else "f64")   # (a product with it: rows)
    classes = np.arange(num_classes).reshape((num_classes,) + (1,) * (len(shape) - axis))
    hit = N.reshape(x, shape[:axis] + (1,) + shape[axis:]) == classes
    if not is_staged(hit):
        return jnp.astype(hit, dtype)   # (any NumPy dtype, as JAX gives it)
    name = "bool" if dtype == np.bool_ else "i64" if dtype.kind in "iu" else "f32" if dtype == np.float32 else "f64"
    return N.convert(hit, name)


# -- attention ------------------------------------------------------------------------

def _attention_masks(logits, mask, is_causal, q_lengths, kv_lengths, window):
    """The logits with masked positions at a large negative value (JAX's choice, so a row
    with nothing left averages its values evenly)."""
    b, n, t, s = logits.shape
    keep = None

    def both(a, c):
        return c if a is None else a & c
    if mask is not None:
        keep = both(keep, N.broadcast_to(mask, (b, n, t, s)))
    q, k = np.arange(t).reshape(t, 1), np.arange(s).reshape(1, s)
    if is_causal:
        keep = both(keep, np.broadcast_to(q >= k, (b, n, t, s)))
    if window is not None:
        left, right = (window, window) if isinstance(window, int) else window
        keep = both(keep, np.broadcast_to((q <= k + left) & (q >= k - right), (b, n, t, s)))
    if q_lengths is not None:
        keep = both(keep, N.reshape(np.arange(t).reshape(1, t, 1) < N.reshape(q_lengths, (b, 1, 1)), (b, 1, t, 1)))
    if kv_lengths is not None:
        keep = both(keep, N.reshape(np.arange(s).reshape(1, 1, s) < N.reshape(kv_lengths, (b, 1, 1)), (b, 1, 1, s)))
    if keep is None:
        return logits
    big = -0.7 * float(np.finfo(np.float32).max)
    return N.where(N.broadcast_to(keep, (b, n, t, s)), logits, big)


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None, is_causal=False,
                          query_seq_lengths=None, key_value_seq_lengths=None, local_window_size=None,
                          implementation=None, return_residual=False):
    """softmax(q k^T * scale + bias, masked) v over arrays laid out (batch, length, heads,
    head size) (or without the batch axis); `key`/`value` may have fewer heads that query
    head groups share. `scale` defaults to 1/sqrt(head size); `mask` (bool) keeps
    positions, `is_causal` keeps the lower triangle, `local_window_size` a band:
    `jitad.nn.dot_product_attention(q, k, v, is_causal=True)`. The softmax runs in the
    operands' precision (JAX rounds it through float32)."""
    if implementation not in (None, "xla"):
        raise ArgumentError(f"`nn.dot_product_attention`: implementation={implementation!r}; jitad runs "
                            "its own ('xla' or None)")
    q, k, v = _float(query), _float(key), _float(value)
    batched = len(q.shape if is_staged(q) else np.shape(q)) == 4
    if not batched:
        q, k, v = (N.reshape(a, (1,) + tuple(a.shape if is_staged(a) else np.shape(a))) for a in (q, k, v))
        bias = None if bias is None else N.reshape(bias, (1,) + tuple(bias.shape if is_staged(bias) else np.shape(bias)))
        mask = None if mask is None else N.reshape(mask, (1,) + tuple(mask.shape if is_staged(mask) else np.shape(mask)))
    b, t, n, h = q.shape if is_staged(q) else np.shape(q)
    _, s, kh, _ = k.shape if is_staged(k) else np.shape(k)
    if n % kh:
        raise ShapeError(f"`nn.dot_product_attention`: {n} query heads do not split into groups over {kh} key heads")
    g = n // kh
    qg = N.reshape(q, (b, t, kh, g, h))
    logits = N.reshape(jnp.einsum("btkgh,bskh->bkgts", qg, k), (b, n, t, s))
    logits = logits * (1.0 / math.sqrt(h) if scale is None else scale)
    if bias is not None:
        logits = logits + bias
    logits = _attention_masks(logits, mask, is_causal, query_seq_lengths, key_value_seq_lengths, local_window_size)
    probs = softmax(logits, -1)
    out = jnp.einsum("bkgts,bskh->btkgh", N.reshape(probs, (b, kh, g, t, s)), v)
    out = N.reshape(out, (b, t, n, h))
    if query_seq_lengths is not None:
        out = out * N.convert(N.reshape(np.arange(t).reshape(1, t) < N.reshape(query_seq_lengths, (b, 1)),
                                        (b, t, 1, 1)), result_dtype(out))
    if not batched:
        out = N.reshape(out, (t, n, h))
    if return_residual:
        lse = N.transpose(logsumexp(logits, -1), (0, 2, 1))
        return out, N.stop_gradient(lse if batched else N.reshape(lse, (t, n)))
    return out


def _declined(name, why):
    def fn(*args, **kwargs):
        raise ArgumentError(f"`nn.{name}`: {why}")
    fn.__name__, fn.__doc__ = name, f"Declined: {why}"
    return fn


def scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=np.float32):
    """The block-scaled product of lhs (B, M, K) and rhs (B, N, K) contracting K: each
    operand times its scales repeated over blocks of K // scales.shape[-1] entries, as
    (B, M, N) in `preferred_element_type` (float32 by default). jitad has no 8-bit floats:
    the operands and scales are ordinary floats."""
    from ..lax import convert_element_type
    def scaled(x, scales, who):
        k, kb = x.shape[-1], scales.shape[-1]
        if kb == 0 or k % kb:
            raise ShapeError(f"`nn.scaled_matmul`: {who} has {k} entries along K, not a multiple of its "
                             f"{kb} scales")
        return _float(x) * jnp.repeat(_float(scales), k // kb, axis=-1)
    a, b = (jnp.asarray(v) if not is_staged(v) else v for v in (lhs, rhs))
    sa, sb = (jnp.asarray(v) if not is_staged(v) else v for v in (lhs_scales, rhs_scales))
    out = jnp.einsum("bmk,bnk->bmn", scaled(a, sa, "lhs"), scaled(b, sb, "rhs"))
    return convert_element_type(out, preferred_element_type)


def scaled_dot_general(lhs, rhs, dimension_numbers, preferred_element_type=np.float32, configs=None,
                       implementation=None):
    """`lax.dot_general` returned as `preferred_element_type` (float32 by default). The
    block-scaled quantization `configs` describe (8-bit and 4-bit floats) is not available
    in jitad: give `configs=None`."""
    from ..lax import convert_element_type, dot_general
    if configs is not None or implementation not in (None, "xla"):
        raise ArgumentError("`nn.scaled_dot_general`: block-scaled quantization (configs=) needs 8-bit or 4-bit "
                            "floats, which jitad does not have; call it with configs=None")
    return convert_element_type(dot_general(lhs, rhs, dimension_numbers), preferred_element_type)


get_scaled_dot_general_config = _declined("get_scaled_dot_general_config", "block-scale configurations name "
                                          "8-bit and 4-bit float types, which jitad does not have; pass "
                                          "configs=None to `scaled_dot_general`")
