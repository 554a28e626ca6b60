"""Data-parallel training on MPI: one process per rank, started by `mpiexec`.

    # mpiexec -n 2 python train.py
    import jitad
    from jitad import distributed as dist
    dist.init()
    params = dist.broadcast(params)                 # every rank starts from rank 0's values
    xs, ys = dist.shard((x_full, y_full))           # this rank's rows of the batch
    loss, grads = jitad.value_and_grad(loss_fn)(params, xs, ys)
    grads = dist.allreduce(grads, op="mean")        # the full batch's gradient on every rank

`allreduce` and `broadcast` take pytrees of floats and arrays. Called on NumPy values they
run at once (mpi4py, zero-copy on the arrays' buffers); called on staged values (inside
`jit`, `FOR`, ...) they become the `allreduce`/`bcast` primitives, which the compiled code
runs by calling MPI itself (jitad/lower/mpi.py), so a whole training loop runs natively.
In a single process (no `init()`, or `mpiexec -n 1`) the collectives are identities.
Install MPI with `pip install jitad[mpi]` (mpi4py and the MPICH wheel).
"""
import hashlib
import os
import sys
import threading
import time

import numpy as np

from .errors import ArgumentError, DistributedError
from .ir.ops import IMPLS, Op
from .ir.types import NUMPY
from .pytree import flatten, unflatten
from .staging import as_var, emit, is_staged, wrap

OPS = ("sum", "mean", "max", "min")
_world = None   # mpi4py's COMM_WORLD once `init()` ran


def init():
    """Join the MPI job this process was started in (`mpiexec -n N python script.py`).

    Call it once, before compiling functions that use collectives. An uncaught exception
    on any rank then aborts the whole job (`MPI_Abort`) instead of leaving the other
    ranks waiting in a collective forever.

    >>> dist.init(); print(f"rank {dist.rank()} of {dist.size()}")   # doctest: +SKIP
    """
    global _world
    if _world is not None:
        return
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise DistributedError(
            f"jitad.distributed needs MPI for Python ({e}); install it with "
            "`pip install 'jitad[mpi]'` (mpi4py and the MPICH wheel, which brings `mpiexec`)") from None
    _world = MPI.COMM_WORLD
    if _world.Get_size() > 1:
        _abort_on_uncaught_errors()


def _launched_size():
    """The process count mpiexec announced in the environment (MPICH or Open MPI), or 1."""
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 1


def _comm():
    if _world is None and _launched_size() > 1:
        raise DistributedError(
            f"this process is one of {_launched_size()} started by mpiexec, but "
            "`jitad.distributed.init()` was not called: call it first, or each rank would train alone")
    return _world


def rank():
    """This process's index in the job, 0 .. size() - 1 (0 without MPI)."""
    comm = _comm()
    return 0 if comm is None else comm.Get_rank()


def size():
    """The number of processes in the job (1 without MPI)."""
    comm = _comm()
    return 1 if comm is None else comm.Get_size()


def _abort_on_uncaught_errors():
    """Print an uncaught exception as usual, then `MPI_Abort` the job: the other ranks are
    likely blocked in a collective this rank will never reach."""
    def abort(code=1):
        sys.stderr.flush()
        sys.stdout.flush()
        time.sleep(0.5)   # mpiexec forwards output asynchronously: an abort right away can lose the error
        _world.Abort(code)

    def main_hook(kind, value, tb, previous=sys.excepthook):
        previous(kind, value, tb)
        if not issubclass(kind, KeyboardInterrupt):
            sys.stderr.write(f"jitad.distributed: rank {_world.Get_rank()} raised {kind.__name__}; aborting the job\n")
        abort(130 if issubclass(kind, KeyboardInterrupt) else 1)

    def thread_hook(args, previous=threading.excepthook):
        previous(args)
        if args.exc_type is not SystemExit:
            abort()
    sys.excepthook, threading.excepthook = main_hook, thread_hook


def _check_op(op):
    if op not in OPS:
        raise ArgumentError(f"allreduce: op={op!r}; use one of {', '.join(map(repr, OPS))}")


def _check_leaf(x, what):
    if is_staged(x):
        kind = {"f64": "f", "f32": "f", "i64": "i"}.get(x.ir_dtype, "b")
    else:
        kind = np.asarray(x).dtype.kind
    if kind not in "iuf":
        raise ArgumentError(f"{what}: a leaf of dtype {np.asarray(x).dtype if not is_staged(x) else x.ir_dtype}; "
                            "collectives take floats and integers (convert bools first)")


def allreduce(tree, op="sum", timeout=None):
    """Combine every rank's `tree` leaf by leaf ("sum", "mean", "max" or "min"); every rank
    gets the result. All ranks must call it in the same order, with the same structure,
    shapes and dtypes: called on NumPy values, the ranks first compare these (one small
    collective) and all raise `DistributedError` if they differ. `timeout=` seconds: when
    the other ranks have not joined by then, `DistributedError` (compiled code, which cannot
    raise, prints that and ends the job) instead of waiting forever.

    >>> grads = dist.allreduce(grads, op="mean")   # data-parallel gradient average   # doctest: +SKIP
    >>> total = dist.allreduce(3.0, timeout=60)    # 3.0 * size()   # doctest: +SKIP
    """
    _check_op(op)
    _check_timeout("allreduce", timeout)
    leaves, td = flatten(tree)
    for x in leaves:
        _check_leaf(x, "allreduce")
    if size() == 1:
        return tree
    if any(map(is_staged, leaves)):
        _agree_staged("allreduce", op, leaves, td, timeout)
        return unflatten(td, [_allreduce_staged(x, op, timeout) for x in leaves])
    from mpi4py import MPI
    deadline = _agree("allreduce", op, leaves, td, timeout)
    mpi_op, out = {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op], []
    for x in leaves:
        a = np.ascontiguousarray(x)
        o = np.empty_like(a)
        _wait(_world.Iallreduce(a, o, op=mpi_op) if deadline else _world.Allreduce(a, o, op=mpi_op),
              deadline, "allreduce", timeout)
        out.append(_like(x, o / size() if op == "mean" else o))
    return unflatten(td, out)


def _staged(x):
    """A leaf of a pytree whose other leaves are staged: a constant of the program."""
    return _check_count(x if is_staged(x) else wrap(as_var(np.asarray(x) if np.ndim(x) else x)))


def _timeout_attr(timeout):
    """A staged collective's `timeout` attribute (none without one: the blocking MPI call)."""
    return {} if timeout is None else {"timeout": float(timeout)}


def _allreduce_staged(x, op, timeout=None):
    out = wrap(emit(Op.ALLREDUCE, [_staged(x)._var], {"reduce": "sum" if op == "mean" else op,
                                                      **_timeout_attr(timeout)})[0])
    return out / size() if op == "mean" else out


def broadcast(tree, root=0, timeout=None):
    """Every rank gets rank `root`'s `tree` (the others' values are only read for their
    structure, shapes and dtypes, which must match root's: checked as by `allreduce`, as is
    `timeout=`).

    >>> params = dist.broadcast(init_params(seed=dist.rank()))   # all ranks start equal   # doctest: +SKIP
    """
    n = size()
    if not isinstance(root, (int, np.integer)) or not 0 <= root < n:
        raise ArgumentError(f"broadcast: root={root!r}; it must be a rank, 0 .. {n - 1}")
    _check_timeout("broadcast", timeout)
    leaves, td = flatten(tree)
    for x in leaves:
        _check_leaf(x, "broadcast")
    if n == 1:
        return tree
    if any(map(is_staged, leaves)):
        _agree_staged("broadcast", int(root), leaves, td, timeout)
        attrs = {"root": int(root), **_timeout_attr(timeout)}
        return unflatten(td, [wrap(emit(Op.BCAST, [_staged(x)._var], attrs)[0]) for x in leaves])
    deadline = _agree("broadcast", int(root), leaves, td, timeout)
    out = []
    for x in leaves:
        a = np.array(x, order="C")   # a copy: the caller's array stays as it was
        _wait(_world.Ibcast(a, root=int(root)) if deadline else _world.Bcast(a, root=int(root)),
              deadline, "broadcast", timeout)
        out.append(_like(x, a))
    return unflatten(td, out)


# -- checks before an eager collective ------------------------------------------------

def _check_timeout(who, timeout):
    number = isinstance(timeout, (int, float, np.integer, np.floating)) and not isinstance(timeout, bool)
    if timeout is not None and not (number and timeout > 0):
        raise ArgumentError(f"{who}: timeout={timeout!r}; give a number of seconds > 0, or None to wait forever")


def _structure(td):
    """The structure of a pytree as text that is the same in every process (no aux_data:
    its repr may hold addresses)."""
    inner = ",".join(_structure(c) for c in td.children)
    name = {"custom": lambda: td.keys[0].__qualname__, "namedtuple": lambda: td.keys.__qualname__,
            "dict": lambda: repr(td.keys)}.get(td.kind, lambda: td.kind)()
    return f"{name}({inner})" if td.children or td.kind != "leaf" else "*"


_SIGNATURES = {}   # (collective, op or root, structure, leaf shapes and dtypes) -> (text, [hash, -hash])


def _call_key(who, how, leaves, td):
    """What the ranks compare before a collective: the collective, its op or root, the
    pytree's structure, each leaf's shape and dtype (staged or not)."""
    def shape_char(x):
        if is_staged(x):
            return tuple(x.shape), np.dtype(NUMPY[x.ir_dtype]).char
        return np.shape(x), np.asarray(x).dtype.char
    return who, how, td, tuple(map(shape_char, leaves))


def _signature(key):
    who, how, td, leaves = key
    text = f"{who}(op={how!r}) of {_structure(td)} with leaves " + ", ".join(
        f"{np.dtype(char)}{list(shape)}" for shape, char in leaves)
    h = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=7).digest(), "little")
    if len(_SIGNATURES) > 1000:
        _SIGNATURES.clear()
    _SIGNATURES[key] = text, np.array([h, -h], np.int64)
    return _SIGNATURES[key]


def _agree(who, how, leaves, td, timeout):
    """Compare what each rank passes (the collective, its op or root, the pytree's structure,
    each leaf's shape and dtype) with one small allreduce; DistributedError on every rank
    if they differ. Returns the deadline of `timeout` (None without one)."""
    deadline = time.monotonic() + timeout if timeout is not None else None
    from mpi4py import MPI
    key = _call_key(who, how, leaves, td)
    text, sig = _SIGNATURES.get(key) or _signature(key)
    both = np.empty(2, np.int64)
    _wait(_world.Iallreduce(sig, both, op=MPI.MAX) if deadline else _world.Allreduce(sig, both, op=MPI.MAX),
          deadline, who, timeout)
    if both[0] != -both[1]:   # max != min: not all the same
        texts = _world.allgather(text)
        lines = "\n".join(f"  rank {r}: {t}" for r, t in enumerate(texts))
        raise DistributedError(f"{who}: the ranks pass different values:\n{lines}\nevery rank must make the same "
                               "collective with the same structure, shapes and dtypes (convert with "
                               ".astype(...), or use floats on every rank)")
    return deadline


def _agree_staged(who, how, leaves, td, timeout):
    """`_agree` in compiled code: one allreduce of the call's signature hash before the
    collective, and a `check` that stops the call with `RuntimeCheckError` on every rank if
    the ranks' signatures differ (the mismatched collective itself would hang or corrupt)."""
    key = _call_key(who, how, leaves, td)
    text, sig = _SIGNATURES.get(key) or _signature(key)
    both = wrap(emit(Op.ALLREDUCE, [as_var(sig)], {"reduce": "max", **_timeout_attr(timeout)})[0])
    differ = wrap(emit(Op.NE, [(both[0] + both[1])._var, as_var(np.int64(0))])[0])   # max - min != 0
    emit(Op.CHECK, [differ._var], {"message": (
        f"{who}: the ranks make different collectives here (this rank: {text}); every rank must make the "
        "same collectives in the same order, with the same structure, shapes and dtypes")})


def _wait(request, deadline, who, timeout):
    """Wait for a non-blocking collective until `deadline` (None: it was blocking, done)."""
    if deadline is None:
        return
    pause = 1e-5
    while not request.Test():
        if time.monotonic() > deadline:
            raise DistributedError(
                f"{who}: rank {rank()} waited {timeout} s for the other ranks; one of them failed, hangs or "
                "calls collectives in another order. The job's collectives are now out of step: end it")
        time.sleep(pause)
        pause = min(pause * 2, 1e-3)


def shard(batch, axis=0):
    """This rank's equal share of every leaf of `batch` along `axis` (contiguous blocks,
    rank 0 first), so the mean of the ranks' mean losses is the full batch's mean loss.

    >>> xs, ys = dist.shard((x, y))   # with 2 ranks: rows 0..n/2-1 on rank 0, the rest on 1   # doctest: +SKIP
    """
    n, r = size(), rank()
    leaves, td = flatten(batch)
    out = []
    for k, x in enumerate(leaves):
        shape = tuple(x.shape) if is_staged(x) else np.shape(x)
        if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)) \
                or not -len(shape) <= axis < len(shape):
            raise ArgumentError(f"shard: axis={axis!r} but leaf {k} of the batch has shape {shape}; give an "
                                f"int axis the leaves have, -{len(shape)} .. {len(shape) - 1}" if shape else
                                f"shard: leaf {k} of the batch is a scalar; every leaf must be an array to split")
        length = shape[axis]
        if length % n:
            raise ArgumentError(f"shard: {length} rows along axis {axis} do not split evenly over "
                                f"{n} processes; drop or pad examples to a multiple of {n}")
        lo, hi = length // n * r, length // n * (r + 1)
        if is_staged(x):
            from .numeric import take_slice
            out.append(take_slice(x, axis, lo, hi))
        else:
            out.append(np.take(np.asarray(x), np.arange(lo, hi), axis=axis))
    return unflatten(td, out)


def _like(x, out):
    """`out` in the kind of value `x` was: a Python number, a NumPy scalar or an array."""
    if isinstance(x, (float, int)):
        return out.item()
    return out[()] if np.ndim(x) == 0 else out


def _check_count(x):
    if x.size >= 2 ** 31:
        raise ArgumentError(f"a staged collective of {x.size} elements: MPI counts are 32-bit; "
                            "split the array")
    return x


# The collectives' NumPy meaning (the reference interpreter's) is the eager path above,
# which owns the communicator; they are declared in jitad/primitives/collectives.py.
IMPLS[Op.ALLREDUCE] = lambda x, reduce, timeout=None: allreduce(x, reduce, timeout)
IMPLS[Op.BCAST] = lambda x, root, timeout=None: broadcast(x, root, timeout)
