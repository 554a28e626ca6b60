"""Discrete draws, as `jax.random`'s: bits compared, ints mapped into a range, and sorts
by random words (permutations, choices)."""
import numpy as np

from .. import numeric as N
from .. import numpy_api as A
from ..errors import ArgumentError, ShapeError
from ..staging import is_staged
from .core import (
    _M32,
    _as,
    _bits32,
    _cast,
    _default_float,
    _default_int,
    _one_key,
    _shape,
    _words,
    gumbel,
    split,
    uniform,
)

_MAX64 = 2 ** 63 - 1


def _p_dtype(p):
    """The float dtype JAX computes a probability in: float32 for float32 input or without
    x64, else float64."""
    f32 = getattr(p, "dtype", None) == np.float32 or getattr(p, "ir_dtype", None) == "f32"
    return "f32" if f32 or _default_float() == np.float32 else "f64"


def bernoulli(key, p=0.5, shape=None, mode="low"):
    """True with probability `p` (bool array), as `jax.random.bernoulli`
    (`mode='high'` resolves probabilities below the float's resolution):
    `jitad.random.bernoulli(key, 0.3, (5,))`."""
    shape = _shape("bernoulli", N._shape(p) if shape is None else shape)
    name = _p_dtype(p)
    if mode == "high":
        u = uniform(key, (2,) + shape, name)
        return u[1] * (2.0 ** -(23 if name == "f32" else 52)) < p - u[0]
    if mode != "low":
        raise ArgumentError(f"random.bernoulli: mode={mode!r}; use 'low' or 'high'")
    return uniform(key, shape, name) < p


def rademacher(key, shape=(), dtype=None):
    """-1 or +1 with equal odds (int64 unless `dtype`), as `jax.random.rademacher`."""
    b = bernoulli(key, 0.5, _shape("rademacher", shape))
    return _cast(2 * _cast(b, np.int64) - 1, _default_int() if dtype is None else dtype)


# -- randint: JAX's arithmetic on unsigned words, carried in int64 --------------------------

def _flip(x):
    """x with its top bit flipped: unsigned order becomes signed order."""
    return (x & _MAX64) + N.where(x < 0, 0, -2 ** 63)


def _umod(x, s):
    """x % s of 64-bit unsigned words held in int64 (s == 0 stands for 2**64)."""
    big = N.where(_flip(x) >= _flip(s), x - s, x)          # s >= 2**63: one subtraction at most
    s1 = N.where(s > 0, s, 1)
    top = (_MAX64 % s1 + 1) % s1                              # 2**63 % s
    low = (x & _MAX64) % s1
    wrapped = N.where(low >= s1 - top, low - (s1 - top), low + top)
    small = N.where(x >= 0, x % s1, wrapped)
    return N.where(s == 0, x, N.where(s < 0, big, small))


def _int_bounds(v):
    if is_staged(v):
        return N.convert(v, "i64")
    a = np.asarray(v)
    return a.astype(np.int64) if a.dtype.kind in "fb" else np.clip(a, -2 ** 63, _MAX64).astype(np.int64)


def randint(key, shape, minval, maxval, dtype=None):
    """Uniform ints in [minval, maxval), as `jax.random.randint` (its draws bit for bit):
    int64 unless `dtype`; 8- and 16-bit dtypes are drawn as int32, as JAX draws them.
    `jitad.random.randint(key, (3,), 0, 10)`."""
    dtype = np.dtype(_default_int() if dtype is None else dtype)
    if dtype.kind not in "iu":
        raise ArgumentError(f"random.randint: dtype must be an int dtype, got {dtype}")
    shape = _shape("randint", shape)
    info = np.iinfo(dtype)
    lo, hi = _int_bounds(minval), _int_bounds(maxval)
    if info.bits < 32:   # JAX: through int32, clipped to the small type (maxval one past its top)
        lo, hi = N.clip(lo, info.min, info.max), N.clip(hi, info.min, info.max + 1)
        info = np.iinfo(np.int32)
    over = hi > info.max
    lo, hi = N.clip(lo, info.min, info.max), N.clip(hi, info.min, info.max)
    k1, k2 = split(_one_key(key, "randint"))
    with np.errstate(all="ignore"):   # the wrapping arithmetic is the algorithm
        if info.bits == 64:
            high, low = _words(k1, shape, "randint"), _words(k2, shape, "randint")
            span = N.where(hi <= lo, 1, hi - lo)
            mult = _umod(N.full((), 2 ** 32, "i64") if is_staged(span) else np.int64(2 ** 32), span)
            mult = _umod(mult * mult, span)
            offset = _umod(_umod(high, span) * mult + _umod(low, span), span)
        else:
            high, low = _bits32(k1, shape, "randint"), _bits32(k2, shape, "randint")
            span = N.where(hi <= lo, 1, (hi - lo) & _M32)
            span = N.where(over & (hi > lo), (span + 1) & _M32, span)
            s1 = N.where(span == 0, 1, span)
            mod = lambda v: N.where(span == 0, v, v % s1)
            mult = mod(mod(2 ** 16) * mod(2 ** 16) & _M32)
            offset = mod(((mod(high) * mult) & _M32) + mod(low) & _M32)
        out = lo + offset
    return _cast(out, dtype)


# -- permutations and choices ----------------------------------------------------------------

def _sort_rounds(size):
    """JAX's count of sorts by 32-bit words: enough that ties are unlikely."""
    return int(np.ceil(3 * np.log(max(1, size)) / np.log(2.0 ** 32 - 1)))


def _shuffle(key, x, axis=0):
    """Sort `x` along `axis` by random 32-bit words, as JAX (stable sorts, fresh words each round)."""
    for _ in range(_sort_rounds(int(np.prod(N._shape(x), dtype=np.int64)))):
        key, sub = split(key)
        order = A.argsort(_bits32(sub, N._shape(x), "permutation"), axis=axis, kind="stable")
        x = A.take_along_axis(x, order, axis=axis)
    return x


def permutation(key, x, axis=0, independent=False):
    """A random permutation of `arange(x)` (an int) or of `x` along `axis` (each line on
    its own with `independent=True`), as `jax.random.permutation`."""
    key = _one_key(key, "permutation")
    if not N._shape(x):
        kind = np.asarray(x).dtype.kind if not is_staged(x) else "f"
        if isinstance(x, (bool, np.bool_)) or kind not in "iu":
            raise ArgumentError(f"random.permutation: x={x!r}; give an int n (a permutation of arange(n)) "
                                "or an array of at least one dimension")
        return _shuffle(key, np.arange(int(x), dtype=_default_int()))
    axis = axis % len(N._shape(x))
    if independent or len(N._shape(x)) == 1:
        return _shuffle(key, x, axis)
    return N.take(x, _shuffle(key, np.arange(N._shape(x)[axis])), axis=axis)


def choice(key, a, shape=(), replace=True, p=None, axis=0, mode=None):
    """Random samples of `a` (an array, or an int for `arange(a)`) along `axis`, as
    `jax.random.choice`: with or without replacement, with probabilities `p`.
    `jitad.random.choice(key, 5, (3,), replace=False)`."""
    key, shape = _one_key(key, "choice"), _shape("choice", shape)
    is_int = not N._shape(a)
    n = int(a) if is_int else N._shape(a)[axis]
    draws = int(np.prod(shape, dtype=np.int64))
    if draws == 0:
        return np.zeros(shape, np.int64 if is_int else np.asarray(a).dtype)
    if n <= 0:
        raise ArgumentError(f"random.choice: no values to choose from (a={a!r}); give at least one")
    if not replace and draws > n:
        raise ArgumentError(f"random.choice: {draws} draws without replacement from {n} values; "
                            "pass replace=True or ask for fewer")
    if p is not None and N._shape(p) != (n,):
        raise ShapeError(f"random.choice: p has shape {N._shape(p)}; it must be ({n},), one per value")
    if p is None:
        ind = randint(key, shape, 0, n) if replace else N.reshape(permutation(key, n)[:draws], shape)
        ind = _cast(ind, _default_int())
    elif replace:
        name = _p_dtype(p)
        cum = A.cumsum(_as(p, name))
        r = cum[-1] * (1.0 - uniform(key, shape, name))
        ind = _cast(N.sum(N.reshape(cum, (n,) + (1,) * len(shape)) < r, axis=0), _default_int())   # searchsorted
    else:
        g = gumbel(key, (n,), _p_dtype(p), mode) + N.log(_as(p, _p_dtype(p)))
        ind = _cast(N.reshape(A.top_k(g, draws)[1], shape), _default_int())
    return ind if is_int else N.take(a, ind, axis=axis)


def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None):
    """Indices drawn with probabilities softmax(logits) along `axis`, as
    `jax.random.categorical` (the Gumbel-max trick; Gumbel top-k without replacement):
    `jitad.random.categorical(key, np.log([0.2, 0.8]), shape=(5,))`."""
    lshape = N._shape(logits)
    axis = axis % len(lshape)
    batch = lshape[:axis] + lshape[axis + 1:]
    shape = batch if shape is None else _shape("categorical", shape)
    if shape[len(shape) - len(batch):] != batch:
        raise ShapeError(f"random.categorical: shape {shape} must end with the logits' batch shape {batch}")
    prefix = shape[:len(shape) - len(batch)]
    name = _p_dtype(logits)
    if not replace:
        k = int(np.prod(prefix, dtype=np.int64))
        if k > lshape[axis]:
            raise ArgumentError(f"random.categorical: {k} draws without replacement from {lshape[axis]} "
                                "categories; pass replace=True or ask for fewer")
        noisy = _as(logits, name) + gumbel(key, lshape, name, mode)
        top = A.top_k(A.moveaxis(noisy, axis, -1), k)[1]          # batch + (k,)
        return _cast(N.reshape(A.moveaxis(top, -1, 0), shape), np.int32)   # JAX's top_k indices
    noise_shape = prefix + batch[:axis] + (lshape[axis],) + batch[axis:]
    noisy = gumbel(key, noise_shape, name, mode) + N.reshape(logits, (1,) * len(prefix) + lshape)
    return _cast(A.argmax(noisy, axis=len(prefix) + axis), _default_int())
