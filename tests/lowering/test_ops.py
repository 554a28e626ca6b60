"""Every tensor op, table-driven.

Each `OpSpec` is one formula `fn(m, *args)` written once against a namespace `m` that is
`jitad`, `NP` (NumPy, with direct-loop references for conv/pooling) or `JNP` (jax.numpy),
so the same formula is compiled by jitad, evaluated by NumPy as the reference and, where
jax is installed, differentiated by jax. For every spec:

(a) `jitad.jit` equals NumPy in float64 (rtol 1e-12) and float32 (dtype kept, rtol ~1e-5);
(b) `check_grads` passes on a weighted sum of the output (differentiable specs);
(c) the reference interpreter on `jitad.trace` agrees with the compiled result;
(d) the gradient equals `jax.grad` of the same formula (skipped without jax).
"""
import functools
import math
import operator
import zlib
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

import numpy as np
import pytest
import scipy.special

import jitad
import jitad.random
from jitad.ir.interpret import interpret
from jitad.pytree import flatten
from jitad.testing import check_grads

pytestmark = pytest.mark.llvm

_NP_DTYPE = {"f64": np.float64, "float64": np.float64, "f32": np.float32, "float32": np.float32,
             "i64": np.int64, "int64": np.int64, "bool": np.bool_}


# -- the input descriptors -------------------------------------------------------

@dataclass(frozen=True)
class F:
    """A float argument: an array of `shape` (a Python float for shape ()) drawn from `domain`."""
    shape: tuple
    domain: str = "real"


@dataclass(frozen=True)
class I:
    """An int argument (labels, indices): int64 in [0, high); a Python int for shape ()."""
    shape: tuple
    high: int


@dataclass(frozen=True)
class K:
    """A fixed argument passed as is (a random key, a bool array)."""
    value: object


DOMAINS = {
    "real": lambda rng, s: rng.standard_normal(s),
    "pos": lambda rng, s: rng.uniform(0.5, 2.0, s),
    "unit": lambda rng, s: rng.uniform(-0.9, 0.9, s),
    "quant": lambda rng, s: rng.integers(-2, 3, s).astype(np.float64),   # ties for == and !=
    "big": lambda rng, s: 1000.0 + rng.standard_normal(s),
    "bigmix": lambda rng, s: rng.choice([-1000.0, 1000.0], s) + rng.standard_normal(s),
    "wide": lambda rng, s: rng.uniform(-50.0, 50.0, s),
}


@dataclass(frozen=True)
class OpSpec:
    name: str                   # test id
    op: str                     # the jitad op (or operator) it covers
    fn: Callable                # fn(m, *args) with m in (jitad, NP, JNP)
    args: tuple                 # F / I / K descriptors
    grad: bool = True           # differentiable w.r.t. its float arguments
    rtol: float = 1e-12         # float64 forward
    rtol32: float = 2e-5        # float32 forward (against the float64 reference)
    grad_rtol: float = 1e-5     # check_grads
    xfail: tuple = ()           # (test kind, "BUG: ...") pairs; kinds: f64 f32 grad interp jax

    def __repr__(self):
        return self.name


def make_args(spec):
    """The spec's arguments in float64, the same on every call (seeded by the spec's name)."""
    rng = np.random.default_rng(zlib.crc32(spec.name.encode()))
    out = []
    for a in spec.args:
        if isinstance(a, F):
            v = DOMAINS[a.domain](rng, a.shape)
            out.append(np.float64(v) if a.shape == () else v)
        elif isinstance(a, I):
            v = rng.integers(0, a.high, a.shape, dtype=np.int64)
            out.append(int(v) if a.shape == () else v)
        else:
            out.append(a.value)
    return tuple(out)


def float_positions(spec):
    return tuple(k for k, a in enumerate(spec.args) if isinstance(a, F))


# -- NumPy and jax.numpy spelled like jitad ---------------------------------------

def _np_logsumexp(x, axis=-1, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def _np_softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _np_nll_loss(logp, labels):
    return -np.mean(np.take_along_axis(logp, np.asarray(labels)[..., None], -1))


def _np_conv2d(x, w, b=None, stride=1, padding=0):
    """Direct loops over batch, output channel and output pixel."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * padding, wd + 2 * padding), x.dtype)
    xp[:, :, padding:padding + h, padding:padding + wd] = x
    oh, ow = (h + 2 * padding - kh) // stride + 1, (wd + 2 * padding - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), np.result_type(x, w))
    for bi in range(n):
        for oc in range(o):
            for i in range(oh):
                for j in range(ow):
                    patch = xp[bi, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
                    out[bi, oc, i, j] = np.sum(patch * w[oc]) + (0 if b is None else b[oc])
    return out


def _np_pool(reduce, x, k, stride=None):
    stride = stride or k
    n, c, h, w = x.shape
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    out = np.zeros((n, c, oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = reduce(x[:, :, i * stride:i * stride + k, j * stride:j * stride + k], axis=(2, 3))
    return out


def _dropout_mask(key, shape, rate):
    return jitad.random.uniform(key, shape) >= rate     # eager: jitad's NumPy reference stream


def _np_logcumsumexp(x, axis=None, reverse=False):
    x, axis = (np.ravel(x), 0) if axis is None else (np.asarray(x), axis)
    flip = (lambda a: np.flip(a, axis)) if reverse else (lambda a: a)
    return flip(np.logaddexp.accumulate(flip(x), axis=axis))


def _same_dtype(fn, x):
    return np.asarray(fn(x), dtype=np.asarray(x).dtype)[()]


NP = SimpleNamespace(
    **{n: getattr(np, n) for n in ["exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tanh", "abs",
                                   "square", "arcsin", "arccos", "arctan", "arctan2", "maximum", "minimum", "where", "clip", "sum", "mean", "max",
                                   "min", "dot", "matmul", "outer", "transpose", "reshape", "broadcast_to",
                                   "concatenate", "stack", "zeros", "zeros_like", "ones", "ones_like",
                                   "full", "cumsum", "cumprod"]},
    lgamma=lambda x: _same_dtype(scipy.special.gammaln, x),
    digamma=lambda x: _same_dtype(scipy.special.digamma, x),
    polygamma=lambda n, x: _same_dtype(functools.partial(scipy.special.polygamma, n), x),
    erf=lambda x: np.vectorize(math.erf, otypes=[np.asarray(x).dtype])(x)[()],
    erfc=lambda x: np.vectorize(math.erfc, otypes=[np.asarray(x).dtype])(x)[()],
    sigmoid=lambda x: 1 / (1 + np.exp(-x)),
    relu=lambda x: np.maximum(x, 0),
    stop_gradient=lambda x: x,
    convert=lambda x, d: np.asarray(x).astype(_NP_DTYPE[d]),
    softmax=_np_softmax,
    log_softmax=lambda x, axis=-1: x - _np_logsumexp(x, axis, keepdims=True),
    logsumexp=_np_logsumexp,
    logcumsumexp=_np_logcumsumexp,
    one_hot=lambda labels, n, dtype="f64": (np.asarray(labels)[..., None] == np.arange(n)).astype(_NP_DTYPE[dtype]),
    take=lambda a, idx, axis=0: np.take(a, idx, axis=axis),
    nll_loss=_np_nll_loss,
    cross_entropy=lambda logits, labels: _np_nll_loss(NP.log_softmax(logits), labels),
    conv2d=_np_conv2d,
    max_pool2d=functools.partial(_np_pool, np.max),
    avg_pool2d=functools.partial(_np_pool, np.mean),
    dropout=lambda x, rate, key: np.where(_dropout_mask(key, x.shape, rate), x / (1 - rate), 0) if rate else x,
    random=SimpleNamespace(uniform=jitad.random.uniform, normal=jitad.random.normal, split=jitad.random.split),
)


@functools.cache
def jax_namespace():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax import lax

    def conv2d(x, w, b=None, stride=1, padding=0):
        out = lax.conv_general_dilated(x, w, (stride, stride), [(padding, padding)] * 2,
                                       dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return out if b is None else out + b[None, :, None, None]

    def pool(init, op, scale, x, k, stride=None):
        stride = stride or k
        out = lax.reduce_window(x, init, op, (1, 1, k, k), (1, 1, stride, stride), "VALID")
        return out / (k * k) if scale else out

    def nll_loss(logp, labels):
        return -jnp.mean(jnp.take_along_axis(logp, jnp.asarray(labels)[..., None], -1))

    def const(x):
        return jnp.asarray(np.asarray(x))

    return jax, jnp, SimpleNamespace(**{n: getattr(jnp, n) for n in vars(NP) if hasattr(jnp, n)} | dict(
        lgamma=jax.scipy.special.gammaln,
        digamma=jax.scipy.special.digamma,
        polygamma=jax.scipy.special.polygamma,
        erf=jax.scipy.special.erf,
        erfc=jax.scipy.special.erfc,
        sigmoid=jax.nn.sigmoid,
        relu=jax.nn.relu,
        convert=lambda x, d: jnp.asarray(x).astype(_NP_DTYPE[d]),
        softmax=lambda x, axis=-1: jax.nn.softmax(x, axis=axis),
        log_softmax=lambda x, axis=-1: jax.nn.log_softmax(x, axis=axis),
        logsumexp=lambda x, axis=-1, keepdims=False: jax.scipy.special.logsumexp(x, axis=axis, keepdims=keepdims),
        logcumsumexp=lambda x, axis=None, reverse=False: lax.cumlogsumexp(
            jnp.ravel(x) if axis is None else x, 0 if axis is None else axis % x.ndim, reverse),
        one_hot=lambda labels, n, dtype="f64": jax.nn.one_hot(labels, n, dtype=_NP_DTYPE[dtype]),
        take=lambda a, idx, axis=0: jnp.take(a, jnp.asarray(idx), axis=axis),
        nll_loss=nll_loss,
        cross_entropy=lambda logits, labels: nll_loss(jax.nn.log_softmax(logits), labels),
        conv2d=conv2d,
        max_pool2d=functools.partial(pool, -jnp.inf, lax.max, False),
        avg_pool2d=functools.partial(pool, 0.0, lax.add, True),
        dropout=lambda x, rate, key: jnp.where(const(_dropout_mask(key, x.shape, rate)), x / (1 - rate), 0)
        if rate else x,
        random=SimpleNamespace(uniform=lambda k, s: const(jitad.random.uniform(k, s)),
                               normal=lambda k, s: const(jitad.random.normal(k, s)),
                               split=jitad.random.split),
    ))


# -- the table ---------------------------------------------------------------------

S = OpSpec
UNARY = [("exp", "real"), ("log", "pos"), ("log1p", "pos"), ("expm1", "real"), ("sqrt", "pos"), ("erf", "real"),
         ("erfc", "real"), ("arcsin", "unit"), ("arccos", "unit"), ("arctan", "wide"),
         ("sin", "wide"), ("cos", "wide"), ("tanh", "real"), ("sigmoid", "wide"), ("relu", "real"),
         ("abs", "real"), ("square", "real"),
         ("lgamma", "wide"), ("digamma", "pos")]
BROADCASTS = [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((2, 3), (3,)), ((), (3, 4)), ((2, 3), ())]
BINARY = [("+", operator.add, "real"), ("-", operator.sub, "real"), ("*", operator.mul, "real"),
          ("/", operator.truediv, "pos")]
CMP = [("<", operator.lt), ("<=", operator.le), (">", operator.gt), (">=", operator.ge),
       ("==", operator.eq), ("!=", operator.ne)]
REDUCE_AXES = [(None, False), (0, False), (-1, False), ((0, 2), False), (1, True), ((-1, 0), True), (None, True)]
C34 = np.linspace(-1.0, 1.0, 12).reshape(3, 4)      # a captured NumPy constant
IDX = np.array([0, 2, 2, 1, 0, 3], dtype=np.int64)  # repeated indices
X234 = F((2, 3, 4))


def _sh(s):
    return "s" if s == () else "x".join(map(str, s))


def _cat_specs():
    specs = [S("concatenate[axis0]", "concatenate", lambda m, a, b: m.concatenate([a, b], 0), (F((2, 3)), F((4, 3)))),
             S("concatenate[axis1]", "concatenate", lambda m, a, b: m.concatenate([a, b], axis=1),
               (F((2, 3)), F((2, 1)))),
             S("concatenate[axis-1,3]", "concatenate", lambda m, a, b, c: m.concatenate([a, b, c], axis=-1),
               (F((2, 2, 1)), F((2, 2, 3)), F((2, 2, 2)))),
             S("concatenate[axis1,3d]", "concatenate", lambda m, a, b: m.concatenate([a, b], axis=1),
               (F((2, 1, 3)), F((2, 2, 3))))]
    for axis in (0, 1, 2, -1):
        specs.append(S(f"stack[axis{axis}]", "stack", lambda m, a, b, c, axis=axis: m.stack([a, b, c], axis),
                       (F((2, 3)), F((2, 3)), F((2, 3)))))
    return specs


def _conv_specs():
    specs = []
    for stride, padding, bias, xs, ws in [(1, 0, False, (2, 3, 5, 5), (4, 3, 3, 3)),
                                          (1, 1, True, (2, 3, 5, 5), (4, 3, 3, 3)),
                                          (2, 0, True, (2, 3, 6, 6), (4, 3, 3, 3)),
                                          (2, 1, False, (2, 3, 6, 6), (4, 3, 3, 3)),
                                          (1, 0, True, (1, 2, 4, 6), (3, 2, 2, 3)),
                                          (2, 1, True, (1, 1, 5, 7), (2, 1, 3, 2))]:
        name = f"conv2d[s{stride},p{padding},{'b' if bias else 'nob'},{_sh(xs)}*{_sh(ws)}]"
        if bias:
            specs.append(S(name, "conv2d", lambda m, x, w, b, s=stride, p=padding: m.conv2d(x, w, b, stride=s, padding=p),
                           (F(xs), F(ws), F((ws[0],))), rtol=1e-11, rtol32=5e-5))
        else:
            specs.append(S(name, "conv2d", lambda m, x, w, s=stride, p=padding: m.conv2d(x, w, stride=s, padding=p),
                           (F(xs), F(ws)), rtol=1e-11, rtol32=5e-5))
    return specs


OP_SPECS = [
    # elementwise unary
    *[S(n, n, lambda m, x, n=n: getattr(m, n)(x), (F((3, 4), d),)) for n, d in UNARY],
    S("neg", "neg", lambda m, x: -x, (F((3, 4)),)),
    S("stop_gradient", "stop_gradient", lambda m, x: m.stop_gradient(x) * 2.0, (F((3, 4)),), grad=False),
    S("exp[scalar]", "exp", lambda m, x: m.exp(x), (F(()),)),
    *[S(f"polygamma[{n}]", "polygamma", lambda m, x, n=n: m.polygamma(n, x), (F((3, 4), d),))
      for n, d in [(1, "pos")]],
    # elementwise binary with every broadcasting combination
    *[S(f"{sym}[{_sh(sa)},{_sh(sb)}]", sym, lambda m, a, b, f=f: f(a, b), (F(sa, d), F(sb, d)))
      for sym, f, d in BINARY for sa, sb in BROADCASTS],
    S("+[const]", "+", lambda m, x: x + 2.0, (F((3, 4)),)),
    S("-[rconst]", "-", lambda m, x: 1.5 - x, (F((3, 4)),)),
    S("*[ndarray_const]", "*", lambda m, x: C34 * x, (F((3, 4)),)),
    S("/[rconst]", "/", lambda m, x: 1.0 / x, (F((3, 4), "pos"),)),
    S("+[ndarray_const_bcast]", "+", lambda m, x: x + C34, (F((4,)),)),
    S("arctan2[3x1,1x4]", "arctan2", lambda m, y, x: m.arctan2(y, x), (F((3, 1)), F((1, 4)))),
    S("**[3x1,1x4]", "**", lambda m, a, b: a ** b, (F((3, 1), "pos"), F((1, 4)))),
    S("**[int]", "**", lambda m, x: x ** 2, (F((3, 4)),)),
    S("**[half]", "**", lambda m, x: x ** 0.5, (F((3, 4), "pos"),)),
    S("**[rpow]", "**", lambda m, x: 2.0 ** x, (F((3, 4)),)),
    S("%[3x4,3x4]", "%", lambda m, a, b: a % b, (F((3, 4), "wide"), F((3, 4), "pos"))),
    S("%[2x3,3]", "%", lambda m, a, b: a % b, (F((2, 3), "wide"), F((3,), "pos"))),
    S("%[neg_divisor]", "%", lambda m, a: a % -1.5, (F((3, 4), "wide"),)),
    S("//[3x1,1x4]", "//", lambda m, a, b: a // b, (F((3, 1), "wide"), F((1, 4), "pos"))),
    S("//[const]", "//", lambda m, a: a // 0.75, (F((3, 4), "wide"),)),
    S("maximum[3x1,1x4]", "maximum", lambda m, a, b: m.maximum(a, b), (F((3, 1)), F((1, 4)))),
    S("maximum[const]", "maximum", lambda m, a: m.maximum(a, 0.1), (F((3, 4)),)),
    S("minimum[2x3,3]", "minimum", lambda m, a, b: m.minimum(a, b), (F((2, 3)), F((3,)))),
    S("minimum[scalar]", "minimum", lambda m, a, b: m.minimum(a, b), (F(()), F((3, 4)))),
    S("where", "where", lambda m, x, y: m.where(x > 0, x, y), (F((3, 4)), F((3, 4)))),
    S("where[bcast]", "where", lambda m, x, y: m.where(x > y, x * y, 0.5), (F((3, 1)), F((4,)))),
    S("where[bool_arg]", "where", lambda m, c, x: m.where(c, x, -x),
      (K(np.array([True, False, True, True])), F((3, 4)))),
    S("clip", "clip", lambda m, x: m.clip(x, -0.5, 0.7), (F((3, 4)),)),
    S("convert[f32]", "convert", lambda m, x: m.convert(x, "f32"), (F((3, 4)),), grad=False, rtol=1e-7),
    S("convert[i64]", "convert", lambda m, x: m.convert(x, "i64"), (F((3, 4), "wide"),), grad=False),
    S("convert[bool->f64]", "convert", lambda m, x: m.convert(x > 0, "f64") * x, (F((3, 4)),)),
    # comparisons and bool logic
    *[S(f"{sym}", sym, lambda m, a, b, f=f: f(a, b), (F((3, 1), "quant"), F((1, 4), "quant")), grad=False)
      for sym, f in CMP],
    S("cmp[scalar]", "<", lambda m, a, b: a < b, (F(()), F((3, 4))), grad=False),
    S("&|~", "&", lambda m, a, b: ((a > 0) & (b < 0)) | ~(a > b), (F((3, 4)), F((3, 4))), grad=False),
    # reductions: axis None / int / negative / tuple, keepdims
    *[S(f"{op}[axis={ax!r},keepdims={kd}]", op, lambda m, x, op=op, ax=ax, kd=kd: getattr(m, op)(x, axis=ax, keepdims=kd),
        (X234,)) for op, axes in [("sum", REDUCE_AXES), ("mean", REDUCE_AXES), ("max", REDUCE_AXES[::2]),
                                  ("min", REDUCE_AXES[1::2])] for ax, kd in axes],
    S("sum[default]", "sum", lambda m, x: m.sum(x), (F((5,)),)),
    S("max[positional_axis]", "max", lambda m, x: m.max(x, 1), (F((3, 4)),)),
    S(".sum(1)", "sum", lambda m, x: x.sum(1), (X234,)),
    S(".mean(-1)", "mean", lambda m, x: x.mean(-1), (X234,)),
    S("sum[int]", "sum", lambda m, i: m.sum(i - 4, 0), (I((3, 4), 9),), grad=False),
    S("mean[int]", "mean", lambda m, i: m.mean(i, 1), (I((3, 4), 9),), grad=False),
    S("max[int]", "max", lambda m, i: m.max(i - 4, -1), (I((3, 4), 9),), grad=False),
    S("*[int,float]", "*", lambda m, i, x: i * x, (I((3, 1), 5), F((3, 4)))),
    S("//,%[int]", "//", lambda m, i, j: (i - 10) // (j + 1) * 100 + (i - 10) % -(j + 1), (I((3, 4), 20), I((4,), 5)),
      grad=False),
    S("sum[bcast_input]", "sum", lambda m, a, b: m.sum(a * b, 0), (F((3, 1)), F((1, 4)))),
    # shapes
    S("reshape[-1 first]", "reshape", lambda m, x: m.reshape(x, (-1, 6)), (X234,)),
    S("reshape[-1 last]", "reshape", lambda m, x: m.reshape(x, (4, -1)), (X234,)),
    S("reshape[flat]", "reshape", lambda m, x: m.reshape(x, -1), (X234,)),
    S("reshape[to 4d]", "reshape", lambda m, x: m.reshape(x, (2, 2, 3, 2)), (X234,)),
    S(".reshape", "reshape", lambda m, x: x.reshape((3, 8)) * 2.0, (X234,)),
    S("transpose[2d]", "transpose", lambda m, x: m.transpose(x), (F((3, 4)),)),
    S("transpose[3d default]", "transpose", lambda m, x: m.transpose(x), (X234,)),
    S("transpose[axes 1,0,2]", "transpose", lambda m, x: m.transpose(x, (1, 0, 2)), (X234,)),
    S("transpose[axes 2,0,1]", "transpose", lambda m, x: m.transpose(x, (2, 0, 1)), (X234,)),
    S(".T", "transpose", lambda m, x: x.T, (F((3, 4)),)),
    S(".T@", "transpose", lambda m, x, y: x.T @ y, (F((3, 4)), F((3, 2)))),
    S("broadcast_to[3->4x3]", "broadcast_to", lambda m, x: m.broadcast_to(x, (4, 3)), (F((3,)),)),
    S("broadcast_to[3x1->2x3x4]", "broadcast_to", lambda m, x: m.broadcast_to(x, (2, 3, 4)), (F((3, 1)),)),
    # matrix products
    S("matmul[nk@km]", "matmul", lambda m, a, b: a @ b, (F((4, 3)), F((3, 5)))),
    S("matmul[k@km]", "matmul", lambda m, a, b: a @ b, (F((3,)), F((3, 5)))),
    S("matmul[nk@k]", "matmul", lambda m, a, b: a @ b, (F((4, 3)), F((3,)))),
    S("matmul[k@k]", "matmul", lambda m, a, b: m.matmul(a, b), (F((3,)), F((3,)))),
    S("matmul[fn]", "matmul", lambda m, a, b: m.matmul(a, b), (F((2, 6)), F((6, 3)))),
    S("matmul[blas]", "matmul", lambda m, a, b: a @ b, (F((40, 35)), F((35, 48))), rtol=1e-11, rtol32=1e-4),
    S("matmul[chain]", "matmul", lambda m, a, b, c: (a @ b) @ c, (F((4, 3)), F((3, 5)), F((5, 2)))),
    S("dot[vec]", "dot", lambda m, a, b: m.dot(a, b), (F((7,)), F((7,)))),
    S("dot[mat]", "dot", lambda m, a, b: m.dot(a, b), (F((2, 3)), F((3, 4)))),
    S("outer", "outer", lambda m, a, b: m.outer(a, b), (F((3,)), F((4,)))),
    # static indexing and slicing
    S("x[1]", "getitem", lambda m, x: x[1], (F((3, 4)),)),
    S("x[-1]", "getitem", lambda m, x: x[-1], (X234,)),
    S("x[1,2]", "getitem", lambda m, x: x[1, 2], (F((3, 4)),)),
    S("x[:,1:3]", "getitem", lambda m, x: x[:, 1:3], (F((3, 4)),)),
    S("x[None]", "getitem", lambda m, x: x[None], (F((3, 4)),)),
    S("x[...,0]", "getitem", lambda m, x: x[..., 0], (X234,)),
    S("x[::2]", "getitem", lambda m, x: x[::2], (F((5, 3)),)),
    S("x[1:6:2,::3]", "getitem", lambda m, x: x[1:6:2, ::3], (F((7, 8)),)),
    S("x[:,None,:]", "getitem", lambda m, x: x[:, None, :], (F((3, 4)),)),
    S("x[...,1:,None]", "getitem", lambda m, x: x[..., 1:, None], (X234,)),
    S("x[0,::2,1:]", "getitem", lambda m, x: x[0, ::2, 1:], (X234,)),
    S("x[-3:-1]", "getitem", lambda m, x: x[-3:-1] * x[:2], (F((5, 2)),)),
    *_cat_specs(),
    # constants made in staged code
    S("zeros", "zeros", lambda m, x: x + m.zeros((3, 4)), (F((3, 4)),)),
    S("ones", "ones", lambda m, x: x * m.ones((4,)), (F((3, 4)),)),
    S("full", "full", lambda m, x: x + m.full((3, 4), 0.5), (F((3, 4)),)),
    S("zeros_like", "zeros_like", lambda m, x: x - m.zeros_like(x), (F((3, 4)),)),
    S("ones_like", "ones_like", lambda m, x: x * m.ones_like(x), (F((3, 4)),)),
    # softmax family: axis 0 and -1, large inputs stay finite
    *[S(f"{op}[axis={ax},{d}]", op, lambda m, x, op=op, ax=ax: getattr(m, op)(x, axis=ax), (F((3, 5), d),),
        rtol32=1e-4 if d != "real" else 2e-5)
      for op in ("softmax", "log_softmax", "logsumexp") for ax in (0, -1) for d in ("real", "big", "bigmix")],
    S("logsumexp[default]", "logsumexp", lambda m, x: m.logsumexp(x), (F((3, 5)),)),
    S("logsumexp[None]", "logsumexp", lambda m, x: m.logsumexp(x, axis=None), (F((3, 5), "bigmix"),), rtol32=1e-4),
    S("logsumexp[keepdims]", "logsumexp", lambda m, x: m.logsumexp(x, axis=1, keepdims=True), (X234,)),
    S("softmax[3d,axis1]", "softmax", lambda m, x: m.softmax(x, axis=1), (X234,)),
    S("cumsum[axis=-1]", "cumsum", lambda m, x: m.cumsum(x, axis=-1), (F((3, 5)),)),
    *[S(f"cumprod[axis={ax},{d}]", "cumprod", lambda m, x, ax=ax: m.cumprod(x, axis=ax), (F((3, 5), d),))
      for ax, d in ((0, "real"), (-1, "quant"))],   # (quant: zeros)
    *[S(f"logcumsumexp[axis={ax},reverse={rev},{d}]", "logcumsumexp",
        lambda m, x, ax=ax, rev=rev: m.logcumsumexp(x, axis=ax, reverse=rev), (F((3, 5), d),), rtol32=1e-4)
      for ax, rev, d in ((0, False, "real"), (-1, True, "bigmix"))],
    S("logcumsumexp[None]", "logcumsumexp", lambda m, x: m.logcumsumexp(x), (X234,)),
    # classification
    S("one_hot", "one_hot", lambda m, labels: m.one_hot(labels, 5), (I((4,), 5),), grad=False),
    S("one_hot[2d]", "one_hot", lambda m, x, labels: m.sum(x * m.one_hot(labels, 5), -1), (F((2, 3, 5)), I((2, 3), 5))),
    S("cross_entropy", "cross_entropy", lambda m, x, y: m.cross_entropy(x, y), (F((4, 5)), I((4,), 5))),
    S("cross_entropy[3d]", "cross_entropy", lambda m, x, y: m.cross_entropy(x, y), (F((2, 3, 5)), I((2, 3), 5))),
    S("cross_entropy[big]", "cross_entropy", lambda m, x, y: m.cross_entropy(x, y), (F((4, 5), "bigmix"), I((4,), 5)),
      rtol32=1e-4),
    S("nll_loss", "nll_loss", lambda m, x, y: m.nll_loss(m.log_softmax(x), y), (F((6, 3)), I((6,), 3))),
    # gathers and staged indices
    S("take[repeated]", "take", lambda m, e: m.take(e, IDX), (F((4, 3)),)),
    S("take[int_arg]", "take", lambda m, e, i: m.take(e, i), (F((4, 3)), I((7,), 3))),
    S("E[idx][repeated]", "gather", lambda m, e, i: e[i], (F((4, 3)), I((8,), 3))),
    S("E[idx2d]", "gather", lambda m, e, i: e[i], (F((5, 2)), I((2, 3), 5))),
    S("E[idx][1d]", "gather", lambda m, e, i: e[i] * 2.0, (F((5,)), I((6,), 2))),
    S("E[idx_const]", "gather", lambda m, e: e[IDX] + e[IDX[::-1].copy()], (F((4, 3)),)),
    S("E[i]", "index", lambda m, e, i: e[i], (F((4, 3)), I((), 4))),
    S("E[i][1d]", "index", lambda m, e, i: e[i] * e[i], (F((5,)), I((), 5))),
    S("E[i,1:]", "index", lambda m, e, i: e[i, 1:], (F((4, 3)), I((), 4))),
    # networks
    *_conv_specs(),
    S("max_pool2d[k2]", "max_pool2d", lambda m, x: m.max_pool2d(x, 2), (F((2, 3, 6, 6)),)),
    S("max_pool2d[k3,s1]", "max_pool2d", lambda m, x: m.max_pool2d(x, 3, stride=1), (F((1, 2, 5, 5)),)),
    S("max_pool2d[k2,odd]", "max_pool2d", lambda m, x: m.max_pool2d(x, 2), (F((1, 2, 5, 7)),)),
    S("avg_pool2d[k2]", "avg_pool2d", lambda m, x: m.avg_pool2d(x, 2), (F((2, 3, 6, 6)),)),
    S("avg_pool2d[k3,s2]", "avg_pool2d", lambda m, x: m.avg_pool2d(x, 3, stride=2), (F((1, 2, 7, 7)),)),
    S("dropout", "dropout", lambda m, x, key: m.dropout(x, 0.3, key), (F((4, 5)), K(7))),
    S("dropout[rate0]", "dropout", lambda m, x, key: m.dropout(x, 0.0, key), (F((4, 5)), K(7))),
    # counter-based random numbers inside staged code
    S("random.uniform", "random.uniform", lambda m, x, key: x * m.random.uniform(key, (3, 4)), (F((3, 4)), K(3))),
    S("random.normal", "random.normal", lambda m, x, key: x + m.random.normal(key, (3, 4)), (F((3, 4)), K(11)),
      rtol=1e-10),
    S("random.split", "random.split",
      lambda m, x, key: x * m.random.uniform(m.random.split(key)[0], (5,)) - m.random.uniform(m.random.split(key)[1], 5),
      (F((5,)), K(5))),
]

assert len({s.name for s in OP_SPECS}) == len(OP_SPECS), "spec names must be unique"
GRAD_SPECS = [s for s in OP_SPECS if s.grad and float_positions(s)]


def cases(kind, specs):
    """`specs` as pytest params, with a strict xfail where the spec records a known bug."""
    out = []
    for s in specs:
        reasons = [r for k, r in s.xfail if k == kind]
        marks = [pytest.mark.xfail(strict=True, reason=reasons[0])] if reasons else []
        out.append(pytest.param(s, id=s.name, marks=marks))
    return out


def test_every_op_has_a_spec():
    covered = {s.op for s in OP_SPECS}
    wanted = set(jitad.numeric.__all__) | {"+", "-", "*", "/", "**", "%", "//", "neg", "<", "<=", ">", ">=",
                                            "==", "!=", "&", "getitem", "gather", "index", "random.uniform",
                                            "random.normal", "random.split"}
    assert wanted <= covered, f"ops without a spec: {sorted(wanted - covered)}"


# -- helpers -----------------------------------------------------------------------

def staged(spec):
    return lambda *a: spec.fn(jitad, *a)


def reference(spec, args):
    with np.errstate(all="ignore"):
        return spec.fn(NP, *args)


def assert_close(got, want, rtol, scale_of=(), what=""):
    """`got` ≈ `want` with relative tolerance `rtol`, absolute `rtol * scale`, where the
    scale is the largest magnitude among the reference and the inputs `scale_of`
    (errors of well-conditioned ops are relative to their inputs)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    finite = [np.abs(np.asarray(a, np.float64)[np.isfinite(a)]) for a in (want, *scale_of)
              if np.asarray(a).dtype.kind in "fiu"]
    scale = max([1.0] + [float(a.max()) for a in finite if a.size])
    if want.dtype == np.bool_ or want.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=rtol,
                                   atol=rtol * scale, err_msg=what)


_JIT = {}


def jitted(spec):
    """One `jit` per spec, so the float64 and float32 tests share one dispatcher."""
    if spec.name not in _JIT:
        _JIT[spec.name] = jitad.jit(staged(spec))
    return _JIT[spec.name]


def weights(spec, shape):
    """A fixed random cotangent for the spec's output."""
    w = np.random.default_rng(zlib.crc32(spec.name.encode()) + 1).standard_normal(shape)
    return float(w) if shape == () else w


def scalarized(spec, args):
    """`sum(fn(*args) * W)` for a fixed random W: a float scalar whose gradient checks the whole VJP.
    (A scalar output is only scaled: reductions of 0-d values are tested on their own below.)"""
    w = weights(spec, np.shape(reference(spec, args)))
    if np.shape(w) == ():
        return lambda *a: spec.fn(jitad, *a) * w
    return lambda *a: jitad.sum(spec.fn(jitad, *a) * w)


_GRAD = {}


def compiled_grad(spec):
    """One compiled gradient (w.r.t. every float argument) per spec, shared by the tests below."""
    if spec.name not in _GRAD:
        args = make_args(spec)
        _GRAD[spec.name] = jitad.grad(scalarized(spec, args), argnums=float_positions(spec))
    return _GRAD[spec.name]


def floats32(args):
    """The float64 arrays and scalars of `args` as float32."""
    return tuple(a.astype(np.float32) if isinstance(a, (np.ndarray, np.float64)) and a.dtype == np.float64 else a
                 for a in args)


# -- (a) forward: float64 and float32 against NumPy -------------------------------

@pytest.mark.parametrize("spec", cases("f64", OP_SPECS))
def test_forward_float64(spec):
    args = make_args(spec)
    want = reference(spec, args)
    got = jitted(spec)(*args)
    if isinstance(got, np.ndarray):
        assert got.dtype == np.asarray(want).dtype, f"dtype {got.dtype}, NumPy gives {np.asarray(want).dtype}"
    assert_close(got, want, spec.rtol, args, spec.name)


@pytest.mark.parametrize("spec", cases("f32", OP_SPECS))
def test_forward_float32(spec):
    args = floats32(make_args(spec))
    want32 = reference(spec, args)                                   # NumPy's dtype on float32 inputs
    want64 = reference(spec, tuple(a.astype(np.float64) if isinstance(a, (np.ndarray, np.float32)) and
                                   a.dtype == np.float32 else a for a in args))   # the precise value
    got = jitted(spec)(*args)
    if isinstance(got, np.ndarray):
        assert got.dtype == np.asarray(want32).dtype, f"dtype {got.dtype}, NumPy gives {np.asarray(want32).dtype}"
    else:
        assert np.ndim(want32) == 0
    assert_close(got, want64, spec.rtol32, args, spec.name)


# -- (b) gradients by central differences -----------------------------------------

@pytest.mark.parametrize("spec", cases("grad", GRAD_SPECS))
def test_check_grads(spec):
    args = make_args(spec)
    check_grads(scalarized(spec, args), args, rtol=spec.grad_rtol)


# one spec per op, to second order in both modes (forward-over-reverse and forward)
SECOND_ORDER_SPECS = list({s.op: s for s in GRAD_SPECS}.values())


@pytest.mark.parametrize("spec", cases("grad", SECOND_ORDER_SPECS))
def test_check_grads_second_order(spec):
    args = make_args(spec)
    check_grads(scalarized(spec, args), args, order=2, modes=("fwd", "rev"), rtol=max(spec.grad_rtol, 1e-4))


# -- (c) the reference interpreter ---------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("spec", cases("interp", OP_SPECS))
def test_interpreter_agrees(spec, dtype):
    args = make_args(spec)
    if dtype == np.float32:
        args = floats32(args)
    outs = interpret(jitad.trace(staged(spec), *args), flatten(args)[0])
    assert len(outs) == 1
    got = jitted(spec)(*args)
    assert np.asarray(outs[0]).dtype == np.asarray(got).dtype or not isinstance(got, np.ndarray)
    assert_close(got, outs[0], 1e-12 if dtype == np.float64 else 1e-5, args, spec.name)


@pytest.mark.parametrize("spec", cases("interp", GRAD_SPECS))
def test_interpreter_agrees_on_gradients(spec):
    args = make_args(spec)
    g = compiled_grad(spec)
    got = g(*args)
    outs = interpret(jitad.trace(g, *args), flatten(args)[0])
    assert len(outs) == len(got)
    for k, (a, b) in enumerate(zip(got, outs)):
        assert_close(a, b, 1e-11, args, f"{spec.name}: gradient of argument {k}")


# one spec per op: float32 gradients keep their dtype and match the float64 ones
GRAD32_SPECS = list({s.op: s for s in reversed(GRAD_SPECS)}.values())


@pytest.mark.parametrize("spec", cases("grad32", GRAD32_SPECS))
def test_gradient_float32(spec):
    args = make_args(spec)
    args32 = floats32(args)
    g32, g64 = compiled_grad(spec)(*args32), compiled_grad(spec)(*args)
    for k, a, b in zip(float_positions(spec), g32, g64):
        if isinstance(args32[k], np.ndarray):
            assert a.dtype == np.float32, f"gradient of a float32 argument is {a.dtype}"
        assert_close(a, b, 1e-4, args, f"{spec.name}: float32 gradient of argument {k}")


# -- (d) gradients against jax -------------------------------------------------------

@pytest.mark.parametrize("spec", cases("jax", GRAD_SPECS))
def test_grad_matches_jax(spec):
    jax, jnp, JNP = jax_namespace()
    args = make_args(spec)
    pos = float_positions(spec)
    w = weights(spec, np.shape(reference(spec, args)))

    def loss(*a):
        return jnp.sum(spec.fn(JNP, *a) * w)

    jargs = [jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
    static = tuple(k for k, a in enumerate(args) if k not in pos and not isinstance(a, np.ndarray))
    want = jax.jit(jax.grad(loss, argnums=pos), static_argnums=static)(*jargs)   # one XLA compile, not one per op
    got = compiled_grad(spec)(*args)
    for k, g, wg in zip(pos, got, want):
        assert_close(g, np.asarray(wg), 1e-10, (), f"{spec.name}: gradient of argument {k}")


def test_max_gradient_is_shared_among_ties():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    np.testing.assert_array_equal(jitad.grad(lambda a: jitad.max(a))(x), [[0, 0.5, 0.5], [0, 0, 0]])
    np.testing.assert_allclose(jitad.grad(lambda a: jitad.sum(jitad.max(a, 1)))(x),
                               [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]], rtol=1e-15)


def test_max_gradient_ties_match_jax():
    jax, jnp, _ = jax_namespace()
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    w = np.array([0.5, -2.0])
    want = jax.grad(lambda a: jnp.sum(jnp.max(a, 1) * w))(jnp.asarray(x))
    np.testing.assert_allclose(jitad.grad(lambda a: jitad.sum(jitad.max(a, 1) * w))(x), want, rtol=1e-15)


# -- known bugs, each with its minimal reproduction ------------------------------------

@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_reduction_of_a_scalar(op):
    assert jitad.jit(lambda x: getattr(jitad, op)(x))(1.5) == 1.5


@pytest.mark.parametrize("op, want", [("sum", 2), ("mean", 2 / 3)])
def test_sum_and_mean_of_bools_count(op, want):
    assert jitad.jit(lambda c: getattr(jitad, op)(c))(np.array([True, False, True])) == pytest.approx(want)
