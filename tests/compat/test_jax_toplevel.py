"""JAX's top-level names at jitad's path, each called and compared with JAX (x64) on the
same inputs: the one CPU device, shapes without values, settings, wrappers and the
transformation keywords JAX accepts."""
import collections

import numpy as np
import pytest

import jitad

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax.config.update("jax_enable_x64", True)


def close(ours, theirs, **kw):
    ol, ot = jitad.tree_util.tree_flatten(ours)
    tl, tt = jax.tree_util.tree_flatten(theirs)
    assert len(ol) == len(tl)
    for a, b in zip(ol, tl):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), **kw)


# -- the device -------------------------------------------------------------------------

def test_one_cpu_device_like_jax_on_a_cpu_install():
    assert repr(jitad.devices()) == repr(jax.devices()) == "[CpuDevice(id=0)]"
    assert repr(jitad.local_devices()) == repr(jax.local_devices())
    assert jitad.device_count() == jax.device_count() == 1
    assert jitad.local_device_count() == jax.local_device_count() == 1
    assert jitad.default_backend() == jax.default_backend() == "cpu"
    for name in ("process_count", "process_index", "host_count", "host_id"):
        assert getattr(jitad, name)() == getattr(jax, name)()
    assert list(jitad.process_indices()) == list(jax.process_indices()) == [0]
    assert list(jitad.host_ids()) == [0]
    d, jd = jitad.devices()[0], jax.devices()[0]
    assert (d.id, d.platform, d.process_index) == (jd.id, jd.platform, jd.process_index)
    assert str(d) == str(jd)
    with pytest.raises(jitad.DeviceError, match="process 0 of 1"):
        jitad.local_devices(process_index=3)
    with pytest.raises(jitad.DeviceError, match="cpu"):
        jitad.devices("gpu")


def test_device_put_get_and_readiness():
    x = np.arange(3.0)
    put = jitad.device_put({"a": x, "b": (2.0, None)})
    assert type(put["a"]) is jitad.numpy.Array and put["b"][1] is None
    assert np.shape(put["b"][0]) == np.shape(jax.device_put(2.0)) == ()
    np.testing.assert_array_equal(put["a"], jax.device_put(x))
    got = jitad.device_get(put)
    assert type(got["a"]) is type(jax.device_get(jax.device_put(x))) is np.ndarray
    tree = (1.0, np.ones(2))
    assert jitad.block_until_ready(tree) is tree
    assert jitad.copy_to_host_async(tree) is tree
    assert jitad.effects_barrier() is None
    with pytest.raises(jitad.DeviceError, match="not a device"):
        jitad.device_put(x, 3)


def test_sharding_on_one_device():
    mesh = jitad.make_mesh((1,), ("batch",))
    jmesh = jax.make_mesh((1,), ("batch",))
    assert mesh.shape == dict(jmesh.shape) and mesh.size == jmesh.size == 1
    s = jitad.NamedSharding(mesh, jitad.P("batch"))
    assert tuple(s.spec) == tuple(jax.sharding.PartitionSpec("batch")) and s.is_fully_replicated
    y = jitad.reshard(np.ones(4), s)
    np.testing.assert_array_equal(y, np.ones(4))
    f = jitad.shard_map(lambda x: 2.0 * x, mesh=mesh, in_specs=jitad.P(), out_specs=jitad.P())
    jf = jax.shard_map(lambda x: 2.0 * x, mesh=jmesh, in_specs=jax.P(), out_specs=jax.P())
    close(f(np.arange(4.0)), jf(np.arange(4.0)))
    close(jitad.smap(lambda x: x + 1.0)(np.arange(2.0)), np.arange(2.0) + 1.0)
    with jitad.set_mesh(mesh):
        assert jitad.sharding.get_mesh() is mesh
    assert jitad.sharding.get_mesh() is None
    with pytest.raises(jitad.DeviceError, match="there is 1"):
        jitad.make_mesh((2,), ("batch",))
    arr = jitad.make_array_from_callback((2, 2), s, lambda index: np.eye(2)[index])
    jarr = jax.make_array_from_callback((2, 2), jax.sharding.SingleDeviceSharding(jax.devices()[0]),
                                        lambda index: np.eye(2)[index])
    close(arr, jarr)
    close(jitad.make_array_from_single_device_arrays((2,), s, [np.ones(2)]), np.ones(2))
    close(jitad.make_array_from_process_local_data(s, np.ones(3)), np.ones(3))
    with pytest.raises(jitad.ArgumentError, match="one array"):
        jitad.make_array_from_single_device_arrays((2,), s, [np.ones(2), np.ones(2)])


# -- shapes and programs ----------------------------------------------------------------

def test_eval_shape_and_shape_dtype_struct():
    def f(x, y):
        return {"s": x.sum(axis=0), "p": x * y * 2.0, "i": (x > 0).astype(np.int64)}
    # (a Python float argument is an f64 value in jitad, a weakly typed one in JAX: an array here)
    ours = jitad.eval_shape(f, jitad.ShapeDtypeStruct((3, 2), np.float32), np.float32(2.0))
    theirs = jax.eval_shape(f, jax.ShapeDtypeStruct((3, 2), jnp.float32), np.float32(2.0))
    for k in theirs:
        assert ours[k].shape == theirs[k].shape and ours[k].dtype == theirs[k].dtype, k
    assert repr(jitad.ShapeDtypeStruct((3,), np.float32)) == repr(jax.ShapeDtypeStruct((3,), jnp.float32))
    s = jitad.ShapeDtypeStruct((2, 3), np.float64)
    assert (s.ndim, s.size, len(s)) == (2, 6, 2)
    assert s == jitad.ShapeDtypeStruct((2, 3), "float64") and hash(s) == hash(jitad.ShapeDtypeStruct((2, 3), "f8"))
    empty = jitad.eval_shape(lambda x: x[:0], np.ones((4, 0)))   # empty axes
    assert empty.shape == jax.eval_shape(lambda x: x[:0], np.ones((4, 0))).shape == (0, 0)
    with pytest.raises(jitad.ArgumentError, match="not a dtype|not one jitad"):
        jitad.ShapeDtypeStruct((2,), np.complex128)


def test_typeof_and_make_jaxpr():
    for x in (1.0, np.ones(3), np.float32(2.0), np.arange(2), True, np.zeros((0, 2), bool)):
        assert str(jitad.typeof(x)) == str(jax.typeof(x)), x
    jaxpr = jitad.make_jaxpr(lambda x, n: x * n, static_argnums=1)(np.ones(2), 3.0)
    text = str(jaxpr)
    assert "mul" in text and "f64[2]" in text
    assert [str(a) for a in jaxpr.in_avals] == [str(a) for a in jax.make_jaxpr(lambda x: x * 3.0)(np.ones(2)).in_avals]
    assert [str(a) for a in jaxpr.out_avals] == ["float64[2]"]
    jaxpr, shape = jitad.make_jaxpr(lambda x: (x, x.sum()), return_shape=True)(np.ones(2))
    jshape = jax.make_jaxpr(lambda x: (x, x.sum()), return_shape=True)(np.ones(2))[1]
    assert [(s.shape, s.dtype) for s in shape] == [(s.shape, s.dtype) for s in jshape]


def test_print_environment_info():
    text = jitad.print_environment_info(return_string=True)
    assert "jitad" in text and np.__version__ in text and "CpuDevice" in text


# -- jit keywords and disable_jit ---------------------------------------------------------

def test_jit_static_argnames_and_cpu_keywords():
    def power(x, n, *, scale=1.0, mode="pow"):
        return scale * x ** n if mode == "pow" else scale * x * n
    ours = jitad.jit(power, static_argnames=("n", "mode"), donate_argnums=0, inline=True, keep_unused=True,
                     backend="cpu", device=jitad.devices()[0])
    theirs = jax.jit(power, static_argnames=("n", "mode"))
    for args, kw in (((2.0, 3), {}), ((2.0,), {"n": 2}), ((np.arange(3.0), 2), {"mode": "mul", "scale": 0.5})):
        close(ours(*args, **kw), theirs(*args, **kw))
    with pytest.raises(jitad.ArgumentError, match="hashable"):
        jitad.jit(power, static_argnames="mode")(1.0, 2, mode=[1])
    with pytest.raises(jitad.ArgumentError, match="cpu"):
        jitad.jit(power, backend="tpu")


def test_disable_jit_runs_python_on_values():
    seen = []

    def f(x):
        seen.append(type(x))
        return x * 2.0
    g = jitad.jit(f)
    g(np.ones(2))
    assert seen[-1] is not np.ndarray   # traced
    with jitad.disable_jit():
        out = g(np.ones(2))
        assert seen[-1] is np.ndarray and float(jitad.grad(lambda x: x * x)(3.0)) == 6.0
    with jax.disable_jit():
        jout = jax.jit(f)(np.ones(2))
    close(out, jout)
    g(np.ones(2))
    assert seen[-1] is np.ndarray or len(seen) == 3   # compiled again: no new Python call
    assert len(seen) == 3


def test_settings_as_context_managers():
    assert jitad.debug_nans.value is False
    with jitad.debug_nans(True):
        assert jitad.config.jax_debug_nans and jitad.debug_nans.value
    assert not jitad.config.jax_debug_nans
    with jitad.numpy_rank_promotion("raise"), jitad.transfer_guard("disallow"):
        assert jitad.config.jax_numpy_rank_promotion == "raise" and jitad.transfer_guard.value == "disallow"
    assert jitad.numpy_rank_promotion.value == jax.numpy_rank_promotion.value == "allow"
    ctx = jitad.make_user_context(3)
    with ctx(4):
        assert ctx.value == 4
    assert ctx.value == 3


# -- transformations with JAX's keywords ---------------------------------------------------

def test_grad_keywords():
    f = lambda x, n: x * n   # noqa: E731
    ours = jitad.grad(f, argnums=(0, 1), allow_int=True)(2.0, 3)
    theirs = jax.grad(f, argnums=(0, 1), allow_int=True)(2.0, 3)
    assert float(ours[0]) == float(theirs[0]) == 3.0
    assert ours[1].dtype == theirs[1].dtype == jax.dtypes.float0 and ours[1].shape == theirs[1].shape
    g = jitad.grad(f, argnums=(0, 1), allow_int=True)
    assert float(g(2.0, 5)[0]) == float(jax.grad(f, argnums=(0, 1), allow_int=True)(2.0, 5)[0]) == 5.0   # ints traced
    v, g = jitad.value_and_grad(lambda p: jitad.sum(p[0] * p[1]), allow_int=True)((2.0, np.arange(3)))
    jv, jg = jax.value_and_grad(lambda p: jnp.sum(p[0] * p[1]), allow_int=True)((2.0, np.arange(3)))
    close(v, jv)
    assert g[1].shape == jg[1].shape == (3,) and g[1].dtype == jg[1].dtype
    sin_sq = lambda x: jitad.sin(x) ** 2   # noqa: E731
    close(jitad.grad(sin_sq, holomorphic=False, reduce_axes=())(0.3), jax.grad(lambda x: jnp.sin(x) ** 2)(0.3))
    with pytest.raises(jitad.ArgumentError, match="complex"):   # (JAX: a TypeError, real input)
        jitad.grad(sin_sq, holomorphic=True)(0.3)
    with pytest.raises(jitad.ArgumentError, match="reduce_axes"):
        jitad.value_and_grad(sin_sq, reduce_axes=("i",))


def test_vmap_axis_size_and_pmap_on_one_device():
    close(jitad.vmap(lambda x: x * 2.0, in_axes=None, axis_size=3)(1.5),
          jax.vmap(lambda x: x * 2.0, in_axes=None, axis_size=3)(1.5))
    close(jitad.vmap(lambda x, y: x * y, in_axes=(0, None), axis_name="i", axis_size=2)(np.ones(2), 3.0),
          jax.vmap(lambda x, y: x * y, in_axes=(0, None), axis_name="i", axis_size=2)(np.ones(2), 3.0))
    x = np.arange(3.0).reshape(1, 3)
    close(jitad.pmap(lambda v: v * 2.0, axis_name="d")(x), jax.pmap(lambda v: v * 2.0, axis_name="d")(x))
    close(jitad.pmap(lambda v, k: v * k, static_broadcasted_argnums=1)(x, 3.0),
          jax.pmap(lambda v, k: v * k, static_broadcasted_argnums=1)(x, 3.0))
    with pytest.raises(jitad.DeviceError, match="1 device"):
        jitad.pmap(lambda v: v)(np.ones((2, 3)))
    with pytest.raises(Exception):   # noqa: B017 (JAX's own error class varies by version)
        jax.pmap(lambda v: v)(np.ones((2, 3)))


def test_checkpoint_remat_signature():
    f = lambda x, n: jitad.sin(x) ** n   # noqa: E731
    jf = lambda x, n: jnp.sin(x) ** n   # noqa: E731
    for name in ("checkpoint", "remat"):
        ours = jitad.grad(getattr(jitad, name)(f, static_argnums=(1,), prevent_cse=False,
                                               policy=jitad.checkpoint_policies.nothing_saveable))(0.4, 3)
        theirs = jax.grad(getattr(jax, name)(jf, static_argnums=(1,)))(0.4, 3)
        close(ours, theirs)
    close(jitad.grad(jitad.checkpoint(lambda x: jitad.sin(jitad.sin(x))))(0.2),
          jax.grad(jax.checkpoint(lambda x: jnp.sin(jnp.sin(x))))(0.2))
    with pytest.raises(jitad.ArgumentError, match="policy"):
        jitad.checkpoint(f, policy=3)


def test_custom_gradient_linear_transpose_closure_convert_named():
    @jitad.custom_gradient
    def f(x):
        return x ** 2, lambda g: (g * 10.0,)

    @jax.custom_gradient
    def jf(x):
        return x ** 2, lambda g: (g * 10.0,)
    close(jitad.grad(f)(3.0), jax.grad(jf)(3.0))
    close(jitad.jit(f)(3.0), jf(3.0))
    close(jitad.linear_transpose(lambda x, y: 2.0 * x + y, 1.0, np.ones(2))(np.arange(2.0)),
          jax.linear_transpose(lambda x, y: 2.0 * x + y, 1.0, np.ones(2))(np.arange(2.0)))
    converted, consts = jitad.closure_convert(lambda x: x * 2.0, 1.0)
    jconverted, jconsts = jax.closure_convert(lambda x: x * 2.0, 1.0)
    assert consts == list(jconsts) == [] and converted(2.0) == jconverted(2.0)
    named = jitad.named_call(lambda x: x + 1.0, name="layer")
    assert named.__name__ == "layer" and named(1.0) == jax.named_call(lambda x: x + 1.0, name="layer")(1.0)
    with jitad.named_scope("block"), jitad.ensure_compile_time_eval():
        assert jitad.jit(lambda x: x * 3.0)(2.0) == 6.0
    with pytest.raises(jitad.ArgumentError, match="string"):
        with jitad.named_scope(3):
            pass


def test_fwd_and_bwd():
    f = lambda x, W: jitad.tanh(x @ W)   # noqa: E731
    jf = lambda x, W: jnp.tanh(x @ W)   # noqa: E731
    x, W, ct = np.array([0.1, 0.2]), np.array([[1.0, 2.0], [0.5, -1.0]]), np.array([1.0, -2.0])
    fwd, bwd = jitad.fwd_and_bwd(f, argnums=(0, 1))
    jfwd, jbwd = jax.fwd_and_bwd(jf, argnums=(0, 1))
    y, res = fwd(x, W)
    jy, jres = jfwd(x, W)
    close(y, jy)
    close(bwd(res, ct), jbwd(jres, ct))
    fwd1, bwd1 = jitad.fwd_and_bwd(f, argnums=1, jitted=False)
    jfwd1, jbwd1 = jax.fwd_and_bwd(jf, argnums=1)
    close(bwd1(fwd1(x, W)[1], ct), jbwd1(jfwd1(x, W)[1], ct))


def test_refs():
    r, jr = jitad.new_ref(np.zeros(3)), jax.new_ref(jnp.zeros(3))
    r[1] = 5.0
    jr[1] = 5.0
    r[...] += 1.0
    jr[...] += 1.0
    close(r[...], jr[...])
    close(jitad.freeze(r), jax.freeze(jr))
    with pytest.raises(jitad.JitadError, match="frozen or freed"):
        r[0]

    def f(x):
        ref = jitad.new_ref(x)
        ref[0] = 2.0
        ref[1] = ref[1] * 3.0
        return ref[...] * x

    def jf(x):
        ref = jax.new_ref(x)
        ref[0] = 2.0
        ref[1] = ref[1] * 3.0
        return ref[...] * x
    close(jitad.jit(f)(np.ones(2) * 2.0), jax.jit(jf)(np.ones(2) * 2.0))
    e = jitad.empty_ref(jitad.ShapeDtypeStruct((2,), np.float64))
    jitad.free_ref(e)
    with pytest.raises(jitad.JitadError):
        e[0] = 1.0


def test_dtypes_ops_dlpack_version_and_namespaces():
    assert jitad.dtypes.canonicalize_dtype(np.int32) == jax.dtypes.canonicalize_dtype(np.int32)
    assert jitad.dtypes.canonicalize_dtype(np.float32) == jax.dtypes.canonicalize_dtype(np.float32)
    assert jitad.dtypes.result_type(1.0, np.float32(1)) == jax.dtypes.result_type(1.0, np.float32(1))
    assert jitad.dtypes.issubdtype(np.float32, np.floating) and jitad.dtypes.itemsize_bits(np.float32) == 32
    assert jitad.dtypes.float0 == jax.dtypes.float0 and jitad.float0 == jax.float0
    assert jitad.dtypes.scalar_type_of(np.ones(2)) is jax.dtypes.scalar_type_of(np.ones(2))
    d, s = np.array([1.0, 2.0, 3.0, np.inf, 4.0]), np.array([0, 0, 2, 2, 5])   # 5: out of range, dropped
    for name in ("segment_sum", "segment_max", "segment_min", "segment_prod"):
        close(getattr(jitad.ops, name)(d, s, num_segments=4), getattr(jax.ops, name)(d, s, num_segments=4))
        close(jitad.jit(lambda d, s: getattr(jitad.ops, name)(d, s, num_segments=3))(d, s),
              getattr(jax.ops, name)(d, s, num_segments=3))
    close(jitad.ops.segment_sum(np.ones((3, 2)), np.array([1, 1, 0])),
          jax.ops.segment_sum(np.ones((3, 2)), np.array([1, 1, 0])))
    close(jitad.grad(lambda d: jitad.sum(jitad.ops.segment_sum(d, s, 3) ** 2))(np.arange(5.0)),
          jax.grad(lambda d: jnp.sum(jax.ops.segment_sum(d, s, 3) ** 2))(np.arange(5.0)))
    close(jitad.dlpack.from_dlpack(np.arange(3.0)), jax.dlpack.from_dlpack(np.arange(3.0)))
    assert jitad.dlpack.is_supported_dtype(np.float32) and jitad.version.__version__ == jitad.__version__
    assert jitad.typing.ArrayLike is not None and jitad.typing.DTypeLike is not None
    close(jitad.grad(lambda x: jitad.custom_derivatives.linear_call(lambda r, x: r * x, lambda r, t: r * t, 3.0, x))(1.0),
          3.0)
    close(jitad.vmap(jitad.custom_batching.sequential_vmap(lambda x: x * 2.0))(np.arange(3.0)),
          jax.vmap(jax.custom_batching.sequential_vmap(lambda x: x * 2.0))(np.arange(3.0)))
    assert jitad.custom_derivatives.custom_vjp is jitad.custom_vjp
    policies = jitad.checkpoint_policies
    assert policies.everything_saveable() and not policies.nothing_saveable()
    assert policies.save_only_these_names("a")(None, name="a") and not policies.save_any_names_but_these("a")(
        None, name="a")


def test_containers_of_every_kind_through_eval_shape():
    P = collections.namedtuple("P", "x y")
    tree = collections.OrderedDict([("b", P(np.ones(2), 1.0)), ("a", [np.zeros(3)])])
    ours = jitad.eval_shape(lambda t: t, tree)
    theirs = jax.eval_shape(lambda t: t, tree)
    assert type(ours) is type(theirs) and list(ours) == list(theirs) == ["b", "a"]
    assert type(ours["b"]) is P and ours["b"].x.shape == theirs["b"].x.shape


def test_debug_callback_and_pure_callback():
    seen, jseen = [], []

    def body(lib, store, xs):
        def step(i, s):
            lib.debug.callback(lambda i, s, w: store.append((int(i), float(s), np.asarray(w).tolist())), i, s,
                               w=xs[:2])
            return s + xs[i]
        return step
    xs = np.arange(1.0, 4.0)
    out = jitad.jit(lambda v: jitad.FOR(0, 3, body(jitad, seen, v), 0.0))(xs)
    jout = jax.jit(lambda v: jax.lax.fori_loop(0, 3, body(jax, jseen, v), 0.0))(xs)
    jax.effects_barrier()
    assert out == float(jout) and seen == jseen
    jitad.debug.callback(seen.append, 5.0)   # outside staged code: at once
    assert seen[-1] == 5.0
    g = jitad.grad(lambda x: (jitad.debug.callback(seen.append, x), x * x)[1])(3.0)
    assert g == 6.0 and seen[-1] == 3.0 and seen.count(3.0) == 1   # the forward pass only
    with pytest.raises(jitad.ArgumentError, match="function"):
        jitad.debug.callback(3.0)
    spec = jitad.ShapeDtypeStruct((2,), np.float32)
    x32 = np.array([0.5, 1.0], np.float32)
    ours = jitad.pure_callback(lambda x: np.sin(x), spec, x32)
    theirs = jax.pure_callback(lambda x: np.sin(x), jax.ShapeDtypeStruct((2,), jnp.float32), x32)
    assert ours.dtype == theirs.dtype and isinstance(ours, jitad.Array)
    close(ours, theirs)
    with pytest.raises(jitad.ArgumentError, match="shape"):
        jitad.pure_callback(lambda x: x, jitad.ShapeDtypeStruct((3,), np.float64), np.ones(2))
    # inside staged code: tests/compat/test_pure_callback.py


def test_monitoring_profiler_memory_ds_live_arrays(tmp_path):
    import json
    durations, events = [], []
    jitad.monitoring.register_event_duration_secs_listener(lambda e, d, **kw: durations.append((e, kw)))
    jitad.monitoring.register_event_listener(lambda e, **kw: events.append((e, kw)))
    try:
        jitad.jit(lambda x: x * 7.0 - 1.0)(2.0)
        jitad.monitoring.record_event("/user/event", step=3)
    finally:
        jitad.monitoring.clear_event_listeners()
    assert durations and durations[-1][0] == "/jitad/compile_duration_secs" and events == [("/user/event", {"step": 3})]
    with jitad.profiler.trace(tmp_path):
        with jitad.profiler.StepTraceAnnotation("train", step_num=1):
            jitad.profiler.annotate_function(lambda: None, name="inner")()
            jitad.jit(lambda x: x * 5.0 + 2.0)(1.0)
    names = [e["name"] for e in json.loads((tmp_path / "jitad.trace.json").read_text())["traceEvents"]]
    assert {"train", "inner", "/jitad/compile_duration_secs"} <= set(names)
    with pytest.raises(jitad.JitadError, match="no profiler trace"):
        jitad.profiler.stop_trace()
    assert [s.name for s in jitad.memory.Space] == list(jax.memory.Space.__members__)
    x = np.arange(10.0)
    for args in ((1, 3), (2, 3, 2), (0, 4, 3), (5, 0)):
        np.testing.assert_array_equal(x[jitad.ds(*args)], jnp.asarray(x)[jax.ds(*args)])
    y = jitad.jit(lambda v: v * 2.0)(np.ones(3))
    assert any(a is y for a in jitad.live_arrays())


def test_ahead_of_time_stages():
    def f(x, n):
        return jitad.sin(x) ** n

    def jf(x, n):
        return jnp.sin(x) ** n
    x = np.array([0.3, 0.6])
    traced = jitad.jit(f, static_argnums=1).trace(x, 2)
    jtraced = jax.jit(jf, static_argnums=1).trace(x, 2)
    assert [str(a) for a in traced.in_avals] == [str(a) for a in jtraced.jaxpr.in_avals]
    assert (traced.out_info.shape, traced.out_info.dtype) == (jtraced.out_info.shape, jtraced.out_info.dtype)
    lowered = traced.lower()
    assert "sin" in lowered.as_text()
    compiled = lowered.compile()
    close(compiled(np.array([0.1, 0.2]), 2), jax.jit(jf, static_argnums=1).lower(x, 2).compile()(np.array([0.1, 0.2])))
    with pytest.raises(jitad.ArgumentError, match="compiled for"):
        compiled(np.ones(3), 2)
    close(jitad.jit(lambda v: v * 2.0).lower(x).compile().call(x), 2.0 * x)


def test_linearize_with_aux():
    f = lambda x: (jitad.sin(x) * x, {"x2": x * 2.0})   # noqa: E731
    jf = lambda x: (jnp.sin(x) * x, {"x2": x * 2.0})   # noqa: E731
    x, v = np.array([0.2, 0.7]), np.array([1.0, -1.0])
    out, f_jvp, aux = jitad.linearize(f, x, has_aux=True)
    jout, jf_jvp, jaux = jax.linearize(jf, x, has_aux=True)
    close((out, f_jvp(v), aux), (jout, jf_jvp(v), jaux))


def test_jacobian_keywords():
    f = lambda x, y: jitad.sin(x) * y   # noqa: E731
    jf = lambda x, y: jnp.sin(x) * y   # noqa: E731
    x, y = np.array([0.1, 0.4]), np.array([2.0, -1.0])
    for name in ("jacfwd", "jacrev", "jacobian"):
        close(getattr(jitad, name)(f, argnums=(0, 1), holomorphic=False)(x, y),
              getattr(jax, name)(jf, argnums=(0, 1), holomorphic=False)(x, y))
        with pytest.raises(jitad.ArgumentError, match="complex"):
            getattr(jitad, name)(f, holomorphic=True)
    close(jitad.hessian(lambda x: jitad.sum(jitad.sin(x) ** 2), holomorphic=False)(x),
          jax.hessian(lambda x: jnp.sum(jnp.sin(x) ** 2))(x))
    with pytest.raises(jitad.ArgumentError, match="allow_int"):
        jitad.jacrev(f, allow_int=True)


@pytest.mark.parametrize("method", ["nearest", "linear", "cubic", "lanczos3", "lanczos5", "area", "cubic-pytorch"])
def test_image_resize_like_jax(method):
    x = np.random.default_rng(1).standard_normal((2, 5, 7, 3))
    for antialias in (True, False):   # one axis down and one up; one down to a single sample
        for shape in ((2, 3, 11, 3), (2, 1, 7, 3)):
            close(jitad.image.resize(x, shape, method, antialias=antialias),
                  jax.image.resize(x, shape, method, antialias=antialias), atol=1e-13)
    if method == "nearest":
        close(jitad.image.resize(np.arange(6).reshape(2, 3), (4, 5), method),
              jax.image.resize(np.arange(6).reshape(2, 3), (4, 5), method))   # ints stay ints
        return
    close(jitad.image.scale_and_translate(x, (2, 8, 7, 3), (1,), np.array([1.5]), np.array([0.3]), method),
          jax.image.scale_and_translate(x, (2, 8, 7, 3), (1,), np.array([1.5]), np.array([0.3]), method), atol=1e-13)
    if method in ("linear", "area"):   # compiled, and differentiated
        shape = (2, 4, 9, 3)
        close(jitad.jit(lambda v: jitad.image.resize(v, shape, method))(x), jax.image.resize(x, shape, method),
              atol=1e-13)
        close(jitad.grad(lambda v: jitad.sum(jitad.image.resize(v, shape, method) ** 2))(x),
              jax.grad(lambda v: jnp.sum(jax.image.resize(v, shape, method) ** 2))(x), atol=1e-12)
        assert jitad.image.resize(x[:0], (0, 5, 2, 3), method).shape == (0, 5, 2, 3)
    with pytest.raises(jitad.ArgumentError, match="unknown resize method"):
        jitad.image.resize(x, (2, 4, 9, 3), "bogus")
