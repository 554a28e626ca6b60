"""Results of compiled functions are `jitad.numpy.Array`s with what JAX programs use of a
`jax.Array`, compared with JAX's answers on the same values."""
import numpy as np
import pytest

import jitad

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)


def results():
    """(jitad result, JAX result) pairs: jit, grad, vmap, pytree results, an empty array, ints, bools."""
    x = np.arange(6.0).reshape(2, 3)
    return [
        (jitad.jit(lambda v: v * 2.0)(x), jax.jit(lambda v: v * 2.0)(x)),
        (jitad.grad(lambda v: jitad.sum(v ** 2))(x), jax.grad(lambda v: jnp.sum(v ** 2))(x)),
        (jitad.vmap(lambda v: v + 1.0)(x), jax.vmap(lambda v: v + 1.0)(x)),
        (jitad.jit(lambda v: {"a": (v[0], v > 2.0)})(x)["a"][1], jax.jit(lambda v: {"a": (v[0], v > 2.0)})(x)["a"][1]),
        (jitad.jit(lambda v: v[:, :0])(x), jax.jit(lambda v: v[:, :0])(x)),
        (jitad.jit(lambda n: jitad.arange(3) * n)(2), jax.jit(lambda n: jnp.arange(3) * n)(2)),
    ]


def test_results_are_arrays_with_jax_methods():
    for ours, theirs in results():
        assert isinstance(ours, jitad.Array) and isinstance(ours, np.ndarray)
        assert ours.block_until_ready() is ours
        assert ours.copy_to_host_async() is None and theirs.copy_to_host_async() is None
        assert repr(ours.device) == repr(theirs.device) and str(ours.device) == str(theirs.device)
        assert {repr(d) for d in ours.devices()} == {repr(d) for d in theirs.devices()}
        assert ours.is_fully_replicated == theirs.is_fully_replicated
        assert ours.is_fully_addressable == theirs.is_fully_addressable
        assert ours.sharding.is_fully_replicated and repr(ours.sharding.device_set) == repr(theirs.sharding.device_set)
        assert repr(ours.sharding) == repr(theirs.sharding) and ours.sharding.num_devices == 1
        assert ours.sharding.shard_shape(ours.shape) == theirs.sharding.shard_shape(theirs.shape)
        assert ours.sharding.device_set == set(jitad.devices())
        assert ours.sharding == jitad.sharding.SingleDeviceSharding(jitad.devices()[0])
        np.testing.assert_array_equal(ours.addressable_data(0), theirs.addressable_data(0))
        shards, jshards = ours.addressable_shards, theirs.addressable_shards
        assert len(shards) == len(jshards) == 1 and shards[0].index == jshards[0].index
        np.testing.assert_array_equal(shards[0].data, jshards[0].data)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape and ours.size == theirs.size
        for name in ("T", "mT", "real") if ours.ndim >= 2 else ("T", "real"):
            np.testing.assert_array_equal(getattr(ours, name), getattr(theirs, name))
        np.testing.assert_array_equal(ours.astype(np.float32), theirs.astype(np.float32))
        np.testing.assert_array_equal(ours.reshape(-1), theirs.reshape(-1))
        if ours.size:
            np.testing.assert_allclose(ours.sum(), theirs.sum())
            np.testing.assert_array_equal(ours.at[0].set(1).astype(float), theirs.at[0].set(1).astype(float))
            assert ours.reshape(-1)[:1].item() == theirs.reshape(-1)[:1].item()
        assert ours.on_device_size_in_bytes() == ours.nbytes and ours.unsafe_buffer_pointer() != 0
        assert not ours.is_deleted()
        with pytest.raises(IndexError, match="one device"):
            ours.addressable_data(1)


def test_array_results_feed_back_into_compiled_code():
    f = jitad.jit(lambda v: v * 2.0)
    y = f(np.ones(3))
    z = f(y)   # an Array argument takes the native path too
    assert isinstance(z, jitad.Array) and list(z) == [4.0, 4.0, 4.0]
    y2 = y.at[1].add(5.0)
    assert isinstance(y2, jitad.Array) and list(y2) == [2.0, 7.0, 2.0] and list(y) == [2.0, 2.0, 2.0]
    w = y
    w += 1.0   # a new array, as in JAX: y keeps its values
    assert list(y) == [2.0, 2.0, 2.0] and list(w) == [3.0, 3.0, 3.0]


def test_scalar_results_stay_python_numbers():
    assert type(jitad.jit(lambda x: x * 2.0)(3.0)) is float
    assert type(jitad.grad(lambda x: x * x)(3.0)) is float


def test_results_pass_into_jax_functions():
    jax = pytest.importorskip("jax")
    y = jitad.jit(lambda x: x * 2.0)(np.ones(3))
    np.testing.assert_allclose(jax.numpy.sin(y), np.sin(2.0 * np.ones(3)))
    np.testing.assert_allclose(jax.jit(lambda v: v + 1.0)(y), 3.0 * np.ones(3))
    np.testing.assert_allclose(jax.grad(lambda v: jnp.sum(v ** 2))(y), 4.0 * np.ones(3))
    np.testing.assert_allclose(jax.vmap(jnp.cos)(y), np.cos(2.0 * np.ones(3)))
    np.testing.assert_allclose(jax.device_put(y), y)


@pytest.mark.slow   # (a sweep of every name, ~9 s: JAX's eager calls on each)
def test_numpy_functions_on_python_numbers_give_arrays_where_jax_does():
    """Every `jitad.numpy` function that JAX's also has, called on Python numbers: where
    JAX returns an array, jitad returns an `Array` (not a Python number), of JAX's value.
    `where` of Python numbers gives a Python number, as autograd's does (its own tests)."""
    import warnings

    import jitad.numpy as tnp
    checked, wrong = 0, []
    effects = {"load", "save", "savez", "fromfile", "set_printoptions", "printoptions", "where"}   # files, settings
    for name in sorted(n for n in dir(jnp) if not n.startswith("_") and hasattr(tnp, n) and n not in effects):
        theirs_fn, ours_fn = getattr(jnp, name), getattr(tnp, name)
        if isinstance(theirs_fn, type) or not callable(theirs_fn) or not callable(ours_fn):
            continue
        for args in [(0.5,), (0.5, 0.25), (True,), (3,)]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    theirs = theirs_fn(*args)
                except Exception:   # JAX refuses these arguments: try the next ones
                    continue
                if not isinstance(theirs, jax.Array):
                    break
                try:
                    ours = ours_fn(*args)
                except Exception:   # a refusal (a bool as a shape, a float as a width) is not this test's
                    break
            if not isinstance(ours, jitad.Array) or ours.shape != theirs.shape or \
                    not np.allclose(ours, theirs, rtol=1e-12, equal_nan=True):
                wrong.append((name, args, repr(ours), repr(theirs)))
            checked += 1
            break
    assert not wrong and checked > 150, (checked, wrong)
