"""`python -m bench.gradbench.tool`: jitad as a GradBench tool.

Speaks GradBench's JSON-lines protocol on stdin/stdout (CONTRIBUTING.md, "Protocol"):
one response per message, with the message's id. `define` says whether jitad has the
module; `evaluate` runs the function at least `min_runs` times and until `min_seconds`
have accumulated, with one `evaluate` timing per run (nanoseconds, the call alone) after
a first call reported as a `compile` timing (tracing and LLVM; jitad's disk cache applies).
Every other kind of message gets just its id back.
"""
import json
import sys
import time
import traceback

import bench  # noqa: F401  (single-thread settings)

import numpy as np

from . import inputs

_COMPILED = {}


def _functions(module):
    if module not in _COMPILED:
        from . import arrays, det, jacobians, nested
        if module == "det":
            _COMPILED[module] = det.compiled()
        elif module in ("particle", "saddle"):
            _COMPILED[module] = {v: nested.compiled(module, v) for v in nested.VARIANTS}
        elif module in jacobians.EVALS:
            _COMPILED[module] = jacobians.compiled(module)
        else:
            _COMPILED[module] = arrays.compiled(module)
    return _COMPILED[module]


def _json(x):
    """NumPy results as JSON values (floats, nested lists)."""
    if isinstance(x, (tuple, list)):
        return [_json(v) for v in x]
    a = np.asarray(x, dtype=np.float64)
    return float(a) if a.ndim == 0 else a.tolist()


def output(module, function, result, args=None):
    """The eval's output type for `function`'s result."""
    if module == "ba":
        return _ba_output(function, result, args)
    if module == "particle":
        return float(result)
    if module == "det" and function == "gradient":
        return _json(np.ravel(result))       # row-major
    if module == "gmm" and function == "jacobian":
        return dict(zip(("alpha", "mu", "q", "l"), _json(result)))
    if module == "lstm" and function == "jacobian":
        return [float(v) for part in result for v in np.ravel(part)]   # main then extra, rows adjacent
    return _json(result)


def _ba_output(function, result, args):
    """GradBench's ba outputs: the errors of one observation with their count; the sparse
    Jacobian's first 30 entries of rows, cols, vals and their last ones."""
    if function == "objective":
        err, w_err = result
        return {"reproj_error": {"elements": _json(err[:2]), "repeated": err.size // 2},
                "w_err": {"element": float(w_err[0]), "repeated": w_err.size}}
    rows, cols = inputs.ba_sparsity(args[0].shape[0], args[1].shape[0], args[4])
    cut = lambda a, kind: [kind(v) for v in list(a[:30]) + [a[-1]]]
    return {"rows": cut(rows, int), "cols": cut(cols, int), "vals": cut(result, float)}


def evaluate(message):
    module, function, inp = message["module"], message["function"], message["input"]
    fn = _functions(module)[function]
    args = inputs.prepare(module, inp)
    start = time.perf_counter_ns()
    result = fn(*args)
    timings = [{"name": "compile", "nanoseconds": time.perf_counter_ns() - start}]
    min_runs, min_ns = int(inp.get("min_runs", 1)), float(inp.get("min_seconds", 0)) * 1e9
    runs, total = 0, 0
    while runs < min_runs or total < min_ns:
        # the previous result is let go first, as a C++ tool overwrites its output: else
        # each timed call makes its result while the last one is still held, and with a
        # large result (ba's Jacobian, 45 MB) the first timed call faults in memory that
        # no call has used yet (NumPy asks for huge pages from 4 MB on)
        result = None
        start = time.perf_counter_ns()
        result = fn(*args)
        ns = time.perf_counter_ns() - start
        timings.append({"name": "evaluate", "nanoseconds": ns})
        runs, total = runs + 1, total + ns
    return {"success": True, "output": output(module, function, result, args), "timings": timings}


def respond(message):
    kind = message.get("kind")
    reply = {"id": message.get("id")}
    try:
        if kind == "start":
            reply["tool"] = "jitad"
        elif kind == "define":
            known = message["module"] in inputs.FUNCTIONS
            reply["success"] = known
            if known:
                start = time.perf_counter_ns()
                _functions(message["module"])
                reply["timings"] = [{"name": "define", "nanoseconds": time.perf_counter_ns() - start}]
            else:
                reply["error"] = f"jitad has no implementation of module {message['module']!r}"
        elif kind == "evaluate":
            reply.update(evaluate(message))
    except Exception as e:   # the protocol reports failures in the response
        reply.update(success=False, error="".join(traceback.format_exception(e)))
    return reply


def main(stdin=sys.stdin, stdout=sys.stdout):
    for line in stdin:
        if line.strip():
            print(json.dumps(respond(json.loads(line))), file=stdout, flush=True)


if __name__ == "__main__":
    main()
