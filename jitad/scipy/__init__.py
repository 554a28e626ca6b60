"""`jitad.scipy`: the parts of SciPy that `jax.scipy` and `autograd.scipy` have, on jitad's
functions (`from jitad.scipy.stats import norm`)."""
from . import integrate, linalg, misc, optimize, signal, special, stats  # noqa: F401
