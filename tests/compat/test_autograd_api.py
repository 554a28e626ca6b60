"""autograd's API at jitad's paths (top level, extend, builtins, misc, test_util, the
internals user code imports), each called and compared with autograd on the same inputs."""
import collections

import numpy as np
import pytest

import jitad

autograd = pytest.importorskip("autograd")
anp = pytest.importorskip("autograd.numpy")

X = np.array([0.1, -0.2, 0.3])
Y = np.array([1.0, 2.0, -0.5])


def close(ours, theirs):
    ol, tl = jitad.tree_util.tree_leaves(ours), jitad.tree_util.tree_leaves(theirs)
    assert len(ol) == len(tl)
    for a, b in zip(ol, tl):
        np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=1e-10, atol=1e-12)


def f(x, y):
    return jitad.sum(jitad.sin(x) * y) + jitad.sum(x ** 3)


def af(x, y):
    return anp.sum(anp.sin(x) * y) + anp.sum(x ** 3)


def test_grad_family_at_autograds_signatures():
    close(jitad.grad(f, 1)(X, Y), autograd.grad(af, 1)(X, Y))
    close(jitad.grad(f, argnum=(0, 1))(X, Y), autograd.grad(af, argnum=(0, 1))(X, Y))
    close(jitad.value_and_grad(f, argnum=1)(X, Y), autograd.value_and_grad(af, argnum=1)(X, Y))
    close(jitad.elementwise_grad(jitad.tanh)(X), autograd.elementwise_grad(anp.tanh)(X))
    close(jitad.jacobian(lambda x: jitad.sin(x) * x, argnum=0)(X), autograd.jacobian(lambda x: anp.sin(x) * x)(X))
    close(jitad.hessian(f, argnum=1)(X, Y), autograd.hessian(af, argnum=1)(X, Y))
    close(jitad.hessian(f)(X, Y), autograd.hessian(af)(X, Y))
    # a result of one element is a scalar to autograd (JAX refuses it)
    one = np.array([0.7])
    close(jitad.grad(lambda x: jitad.sin(x) * 2.0)(one), autograd.grad(lambda x: anp.sin(x) * 2.0)(one))
    close(jitad.grad(lambda x: jitad.reshape(x, (1, 1)) ** 2)(np.float64(3.0)),
          autograd.grad(lambda x: anp.reshape(x, (1, 1)) ** 2)(np.float64(3.0)))
    with pytest.raises(jitad.ArgumentError, match="float scalar"):
        jitad.grad(lambda x: x * 2.0)(np.ones(2))
    close(jitad.grad(jitad.checkpoint(lambda x: jitad.sum(jitad.sin(x) ** 2)))(X),
          autograd.grad(autograd.checkpoint(lambda x: anp.sum(anp.sin(x) ** 2)))(X))


def test_vjp_jvp_hvp_and_products():
    vjp, value = jitad.make_vjp(f)(X, Y)
    avjp, avalue = autograd.make_vjp(af)(X, Y)
    close(value, avalue)
    close(vjp(2.0), avjp(2.0))
    vjp2, _ = jitad.make_vjp(f, (0, 1))(X, Y)
    close(vjp2(1.0), autograd.make_vjp(af, (0, 1))(X, Y)[0](1.0))
    close(jitad.make_jvp(f)(X, Y)(Y), autograd.make_jvp(af)(X, Y)(Y))
    hvp, g = jitad.make_hvp(f)(X, Y)
    ahvp, ag = autograd.make_hvp(af)(X, Y)
    close(g, ag)
    close(hvp(Y), ahvp(Y))
    for name in ("hessian_tensor_product", "hessian_vector_product"):
        close(getattr(jitad, name)(f)(X, Y, Y), getattr(autograd, name)(af)(X, Y, Y))
    for name in ("tensor_jacobian_product", "vector_jacobian_product"):
        close(getattr(jitad, name)(jitad.sin)(X, Y), getattr(autograd, name)(anp.sin)(X, Y))
    close(jitad.deriv(jitad.sin)(0.5), autograd.deriv(anp.sin)(0.5))
    close(jitad.deriv(lambda x: x ** 2)(X), autograd.deriv(lambda x: x ** 2)(X))
    close(jitad.grad_and_aux(lambda x: (jitad.sum(x ** 2), x * 3.0))(X),
          autograd.grad_and_aux(lambda x: (anp.sum(x ** 2), x * 3.0))(X))
    close(jitad.make_ggnvp(jitad.sin)(X)(Y), autograd.make_ggnvp(anp.sin)(X)(Y))
    g2 = lambda z: jitad.sum(z ** 4)   # noqa: E731
    close(jitad.make_ggnvp(jitad.tanh, g2)(X)(Y), autograd.make_ggnvp(anp.tanh, lambda z: anp.sum(z ** 4))(X)(Y))


def test_named_gradients():
    def loss(w, b=0.5, scale=2.0):
        return jitad.sum((w * scale + b) ** 2)

    def aloss(w, b=0.5, scale=2.0):
        return anp.sum((w * scale + b) ** 2)
    close(jitad.grad_named(loss, "b")(X, 0.25), autograd.grad_named(aloss, "b")(X, 0.25))
    grads = jitad.multigrad_dict(loss)(X, scale=3.0)
    assert isinstance(grads, collections.OrderedDict) and list(grads) == ["w", "b", "scale"]
    for i, name in enumerate(["w", "b", "scale"]):   # autograd's own needs `funcsigs`: per argument instead
        close(grads[name], autograd.grad(aloss, i)(X, 0.5, 3.0))
    with pytest.raises(jitad.ArgumentError, match="no argument"):
        jitad.grad_named(loss, "c")
    assert jitad.holomorphic_grad(lambda z: z * z)(1.0 + 2.0j) == autograd.holomorphic_grad(lambda z: z * z)(1.0 + 2.0j)


def test_primitive_defvjp_defjvp():
    from autograd import extend as aext

    from jitad import extend as ext

    def logsumexp(x, axis=None):
        m = jitad.max(x)
        return m + jitad.log(jitad.sum(jitad.exp(x - m)))

    def alogsumexp(x, axis=None):
        m = anp.max(x)
        return m + anp.log(anp.sum(anp.exp(x - m)))
    ours, theirs = ext.primitive(logsumexp), aext.primitive(alogsumexp)
    calls = []

    def maker(lib):
        def vjp_maker(ans, x, axis=None):
            calls.append(lib)
            return lambda g: g * lib.exp(x - ans)
        return vjp_maker
    ext.defvjp(ours, maker(jitad))
    aext.defvjp(theirs, maker(anp))
    close(jitad.grad(lambda x: ours(x) * 2.0)(X), autograd.grad(lambda x: theirs(x) * 2.0)(X))
    assert jitad in calls   # the user's rule ran
    close(jitad.jit(ours)(X), theirs(X))

    scaled, ascaled = ext.primitive(lambda x, y, k=1.0: x * y * k), aext.primitive(lambda x, y, k=1.0: x * y * k)
    ext.defvjp(scaled, lambda ans, x, y, k=1.0: lambda g: g * y * k, None)
    aext.defvjp(ascaled, lambda ans, x, y, k=1.0: lambda g: g * y * k, None)
    close(jitad.grad(lambda a, b: jitad.sum(scaled(a, b, k=3.0)), argnum=(0, 1))(X, Y),
          autograd.grad(lambda a, b: anp.sum(ascaled(a, b, k=3.0)), argnum=(0,))(X, Y) + (np.zeros(3),))

    cube, acube = ext.primitive(lambda x: x ** 3), aext.primitive(lambda x: x ** 3)
    ext.defjvp(cube, lambda g, ans, x: 3.0 * x ** 2 * g)
    aext.defjvp(acube, lambda g, ans, x: 3.0 * x ** 2 * g)
    close(jitad.jvp(cube, (X,), (Y,))[1], autograd.make_jvp(acube)(X)(Y)[1])

    both, aboth = ext.primitive(lambda x, y: x * y), aext.primitive(lambda x, y: x * y)
    ext.defvjp_argnum(both, lambda argnum, ans, args, kwargs: lambda g: g * args[1 - argnum])
    aext.defvjp_argnum(aboth, lambda argnum, ans, args, kwargs: lambda g: g * args[1 - argnum])
    close(jitad.grad(lambda a, b: jitad.sum(both(a, b)), argnum=(0, 1))(X, Y),
          autograd.grad(lambda a, b: anp.sum(aboth(a, b)), argnum=(0, 1))(X, Y))
    lin, alin = ext.primitive(lambda x: 3.0 * x), aext.primitive(lambda x: 3.0 * x)
    ext.def_linear(lin)
    aext.def_linear(alin)
    close(jitad.jvp(lin, (X,), (Y,))[1], autograd.make_jvp(alin)(X)(Y)[1])
    sparse = ext.primitive(lambda x: x[1])
    ext.defvjp(sparse, lambda ans, x: lambda g: ext.SparseObject(ext.vspace(x), lambda dense: dense + np.eye(3)[1] * g))
    close(jitad.grad(lambda x: sparse(x) * 2.0)(X), np.array([0.0, 2.0, 0.0]))
    const = ext.notrace_primitive(lambda x: x * 2.0)
    close(jitad.grad(lambda x: jitad.sum(const(x) * x))(X), 2.0 * X)   # the notrace part is a constant
    with pytest.raises(jitad.ArgumentError, match="@primitive"):
        ext.defvjp(lambda x: x, None)


def test_primitive_on_plain_values_runs_the_function_itself():
    """Called outside a transformation (arrays, jitad arrays, numbers, containers, keywords),
    an @primitive runs its function on the very objects given, as autograd's does (an
    in-place write lands in the caller's array); under `grad` its rule runs instead."""
    from autograd import extend as aext

    from jitad import extend as ext
    seen = []

    def body(x, *rest, **kw):
        seen.append((x, rest, kw))
        if isinstance(x, np.ndarray) and x.flags.writeable:
            x[0] = 7.0   # (plain values only: a staged argument is never written)
        return jitad.sum(x) + sum(jitad.sum(r) for r in jitad.tree_util.tree_leaves(rest))
    ours = ext.primitive(body)
    ext.defvjp(ours, lambda ans, x, *rest, **kw: lambda g: g * jitad.ones_like(x) * 2.0)
    theirs = aext.primitive(body)
    for args, kw in [((X.copy(),), {}), ((jitad.numpy.asarray(X) * 1.0, 2.0, 3), {}), ((1.5, np.float32(2.0)), {}),
                     ((X.copy(), [Y, (1.0,)]), {}), ((X.copy(),), {"scale": 2.0}), ((np.int64(3), True), {})]:
        seen.clear()
        mine = ours(*args, **kw)
        assert seen[0][0] is args[0] and all(a is b for a, b in zip(seen[0][1], args[1:])) and seen[0][2] == kw
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        np.testing.assert_allclose(mine, theirs(*copies, **kw), rtol=1e-14)
        if isinstance(args[0], np.ndarray):
            assert args[0][0] == 7.0
    g = jitad.grad(lambda x: ours(x * 1.0))(X)   # staged: the rule (2, not the body's 1)
    np.testing.assert_allclose(g, 2.0 * np.ones(3))


def test_vspace_like_autograds():
    from autograd.extend import vspace as avspace

    from jitad.extend import vspace
    for value in (np.ones((2, 3)), 1.5, (1.0, [np.ones(2)]), {"a": np.zeros(2), "b": 1.0}):
        vs, avs = vspace(value), avspace(value)
        assert vs.size == avs.size
        close(vs.zeros(), avs.zeros())
        close(vs.ones(), avs.ones())
        assert vs == vspace(vs.zeros())
    vs, avs = vspace(np.ones(2)), avspace(np.ones(2))
    assert (vs.shape, vs.dtype) == (avs.shape, avs.dtype) and repr(vs) == repr(avs)
    close(list(vs.standard_basis()), list(avs.standard_basis()))
    close(vs.inner_prod(X[:2], Y[:2]), avs.inner_prod(X[:2], Y[:2]))
    close(vs.add(X[:2], Y[:2]), avs.add(X[:2], Y[:2]))
    close(vs.scalar_mul(X[:2], 3.0), avs.scalar_mul(X[:2], 3.0))
    close(vs.covector(X[:2]), avs.covector(X[:2]))
    assert vs.randn().shape == (2,)
    with pytest.raises(jitad.ArgumentError, match="vector space"):
        vspace("text")


def test_builtins():
    from autograd import builtins as ab

    from jitad import builtins as b
    assert b.tuple is tuple and b.list is list and b.dict is dict
    seen = []

    def probe(x, s):
        seen.append((b.isinstance(x, np.ndarray), b.type(x), b.isinstance(s, float), b.type(s)))
        return jitad.sum(x) * s
    jitad.grad(probe)(X, 2.0)
    autograd.grad(lambda x, s: (seen.append((ab.isinstance(x, np.ndarray), ab.type(x), ab.isinstance(s, float),
                                              ab.type(s))), anp.sum(x) * s)[1])(X, 2.0)
    assert seen[0] == seen[1] == (True, np.ndarray, True, float)
    assert b.type("K", (object,), {}).__name__ == ab.type("K", (object,), {}).__name__ == "K"
    assert b.subvals((1, 2, 3), [(0, 9)]) == ab.subvals((1, 2, 3), [(0, 9)])
    assert b.sequence_extend_left((1, 2), 0) == ab.sequence_extend_left((1, 2), 0)
    assert b.sequence_extend_right([1, 2], 3, 4) == ab.sequence_extend_right([1, 2], 3, 4)
    assert b.make_sequence(list, 1.0, 2.0) == ab.make_sequence(list, 1.0, 2.0)
    assert b.container_take((1.0, 2.0), 1) == ab.container_take((1.0, 2.0), 1)
    sparse = ab.container_untake(5.0, 1, ab.vspace((1.0, 2.0)))   # (autograd's is lazy: made dense here)
    close(b.container_untake(5.0, 1, b.vspace((1.0, 2.0))), sparse.mut_add(list(sparse.vs.zeros())))
    close(b.container_untake(5.0, "a", b.vspace({"a": 1.0, "b": 2.0})), {"a": 5.0, "b": 0.0})
    sparse = ab.grad_container_take(None, (1.0, 2.0), 0)(3.0)
    close(b.grad_container_take(None, (1.0, 2.0), 0)(3.0), sparse.mut_add(list(sparse.vs.zeros())))
    for fn in ("grad_sequence_extend_left", "grad_sequence_extend_right"):
        args = ((1.0, 2.0), 3.0)
        assert getattr(b, fn)(1, None, args, {})((7.0, 8.0, 9.0)) == getattr(ab, fn)(1, None, args, {})((7.0, 8.0, 9.0))
    sparse = ab.fwd_grad_make_sequence(1, 4.0, (1.0, 2.0), tuple, 1.0, 2.0)
    close(b.fwd_grad_make_sequence(1, 4.0, (1.0, 2.0), tuple, 1.0, 2.0), sparse.mut_add(list(sparse.vs.zeros())))


def test_hessian_vector_product_is_one_compiled_pass_across_calls():
    # (as scipy's Newton-CG calls it: a new point and vector each time; forward-over-reverse,
    # compiled once, at any size: the vjp of a gradient took one forward pass per input
    # element, and refused past 256 of them)
    from jitad.lower import runtime
    n = 300
    hvp, ahvp = jitad.hessian_vector_product(f), autograd.hessian_vector_product(af)
    rs = np.random.RandomState(0)
    points = [(rs.randn(n), rs.randn(n), rs.randn(n)) for _ in range(4)]
    close(hvp(*points[0]), ahvp(*points[0]))
    before = runtime.STATS["compiled"] + runtime.STATS["loaded"]
    for x, y, v in points[1:]:
        close(hvp(x, y, v), ahvp(x, y, v))
    assert runtime.STATS["compiled"] + runtime.STATS["loaded"] == before
    close(jitad.hessian_vector_product(f, 1)(X, Y, Y), autograd.hessian_vector_product(af, 1)(X, Y, Y))


def test_misc_flatten_optimizers_fixed_point_const_graph():
    from autograd.misc import flatten as aflatten
    from autograd.misc.fixed_points import fixed_point as afixed_point
    from autograd.misc.optimizers import adam as aadam, rmsprop as armsprop, sgd as asgd

    from jitad.misc import const_graph, flatten
    from jitad.misc.fixed_points import fixed_point
    from jitad.misc.optimizers import adam, rmsprop, sgd
    tree = {"w": np.arange(4.0).reshape(2, 2), "b": (np.ones(2), 3.0)}
    flat, unflatten = flatten(tree)
    aflat, aunflatten = aflatten(tree)
    close(flat, aflat)
    close(unflatten(flat * 2.0), aunflatten(aflat * 2.0))
    target = {"w": np.ones(2), "b": np.array([2.0])}
    for ours, theirs in ((adam, aadam), (sgd, asgd), (rmsprop, armsprop)):
        seen, aseen = [], []
        out = ours(jitad.grad(lambda p, i: jitad.sum((p["w"] - target["w"]) ** 2) + jitad.sum(p["b"] ** 2)),
                   {"w": np.zeros(2), "b": np.ones(1)}, callback=lambda x, i, g: seen.append(i), num_iters=20,
                   step_size=0.1)
        aout = theirs(autograd.grad(lambda p, i: anp.sum((p["w"] - target["w"]) ** 2) + anp.sum(p["b"] ** 2)),
                      {"w": np.zeros(2), "b": np.ones(1)}, callback=lambda x, i, g: aseen.append(i), num_iters=20,
                      step_size=0.1)
        close(out, aout)
        assert seen == aseen == list(range(20))
    newton = lambda a: lambda x: 0.5 * (x + a / x)   # noqa: E731
    dist = lambda x, y: jitad.abs(x - y)   # noqa: E731
    adist = lambda x, y: anp.abs(x - y)   # noqa: E731
    close(fixed_point(newton, 2.0, 1.0, dist, 1e-12), afixed_point(newton, 2.0, 1.0, adist, 1e-12))
    close(jitad.grad(lambda a: fixed_point(newton, a, 1.0, dist, 1e-12))(2.0),
          autograd.grad(lambda a: afixed_point(newton, a, 1.0, adist, 1e-12))(2.0))
    damped = lambda a: lambda x: 0.5 * jitad.cos(x) * a   # noqa: E731
    adamped = lambda a: lambda x: 0.5 * anp.cos(x) * a   # noqa: E731
    close(jitad.grad(lambda a: fixed_point(damped, a, 0.0, dist, 1e-13))(1.0),
          autograd.grad(lambda a: afixed_point(adamped, a, 0.0, adist, 1e-13))(1.0))
    g = const_graph(lambda k, x: k * jitad.sin(x), 3.0)
    close(g(0.5), 3.0 * np.sin(0.5))
    close(g(X), 3.0 * np.sin(X))


def test_test_util_checks():
    from autograd import test_util as atu

    from jitad import test_util as tu
    assert (tu.EPS, tu.RTOL, tu.TOL) == (atu.EPS, atu.RTOL, atu.TOL)
    tu.check_grads(f, modes=["fwd", "rev"], order=2)(X, Y)
    atu.check_grads(af, modes=["fwd", "rev"], order=2)(X, Y)
    tu.check_grads(f, 1, modes=["rev"])(X, Y)
    tu.check_vjp(jitad.tanh, X)
    tu.check_jvp(jitad.tanh, X)
    atu.check_vjp(anp.tanh, X)
    tu.combo_check(lambda x, k=1.0: jitad.sum(jitad.sin(x) * k), [0], modes=["rev"])([X, Y], k=[1.0, 2.0])
    atu.combo_check(lambda x, k=1.0: anp.sum(anp.sin(x) * k), [0], modes=["rev"])([X, Y], k=[1.0, 2.0])
    tu.check_grads(f, [0, 1], modes=["rev"], order=1)(X, Y)
    with pytest.raises(AssertionError):   # a wrong gradient is caught through the combinations
        bad = jitad.custom_vjp(lambda x, k: jitad.sum(x) * k)
        bad.defvjp(lambda x, k: (jitad.sum(x) * k, (x, k)), lambda r, g: (g * r[1] * 1.5 + 0.0 * r[0], g))
        tu.combo_check(bad, [0], modes=["rev"])([X], [2.0])
    with pytest.raises(AssertionError):
        wrong = jitad.custom_jvp(lambda x: jitad.sin(x))
        wrong.defjvp(lambda p, t: (jitad.sin(p[0]), 2.0 * t[0]))
        tu.check_jvp(wrong, 0.3)
    tu.check_equivalent((1.0, np.ones(2)), (1.0, np.ones(2)))
    with pytest.raises(AssertionError):
        tu.check_equivalent((1.0,), (1.1,))
    assert tu.scalar_close(1.0, 1.0 + 1e-9) == atu.scalar_close(1.0, 1.0 + 1e-9) is True
    np.testing.assert_allclose(tu.make_numerical_jvp(np.sin, X)(Y), atu.make_numerical_jvp(np.sin, X)(Y), rtol=1e-12)
    np.testing.assert_allclose(tu.make_numerical_jvp(np.sin, X)(Y), np.cos(X) * Y, rtol=1e-5)
    assert tu.get_name(f) == atu.get_name(af).replace("af", "f")


def test_internal_modules_users_import():
    from autograd import util as au, wrap_util as awu

    from jitad import core, tracer, util, wrap_util
    assert util.subval((1, 2, 3), 1, 9) == au.subval((1, 2, 3), 1, 9)
    assert util.func(len) is len

    class Node:
        def __init__(self, *parents):
            self.parents = parents
    a = Node()
    b = Node(a)
    c = Node(a, b)
    order = util.toposort(c)
    assert order.index(c) < order.index(b) < order.index(a)
    assert [id(n) for n in order] == [id(n) for n in au.toposort(c, lambda n: n.parents)]
    util.quick_grad_check(lambda x: jitad.sum(jitad.sin(x)), X, verbose=False)

    @wrap_util.unary_to_nary
    def twice(fun, x):
        return 2.0 * fun(x)

    @awu.unary_to_nary
    def atwice(fun, x):
        return 2.0 * fun(x)
    assert twice(lambda a, b: a * b, 1)(3.0, 4.0) == atwice(lambda a, b: a * b, 1)(3.0, 4.0)
    named = wrap_util.wraps(f, namestr="grad_of_{fun}")(lambda: None)
    assert named.__name__ == awu.wraps(af, namestr="grad_of_{fun}")(lambda: None).__name__.replace("af", "f")
    assert wrap_util.get_doc(f) == "" and wrap_util.wrap_nary_f(f, twice, 0)(lambda: None).__name__ == \
        "twice_of_f_wrt_argnum_0"
    assert core.vspace(np.ones(3)).size == 3 and core.getval(2.0) == 2.0
    seen = []
    jitad.grad(lambda x: (seen.append((core.isbox(x), tracer.isbox(x), isinstance(x, core.Box))), x * x)[1])(1.0)
    assert seen == [(True, True, True)] and not tracer.isbox(1.0)
    close(core.make_vjp(jitad.sin)(0.5)[0](1.0), np.cos(0.5))
    ext_calls = []
    tracer.register_notrace("trace", ext_calls.append)
    assert core.VJPNode and core.JVPNode and core.Tracer is core.Box and str(core.ShapedArray((2,), np.float64)) == \
        "float64[2]"
