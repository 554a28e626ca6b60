"""Every python block of the README runs, and its `# value` comments hold."""
import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_blocks_run_in_order():
    namespace = {}
    checked = 0
    for block in BLOCKS:
        exec(block, namespace)
        for line in block.splitlines():   # `expression   # expected value` lines
            m = re.match(r"^(\S.*?)\s+# (-?[\d.e+-]+|\(.*?\)|\{.*?\})(,|:|\s|$)", line)
            if m and "=" not in m.group(1).split("(")[0] and not m.group(1).startswith(("@", "def ")):
                assert eval(m.group(1), namespace) == _approx(eval(m.group(2))), line
                checked += 1
    assert checked >= 8


def _approx(value):
    if isinstance(value, dict):
        return {k: _approx(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_approx(v) for v in value)
    return pytest.approx(value, rel=1e-12)
