"""autograd's `autograd.misc` under jitad: `flatten`, `const_graph`, the optimizers
(`jitad.misc.optimizers.adam`, `sgd`, `rmsprop`) and `fixed_points.fixed_point`, with
autograd's signatures."""
from . import fixed_points, flatten as _flatten_module, optimizers, tracers  # noqa: F401
from .flatten import flatten, flatten_func
from .tracers import const_graph

__all__ = ["const_graph", "flatten", "flatten_func", "tracers"]
