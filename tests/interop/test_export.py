"""`jitad.export`: C programs compiled with `cc` call the exported value and gradient in
a process without Python, from several threads at once, and agree with jitad in Python."""
import importlib
import os
import shutil
import subprocess

import numpy as np
import pytest

import jitad
from jitad import FUN, IF, WHILE

pytestmark = pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on this machine")
export_module = importlib.import_module("jitad.export")   # (`jitad.export` is the function)
RNG = np.random.default_rng(3)


@FUN(out=0.0)
def _power_sum(x, n):   # recursion
    return IF(n <= 0, lambda: 1.0, lambda: _power_sum(x, n - 1) * x + 1.0)


def _mlp(params, x):   # products above jitad's BLAS threshold
    w1, w2 = params
    h = jitad.tanh(x @ w1 + 0.1)
    return jitad.sum(jitad.log_softmax(h @ w2) ** 2) / x.shape[0]


PROGRAMS = {
    "halving": (lambda x, k: WHILE(lambda t: t > 1.0, lambda t: t * k + jitad.sin(t) * 0.01, x), (1e6, 0.5), (0, 1)),
    "powers": (lambda x, n: _power_sum(x, n), (0.7, 20), 0),
    "mlp": (_mlp, ((RNG.normal(size=(64, 48)) * 0.1, RNG.normal(size=(48, 10)) * 0.1), RNG.normal(size=(32, 64))), 0),
}

C_MAIN = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "NAME.h"

#define N_IN NIN
#define N_OUT NOUT
static const long in_sizes[] = {IN_SIZES}, out_sizes[] = {OUT_SIZES};
static void *ins[N_IN];
static double results[THREADS][N_OUT][MAXOUT];
static int codes[THREADS];

static void *worker(void *arg) {
    long t = (long)arg;
    void *outs[N_OUT];
    for (int j = 0; j < N_OUT; j++) outs[j] = results[t][j];
    for (int rep = 0; rep < 50 && !codes[t]; rep++) codes[t] = NAME_grad((const void *const *)ins, outs);
    return NULL;
}

int main(void) {
    FILE *f = fopen("inputs.bin", "rb");
    for (int i = 0; i < N_IN; i++) {
        ins[i] = malloc(in_sizes[i]);
        if (fread(ins[i], 1, in_sizes[i], f) != (size_t)in_sizes[i]) return 3;
    }
    fclose(f);
    double value;
    void *value_out[1] = {&value};
    int code = NAME((const void *const *)ins, value_out);
    if (code) { printf("error %d: %s\n", code, NAME_error(code)); return 1; }
    printf("value %.17g\n", value);
    pthread_t threads[THREADS];
    for (long t = 0; t < THREADS; t++) pthread_create(&threads[t], NULL, worker, (void *)t);
    for (long t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
    for (long t = 0; t < THREADS; t++) {
        if (codes[t]) { printf("error %d: %s\n", codes[t], NAME_error(codes[t])); return 1; }
        if (memcmp(results[t], results[0], sizeof results[0])) { printf("threads disagree\n"); return 2; }
    }
    for (int j = 0; j < N_OUT; j++) {
        printf("out%d", j);
        for (long e = 0; e < out_sizes[j] / 8; e++) printf(" %.17g", results[0][j][e]);
        printf("\n");
    }
    return 0;
}
"""


def _c_program(tmp, name, ex, args):
    leaves = jitad.tree_leaves(args)
    with open(tmp / "inputs.bin", "wb") as f:
        for x, leaf in zip(leaves, ex.inputs):
            f.write(np.ascontiguousarray(x, dtype={"f64": np.float64, "i64": np.int64}[leaf.dtype]).tobytes())
    size = lambda leaf: 8 * int(np.prod(leaf.shape))
    src = C_MAIN.replace("NAME", name).replace("NIN", str(len(ex.inputs))).replace("NOUT", str(len(ex.grad_outputs)))
    src = src.replace("IN_SIZES", ", ".join(str(size(l)) for l in ex.inputs))
    src = src.replace("OUT_SIZES", ", ".join(str(size(l)) for l in ex.grad_outputs))
    src = src.replace("MAXOUT", str(max(size(l) for l in ex.grad_outputs) // 8)).replace("THREADS", "4")
    (tmp / "main.c").write_text(src)
    lib_dir = os.path.dirname(ex.library)
    subprocess.run(["cc", "-O1", "-o", str(tmp / "main"), str(tmp / "main.c"), f"-I{lib_dir}", f"-L{lib_dir}",
                    f"-l{name}", f"-Wl,-rpath,{lib_dir}", "-lpthread"], check=True)
    env = {"PATH": "/usr/bin:/bin"}   # no Python in sight: no PYTHONPATH, no venv
    out = subprocess.run([str(tmp / "main")], cwd=tmp, capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.split("\n")
    value = float(lines[0].split()[1])
    grads = [np.array([float(v) for v in line.split()[1:]]) for line in lines[1:] if line.startswith("out")]
    return value, grads


@pytest.mark.parametrize("case", PROGRAMS)
def test_a_c_program_calls_value_and_gradient_from_threads(tmp_path, case):
    f, args, argnums = PROGRAMS[case]
    ex = jitad.export(f, *args, path=str(tmp_path / "lib"), name=case, grad=True, argnums=argnums)
    needed = subprocess.run(["readelf", "-d", ex.library], capture_output=True, text=True).stdout
    assert "NEEDED" in needed and "python" not in needed.lower()
    value, outs = _c_program(tmp_path, case, ex, args)
    want_value, want_grads = jitad.value_and_grad(f, argnums=argnums)(*args)
    assert value == pytest.approx(want_value, rel=1e-13)
    np.testing.assert_allclose(outs[0], [want_value], rtol=1e-13)
    for got, want in zip(outs[1:], jitad.tree_leaves(want_grads)):
        np.testing.assert_allclose(got, np.ravel(want), rtol=1e-11, atol=1e-14)


def test_header_documents_inputs_outputs_and_errors(tmp_path):
    ex = jitad.export(lambda x, n: jitad.sum(x) * n, np.ones((2, 3)), 4, path=str(tmp_path), name="scaled", grad=True)
    header = open(ex.header).read()
    assert "in[0]: double[2][3] (float64, shape (2, 3))" in header
    assert "in[1]: one int64_t (int64, shape ())" in header
    assert "int scaled_grad(const void *const *in, void *const *out);" in header
    assert "undefined behaviour" in header and "const char *scaled_error(int code);" in header
    np.testing.assert_allclose(ex.call(np.ones((2, 3)), 4, grad=True)[1], np.full((2, 3), 4.0))


def test_runtime_errors_come_back_as_codes(tmp_path):
    @FUN(out=0.0)
    def deep(x, n):
        return IF(n <= 0, lambda: x, lambda: deep(x, n - 1) + 1.0)
    ex = jitad.export(lambda x, n: deep(x, n), 0.0, 3, path=str(tmp_path), name="deep")
    assert float(ex.call(0.0, 10)[0]) == 10.0
    with pytest.raises(RuntimeError, match="stack ran out"):
        ex.call(0.0, 10 ** 9)


def test_what_cannot_be_exported(tmp_path):
    def printing(x):
        jitad.debug.print("x = {}", x)
        return x * 2
    with pytest.raises(jitad.ExportError, match="debug.print"):
        jitad.export(printing, 1.0, path=str(tmp_path), name="printing")
    with pytest.raises(jitad.ExportError, match="Forest"):
        jitad.export(lambda w, f: jitad.sum(jitad.vmap(lambda w, t: jitad.TREE(t, w, lambda n, l, r: l + r),
                                                       in_axes=(None, 0))(w, f)),
                     1.0, jitad.Forest([jitad.Tree.random(3, seed=0)]), path=str(tmp_path), name="forest")
    for bad in ("int", "2fast", "a-b", 3):
        with pytest.raises(jitad.ArgumentError, match="C identifier"):
            jitad.export(lambda x: x, 1.0, path=str(tmp_path), name=bad)


def test_linear_algebra_links_the_system_lapack(tmp_path):
    def f(a, b):
        spd = a @ a.T + 3.0 * jitad.eye(4)
        x = jitad.linalg.solve(spd, b)
        return jitad.sum(x * x) + jitad.linalg.slogdet(spd)[1] + jitad.sum(jitad.linalg.cholesky(spd))
    args = (RNG.normal(size=(4, 4)), RNG.normal(size=4))
    ex = jitad.export(f, *args, path=str(tmp_path), name="linalg", grad=True, argnums=(0, 1))
    assert "liblapack" in open(ex.header).read()
    value, ga, gb = ex.call(*args, grad=True)
    want, (wa, wb) = jitad.value_and_grad(f, argnums=(0, 1))(*args)
    np.testing.assert_allclose(value, want, rtol=1e-12)
    np.testing.assert_allclose(ga, wa, rtol=1e-10)
    np.testing.assert_allclose(gb, wb, rtol=1e-10)


def test_one_library_serves_every_tree(tmp_path):
    f = lambda x, t: jitad.TREE(t, x, lambda node, l, r: jitad.tanh(l * r + node.value * x))
    ex = jitad.export(f, 0.5, jitad.Tree.random(9, seed=1, value=np.linspace(0.1, 0.9, 9)), path=str(tmp_path),
                      name="treefold", grad=True)
    assert "struct treefold_tree_1 {" in open(ex.header).read()
    for tree in (jitad.Tree.random(40, seed=5, value=np.linspace(-1, 1, 40)), jitad.Tree.from_nested((1.0, None, None)),
                 jitad.Tree([], [], value=np.zeros(0))):
        value, grad = ex.call(0.5, tree, grad=True)
        want = jitad.value_and_grad(f)(0.5, tree)
        np.testing.assert_allclose([value, grad], want, rtol=1e-12)
    lib = ex.load()   # a cycle and an index out of range: error codes, not a crash
    import ctypes
    for left, right in (([1, 0], [-1, -1]), ([5, -1], [-1, -1])):
        arrays = [np.array(left), np.array(right), np.zeros(2)]
        tree = np.array([2, 0] + [a.ctypes.data for a in arrays], dtype=np.int64)
        x, out = np.array(0.5), np.zeros(1)
        ins = (ctypes.c_void_p * 2)(x.ctypes.data, tree.ctypes.data)
        code = lib.treefold(ins, (ctypes.c_void_p * 1)(out.ctypes.data))
        assert "not a tree" in lib.treefold_error(code).decode()


def test_the_export_example_trains_on_in_c(tmp_path):
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples", "export_c")
    out = subprocess.run(["make", "-s", "-C", here, f"PY={os.sys.executable}", "clean", "run"], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    losses = [float(line.split()[-1]) for line in out.stdout.splitlines() if line.startswith("C: step")]
    assert len(losses) == 5 and losses[-1] < losses[0] / 2


def test_sorting_exports_with_jitads_own_sort(tmp_path):
    f = lambda x: jitad.sum(jitad.sort(x) * np.arange(5.0)) + jitad.sum(jitad.argsort(x) * x)
    ex = jitad.export(f, np.ones(5), path=str(tmp_path), name="ranked", grad=True)
    for x in (RNG.normal(size=5), np.array([3.0, np.nan, -1.0, 2.0, 2.0])):
        got = ex.call(x, grad=True)
        want = jitad.value_and_grad(f)(x)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-13)


def test_checkpointed_loops_export(tmp_path):
    f = lambda x, n: jitad.sum(WHILE(lambda s: s[1] < n, lambda s: (jitad.sin(s[0]) * 1.01, s[1] + 1), (x, 0),
                                     checkpoints=3)[0])
    ex = jitad.export(f, np.ones(4), 5, path=str(tmp_path), name="ckpt", grad=True)
    x = RNG.normal(size=4)
    for n in (0, 7, 100):
        got = ex.call(x, n, grad=True)
        want = jitad.value_and_grad(f)(x, n)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-12)


def _needed(library):
    """The shared libraries `library` names (readelf's NEEDED entries)."""
    listing = subprocess.run(["readelf", "-d", library], capture_output=True, text=True).stdout
    return [line.split("[")[1].rstrip("]") for line in listing.splitlines() if "(NEEDED)" in line]


def _blas_mlp_args(dtype=np.float64):
    """`_mlp`'s arguments with w1 past the register tiles' budget for a right operand (256 KiB)
    and the first layer's products' results past their budget for a result (512 KiB: jitad's
    own tiles take the smaller products, a transposed left operand too), so that the product
    and its cotangents need BLAS."""
    rng = np.random.default_rng(7)
    w1, w2, x = rng.normal(size=(256, 300)) * 0.05, rng.normal(size=(300, 10)) * 0.1, rng.normal(size=(640, 256))
    return (w1.astype(dtype), w2.astype(dtype)), x.astype(dtype)


@pytest.mark.skipif(export_module._system_blas() is None, reason="no BLAS library to link on this machine")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_products_call_the_system_blas(tmp_path, dtype):
    (w1, w2), x = _blas_mlp_args(dtype)
    ex = jitad.export(_mlp, (w1, w2), x, path=str(tmp_path), name="blas_mlp", grad=True)
    blas = export_module._system_blas()
    assert any(lib.startswith(f"lib{blas}.so") for lib in _needed(ex.library))
    assert f"call the system's BLAS (lib{blas}.so: {'d' if dtype == np.float64 else 's'}gemm_)" in open(ex.header).read()
    got = ex.call((w1, w2), x, grad=True)
    want = jitad.tree_leaves(jitad.value_and_grad(_mlp)((w1, w2), x))
    tol = 1e-12 if dtype == np.float64 else 2e-5
    for g, w in zip(got, want):
        assert g.dtype == dtype
        # (float32: the two BLAS builds sum in other orders; entries that cancel are judged by the largest)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * np.abs(w).max())


def test_without_a_blas_products_run_jitads_own_kernels(tmp_path, monkeypatch):
    monkeypatch.setattr(export_module, "BLAS_LIBRARIES", ("jitad_no_such_blas", "m"))
    assert export_module._system_blas.__wrapped__() is None   # one not found, one (libm) without dgemm_
    monkeypatch.setattr(export_module, "_system_blas", lambda cc=None: None)
    f, args = _mlp, _blas_mlp_args()
    with pytest.warns(jitad.JitadWarning, match="no BLAS library found"):
        ex = jitad.export(f, *args, path=str(tmp_path), name="own_mlp", grad=True)
    assert not any("blas" in lib for lib in _needed(ex.library))
    assert "No BLAS was found" in open(ex.header).read()
    for g, w in zip(ex.call(*args, grad=True), jitad.tree_leaves(jitad.value_and_grad(f)(*args))):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-15)


def test_loop_weight_gradients_export(tmp_path):
    W = RNG.normal(size=(6, 6)) * 0.4

    def rnn(w, h0, xs):   # a FOR over steps: the weight's gradient is batched after the loop
        return jitad.sum(jitad.FOR(0, xs.shape[0], lambda t, h: jitad.tanh(w @ h + xs[t]), h0) ** 2)
    args = (W, RNG.normal(size=6), RNG.normal(size=(12, 6)))
    ex = jitad.export(rnn, *args, path=str(tmp_path), name="rnn", grad=True)
    got = ex.call(*args, grad=True)
    want = jitad.value_and_grad(rnn)(*args)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
