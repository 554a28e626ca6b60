"""JAX's `jax.profiler` on jitad: `trace(log_dir)` (or `start_trace`/`stop_trace`)
records the spans of `TraceAnnotation`s, annotated functions and jitad's compiles, and
writes them to `log_dir/jitad.trace.json` in the Chrome trace format (open it in
Perfetto or chrome://tracing).

>>> import tempfile
>>> with jitad.profiler.trace(tempfile.mkdtemp()):
...     with jitad.profiler.TraceAnnotation("step"):
...         _ = jitad.jit(lambda x: x + 1.0)(1.0)
"""
import contextlib
import functools
import json
import os
import threading
import time

from . import monitoring
from .errors import JitadError

__all__ = ["StepTraceAnnotation", "TraceAnnotation", "annotate_function", "start_trace", "stop_trace", "trace"]

_state = {"dir": None, "events": None}
_lock = threading.Lock()


def _add(name, start, end, **args):
    with _lock:
        if _state["events"] is not None:
            _state["events"].append({"name": name, "ph": "X", "ts": start * 1e6, "dur": (end - start) * 1e6,
                                     "pid": os.getpid(), "tid": threading.get_ident(),
                                     "args": {k: str(v) for k, v in args.items()}})


def _compile_listener(event, duration, **kwargs):
    now = time.perf_counter()
    _add(event, now - duration, now, **kwargs)


def start_trace(log_dir, create_perfetto_link=False, create_perfetto_trace=False, profiler_options=None):
    """Start recording spans; `stop_trace()` writes them under `log_dir`."""
    with _lock:
        if _state["events"] is not None:
            raise JitadError("a profiler trace is already running; stop_trace() it first")
        os.makedirs(log_dir, exist_ok=True)
        _state["dir"], _state["events"] = os.fspath(log_dir), []
    monitoring.register_event_duration_secs_listener(_compile_listener)


def stop_trace():
    """Stop recording and write `jitad.trace.json` into the trace's `log_dir`; its path."""
    with _lock:
        if _state["events"] is None:
            raise JitadError("no profiler trace is running; start_trace(log_dir) first")
        events, log_dir = _state["events"], _state["dir"]
        _state["dir"] = _state["events"] = None
    monitoring.unregister_event_duration_listener(_compile_listener)
    path = os.path.join(log_dir, "jitad.trace.json")
    with open(path, "w") as fh:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, fh)
    return path


@contextlib.contextmanager
def trace(log_dir, create_perfetto_link=False, create_perfetto_trace=False, profiler_options=None):
    """Record spans within the `with` block into `log_dir/jitad.trace.json`."""
    start_trace(log_dir)
    try:
        yield
    finally:
        stop_trace()


class TraceAnnotation:
    """A named span of the trace: `with TraceAnnotation("data loading"): ...`."""

    def __init__(self, name, **kwargs):
        self.name, self.kwargs = name, kwargs

    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        _add(self.name, self.start, time.perf_counter(), **self.kwargs)
        return False


class StepTraceAnnotation(TraceAnnotation):
    """The span of one training step: `with StepTraceAnnotation("train", step_num=i): ...`."""


def annotate_function(func, name=None, **decorator_kwargs):
    """`func` recorded as a span named `name` (its name by default) at each call."""
    @functools.wraps(func)
    def annotated(*args, **kwargs):
        with TraceAnnotation(name or getattr(func, "__qualname__", "function"), **decorator_kwargs):
            return func(*args, **kwargs)
    return annotated
