"""A tensor slot set to another slot's value reshaped (a reshape's cotangent, as attention's
heads are reshaped around its batched products) is not a copy: its readers read the other
slot through a reshape, a view."""
import numpy as np

import jitad
from jitad.ir.ops import Op


B, H, T, D = 2, 3, 8, 4


def _heads(m, q, k, v):
    """Attention's products over heads, reshaped from (batch, heads, ...) and back."""
    s = m.nn.softmax(q @ m.numpy.swapaxes(k, -1, -2), axis=-1)      # (B, H, T, T)
    y = (s.reshape(B * H, T, T) @ v).reshape(B, H, T, D)
    return m.numpy.sum(m.numpy.sin(y))


def _inputs():
    r = np.random.default_rng(5)
    return r.normal(size=(B, H, T, D)), r.normal(size=(B, H, T, D)), r.normal(size=(B * H, T, D))


def _reshaped_copies(graph):
    """The `slot_set`s of a graph storing a reshape of a `slot_get`."""
    made = {v: n for n in graph.nodes for v in n.outputs}

    def copied(n):
        r = made.get(n.inputs[1])
        return r is not None and r.op == Op.RESHAPE and getattr(made.get(r.inputs[0]), "op", None) == Op.SLOT_GET
    return [n for n in graph.nodes if n.op == Op.SLOT_SET and copied(n)]


def test_a_reshaped_cotangent_is_read_in_place_and_the_gradient_is_right():
    args = _inputs()
    f = jitad.jit(jitad.value_and_grad(lambda *a: _heads(jitad, *a), argnums=(0, 1, 2)))
    value, grads = f(*args)
    assert not _reshaped_copies(f._last.program.main)
    jitad.testing.check_grads(lambda *a: _heads(jitad, *a), args, order=1, modes=("rev",))
    try:
        import jax
    except ImportError:
        return
    jax.config.update("jax_enable_x64", True)
    want_value, want = jax.value_and_grad(lambda *a: _heads(jax, *a), argnums=(0, 1, 2))(*args)
    np.testing.assert_allclose(value, want_value, rtol=1e-12)
    for got, w in zip(grads, want):
        np.testing.assert_allclose(got, w, rtol=1e-11, atol=1e-13)


def test_without_the_forwarding_the_copy_is_there(monkeypatch):
    """The program above makes such a copy, so the test above checks something."""
    from jitad.ir import peephole
    real = peephole._copies
    monkeypatch.setattr(peephole, "_copies", lambda *a: (c for c in real(*a) if c[3] != peephole.RESHAPED))
    f = jitad.jit(jitad.grad(lambda *a: _heads(jitad, *a) * 1.5, argnums=(0, 1, 2)))   # compiled with the patch
    f(*_inputs())
    assert _reshaped_copies(f._last.program.main)
