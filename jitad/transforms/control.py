"""JAX's structured control flow, built on the staged combinators: `scan` on `FOR`,
`switch` on a balanced tree of `IF`s. Both differentiate through their combinators
(reverse mode keeps each step's carry as `FOR` does, but not the stacked outputs)."""
import numpy as np

from .. import numeric as N
from ..errors import ArgumentError, StagingError
from ..ir.types import Type
from ..pytree import TreeDef, flatten, unflatten
from ..staging import FOR, IF, Staged, as_var, checkpoint_count, current_frame, is_staged, trace_program
from ..staging.complex import split as split_complex
from ..staging.values import _leaf_type


def _leading_lengths(leaves):
    lengths = []
    for k, x in enumerate(leaves):
        shape = tuple(x.shape) if is_staged(x) else np.shape(x)
        if not shape:
            raise ArgumentError(f"scan: xs leaf {k} is a scalar; every leaf of xs must be an array whose "
                                "first axis is the one scanned over")
        lengths.append(shape[0])
    return lengths


def _scan_length(xs_leaves, length):
    lengths = _leading_lengths(xs_leaves)
    if len(set(lengths)) > 1:
        raise ArgumentError(f"scan: the leaves of xs have different leading lengths {lengths}; scan slices "
                            "them all along axis 0, so give them the same first dimension")
    if length is not None:
        if isinstance(length, (bool, np.bool_)) or not isinstance(length, (int, np.integer)) or length < 0:
            raise ArgumentError(f"scan: length={length!r}; it must be a non-negative Python int")
        if lengths and lengths[0] != length:
            raise ArgumentError(f"scan: length={length} but xs has leading length {lengths[0]}; "
                                "drop length or make them agree")
        return int(length)
    if not lengths:
        raise ArgumentError("scan: with no xs, give the number of steps as length=")
    return lengths[0]


def scan(f, init, xs=None, length=None, reverse=False, *, checkpoints=None):
    """`f(carry, x) -> (carry, y)` over the slices of `xs` along axis 0; returns
    `(final carry, ys)` with the `y`s stacked along a new first axis (JAX's `lax.scan`).
    `xs` is a pytree of arrays (or None with `length=`); `reverse=True` runs from the
    last slice to the first and stores `ys` in the original order.

    >>> def cumsum(c, x):
    ...     return c + x, c + x
    >>> jitad.scan(cumsum, 0.0, np.array([1.0, 2.0, 3.0]))
    (6.0, array([1., 3., 6.]))

    Staged, it is one `FOR` loop whose state is the carry and the stacked outputs; each
    step writes its row of them in place (a `scatter`). Reverse mode stores each step's
    carry like `FOR` but never the stacked outputs: each backward step reads its row's
    cotangent in place (`jitad.transforms.tape.output_rows`), so a step costs O(carry + y), not
    O(length * y). `checkpoints=c` bounds the carries kept to `c` (see `FOR`); the
    stacked outputs are the result and are not copied into the checkpoints.
    """
    if not callable(f):
        raise ArgumentError(f"scan takes a function f(carry, x) -> (carry, y), got {type(f).__name__}")
    checkpoints = checkpoint_count(checkpoints, "scan")
    xs_leaves, xs_td = flatten(xs)
    n = _scan_length(xs_leaves, length)
    order = range(n - 1, -1, -1) if reverse else range(n)
    if current_frame() is None:
        return _scan_eager(f, init, xs_leaves, xs_td, n, order)
    init = split_complex(init)   # (a complex constant: its two real parts)
    c_leaves, c_td = flatten(init)
    c_types = [_leaf_type(x, "scan carry") for x in c_leaves]
    # NumPy xs are constants of the program: staged, a traced step index can slice them
    xs_leaves = [x if is_staged(x) else Staged(as_var(np.asarray(x))) for x in xs_leaves]
    x_types = [Type(x.ir_dtype, tuple(x.shape)[1:]) for x in xs_leaves]
    # the types of y (and a check of the carry), from a trace of f on its own
    program, out_td, _ = trace_program(f, None, TreeDef("tuple", (c_td, xs_td)), c_types + x_types)
    carry_td, y_td = _check_step(out_td, c_td)
    y_types = program.main.out_types[len(c_types):]
    for k, (got, want) in enumerate(zip(program.main.out_types, c_types)):
        if got != want:
            raise StagingError(f"scan: f returns carry leaf {k} as {got} but the initial carry is {want}; "
                               "the carry must keep its type (e.g. init 0.0, not 0, for a float carry)")
    ys0 = [N.zeros((n,) + t.shape, t.dtype) if t.dtype != "bool" else N.zeros((n,) + t.shape, "i64") < 0
           for t in y_types]
    if n == 0:   # no step runs: JAX returns init and empty ys
        return init, unflatten(y_td, ys0)

    def body(i, state):
        carry, ys = state
        j = (n - 1) - i if reverse else i
        x = unflatten(xs_td, [leaf[j] for leaf in xs_leaves])
        carry, y = f(carry, x)
        return carry, tuple(N.bind(N.Op.SCATTER, buf, j, leaf, add=False) for buf, leaf in zip(ys, flatten(y)[0]))
    carry, ys = FOR(0, n, body, (init, tuple(ys0)), checkpoints=checkpoints)
    return carry, unflatten(y_td, list(ys))


def _check_step(out_td, c_td):
    if out_td.kind != "tuple" or len(out_td.children) != 2:
        raise ArgumentError(f"scan: f must return a pair (carry, y), got {out_td}")
    carry_td, y_td = out_td.children
    if carry_td != c_td:
        raise StagingError(f"scan: f returns a carry of structure {carry_td}, but init has {c_td}; "
                           "the carry must keep the structure of init")
    return carry_td, y_td


def _scan_eager(f, init, xs_leaves, xs_td, n, order):
    xs_np = [np.asarray(x) for x in xs_leaves]
    carry, ys = init, [None] * n
    for j in order:
        carry, ys[j] = f(carry, unflatten(xs_td, [x[j] for x in xs_np]))
    if n == 0:   # the shapes of y from one step on zero slices, as JAX takes them from a trace
        _, y = f(init, unflatten(xs_td, [np.zeros(x.shape[1:], x.dtype) for x in xs_np]))
        leaves, td = flatten(y)
        return carry, unflatten(td, [np.zeros((0,) + np.shape(v), np.asarray(v).dtype) for v in leaves])
    tds = {flatten(y)[1] for y in ys}
    if len(tds) > 1:
        raise StagingError(f"scan: f returned ys of different structures across steps: {sorted(map(str, tds))}")
    td = flatten(ys[0])[1]
    stacked = [np.stack([np.asarray(flatten(y)[0][k]) for y in ys]) for k in range(td.num_leaves)]
    return carry, unflatten(td, stacked)


def switch(index, branches, *operands):
    """`branches[index](*operands)`, with `index` clamped into `[0, len(branches) - 1]`
    (JAX's `lax.switch`). Staged, a balanced tree of `IF`s, differentiable like `IF`.

    >>> f = jitad.jit(lambda i, x: jitad.switch(i, [lambda x: x, lambda x: x * x, jitad.sin], x))
    >>> f(1, 3.0), f(7, 0.0)
    (9.0, 0.0)
    """
    branches = list(branches) if isinstance(branches, (list, tuple)) else None
    if not branches or not all(callable(b) for b in branches):
        raise ArgumentError("switch(index, branches, *operands): branches must be a non-empty list of functions")
    if not is_staged(index):
        if isinstance(index, (float, np.floating)) or not isinstance(index, (int, np.integer)):
            raise ArgumentError(f"switch: the index must be an int, got {index!r}")
        return branches[int(np.clip(index, 0, len(branches) - 1))](*operands)
    if index.ir_dtype != "i64" or index.shape:
        raise ArgumentError(f"switch: the index must be a scalar int, got a staged {index._var.type}; "
                            "convert it with jitad.convert(i, 'i64')")

    def pick(lo, hi, *ops):   # branches[lo:hi]; below lo goes to lo, above to hi - 1: the clamp
        if hi - lo == 1:
            return branches[lo](*ops)
        mid = (lo + hi) // 2
        return IF(index < mid, lambda *o: pick(lo, mid, *o), lambda *o: pick(mid, hi, *o), *ops)
    try:
        return pick(0, len(branches), *operands)
    except StagingError as e:
        _diagnose(branches, operands)
        raise e


def _diagnose(branches, operands):
    """Which branches disagree on their result (called after an IF refused them)."""
    leaves, td = flatten(operands)
    types = [_leaf_type(x, "switch operand", allow_tree=True) for x in leaves]
    results = []
    for b in branches:
        program, out_td, _ = trace_program(b, operands, td, types)
        results.append((out_td, program.main.out_types))
    for k, (out_td, out_types) in enumerate(results[1:], 1):
        if (out_td, out_types) != results[0]:
            raise StagingError(f"switch: branch 0 returns {results[0][0]} of types "
                               f"{[str(t) for t in results[0][1]]} but branch {k} returns {out_td} of types "
                               f"{[str(t) for t in out_types]}; every branch must return the same structure, "
                               "shapes and dtypes (convert with jitad.convert, or broadcast)")
