"""A `FOR` whose last step makes only what nothing reads runs one step fewer.

Reverse mode keeps a loop's tensor state as each step leaves it, in a table the backward
pass reads at the entries of every step but the last (the state entering the first step
is the loop's input): the `table_set` of that state is marked `last_unread`. When
nothing reads the loop's results either (a gradient that needs no value of the final
state: a loss linear in it), and the body has no other effect, the last step computes
nothing anyone sees (a one-step loop: nothing at all), and the loop stops before it.
Pure nodes cannot fail, so dropping the step hides no error.
"""
from .graph import Node, Var, uses
from .ops import Op
from .types import Type

I64 = Type("i64")


def drop_dead_last_steps(nodes, outputs):
    """`nodes` with each `FOR` that qualifies (see the module) ending one step earlier."""
    read = uses(nodes, outputs)
    out = []
    for node in nodes:
        if node.op == Op.FOR and not any(v in read for v in node.outputs) and _last_step_dead(node.bodies[0]):
            out += _one_step_fewer(node)
        else:
            out.append(node)
    return out


def _last_step_dead(body):
    """Whether a step's only effects are writes whose entry nothing reads at the last step."""
    effects = [n for n in body.nodes if not n.op.pure]
    return bool(effects) and all(n.op == Op.TABLE_SET and n.attrs.get("last_unread") for n in effects)


def _one_step_fewer(loop):
    """`loop` with its upper bound max(lower, upper - 1), and the nodes computing it."""
    lower, upper = loop.inputs[:2]
    one, less, more, bound = Var(I64), Var(I64), Var(Type("bool")), Var(I64)
    return [Node(Op.CONST, (), (one,), {"value": 1, "type": I64}),
            Node(Op.SUB, (upper, one), (less,)),
            Node(Op.GT, (upper, lower), (more,)),
            Node(Op.SELECT, (more, less, lower), (bound,)),
            Node(Op.FOR, (lower, bound) + loop.inputs[2:], loop.outputs, loop.attrs, loop.bodies)]
