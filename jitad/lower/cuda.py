"""The GPU backend: tensor work runs as numba-cuda kernels, control flow and the CPS
structure of reverse mode stay on the host.

The program is the one the LLVM backend lowers (after reverse mode and fusion). The
host walks its graphs with one rule per op (`rule_of`): a primitive's is its
declaration's `cuda` (jitad/primitives), which launches kernels through the `Runner`'s
services (`gather`, `gemm`, `scan`, `sort_rows`, ...); the IR's own ops have theirs
registered here (the table `RULES`). A `fused` node is one kernel, every other tensor op
is one kernel (`jitad.lower.cuda_kernels` writes and caches them), scalar work on host
numbers stays on the host, and a scalar that a kernel produced stays on the device until
a condition, a loop bound or an index needs it.

Device memory follows the CPU backend's stack discipline: one pool per dtype, bump
allocation, a mark at every function/closure/loop-iteration entry and a release when it
returns (results copied below the mark first), so steady-state calls allocate nothing.
"""
import threading
from typing import Any

import numpy as np

from ..errors import ArgumentError, DeviceError, ResourceError
from ..ir import float_checks
from ..ir.graph import Graph, Node, Var, split_operands
from ..ir.ops import CALLS, CUDA, IMPLS, Op, impl_of, registrar
from ..ir.types import NUMPY, RefType, is_device_array, TreeType, Type, clean_bools
from ..primitives.along_axis import REDUCTIONS, SCANS, lines
from . import cuda_kernels as K
from .cuda_kernels import size_of

RULES = CUDA.registered   # op -> host rule fn(runner, node, ins) -> [values]
SIM_THREADS = 4      # threads per launch under the simulator (each one a Python thread)
GPU_THREADS = 256
TILE_GPU, TILE_SIM = 16, 4


rule = registrar(RULES)


def require_cuda():
    """numba.cuda, or a `DeviceError` saying what is missing."""
    try:
        from numba import cuda
    except ImportError as e:   # pragma: no cover - numba-cuda is a dependency
        raise DeviceError("device='cuda' needs the numba-cuda package: pip install numba-cuda") from e
    if not cuda.is_available():
        raise DeviceError("device='cuda': no usable CUDA GPU or driver was found. Use device='cpu', "
                          "or set NUMBA_ENABLE_CUDASIM=1 before importing numba/jitad to run the "
                          "kernels on numba's CUDA simulator (slow; for tests)")
    return cuda


def on_host(v):
    return isinstance(v, np.generic)


def kind(v):
    return "h" if on_host(v) else "s" if v.shape[0] == 1 else "a"


class Arena:
    """Device memory with stack discipline: a pool per dtype and a bump pointer. A pool
    is replaced by one twice the size only when a call needs more than any before it
    (the old one lives on while views of it do)."""

    def __init__(self):
        self.pools, self.top = {}, {}
        self.device_allocations = 0

    def alloc(self, dtype, size):
        pool, top = self.pools.get(dtype), self.top.get(dtype, 0)
        if pool is None or top + size > pool.shape[0]:
            pool = K.cuda().device_array(max(2 * (top + size), 1 << 12), dtype=NUMPY[dtype])
            self.pools[dtype] = pool
            self.device_allocations += 1
        self.top[dtype] = top + size
        return pool[top:top + size]

    def mark(self):
        return dict(self.top)

    def release(self, mark):
        self.top = dict(mark)


class Cell:
    """A scalar slot: a host number, or a device scalar in its own home buffer (allocated
    where the slot was made, so deeper scopes can update it)."""
    __slots__ = ("value", "home", "type")

    def __init__(self, value, t):
        self.value, self.home, self.type = value, None, t


class Runner:
    """Runs one compiled program on the device."""

    def __init__(self, program):
        self.program = program
        self.arena = Arena()
        self.cell_homes = Arena()   # scalar slots' device homes, freed when the call ends
        self.consts = {}
        self.kernels = {}
        self.bodies = {}
        self.sim = K.simulated()

    # -- memory and launches ----------------------------------------------------

    def alloc(self, t):
        return self.arena.alloc(t.dtype, size_of(t.shape))

    def launch(self, kernel, n, *args):
        if n <= 0:
            return
        threads = SIM_THREADS if self.sim else GPU_THREADS
        blocks = 1 if self.sim else min((n + threads - 1) // threads, 4096)
        kernel[blocks, threads](*args)

    def kernel(self, key, make):
        k = self.kernels.get(key)
        if k is None:
            k = self.kernels[key] = K.compiled(make())
        return k

    def fill(self, array, value, dtype):
        n = array.shape[0]
        kern = self.kernel(("fill", n, dtype), lambda: K.map_source("h", "i", None, n, value="x"))
        self.launch(kern, n, NUMPY[dtype](value), array)

    def copy(self, dst, src):
        dst.copy_to_device(src)

    def host(self, v):
        """A value as a host number (a device scalar is read back: a synchronization)."""
        return v if on_host(v) else v.copy_to_host()[0]

    def to_device(self, v, t):
        """A scalar or tensor value of type `t` as a device array."""
        if not on_host(v):
            return v
        out = self.alloc(t)
        self.fill(out, v, t.dtype)
        return out

    # -- graphs -------------------------------------------------------------------

    def run_graph(self, graph, args):
        env = dict(zip(graph.params, args))
        for node in graph.nodes:
            outs = rule_of(node.op)(self, node, [env[v] for v in node.inputs])
            env.update(zip(node.outputs, outs))
        return [env[v] for v in graph.outputs]

    def keep(self, types):
        """Buffers below the current mark for results of these types (scalars: a
        one-element buffer, used only if the result lives on the device)."""
        return [self.alloc(t) for t in types]

    def settle(self, values, homes):
        """Copy device results into their homes; host numbers stay as they are."""
        out = []
        for v, home in zip(values, homes):
            if on_host(v) or v is home:
                out.append(v)
            else:
                self.copy(home, v)
                out.append(home)
        return out

    def call_scoped(self, graph, args):
        """Run `graph` in its own arena scope; its results survive the release."""
        homes = self.keep(graph.out_types)
        mark = self.arena.mark()
        outs = self.run_graph(graph, args)
        outs = self.settle(outs, homes)
        self.arena.release(mark)
        return outs

    # -- elementwise work ---------------------------------------------------------

    def fused(self, body, shape, ins, in_types, out_types, key):
        """Run a fused body over `shape` as one kernel; its results (a scalar result of a
        loop over a tensor shape is a total, zeroed here and added to by the threads)."""
        kinds = tuple("a" if isinstance(t, RefType) else kind(v) for v, t in zip(ins, in_types))
        kern = self.kernel((key, kinds), lambda: K.fused_source(body, shape, kinds, in_types))
        results = [self.alloc(t) for t in out_types]
        total = [bool(shape) and not t.shape for t in out_types]
        for buf, t, is_total in zip(results, out_types, total):
            if is_total:
                self.fill(buf, 0, t.dtype)
        n = size_of(shape)
        self.launch(kern, n, np.int64(n), *ins, *[r for r, s in zip(results, total) if not s],
                    *[r for r, s in zip(results, total) if s])
        return results

    # -- data movement (the rules in jitad/primitives build index expressions in `i`) --

    coordinate = staticmethod(K.coordinate)   # coordinate(i, shape, d): axis d of flat index i in shape

    @staticmethod
    def strides(shape):
        return _strides(shape)

    @staticmethod
    def slice_index(i, out_shape, in_shape, starts, steps):
        """The flat index in `in_shape` of element `i` of the slice (starts, steps) of shape `out_shape`."""
        return _slice_index(i, out_shape, in_shape, starts, steps)

    def gather(self, node, x, in_index, n, extra=()):
        """out[i] = x[in_index] for i < n, a new result of `node`; `in_index(el)` may read
        element `el(j, index)` of the j-th extra argument (an index array or scalar)."""
        result = self.alloc(node.outputs[0].type)
        kinds = tuple(kind(e) for e in extra)
        names = [f"e{j}" for j in range(len(extra))]
        kern = self.kernel((id(node), kinds), lambda: K.map_source(
            "a", "i", in_index(lambda j, index: K.element(names[j], kinds[j], index)), n, names))
        self.launch(kern, n, x, result, *extra)
        return [result]

    def put(self, key, x, out_index, n, out):
        """out[out_index] = x[i] for i < n (a kernel cached under `key`)."""
        kern = self.kernel(key, lambda: K.map_source(kind(x), out_index, "i", n))
        self.launch(kern, n, x, out)

    def single(self, node):
        """A one-node body for an elementwise op, as `fused` takes it."""
        body = self.bodies.get(id(node))
        if body is None:
            params = [Var(Type(v.type.dtype)) for v in node.inputs]
            outs = tuple(Var(Type(v.type.dtype)) for v in node.outputs)
            body = self.bodies[id(node)] = Graph(params, [Node(node.op, tuple(params), outs, node.attrs)], list(outs))
        return body

    # -- kernels the declarations' rules call (jitad/primitives) -------------------

    def elementwise(self, node, ins):
        """`node`'s element expression (its declaration's `cuda`) as one kernel; on host
        scalars, its NumPy meaning on the host."""
        out = node.outputs[0].type
        if not out.shape and all(on_host(v) for v in ins):
            with np.errstate(all="ignore"):
                return [host_value(impl_of(node.op)(*ins, **node.attrs), out)]
        return self.fused(self.single(node), out.shape, ins, [v.type for v in node.inputs], [out], id(node))

    def reduction(self, node, ins):
        """An along-axis reduction (jitad/primitives/along_axis.py): a kernel over the kept elements."""
        (x,), xt, out = ins, node.inputs[0].type, node.outputs[0].type
        axes = tuple(sorted(node.attrs["axes"]))
        if not axes:
            return [x]
        if node.op == Op.SUM and len(axes) == len(xt.shape):   # a total: per-thread sums, atomics
            return self.fused(self.single(node), xt.shape, ins, [xt], [Type(out.dtype)], id(node))
        result = self.alloc(out)
        kern = self.kernel(id(node), lambda: K.reduce_source(xt.shape, axes, REDUCTIONS[node.op], xt.dtype))
        self.launch(kern, size_of(out.shape), x, result)
        return [result]

    def scan(self, node, ins):
        """An along-axis scan (jitad/primitives/along_axis.py): a thread per line."""
        t = node.outputs[0].type
        outer, n, inner = lines(t.shape, node.attrs["axis"])
        out = self.alloc(t)
        kern = self.kernel(id(node), lambda: K.scan_source(outer, n, inner, node.attrs["reverse"], SCANS[node.op],
                                                           t.dtype))
        self.launch(kern, outer * inner, self.to_device(ins[0], t), out)
        return [out]

    def gemm(self, node, out, ins, in_types, shape, accumulate=False):
        """out (=|+=) op(a) @ op(b) of `shape`, op a transpose where `node`'s ta/tb say: a
        tiled kernel (shared memory)."""
        a, b = ins
        (m, n), ta, tb = shape, node.attrs["ta"], node.attrs["tb"]
        at = in_types[0]
        k = at.shape[0] if ta else at.shape[1]
        tile = TILE_SIM if self.sim else TILE_GPU
        kern = self.kernel(id(node), lambda: K.matmul_source(m, n, k, ta, tb, at.dtype, tile, accumulate))
        if m and n:
            if k == 0:
                if not accumulate:
                    self.fill(out, 0, at.dtype)
            else:
                grid = ((n + tile - 1) // tile, (m + tile - 1) // tile)
                kern[grid, (tile, tile), 0, K.matmul_shared_bytes(at.dtype, tile)](a, b, out)

    def batched_gemm(self, node, out, ins, in_types, out_t):
        """`gemm` per batch entry, on views of the flat buffers."""
        mats = [Type(t.dtype, t.shape[1:]) for t in [out_t] + list(in_types)]
        sizes = [size_of(t.shape) for t in mats]
        for i in range(out_t.shape[0]):
            o, a, b = (buf[i * n:(i + 1) * n] for buf, n in zip([out] + list(ins), sizes))
            self.gemm(node, o, [a, b], mats[1:], mats[0].shape)

    def conv2d(self, node, out, ins, in_types, out_t):
        """out = the valid convolution of image batch x by weights w: a thread per output."""
        (x_t, w_t) = in_types
        kern = self.kernel(id(node), lambda: K.conv2d_source(x_t.shape, w_t.shape, out_t.shape))
        self.launch(kern, size_of(out_t.shape), ins[0], ins[1], out)

    def sort_rows(self, node, out, x, shape, indices=False):
        """out = each row of x (along the last axis) sorted, or with `indices` its stable
        argsort: a thread per row."""
        rows = size_of(shape[:-1])
        kern = self.kernel(id(node), lambda: K.sort_source(rows, shape[-1], indices))
        self.launch(kern, rows if shape[-1] else 0, x, out)

    def scatter_rows(self, node, out, index, value, add):
        """Rows `index` (clamped) of `out` (a copy of `node`'s operand) set to, or with `add`
        added, `value`'s rows, in order: a thread per element of a row."""
        x_t, idx_t = node.inputs[0].type, node.inputs[1].type
        rows, rest, count = x_t.shape[0], size_of(x_t.shape[1:]), size_of(idx_t.shape)
        kern = self.kernel((id(node), kind(index), kind(value)), lambda: K.scatter_source(
            kind(index), kind(value), count, rows, rest, add))
        self.launch(kern, rest, value, out, index)


def host_value(value, t):
    return np.asarray(value, NUMPY[t.dtype])[()]


def rule_of(op):
    """`op`'s host-side rule fn(runner, node, ins) -> [values], from the table `CUDA`: the
    declaration's rule, else the rule registered here, else for an elementwise op (or one
    declaring an element expression) one kernel of its expression; MissingRuleError if none."""
    return CUDA.lookup(op)


CUDA.derive(lambda op: Runner.elementwise if op.elementwise or isinstance(CUDA.declared.get(op), str) else None)


@rule(Op.FUSED)
def _fused(rt, node, ins):
    return rt.fused(node.bodies[0], node.attrs["shape"], ins, [v.type for v in node.inputs],
                    [v.type for v in node.outputs], id(node))


@rule(Op.CONST)
def _const(rt, node, ins):
    t = node.attrs["type"]
    value = IMPLS[Op.CONST](**node.attrs)
    if not t.shape:
        return [host_value(value, t)]
    dev = rt.consts.get(id(node))
    if dev is None:
        dev = rt.consts[id(node)] = K.cuda().to_device(np.ascontiguousarray(value, NUMPY[t.dtype]).reshape(-1))
    return [dev]


@rule(Op.RESHAPE)   # a view (its `cuda`, "{0}", is its element expression in a fused kernel)
def _reshape(rt, node, ins):
    (x,), out = ins, node.outputs[0].type
    return [x if not out.shape or not on_host(x) else rt.to_device(x, out)]


# -- what the passes make ----------------------------------------------------------

@rule(Op.TABLE_GEMM_ADD)
def _table_gemm_add(rt, node, ins):
    slot, x, y, count = ins
    (k, n), rows = node.inputs[0].type.value_type.shape, node.attrs["rows"]
    depth = max(int(rt.host(count)), 0) * rows
    kern = rt.kernel(id(node), lambda: K.map_source("a", "i", None, k * n, ("y", "depth"), op="+=", value=(
        f"h_dot_columns(x, y, i // {n}, i % {n}, {k}, {n}, depth)")))
    rt.launch(kern, k * n, x, slot, y, np.int64(depth))
    return []


@rule(Op.MATMUL_ADD)
def _matmul_add(rt, node, ins):
    rt.gemm(node, ins[0], ins[1:], [v.type for v in node.inputs[1:]], node.inputs[0].type.shape,
            not node.attrs.get("store"))
    return []


def _strides(shape):
    return [size_of(shape[d + 1:]) for d in range(len(shape))]


def _slice_index(i, out_shape, in_shape, starts, steps):
    strides = _strides(in_shape)
    return " + ".join(f"({a} + {K.coordinate(i, out_shape, d)} * {c}) * {strides[d]}"
                      for d, (a, c) in enumerate(zip(starts, steps))) or "0"


# -- trees and tables (tree data stays on the host) ------------------------------

@rule(Op.TREE_GET)
def _tree_get(rt, node, ins):
    tree, k = ins
    t = node.outputs[0].type
    if not t.shape:
        return [host_value(IMPLS[Op.TREE_GET](tree, int(rt.host(k)), **node.attrs), t)]
    return [rt.to_device(host_value(IMPLS[Op.TREE_GET](tree, _indices(k), **node.attrs), t), t)]


def _indices(v):
    """A vector of indices, on the host."""
    return np.asarray(v if on_host(v) else v.copy_to_host(), np.int64)


@rule(Op.TREE_ROOT, Op.TREE_SIZE)
def _tree_word(rt, node, ins):
    return [IMPLS[node.op](ins[0], **node.attrs)]


@rule(Op.TABLE)
def _table(rt, node, ins):
    t = node.attrs["type"]
    n = max(int(rt.host(ins[0])), 0)
    if not t.shape:   # scalar entries (loop counters, per-iteration scalars) live on the host
        return [np.zeros(n, NUMPY[t.dtype])]
    table = rt.arena.alloc(t.dtype, n * size_of(t.shape))
    if not node.attrs.get("uninit"):
        rt.fill(table, 0, t.dtype)
    return [table]


def _entry(table, t, i):
    size = size_of(t.shape)
    return table[i * size:(i + 1) * size]


@rule(Op.TABLE_GET)
def _table_get(rt, node, ins):
    table, i = ins
    t = node.outputs[0].type
    i = int(rt.host(i))
    return [_entry(table, t, i) if t.shape else host_value(table[i], t)]


@rule(Op.TABLE_SET, Op.TABLE_ADD)
def _table_update(rt, node, ins):
    table, i, v = ins
    t = node.inputs[2].type
    i = int(rt.host(i))
    if not t.shape:
        table[i] = rt.host(v) + (table[i] if node.op == Op.TABLE_ADD else 0)
    elif node.op == Op.TABLE_SET:
        rt.copy(_entry(table, t, i), v)
    else:
        add_into(rt, node, _entry(table, t, i), v, t.shape, t.shape)
    return []


@rule(Op.TABLE_GATHER)
def _table_gather(rt, node, ins):
    table, idx = ins
    t, out_t = node.inputs[0].type.value_type, node.outputs[0].type
    idx = _indices(idx)
    if not t.shape:
        return [rt.to_device(host_value(table[idx], out_t), out_t)]
    out = rt.arena.alloc(t.dtype, size_of(out_t.shape))
    for i, k in enumerate(idx.tolist()):   # a forest's chunk of rows: a few dozen copies
        rt.copy(_entry(out, t, i), _entry(table, t, k))
    return [out]


@rule(Op.TABLE_SCATTER)
def _table_scatter(rt, node, ins):
    table, idx, v = ins
    t, add = node.inputs[0].type.value_type, node.attrs.get("add")
    idx = _indices(idx)
    if not t.shape:
        values = v if on_host(v) else v.copy_to_host()
        if add:
            np.add.at(table, idx, values)
        else:
            table[idx] = values
        return []
    for i, k in enumerate(idx.tolist()):
        if add:
            add_into(rt, node, _entry(table, t, k), _entry(v, t, i), t.shape, t.shape)
        else:
            rt.copy(_entry(table, t, k), _entry(v, t, i))
    return []


def add_into(rt, node, target, value, shape, value_shape):
    n = size_of(shape)
    kd = kind(value)
    kern = rt.kernel((id(node), "add", kd), lambda: K.map_source(kd, "i", K.broadcast_index(value_shape, shape), n, op="+="))
    rt.launch(kern, n, value, target)


# -- slots and continuations ------------------------------------------------------

@rule(Op.SLOT)
def _slot(rt, node, ins):
    t = node.attrs["type"]
    if not t.shape:
        return [Cell(NUMPY[t.dtype](0), t)]
    buf = rt.alloc(t)
    if not node.attrs.get("uninit"):
        rt.fill(buf, 0, t.dtype)
    return [buf]


@rule(Op.SLOT_GET)
def _slot_get(rt, node, ins):
    (slot,) = ins
    if not isinstance(slot, Cell):
        return [slot]   # a tensor slot is read where it lies, as on the CPU
    if on_host(slot.value):
        return [slot.value]
    snapshot = rt.alloc(slot.type)   # a scalar read is a value: later updates must not show
    rt.copy(snapshot, slot.value)
    return [snapshot]


def _cell_store(rt, cell, value):
    if on_host(value):
        cell.value = value
        return
    if cell.home is None:
        cell.home = rt.cell_homes.alloc(cell.type.dtype, 1)
    if value is not cell.home:
        rt.copy(cell.home, value)
    cell.value = cell.home


@rule(Op.SLOT_SET, Op.SLOT_ADD)
def _slot_update(rt, node, ins):
    slot, value = ins
    t = node.inputs[1].type
    if isinstance(slot, Cell):
        if node.op == Op.SLOT_ADD:
            value = _add(rt, node, slot.value, value, t)
        _cell_store(rt, slot, value)
    elif node.op == Op.SLOT_SET:
        rt.copy(slot, rt.to_device(value, t))
    else:
        add_into(rt, node, slot, value, t.shape, t.shape)
    return []


def _add(rt, node, a, b, t):
    if on_host(a) and on_host(b):
        return host_value(a + b, t)
    key = ("add", t.dtype)
    body = rt.bodies.get(key)
    if body is None:
        params = [Var(t), Var(t)]
        out = Var(t)
        body = rt.bodies[key] = Graph(params, [Node(Op.ADD, tuple(params), (out,), {})], [out])
    return rt.fused(body, (), [a, b], [t, t], [t], key)[0]


@rule(Op.SLOT_ADD_SLICE)
def _slot_add_slice(rt, node, ins):
    slot, value = ins
    shape, a = node.inputs[1].type.shape, node.attrs
    index = _slice_index("i", shape, node.inputs[0].type.shape, a["starts"], a["steps"])
    n = size_of(shape)
    op = "=" if a.get("store") else "+="   # (`store`: the region's first write)
    kern = rt.kernel((id(node), kind(value)), lambda: K.map_source(kind(value), index, "i", n, op=op))
    rt.launch(kern, n, value, slot)
    return []


@rule(Op.SLOT_ADD_AT, Op.SLOT_SCATTER_ADD, Op.SLOT_SET_AT)
def _slot_add_sparse(rt, node, ins):
    slot, index, value = ins
    st = node.inputs[0].type
    rows, rest = st.shape[0], size_of(st.shape[1:])
    n = size_of(node.inputs[2].type.shape)
    ki, kv = kind(index), kind(value)
    if node.op != Op.SLOT_SCATTER_ADD:   # one row: each thread adds (or sets) one element
        at, n = f"h_clip({K.element('e0', ki, 0)}, {rows}) * {rest} + i", rest
        op = "=" if node.op == Op.SLOT_SET_AT else "+="
    else:   # rows may repeat: atomic adds
        at, op = f"h_clip({K.element('e0', ki, f'i // {rest}')}, {rows}) * {rest} + i % {rest}", "atomic"
    kern = rt.kernel((id(node), ki, kv), lambda: K.map_source(kv, at, "i", n, ("e0",), op=op))
    rt.launch(kern, n, value, slot, index)
    return []


@rule(Op.CLOSURE)
def _closure(rt, node, caps):
    body = node.attrs["fun"].body

    def continuation(*args):
        mark = rt.arena.mark()
        rt.run_graph(body, list(args) + list(caps))
        rt.arena.release(mark)   # a continuation returns nothing: all it made is dead
    return [continuation]


@rule(Op.APPLY)
def _apply(rt, node, ins):
    ins[0](*ins[1:])
    return []


@rule(Op.ARENA_MARK)
def _arena_mark(rt, node, ins):
    return [rt.arena.mark()]


@rule(Op.ARENA_RELEASE)
def _arena_release(rt, node, ins):
    rt.arena.release(ins[0])
    return []


# -- control flow on the host --------------------------------------------------------

@rule(Op.CHECK)
def _check(rt, node, ins):   # reads the flag back (a synchronization), as IF does its predicate
    if rt.host(ins[0]):
        raise float_checks.error_class(node.attrs["message"])(node.attrs["message"])
    return []


@rule(Op.IF)
def _if(rt, node, ins):
    return rt.run_graph(node.bodies[0] if rt.host(ins[0]) else node.bodies[1], ins[1:])


class _Buffers:
    """Two sets of homes for loop state: iteration k writes one set, reads the other."""

    def __init__(self, rt, types):
        self.sets = [rt.keep(types), rt.keep(types)]
        self.k = 0

    def settle(self, rt, values):
        self.k ^= 1
        return rt.settle(values, self.sets[self.k])


@rule(Op.WHILE)
def _while(rt, node, ins):
    _, state, caps = split_operands(node, ins)
    cond, body = node.bodies
    buffers = _Buffers(rt, body.out_types)
    while True:
        mark = rt.arena.mark()
        if not rt.host(rt.run_graph(cond, state + caps)[0]):
            rt.arena.release(mark)
            return state
        state = buffers.settle(rt, rt.run_graph(body, state + caps))
        rt.arena.release(mark)


@rule(Op.FOR)
def _for(rt, node, ins):
    (lower, upper), state, caps = split_operands(node, ins)
    lower, upper = int(rt.host(lower)), int(rt.host(upper))
    (body,) = node.bodies
    buffers = _Buffers(rt, body.out_types)
    for i in range(lower, upper):
        mark = rt.arena.mark()
        state = buffers.settle(rt, rt.run_graph(body, [np.int64(i)] + state + caps))
        rt.arena.release(mark)
    return state


@rule(*CALLS)
def _call(rt, node, ins):
    return rt.call_scoped(node.attrs["fun"].body, ins)


@rule(Op.TREE)
def _tree(rt, node, ins):
    (tree,), init, caps = split_operands(node, ins)
    (combine,) = node.bodies

    def visit(k):
        if k < 0:
            return init
        return rt.call_scoped(combine, [np.int64(k)] + visit(tree.left[k]) + visit(tree.right[k]) + caps)
    return visit(tree.root)


# -- the entry ----------------------------------------------------------------------

class CudaCompiled:
    """One signature's program for the GPU; `run` takes flat leaves like the CPU entry."""
    entry: Any
    in_td: Any
    compile_seconds: float
    compile_report: Any
    direct = False
    takes_pytree = False
    llvm_ir = None
    loaded_from_cache = False

    def __init__(self, program, out_td, in_types):
        from ..pytree import unflatten
        require_cuda()
        self.program, self.out_td, self.in_types = program, out_td, in_types
        self.out_types = program.main.out_types
        self.runner = Runner(program)
        self._unflatten = unflatten
        self._lock = threading.Lock()

    @property
    def ir(self):
        return str(self.program)

    def run(self, leaves, tree_args=None):   # (takes the flat leaves: tree_args unused)
        rt = self.runner
        with self._lock:
            mark = rt.arena.mark()
            homes_mark = rt.cell_homes.mark()
            try:
                args = [self._argument(x, t) for x, t in zip(leaves, self.in_types)]
                on_device = any(is_device_array(x) for x in leaves)
                outs = self._run_main(args)
                result = [self._result(v, t, on_device) for v, t in zip(outs, self.out_types)]
            finally:
                rt.arena.release(mark)
                rt.cell_homes.release(homes_mark)
        return self._unflatten(self.out_td, result)

    def _run_main(self, args):
        from . import runtime
        try:
            return self.runner.run_graph(self.program.main, args)
        except RecursionError:
            pass
        try:   # deep recursion (reverse mode through long WHILE loops, deep FUN): more stack
            return runtime.run_with_deep_stack(_with_recursion_limit, self.runner.run_graph,
                                               self.program.main, args)
        except RecursionError:
            raise ResourceError("the program recursed deeper than the GPU backend's host driver "
                                "allows (long WHILE loops under grad, deep FUN recursion); use "
                                "FOR with a bound, or device='cpu'") from None

    def _argument(self, x, t):
        if isinstance(t, TreeType):
            return x
        if not t.shape:
            return host_value(x, t)
        if is_device_array(x):
            if np.dtype(x.dtype) != np.dtype(NUMPY[t.dtype]) or not x.is_c_contiguous():
                raise ArgumentError(f"a device array of dtype {x.dtype} (contiguous: {x.is_c_contiguous()}) "
                                    f"where {t} is expected: pass a C-contiguous device array of dtype "
                                    f"{np.dtype(NUMPY[t.dtype])} (convert it on the device first)")
            return x.reshape(size_of(t.shape))
        flat = clean_bools(np.ascontiguousarray(x, NUMPY[t.dtype])).reshape(-1)
        dev = self.runner.alloc(t)
        if flat.size:
            dev.copy_to_device(flat)
        return dev

    def _result(self, v, t, on_device):
        if not t.shape:   # a Python number; float32 stays np.float32, as the CPU entry's
            value = self.runner.host(v)
            return np.float32(value) if t.dtype == "f32" else value.item()
        if on_device:   # a fresh device array (the arena is reused by the next call)
            out = K.cuda().device_array(size_of(t.shape), dtype=NUMPY[t.dtype])
            if out.shape[0]:
                out.copy_to_device(v)
            return out.reshape(t.shape)
        return v.copy_to_host().reshape(t.shape)


def _with_recursion_limit(fn, *args):
    import sys
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 200_000))
    try:
        return fn(*args)
    finally:
        sys.setrecursionlimit(old)


def compile_cuda(program, out_td, in_types):
    from ..primitives.linalg import check_cpu
    check_cpu(program)
    return CudaCompiled(program, out_td, in_types)
