"""Collectives over a named axis of `vmap(..., axis_name=...)`: `lax.psum`, `pmean`,
`pmax`, `pmin`, `all_gather`, `ppermute`, `pshuffle`, `pbroadcast`, `psum_scatter`,
`all_to_all` and `axis_index`.

`vmap` with an axis name gives the traced function one more batched input, the lanes'
own indices 0..n-1, and binds the name to it here (`AXES`) while it traces. A
collective is one primitive, `named`, on its operand and that lane index. The lane index
is batched exactly at the `vmap` that named it, so that `vmap`'s batching rule performs the
collective over the batch axis; an inner `vmap` sees the lane index unbatched and lifts
the collective over its own axis unchanged (JAX's semantics for nested named axes).
A `named` node no `vmap` batched is an unbound axis name: an error when compiled."""
import contextlib

import numpy as np

from ..errors import ArgumentError
from ..ir.ops import declare
from ..ir.types import Type
from .rules import N

AXES = []   # (name, size, lane index) of the enclosing named vmaps, innermost last


@contextlib.contextmanager
def bound(name, size, lane):
    AXES.append((name, size, lane))
    try:
        yield
    finally:
        AXES.pop()


def lookup(name, who):
    """The (size, lane index) of axis `name`, innermost first."""
    for n, size, lane in reversed(AXES):
        if n == name:
            return size, lane
    bound_names = [n for n, _, _ in AXES]
    raise ArgumentError(f"`lax.{who}`: unbound axis name {name!r} (bound here: {bound_names or 'none'}); "
                        f"run it inside `jitad.vmap(f, axis_name={name!r})`")


# -- the shapes and the work of each kind, on the lanes stacked along axis 0 ---------

def _out_shape(kind, shape, a):
    n = a["size"]
    if kind == "all_gather":
        axis = a["axis"]
        if a["tiled"]:
            return shape[:axis] + (shape[axis] * n,) + shape[axis + 1:]
        return shape[:axis] + (n,) + shape[axis:]
    if kind == "psum_scatter":
        d = a["axis"]
        return shape[:d] + ((shape[d] // n,) if a["tiled"] else ()) + shape[d + 1:]
    if kind == "all_to_all":
        split, concat = a["split_axis"], a["concat_axis"]
        out = list(shape)
        out[split] //= n
        out[concat] *= n
        return tuple(out)
    return shape


def _type_rule(op, types, attrs, bodies):
    x = types[0]
    return [Type(x.dtype, tuple(_out_shape(attrs["kind"], tuple(x.shape), attrs)))]


def _move(x, src, dst):
    return N.NUMPY_API["moveaxis"](x, src, dst)


def _collective(kind, x, a):
    """`(result, batched)`: the result of every lane from the operands of every lane
    stacked along axis 0 (`x`); a result equal in every lane comes unbatched."""
    n = a["size"]
    if kind in ("psum", "pmean", "pmax", "pmin"):
        reduce = {"psum": N.sum, "pmean": N.mean, "pmax": N.max, "pmin": N.min}[kind]
        return reduce(x, (0,)), False
    if kind in ("ppermute", "pshuffle", "pbroadcast"):
        source = _sources(kind, a, n)   # lane j reads lane source[j] (-1: zeros)
        taken = N.getitem(x, np.maximum(source, 0))
        keep = (source >= 0).reshape((n,) + (1,) * (len(x.shape) - 1))
        return N.where(keep, taken, N.zeros_like(taken)), True
    if kind == "all_gather":
        whole, axis = _move(x, 0, a["axis"]), a["axis"]          # every lane's value, in lane order
        if a["tiled"]:
            s = whole.shape
            whole = N.reshape(whole, s[:axis] + (s[axis] * s[axis + 1],) + s[axis + 2:])
        return whole, False
    if kind == "psum_scatter":
        total, d = N.sum(x, (0,)), a["axis"]
        parts = N.reshape(total, total.shape[:d] + (n, total.shape[d] // n) + total.shape[d + 1:])
        parts = _move(parts, d, 0)                                   # lane j gets chunk j
        return (parts if a["tiled"] else N.reshape(parts, parts.shape[:d + 1] + parts.shape[d + 2:])), True
    if kind == "all_to_all":
        s, sp, cc = x.shape, a["split_axis"] + 1, a["concat_axis"] + 1
        chunks = N.reshape(x, s[:sp] + (n, s[sp] // n) + s[sp + 1:])   # chunk k of each lane goes to lane k
        chunks = _move(_move(chunks, sp, 0), 1, cc)                  # (dest, ..., source, concat axis, ...)
        c = chunks.shape
        return N.reshape(chunks, c[:cc] + (c[cc] * c[cc + 1],) + c[cc + 2:]), True
    raise ArgumentError(f"unknown collective {kind!r}")


def _sources(kind, a, n):
    if kind == "pbroadcast":
        return np.full(n, a["source"])
    if kind == "pshuffle":
        return np.asarray(a["perm"])
    source = np.full(n, -1)
    for s, d in a["perm"]:
        source[d] = s
    return source


def _batch(node, ins, size, mask):
    (x, bx), (lane, blane) = ins
    a = node.attrs
    if not blane:   # another vmap's axis: lift the collective over this one
        lifted = {k: v + 1 for k, v in a.items() if k in ("axis", "split_axis", "concat_axis")}
        return [(N.bind(node.op, x if bx else N.broadcast_to(x, (size,) + x.shape), lane, **{**a, **lifted}), True)]
    x = x if bx else N.broadcast_to(x, (size,) + x.shape)
    return [_collective(a["kind"], x, a)]


def _again(kind, g, lane, a, **changes):
    return N.bind(OP, g, lane, **{**a, "kind": kind, **changes})


def _vjp(g, x, lane, out, **a):
    kind = a["kind"]
    if kind in ("psum", "pmean"):
        return _again(kind, g, lane, a), None
    if kind in ("pmax", "pmin"):
        hit = N.convert(x == out, g.ir_dtype)
        return hit * _again("psum", g, lane, a) / _again("psum", hit, lane, a), None
    if kind == "ppermute":
        return _again("ppermute", g, lane, a, perm=tuple((d, s) for s, d in a["perm"])), None
    if kind == "pshuffle":
        return _again("pshuffle", g, lane, a, perm=tuple(int(i) for i in np.argsort(a["perm"]))), None
    if kind == "pbroadcast":
        total = _again("psum", g, lane, a)
        return N.where(lane == a["source"], total, N.zeros_like(total)), None
    if kind == "all_gather" and not a["tiled"]:
        total = _again("psum", g, lane, {k: v for k, v in a.items() if k not in ("axis", "tiled")})
        picked = N.getitem(_move(total, a["axis"], 0), lane)
        return picked, None
    raise ArgumentError(f"`lax.{kind}` with tiled={a.get('tiled')}: reverse mode inside a named vmap is not "
                        "supported for it; differentiate outside the vmap (grad of vmap)")


def _jvp(node, tangents, primals, out):
    a = node.attrs
    t = tangents[0]
    if a["kind"] in ("pmax", "pmin"):
        hit = N.convert(primals[0] == out, t.ir_dtype)
        lane = primals[1]
        return _again("psum", hit * t, lane, a) / _again("psum", hit, lane, a)
    return N.bind(node.op, t, primals[1], **a)


def _unbound(*args, **attrs):
    raise ArgumentError(f"`lax.{attrs['kind']}` over axis {attrs['axis_name']!r} ran outside the vmap that "
                        "names it (a vmap running its function once per lane, e.g. around `hvp`, cannot "
                        "run collectives)")


OP = declare("named", _type_rule, _unbound, arity=2, flags="pure", vjp=_vjp, jvp=_jvp, batch=_batch,
             llvm=lambda lo, node, ins: _unbound(**node.attrs))


def collective(kind, x, axis_name, who, **attrs):
    """`kind` of the operand over the lanes of the named vmap axis `axis_name`."""
    size, lane = lookup(axis_name, who)
    x = x if hasattr(x, "ir_dtype") else np.asarray(x)
    return N.bind(OP, x, lane, kind=kind, axis_name=axis_name, size=size, **attrs)
