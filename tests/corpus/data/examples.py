"""Stand-in for JAX's `examples` package, so that its programs' `from examples import
datasets` finds the synthetic `datasets` module beside this one."""
from . import datasets  # noqa: F401
