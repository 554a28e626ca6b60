"""jitad.scipy.special against SciPy and JAX (x64): a table of functions with their input
domains (edge values included: 0, -0.0, ±inf, NaN and the domain's boundaries), values
eagerly and staged (one compiled program for the whole table), gradients with
`check_grads` and against JAX's."""
import numpy as np
import pytest
import scipy.special as ss

import jitad
from jitad.scipy import special as S
from jitad.testing import check_grads

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
js = jax.scipy.special

REAL = np.array([-7.5, -2.5, -1.5, -1.0, -0.3, -0.0, 0.0, 0.2, 1.0, 2.5, 7.0, 30.0, np.inf, -np.inf, np.nan])
POS = np.array([1e-300, 1e-5, 0.1, 0.5, 1.0, 3.0, 12.5, 150.0, np.inf, 0.0, np.nan])
UNIT = np.array([0.0, 1e-300, 1e-20, 1e-5, 0.1, 0.5, 0.9, 1 - 1e-12, 1.0, -0.5, 1.5, np.nan])
BESSEL = np.array([0.0, -0.0, 1e-300, 0.1, 1.0, -2.5, 10.0, 29.9, 30.0, 30.1, 50.0, -100.0, 700.0, 1e5, np.inf,
                   -np.inf, np.nan])
A2, X2 = np.meshgrid([0.1, 0.5, 1.0, 2.5, 20.0, 300.0], [0.0, 0.01, 0.5, 1.0, 3.0, 25.0, 400.0, np.inf])
P3 = np.array([0.0, 0.05, 0.3, 0.5, 0.75, 0.999, 1.0])

# name: (arguments, SciPy's function or None, rtol); every name is also checked against JAX's
TABLE = {
    "gamma": ((REAL,), ss.gamma, 1e-13),
    "gammasgn": ((REAL,), None, 0),
    "loggamma": ((POS,), None, 1e-14),
    "gammaln": ((POS,), ss.gammaln, 1e-14),
    "beta": ((np.array([0.5, 2.0, 3.5, 10.0]), np.array([1.5, 0.3, 2.0, 7.0])), ss.beta, 1e-13),
    "betaln": ((np.array([0.5, 2.0, 3.5, 100.0]), np.array([1.5, 0.3, 2.0, 7.0])), ss.betaln, 1e-13),
    "poch": ((np.array([2.0, 0.5, 3.0, 10.0]), np.array([3.0, 1.5, 0.0, 2.5])), ss.poch, 1e-13),
    "factorial": ((np.array([0.0, 1.0, 3.0, 2.5, 10.0, -1.0, 20.0]),), ss.factorial, 1e-13),
    "multigammaln": ((np.array([2.0, 3.5, 10.0]), 3), None, 1e-14),
    "rel_entr": ((np.array([0.0, 0.0, 0.5, 1.0, -1.0, 2.0]), np.array([0.0, 1.0, 0.25, 0.0, 1.0, 3.0])), ss.rel_entr, 1e-15),
    "kl_div": ((np.array([0.0, 0.0, 0.5, 1.0, -1.0, 2.0]), np.array([0.0, 1.0, 0.25, 0.0, 1.0, 3.0])), ss.kl_div, 1e-14),
    "boxcox": ((np.array([0.5, 1.0, 2.0, 10.0]), np.array([0.0, 1e-9, 0.5, -2.0])), ss.boxcox, 1e-13),
    "boxcox1p": ((np.array([-0.5, 1e-9, 1.0, 10.0]), np.array([0.0, 1e-9, 0.5, -2.0])), ss.boxcox1p, 1e-13),
    "erfinv": ((np.array([-1.0, -0.999999, -0.5, -0.0, 0.0, 1e-10, 0.3, 0.99, 1.0, 1.5, np.nan]),), ss.erfinv, 1e-14),
    "ndtri": ((UNIT,), ss.ndtri, 1e-14),
    "ndtr": ((REAL,), ss.ndtr, 1e-14),
    "log_ndtr": ((REAL,), ss.log_ndtr, 1e-13),
    "erfcx": ((np.array([-20.0, -3.0, -0.0, 0.5, 5.0, 24.9, 25.1, 1e3, 1e200, np.inf]),), ss.erfcx, 1e-13),
    "gammainc": ((A2, X2), ss.gammainc, 1e-12),
    "gammaincc": ((A2, X2), ss.gammaincc, 1e-12),
    "betainc": ((np.array([0.5, 1.0, 3.0, 20.0, 2.0, 0.2, 5.0]), np.array([0.5, 2.0, 3.0, 5.0, 200.0, 0.2, 5.0]), P3),
                ss.betainc, 1e-12),
    "zeta": ((np.array([1.0, 1.5, 2.0, 3.0, 10.0, 60.0, 0.5]), np.array([1.0, 1.0, 0.5, 2.0, 7.0, 0.3, 1.0])),
             ss.zeta, 1e-13),
    "xlogy": ((np.array([0.0, 0.0, 1.0, 2.0, -1.0]), np.array([0.0, 1.0, 0.0, 3.0, 2.0])), ss.xlogy, 1e-15),
    "xlog1py": ((np.array([0.0, 0.0, 1.0, 2.0]), np.array([-1.0, 1.0, -1.0, 3.0])), ss.xlog1py, 1e-15),
    "entr": ((np.array([-1.0, 0.0, 0.5, 2.0, np.inf]),), ss.entr, 1e-15),
    "logit": ((UNIT,), ss.logit, 1e-14),
    "expit": ((REAL,), ss.expit, 1e-15),
    "rgamma": ((REAL,), ss.rgamma, 1e-13),
    **{name: ((BESSEL,), getattr(ss, name), 2e-14) for name in ("i0", "i0e", "i1", "i1e")},
    "erfcinv": ((np.array([0.0, 1e-300, 1e-20, 0.3, 1.0, 1.7, 2.0, 2.5, -0.1, np.nan]),), ss.erfcinv, 1e-14),
}
NO_JAX = {"rgamma": "jax.scipy.special has no rgamma (autograd's name)",
          "erfcinv": "jax.scipy.special has no erfcinv (autograd's name)",
          "zeta": "JAX's zeta is NaN at x = 1 where SciPy's is inf",
          "log_ndtr": "JAX's log(ndtr(x)) loses digits for 0 < x <= 8 (its gradients are compared below)"}
# Where SciPy is the reference, JAX's own values stray by up to this (its betaln and
# incomplete functions lose digits for large arguments); jitad must be near both.
JAX_LOOSE = 1e-6


def _close(got, want, rtol, msg):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=msg)
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=rtol, atol=0, err_msg=msg)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_values_against_scipy_and_jax(name):
    args, ref, rtol = TABLE[name]
    mine = getattr(S, name)(*args)
    if ref is not None:
        _close(mine, ref(*args), rtol or 0, f"{name} vs SciPy")
    if name not in NO_JAX:
        _close(mine, getattr(js, name)(*args), rtol if ref is None else max(rtol, JAX_LOOSE), f"{name} vs JAX")


def test_staged_values_are_the_eager_ones():
    names = sorted(TABLE)
    staged = jitad.jit(lambda: [getattr(S, n)(*TABLE[n][0]) for n in names])()
    for name, got in zip(names, staged):
        _close(got, getattr(S, name)(*TABLE[name][0]), 1e-13, name)


def test_autograd_names():
    ag = pytest.importorskip("autograd.scipy.special")
    assert S.root_pi == ag.root_pi and S.inv_root_pi == ag.inv_root_pi
    x = np.array([0.3, 1.0, 1.7])
    np.testing.assert_allclose(S.erfcinv(x), ag.erfcinv(x), rtol=1e-14)
    np.testing.assert_allclose(S.rgamma(x + 1.0), ag.rgamma(x + 1.0), rtol=1e-14)
    np.testing.assert_allclose(jitad.grad(lambda v: S.erfcinv(v))(0.4), np.asarray(
        __import__("autograd").grad(ag.erfcinv)(0.4)), rtol=1e-12)


def test_bernoulli_numbers():
    got = S.bernoulli(12)
    np.testing.assert_allclose(got, ss.bernoulli(12), rtol=1e-11)   # SciPy's are approximations
    np.testing.assert_allclose(got, js.bernoulli(12), rtol=1e-5)   # and JAX's, looser still
    assert got[1] == -0.5 and got[2] == 1 / 6 and got[4] == -1 / 30 and got[12] == -691 / 2730 and got[11] == 0


# (function, a point inside the domain for each argument) for gradients
GRADS = [("gamma", (2.3,)), ("gamma", (-1.4,)), ("loggamma", (3.1,)), ("beta", (1.5, 2.5)), ("poch", (2.0, 1.5)),
         ("rel_entr", (0.4, 0.7)), ("kl_div", (0.4, 0.7)), ("boxcox1p", (0.3, 0.4)), ("erfinv", (0.3,)),
         ("ndtri", (0.2,)), ("erfcx", (0.7,)), ("erfcx", (30.0,)), ("gammainc", (2.5, 1.3)),
         ("gammaincc", (2.5, 4.5)), ("betainc", (2.0, 3.0, 0.3)), ("zeta", (2.5, 1.5)), ("multigammaln", (3.5, 2)),
         ("i0", (1.3,)), ("i1", (-2.1,)), ("i0e", (2.0,)), ("i1e", (45.0,))]


@pytest.mark.parametrize("name,point", GRADS, ids=[f"{n}{p}" for n, p in GRADS])
def test_gradients(name, point):
    fn = getattr(S, name)
    n_float = sum(isinstance(v, float) for v in point)
    wrt = tuple(range(n_float))
    f = lambda *xs: fn(*xs, *point[n_float:])
    check_grads(f, point[:n_float], order=1, rtol=1e-4)
    if name in ("gammainc", "gammaincc", "betainc"):
        wrt = (len(point) - 1,)   # JAX differentiates these in x only
    mine = jitad.grad(f, argnums=wrt)(*point[:n_float])
    theirs = jax.grad(lambda *xs: getattr(js, name)(*xs, *point[n_float:]), argnums=wrt)(*point[:n_float])
    np.testing.assert_allclose(mine, theirs, rtol=1e-7, err_msg=name)


def test_ndtri_gradient_in_the_far_tail():
    p = np.array([1e-300, 1e-20, 1e-16, 1e-14, 0.3])
    mine = jitad.vmap(jitad.grad(S.ndtri))(p)
    x = ss.ndtri(p)
    np.testing.assert_allclose(mine, np.sqrt(2 * np.pi) * np.exp(0.5 * x * x), rtol=1e-12)
