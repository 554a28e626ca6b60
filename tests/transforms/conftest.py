"""Fixtures the transformation tests share."""
import pytest

from jitad import dispatch


@pytest.fixture
def traces(monkeypatch):
    """The traces (of the function alone or transformed) made from now on."""
    made = []
    trace_program = dispatch.trace_program
    monkeypatch.setattr(dispatch, "trace_program", lambda *a, **k: made.append(1) or trace_program(*a, **k))
    return made
