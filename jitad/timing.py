"""Compile time by stage. While a signature compiles, `stage(name)` charges the time spent
inside it to that stage of the report being recorded on this thread (a nested stage
pauses the one around it, so the stages add up to the total). See
`jitad.jit(f).compile_report()`."""
import contextlib
import threading
import time

STAGES = {   # name -> what it covers, in pipeline order
    "trace": "running the Python function on staged values (nested traces included)",
    "ad": "differentiation: reverse (CPS) and forward mode transformations",
    "passes": "the IR passes of jitad.ir.passes.PIPELINE",
    "lower": "building the LLVM IR (llvmlite.ir) and the CPython entry points",
    "ir_text": "printing the LLVM module as text and hashing it (the cache key)",
    "cache_load": "looking up and reading the disk cache",
    "optimize": "parsing and verifying the IR, LLVM's optimization pipeline",
    "codegen": "LLVM code generation (machine code as an object file)",
    "wait": "waiting for the other threads' parts of the module (jitad.lower.parallel)",
    "cache_store": "writing the object code to the disk cache",
    "link": "adding the object code to the JIT and making Python callables",
    "other": "everything else (signature checks, argument types, ...)",
}


class CompileReport(dict):
    """Seconds per stage of one signature's compile (`STAGES`), with `.total` (the
    signature's `compile_seconds`), `.cpu` (the process's CPU seconds meanwhile, every
    thread's: LLVM's helper threads make it exceed `.total` on a free machine; on a busy
    one, waiting for a core makes `.total` exceed it) and `.cache`: "miss" (compiled),
    "disk" (object code loaded from the disk cache), "process" (compiled earlier in this
    process) or "off" (no disk cache). `str()` prints a table.

    >>> f = jitad.jit(lambda x: x * 2.0)
    >>> f(1.0)
    2.0
    >>> r = f.compile_report()
    >>> sorted(r) == sorted(jitad.timing.STAGES) and abs(sum(r.values()) - r.total) < 1e-3
    True
    >>> r.cpu >= 0.0
    True
    """

    def __init__(self):
        super().__init__((name, 0.0) for name in STAGES)
        self.total, self.cpu, self.cache = 0.0, 0.0, "off"

    def __str__(self):
        rows = [f"{name:<12} {seconds * 1e3:9.1f} ms  {seconds / (self.total or 1) * 100:5.1f}%"
                for name, seconds in self.items() if seconds]
        return "\n".join(rows + [f"{'total':<12} {self.total * 1e3:9.1f} ms  (cache: {self.cache})",
                                 f"{'cpu':<12} {self.cpu * 1e3:9.1f} ms  (the process's threads meanwhile)"])

    __repr__ = __str__


class _Recording(threading.local):
    report = None   # the CompileReport this thread is recording, if any
    current = "other"
    since = 0.0


_rec = _Recording()


def _switch(name):
    now = time.perf_counter()
    _rec.report[_rec.current] += now - _rec.since
    _rec.current, _rec.since = name, now


@contextlib.contextmanager
def stage(name):
    """Charge the time inside to stage `name` of the report being recorded (if any)."""
    if _rec.report is None:
        yield
        return
    outer = _rec.current
    _switch(name)
    try:
        yield
    finally:
        _switch(outer)


def note_cache(kind):
    """Record how the compiled code was found: "miss", "disk" or "process"."""
    if _rec.report is not None:
        _rec.report.cache = kind


@contextlib.contextmanager
def recording():
    """Record a compile's stages into the CompileReport yielded. A compile nested in
    another records into its own report; the outer one charges it to its current stage."""
    saved = (_rec.report, _rec.current, _rec.since)
    report = CompileReport()
    _rec.report, _rec.current, _rec.since = report, "other", time.perf_counter()
    start, cpu = _rec.since, time.process_time()
    try:
        yield report
    finally:
        _switch("other")
        report.total, report.cpu = _rec.since - start, time.process_time() - cpu
        _rec.report, _rec.current, _rec.since = saved
