"""Helpers the declarations share: the staged math their rules are written in, the
common VJP shapes and the common LLVM scalar rules."""
import numpy as np

from ..ir.types import FLOATS


class _StagedMath:
    """`jitad.numeric`, the staged math the derivative rules are written in.

    The one seam between the layers, kept on purpose: a VJP, JVP or batching rule builds
    staged code (`where`, `exp`, `reshape`, `bind(Op.X, ...)`), and the staged math is two
    layers up (`numeric` imports the declarations to make its wrappers; `staging` gives
    `Staged` its methods from it). Writing the rules in staging's terms alone would repeat
    numeric's broadcasting and promotion in every rule; handing the math to each rule as an
    argument would change every rule's signature for no gain. So `numeric` installs itself
    here when imported, and the rules, which run only while tracing, find it here. Nothing
    else is filled in: lowerings use no staged math."""
    module = None

    def __getattr__(self, name):
        return getattr(self.module, name)


N = _StagedMath()


# -- VJPs: vjp(g, *inputs, out, **attrs) -> one cotangent per input ----------------

def elementwise_vjp(*partials):
    """The VJP of an elementwise op from its partial derivatives, each
    `partial(*inputs, out) -> d out / d input` (None: no gradient to that input)."""
    def vjp(g, *args, **attrs):
        return tuple(None if d is None else g * d(*args) for d in partials)
    return vjp


def zero_gradient(g, *args, **attrs):
    """No cotangent flows to any input (piecewise constant, or not differentiable)."""
    return (None,) * (len(args) - 1)


def linear(transpose):
    """The VJP of an op linear in its single input: `transpose(g, x, out, **attrs)`."""
    return lambda g, x, out, **attrs: (transpose(g, x, out, **attrs),)


class Sparse:
    """A cotangent that adds `value` into rows `index` of its input (a VJP result for
    `index`/`gather`): reverse mode turns it into `slot_add_at`/`slot_scatter_add`."""

    def __init__(self, index, value):
        self.index, self.value = index, value


class Region:
    """A cotangent that adds `value` into a strided region of its input (the VJP of
    `slice`): reverse mode adds it in place with `slot_add_slice`, no zero-filled copy."""

    def __init__(self, value, starts, stops, steps):
        self.value, self.attrs = value, {"starts": starts, "stops": stops, "steps": steps}


# -- batching rules: batch(node, ins, size, mask) -> [(value, batched)] ------------
# `ins` are (value, batched) pairs; a batched value has the batch axis first; the rule
# returns None to run the node once per lane instead (jitad/transforms/vmap.py)

def batched(x, b, size):
    """`x` with the batch axis, broadcast if it is the same in every lane (`b` False)."""
    return x if b else N.broadcast_to(x, (size,) + x.shape)


def lift(x, rank):
    """Batched `x` with unit axes after the batch axis, to `rank` axes besides it."""
    shape = x.shape[1:]
    return x if len(shape) == rank else N.reshape(x, x.shape[:1] + (1,) * (rank - len(shape)) + shape)


def rebind(node, *args, **attrs):
    """`node`'s op on `args`, its attrs updated by `attrs`: one batched result."""
    return [(N.bind(node.op, *args, **{**node.attrs, **attrs}), True)]


def batch_stacked(node, ins, size, mask):
    """The rule of an op that takes leading batch axes on all its operands."""
    return rebind(node, *[batched(x, b, size) for x, b in ins])


def reduced_shape(shape, axes, keepdims):
    return tuple(1 if d in axes else n for d, n in enumerate(shape) if keepdims or d not in axes)


def unbroadcast(g, shape):
    """Sum `g` down to `shape` (the reverse of NumPy broadcasting)."""
    if g.shape == tuple(shape):
        return g
    lead = len(g.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(shape) if n == 1 and g.shape[lead + d] != 1)
    return N.reshape(N.sum(g, axis=axes), shape)


# -- LLVM scalar rules: rule(lowerer, node, ins) -> [value] ------------------------

def is_float(node):
    return node.inputs[0].type.dtype in FLOATS


def intrinsic(name):
    """An LLVM intrinsic taking and returning the operand type ("llvm.sin")."""
    return lambda lo, node, ins: [lo.b.call(lo.module.declare_intrinsic(name, [ins[0].type]), ins)]


def by_dtype(float_rule, int_rule):
    return lambda lo, node, ins: (float_rule if is_float(node) else int_rule)(lo, node, ins)


def instruction(name):
    """An IRBuilder instruction on the operands ("fadd")."""
    return lambda lo, node, ins: [getattr(lo.b, name)(*ins)]


def in_double(fn):
    """`fn(lo, x)` computed in double (float32 rounds the result: exact enough)."""
    def rule(lo, node, ins):
        return [lo.narrow(fn(lo, lo.widen(ins[0])), ins[0].type)]
    return rule


def impl_float(fn):
    """A NumPy meaning from a scalar math function, keeping the operand's float type."""
    ufunc = np.frompyfunc(fn, 1, 1)

    def impl(x):
        x = np.asarray(x)
        return np.asarray(ufunc(x), dtype=x.dtype)[()]
    return impl
