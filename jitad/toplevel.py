"""JAX's top-level names beyond the transformations: the one CPU device, shapes without
values, the staged program as text, settings as context managers, `pmap` on one
device, and the small wrappers (`named_call`, `custom_gradient`, `closure_convert`,
`linear_transpose`, ...).

jitad runs in one process on one CPU device, so these do what JAX does on a CPU-only
install: `jitad.devices()` lists one device, `device_put` returns its argument as a
`jitad.numpy.Array`, and everything is ready when a call returns.

>>> jitad.devices()
[CpuDevice(id=0)]
>>> jitad.eval_shape(lambda x: x.sum(axis=0), jitad.ShapeDtypeStruct((3, 2), np.float32))
ShapeDtypeStruct(shape=(2,), dtype=float32)
"""
import contextlib
import functools
import platform
import sys

import numpy as np

from . import api
from .config import config
from .cpu_device import CPU, Device, Shard
from .stages import NUMPY_DTYPES, ClosedJaxpr, numpy_dtype, ShapeDtypeStruct, ShapedArray, leaf_type, structs, trace_at
from .errors import ArgumentError, DeviceError, JitadError
from .ir.ops import Op
from .ir.verify import verify
from . import numeric as N
from .primitives.host import HOST_FUNCTIONS, VMAP_METHODS
from .numpy import Array
from .pytree import flatten, tree_map, unflatten
from .staging import checkpoint as _checkpoint
from .staging import current_frame, is_staged
from .transforms.custom import custom_vjp

__all__ = ["Array", "Device", "ShapeDtypeStruct", "block_until_ready", "checkpoint", "clear_caches",
           "closure_convert", "copy_to_host_async", "custom_gradient", "default_backend", "device_count",
           "device_get", "device_put", "devices", "disable_jit", "ensure_compile_time_eval", "eval_shape",
           "float0", "host_count", "host_id", "host_ids", "linear_transpose", "local_device_count",
           "local_devices", "make_jaxpr", "named_call", "named_scope", "pmap", "print_environment_info",
           "process_count", "process_index", "process_indices", "remat", "typeof", "effects_barrier",
           "make_user_context", "Setting", "Shard", "fwd_and_bwd", "make_array_from_callback",
           "make_array_from_process_local_data", "make_array_from_single_device_arrays", "shard_map", "smap",
           "pure_callback", "live_arrays", "ds"]

float0 = api.FLOAT0


# -- the one device ------------------------------------------------------------------



def _check_backend(backend):
    if backend not in (None, "cpu") and getattr(backend, "platform", None) != "cpu":
        raise DeviceError(f"backend={backend!r}: jitad's JAX-style device functions know the CPU only; "
                          "pass backend='cpu' or none (CUDA is `jitad.jit(f, device='cuda')`)")


def devices(backend=None):
    """The devices of this process: one CPU device. `jitad.devices() == [CpuDevice(id=0)]`."""
    _check_backend(backend)
    return [CPU]


def local_devices(process_index=None, backend=None, host_id=None):
    """The devices of this process (the only one): `[CpuDevice(id=0)]`."""
    _check_backend(backend)
    index = process_index if process_index is not None else host_id
    if index not in (None, 0):
        raise DeviceError(f"process {index} does not exist: jitad runs as process 0 of 1")
    return [CPU]


def device_count(backend=None):
    """The number of devices: 1."""
    return len(devices(backend))


def local_device_count(backend=None):
    """The number of this process's devices: 1."""
    return len(local_devices(backend=backend))


def process_count(backend=None):
    """The number of processes: 1."""
    _check_backend(backend)
    return 1


def process_index(backend=None):
    """This process's index: 0."""
    _check_backend(backend)
    return 0


def process_indices(backend=None):
    """The indices of all processes: `[0]`."""
    return [process_index(backend)]


host_count, host_id, host_ids = process_count, process_index, process_indices


def default_backend():
    """The platform results live on: `'cpu'`."""
    return "cpu"


def _as_array(x):
    if isinstance(x, Array) or is_staged(x):
        return x
    return np.asarray(x).view(Array)


def device_put(x, device=None, *, src=None, donate=False, may_alias=None):
    """`x` with its leaves as `jitad.numpy.Array`s (all values already live on the CPU):
    `jitad.device_put(np.ones(2))` is an Array of ones."""
    if device is not None and not isinstance(device, (Device, str)) and not hasattr(device, "device_set"):
        raise DeviceError(f"device_put: {device!r} is not a device; pass one of jitad.devices() or a sharding")
    return tree_map(_as_array, x)


def device_get(x):
    """`x` with its array leaves as NumPy arrays (Python and NumPy scalars stay as they are)."""
    return tree_map(lambda v: np.asarray(v) if isinstance(v, np.ndarray) else v, x)


def block_until_ready(x):
    """`x` itself: jitad's results are ready when a call returns."""
    return x


def copy_to_host_async(x):
    """`x` itself: jitad's results are host memory already."""
    return x


# -- shapes without values -----------------------------------------------------------

def _is_weak(x):
    return isinstance(x, (int, float)) and not isinstance(x, (bool, np.generic))


def typeof(x):
    """The abstract value (shape and dtype) of `x`: `str(jitad.typeof(np.ones(3))) == 'float64[3]'`."""
    t = leaf_type(x)
    return ShapedArray(t.shape, numpy_dtype(t.dtype), _is_weak(x))


def eval_shape(fun, *args, **kwargs):
    """The shapes and dtypes of `fun(*args, **kwargs)`, as a pytree of `ShapeDtypeStruct`s,
    without running it (arguments may be arrays or ShapeDtypeStructs)."""
    api.check_callable(fun, "eval_shape")
    return structs(*trace_at(fun, args, kwargs))


def make_jaxpr(fun, static_argnums=(), axis_env=None, return_shape=False, abstracted_axes=None):
    """A function that traces `fun` at its arguments and returns the staged program
    (`ClosedJaxpr`; with `return_shape`, also the output's ShapeDtypeStructs).

    >>> print(jitad.make_jaxpr(lambda x: x * 2.0)(1.0))   # doctest: +SKIP
    """
    api.check_callable(fun, "make_jaxpr")
    if axis_env or abstracted_axes is not None:
        raise ArgumentError("make_jaxpr: axis_env and abstracted_axes name collective axes and symbolic "
                            "shapes, which jitad does not have; trace at concrete shapes")

    @functools.wraps(fun)
    def traced(*args, **kwargs):
        program, out_td = trace_at(fun, args, kwargs, static_argnums)
        jaxpr = ClosedJaxpr(verify(program))
        return (jaxpr, structs(program, out_td)) if return_shape else jaxpr
    return traced


# -- settings ------------------------------------------------------------------------

class Setting:
    """A setting as a context manager (JAX's `jax.debug_nans(True)`, ...): `with
    jitad.debug_nans(True): ...` sets it for the block; `.value` reads it. Settings
    of `jitad.config` are updated there; the others (transfer guards, mesh options:
    meaningless on one CPU) are kept here."""

    def __init__(self, name, default=None):
        self.name = name
        self._value = default

    @property
    def value(self):
        return config.read(self.name) if self.name in config.values else self._value

    def _set(self, value):
        if self.name in config.values:
            config.update(self.name, value)
        else:
            self._value = value

    @contextlib.contextmanager
    def __call__(self, new_val=True):
        old = self.value
        self._set(new_val)
        try:
            yield
        finally:
            self._set(old)

    def __repr__(self):
        return f"Setting({self.name!r}, value={self.value!r})"


_SETTING_NAMES = {
    "allow_f16_reductions": False, "array_garbage_collection_guard": None, "auto_pcast": None,
    "check_tracer_leaks": False, "debug_infs": False, "debug_key_reuse": False, "debug_nans": False,
    "default_device": None, "default_matmul_precision": None, "default_prng_impl": "threefry2x32",
    "enable_checks": False, "enable_custom_prng": False, "enable_x64": True, "explain_cache_misses": False,
    "jax2tf_associative_scan_reductions": False, "legacy_prng_key": "allow", "log_compiles": False,
    "no_execution": False, "no_tracing": False, "numpy_dtype_promotion": "standard",
    "numpy_rank_promotion": "allow", "remove_size_one_mesh_axis_from_type": False, "softmax_custom_jvp": False,
    "thread_guard": False, "threefry_partitionable": True, "transfer_guard": "allow",
    "transfer_guard_device_to_device": "allow", "transfer_guard_device_to_host": "allow",
    "transfer_guard_host_to_device": "allow"}
for _name, _default in _SETTING_NAMES.items():
    globals()[_name] = Setting("jax_" + _name, _default)
__all__ += list(_SETTING_NAMES)


def make_user_context(default_value=None):
    """A setting of the user's own (a `Setting` context manager) that jit code may read."""
    return Setting(f"user_context_{id(object())}", default_value)


@contextlib.contextmanager
def _setting(name, value):
    old = config.read(name)
    config.update(name, value)
    try:
        yield
    finally:
        config.update(name, old)


def disable_jit(disable=True):
    """Within the `with` block, functions given to `jit` run as plain Python on the
    call's values (print and inspect them); transformations still compile.

    >>> with jitad.disable_jit():
    ...     jitad.jit(lambda x: float(x) + 1.0)(1.0)
    2.0
    """
    for cls in api.Jitted.__subclasses__():   # the next call goes through the dispatcher
        if "__call__" in cls.__dict__:
            cls.__call__ = api.Jitted.__call__
    return _setting("jax_disable_jit", bool(disable))


def clear_caches():
    """Forget every compiled signature: the next call of each jitted function compiles again."""
    for cls in api.Jitted.__subclasses__():
        cls.__call__ = api.Jitted.__call__
    import gc
    for obj in gc.get_objects():
        if isinstance(obj, api.Jitted):
            obj._forget()


# -- wrappers ------------------------------------------------------------------------

def checkpoint(fun, *, prevent_cse=True, policy=None, static_argnums=(), static_argnames=(), concrete=False):
    """`fun` recomputed during the backward pass instead of keeping its intermediates
    (jitad's `checkpoint` under JAX's signature). jitad saves nothing inside `fun`, which
    is `policy=jax.checkpoint_policies.nothing_saveable`; other policies keep more in
    JAX and give the same values here. `static_argnums` are passed through as Python values.

    >>> jitad.grad(jitad.checkpoint(lambda x: jitad.sin(jitad.sin(x))))(0.0)
    1.0
    """
    api.check_callable(fun, "checkpoint")
    if policy is not None and not callable(policy):
        raise ArgumentError(f"checkpoint: policy={policy!r}; give a function of jitad.checkpoint_policies")
    nums = api.check_argnums(static_argnums, "checkpoint", "static_argnums", allow_empty=True)
    if not nums and not static_argnames:
        return _checkpoint(fun)
    names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)

    @functools.wraps(fun)
    def with_static(*args, **kwargs):
        fixed = {i % len(args): args[i] for i in nums}
        static = {n: kwargs.pop(n) for n in names if n in kwargs}
        inner = _checkpoint(lambda *dyn: fun(*_merge(dyn, fixed, len(args)), **kwargs, **static))
        return inner(*[a for i, a in enumerate(args) if i not in fixed])
    return with_static


remat = checkpoint


def named_call(fun, *, name=None):
    """`fun` under another name (JAX names its part of the staged program; jitad names
    the function): `jitad.named_call(f, name="layer")(x) == f(x)`."""
    api.check_callable(fun, "named_call")

    @functools.wraps(fun)
    def named(*args, **kwargs):
        return fun(*args, **kwargs)
    if name is not None:
        named.__name__ = named.__qualname__ = str(name)
    return named


@contextlib.contextmanager
def named_scope(name):
    """A context naming the code traced inside it (a label for profilers in JAX; the
    values computed are the same). `with jitad.named_scope("layer1"): ...`"""
    if not isinstance(name, str):
        raise ArgumentError(f"named_scope takes a string, got {type(name).__name__}")
    yield


@contextlib.contextmanager
def ensure_compile_time_eval():
    """A context in which values known when tracing are computed then: in jitad,
    computations on NumPy values are always done at trace time, so it changes nothing."""
    yield


def custom_gradient(fun):
    """A function with its own gradient: `fun(*args)` returns `(value, vjp)` with
    `vjp(g)` the cotangent of each argument (a tuple, or one value for one argument).

    >>> @jitad.custom_gradient
    ... def f(x):
    ...     return x ** 2, lambda g: (g * 10.0,)
    >>> jitad.grad(f)(3.0)
    10.0
    """
    api.check_callable(fun, "custom_gradient")

    def value(*args):
        return fun(*args)[0]
    value.__name__ = getattr(fun, "__name__", "custom_gradient")
    rule = custom_vjp(value)

    def backward(args, g):   # the backward pass runs `fun` again to get its vjp
        cts = fun(*args)[1](g)
        return cts if isinstance(cts, tuple) else (cts,)
    rule.defvjp(lambda *args: (fun(*args)[0], args), backward)
    return functools.wraps(fun)(lambda *args: rule(*args))


def closure_convert(fun, *example_args):
    """`(converted, consts)`: `fun` as a function of its arguments followed by the
    values it closes over. jitad's functions close over NumPy values, which need no
    hoisting, so `consts` is empty and `converted` is `fun`."""
    api.check_callable(fun, "closure_convert")
    return fun, []


def linear_transpose(fun, *primals, reduce_axes=()):
    """The transpose of the linear function `fun` (arguments shaped like `primals`, which
    may be ShapeDtypeStructs): a function of an output cotangent returning a tuple, one
    cotangent per argument.

    >>> jitad.linear_transpose(lambda x: 2.0 * x, 1.0)(3.0)
    (6.0,)
    """
    api.check_callable(fun, "linear_transpose")
    if reduce_axes:
        raise ArgumentError("linear_transpose: reduce_axes is no longer supported (JAX dropped it too)")

    def zeros(x):
        t = leaf_type(x)
        return np.zeros(t.shape, NUMPY_DTYPES[t.dtype]) if t.shape else NUMPY_DTYPES[t.dtype].type(0).item()
    points = tree_map(zeros, primals)

    def transposed(ct):
        return tuple(api.vjp(fun, *points)[1](ct))
    return transposed


def pure_callback(callback, result_shape_dtypes, *args, sharding=None, vmap_method=None, **kwargs):
    """`callback(*args, **kwargs)`, a pure Python function on NumPy values, its result checked
    against `result_shape_dtypes` (a pytree of ShapeDtypeStructs) and returned as arrays of
    those dtypes. Inside `jit` or `vmap` the compiled code calls back into Python with the
    run-time values (it may call a function of several results once per result, as a pure
    function allows); `vmap_method` as JAX's: "sequential" (the default) calls it once per
    lane, "expand_dims" once with size-1 axes on unbatched arguments, "broadcast_all" once
    with every argument broadcast. It has no derivative (`grad` raises, as JAX's does).

    >>> jitad.jit(lambda x: jitad.pure_callback(np.sin, jitad.ShapeDtypeStruct((2,), np.float64), x) * 2)(np.zeros(2))
    Array([0., 0.])
    """
    api.check_callable(callback, "pure_callback")
    if vmap_method not in VMAP_METHODS:
        raise ArgumentError(f"pure_callback: vmap_method={vmap_method!r}; use one of {VMAP_METHODS[1:]}")
    if current_frame() is not None or any(is_staged(x) for x in flatten((args, kwargs))[0]):
        return _staged_callback(callback, result_shape_dtypes, args, kwargs, vmap_method)
    return _checked_results(callback(*args, **kwargs), result_shape_dtypes)


def _staged_callback(callback, result_shape_dtypes, args, kwargs, vmap_method):
    """One `host_call` node per result leaf, calling `callback` on the arguments' values."""
    leaves, in_td = flatten((args, kwargs))
    wanted, out_td = flatten(result_shape_dtypes)

    def on_values(*values):
        call_args, call_kwargs = unflatten(in_td, list(values))
        got, td = flatten(callback(*call_args, **call_kwargs))
        if td != out_td:
            raise ArgumentError(f"pure_callback: the callback returned the structure {td}, but "
                                f"result_shape_dtypes has {out_td}")
        return got
    key = f"{getattr(callback, '__qualname__', 'callback')}@{id(callback):x}:{hash((str(in_td), str(out_td))):x}"
    HOST_FUNCTIONS[key] = on_values   # (kept: compiled code may call it later)
    outs = [N.bind(Op.HOST_CALL, *leaves, call=key, index=k, vmap_method=vmap_method,
                   out=(_ir_dtype(w.dtype), tuple(w.shape))) for k, w in enumerate(wanted)]
    return unflatten(out_td, outs)


def _ir_dtype(dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return "f32" if dtype.itemsize <= 4 else "f64"
    return "bool" if dtype.kind == "b" else "i64"


def _checked_results(out, result_shape_dtypes):
    """The callback's result `out` as arrays of the dtypes `result_shape_dtypes` gives."""
    wanted, td = flatten(result_shape_dtypes)
    got, out_td = flatten(out)
    if td != out_td:
        raise ArgumentError(f"pure_callback: the callback returned the structure {out_td}, but "
                            f"result_shape_dtypes has {td}")
    results = []
    for k, (w, g) in enumerate(zip(wanted, got)):
        if np.shape(g) != tuple(w.shape):
            raise ArgumentError(f"pure_callback: result {k} has shape {np.shape(g)}, but result_shape_dtypes "
                                f"gives {tuple(w.shape)}")
        results.append(np.asarray(g, dtype=w.dtype).view(Array))
    return unflatten(td, results)


# -- pmap on one device -------------------------------------------------------------

def pmap(fun, axis_name=None, *, in_axes=0, out_axes=0, static_broadcasted_argnums=(), devices=None,
         backend=None, axis_size=None, donate_argnums=()):
    """`fun` mapped over one device per slice of the mapped axis: with one CPU device,
    that axis must have size 1 (as in JAX); it runs as `vmap`.

    >>> jitad.pmap(lambda x: x * 2.0)(np.ones((1, 3)))
    Array([[2., 2., 2.]])
    """
    api.check_callable(fun, "pmap")
    _check_backend(backend)
    nums = api.check_argnums(static_broadcasted_argnums, "pmap", "static_broadcasted_argnums", allow_empty=True)
    batched = api.vmap(fun, in_axes, out_axes) if not nums else None

    @functools.wraps(fun)
    def mapped(*args):
        axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
        for k, (a, ax) in enumerate(zip(args, axes)):
            if k in nums or ax is None:
                continue
            for leaf in flatten(a)[0]:
                size = np.shape(leaf)[ax] if np.ndim(leaf) > ax else None
                if size != 1:
                    raise DeviceError(f"pmap: argument {k} has size {size} along the mapped axis {ax}, but "
                                      "there is 1 device; pmap needs one device per slice, so use "
                                      "jitad.vmap for this batch")
        if batched is not None:
            return _as_arrays(batched(*args))
        fixed = {i % len(args): args[i] for i in nums}
        dyn_axes = tuple(ax for i, ax in enumerate(axes) if i not in fixed)
        inner = api.vmap(lambda *d: fun(*_merge(d, fixed, len(args))), dyn_axes, out_axes)
        return _as_arrays(inner(*[a for i, a in enumerate(args) if i not in fixed]))
    return mapped


def _merge(dynamic, fixed, n):
    it = iter(dynamic)
    return [fixed[i] if i in fixed else next(it) for i in range(n)]


def _as_arrays(tree):
    return tree_map(_as_array, tree)


# -- sharding on one device ---------------------------------------------------------

def shard_map(f=None, /, *, out_specs=None, in_specs=None, mesh=None, axis_names=frozenset(), check_vma=True):
    """`f` run on each device's shard of its arguments: on one device, `f` on the whole
    arguments (every mesh axis has size 1)."""
    if f is None:
        return lambda g: shard_map(g, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                                   axis_names=axis_names, check_vma=check_vma)
    api.check_callable(f, "shard_map")
    if mesh is not None and getattr(mesh, "size", 1) != 1:
        raise DeviceError(f"shard_map: the mesh has {mesh.size} devices, but there is 1")
    return functools.wraps(f)(lambda *args: _as_arrays(f(*args)))


def smap(f=None, /, *, in_axes=None, out_axes=None, axis_name=None):
    """shard_map along one mesh axis: on one device, `f` on the whole arguments."""
    if f is None:
        return lambda g: smap(g, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)
    return shard_map(f)


def make_array_from_callback(shape, sharding, data_callback, dtype=None):
    """The array of `shape` whose one shard `data_callback(index)` returns (the whole array)."""
    index = tuple(slice(None) for _ in shape)
    data = np.asarray(data_callback(index), dtype=dtype)
    if data.shape != tuple(shape):
        raise ArgumentError(f"make_array_from_callback: the callback returned shape {data.shape}, not {tuple(shape)}")
    return data.view(Array)


def make_array_from_single_device_arrays(shape, sharding, arrays, *, dtype=None):
    """The array made of one array per device: the one array, of `shape`."""
    arrays = list(arrays)
    if len(arrays) != 1 or np.shape(arrays[0]) != tuple(shape):
        raise ArgumentError(f"make_array_from_single_device_arrays: give one array of shape {tuple(shape)} "
                            f"(there is 1 device), got {len(arrays)}")
    return np.asarray(arrays[0], dtype=dtype).view(Array)


def make_array_from_process_local_data(sharding, local_data, global_shape=None):
    """The global array from this process's data: with one process, that data."""
    data = np.asarray(local_data)
    if global_shape is not None and tuple(global_shape) != data.shape:
        raise ArgumentError(f"make_array_from_process_local_data: local data of shape {data.shape} is the whole "
                            f"array in one process, not {tuple(global_shape)}")
    return data.view(Array)


def fwd_and_bwd(fun, argnums, has_aux=False, jitted=True):
    """`(fwd, bwd)`: `fwd(*args)` is `(fun(*args), residuals)` (with `has_aux`, `(out,
    residuals, aux)`), `bwd(residuals, cotangent)` the cotangents of the `argnums`
    arguments (one value for an int argnums), compiled once for every call."""
    api.check_callable(fun, "fwd_and_bwd")
    nums = api.check_argnums(argnums, "fwd_and_bwd")
    value = (lambda *a: fun(*a)[0]) if has_aux else fun

    def fwd(*args):
        out = fun(*args)
        if has_aux:
            return out[0], args, out[1]
        return out, args

    def pullback(args, ct):
        cts = api.pullback_staged(value, tuple(args), ct)
        picked = tuple(cts[i % len(args)] for i in nums)
        return picked[0] if isinstance(argnums, (int, np.integer)) else picked
    bwd = api.staged_jit(pullback)
    return (api.jit(fwd) if jitted else fwd), bwd


# -- information ---------------------------------------------------------------------

def print_environment_info(return_string=False):
    """The versions of jitad, Python, NumPy and llvmlite and the device, printed (or
    returned with `return_string=True`)."""
    from .version import __version__
    try:
        import llvmlite
        llvm_version = llvmlite.__version__
    except ImportError:   # pragma: no cover (a dependency)
        llvm_version = "missing"
    text = (f"jitad:    {__version__}\nnumpy:    {np.__version__}\nllvmlite: {llvm_version}\n"
            f"python:   {sys.version}\nplatform: {platform.platform()}\ndevices:  {devices()}\n")
    if return_string:
        return text
    print(text, end="")
    return None


def live_arrays(platform=None):
    """The `jitad.numpy.Array`s alive in this process (results of compiled functions,
    `device_put`, ...)."""
    _check_backend(platform)
    import gc
    return [obj for obj in gc.get_objects() if type(obj) is Array]


def ds(start, size=None, stride=None):
    """A slice of `size` elements from `start`, every `stride`-th (JAX's `jax.ds` for
    indexing refs and arrays): `x[jitad.ds(1, 3)]` is `x[1:4]`. For a start known only
    when the code runs, use `jitad.lax.dynamic_slice`."""
    if is_staged(start) or is_staged(size):
        raise ArgumentError("ds: the start and size must be known when tracing; for a staged start use "
                            "jitad.lax.dynamic_slice(x, (start,), (size,))")
    stride = 1 if stride is None else stride
    if size is None:
        return slice(None, None, stride) if start is None else slice(start, start + 1, stride)
    start = 0 if start is None else start
    return slice(start, start + size * stride - (stride - 1) if stride > 0 else None, stride)


def effects_barrier():
    """Wait for pending side effects (debug prints): jitad's run before a call returns."""
    return None


def _declined(name, alternative):
    def declined(*args, **kwargs):
        raise JitadError(f"jitad.{name} is not available: {alternative}")
    declined.__name__ = name
    declined.__doc__ = f"Not available in jitad: {alternative}"
    return declined

