"""`jitad.experimental`: JAX's experimental modules jitad provides (`ode`)."""
from . import ode  # noqa: F401
