"""Random numbers from keys, as `jax.random`: counter-based (Threefry-2x32, JAX's
default generator), usable eagerly and inside staged code (jit, grad, vmap, loops).

A key is one int64 word holding JAX's two uint32 key words (high, low). `key(seed)`
and `PRNGKey(seed)` give the key [0, seed] of `jax.random.PRNGKey(seed)` (a 64-bit seed
gives both words, as JAX with x64); `split(key, n)` gives an int64 array of shape (n,)
of new keys (as JAX's typed keys from `jax.random.key`: one array element per key,
where JAX's raw uint32 keys add an axis of 2). An int given as a key is a seed; a JAX
uint32 key array (`jax.random.PRNGKey(0)`) is accepted and packed. Each sample is the
cipher of (key, element index), so neighbouring keys give unrelated streams, and the
bits, `split`, `fold_in`, `uniform` on [0, 1), `bernoulli`, `randint`, `permutation` and
`choice` are bit for bit JAX's (with x64 for float64 and int64); `normal` and
`truncated_normal` agree with JAX to 1e-13 (float64) or an ulp (float32). The default
float dtype is float64.

>>> key = jitad.random.key(0)
>>> k1, k2 = jitad.random.split(key)
>>> u = jitad.random.uniform(k1, (3,))
"""
import math

import numpy as np

from . import linalg
from . import numeric as N
from . import numpy_api as A
from .errors import ArgumentError, ShapeError
from .ir.ops import Op
from .ir.types import FLOATS
from .primitives.bits import threefry_numpy
from .staging import Staged, as_var, emit, is_staged

_M32 = 0xFFFFFFFF
_KEY_HELP = ("a key is an int (a seed), a key from jitad.random.key/split/fold_in (an int64 word), "
             "or a JAX uint32 key")


def _threefry(key, count):
    if not (is_staged(key) or is_staged(count)):
        return threefry_numpy(key, count)
    return Staged(emit(Op.THREEFRY2X32, [as_var(key, "i64"), as_var(count, "i64")])[0])


def _as_keys(key, who):
    """`key` as int64 key words (any shape): a seed is packed as JAX packs it."""
    if is_staged(key):
        if key.ir_dtype != "i64":
            raise ArgumentError(f"random.{who}: {_KEY_HELP}; got a staged {key.dtype} value")
        return key
    if isinstance(key, (bool, np.bool_)):
        raise ArgumentError(f"random.{who}: {_KEY_HELP}; got {key!r}")
    if isinstance(key, (int, np.integer)):
        if not -2 ** 63 <= int(key) < 2 ** 64:
            raise ArgumentError(f"random.{who}: seed {key} is outside the 64-bit range")
        return np.uint64(int(key) % 2 ** 64).astype(np.int64)
    if hasattr(key, "__array__") and hasattr(key, "dtype") and not isinstance(key, np.ndarray):
        try:
            key = np.asarray(key)   # a JAX array
        except Exception:
            raise ArgumentError(f"random.{who}: {_KEY_HELP}; got {key!r} (for a JAX typed key pass "
                                "jax.random.key_data(key))") from None
    if isinstance(key, np.ndarray) and key.dtype == np.uint32 and key.shape[-1:] == (2,):
        return ((key[..., 0].astype(np.uint64) << np.uint64(32)) | key[..., 1]).astype(np.int64)
    if isinstance(key, np.ndarray) and key.dtype.kind in "iu":
        return key.astype(np.int64)
    raise ArgumentError(f"random.{who}: {_KEY_HELP}; got {key!r}")


def _one_key(key, who):
    key = _as_keys(key, who)
    if N._shape(key) != ():
        raise ArgumentError(f"random.{who} takes one key; got an array of keys of shape {N._shape(key)} "
                            f"(map over keys with jitad.vmap, or pick one: keys[0])")
    return key


def _shape(who, shape):
    return N._static_shape(f"random.{who}", () if shape is None else shape)


def _words(key, shape, who):
    """64 random bits per element of `shape`: the cipher of (key, flat index)."""
    n = int(np.prod(shape, dtype=np.int64))
    return _threefry(_one_key(key, who), np.arange(n, dtype=np.int64).reshape(shape))


def _hi(w):
    return (w // 2 ** 32) & _M32


def _lo(w):
    return w & _M32


def _xor(a, b):
    return (a | b) - (a & b)


def _bits32(key, shape, who):
    w = _words(key, shape, who)
    return _xor(_hi(w), _lo(w))


def _float_dtype(dtype, who):
    name = N._dtype_name(np.float64 if dtype is None else dtype, f"random.{who}")
    if name not in FLOATS:
        raise ArgumentError(f"random.{who}: dtype must be a float dtype (float32 or float64), got {dtype!r}")
    return name


def _as(x, name):
    return N.convert(x, name) if is_staged(x) else np.asarray(x, N.NUMPY_OF[name])


# -- keys ----------------------------------------------------------------------------

def key(seed):
    """The key of an int seed (a staged int works too): `jitad.random.key(0)`, as JAX's
    `PRNGKey(0)` (the words [0, 0])."""
    return _one_key(seed, "key")


PRNGKey = key


def split(key, num=2):
    """`num` new keys (an int64 array of shape `num`, an int or a shape tuple), as
    `jax.random.split`: `k1, k2 = jitad.random.split(key)`."""
    return _words(key, _shape("split", num), "split")


def fold_in(key, data):
    """A new key from `key` and an int (staged or not), as `jax.random.fold_in`:
    `jitad.random.fold_in(key, step)`."""
    if is_staged(data):
        if data.ir_dtype != "i64":
            raise ArgumentError(f"random.fold_in: data must be an int, got a staged {data.dtype} value")
    elif isinstance(data, (bool, np.bool_)) or not isinstance(data, (int, np.integer)):
        raise ArgumentError(f"random.fold_in: data must be an int, got {data!r}")
    else:
        data = int(data)
    return _threefry(_one_key(key, "fold_in"), data & _M32)


def key_data(keys):
    """JAX's uint32 words of keys: shape (..., 2) (int64 when staged)."""
    keys = _as_keys(keys, "key_data")
    if is_staged(keys):
        return N.stack([_hi(keys), _lo(keys)], axis=-1)
    return np.stack([_hi(keys), _lo(keys)], axis=-1).astype(np.uint32)


def wrap_key_data(data):
    """Keys from JAX's uint32 words (shape (..., 2)): the inverse of `key_data`."""
    if is_staged(data):
        return _hi(data[..., 0]) * 2 ** 32 + _lo(data[..., 1])   # wraps to the int64 word
    return _as_keys(np.asarray(data, np.uint32), "wrap_key_data")


# -- samplers ------------------------------------------------------------------------

def bits(key, shape=(), dtype=None):
    """Uniform random bits, as `jax.random.bits` (uint32; `dtype=np.uint64` for 64):
    staged values are int64 holding them."""
    shape = _shape("bits", shape)
    wide = dtype is not None and np.dtype(dtype) == np.uint64
    out = _words(key, shape, "bits") if wide else _bits32(key, shape, "bits")
    return out if is_staged(out) else np.asarray(out).astype(np.uint64 if wide else np.uint32)


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform floats in [minval, maxval) (float64 unless `dtype`), as `jax.random.uniform`:
    `jitad.random.uniform(key, (2, 3))`."""
    shape, name = _shape("uniform", shape), _float_dtype(dtype, "uniform")
    if name == "f32":   # the top 23 bits of 32, as JAX: (bits >> 9) * 2**-23
        u = _as(_bits32(key, shape, "uniform") // 2 ** 9, "f32") * np.float32(2.0 ** -23)
    else:   # the top 52 bits of 64
        w = _words(key, shape, "uniform")
        u = _as(_hi(w) * 2 ** 20 + _lo(w) // 2 ** 12, "f64") * 2.0 ** -52
    if is_staged(minval) or is_staged(maxval) or not (np.all(np.asarray(minval) == 0.0)
                                                     and np.all(np.asarray(maxval) == 1.0)):
        lo, hi = _as(minval, name), _as(maxval, name)
        u = N.maximum(lo, u * (hi - lo) + lo)
    return u


# The inverse error function as Giles (2010) approximates it, in float32 and float64:
# per branch (w below `bound`, w = -log((1 - x)(1 + x))), a polynomial in w - shift or
# sqrt(w) - shift, highest coefficient first (XLA's erf_inv, which JAX's normal uses).
_ERFINV = {
    "f32": ((5.0, 2.5, False, (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                               -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)),
            (math.inf, 3.0, True, (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                                   -0.0076224613, 0.00943887047, 1.00167406, 2.83297682))),
    "f64": ((6.25, 3.125, False, (
        -3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18, 1.115787767802518096e-17,
        -1.333171662854620906e-16, 2.0972767875968561637e-17, 6.6376381343583238325e-15, -4.0545662729752068639e-14,
        -8.1519341976054721522e-14, 2.6335093153082322977e-12, -1.2975133253453532498e-11,
        -5.4154120542946279317e-11, 1.051212273321532285e-09, -4.1126339803469836976e-09,
        -2.9070369957882005086e-08, 4.2347877827932403518e-07, -1.3654692000834678645e-06,
        -1.3882523362786468719e-05, 0.0001867342080340571352, -0.00074070253416626697512,
        -0.0060336708714301490533, 0.24015818242558961693, 1.6536545626831027356)),
            (16.0, 3.25, True, (
        2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07, 1.8239629214389227755e-08,
        1.5027403968909827627e-06, -4.013867526981545969e-06, 2.9234449089955446044e-06, 1.2475304481671778723e-05,
        -4.7318229009055733981e-05, 6.8284851459573175448e-05, 2.4031110387097893999e-05,
        -0.0003550375203628474796, 0.00095328937973738049703, -0.0016882755560235047313,
        0.0024914420961078508066, -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
        3.0838856104922207635)),
            (math.inf, 5.0, True, (
        -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
        -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
        2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
        -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
        7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
        1.0103004648645343977, 4.8499064014085844221))),
}


def _erfinv(x, name):
    """erfinv(x) for x in (-1, 1) of float dtype `name`."""
    w = -N.log((1.0 - x) * (1.0 + x))
    root, p = N.sqrt(w), None
    for bound, shift, of_root, coefficients in reversed(_ERFINV[name]):
        v = (root if of_root else w) - shift
        q = coefficients[0]
        for c in coefficients[1:]:
            q = q * v + c
        p = q if p is None else N.where(w < bound, q, p)
    return p * x


def normal(key, shape=(), dtype=None):
    """Standard normal floats, as `jax.random.normal` (sqrt(2) erfinv of a uniform on
    (-1, 1)): `jitad.random.normal(key, (3,))`."""
    shape, name = _shape("normal", shape), _float_dtype(dtype, "normal")
    lo = np.nextafter(N.NUMPY_OF[name](-1.0), N.NUMPY_OF[name](0.0))
    return _as(math.sqrt(2.0), name) * _erfinv(uniform(key, shape, name, lo, 1.0), name)


def truncated_normal(key, lower, upper, shape=None, dtype=None):
    """Standard normal floats conditioned on [lower, upper], as `jax.random.truncated_normal`."""
    name = _float_dtype(dtype, "truncated_normal")
    if shape is None:
        shape = np.broadcast_shapes(N._shape(lower), N._shape(upper))
    shape = _shape("truncated_normal", shape)
    lower, upper, r2 = _as(lower, name), _as(upper, name), _as(math.sqrt(2.0), name)
    out = r2 * _erfinv(uniform(key, shape, name, N.erf(lower / r2), N.erf(upper / r2)), name)
    if not (is_staged(lower) or is_staged(upper)):
        lower, upper = np.nextafter(lower, np.inf), np.nextafter(upper, -np.inf)
    return _as(N.clip(out, lower, upper), name)


def bernoulli(key, p=0.5, shape=None):
    """True with probability `p` (bool array), as `jax.random.bernoulli`."""
    shape = _shape("bernoulli", N._shape(p) if shape is None else shape)
    name = "f32" if getattr(p, "dtype", None) == np.float32 else "f64"
    return uniform(key, shape, name) < p


def randint(key, shape, minval, maxval, dtype=None):
    """Uniform ints in [minval, maxval), as `jax.random.randint`: int64 (JAX with x64; spans
    below 2**31) or, with an int32 `dtype`, int32's algorithm (spans below 2**32)."""
    if dtype is not None and np.dtype(dtype).kind not in "iu":
        raise ArgumentError(f"random.randint: dtype must be an int dtype, got {dtype!r}")
    wide = dtype is None or np.dtype(dtype).itemsize == 8
    shape = _shape("randint", shape)
    minval, maxval = (N.convert(v, "i64") if is_staged(v) else np.asarray(v).astype(np.int64) for v in (minval, maxval))
    k1, k2 = split(_one_key(key, "randint"))
    span = maxval - minval
    span = (N.where(span <= 0, 1, span) if is_staged(span) else np.where(span <= 0, 1, span)) & _M32
    if wide:   # 64 random bits each: their unsigned remainders, 2**64 = (2**32 % span)**2 (mod span)
        high, low = _words(k1, shape, "randint"), _words(k2, shape, "randint")
        mult = (2 ** 32 % span) ** 2 % span
        umod = lambda w: (w % span + N.where(w < 0, mult, 0)) % span
        offset = umod(high) * mult + umod(low)
    else:   # JAX's uint32 arithmetic: products and sums wrap at 2**32
        high, low = _bits32(k1, shape, "randint"), _bits32(k2, shape, "randint")
        mult = ((2 ** 16 % span) ** 2 & _M32) % span
        offset = ((((high % span) * mult) & _M32) + low % span) & _M32
    out = minval + offset % span
    return out if is_staged(out) else np.asarray(out, np.int64 if dtype is None else dtype)


def permutation(key, x, axis=0):
    """A random permutation of `arange(x)` (an int) or of `x` along `axis`, as
    `jax.random.permutation`."""
    key = _one_key(key, "permutation")
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        return _shuffle(key, np.arange(int(x)))
    n = N._shape(x)[axis]
    return N.take(x, _shuffle(key, np.arange(n)), axis=axis)


def _shuffle(key, x):
    """Sort `x` by random 32-bit words, as JAX: enough rounds that ties are unlikely."""
    rounds = int(np.ceil(3 * np.log(max(1, x.size)) / np.log(2.0 ** 32 - 1)))
    for _ in range(rounds):
        key, sub = split(key)
        order = A.argsort(_bits32(sub, x.shape, "permutation"))
        x = N.take(x, order) if is_staged(order) or is_staged(x) else x[order]
    return x


def choice(key, a, shape=(), replace=True, p=None, axis=0):
    """Random samples of `a` (an array, or an int for `arange(a)`) along `axis`, as
    `jax.random.choice`: with or without replacement, with probabilities `p`."""
    key, shape = _one_key(key, "choice"), _shape("choice", shape)
    is_int = isinstance(a, (int, np.integer)) and not isinstance(a, (bool, np.bool_))
    n = int(a) if is_int else N._shape(a)[axis]
    draws = int(np.prod(shape, dtype=np.int64))
    if not replace and draws > n:
        raise ArgumentError(f"random.choice: {draws} draws without replacement from {n} values; "
                            "pass replace=True or ask for fewer")
    if p is None:
        ind = randint(key, shape, 0, n) if replace else N.reshape(permutation(key, n)[:draws], shape)
    elif replace:
        name = "f32" if getattr(p, "dtype", None) == np.float32 else "f64"
        cum = A.cumsum(_as(p, name))
        r = cum[-1] * (1.0 - uniform(key, shape, name))
        ind = N.sum(N.reshape(cum, (n,) + (1,) * len(shape)) < r, axis=0)   # searchsorted, left
    else:
        g = gumbel(key, (n,)) + N.log(p)
        ind = N.reshape(A.top_k(g, draws)[1], shape)
    return ind if is_int else N.take(a, ind, axis=axis)


def gumbel(key, shape=(), dtype=None):
    """Standard Gumbel floats, as `jax.random.gumbel`."""
    name = _float_dtype(dtype, "gumbel")
    tiny = np.finfo(N.NUMPY_OF[name]).tiny
    return -N.log(-N.log(uniform(key, _shape("gumbel", shape), name, tiny, 1.0)))


def exponential(key, shape=(), dtype=None):
    """Standard exponential floats, as `jax.random.exponential`."""
    return -N.log1p(-uniform(key, _shape("exponential", shape), dtype))


def categorical(key, logits, axis=-1, shape=None):
    """Indices drawn with probabilities softmax(logits) along `axis`, as
    `jax.random.categorical` (the Gumbel-max trick)."""
    lshape = N._shape(logits)
    axis = axis % len(lshape)
    batch = lshape[:axis] + lshape[axis + 1:]
    shape = batch if shape is None else _shape("categorical", shape)
    if shape[len(shape) - len(batch):] != batch:
        raise ShapeError(f"random.categorical: shape {shape} must end with the logits' batch shape {batch}")
    prefix = shape[:len(shape) - len(batch)]
    noise_shape = prefix + batch[:axis] + (lshape[axis],) + batch[axis:]
    dtype = "f32" if getattr(logits, "dtype", None) == np.float32 else "f64"
    noisy = gumbel(key, noise_shape, dtype) + N.reshape(logits, (1,) * len(prefix) + lshape)
    return A.argmax(noisy, axis=len(prefix) + axis)


def multivariate_normal(key, mean, cov, shape=None, dtype=None):
    """Normal vectors with `mean` (n,) and covariance `cov` (n, n) (by Cholesky), as
    `jax.random.multivariate_normal`."""
    name = _float_dtype(dtype, "multivariate_normal")
    n = N._shape(mean)[-1:]
    if len(N._shape(mean)) != 1 or N._shape(cov) != n + n:
        raise ShapeError(f"random.multivariate_normal: mean {N._shape(mean)} and cov {N._shape(cov)}; "
                         "they must be (n,) and (n, n)")
    shape = _shape("multivariate_normal", () if shape is None else shape)
    z = normal(key, shape + n, name)
    factor = linalg.cholesky(_as(cov, name))
    return _as(mean, name) + A.einsum("ij,...j->...i", factor, z)


_GAMMA_TRIES = 12   # proposals per sample: all rejected with probability < 0.05**12 (shape >= 1)


def gamma(key, a, shape=None, dtype=None):
    """Gamma(a, 1) floats (Marsaglia and Tsang's method, its proposals drawn in bulk and the
    first accepted one kept; shape a < 1 through Gamma(a + 1) * U**(1/a)); not JAX's
    numbers. No gradient flows to `a`."""
    name = _float_dtype(dtype, "gamma")
    shape = _shape("gamma", N._shape(a) if shape is None else shape)
    a = N.broadcast_to(_as(a, "f64"), shape)
    k_norm, k_unif, k_boost = split(_one_key(key, "gamma"), 3)
    a1 = N.where(a < 1.0, a + 1.0, a)
    d = a1 - 1.0 / 3.0
    c = 1.0 / N.sqrt(9.0 * d)
    z, u = normal(k_norm, (_GAMMA_TRIES,) + shape), uniform(k_unif, (_GAMMA_TRIES,) + shape)
    v = (1.0 + c * z) ** 3
    safe_v = N.where(v > 0.0, v, 1.0)
    accept = (v > 0.0) & (N.log(u) < 0.5 * z * z + d - d * safe_v + d * N.log(safe_v))
    first = A.argmax(N.where(accept, 1.0, 0.0), axis=0)
    x = d * A.take_along_axis(safe_v, N.reshape(first, (1,) + shape), axis=0)[0]
    boost = N.where(a < 1.0, uniform(k_boost, shape) ** (1.0 / a), 1.0)
    return _as(x * boost, name)


def beta(key, a, b, shape=None, dtype=None):
    """Beta(a, b) floats, as X / (X + Y) of two gamma draws."""
    if shape is None:
        shape = np.broadcast_shapes(N._shape(a), N._shape(b))
    k1, k2 = split(_one_key(key, "beta"))
    x, y = gamma(k1, a, shape, dtype), gamma(k2, b, shape, dtype)
    return x / (x + y)


def dirichlet(key, alpha, shape=None, dtype=None):
    """Dirichlet(alpha) vectors (the last axis), normalized gamma draws."""
    alpha_shape = N._shape(alpha)
    shape = _shape("dirichlet", alpha_shape[:-1] if shape is None else shape)
    g = gamma(key, alpha, tuple(shape) + alpha_shape[-1:], dtype)
    return g / N.sum(g, axis=-1, keepdims=True)


def dropout(x, rate, key):
    """Zero each element with probability `rate` and scale the rest by 1/(1-rate)."""
    if isinstance(rate, (bool, np.bool_)) or not isinstance(rate, (int, float, np.integer, np.floating)) \
            or not 0.0 <= rate < 1.0:
        raise ArgumentError(f"`dropout`: rate={rate!r}; it must be a number in [0, 1)")
    if rate == 0.0:
        return x
    keep = uniform(key, N._shape(x)) >= rate
    return N.where(keep, x / (1.0 - rate), 0.0)
