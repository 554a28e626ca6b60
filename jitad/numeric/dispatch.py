"""NumPy's functions and ufuncs on staged values (`np.sin(x)`, `np.ones(3) + x`, `np.sum(x)`):
the jitad function of the same name, or a StagingError naming the one to call."""
import functools
import inspect

from ..errors import StagingError
from ..ir.ops import Op
from ..staging import binary, logical
from .math import NUMPY_API, matmul
from . import indexing, math


# the public functions (`__all__`) of math.py and indexing.py, by name
_PUBLIC = {name: getattr(part, name) for part in (math, indexing) for name in part.__all__}

_NUMPY_UFUNCS = {
    **{name: functools.partial(binary, op) for name, op in (
        ("add", Op.ADD), ("subtract", Op.SUB), ("multiply", Op.MUL), ("divide", Op.DIV), ("power", Op.POW),
        ("remainder", Op.MOD), ("floor_divide", Op.FLOORDIV), ("less", Op.LT), ("less_equal", Op.LE),
        ("greater", Op.GT), ("greater_equal", Op.GE), ("equal", Op.EQ), ("not_equal", Op.NE))},
    "bitwise_and": functools.partial(logical, Op.AND), "bitwise_or": functools.partial(logical, Op.OR),
    "invert": lambda a: ~a, "negative": lambda a: -a, "positive": lambda a: a, "absolute": _PUBLIC["abs"],
    "matmul": matmul,
    **{name: _PUBLIC[name] for name in ("exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tanh",
                                          "maximum", "minimum", "square")}}
_NUMPY_ALIASES = {"amax": "max", "amin": "min", "absolute": "abs", "fabs": "abs"}
_NUMPY_REDUCTIONS = {"add": "sum", "maximum": "max", "minimum": "min"}


def numpy_ufunc(ufunc, method, inputs, kwargs):
    """`np.<ufunc>(...)` with a staged input: the jitad operation, or a StagingError."""
    name = ufunc.__name__
    fn = _NUMPY_UFUNCS.get(name) or (_PUBLIC[name] if name in _PUBLIC else NUMPY_API.get(name))
    if "out" in kwargs:
        raise _numpy_error(f"np.{name}(..., out=...) or an in-place operator (`a += x`) writing a staged "
                           "value into a NumPy array", "Write `a = a + x` to make a new value")
    if method != "__call__" or kwargs or fn is None:
        call = f"np.{name}" + (f".{method}" if method != "__call__" else "") + \
            (f"(..., {', '.join(kwargs)}=...)" if kwargs else "")
        jitad_name = _NUMPY_REDUCTIONS.get(name) if method == "reduce" else _NUMPY_ALIASES.get(name, name)
        return _no_numpy(call, jitad_name)
    return fn(*inputs)


def numpy_function(func, args, kwargs):
    """`np.<function>(...)` with a staged argument: the jitad function of the same name when its
    signature takes the arguments, or a StagingError naming the one to call."""
    name = _NUMPY_ALIASES.get(func.__name__, func.__name__)
    if name in ("shape", "ndim", "size"):   # NumPy's own code reads the attribute
        return func._implementation(*args, **kwargs)
    call = f"{func.__module__.replace('numpy', 'np', 1)}.{func.__name__}"
    if func.__module__ == "numpy.linalg":   # np.linalg.solve runs jitad.linalg.solve
        name = f"linalg.{name}"
    fn = _PUBLIC.get(name) if name in _PUBLIC else NUMPY_API.get(name)
    if fn is None:
        return _no_numpy(call, None)
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return _no_numpy(f"{call}({', '.join(kwargs)}{'=...' if kwargs else ''})", name, fn)
    return fn(*args, **kwargs)


def _numpy_error(what, fix):
    return StagingError(f"{what}: NumPy cannot compute on a staged value, whose value is only "
                        f"known when the compiled code runs. {fix}")


def _no_numpy(call, jitad_name, fn=None):
    fn = fn or (_PUBLIC[jitad_name] if jitad_name in _PUBLIC else None)
    if fn is not None:
        fix = f"Call `jitad.{jitad_name}{inspect.signature(fn)}` instead"
    else:
        fix = "jitad has no function of that name: write it with jitad's functions (jitad.exp, jitad.sum, ...)"
    raise _numpy_error(f"{call} on a staged value", fix)
