"""Types of SSA values: scalars and static-shape tensors of a dtype, and tree handles."""
import math
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError

DTYPES = ("bool", "i64", "f32", "f64")
FLOATS = ("f32", "f64")
NUMPY = {"bool": np.bool_, "i64": np.int64, "f32": np.float32, "f64": np.float64}
ITEMSIZE = {dtype: np.dtype(t).itemsize for dtype, t in NUMPY.items()}   # bytes of an element


@dataclass(frozen=True, slots=True)
class Type:
    dtype: str
    shape: tuple = ()

    def __str__(self):
        if not self.shape:
            return self.dtype
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"

    @property
    def is_float(self):
        return self.dtype in FLOATS

    @property
    def nbytes(self):
        """Bytes of a value of this type (`Type("f32", (2, 3)).nbytes == 24`)."""
        return math.prod(self.shape) * ITEMSIZE[self.dtype]


# A tree's runtime descriptor (`jitad.Tree` builds it, compiled code reads it): words
# for the node count, root, child arrays, the number of nodes reachable from the root
# and their post-order (children before parents), then one array per field.
DESCRIPTOR = {"size": 0, "root": 1, "left": 2, "right": 3, "reachable": 4, "order": 5}
FIRST_FIELD = 6


def is_device_array(x):
    """A numba device array (real or the CUDA simulator's), without importing numba.cuda."""
    return hasattr(x, "copy_to_host") and hasattr(x, "dtype") and hasattr(x, "shape")


@dataclass(frozen=True, slots=True)
class TreeType:
    """A `jitad.Tree` input: child arrays plus named per-node fields (name, dtype).
    `forest`: None, or `(lanes, width)` for a `jitad.Forest` (a batch of `lanes` trees
    packed level by level in chunks of `width` nodes; its fields then include the
    packing's own, named with a leading underscore)."""
    fields: tuple
    forest: tuple = None

    def __str__(self):
        kind = "forest{}".format(self.forest) if self.forest else "tree"
        return kind + "{" + ",".join(f"{n}:{d}" for n, d in self.fields) + "}"

    def field_dtype(self, name):
        return dict(self.fields).get(name)


class _Holder:
    """A type holding values of `Type(dtype, shape)`: `value_type`."""
    __slots__ = ()
    value_type = property(lambda self: Type(self.dtype, self.shape))


@dataclass(frozen=True, slots=True)
class RefType(_Holder):
    """A mutable slot holding a value of `Type(dtype, shape)` (an adjoint or a result):
    an `alloca` for a scalar, an arena buffer for a tensor."""
    dtype: str
    shape: tuple = ()

    def __str__(self):
        return f"ref<{self.value_type}>"


@dataclass(frozen=True, slots=True)
class ContType:
    """A continuation: a closure taking `params` and returning nothing."""
    params: tuple

    def __str__(self):
        return "cont(" + ",".join(map(str, self.params)) + ")"


@dataclass(frozen=True, slots=True)
class TableType(_Holder):
    """One value of `Type(dtype, shape)` per node of a tree (reverse mode's tape for TREE)."""
    dtype: str
    shape: tuple = ()

    def __str__(self):
        return f"table<{self.value_type}>"


F64, I64, BOOL = Type("f64"), Type("i64"), Type("bool")


def dtype_of_numpy(dt):
    """jitad dtype name for a numpy dtype, or None."""
    dt = np.dtype(dt)
    if dt == np.bool_:
        return "bool"
    if dt.kind in "iu":
        return "i64"
    if dt == np.float32:
        return "f32"
    if dt.kind == "f":
        return "f64"
    return None


def check_int64_range(a, what="an unsigned array"):
    """Refuse an unsigned array holding a value beyond int64 (as int64 it would wrap negative)."""
    if isinstance(a, np.ndarray) and a.dtype.kind == "u" and a.size:
        top = a.max()
        if top > np.iinfo(np.int64).max:
            raise ArgumentError(f"{what} holds {top}, beyond the int64 range")


def clean_bools(a):
    """`a`, or for a bool array holding bytes other than 0 and 1 (made by `.view(bool)`),
    a copy with those bytes as 1: compiled code reads a bool as one bit."""
    if a.dtype != np.bool_ or not a.size:
        return a
    bytes_ = a.view(np.uint8)
    return bytes_ != 0 if bytes_.max() > 1 else a


def promote(a, b):
    """The common dtype of two dtypes (bool < i64 < f32 < f64, as NumPy)."""
    order = {"bool": 0, "i64": 1, "f32": 2, "f64": 3}
    if {a, b} == {"i64", "f32"}:
        return "f64"
    return a if order[a] >= order[b] else b
