"""NaN and inf debugging: with `jax_debug_nans` (or `jax_debug_infs`) on, compiled code
stops at the first NaN (inf) a primitive produces, forward or backward, in loops too, and
the error names the primitive and the user's line; eager calls raise as well. Off, the
compiled program is the one compiled without the settings."""
import inspect

import numpy as np
import pytest

import jitad
import jitad.numpy as jnp
from jitad.errors import NonFiniteError


@pytest.fixture
def debug_nans():
    jitad.config.update("jax_debug_nans", True)
    yield
    jitad.config.update("jax_debug_nans", False)


def line_of(fn, text):
    """`file:line` of the line of `fn`'s source containing `text`."""
    lines, start = inspect.getsourcelines(fn)
    k = next(i for i, s in enumerate(lines) if text in s)
    return f"{inspect.getsourcefile(fn)}:{start + k}"


def raised(fn, *args):
    with pytest.raises(NonFiniteError) as info:
        fn(*args)
    assert isinstance(info.value, FloatingPointError)   # what JAX raises
    return str(info.value)


def log_twice(x):
    y = jnp.log(x)
    return y * 2.0


def test_forward_nan_names_the_op_and_line(debug_nans):
    message = raised(jitad.jit(log_twice), -1.0)
    assert message.startswith("jax_debug_nans: `log` produced a NaN")
    assert line_of(log_twice, "jnp.log") in message
    assert jitad.jit(log_twice)(np.e) == pytest.approx(2.0)   # no NaN: the value


def sqrt_times_zero(x):
    return jnp.sum(jnp.sqrt(x) * 0.0)


def test_backward_only_nan(debug_nans):
    x = np.array([0.0, 1.0])
    assert jitad.jit(sqrt_times_zero)(x) == 0.0   # the forward pass is clean
    message = raised(jitad.grad(sqrt_times_zero), x)
    assert "in the gradient of `sqrt`" in message
    assert line_of(sqrt_times_zero, "jnp.sqrt") in message
    np.testing.assert_array_equal(jitad.grad(sqrt_times_zero)(np.array([1.0, 4.0])), [0.0, 0.0])


def count_down_logs(x, k):
    def body(s):
        return s[0] - 1.0, s[1] + jnp.log(s[0] - k)
    return jitad.WHILE(lambda s: s[0] > 0.0, body, (x, 0.0))[1]


def test_nan_inside_a_while_loop(debug_nans):
    f = jitad.jit(count_down_logs)
    assert np.isclose(f(3.0, 0.5), np.log(2.5 * 1.5 * 0.5))   # s = 3, 2, 1: clean
    message = raised(f, 3.0, 1.5)   # s = 1 takes log(-0.5)
    assert "`log`" in message and line_of(count_down_logs, "jnp.log") in message


def scan_logs(xs):
    def step(c, x):
        y = jnp.log(x)
        return c + y, y
    return jitad.scan(step, 0.0, xs, checkpoints=2)[0]


def test_nan_inside_a_scan_forward_and_backward(debug_nans):
    message = raised(jitad.jit(scan_logs), np.array([1.0, 2.0, -3.0, 4.0]))
    assert "`log`" in message and line_of(scan_logs, "jnp.log") in message
    g = jitad.grad(scan_logs)(np.array([1.0, 2.0, 4.0]))
    np.testing.assert_allclose(g, [1.0, 0.5, 0.25])
    # sqrt(0) * 0 is clean forward; its gradient is 0 / (2 sqrt(0)), a NaN, in the backward loop
    message = raised(jitad.grad(lambda xs: jitad.scan(lambda c, x: (c + jnp.sqrt(x) * 0.0, c), 0.0, xs,
                                                      checkpoints=1)[0]),
                     np.array([1.0, 0.0, 2.0]))
    assert "in the gradient of" in message


def test_debug_infs():
    f = jitad.jit(lambda x: 1.0 / x)
    jitad.config.update("jax_debug_infs", True)
    try:
        message = raised(f, np.array([1.0, 0.0]))
        assert message.startswith("jax_debug_infs: `div` produced an infinity")
        assert np.isnan(jitad.jit(lambda x: jnp.log(x))(-1.0))   # a NaN is no infinity
    finally:
        jitad.config.update("jax_debug_infs", False)
    np.testing.assert_array_equal(f(np.array([1.0, 0.0])), [1.0, np.inf])


def test_eager_calls_raise(debug_nans):
    with pytest.raises(FloatingPointError, match="`log` produced a NaN"):
        jitad.log(-1.0)
    with pytest.raises(FloatingPointError, match="`sqrt`"):
        jnp.sqrt(np.array([-1.0, 1.0]))
    assert jitad.log(1.0) == 0.0


def test_off_costs_nothing_and_code_is_not_reused():
    f = jitad.jit(log_twice)
    assert np.isnan(f(-1.0))   # compiled without checks
    plain = f.ir
    assert "check" not in plain
    jitad.config.update("jax_debug_nans", True)
    try:
        raised(f, -1.0)   # the code compiled before is not reused
        assert f.ir.count("check[") == 2   # log's and mul's results
    finally:
        jitad.config.update("jax_debug_nans", False)
    assert np.isnan(f(-1.0)) and f.ir == plain   # the same program as before


def power_of_itself(x):
    return jnp.power(x, x)


@pytest.mark.parametrize("transform, x", [(jitad.grad, -0.5), (jitad.value_and_grad, -0.5),
                                          (lambda f: jitad.vmap(jitad.grad(f)), np.array([-0.5, 0.5]))])
def test_gradients_compiled_before_the_setting_changed_are_not_reused(transform, x):
    # (the code compiled without checks served the same function again once the setting was on)
    last = lambda out: np.asarray(jitad.tree_util.tree_leaves(out)[-1])
    assert np.isnan(last(transform(power_of_itself)(x))).any()
    jitad.config.update("jax_debug_nans", True)
    try:
        message = raised(transform(power_of_itself), x)
        assert "`pow` produced a NaN" in message and line_of(power_of_itself, "jnp.power") in message
    finally:
        jitad.config.update("jax_debug_nans", False)
    assert np.isnan(last(transform(power_of_itself)(x))).any()


def test_the_interpreter_raises_the_same_error(debug_nans):
    from jitad.ir.interpret import interpret
    f = jitad.jit(log_twice)
    raised(f, -1.0)
    with pytest.raises(NonFiniteError, match="`log`"):
        interpret(f._last.program, [-1.0])


def test_the_cuda_backend_raises_the_same_error(debug_nans):
    pytest.importorskip("numba")   # (numba-cuda's simulator where there is no GPU: tests/conftest.py)
    f = jitad.jit(log_twice, device="cuda")
    message = raised(f, np.array([1.0, -1.0]))
    assert "`log`" in message and line_of(log_twice, "jnp.log") in message


def sqrt_lanes(x):
    return jnp.sqrt(x) + 1.0


def test_vmap_and_recursion_name_the_line(debug_nans):
    message = raised(jitad.vmap(sqrt_lanes), np.array([1.0, -1.0]))
    assert message.startswith("jax_debug_nans: `sqrt`") and line_of(sqrt_lanes, "jnp.sqrt") in message

    @jitad.FUN(out=0.0)
    def halvings(n, x):
        return jitad.IF(n <= 0, lambda: jnp.log(x), lambda: halvings(n - 1, x) * 0.5)
    message = raised(jitad.jit(lambda n, x: halvings(n, x)), 3, -1.0)
    assert "`log`" in message and line_of(test_vmap_and_recursion_name_the_line, "jnp.log(x)") in message
    assert jitad.jit(lambda n, x: halvings(n, x))(2, 1.0) == 0.0


def rsqrt_of(x):
    return jitad.lax.rsqrt(x) * 2.0   # a custom_jvp function: its rule runs in the gradient


def test_custom_derivative_functions_name_the_users_line(debug_nans):
    for transform in (jitad.grad, jitad.jit, lambda f: lambda x: jitad.jvp(f, (x,), (1.0,))):
        message = raised(transform(rsqrt_of), np.float32(-2.5))
        assert "`sqrt`" in message and line_of(rsqrt_of, "rsqrt(x)") in message, message


def take_filled(x, idx):
    return jnp.take(x, idx, axis=0, mode="fill")


@pytest.mark.parametrize("idx, made", [([0, -1], False), ([1, 2], True), ([-3], True)])
def test_take_with_fill_raises_where_it_reads_the_fill(debug_nans, idx, made):
    # as JAX's gather: the NaN read at an index out of range is made there, eagerly (a
    # constant array, also inside jit), staged or batched; an index in range makes none
    x, idx = np.array([1.0, 2.0]), np.array(idx)
    calls = {"eager": take_filled, "jit": jitad.jit(take_filled),
             "constant under jit": jitad.jit(lambda i: take_filled(x, idx) + i),
             "vmap": lambda x, idx: jitad.vmap(take_filled, in_axes=(0, None))(np.stack([x, x]), idx)[0]}
    for name, call in calls.items():
        if not made:
            np.testing.assert_array_equal(call(x, idx) if name != "constant under jit" else call(0.0),
                                          x[idx], err_msg=name)
            continue
        message = raised(call, *((x, idx) if name != "constant under jit" else (0.0,)))
        assert "produced a NaN" in message and line_of(take_filled, "jnp.take") in message, name
    assert jitad.jit(lambda x: jnp.take(x, idx, axis=0, mode="fill", fill_value=-1.0))(x).tolist() == \
        np.where((idx >= -2) & (idx < 2), x[np.clip(idx, -2, 1)], -1.0).tolist()
