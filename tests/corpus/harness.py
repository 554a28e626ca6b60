"""The corpus: public programs written by others for JAX or autograd, kept as files with their
imports renamed to `jitad` and nothing else changed but what a header line names.

A program's file begins with comment lines the harness reads:

    # source: https://github.com/HIPS/autograd/blob/master/examples/neural_net.py
    # licence: MIT, (c) 2014 by the Authors (HIPS autograd)
    # edits: plotting cut; num_epochs 5 -> 1; data synthetic (the `data` module below)
    # compare: params rtol=1e-9 atol=0
    # steps: 10

`compare` names the program's global variables whose values (pytrees of arrays) must agree
between the run through jitad and the run through the original library (the same text with the
rename undone), at the tolerances given; an item may also be an expression without spaces,
evaluated in the program's globals after it ran (`result.x`, `grad(sqrt)(2.0)`, `f(x,y)`; items
are separated by the commas outside brackets); `steps` is how many optimisation steps the program
takes as kept here (for per-step timings); `xfail`, where present, names a difference jitad
has yet to close (the test then expects the program to fail, and fails when it passes).
JAX runs each program at its default, 64-bit types off (whatever other tests set), unless the
program sets them itself, and jitad at its own default (on); an optional `# x64: off` or
`# x64: on` line runs both libraries so (a program that draws JAX's random numbers: 32-bit and
64-bit draws differ). NumPy's global random state is seeded the same before each run. A program that imports a module that downloads data
(`data`, `data_mnist`, `datasets`) gets the synthetic module of the same name in
`tests/corpus/data/`, the same for both runs; one that imports another program of the corpus
(`from gaussian_process import make_gp_funs`) gets that program's file, renamed the same way and
run as a module of that name.
"""
import contextlib
import dataclasses
import importlib
import pathlib
import re
import sys
import time
import types

import numpy as np

HERE = pathlib.Path(__file__).parent
LIBRARIES = {"autograd": "autograd", "jax": "jax"}


@dataclasses.dataclass
class Program:
    path: pathlib.Path
    library: str                 # "autograd" or "jax": the original the program was written for
    header: dict

    @property
    def name(self):
        return f"{self.library}/{self.path.stem}"

    @property
    def source(self):
        return self.path.read_text()

    def compared(self):
        """The variables to compare and their tolerances: [(name, rtol, atol)]."""
        out = []
        for item in split_outside_brackets(self.header["compare"]):
            words = item.split()
            opts = dict(w.split("=") for w in words[1:])
            out.append((words[0], float(opts.get("rtol", 1e-7)), float(opts.get("atol", 0.0))))
        return out


def split_outside_brackets(text):
    """`text` split at the commas outside (), [] and {}."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch in "([{") - (ch in ")]}")
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    return items + [text[start:]]


def programs():
    """Every program of the corpus, in name order."""
    found = []
    for library in LIBRARIES:
        for path in sorted((HERE / library).glob("*.py")):
            if path.name.startswith("_"):
                continue
            found.append(Program(path, library, read_header(path)))
    return found


def read_header(path):
    header = {}
    for line in path.read_text().splitlines():
        match = re.match(r"#\s*(source|licence|edits|compare|steps|x64|xfail):\s*(.*)", line)
        if match:
            header[match.group(1)] = match.group(2).strip()
        elif line.strip() and not line.startswith("#"):
            break
    missing = {"source", "licence", "compare"} - set(header)
    assert not missing, f"{path.name}: header lacks {sorted(missing)}"
    return header


def run(program, lib, clock=time.perf_counter):
    """Execute the program with `jitad` renamed to `lib` (itself for jitad); its globals and the
    seconds it took (its execution alone, by `clock`)."""
    namespace = {"__name__": "__main__", "__file__": str(program.path)}
    modules = {name: importlib.import_module(f"tests.corpus.data.{name}") for name in data_modules()}
    saved = {name: sys.modules.get(name) for name in [*modules, *(s.path.stem for s in siblings(program))]}
    sys.modules.update(modules)
    try:
        for sibling in siblings(program):
            sys.modules[sibling.path.stem] = as_module(sibling, lib)
        with x64_setting(program, lib):
            np.random.seed(0)
            code = compiled(program, lib)
            start = clock()
            exec(code, namespace)
            seconds = clock() - start
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    return namespace, seconds


def compiled(program, lib):
    text = program.source if lib == "jitad" else program.source.replace("jitad", lib)
    return compile(text, f"<{program.name} through {lib}>", "exec")


def siblings(program, seen=()):
    """The programs of the same library that this one imports (and those they import), the
    imported ones first."""
    imported = set(re.findall(r"^\s*(?:from|import)\s+(\w+)", program.source, re.MULTILINE))   # (its text read once)
    found = []
    for path in sorted(program.path.parent.glob("*.py")):
        if path != program.path and path.stem not in seen and path.stem in imported:
            sibling = Program(path, program.library, read_header(path))
            found += [*siblings(sibling, (*seen, program.path.stem)), sibling]
    return found


def as_module(program, lib):
    module = types.ModuleType(program.path.stem)
    module.__file__ = str(program.path)
    exec(compiled(program, lib), vars(module))
    return module


@contextlib.contextmanager
def x64_setting(program, lib):
    """`jax_enable_x64` for one run: the header's `x64` for both libraries, else JAX's
    default (off) for JAX and jitad's own; the setting before is restored after."""
    if lib == "autograd" or (lib == "jitad" and "x64" not in program.header):
        yield
        return
    config = importlib.import_module(lib).config
    saved = config.read("jax_enable_x64")
    config.update("jax_enable_x64", program.header.get("x64", "off").split()[0] == "on")
    try:
        yield
    finally:
        config.update("jax_enable_x64", saved)


def value(program, lib, namespace, name):
    """A compared value: the global `name` of a run's namespace, or an expression of its
    globals, evaluated under the run's `jax_enable_x64` (a compiled function keeps its types)."""
    if name.isidentifier():
        return namespace[name]
    with x64_setting(program, lib):
        return eval(name, namespace)


def data_modules():
    return sorted(p.stem for p in (HERE / "data").glob("*.py") if not p.name.startswith("_"))


def assert_agree(mine, theirs, rtol, atol, where=""):
    """Two pytrees (dicts, lists, tuples, arrays, numbers) agree leaf by leaf."""
    if isinstance(theirs, dict):
        assert sorted(mine) == sorted(theirs), where
        for key in theirs:
            assert_agree(mine[key], theirs[key], rtol, atol, f"{where}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert len(mine) == len(theirs), where
        for i, (a, b) in enumerate(zip(mine, theirs)):
            assert_agree(a, b, rtol, atol, f"{where}[{i}]")
    elif hasattr(theirs, "_fields") or dataclasses.is_dataclass(theirs):
        assert_agree(list(vars_of(mine)), list(vars_of(theirs)), rtol, atol, where)
    else:
        kind = complex if np.iscomplexobj(mine) or np.iscomplexobj(theirs) else float   # (both parts compared)
        np.testing.assert_allclose(np.asarray(mine, dtype=kind), np.asarray(theirs, dtype=kind),
                                   rtol=rtol, atol=atol, err_msg=where)


def vars_of(x):
    return tuple(x) if hasattr(x, "_fields") else tuple(dataclasses.astuple(x))
