"""autograd's `autograd.builtins`: containers and type tests for traced values.

In jitad, staged values sit in ordinary tuples, lists and dicts, and gradients flow
through them (they are pytrees), so `tuple`, `list` and `dict` are Python's own.
`isinstance` and `type` look through a staged value to the kind of value it stands
for: a staged f64 array is an `np.ndarray`, a staged f64 scalar a `float`.

>>> from jitad.builtins import isinstance, tuple
>>> jitad.jit(lambda x: float(isinstance(x, np.ndarray)))(np.ones(2))
1.0
"""
import builtins

import numpy as np

from .extend import (Box, SparseObject, VSpace, defjvp, defjvp_argnum, defvjp, defvjp_argnum,  # noqa: F401
                     notrace_primitive, primitive, vspace)
from .staging import is_staged

__all__ = ["Box", "ContainerVSpace", "DictBox", "DictMeta", "DictVSpace", "ListMeta", "ListVSpace",
           "NamedTupleVSpace", "SequenceBox", "SequenceVSpace", "SparseObject", "TupleMeta", "TupleVSpace",
           "VSpace", "container_take", "container_untake", "defjvp", "defjvp_argnum", "defvjp", "defvjp_argnum",
           "dict", "dict_", "fwd_grad_make_sequence", "grad_container_take", "grad_sequence_extend_left",
           "grad_sequence_extend_right", "isinstance", "isinstance_", "list", "list_", "make_sequence",
           "notrace_primitive", "primitive", "sequence_extend_left", "sequence_extend_right", "subvals", "tuple",
           "tuple_", "type", "type_", "vspace"]

tuple_, list_, dict_, isinstance_, type_ = builtins.tuple, builtins.list, builtins.dict, builtins.isinstance, \
    builtins.type
tuple, list, dict = builtins.tuple, builtins.list, builtins.dict   # noqa: A001 (autograd's names)
TupleMeta = ListMeta = DictMeta = builtins.type   # the metaclass of the container types
SequenceBox = DictBox = Box   # a staged value inside a container is a staged value
ContainerVSpace = SequenceVSpace = ListVSpace = TupleVSpace = DictVSpace = NamedTupleVSpace = VSpace

_STAGED_TYPES = {"f64": float, "f32": np.float32, "i64": int, "bool": bool}


def type(obj, *bases_and_namespace):   # noqa: A001 (autograd's name)
    """The type of the value `obj` stands for: `np.ndarray` for a staged array, `float`,
    `int` or `bool` for a staged scalar, else `type(obj)` (and `type(name, bases, dict)`
    makes a class, as Python's)."""
    if bases_and_namespace:
        return type_(obj, *bases_and_namespace)
    if is_staged(obj):
        return np.ndarray if builtins.len(obj.shape) else _STAGED_TYPES[obj.ir_dtype]
    return type_(obj)


def isinstance(obj, class_or_tuple):   # noqa: A001 (autograd's name)
    """`isinstance` on the value `obj` stands for (see `type`)."""
    if is_staged(obj):
        classes = class_or_tuple if isinstance_(class_or_tuple, tuple_) else (class_or_tuple,)
        return builtins.any(isinstance_(obj, c) or issubclass(type(obj), c) or (c is Box) for c in classes)
    return isinstance_(obj, class_or_tuple)


def subvals(x, ivs):
    """The tuple `x` with the values `(index, value)` of `ivs` put in."""
    out = builtins.list(x)
    for i, v in ivs:
        out[i] = v
    return tuple_(out)


def container_take(A, idx):
    """`A[idx]`."""
    return A[idx]


def container_untake(x, idx, vs):
    """The zero of the container space `vs` with `x` at `idx` (the cotangent of `container_take`)."""
    zeros = vs.zeros()
    if isinstance_(zeros, dict_):
        return {**zeros, idx: x}
    out = list_(zeros)
    out[idx] = x
    return type_(zeros)(out) if not hasattr(zeros, "_fields") else type_(zeros)(*out)


def grad_container_take(ans, A, idx):
    """The VJP maker of `container_take`."""
    return lambda g: container_untake(g, idx, vspace(A))


def sequence_extend_left(seq, *elts):
    """`elts` in front of the sequence `seq`, of `seq`'s type."""
    return type_(seq)(list_(elts) + list_(seq))


def sequence_extend_right(seq, *elts):
    """`seq` followed by `elts`, of `seq`'s type."""
    return type_(seq)(list_(seq) + list_(elts))


def grad_sequence_extend_left(argnum, ans, args, kwargs):
    """The VJP maker of `sequence_extend_left`: the sequence's part or one element's."""
    n = builtins.len(args) - 1
    return lambda g: g[n:] if argnum == 0 else g[argnum - 1]


def grad_sequence_extend_right(argnum, ans, args, kwargs):
    """The VJP maker of `sequence_extend_right`."""
    n = builtins.len(args[0])
    return lambda g: g[:n] if argnum == 0 else g[n + argnum - 1]


def make_sequence(seq_type, *args):
    """`seq_type(args)`: a tuple or list of the values."""
    return seq_type(args)


def fwd_grad_make_sequence(argnum, g, ans, seq_type, *args, **kwargs):
    """The tangent of `make_sequence` from argument `argnum`'s tangent `g`."""
    return container_untake(g, argnum - 1, vspace(ans))
