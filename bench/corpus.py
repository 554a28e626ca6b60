"""Time per step of the corpus's programs (`tests/corpus/`), each run under its original
library and under jitad in one process, interleaved.

    python -m bench.corpus                          # every program
    python -m bench.corpus --library autograd       # autograd's (or jax's) only
    python -m bench.corpus neural_net rnn --repeats 5

A program is a whole script (data set up, an optimizer's loop, callbacks), so a step is the
program's time divided by the `steps` its header gives. Each library runs the program once
first (the first run: tracing and compiling, JAX's and jitad's); then `--repeats` times more,
the two libraries alternating, so that both meet the same machine load. Reported per program:
each library's time per step (the median of the later runs), jitad's ratio to the original
(median and min-max over the repeats, each repeat's pair side by side) and each library's
first-run extra (the first run's time less the later runs' median: compiling and warm-up).
jitad's disk cache is off unless `--keep-cache`, so the first run measures compiling. The two
last columns give each first run whole (the program's first run in the process; both libraries
are imported before any timing, so neither pays its import there).

A later run executes the program's text afresh, so its functions are new objects: JAX traces
and compiles each `jit` again (its in-memory caches are keyed on the function object), while
jitad finds the machine code of an equal program in the process. `--jax-cache` gives JAX the
counterpart, its persistent compilation cache in a fresh temporary directory: JAX's later runs
then trace and lower again but load the executable instead of compiling it.

A run's time includes the harness's own work (reading the corpus folder for the program's
siblings, compiling its text: about 2 ms a run for either library, most of a one-millisecond
program's run); `--program-only` times the program's execution alone.

A JAX program runs as the corpus's test runs it: JAX at its default (64-bit types off),
jitad at its own (on), unless its header sets `x64` for both. `--x64 off` (or `on`) runs
every JAX program with the same setting under both libraries, so that both compute in the
same precision (jitad's float64 default costs it against JAX's float32).
"""
import argparse
import atexit
import contextlib
import dataclasses
import io
import shutil
import statistics
import tempfile
import time
import warnings

from . import harness as bench_harness


def programs(library, names):
    """The corpus's programs of `library` (None: all), those named in `names` (none: all)."""
    from tests.corpus import harness
    found = [p for p in harness.programs() if library in (None, p.library)]
    if names:
        unknown = set(names) - {p.path.stem for p in found}
        if unknown:
            raise SystemExit(f"no corpus program named {sorted(unknown)}")
        found = [p for p in found if p.path.stem in names]
    return found


def seconds(program, lib, program_only=False):
    """The CPU seconds of one run of the program under `lib` ("jitad" or its original), its
    output swallowed (this process's CPU time, its threads' included: on a shared machine the
    wall clock measures the neighbours). The harness's own work is counted (reading the
    corpus folder for the program's siblings, compiling its text: about 2 ms a run for either
    library) unless `program_only`: then the program's execution alone."""
    from tests.corpus import harness
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if program_only:
            return harness.run(program, lib, clock=time.process_time)[1]
        start = time.process_time()
        harness.run(program, lib)
        return time.process_time() - start


def with_x64(program, setting):
    """`program` run with `jax_enable_x64` `setting` ("on"/"off") under both libraries (a
    JAX program; an autograd one is float64 under both already). None: as its header says."""
    if setting is None or program.library != "jax":
        return program
    return dataclasses.replace(program, header={**program.header, "x64": setting})


def measure(program, repeats, program_only=False):
    """{lib: {"first": s, "runs": [s, ...]}} for the original and jitad, interleaved."""
    libs = [program.library, "jitad"]
    out = {lib: {"first": seconds(program, lib, program_only), "runs": []} for lib in libs}
    for r in range(repeats):
        for lib in libs if r % 2 == 0 else libs[::-1]:
            out[lib]["runs"].append(seconds(program, lib, program_only))
    return out


def row(program, timings):
    """The table's figures for one program."""
    steps = int(program.header.get("steps", "1"))
    orig, mine = timings[program.library], timings["jitad"]
    ratios = [m / o for m, o in zip(mine["runs"], orig["runs"])]
    med = {lib: statistics.median(t["runs"]) for lib, t in timings.items()}
    x64 = program.header.get("x64", "").split()[:1]   # a JAX program's setting for both libraries, if one
    return {"name": program.name + (f" (x64 {x64[0]})" if x64 else ""), "steps": steps,
            "original_ms": 1e3 * med[program.library] / steps, "jitad_ms": 1e3 * med["jitad"] / steps,
            "ratio": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
            "original_first_s": orig["first"] - med[program.library], "jitad_first_s": mine["first"] - med["jitad"],
            "original_first_run_s": orig["first"], "jitad_first_run_s": mine["first"]}


def table(rows):
    lines = ["| program | steps | original ms/step | jitad ms/step | jitad / original (min-max) "
             "| first-run extra: original s | jitad s | first run: original s | jitad s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['steps']} | {r['original_ms']:.2f} | {r['jitad_ms']:.2f} | "
                     f"{r['ratio']:.2f} ({r['ratio_min']:.2f}-{r['ratio_max']:.2f}) | "
                     f"{r['original_first_s']:.2f} | {r['jitad_first_s']:.2f} | "
                     f"{r['original_first_run_s']:.2f} | {r['jitad_first_run_s']:.2f} |")
    return "\n".join(lines)


def jax_compilation_cache(jax):
    """JAX's persistent compilation cache in a fresh temporary directory, every executable kept."""
    directory = tempfile.mkdtemp(prefix="jax-cache-")
    atexit.register(shutil.rmtree, directory, True)
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.corpus", description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="programs (file names without .py); default: all")
    ap.add_argument("--library", choices=["autograd", "jax"], help="only the programs written for this one")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per library after the first (default 3)")
    ap.add_argument("--keep-cache", action="store_true", help="use jitad's disk cache")
    ap.add_argument("--x64", choices=["on", "off"], help="run the JAX programs with this 64-bit setting under both "
                    "libraries (default: JAX's off, jitad's on, unless the program's header says)")
    ap.add_argument("--program-only", action="store_true", help="time each run's execution alone, not the "
                    "harness's reading of the corpus folder and compiling of the text (about 2 ms a run for either)")
    ap.add_argument("--jax-cache", action="store_true", help="JAX's persistent compilation cache on (a fresh "
                    "temporary directory): its later runs load what its first compiled")
    args = ap.parse_args(argv)
    bench_harness.sizes_from(argparse.Namespace(quick=False, repeats=None, keep_cache=args.keep_cache), {}, {})
    import jitad  # noqa: F401  (imported before any timing, as the originals are below)
    if args.library != "jax":
        with contextlib.suppress(ImportError):
            import autograd  # noqa: F401
    if args.library != "autograd":
        with contextlib.suppress(ImportError):
            import jax
            jax.config.update("jax_enable_x64", True)
            if args.jax_cache:
                jax_compilation_cache(jax)
    rows = []
    for program in programs(args.library, args.names):
        program = with_x64(program, args.x64)
        try:
            rows.append(row(program, measure(program, args.repeats, args.program_only)))
        except Exception as e:   # a program that fails is reported, the others still run
            print(f"{program.name}: failed ({type(e).__name__}: {e})")
            continue
        r = rows[-1]
        print(f"{r['name']}: {r['original_ms']:.2f} ms/step original, {r['jitad_ms']:.2f} jitad "
              f"(x{r['ratio']:.2f}), first run +{r['original_first_s']:.2f} s / +{r['jitad_first_s']:.2f} s",
              flush=True)
    bench_harness.save_markdown("corpus", table(rows))   # (and prints it)
    return rows


if __name__ == "__main__":
    main()
