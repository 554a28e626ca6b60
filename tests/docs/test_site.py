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


# modules whose public names are documented where users import them (the `jitad`
# namespace, mostly): the machinery behind the transformations, staging and the math
IMPLEMENTATION = ("jitad.api", "jitad.forest", "jitad.pytree", "jitad.hostrng", "jitad.numpy_api", "jitad.numeric",
                  "jitad.staging", "jitad.transforms", "jitad.ir", "jitad.lower", "jitad.primitives", "jitad.dispatch",
                  "jitad.toplevel", "jitad.lax.", "jitad.nn.", "jitad.numpy.", "jitad.random.")
# (the submodules of lax, nn, numpy and random: on their package's page)


def test_every_public_module_is_in_the_api_reference():
    import pkgutil

    import jitad
    documented = {line.split()[1] for page in (ROOT / "docs" / "api").glob("*.md")
                  for line in page.read_text().splitlines() if line.startswith("::: ")}
    modules = {m.name for m in pkgutil.walk_packages(jitad.__path__, "jitad.")
               if not m.name.rsplit(".", 1)[-1].startswith("_")}
    public = {m for m in modules if not m.startswith(IMPLEMENTATION)} | {"jitad"}
    assert sorted(public - documented) == []
