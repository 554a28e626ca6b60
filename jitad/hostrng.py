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
        if fn.__code__.co_filename.startswith(_PKG_DIR):
            inner = [c.cell_contents for c in fn.__closure__ or () if _filled(c)]
        else:
            found.append(fn)
            inner = [c.cell_contents for c in fn.__closure__ or () if _filled(c)] + _global_functions(fn)
    else:
        inner = [getattr(fn, name, None) for name in ("func", "fn", "__wrapped__")]
    for f in inner:
        if callable(f):
            found += _user_functions(f, depth - 1, seen)
    return found


def _global_functions(fn):
    """The module-level Python functions `fn`'s code calls by name (a loss calling a model
    defined beside it): what they draw is drawn by `fn` too."""
    named = (fn.__globals__.get(n) for code in _codes(fn.__code__) for n in code.co_names)
    return [g for g in named if isinstance(g, types.FunctionType)]


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


# -- draws at every call ------------------------------------------------------------
# Under `grad` called from Python (see `jitad.dispatch`) a draw from NumPy's global
# generator, Python's `random` or a NumPy generator the function names becomes an argument
# of the compiled program: the dispatcher draws it with the real generator at each call,
# in the order of the trace, so a seeded program gets autograd's numbers bit for bit.

def _owner_state(owner):
    if owner == "numpy":
        return np.random.get_state(legacy=False)
    if owner == "random":
        return random.getstate()
    return _state(owner)


def _set_owner_state(owner, state):
    if owner == "numpy":
        np.random.set_state(state)
    elif owner == "random":
        random.setstate(state)
    elif isinstance(owner, np.random.RandomState):
        owner.set_state(state)
    else:
        owner.bit_generator.state = state


def draw(owner, name, args, kwargs):
    """Make one recorded draw again, with the generator as it is now."""
    target = np.random if owner == "numpy" else random if owner == "random" else owner
    return getattr(target, name)(*args, **kwargs)


def save_states(owners):
    """The states of `owners` (see `restore_states`)."""
    return [(o, _owner_state(o)) for o in owners]


def restore_states(saved):
    for owner, state in saved:
        _set_owner_state(owner, state)


class _GeneratorProxy:
    """Stands for a NumPy generator in the function's globals, closure or defaults while it
    is traced: its draws are recorded."""

    def __init__(self, gen, recorder):
        self._gen, self._recorder = gen, recorder

    def __getattr__(self, name):
        found = getattr(self._gen, name)
        return self._recorder.wrap(self._gen, name, found) if name in _DRAWS and callable(found) else found


class Recorder:
    """While tracing `fn` with values: the draws it makes (owner, name, args, kwargs), each
    turned into an argument by `as_argument(value, index)` (None: it stays a constant)."""

    def __init__(self, fn, as_argument):
        self.fns = _user_functions(fn)
        self.as_argument = as_argument
        self.draws = []
        self.owners = []
        self.unrecorded = []   # the generators that drew what the record lacks (constants of the program)

    def wrap(self, owner, name, original):
        def recorded(*args, **kwargs):
            value = original(*args, **kwargs)
            arg = self.as_argument(value, len(self.draws))
            if arg is None:
                return value
            self.draws.append((owner, name, args, kwargs))
            if not any(o is owner for o in self.owners):
                self.owners.append(owner)
            return arg
        return recorded

    @contextmanager
    def recording(self):
        """Patch the draws, trace, restore; then warn about draws that were not recorded
        (frozen into the program): those the state of a generator shows but the record lacks."""
        gens = _generators(self.fns)
        if not gens and not names_draws(self.fns):   # nothing to record: only check nothing drew
            with watch_fns(self.fns):
                yield self
            return
        owners = ["numpy", "random"] + gens
        before = save_states(owners)
        undo = [_patch(np.random, n, self.wrap("numpy", n, getattr(np.random, n)))
                for n in _DRAWS if callable(getattr(np.random, n, None))]
        undo += [_patch(random, n, self.wrap("random", n, getattr(random, n)))
                 for n in _DRAWS if callable(getattr(random, n, None))]
        undo += _swap_generators(self.fns, {id(g): _GeneratorProxy(g, self) for g in gens})
        try:
            yield self
        finally:
            for u in reversed(undo):
                u()
        after = save_states(owners)
        restore_states(before)
        for owner, name, args, kwargs in self.draws:
            draw(owner, name, args, kwargs)
        unexplained = [o for (o, s), (_, s2) in zip(save_states(owners), after) if not _same(s, s2)]
        restore_states(after)
        self.unrecorded = unexplained
        if unexplained:
            names = ["NumPy's global generator (np.random)" if o == "numpy" else "Python's `random`" if o == "random"
                     else f"the NumPy generator {type(o).__name__}" for o in unexplained]
            sites = _draw_sites(self.fns)
            warnings.warn(
                f"jitad traced `{getattr(self.fns[0], '__qualname__', 'the function') if self.fns else 'the function'}`"
                f" while it drew random numbers from {' and '.join(names)}"
                f"{' (' + ', '.join(sites[:4]) + ')' if sites else ''} that jitad cannot draw again at each call "
                "(inside an IF/WHILE/FOR body, or through a name bound before the call, such as "
                "`from numpy.random import randn`): they are constants of the compiled program. Call them as "
                "`np.random.<name>` or through a generator the function names, outside combinator bodies, "
                "or pass a key and draw with jitad.random.", JitadWarning, stacklevel=_user_level())


def _patch(module, name, value):
    old = getattr(module, name)
    setattr(module, name, value)
    return lambda: setattr(module, name, old)


def _swap_generators(fns, proxies):
    """Put `proxies` (id of a generator -> its proxy) where the functions find the generators;
    return the undo functions."""
    undo = []
    for fn in fns:
        for cell in fn.__closure__ or ():
            if _filled(cell) and id(cell.cell_contents) in proxies:
                old = cell.cell_contents
                cell.cell_contents = proxies[id(old)]
                undo.append(lambda cell=cell, old=old: setattr(cell, "cell_contents", old))
        names = {n for code in _codes(fn.__code__) for n in code.co_names}
        for n in names:
            g = fn.__globals__.get(n)
            if g is not None and id(g) in proxies:
                fn.__globals__[n] = proxies[id(g)]
                undo.append(lambda d=fn.__globals__, n=n, old=g: d.__setitem__(n, old))
        if fn.__defaults__ and any(id(d) in proxies for d in fn.__defaults__):
            old = fn.__defaults__
            fn.__defaults__ = tuple(proxies.get(id(d), d) for d in old)
            undo.append(lambda fn=fn, old=old: setattr(fn, "__defaults__", old))
    return undo


def owners_of(fn):
    """The generators a call of `fn` may draw from (NumPy's global one, Python's `random`,
    and the NumPy generators its functions name); none where its code names no draw."""
    fns = _user_functions(fn)
    gens = _generators(fns)
    return ["numpy", "random"] + gens if gens or names_draws(fns) else []


_NAMES_DRAWS = {}   # code object -> whether it names a draw


def names_draws(fns):
    """Whether the functions' code names a draw (`randn`, `normal`, ...), by name."""
    found = False
    for fn in fns:
        code = fn.__code__
        hit = _NAMES_DRAWS.get(code)
        if hit is None:
            hit = _NAMES_DRAWS[code] = any(n in _DRAWS for c in _codes(code) for n in c.co_names)
        found = found or hit
    return found


@contextmanager
def watch_fns(fns):
    """`watch` for functions already unwrapped (`_user_functions`)."""
    before = np.random.get_state(legacy=False), random.getstate()
    yield
    if random.getstate() != before[1] or not _same(np.random.get_state(legacy=False), before[0]):
        name = getattr(fns[0], "__qualname__", "the function") if fns else "the function"
        warnings.warn(f"jitad traced `{name}` while it drew random numbers through a name it does not show "
                      "(a library function, or a draw bound before the call): they are constants of the "
                      "compiled program. Draw with `np.random.<name>` in the function, or pass a key and "
                      "draw with jitad.random.", JitadWarning, stacklevel=_user_level())
