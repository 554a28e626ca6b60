"""Dead code: the nodes whose results nothing reads, and the `stop_gradient` identities
differentiation leaves behind."""
from .graph import renamed
from .ops import Op


def forward_stop_gradients(graph):
    """After differentiation `stop_gradient` is the identity: its users read its input (a
    standalone one would be a copy)."""
    for node in graph.nodes:
        for body in node.bodies:
            forward_stop_gradients(body)
    same = {n.outputs[0]: n.inputs[0] for n in graph.nodes if n.op == Op.STOP_GRADIENT}
    if same:
        graph.nodes = renamed(graph.nodes, same)
        graph.outputs = [same.get(v, v) for v in graph.outputs]


def eliminate_dead_code(graph):
    """Drop pure nodes whose results nothing uses (e.g. the cotangent reverse mode computes
    for a constant operand of a matrix product: LLVM cannot drop a BLAS call)."""
    for node in graph.nodes:
        for body in node.bodies:
            eliminate_dead_code(body)
    graph.nodes = live_nodes(graph)


def live_nodes(graph):
    """The nodes of `graph` less the pure ones whose results nothing uses (an `IF` whose
    branches only compute is pure: reverse mode's choice of a loop state's home)."""
    live, kept = set(graph.outputs), []
    for node in reversed(graph.nodes):
        if _pure(node) and not any(v in live for v in node.outputs):
            continue
        kept.append(node)
        live.update(node.inputs)
    return kept[::-1]


def _pure(node):
    return node.op.pure or node.op == Op.IF and all(_pure(n) for body in node.bodies for n in body.nodes)


SLOT_WRITES = {Op.SLOT_SET, Op.SLOT_ADD, Op.SLOT_ADD_AT, Op.SLOT_SCATTER_ADD, Op.SLOT_SET_AT, Op.SLOT_ADD_SLICE,
               Op.MATMUL_ADD, Op.STRIDED_BMM_ADD}


def drop_unread_slots(nodes, outputs):
    """Drop the slots of `nodes` that are only written (the value slot of a function whose
    gradient alone is returned) with their writes; the dead-code pass then drops what
    only fed them. A slot any other node reads or receives (a loop body capturing it, a
    fused loop) is kept."""
    slots = {n.outputs[0] for n in nodes if n.op == Op.SLOT}
    unread = slots - set(outputs)
    for n in nodes:
        for k, v in enumerate(n.inputs):
            if v in unread and not (k == 0 and n.op in SLOT_WRITES):
                unread.discard(v)
    if not unread:
        return nodes
    return [n for n in nodes if not (n.inputs and n.inputs[0] in unread and n.op in SLOT_WRITES)
            and not (n.op == Op.SLOT and n.outputs[0] in unread)]
