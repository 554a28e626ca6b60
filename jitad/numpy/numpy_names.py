"""NumPy's names that compute nothing jitad stages: dtypes and scalar types, dtype
queries, printing, file input and output, dates, iteration helpers, configuration.
`jax.numpy` and `autograd.numpy` hand these on from NumPy (autograd wraps the functions
so that they refuse its boxes); here they are NumPy's own objects, and the functions
refuse a staged value with NumPy's message for it (`Staged.__array__`)."""
import numpy as np

from ..staging import Staged

# dtypes, scalar types and their abstract classes
TYPES = ("bool", "byte", "bytes_", "character", "datetime64", "flexible", "float16", "generic", "half", "intc",
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
