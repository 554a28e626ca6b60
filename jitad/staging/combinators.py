"""The five control-flow combinators: `IF`, `WHILE`, `FOR`, `FUN` (with `checkpoint`) and
`TREE`. Each traces its bodies in child frames and records one node that holds them."""
import operator

import numpy as np

from ..errors import ArgumentError, StagingError
from ..ir.graph import FunDef
from ..ir.ops import Op
from ..ir.types import I64, Type, dtype_of_numpy
from ..pytree import flatten, unflatten
from ..forest import Tree, plain_tree
from . import concrete
from .frames import Frame, _control_node, _entered, _local, current_frame, emit
from .values import (Staged, StagedTree, _kind, _leaf_type, _literal, as_var, coerce, is_staged, result_dtype, to_bool,
                     wrap)
from .complex import split as split_complex
from .tracer import _with_values, finish_body, trace_body


def _check_callables(who, **fns):
    for name, fn in fns.items():
        if not callable(fn):
            raise ArgumentError(f"{who}: {name} must be a function, got {type(fn).__name__}"
                                + (" (write `lambda: value`)" if who == "IF" else ""))


def _check_predicate(x, what):
    """`x`, a control-flow predicate, which must be a scalar."""
    shape = tuple(x.shape if is_staged(x) else np.shape(x))
    if shape:
        raise StagingError(f"{what}: the predicate has shape {shape}; it must be a scalar bool. "
                           "Reduce it to one bool first (any: `jitad.sum(p) > 0`, all: "
                           "`jitad.sum(~p) == 0`), or choose elementwise with `jitad.where(p, a, b)`")
    return x


def _check_structure(td_a, td_b, what):
    if td_a != td_b:
        raise StagingError(f"{what} return different structures: {_describe(td_a)} vs "
                           f"{_describe(td_b)}; both must return the same pytree")


def _describe(td):
    if td.kind == "leaf":
        return "a value"
    if td.kind == "none":
        return "None"
    return f"a {td.kind} of {len(td.children)}"


def IF(pred, then_fn, else_fn, *operands):
    """`then_fn(*operands)` if `pred` else `else_fn(*operands)`, staged.

    >>> jitad.jit(lambda x: IF(x > 0, lambda: x * x, lambda: -x))(3.0)
    9.0
    """
    _check_callables("IF", then_fn=then_fn, else_fn=else_fn)
    if not is_staged(pred):
        _check_predicate(pred, "IF")
        return then_fn(*operands) if pred else else_fn(*operands)
    pred_var = to_bool(_check_predicate(pred, "IF"), "IF")
    leaves, td = flatten(operands)
    in_types = [_leaf_type(x, "IF operand", allow_tree=True) for x in leaves]
    in_vars = [coerce(x, t, "IF operand") for x, t in zip(leaves, in_types)]
    then_fr, then_out = trace_body(then_fn, td, in_types)
    else_fr, else_out = trace_body(else_fn, td, in_types)
    t_leaves, t_td = flatten(then_out)
    e_leaves, e_td = flatten(else_out)
    _check_structure(t_td, e_td, "the IF branches")
    out_types = []
    for k, (a, b) in enumerate(zip(t_leaves, e_leaves)):
        ta = None if _literal(a) else _leaf_type(a, "IF branch")
        tb = None if _literal(b) else _leaf_type(b, "IF branch")
        if ta is not None and tb is not None and ta != tb:
            raise StagingError(f"the IF branches return different types for output {k}: "
                               f"{ta} (then) vs {tb} (else); convert one so both match")
        out_types.append(ta or tb or Type(result_dtype(a, b)))
    finish_body(then_fr, t_leaves, out_types, "the IF then-branch")
    finish_body(else_fr, e_leaves, out_types, "the IF else-branch")
    outs = _control_node(Op.IF, [pred_var] + in_vars, [then_fr, else_fr], {})
    return unflatten(t_td, [Staged(v) for v in outs])


def _state(init, what):
    leaves, td = flatten(split_complex(init))   # (a complex constant: its two real parts)
    types = [_leaf_type(x, what) for x in leaves]
    return [coerce(x, t, what) for x, t in zip(leaves, types)], types, td


def checkpoint_count(checkpoints, where):
    """`checkpoints=` of a loop, checked: None (reverse mode keeps every step) or an int >= 1."""
    if checkpoints is None:
        return None
    if isinstance(checkpoints, (bool, np.bool_)) or not isinstance(checkpoints, (int, np.integer)) \
            or checkpoints < 1:
        raise ArgumentError(f"{where}: checkpoints={checkpoints!r}; give None (reverse mode keeps every "
                            "step) or an int >= 1 (the number of loop states it keeps at once)")
    return int(checkpoints)


def _loop_node(op, operands, frames, out, td, types, part, checkpoints=None):
    """Finish a loop's last body (in `frames`; `out`: what it returned, the new state)
    and emit the loop; return its results as the state's pytree."""
    leaves, out_td = flatten(out)
    _check_structure(td, out_td, f"{op.name.upper()}'s init and {part}")
    finish_body(frames[-1], leaves, types, f"the {op.name.upper()} {part}")
    attrs = {"n_state": len(types)}
    if checkpoints is not None:
        attrs["checkpoints"] = checkpoints
    outs = _control_node(op, operands, frames, attrs)
    return unflatten(td, [Staged(v) for v in outs])


def WHILE(cond_fn, body_fn, init, *, checkpoints=None):
    """`state = init; while cond_fn(state): state = body_fn(state)`, staged.

    >>> jitad.jit(lambda x: WHILE(lambda t: t > 1.0, lambda t: t * 0.5, x))(10.0)
    0.625

    Reverse mode keeps every iteration's values; `checkpoints=c` keeps at most `c` loop
    states at once and recomputes the rest (see `FOR`): the first `c // 4` iterations are
    kept as with `checkpoints=None`, the remaining ones (counted by one more forward run)
    are reversed on the binomial schedule with the other states.
    """
    _check_callables("WHILE", cond_fn=cond_fn, body_fn=body_fn)
    checkpoints = checkpoint_count(checkpoints, "WHILE")
    if current_frame() is None:   # not staging: run in Python
        state = init
        while cond_fn(state):
            state = body_fn(state)
        return state
    init_vars, types, td = _state(init, "WHILE init")
    state_arg = lambda ps: (unflatten(td, ps),)
    cond_fr, cond_out = trace_body(cond_fn, td, types, state_arg)
    with _entered(cond_fr):
        cond_fr.graph.outputs = [cond_fr.resolve(to_bool(_check_predicate(cond_out, "WHILE's cond_fn"), "WHILE"))]
    body_fr, body_out = trace_body(body_fn, td, types, state_arg)
    return _loop_node(Op.WHILE, init_vars, [cond_fr, body_fr], body_out, td, types, "body", checkpoints)


def FOR(lower, upper, body_fn, init, *, checkpoints=None):
    """`for i in range(lower, upper): state = body_fn(i, state)`, staged.

    >>> jitad.jit(lambda n: FOR(0, n, lambda i, s: s + i, 0))(5)
    10

    Reverse mode keeps every iteration's state (memory grows with the trip count).
    `checkpoints=c` bounds it: at most `c` states besides the initial one are kept at
    once, and the backward pass recomputes the others from the nearest kept state on a
    binomial schedule (Griewank's Revolve): with `n` steps each step runs forward at most
    `r + 1` times, `r` the least with `C(c + r + 1, r + 1) >= n`. Values and gradients
    are those of `checkpoints=None`; forward mode and `vmap` ignore it.

    >>> jitad.grad(lambda x: FOR(0, 1000, lambda i, s: s * 0.999 + 0.001, x, checkpoints=8))(1.0)
    0.3676954247709635
    """
    _check_callables("FOR", body_fn=body_fn)
    checkpoints = checkpoint_count(checkpoints, "FOR")
    if current_frame() is None:   # not staging: run in Python
        state = init
        for i in range(lower, upper):
            state = body_fn(i, state)
        return state
    for b in (lower, upper):
        if (b.ir_dtype != "i64") if is_staged(b) else (
                isinstance(b, (bool, np.bool_)) or not isinstance(b, (int, np.integer))):
            raise StagingError(f"FOR bounds must be ints (Python ints or staged i64 values), "
                               f"got {b!r}")
    bounds = [as_var(b, "i64") for b in (lower, upper)]
    init_vars, types, td = _state(init, "FOR init")
    body_fr, body_out = trace_body(
        body_fn, None, [I64] + types, lambda ps: (ps[0], unflatten(td, ps[1:])))
    return _loop_node(Op.FOR, bounds + init_vars, [body_fr], body_out, td, types, "body", checkpoints)


class ShapeDtype:
    """The type of a value, for `FUN(out=...)`: `ShapeDtype((), 'f64')`."""

    def __init__(self, shape, dtype):
        try:
            self.shape = tuple(operator.index(n) for n in shape)
        except TypeError:
            raise ArgumentError(f"ShapeDtype: shape {shape!r} must be a tuple of ints") from None
        self.dtype = dtype if dtype in ("bool", "i64", "f32", "f64") else dtype_of_numpy(dtype)
        if self.dtype is None:
            raise ArgumentError(f"ShapeDtype: unsupported dtype {dtype!r}")

    def __repr__(self):
        return f"ShapeDtype({self.shape}, {self.dtype!r})"


def _spec_types(spec):
    leaves, td = flatten(spec)
    types = []
    for x in leaves:
        if isinstance(x, ShapeDtype):
            types.append(Type(x.dtype, x.shape))
        elif isinstance(x, np.ndarray):
            types.append(Type(dtype_of_numpy(x.dtype), x.shape))
        else:
            types.append(Type(_kind(x)[0]))
    return types, td


MAX_RETRACES = 64   # traces of a FUN's body before its captures must have settled


class FUN:
    """A staged function: calls emit a `call` node, so it may recurse.

    >>> @FUN(out=0)
    ... def fact(n):
    ...     return IF(n <= 1, lambda: 1, lambda: n * fact(n - 1))
    """

    def __new__(cls, fn=None, out=None):
        if fn is None:
            return lambda f: FUN(f, out=out)
        return super().__new__(cls)

    def __init__(self, fn=None, out=None):
        _check_callables(type(self).__name__, fn=fn)
        self.fn = fn
        self.out = _spec_types(out) if out is not None else None
        self.__name__ = getattr(fn, "__name__", "fun")
        self.__doc__ = getattr(fn, "__doc__", None)

    call_op = Op.CALL   # the opcode of this function's calls (with `call_attrs`: see jitad/custom.py)
    decides_on_values = False   # traced per call with the call's values where the caller has them

    def call_attrs(self, in_td):
        """Extra static attributes of this function's call nodes (for custom rules)."""
        return {}

    def __call__(self, *args):
        if current_frame() is None:
            return self.fn(*args)
        leaves, td = flatten(args)
        types = [_leaf_type(x, f"argument of FUN {self.__name__}", allow_tree=True) for x in leaves]
        in_vars = [coerce(x, t, "FUN argument") for x, t in zip(leaves, types)]
        trace = _local.trace
        key = (self, td, tuple(types))
        with_values = self.decides_on_values and concrete.frame_values() is not None
        if with_values:   # a body of its own, whose Python decisions are this call's
            key += (len(trace.funs),)
        fun = trace.funs.get(key)
        if fun is None:
            fun = self._define(trace, key, td, types, in_vars if with_values else None)
        elif fun.out_types is None:
            raise StagingError(
                f"FUN `{self.__name__}` calls itself, so its output type must be given before "
                f"its body is traced: write `@FUN(out=...)` with a `jitad.ShapeDtype`, an example "
                f"value like `0.0`, or a pytree of them")
        frame = current_frame()
        captures = [frame.resolve(v) for v in fun.captures]
        outs = emit(self.call_op, in_vars + captures, {"fun": fun.fundef, **self.call_attrs(td)})
        return unflatten(fun.out_td, [Staged(v) for v in outs])

    def _define(self, trace, key, td, types, values_of=None):
        fun = _FunState(FunDef(name=self.__name__, in_types=types), td)
        if self.out is not None:
            fun.fundef.out_types, fun.out_td = self.out
        trace.funs[key] = fun
        for retraces in range(1 << 20):   # retrace until the set of captured outer values is stable
            if retraces == MAX_RETRACES:
                raise StagingError(f"FUN `{self.__name__}`: its body reads new outer values each time it is "
                                   f"traced ({MAX_RETRACES} traces); make the values it reads from outside "
                                   "the same objects each time, or pass them as arguments")
            seen = list(fun.captures)
            frame = Frame(current_frame(), types)
            if values_of is not None:
                _with_values(frame, [Staged(v) for v in values_of])
            for v in seen:
                frame.resolve(v)
            with _entered(frame):
                out = self.fn(*unflatten(td, [wrap(v) for v in frame.graph.params[:len(types)]]))
                for x in flatten(out)[0]:   # a result may itself be a captured value
                    if isinstance(x, (Staged, StagedTree)):
                        frame.resolve(x._var)
            new = [v for v in frame.captures if v not in seen]
            if not new:
                break
            fun.captures = seen + new
        leaves, out_td = flatten(out)
        if self.out is not None:
            _check_structure(fun.out_td, out_td, f"FUN `{self.__name__}`'s out= and its body")
            out_types = fun.fundef.out_types
        else:
            out_types = [_leaf_type(x, f"FUN {self.__name__} result") for x in leaves]
            fun.fundef.out_types, fun.out_td = out_types, out_td
        finish_body(frame, leaves, out_types, f"FUN `{self.__name__}`")
        frame.align_captures(fun.captures)
        fun.fundef.body = frame.graph
        fun.fundef.n_captures, fun.fundef.captured = len(fun.captures), list(fun.captures)
        trace.fun_list.append(fun.fundef)
        return fun


class checkpoint(FUN):
    """`jitad.checkpoint(f)`: during reverse mode, run `f` without keeping its
    intermediate values, and recompute them when the backward pass reaches `f`
    (less memory, one more forward pass of `f`).

    >>> block = jitad.checkpoint(lambda h, W: jitad.tanh(W @ h))
    """
    call_op = Op.CHECKPOINT

    def __repr__(self):
        return f"checkpoint({self.__name__})"


class _FunState:
    def __init__(self, fundef, in_td):
        self.fundef, self.in_td = fundef, in_td
        self.captures = []
        self.out_td = None

    @property
    def out_types(self):
        return self.fundef.out_types


class NodeView:
    """The staged fields of one tree node inside a `TREE` combine function."""

    def __init__(self, tree, k):
        self._tree, self._k = tree, k

    @property
    def is_leaf(self):
        return (self.left == -1) & (self.right == -1)

    def __getattr__(self, name):
        ttype = self._tree._var.type
        if name not in ("left", "right", "index") and (ttype.field_dtype(name) is None or name.startswith("_")):
            raise StagingError(f"tree nodes have no field `{name}`; they have index, is_leaf, left, right"
                               f"{''.join(', ' + n for n, _ in ttype.fields if not n.startswith('_'))}")
        return Staged(emit(Op.TREE_GET, [self._tree._var, self._k._var], {"field": name})[0])


def TREE(tree, init, combine):
    """Recursion over a binary tree: `f(n) = init if n is empty else combine(node, f(n.left), f(n.right))`.

    >>> tree = jitad.Tree.from_nested((5.0, (3.0, None, None), (4.0, None, None)))
    >>> jitad.jit(lambda t: TREE(t, 1.0, lambda node, l, r: l * r * node.value))(tree)
    60.0
    """
    _check_callables("TREE", combine=combine)
    if callable(init):
        init = init()
    if not isinstance(tree, (StagedTree, Tree)):
        raise ArgumentError(f"TREE takes a jitad.Tree, got {type(tree).__name__}")
    tree = tree if isinstance(tree, StagedTree) else plain_tree(tree)
    if (tree._var.type if isinstance(tree, StagedTree) else tree.type).forest:
        raise StagingError("TREE got a jitad.Forest, a batch of trees: map over it with "
                           "jitad.vmap(f, in_axes=...) (the forest's axis 0), so that each lane folds one tree")
    if isinstance(tree, Tree):
        return _tree_eager(tree, init, combine)
    init_vars, types, td = _state(init, "TREE init")
    n = len(types)
    frame, out = trace_body(
        combine, None, [I64] + types + types,
        lambda ps: (NodeView(tree, ps[0]), unflatten(td, ps[1:1 + n]), unflatten(td, ps[1 + n:])))
    return _loop_node(Op.TREE, [tree._var] + init_vars, [frame], out, td, types, "combine function")


class _EagerNode:
    def __init__(self, tree, k):
        self.index, self.left, self.right = k, int(tree.left[k]), int(tree.right[k])
        self.is_leaf = self.left == -1 and self.right == -1
        for name, arr in tree.fields.items():
            setattr(self, name, arr[k])


def _tree_eager(tree, init, combine):
    done = {-1: init}
    for k in tree.order.tolist():   # children first, as a recursion would: no depth limit
        node = _EagerNode(tree, k)
        done[k] = combine(node, done[node.left] if node.left < 0 else done.pop(node.left),
                          done[node.right] if node.right < 0 else done.pop(node.right))
    return done[tree.root]
