"""NumPy's names that compute nothing jitad stages: dtypes and scalar types, dtype
queries, printing, file input and output, dates, iteration helpers, configuration.
`jax.numpy` and `autograd.numpy` hand these on from NumPy (autograd wraps the functions
so that they refuse its boxes); here they are NumPy's own objects, and the functions
refuse a staged value with NumPy's message for it (`Staged.__array__`)."""
import numpy as np

from ..staging import Staged

# dtypes, scalar types and their abstract classes
TYPES = ("bool", "byte", "bytes_", "character", "datetime64", "flexible", "float16", "generic", "half", "intc", "clongdouble",
         "intp", "long", "longdouble", "longlong", "object_", "short", "str_", "timedelta64", "ubyte", "uint",
         "uint16", "uintc", "uintp", "ulong", "ulonglong", "unsignedinteger", "ushort", "void", "matrix",
         "memmap", "recarray", "record", "broadcast", "busdaycalendar", "flatiter", "ndenumerate", "ndindex",
         "nditer")
# functions on plain values only (printing, files, dates, dtype queries, memory, configuration)
FUNCTIONS = ("array2string", "array_repr", "array_str", "base_repr", "binary_repr", "bmat", "asmatrix",
             "busday_count", "busday_offset", "common_type", "datetime_as_string", "datetime_data",
             "format_float_positional", "format_float_scientific", "fromregex", "genfromtxt", "get_include",
             "getbufsize", "geterrcall", "setbufsize", "seterrcall", "info", "is_busday", "isfortran", "isnat",
             "iterable", "load", "loadtxt", "save", "savetxt", "savez", "savez_compressed", "may_share_memory",
             "shares_memory", "min_scalar_type", "mintypecode", "nested_iters", "show_config", "show_runtime",
             "typename", "frombuffer", "fromfile", "fromiter", "fromstring", "frompyfunc", "from_dlpack",
             "isdtype", "ufunc", "sort_complex")

__all__ = [n for n in TYPES + FUNCTIONS if hasattr(np, n)] + ["float128", "Box", "numpy_version", "metadata"]

globals().update({n: getattr(np, n) for n in TYPES + FUNCTIONS if hasattr(np, n)})
float128 = getattr(np, "float128", np.longdouble)
numpy_version = np.__version__

Box = Staged   # autograd's traced-value type: `isinstance(x, jnp.Box)` is true of staged values


def metadata(A):
    """`(shape, ndim, dtype, iscomplex)` of an array or staged value (autograd's helper):
    `jnp.metadata(np.zeros(2))`."""
    dtype = np.dtype(A.dtype) if hasattr(A, "dtype") else np.asarray(A).dtype
    shape = tuple(A.shape) if hasattr(A, "shape") else np.shape(A)
    return shape, len(shape), dtype, dtype.kind == "c"


# -- autograd.numpy's own helpers ------------------------------------------------------------

def concatenate_args(axis, *args):
    """`concatenate(args, axis)` (autograd's form): `jnp.concatenate_args(0, a, b)`."""
    from ._common import jnp
    return jnp().concatenate(list(args), axis)


def array_from_args(array_args, array_kwargs, *args):
    """`array(args, *array_args, **array_kwargs)` (autograd's form; staged values stack):
    `jnp.array_from_args((), {}, x, y)`."""
    from ._common import jnp
    return jnp().array(list(args), *array_args, **array_kwargs)


def make_diagonal(D, offset=0, axis1=0, axis2=1):
    """Matrices with the last axis of `D` on their diagonals (autograd's helper; as there,
    only `offset=0, axis1=-1, axis2=-2`): `jnp.make_diagonal(v, 0, -1, -2)`."""
    from ..errors import ArgumentError
    from ._common import jnp
    if not (offset == 0 and axis1 == -1 and axis2 == -2):
        raise ArgumentError("`make_diagonal` supports offset=0, axis1=-1, axis2=-2 only (as autograd's); "
                            "for other layouts use `jnp.diag` or `jnp.moveaxis` after it")
    D = jnp().asarray(D)
    n = jnp().shape(D)[-1]
    return jnp().expand_dims(D, -1) * np.eye(n, dtype=bool)


def parse_einsum_input(*args):
    """NumPy's parse of `einsum`'s arguments into (inputs, output, operands) (autograd's
    helper): `jnp.parse_einsum_input('ij,jk', a, b)`."""
    from numpy._core.einsumfunc import _parse_einsum_input
    return _parse_einsum_input(args)


def wrap_namespace(old, new):
    """Fill the dict `new` with jitad's function for each public name of the namespace
    dict `old` that jitad has (autograd's helper): `jnp.wrap_namespace(vars(np), {})`."""
    from ._common import jnp
    for name in old:
        if not name.startswith("_") and hasattr(jnp(), name):
            new[name] = getattr(jnp(), name)
    return new


poly1d = np.poly1d

__all__ += ["concatenate_args", "array_from_args", "make_diagonal", "parse_einsum_input", "wrap_namespace", "poly1d",
            "r_class", "c_class"]


def _index_classes():
    from ..numpy_api import _IndexConcat

    class r_class(_IndexConcat):
        """The class of `jnp.r_` (autograd's name): `jnp.r_class()[a, b]`."""
        def __init__(self):
            super().__init__("r_", 0, 1, -1)

    class c_class(_IndexConcat):
        """The class of `jnp.c_` (autograd's name): `jnp.c_class()[a, b]`."""
        def __init__(self):
            super().__init__("c_", -1, 2, 0)
    return r_class, c_class


r_class, c_class = _index_classes()
