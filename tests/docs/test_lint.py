"""The code base meets its committed ruff configuration (`[tool.ruff]` in pyproject.toml)."""
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _ruff():
    """The ruff beside this interpreter (a venv's), else one on PATH; None when not installed."""
    here = pathlib.Path(sys.executable).with_name("ruff")
    return str(here) if here.exists() else shutil.which("ruff")


def test_ruff_check_is_clean():
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed (it comes with the test extra: pip install -e '.[test]')")
    done = subprocess.run([ruff, "check", "--no-cache", "jitad", "tests", "bench", "examples"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
