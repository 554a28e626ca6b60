"""`jitad.export` at its edges: names the C library owns, NULL pointers, threads with
small stacks, and stopping a call from outside (`<name>_set_stop`)."""
import ctypes
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jitad
from jitad import FUN, IF, WHILE

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on this machine")


@pytest.mark.parametrize("name", ["malloc", "free", "pthread_once", "printf", "sin", "_Exit_now", "__x"])
def test_names_of_the_c_library_are_refused_up_front(tmp_path, name):
    with pytest.raises(jitad.ArgumentError, match="choose another name") as e:
        jitad.export(lambda x: x * 2.0, 1.0, path=str(tmp_path), name=name)
    assert "cc" not in str(e.value) and "error:" not in str(e.value)   # no compiler output
    assert not list(tmp_path.iterdir())   # refused before anything was written


def test_a_clash_is_refused_with_grad_and_a_prefix_fixes_it(tmp_path):
    with pytest.raises(jitad.ArgumentError, match="memset"):
        jitad.export(lambda x: x, 1.0, path=str(tmp_path), name="memset", grad=True)
    assert jitad.export(lambda x: x * 2.0, 1.0, path=str(tmp_path), name="my_malloc").call(2.0)[0] == 4.0


def _pointers(arrays):
    return (ctypes.c_void_p * len(arrays))(*[a.ctypes.data if a is not None else None for a in arrays])


NULL_CALLS = r"""
import ctypes, sys
import numpy as np
lib = ctypes.CDLL(sys.argv[1])
lib.nulls_error.restype = ctypes.c_char_p
def pointers(arrays):
    return (ctypes.c_void_p * len(arrays))(*[a.ctypes.data if a is not None else None for a in arrays])
x, y, o1, o2 = np.arange(3.0), np.array(2.0), np.zeros(3), np.zeros(())
for ins, outs in [(None, pointers([o1, o2])), (pointers([x, y]), None), (pointers([x, None]), pointers([o1, o2])),
                  (pointers([x, y]), pointers([None, o2]))]:
    print(lib.nulls(ins, outs), lib.nulls_error(-1).decode())
print(lib.nulls(pointers([x, y]), pointers([o1, o2])), o1.tolist(), float(o2))
"""


def test_null_pointers_return_an_error_code(tmp_path):
    ex = jitad.export(lambda x, y: (x * y, jitad.sum(x)), np.ones(3), 2.0, path=str(tmp_path), name="nulls")
    assert "NULL" in open(ex.header).read()
    done = subprocess.run([sys.executable, "-c", NULL_CALLS, ex.library], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]   # (a crash before)
    lines = done.stdout.strip().split("\n")
    assert len(lines) == 5
    for line in lines[:4]:
        assert line.startswith("-1 ") and "NULL pointer" in line, line
    assert lines[4] == "0 [0.0, 2.0, 4.0] 3.0"


def test_set_stop_stops_a_running_call(tmp_path):
    ex = jitad.export(lambda x: WHILE(lambda s: s < x, lambda s: s + 1.0, 0.0), 1.0, path=str(tmp_path), name="count")
    assert "count_set_stop" in open(ex.header).read()
    lib = ex.load()
    word = ctypes.c_int64(1)
    lib.count_set_stop(ctypes.byref(word))
    x, out = np.array(np.inf), np.zeros(())   # never ends unless stopped
    assert lib.count(_pointers([x]), _pointers([out])) == 4
    assert b"stopped" in lib.count_error(4)
    word.value = 0
    x = np.array(1e5)
    assert lib.count(_pointers([x]), _pointers([out])) == 0 and out == 1e5
    lib.count_set_stop(None)
    assert lib.count(_pointers([x]), _pointers([out])) == 0


C_THREADS = r"""
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include "deep.h"
static long depth; static int code; static double result;
static void *run(void *arg) {
    double x = 0.5; int64_t n = depth; const void *in[2] = {&x, &n}; void *out[1] = {&result};
    code = deep((const void *const *)in, out);
    return NULL;
}
int main(void) {
    long kib[] = {16, 64, 128, 512}, depths[] = {50, 1000000000};
    for (int i = 0; i < 4; i++) for (int j = 0; j < 2; j++) {
        pthread_attr_t a; pthread_t t;
        pthread_attr_init(&a);
        pthread_attr_setstacksize(&a, kib[i] << 10);
        depth = depths[j];
        if (pthread_create(&t, &a, run, NULL)) return 2;
        pthread_join(t, NULL);
        printf("%ld %ld %d %.17g\n", kib[i], depths[j], code, result);
    }
    return 0;
}
"""


def test_small_thread_stacks_run_modest_recursions(tmp_path):
    @FUN(out=0.0)
    def deep(x, n):
        return IF(n <= 0, lambda: x, lambda: jitad.sin(deep(x, n - 1)) + 1.0)
    jitad.export(lambda x, n: deep(x, n), 0.0, 3, path=str(tmp_path), name="deep")
    (tmp_path / "main.c").write_text(textwrap.dedent(C_THREADS))
    subprocess.run(["cc", "-O1", "-o", "main", "main.c", "-I.", "-L.", "-ldeep", f"-Wl,-rpath,{tmp_path}",
                    "-lpthread"], cwd=tmp_path, check=True)
    done = subprocess.run([str(tmp_path / "main")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr   # no crash, even where the recursion cannot fit
    want = 0.5
    for _ in range(50):
        want = np.sin(want) + 1.0
    for line in done.stdout.split("\n")[:-1]:
        kib, depth, code, result = line.split()
        if depth == "50":   # 50 levels fit in every stack here, 16 KiB included
            assert code == "0" and abs(float(result) - want) < 1e-12, line
        else:
            assert code == "1", line   # "the stack ran out", as a code
