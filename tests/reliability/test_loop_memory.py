"""A loop returns its temporaries to the arena at the end of every iteration, whatever its
state's type (scalar or tensor), in compiled forward code and in reverse mode's backward
loops: the arena's high-water mark after 10^5 iterations equals the one after 10."""
import numpy as np
import pytest

import jitad
from jitad import FOR, IF, WHILE
from jitad.lower.runtime import arena_high_water
from jitad.testing import check_grads

N = 4
RNG = np.random.default_rng(0)
W = RNG.standard_normal((N, N)) * 0.1 + np.eye(N)


def _row_xent(w, i):
    logits = jitad.reshape(jitad.tanh(w @ w[i % N]), (1, N))
    return jitad.cross_entropy(logits, jitad.reshape(i % N, (1,)))


# each body makes tensor temporaries but carries only a scalar (or a small tensor) state
CASES = {
    "for_matmul": lambda w, k, c: FOR(0, k, lambda i, s: s + jitad.sum((w * s) @ w) * c, 1.0),
    "while_matmul": lambda w, k, c: WHILE(lambda t: t[0] < k,
                                          lambda t: (t[0] + 1, t[1] + jitad.sum((w * t[1]) @ w) * c), (0, 1.0))[1],
    "if_in_body": lambda w, k, c: FOR(0, k, lambda i, s: IF(i % 2 == 0, lambda: s + jitad.sum(w @ w) * c,
                                                            lambda: s - jitad.sum(w * w * s) * c), 1.0),
    "einsum": lambda w, k, c: FOR(0, k, lambda i, s: s + jitad.einsum("ij,jk->ik", w * s, w).sum() * c, 1.0),
    "solve": lambda w, k, c: FOR(0, k, lambda i, s: s + jitad.linalg.solve(w, jitad.ones(N) * s).sum() * c, 1.0),
    "inv": lambda w, k, c: FOR(0, k, lambda i, s: s + jitad.linalg.inv(w * s).sum() * c, 1.0),
    "cross_entropy_eval": lambda w, k, c: FOR(0, k, lambda i, s: s + _row_xent(w, i) * c, 0.0),
    "nested_for": lambda w, k, c: FOR(0, k // 10, lambda i, s: FOR(0, 10, lambda j, t: t + jitad.sum(w @ (w * t)) * c, s),
                                      1.0),
    "sort": lambda w, k, c: FOR(0, k, lambda i, s: s + jitad.sort(w * s)[0, 0] * c, 1.0),
    "tensor_state": lambda w, k, c: jitad.sum(FOR(0, k, lambda i, s: s + jitad.tanh(w @ s) * c, w)),
}
# reverse mode stores a scalar state per iteration (its tape) and nothing else for these
SCALAR_TAPE = ("einsum", "solve", "inv")


def _peak(f, *args):
    f(*args)
    arena_high_water(reset=True)
    value = f(*args)
    return value, arena_high_water(reset=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_loop_memory_is_flat(name):
    fn = CASES[name]
    f = jitad.jit(fn)
    np.testing.assert_allclose(f(W, 20, 0.01), fn(W, 20, 0.01), rtol=1e-12)   # against a plain run
    _, short = _peak(f, W, 10, 1e-9)
    _, long = _peak(f, W, 10 ** 4 if name == "inv" else 10 ** 5, 1e-9)   # (inv: 30 us a step)
    assert long == short


@pytest.mark.parametrize("name", SCALAR_TAPE + ("for_matmul", "cross_entropy_eval"))
def test_backward_loop_memory_and_gradients(name):
    fn = CASES[name]
    check_grads(lambda w, c: fn(w, 6, c), (W, 0.01))
    g = jitad.jit(jitad.grad(fn))
    _, short = _peak(g, W, 1000, 1e-9)
    _, long = _peak(g, W, 2000, 1e-9)
    # what grows is the tape: entries of at most two N x N products per iteration (a
    # deferred weight gradient), else one scalar; the bodies' temporaries are released
    per_step = (long - short) / 1000
    assert per_step <= (64 if name in SCALAR_TAPE else 2 * N * N * 8 + 64), per_step


def test_reverse_while_frame_keeps_only_forward_values():
    """Reverse mode through WHILE keeps a frame per iteration (continuations); a frame
    holds the body's forward values (here w * s and the product: two N x N), not the
    adjoint slots it makes only once the deeper frames have returned."""
    g = jitad.jit(jitad.grad(CASES["while_matmul"]))
    _, short = _peak(g, W, 1000, 1e-9)
    _, long = _peak(g, W, 2000, 1e-9)
    assert (long - short) / 1000 <= 2 * N * N * 8
