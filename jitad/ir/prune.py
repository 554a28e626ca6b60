"""Whole-program pruning: tables that are written but never read.

Reverse mode keeps per-iteration values of a loop in tables (`stored_values`: products
and transcendental values) before it knows which of them the backward pass will read;
once the pass is emitted, those it never reads are still written every iteration. A
table is unread when none of its aliases (the table itself and the loop/branch params it
is passed to as a capture) reaches anything but `table_set`/`table_add`: its writes, the
table and the captures that carry it go.
"""
from dataclasses import replace

from .graph import split_operands, walk
from .ops import Op

WRITES = {Op.TABLE_SET, Op.TABLE_ADD, Op.TABLE_SCATTER}


def _captures(node):
    """(position of a node input, the body params it binds) for the inputs of a
    control-flow node that are captures or branch arguments: removable in pairs. Loop
    state is not listed (it is also a result)."""
    ins, bodies = node.inputs, node.bodies
    if node.op == Op.IF:
        return [(p, [b.params[p - 1] for b in bodies]) for p in range(1, len(ins))]
    if node.op not in (Op.FOR, Op.WHILE, Op.TREE):
        return []
    caps = len(split_operands(node)[2])
    first = len(ins) - caps
    return [(p, [b.params[len(b.params) - caps + (p - first)] for b in bodies]) for p in range(first, len(ins))]


def drop_unread_tables(program):
    """Remove the tables of `program` nothing reads (see the module doc); return it."""
    graphs = [program.main] + [f.body for f in program.funs]
    alias = {}      # a body param carrying a table -> the table's var
    binders = []    # (node, input position, params) through which a table is passed
    tables = set()
    for g in graphs:
        for node in walk(g):
            if node.op == Op.TABLE:
                tables.add(node.outputs[0])
    for g in graphs:   # walk visits a node before its bodies: outer aliases come first
        for node in walk(g):
            for p, params in _captures(node):
                root = alias.get(node.inputs[p], node.inputs[p])
                if root in tables:
                    for q in params:
                        alias[q] = root
                    binders.append((node, p, params))
    read = set()
    for g in graphs:
        for graph in [g] + [b for n in walk(g) for b in n.bodies]:
            for v in graph.outputs:
                read.add(alias.get(v, v))
            for node in graph.nodes:
                passed = {p for p, _ in _captures(node)}
                for p, v in enumerate(node.inputs):
                    if node.op in WRITES and p == 0 or p in passed:
                        continue
                    read.add(alias.get(v, v))
    dead = tables - read
    if not dead:
        return program
    drop_positions = {}
    for node, p, params in binders:
        if alias.get(node.inputs[p], node.inputs[p]) in dead:
            drop_positions.setdefault(id(node), set()).add(p)
    for g in graphs:
        _rewrite(g, dead, alias, drop_positions)
    return program


def _rewrite(graph, dead, alias, drop_positions):
    nodes = []
    for node in graph.nodes:
        if node.op == Op.TABLE and node.outputs[0] in dead:
            continue
        if node.op in WRITES and alias.get(node.inputs[0], node.inputs[0]) in dead:
            continue
        drop = drop_positions.get(id(node))
        if drop:
            for p, params in _captures(node):
                if p in drop:
                    for body, q in zip(node.bodies, params):
                        body.params.remove(q)
            node = replace(node, inputs=tuple(v for p, v in enumerate(node.inputs) if p not in drop))
        for body in node.bodies:
            _rewrite(body, dead, alias, drop_positions)
        nodes.append(node)
    graph.nodes = nodes
