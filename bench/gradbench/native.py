"""jitad against GradBench's native C++ tools and its JAX tool, through GradBench's own evals.

```
make gradbench-native                      # a GradBench checkout in build/gradbench, C++ tools built
python -m bench.gradbench.native --table   # bench/README.md's table: every eval and tool, 3 repeats
python -m bench.gradbench.native --eval det --eval lse --min-seconds 0.1 --repeats 3
python -m bench.gradbench.native --table --per-message   # also a row per evaluate message (each input)
python -m bench.gradbench.native --render bench/results/gradbench_native.json --per-message
```

Each session runs one of GradBench's evals (`python/gradbench/gradbench/evals/E/run.py`,
its inputs, its validation against GradBench's manual tool) with one tool, relaying the
JSON-lines messages between the two processes (what GradBench's `gradbench run` does
without its containers). Tools: `jitad` (`python -m bench.gradbench.tool`), the C++
tools `manual`, `codipack`, `adol-c` and, for particle and saddle only, `finite` (the
binaries `make gradbench-native` built; they are served by GradBench's `cpp.py` functions,
minus its rebuild at every `define`), and `jax`, GradBench's JAX tool (`serve_jax`). A
tool whose `evals.txt` lacks the eval is not run ("has none").

Score per session (GradBench's basis): Σ over every evaluate message of the eval (each
input, primal and derivative) of the median of its `evaluate` timings. Repeats run
interleaved (repeat 1 of every tool, then repeat 2, ...); the table gives the median of
the repeats' sums and their spread. A session whose outputs failed validation or whose
tool refused is reported as such. A sum hides the inputs where a tool is slow:
`--per-message` adds a table with a row per evaluate message (each input and function),
each tool's median, and jitad over the fastest other AD tool and over JAX, the misses (over
1.5× and over 1×) in bold. Output: a Markdown table on stdout and `--out` (JSON).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CPP_TOOLS = ("manual", "codipack", "adol-c", "finite")
TOOLS = ("jitad",) + CPP_TOOLS[:3] + ("jax", "finite")
NOT_AD = {"finite"}   # GradBench's finite differences: a column for context, not in the ratio
FINITE_EVALS = {"particle", "saddle"}   # run only where no AD tool here has the eval
# evals where GradBench's manual derivative is an analytic shortcut no AD tool takes
ANALYTIC_MANUAL = {"ode"}
# the inputs of bench/README.md's table (GradBench's defaults where no entry)
TABLE_ARGS = {"det": "-l 5 6 7 8 9 10".split(), "lse": "-n 2500 10000 40000 160000".split(),
              "ode": [], "kmeans": [],
              "gmm": "-d 2 10 20 -k 5 10 25".split(), "ba": "--max 3".split(), "ht": "--model big --max 3".split(),
              "lstm": []}
LSTM_TEXT = os.path.join("evals", "lstm", "data", "lstm_full.txt")
EVALS = ("det", "lse", "llsq", "ode", "kmeans", "gmm", "lstm", "ba", "ht", "particle", "saddle")


def tool_command(tool, gradbench):
    if tool == "jitad":
        return [sys.executable, "-m", "bench.gradbench.tool"], ROOT
    if tool in CPP_TOOLS or tool == "jax":
        return [sys.executable, "-m", "bench.gradbench.native", "--serve", tool, "--gradbench", gradbench], ROOT
    raise SystemExit(f"unknown tool {tool!r}: one of {', '.join(TOOLS)}")


def implements(tool, eval_name, gradbench):
    """Whether the tool has the eval (GradBench's tools list theirs in `tools/T/evals.txt`)."""
    if tool == "jitad":
        from .inputs import FUNCTIONS
        return eval_name in FUNCTIONS
    if tool == "finite" and eval_name not in FINITE_EVALS:
        return False
    with open(os.path.join(gradbench, "tools", tool, "evals.txt")) as f:
        return eval_name in f.read().split()


def ensure_lstm_text(gradbench):
    """GradBench's lstm eval reads `evals/lstm/data/lstm_full.txt`; where the checkout lacks
    it (a partial mirror), write `inputs.synthetic_text` there. Returns whether it did."""
    path = os.path.join(gradbench, LSTM_TEXT)
    if os.path.exists(path):
        return False
    from .inputs import synthetic_text
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf8") as f:
        f.write(synthetic_text(20000))
    with open(path + ".synthetic", "w") as f:
        f.write("written by bench.gradbench.native: inputs.synthetic_text(20000)\n")
    return True


def serve_jax(gradbench):
    """GradBench's JAX tool (`python/gradbench/gradbench/tools/jax`, its modules unchanged)
    with two changes to its timing: each timed call blocks until its result is computed
    (`jax.block_until_ready`; JAX dispatches asynchronously on CPU too, so unblocked calls
    time the dispatch alone), and a first call, reported as `compile`, precedes the timed
    ones (GradBench's loop otherwise times the compilation as one of its runs). Not pinned
    to CPU 0 (its run.py's default) since every other tool here floats too."""
    import importlib
    import jax
    os.chdir(os.path.join(gradbench, "python", "gradbench", "gradbench", "tools", "jax"))
    sys.path[:0] = [os.getcwd(), os.path.join(gradbench, "python", "gradbench")]
    from gradbench import wrap
    timed = wrap.multiple_runs

    def blocking(**kw):
        return lambda f: timed(**kw)(lambda x: jax.block_until_ready(f(x)))
    wrap.multiple_runs = blocking
    for line in sys.stdin:
        message = json.loads(line)
        reply = {"id": message["id"]}
        try:
            if message["kind"] == "start":
                reply["tool"] = "jax"
            elif message["kind"] == "define":
                importlib.import_module(message["module"])
                reply["success"] = True
            elif message["kind"] == "evaluate":
                fn = getattr(importlib.import_module(message["module"]), message["function"]).wrapped
                first = fn(message["input"] | {"min_runs": 1, "min_seconds": 0})
                reply |= fn(message["input"])
                reply["timings"] = [{"name": "compile", "nanoseconds": first["timings"][0]["nanoseconds"]},
                                    *reply["timings"]]
        except Exception as e:   # the protocol reports failures in the response
            reply.update(success=False, error=f"{type(e).__name__}: {e}")
        print(json.dumps(reply), flush=True)


def serve(tool, gradbench):
    """A C++ tool on stdin/stdout: GradBench's cpp.py protocol, the binaries prebuilt."""
    if tool == "jax":
        return serve_jax(gradbench)
    os.chdir(gradbench)
    sys.path.insert(0, os.path.join(gradbench, "python", "gradbench"))
    from gradbench import cpp
    for line in sys.stdin:
        message = json.loads(line)
        reply = {"id": message["id"]}
        if message["kind"] == "start":
            reply["tool"] = tool
        elif message["kind"] == "define":
            binary = os.path.join("tools", tool, "bin", message["module"])
            with open(os.path.join("tools", tool, "evals.txt")) as f:
                known = message["module"] in f.read().split()
            reply["success"] = known and os.path.exists(binary)
            if not known:
                reply["error"] = f"GradBench's {tool} tool has no {message['module']}"
            elif not reply["success"]:
                reply["error"] = f"{binary} was not built (make gradbench-native)"
        elif message["kind"] == "evaluate":
            reply |= cpp.evaluate(tool=tool, module=message["module"], function=message["function"],
                                  input=message["input"])
        print(json.dumps(reply), flush=True)


def session(eval_name, eval_args, tool, gradbench, timeout, record=None):
    """One eval run with one tool: `{"ms": Σ, "messages": n, "invalid": [...], "failed": [...]}`;
    `record`, a file open for writing: each evaluate message as a JSON line (for `per_input --recorded`)."""
    env = os.environ | {"PYTHONPATH": os.path.join(gradbench, "python", "gradbench")}
    ev = subprocess.Popen([sys.executable, f"python/gradbench/gradbench/evals/{eval_name}/run.py", *eval_args],
                          cwd=gradbench, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    cmd, cwd = tool_command(tool, gradbench)
    # one thread for every tool: XLA's for the JAX tool, OpenBLAS's for jitad's matrix
    # products (its worker threads otherwise spin against the eval and the other load)
    tl_env = os.environ | {"PYTHONPATH": os.pathsep.join([ROOT, env["PYTHONPATH"]]), "JAX_PLATFORMS": "cpu",
                           "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
                           "OPENBLAS_NUM_THREADS": "1"}
    tl = subprocess.Popen(cmd, cwd=cwd, env=tl_env, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True)
    killed = threading.Event()
    timer = threading.Timer(timeout, lambda: (killed.set(), ev.kill(), tl.kill()))
    timer.start()
    evaluates, per_message, total, invalid, failed, validated = {}, [], 0.0, [], [], 0
    try:
        for line in ev.stdout:
            msg = json.loads(line)
            tl.stdin.write(line if line.endswith("\n") else line + "\n")
            tl.stdin.flush()
            reply_line = tl.stdout.readline()
            if not reply_line:
                failed.append(f"tool exited at message {msg['id']}")
                break
            reply = json.loads(reply_line)
            label = f"{msg.get('function')} {msg.get('description', '')}".strip()
            if msg["kind"] == "evaluate":
                evaluates[msg["id"]] = label
                if record:
                    record.write(line if line.endswith("\n") else line + "\n")
                if not reply.get("success"):
                    failed.append(f"{label}: {str(reply.get('error', ''))[-300:]}")
                else:
                    runs = [t["nanoseconds"] for t in reply.get("timings", []) if t["name"] == "evaluate"]
                    ms = statistics.median(runs) / 1e6 if runs else 0.0
                    per_message.append([label, ms])
                    total += ms
            elif msg["kind"] == "define" and not reply.get("success"):
                failed.append(f"define: {str(reply.get('error', ''))[-300:]}")
            elif msg["kind"] == "analysis":
                validated += 1
                if not msg.get("valid", True):
                    invalid.append(f"{evaluates.get(msg['of'])}: {str(msg.get('error', ''))[:300]}")
            ev.stdin.write(reply_line)
            ev.stdin.flush()
    except (BrokenPipeError, ValueError) as e:
        failed.append(f"pipe closed ({type(e).__name__})")
    finally:
        timer.cancel()
        for p in (ev, tl):
            try:
                p.stdin.close()
            except OSError:
                pass
        ev.wait(), tl.wait()
    if ev.returncode and not killed.is_set():
        failed.append(f"the eval exited with status {ev.returncode} (its stderr above)")
    if not evaluates and not failed:
        failed.append("the eval sent no evaluate message")
    if killed.is_set():
        failed.append(f"killed after {timeout} s")
    return {"ms": total, "messages": len(evaluates), "validated": validated, "per_message": per_message, "invalid": invalid, "failed": failed}


def _recorded_session(a, eval_name, args, tool, first):
    """`session`, its messages written to `--record`'s DIR/EVAL.jsonl when `first`."""
    if not (a.record and first):
        return session(eval_name, args, tool, a.gradbench, a.timeout)
    os.makedirs(a.record, exist_ok=True)
    with open(os.path.join(a.record, eval_name + ".jsonl"), "w") as record:
        return session(eval_name, args, tool, a.gradbench, a.timeout, record)


def cell(runs):
    if not runs:
        return "has none"
    bad = [r for r in runs if r["failed"] or r["invalid"]]
    if bad:
        r = bad[0]
        why = (r["failed"] or r["invalid"])[0]
        kind = "fails" if r["failed"] else "INVALID"
        return f"{kind}: {' '.join(why.split())[:120]}"
    ms = sorted(r["ms"] for r in runs)
    return f"{statistics.median(ms):,.1f} ({ms[0]:,.1f}–{ms[-1]:,.1f})"


def ok_ms(runs):
    """The median Σ of a tool's sessions, or None where any failed, was invalid or is absent."""
    if not runs or any(r["failed"] or r["invalid"] for r in runs):
        return None
    return statistics.median(r["ms"] for r in runs)


# GradBench's published nightly (2026-03-14, GitHub runners): the fastest tool per eval
NIGHTLY = {"det": "ad-hpp", "lse": "PyTorch", "llsq": "Enzyme", "ode": "manual (JAX among AD)", "kmeans": "JAX",
           "gmm": "JAX", "ba": "Enzyme", "ht": "manual", "lstm": "CoDiPack", "particle": "Enzyme",
           "saddle": "ad-hpp ≈ Enzyme"}


def table(evals, tools, results, loads, extra, synthetic=False):
    """The Markdown table: a column per tool, jitad over the fastest AD tool (manual counts
    except on ANALYTIC_MANUAL; [the same ratio repeat by repeat, min–max]; where manual is
    the fastest, also over the fastest other),
    the load average during the eval's sessions, and GradBench's nightly fastest."""
    head = ["eval (arguments)", *tools, "jitad / fastest AD tool", "load", "GradBench nightly's fastest"]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for e in evals:
        ms = {t: ok_ms(results[e][t]) for t in tools}
        others = {t: v for t, v in ms.items() if t != "jitad" and t not in NOT_AD and v is not None
                  and not (t == "manual" and e in ANALYTIC_MANUAL)}
        ratio = "—"
        if ms.get("jitad") is not None and others:
            best = min(others, key=others.get)
            ratio = f"**{ms['jitad'] / others[best]:.2f}×** {best}"
            per = sorted(a["ms"] / b["ms"] for a, b in zip(results[e]["jitad"], results[e][best]) if b["ms"])
            if len(per) > 1:   # repeat by repeat (the sessions ran minutes apart, under one load)
                ratio += f" [{per[0]:.2f}–{per[-1]:.2f}]"
            rest = {t: v for t, v in others.items() if t != "manual"}
            if best == "manual" and rest:
                second = min(rest, key=rest.get)
                ratio += f" ({ms['jitad'] / rest[second]:.2f}× {second})"
            elif e in ANALYTIC_MANUAL and ms.get("manual"):
                ratio += f" ({ms['jitad'] / ms['manual']:.2f}× manual¹)"
        ld = sorted(loads[e]) or [0.0]
        note = " (synthetic text)" if e == "lstm" and synthetic else ""
        lines.append(f"| {e}{note} {' '.join(extra.get(e, [])) or '(defaults)'} | " + " | ".join(cell(results[e][t]) for t in tools)
                     + f" | {ratio} | {ld[0]:.0f}–{ld[-1]:.0f} | {NIGHTLY.get(e, '')} |")
    return "\n".join(lines)


def _message_ms(runs):
    """{message index: (label, [ms of each session that timed it])} over a tool's valid sessions."""
    out = {}
    for r in runs:
        if r["failed"] or r["invalid"]:
            continue
        pairs = r["per_message"] if isinstance(r["per_message"], list) else list(r["per_message"].items())
        for i, (label, ms) in enumerate(pairs):
            out.setdefault(i, (label, []))[1].append(ms)
    return out


def per_message_table(evals, tools, results):
    """Markdown: one row per evaluate message (each input and function), the median ms of
    each tool over the repeats, and jitad over the fastest AD tool built here (manual
    counts except on ANALYTIC_MANUAL) and over JAX; a ratio over 1.5 against the fastest,
    or over 1 against JAX, is in bold."""
    shown = [t for t in tools if t not in NOT_AD]
    head = ["eval", "message", *[f"{t} ms" for t in shown], "fastest other", "jitad / fastest", "jitad / jax"]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for e in evals:
        per = {t: _message_ms(results[e].get(t, [])) for t in shown}
        for i, (label, _) in sorted(per.get("jitad", {}).items()):
            med = {t: statistics.median(per[t][i][1]) for t in shown if i in per[t] and per[t][i][0] == label}
            others = {t: v for t, v in med.items() if t != "jitad" and not (t == "manual" and e in ANALYTIC_MANUAL)}
            best = min(others, key=others.get) if others else None
            ratio = med["jitad"] / others[best] if best and others[best] else None
            vs_jax = med["jitad"] / med["jax"] if med.get("jax") else None
            cells = [f"{med[t]:,.3f}" if t in med else "—" for t in shown]
            lines.append("| " + " | ".join([e, label, *cells, best or "—", _flag(ratio, 1.5), _flag(vs_jax, 1.0)]) + " |")
    return "\n".join(lines)


def _flag(ratio, limit):
    if ratio is None:
        return "—"
    return f"**{ratio:.2f}**" if ratio > limit else f"{ratio:.2f}"


def report(a, evals, tools, results, loads, extra, synthetic, load, done, final):
    """The table so far (after each repeat, so that a cut-short run still leaves one) to
    `--out` (JSON) and, when `final`, stdout."""
    load_after = os.getloadavg()
    md = table(evals, tools, results, loads, extra, synthetic)
    md += (f"\n\nΣ ms over the eval's evaluate messages (median of each message's timings), median of "
           f"{done} interleaved repeats (min–max); --min-seconds {a.min_seconds}; load average "
           f"{load[0]:.1f} before, {load_after[0]:.1f} after, {os.cpu_count()} cores.")
    if a.per_message:
        md += "\n\n" + per_message_table(evals, tools, results)
    if final:
        print(md)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"results": results, "loads": loads, "load": [load, load_after], "args": vars(a),
                   "repeats_done": done, "table": md, "eval_args": extra,
                   "lstm_text": "synthetic" if synthetic else "GradBench's"}, f, indent=1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gradbench", default=os.path.join(ROOT, "build", "gradbench"), help="GradBench checkout")
    p.add_argument("--eval", action="append", choices=EVALS)
    p.add_argument("--tool", action="append", choices=TOOLS, help="default: all")
    p.add_argument("--table", action="store_true",
                   help="the inputs of bench/README.md's table (TABLE_ARGS; --eval-args overrides one eval's)")
    p.add_argument("--eval-args", action="append", default=[], metavar="EVAL=ARGS",
                   help='extra arguments of one eval, e.g. "det=-l 5 6 7 8 9 10"')
    p.add_argument("--min-seconds", type=float, default=0.1, help="each eval's --min-seconds")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--timeout", type=float, default=900.0, help="seconds a session may take")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "gradbench_native.json"))
    p.add_argument("--render", metavar="JSON", help="print the table of a saved run (--out of an earlier run)")
    p.add_argument("--per-message", action="store_true",
                   help="also a table per evaluate message (each input and function): every tool's median ms, "
                        "jitad over the fastest other AD tool and over JAX")
    p.add_argument("--record", metavar="DIR", help="write each eval's evaluate messages, as its first session "
                   "sent them, to DIR/EVAL.jsonl (the inputs of per_input --recorded)")
    p.add_argument("--serve", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.serve:
        return serve(a.serve, a.gradbench)
    if a.render:
        with open(a.render) as f:
            saved = json.load(f)
        args, res = saved["args"], saved["results"]
        extra = saved.get("eval_args") or dict(TABLE_ARGS) if args.get("table") else {}
        extra |= {k: v.split() for k, v in (s.split("=", 1) for s in args.get("eval_args", []))}
        tools = [t for t in TOOLS if t in next(iter(res.values()))]
        print(table(list(res), tools, res, saved["loads"], extra, saved.get("lstm_text") == "synthetic"))
        print(saved["table"].split("\n\n")[1] if "table" in saved else "")
        if a.per_message:
            print("\n" + per_message_table(list(res), tools, res))
        return 0
    evals, tools = a.eval or EVALS, a.tool or TOOLS
    extra = dict(TABLE_ARGS) if a.table else {}
    extra |= {k: v.split() for k, v in (s.split("=", 1) for s in a.eval_args)}
    synthetic = "lstm" in evals and (ensure_lstm_text(a.gradbench)
                                     or os.path.exists(os.path.join(a.gradbench, LSTM_TEXT + ".synthetic")))
    load = os.getloadavg()
    results = {e: {t: [] for t in tools} for e in evals}
    loads = {e: [] for e in evals}
    recorded = set()   # the evals whose messages --record wrote
    for rep in range(a.repeats):
        for e in evals:
            for t in tools:
                if not implements(t, e, a.gradbench):
                    continue
                args = ["--min-seconds", str(a.min_seconds)] + extra.get(e, [])
                loads[e].append(os.getloadavg()[0])
                start = time.perf_counter()
                r = _recorded_session(a, e, args, t, e not in recorded)
                recorded.add(e)
                r["wall_s"] = time.perf_counter() - start
                results[e][t].append(r)
                print(f"[{rep + 1}/{a.repeats}] {e} {t}: {r['ms']:.1f} ms over {r['messages']} messages, "
                      f"{r['validated']} validated, {r['wall_s']:.0f} s"
                      f"{' FAILED ' + r['failed'][0][:200] if r['failed'] else ''}"
                      f"{' INVALID ' + r['invalid'][0][:200] if r['invalid'] else ''}", file=sys.stderr, flush=True)
        report(a, evals, tools, results, loads, extra, synthetic, load, rep + 1, final=rep + 1 == a.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
