"""The math functions of SPEC §1, for staged values and plain numbers alike.

On Python or NumPy numbers they compute eagerly with NumPy; on staged values they
record a node. `jitad.exp(x)` is to jitad what `jnp.exp(x)` is to JAX.
"""
from .errors import ArgumentError
from .ir.ops import Op
from .staging import Staged, as_var, binary, emit, is_staged, result_dtype, to_bool, unary

__all__ = ["exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tanh", "sigmoid", "relu",
           "abs", "square", "maximum", "minimum", "where", "clip", "convert"]


def _unary(op, doc):
    def fn(x):
        return unary(op, x)
    fn.__name__ = op.value
    fn.__doc__ = doc
    return fn


exp = _unary(Op.EXP, "e**x, elementwise: `jitad.exp(1.0) == 2.718281828459045`.")
log = _unary(Op.LOG, "Natural logarithm: `jitad.log(jitad.exp(2.0)) == 2.0`.")
log1p = _unary(Op.LOG1P, "log(1 + x), accurate for small x: `jitad.log1p(1e-20) == 1e-20`.")
expm1 = _unary(Op.EXPM1, "exp(x) - 1, accurate for small x: `jitad.expm1(1e-20) == 1e-20`.")
sqrt = _unary(Op.SQRT, "Square root: `jitad.sqrt(4.0) == 2.0`.")
sin = _unary(Op.SIN, "Sine: `jitad.sin(0.0) == 0.0`.")
cos = _unary(Op.COS, "Cosine: `jitad.cos(0.0) == 1.0`.")
tanh = _unary(Op.TANH, "Hyperbolic tangent: `jitad.tanh(0.0) == 0.0`.")
sigmoid = _unary(Op.SIGMOID, "1 / (1 + exp(-x)): `jitad.sigmoid(0.0) == 0.5`.")
relu = _unary(Op.RELU, "max(x, 0), NaN propagating: `jitad.relu(-2.0) == 0.0`.")
abs = _unary(Op.ABS, "Absolute value: `jitad.abs(-2.0) == 2.0`.")
square = _unary(Op.SQUARE, "x * x: `jitad.square(3.0) == 9.0`.")


def maximum(a, b):
    """Elementwise maximum, NaN propagating as NumPy: `jitad.maximum(1.0, 2.0) == 2.0`."""
    return binary(Op.MAXIMUM, a, b)


def minimum(a, b):
    """Elementwise minimum, NaN propagating as NumPy: `jitad.minimum(1.0, 2.0) == 1.0`."""
    return binary(Op.MINIMUM, a, b)


def where(cond, a, b):
    """`a` where `cond` else `b`; both are computed: `jitad.where(x > 0, x, 0.0)`."""
    if not (is_staged(cond) or is_staged(a) or is_staged(b)):
        import numpy as np
        return np.where(cond, a, b)[()]
    dtype = result_dtype(a, b)
    c = to_bool(cond, "where")
    return Staged(emit(Op.SELECT, [c, as_var(a, dtype), as_var(b, dtype)])[0])


def clip(x, lo, hi):
    """`minimum(maximum(x, lo), hi)`: `jitad.clip(5.0, 0.0, 1.0) == 1.0`."""
    return minimum(maximum(x, lo), hi)


_DTYPE_NAMES = {"f64": "f64", "float64": "f64", "f32": "f32", "float32": "f32", "i64": "i64",
                "int64": "i64", "int": "i64", "float": "f64", "bool": "bool"}


def convert(x, dtype):
    """`x` as `dtype` ('f64', 'f32', 'i64', 'bool'); float to int truncates toward zero,
    saturates at the int64 range and sends NaN to 0: `jitad.convert(2.7, 'i64') == 2`."""
    name = _DTYPE_NAMES.get(getattr(dtype, "__name__", dtype))
    if name is None:
        raise ArgumentError(f"convert: unknown dtype {dtype!r}; use 'f64', 'f32', 'i64' or 'bool'")
    if not is_staged(x):
        from .ir.ops import IMPLS
        return IMPLS[Op.CONVERT](x, dtype=name)
    return Staged(as_var(x, name))
