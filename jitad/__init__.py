"""jitad: JIT-compiled differentiable programs through LLVM."""
from .api import (elementwise_grad, grad, hessian, hvp, jacfwd, jacobian, jacrev, jit, jit_grad, jvp, linearize, trace,
                  value_and_grad, vjp, vmap)
from .config import config
from .errors import (ArgumentError, ConfigError, DeviceError, DistributedError, ExportError, ImmutableError,
                     JitadError, JitadWarning, ResourceError, RuntimeCheckError, ShapeError, StagingError)
from .numeric import *  # noqa: F401,F403
from .pytree import tree_leaves, tree_map
from .staging import FOR, FUN, IF, TREE, WHILE, ShapeDtype
from .forest import Forest, Tree
from .transforms.custom import checkpoint, custom_jvp, custom_vjp, fixed_point, softplus
from .numpy_api import *  # noqa: F401,F403
from .transforms.control import scan, switch
from . import debug, distributed, flatten_util, lax, linalg, nn, numpy, optim, random, scipy, testing, tree, tree_util  # noqa: E402,E501
from .random import dropout  # noqa: E402
from .export import Exported, export  # noqa: E402
from . import interop  # noqa: E402  (JAX and PyTorch are imported when it is used)

from .version import __version__  # noqa: E402
from .toplevel import *  # noqa: E402,F401,F403  (JAX's device, shape and settings names)
from . import (checkpoint_policies, custom_batching, custom_derivatives, dlpack, dtypes, ops, ref,  # noqa: E402
               sharding, typing, version)
from .ref import Ref, empty_ref, free_ref, freeze, new_ref  # noqa: E402
from .sharding import NamedSharding, PartitionSpec as P, reshard, set_mesh, make_mesh  # noqa: E402
from .differential_operators import (deriv, grad_and_aux, grad_named, hessian_tensor_product,  # noqa: E402
                                     hessian_vector_product, holomorphic_grad, make_ggnvp, make_hvp, make_jvp,
                                     make_vjp, multigrad_dict, tensor_jacobian_product, vector_jacobian_product)
from . import (builtins, core, differential_operators, extend, misc, test_util, tracer, util,  # noqa: E402
               wrap_util)
from .builtins import dict, isinstance, list, tuple, type  # noqa: E402,A001  (autograd's container names)
from .extend import primitive  # noqa: E402
from . import memory, monitoring, profiler  # noqa: E402
from . import stages  # noqa: E402
from . import image  # noqa: E402
