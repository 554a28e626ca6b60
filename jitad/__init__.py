"""jitad: JIT-compiled differentiable programs through LLVM."""
from .api import grad, hessian, hvp, jit, jit_grad, jvp, trace, value_and_grad, vjp
from .errors import ArgumentError, DeviceError, DistributedError, ImmutableError, JitadError, ResourceError, ShapeError, StagingError
from .numeric import *  # noqa: F401,F403
from .pytree import tree_leaves, tree_map
from .staging import FOR, FUN, IF, TREE, WHILE, ShapeDtype
from .tree import Tree
from .custom import checkpoint, custom_vjp, fixed_point, softplus
from .numpy_api import *  # noqa: F401,F403
from . import distributed, nn, optim, random, testing  # noqa: E402

__version__ = "0.1.0"
