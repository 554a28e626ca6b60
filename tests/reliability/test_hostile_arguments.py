"""Hostile arguments, generated: every call of a compiled function ends in the value the
reference interpreter gives for the same program, or in a `JitadError` -- never in a
signal, a hang or another exception.

Hypothesis draws arrays of every dtype NumPy has (the ones jitad refuses included),
with strides that are negative, zero, larger than the element, unaligned, read-only or
Fortran-ordered, sizes 0 and sizes whose bytes overflow, numpy and Python scalars at
the edges of their ranges, and argument structures (tuples, lists, dicts, None) that
match the function or not. The examples run in a child process, so a crash fails the
test with the example that caused it instead of taking pytest down.
"""
import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent(r'''
    import sys, traceback
    import numpy as np
    from hypothesis import given, settings, strategies as st, HealthCheck
    import jitad
    from jitad.ir.interpret import interpret
    from jitad.pytree import flatten

    LAST = sys.argv[1]

    PROGRAMS = {   # name -> (function, number of arguments)
        "sum": (lambda x: jitad.sum(x * 2), 1),
        "elementwise": (lambda x: jitad.exp(x * 0.25) * 0.5 - x, 1),
        "broadcast": (lambda x, y: (x + y, x * y), 2),
        "mean0": (lambda x: jitad.mean(x, axis=0), 1),
        "gram": (lambda x: x @ x.T, 1),
        "first": (lambda x: x[0], 1),
        "staged_index": (lambda x, i: x[i] * 1.0, 2),
        "pytree": (lambda t: (t[0] * 2, t[1]["a"] - t[1]["b"]), 1),
        "reduce_pair": (lambda t: jitad.sum(t[0]) + jitad.sum(t[1]), 1),
        "grad": (jitad.grad(lambda x: jitad.sum(jitad.tanh(x) * x)), 1),
        "value_and_grad": (jitad.value_and_grad(lambda x, y: jitad.sum(x * y)), 2),
    }
    JITTED = {name: jitad.jit(fn) for name, (fn, _) in PROGRAMS.items()}

    DTYPES = ["float64", "float32", "float16", "int64", "int32", "int8", "uint8", "uint16",
              "uint64", "bool", "complex128", "object", "<U2", "datetime64[s]"]
    DIMS = st.sampled_from([0, 1, 2, 3, 5])

    @st.composite
    def arrays(draw):
        dtype = np.dtype(draw(st.sampled_from(DTYPES)))
        shape = tuple(draw(st.lists(DIMS, min_size=0, max_size=3)))
        kind = draw(st.sampled_from(["plain", "strided", "reversed", "transposed", "fortran",
                                     "unaligned", "readonly", "broadcast", "huge", "oddbool"]))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        def fill(shp, dt):
            size = int(np.prod(shp))
            if dt.kind == "f":
                values = rng.normal(size=size) * draw(st.sampled_from([1.0, 1e-300, 1e300]))
                if size and draw(st.booleans()):
                    values[0] = draw(st.sampled_from([np.nan, np.inf, -np.inf, -0.0]))
            elif dt.kind in "iu":
                values = rng.integers(0, 100, size=size)
            elif dt.kind == "b":
                values = rng.integers(0, 2, size=size)
            elif dt.kind == "c":
                values = rng.normal(size=size) + 1j
            elif dt.kind == "M":
                values = np.arange(size)
            else:
                values = np.array(["ab"] * size, dtype=object)
            return np.asarray(values).astype(dt).reshape(shp)
        if kind == "strided":
            return fill(tuple(2 * d for d in shape), dtype)[tuple(slice(None, None, 2) for _ in shape)]
        if kind == "reversed":
            return fill(shape, dtype)[tuple(slice(None, None, -1) for _ in shape)]
        if kind == "transposed":
            return fill(shape[::-1], dtype).T
        if kind == "fortran":
            return np.asfortranarray(fill(shape, dtype))
        if kind == "unaligned" and dtype.kind in "fiu" and dtype.itemsize > 1:
            a = fill(shape, dtype)
            buf = np.zeros(a.nbytes + 1, np.uint8)
            out = np.frombuffer(buf.data, dtype=dtype, count=a.size, offset=1).reshape(shape)
            out[...] = a
            return out
        if kind == "readonly":
            a = fill(shape, dtype)
            a.flags.writeable = False
            return a
        if kind == "broadcast":
            return np.broadcast_to(fill((1,) * len(shape), dtype), shape)
        if kind == "huge":   # a zero-stride view whose copy would need 2^45 elements
            return np.broadcast_to(fill((1,), dtype), (2**45,))
        if kind == "oddbool" and shape:   # bool bytes other than 0 and 1
            return rng.integers(0, 256, size=shape).astype(np.uint8).view(bool)
        return fill(shape, dtype)

    SCALARS = st.one_of(
        st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**70, 2**70), st.booleans(),
        st.sampled_from([np.float32(1.5), np.float16(2), np.int32(-3), np.uint64(2**64 - 1),
                         np.int64(-2**63), np.bool_(True), 1j, None, "s", b"b", object()]))
    LEAVES = st.one_of(arrays(), SCALARS)
    ARGUMENTS = st.recursive(LEAVES, lambda inner: st.one_of(
        st.tuples(inner, inner), st.lists(inner, max_size=3),
        st.fixed_dictionaries({"a": inner, "b": inner})), max_leaves=4)

    def real_leaves(tree):
        """The leaves as a trace sees them: a complex leaf is its real and imaginary parts."""
        out = []
        for x in flatten(tree)[0]:
            if np.iscomplexobj(x) and not isinstance(x, (str, bytes)):
                out += [np.real(x), np.imag(x)]
            else:
                out.append(x)
        return out

    def reference(name, args):
        """The interpreter's result for the traced program, or the JitadError tracing raises."""
        fn = PROGRAMS[name][0]
        program = jitad.trace(fn, *args)
        leaves = [x.view(np.uint8) != 0 if isinstance(x, np.ndarray) and x.dtype == bool else x
                  for x in real_leaves(args)]
        return interpret(program, leaves)

    def same(got, want, rtol):
        got_leaves = real_leaves(got)
        if len(got_leaves) != len(want):
            return False
        for g, w in zip(got_leaves, want):
            g, w = np.asarray(g), np.asarray(w)
            if g.shape != w.shape:
                return False
            if w.dtype.kind == "f" or g.dtype.kind == "f":
                if not np.allclose(g.astype(float), w.astype(float), rtol=rtol, atol=1e-300,
                                   equal_nan=True):
                    return False
            elif not np.array_equal(g, w):
                return False
        return True

    @settings(max_examples=int(sys.argv[2]), deadline=None, database=None,
              derandomize=sys.argv[3] == "fixed", suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(sorted(PROGRAMS)), st.lists(ARGUMENTS, min_size=1, max_size=2))
    def run(name, args):
        with open(LAST, "w") as f:
            f.write(f"{name} {args!r}"[:4000])
        try:
            got = JITTED[name](*args)
        except jitad.JitadError:
            return
        except (TypeError, IndexError, KeyError, AttributeError) as e:
            if traceback.extract_tb(e.__traceback__)[-1].filename != __file__:
                raise   # raised inside jitad or NumPy: an internal error
            return      # the user's own Python on the wrong structure (None * 2, t[1]["a"])
        try:
            want = reference(name, args)
        except jitad.JitadError:
            raise AssertionError(f"compiled code ran where tracing refuses: {name} {args!r}")
        low = any(isinstance(x, np.ndarray) and x.dtype.itemsize < 8 for x in flatten(args)[0])
        assert same(got, want, 1e-5 if low else 1e-12), \
            f"{name}{tuple(args)!r}: compiled {got!r}, interpreter {want!r}"

    run()
    print("fuzz done")
''')


@pytest.mark.llvm
@pytest.mark.slow
def test_hostile_arguments_end_in_a_value_or_a_jitad_error(tmp_path):
    script, last = tmp_path / "fuzz.py", tmp_path / "last_example.txt"
    script.write_text(CHILD)
    examples = os.environ.get("JITAD_FUZZ_EXAMPLES", "150")
    seeds = "random" if os.environ.get("JITAD_HYPOTHESIS_RANDOM") else "fixed"
    proc = subprocess.run([sys.executable, str(script), str(last), examples, seeds], capture_output=True,
                          text=True, timeout=600)
    tail = (proc.stdout + proc.stderr)[-4000:]
    crashed_on = last.read_text() if last.exists() else "(none)"
    assert proc.returncode == 0 and "fuzz done" in proc.stdout, \
        f"exit {proc.returncode}; last example: {crashed_on}\n{tail}"
