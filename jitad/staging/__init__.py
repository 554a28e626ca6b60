"""Staging: run the user's Python on proxies that record an SSA graph.

A `Staged` value holds a `Var`; every operation on it appends a node to the graph of
the current `Frame`. Control-flow combinators trace their bodies in child frames;
a body that uses a value of an enclosing frame *captures* it, which makes the value
an explicit param of the body and an explicit operand of the control-flow node.

`frames.py` (the trace being recorded, `emit`) <- `values.py` (the staged value type)
<- `tracer.py` (programs, bodies, slots, closures) <- `combinators.py` (IF, WHILE, FOR,
FUN, TREE). This package re-exports what the rest of jitad uses.
"""
from .frames import (apply, current_frame, emit, slot_touched, substituted, trace_memo, transformation,
                     transforming)
from .values import (Staged, StagedTree, as_var, binary, coerce, foreign_array, is_staged, logical, power, result_dtype, to_bool,
                     unary, wrap)
from .tracer import arg_type, make_closure, new_slot, slot_add, slot_get, slot_set, trace_program
from .combinators import FOR, FUN, IF, TREE, WHILE, ShapeDtype, checkpoint, checkpoint_count
from .complex import Complex, is_complex

__all__ = ["FOR", "FUN", "IF", "TREE", "WHILE", "Complex", "ShapeDtype", "Staged", "StagedTree", "apply", "arg_type", "as_var", "foreign_array",
           "binary", "checkpoint", "checkpoint_count", "coerce", "current_frame", "emit", "is_complex", "is_staged", "logical",
           "make_closure", "new_slot", "power", "result_dtype", "slot_add", "slot_get", "slot_set", "substituted",
           "to_bool", "trace_memo", "trace_program", "transformation", "transforming", "unary", "wrap"]
