"""`jitad.numpy`'s functions on complex values: each composed of jitad's real functions on
the real and imaginary parts (`staging.complex.Complex`), so every transformation and
backend runs them as real code.

`install(namespace)` puts a dispatcher in front of each name below: a complex argument (a
staged `Complex`, or a complex NumPy array beside a staged value) goes to the complex
version; anything else to the real function, unchanged. Three shapes of function cover most
of NumPy: elementwise math (formulas on the parts), functions linear in their array
arguments with real coefficients (reshape, sum, concatenate, ...: the function applied to
each part) and products multilinear in their operands (dot, einsum, ...: expanded into
products of parts).
"""
import functools
import itertools
import math

import numpy as np

from ..errors import UnsupportedError
from ..staging import Staged
from ..ir.ops import Op
from ..staging.complex import FUNCTIONS, Complex, binary_op, is_complex, make, parts

R = {}   # the real functions of jitad.numpy, by name (before `install` puts dispatchers in front)


def _zero_like(x):
    return R["zeros_like"](x) if isinstance(x, Staged) else np.zeros_like(np.asarray(x, dtype=float))


# -- elementwise -----------------------------------------------------------------------------

def _abs2(z):
    re, im = parts(z)
    return re * re if im is None else re * re + im * im


def _abs(z):
    re, im = parts(z)
    return R["abs"](re) if im is None else R["hypot"](re, im)


def _angle(z, deg=False):
    re, im = parts(z)
    out = R["arctan2"](_zero_like(re) if im is None else im, re)
    return out * (180.0 / math.pi) if deg else out


def _exp(z):
    re, im = parts(z)
    r = R["exp"](re)
    return make(r * R["cos"](im), r * R["sin"](im))


def _log(z):
    return make(0.5 * R["log"](_abs2(z)), _angle(z))


def _sqrt(z):   # sqrt|z| (cos t/2 + i sin t/2): smooth off the branch cut, as exp(log(z) / 2)
    s, half = R["sqrt"](_abs(z)), 0.5 * _angle(z)
    return make(s * R["cos"](half), s * R["sin"](half))


def _sin(z):
    x, y = parts(z)
    return make(R["sin"](x) * R["cosh"](y), R["cos"](x) * R["sinh"](y))


def _cos(z):
    x, y = parts(z)
    return make(R["cos"](x) * R["cosh"](y), -(R["sin"](x) * R["sinh"](y)))


def _ratio(num_re, num_im, den_re, den_im):
    """tan and tanh of x + iy: (num_re(2x) + i num_im(2y)) / (den_re(2x) + den_im(2y))."""
    def fn(z):
        x, y = parts(z)
        d = R[den_re](2 * x) + R[den_im](2 * y)
        return make(R[num_re](2 * x) / d, R[num_im](2 * y) / d)
    return fn


def _hyperbolic(a, b):
    """sinh (a, b = sinh, cosh) or cosh (cosh, sinh) of x + iy: a(x) cos y + i b(x) sin y."""
    def fn(z):
        x, y = parts(z)
        return make(R[a](x) * R["cos"](y), R[b](x) * R["sin"](y))
    return fn


def _z(z):
    return make(*parts(z))


def _arcsin(z):   # -i log(iz + sqrt(1 - z^2)), the principal branch
    w = _log(1j * _z(z) + _sqrt(1.0 - _z(z) * _z(z)))
    return make(w.imag, -w.real) if type(w) is Complex else -1j * w


ELEMENTWISE = {
    "abs": _abs, "absolute": _abs, "angle": _angle, "exp": _exp, "log": _log, "sqrt": _sqrt,
    "real": lambda z: parts(z)[0], "imag": lambda z: (lambda re, im: _zero_like(re) if im is None else im)(*parts(z)),
    "conj": lambda z: (lambda re, im: make(re, None if im is None else -im))(*parts(z)),
    "sin": _sin, "cos": _cos, "tan": _ratio("sin", "sinh", "cos", "cosh"),
    "sinh": _hyperbolic("sinh", "cosh"), "cosh": _hyperbolic("cosh", "sinh"),
    "tanh": _ratio("sinh", "sin", "cosh", "cos"),
    "square": lambda z: make(*parts(z)) * make(*parts(z)),
    "reciprocal": lambda z: 1.0 / make(*parts(z)),
    "log10": lambda z: _log(z) * (1.0 / math.log(10.0)), "log2": lambda z: _log(z) * (1.0 / math.log(2.0)),
    "log1p": lambda z: _log(1.0 + make(*parts(z))), "expm1": lambda z: _exp(z) - 1.0,
    "negative": lambda z: -make(*parts(z)), "positive": lambda z: make(*parts(z)),
    "isfinite": lambda z: R["isfinite"](parts(z)[0]) & R["isfinite"](ELEMENTWISE["imag"](z)),
    "exp2": lambda z: _exp(_z(z) * math.log(2.0)),
    "arcsinh": lambda z: _log(_z(z) + _sqrt(_z(z) * _z(z) + 1.0)),
    "arccosh": lambda z: _log(_z(z) + _sqrt(_z(z) + 1.0) * _sqrt(_z(z) - 1.0)),
    "arctanh": lambda z: 0.5 * (_log(1.0 + _z(z)) - _log(1.0 - _z(z))),
    "arcsin": _arcsin, "arccos": lambda z: math.pi / 2 - _arcsin(z),
    "arctan": lambda z: 0.5j * (_log(1.0 - 1j * _z(z)) - _log(1.0 + 1j * _z(z))),
}
ELEMENTWISE["conjugate"] = ELEMENTWISE["conj"]
BINARY = {name: functools.partial(binary_op, op) for name, op in (
    ("add", Op.ADD), ("subtract", Op.SUB), ("multiply", Op.MUL), ("divide", Op.DIV), ("power", Op.POW),
    ("equal", Op.EQ), ("not_equal", Op.NE))}
BINARY["true_divide"] = BINARY["divide"]


# -- linear functions with real coefficients: the function on each part -----------------------

def _lifted(name, data):
    """`name` applied to the real parts, then to the imaginary parts (a real array argument's
    imaginary part: zeros). `data(args)` -> the positions of the array arguments (an index,
    or (index, True) for a list of arrays)."""
    fn = R[name]

    def call(*args, **kwargs):
        re_args, im_args, any_im = list(args), list(args), False
        for at in data(args):
            seq = isinstance(at, tuple)
            at = at[0] if seq else at
            if at >= len(args):
                continue
            values = list(args[at]) if seq else [args[at]]
            ps = [parts(v) for v in values]
            any_im = any_im or any(im is not None for _, im in ps)
            res = [re for re, _ in ps]
            ims = [_zero_like(re) if im is None else im for re, im in ps]
            re_args[at], im_args[at] = (res, ims) if seq else (res[0], ims[0])
        if not any_im:
            return fn(*re_args, **kwargs)
        return _joined(fn(*re_args, **kwargs), fn(*im_args, **kwargs))
    call.__name__ = name
    return call


def _joined(re, im):
    if isinstance(re, (list, tuple)):
        return type(re)(_joined(r, i) for r, i in zip(re, im))
    return make(re, im)


_FIRST = lambda args: (0,)   # noqa: E731
_SEQ = lambda args: ((0, True),)   # noqa: E731
LINEAR = {name: _FIRST for name in (
    "reshape", "transpose", "squeeze", "expand_dims", "ravel", "flip", "fliplr", "flipud", "roll", "rot90",
    "moveaxis", "swapaxes", "rollaxis", "broadcast_to", "tile", "repeat", "sum", "mean", "cumsum", "trace", "diag",
    "diagonal", "tril", "triu", "take", "take_along_axis", "atleast_1d", "atleast_2d", "atleast_3d", "diff", "split",
    "array_split", "hsplit", "vsplit", "dsplit", "nansum", "diagflat")}
LINEAR.update({name: _SEQ for name in ("concatenate", "concat", "stack", "hstack", "vstack", "row_stack",
                                       "column_stack", "dstack")})
LINEAR.update(where=lambda args: (1, 2), append=lambda args: (0, 1), compress=lambda args: (1,),
              pad=lambda args: (0,))


# -- products: multilinear in their operands ---------------------------------------------------

def _multilinear(name, data):
    """`name` of complex operands: the sum over choices of a real or imaginary part per
    operand, each product times i to the number of imaginary parts chosen."""
    fn = R[name]

    def call(*args, **kwargs):
        positions = [i for i in data(args) if i < len(args)]
        split = {i: parts(args[i]) for i in positions}
        re, im = None, None
        for choice in itertools.product((0, 1), repeat=len(positions)):
            if any(split[i][c] is None for i, c in zip(positions, choice)):
                continue
            term = fn(*[split[i][choice[positions.index(i)]] if i in split else a for i, a in enumerate(args)],
                      **kwargs)
            k = sum(choice) % 4
            if k % 2 == 0:
                re = _acc(re, term, k == 2)
            else:
                im = _acc(im, term, k == 3)
        return make(re, im)
    call.__name__ = name
    return call


def _acc(total, term, negate):
    term = -term if negate else term
    return term if total is None else total + term


_TWO = lambda args: (0, 1)   # noqa: E731
PRODUCTS = {name: _TWO for name in ("dot", "matmul", "inner", "outer", "kron", "tensordot", "vecdot", "convolve")}
PRODUCTS["einsum"] = lambda args: range(1, len(args)) if isinstance(args[0], str) else range(0, len(args), 2)


def _vdot(a, b):
    """The dot product of the flattened arrays, the first conjugated (NumPy's `vdot`)."""
    return FUNCTIONS["dot"](FUNCTIONS["ravel"](ELEMENTWISE["conj"](a)), FUNCTIONS["ravel"](b))


# -- reductions and statistics ----------------------------------------------------------------

def _prod(a, axis=None, dtype=None, keepdims=False):
    """The product along `axis` by pairwise halving (exact, differentiable everywhere)."""
    z = make(*parts(a))
    nd = len(np.shape(z.re))
    axes = tuple(range(nd)) if axis is None else (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(sorted(int(x) % max(nd, 1) for x in axes))
    rest = [d for d in range(nd) if d not in axes]
    z = z.transpose(axes + tuple(rest)) if nd else z
    shape = z.shape
    z = z.reshape((-1,) + tuple(shape[len(axes):]))
    while z.shape[0] > 1:
        if z.shape[0] % 2:
            z = FUNCTIONS["concatenate"]([z, FUNCTIONS["ones"]((1,) + z.shape[1:])])
        z = z[0::2] * z[1::2]
    out = z.reshape(z.shape[1:]) if z.shape[0] == 1 else make(FUNCTIONS["ones"](z.shape[1:]), None)
    if keepdims:
        out = out.reshape(tuple(1 if d in axes else s for d, s in enumerate(np.shape(a))))
    return out


def _var(a, axis=None, dtype=None, ddof=0, keepdims=False):
    """NumPy's variance of complex values: the mean of |z - mean z|^2, real."""
    z = make(*parts(a))
    centered = z - FUNCTIONS["mean"](z, axis=axis, keepdims=True)
    n = z.size if axis is None else int(np.prod([z.shape[i] for i in np.atleast_1d(axis)]))
    return R["sum"](_abs2(centered), axis=axis, keepdims=keepdims) / (n - ddof)


def _extreme(sign):
    """max (sign 1) or min (-1) in NumPy's order of complex values: by real part, then
    imaginary part; the derivative reaches the elements chosen."""
    def fn(a, axis=None, keepdims=False, **kwargs):
        j, (re, im) = FUNCTIONS, parts(a)
        im = _zero_like(re) if im is None else im
        best_re = sign * R["max"](sign * re, axis=axis, keepdims=True)
        tied = j["where"](re == best_re, sign * im, -np.inf)
        best_im = sign * R["max"](tied, axis=axis, keepdims=keepdims)
        return make(best_re if keepdims else R["squeeze"](best_re, axis), best_im)
    return fn


REDUCTIONS = {"max": _extreme(1), "amax": _extreme(1), "min": _extreme(-1), "amin": _extreme(-1),
              "prod": _prod, "var": _var, "std": lambda *a, **k: R["sqrt"](_var(*a, **k)), "vdot": _vdot}


# -- construction and inspection ----------------------------------------------------------------

def _nested_complex(obj):
    if isinstance(obj, (list, tuple)):
        return any(_nested_complex(o) for o in obj)
    return type(obj) is Complex


def _array(obj, dtype=None, *args, **kwargs):
    """`jnp.array` of (nested lists of) values some of which are complex and staged."""
    if isinstance(obj, (list, tuple)):
        out = FUNCTIONS["stack"]([_array(o) for o in obj])
    else:
        out = make(*parts(obj))
    return out if dtype is None else _astype(out, dtype)


def _astype(z, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        re, im = parts(make(*parts(z)))
        part = np.float32 if dtype == np.complex64 else np.float64
        return make(R["astype"](re, part), None if im is None else R["astype"](im, part))
    raise UnsupportedError(f"astype({dtype}) of a complex value: take `jnp.real(z)` (NumPy drops the imaginary "
                           "part with a warning; JAX too)")


CONSTRUCTION = {"array": _array, "asarray": _array, "astype": _astype,
                "zeros_like": lambda a, dtype=None: make(_zero_like(parts(a)[0]), None),
                "ones_like": lambda a, dtype=None: make(R["ones_like"](parts(a)[0]), None),
                "shape": lambda a: tuple(np.shape(parts(a)[0])),
                "ndim": lambda a: len(np.shape(parts(a)[0])), "size": lambda a, axis=None: (
                    int(np.prod(np.shape(parts(a)[0]))) if axis is None else np.shape(parts(a)[0])[axis])}


# -- the dispatch -------------------------------------------------------------------------------

def _values(args, kwargs):
    for a in args:
        yield a
        if type(a) is list or type(a) is tuple:
            yield from a
    yield from kwargs.values()


_CONVERSIONS = ("array", "asarray", "astype")   # a real staged value made complex by its dtype=


def _asks_complex(args, kwargs):
    dtype = kwargs.get("dtype", args[1] if len(args) > 1 else None)
    try:
        return dtype is not None and np.dtype(dtype).kind == "c"
    except TypeError:
        return False


_REAL_SCALARS = (float, np.float64, int, np.int64)


def dispatcher(name, real_fn, complex_fn):
    """`real_fn`, or `complex_fn` where an argument is complex: always for a staged complex
    value or a complex NumPy array beside a staged one; for complex NumPy arrays alone, where
    the real function (NumPy's, on plain arrays) does not take them."""
    @functools.wraps(real_fn)
    def call(*args, **kwargs):
        if len(args) == 1 and not kwargs and (type(args[0]) in _REAL_SCALARS or isinstance(args[0], np.ndarray)
                                              and args[0].dtype.kind in "biuf"):
            return real_fn(*args)   # (the eager calls' usual case: one real NumPy array or number)
        complex_arg = staged = False
        for v in _values(args, kwargs):
            if type(v) is Complex:
                return complex_fn(*args, **kwargs)
            complex_arg = complex_arg or is_complex(v)
            staged = staged or isinstance(v, Staged)
        if not complex_arg:
            if staged and name in _CONVERSIONS and _asks_complex(args, kwargs):
                return complex_fn(*args, **kwargs)
            return real_fn(*args, **kwargs)
        if staged:
            return complex_fn(*args, **kwargs)
        try:
            return real_fn(*args, **kwargs)
        except (UnsupportedError, TypeError):
            return complex_fn(*args, **kwargs)
    call.__complex__ = complex_fn
    return call


def _table():
    table = {**ELEMENTWISE, **BINARY, **REDUCTIONS, **CONSTRUCTION}
    table.update({name: _lifted(name, data) for name, data in LINEAR.items() if name in R})
    table.update({name: _multilinear(name, data) for name, data in PRODUCTS.items() if name in R})
    return table


def iscomplexobj(x):
    """Whether `x` has a complex dtype (a staged complex value too): `jnp.iscomplexobj(1j)` is True."""
    return is_complex(x) or np.iscomplexobj(x) if not isinstance(x, Staged) else False


def isrealobj(x):
    """Whether `x` has no complex dtype: `jnp.isrealobj(1.0)` is True."""
    return not iscomplexobj(x)


def iscomplex(x):
    """Elementwise: the imaginary part is nonzero (False for real dtypes): `jnp.iscomplex(1j)`."""
    return ELEMENTWISE["imag"](x) != 0 if iscomplexobj(x) else FUNCTIONS["zeros_like"](x, dtype=bool)


def isreal(x):
    """Elementwise: the imaginary part is zero: `jnp.isreal(1.0)` is True."""
    return ~iscomplex(x)


def real_if_close(a, tol=100):
    """`a`'s real part where every imaginary part is within `tol` machine epsilons of zero, as
    NumPy's; a staged complex value stays complex (its values are unknown while tracing):
    `jnp.real_if_close(1.0 + 0j)` is 1.0."""
    return a if isinstance(a, (Complex, Staged)) else np.real_if_close(a, tol)


NAMES = {"iscomplexobj": iscomplexobj, "isrealobj": isrealobj, "iscomplex": iscomplex, "isreal": isreal,
         "real_if_close": real_if_close, "complex64": np.complex64, "complex128": np.complex128,
         "complexfloating": np.complexfloating, "csingle": np.complex64, "cdouble": np.complex128,
         "complex_": np.complex128}


def install(namespace):
    """Put the complex dispatchers in front of `namespace`'s functions (jitad.numpy's globals)
    and fill `staging.complex.FUNCTIONS` with the namespace's functions."""
    for name, value in NAMES.items():
        namespace.setdefault(name, value)
    R.update({k: v for k, v in namespace.items() if callable(v) and not k.startswith("_")})
    for name, complex_fn in _table().items():
        if name in namespace:
            namespace[name] = dispatcher(name, namespace[name], complex_fn)
    FUNCTIONS.update({k: v for k, v in namespace.items() if callable(v) and not k.startswith("_")})
    FUNCTIONS["Array"] = namespace["Array"]
