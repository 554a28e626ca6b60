"""The math functions users call, for staged values and plain numbers alike.

On Python or NumPy numbers they compute eagerly with NumPy; on staged values they
record a node. `jitad.exp(x)` is to jitad what `jnp.exp(x)` is to JAX.

`math.py` <- `indexing.py` <- `dispatch.py` (NumPy's functions on staged values); this
package re-exports their public functions and the helpers the rest of jitad reads.
"""
import sys

from ..primitives import rules
from .math import *  # noqa: F401,F403  (the public functions: __all__)
from .math import __all__ as _math_all
from .indexing import *  # noqa: F401,F403
from .indexing import __all__ as _indexing_all
from .dispatch import numpy_function, numpy_ufunc  # noqa: F401
# helpers the NumPy layer, random, batching and the derivative rules (rules.N) read
from ..ir.ops import Op  # noqa: F401
from ..staging import Staged, as_var, emit, is_staged  # noqa: F401
from .indexing import clip_index, getitem, slice_static, take_slice, unslice  # noqa: F401
from .math import (NUMPY_API, NUMPY_OF, N_D, _array_list, _axes, _axis, _dims, _dtype_name, _int_arg, _promoted, _shape,
                   _static_shape, bind, conv2d_valid, data_dependent_shape, matmul_t, scan, untransposed)

__all__ = _math_all + _indexing_all

rules.N.module = sys.modules[__name__]   # the staged math of the derivative rules
