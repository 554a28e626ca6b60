"""A vmapped WHILE whose condition differs per lane runs until every lane is done; a lane
still running whose state stopped changing can never finish, and the call raises
`RuntimeCheckError` naming the fix instead of running forever. Lanes that finish give
what a Python loop and JAX's `vmap(while_loop)` give, in compiled code and in the
reference interpreter, and differentiate. Also the `check` op the loop uses: each
message its own, through FUN calls, deep recursion, grad and the disk cache.
The cases that would hang if the check regressed run in a child with a timeout."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitad
from jitad import FUN, IF, WHILE
from jitad.transforms.vmap import CHECK_EVERY, check
from jitad.ir.interpret import interpret
from jitad.testing import check_grads

STUCK = "a lane of a WHILE loop never finishes: its condition stays true while its state stops changing"


def _child(code, timeout=120, env=None):
    """Run `code` in a fresh interpreter; its stdout lines (a hang fails the test)."""
    env = dict(os.environ, **(env or {}))
    try:
        out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                             timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"the child ran past {timeout} s (a stuck lane runs forever?); "
                             f"stdout: {e.stdout!r}") from None
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.splitlines()


STUCK_CASES = """
import json
import numpy as np
import jitad
from jitad import IF, WHILE

def report(name, call):
    try:
        out = call()
        print(json.dumps([name, "returned", np.asarray(out).tolist()]), flush=True)
    except jitad.JitadError as e:
        print(json.dumps([name, type(e).__name__, isinstance(e, jitad.JitadError), str(e)]), flush=True)

double = lambda x: WHILE(lambda t: t < 10.0, lambda t: t * 2.0, x)   # 0.0 stays 0.0
report("scalar", lambda: jitad.vmap(double)(np.array([0.3, 0.0, 4.0])))
# a lane that gets stuck late: down to 3, never below 2
report("late", lambda: jitad.vmap(lambda x: WHILE(lambda t: t > 2.0, lambda t: jitad.maximum(t - 1.0, 3.0), x))(
    np.array([1.0, 50.0])))
# NaN stays NaN and `not (t > 10)` stays true
report("nan", lambda: jitad.vmap(lambda x: WHILE(lambda t: ~(t > 10.0), lambda t: t + 1.0, x))(
    np.array([1.0, np.nan])))
# a tuple state with a tensor leaf: the lane's whole state must be unchanged
report("tensor", lambda: jitad.vmap(lambda x: WHILE(lambda s: s[0] < 10.0, lambda s: (s[0] * 2.0, s[1] * 0.5),
                                                    (x, jitad.ones(3) * x)))(np.array([1.0, 0.0])))
# inside a batched IF branch: only the lanes that take it count
report("masked", lambda: jitad.vmap(lambda x: IF(x > -1.0, lambda: double(x), lambda: x))(np.array([0.0, 3.0])))
report("masked_ok", lambda: jitad.vmap(lambda x: IF(x > 0.5, lambda: double(x), lambda: x))(np.array([0.0, 3.0])))
# under grad: the forward pass checks
report("grad", lambda: jitad.grad(lambda xs: jitad.sum(jitad.vmap(double)(xs)))(np.array([1.0, 0.0])))
# still usable after a failed call (the arena starts empty again)
report("after", lambda: jitad.vmap(double)(np.array([0.3, 4.0])))
"""


@pytest.fixture(scope="module")
def stuck_reports():
    return {r[0]: r[1:] for r in map(json.loads, _child(STUCK_CASES))}


@pytest.mark.parametrize("case", ["scalar", "late", "nan", "tensor", "masked", "grad"])
def test_stuck_lane_raises_with_the_fix(stuck_reports, case):
    kind, is_jitad, message = stuck_reports[case]
    assert kind == "RuntimeCheckError" and is_jitad
    assert message.startswith("vmap: " + STUCK)
    assert "bound the loop (carry a counter and test `i < max_iter`" in message


def test_lanes_that_finish_are_unaffected(stuck_reports):
    assert stuck_reports["masked_ok"] == ["returned", [0.0, 12.0]]   # lane 0 takes the else branch
    assert stuck_reports["after"] == ["returned", [19.2, 16.0]]


def test_error_is_a_jitad_error():
    assert issubclass(jitad.RuntimeCheckError, jitad.JitadError)
    assert jitad.RuntimeCheckError.__doc__


# -- lanes that finish: against a Python loop, JAX and the interpreter ---------------

def newton_sqrt(N, a):
    """sqrt(a) by Newton's method from a, to a per-lane tolerance: trip counts differ."""
    return WHILE(lambda s: N.abs(s[0] * s[0] - a) > 1e-10 * a, lambda s: (0.5 * (s[0] + a / s[0]), s[1] + 1),
                 (a, 0))


def newton_python(a):
    x, n = a, 0
    while abs(x * x - a) > 1e-10 * a:
        x, n = 0.5 * (x + a / x), n + 1
    return x, n


A = np.array([0.01, 2.0, 9.0, 1e6, 1.0, 1e60])


def test_finishing_lanes_match_a_python_loop_and_jax():
    x, n = jitad.vmap(lambda a: newton_sqrt(jitad, a))(A)
    want = [newton_python(a) for a in A]
    np.testing.assert_array_equal(x, [w[0] for w in want])
    np.testing.assert_array_equal(n, [w[1] for w in want])
    assert len(set(n)) > 2   # the lanes run different trip counts, some past CHECK_EVERY
    assert max(n) > CHECK_EVERY
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    jx, jn = jax.vmap(lambda a: jax.lax.while_loop(lambda s: jnp.abs(s[0] * s[0] - a) > 1e-10 * a,
                                                   lambda s: (0.5 * (s[0] + a / s[0]), s[1] + 1), (a, 0)))(A)
    np.testing.assert_allclose(x, np.asarray(jx), rtol=1e-15)
    np.testing.assert_array_equal(n, np.asarray(jn))


def test_sign_of_zero_is_a_change():
    """0.0 -> -0.0 compares equal, but a body or condition can tell them apart (1/x):
    the lane finishes, so it is not stuck."""
    f = jitad.vmap(lambda x: WHILE(lambda t: 1.0 / t > 0.0, lambda t: -t, x))
    out = f(np.array([0.0, -1.0]))
    assert np.array_equal(out, [0.0, -1.0]) and np.signbit(out[0])


def test_interpreter_gives_the_same_and_raises_the_same():
    fn = jitad.vmap(lambda a: newton_sqrt(jitad, a))
    outs = interpret(jitad.trace(fn, A), [A])
    for got, want in zip(outs, fn(A)):
        np.testing.assert_array_equal(got, want)
    double = jitad.vmap(lambda x: WHILE(lambda t: t < 10.0, lambda t: t * 2.0, x))
    program = jitad.trace(double, np.zeros(3))
    np.testing.assert_array_equal(interpret(program, [np.array([0.3, 1.0, 4.0])])[0], [19.2, 16.0, 16.0])
    with pytest.raises(jitad.RuntimeCheckError, match=STUCK):
        interpret(program, [np.array([0.3, 0.0, 4.0])])


def test_grad_through_the_checked_loop():
    def loss(xs, w):
        ys = jitad.vmap(lambda x: WHILE(lambda t: t < 10.0, lambda t: t * w + jitad.sin(t), x))(xs)
        return jitad.sum(ys * xs)
    xs, w = np.array([0.3, 1.0, 4.0, 20.0, 2.5]), 1.7
    check_grads(loss, (xs, w), order=1, modes=("rev", "fwd"))
    g = jitad.grad(loss, argnums=(0, 1))(xs, w)
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def jloss(xs, w):   # JAX reverse-differentiates no while_loop: its forward mode
        ys = jax.vmap(lambda x: jax.lax.while_loop(lambda t: t < 10.0, lambda t: t * w + jnp.sin(t), x))(xs)
        return jnp.sum(ys * xs)
    want = jax.jacfwd(jloss, argnums=(0, 1))(xs, w)
    np.testing.assert_allclose(g[0], np.asarray(want[0]), rtol=1e-12)
    np.testing.assert_allclose(g[1], float(want[1]), rtol=1e-12)


# -- the check op itself ----------------------------------------------------------

def test_each_check_raises_its_own_message():
    f = jitad.jit(lambda x: (check(x > 1.0, "too big"), check(x < -1.0, "too small"), x * 2.0)[2])
    assert f(0.5) == 1.0
    with pytest.raises(jitad.RuntimeCheckError, match="^too big"):
        f(2.0)
    with pytest.raises(jitad.RuntimeCheckError, match="^too small"):
        f(-2.0)
    assert f(-0.5) == -1.0
    program = jitad.trace(lambda x: (check(x > 1.0, "too big"), x * 2.0)[1], 0.0)
    assert "check[message=too big]" in str(program)
    with pytest.raises(jitad.RuntimeCheckError, match="^too big"):
        interpret(program, [2.0])


def test_check_in_a_function_under_grad_and_deep_recursion():
    @FUN(out=0.0)
    def down(n, limit):
        check(n < limit, "below the limit")
        return IF(n <= 0, lambda: 0.0, lambda: down(n - 1, limit) + 1.0)
    f = jitad.jit(lambda n, limit: down(n, limit))
    assert f(10, -1) == 10.0
    with pytest.raises(jitad.RuntimeCheckError, match="^below the limit"):
        f(10, 3)
    assert f(10 ** 6, -1) == 1e6   # deeper than the caller's stack: the deep-stack thread
    with pytest.raises(jitad.RuntimeCheckError, match="^below the limit"):
        f(10 ** 6, 3)
    g = jitad.grad(lambda x: (check(x > 1.0, "too big"), x * x)[1])
    assert g(0.5) == 1.0
    with pytest.raises(jitad.RuntimeCheckError, match="^too big"):
        g(3.0)


def test_check_from_the_disk_cache(tmp_path):
    code = """
        import jitad
        from jitad.transforms.vmap import check
        f = jitad.jit(lambda x: (check(x > 1.0, "one"), check(x > 2.0, "two"), x)[2])
        for x in (0.5, 1.5, 2.5):
            try:
                print(f(x))
            except jitad.RuntimeCheckError as e:
                print(str(e).split()[0])
        print(f._last.loaded_from_cache)
    """
    env = {"JITAD_CACHE_DIR": str(tmp_path)}
    assert _child(code, env=env) == ["0.5", "one", "one", "False"]
    assert _child(code, env=env) == ["0.5", "one", "one", "True"]


@pytest.mark.gpu
def test_check_on_the_gpu_backend():
    cuda = pytest.importorskip("numba.cuda")
    if not cuda.is_available():
        pytest.skip("no CUDA GPU and the simulator is off")
    f = jitad.jit(lambda xs: jitad.vmap(lambda x: WHILE(lambda t: t < 10.0, lambda t: t * 2.0, x))(xs),
                  device="cuda")
    np.testing.assert_array_equal(f(np.array([0.3, 1.0])), [19.2, 16.0])
    with pytest.raises(jitad.RuntimeCheckError, match=STUCK):
        f(np.array([0.3, 0.0]))
