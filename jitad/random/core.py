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

from . import kernels
from .kernels import _threefry
from .. import numeric as N
from ..config import config
from ..errors import ArgumentError
from ..ir.types import FLOATS
from ..staging import is_staged

_M32 = 0xFFFFFFFF
_KEY_HELP = ("a key is an int (a seed), a key from jitad.random.key/split/fold_in (an int64 word), "
             "or a JAX uint32 key")


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


def _drawn(key, shape, who, transform, statics, values=()):
    """`transform(words, *statics, *values)` of the words of `shape`: eagerly through a
    compiled kernel (`kernels`), staged (or inside a trace) on the words themselves."""
    key = _one_key(key, who)
    if kernels.eager(key, values):
        return kernels.draw(key, shape, transform, statics, values)
    return transform(_words(key, shape, who), *statics, *values)


def _hi(w):
    return (w // 2 ** 32) & _M32


def _lo(w):
    return w & _M32


def _xor(a, b):
    return (a | b) - (a & b)


def _bits32(key, shape, who):
    return _bits_of(_words(key, shape, who), 32)


def _default_float():
    """float64, or float32 where `jax_enable_x64` is off (JAX's defaults either way)."""
    return np.float64 if config.read("jax_enable_x64") else np.float32


def _default_int():
    return np.int64 if config.read("jax_enable_x64") else np.int32


def _float_dtype(dtype, who):
    name = N._dtype_name(_default_float() if dtype is None else dtype, f"random.{who}")
    if name not in FLOATS:
        raise ArgumentError(f"random.{who}: dtype must be a float dtype (float32 or float64), got {dtype!r}")
    return name


def _cast(x, dtype):
    """`x` as NumPy dtype `dtype` (staged ints stay int64, the one staged int type)."""
    if not is_staged(x):
        return np.asarray(x).astype(dtype)
    return N.convert(x, "i64" if np.dtype(dtype).kind in "iub" and np.dtype(dtype) != np.bool_ else
                     N._dtype_name(dtype, "random"))


def _as(x, name):
    return N.convert(x, name) if is_staged(x) else np.asarray(x, N.NUMPY_OF[name])


# -- keys ----------------------------------------------------------------------------

def key(seed, *, impl=None):
    """The key of an int seed (a staged int works too): `jitad.random.key(0)`, as JAX's
    `PRNGKey(0)` (the words [0, 0]). `impl` may only name 'threefry2x32'."""
    if impl not in (None, "threefry2x32"):
        raise ArgumentError(f"random.key: impl={impl!r}; jitad implements only 'threefry2x32' (JAX's default)")
    return _one_key(seed, "key")


PRNGKey = key


def clone(key):
    """The same key, as `jax.random.clone` (jitad does not track key reuse)."""
    return key


def key_dtype(impl_spec=None):
    """The dtype of jitad's keys: int64, one word per key (JAX's typed keys have their own
    key dtype; jitad's are plain int64 arrays)."""
    if impl_spec not in (None, "threefry2x32"):
        raise ArgumentError(f"random.key_dtype: impl {impl_spec!r}; jitad implements only 'threefry2x32'")
    return np.dtype(np.int64)


def key_impl(keys):
    """The name of the generator behind `keys`: always JAX's default, 'threefry2x32'."""
    _as_keys(keys, "key_impl")
    return "threefry2x32"


def split(key, num=2):
    """`num` new keys (an int64 array of shape `num`, an int or a shape tuple), as
    `jax.random.split`: `k1, k2 = jitad.random.split(key)`."""
    return _drawn(key, _shape("split", num), "split", _bits_of, (64,))


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
    """Uniform random bits, as `jax.random.bits`: uint32 by default, or the unsigned
    `dtype` given (uint8/16 keep the low bits of 32, uint64 takes all 64); staged values
    are int64 holding them. `jitad.random.bits(key, (2,), np.uint8)`."""
    shape = _shape("bits", shape)
    width = 32 if dtype is None else np.dtype(dtype).itemsize * 8
    if dtype is not None and np.dtype(dtype).kind != "u":
        raise ArgumentError(f"random.bits: dtype must be an unsigned int dtype (uint8 ... uint64), got {dtype!r}")
    out = _drawn(key, shape, "bits", _bits_of, (width,))
    return out if is_staged(out) else np.asarray(out).astype(f"uint{width}")


def _bits_of(w, width):
    """The low `width` bits of 32 (hi ^ lo), or all 64, of words `w`."""
    if width == 64:
        return w
    out = _xor(_hi(w), _lo(w))
    return out & (2 ** width - 1) if width < 32 else out


def _unit(w, name):
    """Floats in [0, 1) from 64-bit words, as JAX makes them: the top mantissa-width bits
    of the 32 (float32: hi ^ lo) or 64 random bits, over 2**width."""
    if name == "f32":
        return _as(_xor(_hi(w), _lo(w)) // 2 ** 9, "f32") * np.float32(2.0 ** -23)
    return _as(_hi(w) * 2 ** 20 + _lo(w) // 2 ** 12, "f64") * 2.0 ** -52


def _halves(v):
    """v = hi + lo with 26-bit halves (Veltkamp's split)."""
    t = 134217729.0 * v
    hi = t - (t - v)
    return hi, v - hi


def _two_product(a, b):
    """(p, e) with p = fl(a * b) and p + e = a * b exactly (Dekker's product)."""
    (ah, al), (bh, bl), p = _halves(a), _halves(b), a * b
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _fma(a, b, c, name):
    """a * b + c rounded once, as XLA's CPU code fuses it: float32 through float64 (the
    product exact), float64 through Dekker's product and an exact sum."""
    if name == "f32":
        return _as(_as(a, "f64") * _as(b, "f64") + _as(c, "f64"), "f32")
    p, e = _two_product(a, b)
    s = p + c
    back = s - p
    t = (p - (s - back)) + (c - back)
    exact = s + (t + e)
    return N.where(N.abs(exact) < np.inf, exact, a * b + c)   # the splits overflow near the range's top


def _unit_range(minval, maxval):
    """Whether [minval, maxval) is [0, 1) as host values (the draw then needs no scaling)."""
    return not (is_staged(minval) or is_staged(maxval)) and bool(np.all(np.asarray(minval) == 0.0)) \
        and bool(np.all(np.asarray(maxval) == 1.0))


def _scaled(u, minval, maxval, name):
    """Uniform floats `u` in [0, 1) moved to [minval, maxval), as JAX (max(minval, u * span + minval))."""
    if _unit_range(minval, maxval):
        return u
    lo, hi = _as(minval, name), _as(maxval, name)
    return N.maximum(lo, _fma(u, hi - lo, lo, name))


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0):
    """Uniform floats in [minval, maxval) (float64 unless `dtype`), as `jax.random.uniform`:
    `jitad.random.uniform(key, (2, 3))`."""
    shape, name = _shape("uniform", shape), _float_dtype(dtype, "uniform")
    if _unit_range(minval, maxval):
        return _drawn(key, shape, "uniform", _unit, (name,))
    return _drawn(key, shape, "uniform", _uniform_of, (name,), (_as(minval, name), _as(maxval, name)))


def _uniform_of(w, name, minval, maxval):
    return _scaled(_unit(w, name), minval, maxval, name)


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


def _erfinv(x, name, w=None):
    """erfinv(x) for x in (-1, 1) of float dtype `name`; `w`, -log((1 - x)(1 + x)), where
    the caller has it more accurately than from x."""
    if w is None:
        w = -N.log((1.0 - x) * (1.0 + x))
    root, p = N.sqrt(w), None
    for bound, shift, of_root, coefficients in reversed(_ERFINV[name]):
        v = (root if of_root else w) - shift
        q = coefficients[0]
        for c in coefficients[1:]:
            q = q * v + c
        p = q if p is None else N.where(w < bound, q, p)
    return p * x


def _normal_of(w, name):
    """Standard normal floats from 64-bit words: sqrt(2) erfinv of a uniform on (-1, 1)."""
    lo = np.nextafter(N.NUMPY_OF[name](-1.0), N.NUMPY_OF[name](0.0))
    return _as(math.sqrt(2.0), name) * _erfinv(_scaled(_unit(w, name), lo, 1.0, name), name)


def normal(key, shape=(), dtype=None):
    """Standard normal floats, as `jax.random.normal`: `jitad.random.normal(key, (3,))`."""
    shape, name = _shape("normal", shape), _float_dtype(dtype, "normal")
    return _drawn(key, shape, "normal", _normal_of, (name,))


def _finfo(name):
    return np.finfo(N.NUMPY_OF[name])


def gumbel(key, shape=(), dtype=None, mode=None):
    """Standard Gumbel floats, as `jax.random.gumbel` (`mode='high'` draws two uniforms
    for the far tail): `jitad.random.gumbel(key, (3,))`."""
    name, shape = _float_dtype(dtype, "gumbel"), _shape("gumbel", shape)
    if mode == "high":
        u = uniform(key, (2,) + shape, name)
        x = N.where(u[0] >= 0.5, u[0], u[0] + 2.0 ** -(_finfo(name).nmant) * u[1] + _finfo(name).tiny)
        return -N.log(-N.log1p(-x))
    if mode not in (None, "low"):
        raise ArgumentError(f"random.gumbel: mode={mode!r}; use 'low' or 'high'")
    return -N.log(-N.log(uniform(key, shape, name, _finfo(name).tiny, 1.0)))


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
