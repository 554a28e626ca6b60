"""`lax.conv_general_dilated` and its wrappers, and `lax.reduce_window`, against `jax.lax`
(x64): layouts, strides, padding strings and pairs (negative too), input and kernel
dilation, feature and batch groups; values and gradients."""
import numpy as np
import pytest

from .lax_reference import assert_same, jax, jlax

import jitad
from jitad import lax
from jitad.testing import check_grads

RNG = np.random.default_rng(0)
NHWC = ("NHWC", "HWIO", "NHWC")

CONVS = [  # (name, lhs shape, rhs shape, keyword arguments)
    ("nchw-valid", (2, 3, 6, 5), (4, 3, 3, 2), dict(window_strides=(1, 1), padding="VALID")),
    ("nchw-same-stride", (1, 2, 7, 6), (3, 2, 3, 3), dict(window_strides=(2, 2), padding="SAME")),
    ("nhwc-pairs", (2, 5, 5, 3), (3, 2, 3, 4), dict(window_strides=(1, 2), padding=((1, 2), (0, 1)),
                                                     dimension_numbers=NHWC)),
    ("negative-pad", (1, 1, 6, 6), (2, 1, 2, 2), dict(window_strides=(1, 1), padding=((-1, 1), (2, -2)))),
    ("rhs-dilation", (1, 2, 8, 7), (2, 2, 3, 2), dict(window_strides=(1, 1), padding="SAME", rhs_dilation=(2, 3))),
    ("lhs-dilation", (1, 2, 4, 3), (2, 2, 3, 3), dict(window_strides=(1, 1), padding=((2, 2), (1, 2)),
                                                       lhs_dilation=(2, 2))),
    ("groups", (2, 4, 5, 5), (6, 2, 3, 3), dict(window_strides=(1, 1), padding="SAME", feature_group_count=2)),
    ("batch-groups", (4, 2, 5, 4), (6, 2, 2, 2), dict(window_strides=(1, 1), padding="VALID", batch_group_count=2)),
    ("1d-nwc", (2, 9, 3), (3, 3, 2), dict(window_strides=(2,), padding="SAME_LOWER",
                                           dimension_numbers=("NWC", "WIO", "NWC"))),
    ("3d", (1, 2, 4, 4, 3), (2, 2, 2, 3, 2), dict(window_strides=(1, 2, 1), padding="SAME")),
    ("size-1", (1, 1, 1, 1), (1, 1, 1, 1), dict(window_strides=(1, 1), padding="VALID")),
    ("empty-batch", (0, 2, 4, 4), (3, 2, 2, 2), dict(window_strides=(1, 1), padding="VALID")),
]


def _pair(lhs_shape, rhs_shape):
    return RNG.standard_normal(lhs_shape), RNG.standard_normal(rhs_shape)


def test_conv_general_dilated_values():
    data = [_pair(l, r) for _, l, r, _ in CONVS]
    fn = jitad.jit(lambda *xs: tuple(lax.conv_general_dilated(xs[2 * i], xs[2 * i + 1], **kw)
                                     for i, (_, _, _, kw) in enumerate(CONVS)))
    flat = [a for pair in data for a in pair]
    wants = jax.jit(lambda *xs: tuple(jlax.conv_general_dilated(xs[2 * i], xs[2 * i + 1], **kw)
                                      for i, (_, _, _, kw) in enumerate(CONVS)))(*flat)
    for (name, _, _, kw), g, want in zip(CONVS, fn(*flat), wants):
        assert_same(g, want, rtol=1e-10, atol=1e-12, what=name)


def _conv_loss(m, np_, cases):
    """The sum over `cases` of sum(sin(conv)): one program whose gradient covers them all."""
    def loss(*xs):
        return sum(np_.sum(np_.sin(m.conv_general_dilated(xs[2 * i], xs[2 * i + 1], **kw)))
                   for i, (_, _, _, kw) in enumerate(cases))
    return loss


@pytest.mark.parametrize("cases", [
    [CONVS[2], CONVS[6]],   # a layout with strides and padding pairs; feature groups
    pytest.param([CONVS[1], CONVS[4], CONVS[5], CONVS[7], CONVS[9]], marks=pytest.mark.slow),
])
def test_conv_gradients_agree_with_jax(cases):
    flat = [a for _, l, r, _ in cases for a in _pair(l, r)]
    nums = tuple(range(len(flat)))
    ours = jitad.grad(_conv_loss(lax, jitad.numpy, cases), nums)(*flat)
    theirs = jax.jit(jax.grad(_conv_loss(jlax, jax.numpy, cases), nums))(*flat)
    for k, (o, t) in enumerate(zip(ours, theirs)):
        assert_same(o, t, rtol=1e-9, atol=1e-12, what=f"{cases[k // 2][0]} argument {k % 2}")
    x, w = _pair((1, 2, 5, 4), (2, 2, 2, 3))
    check_grads(lambda x, w: lax.conv_general_dilated(x, w, (2, 1), "SAME", rhs_dilation=(1, 2)), (x, w), order=2)


def test_conv_wrappers_and_shapes():
    x, w = _pair((1, 2, 6, 6), (3, 2, 3, 3))
    xt, wt = _pair((1, 4, 4, 2), (3, 3, 2, 3))
    wf = RNG.standard_normal((2, 3, 3, 2))   # HWIO with I and O swapped by transpose_kernel
    wl = RNG.standard_normal((2, 2, 12, 3))   # a kernel per output position: (2, 2) positions, 2 * 6 inputs
    cases = [
        ("conv", lambda: lax.conv(x, w, (1, 1), "SAME"), lambda: jlax.conv(x, w, (1, 1), "SAME")),
        ("general_padding", lambda: lax.conv_with_general_padding(x, w, (2, 1), ((1, 0), (0, 1)), (1, 1), (2, 1)),
         lambda: jlax.conv_with_general_padding(x, w, (2, 1), ((1, 0), (0, 1)), (1, 1), (2, 1))),
        ("transpose-same", lambda: lax.conv_transpose(xt, wt, (2, 2), "SAME"),
         lambda: jlax.conv_transpose(xt, wt, (2, 2), "SAME")),
        ("transpose-valid-flip", lambda: lax.conv_transpose(xt, wf, (2, 1), "VALID", transpose_kernel=True),
         lambda: jlax.conv_transpose(xt, wf, (2, 1), "VALID", transpose_kernel=True)),
        ("transpose-pairs", lambda: lax.conv_transpose(xt, wt, (1, 2), ((1, 1), (2, 0))),
         lambda: jlax.conv_transpose(xt, wt, (1, 2), ((1, 1), (2, 0)))),
        ("patches", lambda: lax.conv_general_dilated_patches(x, (2, 3), (1, 2), "VALID"),
         lambda: jlax.conv_general_dilated_patches(x, (2, 3), (1, 2), "VALID")),
        ("local", lambda: lax.conv_general_dilated_local(xt, wl, (1, 2), "VALID", (3, 2), dimension_numbers=NHWC),
         lambda: jlax.conv_general_dilated_local(xt, wl, (1, 2), "VALID", (3, 2), dimension_numbers=NHWC)),
    ]
    for name, ours, theirs in cases:
        assert_same(ours(), theirs(), rtol=1e-10, atol=1e-12, what=name)
    assert lax.conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 4), NHWC) == \
        tuple(jlax.conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 4), NHWC))
    assert lax.conv_general_permutations(NHWC) == jlax.conv_general_permutations(NHWC)
    assert lax.conv_general_shape_tuple((1, 5, 5, 3), (3, 3, 3, 4), (2, 2), "SAME", NHWC) == \
        tuple(jlax.conv_general_shape_tuple((1, 5, 5, 3), (3, 3, 3, 4), (2, 2), "SAME", NHWC))
    assert lax.conv_shape_tuple((1, 3, 7, 7), (4, 3, 3, 3), (2, 1), ((1, 1), (0, 0))) == \
        tuple(jlax.conv_shape_tuple((1, 3, 7, 7), (4, 3, 3, 3), (2, 1), ((1, 1), (0, 0))))
    assert lax.conv_transpose_shape_tuple((1, 4, 4, 2), (3, 3, 2, 3), (2, 2), "SAME", NHWC) == \
        tuple(jlax.conv_transpose_shape_tuple((1, 4, 4, 2), (3, 3, 2, 3), (2, 2), "SAME", NHWC))
    assert lax.padtype_to_pads((5, 6), (3, 2), (2, 2), "SAME") == list(jlax.padtype_to_pads((5, 6), (3, 2), (2, 2), "SAME"))


def test_conv_bad_arguments_raise():
    x, w = _pair((1, 2, 5, 5), (3, 2, 3, 3))
    with pytest.raises(jitad.JitadError, match="padding"):
        lax.conv_general_dilated(x, w, (1, 1), "FULL")
    with pytest.raises(jitad.JitadError, match="feature_group_count"):
        lax.conv_general_dilated(x, w, (1, 1), "VALID", feature_group_count=2)
    with pytest.raises(jitad.JitadError, match="same number"):
        lax.conv_general_dilated(x[0], w, (1, 1), "VALID")


WINDOWS = [  # (name, shape, window, strides, padding, base dilation, window dilation)
    ("pool-2x2", (2, 6, 6, 3), (1, 2, 2, 1), (1, 2, 2, 1), "VALID", None, None),
    ("same-3x3", (1, 5, 4, 2), (1, 3, 3, 1), (1, 1, 1, 1), "SAME", None, None),
    ("pairs", (3, 7), (2, 3), (2, 1), ((1, 0), (2, 1)), None, None),
    ("dilations", (2, 9), (2, 2), (1, 2), ((0, 1), (1, 1)), (1, 2), (1, 2)),
    ("size-1", (1, 1), (1, 1), (1, 1), "VALID", None, None),
]


def test_reduce_window_values_and_gradients():
    xs = [RNG.standard_normal(s) for _, s, *_ in WINDOWS]
    kinds = [("sum", lax.add, jlax.add, 0.0), ("max", lax.max, jlax.max, -np.inf), ("min", lax.min, jlax.min, np.inf)]

    def ours(*xs):
        return tuple(lax.reduce_window(x, init, op, w, s, p, b, d)
                     for x, (_, _, w, s, p, b, d) in zip(xs, WINDOWS) for _, op, _, init in kinds)
    def theirs(*xs):
        return tuple(jlax.reduce_window(x, init, op, w, s, p, b, d)
                     for x, (_, _, w, s, p, b, d) in zip(xs, WINDOWS) for _, _, op, init in kinds)
    names = [f"{name}-{kind}" for name, *_ in WINDOWS for kind, *_ in kinds]
    for name, g, want in zip(names, jitad.jit(ours)(*xs), jax.jit(theirs)(*xs)):
        assert_same(g, want, rtol=1e-12, what=name)
    x = xs[1]
    params = dict(window_dimensions=(1, 3, 3, 1), window_strides=(1, 1, 1, 1),
                  padding=((0, 0), (1, 1), (1, 1), (0, 0)), base_dilation=(1, 1, 1, 1), window_dilation=(1, 1, 1, 1))
    for kind in ("sum", "max", "min"):
        p = f"reduce_window_{kind}_p"
        assert_same(getattr(lax, p).bind(x, **params), getattr(jlax, p).bind(x, **params), what=p)
    f = lambda x: lax.reduce_window(x, -np.inf, lax.max, (1, 2, 2, 1), (1, 1, 1, 1), "SAME")
    g_ours = jitad.grad(lambda x: jitad.numpy.sum(jitad.numpy.tanh(f(x))))(xs[0])
    g_jax = jax.jit(jax.grad(lambda x: jax.numpy.sum(jax.numpy.tanh(
        jlax.reduce_window(x, -np.inf, jlax.max, (1, 2, 2, 1), (1, 1, 1, 1), "SAME")))))(xs[0])
    assert_same(g_ours, g_jax, rtol=1e-10)
    check_grads(lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 3), (1, 2), ((1, 0), (2, 1)), (1, 2)), (xs[2],),
                order=2)


def test_reduce_window_generic_and_pytree():
    x = RNG.standard_normal((3, 8))
    mul = lambda a, b: a * b
    assert_same(jitad.jit(lambda x: lax.reduce_window(x, 1.0, mul, (1, 3), (1, 2), "SAME"))(x),
                jlax.reduce_window(x, 1.0, jlax.mul, (1, 3), (1, 2), "SAME"), rtol=1e-12)
    both = lambda a, b: (a[0] + b[0], jnp_max(a[1], b[1]))
    jnp_max = lax.max
    got = lax.reduce_window((x, -x), (0.0, -np.inf), both, (2, 2), (1, 1), "VALID")
    jnp_max = jlax.max
    want = jlax.reduce_window((x, -x), (0.0, -np.inf), both, (2, 2), (1, 1), "VALID")
    for g, w in zip(got, want):
        assert_same(g, w, rtol=1e-12)
    assert lax.reduce_window_shape_tuple((5, 6), (2, 3), (1, 2), ((1, 0), (0, 2))) == \
        tuple(jlax.reduce_window_shape_tuple((5, 6), (2, 3), (1, 2), ((1, 0), (0, 2))))


def test_window_selection_primitives():
    x = RNG.standard_normal((4, 6))
    x[1, 2] = x[1, 3]   # a tie: the first of equals is selected, as XLA
    src, t = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 6))
    params = dict(window_dimensions=(2, 3), window_strides=(1, 2), padding=((0, 1), (1, 1)))
    for prim in ("ge", "le"):
        got = jitad.jit(lambda s, x, t: (
            lax.select_and_scatter_add_p.bind(s, x, select_prim=getattr(lax, prim + "_p"), **params),
            lax.select_and_gather_add_p.bind(t, x, select_prim=getattr(lax, prim + "_p"), base_dilation=(1, 1),
                                             window_dilation=(1, 1), **params)))(src, x, t)
        want = (jlax.select_and_scatter_add_p.bind(src, x, select_prim=getattr(jlax, prim + "_p"), **params),
                jlax.select_and_gather_add_p.bind(t, x, select_prim=getattr(jlax, prim + "_p"), base_dilation=(1, 1),
                                                  window_dilation=(1, 1), **params))
        for g, w in zip(got, want):
            assert_same(g, w, rtol=1e-12, what=prim)
