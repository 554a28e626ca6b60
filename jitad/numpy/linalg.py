"""`jitad.numpy.linalg`: `jitad.linalg` under NumPy's module path (`jnp.linalg.solve`)."""
from ..linalg import *  # noqa: F401,F403
from ..linalg import __all__  # noqa: F401
