"""JAX's mutable array references (`jax.ref`, `jitad.new_ref`): a box holding an array
that indexing reads and index assignment updates, eagerly or inside one staged
function (each write makes the box hold the updated array, `x.at[i].set(v)`).

>>> r = jitad.new_ref(np.zeros(3))
>>> r[1] = 5.0
>>> jitad.freeze(r)
array([0., 5., 0.])

A write inside a loop body (`FOR`, `WHILE`, `scan`) to a reference made outside it
does not reach the loop's later iterations: carry the array in the loop's state.
"""
import numpy as np

from . import numeric as N
from .errors import ArgumentError, JitadError
from .staging import is_staged

__all__ = ["Ref", "addupdate", "empty_ref", "free_ref", "freeze", "get", "new_ref", "set", "swap"]


class Ref:
    """A mutable reference to an array: `r[...]` reads it, `r[i] = v` writes."""

    def __init__(self, value):
        self._value = value if is_staged(value) else np.array(value)
        self._live = True

    def _check(self):
        if not self._live:
            raise JitadError("this reference was frozen or freed; read the value freeze() returned")

    @property
    def shape(self):
        return tuple(self._value.shape)

    @property
    def dtype(self):
        return self._value.dtype

    ndim = property(lambda self: len(self.shape))

    def __getitem__(self, index):
        self._check()
        if index is Ellipsis or index == ():
            return self._value if is_staged(self._value) else self._value.copy()
        return self._value[index]

    def __setitem__(self, index, value):
        self._check()
        if index is Ellipsis or index == ():   # the whole array replaced
            self._value = N.broadcast_to(value, self.shape) if is_staged(value) or is_staged(self._value) \
                else np.array(np.broadcast_to(value, self.shape), dtype=self._value.dtype)
        elif is_staged(self._value) or is_staged(value) or _staged_index(index):
            self._value = _at(self._value)[index].set(value)
        else:
            self._value[index] = value

    def __repr__(self):
        return f"Ref({self._value!r})"


def _staged_index(index):
    parts = index if isinstance(index, tuple) else (index,)
    return any(is_staged(p) for p in parts)


def _at(x):
    from .numpy import Array
    return (x if is_staged(x) else np.asarray(x).view(Array)).at


def new_ref(init_val, *, memory_space=None, kind=None):
    """A reference holding a copy of `init_val`."""
    return Ref(init_val)


def empty_ref(ty, memory_space=None):
    """A reference to an array of `ty`'s shape and dtype (a ShapeDtypeStruct), zero-filled."""
    if not hasattr(ty, "shape") or not hasattr(ty, "dtype"):
        raise ArgumentError(f"empty_ref takes a ShapeDtypeStruct, got {type(ty).__name__}")
    return Ref(np.zeros(ty.shape, ty.dtype))


def _ref(r, who):
    if not isinstance(r, Ref):
        raise ArgumentError(f"{who} takes a reference from new_ref, got {type(r).__name__}")
    r._check()
    return r


def freeze(ref):
    """The reference's final value; the reference may not be used again."""
    value = _ref(ref, "freeze")._value
    ref._live = False
    return value


def free_ref(ref):
    """End the reference's life (later reads and writes raise)."""
    _ref(ref, "free_ref")._live = False


def get(ref, idx=()):
    """`ref[idx]` (the whole array by default)."""
    return _ref(ref, "get")[idx if idx != () else ...]


def set(ref, idx, value):   # noqa: A001 (JAX's name)
    """`ref[idx] = value`."""
    _ref(ref, "set")[idx if idx != () else ...] = value


def swap(ref, idx, value):
    """`ref[idx] = value`, returning the value it replaces."""
    old = get(ref, idx)
    set(ref, idx, value)
    return old


def addupdate(ref, idx, x):
    """`ref[idx] += x`."""
    set(ref, idx, get(ref, idx) + x)
