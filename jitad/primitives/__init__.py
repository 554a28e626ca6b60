"""The math primitives, one declaration each (see `jitad.ir.ops.declare` and
CONTRIBUTING.md, "How to add a primitive"). Importing this package declares them."""
from . import bits, bitwise, collectives, named, elementwise, host, linalg, sort, special, tensor  # noqa: F401
