"""Each program of the corpus runs through jitad with its imports renamed and agrees with the
run through its original library (`harness.py` says how a program is kept)."""
import pytest

from . import harness

PROGRAMS = harness.programs()


@pytest.mark.parametrize("tiering", ["auto", "compile"])
@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_renamed_program_agrees_with_its_original(program, tiering, request):
    """As a user runs it (`auto`: a new path of `grad` called from Python interpreted
    first), and with every path compiled at once, so a wrong compiled path cannot hide
    behind the interpreter."""
    pytest.importorskip(program.library)
    if "xfail" in program.header:
        request.applymarker(pytest.mark.xfail(reason=program.header["xfail"], strict=True))
    jitad = pytest.importorskip("jitad")
    before = jitad.config.read("jitad_tiering")
    jitad.config.update("jitad_tiering", tiering)
    try:
        mine, _ = harness.run(program, "jitad")
    finally:
        jitad.config.update("jitad_tiering", before)
    theirs, _ = harness.run(program, program.library)
    for name, rtol, atol in program.compared():
        ours, original = harness.value(program, "jitad", mine, name), harness.value(program, program.library, theirs, name)
        harness.assert_agree(ours, original, rtol, atol, f"{program.name}: {name}")


def test_every_program_names_its_source_and_licence():
    for program in PROGRAMS:
        assert program.header["source"].startswith("https://"), program.name
        assert program.header["licence"], program.name
