"""autograd's `autograd.misc` under jitad: `flatten` and the optimizers
(`jitad.misc.optimizers.adam`, `sgd`, `rmsprop`) with autograd's signatures."""
from .flatten import flatten, flatten_func

__all__ = ["flatten", "flatten_func"]
