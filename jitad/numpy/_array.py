"""`jitad.numpy.Array`: the NumPy array subclass that plain results of `jitad.numpy` are."""
import builtins as _builtins

import numpy as _np

from .. import numeric as _N
from ..lower import runtime as _runtime
from ..staging import is_staged as _is_staged


def _staged_any(xs):
    return _builtins.any(_is_staged(x) for x in xs)


# -- arrays: plain NumPy arrays with JAX's `.at` ------------------------------

class Array(_np.ndarray):
    """A NumPy array that also has JAX's `.at[...]` updates and accepts a staged index."""

    @property
    def at(self):
        """`x.at[i].set(v)`, `.add`, `.multiply`, `.min`, `.max`, `.get`: new arrays, as JAX's."""
        return _AtArray(_N.NUMPY_API["ndarray.at"](_np.asarray(self)))

    def __getitem__(self, key):
        keys = key if isinstance(key, tuple) else (key,)
        if _staged_any(keys):   # a constant table read at a staged index
            return _N.getitem(_np.asarray(self), key)
        return super().__getitem__(key)

    def block_until_ready(self):
        """Itself (jitad's results are ready when a call returns)."""
        return self

    # `x += y` makes a new array, as in JAX, so a reference kept elsewhere (a list of past
    # parameters) keeps its values; `x[i] = v` still writes in place, as NumPy and autograd
    __iadd__ = _np.ndarray.__add__
    __isub__ = _np.ndarray.__sub__
    __imul__ = _np.ndarray.__mul__
    __itruediv__ = _np.ndarray.__truediv__
    __ifloordiv__ = _np.ndarray.__floordiv__
    __imod__ = _np.ndarray.__mod__
    __ipow__ = _np.ndarray.__pow__
    __imatmul__ = _np.ndarray.__matmul__
    __iand__ = _np.ndarray.__and__
    __ior__ = _np.ndarray.__or__
    __ixor__ = _np.ndarray.__xor__


_runtime.native_array_subclass(Array)   # compiled entries take it as an ndarray


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


