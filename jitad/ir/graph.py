"""The SSA graph: values, nodes, (sub)graphs, staged functions and the program.

A `Var` is an SSA value identified by object identity; names are assigned by the
printer. A `Node` is one operation: an opcode, input vars, output vars, static
attributes and, for control flow, sub-graphs. A `Graph` is a first-order body:
its params are the only values from outside it that it may use.
"""
from dataclasses import dataclass, field


class Var:
    __slots__ = ("type",)

    def __init__(self, type):
        self.type = type

    def __repr__(self):
        return f"Var({self.type})"


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    op: "Op"   # noqa: F821  (jitad.ir.ops imports this module)
    inputs: tuple
    outputs: tuple
    attrs: dict = field(default_factory=dict)
    bodies: tuple = ()


@dataclass(slots=True, eq=False)
class Graph:
    params: list
    nodes: list = field(default_factory=list)
    outputs: list = field(default_factory=list)

    @property
    def in_types(self):
        return [v.type for v in self.params]

    @property
    def out_types(self):
        return [v.type for v in self.outputs]


@dataclass(slots=True, eq=False)
class FunDef:
    """A staged function (`FUN`): called by `call` nodes, possibly recursively.

    `body.params` are the function's flattened arguments followed by the values it
    captures from its callers' scopes (`n_captures` of them); `captured` holds those values
    as the Python code that traced the body holds them (a custom rule's closure may read
    them), in the same order.
    """
    name: str
    in_types: list
    out_types: list = None
    body: Graph = None
    n_captures: int = 0
    captured: list = None


@dataclass(slots=True, eq=False)
class Program:
    """A traced function: its main graph and every staged function it calls."""
    main: Graph
    funs: list

    # (`str(program)`: the printer installs its `format_program` here)


def renamed(nodes, rename):
    """`nodes` reading `rename[v]` for each input `v` renamed; a node with no renamed input
    is kept as it is (not copied: a pass over a large graph renames few of its nodes)."""
    if not rename:
        return list(nodes)
    return [n if not any(v in rename for v in n.inputs) else
            Node(n.op, tuple([rename.get(v, v) for v in n.inputs]), n.outputs, n.attrs, n.bodies) for n in nodes]


def walk(graph):
    """Every node of `graph` and of its sub-graphs, depth first (not into FUN bodies)."""
    for node in graph.nodes:
        yield node
        for body in node.bodies:
            yield from walk(body)


def uses(nodes, outputs=()):
    """The def-use map of a node list: each var -> the positions of the nodes reading it,
    in order (the graph's `outputs`, if given, count as read at position len(nodes))."""
    where = {}
    for k, node in enumerate(nodes):
        for v in node.inputs:
            where.setdefault(v, []).append(k)
    for v in outputs:
        where.setdefault(v, []).append(len(nodes))
    return where


HEAD = {"if": 1, "while": 0, "for": 2, "tree": 1}   # operands before a control-flow node's state


def loop_state_flags(node, state, caps, analyze):
    """A loop's (`while`, `for`, `tree`) state flags as a fixed point: an entry is set where
    `state` (the init's) has it or where the body's result has it, `analyze(body, param
    flags) -> result flags` given the body's params' flags (`caps`: the captured values')."""
    state = list(state)
    while True:
        if node.op.name == "while":
            new = analyze(node.bodies[1], state + caps)
        elif node.op.name == "for":
            new = analyze(node.bodies[0], [False] + state + caps)
        else:   # tree: the node, its children's states, its own
            new = analyze(node.bodies[0], [False] + state + state + caps)
        new = [a or b for a, b in zip(state, new)]
        if new == state:
            return state
        state = new


def split_operands(node, values=None):
    """(head, state, captures) of control-flow `node`'s operands, or of `values` given in
    their order: the head is IF's predicate, FOR's bounds or TREE's tree; the state is
    the loop state (also the results); IF has none, its branch arguments are captures."""
    values = list(node.inputs if values is None else values)
    h = HEAD[node.op.name]
    n = h + node.attrs.get("n_state", 0)
    return values[:h], values[h:n], values[n:]
