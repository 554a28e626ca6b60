"""jitad: JIT-compiled differentiable programs through LLVM."""
from .api import grad, hvp, jit, jit_grad, jvp, trace, value_and_grad, vjp, vmap
from .errors import (ArgumentError, DeviceError, DistributedError, ImmutableError, JitadError, ResourceError,
                     RuntimeCheckError, ShapeError, StagingError)
from .numeric import *  # noqa: F401,F403
from .pytree import tree_leaves, tree_map
from .staging import FOR, FUN, IF, TREE, WHILE, ShapeDtype
from .tree import Forest, Tree
from .custom import checkpoint, custom_jvp, custom_vjp, fixed_point, softplus
from .numpy_api import *  # noqa: F401,F403
from .control import scan, switch
from .jacobians import hessian, jacfwd, jacobian, jacrev
from . import debug, distributed, lax, linalg, nn, numpy, optim, random, scipy, testing, tree_util  # noqa: E402
from .random import dropout  # noqa: E402

__version__ = "0.1.0"
