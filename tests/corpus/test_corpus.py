"""Each program of the corpus runs through jitad with its imports renamed and agrees with the
run through its original library (`harness.py` says how a program is kept)."""
import pytest

from . import harness

PROGRAMS = harness.programs()


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_renamed_program_agrees_with_its_original(program, request):
    pytest.importorskip(program.library)
    if "xfail" in program.header:
        request.applymarker(pytest.mark.xfail(reason=program.header["xfail"], strict=True))
    mine, _ = harness.run(program, "jitad")
    theirs, _ = harness.run(program, program.library)
    for name, rtol, atol in program.compared():
        ours, original = harness.value(program, "jitad", mine, name), harness.value(program, program.library, theirs, name)
        harness.assert_agree(ours, original, rtol, atol, f"{program.name}: {name}")


def test_every_program_names_its_source_and_licence():
    for program in PROGRAMS:
        assert program.header["source"].startswith("https://"), program.name
        assert program.header["licence"], program.name
