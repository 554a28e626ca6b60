"""User-supplied derivative rules, fixed points and checkpointing.

All three are staged functions (`FUN`) whose call nodes carry a static attribute
that reverse mode reads: `custom` (run the user's fwd/bwd instead of differentiating
the body) or `checkpoint` (recompute the body during the backward pass).
"""
import numpy as np

from .. import numeric as N
from ..errors import ArgumentError, ShapeError, check_argnums
from ..ir.ops import Op
from ..ir.types import FLOATS
from ..pytree import flatten, tree_map, unflatten
from ..staging import FUN, WHILE, Staged, checkpoint, current_frame, is_staged  # noqa: F401  (checkpoint: public here)


class _NondiffFUN(FUN):
    """A custom rule's function taking `nondiff_argnums` (as JAX's): under a trace, a call
    runs a rule of the same kind over the other arguments, those fixed to the call's values
    (kept for a few recent values); `_rule_for(nums, fixed)` builds it."""

    decides_on_values = True   # called under `grad` from Python, Python decides on the arguments' values (as JAX)

    def __new__(cls, fn=None, out=None, nondiff_argnums=()):
        if fn is None:   # @custom_vjp(nondiff_argnums=...) or functools.partial
            return lambda f: cls(f, out, nondiff_argnums)
        return object.__new__(cls)

    def __init__(self, fn=None, out=None, nondiff_argnums=()):
        super().__init__(fn, out)
        who = type(self).__name__
        self.nondiff_argnums = check_argnums(nondiff_argnums, who, "nondiff_argnums", allow_empty=True)
        self._rules = []   # (nondiff argument values, the rule over the other arguments)

    def __call__(self, *args):
        if not self.nondiff_argnums or current_frame() is None:
            return super().__call__(*args)
        for i in self.nondiff_argnums:
            if not -len(args) <= i < len(args):
                raise ArgumentError(f"{type(self).__name__} `{self.__name__}`: nondiff_argnums includes {i}, "
                                    f"but the call passes {len(args)} arguments")
        nums = sorted(i % len(args) for i in self.nondiff_argnums)
        fixed = tuple(args[i] for i in nums)
        rule = next((r for f, r in self._rules if len(f) == len(fixed) and all(map(
            lambda a, b: a is b, f, fixed))), None)
        if rule is None:
            rule = self._rule_for(nums, fixed)
            self._rules = [(fixed, rule)] + self._rules[:63]   # a few recent ones
        return rule(*[a for i, a in enumerate(args) if i not in nums])


def _with_fixed(nums, fixed):
    """diff -> the full argument list, `fixed` put back at positions `nums`."""
    def full(diff):
        args = list(diff)
        for i, value in zip(nums, fixed):
            args.insert(i, value)
        return args
    return full


class custom_vjp(_NondiffFUN):
    """A function with a user-supplied VJP.

    >>> @jitad.custom_vjp
    ... def log1pexp(x):
    ...     return jitad.log(1 + jitad.exp(x))
    >>> log1pexp.defvjp(lambda x: (log1pexp(x), x), lambda x, g: (g * jitad.sigmoid(x),))

    `fwd(*args) -> (output, residuals)`; `bwd(residuals, g) -> tuple of cotangents,
    one per argument`. The rule runs as staged code inside the enclosing
    differentiation: it may call `jitad.vjp` on functions closing over staged values,
    and gradients flow to those values.

    `nondiff_argnums` (as JAX's) names arguments that are not differentiated (a function,
    a static setting): `fwd` takes every argument, `bwd(*nondiff_args, residuals, g)`
    returns cotangents for the others only.

    >>> import functools
    >>> @functools.partial(jitad.custom_vjp, nondiff_argnums=(0,))
    ... def apply(f, x):
    ...     return f(x)
    >>> apply.defvjp(lambda f, x: (f(x), x), lambda f, x, g: (g * jitad.grad(f)(x),))
    """

    call_op = Op.CUSTOM_VJP

    def __init__(self, fn=None, out=None, nondiff_argnums=()):
        super().__init__(fn, out, nondiff_argnums)
        self.fwd = self.bwd = None

    def _rule_for(self, nums, fixed):
        """A rule over the differentiated arguments, the others fixed to `fixed`."""
        if self.fwd is None:
            raise ArgumentError(f"custom_vjp `{self.__name__}`: call defvjp(fwd, bwd) before using it")
        full = _with_fixed(nums, fixed)
        rule = custom_vjp(lambda *diff: self.fn(*full(diff)), self.out)
        rule.__name__ = self.__name__
        return rule.defvjp(lambda *diff: self.fwd(*full(diff)), lambda res, g: self.bwd(*fixed, res, g))

    def defvjp(self, fwd, bwd):
        self.fwd, self.bwd = fwd, bwd
        return self

    def call_attrs(self, in_td):
        if self.fwd is None:
            raise ArgumentError(f"custom_vjp `{self.__name__}`: call defvjp(fwd, bwd) before using it")
        return {"custom": self, "in_td": in_td}

    def tangent_rule(self, node, ins):
        """Forward mode of a call (reached where a program that itself takes a gradient is
        differentiated): `fwd` gives the output, and its tangent is the transpose of
        `bwd(residuals, .)` (linear in the cotangent) applied to the arguments' tangents, by a
        vjp; so the user's rule, not the body, gives derivatives of every order. None (the
        body's derivative then) where bwd itself takes gradients."""
        from ..staging import coerce, trace_program
        from .jvp import contains_effects
        from .pullback import pullback_staged
        in_td, types = node.attrs["in_td"], [v.type for v in node.outputs]
        primals = [p for p, _ in ins[:in_td.num_leaves]]
        out, res = self.fwd(*unflatten(in_td, primals))
        out_leaves, out_td = flatten(out)
        if len(out_leaves) != len(types):
            raise ArgumentError(f"custom_vjp `{self.__name__}`: fwd returned {len(out_leaves)} outputs "
                                f"where the function returns {len(types)}")
        outs = [Staged(coerce(x, t, f"custom_vjp `{self.__name__}` fwd output")) for x, t in zip(out_leaves, types)]

        def cotangents(*g):
            cts = self.bwd(res, unflatten(out_td, list(g)))
            leaves = flatten(tuple(cts) if isinstance(cts, (tuple, list)) else (cts,))[0]
            if len(leaves) != len(primals):
                raise ArgumentError(f"custom_vjp `{self.__name__}`: bwd returned {len(leaves)} cotangents "
                                    f"for {len(primals)} argument leaves; return one per argument, as a tuple")
            return tuple(ct if ct is not None else _zero_like(p) for ct, p in zip(leaves, primals))
        zeros = tuple(_zero_like(o) for o in outs)
        if contains_effects(trace_program(cotangents, zeros, flatten(zeros)[1], types)[0]):
            return None   # a bwd that itself takes gradients: forward mode differentiates the body
        tangents = tuple(t if t is not None else _zero_like(p) for p, t in ins[:in_td.num_leaves])
        out_tangents = pullback_staged(cotangents, zeros, tangents, to_closure=False)
        return [(o, (t if t is not None else _zero_like(o)) if t_.dtype in FLOATS else None)
                for o, t, t_ in zip(outs, out_tangents, types)]

    def outputs_as_written(self, args):
        """The outputs at `args` as a call of a custom_vjp of this rule's fwd and bwd: forward
        mode takes their tangent from bwd's transpose (`tangent_rule`), not from fwd's operations
        (staged where reverse over reverse must differentiate bwd as written)."""
        outputs = custom_vjp(lambda *a: self.fwd(*a)[0])
        outputs.__name__ = self.__name__
        return outputs.defvjp(self.fwd, self.bwd)(*args)

    def bwd_as_written(self, args, res, g):
        """`bwd(res, g)` as one call whose tangent is, in the arguments `args` (through the
        residuals fwd makes of them), the transpose of bwd's derivative, and in `g` the
        transpose of fwd: reverse mode over their operations at `args`."""
        from .pullback import pullback_staged

        def bwd(args, res, g):
            cts = self.bwd(res, g)
            leaves = flatten(tuple(cts) if isinstance(cts, (tuple, list)) else (cts,))[0]
            return tuple(ct if ct is not None else _zero_like(x) for ct, x in zip(leaves, flatten(args)[0]))

        def tangent(primals, tangents):
            args, res, g = primals
            # (bwd gives one cotangent per leaf of the arguments: its cotangent is their tangents' leaves)
            by_x = pullback_staged(lambda *a: bwd(a, self.fwd(*a)[1], g), args, tuple(flatten(tangents[0])[0]),
                                   to_closure=False)
            by_g = pullback_staged(lambda *a: self.fwd(*a)[0], args, tangents[2], to_closure=False)
            return bwd(args, res, g), tuple(a + b for a, b in zip(flatten(by_x)[0], flatten(by_g)[0]))
        call = custom_jvp(bwd)
        call.__name__ = f"{self.__name__}_bwd"
        call.defjvp(tangent)
        return call(args, res, g)

    def __repr__(self):
        return f"custom_vjp({self.__name__})"



def _norm(x):
    leaves = flatten(x)[0]
    return sum(N.sum(N.abs(leaf)) if np.ndim(leaf) or getattr(leaf, "shape", ()) else N.abs(leaf)
               for leaf in leaves)


def _iterate(f, x0, tol, max_iter):
    def cond(state):
        i, x, gap = state
        return (gap > tol) & (i < max_iter)

    def body(state):
        i, x, _ = state
        x_new = f(x)
        return i + 1, x_new, _norm(tree_map(lambda a, b: a - b, x_new, x))
    return WHILE(cond, body, (0, x0, np.inf))[1]


def fixed_point(f, x0, tol=1e-10, max_iter=1000):
    """Iterate `x = f(x)` from `x0` until `|f(x) - x| <= tol` (or `max_iter` steps).

    Differentiated by the implicit function theorem, with memory independent of the
    number of iterations, including gradients w.r.t. staged values `f` closes over:

    >>> a = 2.0
    >>> sqrt_a = jitad.fixed_point(lambda x: 0.5 * (x + a / x), 1.0)   # Newton for sqrt(a)

    Derivatives of every order follow the implicit function theorem at the point the
    solve stopped at: reverse mode solves `u = g + (df/dx)^T u`, forward mode
    `t = (df/dx) t + (df/dc) tc` (c: the values `f` closes over), each by a fixed point
    of its own, so a derivative of a derivative (`grad(grad)`, `hessian`) differentiates
    those equations, never the iterations. Each solve stops once a step moves it by at most
    `tol`, which leaves it about `tol / (1 - L)` from its solution (L < 1: how much `f`
    contracts); derivatives are exact to that, as autograd's `fixed_point` computes them.
    """
    if current_frame() is None:   # plain Python values: just iterate
        x = x0
        for _ in range(max_iter):
            x_new = f(x)
            if _norm(tree_map(lambda a, b: a - b, x_new, x)) <= tol:
                return x_new
            x = x_new
        return x

    f_at, caps = _explicit_closure(f, x0)   # f(x) as f_at(x, caps): the staged values it closes over, explicit

    def solve(x0, caps):
        return _iterate(lambda x: f_at(x, caps), x0, tol, max_iter)

    def fwd(x0, caps):
        x_star = fixed_point(lambda x: f_at(x, caps), x0, tol, max_iter)   # again: its derivatives are exact too
        return x_star, (x_star, caps)

    def bwd(res, g):
        from .pullback import pullback_staged
        x_star, caps = res

        def step(u):   # u = g + (df/dx)^T u, itself a fixed point; then u flows to the captured values
            (du,) = pullback_staged(lambda x: f_at(x, caps), (_current(x_star),), u, to_closure=False)
            return tree_map(lambda a, b: a + b, g, du)
        u = fixed_point(step, g, tol, max_iter)
        cap_cts = pullback_staged(lambda *c: f_at(x_star, c), tuple(map(_current, caps)), u, to_closure=False)
        return tree_map(lambda a: a * 0.0, x_star), tuple(cap_cts)   # x* does not depend on x0

    solve_rule = custom_vjp(solve)
    solve_rule.__name__ = "fixed_point"
    solve_rule.defvjp(fwd, bwd)
    solve_rule.tangent_rule = lambda node, ins: _fixed_point_tangent(f_at, tol, max_iter, solve_rule, node, ins)
    return solve_rule(x0, caps)


def _explicit_closure(f, x):
    """(f_at, caps): the staged values `f` closes over, as used here (`caps`), and
    `f_at(x, caps)`, f with those values replaced by `caps`, in any trace (a rule run
    while another transformation emits code passes that code's values)."""
    from ..staging import substituted, trace_program, wrap
    from .pullback import leaf_type
    leaves, td = flatten((x,))
    captured = trace_program(f, (x,), td, [leaf_type(leaf) for leaf in leaves])[2]
    own = {new: old for old, new in _substitution().items()}
    held = [(v, own.get(v, v)) for v in captured]   # what f's code holds: the value here, or the one it maps from

    def f_at(x, caps):
        here = _substitution()
        mapping = {}
        for (v, old), c in zip(held, caps):
            mapping[v] = mapping[old] = here.get(c._var, c._var)
        with substituted(mapping):
            return f(x)
    return f_at, tuple(wrap(v) for v in captured)


def _current(x):
    """`x` (a pytree) with each staged value replaced by its counterpart in the code being
    emitted (arguments handed to a transformation directly, not through an operation)."""
    here = _substitution()
    from ..staging import wrap
    return tree_map(lambda v: wrap(here.get(v._var, v._var)) if is_staged(v) else v, x)


def _substitution():
    """The values of the code being transformed -> their counterparts in the code being
    emitted, in effect now (`jitad.staging.substituted`, `transforming`)."""
    from ..staging import frames
    return getattr(frames._local, "subst", None) or {}


def _fixed_point_tangent(f_at, tol, max_iter, solve_rule, node, ins):
    """Forward mode of a `fixed_point` call node (x0 and the captured values c explicit,
    no other captures): x* again, and its tangent t, the fixed point of
    `t = (df/dx) t + (df/dc) tc` at x*. [(output, tangent)] per output leaf."""
    from ..staging import coerce
    from .staged import jvp_staged
    x0, caps = unflatten(node.attrs["in_td"], [p for p, _ in ins])
    cap_tangents = [_zero_like(p) if t is None else t for (p, t) in ins[len(ins) - len(caps):]]
    x_star = solve_rule(x0, caps)

    def step(t):
        return jvp_staged(lambda x, *c: f_at(x, c), (x_star, *caps), (t, *cap_tangents))[1]
    t = fixed_point(step, tree_map(_zero_like, x_star), tol, max_iter)
    types = [v.type for v in node.outputs]
    return [(Staged(coerce(o, ty, "fixed_point output")),
             Staged(coerce(d, ty, "fixed_point tangent")) if ty.dtype in FLOATS else None)
            for o, d, ty in zip(flatten(x_star)[0], flatten(t)[0], types)]


def _softplus_rule():
    @custom_vjp
    def softplus(x):
        return N.log1p(N.exp(-N.abs(x))) + N.relu(x)
    softplus.defvjp(lambda x: (softplus(x), x), lambda x, g: (g * N.sigmoid(x),))
    return softplus


_softplus = _softplus_rule()


def softplus(x):
    """log(1 + exp(x)), stable for large |x|, with gradient sigmoid(x):
    `jitad.grad(jitad.softplus)(1000.0) == 1.0`."""
    if current_frame() is None and not isinstance(x, np.ndarray):
        return float(np.logaddexp(0.0, x))
    return _softplus(x)


def _shape(x):
    return tuple(x.shape) if is_staged(x) else np.shape(x)


def _zero_like(x):
    """A constant zero tangent of `x`'s shape and dtype."""
    shape = _shape(x)
    dtype = N.NUMPY_OF[x.ir_dtype] if is_staged(x) else np.asarray(x).dtype
    return np.zeros(shape, dtype) if shape else dtype.type(0) if hasattr(dtype, "type") else dtype(0)


class custom_jvp(_NondiffFUN):
    """A function with a user-supplied forward-mode rule (JAX's `custom_jvp`).

    >>> @jitad.custom_jvp
    ... def f(x):
    ...     return jitad.sin(x)
    >>> @f.defjvp
    ... def f_jvp(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     return f(x), jitad.cos(x) * t
    >>> jitad.grad(f)(0.0)
    1.0

    The rule `(primals, tangents) -> (out, tangent_out)` must be linear in the
    tangents. Forward mode runs it; reverse mode transposes its tangent part (a `vjp`
    of `tangents -> tangent_out` at the primals), so `grad`, `hessian` and higher orders
    all work from the one rule. With `nondiff_argnums` (as JAX's) the rule is
    `jvp(*nondiff_args, primals, tangents)`, over the other arguments.
    """

    call_op = Op.CUSTOM_VJP   # reverse mode sees it as a custom_vjp (see `_TransposedJvp`)

    def __init__(self, fn=None, out=None, nondiff_argnums=()):
        super().__init__(fn, out, nondiff_argnums)
        self.jvp_rule = None

    def defjvp(self, jvp):
        if not callable(jvp):
            raise ArgumentError(f"custom_jvp `{self.__name__}`: defjvp takes a function "
                                "(primals, tangents) -> (out, tangent_out)")
        self.jvp_rule = jvp
        return jvp

    def defjvps(self, *jvps):
        """One rule per argument, `jvp_i(tangent_i, out, *primals)` (None: no derivative in
        that argument); the output tangent is their sum.

        >>> f = jitad.custom_jvp(lambda x, y: jitad.sin(x) * y)
        >>> f.defjvps(lambda t, out, x, y: jitad.cos(x) * t * y, lambda t, out, x, y: jitad.sin(x) * t)
        >>> jitad.grad(f, argnums=1)(0.5, 2.0) == np.sin(0.5)
        True
        """
        if self.nondiff_argnums:
            raise ArgumentError(f"custom_jvp `{self.__name__}`: defjvps cannot be used with nondiff_argnums; "
                                "use defjvp")

        def rule(primals, tangents):
            out = self(*primals)
            terms = [jvp(t, out, *primals) for jvp, t in zip(jvps, tangents) if jvp is not None]
            total = terms[0] if terms else tree_map(lambda o: o * 0.0, out)
            for term in terms[1:]:
                total = tree_map(lambda a, b: a + b, total, term)
            return out, total
        self.defjvp(rule)

    def _rule_for(self, nums, fixed):
        """A rule over the differentiated arguments, the others fixed to `fixed`."""
        if self.jvp_rule is None:
            raise ArgumentError(f"custom_jvp `{self.__name__}`: define its rule with @{self.__name__}.defjvp "
                                "before using it")
        full = _with_fixed(nums, fixed)
        rule = custom_jvp(lambda *diff: self.fn(*full(diff)), self.out)
        rule.__name__ = self.__name__
        rule.defjvp(lambda primals, tangents: self.jvp_rule(*fixed, primals, tangents))
        return rule

    def call_attrs(self, in_td):
        if self.jvp_rule is None:
            raise ArgumentError(f"custom_jvp `{self.__name__}`: define its rule with @{self.__name__}.defjvp "
                                "before using it")
        return {"custom": _TransposedJvp(self), "in_td": in_td, "custom_jvp": self}

    def _rule(self, primals, tangents):
        out = self.jvp_rule(tuple(primals), tuple(tangents))
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise ArgumentError(f"custom_jvp `{self.__name__}`: the jvp rule must return a pair "
                                "(primal_out, tangent_out)")
        return out

    def forward(self, node, ins):
        """Forward mode of a call node: the user's rule on (primal, tangent) pairs."""
        from ..staging import coerce
        in_td = node.attrs["in_td"]
        n = in_td.num_leaves
        primals = [p for p, _ in ins[:n]]
        tangents = [t if t is not None else _zero_like(p) for p, t in ins[:n]]
        out, tan = self._rule(unflatten(in_td, primals), unflatten(in_td, tangents))
        out_leaves, out_td = flatten(out)
        tan_leaves, tan_td = flatten(tan)
        types = [v.type for v in node.outputs]
        if len(out_leaves) != len(types) or tan_td != out_td:
            raise ArgumentError(f"custom_jvp `{self.__name__}`: the jvp rule returned outputs of structure "
                                f"{out_td} and tangents of structure {tan_td}; both must have the structure of "
                                f"what the function returns ({len(types)} leaves)")
        pairs = []
        for k, (o, t, ty) in enumerate(zip(out_leaves, tan_leaves, types)):
            for what, x in (("output", o), ("tangent", t)):
                self._check_shape(what, k, _shape(x), ty.shape)
            differentiable = ty.dtype in FLOATS
            pairs.append((Staged(coerce(o, ty, f"custom_jvp `{self.__name__}` output")),
                          Staged(coerce(t, ty, f"custom_jvp `{self.__name__}` tangent")) if differentiable else None))
        return pairs

    def _check_shape(self, what, k, shape, want):
        if shape != want:
            raise ShapeError(f"custom_jvp `{self.__name__}`: the jvp rule returned a {what} of shape "
                             f"{shape} for output leaf {k} of shape {want}; return the primal "
                             "output's shape (broadcast it, e.g. `t * jitad.ones_like(x)`)")

    def __repr__(self):
        return f"custom_jvp({self.__name__})"


class _TransposedJvp:
    """A custom_jvp seen as a custom_vjp: fwd runs the function, bwd transposes the rule's
    tangent map `tangents -> tangent_out` (linear) at the primals by a vjp."""

    def __init__(self, f):
        self.f, self.__name__ = f, f.__name__

    def __repr__(self):   # (in a program's key text: by its function's name, as `custom_vjp`'s, not its address)
        return f"transposed({self.f!r})"

    def fwd(self, *args):
        return self.f(*args), args   # the call itself, so a higher derivative takes the rule too

    def bwd(self, args, g):
        from .pullback import pullback_staged
        leaves, td = flatten(args)

        def tangent_out(*tangents):
            tan = self.f._rule(args, unflatten(td, list(tangents)))[1]
            for k, (t, ct) in enumerate(zip(flatten(tan)[0], flatten(g)[0])):
                self.f._check_shape("tangent", k, _shape(t), _shape(ct))
            return tan
        cts = pullback_staged(tangent_out, tuple(_zero_like(x) for x in leaves), g, to_closure=False)
        return tuple(0.0 if ct is None else ct for ct in cts)
