"""Lowering a traced program to LLVM IR with llvmlite, table-driven.

Each staged function becomes an LLVM function `{outs} f(ptr ctx, args..., captures...)`;
the main graph becomes `void main(ptr ctx, params..., ptr out)`; `TREE` nodes become
recursive functions over node indices. Control flow inside a graph is lowered in line
(branches and phis). `ctx` points to `{i64 stack_limit, i32 status}`: recursive
functions check the stack pointer against the limit on entry and, past it, set the
status and unwind (every call is followed by a status check), so deep recursion never
overflows the machine stack. The same unwinding ends a call whose `check` failed
(status CHECK_FAILED + the message's index) and stops long-running code when Ctrl-C
arrives: loops, loop nests and recursive functions poll now and then (`Lowerer.poll`).
`entry.py` adds the CPython entry points.

This module holds the machinery (types, the `Lowerer` and its helpers, segments and
kernels, the rule lookup `lowering`). A primitive's rule is its declaration's
(jitad/primitives); the heavy kernels those rules call are services of the `Lowerer`
(`service`), written beside their machinery: GEMM, along-axis loop nests and conv2d in
`tensor.py`, sorting in `sort.py`, LAPACK calls in `lapack.py`, MPI calls in `mpi.py`.
The IR's own ops (control flow, slots, tables, what the passes make) have rules
registered under their opcode: `ir_ops.py`, `tensor.py`, `debug.py`.
"""
import hashlib
import math
from dataclasses import replace
import re
from collections import Counter

import llvmlite.ir as ir
import numpy as np

from ..ir.graph import Graph, Node, Var, uses, walk
from ..ir.ops import CALLS, LLVM, Op, clip_index_code, registrar
from .. import primitives  # noqa: F401  (declares the ops lowered below)
from ..primitives.special import backend
from . import arena_plan, vmath
from ..ir.types import FLOATS, ITEMSIZE, ContType, RefType, TableType, TreeType, Type

F64, F32, I64, I32, I1, I8 = (ir.DoubleType(), ir.FloatType(), ir.IntType(64), ir.IntType(32),
                             ir.IntType(1), ir.IntType(8))
PTR = ir.PointerType()
# stack limit, status, arena top, arena end, stop word (nonzero: stop), calls left until a poll
CTX = ir.LiteralStructType([I64, I32, PTR, PTR, PTR, I64])
STACK_EXHAUSTED, ARENA_EXHAUSTED, INTERRUPTED, STOPPED = 1, 2, 3, 4   # statuses (0: running)
CHECK_FAILED = 6   # + k: the program's k-th `check` message (`check_messages`); 5 is no status
# Interrupt polls (a call, ~5 ns when nothing is pending) come every POLL_ELEMENTS elements
# of a loop nest, every POLL_ITERATIONS iterations of a WHILE/FOR with a scalar body (every
# POLL_HEAVY with calls, loops or tensors in it), every POLL_ITERATIONS calls of a function
# that may recurse exponentially (see `_calls`) and of TREE's recursion.
POLL_ELEMENTS, POLL_ITERATIONS, POLL_HEAVY = 1 << 16, 1 << 10, 1 << 4
ELEMENT_BYTES = ITEMSIZE   # bytes of an element, by dtype
LL = {"f64": F64, "f32": F32, "i64": I64, "bool": I1}


def alloca(builder, t):
    """An entry-block stack slot as an opaque pointer (types go on each gep/load/store)."""
    with builder.goto_entry_block():
        slot = builder.alloca(t)
    slot.type = PTR
    return slot


I64_T = Type("i64")
CLOSURE = ir.LiteralStructType([PTR, PTR])   # {code, environment in the creator's frame}


def ll_type(t):
    if isinstance(t, ContType):
        return CLOSURE
    if isinstance(t, (TreeType, RefType, TableType)) or t.shape:
        return PTR
    return LL[t.dtype]


def cont_fnty(cont_type):
    return ir.FunctionType(ret_type([]), [PTR, PTR] + [ll_type(t) for t in cont_type.params])


def ret_type(types):
    return ir.LiteralStructType([ll_type(t) for t in types])


def tensor_outputs(types):
    """Positions of tensor results: a function writes those into buffers its caller
    passes (after the other arguments), so it can release its own arena space."""
    return [k for k, t in enumerate(types) if isinstance(t, Type) and t.shape]


LOWER = LLVM.registered   # op -> fn(lowerer, node, input values) -> list of output values
def collapse(shape, shapes):
    """Merge adjacent loop dimensions that every operand either spans or broadcasts alike
    (a flat loop when nothing broadcasts: contiguous, vectorizes without gathers).
    Returns the merged loop shape and {operand shape: its shape in the merged loop}."""
    n = len(shape)

    def spans(s, d):
        return d >= n - len(s) and s[d - (n - len(s))] != 1
    groups = []
    for d in (d for d in range(n) if shape[d] != 1):
        key = tuple(spans(s, d) for s in shapes)
        if groups and groups[-1][0] == key:
            groups[-1][1].append(d)
        else:
            groups.append((key, [d]))
    if not groups:   # a loop of one element: nothing to merge
        return tuple(shape), {s: tuple(s) for s in shapes}
    merged = tuple(int(np.prod([shape[d] for d in dims], dtype=np.int64)) for _, dims in groups)
    return merged, {s: tuple(merged[k] if key[j] else 1 for k, (key, _) in enumerate(groups)) if s else ()
                    for j, s in enumerate(shapes)}


NO_WRAP = ("nuw", "nsw")   # index arithmetic: in range by construction, lets LLVM see strides
SCALAR_RULES = {}   # op -> the scalar rule of an elementwise op (applied per element)


rule = registrar(LOWER)


def service(name):
    """`@service("gemm")` makes fn(lowerer, ...) the method `Lowerer.gemm`: a kernel the
    declarations' rules call through the lowerer they are given (jitad/primitives imports
    nothing from here), written in the module of this package that holds its machinery."""
    def offer(fn):
        assert not hasattr(Lowerer, name), f"`Lowerer.{name}` exists"
        setattr(Lowerer, name, fn)
        return fn
    return offer


def scalar_rule(*ops):
    """Register a scalar rule; on tensors it runs inside a loop nest over the output
    with NumPy broadcasting of the inputs."""
    def register(fn):
        def lower(lo, node, ins):
            out_t = node.outputs[0].type
            if not out_t.shape and not any(v.type.shape for v in node.inputs):
                return fn(lo, node, ins)
            out = lo.result_buffer(node.outputs[0])

            def body(idx):
                elems = [lo.load_at(x, v.type, idx, out_t.shape) for x, v in zip(ins, node.inputs)]
                lo.store_elem(fn(lo, node, elems)[0], lo.elem_ptr(out, out_t, idx))
            lo.loop_nest(out_t.shape, body)
            return [out]
        for op in ops:
            LOWER[op] = lower
            SCALAR_RULES[op] = fn
        return fn
    return register


def _declared(spec):
    """The scalar rule a declaration gives (jitad/primitives): a function, or the name of a
    libm function (its float32 variant has an "f" suffix; runtime.py binds both)."""
    if not isinstance(spec, str):
        return spec

    def libm(lo, node, ins):
        t = ins[0].type
        return [lo.b.call(lo.extern(spec + ("f" if t == F32 else ""), ir.FunctionType(t, [t] * len(ins))), ins)]
    return libm


def scalar_rule_of(op):
    """The scalar rule of an elementwise op, made from its declaration when first used
    (a primitive declared after import lowers too); None for the other ops."""
    fn = SCALAR_RULES.get(op)
    if fn is None and op.elementwise and op in LLVM.declared:
        fn = scalar_rule(op)(_declared(LLVM.declared[op]))
    return fn


@LLVM.derive
def _elementwise_loop(op):
    """An elementwise op's rule: its scalar rule in a loop nest (`scalar_rule`)."""
    return LLVM.registered[op] if scalar_rule_of(op) is not None else None


def lowering(op):
    """`op`'s LLVM rule fn(lowerer, node, ins) -> [values], from the table `LLVM`: the
    declaration's rule (an elementwise op's is its scalar rule, in a loop nest), else the
    rule registered here under the op (the IR's own ops); MissingRuleError if none."""
    return LLVM.lookup(op)


def _table_entry(lo, table, t, index):
    """Pointer to entry `index` of a table of values of type `t`."""
    size = max(1, int(np.prod(t.shape, dtype=np.int64)))
    return lo.b.gep(table, [lo.b.mul(index, I64(size))], source_etype=LL[t.dtype])


def check_messages(program):
    """The distinct messages of `program`'s `check` nodes, in a fixed order: status
    CHECK_FAILED + k reports the k-th (the runtime makes a handler per message)."""
    graphs = [program.main] + [f.body for f in program.funs]
    return list(dict.fromkeys(n.attrs["message"] for g in graphs for n in walk(g) if n.op == Op.CHECK))


def _calls(graph):
    """The most calls one run of `graph` can make (2 for any in a loop): a function making
    at most one recurses linearly, as deep as the stack lets it, so it needs no polls of
    its own; one making more (fib) may run exponentially long and counts its calls."""
    total = 0
    for n in graph.nodes:
        inner = [_calls(g) for g in n.bodies]
        if n.op in CALLS or n.op in (Op.APPLY, Op.TREE):
            total += 1
        elif n.op == Op.IF:
            total += max(inner)
        elif n.op in (Op.WHILE, Op.FOR):
            total += 2 * sum(inner)
        else:
            total += sum(inner)
    return total


def _slot_homes(main, destinations):
    """Slots of the main graph whose final value is a tensor result: they live in the
    result's array from the start, so the result needs no copy."""
    made = {n.outputs[0]: n for n in main.nodes if n.op == Op.SLOT}
    read = {n.outputs[0]: n.inputs[0] for n in main.nodes if n.op == Op.SLOT_GET}
    homes = {}
    for k, dest in destinations.items():
        slot = read.get(main.outputs[k])
        if slot in made and slot not in homes:
            homes[slot] = dest
    return homes


SEGMENT_NODES = 128   # a main graph of more nodes (sub-graphs counted) is lowered in spans of about this many
OUTLINE_PRODUCTS = 2   # a main graph with this many matrix products (sub-graphs counted) calls them as kernels
SEGMENT_PRODUCTS = 16   # or of this many matrix products (each inline is a loop nest LLVM unrolls: an
                        # unrolled 10-step cell's main took seconds at O2; outlined, they share kernels)


def _segments(graph, size=None):
    """[(start, stop)] spans of `graph`'s nodes, each of about `size` nodes (sub-graphs'
    nodes counted), cut only where no closure (its environment lives in the frame of the
    function that made it) is live: one span for a graph under twice that size with fewer
    than SEGMENT_PRODUCTS matrix products."""
    size = size or SEGMENT_NODES
    weights = [1 if _kernel_call(n) else 1 + sum(1 for body in n.bodies for _ in walk(body)) for n in graph.nodes]
    products = sum(n.op in (Op.MATMUL, Op.MATMUL_ADD) for n in graph.nodes)
    if sum(weights) < 2 * size and products < SEGMENT_PRODUCTS:
        return [(0, len(graph.nodes))]
    last = {v: k for k, n in enumerate(graph.nodes) for v in n.inputs}
    pinned_until, spans, start, total = -1, [], 0, 0
    for k, n in enumerate(graph.nodes):
        for v in n.outputs:
            if isinstance(v.type, ContType) or (isinstance(v.type, RefType) and not v.type.shape
                                                  and n.op != Op.SLOT):
                pinned_until = max(pinned_until, last.get(v, k))
        total += weights[k]
        if total >= size and pinned_until <= k and k + 1 < len(graph.nodes):
            spans.append((start, k + 1))
            start, total = k + 1, 0
    spans.append((start, len(graph.nodes)))
    return spans


def _glue(nodes):
    """Is a span of a long main graph (matrix products outlined) straight code that calls
    kernels and moves pointers, where LLVM's pass pipeline has nothing to gain? No loops,
    no branches, and at most one node in 8 computing on scalars in line."""
    inline = 0
    for n in nodes:
        if _kernel_call(n):
            continue
        if n.bodies:
            return False
        inline += scalar_rule_of(n.op) is not None
    return inline * 8 <= len(nodes)


def _kernel_call(node):
    """Is `node` a kernel call in a long main graph (`Lowerer.lower_segments`)?"""
    return _outlined(node) or node.op in (Op.MATMUL, Op.MATMUL_ADD)


def _table_stores(graph):
    """value -> the `table_set` or `slot_set` that stores it, for tensor values made in
    `graph` whose producer can write them into the table entry or the slot's buffer
    directly (no copy). A table: written by this one `table_set` of the graph and nothing
    else uses it there (no reads, no captures into sub-graphs), the value stored once. A
    slot: see `_slot_stores`."""
    made = {v for n in graph.nodes for v in n.outputs}
    sets = [n for n in graph.nodes if n.op == Op.TABLE_SET]
    used = Counter(v for n in graph.nodes for v in n.inputs)
    stored = Counter(n.inputs[2] for n in sets)
    tables = {n.inputs[2]: n for n in sets if n.inputs[2] in made and n.inputs[2].type.shape
              and stored[n.inputs[2]] == 1 and used[n.inputs[0]] == 1}
    return {**_slot_stores(graph, used), **tables}


def _store_place(store):
    """The operands that say where a `table_set` or `slot_set` writes."""
    return store.inputs[:1] if store.op == Op.SLOT_SET else store.inputs[:2]


def _slot_stores(graph, used):
    """value -> the `slot_set` of a tensor slot made in `graph` that stores it: the value
    is read by that `slot_set` alone (through reshapes, which share its buffer, each read
    once), and no node from its producer up to the `slot_set` touches the slot or a value
    that may share its buffer (a `slot_get` of it, anything made from one). Its producer
    then writes the slot itself: the slot's old content is dead from there."""
    index = {v: i for i, n in enumerate(graph.nodes) for v in n.outputs}
    slots = {n.outputs[0] for n in graph.nodes if n.op == Op.SLOT and n.attrs["type"].shape}
    readers = uses(graph.nodes)
    out = {}
    for j, n in enumerate(graph.nodes):
        if n.op != Op.SLOT_SET or n.inputs[0] not in slots or not n.inputs[1].type.shape:
            continue
        v = n.inputs[1]
        while v in index and used[v] == 1 and graph.nodes[index[v]].op == Op.RESHAPE:
            v = graph.nodes[index[v]].inputs[0]
        if v not in index or used[v] != 1 or graph.nodes[index[v]].op.view:
            continue
        if _untouched(n.inputs[0], index[v], j, graph.nodes, readers):
            out[v] = n
    return out


def _untouched(slot, start, end, nodes, readers):
    """Whether no node at a position in [start, end) reads `slot` or a value made (before
    `start`) from one that does: the closure over the readers (`uses` of `nodes`), not a
    walk over every node before `end` per store (which made lowering quadratic)."""
    aliases, todo = {slot}, [slot]
    while todo:
        for k in readers.get(todo.pop(), ()):
            if k >= end:
                break   # (positions ascend)
            if k >= start:
                return False
            for x in nodes[k].outputs:
                if x not in aliases:
                    aliases.add(x)
                    todo.append(x)
    return True


def _outlined(node):
    """Loop nests over tensors become kernel calls (see `Lowerer.call_kernel`)."""
    if scalar_rule_of(node.op) is not None:
        return bool(node.outputs[0].type.shape)
    if node.op in (Op.SLOT_ADD, Op.SLOT_ADD_AT, Op.SLOT_SCATTER_ADD, Op.SLOT_SET_AT, Op.SLOT_ADD_SLICE):
        return bool(node.inputs[-1].type.shape)
    return node.op.kernel


def _kernel_key(node):
    from ..ir.printer import format_graph
    bodies = tuple(format_graph(b, exact=True) for b in node.bodies)   # (a fused loop's body inside one too)
    attrs = tuple(sorted((k, repr(v)) for k, v in node.attrs.items()))
    return node.op, attrs, tuple(v.type for v in node.inputs), tuple(v.type for v in node.outputs), bodies


class _Index:
    """An i64 LLVM value with the operators `clip_index_code` uses."""

    def __init__(self, b, v):
        self.b, self.v = b, v

    def _of(self, x):
        return x.v if isinstance(x, _Index) else I64(x)

    __add__ = lambda self, x: _Index(self.b, self.b.add(self.v, self._of(x)))
    __lt__ = lambda self, x: _Index(self.b, self.b.icmp_signed("<", self.v, self._of(x)))
    __gt__ = lambda self, x: _Index(self.b, self.b.icmp_signed(">", self.v, self._of(x)))


_clip_index = backend(clip_index_code, where=lambda c, a, x: _Index(c.b, c.b.select(c.v, c._of(a), c._of(x))))


class Lowerer:
    """Emits the LLVM functions of one program into `module`."""

    def __init__(self, module, program, prefix):
        self.module, self.program, self.prefix = module, program, prefix
        self.functions = {}
        self.external_constants = {}   # symbol -> array, registered by the runtime
        self.kernels = {}   # kernel key -> LLVM function
        self.in_place = set()   # scatter nodes that update their operand's buffer (`lower_loop_body`)
        self.outlining = True
        self.slot_homes = {}
        self.loop_homes = {}   # tensor slot of a loop body -> the loop's spare buffer (`lower_loop_body`)
        self.entry_states = set()   # ids of new loop states that are table entries (`_loop`)
        self.main_func = None
        self.frame_slots = {}   # scalar slot -> its home in main's frame (`lower_segments`)
        self.outline_products = False   # matrix products as kernel calls too (`lower_segments`)
        self.never_fail = set()   # functions that never unwind (no status to check after a call)
        self.dests = {}   # var -> the buffer its producer must write it into
        self.placed = {}  # table_set node -> the entry its value was made in (no copy)
        self.results = ([], [], [])   # the current function's tensor results: positions, buffers, types
        self.n_trees = self.n_codes = 0
        self.allocs = 0   # arena allocations emitted so far (a loop whose body made any releases them)
        self.plans = []   # the arena plans of the bodies being lowered, innermost last (`arena_plan.body`)
        self.check_status = {m: CHECK_FAILED + k for k, m in enumerate(check_messages(program))}
        for k, fun in enumerate(program.funs):
            fnty = ir.FunctionType(ret_type(fun.out_types), [PTR] + [ll_type(t) for t in fun.body.in_types]
                                   + [PTR] * len(tensor_outputs(fun.out_types)))
            self.functions[fun] = self.internal_function(fnty, f"fun{k}_" + re.sub(r"\W", "_", fun.name))
        for fun in program.funs:
            self.define(self.functions[fun], fun.body, recursive=True, out_types=fun.out_types,
                        ticks=_calls(fun.body) > 1)
        self._define_main(program.main)

    def _define_main(self, main):
        """main(ctx, params..., out, destinations...): tensor results are written into
        `destinations` (the result arrays the entry made); a slot read as a result lives there."""
        tensor_outs = tensor_outputs(main.out_types)
        fnty = ir.FunctionType(ir.VoidType(), [PTR] + [ll_type(t) for t in main.in_types] + [PTR]
                               + [PTR] * len(tensor_outs))
        self.main = self.main_func = self.internal_function(fnty, "main")
        self._begin(self.main)
        n_in = len(main.in_types)
        destinations = dict(zip(tensor_outs, self.main.args[2 + n_in:]))
        self.slot_homes = _slot_homes(main, destinations)
        self.dests = {}
        for k, dest in destinations.items():
            self.dests.setdefault(main.outputs[k], dest)
        main = replace(main, nodes=arena_plan.sink_slots(self, main.nodes, _table_stores(main)))
        spans = _segments(main)
        args = list(self.main.args[1:1 + n_in])
        if len(spans) < 2:
            # products as shared kernels: LLVM's time on main grows faster than its inline tiles
            self.outline_products = sum(n.op in (Op.MATMUL, Op.MATMUL_ADD) for n in walk(main)) >= OUTLINE_PRODUCTS
            outs = self.lower(main, args)
            self.outline_products = False
        else:
            with arena_plan.body(self, main.nodes, main.outputs):
                outs = self.lower_segments(main, args, spans)
        self.dests = {}
        out_ptr = self.main.args[1 + n_in]
        rt = ret_type(main.out_types)
        for k, v in enumerate(outs):
            if k in destinations:   # copy a result that is not already in its array
                dest = destinations[k]
                with self.b.if_then(self.b.icmp_unsigned("!=", v, dest)):
                    self.copy(dest, v, main.out_types[k])
                v = dest
            self.b.store(v, self.b.gep(out_ptr, [I32(0), I32(k)], source_etype=rt))
        self.b.ret_void()

    def _begin(self, func, release=False):
        self.func = func
        self.ctx = func.args[0]
        self.bail = None
        self.b = ir.IRBuilder(func.append_basic_block("entry"))
        self.arena_mark = self.mark() if release else None

    def define(self, func, graph, recursive, prologue=None, out_types=(), ticks=False):
        """Emit `func` running `graph`; a `recursive` one checks its stack on entry, and
        with `ticks` counts its calls for the interrupt polls."""
        saved = (self.func, self.ctx, self.bail, self.b, self.arena_mark, self.results) \
            if hasattr(self, "b") else None
        # results go to the caller's buffers, so a function releases all it allocated
        self._begin(func, release=True)
        n_sret = len(tensor_outputs(out_types))
        self.results = (tensor_outputs(out_types), list(func.args[len(func.args) - n_sret:]) if n_sret else [],
                        list(out_types))
        if recursive:
            self.stack_check()
        if ticks:
            self.tick()
        args = list(func.args[1:len(func.args) - n_sret])
        if prologue:
            args = prologue(args)
        if args is not None:
            outs = self.lower(graph, args)
            self.ret(outs)
        if self.bail is None:   # it never sets a status: its callers need not look
            self.never_fail.add(func)
        if saved:
            self.func, self.ctx, self.bail, self.b, self.arena_mark, self.results = saved

    def ret(self, outs):
        outs = list(outs)
        positions, buffers, types = self.results
        for k, buf in zip(positions, buffers):
            with self.b.if_then(self.b.icmp_unsigned("!=", outs[k], buf)):   # not written in place
                self.copy(buf, outs[k], types[k])
            outs[k] = buf
        if self.arena_mark is not None:
            self.release(self.arena_mark)
        rt = self.func.function_type.return_type
        agg = ir.Constant(rt, None)
        for k, v in enumerate(outs):
            agg = self.b.insert_value(agg, v, k)
        self.b.ret(agg)

    def lower(self, graph, args):
        env, stores = dict(zip(graph.params, args)), _table_stores(graph)
        nodes = arena_plan.sink_slots(self, graph.nodes, stores)
        with arena_plan.body(self, nodes, graph.outputs):
            self.lower_nodes(nodes, env, stores)
        return [env[v] for v in graph.outputs]

    def lower_nodes(self, nodes, env, stores):
        """Lower `nodes` in order, adding their results to `env` (var -> LLVM value);
        buffers of a body's arena plan when `nodes` are (a span of) its nodes."""
        plan = self.plans[-1] if self.plans else None
        plan = plan if plan is not None and plan.covers(nodes) else None
        if plan is not None:
            plan.enter(env)
        for node in nodes:
            placed = []   # a value stored in a table is made in its entry
            for v in node.outputs:
                store = stores.get(v)
                if store is not None and v not in self.dests and all(x in env for x in _store_place(store)):
                    entry = env[store.inputs[0]] if store.op == Op.SLOT_SET else \
                        _table_entry(self, env[store.inputs[0]], v.type, env[store.inputs[1]])
                    self.dests[v] = self.placed[store] = entry
                    placed.append(v)
            ins = [env[v] for v in node.inputs]
            if plan is not None:
                plan.before(node)
            if self.outlining and (_kernel_call(node) if self.outline_products else _outlined(node)):
                outs = self.call_kernel(node, ins)
            else:
                outs = lowering(node.op)(self, node, ins)
            if plan is not None:
                plan.after(node, outs)
            for v in placed:
                del self.dests[v]
            env.update(zip(node.outputs, outs))

    def lower_segments(self, graph, args, spans):
        """Lower the main graph as one function per span of its nodes (`_segments`), called
        in order by main: LLVM's time on one function grows faster than its size (its loop
        and value-numbering passes rescan the whole function), so a long unrolled program
        compiles in time linear in its length as many bounded functions, which the
        compile threads also share. Values live across spans pass through an array of
        words in main's frame (`env`); a scalar slot lives in a word of it."""
        nodes, b = graph.nodes, self.b
        frame = {n.outputs[0] for n in nodes if n.op == Op.SLOT and not n.attrs["type"].shape}
        outer = dict(zip(graph.params, args))
        homes = {**{("dest", v): d for v, d in self.dests.items()},
                 **{("home", v): d for v, d in self.slot_homes.items()}}
        plan = self.plans[-1] if self.plans and self.plans[-1] is not None and self.plans[-1].covers(nodes) else None
        if plan is not None:   # the plan's block, taken in main
            homes[("arena", None)] = plan.base
        stores = _table_stores(graph)
        defined = {v: k for k, (lo_, hi) in enumerate(spans) for n in nodes[lo_:hi] for v in n.outputs}
        needs, gives = [], []
        for k, (lo_, hi) in enumerate(spans):
            made = {v for n in nodes[lo_:hi] for v in n.outputs}
            wanted = [v for n in nodes[lo_:hi] for v in n.inputs if v not in made]
            wanted += [x for n in nodes[lo_:hi] for v in n.outputs if v in stores
                       for x in _store_place(stores[v]) if defined.get(x, -1) < k and x not in made]
            wanted += [v for n in nodes[lo_:hi] if n.op == Op.SLOT for v in n.outputs if v in frame]
            wanted += [key for key in homes if key[1] in made or key[0] == "arena"]
            needs.append(list(dict.fromkeys(wanted)))
        used_later = set(graph.outputs)
        for k in range(len(spans) - 1, -1, -1):
            gives.append([v for v in dict.fromkeys(v for n in nodes[spans[k][0]:spans[k][1]] for v in n.outputs)
                          if v in used_later and v not in frame])
            used_later.update(v for v in needs[k] if not isinstance(v, tuple))
        gives.reverse()
        fields = list(dict.fromkeys([key for need in needs for key in need] + [v for g in gives for v in g]))
        index = {key: i for i, key in enumerate(fields)}
        kind = lambda key: PTR if isinstance(key, tuple) else ll_type(key.type)
        env = alloca(b, ir.ArrayType(I64, max(1, len(fields))))   # a word per value (none is wider)
        field = lambda bld, ptr, key: bld.gep(ptr, [I64(8 * index[key])], source_etype=I8)
        for key in fields:
            value = homes.get(key) if isinstance(key, tuple) else outer.get(key)
            if value is not None:
                b.store(value, field(b, env, key))
        saved = (self.func, self.ctx, self.bail, self.b, self.arena_mark, self.main_func)
        self.outline_products = True   # the unrolled copies of a product share one kernel
        fnty = ir.FunctionType(ret_type([]), [PTR, PTR])
        for k, (lo_, hi) in enumerate(spans):
            fn = self.internal_function(fnty, f"{'glue' if _glue(nodes[lo_:hi]) else 'segment'}{k}")
            fn.attributes.add("noinline")
            self._begin(fn)
            self.main_func, sb, sp = fn, self.b, fn.args[1]
            local = {key: field(sb, sp, key) if key in frame else sb.load(field(sb, sp, key), typ=kind(key))
                     for key in needs[k]}
            self.dests = {key[1]: value for key, value in local.items() if isinstance(key, tuple) and key[0] == "dest"}
            self.slot_homes = {key[1]: value for key, value in local.items() if isinstance(key, tuple) and key[0] == "home"}
            self.frame_slots = {v: value for v, value in local.items() if v in frame}
            if plan is not None:
                plan.base = local[("arena", None)]
            values = {v: value for v, value in local.items() if not isinstance(v, tuple)}
            self.lower_nodes(nodes[lo_:hi], values, stores)
            for v in gives[k]:
                self.b.store(values[v], field(self.b, sp, v))
            self.b.ret(ir.Constant(ret_type([]), None))
            self.func, self.ctx, self.bail, self.b, self.arena_mark, self.main_func = saved
            self.call_checked(fn, [env], 0)
        self.frame_slots, self.slot_homes, self.outline_products = {}, {}, False
        return [outer[v] if v in outer else b.load(field(b, env, v), typ=kind(v)) for v in graph.outputs]

    def call_kernel(self, node, ins):
        """Lower a loop-nest op as a call to a kernel function, one per distinct op, attributes
        and types: repeated layers share code, and LLVM optimizes small functions."""
        if self.outline_products and node.op in (Op.SLICE, Op.SLOT_ADD_SLICE) and any(node.attrs["starts"]):
            node, ins = self.slice_at_zero(node, ins)
        key = _kernel_key(node)
        fn = self.kernels.get(key)
        out_types = [v.type for v in node.outputs]
        if fn is None:
            params = [Var(v.type) for v in node.inputs]
            outs = [Var(t) for t in out_types]
            body = Graph(params=params, nodes=[Node(node.op, tuple(params), tuple(outs), node.attrs, node.bodies)],
                         outputs=outs)
            fnty = ir.FunctionType(ret_type(out_types), [PTR] + [ll_type(v.type) for v in node.inputs]
                                   + [PTR] * len(tensor_outputs(out_types)))
            fn = self.internal_function(fnty, f"kernel{len(self.kernels)}_{node.op.name}")
            fn.attributes.add("noinline")
            self.kernels[key] = fn
            self.outlining = False
            saved_dests = self.dests
            n_sret = len(tensor_outputs(out_types))
            self.dests = dict(zip([outs[k] for k in tensor_outputs(out_types)], fn.args[len(fn.args) - n_sret:]))
            try:
                self.define(fn, body, recursive=False, out_types=out_types)
            finally:
                self.outlining = True
                self.dests = saved_dests
        return self.call_checked(fn, ins, len(out_types), out_types, node.outputs)

    def slice_at_zero(self, node, ins):
        """A slice's (or a slot region's) start moved into its operand's pointer: the
        slices of an unrolled `xs[t]` then share one kernel (the address of element i is
        linear in the starts)."""
        t = node.inputs[0].type
        shape, a = (t.value_type if isinstance(t, RefType) else t).shape, node.attrs
        offset, stride = 0, 1
        for d in reversed(range(len(shape))):
            if shape[d] != 1:   # (`offset` reads no start on a dimension of size 1)
                offset += a["starts"][d] * stride
            stride *= shape[d]
        ptr = self.b.gep(ins[0], [I64(offset)], source_etype=LL[t.dtype])
        attrs = dict(a, starts=(0,) * len(shape), stops=tuple(b - s for s, b in zip(a["starts"], a["stops"])))
        return replace(node, attrs=attrs), [ptr] + list(ins[1:])

    def internal_function(self, fnty, name):
        """A function of this program's module, named `name` after its symbol prefix."""
        fn = ir.Function(self.module, fnty, name=self.prefix + name)
        fn.linkage = "internal"
        return fn

    def phis(self, types, incoming):
        out = []
        for k, t in enumerate(types):
            phi = self.b.phi(ll_type(t))
            for vals, block in incoming:
                phi.add_incoming(vals[k], block)
            out.append(phi)
        return out

    def extern(self, name, fnty=None):
        """The external function `name` of type `fnty` (None: a data symbol, as an i8)."""
        if name in self.module.globals:
            return self.module.globals[name]
        if fnty is not None:
            return ir.Function(self.module, fnty, name=name)
        g = ir.GlobalVariable(self.module, I8, name=name)
        g.linkage = "external"
        return g

    def math(self, name, x):
        """exp or tanh of a float or double in IR, in its own type (vectorizable; jitad/lower/vmath.py)."""
        return getattr(vmath, name)(self.b, self.module, x)

    def widen(self, x):
        return self.b.fpext(x, F64) if x.type == F32 else x

    def narrow(self, x, t):
        return self.b.fptrunc(x, F32) if t == F32 else x

    # -- tensors: arena buffers and loop nests ---------------------------------
    def ctx_field(self, k):
        return self.b.gep(self.ctx, [I32(0), I32(k)], source_etype=CTX)

    def alloc(self, t):
        """A buffer for a value of tensor type `t` from the arena (bump allocation)."""
        return self.alloc_bytes(I64(max(1, math.prod(t.shape)) * ELEMENT_BYTES[t.dtype]))   # < 2^63: staging

    def alloc_bytes(self, nbytes):
        """`nbytes` (an i64 value read as unsigned, rounded up to 64) from the arena."""
        self.allocs += 1   # (a loop around releases them)
        if self.outline_products:   # a long program: a call, ~20 fewer lines per buffer for LLVM
            top = self.b.call(self.alloc_function(), [self.ctx, nbytes])
            self.bail_if(self.b.icmp_unsigned("==", top, ir.Constant(PTR, None)))
            return top
        b = self.b
        top = b.load(self.ctx_field(2), typ=PTR)
        end = b.load(self.ctx_field(3), typ=PTR)
        room = b.sub(b.ptrtoint(end, I64), b.ptrtoint(top, I64))   # a multiple of 64, as every allocation
        with b.if_then(b.icmp_unsigned(">", nbytes, room), likely=False):   # (top + nbytes could wrap)
            b.store(I32(ARENA_EXHAUSTED), self.status_ptr())
            b.branch(self.bail_block())
        new = b.gep(top, [b.and_(b.add(nbytes, I64(63)), I64(-64))], source_etype=I8)
        b.store(new, self.ctx_field(2))
        peak_ptr = end   # the word at the arena's end is the thread's high-water mark
        peak, here = b.load(peak_ptr, typ=I64), b.ptrtoint(new, I64)
        b.store(b.select(b.icmp_unsigned(">", here, peak), here, peak), peak_ptr)
        return top

    def alloc_function(self):
        """`ptr alloc(ctx, i64 nbytes)`: `alloc_bytes` as a function (null, with the status
        set, when the arena is exhausted)."""
        fn = self.module.globals.get(f"{self.prefix}alloc")
        if fn is None:
            fn = self.internal_function(ir.FunctionType(PTR, [PTR, I64]), "alloc")
            fn.attributes.add("noinline")
            saved = (self.func, self.ctx, self.bail, self.b, self.arena_mark, self.outline_products)
            self._begin(fn)
            self.outline_products = False
            self.b.ret(self.alloc_bytes(fn.args[1]))   # (its bail block returns null)
            self.func, self.ctx, self.bail, self.b, self.arena_mark, self.outline_products = saved
        return fn

    def tree_load(self, ptr, typ):
        """A load from a tree (read-only while compiled code runs: LLVM may hoist it)."""
        value = self.b.load(ptr, typ=typ)
        value.set_metadata("invariant.load", self.module.add_metadata([]))
        return value

    def result_buffer(self, var):
        """Where a node writes its tensor result: a destination the caller gave for it (a
        result array, a kernel's result buffer), else arena space (`fresh_buffer`)."""
        dest = self.dests.get(var)
        return dest if dest is not None else self.fresh_buffer(var)

    def fresh_buffer(self, var, t=None):
        """Arena space for the node result `var` (of tensor type `t`, its own by default):
        a dead tensor's range in its body's arena plan, else bump-allocated."""
        t = t or var.type
        plan = self.plans[-1] if self.plans else None
        buf = plan.buffer(var, t) if plan is not None else None
        return buf if buf is not None else self.alloc(t)

    def mark(self):
        return self.b.load(self.ctx_field(2), typ=PTR)

    def release(self, mark):
        self.b.store(mark, self.ctx_field(2))

    def counted_loop(self, n, body, rolled=False):
        """`for i in range(n): body(i)` with `n` an i64 value. `rolled` keeps LLVM from
        unrolling it fully: the inner loop of a nest then vectorizes along contiguous
        memory instead of the outer one with gathers. A loop of a known, long length runs
        in chunks of POLL_ELEMENTS iterations with an interrupt poll before each."""
        if not (isinstance(n, ir.Constant) and n.constant >= 2 * POLL_ELEMENTS):
            self._counted_loop(n, body, rolled)
            return
        b = self.b

        def chunk(c):
            self.poll()
            start = b.mul(c, I64(POLL_ELEMENTS), flags=NO_WRAP)
            left = b.sub(n, start, flags=NO_WRAP)
            size = b.select(b.icmp_signed("<", left, I64(POLL_ELEMENTS)), left, I64(POLL_ELEMENTS))
            self._counted_loop(size, lambda i: body(b.add(start, i, flags=NO_WRAP)), rolled)
        self._counted_loop(I64(-(-n.constant // POLL_ELEMENTS)), chunk, rolled=True)

    def _counted_loop(self, n, body, rolled):
        b = self.b
        pre = b.block
        head, inner, after = (self.func.append_basic_block(x) for x in ("count", "countbody", "countend"))
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I64)
        i.add_incoming(I64(0), pre)
        b.cbranch(b.icmp_signed("<", i, n), inner, after)
        b.position_at_end(inner)
        body(i)
        i.add_incoming(b.add(i, I64(1), flags=NO_WRAP), b.block)
        back = b.branch(head)
        if rolled:
            back.set_metadata("llvm.loop", self.loop_id("llvm.loop.unroll.disable"))
        b.position_at_end(after)

    def loop_id(self, *hints):
        """A distinct loop-ID metadata node (self-referential, as LLVM wants) with `hints`."""
        module = self.func.module
        tags = [module.add_metadata([ir.MetaDataString(module, h)]) for h in hints]
        self.loop_ids = getattr(self, "loop_ids", 0) + 1
        node = module.add_metadata(tags + [ir.MetaDataString(module, f"jitad.loop.{self.loop_ids}")])
        node.operands = (node,) + tuple(tags)
        return node

    def loop_nest(self, shape, body, idx=(), work=1):
        """Emit `for i0 in range(shape[0]): for i1 ...: body([i0, i1, ...])`. `work`: the
        cost of one body in elements; a level whose iterations each do 256 or more polls
        for interrupts about every POLL_ELEMENTS (the innermost level, when cheap, in
        `counted_loop`'s chunks)."""
        d = len(idx)
        if d == len(shape):
            body(list(idx))
            return
        inner_of_nest = len(shape) > 1 and d == len(shape) - 1 and shape[-1] >= 8
        each = math.prod(shape[d + 1:]) * work   # elements of work per iteration of this level
        period = 1 << (-(-POLL_ELEMENTS // each) - 1).bit_length() \
            if each >= 256 and shape[d] * each >= POLL_ELEMENTS else None

        def level(i):
            if period:
                self.poll_every(i, period)
            self.loop_nest(shape, body, idx + (i,), work)
        self.counted_loop(I64(shape[d]), level, rolled=inner_of_nest)

    def offset(self, shape, idx, steps=None, starts=None):
        """Row-major element offset of `idx` in `shape` (broadcast dims of size 1 give 0)."""
        off = I64(0)
        stride = 1
        for d in reversed(range(len(shape))):
            if shape[d] != 1:
                i = idx[d]
                if steps is not None:
                    i = self.b.add(self.b.mul(i, I64(steps[d]), flags=NO_WRAP), I64(starts[d]), flags=NO_WRAP)
                off = self.b.add(off, self.b.mul(i, I64(stride), flags=NO_WRAP), flags=NO_WRAP)
            stride *= shape[d]
        return off

    def elem_ptr(self, buf, t, idx, **kw):
        return self.b.gep(buf, [self.offset(t.shape, idx, **kw)], source_etype=LL[t.dtype])

    @staticmethod
    def ll(dtype):
        """The LLVM type of an element of `dtype` ("f64" -> double; `lo.ll("i64")(3)` a constant)."""
        return LL[dtype]

    def row(self, x, x_t, i):
        """Pointer to row `i` of tensor `x` of type `x_t`, `i` read as `clip_index` reads it:
        a negative `i` counts from the end, then clamps into range."""
        b = self.b
        i = _clip_index(_Index(b, i), x_t.shape[0]).v
        row_size = int(np.prod(x_t.shape[1:], dtype=np.int64))
        return b.gep(x, [b.mul(i, I64(row_size))], source_etype=LL[x_t.dtype])

    def load_at(self, x, t, idx, out_shape):
        """Element `idx` of the output of a broadcast: `x` is a scalar or a tensor of type `t`."""
        if not t.shape:
            return x
        lead = len(out_shape) - len(t.shape)
        ptr = self.elem_ptr(x, t, idx[lead:])
        if t.dtype == "bool":   # a byte 0/1: loads of bytes vectorize, loads of i1 do not
            return self.b.icmp_unsigned("!=", self.b.load(ptr, typ=I8), I8(0))
        return self.b.load(ptr, typ=LL[t.dtype])

    def store_elem(self, value, ptr):
        """Store an element; a bool as the byte 0/1 (so stores of bools vectorize)."""
        self.b.store(self.b.zext(value, I8) if value.type == I1 else value, ptr)

    def fill(self, buf, t, value):
        if isinstance(value, ir.Constant) and value.constant in (0, 0.0, False):   # all-zero bits
            nbytes = int(np.prod(t.shape, dtype=np.int64)) * ELEMENT_BYTES[t.dtype]
            memset = self.extern("llvm.memset.p0.i64", ir.FunctionType(ir.VoidType(), [PTR, I8, I64, I1]))
            self.b.call(memset, [buf, I8(0), I64(nbytes), I1(0)])
            return
        self.loop_nest(t.shape, lambda idx: self.b.store(value, self.elem_ptr(buf, t, idx)))

    def copy(self, dst, src, t):
        nbytes = int(np.prod(t.shape, dtype=np.int64)) * ELEMENT_BYTES[t.dtype]
        memmove = self.extern("llvm.memmove.p0.p0.i64", ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I1]))
        self.b.call(memmove, [dst, src, I64(nbytes), I1(0)])

    def constant_array(self, value):
        """A pointer to constant data: in the module when small, else a named external
        symbol the runtime points at the array (registered in every process)."""
        name, data = constant_symbol(value)
        if name in self.module.globals:
            return self.module.globals[name]
        raw = bytearray(data.astype(np.uint8) if data.dtype == np.bool_ else data.tobytes())
        if len(raw) <= 1 << 14:
            g = ir.GlobalVariable(self.module, ir.ArrayType(I8, max(len(raw), 1)), name=name)
            g.initializer = ir.Constant(ir.ArrayType(I8, max(len(raw), 1)), raw or bytearray(1))
            g.global_constant = True
            g.linkage = "internal"
            g.align = 64
        else:
            g = ir.GlobalVariable(self.module, I8, name=name)
            g.linkage = "external"
            self.external_constants[name] = data
        return g

    # -- stack discipline: check on entry, unwind on failure ------------------
    def status_ptr(self):
        return self.b.gep(self.ctx, [I32(0), I32(1)], source_etype=CTX)

    def status_field(self):
        """`status_ptr()` computed once, in the function's entry block."""
        if getattr(self, "status_func", None) is not self.func:
            with self.b.goto_entry_block():
                self.status_func, self.status_at = self.func, self.status_ptr()
        return self.status_at

    def bail_if(self, cond):
        """Unwind (the status is set) when the i1 `cond` holds."""
        cont = self.func.append_basic_block("ok")
        if getattr(self, "unlikely", None) is None:   # (made once: llvmlite's set_weights is slow)
            self.unlikely = self.module.add_metadata([ir.MetaDataString(self.module, "branch_weights"),
                                                      I32(1), I32(1 << 20)])
        self.b.cbranch(cond, self.bail_block(), cont).set_metadata("prof", self.unlikely)
        self.b.position_at_end(cont)

    def bail_block(self):
        if self.bail is None:
            here = self.b.block
            self.bail = self.func.append_basic_block("bail")
            self.b.position_at_end(self.bail)
            rt = self.func.function_type.return_type
            self.b.ret_void() if isinstance(rt, ir.VoidType) else self.b.ret(ir.Constant(rt, None))
            self.b.position_at_end(here)
        return self.bail

    def poll(self):
        """Stop here (status set, unwinding) if Ctrl-C arrived or the caller asked to stop."""
        stop = self.b.call(self.poll_function(), [self.ctx])
        cont = self.func.append_basic_block("polled")
        self.b.cbranch(stop, self.bail_block(), cont).set_weights([1, 1 << 20])
        self.b.position_at_end(cont)

    def poll_every(self, count, period, below=None):
        """Poll when the i64 `count` reaches period - 1 modulo `period` (a power of two),
        or, given `below`, when `count` is below it."""
        if period == 1:
            self.poll()
            return
        due = self.b.icmp_unsigned("<", count, I64(below)) if below is not None else \
            self.b.icmp_unsigned("==", self.b.and_(count, I64(period - 1)), I64(period - 1))
        with self.b.if_then(due, likely=False):
            self.poll()

    def tick(self):
        """Count down a call of a recursive function; poll at zero (every POLL_ITERATIONS
        calls: the poll starts the count again)."""
        left = self.b.sub(self.b.load(self.ctx_field(5), typ=I64), I64(1))
        self.b.store(left, self.ctx_field(5))
        with self.b.if_then(self.b.icmp_signed("<=", left, I64(0)), likely=False):
            self.poll()

    def poll_function(self):
        """`i1 poll(ctx)`: true, with the status set, when the word ctx's stop field points
        to is nonzero (the deep-stack thread's caller got Ctrl-C: STOPPED) or SIGINT
        arrived (INTERRUPTED; `jitad_poll_signals`, in `runtime`, asks Python, which consumes
        the signal's flag, the entry's handler setting it again, or counts SIGINTs while the
        call runs without the GIL). It runs no Python code: the
        handlers run once the call has unwound (see `runtime.python_function`)."""
        if f"{self.prefix}poll" in self.module.globals:
            return self.module.globals[f"{self.prefix}poll"]
        fn = self.internal_function(ir.FunctionType(I1, [PTR]), "poll")
        for attribute in ("noinline", "cold", "nounwind"):
            fn.attributes.add(attribute)
        set.add(fn.attributes, "willreturn")   # (unknown to llvmlite) lets LLVM hoist loads out of loops past it
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        field = lambda k: b.gep(fn.args[0], [I32(0), I32(k)], source_etype=CTX)
        b.store(I64(POLL_ITERATIONS), field(5))
        for status, stop in ((STOPPED, lambda: b.icmp_unsigned("!=", b.load_atomic(
                                 b.load(field(4), typ=PTR), "monotonic", 8, typ=I64), I64(0))),
                             (INTERRUPTED, lambda: b.icmp_signed("!=", b.call(self.extern(
                                 "jitad_poll_signals", ir.FunctionType(I32, [])), []), I32(0)))):
            with b.if_then(stop(), likely=False):
                b.store(I32(status), field(1))
                b.ret(I1(1))
        b.ret(I1(0))
        return fn

    def stack_check(self):
        frameaddress = self.extern("llvm.frameaddress.p0", ir.FunctionType(PTR, [I32]))
        sp = self.b.ptrtoint(self.b.call(frameaddress, [I32(0)]), I64)
        limit = self.b.load(self.b.gep(self.ctx, [I32(0), I32(0)], source_etype=CTX), typ=I64)
        overflow = self.b.icmp_unsigned("<", sp, limit)
        with self.b.if_then(overflow, likely=False):
            self.b.store(I32(STACK_EXHAUSTED), self.status_ptr())
            self.b.branch(self.bail_block())
        # a deep recursion polls whenever its frame lies in the first 4 KiB of a MiB of
        # stack: at least once per MiB it descends (frames are smaller than 4 KiB)
        self.poll_every(self.b.and_(sp, I64((1 << 20) - 1)), None, below=4096)

    def call_checked(self, fn, args, n_out, out_types=(), out_vars=None):
        buffers = [self.result_buffer(out_vars[k]) if out_vars is not None else self.alloc(out_types[k])
                   for k in tensor_outputs(out_types)]
        result = self.b.call(fn, [self.ctx] + list(args) + buffers)
        given = dict(zip(tensor_outputs(out_types), buffers))   # (a function returns them as given)
        if self.outline_products:   # a long program: fewer lines for LLVM
            if fn not in self.never_fail:
                self.bail_if(self.b.icmp_unsigned("!=", self.b.load(self.status_field(), typ=I32), I32(0)))
        else:
            status = self.b.load(self.status_ptr(), typ=I32)
            cont = self.func.append_basic_block("ok")
            self.b.cbranch(self.b.icmp_unsigned("!=", status, I32(0)), self.bail_block(), cont)
            self.b.position_at_end(cont)
        return [given[k] if k in given else self.b.extract_value(result, k) for k in range(n_out)]

    def trampoline(self, fun, env_type):
        """`void code(ctx, env, args...)`: unpack a closure's environment and call `fun`."""
        fn = self.internal_function(cont_fnty(ContType(tuple(fun.in_types))), f"code{self.n_codes}")
        self.n_codes += 1
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        ctx, env, args = fn.args[0], fn.args[1], list(fn.args[2:])
        caps = [b.load(b.gep(env, [I32(0), I32(k)], source_etype=env_type), typ=t)
                for k, t in enumerate(env_type.elements)]
        b.ret(b.call(self.functions[fun], [ctx] + args + caps))
        return fn

    def tree_function(self, node):
        """`{state} rec(ctx, desc, index, init..., captures...)`: the TREE recursion."""
        n = node.attrs["n_state"]
        (combine,) = node.bodies
        state_types = [v.type for v in node.outputs]
        arg_types = [PTR, PTR, I64] + [ll_type(v.type) for v in node.inputs[1:]] \
            + [PTR] * len(tensor_outputs(state_types))
        fn = self.internal_function(ir.FunctionType(ret_type(state_types), arg_types), f"tree{self.n_trees}")
        self.n_trees += 1

        def prologue(args):
            desc, index, init, caps = args[0], args[1], args[2:2 + n], args[2 + n:]
            b = self.b
            with b.if_then(b.icmp_signed("<", index, I64(0)), likely=False):
                self.ret(init)
            self.poll_every(index, POLL_ITERATIONS)   # each node is visited once
            kids = []
            for slot in (2, 3):
                array = b.load(b.gep(desc, [I64(slot)], source_etype=I64), typ=PTR)
                child = b.load(b.gep(array, [index], source_etype=I64), typ=I64)
                kids += self.call_checked(fn, [desc, child] + init + caps, n, state_types)
            return [index] + kids + caps

        self.define(fn, combine, recursive=True, prologue=prologue, out_types=state_types)
        return fn

    # -- arithmetic helpers shared by several rules ---------------------------
    def convert(self, x, src, dst):
        b = self.b
        if src == dst:
            return x
        if dst == "bool":
            return b.fcmp_unordered("!=", x, x.type(0)) if src in FLOATS else b.icmp_signed("!=", x, x.type(0))
        if dst in FLOATS:
            if src in FLOATS:
                return b.fpext(x, LL[dst]) if dst == "f64" else b.fptrunc(x, LL[dst])
            return b.uitofp(x, LL[dst]) if src == "bool" else b.sitofp(x, LL[dst])
        if src == "bool":
            return b.zext(x, I64)
        sat = self.extern(f"llvm.fptosi.sat.i64.{'f64' if src == 'f64' else 'f32'}",
                          ir.FunctionType(I64, [x.type]))
        return b.call(sat, [x])   # saturating: NaN -> 0, never poison

    def int_divmod(self, a, b_):
        """Python's floor division and modulo; x // 0 == x % 0 == 0 and no INT_MIN // -1 trap."""
        b = self.b
        zero, one, minus1 = I64(0), I64(1), I64(-1)
        special = b.or_(b.icmp_signed("==", b_, zero), b.icmp_signed("==", b_, minus1))
        d = b.select(special, one, b_)
        q, r = b.sdiv(a, d), b.srem(a, d)
        adjust = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, d), zero))
        q = b.select(adjust, b.sub(q, one), q)
        r = b.select(adjust, b.add(r, d), r)
        is_m1 = b.icmp_signed("==", b_, minus1)
        q = b.select(is_m1, b.sub(zero, a), b.select(special, zero, q))
        r = b.select(special, zero, r)
        return q, r

    def float_divmod(self, a, b_):
        """NumPy's floor_divide and remainder for floats (npy_divmod)."""
        b = self.b
        t = a.type
        zero = t(0.0)
        suffix = "f64" if t == F64 else "f32"
        copysign = self.extern(f"llvm.copysign.{suffix}", ir.FunctionType(t, [t, t]))
        floor = self.module.declare_intrinsic("llvm.floor", [t])
        mod = b.frem(a, b_)
        div = b.fdiv(b.fsub(a, mod), b_)
        nonzero = b.fcmp_unordered("!=", mod, zero)
        sign_differs = b.xor(b.fcmp_ordered("<", b_, zero), b.fcmp_ordered("<", mod, zero))
        adjust = b.and_(b.fcmp_ordered("!=", mod, zero), sign_differs)
        mod = b.select(adjust, b.fadd(mod, b_), mod)
        div = b.select(adjust, b.fsub(div, t(1.0)), div)
        mod = b.select(nonzero, mod, b.call(copysign, [zero, b_]))
        fl = b.call(floor, [div])
        fl = b.select(b.fcmp_ordered(">", b.fsub(div, fl), t(0.5)), b.fadd(fl, t(1.0)), fl)
        quotient = b.fdiv(a, b_)
        fl = b.select(b.fcmp_unordered("!=", div, zero), fl, b.call(copysign, [zero, quotient]))
        b_zero = b.fcmp_ordered("==", b_, zero)
        fl = b.select(b_zero, quotient, fl)
        mod = b.select(b_zero, b.frem(a, b_), mod)
        return fl, mod

    def int_pow(self, base, exp):
        """Exponentiation by squaring; a negative exponent gives 0."""
        b = self.b
        pre = b.block
        head, body, done = (self.func.append_basic_block(n) for n in ("pow", "powbody", "powdone"))
        b.branch(head)
        b.position_at_end(head)
        acc, x, e = b.phi(I64), b.phi(I64), b.phi(I64)
        acc.add_incoming(I64(1), pre)
        x.add_incoming(base, pre)
        e.add_incoming(exp, pre)
        b.cbranch(b.icmp_signed(">", e, I64(0)), body, done)
        b.position_at_end(body)
        odd = b.trunc(e, I1)
        acc.add_incoming(b.select(odd, b.mul(acc, x), acc), body)
        x.add_incoming(b.mul(x, x), body)
        e.add_incoming(b.ashr(e, I64(1)), body)
        b.branch(head)
        b.position_at_end(done)
        return b.select(b.icmp_signed("<", exp, I64(0)), I64(0), acc)


def constant_symbol(value):
    """(symbol, contiguous data) of a constant array: named by its content."""
    data = np.ascontiguousarray(value)
    return "jitad_const_" + hashlib.sha256(data.tobytes() + str(data.dtype).encode()).hexdigest()[:24], data


def program_constants(program):
    """{symbol: array} of every array in the program's node attributes: what the code of
    a program loaded from the disk cache (not lowered here) may name."""
    found = {}

    def visit(graph):
        for node in graph.nodes:
            for value in node.attrs.values():
                if isinstance(value, np.ndarray):
                    name, data = constant_symbol(value)
                    found[name] = data
            for body in node.bodies:
                visit(body)
    for graph in [f.body for f in program.funs] + [program.main]:
        visit(graph)
    return found


def lower_program(module, program, prefix):
    """Add `program`'s functions to `module`; return the LLVM function of its main graph
    and the large constants ({symbol: array}) the runtime must register."""
    lo = Lowerer(module, program, prefix)
    return lo.main, lo.external_constants


