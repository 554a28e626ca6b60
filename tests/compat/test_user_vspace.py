"""autograd's user vector spaces (`VSpace.register`, `Box.register`): `grad` with respect to a
value of a user's type returns its cotangent in the registered space, as autograd's does. The
same program runs through autograd and jitad (each library's `extend` and `numpy`)."""
import numpy as np
import pytest

import jitad
import jitad.extend
import jitad.numpy as jnp
from jitad.errors import UnsupportedError

pytest.importorskip("autograd")
import autograd.extend  # noqa: E402
import autograd.numpy as anp  # noqa: E402


def sparse_program(extend, numpy):
    """A sparse vector (a dict of coefficients, its cotangent of another key set) read by a
    @primitive, and a user space that adds such vectors."""
    class Sparse:
        def __init__(self, coef):
            self.coef = coef

        @extend.primitive
        def at(self, i, scale):
            return scale * self.coef.get(i, 0.0) ** 2

    def at_vjp(ans, v, i, scale):
        return lambda g: Sparse({i: 2.0 * g * scale * v.coef.get(i, 0.0) + 0.5 * g})

    extend.defvjp(Sparse.at, at_vjp, None, lambda ans, v, i, scale: lambda g: g * v.coef.get(i, 0.0) ** 2)

    class SparseBox(extend.Box, Sparse):
        pass
    SparseBox.register(Sparse)

    class SparseSpace(extend.VSpace):
        def __init__(self, value):
            pass

        def zeros(self):
            return Sparse({})

        def _add(self, x, y):
            keys = set(x.coef) | set(y.coef)
            return Sparse({k: x.coef.get(k, 0.0) + y.coef.get(k, 0.0) for k in keys})

        def _mut_add(self, x, y):
            return self._add(x, y)

        def _scalar_mul(self, x, a):
            return Sparse({k: a * c for k, c in x.coef.items()})
    SparseSpace.register(Sparse)

    def loss(v, scale, keys):
        return numpy.sum(numpy.tanh(numpy.array([v.at(k, scale) for k in keys]))) + 0.1 * v.at(keys[0], scale)
    return Sparse, loss


def _run(extend, numpy, grad, value_and_grad):
    Sparse, loss = sparse_program(extend, numpy)
    v = Sparse({0: 0.5, 2: -1.5})
    keys = (0, 1, 2, 0)
    g = grad(loss)(v, 1.3, keys)
    gv, gscale = grad(loss, argnum=(0, 1))(v, 1.3, keys) if extend is autograd.extend else \
        grad(loss, argnums=(0, 1))(v, 1.3, keys)
    value, g2 = value_and_grad(loss)(v, 0.7, keys)
    return type(g).__name__, g.coef, gv.coef, gscale, value, g2.coef


def test_grad_of_a_user_space_value_agrees_with_autograd():
    ours = _run(jitad.extend, jnp, jitad.grad, jitad.value_and_grad)
    theirs = _run(autograd.extend, anp, autograd.grad, autograd.value_and_grad)
    assert ours[0] == theirs[0] == "Sparse"
    for mine, ref in zip(ours[1:], theirs[1:]):
        if isinstance(ref, dict):
            assert sorted(mine) == sorted(ref) == [0, 1, 2]
            np.testing.assert_allclose([mine[k] for k in sorted(ref)], [ref[k] for k in sorted(ref)], rtol=1e-12)
        else:
            np.testing.assert_allclose(mine, ref, rtol=1e-12)


def test_a_user_space_value_used_outside_primitives_raises():
    Sparse, _ = sparse_program(jitad.extend, jnp)
    v = Sparse({0: 1.0})

    def doubled(v):
        w = jitad.extend.vspace(v).add(v, v)
        return w.at(0, 1.0)
    with pytest.raises(UnsupportedError, match="only enter @primitive"):
        jitad.grad(doubled)(v)
    with pytest.raises(UnsupportedError, match="only grad and value_and_grad"):
        jitad.jacobian(lambda v: v.at(0, 1.0))(v)
    # with a user space registered, the transformations of ordinary values are as before
    assert jitad.hessian(lambda x: x ** 3)(2.0) == 12.0 and jitad.jacfwd(lambda x: 2.0 * x)(1.0) == 2.0


def _steps(extend, numpy, grad, loss_of, n=4):
    """An optimizer's loop over a Sparse vector: `v + 0.1 * grad(loss)(v, ...)`, n times."""
    Sparse, loss = sparse_program(extend, numpy)
    loss = loss_of(loss)
    v, found = Sparse({0: 0.5, 2: -1.5}), []
    for _ in range(n):
        g = grad(loss)(v, 1.3, (0, 1, 2, 0))
        g = g[0] if isinstance(g, tuple) else g
        found.append(dict(g.coef))
        v = Sparse({k: v.coef.get(k, 0.0) + 0.1 * g.coef.get(k, 0.0) for k in set(v.coef) | set(g.coef)})
    return found, type(v)


def _traces(monkeypatch):
    from jitad import dispatch
    made = []
    trace_program = dispatch.trace_program
    monkeypatch.setattr(dispatch, "trace_program", lambda *a, **k: made.append(1) or trace_program(*a, **k))
    return made


def _agree(ours, theirs):
    for mine, ref in zip(ours, theirs, strict=True):
        assert sorted(mine) == sorted(ref)
        np.testing.assert_allclose([mine[k] for k in sorted(ref)], [ref[k] for k in sorted(ref)], rtol=1e-12)


def test_steps_over_user_space_values_trace_once(monkeypatch):
    """The program holds the primitives' results, not the value: each step's new vector finds
    the path of the first (a trace of the function alone and one of its gradient)."""
    traces = _traces(monkeypatch)
    ours, kind = _steps(jitad.extend, jnp, jitad.grad, lambda loss: loss)
    theirs, _ = _steps(autograd.extend, anp, autograd.grad, lambda loss: loss)
    _agree(ours, theirs)
    assert kind.__name__ == "Sparse" and len(traces) <= 2


def test_steps_with_staged_arguments_of_primitives_agree(monkeypatch):
    """Differentiated with respect to `scale` too, the primitives run in the trace (the value's
    coefficients are constants of the program): each new vector is traced anew, never served
    by another's program."""
    traces = _traces(monkeypatch)
    ours, _ = _steps(jitad.extend, jnp, lambda f: jitad.grad(f, argnums=(0, 1)), lambda loss: loss)
    theirs, _ = _steps(autograd.extend, anp, lambda f: autograd.grad(f, argnum=(0, 1)), lambda loss: loss)
    _agree(ours, theirs)
    assert len(traces) >= 4


def test_a_function_reading_the_value_itself_is_traced_per_value():
    """A function that reads the value outside its primitives (here its number of
    coefficients) decides its program on it: a step with another value does not reuse it."""
    def loss_of(loss):
        def counted(v, scale, keys):
            return loss(v, scale, keys) * len(v.coef)
        return counted

    def plain(loss):   # the same factor computed by hand, for autograd (its Box has no `coef`)
        def counted(v, scale, keys, n):
            return loss(v, scale, keys) * n
        return counted
    ours, kind = _steps(jitad.extend, jnp, jitad.grad, loss_of, n=3)
    Sparse, loss = sparse_program(autograd.extend, anp)
    v, theirs = Sparse({0: 0.5, 2: -1.5}), []
    for _ in range(3):
        g = autograd.grad(plain(loss))(v, 1.3, (0, 1, 2, 0), len(v.coef))
        theirs.append(dict(g.coef))
        v = Sparse({k: v.coef.get(k, 0.0) + 0.1 * g.coef.get(k, 0.0) for k in set(v.coef) | set(g.coef)})
    assert [len(c) for c in ours] == [3, 3, 3] and kind.__name__ == "Sparse"
    _agree(ours, theirs)


def _scaled_space(k):
    """A one-number space whose calls multiply a primitive's result by `k` in a special method
    of the class's own: every `k` makes a class of the same name and code."""
    class Scaled:
        def __init__(self, c):
            self.c = c

        @jitad.extend.primitive
        def value(self, x):
            return self.c * x

        def __call__(self, x):
            return self.value(x) * k

    jitad.extend.defvjp(Scaled.value, lambda ans, s, x: lambda g: Scaled(g * x))

    class Space(jitad.extend.VSpace):
        def __init__(self, value):
            pass

        def zeros(self):
            return Scaled(0.0)

        def _add(self, a, b):
            return Scaled(a.c + b.c)
    Space.register(Scaled)
    return Scaled


def test_a_class_method_between_function_and_primitive_is_its_own_program():
    """`s(x)` runs the class's `__call__` (its factor a constant of the program): classes alike
    in name and code but not in that factor, and values with other coefficients, each get
    their own gradient; a program run again (an equal class anew) finds its path."""
    for k in (1.0, 5.0, 1.0):
        Scaled = _scaled_space(k)
        for c in (2.0, -1.0):
            g = jitad.grad(lambda s, x: s(x) ** 2)(Scaled(c), 3.0)
            assert type(g) is Scaled and g.c == pytest.approx(2 * c * 3.0 * k * k * 3.0)


def test_a_program_run_again_finds_its_path(monkeypatch):
    """A fresh class of the same code (the program executed again) keys like the first: the
    second run traces nothing."""
    def shifted(loss):   # (code of this test's own: its first run traces)
        return lambda v, scale, keys: loss(v, scale, keys) - 1.0
    traces = _traces(monkeypatch)
    first, _ = _steps(jitad.extend, jnp, jitad.grad, shifted, n=2)
    n = len(traces)
    again, _ = _steps(jitad.extend, jnp, jitad.grad, shifted, n=2)
    _agree(again, first)
    assert n > 0 and len(traces) == n
