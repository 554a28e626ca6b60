"""The GPU backend (`device="cuda"`): the CPU backend's tests, run on numba-cuda.

Without a GPU these run on numba-cuda's CUDA simulator (conftest sets
NUMBA_ENABLE_CUDASIM=1 unless told otherwise), at small sizes; on a GPU machine run
`NUMBA_ENABLE_CUDASIM=0 pytest -m gpu`.
Every result is compared with the CPU backend (itself checked against NumPy, finite
differences and JAX) or with NumPy directly.
"""
import os
import sys

import numpy as np
import pytest

import jitad
import jitad.random
from jitad import FOR, FUN, IF, WHILE
from jitad.numeric import matmul_t
from jitad.testing import check_grads

from . import test_ops as T
from .test_tensors import CONTROL, W33, X3, _params, _tree, _treelstm_numpy, treelstm_loss

pytestmark = pytest.mark.gpu
cuda = pytest.importorskip("numba.cuda")
if not cuda.is_available():
    pytest.skip("no CUDA GPU and the simulator is off", allow_module_level=True)
SIMULATED = bool(__import__("numba").config.ENABLE_CUDASIM)


@pytest.fixture(autouse=True, scope="module")
def _fast_simulator():
    """The simulator runs each GPU thread as a Python thread and polls them; a short GIL
    switch interval makes that polling ~8x cheaper."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    yield
    sys.setswitchinterval(old)


def on_gpu(f, **kw):
    return jitad.jit(f, device="cuda", **kw)


def assert_trees_close(got, want, rtol=1e-10, atol=1e-12):
    g_leaves, g_td = jitad.pytree.flatten(got)
    w_leaves, w_td = jitad.pytree.flatten(want)
    assert g_td == w_td
    for a, b in zip(g_leaves, w_leaves):
        assert np.shape(a) == np.shape(b)
        if isinstance(b, np.ndarray):
            assert np.asarray(a).dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


# -- every op spec of tests/lowering/test_ops.py ----------------------------------------------

@pytest.mark.parametrize("spec", T.cases("gpu", T.OP_SPECS))
def test_op_forward_matches_numpy(spec):
    args = T.make_args(spec)
    got = on_gpu(T.staged(spec))(*args)
    want = T.reference(spec, args)
    if isinstance(got, np.ndarray):
        assert got.dtype == np.asarray(want).dtype
    T.assert_close(got, want, spec.rtol, args, spec.name)


@pytest.mark.parametrize("spec", T.cases("gpu", T.GRAD_SPECS))
def test_op_gradient_matches_cpu(spec):
    args = T.make_args(spec)
    f, pos = T.scalarized(spec, args), T.float_positions(spec)
    got = jitad.grad(f, argnums=pos, device="cuda")(*args)
    want = T.compiled_grad(spec)(*args)
    for k, (a, b) in enumerate(zip(got, want)):
        T.assert_close(a, b, 1e-10, args, f"{spec.name}: gradient of argument {k}")


def test_float32_stays_float32():
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    y = on_gpu(lambda x: jitad.tanh(x) * 2.0 + jitad.sum(x, axis=0))(x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, np.tanh(x) * 2 + x.sum(0), rtol=1e-6)
    g = jitad.grad(lambda x: jitad.sum(jitad.sigmoid(x) * x), device="cuda")(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, jitad.grad(lambda x: jitad.sum(jitad.sigmoid(x) * x))(x), rtol=1e-5)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 5, 2), (9, 4, 7)])
def test_tiled_matmul_with_transposes(m, k, n, ta, tb):
    """Shapes that are not multiples of the tile, and both operand layouts."""
    r = np.random.default_rng(m * 100 + k * 10 + n)
    a, b = r.standard_normal((k, m) if ta else (m, k)), r.standard_normal((n, k) if tb else (k, n))
    got = on_gpu(lambda a, b: matmul_t(a, b, ta=ta, tb=tb))(a, b)
    np.testing.assert_allclose(got, (a.T if ta else a) @ (b.T if tb else b), rtol=1e-12, atol=1e-12)


def test_tiled_matmul_is_free_of_races_between_simulated_threads():
    """Threads of one block share the tiles; under the simulator (a Python thread each)
    a very short GIL switch interval interleaves them as much as possible. Static shared
    arrays raced there (the simulator hands them out through an unlocked dict): ~15% of
    these products came out wrong."""
    r = np.random.default_rng(7)
    a, b = r.standard_normal((9, 4)), r.standard_normal((4, 7))
    f = on_gpu(lambda a, b: a @ b)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        wrong = sum(not np.allclose(f(a, b), a @ b, rtol=1e-12, atol=1e-12) for _ in range(40))
    finally:
        sys.setswitchinterval(old)
    assert wrong == 0


# -- control flow stays on the host ---------------------------------------------------

@pytest.mark.parametrize("name", sorted(CONTROL))
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_control_flow_gradients_match_cpu(name, sign):
    f = CONTROL[name]
    args = (W33, sign * X3)
    assert on_gpu(f)(*args) == pytest.approx(jitad.jit(f)(*args), rel=1e-12)
    assert_trees_close(jitad.grad(f, argnums=(0, 1), device="cuda")(*args),
                       jitad.grad(f, argnums=(0, 1))(*args))


def test_check_grads_on_the_device():
    check_grads(CONTROL["while_data_dependent"], (W33, X3), device="cuda")


def test_scalar_recursion_and_branches():
    @FUN(out=jitad.ShapeDtype((), "f64"))
    def power(x, n):
        return IF(n == 0, lambda: 1.0, lambda: x * power(x, n - 1))
    f = lambda x, n: power(x, n) + WHILE(lambda s: s < 10.0, lambda s: s * 1.5 + x, 1.0)
    assert on_gpu(f)(1.3, 4) == pytest.approx(jitad.jit(f)(1.3, 4), rel=1e-14)
    assert jitad.grad(f, device="cuda")(1.3, 4) == pytest.approx(jitad.grad(f)(1.3, 4), rel=1e-12)


def test_treelstm_matches_numpy_and_cpu_gradients():
    p = _params()
    f = on_gpu(treelstm_loss)
    for seed, n in [(0, 1), (2, 5)]:
        tree = _tree(seed, n)
        assert f(p, tree) == pytest.approx(_treelstm_numpy(p, tree), rel=1e-12)
    tree = _tree(4, 4)
    assert_trees_close(jitad.jit_grad(treelstm_loss, device="cuda")(p, tree),
                       jitad.jit_grad(treelstm_loss)(p, tree))


def rnn_loss(p, xs, ys):
    """A char-RNN over a sequence: embedding gather, FOR over time, cross-entropy."""
    def step(t, carry):
        h, loss = carry
        h = jitad.tanh(p["Wx"][xs[t]] + h @ p["Wh"] + p["b"])
        logits = h @ p["Wy"]
        return h, loss + jitad.logsumexp(logits, 0) - logits[ys[t]]
    return FOR(0, xs.shape[0], step, (np.zeros(p["Wh"].shape[0]), 0.0))[1]


def test_char_rnn_training_step_matches_cpu():
    r = np.random.default_rng(3)
    V, Hd, L = 6, 5, 4
    p = {"Wx": r.standard_normal((V, Hd)) * 0.5, "Wh": r.standard_normal((Hd, Hd)) * 0.5,
         "b": np.zeros(Hd), "Wy": r.standard_normal((Hd, V)) * 0.5}
    xs, ys = r.integers(0, V, L), r.integers(0, V, L)
    assert_trees_close(jitad.jit_grad(rnn_loss, device="cuda")(p, xs, ys), jitad.jit_grad(rnn_loss)(p, xs, ys))


def cnn_loss(w, b, x, labels, key):
    y = jitad.relu(jitad.conv2d(x, w) + jitad.reshape(b, (1, -1, 1, 1)))
    y = jitad.max_pool2d(y, 2)
    y = jitad.dropout(y, 0.25, key)
    logits = jitad.reshape(y, (x.shape[0], -1))[:, :3]
    return jitad.cross_entropy(logits, labels)


def test_cnn_with_pooling_and_dropout_matches_cpu():
    r = np.random.default_rng(4)
    args = (r.standard_normal((2, 1, 3, 3)) * 0.5, r.standard_normal(2) * 0.1, r.standard_normal((2, 1, 6, 6)),
            np.array([0, 2]), 7)
    assert_trees_close(jitad.jit_grad(cnn_loss, argnums=(0, 1), device="cuda")(*args),
                       jitad.jit_grad(cnn_loss, argnums=(0, 1))(*args))


def test_random_numbers_match_the_cpu_bits():
    uniform = lambda k: jitad.random.uniform(jitad.random.split(k)[1], (5,))
    normal = lambda k: jitad.random.normal(k, (2, 3))
    for key in (0, -3, 2 ** 40):
        np.testing.assert_array_equal(on_gpu(uniform)(key), uniform(key))
        np.testing.assert_allclose(on_gpu(normal)(key), jitad.jit(normal)(key), rtol=1e-13)


def test_in_graph_training_loop_matches_cpu():
    opt = jitad.optim.adam(0.05)
    r = np.random.default_rng(5)
    X, Y = r.standard_normal((6, 3)), r.standard_normal(6)
    loss = lambda p, X, Y: jitad.mean((jitad.tanh(X @ p["w"]) * p["a"] - Y) ** 2)

    def train(p, X, Y):
        def body(i, carry):
            params, state = carry
            return opt.update(params, jitad.grad(loss)(params, X, Y), state)
        return FOR(0, 4, body, (p, opt.init(p)))[0]
    p0 = {"w": r.standard_normal(3), "a": 1.0}
    assert_trees_close(on_gpu(train)(p0, X, Y), jitad.jit(train)(p0, X, Y))


# -- inputs, outputs, memory and errors ----------------------------------------------

def test_device_arrays_in_give_device_arrays_out():
    x = np.arange(6.0).reshape(2, 3)
    f = on_gpu(lambda x, s: (x * s, jitad.sum(x)))
    dev = cuda.to_device(x)
    y, total = f(dev, 2.0)
    assert hasattr(y, "copy_to_host") and y.shape == (2, 3)
    np.testing.assert_array_equal(y.copy_to_host(), x * 2)
    assert total == 15.0 and isinstance(total, float)
    y2, _ = f(dev, 3.0)   # results are fresh arrays: the next call does not overwrite them
    np.testing.assert_array_equal(y.copy_to_host(), x * 2)
    np.testing.assert_array_equal(y2.copy_to_host(), x * 3)
    host_y, _ = f(x, 2.0)
    assert isinstance(host_y, np.ndarray)


def test_steady_state_calls_allocate_no_device_memory():
    f = jitad.jit_grad(CONTROL["for"], device="cuda")
    f(W33, X3)
    arena = f._last.runner.arena
    before = arena.device_allocations
    for _ in range(3):
        f(W33, X3)
    assert arena.device_allocations == before
    assert all(top == 0 for top in arena.top.values())   # every call releases what it took


def test_loop_memory_does_not_grow_with_trip_count():
    f = on_gpu(lambda x, n: FOR(0, n, lambda i, h: h * 0.5 + 1.0, x))
    f(np.zeros(16), 2)
    pools = {d: p.shape[0] for d, p in f._last.runner.arena.pools.items()}
    np.testing.assert_allclose(f(np.zeros(16), 60), 2.0)
    assert {d: p.shape[0] for d, p in f._last.runner.arena.pools.items()} == pools


def test_long_while_under_grad_completes():
    f = lambda x: WHILE(lambda s: s[0] < 1500, lambda s: (s[0] + 1, s[1] * 0.999 + 0.001), (0, x))[1]
    assert jitad.grad(f, device="cuda")(2.0) == pytest.approx(0.999 ** 1500, rel=1e-10)


def test_errors():
    with pytest.raises(jitad.ArgumentError, match="device='tpu'"):
        jitad.jit(lambda x: x, device="tpu")
    with pytest.raises(jitad.ArgumentError, match="device array"):
        jitad.jit(lambda x: x * 2.0)(cuda.to_device(np.ones(3)))
    with pytest.raises(jitad.ArgumentError, match="dtype int32"):
        on_gpu(lambda x: x * 2)(cuda.to_device(np.ones(3, np.int32)))
    with pytest.raises(jitad.ShapeError):
        on_gpu(lambda x, y: x + y)(np.ones(3), np.ones(4))


EDGES = {
    "empty": (lambda x: (x * 2.0, jitad.sum(x)), (np.zeros((0, 3)),)),
    "ieee": (lambda x: (x / 0.0, jitad.max(x), jitad.exp(x * 1000.0)), (np.array([1.0, -1.0, 0.0, np.nan]),)),
    "integers": (lambda x, y: (x // y, x % y, x ** 2, x > y), (np.array([7, -7, 3]), np.array([2, 0, -1]))),
    "saturating_convert": (lambda x: jitad.convert(x, "i64"), (np.array([1e30, -1e30, np.nan, -2.7]),)),
    "dict_pytree": (lambda d: {"a": d["x"] * 2, "b": d["y"] + 1}, ({"x": np.ones(2), "y": 3},)),
    # along-axis loops start from their identity: an infinite cotangent stays infinite
    "along_axis": (lambda x, w: (jitad.cumsum(x, axis=1), jitad.max(x, axis=1), jitad.sum(x, axis=0),
                                 jitad.logcumsumexp(x, axis=1, reverse=True),
                                 jitad.grad(lambda x: jitad.sum(jitad.cumsum(x, axis=1) * w))(x)),
                   (np.array([[-np.inf, 0.0, np.inf, np.nan], [-np.inf, -np.inf, 0.0, -np.inf]]),
                    np.array([[np.inf, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]]))),
    "slices_and_transposes": (lambda x: jitad.transpose(x, (2, 0, 1))[1:, :, ::2].sum(axis=0),
                              (np.arange(24.0).reshape(2, 3, 4),)),
}


@pytest.mark.parametrize("name", sorted(EDGES))
def test_edge_values_match_cpu(name):
    f, args = EDGES[name]
    with np.errstate(all="ignore"):
        assert_trees_close(on_gpu(f)(*args), jitad.jit(f)(*args), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_libm_and_special_functions_match_cpu(dtype):
    x = np.array([8.0, 2.0 ** -100, 1000.0, 0.5, 3.0, 1.4616, -2.5, 0.0, -1.0, np.inf, np.nan], dtype)
    f = lambda x: (jitad.log2(x), jitad.log10(x), jitad.exp2(x), jitad.lgamma(x), jitad.digamma(x),  # noqa: E731
                   jitad.polygamma(1, x), jitad.polygamma(2, x))
    got = on_gpu(f)(x)
    assert_trees_close(got, jitad.jit(f)(x), rtol=1e-14 if dtype == np.float64 else 1e-6, atol=0)
    assert got[0][:2].tolist() == [3.0, -100.0] and got[2][4] == 8.0


def test_without_a_gpu_the_error_says_what_to_do():
    import subprocess
    code = ("import jitad, numpy as np\n"
            "try:\n    jitad.jit(lambda x: x * 2.0, device='cuda')(np.ones(3))\n"
            "except jitad.DeviceError as e:\n    print('DeviceError', e)\n")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "DeviceError" in out.stdout and "NUMBA_ENABLE_CUDASIM=1" in out.stdout, out.stdout + out.stderr
