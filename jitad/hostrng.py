"""A warning for random numbers drawn from NumPy's or Python's generators while jitad
traces a function: they become constants of the compiled program, so every call gets
the same numbers (autograd, which does not compile, draws new ones each call). jitad
does not re-trace per call; the fix is a key argument and `jitad.random`."""
import dis
import os
import random
import sys
import types
import warnings
import contextlib
from contextlib import contextmanager

import numpy as np

from .errors import JitadWarning

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_DRAWS = frozenset(
    "rand randn random random_sample ranf sample normal standard_normal uniform randint integers choice "
    "permutation permuted shuffle binomial poisson exponential gamma beta multivariate_normal dirichlet "
    "laplace logistic lognormal bytes gauss randrange getrandbits triangular vonmisesvariate".split())


def _user_functions(fn, depth=4, seen=None):
    """The user's Python functions behind `fn`: itself, and what its closure, a
    `functools.partial` or a jitad wrapper (`.fn`, `__wrapped__`) holds."""
    seen = set() if seen is None else seen
    if depth < 0 or id(fn) in seen:
        return []
    seen.add(id(fn))
    fn = getattr(fn, "__func__", fn)
    found = []
    if isinstance(fn, types.FunctionType):
        if not fn.__code__.co_filename.startswith(_PKG_DIR):
            found.append(fn)
        inner = [c.cell_contents for c in fn.__closure__ or () if _filled(c)]
    else:
        inner = [getattr(fn, name, None) for name in ("func", "fn", "__wrapped__")]
    for f in inner:
        if callable(f):
            found += _user_functions(f, depth - 1, seen)
    return found


def _filled(cell):
    try:
        cell.cell_contents   # noqa: B018 (reading an empty cell raises)
        return True
    except ValueError:
        return False


def _codes(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


def _generators(fns):
    """NumPy generators the functions name (globals, closure cells, defaults)."""
    found = {}
    for fn in fns:
        values = [c.cell_contents for c in fn.__closure__ or () if _filled(c)] + list(fn.__defaults__ or ())
        values += [fn.__globals__.get(n) for code in _codes(fn.__code__) for n in code.co_names]
        found.update((id(v), v) for v in values if isinstance(v, (np.random.Generator, np.random.RandomState)))
    return list(found.values())


def _draw_sites(fns):
    """`name (file:line)` of each call in the functions' code that looks like a draw."""
    sites = []
    for fn in fns:
        for code in _codes(fn.__code__):
            line = code.co_firstlineno
            for ins in dis.get_instructions(code):
                line = ins.positions.lineno or line if ins.positions else line
                if ins.opname in ("LOAD_ATTR", "LOAD_METHOD", "LOAD_GLOBAL", "LOAD_NAME") and ins.argval in _DRAWS:
                    sites.append(f"`{ins.argval}` ({os.path.basename(code.co_filename)}:{line})")
    return list(dict.fromkeys(sites))


def _user_level():
    """`warnings.warn`'s stack level of the innermost caller outside jitad and contextlib."""
    frame, level = sys._getframe(1), 1   # `watch`, which warns: level 1
    skip = (_PKG_DIR, contextlib.__file__)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(skip):
        frame, level = frame.f_back, level + 1
    return level


def _state(gen):
    return gen.get_state(legacy=False) if isinstance(gen, np.random.RandomState) else gen.bit_generator.state


def _same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return a == b


@contextmanager
def watch(fn):
    """Warn (JitadWarning) if tracing `fn` changed NumPy's global generator, Python's
    `random`, or a NumPy generator the function names."""
    fns = _user_functions(fn)
    gens = [("NumPy's global generator (np.random)", np.random.mtrand._rand)] + [
        (f"the NumPy generator {type(g).__name__}", g) for g in _generators(fns)]
    before = [_state(g) for _, g in gens], random.getstate()
    yield
    changed = [name for (name, g), s in zip(gens, before[0]) if not _same(_state(g), s)]
    if random.getstate() != before[1]:
        changed.append("Python's `random`")
    if not changed:
        return
    name = getattr(fns[0], "__qualname__", "the function") if fns else "the function"
    sites = _draw_sites(fns)
    warnings.warn(
        f"jitad traced `{name}` while it drew random numbers from {' and '.join(changed)}"
        f"{' (' + ', '.join(sites[:4]) + ')' if sites else ''}: they are now constants of the compiled "
        "program, the same numbers on every call. Pass a key argument and draw with jitad.random "
        "(`jitad.random.normal(key, shape)`), with a new key per call (`key, sub = jitad.random.split(key)`).",
        JitadWarning, stacklevel=_user_level())
