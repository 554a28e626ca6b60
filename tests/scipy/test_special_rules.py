"""The derivative rules autograd.scipy.special exports, as jitad gives them, against autograd's
own (the same values on the same inputs) and against the derivatives jitad computes."""
import numpy as np
import pytest

import jitad
from jitad.scipy import special as S

ag = pytest.importorskip("autograd.scipy.special")
X = np.random.default_rng(0).normal(size=(3, 4))


@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, False), (0, True), ((0, 1), False)])
def test_logsumexp_rules_are_autograds(axis, keepdims):
    ans = S.logsumexp(X, axis=axis, keepdims=keepdims)
    g = np.ones(np.shape(ans)) * 0.7
    np.testing.assert_allclose(S.make_grad_logsumexp(ans, X, axis=axis, keepdims=keepdims)(g),
                               ag.make_grad_logsumexp(ans, X, axis=axis, keepdims=keepdims)(g), rtol=1e-14)
    np.testing.assert_allclose(S.fwd_grad_logsumexp(X * 0.3, ans, X, axis=axis, keepdims=keepdims),
                               ag.fwd_grad_logsumexp(X * 0.3, ans, X, axis=axis, keepdims=keepdims), rtol=1e-14)
    full, count = S.repeat_to_match_shape(ans, X.shape, X.dtype, axis, keepdims)
    want_full, want_count = ag.repeat_to_match_shape(ans, X.shape, X.dtype, axis, keepdims)
    np.testing.assert_array_equal(full, want_full)
    assert count == want_count


def test_gammainc_rule_and_unbroadcast():
    a, x = np.array([[0.5], [2.0]]), np.array([0.3, 1.7, 4.0])
    for sign, fn in ((1, S.gammainc), (-1, S.gammaincc)):
        vjp = S.make_gammainc_vjp_arg1(sign)(fn(a, x), a, x)
        g = np.ones((2, 3))
        np.testing.assert_allclose(vjp(g), ag.make_gammainc_vjp_arg1(sign)(fn(a, x), a, x)(g), rtol=1e-13)
        mine = jitad.grad(lambda v: jitad.numpy.sum(fn(a, v)))(x)
        np.testing.assert_allclose(vjp(g), mine, rtol=1e-9)
    np.testing.assert_array_equal(S.unbroadcast_f(np.zeros((2, 1)), lambda g: g * 2)(np.ones((3, 2, 4))),
                                  np.full((2, 1), 24.0))
    assert S.primitive is jitad.extend.primitive and S.defvjp is jitad.extend.defvjp
