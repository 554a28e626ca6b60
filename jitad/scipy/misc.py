"""`jitad.scipy.misc`: the old home of `logsumexp` (`from autograd.scipy.misc import logsumexp`)."""
from .special import logsumexp  # noqa: F401
