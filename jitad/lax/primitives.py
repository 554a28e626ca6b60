"""JAX's primitive objects (`lax.add_p`, `lax.gather_p`, ...) with their `bind(*args,
**params)` convention: the operands positionally and JAX's parameter names, as a jaxpr
equation carries them. `bind` runs the `lax` function (staged or eager); the hints XLA
may use (`accuracy`, shardings, `indices_are_sorted`, ...) do not change the result and
are left out. Primitives whose parameters are JAX's own jaxprs (`cond_p`, `while_p`,
`scan_p`) raise, naming the `lax` function to call instead."""
from ..errors import ArgumentError

# parameters that only steer XLA (placement, speed or rounding hints): no effect on values
HINTS = {"accuracy", "sharding", "out_sharding", "weak_type", "precision", "indices_are_sorted",
         "unique_indices", "update_jaxpr", "update_consts", "jaxpr", "consts", "prevent_mlir_dce",
         "devices", "srcs", "copy_semantics"}


class Primitive:
    """A named `lax` operation with JAX's `bind` convention: `lax.add_p.bind(x, y)`."""

    def __init__(self, name, fn, multiple_results=False, adapt=None):
        self.name, self.multiple_results = name, multiple_results
        self._fn, self._adapt = fn, adapt

    def bind(self, *args, **params):
        """Apply the operation to `args` with JAX's parameters `params`."""
        params = {k: v for k, v in params.items() if k not in HINTS}
        out = self._adapt(self._fn, args, params) if self._adapt else self._fn(*args, **params)
        return list(out) if self.multiple_results else out

    def __repr__(self):
        return self.name


class Declined(Primitive):
    """A JAX primitive jitad does not bind: its parameters are JAX's own jaxprs."""

    def __init__(self, name, alternative):
        super().__init__(name, None)
        self.alternative = alternative

    def bind(self, *args, **params):
        raise ArgumentError(f"`lax.{self.name}.bind` takes JAX's jaxprs, which jitad does not run; "
                            f"call {self.alternative} instead")


def _positional(*names):
    """An adapter passing JAX's `names` parameters positionally after the operands."""
    return lambda fn, args, params: fn(*args, *[params.pop(n) for n in names], **params)


def _variadic(name):
    """An adapter for an op taking its operands as one sequence plus parameter `name`."""
    return lambda fn, args, params: fn(list(args), params.pop(name), **params)
