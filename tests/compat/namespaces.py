"""Name coverage: the public names of the installed reference modules (JAX, autograd)
looked up in jitad's module of the same path.

    python -m tests.compat.namespaces          # a table, one module a line
    python -m tests.compat.namespaces jax.lax  # and the names still missing there
    python -m tests.compat.namespaces --against OTHER/bin/python   # names another install adds

The list of names comes from the installed packages at run time, never from a copy.
A name that jitad declines on purpose is in `DECLINED` (it exists in jitad and raises
`JitadError` naming the alternative); it counts as missing. Complex-only modules and
names are out of this release's scope and left out of the goal (`OUT_OF_SCOPE`).
"""
import importlib
import json
import subprocess
import sys
import types

# reference module -> jitad module
MODULES = {
    "jax": "jitad",
    "jax.numpy": "jitad.numpy",
    "jax.numpy.linalg": "jitad.numpy.linalg",
    "jax.numpy.fft": "jitad.numpy.fft",
    "jax.lax": "jitad.lax",
    "jax.nn": "jitad.nn",
    "jax.nn.initializers": "jitad.nn.initializers",
    "jax.random": "jitad.random",
    "jax.tree": "jitad.tree",
    "jax.tree_util": "jitad.tree_util",
    "jax.flatten_util": "jitad.flatten_util",
    "jax.scipy.special": "jitad.scipy.special",
    "jax.scipy.linalg": "jitad.scipy.linalg",
    "jax.scipy.signal": "jitad.scipy.signal",
    "jax.scipy.optimize": "jitad.scipy.optimize",
    "jax.scipy.integrate": "jitad.scipy.integrate",
    "jax.scipy.stats": "jitad.scipy.stats",
    "jax.scipy.stats.norm": "jitad.scipy.stats.norm",
    "jax.scipy.stats.multivariate_normal": "jitad.scipy.stats.multivariate_normal",
    "jax.scipy.stats.beta": "jitad.scipy.stats.beta",
    "jax.scipy.stats.gamma": "jitad.scipy.stats.gamma",
    "jax.scipy.stats.t": "jitad.scipy.stats.t",
    "jax.scipy.stats.poisson": "jitad.scipy.stats.poisson",
    "jax.scipy.stats.dirichlet": "jitad.scipy.stats.dirichlet",
    "jax.scipy.stats.expon": "jitad.scipy.stats.expon",
    "jax.scipy.stats.laplace": "jitad.scipy.stats.laplace",
    "jax.scipy.stats.logistic": "jitad.scipy.stats.logistic",
    "jax.scipy.stats.uniform": "jitad.scipy.stats.uniform",
    "jax.scipy.stats.cauchy": "jitad.scipy.stats.cauchy",
    "jax.scipy.stats.bernoulli": "jitad.scipy.stats.bernoulli",
    "jax.experimental.ode": "jitad.experimental.ode",
    "jax.example_libraries.optimizers": "jitad.example_libraries.optimizers",
    "jax.example_libraries.stax": "jitad.example_libraries.stax",
    "autograd": "jitad",
    "autograd.numpy": "jitad.numpy",
    "autograd.numpy.random": "jitad.numpy.random",
    "autograd.numpy.linalg": "jitad.numpy.linalg",
    "autograd.numpy.fft": "jitad.numpy.fft",
    "autograd.scipy.special": "jitad.scipy.special",
    "autograd.scipy.stats": "jitad.scipy.stats",
    "autograd.scipy.stats.norm": "jitad.scipy.stats.norm",
    "autograd.scipy.stats.multivariate_normal": "jitad.scipy.stats.multivariate_normal",
    "autograd.scipy.linalg": "jitad.scipy.linalg",
    "autograd.scipy.signal": "jitad.scipy.signal",
    "autograd.scipy.integrate": "jitad.scipy.integrate",
    "autograd.scipy.misc": "jitad.scipy.misc",
    "autograd.misc": "jitad.misc",
    "autograd.misc.optimizers": "jitad.misc.optimizers",
    "autograd.misc.flatten": "jitad.misc.flatten",
    "autograd.misc.fixed_points": "jitad.misc.fixed_points",
    "autograd.extend": "jitad.extend",
    "autograd.builtins": "jitad.builtins",
    "autograd.test_util": "jitad.test_util",
}

# Out of this release's scope: extended-precision complex dtypes, lax's complex functions
# (jitad.numpy's take complex values: docs/complex.md), and complex-only special functions.
OUT_OF_SCOPE = {
    "jax.numpy": {"clongdouble"},
    "autograd.numpy": {"clongdouble", "complex256"},
    "jax.lax": {"complex", "complex_p", "conj_p", "real_p", "imag_p", "fft", "fft_p",
                "FftType"},
    # complex results, or spectra (complex special functions; the short-time transforms)
    "jax.scipy.special": {"wofz", "sph_harm_y"},
    "jax.scipy.linalg": {"dft", "rsf2csf"},
    "jax.scipy.signal": {"stft", "istft", "csd", "welch"},
}

# Names jitad exists for but declines (they raise JitadError naming the alternative).
DECLINED = {
    # point-to-point and ragged exchanges between devices; block-scaled 8-bit floats; XLA's
    # own generators; primitive objects whose parameters are JAX's jaxprs
    "jax.lax": {"precv", "psend", "ragged_all_to_all", "ragged_all_to_all_p", "rng_bit_generator",
                "rng_bit_generator_p", "rng_uniform", "rng_uniform_p", "cond_p", "while_p", "scan_p",
                "reduce_window_p", "linear_solve_p", "select_and_scatter_p"},
    "jax.nn": {"get_scaled_dot_general_config"},
    "autograd.numpy.linalg": {"grad_eig"},   # eig is complex: grad_eigh
}


def public_names(module):
    """The public names of a reference module: `__all__` where it has one, else every
    name not starting with `_` that is not a module from outside the package."""
    names = getattr(module, "__all__", None)
    listed = names is not None
    if not listed:
        names = [n for n in dir(module) if not n.startswith("_")]
    root = module.__name__.split(".")[0]
    kept = []
    for name in names:
        value = getattr(module, name, None)
        if isinstance(value, types.ModuleType) and value.__name__ != f"{module.__name__}.{name}":
            continue   # only the module's own submodules (jax.numpy.linalg), not its imports
        # without __all__, a function or class imported from outside the package
        # (functools.partial, typing names) is not the module's own name
        origin = getattr(value, "__module__", None) if callable(value) else None
        if not listed and isinstance(origin, str) and origin.split(".")[0] not in (root, root + "lib") \
                and root != "autograd":
            continue
        if not listed and root == "autograd" and isinstance(origin, str) \
                and origin.split(".")[0] in ("functools", "typing", "itertools", "collections", "warnings"):
            continue
        kept.append(name)
    return sorted(set(kept))


def _resolve(path):
    """The module or object at a dotted path (jitad.scipy.stats.norm may be an object)."""
    try:
        return importlib.import_module(path)
    except ImportError:
        parent, _, leaf = path.rpartition(".")
        if not parent:
            return None
        owner = _resolve(parent)
        return getattr(owner, leaf, None) if owner is not None else None


def coverage(only=None):
    """{reference module: (present names, missing names)}; modules whose reference is
    not installed are left out."""
    table = {}
    for ref_path, all_names in reference_names(only).items():
        ours = _resolve(MODULES[ref_path])
        names = [n for n in all_names if n not in OUT_OF_SCOPE.get(ref_path, ())]
        declined = DECLINED.get(ref_path, set())
        present = [n for n in names if ours is not None and hasattr(ours, n) and n not in declined]
        table[ref_path] = (present, sorted(set(names) - set(present)))
    return table


def reference_names(only=None):
    """{reference module (of `only`, or all): its public names}, from this interpreter's
    installed packages."""
    names = {}
    for ref_path in MODULES:
        if only and ref_path not in only:
            continue
        try:
            names[ref_path] = public_names(importlib.import_module(ref_path))
        except ImportError:
            continue
    return names


def added_names(other_python):
    """{reference module: the public names that the references installed for `other_python`
    (another environment: a newer JAX or autograd) have and these do not}; a module that
    only the other has lists all its names."""
    listing = subprocess.run([other_python, __file__, "--names"], check=True, capture_output=True, text=True)
    theirs, ours = json.loads(listing.stdout), reference_names()
    added = {m: sorted(set(names) - set(ours.get(m, ()))) for m, names in theirs.items()}
    return {m: names for m, names in added.items() if names}


def main(argv):
    if argv[:1] == ["--names"]:
        print(json.dumps(reference_names()))
        return
    if argv[:1] == ["--against"]:
        for module, names in added_names(argv[1]).items():
            print(f"{module:42s} {len(names):4d} new:", " ".join(names))
        return
    table = coverage(set(argv) or None)
    total_have = total = 0
    for ref_path, (present, missing) in table.items():
        n = len(present) + len(missing)
        total_have += len(present)
        total += n
        print(f"{ref_path:42s} {len(present):4d}/{n:<4d} {100 * len(present) / max(n, 1):5.1f}%")
        if argv:
            print("   missing:", " ".join(missing))
    print(f"{'all':42s} {total_have:4d}/{total:<4d} {100 * total_have / max(total, 1):5.1f}%")


if __name__ == "__main__":
    main(sys.argv[1:])
