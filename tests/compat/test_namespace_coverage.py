"""Every public name of the reference modules exists at jitad's path of the same name.

The floors below only rise: a change that drops a name fails here. The goal is 95% of
every module; `python -m tests.compat.namespaces MODULE` lists what is still missing."""
import pytest

from .namespaces import coverage

pytest.importorskip("jax")
pytest.importorskip("autograd")

# reference module -> the least share of its names jitad must have (raise as names land)
FLOORS = {
    "jax": 0.96, "jax.numpy": 0.95, "jax.numpy.linalg": 1.0, "jax.lax": 0.96, "jax.random": 0.97, "jax.nn": 0.97, "jax.nn.initializers": 1.0,
    "jax.tree": 1.0, "jax.tree_util": 1.0, "jax.flatten_util": 1.0,
    "jax.example_libraries.optimizers": 1.0, "jax.example_libraries.stax": 0.97,
    "autograd": 1.0, "autograd.numpy": 0.97, "autograd.numpy.linalg": 0.97, "autograd.numpy.random": 1.0,
    "autograd.extend": 1.0, "autograd.builtins": 1.0, "autograd.misc": 1.0, "autograd.misc.optimizers": 1.0,
    "autograd.misc.flatten": 1.0, "autograd.misc.fixed_points": 1.0, "autograd.test_util": 1.0,
    "jax.scipy.special": 1.0, "jax.scipy.linalg": 1.0, "jax.scipy.signal": 1.0, "jax.scipy.optimize": 1.0,
    "jax.scipy.integrate": 1.0, "jax.scipy.stats": 0.96, "jax.scipy.stats.norm": 1.0, "jax.scipy.stats.beta": 1.0,
    "jax.scipy.stats.gamma": 1.0, "jax.scipy.stats.expon": 1.0, "jax.scipy.stats.logistic": 1.0,
    "jax.scipy.stats.cauchy": 1.0, "jax.scipy.stats.uniform": 1.0, "jax.scipy.stats.bernoulli": 1.0,
    "jax.scipy.stats.laplace": 1.0, "jax.experimental.ode": 1.0, "autograd.scipy.stats": 1.0,
    "autograd.scipy.special": 1.0, "autograd.scipy.linalg": 0.99, "jax.scipy.stats.poisson": 1.0,
    "autograd.scipy.stats.norm": 1.0, "autograd.scipy.stats.multivariate_normal": 1.0, "autograd.scipy.signal": 1.0,
    "autograd.scipy.integrate": 1.0,
    "jax.numpy.fft": 1.0, "autograd.numpy.fft": 1.0,
}


def test_name_coverage_does_not_fall():
    table = coverage()
    low = {}
    for module, floor in FLOORS.items():
        present, missing = table[module]
        share = len(present) / max(len(present) + len(missing), 1)
        if share < floor:
            low[module] = (round(share, 3), floor, missing[:20])
    assert not low, low


@pytest.mark.slow
def test_another_install_adds_no_names_to_itself():
    """The report of names a newer release adds (`--against ITS_PYTHON`), run against this
    same install: the listing made in a subprocess agrees with this process's."""
    import sys

    from .namespaces import added_names, reference_names
    assert "sum" in reference_names()["jax.numpy"]
    assert added_names(sys.executable) == {}
