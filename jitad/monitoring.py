"""JAX's `jax.monitoring`: listeners for named events, durations and scalars. jitad
records `/jitad/compile_duration_secs` (seconds to trace and compile a new signature,
with the function's name as `fun_name`); user code may record its own.

>>> seen = []
>>> jitad.monitoring.register_event_listener(lambda event, **kw: seen.append(event))
>>> jitad.monitoring.record_event("/my/event")
>>> seen
['/my/event']
>>> jitad.monitoring.clear_event_listeners()
"""
__all__ = ["clear_event_listeners", "record_event", "record_event_duration_secs", "record_event_time_span",
           "record_scalar", "register_event_duration_secs_listener", "register_event_listener",
           "register_event_time_span_listener", "register_scalar_listener", "unregister_event_duration_listener",
           "unregister_event_listener", "unregister_event_time_span_listener", "unregister_scalar_listener"]

_LISTENERS = {"event": [], "duration": [], "span": [], "scalar": []}


def _notify(kind, *args, **kwargs):
    for listener in list(_LISTENERS[kind]):
        listener(*args, **kwargs)


def record_event(event, **kwargs):
    """Tell every event listener `listener(event, **kwargs)`."""
    _notify("event", event, **kwargs)


def record_event_duration_secs(event, duration, **kwargs):
    """Tell every duration listener `listener(event, duration, **kwargs)`."""
    _notify("duration", event, duration, **kwargs)


def record_event_time_span(event, start_time, end_time, **kwargs):
    """Tell every time-span listener `listener(event, start_time, end_time, **kwargs)`."""
    _notify("span", event, start_time, end_time, **kwargs)


def record_scalar(event, value, **kwargs):
    """Tell every scalar listener `listener(event, value, **kwargs)`."""
    _notify("scalar", event, value, **kwargs)


def register_event_listener(callback):
    _LISTENERS["event"].append(callback)


def register_event_duration_secs_listener(callback):
    _LISTENERS["duration"].append(callback)


def register_event_time_span_listener(callback):
    _LISTENERS["span"].append(callback)


def register_scalar_listener(callback):
    _LISTENERS["scalar"].append(callback)


def _unregister(kind, callback):
    if callback in _LISTENERS[kind]:
        _LISTENERS[kind].remove(callback)


def unregister_event_listener(callback):
    _unregister("event", callback)


def unregister_event_duration_listener(callback):
    _unregister("duration", callback)


def unregister_event_time_span_listener(callback):
    _unregister("span", callback)


def unregister_scalar_listener(callback):
    _unregister("scalar", callback)


def clear_event_listeners():
    """Forget every listener."""
    for listeners in _LISTENERS.values():
        listeners.clear()
