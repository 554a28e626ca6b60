"""Activations and normalization for networks, as `jax.nn` names them."""
import math

from . import numeric as N
from .transforms.custom import softplus
from .numeric import logsumexp, log_softmax, one_hot, relu, sigmoid, softmax
from .numpy_api import _float, var

__all__ = ["gelu", "silu", "swish", "elu", "leaky_relu", "log_sigmoid", "softsign", "softplus", "relu",
           "sigmoid", "softmax", "log_softmax", "logsumexp", "layer_norm", "one_hot"]


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


def elu(x, alpha=1.0):
    """x for x > 0, alpha * (exp(x) - 1) below: `jitad.nn.elu(-1.0)`."""
    x = _float(x)
    pos = x > 0
    return N.where(pos, x, alpha * N.expm1(N.where(pos, 0.0, x)))


def leaky_relu(x, negative_slope=0.01):
    """x for x >= 0, negative_slope * x below: `jitad.nn.leaky_relu(-1.0) == -0.01`."""
    x = _float(x)
    return N.where(x >= 0, x, negative_slope * x)


def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x), stable for large |x|: `jitad.nn.log_sigmoid(0.0) == -log(2)`."""
    return -softplus(-_float(x))


def softsign(x):
    """x / (1 + |x|): `jitad.nn.softsign(1.0) == 0.5`."""
    x = _float(x)
    return x / (1.0 + N.abs(x))


def layer_norm(x, scale=None, bias=None, axis=-1, eps=1e-5):
    """(x - mean) / sqrt(var + eps) over `axis`, then `* scale + bias`:
    `jitad.nn.layer_norm(h, gamma, beta)`."""
    x = _float(x)
    d = x - N.mean(x, axis, keepdims=True)
    y = d / N.sqrt(var(x, axis, keepdims=True) + eps)
    if scale is not None:
        y = y * scale
    return y if bias is None else y + bias
