"""autograd's `autograd.extend`: functions with their own derivatives and vector spaces.

`@primitive` marks a function whose derivative the user gives: `defvjp` (reverse
mode, autograd's `vjpmaker(ans, *args, **kwargs) -> (g -> cotangent)` per argument)
and `defjvp` (forward mode, `jvp(g, ans, *args, **kwargs) -> tangent` per argument).
They become a `jitad.custom_vjp` / `jitad.custom_jvp` rule, so the function compiles
and its rule runs as staged code. Without any rule it is evaluated (and compiled) as it is,
and differentiating it raises `MissingRuleError`, as autograd's does.

>>> from jitad.extend import primitive, defvjp
>>> @primitive
... def cube(x):
...     return x ** 3
>>> defvjp(cube, lambda ans, x: lambda g: g * 3 * x ** 2)
>>> jitad.grad(cube)(2.0)
12.0

`vspace(x)` is the vector space of a value (an array, a scalar, or a container of
them): `.zeros()`, `.ones()`, `.randn()`, `.standard_basis()`, `.add`, `.scalar_mul`,
`.inner_prod`, `.covector`, `.size`, `.shape`, `.dtype`. `Box` is the type of a staged
value (what autograd's traced values are).
"""
import functools
import types
import warnings

import numpy as np

from . import numeric as N
from .dispatch import USER_SPACE_CALL
from .lower.compile import result_array_class
from .errors import ArgumentError, MissingRuleError, UnsupportedError
from .pytree import flatten, unflatten
from .staging import Staged as Box
from .staging import is_staged
from .staging.complex import Complex
from .tree_util import tree_leaves, tree_map
from .transforms.custom import custom_jvp, custom_vjp

__all__ = ["Box", "JVPNode", "SparseObject", "VJPNode", "VSpace", "def_linear", "defjvp", "defjvp_argnum",
           "defjvp_argnums", "defvjp", "defvjp_argnum", "defvjp_argnums", "notrace_primitive", "primitive",
           "primitive_jvps", "primitive_vjps",
           "register_notrace", "vspace"]


# -- vector spaces -----------------------------------------------------------------

def _shape(x):
    return tuple(x.shape) if is_staged(x) else np.shape(x)


def _dtype(x):
    if is_staged(x):
        return np.dtype({"f64": np.float64, "f32": np.float32, "i64": np.int64, "bool": np.bool_}[x.ir_dtype])
    return np.result_type(x)


def _whole(x):
    """A complex staged value is one element of a space (a pytree of its two parts elsewhere)."""
    return isinstance(x, Complex)


def _map(fn, *trees):
    return tree_map(fn, *trees, is_leaf=_whole)


def _complex(x):
    return not is_staged(x) and np.iscomplexobj(x)


def _reals(dtype):
    """Real numbers per element: two for a complex dtype."""
    return 2 if dtype.kind == "c" else 1


class VSpace:
    """The vector space of values shaped like an example: an array space (`shape`,
    `dtype`), or a container space of the spaces of a tuple's, list's or dict's items."""
    mappings = {}   # a user's value type -> its space's maker (`VSpace.register`)

    def __init__(self, value):
        leaves, self._treedef = flatten(value)
        self._leaves = [(_shape(x), _dtype(x)) for x in leaves]
        self._scalar = [not _shape(x) and not isinstance(x, np.ndarray) and not is_staged(x) for x in leaves]
        self.value_type = type(value)

    @property
    def shape(self):
        return self._leaves[0][0] if self._treedef.kind == "leaf" else self._treedef

    @property
    def dtype(self):
        return self._leaves[0][1] if self._treedef.kind == "leaf" else None

    @property
    def size(self):
        return int(sum(np.prod(s, dtype=np.int64) * _reals(d) for s, d in self._leaves))

    @property
    def ndim(self):
        return len(self.shape) if self._treedef.kind == "leaf" else None

    def _build(self, make):
        return unflatten(self._treedef, [make(s, d) if not (scalar and not s) else make(s, d)[()].item()
                                         for (s, d), scalar in zip(self._leaves, self._scalar)])

    def zeros(self):
        """The zero of the space."""
        return self._build(lambda s, d: np.zeros(s, d))

    def ones(self):
        """The value with every element one."""
        return self._build(lambda s, d: np.ones(s, d) * (1 + 1j if d.kind == "c" else 1))

    def randn(self):
        """A random value with standard normal elements."""
        def draw(s, d):   # a scalar draw is a float; a complex element draws both parts
            x = np.asarray(np.random.randn(*s)).astype(d)
            return x + 1j * np.asarray(np.random.randn(*s)).astype(d) if d.kind == "c" else x
        return self._build(draw)

    def standard_basis(self):
        """The unit vectors of the space, one per element (two, 1 and 1j, per complex one)."""
        for k in range(self.size):
            flat = np.zeros(self.size)
            flat[k] = 1.0
            yield self._unravel(flat)

    def _unravel(self, flat):
        out, start = [], 0
        for (s, d), scalar in zip(self._leaves, self._scalar):
            n = int(np.prod(s, dtype=np.int64))
            part = flat[start:start + n]
            if d.kind == "c":   # the real parts, then the imaginary parts
                part = part + 1j * flat[start + n:start + 2 * n]
            part = part.reshape(s).astype(d)
            out.append(part[()].item() if scalar and not s else part)
            start += n * _reals(d)
        return unflatten(self._treedef, out)

    # autograd's layout: the public operations call the underscore ones, which a user's
    # vector space (`VSpace.register`) overrides

    def add(self, x, y):
        """`x + y`, item by item."""
        _not_recorded((x, y), "add")
        return self._add(x, y)

    def mut_add(self, x, y):
        """`x + y`, from zeros where `x` is None (autograd may add in place; jitad's own
        spaces make a new value)."""
        return self._mut_add(self.zeros() if x is None else x, y)

    def scalar_mul(self, x, a):
        """`a * x`, item by item."""
        _not_recorded((x,), "scalar_mul")
        return self._scalar_mul(x, a)

    def inner_prod(self, x, y):
        """The sum of the products of the elements of `x` and `y` (of complex ones, the real
        part of conj(x) y: complex numbers as pairs of reals)."""
        _not_recorded((x, y), "inner_prod")
        return self._inner_prod(x, y)

    def covector(self, x):
        """The dual of `x`: `x` itself, its complex elements conjugated."""
        return self._covector(x)

    def _add(self, x, y):
        return _map(lambda a, b: a + b, x, y)

    def _mut_add(self, x, y):
        return self._add(x, y)

    def _scalar_mul(self, x, a):
        return _map(lambda v: v * a, x)

    def _inner_prod(self, x, y):
        return sum(np.real(np.vdot(a, b)) if _complex(a) or _complex(b) else N.sum(a * b)
                   for a, b in zip(tree_leaves(x, _whole), tree_leaves(y, _whole)))

    def _covector(self, x):
        return _map(lambda v: np.conj(v) if _complex(v) else v, x)

    @classmethod
    def register(cls, value_type, vspace_maker=None):
        """Make `vspace(x)` of a `value_type` value `vspace_maker(x)` (default: this class):
        a user's vector space, with `zeros` and `_add`, `_scalar_mul`, `_inner_prod`.
        `grad` with respect to such a value returns its cotangent in that space."""
        VSpace.mappings[value_type] = vspace_maker or cls
        USER_SPACE_CALL[0] = _user_space_call

    @property
    def iscomplex(self):
        """Whether an element is complex (autograd's attribute)."""
        return any(d.kind == "c" for _, d in self._leaves)

    def __eq__(self, other):
        if not hasattr(self, "_treedef"):   # a user's space: autograd's equality
            return type(self) is type(other) and self.__dict__ == other.__dict__
        return isinstance(other, VSpace) and (self._treedef, self._leaves) == (other._treedef, other._leaves)

    def __hash__(self):
        return hash((self._treedef, tuple(self._leaves))) if hasattr(self, "_treedef") else id(self)

    def __repr__(self):
        if not hasattr(self, "_treedef"):
            return f"{type(self).__name__}_{self.__dict__}"
        if self._treedef.kind == "leaf":
            return f"ArrayVSpace_{{'shape': {self.shape}, 'dtype': {self.dtype!r}}}"
        return f"VSpace({self._treedef})"


def vspace(value):
    """The vector space of `value`: `vspace(np.ones((2, 3))).size == 6`."""
    t = type(value)
    maker = VSpace.mappings.get(_UNWATCHED.get(t, t))
    if maker is not None:
        return maker(value)
    try:
        return VSpace(value)
    except TypeError:
        raise ArgumentError(f"vspace: no vector space for a value of type {type(value).__name__}; give an "
                            "array, a number, or a tuple, list or dict of them") from None


class SparseObject:
    """A cotangent given by how it adds into a dense value: `mut_add(dense) -> dense`
    (a VJP may return one; jitad adds it to zeros of `vs`)."""
    __slots__ = ("vs", "mut_add")

    def __init__(self, vs, mut_add):
        self.vs, self.mut_add = vs, mut_add


def _dense(ct):
    if isinstance(ct, SparseObject):
        return ct.mut_add(ct.vs.zeros())
    return ct


def _zeros_like(x):
    return tree_map(lambda v: N.zeros_like(v), x)


# -- primitives ----------------------------------------------------------------------

# The derivative rules of the primitives, by primitive (autograd's tables of the same names):
# `defvjp` and `defjvp` fill them, and a rule taken out of them is gone.
primitive_vjps = {}   # primitive -> (argnums, ans, args, kwargs) -> g -> tuple of cotangents
primitive_jvps = {}   # primitive -> (argnums, gs, ans, args, kwargs) -> tangent


_NUMBERS = frozenset((float, int, bool, np.float64, np.float32, np.int64, np.bool_))


def _plain_values(args, kwargs):
    """Whether no argument holds a staged value: arrays and numbers known by their type
    alone (the usual eager call), anything else flattened and looked through."""
    if not kwargs:
        array = result_array_class()
        if all(type(a) is np.ndarray or type(a) is array or type(a) in _NUMBERS for a in args):
            return True
    return not any(is_staged(v) for v in flatten((args, kwargs))[0])


class primitive:
    """A function with derivative rules given by `defvjp`/`defjvp` (see the module); like
    autograd's, one without any rule cannot be differentiated (`MissingRuleError`)."""

    def __init__(self, fun):
        if not callable(fun):
            raise ArgumentError(f"primitive takes a function, got {type(fun).__name__}")
        self.fun = fun
        functools.update_wrapper(self, fun)

    vjp_argnums = property(lambda self: primitive_vjps.get(self),
                           lambda self, rule: primitive_vjps.__setitem__(self, rule))
    jvp_argnums = property(lambda self: primitive_jvps.get(self),
                           lambda self, rule: primitive_jvps.__setitem__(self, rule))
    # what the dispatcher keys a function calling this one by (`jitad.dispatch`): a fresh
    # primitive of the same function and rules finds the same compiled code
    key_parts = property(lambda self: (self.fun, self.vjp_argnums, self.jvp_argnums))

    def __get__(self, obj, objtype=None):   # a method (autograd's primitives are functions): bind
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args, **kwargs):
        recording = _RECORDING[0]
        if recording is not None and recording.running and recording.takes(args):
            return recording.call(self, args, kwargs)
        if _plain_values(args, kwargs):   # plain values: the function itself, as autograd runs it
            return self.fun(*args, **kwargs)   # (no rule to bind)
        if self.vjp_argnums is None and self.jvp_argnums is None:
            return self._without_rules(args, kwargs)
        # arguments that are not values (functions, strings) and Python ints (an index, a key: no
        # gradient) are fixed: the rule closes over them
        fixed = {i: a for i, a in enumerate(args) if not _is_value(a) or type(a) in (int, bool)}

        def full(dynamic):
            it = iter(dynamic)
            return tuple(fixed[i] if i in fixed else next(it) for i in range(len(args)))

        def body(*dynamic):
            return self.fun(*full(dynamic), **kwargs)
        body.__name__ = getattr(self.fun, "__name__", "primitive")
        if self.vjp_argnums is not None:
            rule = custom_vjp(body)
            rule.defvjp(lambda *d: (body(*d), d),
                        lambda d, g: self._cotangents(full(d), kwargs, g, fixed))
        else:
            rule = custom_jvp(body)
            rule.defjvp(lambda primals, tangents: self._tangent(full(primals), full(tangents), kwargs, fixed))
        return rule(*[a for i, a in enumerate(args) if i not in fixed])

    def _without_rules(self, args, kwargs):
        """The function, staged; differentiating it raises (autograd: no rule, no derivative)."""
        name = getattr(self.fun, "__name__", "the primitive")
        dynamic = [i for i, a in enumerate(args) if _is_value(a)]

        def body(*values):
            full = list(args)
            for i, v in zip(dynamic, values):
                full[i] = v
            return self.fun(*full, **kwargs)

        def refuse(primals, tangents):
            raise MissingRuleError(f"`{name}` is an @primitive without a derivative rule: give one with "
                                   f"jitad.extend.defvjp (reverse mode) or defjvp (forward mode), or drop "
                                   f"@primitive to let jitad differentiate its body")
        rule = custom_jvp(body)
        rule.defjvp(refuse)
        return rule(*[args[i] for i in dynamic])

    def _cotangents(self, args, kwargs, g, fixed):
        ans = self.fun(*args, **kwargs)
        nums = tuple(i for i, a in enumerate(args) if i not in fixed and _differentiable(a))
        cts = list(self.vjp_argnums(nums, ans, args, kwargs)(g)) if nums else []
        out = {i: _zeros_like(a) for i, a in enumerate(args) if i not in fixed}
        for i, ct in zip(nums, cts):
            out[i] = _dense(ct) if ct is not None else out[i]
        return tuple(out[i] for i in sorted(out))

    def _tangent(self, primals, tangents, kwargs, fixed):
        ans = self.fun(*primals, **kwargs)
        nums = tuple(i for i, a in enumerate(primals) if i not in fixed and _differentiable(a))
        tangent = self.jvp_argnums(nums, [tangents[i] for i in nums], ans, primals, kwargs) if nums else None
        return ans, _zeros_like(ans) if tangent is None else tangent

    # autograd's older spellings, kept by autograd with a deprecation warning: each call
    # adds the rule of one argument to those given before

    def defgrad(self, vjpmaker, argnum=0):
        """Deprecated: `f.defgrad(maker, argnum)` is `defvjp(f, maker, argnums=[argnum])`,
        keeping the rules other calls gave the other arguments."""
        self._legacy_rule("defgrad", argnum, vjpmaker)

    def defvjp(self, vjp, argnum=0):
        """Deprecated: `f.defvjp(vjp, argnum)` with `vjp(g, ans, vs, gvs, *args)` returning
        the argument's cotangent (`vs`, `gvs`: the vector spaces of the argument and of `g`)."""
        def maker(ans, *args, **kwargs):
            return lambda g: vjp(g, ans, vspace(args[argnum]), vspace(g), *args, **kwargs)
        self._legacy_rule("defvjp", argnum, maker)

    def defvjp_is_zero(self, argnums=(0,)):
        """Deprecated: the arguments `argnums` get zero cotangents."""
        for i in argnums:
            self._legacy_rule("defvjp_is_zero", i, None)

    def _legacy_rule(self, who, argnum, maker):
        warnings.warn(f"`{who}` on a primitive is deprecated (as in autograd): use "
                      f"jitad.extend.defvjp(fun, *vjpmakers, argnums=...)", DeprecationWarning, stacklevel=3)
        rules = self.__dict__.setdefault("_legacy_rules", {})
        rules[argnum] = maker
        nums = sorted(rules)
        defvjp(self, *[rules[i] for i in nums], argnums=nums)

    def __repr__(self):
        return f"primitive({getattr(self.fun, '__name__', 'fun')})"


def _is_value(x):
    """A pytree of numbers, arrays and staged values (what a rule's arguments may be)."""
    return all(is_staged(v) or isinstance(v, (bool, int, float, np.number, np.bool_, np.ndarray))
               for v in flatten(x)[0])


def _differentiable(x):
    leaves = flatten(x)[0]
    return bool(leaves) and all(_dtype(v).kind == "f" for v in leaves)


def _check_primitive(fun, who):
    if not isinstance(fun, primitive):
        raise ArgumentError(f"{who} takes a function decorated with @primitive, got {fun!r}")


def defvjp_argnums(fun, vjpmaker):
    """`vjpmaker(argnums, ans, args, kwargs) -> (g -> tuple of cotangents of those arguments)`."""
    _check_primitive(fun, "defvjp_argnums")
    fun.vjp_argnums = vjpmaker


def defvjp_argnum(fun, vjpmaker):
    """`vjpmaker(argnum, ans, args, kwargs) -> (g -> cotangent of that argument)`."""
    def per_argument(argnums, ans, args, kwargs):
        makers = [vjpmaker(i, ans, args, kwargs) for i in argnums]
        return lambda g: tuple(m(g) for m in makers)
    defvjp_argnums(fun, per_argument)


def defvjp(fun, *vjpmakers, argnums=None):
    """One `vjpmaker(ans, *args, **kwargs) -> (g -> cotangent)` per argument (None: the
    argument gets no gradient, a zero)."""
    _check_primitive(fun, "defvjp")
    makers = dict(zip(range(len(vjpmakers)) if argnums is None else argnums, vjpmakers))

    def per_argument(argnums_, ans, args, kwargs):
        chosen = [makers.get(i) for i in argnums_]
        vjps = [m(ans, *args, **kwargs) if m is not None else None for m in chosen]
        return lambda g: tuple(v(g) if v is not None else None for v in vjps)
    fun.vjp_argnums = per_argument


def defjvp_argnums(fun, jvpmaker):
    """`jvpmaker(argnums, gs, ans, args, kwargs) -> the output's tangent`."""
    _check_primitive(fun, "defjvp_argnums")
    fun.jvp_argnums = jvpmaker


def defjvp_argnum(fun, jvpmaker):
    """`jvpmaker(argnum, g, ans, args, kwargs) -> the output's tangent from that argument's`."""
    def summed(argnums, gs, ans, args, kwargs):
        parts = [jvpmaker(i, g, ans, args, kwargs) for i, g in zip(argnums, gs)]
        return functools.reduce(lambda a, b: tree_map(lambda x, y: x + y, a, b), parts)
    defjvp_argnums(fun, summed)


def defjvp(fun, *jvpfuns, argnums=None):
    """One `jvp(g, ans, *args, **kwargs) -> output tangent` per argument ("same": the
    function itself applied to the tangent, for a linear argument; None: no tangent)."""
    _check_primitive(fun, "defjvp")
    rules = dict(zip(range(len(jvpfuns)) if argnums is None else argnums, jvpfuns))

    def one(i, g, ans, args, kwargs):
        rule = rules.get(i)
        if rule is None:
            return _zeros_like(ans)
        if rule == "same":
            return fun.fun(*_replaced(args, i, g), **kwargs)
        return rule(g, ans, *args, **kwargs)
    defjvp_argnum(fun, one)


def _replaced(args, i, value):
    return args[:i] + (value,) + args[i + 1:]


def def_linear(fun):
    """Declare `fun` linear in each argument: its tangent is `fun` of the tangent."""
    defjvp_argnum(fun, lambda i, g, ans, args, kwargs: fun.fun(*_replaced(tuple(args), i, g), **kwargs))


def notrace_primitive(fun):
    """`fun` applied without differentiating through it (its result is a constant to
    every transformation: `np.shape`, a random draw, ...)."""
    @functools.wraps(fun)
    def constant(*args, **kwargs):
        return fun(*tree_map(lambda x: N.stop_gradient(x) if is_staged(x) else x, args), **kwargs)
    return constant


_NOTRACE = {}


def register_notrace(trace_type, primitive_fun):
    """Record that `primitive_fun` needs no tracing under `trace_type` (autograd's table
    for its forward-mode tracer); jitad's staging decides that itself, so it is recorded only."""
    _NOTRACE.setdefault(trace_type, set()).add(primitive_fun)


class VJPNode:
    """autograd's reverse-mode graph node type: jitad records reverse mode in its IR; the
    class exists for code that names it (`isinstance` checks, `register_notrace`)."""


class JVPNode:
    """autograd's forward-mode graph node type (see `VJPNode`)."""


# -- grad with respect to values of a user's vector space ------------------------------

_RECORDING = [None]   # the `_Recording` of the `grad` call under way


class _Recording:
    """A `grad` call with respect to values of types with a registered vector space (`targets`).

    Such a value is no array, so it reaches math only through @primitive functions, and
    its cotangent is the sum, in its space, of those primitives' VJPs of it, each applied
    to the cotangent of that call's result. A first run of the function, eager, records
    the calls (the arguments and result each VJP maker takes); a second run, staged, takes
    the calls' results as its arguments (`inputs`): its gradient with respect to them is
    those cotangents. The staged program holds nothing of the targets, so the same path
    serves the next call with other targets (see `_Replay`)."""

    def __init__(self, targets):
        self.targets = {id(v): v for v in targets}
        self.calls = []          # (primitive, args, kwargs, result) of the eager run, in order
        self.inputs = None       # the staged run's inputs, one per call
        self.pinned = False      # whether the staged run may read the targets (`_Replay.pinned`)
        self.count = 0
        self.running = False     # in the user's function (not in a rule, nor inside a recorded call)
        self.read = False        # whether the eager run read a target other than to call a primitive

    def takes(self, args):
        return any(id(a) in self.targets for a in args)

    def run(self, fn, args, kwargs, inputs=None, pinned=False):
        """`fn(*args, **kwargs)`: eager (recording its calls, and whether it reads a target),
        or staged over `inputs`."""
        self.inputs, self.pinned, self.count, self.running = inputs, pinned, 0, True
        previous, _RECORDING[0] = _RECORDING[0], self
        swapped = _watch(self.targets.values()) if inputs is None else ()
        try:
            out = fn(*args, **kwargs)
        finally:
            _RECORDING[0], self.running = previous, False
            for target, cls in swapped:
                target.__class__ = cls
        if inputs is not None and self.count != len(inputs):
            raise self._changed()
        return out

    def call(self, prim, args, kwargs):
        self.running = False
        try:
            if self.inputs is None:
                ans = prim.fun(*args, **kwargs)
                self.calls.append((prim, args, kwargs, ans))
                return ans
            if self.count >= len(self.inputs) or self.calls[self.count][0] is not prim:
                raise self._changed()
            given = self.inputs[self.count]
            self.count += 1
            if _replayable(self.calls[self.count - 1][3]) and not _has_staged((args, kwargs)):
                return given   # (the result as the eager run found it, an argument of the program)
            if not self.pinned:
                raise _NeedsTargets
            return tree_map(lambda a, z: a + (z - N.stop_gradient(z)), prim(*args, **kwargs), given)
        finally:
            self.running = True

    def _changed(self):
        return UnsupportedError("grad with respect to a value of a registered vector space: the function "
                                "called its @primitive functions differently when compiled than when run "
                                "with the values; make the calls that take that value depend on no array")

    def cotangents(self, input_cts):
        """{id of a target: its cotangent}, in the target's space."""
        out = {}   # (autograd's order: the first cotangent as it is, the others added by `mut_add`)
        for (prim, args, kwargs, ans), g in zip(self.calls, input_cts):
            for i in (i for i, a in enumerate(args) if id(a) in self.targets):
                if prim.vjp_argnums is None:
                    raise MissingRuleError(f"`{getattr(prim.fun, '__name__', prim)}` takes the value differentiated "
                                           f"(argument {i}) but has no VJP: give one with jitad.extend.defvjp")
                ct = prim.vjp_argnums((i,), ans, args, kwargs)(g)[0]
                if ct is not None:
                    key = id(args[i])
                    out[key] = vspace(args[i]).mut_add(out[key], _dense(ct)) if key in out else _dense(ct)
        return {k: out[k] if k in out else vspace(v).zeros() for k, v in self.targets.items()}


def _not_recorded(values, who):
    recording = _RECORDING[0]
    if recording is not None and recording.running and recording.takes(values):
        raise UnsupportedError(f"grad with respect to a value of a registered vector space: the space's `{who}` was called "
                               f"on it; such a value may only enter @primitive functions with a VJP for it "
                               f"(make `{who}` of it one)")


class _NeedsTargets(Exception):
    """A staged run met a call it must run with the targets (see `_Replay.pinned`)."""


def _has_staged(tree):
    return any(is_staged(v) for v in flatten(tree)[0])


def _replayable(result):
    """Whether a recorded call's result enters the staged run as itself: float leaves only
    (another result enters as a zero probe added to the call, run again in the trace)."""
    leaves = flatten(result)[0]
    return bool(leaves) and all(not is_staged(v) and _dtype(v).kind == "f" for v in leaves)


def _input(result):
    return result if _replayable(result) else tree_map(_probe, result)


def _probe(x):
    return np.zeros(np.shape(x), _dtype(x) if _dtype(x).kind == "f" else np.float64)


# -- whether the function reads a target itself -----------------------------------------

_WATCHED = {}   # a user's type -> its subclass whose instances note reads of their attributes
_UNWATCHED = {}   # the reverse
# what a class keeps as it is on the watching subclass (the instance's layout and making)
_UNWATCHED_NAMES = {"__init__", "__new__", "__getattribute__", "__class__", "__dict__", "__doc__", "__module__",
                    "__qualname__", "__weakref__", "__slots__", "__init_subclass__", "__subclasshook__"}


def _note_read():
    recording = _RECORDING[0]
    if recording is not None and recording.running:
        recording.read = True


def _passes_on(value):
    """A bound @primitive: what the function may take from a target without reading it."""
    return isinstance(value, functools.partial) and isinstance(value.func, primitive)


def _watched_method(cls, name):
    def method(self, *args, **kwargs):
        _note_read()
        return getattr(cls, name)(self, *args, **kwargs)
    method.__name__ = name
    return method


def _watching(cls):
    """The subclass of `cls` whose instances note the user's function reading them while the
    eager run records: an attribute (anything but a bound @primitive), or a special method of
    `cls`'s own (`f + g`, `f[i]`; not one that is a @primitive). None where `cls` has a
    base of Python's own but `object` (its methods could not be watched)."""
    if cls in _WATCHED:
        return _WATCHED[cls]
    watched = None
    if all(b is object or b.__module__ != "builtins" for b in cls.__mro__):
        def __getattribute__(self, name):
            value = cls.__getattribute__(self, name)
            if name != "__class__" and not _passes_on(value):
                _note_read()
            return value
        space = {"__slots__": (), "__getattribute__": __getattribute__, "__module__": cls.__module__,
                 "__qualname__": cls.__qualname__}
        for name in {n for b in cls.__mro__[:-1] for n in vars(b)} - _UNWATCHED_NAMES:
            if name.startswith("__") and name.endswith("__") and isinstance(getattr(cls, name), types.FunctionType):
                space[name] = _watched_method(cls, name)
        watched = type(cls.__name__, (cls,), space)
        _UNWATCHED[watched] = cls
    _WATCHED[cls] = watched
    return watched


def _class_key(cls):
    """A class by what it is: its module, name and its functions' code (a program run again
    defines an equal class anew)."""
    codes = tuple(sorted(hash(f.__code__) for b in cls.__mro__[:-1] for f in vars(b).values()
                         if isinstance(f, types.FunctionType)))
    return cls.__module__, cls.__qualname__, codes


def _watch(targets):
    """Give each target its watching class for the eager run: [(target, its own class)].
    A target whose class cannot be changed counts as read."""
    swapped = []
    for t in targets:
        cls, watched = type(t), _watching(type(t))
        try:
            if watched is None:
                raise TypeError
            t.__class__ = watched
        except TypeError:
            _RECORDING[0].read = True
        else:
            swapped.append((t, cls))
    return swapped


# -- the staged run -----------------------------------------------------------------------

# (a function's code, the other arguments differentiated) -> True: its staged runs called
# primitives with staged values (a hint: tried unpinned first, such a run stops at that call)
_NEEDS_TARGETS = {}


class _Replay:
    """The function of a `grad` call over a user space's values, as jitad traces it: it takes
    the recorded calls' results (`inputs`) and the arguments, the targets left out (`None` in
    their places), and runs the user's function with the calls answered from `inputs`.

    Its key (`key_parts`, see `jitad.dispatch`) is the user's function, the targets' classes
    (by what they are) and which results are replayed: nothing of the program comes from a
    target or from the primitives (their results are its arguments, their VJPs run after it),
    so a later call with other targets (an optimizer's next step, a program run again)
    finds the path and runs it, without tracing. A `pinned` replay holds the primitives and
    the targets themselves in its key: where the eager run found the function reading a
    target (`_watching`), or a call's arguments hold staged values (the primitive runs in the
    trace: the target's contents become constants of the program)."""

    def __init__(self, fn, recording, positions, values, pinned):
        self.fn, self.recording, self.positions, self.values, self.pinned = fn, recording, positions, values, pinned
        self.replayed = tuple(_replayable(call[3]) for call in recording.calls)
        self.pins = (tuple(call[0] for call in recording.calls), values) if pinned else \
            tuple(_class_key(type(v)) for v in values)

    @property
    def key_parts(self):
        return (self.fn, self.positions, self.replayed, self.pins)

    def __call__(self, inputs, *args, **kwargs):
        args = list(args)
        for i, v in zip(self.positions, self.values):
            args[i] = v
        return self.recording.run(self.fn, args, kwargs, inputs, self.pinned)


def _hint(fn, others):
    return getattr(fn, "__code__", None) or id(fn), tuple(others)


def _staged_run(concrete, recording, targets, others, args, kwargs):
    """(value, gradients with respect to the recorded calls' results and the other arguments
    differentiated) of the user's function, staged over the results (`_Replay`)."""
    from .api import value_and_grad
    values = tuple(args[i] for i in targets)
    held = [None if i in targets else a for i, a in enumerate(args)]
    inputs = [_input(call[3]) for call in recording.calls]
    pin = recording.read or not all(map(_replayable, (c[3] for c in recording.calls))) \
        or _hint(concrete.fn, others) in _NEEDS_TARGETS
    argnums = (0, *[i + 1 for i in others])
    for pinned in ((True,) if pin else (False, True)):
        replay = _Replay(concrete.fn, recording, tuple(targets), values, pinned)
        try:
            return value_and_grad(replay, argnums=argnums, has_aux=concrete.spec[2])(inputs, *held, **kwargs)
        except _NeedsTargets:
            _NEEDS_TARGETS[_hint(concrete.fn, others)] = True
    raise AssertionError("unreachable")


def _user_space_call(concrete, args, kwargs):
    """`grad`/`value_and_grad` (`concrete`) where differentiated arguments are values of a
    user's vector space (see `_Recording`); NotImplemented where none is."""
    diff = sorted(concrete.diff_args(len(args)))
    targets = [i for i in diff if type(args[i]) in VSpace.mappings]
    if not targets:
        return NotImplemented
    name = concrete.spec[0] if concrete.spec else concrete.name
    if name not in ("grad", "value_and_grad"):
        raise UnsupportedError(f"{name} with respect to a {type(args[targets[0]]).__name__} (a value of a "
                               f"registered vector space): only grad and value_and_grad take such values")
    recording = _Recording([args[i] for i in targets])
    recording.run(concrete.fn, args, kwargs)
    others = [i for i in diff if i not in targets]
    value, grads = _staged_run(concrete, recording, targets, others, args, kwargs)
    argnums, has_aux = concrete.spec[1], concrete.spec[2]
    by_position = dict(zip(others, grads[1:]))
    found = recording.cotangents(grads[0])
    by_position.update({i: found[id(args[i])] for i in targets})
    g = by_position[diff[0]] if isinstance(argnums, (int, np.integer)) else \
        tuple(by_position[int(i) % len(args)] for i in argnums)
    if name == "value_and_grad":
        return value, g
    return (g, value[1]) if has_aux else g
