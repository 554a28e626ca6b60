"""HIPS autograd's own test suite, run through jitad by renaming `autograd` to `jitad` in the
imports of its test files and in the module paths they name (`autograd.scipy.signal.convolve`);
nothing else in the files changes.

    python -m tests.compat.autograd_suite              # per file: passed/failed/errors, and the total
    python -m tests.compat.autograd_suite -v           # and the names of the tests that did not pass
    python -m tests.compat.autograd_suite --original   # the same files through autograd itself
    python -m tests.compat.autograd_suite --log out.txt test_numpy.py   # one file, pytest's output kept

The test files come from a git checkout of autograd (`AUTOGRAD_REPO`, default the mirror at
`/work/.mirror/HIPS+autograd/repo`), at its `HEAD`. The tests run in a pytest subprocess in a
temporary folder; the counts come from its JUnit report.
"""
import argparse
import collections
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

REPO = os.environ.get("AUTOGRAD_REPO", "/work/.mirror/HIPS+autograd/repo")
ROOT = pathlib.Path(__file__).resolve().parents[2]   # the checkout whose `jitad` is tested

_IMPORT = re.compile(r"^(\s*)(from|import)(\s+)autograd\b", re.M)
# `autograd.<module>` after `import autograd.<module>` binds the name `autograd`
_PATH = re.compile(r"(?<![\w.])autograd(?=\.[A-Za-z_])")


def rename(text, lib="jitad"):
    """The text of a test file with `autograd` renamed to `lib` in its imports and module paths.

    >>> rename("import autograd.numpy as np\\nx = autograd.scipy.signal.convolve\\nfun_autograd = 1")
    'import jitad.numpy as np\\nx = jitad.scipy.signal.convolve\\nfun_autograd = 1'
    """
    text = _IMPORT.sub(lambda m: f"{m[1]}{m[2]}{m[3]}{lib}", text)
    if re.search(rf"^\s*import\s+{lib}\.", text, re.M):
        text = _PATH.sub(lib, text)
    return text


def test_files(repo=REPO):
    """{path under tests/: text} of every Python file of the checkout's `tests/` folder."""
    names = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "--name-only", "HEAD", "tests"],
                           check=True, capture_output=True, text=True).stdout.split()
    return {name: subprocess.run(["git", "-C", repo, "show", f"HEAD:{name}"], check=True,
                                 capture_output=True, text=True).stdout
            for name in names if name.endswith(".py")}


def write(folder, files, lib):
    """Write the renamed files into `folder`/tests; the folder of the test files."""
    tests = pathlib.Path(folder) / "tests"
    tests.mkdir()
    for name, text in files.items():
        (pathlib.Path(folder) / name).write_text(rename(text, lib) if lib != "autograd" else text)
    return tests


def run_pytest(tests, report, timeout, log=None, files=()):
    """Run pytest on the folder `tests` (or the given files of it) with this checkout first on
    the path, its output to the file `log` (or nowhere); its exit code."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "pytest", "-v", "--tb=short", "-p", "no:cacheprovider", "-p", "no:randomly",
           "--rootdir", str(tests), "-o", "addopts=", "--continue-on-collection-errors", f"--junitxml={report}"]
    cmd += [str(tests / f) for f in files] or [str(tests)]
    with open(log or os.devnull, "w") as out:
        return subprocess.run(cmd, cwd=tests, env=env, timeout=timeout, stdout=out, stderr=subprocess.STDOUT).returncode


def outcomes(report):
    """{file: {test name: "passed" | "failed" | "error" | "skipped"}} from a JUnit report."""
    table = collections.defaultdict(dict)
    for case in ET.parse(report).iter("testcase"):
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(kinds[0] if kinds else "", "passed")
        module = case.get("classname", "").split(".")[-1] or case.get("name")   # a file not collected
        table[module + ".py"][case.get("name")] = outcome
    return table


def run(lib="jitad", repo=REPO, timeout=7200, log=None, files=()):
    """Run autograd's suite (or the given files of it) through `lib`; {file: {test: outcome}}."""
    with tempfile.TemporaryDirectory(prefix="autograd_suite_") as folder:
        tests = write(folder, test_files(repo), lib)
        report = pathlib.Path(folder) / "report.xml"
        run_pytest(tests, report, timeout, log, files)
        if not report.exists():
            raise RuntimeError("pytest wrote no report: the suite could not be collected")
        return outcomes(report)


def summary(table, verbose=False):
    """The lines printed: one per file (passed, failed, errors, skipped) and the total."""
    lines, total = [], collections.Counter()
    for name in sorted(table):
        counts = collections.Counter(table[name].values())
        total.update(counts)
        lines.append(f"{name:28s} passed {counts['passed']:4d}  failed {counts['failed']:3d}  "
                     f"errors {counts['error']:3d}  skipped {counts['skipped']:3d}")
        if verbose:
            lines += [f"    {o:7s} {t}" for t, o in sorted(table[name].items()) if o != "passed"]
    n = sum(total.values())
    lines.append(f"{'total':28s} passed {total['passed']:4d}  failed {total['failed']:3d}  "
                 f"errors {total['error']:3d}  skipped {total['skipped']:3d}  of {n}")
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--original", action="store_true", help="run through autograd itself")
    parser.add_argument("-v", "--verbose", action="store_true", help="name the tests that did not pass")
    parser.add_argument("--log", help="write pytest's output (one line a test, and the failures) to this file")
    parser.add_argument("files", nargs="*", help="only these test files (test_numpy.py ...)")
    args = parser.parse_args(argv)
    table = run("autograd" if args.original else "jitad", log=args.log, files=args.files)
    print("\n".join(summary(table, args.verbose)))
    return table


if __name__ == "__main__":
    main()
