"""User mistakes that crashed, gave silently wrong values or
raised internal errors now raise a `JitadError` naming the problem; the NumPy functions
jitad also has run on staged values, the rest say which jitad function to call.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitad

pytestmark = pytest.mark.llvm

IMAGE, KERNEL = np.ones((1, 1, 4, 4)), np.ones((1, 1, 2, 2))


def conv(**kw):
    return lambda: jitad.jit(lambda x, w: jitad.conv2d(x, w, **kw))(IMAGE, KERNEL)


def on_image(op, *args, **kw):
    return lambda: jitad.jit(lambda x: op(x, *args, **kw))(IMAGE)


def on(x, fn):
    return lambda: jitad.jit(fn)(x)


M = np.ones((2, 3))


def custom_with_bwd(bwd):
    @jitad.custom_vjp
    def f(x):
        return x * 2.0
    f.defvjp(lambda x: (f(x), x), bwd)
    return lambda: jitad.grad(lambda x: jitad.sum(f(x)))(np.ones(3))


def pullback(ct):
    def run():
        _, pb = jitad.vjp(lambda x: x * 2.0, np.ones(3))
        return pb(ct)
    return run


def optimizer_update(opt, params, grads, state_params=None):
    return lambda: opt.update(params, grads, opt.init(params if state_params is None else state_params))


P = {"a": 1.0, "b": 2.0}

CASES = [
    # (id, call, error class, key phrase)
    # item 3: network ops' arguments
    ("conv2d padding<0", conv(padding=-2), jitad.ArgumentError, "padding=-2"),
    ("conv2d stride=0", conv(stride=0), jitad.ArgumentError, "stride=0"),
    ("conv2d stride<0", conv(stride=-1), jitad.ArgumentError, "stride=-1"),
    ("conv2d stride float", conv(stride=1.5), jitad.ArgumentError, "stride=1.5"),
    ("conv2d kernel too big", lambda: jitad.jit(jitad.conv2d)(IMAGE, np.ones((1, 1, 5, 5))),
     jitad.ShapeError, "5x5 window does not fit"),
    ("conv2d kernel too big strided", lambda: jitad.jit(lambda x, w: jitad.conv2d(x, w, stride=2))(
        IMAGE, np.ones((1, 1, 5, 5))), jitad.ShapeError, "does not fit"),
    ("conv2d 3-d input", lambda: jitad.jit(jitad.conv2d)(np.ones((1, 4, 4)), KERNEL),
     jitad.ShapeError, "need (n, c, h, w)"),
    ("conv2d bias shape", conv(b=np.ones(3)), jitad.ShapeError, "bias of shape (3,)"),
    ("max_pool2d k=0", on_image(jitad.max_pool2d, 0), jitad.ArgumentError, "k=0"),
    ("avg_pool2d k=0", on_image(jitad.avg_pool2d, 0), jitad.ArgumentError, "k=0"),
    ("max_pool2d k<0", on_image(jitad.max_pool2d, -2), jitad.ArgumentError, "k=-2"),
    ("max_pool2d k float", on_image(jitad.max_pool2d, 2.0), jitad.ArgumentError, "k=2.0"),
    ("max_pool2d stride=0", on_image(jitad.max_pool2d, 2, stride=0), jitad.ArgumentError, "stride=0"),
    ("avg_pool2d stride<0", on_image(jitad.avg_pool2d, 2, stride=-1), jitad.ArgumentError, "stride=-1"),
    ("max_pool2d k>image", on_image(jitad.max_pool2d, 5), jitad.ShapeError, "does not fit"),
    ("max_pool2d 2-d input", on(np.ones((4, 4)), lambda x: jitad.max_pool2d(x, 2)), jitad.ShapeError,
     "need (n, c, h, w)"),
    ("dropout rate>1", on_image(jitad.dropout, 1.5, 0), jitad.ArgumentError, "rate=1.5"),
    ("dropout rate=1", on_image(jitad.dropout, 1.0, 0), jitad.ArgumentError, "in [0, 1)"),
    ("dropout rate<0", on_image(jitad.dropout, -0.1, 0), jitad.ArgumentError, "rate=-0.1"),
    ("one_hot n=0", on(np.arange(3), lambda x: jitad.one_hot(x, 0)), jitad.ArgumentError, "n=0"),
    ("one_hot n<0", on(np.arange(3), lambda x: jitad.one_hot(x, -3)), jitad.ArgumentError, "n=-3"),
    # item 9: axes
    ("concatenate axis=5", lambda: jitad.jit(lambda x, y: jitad.concatenate([x, y], axis=5))(M, M),
     jitad.ShapeError, "axis 5 is out of range"),
    ("concatenate scalars", on(1.0, lambda x: jitad.concatenate([x, x])), jitad.ShapeError, "jitad.stack"),
    ("concatenate []", on(1.0, lambda x: jitad.concatenate([])), jitad.ArgumentError, "non-empty list"),
    ("sum axis=(0, 0)", on(M, lambda x: jitad.sum(x, axis=(0, 0))), jitad.ShapeError, "duplicate value in axis"),
    ("sum axis=(0, -2)", on(M, lambda x: jitad.sum(x, axis=(0, -2))), jitad.ShapeError, "duplicate value"),
    ("sum axis=2", on(M, lambda x: jitad.sum(x, axis=2)), jitad.ShapeError, "axis 2 is out of range"),
    ("sum axis float", on(M, lambda x: jitad.sum(x, axis=1.0)), jitad.ArgumentError, "axis=1.0"),
    ("sum axis str", on(M, lambda x: jitad.sum(x, axis="a")), jitad.ArgumentError, "is not an int"),
    ("mean axis=2", on(M, lambda x: jitad.mean(x, axis=2)), jitad.ShapeError, "`mean`: axis 2"),
    ("max axis=-3", on(M, lambda x: jitad.max(x, axis=-3)), jitad.ShapeError, "`max`: axis -3"),
    ("min axis=2", on(M, lambda x: jitad.min(x, axis=2)), jitad.ShapeError, "`min`: axis 2"),
    ("softmax axis=3", on(M, lambda x: jitad.softmax(x, axis=3)), jitad.ShapeError, "`softmax`: axis 3"),
    ("log_softmax axis=3", on(M, lambda x: jitad.log_softmax(x, axis=3)), jitad.ShapeError, "`log_softmax`"),
    ("logsumexp axis=-3", on(M, lambda x: jitad.logsumexp(x, axis=-3)), jitad.ShapeError, "`logsumexp`"),
    ("stack axis=4", on(M, lambda x: jitad.stack([x, x], axis=4)), jitad.ShapeError, "`stack`: axis 4"),
    ("transpose axis 5", on(M, lambda x: jitad.transpose(x, (0, 5))), jitad.ShapeError, "out of range"),
    ("transpose (0, 0)", on(M, lambda x: jitad.transpose(x, (0, 0))), jitad.ShapeError, "not a permutation"),
    # item 9: argnums, static_argnums
    ("argnums=(0, 0)", lambda: jitad.grad(lambda x, y: x * y, argnums=(0, 0))(1.0, 2.0),
     jitad.ArgumentError, "repeats an argument"),
    ("argnums=1.0", lambda: jitad.grad(lambda x, y: x * y, argnums=1.0), jitad.ArgumentError, "argnums=1.0"),
    ("argnums=True", lambda: jitad.value_and_grad(lambda x, y: x * y, argnums=True), jitad.ArgumentError,
     "argnums=True"),
    ("argnums=()", lambda: jitad.grad(lambda x: x, argnums=()), jitad.ArgumentError, "argnums=()"),
    ("hvp argnums=(0, 0)", lambda: jitad.hvp(lambda x: x * x, argnums=(0, 0)), jitad.ArgumentError, "repeats"),
    ("hessian argnums=3", lambda: jitad.hessian(lambda x: x * x, argnums=3)(1.0), jitad.ArgumentError,
     "argnums=3"),
    ("static_argnums=5", lambda: jitad.jit(lambda x, n: x * n, static_argnums=5)(1.0, 2.0),
     jitad.ArgumentError, "static_argnums includes 5"),
    ("static_argnums=-3", lambda: jitad.jit(lambda x, n: x * n, static_argnums=-3)(1.0, 2.0),
     jitad.ArgumentError, "static_argnums includes -3"),
    ("static_argnums=1.0", lambda: jitad.jit(lambda x, n: x * n, static_argnums=1.0), jitad.ArgumentError,
     "static_argnums=1.0"),
    # item 9: optimizers and tree_map pair leaves only of equal structures
    ("sgd other keys", optimizer_update(jitad.optim.sgd(0.1), P, {"a": 1.0, "c": 2.0}), jitad.ArgumentError,
     "params and grads have different structures: {'a': *, 'b': *} vs {'a': *, 'c': *}"),
    ("adam list grads", optimizer_update(jitad.optim.adam(0.1), P, [1.0, 2.0]), jitad.ArgumentError,
     "{'a': *, 'b': *} vs [*, *]"),
    ("adagrad fewer grads", optimizer_update(jitad.optim.adagrad(0.1), P, {"a": 1.0}), jitad.ArgumentError,
     "params and grads"),
    ("sgd momentum state", optimizer_update(jitad.optim.sgd(0.1, 0.9), P, P, [1.0, 2.0]), jitad.ArgumentError,
     "params and state"),
    ("adam state", optimizer_update(jitad.optim.adam(0.1), P, P, [1.0, 2.0]), jitad.ArgumentError,
     "state's first moments"),
    ("adam staged", lambda: jitad.jit(lambda p: jitad.optim.adam(0.1).update(
        p, (p, p), jitad.optim.adam(0.1).init(p)))((1.0, 2.0)), jitad.ArgumentError, "(*, *) vs ((*, *), (*, *))"),
    ("tree_map", lambda: jitad.tree_map(lambda a, b: a + b, (1.0, 2.0), [1.0, 2.0]), jitad.ArgumentError,
     "different from the first tree's (*, *)"),
    # item 10: internal errors that reached users
    ("IF on a tensor", on(np.ones(3), lambda x: jitad.IF(x > 0, lambda: x, lambda: -x)), jitad.StagingError,
     "must be a scalar bool"),
    ("IF on a numpy tensor", lambda: jitad.IF(np.ones(3) > 0, lambda: 1, lambda: 2), jitad.StagingError,
     "must be a scalar bool"),
    ("WHILE on a tensor", on(np.ones(3), lambda x: jitad.WHILE(lambda s: s < 3.0, lambda s: s + 1.0, x)),
     jitad.StagingError, "jitad.where"),
    ("vjp cotangent shape", pullback(np.ones(4)), jitad.ShapeError, "cotangent of shape (4,) for output 0 of shape (3,)"),
    ("vjp scalar cotangent", pullback(1.0), jitad.ShapeError, "cotangent of shape ()"),
    ("custom bwd shape", custom_with_bwd(lambda r, g: (np.ones(4),)), jitad.ShapeError,
     "cotangent of shape (4,) for argument leaf 0 of shape (3,)"),
    ("custom bwd staged shape", custom_with_bwd(lambda r, g: (jitad.sum(g),)), jitad.ShapeError,
     "cotangent of shape ()"),
    ("reshape (-2, 3)", on(np.ones(6), lambda x: jitad.reshape(x, (-2, 3))), jitad.ShapeError, "must be >= 0"),
    ("reshape (-2, -3)", on(np.ones(6), lambda x: jitad.reshape(x, (-2, -3))), jitad.ShapeError, "must be >= 0"),
    ("reshape (-1, -1)", on(np.ones(6), lambda x: jitad.reshape(x, (-1, -1))), jitad.ShapeError, "at most one"),
    ("reshape (-1, 4)", on(np.ones(6), lambda x: jitad.reshape(x, (-1, 4))), jitad.ShapeError, "cannot reshape"),
    ("reshape (-1, 0)", on(np.ones(0), lambda x: jitad.reshape(x, (-1, 0))), jitad.ShapeError, "cannot reshape"),
    ("reshape float", on(np.ones(6), lambda x: jitad.reshape(x, (2.5, 2))), jitad.ArgumentError, "tuple of ints"),
    ("np.sum(dtype=)", on(np.ones(3), lambda x: np.sum(x, dtype=np.float32)), jitad.StagingError,
     "Call `jitad.sum(x, axis=None, keepdims=False)`"),
    ("np.spacing", on(np.ones(3), lambda x: np.spacing(x)), jitad.StagingError, "jitad has no function"),
    ("np.add.reduce", on(np.ones(3), lambda x: np.add.reduce(x)), jitad.StagingError, "jitad.sum"),
    ("np.add(out=)", on(np.ones(3), lambda x: np.add(x, 1.0, out=np.zeros(3))), jitad.StagingError, "out="),
    ("ndarray += staged", on(np.ones(3), lambda x: np.zeros(3).__iadd__(x)), jitad.StagingError, "a = a + x"),
    ("np.array of staged", on(1.0, lambda x: np.array([x, x])), jitad.StagingError, "jitad.stack"),
    ("item()", on(1.0, lambda x: x.item()), jitad.StagingError, "`item()`"),
    # hostile arguments
    ("grad of a non-function", lambda: jitad.grad(5), jitad.ArgumentError, "takes a function"),
    ("jit of a non-function", lambda: jitad.jit("f"), jitad.ArgumentError, "takes a function"),
    ("jvp primals not a tuple", lambda: jitad.jvp(lambda x: x * x, 1.0, 1.0), jitad.ArgumentError,
     "must be tuples"),
    ("IF with values", on(1.0, lambda x: jitad.IF(x > 0, 1.0, 2.0)), jitad.ArgumentError, "lambda: value"),
    ("WHILE with a staged cond", on(1.0, lambda x: jitad.WHILE(x < 3.0, lambda s: s, x)), jitad.ArgumentError,
     "cond_fn must be a function"),
    ("FOR body", on(1.0, lambda x: jitad.FOR(0, 3, x, x)), jitad.ArgumentError, "body_fn must be a function"),
    ("FUN of an int", lambda: jitad.FUN(5), jitad.ArgumentError, "fn must be a function"),
    ("int constant > int64", on(2, lambda x: x * 2**70), jitad.ArgumentError, "does not fit in 64 bits"),
    ("eager exp of a string", lambda: jitad.exp("a"), jitad.ArgumentError, "type str"),
    ("eager exp of None", lambda: jitad.exp(None), jitad.ArgumentError, "NoneType"),
    ("dict keys of mixed types", on({1: 1.0, "a": 2.0}, lambda d: d["a"]), jitad.ArgumentError, "comparable"),
    ("ShapeDtype int shape", lambda: jitad.ShapeDtype(3, "f64"), jitad.ArgumentError, "tuple of ints"),
    ("zeros negative", lambda: jitad.zeros(-1), jitad.ShapeError, "negative dimension"),
    ("zeros complex", lambda: jitad.zeros(2, dtype="complex"), jitad.ArgumentError, "unknown dtype"),
    ("broadcast_to negative", on(np.ones(3), lambda x: jitad.broadcast_to(x, (3, -1))), jitad.ShapeError,
     "negative dimension"),
    ("random key str", lambda: jitad.random.uniform("key", (2,)), jitad.ArgumentError, "a key is an int"),
    ("random key float", on(1.0, lambda k: jitad.random.uniform(k, (2,))), jitad.ArgumentError, "a key is an int"),
    ("random negative shape", lambda: jitad.random.normal(0, (-2,)), jitad.ShapeError, "negative dimension"),
    ("check_grads ints", lambda: jitad.testing.check_grads(lambda x: x * x, (1,)), jitad.ArgumentError,
     "no float arguments"),
]


@pytest.mark.parametrize("name, call, error, phrase", CASES, ids=[c[0] for c in CASES])
def test_user_mistake_raises_a_jitad_error(name, call, error, phrase):
    with pytest.raises(error) as info:
        call()
    assert isinstance(info.value, jitad.JitadError)
    assert phrase in str(info.value), str(info.value)


def test_negative_padding_does_not_crash():
    """conv2d(padding=-2) wrote outside its buffer (glibc abort): run it in a subprocess."""
    code = textwrap.dedent("""
        import numpy as np, jitad
        x, w = np.ones((1, 1, 4, 4)), np.ones((1, 1, 2, 2))
        try:
            jitad.jit(lambda x, w: jitad.conv2d(x, w, padding=-2))(x, w)
        except jitad.ArgumentError:
            print("refused")
        print(jitad.jit(lambda x, w: jitad.conv2d(x, w, padding=1))(x, w).sum())
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["refused", "64.0"]


# -- what must keep working ---------------------------------------------------------

def test_negative_axes_in_range_work():
    x = np.arange(6.0).reshape(2, 3)
    f = jitad.jit(lambda x: (jitad.concatenate([x, x], axis=-1), jitad.sum(x, axis=(-1,)),
                             jitad.stack([x, x], axis=-1), jitad.transpose(x, (-1, 0)), jitad.mean(x, -2)))
    cat, s, st, t, m = f(x)
    np.testing.assert_array_equal(cat, np.concatenate([x, x], -1))
    np.testing.assert_array_equal(s, x.sum(-1))
    np.testing.assert_array_equal(st, np.stack([x, x], -1))
    np.testing.assert_array_equal(t, x.T)
    np.testing.assert_array_equal(m, x.mean(-2))


def test_reshape_infers_one_dimension():
    x = np.arange(6.0)
    out = jitad.jit(lambda x: (jitad.reshape(x, (2, -1)), x.reshape(-1, 3), jitad.reshape(x, -1)))(x)
    assert [o.shape for o in out] == [(2, 3), (2, 3), (6,)]


def test_negative_static_argnums_count_from_the_end():
    f = jitad.jit(lambda x, n: x * n, static_argnums=-1)
    assert f(2.0, 3) == 6.0 and f(2.0, 4) == 8.0


def test_valid_network_arguments_still_work():
    x = np.arange(32.0).reshape(1, 2, 4, 4)
    w = np.ones((3, 2, 3, 3))
    out = jitad.jit(lambda x, w: jitad.conv2d(x, w, np.zeros(3), stride=2, padding=1))(x, w)
    assert out.shape == (1, 3, 2, 2)
    assert jitad.jit(lambda x: jitad.max_pool2d(x, 4))(x).shape == (1, 2, 1, 1)
    assert jitad.jit(lambda x: jitad.avg_pool2d(x, 2, stride=1))(x).shape == (1, 2, 3, 3)
    np.testing.assert_array_equal(jitad.jit(lambda x: jitad.dropout(x, 0.0, 0))(x), x)


NUMPY_ON_STAGED = [
    # (id, fn, argument, expected)
    ("np.sin", lambda x: np.sin(x), np.ones(3), np.sin(np.ones(3))),
    ("np.exp scalar", lambda x: np.exp(x), 2.0, np.exp(2.0)),
    ("np.abs", lambda x: np.abs(x), -2.0, 2.0),
    ("np.maximum", lambda x: np.maximum(x, 0.0), np.array([-1.0, 2.0]), [0.0, 2.0]),
    ("np.sum", lambda x: np.sum(x), np.ones(3), 3.0),
    ("np.sum axis keepdims", lambda x: np.sum(x, axis=0, keepdims=True), np.ones(3), [3.0]),
    ("np.mean", lambda x: np.mean(x, axis=0), np.arange(3.0), 1.0),
    ("np.max", lambda x: np.max(x), np.arange(3.0), 2.0),
    ("np.concatenate", lambda x: np.concatenate([x, x]), np.ones(2), np.ones(4)),
    ("np.where", lambda x: np.where(x > 0, x, 0.0), np.array([-1.0, 2.0]), [0.0, 2.0]),
    ("np.reshape", lambda x: np.reshape(x, (2, 1)), np.ones(2), np.ones((2, 1))),
    ("np.shape", lambda x: np.sum(x) + np.shape(x)[0] + np.ndim(x), np.ones(3), 7.0),
    ("ndarray + staged", lambda x: np.ones(3) + x, np.ones(3), 2 * np.ones(3)),
    ("ndarray - staged", lambda x: np.ones(3) - x, 2.0, -np.ones(3)),
    ("ndarray @ staged", lambda x: np.ones(3) @ x, np.ones(3), 3.0),
    ("ndarray < staged", lambda x: np.zeros(3) < x, np.ones(3), [True] * 3),
    ("ndarray ** staged", lambda x: np.full(2, 2.0) ** x, 3.0, [8.0, 8.0]),
    ("np.float64 * staged", lambda x: np.float64(2.0) * x, 2.0, 4.0),
    ("np.int64 // staged", lambda x: np.int64(7) // x, 2, 3),
]


@pytest.mark.parametrize("name, fn, arg, expected", NUMPY_ON_STAGED, ids=[c[0] for c in NUMPY_ON_STAGED])
def test_numpy_functions_run_the_jitad_function(name, fn, arg, expected):
    out = jitad.jit(fn)(arg)
    np.testing.assert_allclose(out, expected)
    assert np.shape(out) == np.shape(expected)


def test_numpy_function_gradient():
    assert jitad.grad(lambda x: np.sum(np.sin(x) * np.ones(3)))(np.zeros(3)).tolist() == [1.0, 1.0, 1.0]
