"""The documentation site builds with `mkdocs build --strict` (what `make docs` runs): no
broken link, no page left out of the navigation, every API reference resolved."""
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.skipif(importlib.util.find_spec("mkdocstrings_handlers") is None
                    or importlib.util.find_spec("material") is None,
                    reason="the docs extra is not installed: pip install -e '.[docs]'")
def test_site_builds_strictly(tmp_path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "index.html").exists() and (tmp_path / "api" / "jitad" / "index.html").exists()
