"""`jitad.numpy.random`: NumPy's random module, as `autograd.numpy.random` is
(`import jitad.numpy.random as npr; npr.RandomState(0).randn(3)`). Its draws are plain
NumPy values: inside a staged function they are constants fixed when it is traced; draw
them outside and pass them in, or use `jitad.random`'s keys inside."""
from numpy.random import *  # noqa: F401,F403
from numpy.random import Generator, RandomState, default_rng, seed  # noqa: F401
# NumPy's own helpers that `autograd.numpy.random` carries (it wraps NumPy's namespace)
from numpy.random import get_bit_generator, set_bit_generator, test  # noqa: E402,F401

# (`wrap_namespace`, jitad.numpy's, is set here by jitad/numpy/__init__.py once it exists)
