"""The public API's type hints hold: pyright (standard mode, `[tool.pyright]` in
pyproject.toml) finds no error in the modules users call first. `py.typed` marks the
package as typed for the user's own checker."""
import pathlib
import shutil
import subprocess
import sys

import pytest

import jitad

ROOT = pathlib.Path(jitad.__file__).parent
CHECKED = ["api.py", "config.py", "tree.py", "tree_util.py", "flatten_util.py", "testing.py"]


def test_the_package_is_marked_typed():
    assert (ROOT / "py.typed").exists()


def test_pyright_finds_no_error_in_the_public_api():
    pyright = shutil.which("pyright", path=str(pathlib.Path(sys.executable).parent)) or shutil.which("pyright")
    if pyright is None:
        pytest.skip("pyright is not installed (the test extra installs it)")
    done = subprocess.run([pyright, *(str(ROOT / name) for name in CHECKED)], capture_output=True, text=True,
                          cwd=ROOT.parent, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:]
    assert "0 errors" in done.stdout
