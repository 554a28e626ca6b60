"""A differential fuzzer: Hypothesis writes small programs over `np` (the NumPy API) and
`lax`, and each runs twice, once with `np = jitad.numpy, lax = jitad.lax` and once with
`np = jax.numpy, lax = jax.lax` (x64 on: JAX is the oracle), under each transformation
that applies: a plain call, `jit`, `grad` of the sum of the result, `vmap` over the first
argument, a `scan` over it (values, and the gradient with `checkpoints=1`), and `jvp` along a
fixed direction of the first argument. The two
must agree: the same values (within a tolerance counted in units of the last place over
the program's ops, scaled by the largest magnitude the program meets; NaN at the same
places), the same kind of dtype, and where JAX raises, jitad raises a `JitadError` or an
exception of JAX's builtin class.

Where jitad documents a choice of its own, the oracle follows it (`ORACLE`, one entry per
choice, with its reason); findings that are known bugs being fixed elsewhere are listed
in `KNOWN` and reported apart.

    python -m tests.reliability.fuzz --minutes 5     # each finding as a runnable reproducer
    python -m tests.reliability.fuzz --profile models --minutes 5   # model-shaped programs (fuzz_models.py)
"""
import argparse
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field

import numpy as onp
import hypothesis
from hypothesis import HealthCheck, given, settings, strategies as st

os.environ.setdefault("JAX_ENABLE_X64", "1")
import jax  # noqa: E402
import jax.numpy as jjnp  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jitad  # noqa: E402
import jitad.lax  # noqa: E402
import jitad.numpy  # noqa: E402
from jitad.errors import JitadError, NonFiniteError, StagingError  # noqa: E402

# -- what the oracle follows where jitad documents a choice of its own ------------------

ORACLE = {
    # README, "Values and semantics": int `//` and `%` by zero give 0, as NumPy (XLA gives -2
    # or garbage); the JAX side computes that result explicitly
    "int_div_by_zero": "np.where({b} == 0, 0, np.{fn}({a}, np.where({b} == 0, 1, {b})))",
    # docs/numpy.md, `.at`: an update at a plain (NumPy) index out of range is dropped, as JAX's
    # default (in staged code too); a staged index is taken as in range, clamped as `x[idx]`
    # reads it, where JAX drops: there the JAX side asks for mode="clip"
    "scatter_plain_drops": "{x}.at[{idx}].{how}({v})",
    "scatter_staged_clamps": '{x}.at[{idx}].{how}({v}, mode="clip")',
    # README, "other dtypes": int32 arguments are int64 in staged code; JAX gets them as int64
    # there (outside staged code both compute in int32)
    "int32_as_int64": True,
    # README, "JAX's conventions": a static index past the end clamps in staged code, as in
    # `jax.jit`, also into a constant array of the program (outside staged code NumPy raises:
    # "eager_numpy_errors"); the JAX side reads the clamped index
    "static_index_clamps": True,
    # README, "Values and semantics": mixed int and float arrays promote as NumPy (float64
    # where JAX gives float32): only the dtype's kind (float, int, bool) is compared
    "dtype_kind_only": True,
    # README, "indexing": `x[idx]` clamps an index out of range, and its gradient flows to the
    # element read (the derivative of what was computed); JAX's value clamps too but its
    # gradient drops those reads, so the JAX side reads the clamped indices themselves
    "gather_clamps": True,
    # README, "arrays outside staged code": outside staged code the arrays are NumPy's, so
    # `x[idx]` with an index out of range raises IndexError (NumPy) where JAX clamps, and
    # eager errors are NumPy's (ValueError where JAX raises TypeError): both accepted there, and
    # in `jvp` called from Python, whose other arguments stay NumPy's arrays
    "eager_numpy_errors": True,
    # README, "JAX / autograd" table: `grad` called from Python follows a Python branch on a
    # value, as JAX's and autograd's, so its gradient is that of the branch taken (the JAX side
    # runs with the branches fixed to the eager decisions); inside `scan` the values are staged,
    # and StagingError is right there
    "grad_branch": "the gradient of the branch taken (StagingError inside a scan)",
    # where JAX's derivative is NaN and jitad documents a finite one, a gradient that is
    # finite where JAX's is NaN is accepted for programs using the op: README's gradient
    # conventions (`x ** 0` at 0: 0) and `arctan2`'s VJP (0 at the origin); a `max`/`min` with
    # `initial=` over an empty axis is that constant, of derivative 0 (JAX's forward mode: 0 / 0);
    # the derivatives of `maximum`, `minimum` and `clip` (docs/debugging.md) select the cotangent
    # of the operand chosen where JAX's multiply it by a 0/1 mask: an infinite cotangent of the
    # operand not chosen (x · clip(x) at x = inf) is NaN there, jitad's 0; `prod`'s derivative,
    # the product of the others, is 0 where one of them is 0 and the rest overflow (JAX's: inf · 0)
    "finite_grad_where_jax_nan": ("power", "arctan2", "empty_extremum", "maximum", "minimum", "fmax", "fmin",
                                  "clip", "prod"),
    # `fmax` and `fmin` are `maximum` and `minimum` where neither operand is NaN, ties included:
    # a tie's derivative splits evenly (as autograd's); JAX's gives it all to the second operand:
    # the JAX side computes them as jitad does
    "fmax_ties_split": "np.where(np.isnan({b}), {a}, np.where(np.isnan({a}), {b}, np.{extremum}({a}, {b})))",
    # JAX's derivative of `arccosh`, 1 / sqrt((x - 1)(x + 1)), overflows to 0 past 1e154 (float64)
    # and is a number below -1, where the value is NaN; jitad's is 1 / x there (exact: a factor
    # 1e300 before it survives) and NaN below 1: the JAX side's `arccosh` has that derivative,
    # computed as 1 / (sqrt(x - 1) sqrt(x + 1)) (`_arccosh_exact`)
    "arccosh_exact": "arccosh_exact({x})",
    # JAX differentiates `x / y` in `y` as -x / y², which overflows or underflows where the
    # quotient does not (-inf at x = y = 1e-300, where the derivative is -1e300; the tangent of
    # x / x is noise of the size of 1 / x, jitad's exactly 0); jitad's is -(x / y) / y: the JAX
    # side's `divide` has that derivative (`_divide_by_quotient`)
    "divide_by_quotient": "divide_by_quotient({a}, {b})",
    # jitad's derivative of `square` is (2 g) x; JAX's, g (2 x), makes inf where 2x overflows
    # (float32 values near its largest), and NaN when g is 0 there: the JAX side computes x * x,
    # the same value, whose derivative g x + g x is jitad's
    "square_as_product": "{x} * {x}",
    # README, "arrays outside staged code": outside staged code the arrays are NumPy's, so math
    # on int32 arguments gives float64 (JAX: float32, where 2**31 - 1 rounds to 2**31); the JAX
    # side converts an int operand of an op with float results to float64 itself
    "int32_floats_in_f64": True,
    # a tangent where the value itself is NaN (the variance of nothing, 0 / 0) is not compared:
    # JAX's is 0 or a number there by the order of its rules, jitad's NaN
    "tangent_where_value_nan": True,
    # JAX (XLA on the CPU) flushes subnormal floats to zero, jitad keeps IEEE's: a program whose
    # arguments hold subnormals, or values so near the smallest normal that a derivative's terms
    # go subnormal (within 2**16 of the smallest normal: `x / log(x)` there), and that
    # disagrees is judged again with them flushed to zero (a comparison with 0, a tie in `max`,
    # decides otherwise)
    "subnormals_flushed": True,
    # docs/debugging.md: where an argument of `logaddexp` is +inf the result is that argument,
    # so the other's derivative is 0 (JAX's is exp(other)) and two +inf share it (0.5 each,
    # as finite ties; JAX: 1 each); the JAX side computes that with its `maximum`
    "logaddexp_at_inf": "np.where(np.maximum({a}, {b}) == np.inf, np.maximum({a}, {b}), np.logaddexp({a}, {b}))",
    # JAX's derivative of `hypot` is x / hypot(x, y) computed unscaled: -inf at (1e-300, 1e-300),
    # NaN at (1e-300, 0) and at (inf, 1); jitad's is exact there (the limit (1, 0) at (inf, 1)):
    # the JAX side's `hypot` has the same values and that derivative (`_hypot_scaled`)
    "hypot_scaled": "hypot_scaled({a}, {b})",
    # the same for `arctan2`: JAX's derivative x / (x² + y²) is NaN or infinite where x² + y²
    # underflows, 0 where it overflows, and its two terms round differently (the tangent of
    # arctan2(x, x) is noise of the size of the terms, jitad's 0); jitad's divides by the larger
    # magnitude first and is 0 at the origin and where an argument is infinite (`_arctan2_scaled`)
    "arctan2_scaled": "arctan2_scaled({a}, {b})",
    # docs/numpy.md, `.at`: with mode="clip" an update out of range goes to the clamped
    # position, and its gradient is that of the update made there; JAX's value is the same but
    # its gradient of `.min`/`.max` treats the clamped position as not updated (1 where the
    # result is the update): the JAX side passes the clamped indices themselves
    "scatter_clip_in_range": '{x}.at[{idx}].{how}({v}, mode="clip")',
    # NumPy's shape rule: `take(x, idx, axis=0)` has shape idx.shape + x.shape[1:], also where
    # x's first axis is empty (idx then empty too); JAX's `take` returns x's own shape there (its
    # `x[idx]` follows the rule): the JAX side indexes
    "take_from_empty": "{x}[{idx}]",
    # docs/debugging.md: where a running product of `cumprod` overflows or is ±inf, its derivatives
    # are sums of terms beyond the float range, and whether they come to ±inf or to NaN (inf - inf)
    # depends on the order of the sum: jitad's derived rule (a doubling recurrence, log2(n) steps)
    # and JAX's (the derivative of an associative scan) order it differently, and neither computes
    # it exactly. A derivative that is NaN on one side and ±inf on the other is accepted there
    # (`_cumprod_beyond_range`); anything else still must agree
    "cumprod_beyond_range": True,
    # README, "arrays outside staged code": values computed from a program's constants only are
    # NumPy arrays in staged code too, so a Python branch on one runs under `jit` where JAX's
    # staged constants raise: the generator branches on values of the arguments only
    "constant_branch": True,
}

# findings that are known bugs not fixed yet: reported, not failures. Each is the op's program
# feature, the exact condition (a function of the program, the transformation and both
# outcomes: `_known`, whose function KNOWN_CONDITIONS names) and the reason. None today
KNOWN = {}

DTYPES = ["float64", "float32", "int64", "int32", "bool"]
FLOAT = {"float64": onp.float64, "float32": onp.float32}
EDGE_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, onp.inf, -onp.inf, onp.nan, 1e300, -1e300, 1e-300, 5e-324,
               3.0, -2.5, 1e-8, 700.0, -745.0, 1.7976931348623157e308, 2.2250738585072014e-308, -5e-324, 0.1,
               3.4028234663852886e38, 1e-40, 89.0, -1.5]
EDGE_INTS = [0, 1, -1, 2, 3, -7, 2**31 - 1, -2**31, 2**62, -2**63, 2**63 - 1]
ULPS = {"exact": 2, "math": 8, "sum": 4, "pow": 16}   # per op; a reduction's grow with its length

UNARY = {name: "math" for name in ("sin", "cos", "tan", "tanh", "exp", "expm1", "log", "log1p", "log2", "log10",
                                   "sqrt", "arcsin", "arccos", "arctan", "sinh", "cosh", "arcsinh", "arctanh",
                                   "exp2", "deg2rad", "cbrt", "arccosh")}
UNARY.update({name: "exact" for name in ("abs", "negative", "square", "sign", "floor", "ceil", "rint", "trunc",
                                         "reciprocal", "isnan", "isfinite", "logical_not", "isinf", "signbit",
                                         "positive")})
BINARY = {name: "exact" for name in ("add", "subtract", "multiply", "divide", "maximum", "minimum", "equal",
                                     "less", "greater_equal", "not_equal", "floor_divide", "remainder", "greater",
                                     "less_equal", "fmax", "fmin", "copysign", "heaviside")}
BINARY.update({"power": "pow", "arctan2": "math", "hypot": "math", "logaddexp": "math"})
LOGICAL = ("logical_and", "logical_or")
COMPARISONS = ("equal", "less", "greater_equal", "not_equal", "greater", "less_equal")
REDUCTIONS = ("sum", "prod", "max", "min", "mean", "argmax", "argmin", "any", "all", "var", "std", "nansum", "nanmax")
SCANS = ("cumsum", "cumprod", "sort")


@dataclass
class Value:
    name: str
    shape: tuple
    dtype: str   # float64 float32 int64 bool
    constant: bool = False   # computed from the program's constants only


@dataclass
class Program:
    args: list                  # numpy arrays
    lines: list = field(default_factory=list)    # (jitad text, JAX text, ulps kind, length)
    result: str = ""
    features: set = field(default_factory=set)
    branches: list = field(default_factory=list)   # condition texts of Python `if`s, in order

    def source(self, side, decisions=None):
        """The program as Python source: `def f(x0, ...)` for `side` "jitad" or "jax" (whose
        branches are fixed to `decisions`, when given)."""
        names = ", ".join(f"x{k}" for k in range(len(self.args)))
        out, k = [f"def f({names}):"], 0
        for jtext, xtext, _, _ in self.lines:
            text = jtext if side == "jitad" else xtext
            if text.startswith("if ") and decisions is not None and side == "jax":
                text, k = f"if {decisions[k]}:" + text[text.index("\n"):], k + 1
            out.append("    " + text.replace("\n", "\n    "))
        out.append(f"    return {self.result}")
        return "\n".join(out)

    def branches_on_values(self):
        return any(text.startswith("if ") for text, *_ in self.lines)

    def budget(self):
        """The tolerance in ulps: each op's, a reduction's times its length."""
        return 4 + sum(ULPS[kind] * max(length, 1) for _, _, kind, length in self.lines if kind)


def literal(a):
    """`a` as Python source that rebuilds it exactly."""
    a = onp.asarray(a)
    if a.dtype.kind == "f":
        items = [repr(float(v)) if onp.isfinite(v) else ("onp.nan" if onp.isnan(v) else
                 ("onp.inf" if v > 0 else "-onp.inf")) for v in a.ravel()]
    else:
        items = [repr(v.item()) for v in a.ravel()]
    return f"onp.array([{', '.join(items)}], dtype='{a.dtype.name}').reshape({a.shape})"


# -- generating programs -----------------------------------------------------------------

SHAPES = st.lists(st.sampled_from([0, 1, 2, 3]), min_size=0, max_size=3).map(tuple)


@st.composite
def arrays(draw, dtype=None, shape=None):
    dtype = dtype or draw(st.sampled_from(DTYPES))
    shape = draw(SHAPES) if shape is None else shape
    size = math.prod(shape)
    if dtype in FLOAT:
        pool = st.one_of(st.sampled_from(EDGE_FLOATS), st.floats(-10, 10, allow_nan=False))
        values = draw(st.lists(pool, min_size=size, max_size=size))
        with onp.errstate(over="ignore"):
            return onp.array(values, dtype=FLOAT[dtype]).reshape(shape)
    if dtype == "bool":
        return onp.array(draw(st.lists(st.booleans(), min_size=size, max_size=size)), dtype=bool).reshape(shape)
    lim = 2**31 if dtype == "int32" else 2**63
    pool = st.one_of(st.sampled_from([v for v in EDGE_INTS if -lim <= v < lim]), st.integers(-5, 5))
    return onp.array(draw(st.lists(pool, min_size=size, max_size=size)), dtype=dtype).reshape(shape)


def _clamp(idx, n):
    """Indices as a staged read takes them: negative ones from the end, then clamped."""
    return onp.clip(onp.where(idx < 0, idx + n, idx), 0, max(n - 1, 0))


def _in_f64(v):
    """The JAX side's text for an int operand of an op with float results: it in float64
    (ORACLE["int32_floats_in_f64"]); any other operand's name."""
    return f"{v.name}.astype(np.float64)" if _kind(v.dtype) == "i" else v.name


def _kind(dtype):
    return {"float64": "f", "float32": "f", "int64": "i", "int32": "i", "bool": "b"}[dtype]


def _result_dtype(*dtypes):
    """NumPy's promotion of the operand dtypes, as jitad documents (int32 counts as int64)."""
    dts = [onp.dtype("int64" if d == "int32" else d) for d in dtypes]
    return onp.result_type(*dts).name


def _axis_choice(draw, ndim):
    if ndim == 0:
        return None
    return draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1),
                          st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).map(tuple)))


def _reduced(shape, axis, keepdims):
    axes = range(len(shape)) if axis is None else ((axis,) if isinstance(axis, int) else axis)
    axes = {a % len(shape) for a in axes} if shape else set()
    return tuple(1 if k in axes else n for k, n in enumerate(shape) if keepdims or k not in axes)


def _bool_arith_on_empty(x, how, n_updates=1):
    """`.at[].add` or `.multiply` into an empty bool array, or at an empty index: JAX skips
    its dtype check (no update to make), jitad refuses it as for any bool array."""
    return x.dtype == "bool" and how in ("add", "multiply") and not (math.prod(x.shape) and n_updates)


class Builder:
    """Appends lines to a program, tracking each value's shape and dtype."""

    def __init__(self, draw, program):
        self.draw, self.p = draw, program
        self.values = [Value(f"x{k}", a.shape, "int64" if a.dtype.name == "int32" else a.dtype.name)
                       for k, a in enumerate(program.args)]

    def pick(self, pred=lambda v: True):
        pool = [v for v in self.values if pred(v)]
        return self.draw(st.sampled_from(pool)) if pool else None

    def add(self, text, shape, dtype, kind="exact", length=1, jax_text=None, error=False):
        name = f"v{len(self.p.lines)}"
        self.p.lines.append((f"{name} = {text}", f"{name} = {jax_text or text}", kind, length))
        if not error:   # (a value of constants only: one naming no argument and no other value)
            used = set(re.findall(r"\b[xv]\d+\b", text))
            constant = all(v.constant for v in self.values if v.name in used) and not any(u[0] == "x" for u in used)
            self.values.append(Value(name, tuple(shape), dtype, constant))
        return name

    def scalar(self, dtype):
        if dtype in ("float64", "float32"):
            return repr(self.draw(st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.0, 3.0, -0.0, 1e300])))
        return repr(self.draw(st.sampled_from([0, 1, 2, -1, 3])))

    # each op: draw its operands and append it; False where it does not apply
    def unary(self):
        x = self.pick()
        name = self.draw(st.sampled_from(sorted(UNARY)))
        if name == "logical_not" and x.dtype != "bool" or name in ("positive", "signbit") and x.dtype == "bool":
            return False
        if UNARY[name] == "math" or name in ("reciprocal", "rint"):
            dtype = x.dtype if x.dtype in FLOAT else "float64"
        else:   # (square of bools: int8 in NumPy, int32 in JAX: an int)
            dtype = "int64" if x.dtype == "bool" and name == "square" else x.dtype
        if name in ("isnan", "isfinite", "logical_not", "isinf", "signbit"):
            dtype = "bool"
        jax_text = f"np.{name}({_in_f64(x)})" if _kind(dtype) == "f" and _kind(x.dtype) == "i" else None
        if name == "arccosh":
            jax_text = ORACLE["arccosh_exact"].format(x=_in_f64(x))
        elif name == "square" and _kind(dtype) == "f":
            jax_text = ORACLE["square_as_product"].format(x=x.name)
        self.add(f"np.{name}({x.name})", x.shape, dtype, UNARY[name], jax_text=jax_text)
        return True

    def binary(self):
        a = self.pick()
        use_scalar = self.draw(st.booleans())
        b = None if use_scalar else self.pick()
        name = self.draw(st.sampled_from(sorted(BINARY) + list(LOGICAL)))
        btext = self.scalar(a.dtype) if use_scalar else b.name
        bdtype = a.dtype if use_scalar else b.dtype
        bshape = () if use_scalar else b.shape
        if "bool" in (a.dtype, bdtype) and name not in ("equal", "not_equal", "logical_and", "logical_or",
                                                          "maximum", "minimum", "add", "multiply"):
            return False
        if name in LOGICAL and not (a.dtype == bdtype == "bool"):
            return False
        try:
            shape = onp.broadcast_shapes(a.shape, bshape)
            error = False
        except ValueError:
            shape, error = (), True
        dtype = a.dtype if use_scalar and (a.dtype in FLOAT or "." not in btext) else _result_dtype(a.dtype, bdtype)
        if name in COMPARISONS or name in LOGICAL:
            dtype = "bool"
        elif name in ("divide", "arctan2", "hypot", "logaddexp", "copysign", "heaviside") and dtype not in FLOAT:
            dtype = "float64"
        elif name == "power" and _kind(dtype) == "i":
            return False   # integer powers with negative exponents: both sides raise or differ by design
        jax_text = None
        self.p.features.add(name)
        ja, jb = a.name, btext
        if _kind(dtype) == "f" and name not in COMPARISONS:   # ORACLE["int32_floats_in_f64"]
            ja = _in_f64(a)
            jb = _in_f64(b) if b is not None else btext
            jax_text = None if (ja, jb) == (a.name, btext) else f"np.{name}({ja}, {jb})"
        if name in ("floor_divide", "remainder") and _kind(dtype) == "i":
            jax_text = ORACLE["int_div_by_zero"].format(a=a.name, b=btext, fn=name)
        if name == "logaddexp":
            jax_text = ORACLE["logaddexp_at_inf"].format(a=ja, b=jb)
        if name in ("hypot", "arctan2"):
            jax_text = ORACLE[f"{name}_scaled"].format(a=ja, b=jb)
        if name == "divide":
            jax_text = ORACLE["divide_by_quotient"].format(a=ja, b=jb)
        if name in ("fmax", "fmin"):
            jax_text = ORACLE["fmax_ties_split"].format(a=ja, b=jb, extremum={"fmax": "maximum", "fmin": "minimum"}[name])
        self.add(f"np.{name}({a.name}, {btext})", shape, dtype, BINARY.get(name, "exact"), jax_text=jax_text,
                 error=error)
        return not error or "error"

    def where(self):
        c, a, b = self.pick(), self.pick(), self.pick()
        try:
            shape = onp.broadcast_shapes(c.shape, a.shape, b.shape)
        except ValueError:
            return False
        if "bool" in (a.dtype, b.dtype) and a.dtype != b.dtype:
            return False
        cond = c.name if c.dtype == "bool" else f"{c.name} > 0"
        self.add(f"np.where({cond}, {a.name}, {b.name})", shape, _result_dtype(a.dtype, b.dtype))
        return True

    def reduction(self):
        x = self.pick(lambda v: v.shape)
        if x is None:
            return False
        name = self.draw(st.sampled_from(REDUCTIONS))
        axis = _axis_choice(self.draw, len(x.shape))
        if name in ("argmax", "argmin") and not (axis is None or isinstance(axis, int)):
            return False
        keepdims = self.draw(st.booleans()) and name not in ("argmax", "argmin")
        shape = _reduced(x.shape, axis, keepdims)
        length = math.prod(x.shape) // max(math.prod(shape), 1) if math.prod(x.shape) else 0
        if name in ("argmax", "argmin"):
            dtype = "int64"
        elif name in ("any", "all"):
            dtype = "bool"
        elif name in ("mean", "var", "std"):
            dtype = x.dtype if x.dtype in FLOAT else "float64"
        elif name in ("sum", "prod", "nansum") and x.dtype == "bool":
            dtype = "int64"
        else:
            dtype = x.dtype
        kw = f", keepdims={keepdims}" if keepdims else ""
        if name == "prod":
            self.p.features.add(name)   # (ORACLE["finite_grad_where_jax_nan"])
        jx = _in_f64(x) if name in ("mean", "var", "std") else x.name   # ORACLE["int32_floats_in_f64"]
        self.add(f"np.{name}({x.name}, axis={axis!r}{kw})", shape, dtype, "sum", length,
                 jax_text=f"np.{name}({jx}, axis={axis!r}{kw})")
        return True

    def scan(self):
        x = self.pick(lambda v: v.shape and v.dtype != "bool")
        if x is None:
            return False
        name = self.draw(st.sampled_from(SCANS))
        axis = self.draw(st.integers(-len(x.shape), len(x.shape) - 1))
        if name == "cumprod":
            self.p.features.add(name)   # (ORACLE["cumprod_beyond_range"])
        self.add(f"np.{name}({x.name}, axis={axis})", x.shape, x.dtype, "sum", x.shape[axis])
        return True

    def reshape(self):
        x = self.pick()
        how = self.draw(st.sampled_from(["flat", "unit", "transpose", "expand", "squeeze", "flip"]))
        if how == "flat":
            self.add(f"np.reshape({x.name}, (-1,))", (math.prod(x.shape),), x.dtype)
        elif how == "unit":
            k = self.draw(st.integers(0, len(x.shape)))
            self.add(f"np.reshape({x.name}, {x.shape[:k] + (1,) + x.shape[k:]!r})", x.shape[:k] + (1,) + x.shape[k:],
                     x.dtype)
        elif how == "transpose":
            perm = tuple(self.draw(st.permutations(range(len(x.shape)))))
            self.add(f"np.transpose({x.name}, {perm!r})", tuple(x.shape[p] for p in perm), x.dtype)
        elif how == "expand":
            k = self.draw(st.integers(-len(x.shape) - 1, len(x.shape)))
            shape = list(x.shape)
            shape.insert(k % (len(x.shape) + 1), 1)
            self.add(f"np.expand_dims({x.name}, {k})", shape, x.dtype)
        elif how == "squeeze":
            ones = [k for k, n in enumerate(x.shape) if n == 1]
            if not ones:
                return False
            k = self.draw(st.sampled_from(ones))
            self.add(f"np.squeeze({x.name}, axis={k})", x.shape[:k] + x.shape[k + 1:], x.dtype)
        else:
            if not x.shape:
                return False
            k = self.draw(st.integers(0, len(x.shape) - 1))
            self.add(f"np.flip({x.name}, axis={k})", x.shape, x.dtype)
        return True

    def slicing(self):
        x = self.pick(lambda v: v.shape)
        if x is None:
            return False
        n = x.shape[0]
        start, stop = self.draw(st.integers(-4, 4)), self.draw(st.integers(-4, 5))
        step = self.draw(st.sampled_from([1, 2, -1, -2]))
        length = len(range(n)[start:stop:step])
        self.add(f"{x.name}[{start}:{stop}:{step}]", (length,) + x.shape[1:], x.dtype)
        return True

    def int_index(self):
        x = self.pick(lambda v: v.shape)
        if x is None:
            return False
        k, n = self.draw(st.integers(-4, 4)), x.shape[0]
        if n == 0:
            return False
        clamped = min(max(k + n if k < 0 else k, 0), n - 1)
        if not -n <= k < n:
            self.p.features.add("gather_out_of_range")
        self.add(f"{x.name}[{k}]", x.shape[1:], x.dtype, jax_text=f"{x.name}[{clamped}]")   # static_index_clamps
        return True

    def gather(self):
        x = self.pick(lambda v: v.shape)
        if x is None:
            return False
        ishape = self.draw(st.lists(st.sampled_from([0, 1, 2, 3]), max_size=2).map(tuple))
        idx = onp.array(self.draw(st.lists(st.integers(-5, 5), min_size=math.prod(ishape),
                                           max_size=math.prod(ishape))), dtype=onp.int64).reshape(ishape)
        n = x.shape[0]
        if n == 0 and idx.size:
            return False   # an index into nothing: JAX reads garbage-free zeros, NumPy raises; no oracle
        form = self.draw(st.sampled_from(["rows", "pair", "take"]))
        if form == "pair" and len(x.shape) >= 2:
            jshape = self.draw(st.lists(st.sampled_from([1, 2, 3]), max_size=2).map(tuple))
            jdx = onp.array(self.draw(st.lists(st.integers(-3, 3), min_size=math.prod(jshape),
                                               max_size=math.prod(jshape))), dtype=onp.int64).reshape(jshape)
            if x.shape[1] == 0 and jdx.size:
                return False
            if ((idx < -n) | (idx >= n)).any() or ((jdx < -x.shape[1]) | (jdx >= x.shape[1])).any():
                self.p.features.add("gather_out_of_range")
            try:
                bshape = onp.broadcast_shapes(ishape, jshape)
                error = False
            except ValueError:
                bshape, error = (), True
            self.add(f"{x.name}[{literal(idx)}, {literal(jdx)}]", bshape + x.shape[2:], x.dtype, error=error,
                     jax_text=f"{x.name}[{literal(_clamp(idx, n))}, {literal(_clamp(jdx, x.shape[1]))}]")
            return "error" if error else True
        if form == "take":   # (JAX's modes, as docs/numpy.md says: 'fill' by default)
            mode = self.draw(st.sampled_from([None, "fill", "clip", "wrap"]))
            kw = "" if mode is None else f", mode={mode!r}"
            if mode == "fill" and x.dtype != "bool" and self.draw(st.booleans()):
                kw += f", fill_value={self.scalar(x.dtype)}"
            self.add(f"np.take({x.name}, {literal(idx)}, axis=0{kw})", ishape + x.shape[1:], x.dtype,
                     jax_text=ORACLE["take_from_empty"].format(x=x.name, idx=literal(idx)) if n == 0 else None)
            return True
        if ((idx < -n) | (idx >= n)).any():
            self.p.features.add("gather_out_of_range")
        self.add(f"{x.name}[{literal(idx)}]", ishape + x.shape[1:], x.dtype,
                 jax_text=f"{x.name}[{literal(_clamp(idx, n))}]")   # gather_clamps
        return True

    def mask(self):
        x = self.pick(lambda v: v.shape)
        if x is None:
            return False
        right = self.draw(st.integers(0, 4)) > 0   # a wrong shape now and then
        shape = x.shape if right else self.draw(SHAPES)
        m = onp.array(self.draw(st.lists(st.booleans(), min_size=math.prod(shape), max_size=math.prod(shape))),
                      dtype=bool).reshape(shape)
        # (each mask axis 0 or the axis's length: NumPy's and JAX's rule)
        ok = len(shape) <= len(x.shape) and all(k in (0, n) for k, n in zip(shape, x.shape))
        length = int(m.sum())
        self.add(f"{x.name}[{literal(m)}]", (length,) + x.shape[len(shape):], x.dtype, error=not ok)
        return True if ok else "error"

    def at(self):
        x = self.pick(lambda v: v.shape and v.shape[0] > 0)
        if x is None:
            return False
        how = self.draw(st.sampled_from(["set", "add", "multiply", "min", "max"]))
        count, n = self.draw(st.integers(0, 3)), x.shape[0]
        wide = self.draw(st.integers(0, 4)) == 0   # now and then out of range
        idx = self.draw(st.lists(st.integers(-4, 4) if wide else st.integers(-n, n - 1), min_size=count,
                                 max_size=count))
        clamped = [min(max(i + n if i < 0 else i, 0), n - 1) for i in idx]
        if how == "set" and len(set(clamped)) < len(clamped):
            return False   # repeated rows in a `set`: JAX leaves the order unspecified
        if _bool_arith_on_empty(x, how, len(idx)):
            return False
        v = self.scalar(x.dtype) if x.dtype != "bool" else "True"
        itext = repr(idx)
        self.add(f"np.asarray({x.name}).at[onp.array({itext}, dtype='int64')].{how}({v})", x.shape, x.dtype,
                 jax_text=ORACLE["scatter_plain_drops"].format(x=f"np.asarray({x.name})",
                                                               idx=f"onp.array({itext}, dtype='int64')", how=how,
                                                               v=v))
        return True

    def at_mode(self):
        """`.at[idx]` with JAX's modes: updates with 'drop', 'clip', 'fill', reads with `.get`."""
        x = self.pick(lambda v: v.shape and v.shape[0] > 0)
        if x is None:
            return False
        n = x.shape[0]
        idx = self.draw(st.lists(st.integers(-n - 2, n + 1), min_size=1, max_size=3))
        itext = f"onp.array({idx!r}, dtype='int64')"
        how = self.draw(st.sampled_from(["get", "set", "add", "min", "max"]))
        mode = self.draw(st.sampled_from(["drop", "clip", "fill"] if how != "get" else [None, "clip", "fill"]))
        kw = f"mode={mode!r}" if mode else ""
        if how == "get":
            if mode == "fill" and self.draw(st.booleans()):
                kw += f", fill_value={self.scalar(x.dtype) if x.dtype != 'bool' else 'False'}"
            clamped = f"onp.array({_clamp(onp.array(idx), n).tolist()!r}, dtype='int64')"
            self.add(f"np.asarray({x.name}).at[{itext}].get({kw})", (len(idx),) + x.shape[1:], x.dtype,
                     jax_text=None if mode == "fill" else f"np.asarray({x.name}).at[{clamped}].get({kw})")
            return True   # (a clamped read: ORACLE["gather_clamps"])
        hit = [min(max(i + n if i < 0 else i, 0), n - 1) if mode == "clip" or -n <= i < n else None for i in idx]
        hit = [h for h in hit if h is not None]
        if how == "set" and len(set(hit)) < len(hit) or _bool_arith_on_empty(x, how):
            return False   # (repeated rows in a `set`: JAX leaves the order unspecified)
        v = self.scalar(x.dtype) if x.dtype != "bool" else "True"
        clamped = f"onp.array({_clamp(onp.array(idx), n).tolist()!r}, dtype='int64')"
        self.add(f"np.asarray({x.name}).at[{itext}].{how}({v}, {kw})", x.shape, x.dtype, "sum", len(idx),
                 jax_text=ORACLE["scatter_clip_in_range"].format(x=f"np.asarray({x.name})", idx=clamped, how=how, v=v)
                 if mode == "clip" else None)
        return True

    def at_staged(self):
        """`.at[i]` at a staged index (an int argument): in range as `x[i]` reads it
        (ORACLE["scatter_staged_clamps"]); a plain call has no staged index."""
        i = self.pick(lambda v: v.name.startswith("x") and v.dtype == "int64" and len(v.shape) <= 1)
        x = self.pick(lambda v: v.shape and v.shape[0] > 0 and v.dtype != "bool")
        if i is None or x is None:
            return False
        how = self.draw(st.sampled_from(["add", "min", "max", "multiply"] + (["set"] if not i.shape else [])))
        v, n = self.scalar(x.dtype), x.shape[0]
        self.p.features.add("staged_index")
        normalized = f"np.clip(np.where({i.name} < 0, {i.name} + {n}, {i.name}), 0, {n - 1})"   # (JAX would wrap -1 again)
        self.add(f"np.asarray({x.name}).at[{i.name}].{how}({v})", x.shape, x.dtype, "sum", max(math.prod(i.shape), 1),
                 jax_text=ORACLE["scatter_staged_clamps"].format(x=f"np.asarray({x.name})", idx=normalized, how=how,
                                                                 v=v))
        return True

    def reduction_kw(self):
        """Reductions with NumPy's keywords `where=`, `initial=`, `dtype=`."""
        x = self.pick(lambda v: v.shape and v.dtype != "bool")
        if x is None:
            return False
        name = self.draw(st.sampled_from(["sum", "prod", "max", "min", "mean"]))
        axis = self.draw(st.one_of(st.none(), st.integers(-len(x.shape), len(x.shape) - 1)))
        kws, dtype = [], x.dtype
        if self.draw(st.booleans()):
            wshape = self.draw(st.sampled_from([x.shape, x.shape[-1:], (), "value"]))
            if wshape == "value":   # (a mask of the values: batched under vmap, staged under jit)
                kws.append(f"where={x.name} > {self.scalar(x.dtype)}")
            else:
                w = onp.array(self.draw(st.lists(st.booleans(), min_size=math.prod(wshape),
                                                 max_size=math.prod(wshape))), dtype=bool).reshape(wshape)
                kws.append(f"where={literal(w)}")
        if name != "mean" and (self.draw(st.booleans()) or (kws and name in ("max", "min"))):
            kws.append(f"initial={self.scalar(x.dtype)}")
        if name in ("sum", "prod", "mean") and self.draw(st.booleans()):
            dtype = self.draw(st.sampled_from(["float64", "float32"] if x.dtype in FLOAT else ["float64", "int64"]))
            if name == "mean" and dtype == "int64" and (kws or not math.prod(x.shape)):
                return False   # (an int mean of nothing: XLA folds the int 0 / 0 as it compiles, and JAX dies of SIGFPE)
            kws.append(f"dtype=np.{dtype}")   # (an int dtype= gives an int mean)
        elif name == "mean" and dtype not in FLOAT:
            dtype = "float64"
        shape = _reduced(x.shape, axis, False)
        length = math.prod(x.shape) // max(math.prod(shape), 1) if math.prod(x.shape) else 0
        if name == "prod":
            self.p.features.add(name)
        if name in ("max", "min") and not length:
            self.p.features.add("empty_extremum")
        jx = _in_f64(x) if name == "mean" and not any(k.startswith("dtype=") for k in kws) else x.name
        self.add(f"np.{name}({x.name}, axis={axis!r}, {', '.join(kws)})", shape, dtype, "sum", length + 1,
                 jax_text=f"np.{name}({jx}, axis={axis!r}, {', '.join(kws)})")
        return True

    def lax_int(self):
        """`lax`'s integer arithmetic: C's division and remainder (by 0 too), min, max, clamp,
        shifts, sign, integer powers, on int64 values (wrapping on overflow, as XLA)."""
        a = self.pick(lambda v: v.dtype == "int64")
        if a is None:
            return False
        b = self.pick(lambda v: v.dtype == "int64" and v.shape == a.shape)
        # (of a's dtype: JAX's `lax` takes equal dtypes; an int32 argument is int32 outside staged code)
        btext = f"{b.name}.astype({a.name}.dtype)" if b is not None and self.draw(st.booleans()) else \
            f"np.full({a.shape!r}, {self.draw(st.sampled_from([0, 1, -1, 2, 3, -7, 31]))}, dtype={a.name}.dtype)"
        how = self.draw(st.sampled_from(["div", "rem", "max", "min", "add", "sub", "mul", "sign", "abs", "neg",
                                         "clamp", "integer_pow", "shift_left", "shift_right_arithmetic",
                                         "shift_right_logical", "bitwise_and", "bitwise_or", "bitwise_xor",
                                         "bitwise_not", "population_count", "clz", "cummax", "reduce"]))
        if how in ("sign", "abs", "neg", "bitwise_not", "population_count", "clz"):
            text = f"lax.{how}({a.name})"
        elif how == "cummax":
            if not a.shape:
                return False
            text = f"lax.cummax({a.name}, axis={self.draw(st.integers(0, len(a.shape) - 1))})"
        elif how == "reduce":   # (over every axis: an int scalar)
            fn = self.draw(st.sampled_from(["reduce_max", "reduce_min", "reduce_sum", "reduce_and", "reduce_or"]))
            if fn in ("reduce_and", "reduce_or"):
                text = f"lax.convert_element_type(lax.{fn}({a.name} > 0, tuple(range({len(a.shape)}))), np.int64)"
            else:
                text = f"lax.{fn}({a.name}, tuple(range({len(a.shape)})))"
            self.add(text, (), "int64", "sum", math.prod(a.shape))
            return True
        elif how == "clamp":
            text = f"lax.clamp(np.asarray(-3, {a.name}.dtype), {a.name}, np.asarray(5, {a.name}.dtype))"
        elif how == "integer_pow":
            text = f"lax.integer_pow({a.name}, {self.draw(st.integers(0, 3))})"
        elif how.startswith("shift"):
            bits = self.draw(st.integers(0, 31))   # (below the width of int32 too)
            text = f"lax.{how}({a.name}, np.full({a.shape!r}, {bits}, dtype={a.name}.dtype))"
        else:
            text = f"lax.{how}({a.name}, {btext})"
        self.add(text, a.shape, "int64")
        return True

    def matmul(self):
        a = self.pick(lambda v: v.shape and v.dtype != "bool")
        b = self.pick(lambda v: v.shape and v.dtype != "bool")
        if a is None or b is None:
            return False
        try:
            shape = onp.matmul(onp.empty(a.shape), onp.empty(b.shape)).shape
            error = False
        except ValueError:
            shape, error = (), True
        if 0 in a.shape + b.shape and max(len(a.shape), len(b.shape)) > 2:
            self.p.features.add("matmul_empty")
        self.add(f"{a.name} @ {b.name}", shape, _result_dtype(a.dtype, b.dtype), "sum", a.shape[-1], error=error)
        return "error" if error else True

    def concat(self):
        a, b = self.pick(lambda v: v.shape), self.pick(lambda v: v.shape)
        if a is None or b is None or "bool" in (a.dtype, b.dtype) and a.dtype != b.dtype:
            return False
        error = len(a.shape) != len(b.shape) or a.shape[1:] != b.shape[1:]
        shape = (a.shape[0] + b.shape[0],) + a.shape[1:]
        self.add(f"np.concatenate([{a.name}, {b.name}], axis=0)", shape, _result_dtype(a.dtype, b.dtype),
                 error=error)
        return "error" if error else True

    def clip_astype(self):
        x = self.pick(lambda v: v.dtype != "bool")
        if x is None:
            return False
        if self.draw(st.booleans()):
            self.p.features.add("clip")
            self.add(f"np.clip({x.name}, -2, 2)", x.shape, x.dtype)
        else:
            dtype = self.draw(st.sampled_from(["float64", "float32"] + (["int64"] if x.dtype != "float32" else [])))
            if _kind(x.dtype) == "f" and dtype == "int64":
                return False   # float -> int of NaN/inf/huge: implementation-defined in XLA, saturating in jitad
            self.add(f"{x.name}.astype(np.{dtype})", x.shape, dtype)
        return True

    def lax_op(self):
        """`lax`'s own operations: powers, slices at (clamped) staged starts, loops, cond."""
        x = self.pick(lambda v: v.dtype in FLOAT)
        ints = self.pick(lambda v: v.dtype == "int64")
        if ints is not None and self.draw(st.integers(0, 9)) == 0:
            self.add(f"lax.div({ints.name}, np.asarray(3, {ints.name}.dtype))", ints.shape, ints.dtype)
            return True
        if x is None:
            return False
        how = self.draw(st.sampled_from(["integer_pow", "rsqrt", "logistic", "erf", "dynamic_slice",
                                         "dynamic_update", "select", "div", "fori_loop", "cond"]))
        if how == "integer_pow":
            self.add(f"lax.integer_pow({x.name}, {self.draw(st.integers(-2, 3))})", x.shape, x.dtype, "math")
        elif how in ("rsqrt", "logistic", "erf"):
            self.add(f"lax.{how}({x.name})", x.shape, x.dtype, "math")
        elif how in ("dynamic_slice", "dynamic_update"):
            if not x.shape:
                return False
            n, start = x.shape[0], self.draw(st.integers(-3, 5))
            size = self.draw(st.integers(0, n))
            if how == "dynamic_slice":
                self.add(f"lax.dynamic_slice_in_dim({x.name}, {start}, {size}, axis=0)", (size,) + x.shape[1:],
                         x.dtype)
            else:
                self.add(f"lax.dynamic_update_slice_in_dim({x.name}, {x.name}[:{size}] * 2.0, {start}, axis=0)",
                         x.shape, x.dtype)
        elif how == "select":
            self.add(f"lax.select({x.name} > 0, {x.name}, -{x.name})", x.shape, x.dtype)
        elif how == "div":
            self.add(f"lax.div({x.name}, np.asarray(3.0, {x.name}.dtype))", x.shape, x.dtype)
        elif how == "fori_loop":
            self.add(f"lax.fori_loop(0, 3, lambda i, v: v * 0.5 + np.sin(v), {x.name})", x.shape, x.dtype, "math", 6)
        else:
            self.add(f"lax.cond(np.sum({x.name}) > 0, lambda v: v * 2.0, lambda v: np.cos(v), {x.name})", x.shape,
                     x.dtype, "math")
        return True

    def constant(self):
        """An array literal of the program, which the other operations mix with the arguments."""
        a = self.draw(arrays())
        if a.dtype == onp.int32:
            a = a.astype(onp.int64)
        self.add(f"np.asarray({literal(a)})", a.shape, a.dtype.name)
        return True

    def branch(self):
        x = self.pick(lambda v: not v.constant)   # ORACLE["constant_branch"]
        y = self.pick(lambda v: v.dtype in FLOAT)
        if y is None:
            return False
        flat = f"np.reshape({x.name}, (-1,))"
        cond = self.draw(st.sampled_from([f"float(np.sum({x.name})) > 0", f"bool(np.any(np.isnan({x.name})))",
                                          f"float(np.mean({x.name})) <= 0.5",
                                          f"{x.name}.size > 1 and float({flat}[0]) < float({flat}[-1])"]))
        name = f"v{len(self.p.lines)}"
        text = f"if {cond}:\n    {name} = {y.name} * 2.0\nelse:\n    {name} = -{y.name}"
        self.p.lines.append((text, text, "exact", 1))
        self.p.branches.append(cond)
        self.p.features.add("branch")
        self.values.append(Value(name, y.shape, y.dtype))
        return True


OPS = ["unary", "binary", "where", "reduction", "scan", "reshape", "slicing", "int_index", "gather", "mask", "at",
       "matmul", "concat", "clip_astype", "lax_op", "constant", "branch", "at_mode", "at_staged", "reduction_kw",
       "lax_int"]


@st.composite
def programs(draw, max_ops=4):
    n_args = draw(st.integers(1, 2))
    first = draw(st.sampled_from(["float64", "float64", "float32", "int64", "int32", "bool"]))
    args = [draw(arrays(first))] + [draw(arrays()) for _ in range(n_args - 1)]
    p = Program(args)
    b = Builder(draw, p)
    for _ in range(draw(st.integers(1, max_ops))):
        op = draw(st.sampled_from(OPS))
        done = getattr(b, op)()
        if done == "error":
            p.features.add("error")
            break
    p.result = b.values[-1].name   # (after a line that raises, any value defined before it)
    return p


# -- running one program both ways -------------------------------------------------------

def _scaled(a, b):
    """`a` and `b` divided by the larger of their magnitudes (±inf as ±1; 1 where both are 0),
    and that divisor: how jitad computes `hypot`'s and `arctan2`'s derivatives without overflow."""
    m = jjnp.maximum(jjnp.abs(a), jjnp.abs(b))
    m = jjnp.where(m == 0, 1.0, m)
    return (*(jjnp.where(jjnp.isinf(v), jjnp.sign(v), v / m) for v in (a, b)), m)


@jax.custom_jvp
def _hypot_scaled_f(a, b):
    return jjnp.hypot(a, b)


@_hypot_scaled_f.defjvp
def _hypot_scaled_jvp(primals, tangents):
    """x / hypot(x, y) on x and y scaled by the larger magnitude (ORACLE["hypot_scaled"])."""
    (a, b), (ta, tb) = primals, tangents
    xs, ys, _ = _scaled(a, b)
    zero = jjnp.maximum(jjnp.abs(a), jjnp.abs(b)) == 0
    r = jjnp.hypot(xs, ys)
    return jjnp.hypot(a, b), jjnp.where(zero, 0.5, xs / r) * ta + jjnp.where(zero, 0.5, ys / r) * tb


def hypot_scaled(a, b):
    dtype = jjnp.hypot(a, b).dtype
    return _hypot_scaled_f(jjnp.asarray(a, dtype), jjnp.asarray(b, dtype))


@jax.custom_jvp
def _arctan2_scaled_f(y, x):
    return jjnp.arctan2(y, x)


@_arctan2_scaled_f.defjvp
def _arctan2_scaled_jvp(primals, tangents):
    """x / r² and -y / r² on y and x scaled by the larger magnitude (ORACLE["arctan2_scaled"])."""
    (y, x), (ty, tx) = primals, tangents
    xs, ys, s = _scaled(x, y)
    d = (xs * xs + ys * ys) * s
    d = jjnp.where(d == 0, 1.0, d)
    return jjnp.arctan2(y, x), ty * (xs / d) + tx * -(ys / d)


def arctan2_scaled(y, x):
    dtype = jjnp.arctan2(y, x).dtype
    return _arctan2_scaled_f(jjnp.asarray(y, dtype), jjnp.asarray(x, dtype))


@jax.custom_jvp
def _arccosh_exact_f(x):
    return jjnp.arccosh(x)


@_arccosh_exact_f.defjvp
def _arccosh_exact_jvp(primals, tangents):
    """1 / (sqrt(x - 1) sqrt(x + 1)): no overflow, NaN below 1 (ORACLE["arccosh_exact"])."""
    (x,), (t,) = primals, tangents
    return jjnp.arccosh(x), t / (jjnp.sqrt(x - 1.0) * jjnp.sqrt(x + 1.0))


def arccosh_exact(x):
    return _arccosh_exact_f(jjnp.asarray(x, jjnp.arccosh(x).dtype))


@jax.custom_jvp
def _divide_by_quotient_f(a, b):
    return jjnp.divide(a, b)


def _divide_by_quotient_jvp(primals, tangents):
    """d(a / b) = da / b - db (a / b) / b, a term of a constant operand left out, as JAX's
    own (ORACLE["divide_by_quotient"])."""
    (a, b), (ta, tb) = primals, tangents
    q = a / b
    t = jjnp.zeros_like(q)
    if _nonzero(ta):
        t = t + ta / b
    if _nonzero(tb):
        t = t - tb * q / b
    return q, t


def _nonzero(t):
    return not isinstance(t, jax.custom_derivatives.SymbolicZero)


_divide_by_quotient_f.defjvp(_divide_by_quotient_jvp, symbolic_zeros=True)


def divide_by_quotient(a, b):
    dtype = jjnp.divide(a, b).dtype
    return _divide_by_quotient_f(jjnp.asarray(a, dtype), jjnp.asarray(b, dtype))


JAX_ENV = {"np": jjnp, "lax": jax.lax, "onp": onp, "hypot_scaled": hypot_scaled, "arctan2_scaled": arctan2_scaled,
           "arccosh_exact": arccosh_exact, "divide_by_quotient": divide_by_quotient}


class Side:
    def __init__(self, name):
        self.name = name
        if name == "jitad":
            self.np, self.lax, self.jit, self.grad, self.vmap, self.jvp = jitad.numpy, jitad.lax, jitad.jit, \
                jitad.grad, jitad.vmap, jitad.jvp
        else:
            self.np, self.lax, self.jit, self.grad, self.vmap, self.jvp = jjnp, jax.lax, jax.jit, jax.grad, \
                jax.vmap, jax.jvp

    def function(self, program, decisions=None):
        env = {"np": self.np, "lax": self.lax, "onp": onp} if self.name == "jitad" else dict(JAX_ENV)
        exec(program.source(self.name, decisions), env)
        return env["f"]

    def scan(self, f, xs, rest, checkpoints):
        """The program as the body of a loop over the first axis of `xs` (staged: a `FOR`)."""
        def step(c, x):
            return c, f(x, *rest)
        if self.name == "jitad":
            return jitad.scan(step, 0.0, xs, checkpoints=checkpoints)[1]
        return jax.lax.scan(step, 0.0, xs)[1]


def _jax_args(args, staged=True):
    """The arguments JAX gets: int32 as int64 where jitad stages them (ORACLE["int32_as_int64"])."""
    return [a.astype(onp.int64) if a.dtype == onp.int32 and staged else a for a in args]


def _batched(a):
    """`a` and a second lane (its values rolled) stacked on a new first axis."""
    a = onp.asarray(a)
    return onp.stack([a, onp.roll(a.ravel(), 1).reshape(a.shape)])


TRANSFORMS = ["plain", "jit", "grad", "vmap", "scan", "scan_grad", "jvp"]
DERIVATIVES = ("grad", "scan_grad", "jvp")


def applies(program, transform):
    first = program.args[0]
    if transform in DERIVATIVES and first.dtype.kind != "f":
        return False
    # (a plain call's index is plain, and so is jvp's, whose other arguments stay NumPy's arrays)
    return transform not in ("plain", "jvp") or "staged_index" not in program.features


def run(side, program, transform, decisions=None):
    """`("ok", value)` or `("error", exception)` for `program` under `transform`."""
    s = Side(side)
    # (JAX gets its own arrays: NumPy ones left unbatched by `vmap` would be indexed by NumPy)
    args = [onp.array(a) for a in program.args] if side == "jitad" else \
        [jjnp.asarray(a) for a in _jax_args(program.args, transform != "plain")]
    try:
        f = s.function(program, decisions)

        def loss(*a):
            return s.np.sum(s.np.asarray(f(*a)).astype(s.np.float64))
        with onp.errstate(all="ignore"):
            if transform == "plain":
                out = f(*args)
            elif transform == "jit":
                out = s.jit(f)(*args)
            elif transform == "grad":
                out = s.grad(loss)(*args)
            elif transform == "vmap":
                out = s.vmap(f, in_axes=(0,) + (None,) * (len(args) - 1))(_batched(args[0]), *args[1:])
            elif transform == "jvp":   # (forward mode along a fixed direction of the first argument)
                tangent = _direction(args[0]) if side == "jitad" else jjnp.asarray(_direction(args[0]))
                value, out = s.jvp(lambda a: _as_float(s.np, f(a, *args[1:])), (args[0],), (tangent,))
                out = onp.where(onp.isnan(onp.asarray(value)), onp.nan, out)   # ORACLE["tangent_where_value_nan"]
            elif transform == "scan":
                out = s.jit(lambda xs, *rest: s.scan(f, xs, rest, None))(_batched(args[0]), *args[1:])
            else:
                out = s.grad(lambda xs, *rest: s.np.sum(s.np.asarray(s.scan(f, xs, rest, 1)).astype(s.np.float64)))(
                    _batched(args[0]), *args[1:])
        return "ok", onp.asarray(out)
    except Exception as e:   # noqa: BLE001 -- every outcome is compared
        return "error", e


def _as_float(np, out):
    """A result as floats (in its own precision, which the tolerance follows)."""
    out = np.asarray(out)
    return out if out.dtype.kind == "f" else out.astype(np.float64)


def _direction(a):
    """A tangent for `a`: fixed values of both signs, of its shape and dtype."""
    a = onp.asarray(a)
    return onp.cos(onp.arange(a.size) + 0.5).reshape(a.shape).astype(a.dtype)


def magnitude(program):
    """The largest finite magnitude among the arguments and the values the program
    computes (JAX, eager, line by line): the scale of the absolute tolerance."""
    env = dict(JAX_ENV)
    env.update({f"x{k}": a for k, a in enumerate(_jax_args(program.args))})
    top = 1.0
    with onp.errstate(all="ignore"):
        for _, text, _, _ in program.lines:
            try:
                exec(text, env)
            except Exception:   # noqa: BLE001
                break
        for v in list(env.values()):
            if isinstance(v, (onp.ndarray, jax.Array)) and onp.asarray(v).dtype.kind == "f":
                finite = onp.abs(onp.asarray(v, dtype=onp.float64))
                finite = finite[onp.isfinite(finite)]
                if finite.size:
                    top = max(top, float(finite.max()))
    return top


def decisions_of(program):
    """The truth of each Python branch's condition, run eagerly by JAX (up to a line that
    raises: the program's last)."""
    env = dict(JAX_ENV)
    env.update({f"x{k}": jjnp.asarray(a) for k, a in enumerate(_jax_args(program.args))})
    taken = []
    with onp.errstate(all="ignore"):
        for _, text, _, _ in program.lines:
            if text.startswith("if "):
                cond = text.split("\n")[0][3:-1]
                taken.append(bool(eval(cond, env)))
            try:
                exec(text, env)
            except Exception:   # noqa: BLE001
                break
    return taken


@dataclass
class Finding:
    transform: str
    what: str
    program: Program
    known: str = ""

    def reproducer(self):
        """The finding as a runnable Python script."""
        p = self.program
        args = ", ".join(f"x{k}" for k in range(len(p.args)))
        lanes = f"onp.stack([x0, onp.roll(x0.ravel(), 1).reshape(x0.shape)]){args[2:]}"
        scan = "jitad.scan(lambda c, x: (c, f(x, *rest)), 0.0, xs{})[1]"
        call = {"plain": f"f({args})", "jit": f"jitad.jit(f)({args})",
                "grad": f"jitad.grad(lambda *a: np.sum(np.asarray(f(*a)).astype(np.float64)))({args})",
                "vmap": f"jitad.vmap(f, in_axes=(0,) + (None,) * {len(p.args) - 1})({lanes})",
                "scan": f"jitad.jit(lambda xs, *rest: {scan.format('')})({lanes})",
                "scan_grad": f"jitad.grad(lambda xs, *rest: np.sum(np.asarray("
                             f"{scan.format(', checkpoints=1')}).astype(np.float64)))({lanes})",
                "jvp": f"jitad.jvp(lambda a: np.asarray(f(a{args[2:]})) * 1.0, (x0,), "
                       f"({literal(_direction(p.args[0]))},))[1]"}[self.transform]
        lines = ["import numpy as onp", "import jitad", "import jitad.numpy as np", "import jitad.lax as lax", "",
                 p.source("jitad"), ""]
        if self.what.startswith(NAN_PREFIX):
            lines.insert(4, 'jitad.config.update("jax_debug_nans", True)')
        lines += [f"x{k} = {literal(a)}" for k, a in enumerate(p.args)]
        lines += [f"print({call})", f"# {self.transform}: {self.what}"]
        if p.source("jitad") != p.source("jax"):
            lines.append("# the JAX oracle runs:\n# " + p.source("jax").replace("\n", "\n# "))
        if self.known:
            lines.append(f"# known bug: {self.known}")
        return "\n".join(lines)


def _describe(outcome):
    kind, v = outcome
    if kind == "error":
        return f"{type(v).__name__}: {str(v).splitlines()[0] if str(v) else ''}"[:300]
    return f"{v.dtype}{list(v.shape)} {onp.array2string(v, threshold=12, precision=17)}"[:600]


BUILTIN_ERRORS = (TypeError, ValueError, IndexError)


def _error_ok(mine, theirs, eager=False):
    """jitad's exception where JAX raised `theirs`: a JitadError or JAX's builtin class
    (eagerly, any of them: ORACLE["eager_numpy_errors"])."""
    if isinstance(mine, JitadError):
        return True
    return any(isinstance(mine, cls) and (eager or isinstance(theirs, cls)) for cls in BUILTIN_ERRORS)


def compare(mine, theirs, budget, scale):
    """'' where jitad's value matches JAX's, else what differs."""
    if mine.shape != theirs.shape:
        return f"shape {mine.shape} vs JAX {theirs.shape}"
    kinds = {"f": "f", "i": "i", "u": "i", "b": "b"}
    if kinds[mine.dtype.kind] != kinds[theirs.dtype.kind]:
        return f"dtype {mine.dtype} vs JAX {theirs.dtype}"
    if mine.dtype.kind != "f":
        return "" if onp.array_equal(mine, theirs) else "values differ"
    a, b = mine.astype(onp.float64), theirs.astype(onp.float64)
    if not onp.array_equal(onp.isnan(a), onp.isnan(b)):
        return "NaN at different places"
    ok = onp.isnan(a)
    eps = max(onp.finfo(mine.dtype).eps, onp.finfo(theirs.dtype).eps)
    tol = budget * eps
    with onp.errstate(all="ignore"):
        close = (a == b) | (onp.abs(a - b) <= tol * onp.maximum(onp.abs(a), onp.abs(b)) + tol * scale)
        tiny = onp.finfo(mine.dtype).tiny if mine.dtype == theirs.dtype else onp.finfo(onp.float32).tiny
        close |= (onp.abs(a) <= tiny * budget) & (onp.abs(b) <= tiny * budget)   # flushed or not
    close &= onp.isfinite(a) & onp.isfinite(b) | (a == b)   # infinities exactly
    close |= ok
    return "" if close.all() else f"values differ beyond {budget} ulps (scaled by {scale:.3g})"


def check(program, transforms=TRANSFORMS):
    """The findings for one program, under each of `transforms` that applies."""
    findings = []
    budget, scale = program.budget(), magnitude(program)
    decisions = None
    if program.branches:
        try:
            decisions = decisions_of(program)
        except Exception:   # noqa: BLE001
            decisions = None
    for t in transforms:
        if not applies(program, t):
            continue
        mine = run("jitad", program, t)
        theirs = run("jax", program, t)
        what = _judge(program, t, mine, theirs, budget, scale, decisions)
        if what and (flushed := _flushed(program)) is not None and not check(flushed, (t,)):
            continue   # ORACLE["subnormals_flushed"]
        if what:
            findings.append(Finding(t, what, program, _known(program, t, mine, theirs)))
        elif t in NAN_CHECKED and (what := _debug_nans(program, t, mine)):
            findings.append(Finding(t, what, program))
    return findings


NAN_CHECKED = ("jit", "grad")   # (the transformations the NaN check reruns: one compile each, where it applies)


def _debug_nans(program, t, mine):
    """'' where `jax_debug_nans` behaves, else what it did: a result of jitad's with a NaN,
    from arguments and constants without one, means some primitive made it, so with the
    setting on the call must raise `NonFiniteError` naming a primitive and a line of the
    program (forward or backward)."""
    if mine[0] != "ok" or mine[1].dtype.kind != "f" or not onp.isnan(mine[1]).any() or \
            any(a.dtype.kind == "f" and onp.isnan(a).any() for a in map(onp.asarray, program.args)) or \
            any("onp.nan" in text for text, *_ in program.lines):
        return ""
    jitad.config.update("jax_debug_nans", True)
    try:
        kind, out = run("jitad", program, t)
    finally:
        jitad.config.update("jax_debug_nans", False)
    if kind == "ok":
        return f"{NAN_PREFIX}returned a NaN ({_describe(('ok', out))}) without raising"
    # (an eager line, of the program's constants only, names its line as "at", not "made at")
    made = re.search(r"`\w+`.*produced a NaN.*\n\s*(?:made )?at <string>:(\d+)", str(out))
    if not isinstance(out, NonFiniteError) or not made or not 2 <= int(made[1]) <= _source_lines(program):
        return f"{NAN_PREFIX}raised {_describe(('error', out))}, not one naming the primitive and the program's line"
    return ""


NAN_PREFIX = "with jax_debug_nans on, jitad "


def _source_lines(program):
    """The number of lines of the program's source (a Python `if` takes four)."""
    return len(program.source("jitad").splitlines())


def _known(program, t, mine, theirs):
    """The reason of the `KNOWN` entry whose exact condition the finding meets, or ''."""
    for feature, (condition, reason) in KNOWN.items():
        if feature in program.features and KNOWN_CONDITIONS[condition](program, t, mine, theirs):
            return reason
    return ""


def _cumprod_beyond_range(program, mine, expected):
    """`expected` (JAX's derivative) with jitad's value where one is NaN and the other ±inf, in
    a program whose `cumprod` (on the arguments or on the lanes `vmap` and `scan` take) has a
    running product that is ±inf or NaN (ORACLE["cumprod_beyond_range"]); else as it is."""
    a, b = (onp.asarray(v, dtype=onp.float64) for v in (mine, expected))
    odd = onp.isnan(a) & onp.isinf(b) | onp.isinf(a) & onp.isnan(b)
    if not odd.any():
        return expected
    first = onp.asarray(program.args[0])
    lanes = [onp.roll(first.ravel(), 1).reshape(first.shape)] + list(program.args[1:])
    if any(_cumprods_not_finite(program, args) for args in (program.args, lanes)):
        return onp.where(odd, mine, expected)
    return expected


def _cumprods_not_finite(program, args):
    """Whether a `cumprod` line of `program`, run eagerly by JAX on `args`, has a value that is not finite."""
    return _some_line(program, args, "np.cumprod(", lambda env, value, operand: not onp.isfinite(value).all())


def _some_line(program, args, call, holds):
    """Whether a line of `program` calling `call`, run eagerly by JAX on `args`, `holds(env,
    its value, its first operand)`."""
    env = dict(JAX_ENV)
    env.update({f"x{k}": jjnp.asarray(a) for k, a in enumerate(_jax_args(args))})
    with onp.errstate(all="ignore"):
        for _, text, _, _ in program.lines:
            try:
                exec(text, env)
            except Exception:   # noqa: BLE001
                return False
            operand = re.match(rf"\w+ = {re.escape(call)}(\w+)", text)
            if operand and holds(env, onp.asarray(env[text.split(" = ")[0]]), onp.asarray(env[operand[1]])):
                return True
    return False


KNOWN_CONDITIONS = {}


def _flushed(program):
    """`program` with its subnormal and near-subnormal arguments (ORACLE["subnormals_flushed"])
    made zeros of their sign, or None if it has none."""
    args = [onp.array(a) for a in program.args]
    found = False
    for a in args:
        if a.dtype.kind == "f":
            info = onp.finfo(a.dtype)
            tiny = (a != 0) & (onp.abs(a) < info.tiny * 2.0 ** 16)
            a[tiny], found = onp.copysign(0.0, a[tiny]), found or bool(tiny.any())
    return Program(args, program.lines, program.result, program.features, program.branches) if found else None


def _judge(program, t, mine, theirs, budget, scale, decisions):
    eager = t in ("plain", "jvp")   # (jvp from Python: the other arguments stay NumPy's arrays)
    if eager and mine[0] == "error" and isinstance(mine[1], IndexError) and "gather_out_of_range" in program.features:
        return ""   # ORACLE["eager_numpy_errors"]: NumPy's indexing outside staged code
    if mine[0] == "error" and not isinstance(mine[1], JitadError) and \
            not (theirs[0] == "error" and _error_ok(mine[1], theirs[1], eager)):
        return f"jitad raised {_describe(mine)}" + (f" (JAX: {_describe(theirs)})" if theirs[0] == "error" else
                                                    f" where JAX returns {_describe(theirs)}")
    branch = program.branches_on_values()
    if branch and t in DERIVATIVES:
        # ORACLE["grad_branch"]: the gradient of the branch taken (StagingError inside a scan)
        if t == "scan_grad" and mine[0] == "error" and isinstance(mine[1], StagingError):
            return ""
        if decisions is None:   # grad called from Python follows the branch the values take
            decisions = decisions_of(program)
        if decisions is not None:
            theirs = run("jax", program, t, decisions)
    if branch and t in ("vmap", "scan") and mine[0] == "error" and isinstance(mine[1], StagingError):
        return ""   # jitad stages every argument of vmap and scan (JAX: the unbatched ones stay concrete)
    if branch and t in ("jit", "vmap", "scan") and theirs[0] == "error":   # (a branch on a constant is fine)
        if mine[0] == "ok":
            return f"a Python branch on a staged value returned {_describe(mine)}; it must raise StagingError"
        if isinstance(mine[1], StagingError):
            return ""
    if theirs[0] == "error":
        if mine[0] == "ok":
            return f"jitad returned {_describe(mine)} where JAX raises {_describe(theirs)}"
        return "" if _error_ok(mine[1], theirs[1], eager) else \
            f"jitad raised {_describe(mine)}; JAX {_describe(theirs)}"
    if mine[0] == "error":
        return f"jitad raised {_describe(mine)} where JAX returns {_describe(theirs)}"
    grad = t in DERIVATIVES
    scale_t = max(scale, _top(theirs[1])) if grad else scale
    expected = theirs[1]
    if grad and program.features & set(ORACLE["finite_grad_where_jax_nan"]) and mine[1].shape == expected.shape:
        expected = onp.where(onp.isnan(expected) & ~onp.isnan(mine[1]), mine[1], expected)
    if grad and "cumprod" in program.features and mine[1].shape == expected.shape:
        expected = _cumprod_beyond_range(program, mine[1], expected)
    diff = compare(mine[1], expected, budget * (4 if grad else 1), scale_t)
    return f"{diff}: jitad {_describe(mine)}; JAX {_describe(theirs)}" if diff else ""


def _top(v):
    v = onp.abs(onp.asarray(v, dtype=onp.float64)) if v.dtype.kind in "fib" else onp.zeros(1)
    v = v[onp.isfinite(v)]
    return float(v.max()) if v.size else 1.0


# -- the driver ----------------------------------------------------------------------------

def fuzz(minutes, seed=None, max_ops=4, out=sys.stdout):
    """Run programs for `minutes`; print each new finding as a reproducer; return them."""
    start = time.monotonic()
    deadline, next_report = start + 60 * minutes, [start + 300]
    found, seen, count = [], set(), [0]

    @settings(max_examples=10**9, deadline=None, database=None,
              suppress_health_check=list(HealthCheck), phases=("generate",))
    @given(programs(max_ops=max_ops))
    def one(program):
        if time.monotonic() > deadline:
            raise _Done
        count[0] += 1
        if time.monotonic() > next_report[0]:   # (progress, every 5 minutes)
            next_report[0] += 300
            print(f"# {count[0] - 1} programs in {(time.monotonic() - start) / 60:.1f} minutes", file=out, flush=True)
        try:
            findings = check(program)
        except Exception as e:   # noqa: BLE001 -- the fuzzer's own bug: say so, go on
            print(f"\n# --- fuzzer error {type(e).__name__}: {e}\n{program.source('jitad')}", file=out, flush=True)
            return
        if not findings:
            return
        key = (category(findings[0].what), findings[0].known)
        if key in seen:   # one reproducer per kind of finding
            return
        seen.add(key)
        first = findings[0] if findings[0].known else minimize(findings[0])
        found.append(first)
        also = "".join(f"\n# also {f.transform}: {f.what[:200]}" for f in findings[1:])
        print(f"\n# --- finding {len(found)}{' (known)' if first.known else ''}\n"
              f"{first.reproducer()}{also}", file=out, flush=True)

    if seed is not None:
        one = hypothesis.seed(seed)(one)
    try:
        one()
    except _Done:
        pass
    print(f"\n# {count[0]} programs checked", file=out, flush=True)
    return found


def minimize(finding):
    """A smaller program with the same kind of finding under the same transformation: lines
    dropped one at a time (and the result moved to an earlier value) while it persists."""
    p, t = finding.program, finding.transform
    want = category(finding.what)

    def same(candidate):
        found = [f for f in check(candidate, (t,)) if category(f.what) == want]
        return found[0] if found else None
    best = finding
    for k in range(len(p.lines) - 1, -1, -1):
        if len(best.program.lines) <= 1 or k >= len(best.program.lines):
            continue
        lines = best.program.lines[:k] + best.program.lines[k + 1:]
        defined = [text.split(" = ")[0] for text, *_ in lines if not text.startswith("if ")]
        for result in [best.program.result] + defined[::-1]:
            candidate = Program(best.program.args, lines, result, best.program.features, best.program.branches)
            if result in defined + [f"x{i}" for i in range(len(p.args))] and (smaller := same(candidate)):
                best = Finding(t, smaller.what, candidate, finding.known)
                break
    return best


def category(what):
    """A finding's kind, its numbers and values left out (for telling new ones apart)."""
    return re.sub(r"[-+0-9.e]+|\[.*", "", what.split(":")[0] if not what.startswith("jitad raised") else what[:60])


class _Done(Exception):
    pass


def main(argv=None):
    parser = argparse.ArgumentParser(description="Differential fuzzing of jitad against JAX")
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--max-ops", type=int, default=4)
    parser.add_argument("--profile", choices=("ops", "models"), default="ops",
                        help="ops: these small programs; models: model-shaped ones (fuzz_models.py)")
    a = parser.parse_args(argv)
    if a.profile == "models":
        from . import fuzz_models
        return 1 if fuzz_models.fuzz(a.minutes, a.seed) else 0
    found = fuzz(a.minutes, a.seed, a.max_ops)
    new = [f for f in found if not f.known]
    print(f"\n# {len(found)} findings ({len(new)} not known) in {a.minutes} minutes")
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
