"""Every ```python block of README.md and docs/**/*.md runs, and its value comments hold.

A page's blocks run in order in one namespace (a later block may use what an earlier one
defined), statement by statement: an expression statement whose line ends in a comment
starting with a Python literal (`jitad.grad(f)(2.0)   # 12.0`, `# (4.0, 3.0)`, `# True`)
must equal that literal, to 1e-12 relative. Each page starts from an empty namespace, in
an empty working directory. A block right after a line `<!-- skip -->` is shown, not run
(CONTRIBUTING.md, "Code blocks in the documentation", says when that is allowed)."""
import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
SKIP = "<!-- skip -->"
FENCE = re.compile(r"^```python\n(.*?)^```\s*$", re.M | re.S)


def blocks(text):
    """(first line number, code, skipped) of each python block of a page."""
    found = []
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        found.append((text.count("\n", 0, m.start(1)) + 1, m.group(1), before.strip() == SKIP))
    return found


def claim(line):
    """The literal a line's comment starts with (`# 12.0, compiled once`: 12.0), or None."""
    code, sep, comment = line.partition("  #")
    if not sep or not code.strip():
        return None
    text = comment.strip()
    for end in sorted({i for i, c in enumerate(text) if c in " ,:;"} | {len(text)}, reverse=True):
        if text[:end].endswith(","):
            continue   # `12.0, compiled once`: the number, not a 1-tuple
        try:
            value = ast.literal_eval(text[:end])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        return value if isinstance(value, (int, float, bool, tuple, list, dict)) else None
    return None


def statements(code, first_line):
    """Each top-level statement of a block, with its claim (None where it makes none); line
    numbers are the page's."""
    padded = "\n" * (first_line - 1) + code
    lines = padded.split("\n")
    for stmt in ast.parse(padded).body:
        want = claim(lines[stmt.end_lineno - 1]) if isinstance(stmt, ast.Expr) else None
        yield stmt, want


def _approx(value):
    if isinstance(value, dict):
        return {k: _approx(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_approx(v) for v in value)
    if isinstance(value, bool) or (isinstance(value, list) and any(isinstance(v, (list, tuple)) for v in value)):
        return value
    return pytest.approx(value, rel=1e-12)


def run_page(path):
    """Runs a page's blocks; returns how many value comments it checked."""
    name, namespace, checked = str(path.relative_to(ROOT)), {"__name__": "__docs__"}, 0
    for first_line, code, skipped in blocks(path.read_text()):
        if skipped:
            continue
        for stmt, want in statements(code, first_line):
            if isinstance(stmt, ast.Expr):
                value = eval(compile(ast.Expression(stmt.value), name, "eval"), namespace)
                if want is not None:
                    assert value == _approx(want), f"{name}:{stmt.end_lineno}: {value!r}, the page says {want!r}"
                    checked += 1
            else:
                exec(compile(ast.Module([stmt], []), name, "exec"), namespace)
    return checked


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_runs(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # what an example writes (jitad.export's library) lands there
    run_page(path)


def test_pages_make_claims_and_skip_few():
    """The value comments are read (a change of format would silently check nothing) and
    few blocks are skipped."""
    found = [(want, skipped) for path in PAGES for first, code, skipped in blocks(path.read_text())
             for _, want in statements(code, first)]
    assert sum(want is not None for want, skipped in found if not skipped) >= 60
    skipped = sum(s for path in PAGES for _, _, s in blocks(path.read_text()))
    assert skipped <= 3


def test_claims_are_read():
    assert claim("f(3.0)   # 12.141120008059866, compiled once") == 12.141120008059866
    assert claim("g(1.0)   # (4.0, 3.0)") == (4.0, 3.0)
    assert claim("h(x)     # {'a': -20.0}: the gradient") == {"a": -20.0}
    assert claim("x.shape  # shape (4, 2, 3)") is None
    assert claim("y = 1    #") is None
    assert blocks(f"{SKIP}\n```python\nboom()\n```\n\n```python\nok()\n```\n") == [(3, "boom()\n", True),
                                                                                   (7, "ok()\n", False)]
