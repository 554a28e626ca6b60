"""Per-test CPU time (own + children), appended to $CPUTIME_LOG as each test ends: the
measure behind `tests/slow.txt` (CPU time, unlike wall time, barely moves with the machine's
load).

    CPUTIME_LOG=/tmp/cpu.log python -m pytest -n 2 -m "not slow" -p tests.cputime
    python -m tests.cputime /tmp/cpu.log > tests/slow.txt   # the tests over 1 s of CPU
"""
import os
import resource
import time

import pytest


def _cpu():
    own = time.process_time()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    c0, w0 = _cpu(), time.perf_counter()
    yield
    c1, w1 = _cpu(), time.perf_counter()
    with open(os.environ["CPUTIME_LOG"], "a") as f:
        f.write(f"{c1 - c0:.3f}\t{w1 - w0:.3f}\t{item.nodeid}\n")


ALWAYS = ("tests/architecture/", "tests/docs/test_lint.py")   # the checks of the code's shape stay in make test


def slow_list(log, limit=1.0):
    """The tests of `log` over `limit` seconds of CPU, but the cheapest test of each file
    (so `make test` still runs every file)."""
    rows = [line.rstrip("\n").split("\t") for line in open(log)]
    cheapest = {}
    for cpu, _, node in rows:
        path = node.split("::")[0]
        if path not in cheapest or float(cpu) < cheapest[path][0]:
            cheapest[path] = (float(cpu), node)
    keep = {node for _, node in cheapest.values()}
    return sorted(node for cpu, _, node in rows
                  if float(cpu) > limit and node not in keep and not node.startswith(ALWAYS))



if __name__ == "__main__":
    import sys
    print("# tests over 1 s of CPU in a measured run of make test (tests/cputime.py); conftest marks them slow")
    print("\n".join(slow_list(sys.argv[1])))
