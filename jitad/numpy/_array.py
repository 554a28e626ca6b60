"""`jitad.numpy.Array`: the NumPy array subclass that plain results of `jitad.numpy` are."""
import builtins as _builtins

import numpy as _np

from .. import cpu_device as _cpu_device, numeric as _N
from ..config import config as _config
from ..errors import ShapeError as _ShapeError
from ..dtypes import narrowed as _narrowed, requested_dtype as _requested_dtype
from ..lower import runtime as _runtime
from ..staging import is_staged as _is_staged


def _staged_any(xs):
    return _builtins.any(_is_staged(x) for x in xs)


# -- arrays: plain NumPy arrays with JAX's `.at` ------------------------------

class Array(_np.ndarray):
    """A NumPy array that also has JAX's `.at[...]` updates, accepts a staged index and
    clamps an index out of bounds (`jnp.arange(3)[5]` is 2), as JAX does."""

    @property
    def at(self):
        """`x.at[i].set(v)`, `.add`, `.multiply`, `.min`, `.max`, `.get`: new arrays, as JAX's."""
        return _AtArray(_N.NUMPY_API["ndarray.at"](_np.asarray(self)))

    def __getitem__(self, key):
        keys = key if isinstance(key, tuple) else (key,)
        if _staged_any(keys):   # a constant table read at a staged index
            return _N.getitem(_np.asarray(self), key)
        try:
            return super().__getitem__(key)
        except IndexError:   # an index out of bounds is clamped, as JAX's (and jitad's staged) indexing does
            return _N.getitem(_np.asarray(self), key)

    def __iter__(self):   # NumPy's rows (Python's fallback would index on past the end: indexes clamp)
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (_np.ndarray.__getitem__(self, i) for i in range(self.shape[0]))

    def block_until_ready(self):
        """Itself (jitad's results are ready when a call returns)."""
        return self

    # JAX's array interface on the one CPU device (`jitad.devices()`)
    @property
    def device(self):
        """The device holding the array: `jitad.devices()[0]`."""
        return _cpu_device.CPU

    def devices(self):
        """The set of devices holding parts of the array: `{jitad.devices()[0]}`."""
        return {_cpu_device.CPU}

    @property
    def sharding(self):
        """How the array lies over devices: whole on the CPU device, a `SingleDeviceSharding`."""
        return _cpu_device.array_sharding()

    is_fully_replicated = True
    is_fully_addressable = True
    committed = _committed = False   # JAX reads `_committed`: an uncommitted array may be placed anywhere
    weak_type = False

    def addressable_data(self, index):
        """The data on local device `index` (0, the only one): the array itself."""
        if index != 0:
            raise IndexError(f"addressable_data({index}): the array lives on one device, index 0")
        return self

    @property
    def addressable_shards(self):
        """One `Shard` per device: the whole array on the CPU device."""
        return [_cpu_device.Shard(self)]

    global_shards = addressable_shards

    def copy_to_host_async(self):
        """Nothing to do: the array is host memory."""
        return None

    def delete(self):
        """Accepted (the memory is freed when the last reference goes, as for NumPy arrays)."""
        return None

    def is_deleted(self):
        return False

    def unsafe_buffer_pointer(self):
        """The address of the array's first element."""
        return self.__array_interface__["data"][0]

    def on_device_size_in_bytes(self):
        return self.nbytes

    def to_device(self, device, /, *, stream=None):
        """The array on `device` (the CPU): itself."""
        return self

    def __str__(self):
        # (NumPy's printing of a subclass indexes it element by element through
        # `__getitem__`: the plain array prints the same text without those calls)
        return _np.ndarray.__str__(self.view(_np.ndarray) if type(self) is Array else self)

    def __repr__(self):
        # (NumPy writes a subclass by its class name: "Array(" is as wide as "array(")
        if type(self) is not Array:
            return _np.ndarray.__repr__(self)
        return "Array" + _np.ndarray.__repr__(self.view(_np.ndarray))[5:]

    def __matmul__(self, other):
        return _product(_np.ndarray.__matmul__, self, other)

    def __rmatmul__(self, other):
        return _product(_np.ndarray.__rmatmul__, self, other, flip=True)

    # `x += y` makes a new array, as in JAX, so a reference kept elsewhere (a list of past
    # parameters) keeps its values; `x[i] = v` still writes in place, as NumPy and autograd
    __iadd__ = _np.ndarray.__add__
    __isub__ = _np.ndarray.__sub__
    __imul__ = _np.ndarray.__mul__
    __itruediv__ = _np.ndarray.__truediv__
    __ifloordiv__ = _np.ndarray.__floordiv__
    __imod__ = _np.ndarray.__mod__
    __ipow__ = _np.ndarray.__pow__
    __imatmul__ = __matmul__
    __iand__ = _np.ndarray.__and__
    __ior__ = _np.ndarray.__or__
    __ixor__ = _np.ndarray.__xor__


def _product(method, a, b, flip=False):
    """NumPy's `a @ b`, with a mismatch of shapes as the `ShapeError` (also a `TypeError`, as
    JAX raises) that `jnp.matmul` and staged code raise, not NumPy's bare `ValueError`."""
    try:
        return method(a, b)
    except ValueError:
        shapes = (_np.shape(b), _np.shape(a)) if flip else (_np.shape(a), _np.shape(b))
        if _builtins.any(len(s) == 0 for s in shapes):
            raise
        raise _ShapeError(f"`matmul`: shapes {shapes[0]} and {shapes[1]} do not multiply: the last axis of "
                          "the first must match the second's second-to-last (its only axis if 1-d)") from None


_runtime.native_array_subclass(Array)   # compiled entries take it as an ndarray


# -- where jax_enable_x64 is off: JAX's 32-bit dtypes (installed only then: NumPy's own
# methods, a Python-level call fewer, serve the default)

def _array_wrap(self, out, context=None, return_scalar=False):
    """NumPy's results on Arrays in 32 bits (an int32 Array divided, or times a Python float,
    is float32, as JAX's)."""
    wrap = self.dtype not in (_np.int64, _np.uint64)   # int32 operands: int32 arithmetic's results
    return _np.ndarray.__array_wrap__(self, _narrowed(out, wrap=wrap), context, return_scalar)


def _astype(self, dtype, *args, **kwargs):
    """NumPy's `astype`, a 64-bit dtype made 32-bit (with JAX's warning unless it is Python's)."""
    return _np.ndarray.astype(self, _requested_dtype(dtype, "astype"), *args, **kwargs)


def _x64_changed(name, value):
    if name != "jax_enable_x64":
        return
    for attr, method in (("__array_wrap__", _array_wrap), ("astype", _astype)):
        if value and attr in Array.__dict__:
            delattr(Array, attr)
        elif not value:
            setattr(Array, attr, method)


_config.on_update(_x64_changed)
_x64_changed("jax_enable_x64", _config.jax_enable_x64)   # (its environment variable)


class _AtArray:
    def __init__(self, at):
        self._at = at

    def __getitem__(self, index):
        return _AtArray(self._at[index])

    def get(self, **kwargs):
        return _wrap(self._at.get(**kwargs))

    def __getattr__(self, how):
        update = getattr(self._at, how)
        return lambda v, **kwargs: _wrap(update(v, **kwargs))


def _wrap(x):
    return x.view(Array) if type(x) is _np.ndarray else x


