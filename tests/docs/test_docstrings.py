"""Every example in jitad's public docstrings runs and is true: the `>>>` examples as
doctests (in their module's scope plus `jitad` and `np`; `# doctest: +SKIP` ones stay
skipped; an example without an expected output only has to run; NumPy scalars print as
plain numbers), and the one-line claims written in backticks, "`jitad.log2(8.0) == 3.0`",
evaluated (a claim with free variables, "`jitad.outer(a, b)[i, j] == a[i] * b[j]`", is a
formula, not an example)."""
import ast
import builtins
import doctest
import importlib
import math
import pkgutil
import re

import numpy as np
import pytest

import jitad

PRIVATE = ("jitad.ir", "jitad.lower", "jitad.primitives", "jitad.transforms.jvp", "jitad.transforms.vjp",
           "jitad.transforms.tape", "jitad.transforms.base")   # no public docstrings


def public_modules():
    names = ["jitad"] + [m.name for m in pkgutil.walk_packages(jitad.__path__, "jitad.")
                         if not m.name.startswith(PRIVATE) and not m.name.rsplit(".", 1)[-1].startswith("_")]
    return sorted(names)


def _globs():
    """What examples may use unimported: jitad, np, math's names, and the namespaces' usual
    aliases (`lax`, `jnp`)."""
    return {"jitad": jitad, "np": np, "math": math, "nan": math.nan, "inf": math.inf, "pi": math.pi,
            "log": math.log, "exp": math.exp, "sqrt": math.sqrt,
            "lax": importlib.import_module("jitad.lax"), "jnp": importlib.import_module("jitad.numpy")}


class _Checker(doctest.OutputChecker):
    def check_output(self, want, got, optionflags):
        return not want or super().check_output(want, got, optionflags)


@pytest.mark.parametrize("name", public_modules())
def test_doctests(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # what an example writes (jitad.export's library) lands there
    try:
        module = importlib.import_module(name)
    except ImportError as e:   # an optional dependency (mpi4py, torch) missing
        pytest.skip(str(e))
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(_Checker(), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    legacy = np.get_printoptions()["legacy"]
    np.set_printoptions(legacy="1.25")   # 6.0, not np.float64(6.0)
    try:
        for test in finder.find(module, name, extraglobs=_globs()):
            if test.lineno is None or test.filename != module.__file__:
                continue   # found through a re-export: tested in its own module
            runner.run(test)
    finally:
        np.set_printoptions(legacy=legacy)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} doctest example(s) of {name} fail (see the output above)"


CLAIM = re.compile(r"`(jitad\.[^`]*?[^=!<>]==[^`]*)`")


def claims():
    out = {}
    for name in public_modules():
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        objects = [module] + [getattr(module, n) for n in dir(module) if not n.startswith("_")]
        for obj in objects:
            doc = getattr(obj, "__doc__", None)
            if isinstance(doc, str) and getattr(obj, "__module__", name) == name or obj is module:
                for claim in CLAIM.findall(doc or ""):
                    names = {n.id for n in ast.walk(ast.parse(claim, mode="eval")) if isinstance(n, ast.Name)}
                    if names <= set(_globs()) | set(dir(builtins)):
                        out.setdefault(claim, f"{name}.{getattr(obj, '__name__', '')}")
    return sorted(out.items())


@pytest.mark.parametrize("claim, where", claims())
def test_inline_claims(claim, where):
    with np.errstate(all="ignore"):
        assert eval(claim, _globs()), f"{where}: `{claim}` is false"
