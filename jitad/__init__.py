"""jitad: JIT-compiled differentiable programs through LLVM."""
from .api import grad, hvp, jit, jit_grad, jvp, linearize, trace, value_and_grad, vjp, vmap
from .config import config
from .errors import (ArgumentError, ConfigError, DeviceError, DistributedError, ExportError, ImmutableError,
                     JitadError, JitadWarning, ResourceError, RuntimeCheckError, ShapeError, StagingError)
from .numeric import *  # noqa: F401,F403
from .pytree import tree_leaves, tree_map
from .staging import FOR, FUN, IF, TREE, WHILE, ShapeDtype
from .tree import Forest, Tree
from .custom import checkpoint, custom_jvp, custom_vjp, fixed_point, softplus
from .numpy_api import *  # noqa: F401,F403
from .control import scan, switch
from .jacobians import elementwise_grad, hessian, jacfwd, jacobian, jacrev
from . import debug, distributed, flatten_util, lax, linalg, nn, numpy, optim, random, scipy, testing, tree_util  # noqa: E402
from .random import dropout  # noqa: E402
from .export import Exported, export  # noqa: E402
from . import interop  # noqa: E402  (JAX and PyTorch are imported when it is used)

__version__ = "0.1.0"
