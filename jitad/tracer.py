"""autograd's `autograd.tracer` names: primitives and boxes (jitad's staged values).

>>> from jitad.tracer import isbox
>>> isbox(1.0)
False
"""
from .builtins import subvals  # noqa: F401
from .core import getval, isbox  # noqa: F401
from .extend import Box, notrace_primitive, primitive, register_notrace  # noqa: F401
